"""A sweep's cell: reuse a finished run of the same config, or start the cell clean.

A re-run of a grid keeps a cell whose metrics.json says ``ok`` (or ``diverged``: a result of the grid) and whose
recorded config equals the one asked for now (``rundir.config_changes``: loggers, paths and progress bars aside);
anything else is re-run from a clean folder, so no checkpoint, log or plot of an earlier attempt survives. A cell
whose training finished but one of whose evaluators failed (``partial``) is kept too, and counted ``partial`` again:
training it again would fail the same evaluator the same way, and ``clusterable-eval <cell>`` re-runs just that
evaluator from what the run kept.

A cell is locked while it runs (an OS file lock on ``<run dir>/.lock`` through ``filelock``: ``flock`` on POSIX,
``msvcrt.locking`` on Windows, released by the operating system if the process dies): a second sweep, or a single
run, on the same folder finds it ``busy``, says so in one line and goes on to its next cell; it never reads a
half-written record of it, nor cleans it under the running one's feet.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from filelock import FileLock, Timeout

from clusterable.logs import get_logger
from clusterable.outcomes import record_outcome
from clusterable.record import BUSY, PARTIAL, SKIPPED, RecordError, RunRecord
from clusterable.run.context import RunContext
from clusterable.rundir import clean_cell, config_changes

log = get_logger(__name__)

LOCK_FILE = ".lock"
BUSY_ERROR = "another process runs this cell"
# The cells this process holds locked: run directory -> its held lock (releasing it frees the cell).
_held: dict[Path, FileLock] = {}


def lock_cell(run_dir: Path) -> bool:
    """Take the cell's lock without waiting; False when another process holds it (this process's own: True).

    A lock object of its own for each attempt (``is_singleton=False``), held by the process whichever thread
    releases it (``thread_local=False``): another lock on the same file, in another process or in this one, is
    refused, as ``flock`` refuses another open file."""
    if run_dir in _held:
        return True
    run_dir.mkdir(parents=True, exist_ok=True)
    lock = FileLock(run_dir / LOCK_FILE, blocking=False, thread_local=False, is_singleton=False)
    try:
        lock.acquire()
    except Timeout:
        return False
    _held[run_dir] = lock
    return True


def held_here(run_dir: Path) -> bool:
    """Whether this process holds the cell's lock: locked and cleaned for an attempt that is not recorded yet."""
    return run_dir in _held


def release_cell(run_dir: Path) -> None:
    """Release the cell's lock once its record is written (no-op when this process does not hold it). On POSIX the
    lock file stays (filelock leaves it): removing it would let a process that opened it a moment before lock a file
    nobody else sees. (On Windows filelock removes it on release.)"""
    lock = _held.pop(run_dir, None)
    if lock is not None:
        lock.release(force=True)


def reuse_or_clean(ctx: RunContext, record: RunRecord, notes: dict[str, Any]) -> RunRecord | None:
    """The finished record to keep (the cell is skipped), a ``busy`` record (not written) when another process runs
    the cell, or None after locking and cleaning the cell for a new attempt (``release_cell`` when it is recorded).

    ``notes`` are what the config's resolvers remarked now (``resolvers.note``): a note the previous record holds
    that no resolver makes any more is dropped from it (a λ that fell back to the config's 0.5 is Table 1's winner
    now, and that winner is 0.5: the same value, the same run).
    """
    if not lock_cell(ctx.run_dir):
        log.info(f"busy {ctx.run_dir}: {BUSY_ERROR}")
        record_outcome(ctx.run_dir, BUSY, BUSY_ERROR)
        return RunRecord(status=BUSY, error=BUSY_ERROR)
    previous = _previous(ctx.run_dir)
    if previous is not None and previous.trained:
        if previous.config is None:
            changes = ["its metrics.json records no config (an older version wrote it)"]
        else:
            changes = config_changes(previous.config, record.config or {})
        if not changes:
            stale = [key for key in previous.notes if key not in notes]
            for key in stale:
                del previous.notes[key]
            if stale:
                previous.write(ctx.run_dir)
            release_cell(ctx.run_dir)
            if previous.status == PARTIAL:
                return _kept_partial(ctx, previous)
            log.info(f"skip {ctx.run_dir}: metrics.json says {previous.status} and its config is the one asked for")
            record_outcome(ctx.run_dir, SKIPPED, None)
            return previous
        shown = "; ".join(changes[:3]) + ("; ..." if len(changes) > 3 else "")
        # (a partial run of another config: its trained model is of the other config, so it trains again)
        log.info(f"rerun {ctx.run_dir}: its finished run had another config ({shown})")
    # A new attempt starts from a clean cell: no checkpoint, log or plot of an earlier one survives. Hydra opens
    # the job's log for appending (a busy cell's log is not emptied by a second sweep): emptied here, locked.
    clean_cell(ctx.run_dir, keep=(".hydra", ctx.log_file.name, LOCK_FILE))
    if ctx.log_file.is_file():
        os.truncate(ctx.log_file, 0)
    return None


def _previous(run_dir: Path) -> RunRecord | None:
    """The cell's record, None when it has none or one that cannot be read (redone: an attempt cut short)."""
    try:
        return RunRecord.read(run_dir)
    except RecordError:
        return None


def _kept_partial(ctx: RunContext, previous: RunRecord) -> RunRecord:
    """A partial run of the config asked for, kept: one line saying how to finish it, counted ``partial`` (not
    ``skipped``: the sweep still ends non-zero until it is finished)."""
    failed = ", ".join(f"evaluator.{name}" for name in previous.evaluators_failed or {}) or "an evaluator"
    log.info(
        f"partial {ctx.run_dir}: its training finished and {failed} failed; not trained again: "
        f"clusterable-eval {ctx.run_dir} re-runs the failed evaluators from what it kept"
    )
    record_outcome(ctx.run_dir, PARTIAL, previous.error)
    return previous
