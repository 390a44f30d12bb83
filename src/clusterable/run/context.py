"""What a run needs to know about how it was launched, read from Hydra once, at the command line.

Nothing below the command line (``clusterable.cli``) reads Hydra's global state: the run layer gets this record.
A test builds one from a composed config's ``hydra`` node (``RunContext.from_hydra(cfg.hydra, run_dir)``) and calls
``clusterable.run.run(cfg, ctx)`` without Hydra running.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from clusterable.pruning import TrialLink, link_for

# The key of the launcher's node (``hydra.launcher.parallel_jobs``) into which every launcher that runs local cells
# side by side writes, in each cell's config, how many it runs at once, resolved to a number (the joblib
# launcher's ``n_jobs=-1``, the stacked launcher's ``n_jobs=auto``). A launcher that runs a cell alone on its
# machine (the basic one, SLURM's: one job a cell) writes nothing: 1.
PARALLEL_JOBS = "parallel_jobs"
# The sweeper options that run a hyperparameter search (``hydra/sweeper=optuna``): a run's objective is checked.
SEARCH_SWEEPERS = ("optuna",)


@dataclass(frozen=True)
class RunContext:
    """How one run was launched.

    Attributes:
        run_dir: the run's directory (Hydra's output dir: ``outputs/multirun/<mode>/<name>/<overrides>``).
        choices: the config group choices (``{"dataset": "digits", "loss": "cce", "debug": None, ...}``), Hydra's
            own groups (``hydra/...``) left out.
        overrides: the command line's (or the sweep cell's) overrides, for display and the record.
        job_name: Hydra's job name (its log file is ``<job_name>.log`` in ``run_dir``).
        single: a single run (``python train.py ...``), not a cell of a sweep (``-m``).
        parallel_jobs: how many local jobs run side by side (``hydra.launcher.parallel_jobs``, written by the
            launcher: the joblib launcher's workers, the stacked launcher's groups at once; 1 otherwise), so the
            default CPU threads divide the cores among them (and a stack the device's free memory).
        objectives: the metrics a hyperparameter search optimises (``optimized_metric`` under
            ``hydra/sweeper=optuna``: one key, or a multi-objective search's list), which the run must record;
            empty outside a search.
        trial: the search's trial this run is, where the search prunes (``pruning.TrialLink``: the run reports
            its objective every epoch and stops where Optuna prunes it); None otherwise.
    """

    run_dir: Path
    choices: Mapping[str, Any] = field(default_factory=dict)
    overrides: tuple[str, ...] = ()
    job_name: str = "train"
    single: bool = True
    parallel_jobs: int = 1
    objectives: tuple[str, ...] = ()
    trial: TrialLink | None = None

    @property
    def log_file(self) -> Path:
        """The run's log (``<job_name>.log`` in its folder): Hydra's job log, and the console lines about the run
        (``logs.run_log``)."""
        return self.run_dir / f"{self.job_name}.log"

    @classmethod
    def from_hydra(
        cls, hydra: DictConfig, run_dir: str | Path | None = None, optimized_metric: Any = None
    ) -> RunContext:
        """From Hydra's config node (``HydraConfig.get()``, or ``cfg.hydra`` of a config composed with
        ``return_hydra_config=True``); ``run_dir`` defaults to its ``runtime.output_dir``; ``optimized_metric``
        (the task config's) is the run's ``objective`` when Hydra's sweeper is a search (Optuna's)."""
        choices = {k: v for k, v in OmegaConf.to_container(hydra.runtime.choices).items() if not k.startswith("hydra/")}
        jobs = (hydra.get("launcher") or {}).get(PARALLEL_JOBS) or 1
        searching = hydra.runtime.choices.get("hydra/sweeper") in SEARCH_SWEEPERS
        overrides = tuple(OmegaConf.to_container(hydra.overrides.task, resolve=False))  # as typed
        if not searching or optimized_metric is None:
            objectives: tuple[str, ...] = ()
        elif isinstance(optimized_metric, str):
            objectives = (optimized_metric,)
        else:
            objectives = tuple(str(m) for m in optimized_metric)
        return cls(
            objectives=objectives,
            trial=link_for(hydra.sweep.dir, overrides) if searching else None,
            run_dir=Path(run_dir if run_dir is not None else hydra.runtime.output_dir),
            choices=choices,
            overrides=overrides,
            job_name=str(hydra.job.name),
            single=str(hydra.mode) in ("RUN", "RunMode.RUN"),
            parallel_jobs=max(1, int(jobs)),
        )
