"""scripts/records.py: the records of finished real-data runs saved to a tracked folder and restored for a resume,
without checkpoints, locks or unfinished runs; a table builds from the saved records as from the sweep."""

from __future__ import annotations

from pathlib import Path

from helpers.running import script_module

from tables.rundirs import write_run

ROOT = Path(__file__).resolve().parents[2]


def records():
    return script_module(ROOT / "scripts" / "records.py")


def test_save_keeps_finished_records_only_and_restore_brings_them_back(
    tmp_path: Path, make_tables, capsys
) -> None:
    outputs, results = tmp_path / "outputs", tmp_path / "results"
    for seed in (0, 1):
        run = write_run(outputs, "corel/fashion_table2", {"dataset": "fashion_mnist", "model": "ffnn", "loss": "cce",
                                                          "seed": seed}, {"test/acc": 0.88},
                        config={"protocol": {"budget": "cpu"}})  # fmt: skip
        (run / "checkpoints").mkdir()
        (run / "checkpoints" / "best.ckpt").write_bytes(b"weights")
        (run / ".lock").write_text("")
    write_run(
        outputs,
        "corel/fashion_table2",
        {"dataset": "fashion_mnist", "model": "ffnn", "loss": "cce", "seed": 2},
        None,
        config={"protocol": {"budget": "cpu"}},
    )  # fmt: skip  (a failed run: not a record to keep)
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
