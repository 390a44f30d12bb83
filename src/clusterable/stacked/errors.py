"""The one error of the stacked path."""

from __future__ import annotations


class NotStackable(ValueError):
    """Cells that cannot train as one stacked model, and why (one line): the launcher runs them one by one."""
