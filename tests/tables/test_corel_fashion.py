"""COREL's Fashion-MNIST protocol end to end on fake data: Table 1 writes its winners, Table 2 trains at them (with
the authors' Gaussian-COREL as a row of its own), Table 4, Figure 2, the clustering along training and the budgets
side by side are drawn from the same runs."""

from __future__ import annotations

from pathlib import Path


def test_the_fashion_tables_run_end_to_end_on_fake_data(train, make_tables) -> None:
    result = train(
        "-m",
        "experiment=corel/fashion_table1",
        "debug=smoke",
        "loss=gaussian_corel,gaussian_corel_authors",
        "loss.lam=0.5,0.8",
        "seed=0",
    )
    assert result.code == 0, result.err
    assert "stacked: 2 cells as one model (loss.lam vary)" in result.out
    outputs = str(train.outputs)
    code, out, err = make_tables("corel/fashion_table1", "--outputs", outputs)
    assert code == 0, err
    assert "| Gaussian-COREL | λ=" in out and "| Gaussian-COREL (authors' code) | λ=" in out
    assert "budget cpu (FFNN, 2 epochs, 6 λ)" in out and "Budget cpu (our CPU protocol)" in out
    # the λ grid above is two values of six: its winner is taken on purpose
    args = ["experiment=corel/fashion_table2", "debug=smoke", "loss=cce,gaussian_corel_authors", "seed=0,1"]
    result = train("-m", *args, "tuned_lambda_partial=true")
    assert result.code == 0, result.err
    for table, row in (
        ("fashion_table2", "| FFNN | Gaussian-COREL (authors' code) | "),
        ("fashion_table4", "| Fashion | FFNN | CCE |"),
        ("fashion_fig2", "| Gaussian-COREL | 0.8 |"),
        ("fashion_curves", "| FFNN | CCE | 2 |"),
        ("fashion_budgets", "| FFNN | Gaussian-COREL (authors' code) | 0.5 |"),
    ):
        code, out, err = make_tables(f"corel/{table}", "--outputs", outputs)
        assert code == 0 and row in out, (table, out, err)
    # the paper's claims once more with the authors' variant in eq. 6's place
    code, out, _ = make_tables("corel/fashion_table2", "--outputs", outputs)
    assert "[authors' code] Gaussian-COREL beats CCE" in out
    # the curves: every epoch's validation clustering of every run, from its CSV log, drawn
    code, out, _ = make_tables("corel/fashion_curves", "--outputs", outputs)
    row = next(line for line in out.splitlines() if line.startswith("| FFNN | CCE |"))
    assert "missing" not in row and row.count("±") == 4, row  # the last epoch of each curve over 2 seeds
    assert (Path(outputs) / "tables" / "smoke" / "corel_fashion_curves.png").stat().st_size > 10_000
