"""A table cell is one config: runs pool into a cell only when their recorded configs differ in the seed (and what
the table declares as its own axes); anything else is refused in one line naming the keys. An unreadable
metrics.json is named, never silently left out."""

from __future__ import annotations

from pathlib import Path

from clusterable.record import RunRecord
from clusterable.tables.report import Run, config_differences, describe, load_runs, seed_note

from .rundirs import write_run
from .test_dscl_tables import write_row

FFNN = {"_target_": "clusterable.models.FFNN", "hidden": [256, 128]}
NUMBERS = {"test/sc/nmi": 0.23, "test/kmeans/nmi": 0.2, "test/recall@1/sc": 0.5, "test/recall@1/cos": 0.5}


def dscl_digits(outputs: Path, steps: int, seeds=(0, 1, 2)) -> None:
    """``dscl_row=end_to_end seed=0,1,2`` on digits at ``trainer.max_steps=steps`` (the row's preset: 300)."""
    for seed in seeds:
        path = write_row(
            outputs / f"steps{steps}", "dscl/digits", "end_to_end", seed, NUMBERS, model=FFNN, dataset="digits_zeroshot"
        )
        assert path.is_dir()
    # write_row records the preset's steps; the repro's runs recorded the steps they were given.
    for path in (outputs / f"steps{steps}").rglob("metrics.json"):
        text = path.read_text().replace('"max_steps": 100', f'"max_steps": {steps}')
        path.write_text(text)


def test_dscl_digits_short_runs_beside_full_ones_are_refused_naming_the_steps(tmp_path, make_tables):
    """The issue's repro: `dscl_row=end_to_end seed=0,1,2 trainer.max_steps=5` beside the 300-step runs is never
    averaged into the row (it was: NMI with SC 22.93 ± 3.86 became 29.66 ± 7.84, exit 0)."""
    dscl_digits(tmp_path, 300)
    code, out, err = make_tables("dscl/digits", "--outputs", str(tmp_path))
    assert code == 0 and "Runs (seeds) per configuration: 3, over 1 configurations." in out, err
    dscl_digits(tmp_path, 5)
    code, out, err = make_tables("dscl/digits", "--outputs", str(tmp_path))
    assert code == 2 and out == "", out
    assert len(err.strip().splitlines()) == 1, err
    assert "differ in more than their seed: trainer.max_steps (" in err and "300: 3" in err and "5: 3" in err
    assert "steps" in err and str(tmp_path) in err  # where the odd runs lie


def dml_run(outputs: Path, loss: str, seed: int, lr: float, **config) -> Path:
    return write_run(
        outputs,
        "dml/losses",
        {"dataset": "digits_zeroshot", "loss": loss, "seed": seed, "optimizer.lr": lr},
        {"test/recall@1/cos": 0.5 + lr / 10, "test/map@r/cos": 0.3, "test/kmeans/nmi": 0.4},
        config=config,
    )


def test_dml_runs_at_two_learning_rates_are_not_seeds_of_one_row(tmp_path, make_tables):
    for seed in (0, 1):
        dml_run(tmp_path, "ce", seed, 0.001)
        dml_run(tmp_path, "ce", seed, 0.5)
    code, out, err = make_tables("dml/losses", "--outputs", str(tmp_path))
    assert code == 2 and "optimizer.lr (0.001: 2, 0.5: 2)" in err and "dataset=digits_zeroshot, loss=ce" in err


def test_keys_that_change_nothing_computed_pool(tmp_path, make_tables):
    """Loggers, paths, progress bars and the CPU threads differ between seeds of one config: they still pool."""
    dml_run(
        tmp_path,
        "ce",
        0,
        0.001,
        torch_threads=1,
        paths={"output_dir": "a"},
        logger={"csv": {"x": 1}},
        trainer={"enable_progress_bar": False},
    )
    dml_run(
        tmp_path,
        "ce",
        1,
        0.001,
        torch_threads=4,
        paths={"output_dir": "b"},
        logger=None,
        trainer={"enable_progress_bar": True},
    )
    code, out, err = make_tables("dml/losses", "--outputs", str(tmp_path))
    assert code == 0, err
    assert "| digits_zeroshot | Cross-entropy (Boudiaf) | 50.0 ± 0.0 | 30.0 ± 0.0 | 40.0 ± 0.0 | 2 |" in out
    assert "Runs (seeds) per configuration: 2, over 1 configurations." in out


def test_config_differences_names_keys_and_ignores_axes_and_unrecorded_keys(tmp_path):
    a = write_run(tmp_path, "x", {"loss": "center", "loss.lam": 0.1, "seed": 0}, {}, config={"new_key": 1})
    b = write_run(tmp_path, "x", {"loss": "center", "loss.lam": 0.2, "seed": 1}, {})
    runs, _ = load_runs(tmp_path, "x")
    assert {r.path for r in runs} == {a, b}
    assert set(config_differences(runs)) == {"loss.lam"}  # new_key: b was recorded without it
    assert config_differences(runs, axes=("loss.lam",)) == {}
    # A group's name covers no key below it: runs of one loss that differ in loss.lam are two configs.
    assert set(config_differences(runs, axes=("loss",))) == {"loss.lam"}
    assert seed_note(runs) == "Runs (seeds) per configuration: 1, over 2 configurations."
    assert seed_note([Run(tmp_path, {}, RunRecord())]) == ""


def test_a_truncated_metrics_json_is_named_and_the_table_refused(tmp_path, make_tables):
    for seed in (0, 1):
        dml_run(tmp_path, "ce", seed, 0.001)
    bad = next(tmp_path.rglob("metrics.json"))
    bad.write_text(bad.read_text()[:40])
    code, out, err = make_tables("dml/losses", "--outputs", str(tmp_path))
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1, err
    assert f"1 metrics.json cannot be read: {bad} (JSONDecodeError)" in err


def test_safir_cells_are_one_config_too(tmp_path, make_tables):
    """The Safir tables group runs by their own cells (``safir.grouped``): the same check, naming the cell."""
    from .test_safir_tables import knn, run_of

    for seed in (0, 1):
        path = run_of(tmp_path, "safir/table6_1", model="dml", pl=10, ls=2, seed=seed, metrics=knn(0.9))
        if seed:  # this seed trained longer
            path.joinpath("metrics.json").write_text(
                path.joinpath("metrics.json").read_text().replace('"max_epochs": 100', '"max_epochs": 7')
            )
    code, out, err = make_tables("safir/table6_1", "--outputs", str(tmp_path))
    assert code == 2 and "the 2 runs of the cell mnist dml pl=10 lsdim=2 triplet differ" in err, err
    assert "trainer.max_epochs (100: 1, 7: 1)" in err


def test_the_note_says_the_step_budget_the_runs_trained_for(tmp_path):
    """A step budget is a protocol's length of training (DSCL): the table's note says it, as it says max_epochs."""
    runs = [
        Run(
            tmp_path,
            {},
            RunRecord.from_dict({"provenance": {"data_source": "real", "max_epochs": None, "max_steps": steps}}),
        )
        for steps in (300, 5, -1)
    ]
    assert describe(runs, "full")[1] == "Full runs (data=real, max_steps=300/5)."
    assert describe(runs[2:], "full")[1] == "Full runs (data=real)."  # -1: no budget (Lightning's default)


def test_a_run_that_failed_resolving_its_config_pools_with_the_cell(tmp_path, make_tables):
    """A Table 2 cell refused for its λ (recorded failed, its config unresolved), then run with
    tuned_lambda_partial=true: one cell, one failed run, not two configs."""
    unresolved = {
        "loss": {"lam": "${tuned_lambda:0.5}"},
        "mode": "${run_mode:}",
        "tuned_lambda_partial": None,
    }
    params = {"dataset": "mnist", "model": "ffnn", "loss": "center", "seed": 0}
    write_run(tmp_path / "a", "corel/table2", params, None, config=unresolved)
    resolved = {"loss": {"lam": 0.7}, "mode": "full", "tuned_lambda_partial": True}
    write_run(tmp_path / "b", "corel/table2", params, {"test/acc": 0.9}, config=resolved)
    code, out, err = make_tables("corel/table2", "--outputs", str(tmp_path))
    assert code == 0, err
    assert "| FFNN | Center | 90.00 ± 0.00 (1 failed) (λ 0.7) |" in out


def test_runs_not_at_their_experiments_protocol_are_named(tmp_path, make_tables):
    """The short runs alone (no 300-step runs beside them to refuse): the table still says they are not the
    protocol, the step count the experiment composes for their row (dscl_row=end_to_end: 300) beside theirs."""
    dscl_digits(tmp_path, 5)
    code, out, err = make_tables("dscl/digits", "--outputs", str(tmp_path))
    assert code == 0, err
    (note,) = [line for line in out.splitlines() if line.startswith("> NOT the protocol of experiment dscl/digits: ")]
    assert "trainer.max_steps=5 where the experiment says 300 (3 of 3 runs, under " in note
    dscl_digits(tmp_path / "full", 300)
    code, out, err = make_tables("dscl/digits", "--outputs", str(tmp_path / "full"))
    assert code == 0 and "trainer.max_steps=" not in out, out


def test_a_table_says_how_it_treats_runs_that_diverged_after_a_good_epoch(tmp_path):
    from clusterable.tables.report import Run, describe

    kept = Run(tmp_path, {}, RunRecord(status="diverged", metrics={"test/acc": 0.9}, failed_epoch=3))
    lost = Run(tmp_path, {}, RunRecord(status="diverged", failed_epoch=0))
    _, note = describe([kept, lost, Run(tmp_path, {}, RunRecord(status="ok", metrics={"test/acc": 0.8}))], "full")
    assert note == (
        "1 run(s) diverged after a good epoch: their metrics.json keeps that epoch's metrics, which no cell uses "
        "(counted with its cell's failed runs)."
    )
