"""TensorizedVAE: the batched per-cluster VAEs against a naive loop over clusters and samples; one cluster against a
hand-written standard VAE."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from hydra.utils import instantiate
from omegaconf import OmegaConf
from torch.distributions import Normal, kl_divergence

from clusterable.config import CONFIG_DIR
from clusterable.heads.tvae import TensorizedVAE

CONF = Path(CONFIG_DIR)


def make_head(recon: str = "bce", d: int = 16, c: int = 3, n: int = 8, hidden=(8, 6), latent: int = 2):
    torch.manual_seed(0)
    head = TensorizedVAE([d], c, hidden=hidden, latent_dim=latent, kl_weight=0.3, recon=recon)
    x = torch.rand(n, d)
    head.init_clusters(x)
    return head, x


def naive_loss(head: TensorizedVAE, x_i: torch.Tensor, j: int, eps: torch.Tensor | None = None) -> torch.Tensor:
    """Eq. 4's per-sample loss of one point ``x_i`` (d,) under cluster j, written out layer by layer."""
    target = x_i - head.state.centres[j]
    if head.recon == "bce":
        target = torch.sigmoid(target)
    h = head.encoder(target)
    mu = F.linear(h, head.mu_weight[j].T, head.mu_bias[j])
    logvar = F.linear(h, head.logvar_weight[j].T, head.logvar_bias[j])
    z = mu if eps is None else mu + logvar.mul(0.5).exp() * eps
    out = head.decoder(F.linear(z, head.dec_weight[j].T, head.dec_bias[j]))
    if head.recon == "bce":
        p = torch.sigmoid(out)  # Bernoulli KL = BCE minus the soft target's entropy
        recon = (target * (target / p).log() + (1 - target) * ((1 - target) / (1 - p)).log()).sum()
    else:
        recon = 0.5 * ((out - target) ** 2).sum()
    kl = kl_divergence(Normal(mu, logvar.mul(0.5).exp()), Normal(0.0, 1.0)).sum()
    return recon + head.kl_weight * kl


def grads(head: TensorizedVAE, loss: torch.Tensor) -> list[torch.Tensor]:
    head.zero_grad()
    loss.backward()
    return [p.grad.clone() for p in head.parameters()]


@pytest.mark.parametrize("recon", ["bce", "mse"])
def test_per_cluster_loss_matches_loop_over_clusters_with_gradients(recon):
    head, x = make_head(recon)
    weights = torch.rand(x.shape[0], head.num_clusters)  # a generic linear functional of the (N, C) losses
    batched = head.per_cluster_loss(x)
    g_batched = grads(head, (weights * batched).sum())
    naive = torch.stack(
        [torch.stack([naive_loss(head, x[i], j) for j in range(head.num_clusters)]) for i in range(len(x))]
    )
    g_naive = grads(head, (weights * naive).sum())
    torch.testing.assert_close(batched, naive, rtol=1e-5, atol=1e-5)
    for a, b in zip(g_batched, g_naive, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize("recon", ["bce", "mse"])
def test_forward_uses_stored_assignment_and_reparameterisation(recon):
    head, x = make_head(recon)
    head.state.assignment = torch.tensor([2, 0, 1, 1, 0, 2, 2, 1])
    index = torch.tensor([3, 0, 7, 5, 1])
    torch.manual_seed(5)
    out = head(x[index], torch.full((5,), -1), index=index)
    g_batched = grads(head, out["loss"])
    torch.manual_seed(5)
    eps = torch.randn(5, head.latent_dim)  # forward's one draw
    clusters = head.state.assignment[index].tolist()
    naive = torch.stack(
        [naive_loss(head, x[i], j, eps[r]) for r, (i, j) in enumerate(zip(index, clusters, strict=True))]
    )
    g_naive = grads(head, naive.mean())
    torch.testing.assert_close(out["loss"], naive.mean(), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(out["recon"] + head.kl_weight * out["kl"], out["loss"])
    for a, b in zip(g_batched, g_naive, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-6)


def test_lloyd_step_assign_and_embed_take_the_argmin():
    head, x = make_head()
    loss = head.per_cluster_loss(x).detach()
    head.update_clusters(x)
    best = loss.argmin(dim=1)
    assert torch.equal(head.state.assignment, best)
    for j in range(head.num_clusters):
        if (best == j).any():
            torch.testing.assert_close(head.state.centres[j], x[best == j].mean(0))
    assert torch.equal(head.assign(x), head.per_cluster_loss(x).argmin(dim=1))
    _, _, mu = head.all_clusters(x)
    cluster = head.assign(x)
    torch.testing.assert_close(head.embed(x), torch.stack([mu[j, i] for i, j in enumerate(cluster.tolist())]))
    assert head.embed(x).shape == (len(x), head.latent_dim)


@pytest.mark.parametrize("recon", ["bce", "mse"])
def test_sample_shapes_reproducibility_and_uncentring(recon):
    head, _ = make_head(recon)
    samples = head.sample(4, generator=torch.Generator().manual_seed(1))
    assert samples.shape == (head.num_clusters, 4, head.input_dim)
    torch.testing.assert_close(samples, head.sample(4, generator=torch.Generator().manual_seed(1)))
    model_space = head.sample(4, generator=torch.Generator().manual_seed(1), uncentre=False)
    decoded = torch.logit(model_space) if recon == "bce" else model_space
    torch.testing.assert_close(samples, decoded + head.state.centres.unsqueeze(1), rtol=1e-4, atol=1e-4)
    if recon == "bce":
        assert model_space.min() > 0 and model_space.max() < 1


class PlainVAE(torch.nn.Module):
    """The standard VAE written by hand (the authors' ``VAE`` without tensorization, repository
    mahalakshmi-sabanayagam/cluster_specific_representation, ``src/models.py``): encoder -> mu / logvar ->
    decoder on ``x`` itself, BCE on the sigmoid output (``vae_loss``) or 1/2 ||out - x||^2."""

    def __init__(self, d: int, hidden=(8, 6), latent: int = 2):
        super().__init__()
        w = hidden[-1]
        self.encoder = torch.nn.Sequential(
            torch.nn.Linear(d, hidden[0]),
            torch.nn.LeakyReLU(0.2),
            torch.nn.Linear(hidden[0], w),
            torch.nn.LeakyReLU(0.2),
        )
        self.mu, self.logvar, self.latent = (
            torch.nn.Linear(w, latent),
            torch.nn.Linear(w, latent),
            torch.nn.Linear(latent, w),
        )
        self.decoder = torch.nn.Sequential(
            torch.nn.LeakyReLU(0.2),
            torch.nn.Linear(w, hidden[0]),
            torch.nn.LeakyReLU(0.2),
            torch.nn.Linear(hidden[0], d),
        )

    def copy_from(self, head: TensorizedVAE) -> PlainVAE:
        with torch.no_grad():
            for mine, theirs in zip(
                [*self.encoder.parameters(), *self.decoder.parameters()],
                [*head.encoder.parameters(), *head.decoder.parameters()],
                strict=True,
            ):
                mine.copy_(theirs)
            for layer, weight, bias in (
                (self.mu, head.mu_weight, head.mu_bias),
                (self.logvar, head.logvar_weight, head.logvar_bias),
                (self.latent, head.dec_weight, head.dec_bias),
            ):
                layer.weight.copy_(weight[0].T)
                layer.bias.copy_(bias[0])
        return self

    def loss(self, x: torch.Tensor, eps: torch.Tensor, recon: str, kl_weight: float) -> torch.Tensor:
        h = self.encoder(x)
        mu, logvar = self.mu(h), self.logvar(h)
        out = self.decoder(self.latent(mu + (0.5 * logvar).exp() * eps))
        if recon == "bce":
            rec = F.binary_cross_entropy(torch.sigmoid(out), x, reduction="none").sum(1)
        else:
            rec = 0.5 * (out - x).pow(2).sum(1)
        kl = -0.5 * (1 + logvar - mu.pow(2) - logvar.exp()).sum(1)
        return (rec + kl_weight * kl).mean()


@pytest.mark.parametrize("recon", ["bce", "mse"])
def test_one_cluster_is_the_standard_vae(recon):
    torch.manual_seed(0)
    d, n = 16, 8
    head = TensorizedVAE([d], 3, hidden=(8, 6), kl_weight=0.3, recon=recon, num_clusters=1)
    assert head.num_clusters == 1 and head.mu_weight.shape == (1, 6, 2)
    x = torch.rand(n, d)
    head.init_clusters(x)
    assert torch.equal(head.state.centres, torch.zeros(1, d))
    assert torch.equal(head.assign(x), torch.zeros(n).long())
    plain = PlainVAE(d).copy_from(head)
    torch.manual_seed(3)
    ours = head(x, torch.zeros(n), index=torch.arange(n))["loss"]
    torch.manual_seed(3)
    eps = torch.randn(n, 2)  # forward's one draw
    theirs = plain.loss(x, eps, recon, head.kl_weight)
    # Our Bernoulli term is BCE minus the targets' entropy H(x): a constant of the data, no gradient.
    entropy = F.binary_cross_entropy(x, x, reduction="none").sum(1).mean() if recon == "bce" else 0.0
    torch.testing.assert_close(ours, theirs - entropy, rtol=1e-5, atol=1e-5)
    head.zero_grad()
    ours.backward()
    plain.zero_grad()
    theirs.backward()
    expected = {
        **{f"encoder.{k}": p.grad for k, p in plain.encoder.named_parameters()},
        **{f"decoder.{k}": p.grad for k, p in plain.decoder.named_parameters()},
        "mu_weight": plain.mu.weight.grad.T[None],
        "mu_bias": plain.mu.bias.grad[None],
        "logvar_weight": plain.logvar.weight.grad.T[None],
        "logvar_bias": plain.logvar.bias.grad[None],
        "dec_weight": plain.latent.weight.grad.T[None],
        "dec_bias": plain.latent.bias.grad[None],
    }
    mine = dict(head.named_parameters())
    assert set(mine) == set(expected)
    for name, want in expected.items():
        torch.testing.assert_close(mine[name].grad, want, rtol=1e-4, atol=1e-6, msg=name)


@pytest.mark.parametrize("recon", ["bce", "mse"])
def test_one_cluster_reads_and_samples_the_inputs_themselves(recon):
    torch.manual_seed(0)
    head = TensorizedVAE([16], 3, hidden=(8, 6), recon=recon, num_clusters=1)
    x = torch.rand(8, 16)
    head.init_clusters(x)
    head.update_clusters(x)  # nothing to move: one cluster, its centre at the origin
    assert torch.equal(head.state.assignment, torch.zeros(8).long())
    assert torch.equal(head.state.centres, torch.zeros(1, 16))
    assert torch.equal(head._model_space(x, head.state.centres), x)  # no centring, no sigmoid
    g = torch.Generator().manual_seed(1)
    samples = head.sample(4, generator=g)
    torch.testing.assert_close(samples, head.sample(4, torch.Generator().manual_seed(1), uncentre=False))
    if recon == "bce":
        assert samples.min() > 0 and samples.max() < 1
        with pytest.raises(ValueError, match=r"inputs must lie in \[0, 1\] for the standard VAE"):
            head(x * 2, torch.zeros(8), index=torch.arange(8))
    else:
        head(x * 2, torch.zeros(8), index=torch.arange(8))  # MSE: any real inputs


def test_errors():
    with pytest.raises(ValueError, match="num_clusters must be >= 1"):
        TensorizedVAE([16], 3, num_clusters=0)
    with pytest.raises(ValueError, match="recon"):
        TensorizedVAE([16], 3, recon="l1")
    with pytest.raises(ValueError, match="kl_weight"):
        TensorizedVAE([16], 3, kl_weight=-0.1)
    head = TensorizedVAE([16], 3, hidden=(8, 6))
    with pytest.raises(RuntimeError, match="init_clusters"):
        head(torch.rand(4, 16), torch.zeros(4, dtype=torch.long), index=torch.arange(4))
    head.init_clusters(torch.rand(8, 16))
    with pytest.raises(ValueError, match="16 features"):
        head.per_cluster_loss(torch.rand(4, 15))


def test_yaml_instantiates_the_papers_network():
    head = instantiate(OmegaConf.load(CONF / "loss" / "tvae.yaml"), num_classes=3, input_shape=[784])
    assert isinstance(head, TensorizedVAE)
    assert head.mu_weight.shape == (3, 200, 2) and head.dec_weight.shape == (3, 2, 200)
    assert [m.out_features for m in head.encoder if isinstance(m, torch.nn.Linear)] == [400, 200]
    assert [m.out_features for m in head.decoder if isinstance(m, torch.nn.Linear)] == [400, 784]
    standard = instantiate(
        OmegaConf.load(CONF / "loss" / "tvae.yaml"), num_classes=3, input_shape=[784], num_clusters=1
    )
    assert standard.num_clusters == 1 and standard.mu_weight.shape == (1, 200, 2)
