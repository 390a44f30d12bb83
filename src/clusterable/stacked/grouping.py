"""Which cells of a sweep train together: the grouping rule of ``hydra/launcher=stacked``.

Two cells share a stack when their resolved configs are equal once the stacked axes are set aside: ``seed``
(a paper's repetitions), ``optimizer.lr`` and ``optimizer.weight_decay`` (elementwise in Adam, AdamW and SGD:
per-member tensors), and the loss options its head declares (``contracts.StacksScalars``: COREL's ``loss.lam``,
the autoencoders' ``loss.lam``). Loggers and progress bars never matter. A cell whose config cannot stack at all
(``stack.why_not_stackable``) is a group of its own and runs as a single run; so is a group of one.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from clusterable.stacked.stack import STACKED_KEYS, why_not_stackable

IGNORED_PREFIXES = ("logger.", "trainer.enable_progress_bar")


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
