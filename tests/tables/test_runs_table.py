"""``clusterable-tables --runs``: a table of any runs (``tables.runs``), on hand-made run folders.

Rows by the named keys, a column per metric, the best row tested against the others by Welch's t; the paper
tables' rules: a row pools seeds alone, a folder holding one run counts once, every mistake is one line."""

from __future__ import annotations

from pathlib import Path

import pytest
from scipy import stats

from clusterable.tables import cli
from clusterable.tables.report import p_text

from .rundirs import write_run

# temperature -> test/acc of seeds 0, 1, 2: 0.5 is best, 0.1 and 0.5 far apart, 0.5 and 1.0 within the noise.
ACC = {0.1: (0.70, 0.72, 0.71), 0.5: (0.90, 0.91, 0.89), 1.0: (0.88, 0.93, 0.86)}


def sweep(outputs: Path, name: str = "myproject", choices: dict | None = None, **extra) -> None:
    for temperature, values in ACC.items():
        for seed, acc in enumerate(values):
            params = {"loss": "supcon", "loss.temperature": temperature, "seed": seed, **extra}
            metrics = {"test/acc": acc, "test/kmeans/acc": acc - 0.1, "val/loss": 1 - acc, "test/spread": 2 * acc}
            write_run(outputs, name, params, metrics, config={"optimized_metric": "test/acc"}, choices=choices)


def run(capsys: pytest.CaptureFixture, outputs: Path, *args: str) -> tuple[int, str, str]:
    code = cli.main([*args, "--outputs", str(outputs)])
    out, err = capsys.readouterr()
    return code, out, err


def test_rows_by_the_named_key_with_each_metric_over_the_seeds(tmp_path, capsys) -> None:
    sweep(tmp_path)
    code, out, err = run(
        capsys, tmp_path, "--runs", "myproject", "--by", "loss.temperature", "--metrics", "test/acc,test/kmeans/acc"
    )
    assert code == 0, err
    assert "| loss.temperature | test/acc | test/kmeans/acc | runs |" in out
    assert "| 0.1 | 0.7100 ± 0.0100 | 0.6100 ± 0.0100 | 3 |" in out
    assert "| 1.0 | 0.8900 ± 0.0361 | 0.7900 ± 0.0361 | 3 |" in out
    for ext in ("md", "tex", "csv"):
        assert (tmp_path / "tables" / f"runs_myproject.{ext}").is_file()
    assert "0.1,0.7100 ± 0.0100" in (tmp_path / "tables" / "runs_myproject.csv").read_text()


def test_the_best_row_is_tested_against_each_other_row_by_welch_s_t(tmp_path, capsys) -> None:
    sweep(tmp_path)
    code, out, _ = run(capsys, tmp_path, "--runs", "myproject", "--by", "loss.temperature", "--metrics", "test/acc")
    assert code == 0
    p_far = stats.ttest_ind(ACC[0.5], ACC[0.1], equal_var=False, alternative="greater").pvalue
    p_near = stats.ttest_ind(ACC[0.5], ACC[1.0], equal_var=False, alternative="greater").pvalue
    assert p_far < 0.05 < p_near
    line = next(li for li in out.splitlines() if li.startswith("- ["))
    assert line.startswith(f"- [not shown (p = {p_near:.2g})] loss.temperature=0.5 has the highest test/acc")
    assert f"vs loss.temperature=0.1 +0.1900 ({p_text(p_far)})" in line
    assert "Welch's t over seeds" in line


def test_a_loss_is_best_when_lowest(tmp_path, capsys) -> None:
    sweep(tmp_path)
    _, out, _ = run(capsys, tmp_path, "--runs", "myproject", "--by", "loss.temperature", "--metrics", "val/loss")
    assert "loss.temperature=0.5 has the lowest val/loss" in out


def test_without_by_and_metrics_the_rows_are_what_varies_and_the_column_what_was_optimised(tmp_path, capsys) -> None:
    sweep(tmp_path)
    code, out, _ = run(capsys, tmp_path, "--runs", "myproject")
    assert code == 0
    assert "| loss.temperature | test/acc | runs |" in out


def test_runs_are_found_by_their_name_or_their_experiment_option(tmp_path, capsys) -> None:
    sweep(tmp_path, name="renamed", choices={"experiment": "mine/sweep"})  # name=renamed on the command line
    for name in ("renamed", "mine/sweep"):
        code, out, _ = run(capsys, tmp_path, "--runs", name, "--by", "loss.temperature")
        assert code == 0 and "| 0.5 | 0.9000 ± 0.0100 | 3 |" in out
    assert (tmp_path / "tables" / "runs_mine_sweep.md").is_file()


def test_a_row_never_pools_runs_that_differ_in_more_than_their_seed(tmp_path, capsys) -> None:
    sweep(tmp_path, **{"optimizer.lr": 0.001})
    sweep(tmp_path, **{"optimizer.lr": 0.01})  # the same sweep at another learning rate, in the same folder
    code, out, err = run(capsys, tmp_path, "--runs", "myproject", "--by", "loss.temperature")
    assert code == 2 and out == ""
    assert len(err.strip().splitlines()) == 1 and "optimizer.lr" in err and "differ in more than their seed" in err
    code, out, _ = run(capsys, tmp_path, "--runs", "myproject", "--by", "loss.temperature,optimizer.lr")
    assert code == 0 and "| 0.5 | 0.01 |" in out


def test_a_metric_whose_name_does_not_say_its_direction_is_tested_once_told(tmp_path, capsys) -> None:
    sweep(tmp_path)
    args = ["--runs", "myproject", "--by", "loss.temperature", "--metrics", "test/acc,test/spread"]
    code, out, _ = run(capsys, tmp_path, *args)
    assert code == 0 and "has the highest test/spread" not in out
    assert "> Not tested: test/spread, whose name does not say whether higher or lower is better" in out
    code, out, _ = run(capsys, tmp_path, *args, "--higher", "test/spread")
    assert code == 0 and "loss.temperature=0.5 has the highest test/spread" in out and "Not tested" not in out
    code, out, _ = run(capsys, tmp_path, *args, "--lower", "test/spread")
    assert code == 0 and "loss.temperature=0.1 has the lowest test/spread" in out


def test_your_config_folder_names_the_runs_that_depart_from_your_experiment(tmp_path, capsys, monkeypatch) -> None:
    """With ``-cd`` (or ``$CLUSTERABLE_SEARCHPATH``) your experiment composes, so its protocol is checked as the
    papers' are; without it the table is the same, with no such note."""
    monkeypatch.delenv("CLUSTERABLE_SEARCHPATH", raising=False)
    conf = tmp_path / "conf" / "experiment"
    conf.mkdir(parents=True)
    (conf / "myproject.yaml").write_text("# @package _global_\nname: myproject\ntrainer:\n  max_epochs: 7\n")
    for temperature, values in ACC.items():
        for seed, acc in enumerate(values):
            params = {"loss.temperature": temperature, "seed": seed}
            config = {"optimized_metric": "test/acc", "trainer": {"max_epochs": 2}}
            write_run(tmp_path / "out", "myproject", params, {"test/acc": acc}, config=config)
    note = "trainer.max_epochs=2 where the experiment says 7 (9 of 9 runs"
    code, out, err = run(capsys, tmp_path / "out", "--runs", "myproject", "-cd", str(tmp_path / "conf"))
    assert code == 0 and note in out, err
    monkeypatch.setenv("CLUSTERABLE_SEARCHPATH", str(tmp_path / "conf"))
    assert note in run(capsys, tmp_path / "out", "--runs", "myproject")[1]
    monkeypatch.delenv("CLUSTERABLE_SEARCHPATH")
    code, out, _ = run(capsys, tmp_path / "out", "--runs", "myproject")
    assert code == 0 and "| 0.5 | 0.9000 ± 0.0100 | 3 |" in out and "where the experiment says" not in out
    with pytest.raises(SystemExit) as exit_:
        cli.main(["--runs", "myproject", "-cd", str(tmp_path / "nowhere")])
    assert exit_.value.code == 2 and "--config-dir: no folder" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("args", "code", "said"),
    [
        (["--runs", "myproject", "--by", "loss.temprature"], 2, "--by loss.temprature: none of the 9 runs"),
        (["--runs", "myproject", "--metrics", "test/acc,test/nmi"], 2, "--metrics test/nmi: no finished run"),
        (["--runs", "myproject", "--by", "loss.temperature,"], 2, "has an empty item"),
        (["--runs", "yourproject"], 1, "no runs named 'yourproject'"),
        (["corel/table1", "--runs", "myproject"], 2, "not both or neither"),
        ([], 2, "not both or neither"),
        (["corel/table1", "--by", "loss"], 2, "--by, --metrics, --higher and --lower shape a table of --runs"),
        (["--runs", "myproject", "--metrics", "test/acc", "--higher", "test/acc", "--lower", "test/acc"], 2, "both"),
        (["--runs", "myproject", "--metrics", "test/acc", "--higher", "test/spread"], 2, "not a column of the table"),
    ],
)
def test_every_mistake_is_one_line(tmp_path, capsys, args, code, said) -> None:
    sweep(tmp_path)
    if args and args[0] == "corel/table1" or not args:
        with pytest.raises(SystemExit) as exit_:
            cli.main([*args, "--outputs", str(tmp_path)])
        assert exit_.value.code == code
        assert said in capsys.readouterr().err
        return
    got, out, err = run(capsys, tmp_path, *args)
    assert got == code and out == ""
    assert said in err and len(err.strip().splitlines()) == 1
