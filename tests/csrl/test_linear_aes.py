"""The CSRL autoencoder heads: parameter counts, batched vs naive clusters, Lloyd step, eq. 2, training."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from hydra.utils import instantiate
from omegaconf import OmegaConf
from sklearn.metrics import adjusted_rand_score

from clusterable.config import CONFIG_DIR
from clusterable.data.memory.synthetic import read_synthetic
from clusterable.heads.linear_ae import LinearAE
from clusterable.heads.tensorized_ae import TensorizedAE
from clusterable.models.identity import Identity

CONF = Path(CONFIG_DIR)
ARCHS = ("ae1", "ae2", "ae3", "tae1", "tae2", "ptae")
# dataset -> (d, C, #params of AE1, AE2, AE3, TAE1, TAE2, PTAE): the CSRL paper's Fig. 2 and 7 (right), counted
# from the authors' code (repository mahalakshmi-sabanayagam/cluster_specific_representation, src/models.py)
PARAM_COUNTS = {
    "parallel_lines": (5, 2, (10, 24, 28, 20, 48, 28)),
    "orthogonal": (5, 2, (10, 24, 28, 20, 48, 28)),
    "triangle": (5, 3, (10, 24, 32, 30, 72, 32)),
    "lines_3d": (6, 3, (12, 28, 36, 36, 84, 36)),
    "penguins": (4, 3, (8, 20, 28, 24, 60, 28)),
    "iris": (4, 3, (8, 20, 28, 24, 60, 28)),
    "mnist_subset": (784, 5, (1568, 3140, 3156, 7840, 15700, 3156)),
}


def head_from_config(arch: str, d: int, c: int) -> torch.nn.Module:
    """Build a head as train.py does: the framework arguments its constructor takes (``num_classes``,
    ``input_shape``; these heads own the network, so no ``embedding_dim``)."""
    return instantiate(OmegaConf.load(CONF / "loss" / f"{arch}.yaml"), num_classes=c, input_shape=(d,))


@pytest.mark.parametrize("dataset", PARAM_COUNTS)
def test_parameter_counts_match_the_paper(dataset):
    d, c, counts = PARAM_COUNTS[dataset]
    data_cfg = OmegaConf.load(CONF / "dataset" / f"{dataset}.yaml")
    assert (list(data_cfg.input_shape), data_cfg.num_classes) == ([d], c)  # the table's d, C are the configs'
    for arch, expected in zip(ARCHS, counts, strict=True):
        head = head_from_config(arch, d, c)
        assert sum(p.numel() for p in head.parameters() if p.requires_grad) == expected, (dataset, arch)


def test_identity_encoder_flattens():
    enc = Identity(input_shape=(1, 4, 3))
    x = torch.randn(2, 1, 4, 3)
    assert enc.embedding_dim == 12 and torch.equal(enc(x), x.reshape(2, 12))
    assert not list(enc.parameters())


# ---- naive references: one cluster at a time, one layer at a time ----------------------------------------


def naive_terms(head: TensorizedAE, x: torch.Tensor, t: torch.Tensor):
    """Per cluster j: (mse_j (N,), ||z_j||^2 (N,), z_j (N, 1)) from a Python loop over clusters."""
    out = []
    for j in range(head.num_clusters):
        c = head.state.centres[j]
        h = x - c
        for w in head.encoder:
            h = h @ (w[j] if w.dim() == 3 else w)
        z = h
        for w in head.decoder:
            h = h @ (w[j] if w.dim() == 3 else w)
        out.append((((h - (t - c)) ** 2).mean(dim=1), (z**2).sum(dim=1), z))
    return out


def ready_head(arch: str, d: int = 5, c: int = 3, n: int = 12, seed: int = 0):
    torch.manual_seed(seed)
    head = TensorizedAE(arch, (d,), c, lam=0.1)
    x, t = torch.randn(n, d), torch.randn(n, d)
    head.init_clusters(x, targets=t)
    return head, x, t


@pytest.mark.parametrize("arch", ["tae1", "tae2", "ptae"])
def test_batched_clusters_match_a_naive_loop_in_value_and_gradient(arch):
    head, x, t = ready_head(arch)
    weights = torch.rand(len(x), head.num_clusters)  # weigh every (sample, cluster) so every slice gets a gradient

    batched = head.per_cluster_loss(x, t)
    (batched * weights).sum().backward()
    grads = [p.grad.clone() for p in head.parameters()]
    head.zero_grad()

    naive = torch.stack([mse + 0.1 * pen for mse, pen, _ in naive_terms(head, x, t)], dim=1)
    (naive * weights).sum().backward()
    torch.testing.assert_close(batched, naive)
    for g, p in zip(grads, head.parameters(), strict=True):
        torch.testing.assert_close(g, p.grad)
        assert p.grad.abs().sum() > 0


@pytest.mark.parametrize("arch", ["tae1", "ptae"])
def test_forward_averages_each_samples_loss_under_its_stored_cluster(arch):
    head, x, t = ready_head(arch)
    head.state.assignment = torch.arange(len(x)) % head.num_clusters
    index = torch.tensor([7, 2, 5, 11])
    out = head(x[index], torch.full((4,), -1), index=index, targets=t[index])
    per = naive_terms(head, x[index], t[index])
    loss_i = [
        per[int(head.state.assignment[i])][0][k] + 0.1 * per[int(head.state.assignment[i])][1][k]
        for k, i in enumerate(index)
    ]
    torch.testing.assert_close(out["loss"], torch.stack(loss_i).mean())
    torch.testing.assert_close(out["loss"], out["recon"] + 0.1 * out["reg"])


def test_assign_is_the_argmin_of_the_per_cluster_losses_and_embed_follows_it():
    head, x, t = ready_head("tae2", n=40)
    per = naive_terms(head, x, x)
    losses = torch.stack([mse + 0.1 * pen for mse, pen, _ in per], dim=1)
    expected = losses.argmin(dim=1)
    assert torch.equal(head.assign(x), expected)
    assert len(expected.unique()) > 1  # the rule is exercised, not a constant
    z = torch.stack([per[int(j)][2][i] for i, j in enumerate(expected)])
    torch.testing.assert_close(head.embed(x), z)
    assert head.embed(x).shape == (40, 1)


def test_lloyd_step_moves_a_misassigned_point_and_recentres():
    # With all weights zero the reconstruction is 0, so l_j(x) = mean((x - c_j)^2): the Lloyd step of k-means.
    a = torch.tensor([[0.0, 0.0], [1.0, 0.0], [0.0, 1.0]])
    b = torch.tensor([[10.0, 10.0], [11.0, 10.0], [10.0, 11.0]])
    x = torch.cat([a, b])
    head = TensorizedAE("tae1", (2,), 2, lam=0.1)
    with torch.no_grad():
        for p in head.parameters():
            p.zero_()
    head.state.assignment = torch.tensor([0, 0, 0, 1, 1, 0])  # the last point of b sits in cluster 0
    head.state.centres = head.state.cluster_means(x, head.state.assignment, torch.zeros(2, 2))
    head.update_clusters(x)
    assert head.state.assignment.tolist() == [0, 0, 0, 1, 1, 1]
    torch.testing.assert_close(head.state.centres, torch.stack([a.mean(0), b.mean(0)]))


def test_init_clusters_is_seeded_kmeanspp_with_mean_centres_on_the_targets():
    x = torch.cat([torch.randn(20, 3), torch.randn(20, 3) + 8])
    first, second = TensorizedAE("ptae", (3,), 2), TensorizedAE("ptae", (3,), 2)
    first.init_clusters(x + 100, targets=x)  # the authors seed and centre on the targets (clean points)
    second.init_clusters(x)
    assert torch.equal(first.state.assignment, second.state.assignment)
    assert adjusted_rand_score(first.state.assignment, [0] * 20 + [1] * 20) == 1.0
    for j in range(2):
        torch.testing.assert_close(first.state.centres[j], x[first.state.assignment == j].mean(0))


def test_head_casts_and_saves_like_any_module():
    head, x, t = ready_head("tae2")
    before = head.per_cluster_loss(x, t)
    head.double().cpu()  # Lightning moves the module at setup and teardown
    assert head.state.centres.dtype == torch.float64
    torch.testing.assert_close(head.per_cluster_loss(x.double(), t.double()).float(), before)
    twin, _, _ = ready_head("tae2", seed=1)  # same shapes, other weights and assignment
    twin.double().load_state_dict(head.state_dict())
    assert torch.equal(twin.state.assignment, head.state.assignment)
    torch.testing.assert_close(
        twin.per_cluster_loss(x.double(), t.double()), head.per_cluster_loss(x.double(), t.double())
    )


def test_errors():
    with pytest.raises(ValueError, match="num_classes must be >= 2"):
        TensorizedAE("ptae", (5,), 1)
    with pytest.raises(ValueError, match="lam must be >= 0"):
        TensorizedAE("tae1", (5,), 2, lam=-0.1)
    with pytest.raises(ValueError, match="arch must be one of tae1, tae2, ptae"):
        TensorizedAE("ae1", (5,), 2)
    with pytest.raises(ValueError, match="arch must be one of ae1, ae2, ae3"):
        LinearAE("ptae", (5,), 2)
    with pytest.raises(ValueError, match="lam must be >= 0"):
        LinearAE("ae1", (5,), 2, lam=-1.0)
    with pytest.raises(RuntimeError, match="init_clusters"):
        TensorizedAE("tae1", (5,), 2)(torch.randn(3, 5), torch.zeros(3, dtype=torch.long))


@pytest.mark.parametrize("arch,width", [("ae1", 1), ("ae2", 1), ("ae3", 3)])
def test_linear_ae_loss_and_embedding(arch, width):
    torch.manual_seed(0)
    head = LinearAE(arch, (5,), 3, lam=0.5)
    x, t = torch.randn(8, 5), torch.randn(8, 5)
    z = x
    for layer in head.encoder:
        z = z @ layer.weight.T
    recon = z
    for layer in head.decoder:
        recon = recon @ layer.weight.T
    out = head(x, torch.zeros(8, dtype=torch.long), targets=t)
    torch.testing.assert_close(out["loss"], F.mse_loss(recon, t) + 0.5 * (z**2).sum(1).mean())
    torch.testing.assert_close(head.embed(x), z)
    assert z.shape == (8, width) and all(layer.bias is None for layer in [*head.encoder, *head.decoder])
    torch.testing.assert_close(head(x, None)["recon"], F.mse_loss(recon, x))  # no targets: reconstruct x


def test_ptae_full_batch_training_clusters_parallel_lines():
    """Plain torch like the authors: per epoch, one full-batch Adam step then a Lloyd step (100 epochs)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # tiny tensors: thread hand-offs would cost more than the arithmetic
    try:
        split = read_synthetic("parallel_lines")["train"]
        x, y = split["inputs"], split["labels"]
        torch.manual_seed(0)
        head = head_from_config("ptae", 5, 2)
        head.init_clusters(x)
        start = adjusted_rand_score(y, head.state.assignment)
        optimizer = torch.optim.Adam(head.parameters(), lr=0.1)  # lr from the authors' sweep {0.001, 0.01, 0.1}
        index = torch.arange(len(x))
        for _ in range(100):
            optimizer.zero_grad()
            head(x, y, index=index)["loss"].backward()
            optimizer.step()
            head.update_clusters(x)
    finally:
        torch.set_num_threads(threads)
    assert start < 0.1  # k-means++ alone cannot separate the parallel lines
    assert adjusted_rand_score(y, head.state.assignment) > 0.9
    assert adjusted_rand_score(y, head.assign(x)) > 0.9
