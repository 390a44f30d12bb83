"""Value checks the datamodules of every wing share (their constructors raise one line naming the parameter)."""

from __future__ import annotations

import numbers


def is_int(value: object) -> bool:
    """An integer and not a bool (``True`` is an ``int`` in Python, never a count here)."""
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)
