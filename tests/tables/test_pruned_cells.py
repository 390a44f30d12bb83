"""A search's pruned trial in a table: counted apart, never as a failure and never as a value."""

from __future__ import annotations

from pathlib import Path

from clusterable.record import RunRecord
from clusterable.tables.common import cell_text
from clusterable.tables.report import cells


def _run(status: str, seed: int, acc: float | None = None):
    from clusterable.tables.report import Run

    config = {"seed": seed, "optimizer": {"lr": 0.1}}
    metrics = {"test/acc": acc} if acc is not None else {"val/acc": 0.4}  # a pruned run: its last epoch's
    return Run(Path(f"/o/{status}{seed}"), {}, RunRecord(status=status, seed=seed, config=config, metrics=metrics))


def test_a_pruned_run_is_counted_apart_from_the_failed_ones() -> None:
    runs = [_run("ok", 0, 0.9), _run("ok", 1, 0.8), _run("pruned", 2), _run("failed", 3)]
    (cell,) = cells(runs, ["optimizer.lr"], "test/acc").values()
    assert (cell.values, cell.failed, cell.pruned) == ([0.9, 0.8], 1, 1)
    assert cell.text(digits=2) == "0.85 ± 0.07 (1 failed, 1 pruned)"
    assert cell_text(cell, sci=True) == "0.85 ± 0.05 (1 failed, 1 pruned)"


def test_a_cell_of_pruned_runs_only_reads_pruned() -> None:
    (cell,) = cells([_run("pruned", 0), _run("pruned", 1)], ["optimizer.lr"], "test/acc").values()
    assert cell.text() == "pruned" and cell_text(cell) == "pruned"
    (failed,) = cells([_run("pruned", 0), _run("failed", 1)], ["optimizer.lr"], "test/acc").values()
    assert failed.text() == "failed"  # a failure is never hidden behind a pruned run
