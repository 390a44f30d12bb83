"""``hydra/launcher=stacked`` for ``train.py -m``: the cells of a grid that differ only in their seed, learning
rate or a loss weight train as one stacked model in this process (``clusterable.stacked``).

The launcher resolves every cell's config, groups the cells by the rule of ``clusterable.stacked.grouping`` (at
most ``max_members`` a group) and, group by group: prepares each cell as its single run would (a finished cell is
skipped, a busy one left alone: ``run.prepare``), trains the rest as one stack and records each as its own run.
A cell that fits no group, or a group that cannot stack after all, runs exactly as under Hydra's basic launcher.
Grouping, the summary line and the exit status stay per cell.

Options: ``hydra.launcher.max_members`` (default 40), the most cells one stack trains; fewer where memory is short
(the stack says so). ``hydra.launcher.speed_check`` (default true): a group whose stacked training is projected
slower than its members' one by one on this device runs them one by one, saying so with both timings
(``clusterable.stacked.speed``); ``false`` stacks every group that can stack. ``hydra.launcher.compile`` (default
``auto``): the step compiled (``torch.compile``) where its group's training is long enough to pay for it and the
compiled step measures faster; ``true`` times the compiled step for every group, ``false`` never compiles.
``hydra.launcher.n_jobs`` (default 1): how many groups train at once, each in its own worker process on the same
device (``_workers``: joblib's loky processes, which stop on Ctrl-C as the joblib launcher's do). A group takes
1/``n_jobs`` of the device's free memory and of the CPU cores (``run.training.cpu_threads``), so a GPU that one
group leaves mostly idle (COREL's FFNN stacks) runs several. ``auto``: on a CPU, one group a core (at most
``AUTO_JOBS``, at most the groups), for grids of many small groups whose steps cannot use more than one thread
(CSRL's per-sample AEs: ``hydra/launcher=stacked_per_core``, which ``csrl/fig2`` chooses); on a GPU, 1.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hydra.core.config_store import ConfigStore
from hydra.core.hydra_config import HydraConfig
from hydra.core.singleton import Singleton
from hydra.core.utils import JobReturn, JobStatus, configure_log, filter_overrides, run_job, setup_globals
from hydra.plugins.launcher import Launcher
from hydra.types import TaskFunction
from omegaconf import DictConfig, OmegaConf, open_dict, read_write

from clusterable.hydra_callbacks import CommandLineError
from clusterable.logs import get_logger
from clusterable.record import RunRecord
from clusterable.run.context import PARALLEL_JOBS
from hydra_plugins.clusterable_launcher._workers import run_jobs

if TYPE_CHECKING:
    from clusterable.run import Prepared

log = logging.getLogger(__name__)  # Hydra's "Launching jobs" lines, as its own launchers log them
say = get_logger(__name__)  # the console lines of the launcher

AUTO_JOBS = 8  # the most groups ``n_jobs=auto`` trains at once on a CPU (each worker holds its own torch)


class StackedLauncher(Launcher):
    """Runs a sweep's cells in this process, stacking those that differ only along stacked axes."""

    def __init__(
        self,
        max_members: int = 40,
        speed_check: bool = True,
        compile: bool | str = "auto",
        n_jobs: int | str = 1,
    ) -> None:
        self.max_members, self.speed_check, self.compile = max_members, speed_check, compile
        self.n_jobs = n_jobs
        # Cells' sweep configs the sweeper composed already (its overrides -> the config), each used once.
        self.composed: dict[tuple[str, ...], DictConfig] = {}
        self.config: DictConfig | None = None
        self.task_function: TaskFunction | None = None
        self.hydra_context: Any = None

    def setup(self, *, hydra_context: Any, task_function: TaskFunction, config: DictConfig) -> None:
        """Keep Hydra's context; the options are checked here, before any cell runs (one line, exit 2)."""
        members = self.max_members
        if isinstance(members, bool) or not isinstance(members, int) or members < 1:
            raise CommandLineError(f"hydra.launcher.max_members must be a number of cells (1 or more), got {members!r}")
        jobs = self.n_jobs
        if jobs != "auto" and (isinstance(jobs, bool) or not isinstance(jobs, int) or jobs < 1):
            raise CommandLineError(
                f"hydra.launcher.n_jobs must be a number of groups trained at once (1 or more) or auto, got {jobs!r}"
            )
        if not isinstance(self.speed_check, bool):
            raise CommandLineError(f"hydra.launcher.speed_check must be true or false, got {self.speed_check!r}")
        if not (isinstance(self.compile, bool) or self.compile == "auto"):
            raise CommandLineError(f"hydra.launcher.compile must be auto, true or false, got {self.compile!r}")
        self.config, self.hydra_context, self.task_function = config, hydra_context, task_function

    def launch(self, job_overrides: Sequence[Sequence[str]], initial_job_idx: int) -> Sequence[JobReturn]:
        from clusterable.stacked.grouping import plan, why_not_stackable

        setup_globals()
        assert self.config is not None and self.hydra_context is not None
        configure_log(self.config.hydra.hydra_logging, self.config.hydra.verbose)
        Path(str(self.config.hydra.sweep.dir)).mkdir(parents=True, exist_ok=True)
        say.info(f"stacked: grouping {len(job_overrides)} cells (each config composed and resolved once)")
        configs = [self._sweep_config(initial_job_idx + i, o) for i, o in enumerate(job_overrides)]
        resolved = [_resolved(c) for c in configs]
        groups = plan(resolved, self.max_members)
        alone: dict[str, int] = {}  # why cells cannot stack -> how many: said once each, before anything trains
        for config in resolved:
            if config is not None and (why := why_not_stackable(dict(config))) is not None:
                alone[why] = alone.get(why, 0) + 1
        for why, count in alone.items():
            say.info(f"stacked: {count} of {len(job_overrides)} cells run alone: {why}")
        jobs = self.n_jobs if self.n_jobs != "auto" else auto_jobs(resolved, len(groups))
        for config in configs:  # the number each cell's run divides the cores and the memory by
            with read_write(config.hydra), open_dict(config.hydra):
                config.hydra.launcher[PARALLEL_JOBS] = jobs
        stacks = sum(len(g) > 1 for g in groups)
        where = "in this process" if jobs == 1 else f"{jobs} groups at a time"
        log.info(f"Launching {len(job_overrides)} jobs {where}: {stacks} stacked groups")
        for group in groups:
            for i in group:
                log.info(f"\t#{initial_job_idx + i} : {' '.join(filter_overrides(job_overrides[i]))}")
        group_configs = [[configs[i] for i in group] for group in groups]
        if jobs > 1 and len(groups) > 1:
            auto = " (hydra.launcher.n_jobs=auto: a group a core)" if self.n_jobs == "auto" else ""
            say.info(f"stacked: {len(groups)} groups, {min(jobs, len(groups))} at a time{auto}")
            done = run_jobs(
                Path(str(self.config.hydra.sweep.dir)),
                {"n_jobs": jobs, "backend": "loky"},
                _group_in_worker,
                [
                    (self._options(), self.hydra_context, self.config, self.task_function, Singleton.get_state(), g)
                    for g in group_configs
                ],
            )
        else:
            done = [self.run_group(g) for g in group_configs]
        runs: list[JobReturn | None] = [None] * len(configs)
        for group, returns in zip(groups, done, strict=True):
            for i, ret in zip(group, returns, strict=True):
                runs[i] = ret
        return [r for r in runs if r is not None]

    def run_group(self, sweep_configs: list[DictConfig]) -> list[JobReturn]:
        """One group's cells, in order: a lone cell as its single run, more as one stack."""
        if len(sweep_configs) == 1:
            returns = [self._single(sweep_configs[0])]
        else:
            stacked = self._stack(sweep_configs)
            returns = [stacked[i] for i in range(len(sweep_configs))]
        assert self.config is not None
        configure_log(self.config.hydra.hydra_logging, self.config.hydra.verbose)
        return returns

    def _options(self) -> dict[str, Any]:
        return {"max_members": self.max_members, "speed_check": self.speed_check, "compile": self.compile}

    def _sweep_config(self, idx: int, overrides: Sequence[str]) -> DictConfig:
        sweep_config = self.composed.pop(tuple(overrides), None)
        if sweep_config is None:
            sweep_config = self.hydra_context.config_loader.load_sweep_config(self.config, list(overrides))
        with open_dict(sweep_config):
            sweep_config.hydra.job.id = idx
            sweep_config.hydra.job.num = idx
        return sweep_config

    def _single(self, sweep_config: DictConfig) -> JobReturn:
        """The cell as Hydra's basic launcher runs it."""
        return run_job(
            hydra_context=self.hydra_context,
            task_function=self.task_function,
            config=sweep_config,
            job_dir_key="hydra.sweep.dir",
            job_subdir_key="hydra.sweep.subdir",
        )

    def _stack(self, sweep_configs: list[DictConfig]) -> dict[int, JobReturn]:
        """Prepare each cell in its job (run dir, ``.hydra``, log), train those that need it as one stack."""
        from clusterable.run import Prepared, RunContext, prepare
        from clusterable.run.cell import held_here
        from clusterable.stacked.stack import record_unfinished

        def prepare_job(cfg: DictConfig) -> Any:
            return prepare(cfg, RunContext.from_hydra(HydraConfig.get(), optimized_metric=cfg.get("optimized_metric")))

        returns: dict[int, JobReturn] = {}
        pending: dict[int, Prepared] = {}
        try:
            for i, sweep_config in enumerate(sweep_configs):
                ret = run_job(
                    hydra_context=self.hydra_context,
                    task_function=prepare_job,
                    config=sweep_config,
                    job_dir_key="hydra.sweep.dir",
                    job_subdir_key="hydra.sweep.subdir",
                )
                returns[i] = ret
                if ret.status == JobStatus.COMPLETED and isinstance(ret.return_value, Prepared):
                    pending[i] = ret.return_value
                    ret.return_value = None
                elif ret.status == JobStatus.COMPLETED and isinstance(ret.return_value, RunRecord):
                    ret.return_value = ret.return_value.optimized()  # a finished run reused, as train.py
            self._train(pending, sweep_configs, returns)
        except BaseException as e:
            # A full disk (Hydra's files of the next cell), Ctrl-C or SIGTERM, a bug outside the members' records:
            # the cells prepared (locked, cleaned) and not recorded yet are recorded as their single runs would
            # record it, then the sweep stops as under the basic launcher.
            record_unfinished([c for c in pending.values() if held_here(c.ctx.run_dir)], e)
            raise
        return returns

    def _train(
        self, pending: dict[int, Prepared], sweep_configs: list[DictConfig], returns: dict[int, JobReturn]
    ) -> None:
        """Train the ``pending`` (prepared) cells as one stack, those that cannot stack as single runs."""
        from clusterable.stacked.stack import run_stack

        cells = list(pending.values())
        if len(cells) == 1:  # the others were finished or busy: the one left runs as a single run
            i = next(iter(pending))
            returns[i] = self._single(sweep_configs[i])
            return
        if cells:
            alone = {id(c) for c in run_stack(cells, speed_check=self.speed_check, compile=self.compile)}
            for i, cell in pending.items():
                if id(cell) in alone:
                    returns[i] = self._single(sweep_configs[i])
                else:
                    returns[i].return_value = cell.record.optimized()


def _group_in_worker(
    options: dict[str, Any],
    hydra_context: Any,
    config: DictConfig,
    task_function: TaskFunction,
    singletons: dict[Any, Any],
    sweep_configs: list[DictConfig],
) -> list[JobReturn]:
    """A group trained in a worker process (``n_jobs`` > 1): Hydra's state as the launching process had it, then
    the group as a launcher of one job runs it."""
    setup_globals()
    Singleton.set_state(singletons)
    launcher = StackedLauncher(**options)
    launcher.setup(hydra_context=hydra_context, task_function=task_function, config=config)
    configure_log(config.hydra.hydra_logging, config.hydra.verbose)
    return launcher.run_group(sweep_configs)


def auto_jobs(resolved: Sequence[dict[str, Any] | None], groups: int) -> int:
    """``n_jobs=auto``: 1 where the cells train on a GPU (``trainer.accelerator`` gpu or cuda, or auto with one
    there); else one group a CPU core, at most ``AUTO_JOBS`` and at most ``groups``."""
    import torch

    accelerators = {str(((r or {}).get("trainer") or {}).get("accelerator", "cpu")) for r in resolved}
    if accelerators & {"gpu", "cuda"} or ("auto" in accelerators and torch.cuda.is_available()):
        return 1
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return max(1, min(cores, AUTO_JOBS, groups))


def _resolved(sweep_config: DictConfig) -> dict[str, Any] | None:
    """The cell's config resolved as its run resolves it (its group choices and output folder set), for grouping;
    None when it does not resolve (it runs alone, and its run says why). The output folder is set on
    ``sweep_config`` itself, to the value ``run_job`` sets again. The task's keys are resolved where they are (no
    copy of the config without its ``hydra`` node: 540 cells in ``csrl/fig2``)."""
    from omegaconf import Container

    from clusterable import resolvers

    config = sweep_config
    hydra_config = HydraConfig.instance()
    previous = hydra_config.cfg
    # ${hydra:...} (in the sweep folder's name and in the task) reads ``HydraConfig.get()``, the ``hydra`` node of
    # ``cfg``: the cell's own, in place (``set_config`` would copy it, 540 times in csrl/fig2).
    hydra_config.cfg = config
    try:
        output_dir = os.path.abspath(Path(str(config.hydra.sweep.dir), str(config.hydra.sweep.subdir)))
        with read_write(config.hydra.runtime), open_dict(config.hydra.runtime):  # as run_job sets it
            config.hydra.runtime.output_dir = output_dir
        choices = {
            k: v for k, v in OmegaConf.to_container(config.hydra.runtime.choices).items() if not k.startswith("hydra/")
        }
        with resolvers.group_choices(choices), resolvers.collect_notes():
            out: dict[str, Any] = {}
            for key in config:
                if key != "hydra":
                    value = config[key]  # a container as it is, a value resolved
                    out[str(key)] = (
                        OmegaConf.to_container(value, resolve=True, throw_on_missing=True)
                        if isinstance(value, Container)
                        else value
                    )
            return out
    except Exception:
        return None
    finally:
        hydra_config.cfg = previous


# A node, not a dataclass: Hydra's plugin scan executes this module outside ``sys.modules``.
ConfigStore.instance().store(
    group="hydra/launcher",
    name="stacked",
    node=OmegaConf.create(
        {
            "_target_": "hydra_plugins.clusterable_launcher.stacked_launcher.StackedLauncher",
            "max_members": 40,
            "speed_check": True,
            "compile": "auto",
            "n_jobs": 1,
        }
    ),
    provider="clusterable",
)
