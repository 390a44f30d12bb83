"""DSCL's spectral rows (Law et al. 2017, Algorithm 2) against a direct NumPy SVD, and their two uses: the
clustering evaluator's ``sc`` method (with ``l2_normalize``, DSCL's "without SC") and the retrieval
evaluator's ``sc`` distance."""

from __future__ import annotations

import re

import numpy as np
import pytest
import torch
from sklearn.metrics import normalized_mutual_info_score
from torch import nn

from clusterable.contracts import EvalContext
from clusterable.evaluation.clustering import ClusterMetrics
from clusterable.evaluation.retrieval import RetrievalMetrics
from clusterable.evaluation.spectral import spectral_rows

pytestmark = pytest.mark.usefixtures("one_thread")

F32_EPS = float(np.finfo(np.float32).eps)


def algorithm_2(x: torch.Tensor) -> np.ndarray:
    """T by the letter, in float64: centre the columns, thin SVD, r = numerical rank (NumPy's ``matrix_rank``
    tolerance with float32's eps, the precision of the data), T = the rows of U_r divided by their norms."""
    m = x.double().numpy()
    m = m - m.mean(axis=0)
    u, s, _ = np.linalg.svd(m, full_matrices=False)
    r = int((s > s.max() * max(m.shape) * F32_EPS).sum())
    u = u[:, :r]
    return u / np.linalg.norm(u, axis=1, keepdims=True)


def gram(t) -> np.ndarray:
    """T T^T: what the sign and rotation freedom of the singular vectors leaves unchanged."""
    t = np.asarray(t, dtype=np.float64)
    return t @ t.T


def blobs(n: int = 120, k: int = 4, dim: int = 6, spread: float = 10.0, offset: float = 0.0, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    labels = torch.arange(n) % k
    x = torch.randn(k, dim, generator=g)[labels] * spread + torch.randn(n, dim, generator=g) + offset
    return x, labels


def context(x: torch.Tensor, y: torch.Tensor, seed: int = 0, **split: torch.Tensor) -> EvalContext:
    return EvalContext("test", {"inputs": x, "labels": y, **split}, nn.Identity(), x, x, y, seed=seed)


# ---- spectral_rows ---------------------------------------------------------------------------------------------


def test_full_rank_matches_numpy_svd():
    x, _ = blobs(80, dim=7, offset=3.0)
    t = spectral_rows(x)
    expected = algorithm_2(x)
    assert t.shape == (80, 7) == expected.shape and t.dtype == torch.float32
    torch.testing.assert_close(t.norm(dim=1), torch.ones(80), atol=1e-6, rtol=0)
    np.testing.assert_allclose(gram(t), gram(expected), atol=2e-5)


def test_rank_deficient_input_keeps_the_numerical_rank():
    # Rank 3 after centring, in 12 dimensions, far from the origin (the centring must happen in float64).
    g = torch.Generator().manual_seed(1)
    x = torch.randn(60, 3, generator=g) @ torch.randn(3, 12, generator=g) + 100.0
    t = spectral_rows(x)
    assert t.shape == (60, 3) and algorithm_2(x).shape == (60, 3)
    np.testing.assert_allclose(gram(t), gram(algorithm_2(x)), atol=1e-4)
    # The projector M M^+ = U U^T (U from NumPy's SVD of the centred data) is T T^T with U's row norms back.
    m = x.double().numpy() - x.double().numpy().mean(0)
    u, singular, _ = np.linalg.svd(m, full_matrices=False)
    u = u[:, :3]
    norms = np.linalg.norm(u, axis=1)
    np.testing.assert_allclose(norms[:, None] * gram(t) * norms[None, :], u @ u.T, atol=1e-6)
    np.testing.assert_allclose(u @ u.T, m @ np.linalg.pinv(m, rtol=max(m.shape) * F32_EPS), atol=1e-6)
    # With no tolerance the float32 rounding noise counts as more directions; a larger one drops real ones.
    assert spectral_rows(x, tol=0.0).shape[1] > 3
    assert spectral_rows(x, tol=float(singular[1])).shape[1] == 1


def test_translation_invariant_and_chunks_do_not_matter():
    x, _ = blobs(90, dim=5)
    base = gram(spectral_rows(x))
    np.testing.assert_allclose(gram(spectral_rows(x + 1000.0)), base, atol=1e-4)
    np.testing.assert_allclose(gram(spectral_rows(x, chunk_size=7)), base, atol=1e-5)


def test_a_row_at_the_mean_stays_zero():
    x = torch.tensor([[1.0, 0.0], [-1.0, 0.0], [0.0, 0.0], [0.0, 2.0], [0.0, -2.0]])
    t = spectral_rows(x)
    assert t.shape == (5, 2)
    assert torch.equal(t[2], torch.zeros(2))
    torch.testing.assert_close(t[[0, 1, 3, 4]].norm(dim=1), torch.ones(4))


@pytest.mark.parametrize(
    "x, options, message",
    [
        (torch.ones(5), {}, "embeddings must be a non-empty (N, D) tensor, got (5,)"),
        (torch.ones(2, 3, 4), {}, "embeddings must be a non-empty (N, D) tensor"),
        (torch.ones(0, 3), {}, "embeddings must be a non-empty (N, D) tensor"),
        (torch.tensor([[1.0, float("nan")], [0.0, 1.0]]), {}, "embeddings must be finite"),
        (torch.tensor([[1.0, float("inf")], [0.0, 1.0]]), {}, "embeddings must be finite"),
        (torch.ones(6, 3) * 2.5, {}, "embeddings have rank 0 once centred"),
        (torch.ones(1, 3), {}, "embeddings have rank 0 once centred"),
        (torch.eye(3), {"tol": -1.0}, "tol must be a number >= 0 or None"),
        (torch.eye(3), {"chunk_size": 0}, "chunk_size must be an integer >= 1"),
    ],
)
def test_errors_are_one_line_and_named(x, options, message):
    with pytest.raises(ValueError, match="^" + re.escape(message)) as error:
        spectral_rows(x, **options)
    assert "\n" not in str(error.value)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_matches_cpu():
    x, _ = blobs(200, dim=9, offset=5.0)
    t = spectral_rows(x.cuda())
    assert t.device.type == "cuda"
    np.testing.assert_allclose(gram(t.cpu()), gram(spectral_rows(x)), atol=1e-5)


# ---- cluster_metrics: sc and l2_normalize ----------------------------------------------------------------------


@pytest.mark.parametrize("backend", ["sklearn", "torch"])
def test_sc_method_recovers_separated_blobs(backend):
    # Three blobs at the corners of a triangle far from the origin, in 2 dimensions: every direction of the
    # centred data separates classes (noise-only directions would be whitened to the same weight as the others,
    # and a blob at the centre of mass would have no direction).
    y = torch.arange(120) % 3
    corners = torch.tensor([[0.0, 1.0], [0.87, -0.5], [-0.87, -0.5]]) * 20.0 + 50.0
    x = corners[y] + torch.randn(120, 2, generator=torch.Generator().manual_seed(0))
    out = ClusterMetrics(methods=["kmeans", "sc"], kmeans_backend=backend)(x, y, context(x, y))
    assert {key for key in out if key.startswith("sc/")} == {
        f"sc/{name}" for name in ("acc", "ari", "nmi", "ami", "v_measure", "silhouette")
    }
    for name in ("acc", "ari", "nmi", "ami", "v_measure"):
        assert out[f"sc/{name}"] == pytest.approx(1.0, abs=1e-9), name
    # The same partition as k-means: the silhouette is computed in the same space (the embeddings).
    assert out["sc/silhouette"] == out["kmeans/silhouette"] > 0.5


def test_sc_runs_on_the_spectral_rows_not_the_embeddings():
    # Two classes on two parallel lines, x2 = 0 and x2 = 1, stretched along x1 (-20..20): k-means on the
    # embeddings cuts the lines across (left half, right half); on the spectral rows of these centred points
    # (whitened: U = M V / s) the two lines are separated.
    t = torch.linspace(-20.0, 20.0, 40)
    x = torch.cat([torch.stack([t, torch.zeros(40)], 1), torch.stack([t, torch.ones(40)], 1)])
    y = torch.arange(80) // 40
    out = ClusterMetrics(methods=["kmeans", "sc"], kmeans_n_init=5, ami=False)(x, y, context(x, y))
    assert out["kmeans/nmi"] < 0.1
    side = np.sign(spectral_rows(x).numpy()[:, 1])  # the second direction, the lines' offset
    assert (side[:40] == side[0]).all() and (side[40:] == -side[0]).all()
    assert out["sc/nmi"] == pytest.approx(1.0)


def rays(n_per_class: int = 30) -> tuple[torch.Tensor, torch.Tensor]:
    """Two classes on two rays from the origin, 20 degrees apart, at norms from 1 to 100: apart in direction,
    mixed in norm."""
    norms = torch.logspace(0, 2, n_per_class)
    angles = torch.tensor([0.0, np.deg2rad(20.0)])
    y = torch.arange(2 * n_per_class) % 2
    radius = norms.repeat_interleave(2)
    x = torch.stack([radius * torch.cos(angles[y]), radius * torch.sin(angles[y])], dim=1)
    return x, y


@pytest.mark.parametrize("backend", ["sklearn", "torch"])
def test_l2_normalize_clusters_directions(backend):
    x, y = rays()
    options = {"methods": ["kmeans"], "kmeans_backend": backend, "ami": False}
    raw = ClusterMetrics(**options)(x, y, context(x, y))
    normalised = ClusterMetrics(l2_normalize=True, **options)(x, y, context(x, y))
    assert raw["kmeans/nmi"] < 0.2  # split by norm
    assert normalised["kmeans/nmi"] == pytest.approx(1.0)
    # The silhouette stays that of the embeddings as given (of the normalised ones, two points, it would be 1).
    assert normalised["kmeans/silhouette"] < 0.9


def test_l2_normalize_applies_to_gmm_but_not_to_sc():
    x, y = rays()
    raw = ClusterMetrics(methods=["gmm", "sc"], ami=False)(x, y, context(x, y))
    normalised = ClusterMetrics(methods=["gmm", "sc"], ami=False, l2_normalize=True)(x, y, context(x, y))
    assert normalised["gmm/nmi"] == pytest.approx(1.0) and raw["gmm/nmi"] < 0.9
    assert {k: v for k, v in normalised.items() if k.startswith("sc/")} == {
        k: v for k, v in raw.items() if k.startswith("sc/")
    }


def test_sc_and_l2_normalize_options_are_checked():
    x, y = blobs(30)
    with pytest.raises(ValueError, match=r"^l2_normalize must be true or false, got 'yes'"):
        ClusterMetrics(l2_normalize="yes")(x, y, context(x, y))
    with pytest.raises(ValueError, match=r"^methods must be a non-empty subset of \['kmeans', 'gmm', 'sc'\]"):
        ClusterMetrics(methods=["spectral"])(x, y, context(x, y))
    same = torch.ones(30, 6)
    with pytest.raises(ValueError, match="^embeddings have rank 0 once centred"):
        ClusterMetrics(methods=["sc"])(same, y, context(same, y))
    # The default is still COREL's two methods: sc is asked for.
    assert {key.split("/")[0] for key in ClusterMetrics()(x, y, context(x, y))} == {"kmeans", "gmm"}


def test_sc_leaves_out_unlabelled_rows():
    x, y = blobs(90, k=3, offset=20.0)
    far = torch.randn(10, x.shape[1], generator=torch.Generator().manual_seed(3)) + 500.0
    x_all, y_all = torch.cat([x, far]), torch.cat([y, torch.full((10,), -1)])
    options = {"methods": ["sc"], "kmeans_backend": "torch", "ami": False}
    assert ClusterMetrics(**options)(x_all, y_all, context(x_all, y_all)) == ClusterMetrics(**options)(
        x, y, context(x, y)
    )


# ---- retrieval_metrics: sc ---------------------------------------------------------------------------------------


def retrieval_data(n: int = 64, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """8 overlapping classes in 3 dimensions around a far common offset: cosine on the embeddings loses the
    direction of the offset (all rows nearly parallel), the spectral rows centre them first."""
    g = torch.Generator().manual_seed(seed)
    y = torch.arange(n) % 8
    x = torch.randn(8, 3, generator=g)[y] + 0.4 * torch.randn(n, 3, generator=g) + 30.0
    return x, y


def test_sc_distance_is_cosine_on_the_spectral_rows():
    x, y = retrieval_data()
    options = {"ks": [1, 2, 4], "chunk_size": 24}
    out = RetrievalMetrics(distances=["sc"], **options)(x, y, context(x, y))
    expected = RetrievalMetrics(distances=["cos"], **options)(spectral_rows(x), y, context(x, y))
    assert list(out) == RetrievalMetrics(distances=["sc"], **options).metric_names()
    assert out == pytest.approx({key.replace("/cos", "/sc"): value for key, value in expected.items()})
    # Not the cosine of the embeddings themselves: T does not see a translation of the embeddings, the cosine
    # does (the offset makes the rows nearly parallel).
    moved = x - 30.0
    assert RetrievalMetrics(distances=["sc"], **options)(moved, y, context(moved, y)) == pytest.approx(out)
    cos = RetrievalMetrics(distances=["cos"], **options)(x, y, context(x, y))
    moved_cos = RetrievalMetrics(distances=["cos"], **options)(moved, y, context(moved, y))
    assert moved_cos["map@r/cos"] > cos["map@r/cos"] + 0.03


def test_sc_distance_uses_the_rows_that_take_part():
    x, y = retrieval_data(72, seed=1)
    y = y.clone()
    y[::9] = -1  # unlabelled: neither queries nor gallery, nor in the spectral rows
    is_query, is_gallery = torch.arange(72) % 3 == 0, torch.arange(72) % 3 != 0
    kept = y >= 0
    rows = spectral_rows(x[kept])
    # All against all.
    out = RetrievalMetrics(distances=["sc"], ks=[1, 3])(x, y, context(x, y))
    expected = RetrievalMetrics(distances=["cos"], ks=[1, 3])(rows, y[kept], context(rows, y[kept]))
    assert out == pytest.approx({key.replace("/cos", "/sc"): value for key, value in expected.items()})
    # Query/gallery: the spectral rows of the queries and the gallery together.
    split = {"is_query": is_query, "is_gallery": is_gallery}
    out = RetrievalMetrics(distances=["sc", "cos"], ks=[1, 3])(x, y, context(x, y, **split))
    used = kept & (is_query | is_gallery)
    rows = spectral_rows(x[used])
    sub = {name: mask[used] for name, mask in split.items()}
    expected = RetrievalMetrics(distances=["cos"], ks=[1, 3])(rows, y[used], context(rows, y[used], **sub))
    assert [key for key in out if key.endswith("/sc")] == RetrievalMetrics(distances=["sc"], ks=[1, 3]).metric_names()
    assert {k: v for k, v in out.items() if k.endswith("/sc")} == pytest.approx(
        {key.replace("/cos", "/sc"): value for key, value in expected.items()}
    )


def test_sc_distance_rejects_rank_0():
    x, y = torch.ones(12, 4), torch.arange(12) % 3
    with pytest.raises(ValueError, match="^embeddings have rank 0 once centred"):
        RetrievalMetrics(distances=["sc"], ks=[1])(x, y, context(x, y))


def test_nmi_helper_is_not_trivially_one():
    # Guard for the tests above: the NMI of a wrong partition is well below 1.
    assert normalized_mutual_info_score([0, 0, 1, 1], [0, 1, 0, 1]) < 0.1
