"""``hydra/launcher=joblib`` for ``train.py -m``: Hydra's joblib launcher, made to stop on Ctrl-C and SIGTERM.
Registered by ``joblib_launcher`` (Hydra's plugin scan skips this module, whose name starts with ``_``), which
imports it only where Hydra's joblib launcher is installed (the ``launchers`` extra).

Stored as ``hydra/launcher=joblib`` in place of Hydra's, with the same options; each cell is one job on the
workers of ``_workers``, which record a running cell ``interrupted`` on Ctrl-C or SIGTERM and stop the sweep
(exit 130 or 143; the same command redoes those cells), where Hydra's own launcher lets the signal reach its
workers in any state.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from hydra.core.hydra_config import HydraConfig
from hydra.core.singleton import Singleton
from hydra.core.utils import JobReturn, configure_log, filter_overrides, run_job, setup_globals
from hydra.types import TaskFunction
from hydra_plugins.hydra_joblib_launcher import joblib_launcher
from hydra_plugins.hydra_joblib_launcher._core import process_joblib_cfg
from omegaconf import DictConfig, open_dict

from clusterable.hydra_callbacks import CommandLineError
from clusterable.run.context import PARALLEL_JOBS
from hydra_plugins.clusterable_launcher._workers import run_jobs

log = logging.getLogger(__name__)


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
        """Run the cells on joblib's workers (Hydra's ``_core.launch``: ``execute_job`` a cell); on Ctrl-C, stop
        them as ``_workers`` says and raise ``KeyboardInterrupt``."""
        setup_globals()
        assert self.config is not None and self.task_function is not None and self.hydra_context is not None
        configure_log(self.config.hydra.hydra_logging, self.config.hydra.verbose)
        sweep_dir = Path(str(self.config.hydra.sweep.dir))
        sweep_dir.mkdir(parents=True, exist_ok=True)
        joblib_cfg = dict(self.joblib)
        joblib_cfg["backend"] = "loky"  # as Hydra's: the threading backend is incompatible with Hydra
        process_joblib_cfg(joblib_cfg)
        log.info(
            f"Joblib.Parallel({','.join(f'{k}={v}' for k, v in joblib_cfg.items())}) is launching "
            f"{len(job_overrides)} jobs"
        )
        log.info(f"Launching jobs, sweep output dir : {sweep_dir}")
        for idx, overrides in enumerate(job_overrides):
            log.info(f"\t#{idx} : {' '.join(filter_overrides(overrides))}")

        singletons = Singleton.get_state()
        jobs = [
            (
                initial_job_idx + idx,
                overrides,
                self.hydra_context,
                self.config,
                self.task_function,
                singletons,
            )
            for idx, overrides in enumerate(job_overrides)
        ]
        n_jobs = int(joblib_cfg["n_jobs"])  # joblib's -1 is every core, -2 all but one, ...
        parallel = n_jobs if n_jobs > 0 else max(1, (os.cpu_count() or 1) + 1 + n_jobs)
        return run_jobs(sweep_dir, joblib_cfg, execute_job, [(*job, min(parallel, len(jobs))) for job in jobs])


def execute_job(
    idx: int,
    overrides: Sequence[str],
    hydra_context: Any,
    config: DictConfig,
    task_function: TaskFunction,
    singletons: dict[Any, Any],
    parallel: int,
) -> JobReturn:
    """Hydra's joblib ``execute_job`` (one cell in a worker), which also writes into the cell's config how many
    cells run side by side (``hydra.launcher.parallel_jobs``: the run divides the cores among them)."""
    setup_globals()
    Singleton.set_state(singletons)
    sweep_config = hydra_context.config_loader.load_sweep_config(config, list(overrides))
    with open_dict(sweep_config):
        sweep_config.hydra.job.id = f"{sweep_config.hydra.job.name}_{idx}"
        sweep_config.hydra.job.num = idx
    with open_dict(sweep_config.hydra.launcher):  # a structured node (JobLibLauncherConf): opened on its own
        sweep_config.hydra.launcher[PARALLEL_JOBS] = parallel
    HydraConfig.instance().set_config(sweep_config)
    return run_job(
        hydra_context=hydra_context,
        config=sweep_config,
        task_function=task_function,
        job_dir_key="hydra.sweep.dir",
        job_subdir_key="hydra.sweep.subdir",
    )
