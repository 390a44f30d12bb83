"""``hydra/launcher=joblib`` for ``train.py -m``: Hydra's joblib launcher, made to stop on Ctrl-C and SIGTERM.
Registered by ``joblib_launcher`` (Hydra's plugin scan skips this module, whose name starts with ``_``), which
imports it only where Hydra's joblib launcher is installed (the ``launchers`` extra).

Hydra's own launcher lets Ctrl-C reach its workers in any state: a worker interrupted mid-cell hands the
``KeyboardInterrupt`` to loky (a traceback) and takes the next cell, an idle one dies, and the launching process may
kill the workers before they have recorded their cells. Here (stored as ``hydra/launcher=joblib`` in place of
Hydra's, with the same options):

- each worker turns the first Ctrl-C or SIGTERM of a cell into one ``KeyboardInterrupt`` (the run layer records
  the cell ``interrupted``), ignores both between cells and starts no cell once the sweep is stopping;
- the launching process, on Ctrl-C or SIGTERM (from the terminal, which signals every process of the group, from a
  cluster's time limit, which signals every process of the job, or sent to it alone), passes it on to the workers
  that run a cell, waits up to ``GRACE_S`` seconds for them to record it (a second signal stops waiting), then lets
  joblib kill every worker and raises ``KeyboardInterrupt``: the sweep's summary is printed and the command exits
  130 after Ctrl-C, 143 after SIGTERM (``clusterable.cli``); the same command redoes those cells.
"""

from __future__ import annotations

import logging
import os
import shutil
import signal
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from hydra.core.singleton import Singleton
from hydra.core.utils import JobReturn, configure_log, filter_overrides, setup_globals
from hydra.types import TaskFunction
from hydra_plugins.hydra_joblib_launcher import joblib_launcher
from hydra_plugins.hydra_joblib_launcher._core import execute_job, process_joblib_cfg
from joblib import Parallel, delayed
from omegaconf import DictConfig

from clusterable import interrupts
from clusterable.hydra_callbacks import RECORDS_ENV, CommandLineError

log = logging.getLogger(__name__)

# Seconds the launching process waits, after Ctrl-C, for the running cells to record themselves.
GRACE_S = 15.0
STOP_FILE = "stop"  # in the launch's control folder: no worker starts a cell once it exists
# In the control folder: one empty file per worker that runs a cell, named by its process id.
RUNNING = "running"


_interrupted: list[int] = []  # the signal that interrupted this worker's cell


def _interrupt_once(signum: int, frame: Any) -> None:
    """A worker's Ctrl-C or SIGTERM during a cell: one ``KeyboardInterrupt``, the next ones ignored (the terminal,
    the cluster and the launching process may each send one). The flag, not only the handler, says so: Lightning
    restores the handler it found (this one) when it tears the trainer down after the first interrupt."""
    _ignore_interrupts()
    if _interrupted:
        return
    _interrupted.append(signum)
    raise KeyboardInterrupt


def _ignore_interrupts() -> None:
    for signum in interrupts.INTERRUPTS:
        signal.signal(signum, signal.SIG_IGN)


def run_cell(
    idx: int,
    overrides: Sequence[str],
    hydra_context: Any,
    config: DictConfig,
    task_function: TaskFunction,
    singleton_state: dict[Any, Any],
    control: str,
    records: str | None,
) -> JobReturn | int | None:
    """Run one cell in a worker (Hydra's ``execute_job``); None when the sweep was stopped before it, the signal
    that interrupted it (``signal.SIGINT``, ``signal.SIGTERM``) when it was stopped during it."""
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
        return execute_job(idx, overrides, hydra_context, config, task_function, singleton_state)
    except KeyboardInterrupt:  # the run layer recorded the cell; the launching process stops the sweep
        return int(_interrupted[0] if _interrupted else signal.SIGINT)
    finally:
        _ignore_interrupts()  # between cells, stopping the sweep is the launching process's
        running.unlink(missing_ok=True)


def _stop_workers(folder: Path) -> None:
    """Ask the workers that run a cell to record it (SIGINT) and wait until they have, at most ``GRACE_S`` s."""
    (folder / STOP_FILE).touch()
    for entry in (folder / RUNNING).iterdir():
        try:
            os.kill(int(entry.name), signal.SIGINT)
        except (ProcessLookupError, ValueError):
            pass
    deadline = time.monotonic() + GRACE_S
    while any((folder / RUNNING).iterdir()) and time.monotonic() < deadline:
        time.sleep(0.05)


class JoblibLauncher(joblib_launcher.JoblibLauncher):
    """Hydra's ``JoblibLauncher`` (same options) whose sweep stops on Ctrl-C, its workers included."""

    def setup(self, *, hydra_context: Any, task_function: TaskFunction, config: DictConfig) -> None:
        """Hydra's setup, with ``n_jobs`` checked before any cell runs (joblib refuses 0 only once it starts)."""
        n_jobs = self.joblib.get("n_jobs")
        if isinstance(n_jobs, bool) or not isinstance(n_jobs, int) or n_jobs == 0:
            raise CommandLineError(
                f"hydra.launcher.n_jobs must be a number of workers (1 or more, or -1 for one per core), got {n_jobs!r}"
            )
        super().setup(hydra_context=hydra_context, task_function=task_function, config=config)

    def launch(self, job_overrides: Sequence[Sequence[str]], initial_job_idx: int) -> Sequence[JobReturn]:
        """Run the cells on joblib's workers (Hydra's ``_core.launch``, with ``run_cell`` as the job); on Ctrl-C,
        stop them as the module says and raise ``KeyboardInterrupt``."""
        setup_globals()
        assert self.config is not None and self.task_function is not None and self.hydra_context is not None
        configure_log(self.config.hydra.hydra_logging, self.config.hydra.verbose)
        sweep_dir = Path(str(self.config.hydra.sweep.dir))
        sweep_dir.mkdir(parents=True, exist_ok=True)
        folder = sweep_dir / f".joblib-{os.getpid()}-{time.time_ns()}"
        (folder / RUNNING).mkdir(parents=True)
        joblib_cfg = dict(self.joblib)
        joblib_cfg["backend"] = "loky"  # as Hydra's: the threading backend is incompatible with Hydra
        process_joblib_cfg(joblib_cfg)
        log.info(f"Joblib.Parallel({','.join(f'{k}={v}' for k, v in joblib_cfg.items())}) is launching "
                 f"{len(job_overrides)} jobs")  # fmt: skip
        log.info(f"Launching jobs, sweep output dir : {sweep_dir}")
        for idx, overrides in enumerate(job_overrides):
            log.info(f"\t#{idx} : {' '.join(filter_overrides(overrides))}")

        stopping: list[bool] = []
        singletons = Singleton.get_state()

        def on_ctrl_c(signum: int, frame: Any) -> None:
            """Ctrl-C or SIGTERM: the running cells recorded, then the sweep stops."""
            if stopping:  # a second signal: stop waiting, joblib kills the workers now
                raise KeyboardInterrupt
            stopping.append(True)
            interrupts.note(signum)  # the command's exit status: 130 or 143
            _stop_workers(folder)
            raise KeyboardInterrupt  # joblib aborts: it kills every worker, idle ones included

        previous = {signum: signal.signal(signum, on_ctrl_c) for signum in interrupts.INTERRUPTS}
        try:
            runs = Parallel(**joblib_cfg)(
                delayed(run_cell)(
                    initial_job_idx + idx,
                    overrides,
                    self.hydra_context,
                    self.config,
                    self.task_function,
                    singletons,
                    str(folder),
                    os.environ.get(RECORDS_ENV),
                )
                for idx, overrides in enumerate(job_overrides)
            )
        finally:
            for signum, handler in previous.items():
                signal.signal(signum, handler)
            shutil.rmtree(folder, ignore_errors=True)
        stopped = [r for r in runs if not isinstance(r, JobReturn)]
        if stopped:  # a worker alone was interrupted: the sweep stops all the same, with the worker's signal
            interrupts.note(next((r for r in stopped if r is not None), signal.SIGINT))
            raise KeyboardInterrupt
        return runs
