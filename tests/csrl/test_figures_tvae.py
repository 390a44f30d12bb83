"""CSRL Fig. 10 as a user runs it, in smoke mode and in this process: `train.py -m experiment=csrl/fig10 debug=smoke`
(the standard and the tensorized CNN VAE on the padded 32x32 stand-in), then `scripts/make_tables.py csrl/fig10`."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
QUIET = ["trainer.enable_progress_bar=false"]


@pytest.fixture
def make_tables(capsys):
    """``make_tables(*argv) -> (exit code, stdout)`` of scripts/make_tables.py, run in this process."""
    spec = importlib.util.spec_from_file_location("make_tables", ROOT / "scripts" / "make_tables.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)

    def run(*argv: str) -> tuple[int, str]:
        capsys.readouterr()
        code = module.main(list(argv))
        return code, capsys.readouterr().out

    return run


def test_figure_10_standard_and_tensorized_cnn_vae(train, make_tables):
    result = train("-m", "experiment=csrl/fig10", "debug=smoke", "loss.kl_weight=0.2", "seed=0", *QUIET)
    assert result.code == 0, result.err
    runs = {}
    for path in sorted(train.outputs.rglob("metrics.json")):
        payload = json.loads(path.read_text())
        overrides = dict(o.split("=", 1) for o in payload["overrides"])
        runs[overrides["loss.num_clusters"]] = (path.parent, payload)
    assert set(runs) == {"1", "3"}
    for clusters, params in (("1", 199_557), ("3", 228_237)):  # the authors' VAE_CNN, standard and tensorized
        run_dir, payload = runs[clusters]
        assert payload["status"] == "ok", payload["error"]
        assert payload["config"]["dataset"]["input_shape"] == [1024]  # Fashion-MNIST padded to 32x32
        assert payload["config"]["loss"]["_target_"] == "clusterable.heads.tvae_cnn.TensorizedConvVAE"
        assert payload["metrics"]["model/params"] == params
        assert {"train/tvae/purity", "test/tvae/purity", "train/ari", "test/ari"} <= set(payload["metrics"])
        assert np.load(run_dir / "tvae_samples.npz")["images"].shape == (int(clusters), 36, 1024)
        assert {p.name for p in run_dir.glob("tvae_*.png")} == {
            "tvae_samples.png",
            "tvae_latent_train.png",
            "tvae_latent_test.png",
        }
    # The standard VAE has one latent space: every point in it.
    latent = np.load(runs["1"][0] / "tvae_latent_train.npz")
    assert (latent["cluster"] == 0).all() and len(np.unique(latent["labels"])) == 3

    code, out = make_tables("csrl/fig10", "--outputs", str(train.outputs))
    assert code == 0 and "— SMOKE runs" in out
    assert "| loss.kl_weight=0.2, seed=0 | standard VAE |" in out
    assert "| loss.kl_weight=0.2, seed=0 | TVAE (3 clusters) |" in out
    claims = [line for line in out.splitlines() if line.startswith("- [")]
    assert len(claims) == 4 and not any("[cannot check]" in line for line in claims), claims
    png = train.outputs / "tables" / "smoke" / "csrl_fig10.png"
    assert png.is_file() and png.stat().st_size > 1000
