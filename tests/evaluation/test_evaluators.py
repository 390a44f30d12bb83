"""Evaluators against naive re-computations: brute-force matching, loops over samples, sklearn, numpy; their
contract (``evaluator(embeddings, labels, context)``, its options the fields of a frozen dataclass) and the runner
that calls them."""

from __future__ import annotations

import dataclasses
import functools
import inspect
import itertools
import typing
from pathlib import Path

import hydra
import numpy as np
import pytest
import torch
from hydra import compose, initialize_config_dir
from sklearn.cluster import KMeans
from sklearn.metrics import silhouette_score
from torch import nn

from clusterable.config import CONFIG_DIR
from clusterable.contracts import DeclaresMetrics, EvalContext, require_evaluator
from clusterable.data.memory import InMemoryDataModule
from clusterable.evaluation import classification
from clusterable.evaluation.classification import accuracy
from clusterable.evaluation.clustering import ClusterMetrics, hungarian_accuracy
from clusterable.evaluation.latent_plot import LatentPlot
from clusterable.evaluation.runner import evaluate
from clusterable.heads.cce import CCELoss
from clusterable.heads.linear_ae import LinearAE
from clusterable.models.identity import Identity
from clusterable.module import RepresentationModule

CONF = Path(CONFIG_DIR) / "evaluator"
EVALUATORS = ["classification", "clustering", "clustering_l2", "latent_plot"]
KEYS = ["acc", "ari", "nmi", "ami", "v_measure", "silhouette"]
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def blobs(n: int = 150, k: int = 3, dim: int = 8, spread: float = 20.0, seed: int = 0):
    """(n, dim) float32 points in k far-apart Gaussian blobs and their (n,) labels."""
    rng = np.random.default_rng(seed)
    labels = np.arange(n) % k
    centres = rng.normal(size=(k, dim)) * spread
    return (centres[labels] + rng.normal(size=(n, dim))).astype(np.float32), labels


def eval_context(x, y, **fields) -> EvalContext:
    """The context of a split whose inputs, encoder output and representation are all ``x`` (N, D), labels
    ``y`` (N,), and which is also the training split; ``fields`` replace any of that (e.g. ``head``, ``seed``)."""
    x, y = torch.as_tensor(x), torch.as_tensor(y)
    split = {"inputs": x, "labels": y}
    base = EvalContext("test", split, nn.Identity(), encoder_output=x, train_embeddings=x, train_labels=y)
    return dataclasses.replace(base, **fields)


def brute_force_accuracy(y_true: np.ndarray, y_pred: np.ndarray) -> float:
    """Best accuracy over every one-to-one map between the clusters and the classes, by enumeration."""
    classes, clusters = sorted(set(y_true.tolist())), sorted(set(y_pred.tolist()))
    best = 0
    if len(clusters) <= len(classes):
        maps = (dict(zip(clusters, p, strict=True)) for p in itertools.permutations(classes, len(clusters)))
    else:
        maps = ({c: k for k, c in zip(classes, p, strict=True)} for p in itertools.permutations(clusters, len(classes)))
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


# ---- ClusterMetrics ----------------------------------------------------------------------------------------


def test_cluster_metrics_on_separated_blobs_are_perfect():
    x, y = blobs()
    out = ClusterMetrics()(torch.as_tensor(x), torch.as_tensor(y), eval_context(x, y, seed=0))
    assert list(out) == ClusterMetrics().metric_names()
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
    with_unlabelled = ClusterMetrics()(x_all, y_all, eval_context(x_all, y_all, seed=3))
    assert with_unlabelled == ClusterMetrics()(x, y, eval_context(x, y, seed=3))


def test_silhouette_is_sklearns_on_the_kmeans_clusters():
    x, y = blobs(n=90, spread=2.0)
    out = ClusterMetrics(methods=["kmeans"], silhouette_sample=None)(x, y, eval_context(x, y, seed=4))
    pred = KMeans(n_clusters=3, n_init=1, random_state=4).fit_predict(x)
    assert out["kmeans/silhouette"] == pytest.approx(silhouette_score(x.astype(np.float64), pred))
    assert out["kmeans/acc"] == pytest.approx(hungarian_accuracy(y, pred))


def test_cluster_metrics_single_cluster_gives_nan_silhouette():
    x, y = blobs(n=60)
    out = ClusterMetrics(num_clusters=1, methods=["kmeans"])(x, y, eval_context(x, y))
    assert np.isnan(out["kmeans/silhouette"])
    # Every point in one cluster, matched to one class of three.
    assert out["kmeans/acc"] == pytest.approx(1 / 3)


def test_cluster_metrics_is_seeded():
    x, y = blobs(n=120, spread=0.5)  # overlapping blobs, so the random state matters
    ctx = eval_context(x, y, seed=7)
    assert ClusterMetrics(silhouette_sample=50)(x, y, ctx) == ClusterMetrics(silhouette_sample=50)(x, y, ctx)


def test_cluster_metrics_without_ami_leave_the_key_out_and_say_so():
    x, y = blobs(n=60)
    evaluator = ClusterMetrics(methods=["kmeans", "gmm"], ami=False)
    assert list(evaluator(x, y, eval_context(x, y))) == evaluator.metric_names()
    assert "kmeans/ami" not in evaluator.metric_names() and isinstance(evaluator, DeclaresMetrics)


def test_the_l2_node_scores_the_normalised_rows_under_its_own_keys():
    # Two classes along two directions, each at lengths 1 and 10: raw k-means splits them by length, the
    # normalised rows by direction.
    rng = np.random.default_rng(0)
    directions = np.array([[1.0, 0.0], [0.0, 1.0]])
    y = np.arange(200) % 2
    x = directions[y] * np.where(np.arange(200) % 4 < 2, 1.0, 10.0)[:, None] + rng.normal(0, 0.05, (200, 2))
    x = x.astype(np.float32)
    ctx = eval_context(x, y)
    raw = ClusterMetrics(methods=["kmeans"])(x, y, ctx)
    l2 = ClusterMetrics(methods=["kmeans"], l2_normalize=True, key_prefix="l2/")
    scores = l2(x, y, ctx)
    assert list(scores) == l2.metric_names() and all(k.startswith("l2/kmeans/") for k in scores)
    assert scores["l2/kmeans/acc"] == 1.0 and raw["kmeans/acc"] < 0.8
    plain = ClusterMetrics(methods=["kmeans"], l2_normalize=True)(x, y, ctx)
    assert {f"l2/{k}": v for k, v in plain.items()} == scores  # the prefix changes the keys alone


@pytest.mark.parametrize(
    "option,value",
    [
        ("methods", ["dbscan"]),
        ("methods", []),
        ("methods", "kmeans"),  # a string is a sequence of letters, not of methods
        ("num_clusters", 0),
        ("silhouette_sample", 1),
        ("kmeans_n_init", 0),
        ("gmm_covariance_type", "isotropic"),
        ("gmm_n_init", 0),
        ("gmm_max_iter", 0),
        ("num_threads", 0),
        ("key_prefix", "l2 /"),
        ("key_prefix", 2),
    ],
)
def test_cluster_metrics_rejects_options_out_of_range_naming_them(option, value):
    # When built, before any training: the message starts with the option's name, and the framework prefixes it
    # with evaluator.clustering.
    with pytest.raises(ValueError, match=f"^{option} must be"):
        ClusterMetrics(**{option: value})


def test_cluster_metrics_refuses_more_clusters_than_labelled_rows():
    x, y = blobs(n=30)
    with pytest.raises(ValueError, match=r"^num_clusters must be in \[1, 30\]"):
        ClusterMetrics(num_clusters=31)(x, y, eval_context(x, y))


def test_cluster_metrics_needs_a_labelled_sample():
    x, _ = blobs(n=30)
    with pytest.raises(ValueError, match="labelled"):
        ClusterMetrics()(x, -np.ones(30), eval_context(x, -np.ones(30)))


def test_cluster_metrics_rejects_non_finite_embeddings():
    x, y = blobs(n=30)
    x[4, 1] = np.nan
    with pytest.raises(ValueError, match="finite"):
        ClusterMetrics()(x, y, eval_context(x, y))


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
    ctx = eval_context(TEST_X, TEST_Y, head=head, train_embeddings=TRAIN_X, train_labels=TRAIN_Y)
    assert accuracy(TEST_X, TEST_Y, ctx) == {"acc": pytest.approx(2 / 3)}
    assert not any(p.grad is not None for p in head.parameters())


def test_accuracy_feeds_the_heads_logits_its_own_input():
    # A head with `embed` is evaluated on its representation, but its logits take the encoder output.
    ctx = eval_context(TEST_X, TEST_Y, head=LinearHead(torch.eye(2)))
    assert accuracy(torch.zeros(4, 3), TEST_Y, ctx) == {"acc": pytest.approx(2 / 3)}


def test_accuracy_of_a_real_classifying_head_is_its_argmax():
    head = CCELoss(num_classes=3, embedding_dim=2)
    with torch.no_grad():
        expected = (head.logits(TEST_X).argmax(dim=1)[:3] == TEST_Y[:3]).float().mean()
    assert accuracy(TEST_X, TEST_Y, eval_context(TEST_X, TEST_Y, head=head)) == {"acc": pytest.approx(float(expected))}


def test_accuracy_falls_back_to_nearest_class_mean():
    # Nearest means: (2, 0) -> 0, (0, 2) -> 1, (0.9, 1.1) -> 0: all three labelled points are right.
    ctx = eval_context(TEST_X, TEST_Y, head=nn.Identity(), train_embeddings=TRAIN_X, train_labels=TRAIN_Y)
    assert accuracy(TEST_X.numpy(), TEST_Y.numpy(), ctx) == {"acc": pytest.approx(1.0)}


def test_nearest_class_mean_in_chunks_matches_a_loop(monkeypatch):
    monkeypatch.setattr(classification, "_CHUNK_ELEMENTS", 7)  # forces many row chunks
    g = torch.Generator().manual_seed(0)
    x, train_x = torch.randn(40, 3, generator=g), torch.randn(30, 3, generator=g)
    train_y = torch.tensor([2, 5, 9]).repeat(10)  # non-contiguous class ids
    means = {c: train_x[train_y == c].mean(dim=0) for c in (2, 5, 9)}
    expected = [min(means, key=lambda c: float(((row - means[c]) ** 2).sum())) for row in x]
    assert classification.predict_nearest_mean(x, train_x, train_y).tolist() == expected


def test_logits_in_chunks_match_one_call(monkeypatch):
    monkeypatch.setattr(classification, "_CHUNK_ELEMENTS", 7)  # 3 classes a row: 2 rows a chunk
    head, x = LinearHead(torch.randn(3, 4)), torch.randn(11, 4)
    with torch.no_grad():
        expected = head.logits(x).argmax(dim=1)
    assert torch.equal(classification.predict_logits(head, x), expected)


def test_accuracy_needs_logits_or_labelled_training_data():
    ctx = eval_context(TEST_X, TEST_Y, head=nn.Identity(), train_labels=-torch.ones(4, dtype=torch.long))
    with pytest.raises(ValueError, match="train_labels"):
        accuracy(TEST_X, TEST_Y, ctx)


# ---- latent_plot -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("method", ["pca", "tsne"])
def test_latent_plot_writes_png_and_coordinates(tmp_path, method):
    x, y = blobs(n=60, dim=5, spread=3.0)
    y[:6] = -1
    out = LatentPlot(method=method, max_points=40)(x, y, eval_context(x, y, run_dir=tmp_path, stage="val", seed=1))
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
    assert LatentPlot(method="tsne", filename="fig.png")(x, y, eval_context(x, y, run_dir=tmp_path)) == {}
    assert (tmp_path / "fig.png").read_bytes()[:8] == PNG_MAGIC
    saved = np.load(tmp_path / "fig.npz")
    np.testing.assert_array_equal(saved["xy"], x)
    np.testing.assert_array_equal(saved["labels"], y)


def test_latent_plot_without_run_dir_saves_nothing(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    x, y = blobs(n=30, dim=4)
    assert "pca/explained_variance" in LatentPlot()(x, y, eval_context(x, y, run_dir=None))
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    "option,value", [("method", "umap"), ("max_points", 1), ("perplexity", 0.0), ("num_threads", 0)]
)
def test_latent_plot_rejects_options_out_of_range_naming_them(option, value):
    with pytest.raises(ValueError, match=f"^{option} must be"):
        LatentPlot(**{option: value})


# ---- configs and the contract ------------------------------------------------------------------------------


def evaluator_node(name: str):
    """The node ``src/clusterable/conf/evaluator/{name}.yaml`` composes to (its defaults merged: clustering_l2
    extends clustering)."""
    with initialize_config_dir(config_dir=str(CONF.parent), version_base="1.3"):
        return compose(overrides=[f"+evaluator=[{name}]"]).evaluator[name]


def evaluator_target(name: str):
    """The class or function a ``src/clusterable/conf/evaluator/{name}.yaml`` names."""
    return hydra.utils.get_object(evaluator_node(name)._target_)


@pytest.mark.parametrize("name", sorted(p.stem for p in CONF.glob("*.yaml")))
def test_every_evaluator_takes_embeddings_labels_context_and_states_its_options_once(name):
    target, node = evaluator_target(name), evaluator_node(name)
    keys = set(node) - {"_target_", "_partial_"}
    if dataclasses.is_dataclass(target):
        # An evaluator with options: a frozen dataclass whose fields are the options, each with a default and a
        # type hint (the config checker compares values against the constructor's hints), built from the node
        # itself (no _partial_), and called as (embeddings, labels, context).
        assert target.__dataclass_params__.frozen and "_partial_" not in node, name
        fields = {f.name: f for f in dataclasses.fields(target)}
        hints = typing.get_type_hints(target)
        assert all(f.default is not dataclasses.MISSING and n in hints for n, f in fields.items()), name
        assert keys <= set(fields), name
        call = inspect.signature(target.__call__).parameters
        assert list(call) == ["self", "embeddings", "labels", "context"], name
        require_evaluator(hydra.utils.instantiate(node), f"evaluator.{name}")
    else:
        # Without options: a function (embeddings, labels, context), bound as a partial.
        require_evaluator(target, f"evaluator.{name}")
        params = inspect.signature(target).parameters
        assert list(params) == ["embeddings", "labels", "context"] and not keys and node._partial_ is True, name


@pytest.mark.parametrize("name", EVALUATORS)
def test_evaluator_yaml_instantiates_and_runs(tmp_path, name):
    # Several evaluators are selected at once, so each config sits under its own name in the group.
    assert (CONF / f"{name}.yaml").read_text().splitlines()[0] == f"# @package evaluator.{name}"
    evaluate_fn = hydra.utils.instantiate(evaluator_node(name))
    target = evaluator_target(name)
    assert isinstance(evaluate_fn, target) if dataclasses.is_dataclass(target) else evaluate_fn.func is target
    x, y = blobs(n=60, dim=4)
    ctx = eval_context(x, y, head=LinearHead(torch.randn(3, 4)), run_dir=tmp_path)
    out = evaluate_fn(torch.as_tensor(x), torch.as_tensor(y), ctx)
    assert isinstance(out, dict) and all(isinstance(v, float) for v in out.values())
    expected = {"classification": {"acc"}, "latent_plot": {"pca/explained_variance"}}
    prefix = "l2/" if name == "clustering_l2" else ""
    assert set(out) == expected.get(name, {f"{prefix}{m}/{k}" for m in ("kmeans", "gmm") for k in KEYS})
    if isinstance(evaluate_fn, DeclaresMetrics):
        assert list(out) == evaluate_fn.metric_names()


def test_evaluator_group_composes_under_its_own_names():
    with initialize_config_dir(config_dir=str(CONF.parent), version_base="1.3"):
        cfg = compose(overrides=[f"+evaluator=[{','.join(EVALUATORS)}]"])
    assert sorted(cfg.evaluator) == EVALUATORS
    assert cfg.evaluator.clustering.silhouette_sample == 2000


# ---- the runner --------------------------------------------------------------------------------------------


def runner_setup(head: nn.Module | None = None) -> tuple[RepresentationModule, InMemoryDataModule]:
    """A module (identity encoder, by default a CCE head) on 4-D inputs and train/val/test splits of 3 blobs,
    in an in-memory datamodule with evaluation batches of 7 rows (so the runner stitches batches together)."""
    head = CCELoss(num_classes=3, embedding_dim=4) if head is None else head
    module = RepresentationModule(Identity(input_shape=(4,)), head, functools.partial(torch.optim.Adam))
    splits = {}
    for seed, stage in enumerate(("train", "val", "test")):
        x, y = blobs(n=30, dim=4, seed=seed)
        splits[stage] = {"inputs": torch.as_tensor(x), "labels": torch.as_tensor(y)}
    data = InMemoryDataModule("blobs", lambda: splits, input_shape=[4], num_classes=3, eval_batch_size=7)
    data.load()
    return module, data


@pytest.mark.parametrize("representing", [False, True])
def test_runner_gives_each_evaluator_the_stages_context_and_prefixes_its_metrics(tmp_path, representing):
    # A CCE head scores the encoder output; an autoencoder head (a RepresentingHead) its own embedding of it.
    head = LinearAE(arch="ae2", input_shape=(4,), num_classes=3) if representing else None
    module, data = runner_setup(head)
    splits = data.splits
    represent = module.head.embed if representing else (lambda out, **split: out)
    seen: list[EvalContext] = []

    def spy(embeddings: torch.Tensor, labels: torch.Tensor, context: EvalContext) -> dict[str, float]:
        seen.append(context)
        torch.testing.assert_close(embeddings, represent(context.encoder_output))
        assert labels is context.split["labels"]
        return {"n": float(len(labels))}

    metrics = evaluate(module, data, {"spy": spy}, stages=["val", "test"], run_dir=tmp_path, seed=5)
    assert metrics == {"val/n": 30.0, "test/n": 30.0}
    assert [c.stage for c in seen] == ["val", "test"]
    for c in seen:
        assert c.split.keys() == splits[c.stage].keys() and c.head is module.head
        assert all(c.split[k] is v for k, v in splits[c.stage].items()) and (c.run_dir, c.seed) == (
            tmp_path,
            5,
        )
        torch.testing.assert_close(c.encoder_output, splits[c.stage]["inputs"])
        torch.testing.assert_close(c.train_embeddings, represent(splits["train"]["inputs"]))
        assert c.train_labels is splits["train"]["labels"]


def test_runner_refuses_an_unknown_stage_in_one_line():
    module, data = runner_setup()
    called = []
    message = "eval_stages: no split named 'tset'; the dataset has: train, val, test"
    with pytest.raises(ValueError, match=f"^{message}$"):
        evaluate(module, data, {"spy": lambda *args: called.append(args) or {}}, stages=["val", "tset"])
    assert called == []  # checked before any stage is evaluated
