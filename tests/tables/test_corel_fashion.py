"""COREL's CPU-sized Fashion-MNIST protocol end to end on fake data: Table 1 writes its winners, Table 2 trains at
them, Table 4 and Figure 2 are drawn from the same runs."""

from __future__ import annotations


def test_the_fashion_tables_run_end_to_end_on_fake_data(train, make_tables) -> None:
    result = train("-m", "experiment=corel/fashion_table1", "debug=smoke", "loss=gaussian_corel", "loss.lam=0.5,0.8",
                   "seed=0")  # fmt: skip
    assert result.code == 0, result.err
    assert "stacked: 2 cells as one model (loss.lam vary)" in result.out
    outputs = str(train.outputs)
    code, out, err = make_tables("corel/fashion_table1", "--outputs", outputs)
    assert code == 0, err
    assert "| Gaussian-COREL | λ=" in out and "Our CPU protocol, not the paper's" in out
    # the λ grid above is two values of six: its winner is taken on purpose
    args = ["experiment=corel/fashion_table2", "debug=smoke", "loss=cce,gaussian_corel", "seed=0,1"]
    result = train("-m", *args, "tuned_lambda_partial=true")
    assert result.code == 0, result.err
    for table, row in (("fashion_table2", "| FFNN | Gaussian-COREL | "), ("fashion_table4", "| Fashion | FFNN | CCE |"),
                       ("fashion_fig2", "| Gaussian-COREL | 0.8 |")):  # fmt: skip
        code, out, err = make_tables(f"corel/{table}", "--outputs", outputs)
        assert code == 0 and row in out, (table, out, err)
