"""Hand-made run directories: metrics.json (and the arrays evaluators save) as train.py writes them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from clusterable.rundir import write_metrics

SMOKE_LIMITS = {"limit_train_batches": 3}


def write_run(
    outputs: Path,
    experiment: str,
    params: dict[str, Any],
    metrics: dict[str, float] | None,
    *,
    mode: str | None = "full",
    source: str | None = "real",
    timing: dict[str, float] | None = None,
    arrays: dict[str, dict[str, np.ndarray]] | None = None,
    config: dict[str, Any] | None = None,
    diverged_at: int | None = None,
) -> Path:
    """One run below ``outputs/multirun/<mode>/<experiment>/<overrides>``; ``metrics=None`` is a failed run,
    ``diverged_at=<epoch>`` a diverged one (train.py's ``DivergedError`` record: ``failed_epoch``).

    ``mode=None`` writes a legacy metrics.json (no mode, no provenance); ``source=None`` leaves out provenance.
    ``config`` is merged into the recorded config (e.g. the model's node).
    """
    overrides = [f"{k}={v}" for k, v in params.items()]
    path = outputs / "multirun" / (mode or "full") / experiment / ",".join(overrides)
    payload: dict[str, Any] = {
        "status": "ok" if metrics is not None else "failed",
        "error": None if metrics is not None else "RuntimeError: boom",
        "experiment": experiment,
        "overrides": overrides,
        "seed": int(params.get("seed", 0)),
        "metrics": metrics or {},
        "timing": timing or {},
    }
    if diverged_at is not None:
        payload.update(status="failed", error=f"train/loss ran away at epoch {diverged_at}: the run diverged",
                       failed_epoch=diverged_at, metrics={})  # fmt: skip
    if mode is not None:
        payload["mode"] = mode
    if mode is not None and source is not None:
        smoke = mode == "smoke"
        payload["provenance"] = {
            "data_source": source,
            "debug": "smoke" if smoke and source == "fake" else None,
            "limits": SMOKE_LIMITS if smoke else {},
            "max_epochs": 2 if smoke else 100,
        }
        payload["config"] = {
            "dataset": {"source": source},
            "trainer": {"max_epochs": payload["provenance"]["max_epochs"]},
        }
    if config:
        payload["config"] = {**payload.get("config", {}), **config}
    write_metrics(path, payload)
    for name, data in (arrays or {}).items():
        np.savez(path / name, **data)
    return path


def corel_table2_runs(
    outputs: Path, *, mode: str | None = "full", source: str | None = "real", seeds=(0, 1)
) -> int:
    """A complete corel/table2 grid (2 datasets x 2 models x 4 losses x seeds); returns the number of runs."""
    base = {"cce": 0.90, "center": 0.91, "cosine_corel": 0.92, "gaussian_corel": 0.95}
    n = 0
    for d in ("mnist", "fashion_mnist"):
        for m in ("ffnn", "cnn"):
            for loss, acc in base.items():
                for seed in seeds:
                    params = {"dataset": d, "model": m, "loss": loss, "seed": seed}
                    write_run(outputs, "corel/table2", params, {"test/acc": acc + 0.01 * seed}, mode=mode,
                              source=source)  # fmt: skip
                    n += 1
    return n


AE_MODELS = ("ae1", "ae2", "ae3", "tae1", "tae2", "ptae")
PARAMS = {"parallel_lines": {"ae1": 10, "ae2": 24, "ae3": 28, "tae1": 20, "tae2": 48, "ptae": 28},
          "iris": {"ae1": 8, "ae2": 20, "ae3": 28, "tae1": 24, "tae2": 60, "ptae": 28}}  # fmt: skip


def csrl_runs(outputs: Path, mode: str = "smoke", source: str = "fake") -> None:
    """Runs of every CSRL experiment (autoencoder pool, TVAE figures, TCL, TRBM) with the arrays they save."""
    rng = np.random.default_rng(0)
    kw = {"mode": mode, "source": source}
    for d in ("parallel_lines", "iris"):
        for i, m in enumerate(AE_MODELS):
            tensorized = m in ("tae1", "tae2", "ptae")
            for lr in ("0.01", "0.1"):
                for seed in (0, 1):
                    params = {"dataset": d, "loss": m, "optimizer.lr": lr, "seed": seed}
                    ari = (0.9 if tensorized else 0.3) + 0.01 * i + 0.02 * seed + (0.05 if lr == "0.1" else 0)
                    write_run(outputs, "csrl/autoencoders", {**params, "task": "clustering"},
                              {"test/ari": ari, "test/kmeans_raw/ari": 0.5 + 0.1 * seed,
                               "model/params": PARAMS[d][m], "train/loss": 1.0},
                              timing={"epoch_s": (0.02 if tensorized else 0.01) + 0.001 * i}, **kw)  # fmt: skip
                    loss = (0.1 if tensorized else 1.0) * (1 + 0.1 * seed + (0.5 if lr == "0.01" else 0))
                    write_run(outputs, "csrl/autoencoders", {**params, "task": "denoising"},
                              {"train/loss": loss, "test/denoise/mse": 0.9 * loss, "model/params": PARAMS[d][m]},
                              **kw)  # fmt: skip

    def latents(n_classes: int, n: int = 30) -> dict[str, np.ndarray]:
        labels = np.repeat(np.arange(n_classes), n // n_classes)
        return {
            "mu": rng.normal(size=(len(labels), 2)).astype(np.float32),
            "cluster": labels % 3,
            "labels": labels,
        }

    for fig, classes in (("fig3", 3), ("fig9", 3), ("fig10", 3), ("fig11", 6)):
        clusters = 2 if fig == "fig11" else 3
        for seed in (0, 1):
            lat = latents(classes)
            lat["cluster"] = lat["labels"] % clusters
            write_run(outputs, f"csrl/{fig}", {"loss.kl_weight": 0.2, "seed": seed},
                      {"train/tvae/purity": 0.95 - 0.1 * seed, "test/tvae/purity": 0.92, "train/ari": 0.8,
                       "test/ari": 0.75, "train/kl": 1.5},
                      arrays={"tvae_samples.npz": {"images": rng.random((clusters, 12, 16))},
                              "tvae_latent_train.npz": lat, "tvae_latent_test.npz": lat}, **kw)  # fmt: skip
    for supervised in ("False", "True"):
        for seed in (0, 1):
            arrays = {"latent_test_tsne.npz": {"xy": rng.normal(size=(20, 2)), "labels": np.arange(20) % 5}}
            if supervised == "False":
                anchor = rng.random((4, 16))
                arrays["tcl_elastic_test.npz"] = {"anchor": anchor, "positive": anchor + 0.01,
                                                  "negative": rng.random((4, 16))}  # fmt: skip
            sup = supervised == "True"
            write_run(outputs, "csrl/fig4", {"loss.supervised": supervised, "seed": seed},
                      {"test/ari": 0.3 + 0.5 * sup, "test/kmeans/ari": 0.4 + 0.4 * sup,
                       "test/kmeans/silhouette": 0.2}, arrays=arrays, **kw)  # fmt: skip
    for seed in (0, 1):
        labels = np.repeat([0, 1], 4)
        write_run(outputs, "csrl/fig5", {"dataset": "mnist_01", "seed": seed},
                  {"test/ari": 0.95, "test/trbm/mse_own": 0.01, "test/trbm/mse_other": 0.05},
                  arrays={"trbm_reconstructions_test.npz": {"inputs": rng.random((8, 16)), "labels": labels,
                                                            "recon": rng.random((2, 8, 16))}}, **kw)  # fmt: skip
        # The standard (one-cluster) RBM of the same seed: Fig. 13.
        write_run(outputs, "csrl/fig5", {"dataset": "mnist_01", "loss.num_clusters": 1, "seed": seed},
                  {"test/ari": 0.0, "test/trbm/mse_own": 0.02, "test/trbm/mse_own_worst_class": 0.03,
                   "test/trbm/class_match": 0.9},
                  arrays={"trbm_reconstructions_test.npz": {"inputs": rng.random((8, 16)), "labels": labels,
                                                            "recon": rng.random((1, 8, 16))}}, **kw)  # fmt: skip
