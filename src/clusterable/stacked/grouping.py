"""Which cells of a sweep train together: the grouping rule of ``hydra/launcher=stacked``.

Two cells share a stack when their resolved configs are equal once the stacked axes are set aside: ``seed``
(a paper's repetitions), ``optimizer.lr`` and ``optimizer.weight_decay`` (elementwise in Adam, AdamW and SGD:
per-member tensors), and the loss options its head declares (``contracts.StacksScalars``: COREL's ``loss.lam``,
the autoencoders' ``loss.lam``). Loggers and progress bars never matter. A cell whose config cannot stack at all
(``why_not_stackable``) is a group of its own and runs as a single run; so is a group of one.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

import torch
from omegaconf import OmegaConf

IGNORED_PREFIXES = ("logger.", "trainer.enable_progress_bar")

# Config keys that may differ between the members of a stack besides the head's declared scalars
# (``contracts.StacksScalars``, as ``loss.<name>``).
STACKED_KEYS = ("seed", "optimizer.lr", "optimizer.weight_decay")
PRECISIONS = {"32-true": torch.float32, "32": torch.float32, "64-true": torch.float64, "64": torch.float64}


def why_not_stackable(config: dict[str, Any]) -> str | None:
    """Why a cell's resolved config cannot train in a stack (it runs alone), or None. What the stacked loop does
    not do: schedules, validation evaluators, Boudiaf's checkpoint rule, a partly frozen encoder, step limits,
    several devices, mixed precision, image folders and other datasets that are not held in memory."""
    from clusterable.config import target_of
    from clusterable.data.memory.datamodule import InMemoryDataModule

    trainer = config.get("trainer") or {}
    checks = [
        (config.get("scheduler") is not None, "a learning-rate schedule"),
        (bool(config.get("validation_evaluators")), "validation evaluators"),
        ((config.get("checkpoint") or {}).get("rule") is not None, "checkpoint.rule"),
        (config.get("trainable", "all") != "all", "trainable=embedding_layer"),
        (bool(config.get("channels_last")), "channels_last"),
        (trainer.get("max_steps", -1) != -1, "trainer.max_steps"),
        (str(trainer.get("devices", 1)) not in ("1", "auto"), "several devices"),
        (str(trainer.get("precision", "32-true")) not in PRECISIONS, f"precision {trainer.get('precision')}"),
        (trainer.get("accumulate_grad_batches", 1) != 1, "trainer.accumulate_grad_batches"),
        (trainer.get("gradient_clip_val") is not None, "gradient clipping (a norm over the members)"),
        (_fraction(trainer.get("limit_train_batches", 1.0)), "a fraction of the training batches"),
        (trainer.get("limit_val_batches", 1.0) not in (0, 1, 1.0), "trainer.limit_val_batches"),
        (trainer.get("check_val_every_n_epoch", 1) != 1, "trainer.check_val_every_n_epoch"),
    ]
    for failed, what in checks:
        if failed:
            return f"{what} has no stacked version"
    try:
        dataset = target_of(OmegaConf.create(config["dataset"]), "dataset")
    except Exception as e:  # a target that does not import: the single run says so in its own words
        return f"dataset: {e}"
    if not (isinstance(dataset, type) and issubclass(dataset, InMemoryDataModule)):
        return f"dataset {getattr(dataset, '__name__', dataset)} is not held in memory"
    return None


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
