"""A search that prunes (``hydra.sweeper.pruner``): a stacked batch reports every member to its trial each epoch and
freezes the pruned ones, a single trial stops through its Lightning callback, each recorded ``pruned`` with its last
epoch's metrics; and a multi-objective search, its Pareto front written out. Mistakes in one line."""

from __future__ import annotations

import pytest
import yaml
from helpers.running import all_metrics, assert_refused

pytest.importorskip("optuna")

SEARCH = [
    "-m",
    "hparams_search=corel_fashion",
    "dataset=iris",
    "loss=center",
    "trainer.max_epochs=4",
    "logger=none",
    "trainer.enable_progress_bar=false",
]
# Prunes every trial after its epoch 1 (val/acc is never above 1.1): which trials and when are known in advance.
ALWAYS_AFTER_EPOCH_1 = "hydra.sweeper.pruner={_target_:optuna.pruners.ThresholdPruner,lower:1.1,n_warmup_steps:1}"
STACKED = ["hydra.sweeper.n_jobs=2", "hydra.launcher.speed_check=false"]  # a batch of 2 trials is one stack


def _study(train) -> tuple:
    import optuna

    sweep = train.outputs / "multirun" / "full" / "search" / "corel_fashion"
    study = optuna.load_study(study_name="search/corel_fashion", storage=f"sqlite:///{sweep / 'optuna.db'}")
    return sweep, study


def test_a_stacked_batch_prunes_its_members_and_records_them_pruned(train) -> None:
    first = train(*SEARCH, *STACKED, "hydra.sweeper.n_trials=2")  # two trials that run to their end
    assert first.code == 0, first.err
    result = train(*SEARCH, *STACKED, "hydra.sweeper.n_trials=4", ALWAYS_AFTER_EPOCH_1)
    assert result.code == 0, result.err
    assert "stacked: 2 cells as one model (loss.lam, optimizer.lr vary), 4 epochs on cpu" in result.out
    # both members pruned after epoch 1: the stack stops there, 2 of its 4 epochs trained
    assert "stacked: epoch 2/4, 0/2 members training" in result.out and "epoch 3/4" not in result.out
    assert "(2 of 4 trials complete, 2 pruned)" in result.out
    assert "sweep: 0 ok, 0 failed, 0 skipped, 2 pruned" in result.out  # the 2 new trials
    pruned = [r for r in all_metrics(train.outputs) if r["status"] == "pruned"]
    assert len(pruned) == 2
    for record in pruned:
        assert record["pruned"].startswith("ThresholdPruner at epoch 1: val/acc ")
        assert record["error"] is None and record["best_epoch"] in (0, 1)
        # the last epoch's metrics, not evaluated: no test split, no evaluator
        assert set(record["metrics"]) >= {"val/acc", "train/loss"}
        assert not any(k.startswith("test/") for k in record["metrics"])
        assert record["stacked"]["members"] == 2
    sweep, study = _study(train)
    assert [t.state.name for t in study.trials] == ["COMPLETE", "COMPLETE", "PRUNED", "PRUNED"]
    assert all(sorted(t.intermediate_values) == [0, 1] for t in study.trials[2:])  # reported every epoch
    assert not (sweep / ".optuna-trials").exists()  # the links are gone once the trials are told
    written = yaml.safe_load((sweep / "optimization_results.yaml").read_text())
    assert (written["complete"], written["pruned"]) == (2, 2)


def test_a_single_trial_prunes_through_its_callback(train) -> None:
    result = train(*SEARCH, "hydra/launcher=basic", "hydra.sweeper.n_trials=2", ALWAYS_AFTER_EPOCH_1)
    # no trial finished with a value: the search reports nothing, and the command fails
    assert result.code == 1
    assert "optuna: no trial of 2 finished with a value of val/acc (failed, diverged or pruned" in result.err
    assert "sweep: 0 ok, 0 failed, 0 skipped, 2 pruned" in result.out
    runs = all_metrics(train.outputs)
    assert [r["status"] for r in runs] == ["pruned", "pruned"]
    for run in runs:
        assert run["pruned"].startswith("ThresholdPruner at epoch 1: val/acc ") and run["best_epoch"] in (0, 1)
        assert "pruned: " in result.out and not any(k.startswith("test/") for k in run["metrics"])
    _, study = _study(train)
    assert [t.state.name for t in study.trials] == ["PRUNED", "PRUNED"]
    assert all(sorted(t.intermediate_values) == [0, 1] for t in study.trials)


def test_a_pruned_search_needs_an_objective_logged_every_epoch(train) -> None:
    result = train(
        *SEARCH,
        "hydra.sweeper.n_trials=1",
        "hydra.sweeper.pruner=median",
        "optimized_metric=val/kmeans/acc",
        "evaluator=[classification,clustering]",
    )
    assert result.code == 1
    assert (
        "hydra.sweeper.pruner prunes on optimized_metric=val/kmeans/acc, which this run records after training only; "
        "it logs every epoch: train/loss, train/attract, train/repel, val/acc, val/loss" in result.out
    )
    assert not list(train.outputs.rglob("*.ckpt"))  # refused before training


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (["hydra.sweeper.pruner=medain"], "hydra.sweeper.pruner must be one of median, successive_halving, "),
        (
            ["hydra.sweeper.pruner={_target_:optuna.pruners.MedianPruner,n_startup_trials:-1}"],
            "hydra.sweeper.pruner (optuna.pruners.MedianPruner): Number of startup trials cannot be negative",
        ),
        (
            ["hydra.sweeper.pruner={_target_:optuna.samplers.TPESampler}"],
            "hydra.sweeper.pruner._target_ must name an optuna.pruners class, got 'optuna.samplers.TPESampler'",
        ),
        (
            [
                "hydra.sweeper.pruner=median",
                "optimized_metric=[val/acc,val/loss]",
                "hydra.sweeper.direction=[maximize,minimize]",
            ],
            "hydra.sweeper.pruner prunes a search of one objective",
        ),
        (
            ["optimized_metric=[val/acc,val/loss]", "hydra.sweeper.direction=maximize"],
            "hydra.sweeper.direction gives 1 directions for 2 metrics of optimized_metric",
        ),
        (
            ["optimized_metric=[val/acc,val/loss]", "hydra.sweeper.direction=[maximize,maximize]"],
            "hydra.sweeper.direction[1]=maximize with optimized_metric=val/loss, which is minimised",
        ),
        (["hydra.sweeper.direction=[maximize,up]"], "hydra.sweeper.direction must be maximize or minimize"),
        (["hydra.sweeper.pruner=5"], "hydra.sweeper.pruner must be one of median, successive_halving, "),
        (["optimized_metric=[]"], "optimized_metric=[] names no metric: give one (val/acc) or a list of them"),
    ],
)
def test_a_mistake_in_pruning_or_objectives_is_one_line(train, overrides: list[str], message: str) -> None:
    assert_refused(train(*SEARCH, *overrides), message, train.outputs)


def test_a_multi_objective_search_writes_its_pareto_front(train) -> None:
    result = train(
        *SEARCH,
        *STACKED,
        "hydra.sweeper.n_trials=4",
        "optimized_metric=[val/acc,val/kmeans/acc]",
        "hydra.sweeper.direction=[maximize,maximize]",
        "evaluator=[classification,clustering]",
    )
    assert result.code == 0, result.err
    assert (
        "optuna: Pareto front of val/acc, val/kmeans/acc: " in result.out and "(4 of 4 trials complete)" in result.out
    )
    sweep, study = _study(train)
    written = yaml.safe_load((sweep / "optimization_results.yaml").read_text())
    assert written["metrics"] == ["val/acc", "val/kmeans/acc"] and written["directions"] == ["maximize", "maximize"]
    front = {s["trial"]: s["values"] for s in written["solutions"]}
    assert front and set(front) == {t.number for t in study.best_trials}
    # each trial's values are its run's record of the two metrics
    recorded = sorted((r["metrics"]["val/acc"], r["metrics"]["val/kmeans/acc"]) for r in all_metrics(train.outputs))
    assert sorted(tuple(t.values) for t in study.trials) == recorded  # told as recorded: floats, unchanged
    # no trial of the front is beaten in both objectives by another trial
    for number, (acc, kmeans) in front.items():
        for t in study.trials:
            assert not (t.values[0] > acc and t.values[1] > kmeans), (number, t.number)


def test_the_pruners_by_name_and_by_block() -> None:
    import optuna

    from clusterable.pruning import PRUNERS, build_pruner, pruner_node

    assert pruner_node(None) is None
    for name, cls in PRUNERS.items():
        assert type(build_pruner(pruner_node(name))).__name__ == cls
    block = pruner_node({"_target_": "optuna.pruners.MedianPruner", "n_startup_trials": 2})
    assert isinstance(build_pruner(block), optuna.pruners.MedianPruner)


def test_a_trial_finds_its_link_by_its_overrides(tmp_path) -> None:
    from clusterable.pruning import TrialLink, link_for, remove_link, write_link

    link = TrialLink("sqlite:///x.db", "s", 7, 3, "val/acc", {"_target_": "optuna.pruners.NopPruner"})
    write_link(tmp_path, ["a=1", "b=2"], link)
    assert link_for(tmp_path, ["a=1", "b=2"]) == link
    assert link_for(tmp_path, ["a=1", "b=3"]) is None  # another trial's overrides
    remove_link(tmp_path, ["a=1", "b=2"])
    assert link_for(tmp_path, ["a=1", "b=2"]) is None and not (tmp_path / ".optuna-trials").exists()
