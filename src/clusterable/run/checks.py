"""The keys no constructor sees, checked before anything is built: which top-level keys exist, their types and
ranges. The config group nodes (``dataset``, ``model``, ``loss``, ...) are checked against their targets'
signatures when they are built (``config.build``)."""

from __future__ import annotations

import difflib
from typing import Any, Literal

from omegaconf import DictConfig, OmegaConf

from clusterable import budgets, domains
from clusterable.config import ConfigError, check_evaluator_group, check_node, check_value
from clusterable.contracts import EVALUATOR_ARGS
from clusterable.metric_names import monitor_direction

# The framework's arguments to the parts it calls later (a partial optimizer gets the parameters, a scheduler the
# optimizer and the number of steps).
OPTIMIZER_CALL = ("params",)
SCHEDULER_CALL = ("optimizer", "total_steps")
# Config groups: nodes checked against their `_target_`'s signature when built.
GROUPS = ("dataset", "model", "loss", "optimizer", "scheduler", "evaluator", "trainer", "logger", "callbacks")
# The top-level keys no constructor sees, with their types.
TOP_LEVEL = {
    "seed": int,
    "name": str,
    "mode": str,
    "eval_stages": list[str],
    "optimized_metric": str | list[str] | None,
    "divergence_limit": float,
    "torch_threads": int | None,
    "optimizer_steps": Literal["per_batch", "per_sample"],
    "weight_decay_on": Literal["all", "matrices"],
    "validation_evaluators": list[str],
    "channels_last": bool,
    "trainable": Literal["all", "embedding_layer"],
    "save_representations": Literal["float16", "float32", "none"],
    "tuned_lambda_fallback": bool,
    "tuned_lambda_from": str | None,
    "tuned_lambda_partial": bool | None,
    "checkpoint.monitor": str | None,
    "checkpoint.mode": Literal["min", "max"],
    "checkpoint.rule": Literal["boudiaf"] | None,
    "paths.data_dir": str,
    "paths.output_dir": str,
    # A paper's own settings (sub-batch sizes, step counts, a table's row label, ...), read by its configs and tables.
    "protocol": dict[str, Any],
}


def check_monitor_mode(cfg: DictConfig) -> None:
    """``checkpoint.mode`` must be the way ``checkpoint.monitor`` improves, refused in one line otherwise: unknown
    (``${monitor_mode:...}`` found no direction and none was set) or the opposite of the metric's (``max`` of a
    loss keeps its worst epoch: before, ``checkpoint.monitor=val/loss`` kept ``mode: max`` and tested epoch 0)."""
    monitor, mode = cfg.checkpoint.get("monitor"), cfg.checkpoint.get("mode")
    if not isinstance(monitor, str):
        return  # null: the last epoch is tested (the mode is not used); another type is refused by its check
    direction = monitor_direction(monitor)
    if mode is None and direction is None:  # a null set by hand for a known metric is the type check's
        raise ConfigError(
            f"checkpoint.mode: which way checkpoint.monitor={monitor} improves is not known (it is not "
            "a loss, an accuracy, a recall, an NMI, ...); set checkpoint.mode=max or "
            "checkpoint.mode=min"
        )
    # A value other than min and max is the type check's to refuse.
    if direction is not None and mode in ("min", "max") and mode != direction:
        kind = "minimised" if direction == "min" else "maximised"
        raise ConfigError(
            f"checkpoint.mode={mode} with checkpoint.monitor={monitor}, which is {kind}: the "
            f"checkpoint would keep its worst epoch; set checkpoint.mode={direction}, or leave "
            "checkpoint.mode out (it follows the monitor)"
        )


def top_level_keys() -> list[str]:
    """Every key the top level of a run's config may hold."""
    return sorted({*GROUPS, *(key.split(".")[0] for key in TOP_LEVEL)})


def check_config(cfg: DictConfig, mode: str) -> None:
    """Refuse, in one line, an unknown top-level key or a bad value of the keys no constructor sees; ``mode`` is
    the one derived from the run (data source, debug group, limits), which the config may not set otherwise."""
    accepted = top_level_keys()
    for key in cfg:
        if key not in accepted:
            close = difflib.get_close_matches(str(key), accepted, n=1)
            hint = f" (did you mean {close[0]}?)" if close else ""
            raise ConfigError(f"{key} is not a top-level key of the config{hint}; accepted: {', '.join(accepted)}")
    # Before the types: a monitor of unknown direction resolves checkpoint.mode to null, which they would refuse.
    check_monitor_mode(cfg)
    for key, hint in TOP_LEVEL.items():
        check_value(key, _select(cfg, key), hint)
    if cfg.mode != mode:
        raise ConfigError(
            f"mode is derived from the run (data source, debug group, limits): {mode}, not {cfg.mode}; do not set it"
        )
    if not 0 <= cfg.seed < 2**32:
        raise ConfigError(f"seed must be an integer in [0, 2^32), got {cfg.seed}")
    if not cfg.divergence_limit > 0:
        raise ConfigError(f"divergence_limit must be > 0, got {cfg.divergence_limit}")
    check_node(cfg.optimizer, "optimizer", provided=OPTIMIZER_CALL)
    # What the run hands on (the optimizer's, the scheduler's, the Trainer's, the loggers', a metric-learning
    # loss's arguments, the thread counts): the domain table's. DomainCheck refused it before Hydra made a folder
    # for a run of train.py; this finds what reached the run another way (an Optuna trial's searched value).
    domains.check(cfg)
    max_epochs = cfg.trainer.get("max_epochs")  # absent, Lightning would train 1000 epochs
    if not (isinstance(max_epochs, int) and not isinstance(max_epochs, bool) and max_epochs >= 1):
        raise ConfigError(f"trainer.max_epochs must be an integer >= 1, got {max_epochs!r}")
    # protocol.budget (the sizes of COREL's Fashion-MNIST grid) must be what the run trains: BudgetCheck refused a
    # contradiction before Hydra made a folder for a run of train.py; this finds what reaches a run another way.
    budgets.check(cfg, mode)
    check_precision(cfg)
    if cfg.get("scheduler"):
        check_node(cfg.scheduler, "scheduler", provided=SCHEDULER_CALL)
    check_evaluator_group(cfg.get("evaluator"))
    for name, node in (cfg.get("callbacks") or {}).items():
        check_node(node, f"callbacks.{name}")
    for name, node in (cfg.get("evaluator") or {}).items():
        check_node(node, f"evaluator.{name}", provided=EVALUATOR_ARGS)
    configured = list(cfg.get("evaluator") or {})
    for name in cfg.validation_evaluators:
        if name not in configured:
            raise ConfigError(
                f"validation_evaluators: no evaluator named {name!r} in this run; it has: "
                f"{', '.join(configured) or 'none'}"
            )


def check_precision(cfg: DictConfig) -> None:
    """Refuse, in one line, a ``trainer.precision`` that Lightning accepts but that cannot train this run to the
    end: ``16-true`` with an optimizer whose ``eps`` is 0 in float16 (Adam's default 1e-8: its first step divides
    by zero and the loss is NaN at epoch 0), and ``transformer-engine*`` without NVIDIA's package. The half
    precisions that do train (``bf16-true``, ``16-true`` with a larger eps, the ``-mixed`` ones) are evaluated in
    float32 (``evaluation.runner.in_float32``)."""
    import importlib.util
    import inspect

    import torch

    from clusterable.config import target_of

    precision = str(cfg.trainer.get("precision", "32-true"))
    if precision.startswith("transformer-engine") and importlib.util.find_spec("transformer_engine") is None:
        raise ConfigError(
            f"trainer.precision={precision} needs NVIDIA's transformer_engine package (and a GPU), "
            "which is not installed; use bf16-mixed or bf16-true"
        )
    if precision != "16-true":
        return
    parameter = inspect.signature(target_of(cfg.optimizer, "optimizer")).parameters.get("eps")
    if parameter is None:
        return
    eps = cfg.optimizer.get("eps", parameter.default)
    if isinstance(eps, int | float) and eps > 0 and float(torch.tensor(eps, dtype=torch.float16)) == 0.0:
        key = "optimizer.eps" if "eps" in cfg.optimizer else "+optimizer.eps"
        raise ConfigError(
            f"trainer.precision=16-true keeps the optimizer's state in float16, where its eps={eps:g} "
            f"is 0: its first step divides by zero and the loss turns NaN; set {key}=1e-4 or use "
            "trainer.precision=bf16-true or bf16-mixed"
        )


def _select(cfg: DictConfig, key: str) -> Any:
    value = OmegaConf.select(cfg, key)
    return OmegaConf.to_container(value, resolve=True) if OmegaConf.is_config(value) else value
