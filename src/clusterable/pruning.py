"""Pruning a search's trials while they train: each trial reports its objective to Optuna every epoch, and stops
where Optuna's pruner says so (``hydra.sweeper.pruner``).

The search (``hydra/sweeper=optuna``) and its trials meet through the sweep folder: before each batch the sweeper
writes, for every trial, a small link file (``.optuna-trials/<digest of the trial's overrides>.json``: the
study's storage and name, the trial's id and number, the objective and the pruner), and a trial finds its own by
its overrides (``link_for``), whichever process runs it (the stacked launcher's, a joblib worker). A run that finds
none is not pruned.

A single run reports through a Lightning callback (``callbacks.PruneTrial``); a stacked group owns its epoch loop
and reports all its members at once (``stacked.fit``), freezing those Optuna prunes as it freezes members whose
loss ran away. Either way the run is recorded ``pruned`` with the last epoch's metrics (no evaluation: what pruning
saves), and the sweeper tells Optuna so. Only this project can prune inside a stacked group: one model trains
every member, so no per-trial process could stop one of them.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf

from clusterable.config import ConfigError

LINKS = ".optuna-trials"  # in the sweep folder: a trial's link file, written by the sweeper before each batch

# Pruners by name, with Optuna's defaults (``hydra.sweeper.pruner=median``); a ``{_target_: optuna.pruners.<Class>,
# ...}`` block names any, with its arguments (PercentilePruner's percentile, ThresholdPruner's bounds).
PRUNERS = {
    "median": "MedianPruner",
    "successive_halving": "SuccessiveHalvingPruner",
    "hyperband": "HyperbandPruner",
    "wilcoxon": "WilcoxonPruner",
    "nop": "NopPruner",
}


def pruner_node(pruner: Any) -> dict[str, Any] | None:
    """``hydra.sweeper.pruner`` as a ``{_target_: optuna.pruners.<Class>, ...}`` mapping (a name of ``PRUNERS``
    becomes its class with Optuna's defaults), None for no pruning; ``ConfigError`` (one line) for anything else."""
    if pruner is None:
        return None
    if isinstance(pruner, str):
        if pruner not in PRUNERS:
            raise ConfigError(
                f"hydra.sweeper.pruner must be one of {', '.join(PRUNERS)}, a {{_target_: optuna.pruners...}} block "
                f"or null, got {pruner!r}"
            )
        return {"_target_": f"optuna.pruners.{PRUNERS[pruner]}"}
    node = OmegaConf.to_container(pruner, resolve=True) if isinstance(pruner, DictConfig) else pruner
    if not isinstance(node, Mapping):
        raise ConfigError(
            f"hydra.sweeper.pruner must be one of {', '.join(PRUNERS)}, a {{_target_: optuna.pruners...}} block "
            f"or null, got {pruner!r}"
        )
    target = node.get("_target_")
    if not isinstance(target, str) or not target.startswith("optuna.pruners."):
        raise ConfigError(f"hydra.sweeper.pruner._target_ must name an optuna.pruners class, got {target!r}")
    return dict(node)


def _optuna() -> Any:
    """The ``optuna`` module: an extra, imported where a search prunes (this module loads without it)."""
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    return optuna


def build_pruner(node: Mapping[str, Any]) -> Any:
    """Optuna's pruner of a ``pruner_node``; one line when it cannot be built (an unknown class or argument, a
    value Optuna refuses)."""
    optuna = _optuna()
    target = node["_target_"]
    try:
        built = instantiate(dict(node))
    except Exception as e:  # noqa: BLE001  (an unknown class, an argument it does not take, a value out of range)
        cause = e.__cause__ or e
        raise ConfigError(f"hydra.sweeper.pruner ({target}): {str(cause).splitlines()[0]}") from None
    if not isinstance(built, optuna.pruners.BasePruner):
        raise ConfigError(f"hydra.sweeper.pruner._target_ {target} is not an Optuna pruner")
    return built


@dataclass(frozen=True)
class TrialLink:
    """What a trial needs to report to its study: where the study is, which trial it is, what it reports (the
    search's objective, a key the run logs every epoch) and the pruner (a ``pruner_node``)."""

    storage: str
    study: str
    trial_id: int
    number: int
    metric: str
    pruner: dict[str, Any]


def _link_path(sweep_dir: Path, overrides: Sequence[str]) -> Path:
    digest = hashlib.sha1("\n".join(overrides).encode()).hexdigest()[:20]
    return Path(sweep_dir) / LINKS / f"{digest}.json"


def write_link(sweep_dir: Path, overrides: Sequence[str], link: TrialLink) -> None:
    """The sweeper's side: ``link`` for the trial launched with ``overrides`` (written whole or not at all)."""
    path = _link_path(sweep_dir, overrides)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.with_suffix(".tmp").write_text(json.dumps(asdict(link)))
    path.with_suffix(".tmp").replace(path)


def remove_link(sweep_dir: Path, overrides: Sequence[str]) -> None:
    """The sweeper's side, once the trial is told: its link is gone (a later trial of the same overrides, asked
    again after an interruption, gets its own)."""
    path = _link_path(sweep_dir, overrides)
    with contextlib.suppress(OSError):
        path.unlink()
    with contextlib.suppress(OSError):  # the last one: the folder goes too (another search's links keep it)
        path.parent.rmdir()


def link_for(sweep_dir: str | Path, overrides: Sequence[str]) -> TrialLink | None:
    """The run's side: the link of the trial launched with ``overrides`` in ``sweep_dir``, None where there is none
    (no search, or a search that does not prune) or it cannot be read (then the trial trains to its end)."""
    try:
        return TrialLink(**json.loads(_link_path(Path(sweep_dir), overrides).read_text()))
    except (OSError, ValueError, TypeError):
        return None


class Reporter:
    """Reports runs' values to their trials and asks Optuna whether to prune them: one study handle for all the
    links (a stacked group's members are trials of one study)."""

    def __init__(self, links: Sequence[TrialLink]) -> None:
        optuna = _optuna()
        first = links[0]
        self.pruner_name = first.pruner["_target_"].rsplit(".", 1)[-1]
        study = optuna.load_study(study_name=first.study, storage=first.storage, pruner=build_pruner(first.pruner))
        self.trials = [optuna.trial.Trial(study, link.trial_id) for link in links]
        self.metric = first.metric

    def prune(self, index: int, epoch: int, value: float) -> str | None:
        """Report ``value`` (the objective after ``epoch``) for the ``index``-th link; why it is pruned (one line,
        for the record) or None."""
        trial = self.trials[index]
        trial.report(float(value), epoch)
        if not trial.should_prune():
            return None
        shown = f"{value:.4f}" if math.isfinite(value) else str(value)
        return f"{self.pruner_name} at epoch {epoch}: {self.metric} {shown}"


def check_prunable(metric: str, epoch_keys: Sequence[str]) -> None:
    """A pruned search's objective must be a key the run logs every epoch; one line otherwise."""
    if metric not in epoch_keys:
        raise ConfigError(
            f"hydra.sweeper.pruner prunes on optimized_metric={metric}, which this run records after training only; "
            f"it logs every epoch: {', '.join(epoch_keys)} (optimise one of those, or hydra.sweeper.pruner=null)"
        )
