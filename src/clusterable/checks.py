"""Range checks shared by the constructors of encoders, loss heads and evaluators.

Each raises ``ValueError`` with a message that starts with the parameter's name (``lam must be in [0, 1], got
1.5``), so that the framework can prefix the config group (``loss.lam must be ...``), and returns the value
converted to the type the constructor keeps. Types are checked against the constructors' hints before they run;
these functions check ranges only.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TypeVar

Number = TypeVar("Number", int, float)


def at_least(name: str, value: Number, minimum: float) -> Number:
    """``value`` unchanged if ``value >= minimum`` (NaN fails)."""
    if not value >= minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {value}")
    return value


def positive(name: str, value: float) -> float:
    """``float(value)`` if ``value > 0``."""
    if not value > 0:
        raise ValueError(f"{name} must be > 0, got {value}")
    return float(value)


def in_interval(
    name: str, value: float, low: float, high: float, open_low: bool = False, open_high: bool = False
) -> float:
    """``float(value)`` if it lies in the interval from ``low`` to ``high`` (closed unless ``open_*``)."""
    above = value > low if open_low else value >= low
    below = value < high if open_high else value <= high
    if not (above and below):
        interval = f"{'(' if open_low else '['}{low}, {high}{')' if open_high else ']'}"
        raise ValueError(f"{name} must be in {interval}, got {value}")
    return float(value)


def dropout(value: float) -> float:
    """A dropout rate in [0, 1)."""
    return in_interval("dropout", value, 0, 1, open_high=True)


def learning_rate(lr: float | None) -> float | None:
    """A head's own learning rate: None (the optimizer's) or > 0."""
    if lr is not None and not lr > 0:
        raise ValueError(f"lr must be > 0 or null, got {lr}")
    return None if lr is None else float(lr)


def boolean(name: str, value: bool) -> bool:
    """``value`` if it is a bool (a YAML true/false; a word or a number is refused rather than read as truthy)."""
    if not isinstance(value, bool):
        raise ValueError(f"{name} must be true or false, got {value!r}")
    return value


def one_of(name: str, value: str, choices: Sequence[str]) -> str:
    """``value`` if it is one of ``choices``."""
    if value not in choices:
        raise ValueError(f"{name} must be one of {', '.join(choices)}, got {value!r}")
    return value


def widths(name: str, values: Sequence[int]) -> list[int]:
    """A non-empty list of positive integers (layer widths, channels, an input shape)."""
    values = [int(w) for w in values]
    if not values or min(values) < 1:
        raise ValueError(f"{name} must be a non-empty list of positive integers, got {values}")
    return values


def input_dim(input_shape: Sequence[int]) -> int:
    """``d = prod(input_shape)``, the width of one flattened input."""
    return math.prod(widths("input_shape", input_shape))


def num_clusters(num_classes: int) -> int:
    """The number of clusters of a clustering head, taken from ``num_classes``: at least 2."""
    if not num_classes >= 2:
        raise ValueError(f"num_classes must be >= 2 (the number of clusters, dataset.num_classes), got {num_classes}")
    return int(num_classes)
