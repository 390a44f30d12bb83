"""``hydra/sweeper=optuna``: a hyperparameter search with Optuna, batch by batch through the configured launcher.

Each batch asks Optuna for ``n_jobs`` trials, launches them as one sweep batch (so under ``hydra/launcher=stacked``
the trials that differ only in stacked axes, ``optimizer.lr``, ``loss.lam``, ``seed``, train as one stacked model,
and under ``hydra/launcher=joblib`` they run side by side), and tells Optuna each trial's ``optimized_metric`` (a
trial that failed or diverged is a failed trial). The study lives in the sweep folder (``optuna.db``, SQLite), so
the same command resumes it: completed trials and genuine failures count, trials cut off by Ctrl-C are kept apart
(failed, listed in the study's ``interrupted_trials``) and their parameters asked again first, and it stops at
``n_trials`` counted ones. The best trial is printed and written to ``optimization_results.yaml``.

The search space, in ``hydra.sweeper.search_space`` (an ``hparams_search/`` file sets it):

.. code-block:: yaml

    search_space:
      loss.lam: {type: float, low: 0.05, high: 1.0}
      optimizer.lr: {type: float, low: 1.0e-4, high: 1.0e-2, log: true}
      model: {type: categorical, choices: [ffnn, cnn]}

hydra-optuna-sweeper's (and so lightning-hydra-template's) search files run as they are: their ``params`` in
Hydra's sweep syntax (``interval(0.0001, 0.1)``, ``tag(log, interval(1e-4, 1e-1))``, ``choice(32, 64)``,
``range(1, 8)``, read as that plugin reads them: a range's ends both included; a plain value is set in every trial),
their ``sampler: {_target_: optuna.samplers.TPESampler, seed: ..., ...}`` block, and their ``_target_`` naming
hydra-optuna-sweeper's class, which ``hydra_callbacks.OptunaSweeperTarget`` points at this one where that plugin is
not installed (it pins optuna < 3). ``sampler`` is also a name: tpe, random, cmaes (``pip install cmaes``), qmc or
gp.

A study answers one question: its objective (``optimized_metric`` and ``direction``), its search space and the
config outside the searched keys (what changes no number left out: loggers, paths, threads). The question is kept
with the study (its ``question`` attribute); the same command resumes it, and any other question asked of the same
folder (another loss, metric, direction or space) is refused in one line naming what differs, never resumed as if
it were the first. The objective is checked before any trial trains: a key the run records (a trial refuses a
misspelt one before training), a direction that agrees with the metric's, and not the test split unless
``allow_test_objective: true`` says it is on purpose.

Needs Optuna (``pip install 'clusterable[optuna]'``); without it the command ends in one line naming the extra.
"""

from __future__ import annotations

import importlib.util
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from hydra.core.config_store import ConfigStore
from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.core.override_parser.types import ChoiceSweep, IntervalSweep, RangeSweep, Transformer
from hydra.core.plugins import Plugins
from hydra.core.utils import JobStatus
from hydra.errors import HydraException
from hydra.plugins.sweeper import Sweeper
from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf

from clusterable.config import ConfigError
from clusterable.hydra_callbacks import CommandLineError
from clusterable.metric_names import monitor_direction
from clusterable.outcomes import record_sweep_error
from clusterable.pruning import TrialLink, build_pruner, pruner_node, remove_link, write_link
from clusterable.record import PRUNED, RecordError, RunRecord
from clusterable.rundir import IGNORED_IN_COMPARISON

TYPES = ("float", "int", "categorical")
MISSING_EXTRA = "hydra/sweeper=optuna needs Optuna: pip install 'clusterable[optuna]'"


def load_optuna() -> Any:
    """The ``optuna`` module, imported on first use (an extra: the sweeper's module loads without it); its one
    line names the extra where it is not installed."""
    try:
        import optuna
    except ImportError:
        raise CommandLineError(MISSING_EXTRA) from None
    return optuna


def distributions(search_space: Any) -> dict[str, Any]:
    """Optuna's distributions of ``search_space`` ({key: {type, low, high, log, step, choices}}); one-line
    ``CommandLineError`` for anything else."""
    optuna = load_optuna()
    space = OmegaConf.to_container(search_space, resolve=True) if isinstance(search_space, DictConfig) else search_space
    if not isinstance(space, Mapping) or not space:
        raise CommandLineError(
            "hydra.sweeper.search_space must map config keys to their ranges, e.g. "
            "{loss.lam: {type: float, low: 0.05, high: 1.0}}"
        )
    out = {}
    for key, spec in space.items():
        where = f"hydra.sweeper.search_space.{key}"
        if not isinstance(spec, Mapping) or spec.get("type") not in TYPES:
            raise CommandLineError(f"{where} needs type: float, int or categorical, got {spec!r}")
        kind = spec["type"]
        allowed = {"type", "choices"} if kind == "categorical" else {"type", "low", "high", "log", "step"}
        if unknown := sorted(set(spec) - allowed):
            raise CommandLineError(f"{where}: {unknown[0]} is not an option of a {kind} range ({', '.join(allowed)})")
        try:
            if kind == "categorical":
                out[key] = optuna.distributions.CategoricalDistribution(list(spec["choices"]))
            elif kind == "float":
                out[key] = optuna.distributions.FloatDistribution(
                    float(spec["low"]), float(spec["high"]), log=bool(spec.get("log", False)), step=spec.get("step")
                )
            else:
                out[key] = optuna.distributions.IntDistribution(
                    int(spec["low"]), int(spec["high"]), log=bool(spec.get("log", False)), step=int(spec.get("step", 1))
                )
        except (KeyError, TypeError, ValueError) as e:
            missing = f"needs {e}" if isinstance(e, KeyError) else str(e).splitlines()[0]
            raise CommandLineError(f"{where}: {missing}") from None
    return out


SAMPLERS = {
    "tpe": "TPESampler",
    "random": "RandomSampler",
    "cmaes": "CmaEsSampler",
    "qmc": "QMCSampler",
    "gp": "GPSampler",
}


def split_params(params: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """``hydra.sweeper.params`` as (searched: key -> Optuna distribution, fixed: key -> value), read as
    hydra-optuna-sweeper reads it: ``choice(...)`` categorical, ``interval(a, b)`` float (Hydra reads its ends as
    floats), ``tag(log, interval(...))`` on a log scale, ``range(a, b[, step])`` int (float where an end or the step
    is) with both ends included, a shuffled range categorical; anything else a value set in every trial."""
    optuna = load_optuna()
    parser = OverridesParser.create()
    searched: dict[str, Any] = {}
    fixed: dict[str, Any] = {}
    for key, value in params.items():
        text = _value(value) if not isinstance(value, str) else value
        try:
            override = parser.parse_override(f"{key}={text}")
        except HydraException as e:
            raise CommandLineError(f"hydra.sweeper.params.{key}: {str(e).splitlines()[0]}") from None
        if not override.is_sweep_override():
            fixed[key] = value
            continue
        sweep = override.value()
        if isinstance(sweep, ChoiceSweep) or (isinstance(sweep, RangeSweep) and sweep.shuffle):
            searched[key] = optuna.distributions.CategoricalDistribution(
                list(override.sweep_iterator(transformer=Transformer.encode))
            )
        elif isinstance(sweep, RangeSweep):
            if any(isinstance(v, float) for v in (sweep.start, sweep.stop, sweep.step)):
                searched[key] = optuna.distributions.FloatDistribution(sweep.start, sweep.stop, step=sweep.step)
            else:
                searched[key] = optuna.distributions.IntDistribution(
                    int(sweep.start), int(sweep.stop), step=int(sweep.step)
                )
        elif isinstance(sweep, IntervalSweep):
            log = "log" in sweep.tags
            if isinstance(sweep.start, int) and isinstance(sweep.end, int):
                searched[key] = optuna.distributions.IntDistribution(sweep.start, sweep.end, log=log)
            else:
                searched[key] = optuna.distributions.FloatDistribution(float(sweep.start), float(sweep.end), log=log)
        else:  # a glob: a sweep of config group options Optuna cannot draw from
            raise CommandLineError(f"hydra.sweeper.params.{key}={text}: not a choice, range or interval")
    return searched, fixed


def build_sampler(sampler: Any, seed: int) -> Any:
    """Optuna's sampler for ``sampler`` (a name of ``SAMPLERS`` or a ``{_target_: optuna.samplers.<Class>, ...}``
    block), seeded with ``seed``, or with the block's own seed offset by ``seed`` (the sweeper's seed plus the trials
    the study holds: a resumed search draws on); one line for anything else."""
    optuna = load_optuna()
    if isinstance(sampler, str):
        if sampler not in SAMPLERS:
            raise CommandLineError(
                f"hydra.sweeper.sampler must be one of {', '.join(SAMPLERS)} or a {{_target_: optuna.samplers...}} "
                f"block, got {sampler!r}"
            )
        sampler = {"_target_": f"optuna.samplers.{SAMPLERS[sampler]}"}
    node = OmegaConf.to_container(sampler, resolve=True) if isinstance(sampler, DictConfig) else sampler
    target = node.get("_target_") if isinstance(node, Mapping) else None
    if not isinstance(target, str) or not target.startswith("optuna.samplers."):
        raise CommandLineError(f"hydra.sweeper.sampler._target_ must name an optuna.samplers class, got {target!r}")
    node = {"seed": seed, **node} if "seed" not in node else {**node, "seed": seed + int(node["seed"])}
    try:
        built = instantiate(node)
    except Exception as e:  # noqa: BLE001  (an unknown class, an argument it does not take, a missing package)
        cause = e.__cause__ or e
        raise CommandLineError(f"hydra.sweeper.sampler ({target}): {str(cause).splitlines()[0]}") from None
    if not isinstance(built, optuna.samplers.BaseSampler):
        raise CommandLineError(f"hydra.sweeper.sampler._target_ {target} is not an Optuna sampler")
    if isinstance(built, optuna.samplers.CmaEsSampler) and importlib.util.find_spec("cmaes") is None:
        # built without it, CMA-ES fails at its first draw, mid-search
        raise CommandLineError("hydra.sweeper.sampler=cmaes needs the cmaes package: pip install cmaes")
    return built


# Config keys that change no number a trial computes: a study's question leaves them out (a resume on another
# machine, with other threads or another output folder, asks the same question).
NOT_IN_QUESTION = (*IGNORED_IN_COMPARISON, "torch_threads")


def check_objective(config: DictConfig, direction: str | Sequence[str], allow_test: bool) -> list[str]:
    """The search's objectives: ``optimized_metric`` (a metric key, or a multi-objective search's list of them,
    one ``direction`` each), each refused in one line when it is no metric key (``<stage>/<name>``), when its
    direction is the opposite of the way it improves, or when it is a test-split metric without ``allow_test``."""
    metric = config.get("optimized_metric")
    metrics = [metric] if isinstance(metric, str) else list(metric) if OmegaConf.is_list(metric) else [metric]
    if not metrics:
        raise CommandLineError("optimized_metric=[] names no metric: give one (val/acc) or a list of them")
    directions = [direction] if isinstance(direction, str) else list(direction)
    if len(directions) != len(metrics):
        raise CommandLineError(
            f"hydra.sweeper.direction gives {len(directions)} directions for {len(metrics)} metrics of "
            f"optimized_metric: one each ([maximize, maximize] for [val/acc, val/kmeans/acc])"
        )
    for position, (metric, way_asked) in enumerate(zip(metrics, directions, strict=True)):
        if not isinstance(metric, str) or "/" not in metric:
            raise CommandLineError(
                f"optimized_metric must name a metric the runs record, such as val/acc, got {metric!r}"
            )
        stage = metric.split("/")[0]
        if stage == "test" and not allow_test:
            raise CommandLineError(
                f"optimized_metric={metric} tunes on the test split, whose numbers the tables report: "
                "tune on val/..., or set hydra.sweeper.allow_test_objective=true to do it on "
                "purpose"
            )
        way = monitor_direction(metric)
        if way is not None and {"max": "maximize", "min": "minimize"}[way] != way_asked:
            where = "hydra.sweeper.direction" + ("" if len(metrics) == 1 else f"[{position}]")
            raise CommandLineError(
                f"{where}={way_asked} with optimized_metric={metric}, which is "
                f"{'maximised' if way == 'max' else 'minimised'}: set {where}="
                f"{'maximize' if way == 'max' else 'minimize'}"
            )
    return metrics


def question(
    config: DictConfig, direction: str | Sequence[str], space: Any, params: Mapping[str, Any]
) -> dict[str, Any]:
    """What a study answers: the objective, the search space, the config outside the searched keys (leaves as
    text, interpolations unresolved, ``NOT_IN_QUESTION`` left out; the command line's overrides are in it) and the
    values ``hydra.sweeper.params`` sets in every trial."""
    searched = set(OmegaConf.to_container(space, resolve=True) if isinstance(space, DictConfig) else space or {})
    tree = OmegaConf.to_container(config, resolve=False)
    tree.pop("hydra", None)
    leaves: dict[str, str] = {}

    def walk(node: Any, prefix: str) -> None:
        if isinstance(node, dict) and node:
            for key, value in node.items():
                walk(value, f"{prefix}{key}.")
            return
        key = prefix[:-1]
        if key == "optimized_metric" or any(key == k or key.startswith(f"{k}.") for k in (*searched, *NOT_IN_QUESTION)):
            return
        leaves[key] = repr(node)

    walk(tree, "")
    return {
        "objective": objective_text(direction, config.get("optimized_metric")),
        "search_space": repr(OmegaConf.to_container(space, resolve=True) if isinstance(space, DictConfig) else space),
        "params": repr(sorted(f"{k}={v}" for k, v in params.items())),
        "config": leaves,
    }


def objective_text(direction: str | Sequence[str], metric: Any) -> str:
    """``maximize val/acc``; a multi-objective search's ``maximize val/acc, maximize val/kmeans/acc``."""
    if isinstance(direction, str):
        return f"{direction} {metric}"
    return ", ".join(f"{d} {m}" for d, m in zip(direction, metric, strict=True))


def question_change(old: dict[str, Any], new: dict[str, Any]) -> str:
    """What differs between two questions, for the refusal: ``objective: maximize val/acc -> minimize val/loss;
    loss._target_: ... -> ...`` (the first three differences, and how many more)."""
    changes = [
        f"{k}: {old.get(k)} -> {new.get(k)}"
        for k in ("objective", "search_space", "params")
        if old.get(k) != new.get(k)
    ]
    a, b = old.get("config") or {}, new.get("config") or {}
    changes += [
        f"{k}: {a.get(k, '<unset>')} -> {b.get(k, '<unset>')}" for k in sorted(set(a) | set(b)) if a.get(k) != b.get(k)
    ]
    more = f" and {len(changes) - 3} more" if len(changes) > 3 else ""
    return "; ".join(changes[:3]) + more


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
        allow_test_objective: bool = False,
        pruner: Any = None,
    ) -> None:
        self.search_space, self.n_trials, self.n_jobs, self.direction = (
            search_space,
            n_trials,
            n_jobs,
            direction,
        )
        self.sampler, self.seed, self.storage, self.study_name = sampler, seed, storage, study_name
        self.params = params or {}
        self.allow_test_objective = allow_test_objective
        self.pruner = pruner
        self.config: DictConfig | None = None
        self.metrics: list[str] = []  # optimized_metric's keys, one a direction (check_objective)
        self.launcher: Any = None

    def setup(self, *, hydra_context: Any, task_function: Any, config: DictConfig) -> None:
        for name, value, low in (("n_trials", self.n_trials, 1), ("n_jobs", self.n_jobs, 1)):
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                raise CommandLineError(f"hydra.sweeper.{name} must be a whole number of at least {low}, got {value!r}")
        directions = [self.direction] if isinstance(self.direction, str) else self.direction
        if OmegaConf.is_list(directions):
            directions = OmegaConf.to_container(directions)
        if (
            not isinstance(directions, list)
            or not directions
            or any(d not in ("maximize", "minimize") for d in directions)
        ):
            raise CommandLineError(
                "hydra.sweeper.direction must be maximize or minimize (a list of them for a multi-objective search), "
                f"got {self.direction!r}"
            )
        self.direction = directions[0] if len(directions) == 1 else directions
        build_sampler(self.sampler, self.seed)  # a sampler that cannot be built is one line before any trial
        try:
            node = pruner_node(self.pruner)
            if node is not None:
                load_optuna()
                build_pruner(node)  # one line before any trial
        except ConfigError as e:
            raise CommandLineError(str(e)) from None
        if node is not None and len(directions) > 1:
            raise CommandLineError(
                "hydra.sweeper.pruner prunes a search of one objective (Optuna's pruners compare one value); "
                "a multi-objective search takes hydra.sweeper.pruner=null"
            )
        self.pruner = node
        if not isinstance(self.allow_test_objective, bool):
            raise CommandLineError(
                f"hydra.sweeper.allow_test_objective must be true or false, got {self.allow_test_objective!r}"
            )
        self.metrics = check_objective(config, self.direction, self.allow_test_objective)
        self.config = config
        self.launcher = Plugins.instance().instantiate_launcher(
            hydra_context=hydra_context, task_function=task_function, config=config
        )

    def sweep(self, arguments: list[str]) -> Any:
        assert self.config is not None
        optuna = load_optuna()
        searched, set_in_all = split_params(dict(self.params))
        space = distributions(self.search_space) if self.search_space else {}
        if both := sorted(set(space) & set(searched)):
            raise CommandLineError(f"{both[0]} is searched twice: in hydra.sweeper.search_space and in params")
        space |= searched
        if not space:
            raise CommandLineError(
                "nothing to search: give hydra.sweeper.search_space ({loss.lam: {type: float, low: 0.05, high: 1.0}}) "
                "or sweeps in hydra.sweeper.params (loss.lam: interval(0.05, 1.0))"
            )
        fixed = [*(f"{k}={_value(v)}" for k, v in set_in_all.items()), *arguments]
        if clash := sorted({a.split("=")[0].lstrip("+~") for a in fixed} & set(space)):
            raise CommandLineError(f"{clash[0]} is both searched (hydra.sweeper.search_space or params) and set")
        folder = Path(str(self.config.hydra.sweep.dir))
        folder.mkdir(parents=True, exist_ok=True)
        optuna.logging.set_verbosity(optuna.logging.WARNING)
        storage = self.storage or f"sqlite:///{(folder / 'optuna.db').resolve()}"
        multi = not isinstance(self.direction, str)
        study = optuna.create_study(
            study_name=self.study_name or str(self.config.name),
            direction=None if multi else self.direction,
            directions=self.direction if multi else None,
            storage=storage,
            load_if_exists=True,
        )
        asked = question(self.config, self.direction, self.search_space, dict(self.params))
        where = folder / "optuna.db" if self.storage is None else storage
        kept = study.user_attrs.get("question")
        if kept is None and study.trials:
            raise CommandLineError(
                f"the study {study.study_name} in {where} records no question (an earlier "
                "version made it), so resuming it could answer another one: move it away or "
                "set hydra.sweep.dir to another folder"
            )
        if kept is not None and kept != asked:
            raise CommandLineError(
                f"the study {study.study_name} in {where} answers another question "
                f"({question_change(kept, asked)}): run the same command to resume it, or set "
                "hydra.sweep.dir (or hydra.sweeper.study_name) for a new study"
            )
        if kept is None:
            study.set_user_attr("question", asked)
        # Seeded by the trials already in the study too: a resumed search goes on drawing, where the bare seed would
        # replay the first session's draws.
        seed = self.seed + len(study.trials)
        study.sampler = build_sampler(self.sampler, seed)
        done = close_interrupted(study, optuna.trial.TrialState)
        if done or study.trials:
            again = len(study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.WAITING,)))
            asked = f"; {again} interrupted, asked again" if again else ""
            print(f"optuna: resuming study {study.study_name}: {done} of {self.n_trials} trials finished{asked}")
        returns = []
        while done < self.n_trials:
            batch = [study.ask(space) for _ in range(min(self.n_jobs, self.n_trials - done))]
            overrides = [[*fixed, *(f"{k}={_value(t.params[k])}" for k in space)] for t in batch]
            links = self._link(folder, storage, study, batch, overrides)
            try:
                results = self.launcher.launch(overrides, initial_job_idx=done)
            finally:
                for trial_overrides in links:
                    remove_link(folder, trial_overrides)
            for trial, result in zip(batch, results, strict=True):
                value = result.return_value if result.status == JobStatus.COMPLETED else None
                values = value if isinstance(value, list) else [value]
                if all(isinstance(v, int | float) and math.isfinite(v) for v in values):
                    study.tell(trial, [float(v) for v in values] if multi else float(values[0]))
                elif self.pruner is not None and _pruned(result):
                    study.tell(trial, state=optuna.trial.TrialState.PRUNED)
                else:
                    study.tell(trial, state=optuna.trial.TrialState.FAIL)
            returns.append(results)
            done += len(batch)
        _report(study, folder, self.metrics)
        return returns

    def _link(self, folder: Path, storage: str, study: Any, batch: list, overrides: list[list[str]]) -> list:
        """Where the search prunes, each trial's link file (``pruning.write_link``), by which its run reports to
        it; the overrides linked."""
        if self.pruner is None:
            return []
        assert self.config is not None
        for trial, trial_overrides in zip(batch, overrides, strict=True):
            link = TrialLink(
                storage=storage,
                study=study.study_name,
                trial_id=trial._trial_id,  # Optuna's storage key of the trial (its number counts within the study)
                number=trial.number,
                metric=self.metrics[0],  # a pruned search has one objective
                pruner=self.pruner,
            )
            write_link(folder, trial_overrides, link)
        return overrides


def _pruned(result: Any) -> bool:
    """Whether the trial's run was pruned: its record says so (the run's folder is in Hydra's job config)."""
    try:
        record = RunRecord.read(Path(str(result.hydra_cfg.hydra.runtime.output_dir)))
    except (RecordError, AttributeError, OSError):
        return False
    return record is not None and record.status == PRUNED


INTERRUPTED = "interrupted_trials"  # the study's user attribute: numbers of the trials a Ctrl-C cut off


def close_interrupted(study: Any, states: Any) -> int:
    """Close the trials an earlier session left running (Ctrl-C, SIGTERM, a killed machine): each is failed, kept
    apart as interrupted (the study's ``interrupted_trials``), and its parameters are queued to be asked again.
    Returns the trials that count toward ``n_trials``: the completed ones and the genuine failures (a run that
    failed or diverged), never the interrupted ones. ``states``: Optuna's ``TrialState``."""
    interrupted = list(study.user_attrs.get(INTERRUPTED, []))
    for trial in study.get_trials(deepcopy=False, states=(states.RUNNING,)):
        study.tell(trial.number, state=states.FAIL)
        interrupted.append(trial.number)
        study.enqueue_trial(trial.params, skip_if_exists=False)
    if interrupted != study.user_attrs.get(INTERRUPTED, []):
        study.set_user_attr(INTERRUPTED, interrupted)
    counted = study.get_trials(deepcopy=False, states=(states.COMPLETE, states.FAIL, states.PRUNED))
    cut_off = set(interrupted)
    return sum(t.number not in cut_off for t in counted)


def interrupted_note(study: Any) -> str:
    """ ", 1 interrupted (asked again)" where a Ctrl-C cut trials off, else ""."""
    count = len(study.user_attrs.get(INTERRUPTED, []))
    return f", {count} interrupted (asked again)" if count else ""


def _value(value: Any) -> str:
    return repr(value) if isinstance(value, float) else str(value)


def _report(study: Any, folder: Path, metrics: list[str]) -> None:
    """The best trial (a multi-objective search's Pareto front: every trial no other beats in all its objectives),
    printed and written to ``optimization_results.yaml``."""
    optuna = load_optuna()

    states = optuna.trial.TrialState
    complete = study.get_trials(deepcopy=False, states=(states.COMPLETE,))
    if not complete:  # told to the sweep's summary as a failure of the search: the command exits 1
        record_sweep_error(
            f"optuna: no trial of {len(study.trials)} finished with a value of {', '.join(metrics)} (failed, "
            "diverged or pruned: see the cells above); nothing to report"
        )
        return
    pruned = len(study.get_trials(deepcopy=False, states=(states.PRUNED,)))
    counts = {
        "trials": len(study.trials),
        "complete": len(complete),
        "pruned": pruned,
        "interrupted": len(study.user_attrs.get(INTERRUPTED, [])),
    }
    tally = (
        f"({len(complete)} of {len(study.trials)} trials complete"
        f"{f', {pruned} pruned' if pruned else ''}{interrupted_note(study)})"
    )
    if len(study.directions) > 1:
        front = sorted(study.best_trials, key=lambda t: t.number)
        result = {
            "name": study.study_name,
            "metrics": metrics,
            "directions": [d.name.lower() for d in study.directions],
            # hydra-optuna-sweeper's key for the Pareto front
            "solutions": [{"trial": t.number, "values": list(t.values), "params": t.params} for t in front],
            **counts,
        }
        OmegaConf.save(OmegaConf.create(result), folder / "optimization_results.yaml")
        print(f"optuna: Pareto front of {', '.join(metrics)}: {len(front)} trials {tally}")
        for t in front:
            values = " ".join(f"{m} {v:.4f}" for m, v in zip(metrics, t.values, strict=True))
            print(f"optuna:   trial {t.number}: {values}: {' '.join(f'{k}={_value(v)}' for k, v in t.params.items())}")
        return
    best = study.best_trial
    result = {
        "name": study.study_name,
        "metric": metrics[0],
        "direction": study.direction.name.lower(),
        "best_value": best.value,
        "best_params": best.params,
        "trial": best.number,
        **counts,
    }
    OmegaConf.save(OmegaConf.create(result), folder / "optimization_results.yaml")
    params = " ".join(f"{k}={_value(v)}" for k, v in best.params.items())
    print(f"optuna: best {metrics[0]} {best.value:.4f} at trial {best.number}: {params} {tally}")


# A node, not a dataclass: Hydra's plugin scan executes this module outside ``sys.modules``.
ConfigStore.instance().store(
    group="hydra/sweeper",
    name="optuna",
    provider="clusterable",
    node=OmegaConf.create(
        {
            "_target_": "hydra_plugins.clusterable_sweeper.optuna_sweeper.OptunaSweeper",
            # A `sampler: {_target_: optuna.samplers...}` block reaches the constructor as config, not built: the
            # sweeper seeds it (a resumed search draws on from where the study is).
            "_recursive_": False,
            "search_space": None,
            "n_trials": 20,
            "n_jobs": 1,
            "direction": "maximize",
            "sampler": "tpe",
            "seed": 0,
            "storage": None,
            "study_name": None,
            "params": None,
            "allow_test_objective": False,
            "pruner": None,
        }
    ),
)
