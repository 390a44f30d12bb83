"""How a sweep's cells tell the sweep what they did: one small file per cell outcome, in a folder the sweep names in
an environment variable (``RECORDS_ENV``, inherited by the processes a launcher starts), read back by the sweep's
summary (``hydra_callbacks.SweepSummary``) in the launching process; and the digests of the sweep's config files,
taken when it starts, which each cell compares before it prepares.

The run layer writes here and the front door reads here: neither imports the other for it.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from clusterable.record import FAILED, Status

RECORDS_ENV = "CLUSTERABLE_SWEEP_RECORDS"
# In a sweep's outcome folder: the digest of every config file its cells compose from, taken when the sweep starts.
CONFIG_SNAPSHOT = "config-files.json"
# Outcomes this process could not write (a full disk), by records folder: the summary counts them all the same.
unwritten: dict[str, list[dict[str, Any]]] = {}


def record_outcome(run_dir: Path, status: Status, error: str | None, cell: str | None = None) -> None:
    """Write one job's outcome (one of ``record.STATUSES``) for the sweep summary; no-op outside a sweep.

    ``cell`` names the cell in the summary (default: the run directory's name, i.e. its overrides).
    """
    folder = os.environ.get(RECORDS_ENV)
    if not folder:
        return
    record = {"dir": str(run_dir), "cell": cell or run_dir.name, "status": status, "error": error}
    path = Path(folder, f"{uuid.uuid4().hex}.json")
    try:  # whole or not at all (the summary globs *.json), and a full disk must not turn the outcome into a crash
        path.with_suffix(".tmp").write_text(json.dumps(record))
        path.with_suffix(".tmp").replace(path)
    except OSError:
        path.with_suffix(".tmp").unlink(missing_ok=True)
        # Kept in memory instead: a cell of this process (basic or stacked launcher) is still counted, and a
        # failure on a full disk still makes the exit status 1.
        unwritten.setdefault(folder, []).append(record)


def record_sweep_error(error: str) -> None:
    """A failure of the sweep itself, not of a cell (a search in which no trial finished): printed by the summary
    and failing the command (exit 1), never counted as a cell. No-op outside a sweep."""
    folder = os.environ.get(RECORDS_ENV)
    if folder:
        record_outcome(Path(folder), FAILED, error, cell=SWEEP_ERROR)


# The ``cell`` of an outcome that is the sweep's own (``record_sweep_error``).
SWEEP_ERROR = "(the sweep itself)"


def config_digests(roots: Sequence[str]) -> dict[str, str]:
    """``{path: sha256}`` of every YAML file below ``roots``."""
    out = {}
    for root in roots:
        for path in sorted(Path(root).rglob("*.yaml")) if Path(root).is_dir() else []:
            with contextlib.suppress(OSError):
                out[str(path)] = hashlib.sha256(path.read_bytes()).hexdigest()
    return out


def config_files_changed() -> str | None:
    """In a cell of a sweep: which config files changed since the sweep started (``experiment/mine.yaml edited``),
    or None. Hydra composes each cell from the files when it starts it, so a file edited during a long sweep
    would give its later cells another config than its earlier ones, under the same experiment."""
    folder = os.environ.get(RECORDS_ENV)
    if not folder:
        return None
    try:
        snapshot = json.loads(Path(folder, CONFIG_SNAPSHOT).read_text())
    except (OSError, ValueError):
        return None  # no snapshot (a full disk when the sweep started): nothing to compare
    now = config_digests(snapshot["roots"])
    before = snapshot["files"]
    changes = [f"{p} {'edited' if p in now else 'removed'}" for p in sorted(before) if now.get(p) != before[p]]
    changes += [f"{p} added" for p in sorted(set(now) - set(before))]
    if not changes:
        return None
    more = f" and {len(changes) - 1} more" if len(changes) > 1 else ""
    return changes[0] + more
