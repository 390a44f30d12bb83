"""Every CSRL figure's pipeline as a user runs it, in smoke mode: `train.py -m experiment=csrl/<fig> debug=smoke`,
then `scripts/make_tables.py csrl/<fig>`; bad input through the CLI; the image readers' hold-out and scaling.

The smoke grids are cut on the command line (one lr, fewer datasets and seeds) so that the whole set stays at a
few minutes on 2 cores, keeping at least one run of every model family.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from clusterable.data.memory import tabular

QUIET = ["trainer.enable_progress_bar=false"]


def metrics(outputs: Path, experiment: str) -> list[dict]:
    found = [json.loads(p.read_text()) for p in sorted(outputs.rglob("metrics.json"))]
    return [m for m in found if m.get("experiment") == experiment]


def table(cli, name: str) -> str:
    proc = cli("scripts/make_tables.py", f"csrl/{name}", "--outputs", str(cli.outputs))
    assert "[smoke]" in proc.stdout, proc.stdout
    png = cli.outputs / "tables" / "smoke" / f"csrl_{name}.png"
    assert png.is_file() and png.stat().st_size > 1000, f"{png} missing or empty"
    return proc.stdout


def claim_lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith("- [")]


def test_autoencoder_figures_2_7_8_share_one_pool_of_runs(cli):
    # Fig. 2 on real parallel lines (offline, tiny: the de-noising targets exist), all six models, both tasks.
    cli(
        "train.py",
        "-m",
        "experiment=csrl/fig2",
        "debug=smoke",
        "dataset=parallel_lines",
        "dataset.source=real",
        "optimizer.lr=0.1",
        "seed=0",
        *QUIET,
    )
    # The MNIST column on its offline stand-in (real data: a smoke table never mixes real and fake data).
    cli(
        "train.py",
        "-m",
        "experiment=csrl/fig2_mnist",
        "debug=smoke",
        "dataset=digits_subset",
        "dataset.source=real",
        "loss=ae3,ptae",
        "protocol.task=clustering",
        "optimizer.lr=0.1",
        "seed=0",
        *QUIET,
    )
    cli(
        "train.py",
        "-m",
        "experiment=csrl/fig7",
        "debug=smoke",
        "dataset=iris",
        "dataset.source=real",
        "loss=ae1,tae1",
        "optimizer.lr=0.1",
        "seed=0",
        *QUIET,
    )
    runs = metrics(cli.outputs, "csrl/autoencoders")
    assert len(runs) == 6 * 2 + 2 + 2 * 2 and all(r["status"] == "ok" for r in runs)
    by = {
        tuple(sorted(o for o in r["overrides"] if not o.startswith(("experiment", "debug", "trainer")))): r
        for r in runs
    }
    denoised = by[
        (
            "dataset.source=real",
            "dataset=parallel_lines",
            "loss=ptae",
            "optimizer.lr=0.1",
            "protocol.task=denoising",
            "seed=0",
        )
    ]["metrics"]
    assert denoised["test/denoise/mse"] > 0 and "train/loss" in denoised and denoised["model/params"] == 28
    clustered = by[
        (
            "dataset.source=real",
            "dataset=parallel_lines",
            "loss=ae1",
            "optimizer.lr=0.1",
            "protocol.task=clustering",
            "seed=0",
        )
    ]["metrics"]
    assert {"test/ari", "test/kmeans_raw/ari"} <= set(clustered) and "test/denoise/mse" not in clustered

    # Fig. 8 reuses the runs: nothing is trained again.
    proc = cli(
        "train.py",
        "-m",
        "experiment=csrl/fig8",
        "debug=smoke",
        "dataset=parallel_lines",
        "dataset.source=real",
        "optimizer.lr=0.1",
        "seed=0",
        *QUIET,
    )
    assert proc.stdout.count("metrics.json says ok") == 12

    fig2 = table(cli, "fig2")
    assert (
        "| parallel lines | PTAE |" in fig2
        and "| digits (MNIST stand-in) | AE3 |" in fig2
        and "| lines 3D | AE1 | not run |" in fig2
    )
    assert "| parallel lines | AE1 | " in fig2 and "| 10 | 10 |" in fig2  # our #params beside the paper's
    assert len(claim_lines(fig2)) == 9
    fig7 = table(cli, "fig7")
    assert "| iris | TAE1 |" in fig7 and "| 24 | 24 |" in fig7 and "| triangle | AE1 | not run |" in fig7
    fig8 = table(cli, "fig8")
    assert "| parallel lines |" in fig8 and "| iris |" in fig8 and len(claim_lines(fig8)) == 2


# Fig. 10 (the CNN VAE) runs in test_figures_tvae.py.
@pytest.mark.parametrize("figure", ["fig3", "fig9", "fig11"])
def test_tvae_figures(cli, figure):
    cli("train.py", "-m", f"experiment=csrl/{figure}", "debug=smoke", "loss.kl_weight=0.2", "seed=0", *QUIET)
    runs = metrics(cli.outputs, f"csrl/{figure}")
    tensorized = 2 if figure == "fig11" else 3  # fig11: two encodings for the six-class data
    # The standard VAE (one cluster) and the TVAE.
    assert sorted(r["config"]["loss"]["num_clusters"] for r in runs) == [1, tensorized]
    for run in runs:
        assert run["status"] == "ok", run["error"]
        assert {"train/tvae/purity", "test/tvae/purity", "train/ari", "test/ari"} <= set(run["metrics"])
    samples = sorted(cli.outputs.rglob("tvae_samples.npz"))
    assert sorted(np.load(p)["images"].shape[0] for p in samples) == [1, tensorized]  # latent spaces
    for p in samples:
        assert {q.name for q in p.parent.glob("tvae_*.png")} == {
            "tvae_samples.png",
            "tvae_latent_train.png",
            "tvae_latent_test.png",
        }
    text = table(cli, figure)
    assert "| loss.kl_weight=0.2, seed=0 | standard VAE |" in text
    assert f"| loss.kl_weight=0.2, seed=0 | TVAE ({tensorized} clusters) |" in text
    assert "The standard VAE's embeddings are grouped by class" in text
    if figure == "fig11":
        assert "Similar classes share an encoding" in text


# Two runs of a 3M-parameter conv net and a t-SNE (~20-40 s): kept in `make test` so that every figure runs there.
def test_tcl_figures_4_and_12(cli):
    # The TCL column only (the standard-CL column: tests/csrl/test_figures_rbm_cl.py).
    cli("train.py", "-m", "experiment=csrl/fig4", "debug=smoke", "seed=0", "loss.num_clusters=null", *QUIET)
    runs = metrics(cli.outputs, "csrl/fig4")
    assert len(runs) == 2 and all(r["status"] == "ok" for r in runs)
    assert all({"test/ari", "test/kmeans/ari", "test/tcl/elastic_change"} <= set(r["metrics"]) for r in runs)
    proc = cli("train.py", "-m", "experiment=csrl/fig12", "debug=smoke", "seed=0", *QUIET)
    assert "metrics.json says ok" in proc.stdout  # Fig. 12 is drawn from the Fig. 4 runs
    fig4 = table(cli, "fig4")
    assert "| TCL | with | 0 |" in fig4 and "| TCL | without | 0 |" in fig4
    fig12 = table(cli, "fig12")
    assert "The elastic positive is a deformed copy" in fig12


def test_trbm_figure_5(cli):
    # The TRBM only (the standard RBM of Fig. 13: tests/csrl/test_figures_rbm_cl.py).
    cli("train.py", "-m", "experiment=csrl/fig5", "debug=smoke", "seed=0", "loss.num_clusters=null", *QUIET)
    (run,) = metrics(cli.outputs, "csrl/fig5")
    assert run["status"] == "ok", run["error"]
    assert run["metrics"]["test/trbm/mse_own"] <= run["metrics"]["test/trbm/mse_other"]
    text = table(cli, "fig5")
    assert "| seed=0 |" in text and "Each cluster's RBM reconstructs its own class" in text


ONE_RUN = ["experiment=csrl/fig2", "dataset=parallel_lines", "trainer.max_epochs=1", *QUIET]


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("dataset.num_classes=1", "dataset.num_classes is 1 but the labels of split 'train' go up to 1"),
        ("loss.lam=-0.5", "loss.lam must be >= 0, got -0.5"),
        ("dataset.reader.name=circles", "dataset.reader.name must be one of parallel_lines"),
        ("dataset.num_classes=151", "dataset.num_classes (151, the number of classes or clusters) must not exceed"),
    ],
)
def test_bad_input_fails_before_training_with_one_line(train, override, message):
    result = train(*ONE_RUN, "loss=ptae", override)
    assert result.code == 1
    assert len(result.error_lines()) == 1 and message in result.err, result.err
    assert "Traceback" not in result.out + result.err
    assert "Epoch 0" not in result.out + result.err


def test_image_subsets_hold_out_unseen_points_and_scale_pixels():
    splits = tabular.read_digits_subset(classes=(0, 9), per_class=3, test_per_class=2, scale=16.0)
    train, test = splits["train"], splits["test"]
    assert train["inputs"].shape == (6, 64) and test["inputs"].shape == (4, 64) and splits["val"] is test
    assert float(train["inputs"].max()) <= 1.0 and float(train["inputs"].max()) > 0.5
    from sklearn.datasets import load_digits

    x, y = load_digits(return_X_y=True)
    zeros, nines = np.flatnonzero(y == 0), np.flatnonzero(y == 9)
    np.testing.assert_allclose(test["inputs"].numpy(), x[[*zeros[3:5], *nines[3:5]]] / 16.0, rtol=1e-6)
    assert torch.equal(test["labels"], torch.tensor([0, 0, 1, 1]))
    with pytest.raises(ValueError, match="scale must be > 0"):
        tabular.read_digits_subset(scale=0)
