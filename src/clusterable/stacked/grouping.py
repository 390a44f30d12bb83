"""Which cells of a sweep train together: the grouping rule of ``hydra/launcher=stacked``.

Two cells share a stack when their resolved configs are equal once the stacked axes are set aside: ``seed``
(a paper's repetitions), ``optimizer.lr`` and ``optimizer.weight_decay`` (elementwise in Adam, AdamW and SGD:
per-member tensors), and the loss options its head declares (``contracts.StacksScalars``: COREL's ``loss.lam``,
the autoencoders' ``loss.lam``). Loggers and progress bars never matter. A cell whose config cannot stack at all
(``why_not_stackable``) is a group of its own and runs as a single run; so is a group of one.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import torch
from omegaconf import OmegaConf

IGNORED_PREFIXES = ("logger.", "trainer.enable_progress_bar")

# Config keys that may differ between the members of a stack besides the head's declared scalars
# (``contracts.StacksScalars``, as ``loss.<name>``).
STACKED_KEYS = ("seed", "optimizer.lr", "optimizer.weight_decay")
PRECISIONS = {"32-true": torch.float32, "32": torch.float32, "64-true": torch.float64, "64": torch.float64}


def _left(*defaults: Any) -> Callable[[Any], bool]:
    """An option the stack honours only at one of ``defaults`` (what the single run would do otherwise, it does
    not)."""
    return lambda value: value in defaults


HONOURED = "honoured"  # the stack does what the single run does with it
NO_EFFECT = "no effect"  # it changes nothing a run trains or records here (display, Lightning's bookkeeping)

# What the stacked loop does with every top-level key of a run's config (``run.checks.TOP_LEVEL`` and the config
# groups) and every option of Lightning's Trainer (``trainer.<option>``): honoured, without effect, or honoured only
# at the values a check accepts (what the check refuses is named in the reason). tests/stacked/test_launcher.py
# ties these tables to ``TOP_LEVEL``, the groups and ``lightning.Trainer``'s signature, so that a new option cannot
# reach a stacked run unclassified: an option missing here makes a cell run alone, by its single run.
Rule = str | tuple[Callable[[Any], bool], str]
TOP_LEVEL_RULES: dict[str, Rule] = {
    "seed": HONOURED,
    "name": NO_EFFECT,
    "mode": NO_EFFECT,
    "eval_stages": HONOURED,
    "optimized_metric": HONOURED,
    "divergence_limit": HONOURED,
    "torch_threads": HONOURED,
    "optimizer_steps": HONOURED,
    "weight_decay_on": HONOURED,
    "tuned_lambda_fallback": HONOURED,
    "tuned_lambda_from": HONOURED,
    "tuned_lambda_partial": HONOURED,
    "save_representations": HONOURED,
    "checkpoint.monitor": HONOURED,
    "checkpoint.mode": HONOURED,
    "paths.data_dir": HONOURED,
    "paths.output_dir": HONOURED,
    "protocol": HONOURED,
    "validation_evaluators": (lambda v: not v, "validation evaluators"),
    "channels_last": (_left(False), "channels_last"),
    "trainable": (_left("all"), "trainable=embedding_layer"),
    "checkpoint.rule": (_left(None), "checkpoint.rule"),
    # the groups: the dataset is checked below (in memory only), the loss by the probe step (vmap), the optimizer by
    # the stacked optimizer (Adam, AdamW, SGD)
    "dataset": HONOURED,
    "model": HONOURED,
    "loss": HONOURED,
    "optimizer": HONOURED,
    "evaluator": HONOURED,
    "logger": HONOURED,
    "trainer": HONOURED,
    "scheduler": (_left(None), "a learning-rate schedule"),
    "callbacks": (lambda v: not v, "Lightning callbacks (callbacks=...: the stacked loop runs none)"),
}
TRAINER_RULES: dict[str, Rule] = {
    "accelerator": HONOURED,
    "max_epochs": HONOURED,
    "devices": (lambda v: str(v) in ("1", "auto"), "several devices"),
    "strategy": (_left("auto", None), "a distributed strategy"),
    "num_nodes": (_left(1, None), "several nodes"),
    "precision": (lambda v: v is None or str(v) in PRECISIONS, "this precision"),
    "limit_train_batches": (lambda v: v is None or not _fraction(v), "a fraction of the training batches"),
    "limit_val_batches": (_left(None, 0, 1, 1.0), "trainer.limit_val_batches"),
    "check_val_every_n_epoch": (_left(1, None), "trainer.check_val_every_n_epoch"),
    "val_check_interval": (_left(None, 1.0), "trainer.val_check_interval"),
    "max_steps": (_left(-1, None), "trainer.max_steps"),
    "min_steps": (_left(None), "trainer.min_steps"),
    "min_epochs": (_left(None), "trainer.min_epochs"),
    "max_time": (_left(None), "trainer.max_time"),
    "fast_dev_run": (_left(False, 0), "trainer.fast_dev_run"),
    "overfit_batches": (_left(0, 0.0), "trainer.overfit_batches"),
    "accumulate_grad_batches": (_left(1), "trainer.accumulate_grad_batches"),
    "gradient_clip_val": (_left(None), "gradient clipping (a norm over the members)"),
    "gradient_clip_algorithm": (_left(None), "trainer.gradient_clip_algorithm"),
    "deterministic": (_left(None, False), "trainer.deterministic"),
    "benchmark": (_left(None, False), "trainer.benchmark"),
    "detect_anomaly": (_left(False), "trainer.detect_anomaly"),
    "profiler": (_left(None), "a profiler"),
    "plugins": (_left(None), "Lightning plugins"),
    "callbacks": (_left(None), "Trainer callbacks"),
    "sync_batchnorm": (_left(False), "trainer.sync_batchnorm"),
    "reload_dataloaders_every_n_epochs": (_left(0), "trainer.reload_dataloaders_every_n_epochs"),
    "logger": (_left(None), "a Trainer logger (the logger group is honoured)"),
    "num_sanity_val_steps": NO_EFFECT,
    "log_every_n_steps": NO_EFFECT,
    "enable_checkpointing": NO_EFFECT,
    "enable_progress_bar": NO_EFFECT,
    "enable_model_summary": NO_EFFECT,
    "inference_mode": NO_EFFECT,
    "use_distributed_sampler": NO_EFFECT,
    "barebones": NO_EFFECT,
    "default_root_dir": NO_EFFECT,
    "limit_test_batches": NO_EFFECT,
    "limit_predict_batches": NO_EFFECT,
    "enable_autolog_hparams": NO_EFFECT,
    "model_registry": NO_EFFECT,
}


def why_not_stackable(config: dict[str, Any]) -> str | None:
    """Why a cell's resolved config cannot train in a stack (it runs alone), or None: a key or Trainer option the
    stacked loop does not implement (``TOP_LEVEL_RULES``, ``TRAINER_RULES``: schedules, validation evaluators,
    Boudiaf's checkpoint rule, a partly frozen encoder, step limits, several devices, mixed precision, ...), or a
    dataset that is not held in memory (image folders)."""
    from clusterable.config import target_of
    from clusterable.data.memory.datamodule import InMemoryDataModule

    flat_config = {k: v for k, v in flat(config).items() if not k.startswith("hydra.")}
    for key, value in flat_config.items():
        top = next((k for k in (key, key.split(".")[0]) if k in TOP_LEVEL_RULES), None)
        if top is None:
            return f"{key} has no stacked version (the stacked loop does not know it)"
        reason = _refused(TOP_LEVEL_RULES[top], value if top == key else config.get(top))
        if reason is not None:
            return f"{reason} has no stacked version"
    for option, value in (config.get("trainer") or {}).items():
        if option == "_target_":
            continue
        rule = TRAINER_RULES.get(option)
        reason = f"trainer.{option} (the stacked loop does not know it)" if rule is None else _refused(rule, value)
        if reason is not None:
            return f"{reason} has no stacked version"
    try:
        dataset = target_of(OmegaConf.create(config["dataset"]), "dataset")
    except Exception as e:  # a target that does not import: the single run says so in its own words
        return f"dataset: {e}"
    if not (isinstance(dataset, type) and issubclass(dataset, InMemoryDataModule)):
        return f"dataset {getattr(dataset, '__name__', dataset)} is not held in memory"
    return None


def _refused(rule: Rule, value: Any) -> str | None:
    """The reason ``rule`` refuses ``value``, or None."""
    if isinstance(rule, str):
        return None
    accepts, what = rule
    return None if accepts(value) else what


def _fraction(limit: Any) -> bool:
    """Whether ``trainer.limit_train_batches`` is a fraction below 1 or no batch at all (a count stacks)."""
    return (isinstance(limit, float) and limit != 1.0) or limit == 0


def flat(config: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """``{"a": {"b": 1}}`` -> ``{"a.b": 1}`` (lists kept whole)."""
    out: dict[str, Any] = {}
    for key, value in config.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping) and value:
            out.update(flat(value, f"{name}."))
        else:
            out[name] = value
    return out


def declared_scalars(config: Mapping[str, Any]) -> tuple[str, ...]:
    """The ``loss.<name>`` keys the cell's head class declares stackable (``stacked_scalars``)."""
    from omegaconf import OmegaConf

    from clusterable.config import target_of

    try:
        head = target_of(OmegaConf.create(dict(config["loss"])), "loss")
    except Exception:
        return ()
    names = getattr(head, "stacked_scalars", ())
    return tuple(f"loss.{n}" for n in names) if isinstance(names, tuple) else ()


def stack_key(config: Mapping[str, Any]) -> str | None:
    """The cell's group: its config with the stacked axes set aside, as text; None when it cannot stack."""
    if why_not_stackable(dict(config)) is not None:
        return None
    axes = set(STACKED_KEYS) | set(declared_scalars(config))
    kept = {k: v for k, v in flat(config).items() if k not in axes and not k.startswith(IGNORED_PREFIXES)}
    return json.dumps(kept, sort_keys=True, default=str)


def plan(configs: Sequence[Mapping[str, Any] | None], max_members: int) -> list[list[int]]:
    """The cells (by position) in groups, in the order of their first cell, each at most ``max_members`` long;
    a cell with no config (it did not resolve) or none that stacks is a group of one."""
    if max_members < 1:
        raise ValueError(f"max_members must be at least 1, got {max_members}")
    groups: dict[str, list[int]] = {}
    order: list[list[int]] = []
    for i, config in enumerate(configs):
        key = None if config is None else stack_key(config)
        if key is None:
            order.append([i])
            continue
        if key not in groups or len(groups[key]) >= max_members:
            groups[key] = []
            order.append(groups[key])
        groups[key].append(i)
    return order
