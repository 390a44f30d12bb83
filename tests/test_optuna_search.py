"""``-m hparams_search=...``: an Optuna search through the launcher, a batch of trials stacked, resumed from the
study kept in the sweep folder; its mistakes in one line."""

from __future__ import annotations

import pytest

pytest.importorskip("optuna")

SEARCH = ["-m", "hparams_search=corel_fashion", "dataset=iris", "loss=center", "trainer.max_epochs=1",
          "logger=none", "trainer.enable_progress_bar=false", "hydra.sweeper.n_jobs=2"]  # fmt: skip


def test_a_search_runs_its_trials_in_stacked_batches_and_resumes(train) -> None:
    first = train(*SEARCH, "hydra.sweeper.n_trials=4")
    assert first.code == 0, first.err
    assert first.out.count("stacked: 2 cells as one model (loss.lam, optimizer.lr vary)") == 2
    assert "optuna: best val/acc" in first.out and "(4 of 4 trials complete)" in first.out
    sweep = train.outputs / "multirun" / "full" / "search" / "corel_fashion"
    assert (sweep / "optuna.db").exists() and (sweep / "optimization_results.yaml").exists()
    again = train(*SEARCH, "hydra.sweeper.n_trials=6")
    assert again.code == 0, again.err
    assert "optuna: resuming study search/corel_fashion: 4 of 6 trials finished" in again.out
    assert "(6 of 6 trials complete)" in again.out
    assert len(list(sweep.glob("*/metrics.json"))) == 6


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (["hydra.sweeper.n_trials=0"], "hydra.sweeper.n_trials must be a whole number of at least 1, got 0"),
        (["hydra.sweeper.direction=up"], "hydra.sweeper.direction must be maximize or minimize, got 'up'"),
        (["loss.lam=0.5"], "loss.lam is both searched (hydra.sweeper.search_space) and set"),
    ],
)  # fmt: skip
def test_a_mistake_in_the_search_is_one_line(train, overrides: list[str], message: str) -> None:
    result = train(*SEARCH, *overrides)
    assert result.code == 2 and result.err.strip().startswith(f"error: {message}"), result.err


@pytest.mark.parametrize(
    ("space", "message"),
    [
        ({}, "hydra.sweeper.search_space must map config keys to their ranges"),
        ({"loss.lam": {"type": "number"}}, "hydra.sweeper.search_space.loss.lam needs type: float, int or categorical"),
        ({"loss.lam": {"type": "float", "low": 0.1}}, "hydra.sweeper.search_space.loss.lam: needs 'high'"),
        ({"loss.lam": {"type": "float", "low": 0.1, "high": 1, "choices": [1]}},
         "hydra.sweeper.search_space.loss.lam: choices is not an option of a float range"),
        ({"optimizer.lr": {"type": "float", "low": 0.0, "high": 1.0, "log": True}},
         "hydra.sweeper.search_space.optimizer.lr: "),
    ],
)  # fmt: skip
def test_a_search_space_that_is_not_one_is_refused_in_one_line(space: dict, message: str) -> None:
    from clusterable.hydra_callbacks import CommandLineError
    from hydra_plugins.clusterable_sweeper.optuna_sweeper import distributions

    with pytest.raises(CommandLineError) as refused:
        distributions(space)
    assert str(refused.value).startswith(message) and "\n" not in str(refused.value)


def test_the_search_space_becomes_optunas_distributions() -> None:
    import optuna

    from hydra_plugins.clusterable_sweeper.optuna_sweeper import distributions

    space = distributions({"loss.lam": {"type": "float", "low": 0.05, "high": 1.0},
                           "optimizer.lr": {"type": "float", "low": 1e-4, "high": 1e-2, "log": True},
                           "model": {"type": "categorical", "choices": ["ffnn", "cnn"]},
                           "dataset.batch_size": {"type": "int", "low": 32, "high": 256, "step": 32}})  # fmt: skip
    assert space["loss.lam"] == optuna.distributions.FloatDistribution(0.05, 1.0)
    assert space["optimizer.lr"] == optuna.distributions.FloatDistribution(1e-4, 1e-2, log=True)
    assert space["model"] == optuna.distributions.CategoricalDistribution(["ffnn", "cnn"])
    assert space["dataset.batch_size"] == optuna.distributions.IntDistribution(32, 256, step=32)


def test_without_optuna_the_search_names_the_extra(monkeypatch) -> None:
    import sys

    from clusterable.hydra_callbacks import CommandLineError
    from hydra_plugins.clusterable_sweeper.optuna_sweeper import distributions

    monkeypatch.setitem(sys.modules, "optuna", None)  # import optuna raises ImportError
    with pytest.raises(
        CommandLineError, match=r"^hydra/sweeper=optuna needs Optuna: pip install 'clusterable\[optuna\]'$"
    ):
        distributions({"loss.lam": {"type": "float", "low": 0.1, "high": 1.0}})
