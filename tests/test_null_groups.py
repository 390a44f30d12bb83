"""A config group set to null on the command line (``scheduler=null``, as ``train.yaml`` writes the default):
Hydra refuses it with a ValueError from deep inside; ``preflight.null_groups`` writes it as Hydra takes it
(``~scheduler``, ``logger=none``, ``evaluator=[]``) or refuses, in one line, a group every run needs."""

from __future__ import annotations

import pytest
from helpers.running import metrics_files
from omegaconf import OmegaConf

QUICK = ["dataset=iris", "trainer.max_epochs=1", "trainer.enable_progress_bar=false", "logger=none"]


def test_scheduler_null_is_no_scheduler(train) -> None:
    result = train("experiment=boudiaf/table4", "scheduler=null", "--cfg", "job")
    assert result.code == 0, result.err
    assert "scheduler" not in OmegaConf.create(result.out), "the experiment's warmcos is still there"
    result = train(*QUICK, "scheduler=null")
    assert result.code == 0 and "run: ok" in result.out, result.err


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        (
            ["model=null"],
            "error: model=null: every run needs a model; choose one of: bninception, cnn, ffnn, ",
        ),
        (["~dataset"], "error: ~dataset: every run needs a dataset; choose one of: agnews8, "),
        (
            ["-m", "scheduler=null,warmcos"],
            "error: scheduler: null (no scheduler) cannot be one value of a sweep",
        ),
    ],
)
def test_a_group_set_to_null_that_a_run_needs_is_one_line(train, given: list[str], expected: str) -> None:
    result = train(*QUICK, *given)
    assert result.code == 2, result
    (line,) = result.error_lines()
    assert line.startswith(expected) and "Traceback" not in result.out + result.err, line
    assert not metrics_files(train.outputs)


def test_null_groups_rewrites_what_hydra_refuses() -> None:
    from clusterable.preflight import null_groups

    args, refused = null_groups(["scheduler=null", "logger=null", "~logger", "evaluator=null", "debug=null", "seed=1"])
    assert refused is None
    assert args == ["~scheduler", "logger=none", "logger=none", "evaluator=[]", "~debug", "seed=1"]
