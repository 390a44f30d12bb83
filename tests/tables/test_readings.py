"""Every table says which of its rows rest on a reading of ours, with the switch that changes it
(``tables.readings``), judged from what the runs recorded."""

from __future__ import annotations

from pathlib import Path

import pytest

from clusterable.record import RunRecord
from clusterable.tables.readings import READINGS, readings_note
from clusterable.tables.report import Run


def run(loss: str, **config) -> Run:
    return Run(Path("."), {}, RunRecord(status="ok", choices={"loss": loss}, config={"loss": config}))


@pytest.mark.parametrize(
    ("made", "reading", "switch"),
    [
        (run("pce", lam=None), "pce_lambda", "loss.lam=<number>"),
        (run("mvae", kl_scale="per_value"), "safir_kl_scale", "loss.kl_scale=per_row"),
        (run("gaussian_corel_authors_fixed_gamma", lam=0.5), "corel_authors_loss", "loss=gaussian_corel is eq. 6"),
        (run("dml_prior", prior="gmm", kl_formula="thesis_alg4"), "safir_alg4_sign", "loss.kl_formula=exact"),
    ],
)
def test_a_row_made_under_a_reading_names_it_and_its_switch(made: Run, reading: str, switch: str) -> None:
    (note,) = readings_note([made, run("cce")])
    assert note == next(r.note for r in READINGS if r.name == reading) and switch in note


def test_rows_made_otherwise_carry_no_reading() -> None:
    assert readings_note([run("pce", lam=2.0), run("mvae", kl_scale="per_row"), run("gaussian_corel", lam=0.5)]) == []


def test_the_table_command_adds_the_note(tmp_path: Path, make_tables) -> None:
    from tables.rundirs import write_run

    for seed in (0, 1):
        write_run(
            tmp_path,
            "corel/digits_table1",
            {"dataset": "digits", "model": "ffnn", "loss": "gaussian_corel_authors", "loss.lam": 0.5, "seed": seed},
            {"val/acc": 0.9},
        )
    code, out, err = make_tables("corel/digits_table1", "--outputs", str(tmp_path))
    assert code == 0, err
    assert "Reading: the rows of the authors' Gaussian-COREL" in out
