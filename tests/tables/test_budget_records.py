"""The COREL Fashion-MNIST tables check each record's ``protocol.budget`` against the epochs it trained: a record
whose budget its epochs contradict (set by hand before runs were checked, or edited) is refused in one line naming
it, exit 2, in every table of the grid; smoke records, short on purpose, still build their (smoke) tables."""

from __future__ import annotations

from pathlib import Path

import pytest

from tables.rundirs import write_run


def record(
    outputs: Path, budget: str, epochs: int, seed: int, experiment: str = "corel/fashion_table2", mode: str = "full"
) -> Path:
    """A Table 2 record of CCE on Fashion-MNIST recorded as ``budget`` having trained ``epochs`` epochs."""
    source = "real" if mode == "full" else "fake"
    params = {"dataset": "fashion_mnist", "model": "ffnn", "loss": "cce", "seed": seed}
    config = {"protocol": {"budget": budget}, "trainer": {"max_epochs": epochs}}
    metrics = {"test/acc": 0.88, "test/kmeans/acc": 0.8, "test/kmeans/silhouette": 0.3}
    return write_run(outputs, experiment, params, metrics, mode=mode, source=source, config=config)


@pytest.mark.parametrize("table", ["fashion_table2", "fashion_table4", "fashion_budgets"])
def test_a_record_whose_epochs_contradict_its_budget_is_refused_naming_it(
    tmp_path: Path, make_tables, table: str
) -> None:
    # the case: protocol.budget=cpu150 given to the 10-epoch grid on the command line
    first = record(tmp_path, "cpu150", 10, 0)
    record(tmp_path, "cpu150", 10, 1)
    code, out, err = make_tables(f"corel/{table}", "--outputs", str(tmp_path))
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1, (out, err)
    assert (
        "says protocol.budget=cpu150 (150 epochs) but trained trainer.max_epochs=10 (1 more records do so too)" in err
    )
    assert f"the record {first} says" in err


def test_records_that_agree_with_their_budget_build_and_say_it(tmp_path: Path, make_tables) -> None:
    for seed in (0, 1):
        record(tmp_path, "cpu150", 150, seed, experiment="corel/fashion150_table2")
    code, out, err = make_tables("corel/fashion150_table2", "--outputs", str(tmp_path))
    assert code == 0 and "budget cpu150 (FFNN, 150 epochs" in out, err
    # one record of the 150-epoch grid that trained 10 epochs: named, and nothing is written
    odd = record(tmp_path, "cpu150", 10, 2, experiment="corel/fashion150_table2")
    code, out, err = make_tables("corel/fashion150_table2", "--outputs", str(tmp_path))
    assert code == 2 and f"the record {odd} says protocol.budget=cpu150" in err, err


def test_smoke_records_are_short_on_purpose(tmp_path: Path, make_tables) -> None:
    for seed in (0, 1):
        record(tmp_path, "cpu150", 2, seed, mode="smoke")
    code, out, err = make_tables("corel/fashion_table2", "--outputs", str(tmp_path))
    assert code == 0, err
    assert "SMOKE runs" in out and "budget cpu150 (FFNN, 2 epochs" in out
