"""The ``callbacks`` group: Lightning callbacks by lightning-hydra-template's names, honoured by single runs; early
stopping stops and the record says why; a stacked sweep with a callback runs its cells alone and says why; each
mistake is one line."""

from __future__ import annotations

import json

import pytest
from helpers.running import all_metrics

QUICK = ["dataset=iris", "logger=none", "trainer.enable_progress_bar=false", "evaluator=[classification]"]


def test_early_stopping_stops_the_run_and_records_why(train) -> None:
    result = train(*QUICK, "callbacks=early_stopping", "callbacks.early_stopping.patience=1", "trainer.max_epochs=60")
    assert result.code == 0, result.err
    (record,) = all_metrics(train.outputs)
    assert record["stopped_early"].startswith("EarlyStopping at epoch ") and "val/acc" in record["stopped_early"]
    epoch = int(record["stopped_early"].split("epoch ")[1].split(":")[0])
    assert epoch < 59 and f"stopped early: {record['stopped_early']}" in result.out


def test_a_run_without_callbacks_records_no_early_stop(train) -> None:
    assert train(*QUICK, "trainer.max_epochs=2").code == 0
    (record,) = all_metrics(train.outputs)
    assert record.get("stopped_early") is None


def test_the_learning_rate_monitor_and_swa_run_in_a_single_run(train) -> None:
    result = train(
        "dataset=iris",
        "trainer.enable_progress_bar=false",
        "evaluator=[classification]",
        "trainer.max_epochs=3",
        "callbacks=[lr_monitor,swa,model_summary]",
    )
    assert result.code == 0, result.err
    (log,) = list(train.outputs.rglob("metrics.csv"))
    assert "lr-Adam" in log.read_text().splitlines()[0]


def test_a_stacked_sweep_with_a_callback_runs_its_cells_alone_and_says_why(train) -> None:
    result = train(
        "-m",
        "hydra/launcher=stacked",
        *QUICK,
        "seed=0,1",
        "trainer.max_epochs=2",
        "callbacks=early_stopping",
    )
    assert result.code == 0, result.err
    said = "stacked: 2 of 2 cells run alone: Lightning callbacks (callbacks=...: the stacked loop runs none) has no"
    assert said in result.out, result.out
    runs = all_metrics(train.outputs)
    assert len(runs) == 2 and all(r.get("stacked") is None and r["status"] == "ok" for r in runs)


@pytest.mark.parametrize(
    ("overrides", "said"),
    [
        (
            ["callbacks=early_stopping", "checkpoint.monitor=null"],
            "callbacks.early_stopping.monitor must be a string, got None",
        ),
        (
            ["callbacks=early_stopping", "callbacks.early_stopping.patient=3"],
            "callbacks.early_stopping.patient is not a key of the config",
        ),
        (["callbacks=lr_monitor", "logger=none"], "callbacks.lr_monitor writes the learning rate to a logger"),
        (["callbacks=early_stoping"], "callbacks: no option 'early_stoping'; available: early_stopping,"),
        (
            [
                "callbacks=early_stopping",
                "+trainer.limit_val_batches=0",
                "checkpoint.monitor=null",
                "+callbacks.early_stopping.monitor=val/acc",
            ],
            "callbacks.early_stopping watches a validation metric, and trainer.limit_val_batches=0",
        ),
    ],
)
def test_a_mistake_in_the_callbacks_is_one_line(train, overrides: list[str], said: str) -> None:
    result = train("dataset=iris", "trainer.enable_progress_bar=false", "trainer.max_epochs=2", *overrides)
    assert result.code != 0 and said in result.err, result.err
    assert len(result.error_lines()) == 1, result.err
    for path in train.outputs.rglob("metrics.json"):
        assert json.loads(path.read_text())["status"] != "ok"
