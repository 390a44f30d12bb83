"""The Hydra entry point: check the config, build the parts, fit, test the best checkpoint, write metrics.json.

A run never ends in a traceback for a mistake in its input: every config, contract or data error becomes one
line (``error: loss.lam must be in [0, 1], got 1.5``), the cell is recorded ``failed`` and a sweep goes on to the
next cell; the exit status is non-zero when any run failed. Heavy imports (torch, Lightning) happen inside
``run`` so that ``python train.py --help`` stays fast.
"""

from __future__ import annotations

import inspect
import logging
import os
import re
import signal
import sys
import time
import traceback
import warnings
from pathlib import Path
from typing import Any, Literal

import hydra
from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode
from omegaconf import DictConfig, OmegaConf

from clusterable import hydra_callbacks, tuned_lambda
from clusterable.config import ConfigError, build, check_node, check_value, composition_error, target_of
from clusterable.contracts import ContractError
from clusterable.rundir import (
    clean_cell,
    config_changes,
    provenance,
    read_metrics,
    remove_if_empty,
    run_mode,
    write_metrics,
)

log = logging.getLogger("clusterable")
CONFIG_DIR = str(Path(__file__).resolve().parents[2] / "conf")
# The framework's arguments to the parts it builds (each gets those its signature takes) and calls.
EVALUATOR_CALL = ("embeddings", "labels", "context")
OPTIMIZER_CALL = ("params",)
SCHEDULER_CALL = ("optimizer", "total_steps")
# The top-level keys no constructor sees, with their types (the config group nodes are checked against their
# targets' signatures instead).
TOP_LEVEL = {
    "seed": int,
    "name": str,
    "eval_stages": list[str],
    "optimized_metric": str | None,
    "divergence_limit": float,
    "torch_threads": int | None,
    "optimizer_steps": Literal["per_batch", "per_sample"],
    "weight_decay_on": Literal["all", "matrices"],
    "validation_evaluators": list[str],
    "channels_last": bool,
    "trainable": Literal["all", "embedding_layer"],
    "tuned_lambda_fallback": bool,
    "checkpoint.monitor": str | None,
    "checkpoint.mode": Literal["min", "max"],
}


def _mode(*, _root_: DictConfig) -> str:
    """``${run_mode:}``: ``full`` or ``smoke`` from the composed config (``rundir.run_mode``). Sweep folders
    use it, so a debug or fake-data run never shares a cell with a full one."""
    if "hydra" in _root_:
        debug = _root_.hydra.runtime.choices.get("debug")
    else:  # in the job, Hydra has moved its node out of the config
        debug = HydraConfig.get().runtime.choices.get("debug") if HydraConfig.initialized() else None
    return run_mode(provenance(_root_, debug))


OmegaConf.register_new_resolver("run_mode", _mode, replace=True)


def _inception_arch() -> str:
    """``${inception_arch:}``: ``bninception`` when its ImageNet weight file is in torch's checkpoint cache, else
    ``googlenet`` (DSCL's Inception with BatchNorm, and the fallback we can load). The resolved config in
    metrics.json records which one ran."""
    from clusterable.models.backbones import weight_file  # torch only when a config asks

    return "bninception" if weight_file("bninception").is_file() else "googlenet"


OmegaConf.register_new_resolver("inception_arch", _inception_arch, replace=True)


def check_config(cfg: DictConfig) -> None:
    """The keys that no constructor sees, checked before any training: types, seeds, learning rate, epochs."""
    for key, hint in TOP_LEVEL.items():
        check_value(key, _select(cfg, key), hint)
    if not 0 <= cfg.seed < 2**32:
        raise ConfigError(f"seed must be an integer in [0, 2^32), got {cfg.seed}")
    if not cfg.divergence_limit > 0:
        raise ConfigError(f"divergence_limit must be > 0, got {cfg.divergence_limit}")
    if cfg.torch_threads is not None and cfg.torch_threads < 1:
        raise ConfigError(f"torch_threads must be >= 1 or null, got {cfg.torch_threads}")
    check_node(cfg.optimizer, "optimizer", provided=OPTIMIZER_CALL)
    if not cfg.optimizer.lr > 0:
        raise ConfigError(f"optimizer.lr must be > 0, got {cfg.optimizer.lr}")
    max_epochs = cfg.trainer.get("max_epochs")
    if not (isinstance(max_epochs, int) and not isinstance(max_epochs, bool) and max_epochs >= 1):
        raise ConfigError(f"trainer.max_epochs must be an integer >= 1, got {max_epochs!r}")
    if cfg.get("scheduler"):
        check_node(cfg.scheduler, "scheduler", provided=SCHEDULER_CALL)
    for name, node in (cfg.get("evaluator") or {}).items():
        check_node(node, f"evaluator.{name}", provided=EVALUATOR_CALL)
    configured = list(cfg.get("evaluator") or {})
    for name in cfg.validation_evaluators:
        if name not in configured:
            raise ConfigError(f"validation_evaluators: no evaluator named {name!r} in this run; it has: "
                              f"{', '.join(configured) or 'none'}")  # fmt: skip


def _select(cfg: DictConfig, key: str) -> Any:
    value = OmegaConf.select(cfg, key)
    return OmegaConf.to_container(value, resolve=True) if OmegaConf.is_config(value) else value


def _is_rank_zero() -> bool:
    from lightning.fabric.utilities.rank_zero import rank_zero_only

    return getattr(rank_zero_only, "rank", 0) == 0


def _torch_threads(cfg: DictConfig) -> int | None:
    """``torch_threads``, or, when local jobs run side by side (joblib launcher), the cores divided among them:
    OpenMP threads of parallel jobs contend badly on a small machine."""
    if cfg.torch_threads is not None:
        return int(cfg.torch_threads)
    launcher = HydraConfig.get().launcher
    if "joblib" not in str(launcher.get("_target_", "")):
        return None
    cores = os.cpu_count() or 1
    n_jobs = int(launcher.get("n_jobs") or -1)
    jobs = n_jobs if n_jobs > 0 else max(1, cores + 1 + n_jobs)
    return max(1, cores // jobs)


def run(cfg: DictConfig) -> dict[str, Any]:
    """Train and evaluate one configuration; returns the metrics.json payload (``status`` ``ok``, ``failed``, or
    ``diverged``: a head recognised the regime in which its loss is unbounded, a result kept like ``ok``).

    Only DDP rank 0 reuses or cleans the cell, evaluates, writes ``metrics.json`` and prints.
    """
    hc = HydraConfig.get()
    run_dir = Path(hc.runtime.output_dir)
    rank_zero = _is_rank_zero()
    debug = hc.runtime.choices.get("debug")
    prov = provenance(cfg, debug)
    payload: dict[str, Any] = {
        "status": "failed", "error": None, "overrides": list(hc.overrides.task), "seed": cfg.get("seed"),
        "experiment": cfg.get("name"), "mode": run_mode(prov), "provenance": prov, "metrics": {},
        "best_epoch": None, "timing": {},
    }  # fmt: skip
    try:
        payload["config"] = OmegaConf.to_container(cfg, resolve=True)
    except Exception as e:  # a broken interpolation in an experiment file: a config error like any other
        payload["config"] = OmegaConf.to_container(cfg, resolve=False)
        return _finish(run_dir, hc, payload, f"config: {e}".splitlines()[0], rank_zero)

    if rank_zero:
        previous = read_metrics(run_dir)
        if previous is not None and previous.get("status") in ("ok", "diverged"):
            changes = config_changes(previous.get("config") or {}, payload["config"])
            if "config" not in previous:
                changes = ["its metrics.json records no config (an older version wrote it)"]
            elif not changes:
                if previous.get("lambda_fallback") and not tuned_lambda.fell_back(cfg):
                    # Its λ was the config's fallback and is Table 1's winner now: the same value, the same run.
                    previous.pop("lambda_fallback")
                    write_metrics(run_dir, previous)
                print(
                    f"skip {run_dir}: metrics.json says {previous['status']} and its config is the one asked for"
                )
                hydra_callbacks.record_outcome(run_dir, "skipped", None)
                return previous
            shown = "; ".join(changes[:3]) + ("; ..." if len(changes) > 3 else "")
            print(f"rerun {run_dir}: its finished run had another config ({shown})")
        # A new attempt starts from a clean cell: no checkpoint, log or plot of an earlier one survives.
        clean_cell(run_dir, keep=(".hydra", f"{hc.job.name}.log"))

    loggers: list = []
    error, status = None, "failed"
    try:
        payload = _train_and_evaluate(cfg, run_dir, payload, loggers, rank_zero)
    except (ConfigError, ContractError) as e:
        error = str(e)
    except BaseException as e:
        from clusterable.contracts import BatchError
        from clusterable.data.errors import DatasetError
        from clusterable.evaluation.runner import EvaluatorError
        from clusterable.module import DivergedError

        if isinstance(e, DivergedError):
            payload["failed_epoch"] = e.epoch
            error, status = str(e), "diverged" if e.expected else "failed"
        elif isinstance(e, DatasetError | EvaluatorError | BatchError):
            error = str(e)
        elif isinstance(e, KeyboardInterrupt | SystemExit):  # Lightning turns Ctrl-C into SystemExit(1)
            _finish(run_dir, hc, payload, "interrupted", rank_zero, loggers)
            if rank_zero:
                print(f"interrupted: {run_dir} recorded as failed; run the same command again to redo it",
                      file=sys.stderr)  # fmt: skip
            signal.signal(signal.SIGINT, signal.default_int_handler)  # Lightning ignores further Ctrl-C
            raise KeyboardInterrupt from None
        else:  # a bug rather than bad input: keep the traceback, but as a file, and let the sweep go on
            trace = run_dir / "traceback.txt"
            if rank_zero:
                trace.write_text(traceback.format_exc())
            error = f"{type(e).__name__}: {e}".splitlines()[0] + f" (traceback: {trace})"
    return _finish(run_dir, hc, payload, error, rank_zero, loggers, status)


def _train_and_evaluate(
    cfg: DictConfig, run_dir: Path, payload: dict[str, Any], loggers: list, rank_zero: bool
) -> dict[str, Any]:
    import lightning as L
    import torch

    # Lightning's per-run banner (accelerator lines, tips) repeats for every job of a sweep; warnings still show.
    logging.getLogger("lightning.pytorch.utilities.rank_zero").setLevel(logging.WARNING)
    warnings.filterwarnings("ignore", message=".*LeafSpec.*is deprecated")  # inside Lightning, not ours
    # Frozen BatchNorm layers (the metric-learning backbones) stay in eval mode on purpose.
    warnings.filterwarnings("ignore", message=r".*module\(s\) in eval mode at the start of training")
    from lightning.pytorch.callbacks import ModelCheckpoint

    from clusterable.callbacks import ClusterUpdates, EpochTimer
    from clusterable.contracts import DataModule, Encoder, HasWordVectors, Head, require, require_evaluator
    from clusterable.evaluation.runner import evaluate
    from clusterable.module import RepresentationModule, count_parameters

    check_config(cfg)
    if payload["mode"] != cfg.mode:
        raise ConfigError(f"mode is derived from the run (data source, debug group, limits): {payload['mode']}, "
                          f"not {cfg.mode}; do not set it")  # fmt: skip
    threads = _torch_threads(cfg)
    if threads is not None:
        torch.set_num_threads(threads)
    payload["torch_threads"] = torch.get_num_threads()
    L.seed_everything(cfg.seed, workers=True, verbose=False)
    if tuned_lambda.fell_back(cfg):  # a smoke run without Table 1's smoke winners: λ is the config's
        payload["lambda_fallback"] = True
        print(
            f"λ: {cfg.loss.lam:g}, the config's (Table 1's {cfg.mode} winners are missing: tuned_lambda_fallback)"
        )

    datamodule = build(cfg.dataset, "dataset", seed=cfg.seed)
    require(datamodule, DataModule, f"dataset={HydraConfig.get().runtime.choices.get('dataset')}")
    try:
        datamodule.load()
    except ValueError as e:
        raise ConfigError(f"dataset.{e}") from None
    unknown = [s for s in cfg.eval_stages if s not in datamodule.splits]
    if unknown:
        raise ConfigError(
            f"eval_stages: no split named {unknown[0]!r}; the dataset has: {', '.join(datamodule.splits)}"
        )

    # Text: the dataset's word vectors go to the encoders that take them, and only text datasets have them.
    model_name, dataset_name = (HydraConfig.get().runtime.choices.get(g) for g in ("model", "dataset"))
    reads_text = "word_vectors" in inspect.signature(target_of(cfg.model, "model")).parameters
    text_data = isinstance(datamodule, HasWordVectors)
    if reads_text and not text_data:
        raise ConfigError(
            f"model {model_name} needs a text dataset (one with word vectors), got dataset {dataset_name}"
        )
    if text_data and not reads_text:
        raise ConfigError(f"model {model_name} cannot read the token ids of text dataset {dataset_name}; use a text "
                          "model (model=text_ffnn or model=text_cnn)")  # fmt: skip
    vectors = {"word_vectors": datamodule.word_vectors} if text_data else {}
    if text_data:  # what the corpus build and the vectors did (lemmatiser, truncated / empty documents, OOV)
        payload["data_notes"] = datamodule.notes
    encoder = build(cfg.model, "model", input_shape=datamodule.input_shape, **vectors)
    require(encoder, Encoder, f"model={model_name}")
    head = build(
        cfg.loss, "loss", num_classes=datamodule.num_classes, embedding_dim=encoder.embedding_dim,
        input_shape=datamodule.input_shape,
    )  # fmt: skip
    require(head, Head, f"loss={HydraConfig.get().runtime.choices.get('loss')}")
    optimizer = build(cfg.optimizer, "optimizer", call_args=OPTIMIZER_CALL)
    scheduler = build(cfg.scheduler, "scheduler", call_args=SCHEDULER_CALL) if cfg.get("scheduler") else None
    evaluators = {
        name: build(node, f"evaluator.{name}", call_args=EVALUATOR_CALL)
        for name, node in (cfg.get("evaluator") or {}).items()
    }
    for name, fn in evaluators.items():
        require_evaluator(fn, f"evaluator.{name}")
    module = RepresentationModule(
        encoder, head, optimizer, cfg.divergence_limit, cfg.optimizer_steps, scheduler=scheduler,
        weight_decay_on=cfg.weight_decay_on, channels_last=cfg.channels_last,
        validation_evaluators={name: evaluators[name] for name in cfg.validation_evaluators},
        class_disjoint=datamodule.class_disjoint, trainable=cfg.trainable,
    )  # fmt: skip

    validates = cfg.trainer.get("limit_val_batches", 1.0) != 0 and len(datamodule.splits["val"]["labels"]) > 0
    monitor = cfg.checkpoint.monitor
    if cfg.validation_evaluators and not validates:
        raise ConfigError("validation_evaluators need a validation loop, but this run has none (an empty val "
                          "split or trainer.limit_val_batches=0)")  # fmt: skip
    undeclared = module.logs_undeclared_metrics() and monitor is not None and monitor.startswith("val/")
    if monitor is not None and monitor not in module.logged_keys(validates) and not undeclared:
        logged = ", ".join(module.logged_keys(validates))
        raise ConfigError(f"checkpoint.monitor: {monitor!r} is never logged by this run "
                          f"(loss={HydraConfig.get().runtime.choices.get('loss')}); it logs {logged}, or use null "
                          "for the last epoch")  # fmt: skip

    for name, node in (cfg.logger or {}).items():
        loggers.append(build(node, f"logger.{name}"))
    checkpoint = ModelCheckpoint(
        dirpath=run_dir / "checkpoints", filename="best", monitor=monitor, mode=cfg.checkpoint.mode,
        save_top_k=1 if monitor else 0,
    )  # fmt: skip
    timer = EpochTimer()
    trainer = build(
        cfg.trainer,
        "trainer",
        logger=loggers or False,
        callbacks=[checkpoint, timer],
        default_root_dir=str(run_dir),
    )

    if cfg.optimizer_steps == "per_sample" and trainer.world_size > 1:
        raise ConfigError(f"optimizer_steps=per_sample runs on one device, not {trainer.world_size}: set "
                          "trainer.devices=1 or optimizer_steps=per_batch")  # fmt: skip

    start = time.perf_counter()
    trainer.fit(module, datamodule=datamodule)
    lloyd = next((c for c in trainer.callbacks if isinstance(c, ClusterUpdates)), None)
    payload["timing"].update(
        fit_s=time.perf_counter() - start, epoch_s=timer.mean_epoch_s, steps=module.steps_taken,
        step_s=timer.train_s / module.steps_taken if module.steps_taken else None,
        lloyd_s=lloyd.mean_s if lloyd is not None else None,
    )  # fmt: skip
    if not rank_zero:
        payload["status"] = "ok"
        return payload

    # The COREL protocol: test the weights of the epoch with the best validation score.
    if checkpoint.monitor and checkpoint.best_model_path:
        state = torch.load(checkpoint.best_model_path, map_location=module.device, weights_only=False)
        module.load_state_dict(state["state_dict"])
        payload["best_epoch"] = int(state["epoch"])
    else:
        payload["best_epoch"] = trainer.current_epoch - 1 if module.steps_taken else None  # None: not trained

    start = time.perf_counter()
    metrics = evaluate(module, datamodule, evaluators, cfg.eval_stages, run_dir, cfg.seed)
    metrics["model/params"] = count_parameters(encoder, head)
    # The last epoch's training losses (the CSRL paper reports the final training loss as de-noising MSE).
    metrics.update({k: float(v) for k, v in trainer.callback_metrics.items() if k.startswith("train/")})
    payload["timing"]["eval_s"] = time.perf_counter() - start
    payload.update(status="ok", metrics=metrics)
    for lg in loggers:
        lg.log_metrics({k: v for k, v in metrics.items() if v == v}, step=trainer.global_step)
    return payload


def _finish(
    run_dir: Path,
    hc: Any,
    payload: dict[str, Any],
    error: str | None,
    rank_zero: bool,
    loggers: list = (),
    status: str = "failed",
) -> dict[str, Any]:
    """Record the run (rank 0 only): metrics.json, the loggers closed, the sweep's outcome, the printed summary.
    ``error``: the run did not finish, recorded with ``status`` (``failed`` or ``diverged``)."""
    if error is not None:
        payload.update(status=status, error=error)
    _close(loggers, ok=payload["status"] == "ok")
    remove_if_empty(run_dir / f"{hc.job.name}.log")
    if not rank_zero:
        return payload
    write_metrics(run_dir, payload)
    if error != "interrupted":
        hydra_callbacks.record_outcome(run_dir, payload["status"], payload["error"])
        _print_summary(run_dir, payload, hc.mode == RunMode.RUN)
    return payload


def _close(loggers: list, ok: bool) -> None:
    """Finish every logger's run now, so a multirun's next job starts a fresh W&B run (also after a failure)."""
    for lg in loggers:
        if type(lg).__name__ == "WandbLogger":
            import wandb

            if wandb.run is not None:
                wandb.finish(exit_code=0 if ok else 1)
        else:
            lg.finalize("success" if ok else "failed")


def _print_summary(run_dir: Path, payload: dict[str, Any], single: bool) -> None:
    """Metrics and run directory on stdout; a failure is one ``error:`` line on stderr (a sweep's cells say
    ``failed:`` on stdout and the sweep lists them at its end)."""
    if payload["status"] != "ok":
        if single:
            print(f"run dir: {run_dir}")
            print(f"error: {payload['error']}", file=sys.stderr)
            hydra_callbacks.exit_status["code"] = 1
        else:
            print(f"{payload['status']}: {run_dir.name}: {payload['error']}")
        return
    metrics = payload["metrics"]
    rows = [(k, v) for k, v in sorted(metrics.items()) if k.startswith("test/") or k.startswith("model/")]
    width = max((len(k) for k, _ in rows), default=10)
    lines = [f"{k:<{width}}  {v:.4f}" if isinstance(v, float) else f"{k:<{width}}  {v}" for k, v in rows]
    best = "none (not trained)" if payload["best_epoch"] is None else payload["best_epoch"]
    print("\n".join(["run: ok", *lines, f"best epoch: {best}", f"run dir: {run_dir}"]))


@hydra.main(version_base="1.3", config_path=CONFIG_DIR, config_name="train")
def hydra_main(cfg: DictConfig) -> float | None:
    """One job. Returns the value of ``cfg.optimized_metric`` (for hyperparameter sweepers)."""
    payload = run(cfg)
    value = payload.get("metrics", {}).get(str(cfg.get("optimized_metric")))
    return float(value) if isinstance(value, int | float) else None


def check_group_options(args: list[str], config_dir: str = CONFIG_DIR) -> str | None:
    """One line naming an unknown option of a config group on the command line (``evaluator=[nonexistent]``,
    ``experiment=corel/nonexistent``) and the available ones, or None. Hydra's parser reads the overrides; folders
    added with ``hydra.searchpath=[file://...]`` count too."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    try:
        overrides = OverridesParser.create().parse_overrides(
            [a for a in args if "=" in a and not a.startswith("-")]
        )
    except Exception:
        return None  # Hydra reports syntax errors itself
    roots = [Path(config_dir)]
    for override in overrides:
        if override.key_or_group == "hydra.searchpath" and isinstance(override.value(), list):
            roots += [
                Path(str(p).removeprefix("file://")) for p in override.value() if str(p).startswith("file://")
            ]
    # Nested groups too (``loss/metric=nope``: a group chosen inside another group's config).
    groups = {
        p.relative_to(config_dir).as_posix()
        for p in Path(config_dir).rglob("*")
        if p.is_dir() and p.relative_to(config_dir).parts[0] != "hydra"
    }
    for override in overrides:
        group = override.key_or_group
        if group not in groups or override.is_delete() or override.package is not None:
            continue
        if override.is_sweep_override():
            names = list(override.sweep_string_iterator())
        else:
            value = override.value()
            names = (
                [str(v) for v in value] if isinstance(value, list) else [] if value is None else [str(value)]
            )
        available = sorted(
            str(p.relative_to(root / group).with_suffix(""))
            for root in roots
            for p in (root / group).rglob("*.yaml")
        )
        for name in names:
            if name not in available:
                return f"{group}: no option {name!r}; available: {', '.join(available)}"
    return None


def _parsed_overrides(args: list[str]) -> list[Any] | None:
    """The command line's ``key=value`` overrides, parsed by Hydra; None on a syntax error (Hydra reports those)."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    try:
        return OverridesParser.create().parse_overrides(
            [a for a in args if "=" in a and not a.startswith("-")]
        )
    except Exception:
        return None


def _composition_problem(overrides: list[str], config_dir: str) -> tuple[DictConfig | None, str | None]:
    """Compose ``train`` with ``overrides`` (Hydra's node included): (the config, None), or (None, one line)."""
    from hydra import compose, initialize_config_dir

    try:
        with initialize_config_dir(config_dir=config_dir, version_base="1.3"):
            return compose("train", overrides=overrides, return_hydra_config=True), None
    except Exception as e:
        return None, composition_error(e)


def check_composes(args: list[str], config_dir: str = CONFIG_DIR) -> str | None:
    """One line when Hydra cannot compose a single run's config, e.g. a key that does not exist set without ``+``
    (``trainer.precison=16``); None when it composes. Hydra's own report is several lines. Under ``-m`` each cell
    is composed by the sweeper (``hydra_plugins.clusterable_sweeper``), where a cell that does not compose fails
    alone (``check_sweep`` checks the sweep's own settings)."""
    flags = (
        "-m",
        "--multirun",
        "-h",
        "--help",
        "--hydra-help",
        "-cn",
        "--config-name",
        "-cp",
        "--config-path",
    )
    parsed = None if any(a in flags for a in args) else _parsed_overrides(args)
    if parsed is None:
        return None
    keep = [
        o.input_line
        for o in parsed
        if o.key_or_group == "hydra.searchpath" or not o.key_or_group.startswith("hydra")
    ]
    return _composition_problem(keep, config_dir)[1]


def check_sweep(args: list[str], config_dir: str = CONFIG_DIR) -> str | None:
    """Under ``-m``, one line (instead of Hydra's several) when the sweep itself is wrong: a ``hydra.*`` key that does
    not compose (``hydra.sweeper.param.seed=0``, ``hydra.sweeper.grids.txt=null``) or ``hydra.sweeper.grids`` (an
    experiment's or the command line's) that is not a mapping of grids. None otherwise: the other keys are checked
    per cell, where a cell that does not compose fails alone."""
    from hydra_plugins.clusterable_sweeper.cell_sweeper import checked_grids

    parsed = _parsed_overrides(args) if any(a in ("-m", "--multirun") for a in args) else None
    if parsed is None:
        return None
    # The sweep's own settings, and the experiment and debug groups that set them when given once.
    sweep = [
        o.input_line
        for o in parsed
        if not o.is_sweep_override()
        and re.split(r"[./]", o.key_or_group)[0] in ("hydra", "experiment", "debug")
    ]
    cfg, problem = _composition_problem(sweep, config_dir)
    if cfg is None:
        return problem
    try:
        checked_grids(cfg.hydra.sweeper.get("grids"))
    except ValueError as e:  # checked_grids' one line
        return str(e)
    return None


def main() -> None:
    """``python train.py ...``: exit status 0 when every run is ok, 1 when one failed, 2 for an unknown option,
    130 after Ctrl-C."""
    hydra_callbacks.exit_status["code"] = 0
    problem = check_group_options(sys.argv[1:]) or check_composes(sys.argv[1:]) or check_sweep(sys.argv[1:])
    if problem:
        print(f"error: {problem}", file=sys.stderr)
        sys.exit(2)
    try:
        hydra_main()
    except KeyboardInterrupt:
        sys.exit(130)
    sys.exit(hydra_callbacks.exit_status["code"])
