"""Hydra callbacks (``hydra.callbacks`` in ``conf/train.yaml``): the output folder is checked before anything
runs, and a multirun ends with ``N ok, M failed, K skipped`` (and ``D diverged`` when a head recognised its loss's
unbounded regime: results of the grid, not failures), the failed cells' reasons and a non-zero exit status when any
cell failed.

Jobs may run in other processes (``hydra/launcher=joblib``, ``submitit_*``), so each job writes its outcome as a
small file in a folder the sweep names in an environment variable (inherited by the launched processes); the
summary reads them back in the launching process.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import time
import uuid
from pathlib import Path
from typing import Any

from hydra.experimental.callback import Callback
from omegaconf import DictConfig

RECORDS_ENV = "CLUSTERABLE_SWEEP_RECORDS"
# The launching process's exit status, read by ``clusterable.cli.main`` after Hydra returns.
exit_status = {"code": 0}


def record_outcome(run_dir: Path, status: str, error: str | None, cell: str | None = None) -> None:
    """Write one job's outcome (``ok``, ``diverged``, ``failed`` or ``skipped``) for the sweep summary; no-op outside
    a sweep.

    ``cell`` names the cell in the summary (default: the run directory's name, i.e. its overrides).
    """
    folder = os.environ.get(RECORDS_ENV)
    if not folder:
        return
    record = {"dir": str(run_dir), "cell": cell or run_dir.name, "status": status, "error": error}
    Path(folder, f"{uuid.uuid4().hex}.json").write_text(json.dumps(record))


class OutputFolderCheck(Callback):
    """Fail with one line, before Hydra creates any run folder, when ``paths.output_dir`` cannot be created."""

    def _check(self, config: DictConfig) -> None:
        folder = Path(str(config.paths.output_dir))
        try:
            folder.mkdir(parents=True, exist_ok=True)
            probe = folder / f".write-test-{os.getpid()}"
            probe.touch()
            probe.unlink()
        except OSError as e:
            print(
                f"error: cannot write to the output folder {folder} (paths.output_dir): {e.strerror}",
                file=sys.stderr,
            )
            raise SystemExit(1) from None

    def on_run_start(self, config: DictConfig, **kwargs: Any) -> None:
        self._check(config)

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        self._check(config)


class SweepSummary(Callback):
    """Collect every job's outcome and print the sweep's tally at its end; exit status 1 if any cell failed."""

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        sweep_dir = Path(str(config.hydra.sweep.dir))
        for stale in sweep_dir.glob(".outcomes-*"):  # left by a sweep that was interrupted
            if not _alive(int(stale.name.split("-")[1])):
                shutil.rmtree(stale, ignore_errors=True)
        self.records = sweep_dir / f".outcomes-{os.getpid()}-{time.time_ns()}"
        self.records.mkdir(parents=True, exist_ok=True)
        os.environ[RECORDS_ENV] = str(self.records)

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        outcomes = [json.loads(p.read_text()) for p in sorted(self.records.glob("*.json"))]
        shutil.rmtree(self.records, ignore_errors=True)
        os.environ.pop(RECORDS_ENV, None)
        counts = {s: sum(o["status"] == s for o in outcomes) for s in ("ok", "diverged", "failed", "skipped")}
        diverged = f"{counts['diverged']} diverged, " if counts["diverged"] else ""
        print(
            f"sweep: {counts['ok']} ok, {diverged}{counts['failed']} failed, {counts['skipped']} skipped "
            f"({self.records.parent})"
        )
        # Each diverged cell printed its reason when it stopped, and the tables show them: one line here.
        cells = sorted(o["cell"] for o in outcomes if o["status"] == "diverged")
        if cells:
            more = f" and {len(cells) - 1} more" if len(cells) > 1 else ""
            print(
                f"diverged: {cells[0]}{more} (the loss is unbounded there: a result, see each metrics.json)"
            )
        # Cells that failed for the same reason (a missing input, e.g. Table 1's winners for corel/table2) are one
        # line, naming the first cell and how many more, rather than a screenful of the same sentence.
        reasons: dict[str | None, list[str]] = {}
        for o in outcomes:
            if o["status"] == "failed":
                reasons.setdefault(o["error"], []).append(o["cell"])
        for error, failed in reasons.items():
            failed.sort()
            more = f"{len(failed)} cells ({failed[0]} and {len(failed) - 1} more)"
            where = failed[0] if len(failed) == 1 else more
            print(f"failed: {where}: {error}", file=sys.stderr)
        if counts["failed"]:
            exit_status["code"] = 1


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's live process
        return True
    return True
