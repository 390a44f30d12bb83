"""An evaluator that fails after training costs only its own metrics: the run keeps the others', is recorded
``partial`` with the failed evaluator named (never ``ok``: no table pools it), and ``clusterable-eval`` finishes it
from what the run kept, without training it again."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers.running import SEARCHPATH

from clusterable.rescore import main as rescore

RUN = ["dataset=iris", "trainer.max_epochs=2", "logger=none", "trainer.enable_progress_bar=false", SEARCHPATH]
FINISH_HINT = "training finished and the other evaluators' metrics are kept: clusterable-eval <run dir> re-runs"


def _run_dir(outputs: Path, name: str) -> Path:
    (found,) = [p.parent for p in outputs.rglob("metrics.json") if f"/{name}/" in p.as_posix()]
    return found


def _record(run_dir: Path) -> dict:
    return json.loads((run_dir / "metrics.json").read_text())


def test_a_failed_evaluator_keeps_the_others_and_is_finished_later(train, tmp_path, capsys) -> None:
    marker = tmp_path / "fixed"
    flaky = ["evaluator=[classification,flaky]", f"evaluator.flaky.marker={marker}"]
    result = train(*RUN, *flaky, "name=broken")
    assert result.code == 1
    (line,) = result.error_lines()
    assert (
        line
        == f"error: evaluator.flaky: refuses until {marker} exists; {FINISH_HINT} the failed evaluator without training"
    )
    run = _run_dir(train.outputs, "broken")
    payload = _record(run)
    assert payload["status"] == "partial" and payload["error"] == line.removeprefix("error: ")
    assert payload["evaluators_failed"] == {
        "flaky": {"stage": "val", "error": f"evaluator.flaky: refuses until {marker} exists"}
    }
    assert {"val/acc", "test/acc", "model/params"} <= set(payload["metrics"])
    assert not [k for k in payload["metrics"] if "flaky" in k]
    assert (run / "representations.npz").exists() and (run / "checkpoints" / "best.ckpt").exists()
    # still broken: one line, exit 1, still partial
    assert rescore([str(run)]) == 1
    assert (
        capsys.readouterr()
        .out.splitlines()[0]
        .endswith("0 metrics added from best.ckpt, embedded again; status partial)")
    )
    assert _record(run)["status"] == "partial"
    # the fault fixed: its evaluator re-run from the weights it tested, the run ok
    marker.touch()
    assert rescore([str(run)]) == 0
    out = capsys.readouterr().out
    assert "2 metrics added from best.ckpt, embedded again; finished evaluator.flaky: status ok" in out
    finished = _record(run)
    assert finished["status"] == "ok" and finished["error"] is None and "evaluators_failed" not in finished
    assert finished["rescored"][-1]["finished"] == ["flaky"] and finished["rescored"][-1]["keys"] == [
        "test/flaky/norm",
        "val/flaky/norm",
    ]
    # ... with the numbers of the same run trained with the fault fixed
    assert train(*RUN, *flaky, "name=fresh").code == 0
    fresh = _record(_run_dir(train.outputs, "fresh"))
    assert finished["metrics"]["test/acc"] == fresh["metrics"]["test/acc"]
    for key in ("val/flaky/norm", "test/flaky/norm"):
        assert finished["metrics"][key] == pytest.approx(fresh["metrics"][key], rel=1e-6)
    # nothing left to finish
    assert rescore([str(run)]) == 2
    assert (
        capsys.readouterr()
        .err.strip()
        .endswith("without them it finishes runs whose evaluators failed, and none of these has one")
    )


def test_a_bug_and_a_mistake_in_two_evaluators_are_both_named(train, tmp_path, capsys) -> None:
    """A ``RuntimeError`` (a bug) in one evaluator, on the test split only, and a ``ValueError`` (500 clusters of
    150 rows) in another: the classifier's metrics are kept, both are named, the bug's traceback is in a file, and
    the metrics the buggy evaluator gave on the validation split are dropped with it (it is re-run whole)."""
    result = train(
        *RUN,
        "evaluator=[classification,clustering,flaky]",
        "evaluator.clustering.num_clusters=500",
        f"evaluator.flaky.marker={tmp_path / 'fixed'}",
        "evaluator.flaky.bug=true",
        "evaluator.flaky.stage=test",
        "name=bugs",
    )
    assert result.code == 1
    (line,) = result.error_lines()
    assert line.startswith("error: evaluator.clustering: num_clusters must be in [1, 150]")
    assert f"(evaluator.flaky failed too); {FINISH_HINT} the failed evaluators without training" in line
    run = _run_dir(train.outputs, "bugs")
    payload = _record(run)
    assert payload["status"] == "partial" and set(payload["evaluators_failed"]) == {"clustering", "flaky"}
    bug = payload["evaluators_failed"]["flaky"]
    assert bug["stage"] == "test"
    assert (
        bug["error"]
        == f"evaluator.flaky: RuntimeError: flaky: an index out of range (traceback: {run / 'traceback.txt'})"
    )
    assert "RuntimeError: flaky: an index out of range" in (run / "traceback.txt").read_text()
    assert sorted(payload["metrics"]) == [
        "model/params",
        "test/acc",
        "train/attract",
        "train/loss",
        "train/repel",
        "val/acc",
    ]
    # clustering with other settings than the run's: its metrics are added, the run stays partial
    assert rescore([str(run), "evaluator=[clustering]"]) == 0
    out = capsys.readouterr().out.splitlines()[0]
    assert "metrics added from its kept representations" in out and out.endswith(
        "still partial: evaluator.clustering, evaluator.flaky failed (evaluator.clustering scored with other "
        "settings than its config's, which failed)"
    ), out
    payload = _record(run)
    assert payload["status"] == "partial" and "test/kmeans/acc" in payload["metrics"]


def test_a_sweep_counts_partial_cells_keeps_them_and_finishes_them_by_experiment(train, tmp_path, capsys) -> None:
    """Stacked members conclude as single runs do: each is partial. A re-run of the sweep does not train them
    again (the same evaluator would fail the same way); clusterable-eval on the experiment finishes them."""
    marker = tmp_path / "fixed"
    sweep = [
        "-m",
        *RUN,
        "hydra/launcher=stacked",
        "seed=0,1",
        "evaluator=[classification,flaky]",
        f"evaluator.flaky.marker={marker}",
        "name=grid",
    ]
    result = train(*sweep)
    assert result.code == 1
    assert "sweep: 0 ok, 0 failed, 0 skipped, 2 partial" in result.out
    # (the marker's path is in the cells' names: its "/" nests their folders)
    (line,) = result.error_lines()
    assert line.startswith("partial: 2 cells (") and line.endswith(
        f"seed=0,trainer.max_epochs=2 and 1 more): evaluator.flaky: refuses until {marker} exists; {FINISH_HINT} the "
        "failed evaluator without training"
    ), line
    cells = sorted(p.parent for p in train.outputs.rglob("metrics.json"))
    assert [_record(c)["status"] for c in cells] == ["partial", "partial"] and all(
        "stacked" in _record(c) for c in cells
    )
    timing = [_record(c)["timing"] for c in cells]
    again = train(*sweep)
    assert again.code == 1 and "sweep: 0 ok, 0 failed, 0 skipped, 2 partial" in again.out
    assert again.out.count("not trained again: clusterable-eval") == 2
    assert [_record(c)["timing"] for c in cells] == timing
    marker.touch()
    assert rescore(["grid", "--outputs", str(train.outputs)]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == "rescore: 2 re-scored, 0 failed"
    assert [_record(c)["status"] for c in cells] == ["ok", "ok"]
    assert "sweep: 0 ok, 0 failed, 2 skipped" in train(*sweep).out


def test_a_run_that_diverged_after_its_best_epoch_is_diverged_again_once_finished(train, tmp_path, capsys) -> None:
    marker = tmp_path / "fixed"
    three_epochs = [o for o in RUN if not o.startswith("trainer.max_epochs")] + ["trainer.max_epochs=3"]
    result = train(
        *three_epochs,
        "loss=nan_after",
        "evaluator=[classification,flaky]",
        f"evaluator.flaky.marker={marker}",
        "name=runaway",
    )
    assert result.code == 1
    run = _run_dir(train.outputs, "runaway")
    payload = _record(run)
    assert (
        payload["status"] == "partial"
        and payload["failed_epoch"] == 1
        and "the run diverged" in payload["training_error"]
    )
    marker.touch()
    assert rescore([str(run)]) == 0
    payload = _record(run)
    assert (
        payload["status"] == "diverged" and "the run diverged" in payload["error"] and "training_error" not in payload
    )


def test_a_checkpoint_of_another_attempt_is_not_scored(train, tmp_path, capsys) -> None:
    """A best.ckpt beside a record whose best epoch is another (an attempt stopped in the same cell) is not the
    model the record's metrics are of: re-scoring refuses it rather than filing its numbers there."""
    assert train(*RUN, "evaluator=[classification]", "name=plain").code == 0
    run = _run_dir(train.outputs, "plain")
    # an evaluator that fails while re-scoring an ok run: one line, exit 1, the run as it was
    before = _record(run)
    assert rescore([str(run), "evaluator=[clustering]", "evaluator.clustering.num_clusters=500"]) == 1
    line = capsys.readouterr().out.splitlines()[0]
    assert line.endswith(
        "not re-scored: evaluator.clustering: num_clusters must be in [1, 150] (the number of "
        "labelled samples), got 500 (0 metrics added from its kept representations "
        "(representations.npz))"
    ), line
    assert _record(run) == before
    (run / "representations.npz").unlink()
    payload = _record(run)
    (run / "metrics.json").write_text(json.dumps({**payload, "best_epoch": 7}))
    assert rescore([str(run), "evaluator=[clustering]"]) == 1
    line = capsys.readouterr().out.splitlines()[-2]
    assert line.endswith(
        f"its checkpoint (checkpoints/best.ckpt) is of epoch {payload['best_epoch']}, its record's "
        "best epoch is 7: another attempt's model, not the one its metrics are of"
    ), line
