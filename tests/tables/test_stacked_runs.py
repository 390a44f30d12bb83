"""Tables built from stacked runs (``hydra/launcher=stacked``): the same as from single runs, except the runtime
figure, which leaves stacked runs out and says so."""

from __future__ import annotations

import json

from clusterable.tables import csrl
from clusterable.tables.report import load_runs

from .rundirs import csrl_task, write_run


def test_a_table_from_a_stacked_grid_is_the_single_run_table(train, make_tables, tmp_path) -> None:
    """COREL Table 2 on digits (smoke): the same markdown whether its 8 cells trained one by one or as 4 stacks."""
    tables = {}
    for launcher in ("basic", "stacked"):
        outputs = tmp_path / launcher
        result = train(
            "-m",
            "experiment=corel/digits_table2",
            "debug=smoke",
            f"hydra/launcher={launcher}",
            f"paths.output_dir={outputs}",
        )
        assert result.code == 0, result.err
        assert ("stacked: 2 cells as one model (seed vary)" in result.out) == (launcher == "stacked")
        code, out, err = make_tables("corel/digits_table2", "--outputs", str(outputs), "--mode", "smoke")
        assert code == 0, err
        tables[launcher] = [line for line in out.splitlines() if line.startswith("|")]
    assert tables["basic"] and tables["stacked"] == tables["basic"]


def test_fig8_leaves_stacked_runs_out_and_says_so(tmp_path) -> None:
    for model in ("ae1", "tae1"):
        for seed in range(2):
            params = {
                "dataset": "parallel_lines",
                "loss": model,
                "optimizer.lr": 0.01,
                "seed": seed,
                "protocol.task": "clustering",
            }
            run = write_run(
                tmp_path,
                "csrl/autoencoders",
                params,
                {"test/ari": 0.5},
                timing={"epoch_s": 0.5},
                config=csrl_task("clustering"),
            )
            if seed == 1:  # trained stacked: its epoch time is its stack's
                payload = json.loads((run / "metrics.json").read_text())
                payload["stacked"] = {
                    "members": 15,
                    "index": 0,
                    "cells": [],
                    "varies": ["seed"],
                    "device": "cpu",
                }
                (run / "metrics.json").write_text(json.dumps(payload))
    runs, _ = load_runs(tmp_path, "csrl/autoencoders", "full")
    table = csrl.fig8(runs, tmp_path / "tables")
    text = table.markdown()
    assert "| parallel lines | ms per epoch | 500.00 ± 0.00 |" in text  # the one single run of each model
    assert any(n.startswith("2 runs trained stacked (hydra/launcher=stacked) are left out") for n in table.notes)
