"""Batched torch k-means: recovers separated blobs, seeded, k == N, empty clusters, the pruned assignment
against the full argmin and plain Lloyd; and as the clustering evaluator's ``kmeans_backend=torch``."""

from __future__ import annotations

import re

import numpy as np
import pytest
import torch
from sklearn.metrics import adjusted_rand_score
from torch import nn

from clusterable.contracts import EvalContext
from clusterable.evaluation import kmeans as kmeans_module
from clusterable.evaluation.clustering import ClusterMetrics
from clusterable.evaluation.kmeans import kmeans
from clusterable.evaluation.matmul import score_blocks

pytestmark = pytest.mark.usefixtures("one_thread")


def blobs(n: int, k: int, dim: int = 8, spread: float = 50.0, seed: int = 0) -> tuple[torch.Tensor, np.ndarray]:
    """(n, dim) points in k far-apart Gaussian blobs (unit noise) and their (n,) labels."""
    g = torch.Generator().manual_seed(seed)
    labels = torch.arange(n) % k
    centres = torch.randn(k, dim, generator=g) * spread
    return centres[labels] + torch.randn(n, dim, generator=g), labels.numpy()


@pytest.mark.parametrize("init", ["k-means++", "random"])
def test_recovers_separated_blobs(init):
    x, y = blobs(300, 5)
    # Random starts may put two centres in one blob; a few starts (lowest inertia kept) fix that.
    assignment, centres = kmeans(x, 5, seed=0, init=init, n_init=1 if init == "k-means++" else 5)
    assert adjusted_rand_score(y, assignment.numpy()) == 1.0
    assert centres.shape == (5, 8) and assignment.dtype == torch.long
    # Each centre is the mean of its points.
    for c in range(5):
        torch.testing.assert_close(centres[c], x[assignment == c].mean(dim=0))


def test_many_clusters_start_from_random_rows(monkeypatch):
    # Above 256 clusters k-means++ (k sequential passes) is skipped for k distinct random rows, as in faiss.
    def no_kmeans_plus_plus(*args, **kwargs):
        raise AssertionError("k-means++ used for k > 256")

    monkeypatch.setattr(kmeans_module, "_kmeans_plus_plus", no_kmeans_plus_plus)
    x, _ = blobs(780, 260, dim=16, spread=100.0)
    assignment, centres = kmeans(x, 260, seed=1)
    # A Lloyd fixed point: no empty cluster, each point at its nearest centre, each centre its points' mean.
    assert len(torch.unique(assignment)) == 260
    assert torch.equal(assignment, torch.cdist(x, centres).argmin(dim=1))
    sums = torch.zeros_like(centres).index_add_(0, assignment, x)
    torch.testing.assert_close(centres, sums / torch.bincount(assignment)[:, None].float())


def test_same_seed_same_clusters_other_seed_other_start():
    x, _ = blobs(200, 6, spread=2.0)  # overlapping: the start matters
    a1, c1 = kmeans(x, 6, seed=3)
    a2, c2 = kmeans(x, 6, seed=3)
    assert torch.equal(a1, a2) and torch.equal(c1, c2)
    assert not torch.equal(kmeans(x, 6, seed=4, n_iter=1)[1], kmeans(x, 6, seed=3, n_iter=1)[1])


@pytest.mark.parametrize("init", ["k-means++", "random"])
def test_k_equal_to_n_puts_every_point_in_its_own_cluster(init):
    x = torch.randn(12, 3, generator=torch.Generator().manual_seed(5))
    assignment, centres = kmeans(x, 12, seed=0, init=init)
    assert sorted(assignment.tolist()) == list(range(12))
    torch.testing.assert_close(centres[assignment], x)


def test_an_empty_cluster_takes_the_farthest_point():
    # Two tight pairs and one far point; start from centres 0 (pair A), 1 (pair A as well) and 2 (pair B):
    # after the first assignment one of the two centres in pair A is empty (ties go to the lower centre), and
    # it must be re-seeded with the point farthest from its centre, the outlier.
    x = torch.tensor([[0.0, 0.0], [0.0, 0.0], [10.0, 0.0], [10.0, 0.2], [0.0, 50.0]])
    real_randperm = torch.randperm

    def fixed_start(n, **kwargs):
        return torch.tensor([0, 1, 2, 3, 4]) if n == 5 else real_randperm(n, **kwargs)

    mp = pytest.MonkeyPatch()
    mp.setattr(kmeans_module.torch, "randperm", fixed_start)
    try:
        assignment, centres = kmeans(x, 3, seed=0, init="random")
    finally:
        mp.undo()
    assert len(set(assignment.tolist())) == 3
    assert assignment[0] == assignment[1] and assignment[2] == assignment[3]
    assert assignment[4] not in (assignment[0], assignment[2])  # the outlier has its own cluster
    torch.testing.assert_close(centres[assignment[4]], x[4])


def test_duplicate_points_with_k_means_plus_plus():
    # Fewer distinct points than clusters: k-means++ runs out of positive distances and takes unused rows.
    x = torch.tensor([[0.0, 0.0]] * 4 + [[5.0, 5.0]] * 4)
    assignment, centres = kmeans(x, 3, seed=0, init="k-means++")
    assert assignment.shape == (8,) and torch.isfinite(centres).all()
    assert assignment[0] != assignment[4]


@pytest.mark.parametrize(
    "options, message",
    [
        ({"k": 0}, "k must be in [1, 10]"),
        ({"k": 11}, "k must be in [1, 10]"),
        ({"n_iter": 0}, "n_iter must be >= 1"),
        ({"init": "kmeans++"}, "init must be auto, k-means++ or random"),
        ({"n_init": 0}, "n_init must be >= 1"),
        ({"chunk_size": 0}, "chunk_size must be >= 1 or None"),
    ],
)
def test_options_out_of_range_are_named(options, message):
    x = torch.randn(10, 2)
    with pytest.raises(ValueError, match="^" + re.escape(message)):
        kmeans(x, **{"k": 2, **options})


def test_chunks_do_not_change_the_result():
    x, _ = blobs(150, 4, spread=3.0)
    assert torch.equal(kmeans(x, 4, seed=2, chunk_size=40)[0], kmeans(x, 4, seed=2)[0])


def context(x: torch.Tensor, y: np.ndarray, seed: int = 0) -> EvalContext:
    yt = torch.as_tensor(y)
    return EvalContext("test", {"inputs": x, "labels": yt}, nn.Identity(), x, x, yt, seed=seed)


def test_torch_backend_through_cluster_metrics():
    x, y = blobs(150, 3)
    y = y.copy()
    y[:5] = -1  # unlabelled rows are left out, as with scikit-learn
    out = ClusterMetrics(methods=["kmeans"], kmeans_backend="torch")(x, torch.as_tensor(y), context(x, y))
    assert out["kmeans/acc"] == 1.0 and out["kmeans/ari"] == 1.0 and out["kmeans/ami"] == pytest.approx(1.0)
    sklearn_out = ClusterMetrics(methods=["kmeans"])(x, torch.as_tensor(y), context(x, y))
    assert set(out) == set(sklearn_out)
    no_ami = ClusterMetrics(methods=["kmeans"], kmeans_backend="torch", ami=False)(x, torch.as_tensor(y), context(x, y))
    assert set(no_ami) == set(out) - {"kmeans/ami"}


def test_cluster_metrics_rejects_an_unknown_backend():
    x, y = blobs(30, 3)
    with pytest.raises(ValueError, match=r"^kmeans_backend must be one of \['sklearn', 'torch'\]"):
        ClusterMetrics(kmeans_backend="faiss")(x, torch.as_tensor(y), context(x, y))


def test_pruned_assignment_is_the_full_argmin():
    # Centres that move a few at a time, as in Lloyd's later iterations: some far (their points must be
    # compared with every centre again), some into other clusters (they take points), some not at all.
    g = torch.Generator().manual_seed(7)
    x = torch.randn(300, 5, generator=g)
    x_sq = (x * x).sum(dim=1)
    centres = x[:20].clone()
    with score_blocks(x.device) as matmul:
        nearest = kmeans_module._Nearest(x, 64, matmul)
        for step in range(8):
            assignment, own = nearest(centres)
            exact = torch.cdist(x.double(), centres.double()) ** 2
            assert torch.equal(assignment, exact.argmin(dim=1)), step
            torch.testing.assert_close((own + x_sq).double(), exact.min(dim=1).values, atol=1e-4, rtol=1e-4)
            centres = centres.clone()
            if step == 4:  # most centres move: every point is compared with every centre
                centres += 0.3 * torch.randn(20, 5, generator=g)
            else:
                moving = torch.randperm(20, generator=g)[:3]
                centres[moving] += (1.5 if step % 2 else 0.2) * torch.randn(3, 5, generator=g)
    assert nearest.passes == 8
    # Without the pruning every call computes 300 x 20 distances.
    assert nearest.products < 0.7 * 8 * 300 * 20


def test_pruned_assignment_breaks_ties_to_the_lower_centre():
    # Small integers: every distance is exact in float32, so a centre moved onto another one ties exactly.
    x = torch.tensor([[-1.0, 0.0], [1.0, 0.0], [10.0, 0.0], [11.0, 0.0], [0.0, 10.0], [0.0, 11.0]])
    centres = torch.tensor([[0.0, 0.0], [10.0, 0.0], [0.0, 10.0], [50.0, 50.0], [-50.0, 50.0], [50.0, -50.0]])

    def exact(c: torch.Tensor) -> list[int]:
        return ((x[:, None].double() - c[None].double()) ** 2).sum(dim=2).argmin(dim=1).tolist()

    with score_blocks(x.device) as matmul:
        nearest = kmeans_module._Nearest(x, 4, matmul)
        assert nearest(centres)[0].tolist() == exact(centres) == [0, 0, 1, 1, 2, 2]
        moved = centres.clone()
        moved[4] = centres[1]  # a higher index onto centre 1: its points stay with 1
        moved[0] = centres[2]  # a lower index onto centre 2: its points go to 0; point 0 ties 0 and 2: 0
        assert nearest(moved)[0].tolist() == exact(moved) == [0, 1, 1, 1, 0, 0]


def plain_lloyd(x: torch.Tensor, k: int, seed: int, n_iter: int) -> torch.Tensor:
    """Lloyd's iterations by the book in float64 from ``kmeans``'s random start (the same generator draw), with
    its empty-cluster rule; the (N,) assignment."""
    g = torch.Generator().manual_seed(seed)
    x64 = x.double()
    centres = x64[torch.randperm(len(x), generator=g)[:k]].clone()
    previous = None
    for _ in range(n_iter):
        distance = torch.cdist(x64, centres) ** 2
        assignment = distance.argmin(dim=1)
        if previous is not None and torch.equal(assignment, previous):
            return assignment
        previous = assignment
        counts = torch.bincount(assignment, minlength=k)
        centres = torch.zeros_like(centres).index_add_(0, assignment, x64) / counts.clamp(min=1)[:, None]
        empty = (counts == 0).nonzero().squeeze(1)
        if len(empty):
            farthest = torch.sort(distance.min(dim=1).values, descending=True, stable=True).indices
            centres[empty] = x64[farthest[: len(empty)]]
    return torch.cdist(x64, centres).argmin(dim=1)


def test_same_partition_as_plain_lloyd():
    x, _ = blobs(400, 40, dim=6, spread=1.5, seed=2)  # overlapping: many iterations, many moves
    for n_iter in (3, 20):
        assignment, _ = kmeans(x, 40, seed=5, init="random", n_iter=n_iter)
        assert torch.equal(assignment, plain_lloyd(x, 40, 5, n_iter)), n_iter
