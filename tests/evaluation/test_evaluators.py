"""Evaluators against naive re-computations: brute-force matching, loops over samples, sklearn, numpy."""

from __future__ import annotations

import functools
import itertools
from pathlib import Path

import hydra
import numpy as np
import pytest
import torch
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf
from sklearn.cluster import KMeans
from sklearn.metrics import silhouette_score
from torch import nn

from clusterable.evaluation import accuracy, classification, cluster_metrics, hungarian_accuracy
from clusterable.evaluation.latent_plot import latent_plot

CONF = Path(__file__).resolve().parents[2] / "conf" / "evaluator"
EVALUATORS = ["classification", "clustering", "latent_plot"]
KEYS = ["acc", "ari", "nmi", "ami", "v_measure", "silhouette"]
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def blobs(n: int = 150, k: int = 3, dim: int = 8, spread: float = 20.0, seed: int = 0):
    """(n, dim) float32 points in k far-apart Gaussian blobs and their (n,) labels."""
    rng = np.random.default_rng(seed)
    labels = np.arange(n) % k
    centres = rng.normal(size=(k, dim)) * spread
    return (centres[labels] + rng.normal(size=(n, dim))).astype(np.float32), labels


def brute_force_accuracy(y_true: np.ndarray, y_pred: np.ndarray) -> float:
    """Best accuracy over every one-to-one map between the clusters and the classes, by enumeration."""
    classes, clusters = sorted(set(y_true.tolist())), sorted(set(y_pred.tolist()))
    best = 0
    if len(clusters) <= len(classes):
        maps = (dict(zip(clusters, p, strict=True)) for p in itertools.permutations(classes, len(clusters)))
    else:
        maps = (
            {c: k for k, c in zip(classes, p, strict=True)}
            for p in itertools.permutations(clusters, len(classes))
        )
    for cluster_to_class in maps:
        best = max(best, sum(cluster_to_class.get(c) == t for t, c in zip(y_true, y_pred, strict=True)))
    return best / len(y_true)


# ---- Hungarian accuracy ----------------------------------------------------------------------------------


@pytest.mark.parametrize("num_classes,num_clusters", [(3, 3), (4, 2), (2, 5), (3, 6)])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_hungarian_accuracy_matches_brute_force(num_classes, num_clusters, seed):
    rng = np.random.default_rng(seed)
    y_true = rng.integers(0, num_classes, 25)
    y_pred = rng.integers(0, num_clusters, 25) * 7 + 3  # arbitrary cluster ids: only the partition matters
    assert hungarian_accuracy(y_true, y_pred) == pytest.approx(brute_force_accuracy(y_true, y_pred))
    assert hungarian_accuracy(torch.as_tensor(y_true), torch.as_tensor(y_pred)) == pytest.approx(
        brute_force_accuracy(y_true, y_pred)
    )


def test_hungarian_accuracy_rejects_length_mismatch():
    with pytest.raises(ValueError, match="same length"):
        hungarian_accuracy(np.zeros(3), np.zeros(4))


# ---- cluster_metrics -------------------------------------------------------------------------------------


def test_cluster_metrics_on_separated_blobs_are_perfect():
    x, y = blobs()
    out = cluster_metrics(torch.as_tensor(x), torch.as_tensor(y), seed=0)
    assert sorted(out) == sorted(f"{m}/{k}" for m in ("kmeans", "gmm") for k in KEYS)
    for method in ("kmeans", "gmm"):
        for key in ("acc", "ari", "nmi", "ami", "v_measure"):
            assert out[f"{method}/{key}"] == pytest.approx(1.0, abs=1e-6), (method, key)
        assert 0.5 < out[f"{method}/silhouette"] <= 1.0


def test_cluster_metrics_excludes_unlabelled_samples():
    x, y = blobs()
    # A far-away fourth blob of unlabelled points: counted, it would take a cluster and break the matching.
    extra = (np.random.default_rng(5).normal(size=(60, x.shape[1])) + 200.0).astype(np.float32)
    x_all, y_all = (
        np.concatenate([extra[:30], x, extra[30:]]),
        np.concatenate([-np.ones(30), y, -np.ones(30)]),
    )
    assert cluster_metrics(x_all, y_all, seed=3) == cluster_metrics(x, y, seed=3)


def test_silhouette_is_sklearns_on_the_kmeans_clusters():
    x, y = blobs(n=90, spread=2.0)
    out = cluster_metrics(x, y, methods=["kmeans"], silhouette_sample=None, seed=4)
    pred = KMeans(n_clusters=3, n_init=1, random_state=4).fit_predict(x)
    assert out["kmeans/silhouette"] == pytest.approx(silhouette_score(x.astype(np.float64), pred))
    assert out["kmeans/acc"] == pytest.approx(hungarian_accuracy(y, pred))


def test_cluster_metrics_single_cluster_gives_nan_silhouette():
    x, y = blobs(n=60)
    out = cluster_metrics(x, y, num_clusters=1, methods=["kmeans"])
    assert np.isnan(out["kmeans/silhouette"])
    assert out["kmeans/acc"] == pytest.approx(
        1 / 3
    )  # every point in one cluster, matched to one class of three


def test_cluster_metrics_is_seeded():
    x, y = blobs(n=120, spread=0.5)  # overlapping blobs, so the random state matters
    assert cluster_metrics(x, y, seed=7, silhouette_sample=50) == cluster_metrics(
        x, y, seed=7, silhouette_sample=50
    )


@pytest.mark.parametrize(
    "kwargs,match",
    [
        ({"methods": ["dbscan"]}, "methods"),
        ({"num_clusters": 0}, "num_clusters"),
        ({"silhouette_sample": 1}, "silhouette_sample"),
        ({"labels": -np.ones(30)}, "labelled"),
    ],
)
def test_cluster_metrics_rejects_bad_arguments(kwargs, match):
    x, y = blobs(n=30)
    kwargs = {"labels": y, **kwargs}
    with pytest.raises(ValueError, match=match):
        cluster_metrics(x, **kwargs)


def test_cluster_metrics_rejects_non_finite_embeddings():
    x, y = blobs(n=30)
    x[4, 1] = np.nan
    with pytest.raises(ValueError, match="finite"):
        cluster_metrics(x, y)


# ---- accuracy --------------------------------------------------------------------------------------------


class LinearHead(nn.Module):
    """Logits = embeddings @ weight.T, like a head built on class vectors."""

    def __init__(self, weight: torch.Tensor):
        super().__init__()
        self.weight = nn.Parameter(weight)

    def logits(self, embeddings: torch.Tensor) -> torch.Tensor:
        return embeddings @ self.weight.T


# Test points, labels (-1 unlabelled), and training data whose class means are (1, 0.5) and (-1, 2.5); the
# unlabelled training row at (0.9, 1.2), were it counted as a class, would claim the test point (0.9, 1.1).
TEST_X = torch.tensor([[2.0, 0.0], [0.0, 2.0], [0.9, 1.1], [5.0, 5.0]])
TEST_Y = torch.tensor([0, 1, 0, -1])
TRAIN_X = torch.tensor([[1.0, 0.0], [1.0, 1.0], [-1.0, 2.0], [-1.0, 3.0], [0.9, 1.2]])
TRAIN_Y = torch.tensor([0, 0, 1, 1, -1])


def test_accuracy_uses_the_heads_logits():
    # Identity class vectors: argmax picks class 1 for (0.9, 1.1), so 2 of the 3 labelled points are right.
    head = LinearHead(torch.eye(2))
    out = accuracy(TEST_X, TEST_Y, head=head, train_embeddings=TRAIN_X, train_labels=TRAIN_Y)
    assert out == {"acc": pytest.approx(2 / 3)}
    assert not any(p.grad is not None for p in head.parameters())


def test_accuracy_feeds_the_heads_logits_its_own_input():
    # A head with `embed` is evaluated on its representation, but its logits take the encoder output.
    head = LinearHead(torch.eye(2))
    out = accuracy(torch.zeros(4, 3), TEST_Y, head=head, encoder_output=TEST_X)
    assert out == {"acc": pytest.approx(2 / 3)}


def test_accuracy_falls_back_to_nearest_class_mean():
    # Nearest means: (2, 0) -> 0, (0, 2) -> 1, (0.9, 1.1) -> 0: all three labelled points are right.
    out = accuracy(
        TEST_X.numpy(), TEST_Y.numpy(), head=nn.Identity(), train_embeddings=TRAIN_X, train_labels=TRAIN_Y
    )
    assert out == {"acc": pytest.approx(1.0)}


def test_nearest_class_mean_in_chunks_matches_a_loop(monkeypatch):
    monkeypatch.setattr(classification, "_CHUNK_ELEMENTS", 7)  # forces many row chunks
    g = torch.Generator().manual_seed(0)
    x, train_x = torch.randn(40, 3, generator=g), torch.randn(30, 3, generator=g)
    train_y = torch.tensor([2, 5, 9]).repeat(10)  # non-contiguous class ids
    means = {c: train_x[train_y == c].mean(dim=0) for c in (2, 5, 9)}
    expected = [min(means, key=lambda c: float(((row - means[c]) ** 2).sum())) for row in x]
    assert classification.predict_nearest_mean(x, train_x, train_y).tolist() == expected


def test_accuracy_needs_logits_or_training_data():
    with pytest.raises(ValueError, match="train_embeddings"):
        accuracy(TEST_X, TEST_Y, head=nn.Identity())


# ---- latent_plot -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("method", ["pca", "tsne"])
def test_latent_plot_writes_png_and_coordinates(tmp_path, method):
    x, y = blobs(n=60, dim=5, spread=3.0)
    y[:6] = -1
    out = latent_plot(x, y, method=method, max_points=40, run_dir=tmp_path, stage="val", seed=1)
    assert (tmp_path / f"latent_val_{method}.png").read_bytes()[:8] == PNG_MAGIC
    saved = np.load(tmp_path / f"latent_val_{method}.npz")
    assert saved["xy"].shape == (40, 2) and np.isfinite(saved["xy"]).all()
    assert saved["labels"].shape == (40,) and set(saved["labels"].tolist()) <= set(y.tolist())
    if method == "pca":
        centred = x - x.mean(axis=0)
        s = np.linalg.svd(centred, compute_uv=False) ** 2
        assert out == {"pca/explained_variance": pytest.approx(s[:2].sum() / s.sum(), rel=1e-4)}
    else:
        assert out == {}


def test_latent_plot_draws_2d_embeddings_as_they_are(tmp_path):
    x, y = blobs(n=30, dim=2)
    assert latent_plot(x, y, method="tsne", run_dir=tmp_path, filename="fig.png") == {}
    assert (tmp_path / "fig.png").read_bytes()[:8] == PNG_MAGIC
    saved = np.load(tmp_path / "fig.npz")
    np.testing.assert_array_equal(saved["xy"], x)
    np.testing.assert_array_equal(saved["labels"], y)


def test_latent_plot_without_run_dir_saves_nothing(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    x, y = blobs(n=30, dim=4)
    assert "pca/explained_variance" in latent_plot(x, y, run_dir=None)
    assert list(tmp_path.iterdir()) == []


# ---- configs ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", EVALUATORS)
def test_evaluator_yaml_instantiates_and_runs(tmp_path, name):
    # Several evaluators are selected at once, so each config sits under its own name in the group.
    assert (CONF / f"{name}.yaml").read_text().splitlines()[0] == f"# @package evaluator.{name}"
    evaluate = hydra.utils.instantiate(OmegaConf.load(CONF / f"{name}.yaml"))
    assert isinstance(evaluate, functools.partial)
    x, y = blobs(n=60, dim=4)
    head = LinearHead(torch.randn(3, 4))
    context = dict(stage="test", head=head, inputs=torch.as_tensor(x), run_dir=tmp_path, seed=0)
    out = evaluate(torch.as_tensor(x), torch.as_tensor(y), train_embeddings=x, train_labels=y, **context)
    assert isinstance(out, dict) and all(isinstance(v, float) for v in out.values())
    expected = {"classification": {"acc"}, "latent_plot": {"pca/explained_variance"}}
    assert set(out) == expected.get(name, {f"{m}/{k}" for m in ("kmeans", "gmm") for k in KEYS})


def test_evaluator_group_composes_under_its_own_names():
    with initialize_config_dir(config_dir=str(CONF.parent), version_base="1.3"):
        cfg = compose(overrides=[f"+evaluator=[{','.join(EVALUATORS)}]"])
    assert sorted(cfg.evaluator) == EVALUATORS
    assert cfg.evaluator.clustering.silhouette_sample == 2000
