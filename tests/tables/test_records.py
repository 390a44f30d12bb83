"""scripts/records.py: the records of finished real-data runs saved to a tracked folder and restored for a resume,
without checkpoints, locks or unfinished runs; a table builds from the saved records as from the sweep."""

from __future__ import annotations

import json
from pathlib import Path

from helpers.running import script_module

from tables.rundirs import write_run

ROOT = Path(__file__).resolve().parents[2]


def records():
    return script_module(ROOT / "scripts" / "records.py")


def test_save_keeps_finished_records_only_and_restore_brings_them_back(tmp_path: Path, make_tables, capsys) -> None:
    outputs, results = tmp_path / "outputs", tmp_path / "results"
    for seed in (0, 1):
        run = write_run(
            outputs,
            "corel/fashion_table2",
            {"dataset": "fashion_mnist", "model": "ffnn", "loss": "cce", "seed": seed},
            {"test/acc": 0.88},
            config={"protocol": {"budget": "cpu"}, "trainer": {"max_epochs": 10}},
        )
        (run / "checkpoints").mkdir()
        (run / "checkpoints" / "best.ckpt").write_bytes(b"weights")
        (run / ".lock").write_text("")
    write_run(
        outputs,
        "corel/fashion_table2",
        {"dataset": "fashion_mnist", "model": "ffnn", "loss": "cce", "seed": 2},
        None,
        config={"protocol": {"budget": "cpu"}},
    )  # a failed run: not a record to keep
    tool = records()
    argv = ["--outputs", str(outputs), "--results", str(results)]
    assert tool.main(["save", "corel/fashion_table2", *argv]) == 0
    assert "save: 2 runs copied" in capsys.readouterr().out
    saved = sorted(p.relative_to(results).as_posix() for p in results.rglob("*") if p.is_file())
    assert len(saved) == 2 and all(p.endswith("metrics.json") for p in saved), saved
    code, out, err = make_tables("corel/fashion_table2", "--outputs", str(results))
    assert code == 0 and "| FFNN | CCE | 88.00 ± 0.00 |" in out, err
    # a fresh checkout: restored where the sweep looks, a second restore copies nothing
    fresh = tmp_path / "fresh"
    assert tool.main(["restore", "--outputs", str(fresh), "--results", str(results)]) == 0
    assert len(list(fresh.rglob("metrics.json"))) == 2
    assert tool.main(["restore", "--outputs", str(fresh), "--results", str(results)]) == 0
    assert "restore: 0 runs copied" in capsys.readouterr().out.splitlines()[-1]
    assert tool.main(["save", "corel/nope", *argv]) == 2


def _argv(tmp_path: Path) -> list[str]:
    return ["--outputs", str(tmp_path / "outputs"), "--results", str(tmp_path / "results")]


def _cell(outputs: Path, seed: int, config: dict | None = None) -> Path:
    return write_run(
        outputs,
        "corel/fashion_table2",
        {"dataset": "fashion_mnist", "model": "ffnn", "loss": "cce", "seed": seed},
        {"test/acc": 0.88 + 0.01 * seed},
        timing={"fit_s": 100.0 + seed},
        config={"protocol": {"budget": "cpu"}, **(config or {})},
    )


def test_restore_over_an_interrupted_attempt_leaves_nothing_of_it(tmp_path: Path, capsys) -> None:
    """The attempt's best.ckpt (epoch 3 of an interrupted run) must not sit beside the restored record: re-scoring
    would file that partial model's numbers under the record. The record keeps no checkpoint, so re-scoring it says
    it needs training again."""
    from clusterable.rescore import main as rescore

    results, outputs = tmp_path / "results", tmp_path / "outputs"
    kept = _cell(results, 0)
    local = outputs / kept.relative_to(results)
    (local / "checkpoints").mkdir(parents=True)
    (local / "checkpoints" / "best.ckpt").write_bytes(b"epoch 3 of an attempt")
    (local / "representations.npz").write_bytes(b"the attempt's")
    (local / "head.pt").write_bytes(b"the attempt's")
    (local / "metrics.json").write_text(json.dumps({"status": "failed", "error": "interrupted", "metrics": {}}))
    assert records().main(["restore", *_argv(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "it replaced an unfinished attempt: status failed" in out and "restore: 1 runs copied" in out
    assert sorted(p.name for p in local.rglob("*")) == [".lock", "metrics.json"]
    assert json.loads((local / "metrics.json").read_text())["status"] == "ok"
    # (named by its experiment, the options before the evaluators, as a user may write them)
    assert rescore(["corel/fashion_table2", "--outputs", str(outputs), "evaluator=[clustering]"]) == 1
    line = capsys.readouterr().out.splitlines()[0]
    assert line.endswith("re-scoring it needs training again (run its cell again, with the evaluators added)"), line


def test_a_record_that_cannot_be_read_is_named_and_fails_the_copy(tmp_path: Path, capsys) -> None:
    results = tmp_path / "results"
    for seed in (0, 1, 2):
        _cell(results, seed)
    truncated = _cell(results, 3) / "metrics.json"
    truncated.write_text(truncated.read_text()[:40])
    (_cell(results, 4) / "metrics.json").write_text("[1, 2]")
    assert records().main(["restore", *_argv(tmp_path)]) == 1
    out, err = capsys.readouterr()
    assert "restore: 3 runs copied" in out and "2 left (named above)" in out
    lines = err.splitlines()
    assert len(lines) == 2 and all(line.startswith("unreadable corel/fashion_table2/") for line in lines), err
    assert "seed=3: " in lines[0] and "JSONDecodeError" in lines[0] and "(not a mapping" in lines[1]
    # a failed run is not a record to keep: named, and nothing is wrong
    write_run(tmp_path / "outputs", "corel/x", {"seed": 0}, None)
    assert records().main(["save", "corel/x", *_argv(tmp_path)]) == 0
    assert "left corel/x/seed=0: status failed, not finished" in capsys.readouterr().out
    # a name that leads out of the sweeps' folder is a usage error
    assert records().main(["save", "../x", *_argv(tmp_path)]) == 2
    assert capsys.readouterr().err.strip() == "error: '../x' is not an experiment's name (e.g. corel/fashion150_table1)"


def test_a_partial_run_in_the_destination_is_left_for_clusterable_eval(tmp_path: Path, capsys) -> None:
    """A local run that trained but whose evaluator failed holds a trained model: a restore does not replace it."""
    results, outputs = tmp_path / "results", tmp_path / "outputs"
    kept = _cell(results, 0)
    local = _cell(outputs, 0)
    payload = json.loads((local / "metrics.json").read_text())
    (local / "metrics.json").write_text(json.dumps({**payload, "status": "partial", "timing": {"fit_s": 1.0}}))
    (local / "checkpoints").mkdir()
    (local / "checkpoints" / "best.ckpt").write_bytes(b"its own")
    assert records().main(["restore", *_argv(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert f"left {kept.relative_to(results / 'multirun' / 'full').as_posix()}: a partial run is there" in out
    assert json.loads((local / "metrics.json").read_text())["status"] == "partial"
    assert (local / "checkpoints" / "best.ckpt").read_bytes() == b"its own"
    # and a partial run is not a record to save
    assert records().main(["save", "corel/fashion_table2", *_argv(tmp_path)]) == 0
    assert "status partial, not finished (trained, an evaluator failed: clusterable-eval finishes it)" in (
        capsys.readouterr().out
    )


def test_cells_of_every_override_character_are_saved_and_restored(tmp_path: Path, capsys) -> None:
    """A ``/`` in an override (a group such as ``loss/metric``, a path) nests the cell's folder; brackets, commas,
    quotes, spaces and glob characters are plain characters of its name. A cell inside another's folder is its own
    record."""
    outputs = tmp_path / "outputs"
    params = [
        {"loss/metric": "triplet", "seed": 0},
        {"dataset.root": "/data/x y", "seed": 0},
        {"evaluator.retrieval.ks": "[1,4]", "seed": 0},
        {"name_tag": "a*b?c'd\"e", "seed": 0},
        {"seed": 0, "x": "a"},
    ]
    cells = [write_run(outputs, "safir/digits", p, {"test/acc": 0.5}) for p in params]
    nested = write_run(outputs, "safir/digits", {"seed": 0, "x": "a/b"}, {"test/acc": 0.6})
    assert nested.parent == cells[-1]  # "seed=0,x=a/b" lies inside "seed=0,x=a"
    assert records().main(["save", "safir/digits", *_argv(tmp_path)]) == 0
    assert "save: 6 runs copied" in capsys.readouterr().out
    results = tmp_path / "results"
    for cell in [*cells, nested]:
        kept = results / cell.relative_to(outputs)
        assert json.loads((kept / "metrics.json").read_text()) == json.loads((cell / "metrics.json").read_text())
    fresh = tmp_path / "fresh"
    assert records().main(["restore", "--outputs", str(fresh), "--results", str(results)]) == 0
    assert len(list(fresh.rglob("metrics.json"))) == 6
    assert records().main(["restore", "--outputs", str(fresh), "--results", str(results)]) == 0
    assert capsys.readouterr().out.splitlines()[-1].endswith("0 completed, 6 there already, 0 left (named above)")


def test_a_record_missing_its_csv_log_is_completed_and_another_run_is_left(tmp_path: Path, capsys) -> None:
    outputs, results = tmp_path / "outputs", tmp_path / "results"
    cell = _cell(outputs, 0, config={"logger": {"csv": {"name": "csv"}}})
    assert records().main(["save", "corel/fashion_table2", *_argv(tmp_path)]) == 0
    assert "copied corel/fashion_table2/" in capsys.readouterr().out  # "... without its CSV log: ... not there"
    (cell / "csv").mkdir()
    (cell / "csv" / "metrics.csv").write_text("epoch,train/loss\n0,1.0\n")
    assert records().main(["save", "corel/fashion_table2", *_argv(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "completed corel/fashion_table2/" in out and "added csv/metrics.csv, which it lacked" in out
    kept = results / cell.relative_to(outputs)
    assert (kept / "csv" / "metrics.csv").read_text() == (cell / "csv" / "metrics.csv").read_text()
    # the cell trained again (another timing): the kept record is not overwritten, and says why
    payload = json.loads((cell / "metrics.json").read_text())
    (cell / "metrics.json").write_text(json.dumps({**payload, "timing": {"fit_s": 1.0}}))
    assert records().main(["save", "corel/fashion_table2", *_argv(tmp_path)]) == 0
    assert "another finished run of this cell is there, left as it is" in capsys.readouterr().out


def test_a_folder_that_cannot_be_written_or_a_busy_cell_is_one_line(tmp_path: Path, capsys, monkeypatch) -> None:
    from filelock import FileLock

    results, outputs = tmp_path / "results", tmp_path / "outputs"
    cells = [_cell(results, seed) for seed in (0, 1)]
    tool = records()
    # a file where the sweeps' folder should be
    outputs.mkdir()
    (outputs / "multirun").write_text("not a folder")
    assert tool.main(["restore", *_argv(tmp_path)]) == 1
    out, err = capsys.readouterr()
    assert out == "" and len(err.splitlines()) == 1 and err.startswith("error: cannot copy corel/fashion_table2/"), err
    (outputs / "multirun").unlink()

    # a read-only folder (chmod does not stop root, which runs these tests on some machines: its refusal simulated)
    def refused(src, dest, **kwargs):
        raise PermissionError(13, "Permission denied", str(dest))

    monkeypatch.setattr(tool.shutil, "copy2", refused)
    assert tool.main(["restore", *_argv(tmp_path)]) == 1
    out, err = capsys.readouterr()
    assert out == "" and len(err.splitlines()) == 1 and ": Permission denied; the records copied before" in err, err
    assert not list(outputs.rglob("metrics.json")) and not list(outputs.rglob("*.tmp"))
    monkeypatch.undo()
    # a cell a sweep runs (its lock held) is left alone and named; the others are restored
    busy = outputs / cells[0].relative_to(results)
    busy.mkdir(parents=True, exist_ok=True)
    (busy / "checkpoints").mkdir()
    with FileLock(busy / ".lock", blocking=False):
        assert tool.main(["restore", *_argv(tmp_path)]) == 1
    out, err = capsys.readouterr()
    assert (
        "restore: 1 runs copied" in out
        and err.startswith("busy corel/fashion_table2/")
        and (busy / "checkpoints").is_dir()
    )
