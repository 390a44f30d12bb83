"""``protocol.budget`` is what a run trains: a budget that is no size of COREL's Fashion-MNIST grid, or one that
``trainer.max_epochs`` contradicts, is refused before anything runs (one line, exit 2, nothing made), whether it is
set on the command line, swept, or reaches the run layer another way; smoke runs, short on purpose, still run."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers.configs import composed

from clusterable import budgets
from clusterable.budgets import SIZES
from clusterable.config import ConfigError
from clusterable.run.checks import check_config

EXPERIMENTS = Path(budgets.__file__).parent / "conf" / "experiment" / "corel"


@pytest.mark.parametrize(
    ("args", "said"),
    [
        # the case: the 10-epoch grid titled and tabulated as the 150-epoch one
        (
            ("-m", "experiment=corel/fashion_table2", "protocol.budget=cpu150"),
            "protocol.budget=cpu150 is 150 epochs of training, but trainer.max_epochs=10",
        ),
        # a budget that is no size: all 48 runs trained before the table refused it
        (
            ("-m", "experiment=corel/fashion_table1", "protocol.budget=cpu15"),
            "protocol.budget=cpu15 is no size of COREL's Fashion-MNIST grid; the sizes: cpu (10 epochs), cpu150 (150",
        ),
        # a single run whose epochs leave its budget's
        (
            ("experiment=corel/fashion_table1", "trainer.max_epochs=150"),
            "protocol.budget=cpu is 10 epochs of training, but trainer.max_epochs=150: its tables would title and pool "
            "the run as budget cpu's; protocol.budget=cpu150 or paper is 150 epochs",
        ),
        # a budget swept per cell: the cells sweeper refuses the sweep before any cell runs
        (
            ("-m", "experiment=corel/fashion_table1", "protocol.budget=cpu,cpu150"),
            "(the whole sweep is refused: no cell ran)",
        ),
    ],
)
def test_a_budget_its_epochs_contradict_is_refused_before_anything_runs(train, args, said) -> None:
    result = train(*args)
    assert result.code == 2, (result.out, result.err)
    assert result.err.strip().count("\n") == 0 and result.err.startswith("error: protocol.budget="), result.err
    assert said in result.err, result.err
    assert not list(train.outputs.rglob("metrics.json")) and not list(train.outputs.rglob("runs/*"))


def test_the_run_layer_refuses_what_reaches_it_another_way(tmp_path: Path) -> None:
    cell = ["experiment=corel/fashion_table1", "dataset=fashion_mnist", "model=ffnn", "loss=center"]
    cfg = composed(tmp_path, *cell, "trainer.max_epochs=150")
    del cfg.hydra
    with pytest.raises(ConfigError, match=r"^protocol\.budget=cpu is 10 epochs of training, but trainer\.max_epochs"):
        check_config(cfg, "full")
    # on fake data the run is a smoke run, short or long: its budget is its grid's name
    cfg = composed(tmp_path, *cell, "trainer.max_epochs=150", "dataset.source=fake")
    del cfg.hydra
    check_config(cfg, "smoke")


def test_smoke_runs_are_short_on_purpose_and_only_the_name_is_checked() -> None:
    assert budgets.problem("cpu150", 2, "smoke") is None
    assert budgets.problem("cpu150", 150, "full") is None and budgets.problem(None, 3, "full") is None
    assert "no size" in budgets.problem("cpu15", 2, "smoke")
    assert budgets.problem("paper", 10, "full").endswith(
        "protocol.budget=cpu is 10 epochs; budget paper's grid is experiment=corel/fashion_paper_table1 and "
        "corel/fashion_paper_table2"
    )


def test_a_debug_smoke_config_reads_as_smoke_from_hydras_choices(tmp_path: Path) -> None:
    # what the callback sees: the composed config with Hydra's node, its debug choice among the runtime choices
    smoke = composed(tmp_path, "experiment=corel/fashion_table1", "debug=smoke", "protocol.budget=cpu150")
    assert budgets.config_problem(smoke) is None
    full = composed(tmp_path, "experiment=corel/fashion_table1", "protocol.budget=cpu150")
    assert "trainer.max_epochs=10" in budgets.config_problem(full)


def test_every_experiment_that_names_a_budget_trains_its_epochs(tmp_path: Path) -> None:
    named = sorted(p.stem for p in EXPERIMENTS.glob("*.yaml") if "budget:" in p.read_text())
    assert len(named) >= 6, named
    seen = set()
    for stem in named:
        cfg = composed(tmp_path, f"experiment=corel/{stem}")
        seen.add(cfg.protocol.budget)
        assert cfg.trainer.max_epochs == SIZES[cfg.protocol.budget].epochs, stem
        assert budgets.config_problem(cfg) is None, stem
    assert seen == set(SIZES)
