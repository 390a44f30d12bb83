"""The CSRL evaluators on hand-made cases, the heads' ``reconstruct`` against naive loops, and the table logic."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest
import torch
from sklearn.metrics import adjusted_rand_score

from clusterable.contracts import EvalContext
from clusterable.evaluation.csrl import (
    CSRLClustering,
    ElasticPairs,
    TRBMReconstructions,
    TVAELatents,
    denoise,
    image_grid,
    purity,
)
from clusterable.heads.linear_ae import LinearAE
from clusterable.heads.tcl import TensorizedContrastive
from clusterable.heads.tensorized_ae import TensorizedAE
from clusterable.heads.trbm import TensorizedRBM
from clusterable.heads.tvae import TensorizedVAE


def blobs(n_per: int = 20, k: int = 3, d: int = 4, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """k far-apart Gaussian blobs in d dimensions: (k * n_per, d) points and their labels."""
    g = torch.Generator().manual_seed(seed)
    labels = torch.arange(k).repeat_interleave(n_per)
    return 10.0 * torch.eye(k, d)[labels] + 0.1 * torch.randn(len(labels), d, generator=g), labels


def eval_context(x: torch.Tensor, y: torch.Tensor, head: torch.nn.Module, **fields) -> EvalContext:
    """The context of a split whose inputs, encoder output and representation are all ``x`` (N, ...), labels
    ``y`` (N,), scored for ``head``; ``fields`` replace any of that (``split``, ``run_dir``, ``stage``, ...)."""
    split = {"inputs": x, "labels": y}
    base = EvalContext("test", split, head, encoder_output=x, train_embeddings=x, train_labels=y)
    return dataclasses.replace(base, **fields)


class AssignHead(torch.nn.Module):
    """A clustering head whose eq.-2 assignment is given."""

    def __init__(self, assignment: torch.Tensor, num_clusters: int | None = None):
        super().__init__()
        self.assignment = assignment
        self.num_clusters = int(assignment.max()) + 1 if num_clusters is None else num_clusters

    def init_clusters(self, embeddings: torch.Tensor, **split) -> None:
        pass

    def update_clusters(self, embeddings: torch.Tensor, **split) -> None:
        pass

    def assign(self, embeddings: torch.Tensor, **batch) -> torch.Tensor:
        return self.assignment


def test_clustering_scores_the_heads_assignment_when_it_has_one():
    x, y = blobs()
    wrong = torch.tensor([0, 1, 2] * 20)  # uncorrelated with the blobs
    out = CSRLClustering()(x, y, eval_context(x, y, AssignHead(wrong)))
    assert out["ari"] == pytest.approx(adjusted_rand_score(y.numpy(), wrong.numpy()))
    assert out["kmeans_raw/ari"] == pytest.approx(1.0)  # k-means on the raw, separable inputs


def test_a_one_cluster_head_is_scored_by_kmeans_on_its_representation():
    # The standard (one-cluster) model assigns every point to its one cluster: its ARI is k-means on its embedding.
    x, y = blobs()
    out = CSRLClustering()(x, y, eval_context(x, y, AssignHead(torch.zeros(len(y), dtype=torch.long), 1)))
    assert out["ari"] == pytest.approx(1.0)


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")  # the collapsed case
def test_clustering_runs_kmeans_on_the_representation_without_assign():
    x, y = blobs()
    collapsed = torch.zeros(len(y), 2)  # a representation that lost the clusters
    out = CSRLClustering()(collapsed, y, eval_context(x, y, torch.nn.Identity()))
    assert out["ari"] == pytest.approx(0.0, abs=1e-9)
    assert out["kmeans_raw/ari"] == pytest.approx(1.0)
    assert CSRLClustering()(x, y, eval_context(x, y, torch.nn.Identity()))["ari"] == pytest.approx(1.0)


def test_clustering_leaves_unlabelled_points_out():
    x, y = blobs()
    y = y.clone()
    y[:5] = -1
    pred = y.clamp(min=0)
    pred[:5] = 2  # the unlabelled points' predictions must not count
    out = CSRLClustering()(x, y, eval_context(x, y, AssignHead(pred)))
    assert out["ari"] == pytest.approx(1.0)
    one_class = torch.zeros(len(y), dtype=torch.long)
    with pytest.raises(ValueError, match="at least 2 classes"):
        CSRLClustering()(x, one_class, eval_context(x, one_class, torch.nn.Identity()))


class ShiftHead(torch.nn.Module):
    """Reconstructs x + 0.5: a known de-noising error."""

    def reconstruct(self, x: torch.Tensor, **batch) -> torch.Tensor:
        return x + 0.5


def test_denoise_is_the_mse_of_the_reconstruction_against_the_clean_points():
    clean = torch.randn(10, 3)
    noisy = clean + 0.1
    labels = torch.zeros(10, dtype=torch.long)
    split = {"inputs": noisy, "targets": clean, "labels": labels}
    out = denoise(noisy, labels, eval_context(noisy, labels, ShiftHead(), split=split))
    assert out["denoise/mse"] == pytest.approx(0.6**2)
    assert out["denoise/noise_mse"] == pytest.approx(0.1**2)
    assert denoise(noisy, labels, eval_context(noisy, labels, ShiftHead())) == {}  # no targets
    with pytest.raises(ValueError, match="reconstruct"):
        denoise(noisy, labels, eval_context(noisy, labels, torch.nn.Identity(), split=split))


def test_linear_ae_reconstruct_is_decoder_of_encoder():
    head = LinearAE(arch="ae2", input_shape=(5,), num_classes=2)
    x = torch.randn(7, 5)
    with torch.no_grad():
        expected = head.decoder[1](head.decoder[0](head.encoder[1](head.encoder[0](x))))
    torch.testing.assert_close(head.reconstruct(x), expected)


@pytest.mark.parametrize("arch", ["tae1", "tae2", "ptae"])
def test_tensorized_reconstruct_matches_a_loop_over_points_and_clusters(arch):
    torch.manual_seed(0)
    x, _ = blobs(n_per=5, k=3, d=5)
    head = TensorizedAE(arch=arch, input_shape=(5,), num_classes=3)
    head.init_clusters(x)
    out = head.reconstruct(x)
    expected = []
    with torch.no_grad():
        for point in x:  # naive reference: every cluster's autoencoder on the centred point, keep the best
            best = None
            for j in range(3):
                h = point - head.state.centres[j]
                for w in head.encoder:
                    h = h @ (w[j] if w.dim() == 3 else w)
                z = h
                for w in head.decoder:
                    h = h @ (w[j] if w.dim() == 3 else w)
                loss = float((h - (point - head.state.centres[j])).pow(2).mean() + head.lam * z.pow(2).sum())
                if best is None or loss < best[0]:
                    best = (loss, h + head.state.centres[j])
            expected.append(best[1])
    torch.testing.assert_close(out, torch.stack(expected))


def test_purity_and_image_grid():
    assert purity(np.array([0, 0, 1, 1]), np.array([5, 5, 7, 7])) == 1.0
    assert purity(np.array([0, 0, 0, 0]), np.array([5, 5, 7, 7])) == 0.5
    assert purity(np.array([0, 1, 1]), np.array([-1, 3, 4])) == 0.5  # unlabelled left out
    grid = image_grid(np.arange(5 * 4, dtype=float).reshape(5, 4), columns=3)  # 2x2 images, 2 rows of 3
    assert grid.shape == (2 * 3 - 1, 3 * 3 - 1)
    np.testing.assert_array_equal(grid[:2, :2], [[0, 1], [2, 3]])
    assert np.isnan(grid[2]).all() and np.isnan(grid[3:, 6:]).all()  # gutter and the missing sixth image


class TVAEStub(TensorizedVAE):
    """A TVAE whose eq.-2 cluster is the sign of the first coordinate, and whose samples are uniform noise."""

    def __init__(self):
        super().__init__(input_shape=(16,), num_classes=2, hidden=(4,), latent_dim=2)

    def assign(self, embeddings: torch.Tensor, **batch) -> torch.Tensor:
        return (embeddings[:, 0] > 0).long()

    def sample(self, n: int, generator: torch.Generator | None = None, uncentre: bool = True) -> torch.Tensor:
        return torch.rand(self.num_clusters, n, 16, generator=generator)


def test_tvae_latents_writes_the_panels_and_scores_purity(tmp_path: Path):
    mu = torch.tensor([[-1.0, 0.0], [-2.0, 1.0], [1.0, 0.0], [2.0, 1.0]])
    labels = torch.tensor([0, 0, 1, 0])
    ctx = eval_context(mu, labels, TVAEStub(), stage="train", run_dir=tmp_path)
    out = TVAELatents(samples_per_cluster=4)(mu, labels, ctx)
    assert out == {"tvae/purity": pytest.approx(0.75)}
    saved = np.load(tmp_path / "tvae_latent_train.npz")
    np.testing.assert_array_equal(saved["cluster"], [0, 0, 1, 1])
    assert np.load(tmp_path / "tvae_samples.npz")["images"].shape == (2, 4, 16)
    assert (tmp_path / "tvae_latent_train.png").stat().st_size > 0
    assert (tmp_path / "tvae_samples.png").is_file()


class RBMStub(TensorizedRBM):
    """Cluster j reconstructs points of class j perfectly and everything else as zeros."""

    def __init__(self, classes: torch.Tensor):
        super().__init__(input_shape=(9,), num_classes=2, hidden=3)
        self.classes = classes

    def assign(self, x: torch.Tensor, **batch) -> torch.Tensor:
        return self.classes

    def reconstruct(self, x: torch.Tensor, cluster: torch.Tensor) -> torch.Tensor:
        own = cluster == self.classes.repeat(len(x) // len(self.classes))
        return torch.where(own.unsqueeze(1), x, torch.zeros_like(x))


def test_trbm_reconstructions_compare_own_and_other_clusters(tmp_path: Path):
    x = torch.rand(6, 9)
    labels = torch.tensor([0, 0, 0, 1, 1, 1])
    out = TRBMReconstructions(per_class=2)(x, labels, eval_context(x, labels, RBMStub(labels), run_dir=tmp_path))
    assert out["trbm/mse_own"] == pytest.approx(0.0)
    assert out["trbm/mse_other"] == pytest.approx(float(x.pow(2).mean()))
    saved = np.load(tmp_path / "trbm_reconstructions_test.npz")
    assert saved["recon"].shape == (2, 4, 9) and list(saved["labels"]) == [0, 0, 1, 1]


def test_trbm_reconstructions_of_a_real_rbm_match_one_cluster_at_a_time():
    torch.manual_seed(0)
    x, labels = torch.rand(8, 9), torch.tensor([0, 1] * 4)
    head = TensorizedRBM(input_shape=(9,), num_classes=2, hidden=5)
    out = TRBMReconstructions()(x, labels, eval_context(x, labels, head))
    err = torch.stack([(head.reconstruct(x, cluster=j) - x).pow(2).mean(dim=1) for j in range(2)])  # (C, N)
    own = torch.zeros_like(err, dtype=torch.bool)
    own[head.assign(x), torch.arange(8)] = True
    assert out["trbm/mse_own"] == pytest.approx(float(err[own].mean()))
    assert out["trbm/mse_other"] == pytest.approx(float(err[~own].mean()))


class TCLStub(TensorizedContrastive):
    """A TCL head (alpha 34, sigma 4) whose eq.-2 clusters of five points are given."""

    def __init__(self):
        super().__init__(embedding_dim=784, num_classes=2, out_dim=2, hidden=2, alpha=34.0, sigma=4.0)

    def assign(self, embeddings: torch.Tensor, **batch) -> torch.Tensor:
        return torch.tensor([0, 0, 1, 1, 0])


def test_elastic_pairs_take_the_negative_from_another_cluster(tmp_path: Path):
    images = torch.rand(5, 1, 28, 28)
    labels = torch.zeros(5, dtype=torch.long)
    ctx = eval_context(images, labels, TCLStub(), encoder_output=images.flatten(1), run_dir=tmp_path)
    out = ElasticPairs(num_examples=3)(images.flatten(1), labels, ctx)
    assert out["tcl/elastic_change"] > 0
    saved = np.load(tmp_path / "tcl_elastic_test.npz")
    # The first point of another cluster.
    np.testing.assert_array_equal(saved["negative"], images[[2, 2, 0]].flatten(1).numpy())
    assert saved["positive"].shape == (3, 784)
    # No displacement (alpha 0): the positives are the anchors, up to the resampling's rounding.
    unchanged = ElasticPairs(num_examples=3, alpha=0.0)(images.flatten(1), labels, ctx)
    assert unchanged["tcl/elastic_change"] == pytest.approx(0.0, abs=1e-6)


@pytest.mark.parametrize("evaluator", [TVAELatents(), TRBMReconstructions(), ElasticPairs()])
def test_figure_evaluators_refuse_another_models_head_in_one_line(evaluator):
    x, labels = torch.rand(4, 9), torch.tensor([0, 0, 1, 1])
    head = TensorizedAE(arch="tae1", input_shape=(9,), num_classes=2)  # a clustering head, but not theirs
    with pytest.raises(ValueError, match=r"^the \w+ evaluator needs the \w+ head \(loss=\w+\), got TensorizedAE$"):
        evaluator(x, labels, eval_context(x, labels, head))


@pytest.mark.parametrize(
    "evaluator,option,value",
    [
        (CSRLClustering, "kmeans_n_init", 0),
        (CSRLClustering, "num_threads", 0),
        (TVAELatents, "samples_per_cluster", 0),
        (TRBMReconstructions, "per_class", 0),
        (ElasticPairs, "num_examples", 0),
        (ElasticPairs, "alpha", -1.0),
        (ElasticPairs, "sigma", -1.0),
    ],
)
def test_csrl_evaluators_reject_options_out_of_range_naming_them(evaluator, option, value):
    # When built, before training: the message starts with the option's name, which the framework prefixes with
    # evaluator.<name>.
    with pytest.raises(ValueError, match=f"^{option} must be"):
        evaluator(**{option: value})


def test_ptae_per_cluster_losses_stay_accurate_on_raw_pixel_values():
    # PTAE's Lloyd step expands ||h W - (t - c_j)||^2 instead of forming (C, N, d) tensors: at MNIST's raw
    # 0..255 scale (||t||^2 ~ 1e7) the cancellation must not move the losses the assignment compares.
    torch.manual_seed(0)
    x = 255 * torch.rand(60, 784)
    head = TensorizedAE(arch="ptae", input_shape=(784,), num_classes=3)
    head.init_clusters(x)
    with torch.no_grad():
        fast = head.per_cluster_loss(x)
        w0, w1, w2, w3 = (w.double() for w in (*head.encoder, *head.decoder))
        exact = []
        for j, c in enumerate(head.state.centres.double()):  # the direct formula, one cluster at a time
            z = (x.double() - c) @ w0 @ w1[j]
            exact.append(((z @ w2[j] @ w3 - (x.double() - c)) ** 2).mean(1) + head.lam * (z**2).sum(1))
        exact = torch.stack(exact, dim=1)
    torch.testing.assert_close(fast.double(), exact, rtol=1e-5, atol=1e-3)
    assert torch.equal(fast.argmin(dim=1), exact.argmin(dim=1))
