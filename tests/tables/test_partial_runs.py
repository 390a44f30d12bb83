"""A run whose training finished but one of whose evaluators failed (status ``partial``) is not ok: a table counts
it with its cell's failed runs and never pools its metrics."""

from __future__ import annotations

import json

from tables.rundirs import write_run


def test_a_partial_run_is_not_pooled_in_a_table(tmp_path, make_tables) -> None:
    for seed in (0, 1, 2):
        run = write_run(
            tmp_path,
            "corel/fashion_table2",
            {"dataset": "fashion_mnist", "model": "ffnn", "loss": "cce", "seed": seed},
            {"test/acc": 0.80 + 0.05 * seed},
            config={"protocol": {"budget": "cpu"}, "trainer": {"max_epochs": 10}},
        )
    payload = json.loads((run / "metrics.json").read_text())
    payload.update(status="partial", error="evaluator.clustering: boom", evaluators_failed={"clustering": {}})
    (run / "metrics.json").write_text(json.dumps(payload))
    code, out, err = make_tables("corel/fashion_table2", "--outputs", str(tmp_path))
    assert code == 0, err
    assert "| FFNN | CCE | 82.50 ± 3.54 (1 failed) |" in out and "3 runs (1 failed)" in out
