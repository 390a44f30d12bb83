"""Small array helpers shared by readers and evaluators (each was written several times before)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch


def to_numpy(x: torch.Tensor | np.ndarray | Sequence) -> np.ndarray:
    """A NumPy array of ``x``: tensors are detached and copied to the host, anything else goes through
    ``np.asarray``."""
    return x.detach().cpu().numpy() if isinstance(x, torch.Tensor) else np.asarray(x)


def to_tensor(x: torch.Tensor | np.ndarray | Sequence) -> torch.Tensor:
    """A tensor of ``x``: tensors are detached (device kept), anything else goes through ``np.asarray``."""
    return x.detach() if isinstance(x, torch.Tensor) else torch.as_tensor(np.asarray(x))


def first_per_class(labels: np.ndarray, classes: Sequence[int] | None, per_class: int) -> np.ndarray:
    """Row indices of the first ``per_class`` rows of each class, class by class (the CSRL authors'
    subsampling, and the examples the CSRL figures show).

    ``classes`` None takes every label >= 0 present, in increasing order, and keeps at most ``per_class`` rows of
    each (fewer where a class is smaller). With ``classes`` given, every class must have ``per_class`` rows.

    Raises:
        ValueError: ``per_class < 1``, no class, or a named class with fewer than ``per_class`` rows.
    """
    labels = np.asarray(labels)
    if per_class < 1:
        raise ValueError(f"per_class must be >= 1, got {per_class}")
    strict = classes is not None
    classes = list(classes) if strict else [int(c) for c in np.unique(labels[labels >= 0])]
    if len(classes) < 1:
        raise ValueError("classes must name at least one class")
    picked = []
    for c in classes:  # a handful of classes, not a hot path
        rows = np.flatnonzero(labels == c)
        if strict and len(rows) < per_class:
            raise ValueError(f"per_class must be <= {len(rows)} (the size of class {c}), got {per_class}")
        picked.append(rows[:per_class])
    return np.concatenate(picked)
