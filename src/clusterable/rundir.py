"""A run directory's ``metrics.json``: the one file tables are built from (DESIGN.md contract)."""

from __future__ import annotations

import json
import math
import os
import tempfile
from pathlib import Path
from typing import Any

METRICS_FILE = "metrics.json"


def _plain(value: Any) -> Any:
    """JSON-safe: tensors/NumPy scalars to floats, NaN/inf to None (JSON has neither)."""
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if hasattr(value, "item") and callable(value.item):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def write_metrics(run_dir: str | Path, payload: dict[str, Any]) -> Path:
    """Write ``metrics.json`` atomically (temporary file in the same folder, then rename).

    A run killed mid-write leaves either the old file or the new one, never half a file.
    """
    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=run_dir, prefix=".metrics-", suffix=".json")
    with os.fdopen(fd, "w") as f:
        json.dump(_plain(payload), f, indent=2, sort_keys=True)
    path = run_dir / METRICS_FILE
    os.replace(tmp, path)
    return path


def read_metrics(run_dir: str | Path) -> dict[str, Any] | None:
    """The run's metrics.json, or None if there is none (or it is unreadable)."""
    path = Path(run_dir) / METRICS_FILE
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def is_done(run_dir: str | Path) -> bool:
    """True when the run finished with ``status: ok`` (a re-run sweep skips it)."""
    m = read_metrics(run_dir)
    return m is not None and m.get("status") == "ok"


def find_runs(root: str | Path) -> list[tuple[Path, dict[str, Any]]]:
    """Every run directory below ``root`` with a readable metrics.json, sorted by path."""
    out = []
    for path in sorted(Path(root).rglob(METRICS_FILE)):
        m = read_metrics(path.parent)
        if m is not None:
            out.append((path.parent, m))
    return out
