"""``-m hparams_search=...``: an Optuna search through the launcher, a batch of trials stacked, resumed from the
study kept in the sweep folder; its mistakes in one line."""

from __future__ import annotations

import importlib.util

import pytest
from helpers.running import SEARCHPATH, all_metrics, assert_refused

pytest.importorskip("optuna")

SEARCH = [
    "-m",
    "hparams_search=corel_fashion",
    "dataset=iris",
    "loss=center",
    "trainer.max_epochs=1",
    "logger=none",
    "trainer.enable_progress_bar=false",
    "hydra.sweeper.n_jobs=2",
]


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
        (
            ["hydra.sweeper.direction=up"],
            "hydra.sweeper.direction must be maximize or minimize (a list of them for a multi-objective search), "
            "got 'up'",
        ),
        (["loss.lam=0.5"], "loss.lam is both searched (hydra.sweeper.search_space or params) and set"),
    ],
)
def test_a_mistake_in_the_search_is_one_line(train, overrides: list[str], message: str) -> None:
    assert_refused(train(*SEARCH, *overrides), message, train.outputs)


@pytest.mark.parametrize(
    ("space", "message"),
    [
        ({}, "hydra.sweeper.search_space must map config keys to their ranges"),
        ({"loss.lam": {"type": "number"}}, "hydra.sweeper.search_space.loss.lam needs type: float, int or categorical"),
        ({"loss.lam": {"type": "float", "low": 0.1}}, "hydra.sweeper.search_space.loss.lam: needs 'high'"),
        (
            {"loss.lam": {"type": "float", "low": 0.1, "high": 1, "choices": [1]}},
            "hydra.sweeper.search_space.loss.lam: choices is not an option of a float range",
        ),
        (
            {"optimizer.lr": {"type": "float", "low": 0.0, "high": 1.0, "log": True}},
            "hydra.sweeper.search_space.optimizer.lr: ",
        ),
    ],
)
def test_a_search_space_that_is_not_one_is_refused_in_one_line(space: dict, message: str) -> None:
    from clusterable.hydra_callbacks import CommandLineError
    from hydra_plugins.clusterable_sweeper.optuna_sweeper import distributions

    with pytest.raises(CommandLineError) as refused:
        distributions(space)
    assert str(refused.value).startswith(message) and "\n" not in str(refused.value)


def test_the_search_space_becomes_optunas_distributions() -> None:
    import optuna

    from hydra_plugins.clusterable_sweeper.optuna_sweeper import distributions

    space = distributions(
        {
            "loss.lam": {"type": "float", "low": 0.05, "high": 1.0},
            "optimizer.lr": {"type": "float", "low": 1e-4, "high": 1e-2, "log": True},
            "model": {"type": "categorical", "choices": ["ffnn", "cnn"]},
            "dataset.batch_size": {"type": "int", "low": 32, "high": 256, "step": 32},
        }
    )
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


def test_another_question_in_the_same_folder_is_refused_not_resumed(train) -> None:
    first = train(*SEARCH, "hydra.sweeper.n_trials=2")
    assert first.code == 0, first.err
    sweep = train.outputs / "multirun" / "full" / "search" / "corel_fashion"
    before = sorted(p.parent.name for p in sweep.glob("*/metrics.json"))
    # the same question, from a machine with other threads: resumed
    again = train(*SEARCH, "hydra.sweeper.n_trials=2", "torch_threads=1")
    assert again.code == 0 and "resuming study search/corel_fashion: 2 of 2 trials finished" in again.out, again.err
    for overrides, differs in (
        (
            ["loss=cosine_corel"],
            "loss._target_: 'clusterable.heads.center.CenterLoss' -> 'clusterable.heads.cosine_corel.CosineCOREL'",
        ),
        (
            ["optimized_metric=val/loss", "hydra.sweeper.direction=minimize"],
            "objective: maximize val/acc -> minimize val/loss",
        ),
        (["+hydra.sweeper.search_space.seed={type:int,low:0,high:3}"], "search_space: "),
        (["trainer.max_epochs=2"], "trainer.max_epochs: 1 -> 2"),
    ):
        other = train(*SEARCH, "hydra.sweeper.n_trials=2", *overrides)
        assert other.code == 2 and other.out == "", (overrides, other.out)
        line = other.err.strip()
        assert "\n" not in line and "answers another question" in line and differs in line, (overrides, line)
    assert sorted(p.parent.name for p in sweep.glob("*/metrics.json")) == before  # nothing trained, nothing mixed
    results = (sweep / "optimization_results.yaml").read_text()
    assert "metric: val/acc" in results


def test_a_study_that_records_no_question_is_not_resumed(train, tmp_path) -> None:
    import optuna

    folder = train.outputs / "multirun" / "full" / "search" / "corel_fashion"
    folder.mkdir(parents=True)
    study = optuna.create_study(study_name="search/corel_fashion", storage=f"sqlite:///{folder / 'optuna.db'}")
    study.add_trial(optuna.trial.create_trial(params={}, distributions={}, value=0.5))
    result = train(*SEARCH, "hydra.sweeper.n_trials=2")
    assert result.code == 2 and "records no question" in result.err and "\n" not in result.err.strip(), result.err


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (
            ["optimized_metric=val/loss"],
            "hydra.sweeper.direction=maximize with optimized_metric=val/loss, which is minimised: set "
            "hydra.sweeper.direction=minimize",
        ),
        (
            ["hydra.sweeper.direction=minimize"],
            "hydra.sweeper.direction=minimize with optimized_metric=val/acc, which is maximised",
        ),
        (["optimized_metric=test/acc"], "optimized_metric=test/acc tunes on the test split"),
        (["optimized_metric=accuracy"], "optimized_metric must name a metric the runs record, such as val/acc"),
        (["hydra.sweeper.allow_test_objective=maybe"], "hydra.sweeper.allow_test_objective must be true or false"),
    ],
)
def test_the_objective_is_checked_before_any_trial(train, overrides: list[str], message: str) -> None:
    assert_refused(train(*SEARCH, *overrides), message, train.outputs)


def test_a_test_split_objective_on_purpose_is_accepted() -> None:
    from omegaconf import OmegaConf

    from hydra_plugins.clusterable_sweeper.optuna_sweeper import check_objective

    cfg = OmegaConf.create({"optimized_metric": "test/kmeans/nmi"})
    assert check_objective(cfg, "maximize", allow_test=True) == ["test/kmeans/nmi"]


def test_a_metric_no_trial_records_fails_each_trial_before_training(train) -> None:
    result = train(*SEARCH, "hydra.sweeper.n_trials=2", "optimized_metric=val/kmeans/nmi")
    assert result.code == 1, result.err
    assert "optimized_metric: 'val/kmeans/nmi' is never recorded by this run (loss=center); it records" in result.err
    assert "optuna: no trial of 2 finished with a value of val/kmeans/nmi" in result.err
    assert "sweep: 0 ok, 2 failed" in result.out
    sweep = train.outputs / "multirun" / "full" / "search" / "corel_fashion"
    assert not (sweep / "optimization_results.yaml").exists()
    assert not list(sweep.rglob("*.ckpt"))  # refused before training


def test_a_diverged_or_failed_run_gives_its_sweeper_no_value() -> None:
    from clusterable.record import RunRecord

    metrics = {"val/acc": 0.9, "val/loss": 0.3}
    assert RunRecord(status="ok", metrics=metrics).optimized("val/acc") == 0.9
    assert RunRecord(status="diverged", metrics=metrics).optimized("val/acc") is None  # best epoch's value kept
    assert RunRecord(status="failed", metrics=metrics).optimized("val/acc") is None
    assert RunRecord(status="ok", metrics=metrics).optimized("val/nmi") is None
    assert RunRecord(status="ok", metrics={"val/acc": True}).optimized("val/acc") is None
    # the key defaults to the one its config optimizes
    assert RunRecord(status="ok", metrics=metrics, config={"optimized_metric": "val/loss"}).optimized() == 0.3


def test_a_search_without_optuna_installed_is_one_line(train, monkeypatch) -> None:
    import sys

    monkeypatch.setitem(sys.modules, "optuna", None)  # as an install without the optuna extra
    result = train(*SEARCH)
    assert result.code == 2 and result.err.strip() == (
        "error: hydra/sweeper=optuna needs Optuna: pip install 'clusterable[optuna]'"
    ), result.err
    assert "Traceback" not in result.out + result.err


def test_a_search_file_is_a_sweep_without_m(train) -> None:
    """As lightning-hydra-template's search files: ``hydra.mode: MULTIRUN`` in the file, so forgetting ``-m`` still
    searches, where it silently trained one plain run."""
    result = train(*SEARCH[1:], "hydra.sweeper.n_trials=2")
    assert result.code == 0, result.err
    assert "(2 of 2 trials complete)" in result.out and "sweep: 2 ok, 0 failed" in result.out


def test_a_search_file_in_lightning_hydra_template_s_shape_runs(train) -> None:
    """hydra-optuna-sweeper's class as _target_ (not installed here), its sampler block and Hydra's sweep syntax in
    params: the search runs with ours, each trial drawing from the file's ranges."""
    result = train(
        SEARCHPATH, "hparams_search=lht_style", "dataset=iris", "loss=cce", "trainer.max_epochs=1", "logger=none"
    )
    assert result.code == 0, result.err
    assert "(3 of 3 trials complete)" in result.out and "sweep: 3 ok, 0 failed" in result.out
    runs = all_metrics(train.outputs)
    assert len(runs) == 3
    for run in runs:
        config = run["config"]
        assert 0.0001 <= config["optimizer"]["lr"] <= 0.1
        assert config["dataset"]["batch_size"] in (16, 32) and config["model"]["hidden"] in ([32], [64])


def test_params_in_hydra_s_sweep_syntax_become_optuna_s_distributions() -> None:
    import optuna

    from hydra_plugins.clusterable_sweeper.optuna_sweeper import CommandLineError, split_params

    searched, fixed = split_params(
        {
            "optimizer.lr": "tag(log, interval(0.0001, 0.1))",
            "loss.lam": "interval(0.1, 1.0)",
            "model.depth": "interval(1, 4)",
            "dataset.batch_size": "choice(32, 64, 128)",
            "trainer.max_epochs": "range(2, 8, 2)",
            "seed": 3,
        }
    )
    assert searched == {
        "optimizer.lr": optuna.distributions.FloatDistribution(0.0001, 0.1, log=True),
        "loss.lam": optuna.distributions.FloatDistribution(0.1, 1.0),
        "model.depth": optuna.distributions.FloatDistribution(1.0, 4.0),  # Hydra reads an interval's ends as floats
        "dataset.batch_size": optuna.distributions.CategoricalDistribution([32, 64, 128]),
        "trainer.max_epochs": optuna.distributions.IntDistribution(2, 8, step=2),  # both ends, as the plugin reads it
    }
    assert fixed == {"seed": 3}
    with pytest.raises(
        CommandLineError, match=r"hydra.sweeper.params.loss=glob\(\*\): not a choice, range or interval"
    ):
        split_params({"loss": "glob(*)"})
    with pytest.raises(CommandLineError, match=r"^hydra.sweeper.params.loss.lam: "):
        split_params({"loss.lam": "interval(0.1"})


@pytest.mark.parametrize(
    ("sampler", "kind"),
    [("random", "RandomSampler"), ("qmc", "QMCSampler"), ("gp", "GPSampler"), ("tpe", "TPESampler")],
)
def test_the_samplers_by_name_and_by_block(sampler: str, kind: str) -> None:
    from hydra_plugins.clusterable_sweeper.optuna_sweeper import build_sampler

    assert type(build_sampler(sampler, seed=0)).__name__ == kind
    assert type(build_sampler({"_target_": f"optuna.samplers.{kind}", "seed": 5}, seed=2)).__name__ == kind


def test_a_sampler_that_cannot_be_built_is_one_line() -> None:
    from hydra_plugins.clusterable_sweeper.optuna_sweeper import CommandLineError, build_sampler

    with pytest.raises(CommandLineError, match="must be one of tpe, random, cmaes, qmc, gp or a"):
        build_sampler("bayes", seed=0)
    if importlib.util.find_spec("cmaes") is None:
        with pytest.raises(
            CommandLineError, match=r"^hydra.sweeper.sampler=cmaes needs the cmaes package: pip install"
        ):
            build_sampler("cmaes", seed=0)
    with pytest.raises(CommandLineError, match=r"_target_ must name an optuna.samplers class, got 'torch.nn.Linear'"):
        build_sampler({"_target_": "torch.nn.Linear"}, seed=0)
    with pytest.raises(CommandLineError, match=r"^hydra.sweeper.sampler \(optuna.samplers.TPESampler\): "):
        build_sampler({"_target_": "optuna.samplers.TPESampler", "n_startup": 3}, seed=0)
