"""TensorizedRBM: free energies, Gibbs sampling and the CD-k surrogate against direct computations."""

from __future__ import annotations

import itertools
import math
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from hydra.utils import instantiate
from omegaconf import OmegaConf

from clusterable.config import CONFIG_DIR
from clusterable.heads.trbm import TensorizedRBM

CONF = Path(CONFIG_DIR)


def random_rbm(d: int, h: int, c: int, n: int, k: int, **kw) -> tuple[TensorizedRBM, torch.Tensor]:
    """An RBM stack with non-trivial N(0, 1) weights and biases, its clusters initialised on inputs in [0, 1]."""
    torch.manual_seed(0)
    rbm = TensorizedRBM([d], c, hidden=h, k=k, **kw)
    with torch.no_grad():
        rbm.weight.normal_(0, 1)
        rbm.visible_bias.normal_(0, 1)
        rbm.hidden_bias.normal_(0, 1)
    v = torch.rand(n, d)
    rbm.init_clusters(v)
    return rbm, v


def make_rbm(d: int = 4, h: int = 3, c: int = 2, n: int = 6, k: int = 1):
    """A tiny tensorized RBM with a mixed assignment."""
    rbm, v = random_rbm(d, h, c, n, k)
    rbm.state.assignment = torch.arange(n) % c
    return rbm, v


def energy(rbm: TensorizedRBM, v: torch.Tensor, h: torch.Tensor, j: int) -> torch.Tensor:
    """E_j(v, h) = -v.b_j - h.c_j - v^T W_j h, term by term."""
    w, b, c = rbm.weight[j], rbm.visible_bias[j], rbm.hidden_bias[j]
    return -(v * b).sum() - (h * c).sum() - sum(v[a] * w[a, k] * h[k] for a in range(len(v)) for k in range(len(h)))


@torch.no_grad()
def test_free_energy_matches_definition_and_brute_force_marginal():
    rbm, v = make_rbm()
    free = rbm.free_energy(v)
    assert free.shape == (len(v), rbm.num_clusters)
    states = [torch.tensor(s, dtype=torch.float32) for s in itertools.product([0, 1], repeat=rbm.hidden)]
    for i in range(len(v)):
        for j in range(rbm.num_clusters):
            w, b, c = rbm.weight[j], rbm.visible_bias[j], rbm.hidden_bias[j]
            definition = -(b @ v[i]) - sum(math.log1p(math.exp(c[k] + w[:, k] @ v[i])) for k in range(rbm.hidden))
            brute = -torch.logsumexp(torch.stack([-energy(rbm, v[i], h, j) for h in states]), dim=0)
            assert free[i, j].item() == pytest.approx(float(definition), rel=1e-5, abs=1e-5)
            assert free[i, j].item() == pytest.approx(brute.item(), rel=1e-5, abs=1e-5)


def test_gibbs_matches_per_sample_loop_with_the_same_draws():
    rbm, v = make_rbm(k=2)
    cluster = rbm.state.assignment
    batched = rbm.gibbs(v, cluster, generator=torch.Generator().manual_seed(3))
    g = torch.Generator().manual_seed(3)
    vk = v.clone()
    for _ in range(2):  # replay: the same (N, h) then (N, d) uniforms, each row through its own RBM
        u_h = torch.rand(len(v), rbm.hidden, generator=g)
        h = torch.stack(
            [
                (u_h[i] < torch.sigmoid(rbm.hidden_bias[j] + vk[i] @ rbm.weight[j])).float()
                for i, j in enumerate(cluster.tolist())
            ]
        )
        u_v = torch.rand(len(v), rbm.input_dim, generator=g)
        vk = torch.stack(
            [
                (u_v[i] < torch.sigmoid(rbm.visible_bias[j] + rbm.weight[j] @ h[i])).float()
                for i, j in enumerate(cluster.tolist())
            ]
        )
    assert torch.equal(batched, vk.detach())
    assert set(batched.unique().tolist()) <= {0.0, 1.0}


def test_cd1_surrogate_gradient_is_the_hand_cd1_update():
    rbm, v = make_rbm(k=1)
    index = torch.tensor([0, 3, 4, 1])
    cluster = rbm.state.assignment[index]
    torch.manual_seed(11)
    out = rbm(v[index], torch.full((4,), -1), index=index)
    rbm.zero_grad()
    out["loss"].backward()
    torch.manual_seed(11)
    v_data, v_model = v[index], rbm.gibbs(v[index], cluster)  # forward's chain, replayed from the same seed
    expected_w, expected_b, expected_c = (torch.zeros_like(p) for p in rbm.parameters())
    for r, j in enumerate(cluster.tolist()):
        ph_data = torch.sigmoid(rbm.hidden_bias[j] + v_data[r] @ rbm.weight[j]).detach()
        ph_model = torch.sigmoid(rbm.hidden_bias[j] + v_model[r] @ rbm.weight[j]).detach()
        # CD-1 ascent direction <v h>_data - <v h>_model; the surrogate's gradient is its negative.
        expected_w[j] -= (torch.outer(v_data[r], ph_data) - torch.outer(v_model[r], ph_model)) / len(index)
        expected_b[j] -= (v_data[r] - v_model[r]) / len(index)
        expected_c[j] -= (ph_data - ph_model) / len(index)
    torch.testing.assert_close(rbm.weight.grad, expected_w)
    torch.testing.assert_close(rbm.visible_bias.grad, expected_b)
    torch.testing.assert_close(rbm.hidden_bias.grad, expected_c)
    free = rbm.free_energy(torch.cat([v_data, v_model])).detach()
    rows = torch.arange(len(index))
    expected_loss = (free[rows, cluster] - free[rows + len(index), cluster]).mean()
    torch.testing.assert_close(out["loss"].detach(), expected_loss)


def test_assignment_embedding_and_reconstruction():
    rbm, v = make_rbm()
    free = rbm.free_energy(v)
    rbm.update_clusters(v)
    best = free.argmin(dim=1)
    assert torch.equal(rbm.state.assignment, best) and torch.equal(rbm.assign(v), best)
    for j in range(rbm.num_clusters):
        if (best == j).any():
            torch.testing.assert_close(rbm.state.centres[j], v[best == j].mean(0))
    ph = torch.stack([torch.sigmoid(rbm.hidden_bias[j] + v[i] @ rbm.weight[j]) for i, j in enumerate(best.tolist())])
    torch.testing.assert_close(rbm.embed(v), ph)
    recon = torch.sigmoid(rbm.visible_bias[1] + torch.sigmoid(rbm.hidden_bias[1] + v @ rbm.weight[1]) @ rbm.weight[1].T)
    torch.testing.assert_close(rbm.reconstruct(v, cluster=1), recon)
    assert rbm.reconstruct(v).shape == v.shape


def test_errors():
    rbm, v = make_rbm()
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        rbm.free_energy(v * 255)
    with pytest.raises(ValueError, match="cluster must be in"):
        rbm.reconstruct(v, cluster=2)
    with pytest.raises(ValueError, match="k must be"):
        TensorizedRBM([4], 2, k=0)
    with pytest.raises(RuntimeError, match="init_clusters"):
        TensorizedRBM([4], 2, hidden=3)(v, torch.zeros(len(v), dtype=torch.long), index=torch.arange(len(v)))


def test_yaml_instantiates_the_papers_rbm():
    head = instantiate(OmegaConf.load(CONF / "loss" / "trbm.yaml"), num_classes=2, input_shape=[784])
    assert isinstance(head, TensorizedRBM)
    assert head.weight.shape == (2, 784, 500) and head.visible_bias.shape == (2, 784) and head.k == 1
    assert not head.standard and not head.binarize  # num_clusters, binarize: null -> the TRBM on grey values


# ---- one cluster: the standard RBM (the authors' train_RBM) through the same code -------------------------------


def standard_rbm(d: int = 5, h: int = 3, n: int = 7, k: int = 1, **kw):
    """The one-cluster (standard) RBM."""
    return random_rbm(d, h, 2, n, k, num_clusters=1, **kw)


@pytest.mark.parametrize("k", [1, 2])
def test_one_cluster_head_is_the_standard_rbm_same_loss_and_cd_gradient(k):
    rbm, x = standard_rbm(k=k)
    assert rbm.num_clusters == 1 and rbm.standard and rbm.binarize  # the authors' train_RBM binarises
    assert torch.equal(rbm.state.assignment, torch.zeros(len(x), dtype=torch.long))
    assert not rbm.state.centres.any()  # no centring: the standard RBM reads the raw inputs
    torch.manual_seed(3)
    out = rbm(x, torch.full((len(x),), -1), index=torch.arange(len(x)))
    rbm.zero_grad()
    out["loss"].backward()

    # The hand-written standard RBM, laid out as the authors' RBM: W (h, d), visible bias b, hidden bias c.
    w = rbm.weight[0].T.detach().clone().requires_grad_(True)
    b = rbm.visible_bias[0].detach().clone().requires_grad_(True)
    c = rbm.hidden_bias[0].detach().clone().requires_grad_(True)

    def free_energy(v):  # F(v) = -v.b - sum_j log(1 + exp(c_j + (W v)_j))
        return -(v @ b) - F.softplus(v @ w.T + c).sum(1)

    torch.manual_seed(3)  # the same uniforms: the data's Bernoulli draw, then the chain's h and v
    v_data = (torch.rand(x.shape) < x).float()  # train_RBM: data.bernoulli()
    v_model = v_data
    with torch.no_grad():
        for _ in range(k):
            hid = (torch.rand(len(x), rbm.hidden) < torch.sigmoid(v_model @ w.T + c)).float()
            v_model = (torch.rand(x.shape) < torch.sigmoid(hid @ w + b)).float()
    loss = free_energy(v_data).mean() - free_energy(v_model).mean()
    loss.backward()
    torch.testing.assert_close(out["loss"], loss)
    torch.testing.assert_close(rbm.weight.grad[0], w.grad.T)
    torch.testing.assert_close(rbm.visible_bias.grad[0], b.grad)
    torch.testing.assert_close(rbm.hidden_bias.grad[0], c.grad)
    # ... which is the CD-k update: -(<v p(h|v)>_data - <v p(h|v)>_model) / n, likewise for the biases.
    with torch.no_grad():
        ph_data, ph_model = torch.sigmoid(v_data @ w.T + c), torch.sigmoid(v_model @ w.T + c)
        cd_w = -(v_data.T @ ph_data - v_model.T @ ph_model) / len(x)
    torch.testing.assert_close(rbm.weight.grad[0], cd_w)
    torch.testing.assert_close(rbm.visible_bias.grad[0], -(v_data - v_model).mean(0))
    torch.testing.assert_close(rbm.hidden_bias.grad[0], -(ph_data - ph_model).mean(0))


def test_binarize_defaults_to_the_authors_choice_and_can_be_set():
    assert TensorizedRBM([4], 2, hidden=3).binarize is False  # tensorised_rbm_loss: the grey values
    assert TensorizedRBM([4], 2, hidden=3, num_clusters=1).binarize is True  # train_RBM: data.bernoulli()
    assert TensorizedRBM([4], 2, hidden=3, binarize=True).binarize is True
    rbm, x = standard_rbm(binarize=False)  # grey values: the data term is deterministic
    losses = [rbm(x, torch.zeros(len(x)), index=torch.arange(len(x)))["fe_data"] for _ in range(2)]
    torch.testing.assert_close(losses[0], losses[1])
    torch.testing.assert_close(losses[0], rbm.free_energy(x)[:, 0].mean())
    with pytest.raises(ValueError, match="num_clusters must be >= 1"):
        TensorizedRBM([4], 2, num_clusters=0)


@torch.no_grad()
def test_one_cluster_assignment_embedding_and_reconstruction():
    rbm, x = standard_rbm()
    rbm.update_clusters(x)
    assert torch.equal(rbm.state.assignment, torch.zeros(len(x), dtype=torch.long))
    assert not rbm.state.centres.any()
    assert torch.equal(rbm.assign(x), torch.zeros(len(x), dtype=torch.long))
    ph = torch.sigmoid(rbm.hidden_bias[0] + x @ rbm.weight[0])
    torch.testing.assert_close(rbm.embed(x), ph)
    torch.testing.assert_close(rbm.reconstruct(x), torch.sigmoid(rbm.visible_bias[0] + ph @ rbm.weight[0].T))
    with pytest.raises(ValueError, match=r"cluster must be in \[0, 0\]"):
        rbm.reconstruct(x, cluster=1)
