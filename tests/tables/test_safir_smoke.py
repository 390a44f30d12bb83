"""The smoke pipeline of every Safir 2022 table and figure: `train.py -m experiment=safir/<name> debug=smoke`, then
`make_tables.py safir/<name>`, in this process. Each grid is cut to one value per swept key but the rows (the
thesis's models: its grids, ``loss=<model>`` at its weights; one row is ``loss=<model>`` and its weight on the
command line), so that every head, prior, schedule, metric loss and probe runs end to end on fake data."""

from __future__ import annotations

import pytest

# Per experiment: the grid cut (sweeper overrides), the number of runs, and a line the table must print.
CASES = {
    "table6_1": (["dataset.labelled_percent=0.01", "loss.latent_dim=2"], 5, "| 0.01 | DML autoencoder | 0.25 |"),
    "table6_2": (
        ["dataset.labelled_percent=10", "loss.latent_dim=10", "loss=dml_ae", "loss.alpha=1.0"],
        1,
        "| 10 | DML autoencoder | 1 |",
    ),
    "table6_3": (["dataset.labelled_percent=0.1", "loss.latent_dim=2"], 7, "| 0.1 | DML + GMM prior | 0.33 |"),
    "table6_4": (
        ["dataset.labelled_percent=10", "loss.latent_dim=4", "loss=dml_prior", "loss.prior=gmm", "loss.alpha=0.66"],
        1,
        "| 10 | DML + GMM prior | 0.66 |",
    ),
    "table6_5": (
        [
            "dataset=organamnist",
            "dataset.labelled_percent=0.01",
            "loss.latent_dim=2",
            "loss=mvae",
            "loss.alpha=0.25",
            "loss/metric=supcon,center",
        ],
        2,
        "| OrganAMNIST | 0.01 | 2 | MVAE (alternate) | 0.25 |",
    ),
    "table6_6": (["loss.latent_dim=5"], 6, "| 5 | MVAE (joint) | 10 |"),
    "fig6_2": ([], 2, "| DML + GMM prior | 0.33 | 10 |"),
    "fig6_3": ([], 1, "| 0 |"),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_smoke_pipeline(train, make_tables, name):
    cut, runs, line = CASES[name]
    params = ["hydra.sweeper.params.seed=0", *cut]  # a key given here replaces its grid
    result = train("-m", f"experiment=safir/{name}", "debug=smoke", *params, "torch_threads=1")
    assert result.code == 0 and f"{runs} ok, 0 failed" in result.out, result.out[-2000:] + result.err
    code, out, err = make_tables(f"safir/{name}", "--outputs", str(train.outputs))
    assert code == 0, err
    assert "SMOKE" in out and line in out, out
    ours = [row for row in out.splitlines() if row.startswith(line)]
    if name.startswith("fig"):
        assert (train.outputs / "tables" / "smoke" / f"safir_{name}.png").is_file()
    else:  # every row of the cut has our number for the latent dimension it ran (the others read "not run")
        assert ours and all("±" in row and "failed" not in row for row in ours), ours
