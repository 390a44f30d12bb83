"""Local worker processes for a sweep that stop on Ctrl-C and SIGTERM: what ``hydra/launcher=joblib`` (one cell a
job) and ``hydra/launcher=stacked`` with ``n_jobs`` > 1 (one stacked group a job) share. Only ``joblib`` itself
(a dependency of scikit-learn) is needed, not Hydra's joblib launcher.

Joblib's loky workers, left alone, let Ctrl-C reach them in any state: a worker interrupted mid-job hands the
``KeyboardInterrupt`` to loky (a traceback) and takes the next job, an idle one dies, and the launching process may
kill the workers before they have recorded their cells. Here:

- each worker turns the first Ctrl-C or SIGTERM of a job into one ``KeyboardInterrupt`` (the run layer records
  the cells it runs ``interrupted``), ignores both between jobs and starts no job once the sweep is stopping;
- the launching process, on Ctrl-C or SIGTERM (from the terminal, which signals every process of the group, from a
  cluster's time limit, which signals every process of the job, or sent to it alone), passes it on to the workers
  that run a job, waits up to ``GRACE_S`` seconds for them to record it (a second signal stops waiting), then lets
  joblib kill every worker and raises ``KeyboardInterrupt``: the sweep's summary is printed and the command exits
  130 after Ctrl-C, 143 after SIGTERM (``clusterable.cli``); the same command redoes those cells.
"""

from __future__ import annotations

import os
import shutil
import signal
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

from joblib import Parallel, delayed

from clusterable import interrupts
from clusterable.outcomes import RECORDS_ENV

# Seconds the launching process waits, after Ctrl-C, for the running jobs to record their cells.
GRACE_S = 15.0
STOP_FILE = "stop"  # in the launch's control folder: no worker starts a job once it exists
# In the control folder: one empty file per worker that runs a job, named by its process id.
RUNNING = "running"

T = TypeVar("T")

_interrupted: list[int] = []  # the signal that interrupted this worker's job


def _interrupt_once(signum: int, frame: Any) -> None:
    """A worker's Ctrl-C or SIGTERM during a job: one ``KeyboardInterrupt``, the next ones ignored (the terminal,
    the cluster and the launching process may each send one). The flag, not only the handler, says so: Lightning
    restores the handler it found (this one) when it tears the trainer down after the first interrupt."""
    _ignore_interrupts()
    if _interrupted:
        return
    _interrupted.append(signum)
    raise KeyboardInterrupt


def _ignore_interrupts() -> None:
    # Not SIG_IGN: a signal pending at the switch would surface as "OSError: Signal 15 ignored due to race condition".
    for signum in interrupts.INTERRUPTS:
        signal.signal(signum, interrupts.held)


def in_worker(control: str, records: str | None, job: Callable[..., T], *args: Any) -> T | int | None:
    """Run ``job(*args)`` in a worker; None when the sweep was stopped before it, the signal that interrupted it
    (``signal.SIGINT``, ``signal.SIGTERM``) when it was stopped during it."""
    folder = Path(control)
    if (folder / STOP_FILE).exists():
        return None
    if records:  # a reused worker keeps the environment of the sweep that started it: this sweep's folder
        os.environ[RECORDS_ENV] = records
    _interrupted.clear()
    for signum in interrupts.INTERRUPTS:
        signal.signal(signum, _interrupt_once)
    running = folder / RUNNING / str(os.getpid())
    running.touch()
    try:
        return job(*args)
    except KeyboardInterrupt:  # the run layer recorded the cells; the launching process stops the sweep
        return int(_interrupted[0] if _interrupted else signal.SIGINT)
    finally:
        _ignore_interrupts()  # between jobs, stopping the sweep is the launching process's
        running.unlink(missing_ok=True)


def _stop_workers(folder: Path) -> None:
    """Ask the workers that run a job to record it (SIGINT) and wait until they have, at most ``GRACE_S`` s."""
    (folder / STOP_FILE).touch()
    for entry in (folder / RUNNING).iterdir():
        try:
            os.kill(int(entry.name), signal.SIGINT)
        except (ProcessLookupError, ValueError):
            pass
    deadline = time.monotonic() + GRACE_S
    while any((folder / RUNNING).iterdir()) and time.monotonic() < deadline:
        time.sleep(0.05)


def run_jobs(
    sweep_dir: Path, parallel: dict[str, Any], job: Callable[..., T], job_args: Sequence[tuple[Any, ...]]
) -> list[T]:
    """``job(*args)`` for every ``args`` of ``job_args`` on joblib's workers (``parallel``: ``joblib.Parallel``'s
    options), in order; on Ctrl-C or SIGTERM, the running jobs stopped as the module says, then
    ``KeyboardInterrupt``. A worker interrupted alone stops the sweep all the same, with its signal."""
    folder = sweep_dir / f".joblib-{os.getpid()}-{time.time_ns()}"
    (folder / RUNNING).mkdir(parents=True)
    stopping: list[bool] = []

    def on_ctrl_c(signum: int, frame: Any) -> None:
        """Ctrl-C or SIGTERM: the running jobs recorded, then the sweep stops."""
        if stopping:  # a second signal: stop waiting, joblib kills the workers now
            raise KeyboardInterrupt
        stopping.append(True)
        interrupts.note(signum)  # the command's exit status: 130 or 143
        _stop_workers(folder)
        raise KeyboardInterrupt  # joblib aborts: it kills every worker, idle ones included

    previous = {signum: signal.signal(signum, on_ctrl_c) for signum in interrupts.INTERRUPTS}
    records = os.environ.get(RECORDS_ENV)
    try:
        results = Parallel(**parallel)(delayed(in_worker)(str(folder), records, job, *args) for args in job_args)
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        shutil.rmtree(folder, ignore_errors=True)
    stopped = [r for r in results if r is None or isinstance(r, int)]
    if stopped:
        interrupts.note(next((r for r in stopped if r is not None), signal.SIGINT))
        raise KeyboardInterrupt
    return results
