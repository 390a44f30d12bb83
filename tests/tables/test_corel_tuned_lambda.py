"""COREL's tuned-λ protocol: Table 1 picks λ by validation accuracy and writes the winners; Table 2's runs read
them (``${tuned_lambda:0.5}`` in the λ losses' configs, ``tuned_lambda_from`` in the experiment); a diverged λ
(Gaussian-COREL below 0.5) is shown as such and never chosen; a missing winner is one line."""

from __future__ import annotations

import pytest
import yaml
from helpers.running import all_metrics, by_override
from scipy import stats

from clusterable.tables import corel
from clusterable.tables.corel import supplement
from clusterable.tables.corel.paper import Tuning, fig2_claim
from clusterable.tables.report import Cell, load_runs, p_text
from clusterable.tuned_lambda import TunedLambdaError, lookup, winners_file, write_winners

from .rundirs import write_run

QUICK = ["trainer.enable_progress_bar=false"]


def table1_runs(outputs, mode: str = "full", source: str = "real") -> None:
    """Hand-made corel/table1 runs: val/acc per (dataset, model, loss, λ, seed); None = failed; "div" = diverged."""
    grid = {
        ("mnist", "ffnn", "gaussian_corel"): {
            0.3: ["div"],  # unbounded below
            0.4: ["div", 0.999],  # one seed diverged: never the winner, however good the other
            0.5: [0.95],
            0.7: [0.97],
            0.9: [0.97],  # ties with 0.7: the smaller λ wins
        },
        ("mnist", "ffnn", "center"): {0.5: [0.90, 0.92], 0.9: [0.93, 0.93]},
        ("mnist", "ffnn", "cosine_corel"): {0.5: [None]},  # every run failed (not diverged)
        ("fashion_mnist", "cnn", "gaussian_corel"): {0.5: [0.88], 0.8: [0.90]},
    }
    for (d, m, loss), lams in grid.items():
        for lam, values in lams.items():
            for seed, value in enumerate(values):
                params = {"dataset": d, "model": m, "loss": loss, "loss.lam": lam, "seed": seed}
                metrics = None if value in (None, "div") else {"val/acc": value, "test/acc": value}
                write_run(
                    outputs,
                    "corel/table1",
                    params,
                    metrics,
                    mode=mode,
                    source=source,
                    diverged_at=1 if value == "div" else None,
                )


def test_table1_picks_lambda_by_validation_accuracy_and_writes_the_winners(tmp_path, make_tables):
    table1_runs(tmp_path)
    code, out, err = make_tables("corel/table1", "--outputs", str(tmp_path))
    assert code == 0, err
    path = tmp_path / "tables" / "corel_table1_lambda.yaml"
    assert f"Winners written to {path}" in out
    data = yaml.safe_load(path.read_text())
    assert (data["table"], data["experiment"], data["mode"]) == ("corel/table1", "corel/table1", "full")
    gauss = data["winners"]["mnist"]["ffnn"]["gaussian_corel"]
    assert gauss["lam"] == 0.7 and gauss["val_acc"] == 0.97 and gauss["runs"] == 1
    assert gauss["candidates"] == {0.3: "diverged", 0.4: "diverged", 0.5: 0.95, 0.7: 0.97, 0.9: 0.97}
    center = data["winners"]["mnist"]["ffnn"]["center"]
    assert center["lam"] == 0.9 and center["val_acc"] == 0.93 and center["runs"] == 2
    cosine = data["winners"]["mnist"]["ffnn"]["cosine_corel"]
    assert cosine["lam"] is None and cosine["candidates"] == {0.5: "failed"}
    assert data["winners"]["fashion_mnist"]["cnn"]["gaussian_corel"]["lam"] == 0.8

    rows = {line.split(" | ")[0].lstrip("| "): line for line in out.splitlines() if line.startswith("| ")}
    assert "λ=0.7 (val 97.00); 2 λ diverged" in rows["Gaussian-COREL"]
    assert "λ=0.9 (val 93.00)" in rows["Center"]
    # These grids are a few of the experiment's 20 λ: each cell says so, and never "every λ" of what did not run.
    assert "failed (every λ that ran); grid incomplete (1 of 20 λ ran)" in rows["Cosine-COREL"]
    assert "grid incomplete (5 of 20 λ ran)" in rows["Gaussian-COREL"]
    assert "Gaussian-COREL FFNN-MNIST: λ = 0.3, 0.4" in out  # the diverged λ values, named
    assert "Center FFNN-MNIST: 0.5, 0.9 (2 of 20; never ran: 0.05, 0.1," in out  # the λ that ran, per setting
    assert gauss["complete"] is False and 0.05 in gauss["missing"] and 0.7 not in gauss["missing"]
    # Checked on the settings present (FFNN-MNIST, CNN-Fashion), naming the missing ones; one seed each: the
    # means' verdict, no test.
    assert (
        "- [holds on one seed] Gaussian-COREL gains from tuning λ (its best λ beats λ = 0.5) (one seed: means "
        "compared, no test; difference: ffnn-mnist +2.00 (one seed); cnn-fashion_mnist +2.00 (one seed); "
        "checked on 2 of 6, no numbers for cnn-mnist, ffnn-fashion_mnist," in out
    )
    # What Table 2's resolver reads back: a winner of an incomplete grid only when it says so.
    with pytest.raises(
        TunedLambdaError,
        match="grid for dataset=mnist, model=ffnn, loss=gaussian_corel is incomplete .*tuned_lambda_partial=true",
    ):
        lookup("corel/table1", tmp_path, "full", "mnist", "ffnn", "gaussian_corel")
    assert lookup("corel/table1", tmp_path, "full", "mnist", "ffnn", "gaussian_corel", partial=True) == 0.7
    assert lookup("corel/table1", tmp_path, "full", "fashion_mnist", "cnn", "gaussian_corel", partial=True) == 0.8


GRID = (
    0.05,
    0.1,
    0.15,
    0.2,
    0.25,
    0.3,
    0.35,
    0.4,
    0.45,
    0.5,
    0.55,
    0.6,
    0.65,
    0.7,
    0.75,
    0.8,
    0.85,
    0.9,
    0.95,
    1.0,
)


def test_a_complete_grid_is_recorded_complete_and_handed_over(tmp_path, make_tables):
    # read from src/clusterable/conf/experiment/corel/table1.yaml
    assert corel.experiment_grid("corel/table1") == GRID
    for lam in GRID:
        params = {"dataset": "mnist", "model": "ffnn", "loss": "center", "loss.lam": lam, "seed": 0}
        write_run(tmp_path, "corel/table1", params, {"val/acc": 0.9 + lam / 100})
    code, out, err = make_tables("corel/table1", "--outputs", str(tmp_path))
    assert code == 0 and "incomplete" not in out.lower(), out
    assert "λ=1 (val 91.00) |" in out
    entry = yaml.safe_load(winners_file(tmp_path, "corel/table1", "full").read_text())["winners"]["mnist"]["ffnn"]
    assert entry["center"]["complete"] is True and entry["center"]["missing"] == []
    assert lookup("corel/table1", tmp_path, "full", "mnist", "ffnn", "center") == 1.0


def test_a_sub_grid_is_never_said_to_diverge_at_every_lambda(tmp_path, make_tables):
    """The issue's repro: `loss=gaussian_corel,center loss.lam=0.1,0.2,0.3` diverges at every λ that ran for
    Gaussian-COREL; 17 λ never ran, so the table must not say "diverged (every λ)"."""
    for lam in (0.1, 0.2, 0.3):
        for loss in ("gaussian_corel", "center"):
            params = {"dataset": "mnist", "model": "ffnn", "loss": loss, "loss.lam": lam, "seed": 0}
            diverged = loss == "gaussian_corel"
            write_run(
                tmp_path,
                "corel/table1",
                params,
                None if diverged else {"val/acc": 0.9},
                diverged_at=1 if diverged else None,
            )
    code, out, err = make_tables("corel/table1", "--outputs", str(tmp_path))
    assert code == 0, err
    assert "diverged (every λ)" not in out
    assert "| Gaussian-COREL | diverged (every λ that ran); 3 λ diverged; grid incomplete (3 of 20 λ ran) |" in out
    assert "INCOMPLETE λ grids" in out and "Gaussian-COREL FFNN-MNIST: 0.1, 0.2, 0.3 (3 of 20; never ran:" in out


def test_a_smoke_winner_is_never_below_the_divergence_bound(tmp_path, make_tables):
    """Smoke runs are too short to diverge: Gaussian-COREL at λ = 0.15 finishing best must not be Table 2's λ."""
    for lam, acc in ((0.15, 0.5), (0.6, 0.3), (0.9, 0.2)):
        params = {"dataset": "mnist", "model": "ffnn", "loss": "gaussian_corel", "loss.lam": lam, "seed": 0}
        write_run(tmp_path, "corel/table1", params, {"val/acc": acc}, mode="smoke", source="fake")
    code, out, err = make_tables("corel/table1", "--outputs", str(tmp_path))
    assert code == 0, err
    assert "λ=0.6 (val 30.00)" in out and "no λ below 0.5 for Gaussian-COREL is chosen" in out
    assert lookup("corel/table1", tmp_path, "smoke", "mnist", "ffnn", "gaussian_corel", partial=True) == 0.6


def test_figure2_lists_a_diverged_lambda_and_never_plots_it(tmp_path):
    for lam, value in ((0.3, "div"), (0.5, 0.88), (0.8, 0.90)):
        params = {"dataset": "fashion_mnist", "model": "cnn", "loss": "gaussian_corel", "loss.lam": lam}
        write_run(
            tmp_path,
            "corel/table1",
            params,
            None if value == "div" else {"val/acc": value},
            diverged_at=1 if value == "div" else None,
        )
    runs, _ = load_runs(tmp_path, "corel/table1")
    fig = corel.fig2(runs, tmp_path / "tables")
    paper = {lam: supplement.value("fashion_mnist", "cnn", "gaussian_corel", lam) for lam in (0.3, 0.8)}
    assert ["Gaussian-COREL", "0.3", "diverged", f"{paper[0.3]:.2f}", "—"] in fig.rows
    assert [
        "Gaussian-COREL",
        "0.8",
        "90.00 ± 0.00",
        f"{paper[0.8]:.2f}",
        f"{90 - paper[0.8]:+.2f}",
    ] in fig.rows
    assert any("Diverged, not plotted: Gaussian-COREL λ = 0.3" in n for n in fig.notes)
    assert fig.claims[0].verdict == "holds on one seed" and fig.claims[0].detail == (
        "best λ = 0.8 (the best mean; which λ is best is read off the means, not tested); one seed: means compared, "
        "no test; difference: λ 0.8 vs 0.5 +2.00 (one seed)"
    )


def test_figure2s_claim_tests_the_best_lambda_against_half_over_the_seeds():
    best, half = [0.90, 0.902, 0.901], [0.88, 0.881, 0.882]
    claim = fig2_claim(Tuning(val={0.5: Cell(half), 0.8: Cell(best)}))
    p = stats.ttest_ind(best, half, equal_var=False, alternative="greater").pvalue
    assert p < 0.05 and claim.verdict == "holds"
    assert claim.detail.endswith(
        f"Welch's t over seeds, one-sided, α = 0.05; difference (p): λ 0.8 vs 0.5 +2.00 ({p_text(p)})"
    )
    # λ = 0.5 itself the best: the claim fails on which λ is best, read off the means (no test of that).
    claim = fig2_claim(Tuning(val={0.5: Cell(best), 0.8: Cell(half)}))
    assert claim.verdict == "does not hold" and claim.detail.startswith("best λ = 0.5 (the best mean;")


def test_smoke_winners_stay_apart_from_full_ones(tmp_path, make_tables):
    table1_runs(tmp_path, mode="smoke", source="fake")
    code, out, err = make_tables("corel/table1", "--outputs", str(tmp_path))
    assert code == 0, err
    assert (tmp_path / "tables" / "smoke" / "corel_table1_lambda.yaml").is_file()
    assert not (tmp_path / "tables" / "corel_table1_lambda.yaml").exists()
    assert lookup("corel/table1", tmp_path, "smoke", "mnist", "ffnn", "gaussian_corel", partial=True) == 0.7
    with pytest.raises(TunedLambdaError, match="corel_table1_lambda.yaml does not exist"):
        lookup("corel/table1", tmp_path, "full", "mnist", "ffnn", "gaussian_corel")


def test_digits_chain_runs_table2_at_table1_winners(train, make_tables):
    """The real chain on digits: Table 1 (λ = 0.3 diverges), its table and winners, Table 2 at the winner."""
    result = train(
        "-m",
        "experiment=corel/digits_table1",
        "loss=gaussian_corel",
        "loss.lam=0.3,0.7,0.9",
        "trainer.max_epochs=3",
        *QUICK,
    )
    # The diverged λ is a result of the grid, not a failure of it: exit 0, so `train.py -m ... && make_tables.py`
    # goes on to the table.
    assert result.code == 0 and "sweep: 2 ok, 1 diverged, 0 failed, 0 skipped" in result.out, result
    assert "diverged: dataset=digits,loss.lam=0.3," in result.out and not result.error_lines()
    diverged = by_override(train.outputs, "loss.lam")["0.3"]
    assert diverged["status"] == "diverged" and diverged["failed_epoch"] == 1
    assert "lam = 0.3 < 0.5 is unbounded below" in diverged["error"]
    assert diverged["error"].endswith("at epoch 1: the run diverged") and "\n" not in diverged["error"]
    # A result is kept: the same grid again skips all three cells, the diverged one included.
    again = train(
        "-m",
        "experiment=corel/digits_table1",
        "loss=gaussian_corel",
        "loss.lam=0.3,0.7,0.9",
        "trainer.max_epochs=3",
        *QUICK,
    )
    assert again.code == 0 and "sweep: 0 ok, 0 failed, 3 skipped" in again.out, again
    assert "metrics.json says diverged and its config is the one asked for" in again.out

    code, out, err = make_tables("corel/digits_table1", "--outputs", str(train.outputs))
    assert code == 0, err
    assert "3 runs (1 diverged, 0 failed) of corel/digits_table1" in out
    assert "; 1 λ diverged" in out and "Gaussian-COREL FFNN-Digits: λ = 0.3" in out
    winners = yaml.safe_load(winners_file(train.outputs, "corel/digits_table1", "full").read_text())
    tuned = winners["winners"]["digits"]["ffnn"]["gaussian_corel"]
    assert tuned["lam"] in (0.7, 0.9) and tuned["candidates"][0.3] == "diverged"
    # Three of the experiment's ten λ ran: Table 2 takes that winner only when told to.
    assert tuned["complete"] is False and tuned["missing"] == [0.1, 0.2, 0.4, 0.5, 0.6, 0.8, 1.0]
    with pytest.raises(TunedLambdaError, match="is incomplete"):
        lookup("corel/digits_table1", train.outputs, "full", "digits", "ffnn", "gaussian_corel")

    result = train(
        "-m",
        "experiment=corel/digits_table2",
        "loss=cce,gaussian_corel",
        "seed=0",
        "trainer.max_epochs=2",
        "tuned_lambda_partial=true",
        *QUICK,
    )
    assert result.code == 0, result.err
    runs = {
        m["config"]["loss"]["_target_"].rsplit(".", 1)[1]: m
        for m in all_metrics(train.outputs)
        if m["experiment"] == "corel/digits_table2"
    }
    assert runs["GaussianCOREL"]["config"]["loss"]["lam"] == tuned["lam"]
    assert runs["GaussianCOREL"]["config"]["tuned_lambda_from"] == "corel/digits_table1"
    code, out, err = make_tables("corel/digits_table2", "--outputs", str(train.outputs))
    assert code == 0, err
    row = next(line for line in out.splitlines() if line.startswith("| FFNN | Gaussian-COREL"))
    assert row.endswith(f"(λ {tuned['lam']:g}) |")
    assert "λ" not in next(line for line in out.splitlines() if line.startswith("| FFNN | CCE"))
    assert "λ in each cell: the winner of corel/digits_table1" in out


def test_table2_without_table1_fails_with_one_line_that_says_what_to_run(train):
    result = train("experiment=corel/digits_table2", "loss=gaussian_corel", "trainer.max_epochs=1", *QUICK)
    (line,) = result.error_lines()
    path = winners_file(train.outputs, "corel/digits_table1", "full")
    assert result.code == 1 and line.startswith("error: config: loss.lam is Table 1's tuned λ")
    assert f"{path} does not exist" in line and "python scripts/make_tables.py corel/digits_table1" in line
    assert "tuned_lambda_from=null (every loss at 0.5) or loss.lam=<λ>" in line
    assert "Traceback" not in result.out + result.err
    (m,) = all_metrics(train.outputs)
    assert m["status"] == "failed" and m["error"] == line.removeprefix("error: ")

    # A grid: refused once before any cell runs (CCE's included: half a Table 2 is not worth its hours), one line.
    result = train(
        "-m",
        "experiment=corel/digits_table2",
        "loss=cce,center,gaussian_corel",
        "seed=0",
        "trainer.max_epochs=1",
        *QUICK,
    )
    assert len(result.error_lines()) == 1, result
    (line,) = result.error_lines()
    assert result.code == 2 and line.startswith("error: loss.lam is Table 1's tuned λ"), result
    assert "corel_digits_table1_lambda.yaml does not exist" in line and line.endswith(
        "(the whole sweep is refused: no cell ran)"
    )
    assert "failed:" not in result.out + result.err and "Traceback" not in result.out + result.err
    assert len(all_metrics(train.outputs)) == 1  # the single run's above: no cell of the grid ran


@pytest.mark.parametrize("fixed, lam", [("tuned_lambda_from=null", 0.5), ("loss.lam=0.8", 0.8)])
def test_table2_runs_at_a_fixed_lambda_on_purpose(train, fixed, lam):
    result = train("experiment=corel/digits_table2", "loss=gaussian_corel", fixed, "trainer.max_epochs=1")
    assert result.code == 0, result.err
    (m,) = all_metrics(train.outputs)
    assert m["status"] == "ok" and m["config"]["loss"]["lam"] == lam


def test_a_winners_file_without_the_setting_names_what_it_has(train):
    path = winners_file(train.outputs, "corel/digits_table1", "full")
    entry = {"lam": 0.3, "val_acc": 0.9, "runs": 1, "candidates": {0.3: 0.9}}
    table = "corel/digits_table1"
    write_winners(path, table, table, "full", {("digits", "ffnn", "center"): entry})
    result = train("experiment=corel/digits_table2", "loss=gaussian_corel", "trainer.max_epochs=1", *QUICK)
    (line,) = result.error_lines()
    assert result.code == 1
    assert f"{path} has no tuned λ for dataset=digits, model=ffnn, loss=gaussian_corel" in line
    assert "(it has: digits/ffnn/center): run corel/digits_table1 on that setting" in line
    # The entry that is there is used.
    result = train("experiment=corel/digits_table2", "loss=center", "trainer.max_epochs=1", *QUICK)
    assert result.code == 0, result.err
    center = next(m for m in all_metrics(train.outputs) if m["status"] == "ok")
    assert center["config"]["loss"]["lam"] == 0.3
    assert center["config"]["tuned_lambda_from"] == "corel/digits_table1"


def test_a_smoke_table2_without_table1_runs_at_the_config_lambda_and_the_table_says_so(train, make_tables):
    # debug=smoke sets tuned_lambda_fallback: the Table 2 smoke test works on a fresh clone, and says λ was not tuned.
    result = train(
        "-m", "experiment=corel/digits_table2", "debug=smoke", "loss=cce,gaussian_corel", "hydra.sweeper.params.seed=0"
    )
    assert result.code == 0 and "sweep: 2 ok, 0 failed" in result.out, result
    assert "λ: 0.5, the config's (Table 1's smoke winners are missing: tuned_lambda_fallback)" in result.out
    runs = {m["config"]["loss"]["_target_"].rsplit(".", 1)[-1]: m for m in all_metrics(train.outputs)}
    assert (
        runs["GaussianCOREL"]["notes"]["lambda_fallback"] is True
        and runs["GaussianCOREL"]["config"]["loss"]["lam"] == 0.5
    )
    assert "lambda_fallback" not in runs["CCELoss"]  # no λ to tune
    code, out, err = make_tables("corel/digits_table2", "--outputs", str(train.outputs))
    assert code == 0, err
    assert "λ NOT tuned in 1 run(s): Table 1's winners were missing" in out and "the winner of" not in out
    # Once Table 1's smoke winners are there, the same grid re-runs the λ cell at its winner.
    table = "corel/digits_table1"
    entry = {"lam": 0.7, "val_acc": 0.9, "runs": 1, "candidates": {0.7: 0.9}}
    write_winners(
        winners_file(train.outputs, table, "smoke"),
        table,
        table,
        "smoke",
        {("digits", "ffnn", "gaussian_corel"): entry},
    )
    result = train(
        "-m", "experiment=corel/digits_table2", "debug=smoke", "loss=cce,gaussian_corel", "hydra.sweeper.params.seed=0"
    )
    assert result.code == 0 and "sweep: 1 ok, 0 failed, 1 skipped" in result.out, result.out
    # The cell says the λ it runs at.
    assert "λ: 0.7, corel/digits_table1's winner for dataset=digits, model=ffnn, loss=gaussian_corel" in result.out
    code, out, _ = make_tables("corel/digits_table2", "--outputs", str(train.outputs))
    assert "(λ 0.7)" in out and "the winner of corel/digits_table1" in out and "NOT tuned" not in out
    # A cell that fell back to λ = 0.5 (no winner for Center yet), then Table 1 chooses 0.5: the same run, kept,
    # and no longer said to be untuned.
    center = [
        "-m",
        "experiment=corel/digits_table2",
        "debug=smoke",
        "loss=center",
        "hydra.sweeper.params.seed=0",
    ]
    result = train(*center)
    assert result.code == 0 and "sweep: 1 ok" in result.out and "tuned_lambda_fallback" in result.out, result
    both = {("digits", "ffnn", "gaussian_corel"): entry, ("digits", "ffnn", "center"): {**entry, "lam": 0.5}}
    write_winners(winners_file(train.outputs, table, "smoke"), table, table, "smoke", both)
    result = train(*center)
    assert "sweep: 0 ok, 0 failed, 1 skipped" in result.out, result.out
    assert not any(m.get("notes", {}).get("lambda_fallback") for m in all_metrics(train.outputs))
    code, out, _ = make_tables("corel/digits_table2", "--outputs", str(train.outputs))
    assert "(λ 0.5)" in out and "NOT tuned" not in out


def test_a_single_diverging_run_is_one_error_line_and_exit_1(train):
    # Asked for alone, a run that produced no model says so in its exit status (a grid counts it as a result).
    result = train(
        "experiment=corel/digits_table1", "loss=gaussian_corel", "loss.lam=0.2", "trainer.max_epochs=3", *QUICK
    )
    (line,) = result.error_lines()
    assert result.code == 1 and "lam = 0.2 < 0.5 is unbounded below" in line and line.startswith("error: ")
    (m,) = all_metrics(train.outputs)
    assert m["status"] == "diverged" and m["failed_epoch"] == 1


def test_a_typo_in_tuned_lambda_from_is_refused_in_one_line_in_smoke_mode_too(train):
    """A smoke run's fallback covers missing winners, never a Table 1 that does not exist."""
    typo = ["experiment=corel/digits_table2", "debug=smoke", "tuned_lambda_from=corel/tabel1"]
    result = train("-m", *typo, "loss=cce,gaussian_corel", "hydra.sweeper.params.seed=0")
    assert len(result.error_lines()) == 1, result
    (line,) = result.error_lines()
    assert result.code == 2 and line == (
        "error: tuned_lambda_from must name an experiment that tunes λ (corel/digits_table1, "
        "corel/fashion150_recovered_cnn, corel/fashion150_recovered_table1, corel/fashion150_table1, "
        "corel/fashion_paper_table1, corel/fashion_table1, corel/table1) or be null, got 'corel/tabel1' (the "
        "whole sweep is refused: no cell ran)"
    )
    assert not all_metrics(train.outputs)
    result = train(*typo, "loss=gaussian_corel", *QUICK)
    assert result.code == 1 and len(result.error_lines()) == 1, result
    assert "got 'corel/tabel1'" in result.error_lines()[0] and "Traceback" not in result.out + result.err
