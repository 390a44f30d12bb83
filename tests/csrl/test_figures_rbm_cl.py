"""The standard (one-cluster) models beside the tensorized ones: the standard-CL column of CSRL Fig. 4 (and Fig. 12
from the same runs) and the standard RBM of Fig. 13 beside the TRBM of Fig. 5; their evaluators on one-cluster
heads, and the smoke pipelines `train.py -m experiment=csrl/<fig> debug=smoke` then `make_tables.py csrl/<fig>`,
both in this process."""

from __future__ import annotations

import dataclasses
import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest
import torch

from clusterable.contracts import EvalContext
from clusterable.evaluation.csrl import ElasticPairs, TRBMReconstructions
from clusterable.heads.tcl import TensorizedContrastive
from clusterable.heads.trbm import TensorizedRBM
from clusterable.tables.csrl.tcl import local_linearity

ROOT = Path(__file__).resolve().parents[2]
QUIET = ["trainer.enable_progress_bar=false"]


def context(head, x: torch.Tensor, y: torch.Tensor, **fields) -> EvalContext:
    base = EvalContext(
        "test", {"inputs": x, "labels": y}, head, encoder_output=x.flatten(1), train_embeddings=x, train_labels=y
    )
    return dataclasses.replace(base, **fields)


# ---- evaluators on one-cluster heads ---------------------------------------------------------------------------


@torch.no_grad()
def test_trbm_reconstructions_of_the_standard_rbm(tmp_path):
    torch.manual_seed(0)
    rbm = TensorizedRBM([16], 2, hidden=5, num_clusters=1)
    x, y = torch.rand(10, 16), torch.tensor([0, 1] * 5)
    rbm.init_clusters(x)
    out = TRBMReconstructions(per_class=3)(x, y, context(rbm, x, y, run_dir=tmp_path))
    err = (rbm.reconstruct(x) - x).pow(2).mean(1)
    assert set(out) == {"trbm/mse_own", "trbm/mse_own_worst_class", "trbm/class_match"}  # no other cluster
    assert out["trbm/mse_own"] == pytest.approx(float(err.mean()), rel=1e-5)
    worst = max(float(err[y == k].mean()) for k in (0, 1))
    assert out["trbm/mse_own_worst_class"] == pytest.approx(worst, rel=1e-5)
    with np.load(tmp_path / "trbm_reconstructions_test.npz") as saved:
        assert saved["recon"].shape == (1, 6, 16) and saved["inputs"].shape == (6, 16)
    assert (tmp_path / "trbm_reconstructions_test.png").stat().st_size > 1000


@torch.no_grad()
def test_trbm_reconstructions_worst_class_is_per_point_own_error():
    torch.manual_seed(1)
    rbm = TensorizedRBM([9], 2, hidden=4)
    for p in rbm.parameters():
        p.normal_(0, 1)
    x, y = torch.rand(12, 9), torch.tensor([0, 0, 1, 2] * 3)
    rbm.init_clusters(x)
    out = TRBMReconstructions()(x, y, context(rbm, x, y))
    own = rbm.assign(x)
    err = torch.stack([(rbm.reconstruct(x, cluster=j) - x).pow(2).mean(1) for j in range(2)])  # (C, N)
    own_err = err[own, torch.arange(len(x))]
    assert out["trbm/mse_own"] == pytest.approx(float(own_err.mean()), rel=1e-5)
    assert out["trbm/mse_other"] == pytest.approx(float(err[1 - own, torch.arange(len(x))].mean()), rel=1e-5)
    worst = max(float(own_err[y == k].mean()) for k in (0, 1, 2))
    assert out["trbm/mse_own_worst_class"] == pytest.approx(worst, rel=1e-5)
    recon = torch.stack([rbm.reconstruct(x[i : i + 1], cluster=int(own[i]))[0] for i in range(len(x))])
    means = torch.stack([x[y == k].mean(0) for k in (0, 1, 2)])
    match = [int(((recon[i] - means) ** 2).sum(1).argmin()) == int(y[i]) for i in range(len(x))]
    assert out["trbm/class_match"] == pytest.approx(sum(match) / len(x))


@torch.no_grad()
def test_trbm_class_match_tells_a_blend_from_reconstructions_of_each_digit():
    rbm = TensorizedRBM([4], 2, hidden=2, num_clusters=1)
    x, y = (
        torch.tensor([[1.0, 1, 0, 0], [0.9, 1, 0, 0], [0, 0, 1, 1], [0, 0, 1, 0.9]]),
        torch.tensor([0, 0, 1, 1]),
    )
    rbm.init_clusters(x)
    rbm.weight.zero_(), rbm.hidden_bias.zero_()  # every input reconstructed as sigmoid(b): one blend for all
    assert TRBMReconstructions()(x, y, context(rbm, x, y))["trbm/class_match"] == 0.5
    rbm.weight[0] = 8 * torch.tensor([[1.0, -1], [1, -1], [-1, 1], [-1, 1]])  # two hidden units, one per digit
    rbm.hidden_bias.fill_(-4), rbm.visible_bias.fill_(-4)
    assert TRBMReconstructions()(x, y, context(rbm, x, y))["trbm/class_match"] == 1.0


@torch.no_grad()
def test_elastic_pairs_of_the_standard_contrastive_model_take_other_points_as_negatives(tmp_path):
    torch.manual_seed(0)
    x, y = torch.rand(8, 784), torch.arange(8) % 2
    head = TensorizedContrastive(784, 2, out_dim=4, hidden=6, num_clusters=1)
    head.init_clusters(x, inputs=x)
    ctx = context(head, x, y, run_dir=tmp_path, seed=3)
    out = ElasticPairs(num_examples=6)(x, y, ctx)
    assert out["tcl/elastic_change"] > 0
    with np.load(tmp_path / "tcl_elastic_test.npz") as saved:
        anchor, negative = saved["anchor"], saved["negative"]
    rows = [int(np.flatnonzero((x.numpy() == n).all(1))[0]) for n in negative]
    assert all(r != i for i, r in enumerate(rows))  # never the anchor itself
    ElasticPairs(num_examples=6)(x, y, dataclasses.replace(ctx, run_dir=tmp_path / "again"))
    with np.load(tmp_path / "again" / "tcl_elastic_test.npz") as again:
        np.testing.assert_array_equal(again["negative"], negative)  # seeded: the same figure again
    np.testing.assert_array_equal(anchor, x[:6].numpy())


def test_local_linearity_tells_curves_from_clouds():
    rng = np.random.default_rng(0)
    t = np.linspace(0, 6, 300)
    curve = np.stack([t, np.sin(t)], 1) + 0.001 * rng.normal(size=(300, 2))
    cloud = rng.normal(size=(300, 2))
    assert local_linearity(curve) > 0.95 and local_linearity(cloud) < 0.85
    assert np.isnan(local_linearity(np.zeros((2, 2))))


# ---- the smoke pipelines ---------------------------------------------------------------------------------------


@pytest.fixture
def make_tables(capsys):
    spec = importlib.util.spec_from_file_location("make_tables", ROOT / "scripts" / "make_tables.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)

    def run(outputs: Path, name: str) -> str:
        capsys.readouterr()
        code = module.main([f"csrl/{name}", "--outputs", str(outputs)])
        out, err = capsys.readouterr()
        assert code == 0, err
        assert "[smoke]" in out, out
        png = outputs / "tables" / "smoke" / f"csrl_{name}.png"
        assert png.is_file() and png.stat().st_size > 1000, f"{png} missing or empty"
        return out

    return run


def runs_of(outputs: Path, experiment: str) -> dict[tuple, dict]:
    """metrics.json of each run of ``experiment``, keyed by its overrides other than experiment/debug/trainer."""
    found = {}
    for path in sorted(outputs.rglob("metrics.json")):
        m = json.loads(path.read_text())
        if m.get("experiment") == experiment:
            keep = tuple(sorted(o for o in m["overrides"] if not o.startswith(("experiment", "debug", "trainer"))))
            found[keep] = m
    return found


def claim(text: str, start: str) -> str:
    return next(line for line in text.splitlines() if line.startswith("- [") and start in line)


def test_figures_4_and_12_with_the_standard_contrastive_column(train, make_tables):
    result = train("-m", "experiment=csrl/fig4", "debug=smoke", "seed=0", *QUIET)
    assert result.code == 0, result.err
    runs = runs_of(train.outputs, "csrl/fig4")
    assert sorted(runs) == sorted(
        ("loss.num_clusters=" + c, "loss.supervised=" + s, "seed=0") for c in ("1", "null") for s in ("False", "True")
    )
    for key, m in runs.items():
        assert m["status"] == "ok", m["error"]
        assert {"test/kmeans/ari", "test/kmeans/silhouette", "test/tcl/elastic_change"} <= set(m["metrics"])
        assert m["config"]["loss"]["num_clusters"] == (1 if "loss.num_clusters=1" in key else None)
    # Fig. 12 reuses the TCL runs: nothing is trained again.
    again = train("-m", "experiment=csrl/fig12", "debug=smoke", "seed=0", *QUIET)
    assert again.code == 0 and "metrics.json says ok" in again.out, again.out + again.err
    assert len(runs_of(train.outputs, "csrl/fig4")) == 4

    fig4 = make_tables(train.outputs, "fig4")
    rows = [line for line in fig4.splitlines() if line.startswith("| CL (standard) |") or line.startswith("| TCL |")]
    assert len(rows) == 4 and sum(r.startswith("| CL (standard) | ") for r in rows) == 2
    assert all("| — |" in r for r in rows if r.startswith("| CL"))  # no learned clusters to score
    for start in (
        "CL learns connected point clouds",
        "for both CL and TCL",
        "With class information CL",
        "where CL does not",
    ):
        assert "numbers missing" not in claim(fig4, start), claim(fig4, start)
    assert "needs a standard" not in fig4
    fig12 = make_tables(train.outputs, "fig12")
    assert "| loss.supervised=False, seed=0 |" in fig12 and "The elastic positive is a deformed copy" in fig12


def test_figures_5_and_13_standard_rbm_beside_the_trbm(train, make_tables):
    result = train("-m", "experiment=csrl/fig5", "debug=smoke", "seed=0", *QUIET)
    assert result.code == 0, result.err
    runs = runs_of(train.outputs, "csrl/fig5")
    assert sorted(runs) == [("loss.num_clusters=1", "seed=0"), ("loss.num_clusters=null", "seed=0")]
    standard, trbm = runs[("loss.num_clusters=1", "seed=0")], runs[("loss.num_clusters=null", "seed=0")]
    assert standard["status"] == "ok" and trbm["status"] == "ok", (standard["error"], trbm["error"])
    assert standard["config"]["loss"]["num_clusters"] == 1
    assert {"test/trbm/mse_own", "test/trbm/mse_own_worst_class", "test/trbm/class_match"} <= set(standard["metrics"])
    assert "test/trbm/mse_other" not in standard["metrics"] and "test/trbm/mse_other" in trbm["metrics"]
    # Fig. 13 is drawn from the same runs.
    again = train("-m", "experiment=csrl/fig13", "debug=smoke", "seed=0", *QUIET)
    assert again.code == 0 and "metrics.json says ok" in again.out, again.out + again.err
    assert len(runs_of(train.outputs, "csrl/fig5")) == 2

    fig5 = make_tables(train.outputs, "fig5")
    assert "Each cluster's RBM reconstructs its own class" in fig5
    assert fig5.count("| seed=0 |") == 1  # the TRBM only
    fig13 = make_tables(train.outputs, "fig13")
    assert "| seed=0 | standard RBM |" in fig13 and "| seed=0 | TRBM |" in fig13
    assert "numbers missing" not in claim(fig13, "The standard RBM reconstructs both digits: each input")
    assert "numbers missing" not in claim(fig13, "The standard RBM reconstructs both digits where")
