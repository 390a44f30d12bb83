"""``hydra/sweeper=optuna``: a hyperparameter search with Optuna, batch by batch through the configured launcher.

Each batch asks Optuna for ``n_jobs`` trials, launches them as one sweep batch (so under ``hydra/launcher=stacked``
the trials that differ only in stacked axes, ``optimizer.lr``, ``loss.lam``, ``seed``, train as one stacked model,
and under ``hydra/launcher=joblib`` they run side by side), and tells Optuna each trial's ``optimized_metric`` (a
trial that failed or diverged is a failed trial). The study lives in the sweep folder (``optuna.db``, SQLite), so
the same command resumes it: finished trials count, trials cut off by Ctrl-C are failed and asked again, and it
stops at ``n_trials`` finished ones. The best trial is printed and written to ``optimization_results.yaml``.

The search space, in ``hydra.sweeper.search_space`` (an ``hparams_search/`` file sets it):

.. code-block:: yaml

    search_space:
      loss.lam: {type: float, low: 0.05, high: 1.0}
      optimizer.lr: {type: float, low: 1.0e-4, high: 1.0e-2, log: true}
      model: {type: categorical, choices: [ffnn, cnn]}

Needs Optuna (``pip install 'clusterable[optuna]'``); without it the command ends in one line naming the extra.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from hydra.core.config_store import ConfigStore
from hydra.core.plugins import Plugins
from hydra.core.utils import JobStatus
from hydra.plugins.sweeper import Sweeper
from omegaconf import DictConfig, OmegaConf

from clusterable.hydra_callbacks import CommandLineError

TYPES = ("float", "int", "categorical")
MISSING_EXTRA = "hydra/sweeper=optuna needs Optuna: pip install 'clusterable[optuna]'"


def distributions(search_space: Any) -> dict[str, Any]:
    """Optuna's distributions of ``search_space`` ({key: {type, low, high, log, step, choices}}); one-line
    ``CommandLineError`` for anything else."""
    try:
        import optuna
    except ImportError:
        raise CommandLineError(MISSING_EXTRA) from None
    space = (
        OmegaConf.to_container(search_space, resolve=True)
        if isinstance(search_space, DictConfig)
        else search_space
    )
    if not isinstance(space, Mapping) or not space:
        raise CommandLineError("hydra.sweeper.search_space must map config keys to their ranges, e.g. "
                               "{loss.lam: {type: float, low: 0.05, high: 1.0}}")  # fmt: skip
    out = {}
    for key, spec in space.items():
        where = f"hydra.sweeper.search_space.{key}"
        if not isinstance(spec, Mapping) or spec.get("type") not in TYPES:
            raise CommandLineError(f"{where} needs type: float, int or categorical, got {spec!r}")
        kind = spec["type"]
        allowed = {"type", "choices"} if kind == "categorical" else {"type", "low", "high", "log", "step"}
        if unknown := sorted(set(spec) - allowed):
            raise CommandLineError(
                f"{where}: {unknown[0]} is not an option of a {kind} range ({', '.join(allowed)})"
            )
        try:
            if kind == "categorical":
                out[key] = optuna.distributions.CategoricalDistribution(list(spec["choices"]))
            elif kind == "float":
                out[key] = optuna.distributions.FloatDistribution(float(spec["low"]), float(spec["high"]),
                                                                  log=bool(spec.get("log", False)),
                                                                  step=spec.get("step"))  # fmt: skip
            else:
                out[key] = optuna.distributions.IntDistribution(int(spec["low"]), int(spec["high"]),
                                                                log=bool(spec.get("log", False)),
                                                                step=int(spec.get("step", 1)))  # fmt: skip
        except (KeyError, TypeError, ValueError) as e:
            missing = f"needs {e}" if isinstance(e, KeyError) else str(e).splitlines()[0]
            raise CommandLineError(f"{where}: {missing}") from None
    return out


class OptunaSweeper(Sweeper):
    """Optuna's ask-and-tell over batches of ``n_jobs`` trials, each batch launched by the configured launcher."""

    def __init__(
        self,
        search_space: Any = None,
        n_trials: int = 20,
        n_jobs: int = 1,
        direction: str = "maximize",
        sampler: str = "tpe",
        seed: int = 0,
        storage: str | None = None,
        study_name: str | None = None,
        params: Any = None,
    ) -> None:
        self.search_space, self.n_trials, self.n_jobs, self.direction = (
            search_space,
            n_trials,
            n_jobs,
            direction,
        )
        self.sampler, self.seed, self.storage, self.study_name = sampler, seed, storage, study_name
        self.params = params or {}
        self.config: DictConfig | None = None
        self.launcher: Any = None

    def setup(self, *, hydra_context: Any, task_function: Any, config: DictConfig) -> None:
        for name, value, low in (("n_trials", self.n_trials, 1), ("n_jobs", self.n_jobs, 1)):
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                raise CommandLineError(
                    f"hydra.sweeper.{name} must be a whole number of at least {low}, got {value!r}"
                )
        if self.direction not in ("maximize", "minimize"):
            raise CommandLineError(
                f"hydra.sweeper.direction must be maximize or minimize, got {self.direction!r}"
            )
        if self.sampler not in ("tpe", "random"):
            raise CommandLineError(f"hydra.sweeper.sampler must be tpe or random, got {self.sampler!r}")
        self.config = config
        self.launcher = Plugins.instance().instantiate_launcher(
            hydra_context=hydra_context, task_function=task_function, config=config
        )

    def sweep(self, arguments: list[str]) -> Any:
        import optuna

        assert self.config is not None
        space = distributions(self.search_space)
        fixed = [*(f"{k}={v}" for k, v in dict(self.params).items()), *arguments]
        if clash := sorted({a.split("=")[0].lstrip("+~") for a in fixed} & set(space)):
            raise CommandLineError(f"{clash[0]} is both searched (hydra.sweeper.search_space) and set")
        folder = Path(str(self.config.hydra.sweep.dir))
        folder.mkdir(parents=True, exist_ok=True)
        optuna.logging.set_verbosity(optuna.logging.WARNING)
        study = optuna.create_study(
            study_name=self.study_name or str(self.config.name), direction=self.direction,
            storage=self.storage or f"sqlite:///{(folder / 'optuna.db').resolve()}", load_if_exists=True,
        )  # fmt: skip
        # Seeded by the trials already in the study too: a resumed search goes on drawing, where the bare seed would
        # replay the first session's draws.
        seed = self.seed + len(study.trials)
        study.sampler = (optuna.samplers.TPESampler(seed=seed) if self.sampler == "tpe"
                         else optuna.samplers.RandomSampler(seed=seed))  # fmt: skip
        for trial in study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.RUNNING,)):
            study.tell(trial.number, state=optuna.trial.TrialState.FAIL)  # cut off by an earlier Ctrl-C
        finished = (optuna.trial.TrialState.COMPLETE, optuna.trial.TrialState.FAIL)
        done = len(study.get_trials(deepcopy=False, states=finished))
        if done:
            print(f"optuna: resuming study {study.study_name}: {done} of {self.n_trials} trials finished")
        returns = []
        while done < self.n_trials:
            batch = [study.ask(space) for _ in range(min(self.n_jobs, self.n_trials - done))]
            overrides = [[*fixed, *(f"{k}={_value(t.params[k])}" for k in space)] for t in batch]
            results = self.launcher.launch(overrides, initial_job_idx=done)
            for trial, result in zip(batch, results, strict=True):
                value = result.return_value if result.status == JobStatus.COMPLETED else None
                if isinstance(value, int | float) and math.isfinite(value):
                    study.tell(trial, float(value))
                else:
                    study.tell(trial, state=optuna.trial.TrialState.FAIL)
            returns.append(results)
            done += len(batch)
        _report(study, folder, self.config)
        return returns


def _value(value: Any) -> str:
    return repr(value) if isinstance(value, float) else str(value)


def _report(study: Any, folder: Path, config: DictConfig) -> None:
    """The best trial, printed and written to ``optimization_results.yaml``."""
    import optuna

    complete = study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,))
    if not complete:
        print(f"optuna: no trial of {len(study.trials)} finished with a value of {config.optimized_metric}")
        return
    best = study.best_trial
    result = {"name": study.study_name, "metric": str(config.optimized_metric), "direction": study.direction.name
              .lower(), "best_value": best.value, "best_params": best.params, "trial": best.number,
              "trials": len(study.trials), "complete": len(complete)}  # fmt: skip
    OmegaConf.save(OmegaConf.create(result), folder / "optimization_results.yaml")
    params = " ".join(f"{k}={_value(v)}" for k, v in best.params.items())
    print(f"optuna: best {config.optimized_metric} {best.value:.4f} at trial {best.number}: {params} "
          f"({len(complete)} of {len(study.trials)} trials complete)")  # fmt: skip


# A node, not a dataclass: Hydra's plugin scan executes this module outside ``sys.modules``.
ConfigStore.instance().store(
    group="hydra/sweeper",
    name="optuna",
    provider="clusterable",
    node=OmegaConf.create({
        "_target_": "hydra_plugins.clusterable_sweeper.optuna_sweeper.OptunaSweeper", "search_space": None,
        "n_trials": 20, "n_jobs": 1, "direction": "maximize", "sampler": "tpe", "seed": 0, "storage": None,
        "study_name": None, "params": None,
    }),
)  # fmt: skip
