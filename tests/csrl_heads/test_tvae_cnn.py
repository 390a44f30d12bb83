"""TensorizedConvVAE: the authors' CNN VAE layers, the batched per-cluster VAEs against a loop over clusters (losses
and gradients), one cluster against a hand-written standard CNN VAE, the contracts and the TVAE evaluator."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from hydra.utils import instantiate
from omegaconf import OmegaConf
from torch import nn

from clusterable.config import CONFIG_DIR
from clusterable.contracts import (
    ClusteringHead,
    ContractError,
    EvalContext,
    Head,
    ReconstructingHead,
    RepresentingHead,
    require,
)
from clusterable.evaluation.csrl import TVAELatents
from clusterable.heads.tvae_cnn import TensorizedConvVAE

CONF = Path(CONFIG_DIR)
SHAPE = [
    1,
    12,
    12,
]  # 12 -> 6 -> 3 -> 2 and back: both output paddings (0 for the odd side 3, 1 for the even ones)


def make_head(recon: str = "bce", c: int = 3, n: int = 7, num_clusters: int | None = None):
    torch.manual_seed(0)
    head = TensorizedConvVAE(
        SHAPE, c, channels=(3, 4, 5), latent_dim=2, kl_weight=0.3, recon=recon, num_clusters=num_clusters
    )
    x = torch.rand(n, 144)
    head.init_clusters(x)
    return head, x


def naive_loss(head: TensorizedConvVAE, x_i: torch.Tensor, j: int, eps: torch.Tensor | None = None) -> torch.Tensor:
    """Eq. 4's loss of one point ``x_i`` (d,) under cluster j, one image through the layers at a time."""
    target = x_i - head.state.centres[j]
    if head.recon == "bce":
        target = torch.sigmoid(target)
    h = head.encoder(target.view(1, *head.image_shape))[0]
    mu = F.linear(h, head.mu_weight[j].T, head.mu_bias[j])
    logvar = F.linear(h, head.logvar_weight[j].T, head.logvar_bias[j])
    z = mu if eps is None else mu + logvar.mul(0.5).exp() * eps
    features = F.linear(z, head.dec_weight[j].T, head.dec_bias[j])
    out = head.decoder(features.view(1, *head.feature_shape)).flatten()
    if head.recon == "bce":
        p = torch.sigmoid(out)  # Bernoulli KL = BCE minus the soft target's entropy
        recon = (target * (target / p).log() + (1 - target) * ((1 - target) / (1 - p)).log()).sum()
    else:
        recon = 0.5 * ((out - target) ** 2).sum()
    kl = -0.5 * (1 + logvar - mu.pow(2) - logvar.exp()).sum()
    return recon + head.kl_weight * kl


def grads(head: nn.Module, loss: torch.Tensor) -> dict[str, torch.Tensor]:
    head.zero_grad()
    loss.backward()
    return {name: p.grad.clone() for name, p in head.named_parameters()}


def assert_same_grads(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> None:
    assert set(a) == set(b)
    for name in a:
        torch.testing.assert_close(a[name], b[name], rtol=1e-4, atol=1e-6, msg=name)


def test_the_authors_layers_on_32x32_images():
    cfg = OmegaConf.load(CONF / "loss" / "tvae_cnn.yaml")
    head = instantiate(cfg, num_classes=3, input_shape=[1024])
    assert isinstance(head, TensorizedConvVAE) and head.image_shape == (1, 32, 32)
    convs = [m for m in head.encoder if isinstance(m, nn.Conv2d)]
    assert [(m.in_channels, m.out_channels) for m in convs] == [(1, 32), (32, 64), (64, 128)]
    assert all(m.kernel_size == (3, 3) and m.stride == (2, 2) and m.padding == (1, 1) for m in convs)
    deconvs = [m for m in head.decoder if isinstance(m, nn.ConvTranspose2d)]
    assert [(m.in_channels, m.out_channels, m.output_padding) for m in deconvs] == [
        (128, 64, (1, 1)),
        (64, 32, (1, 1)),
        (32, 1, (1, 1)),
    ]
    assert head.feature_shape == (128, 4, 4)
    assert head.mu_weight.shape == (3, 2048, 2) and head.dec_weight.shape == (3, 2, 2048)
    # The authors' VAE_CNN with tensorization=3 has 228,237 parameters (92,672 + 43,020 + 92,545).
    assert sum(p.numel() for p in head.parameters()) == 228_237
    standard = instantiate(cfg, num_classes=3, input_shape=[1, 32, 32], num_clusters=1)
    assert standard.num_clusters == 1 and standard.mu_weight.shape == (1, 2048, 2)


@pytest.mark.parametrize("shape", [[1024], [1, 28, 28], [16], [1, 5, 7]])
def test_output_shapes(shape):
    torch.manual_seed(0)
    head = TensorizedConvVAE(shape, 3, channels=(4, 6, 8))
    d, n = int(np.prod(shape)), 6
    x = torch.rand(n, d)
    head.init_clusters(x)
    out = head(x, torch.zeros(n), index=torch.arange(n))
    assert set(out) == set(head.loss_parts) and all(v.ndim == 0 and torch.isfinite(v) for v in out.values())
    recon, kl, mu = head.all_clusters(x)
    assert recon.shape == kl.shape == (n, 3) and mu.shape == (3, n, 2)
    assert head.per_cluster_loss(x).shape == (n, 3)
    assert head.embed(x).shape == (n, 2) and head.assign(x).shape == (n,)
    assert head.sample(4).shape == (3, 4, d)
    assert head.decode_shared(head.encode_shared(x.expand(2, n, d))).shape == (2, n, d)  # any leading dims


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
    assert_same_grads(g_batched, g_naive)


@pytest.mark.parametrize("recon", ["bce", "mse"])
def test_forward_uses_stored_assignment_and_reparameterisation(recon):
    head, x = make_head(recon)
    head.state.assignment = torch.tensor([2, 0, 1, 1, 0, 2, 2])
    index = torch.tensor([3, 0, 6, 5, 1])
    torch.manual_seed(5)
    out = head(x[index], torch.full((5,), -1), index=index)
    g_batched = grads(head, out["loss"])
    torch.manual_seed(5)
    eps = torch.randn(5, head.latent_dim)  # forward's one draw
    clusters = head.state.assignment[index].tolist()
    naive = torch.stack(
        [naive_loss(head, x[i], j, eps[r]) for r, (i, j) in enumerate(zip(index, clusters, strict=True))]
    )
    torch.testing.assert_close(out["loss"], naive.mean(), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(out["recon"] + head.kl_weight * out["kl"], out["loss"])
    assert_same_grads(g_batched, grads(head, naive.mean()))


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
    torch.testing.assert_close(head.embed(x), mu[head.assign(x), torch.arange(len(x))])


class PlainConvVAE(nn.Module):
    """The standard CNN VAE written by hand with the authors' layers (``VAE_CNN`` without tensorization,
    repository mahalakshmi-sabanayagam/cluster_specific_representation, ``src/models.py``), on 32 x 32 images."""

    def __init__(self):
        super().__init__()
        self.encoder = nn.Sequential(
            nn.Conv2d(1, 32, 3, stride=2, padding=1),
            nn.ReLU(),
            nn.Conv2d(32, 64, 3, stride=2, padding=1),
            nn.ReLU(),
            nn.Conv2d(64, 128, 3, stride=2, padding=1),
            nn.ReLU(),
            nn.Flatten(),
        )
        self.mean, self.logvar, self.decoder_fc = nn.Linear(2048, 2), nn.Linear(2048, 2), nn.Linear(2, 2048)
        self.decoder = nn.Sequential(
            nn.ConvTranspose2d(128, 64, 3, stride=2, padding=1, output_padding=1),
            nn.ReLU(),
            nn.ConvTranspose2d(64, 32, 3, stride=2, padding=1, output_padding=1),
            nn.ReLU(),
            nn.ConvTranspose2d(32, 1, 3, stride=2, padding=1, output_padding=1),
        )

    def copy_from(self, head: TensorizedConvVAE) -> PlainConvVAE:
        self.encoder.load_state_dict(head.encoder.state_dict())
        self.decoder.load_state_dict(head.decoder.state_dict())
        with torch.no_grad():
            for layer, weight, bias in (
                (self.mean, head.mu_weight, head.mu_bias),
                (self.logvar, head.logvar_weight, head.logvar_bias),
                (self.decoder_fc, head.dec_weight, head.dec_bias),
            ):
                layer.weight.copy_(weight[0].T)
                layer.bias.copy_(bias[0])
        return self

    def loss(self, x: torch.Tensor, eps: torch.Tensor, recon: str, kl_weight: float) -> torch.Tensor:
        """x (N, 1, 32, 32) itself is the input and the target."""
        h = self.encoder(x)
        mu, logvar = self.mean(h), self.logvar(h)
        out = self.decoder(self.decoder_fc(mu + (0.5 * logvar).exp() * eps).view(-1, 128, 4, 4))
        if recon == "bce":
            rec = F.binary_cross_entropy(torch.sigmoid(out), x, reduction="none").flatten(1).sum(1)
        else:
            rec = 0.5 * (out - x).pow(2).flatten(1).sum(1)
        kl = -0.5 * (1 + logvar - mu.pow(2) - logvar.exp()).sum(1)
        return (rec + kl_weight * kl).mean()


@pytest.mark.parametrize("recon", ["bce", "mse"])
def test_one_cluster_is_the_standard_cnn_vae(recon):
    torch.manual_seed(0)
    n = 4
    head = TensorizedConvVAE([1024], 3, kl_weight=0.3, recon=recon, num_clusters=1)
    x = torch.rand(n, 1024)
    head.init_clusters(x)
    assert torch.equal(head.state.centres, torch.zeros(1, 1024))
    plain = PlainConvVAE().copy_from(head)
    torch.manual_seed(3)
    ours = head(x, torch.zeros(n), index=torch.arange(n))["loss"]
    torch.manual_seed(3)
    eps = torch.randn(n, 2)  # forward's one draw
    theirs = plain.loss(x.view(n, 1, 32, 32), eps, recon, head.kl_weight)
    # Our Bernoulli term is BCE minus the targets' entropy H(x): a constant of the data, no gradient.
    entropy = F.binary_cross_entropy(x, x, reduction="none").sum(1).mean() if recon == "bce" else 0.0
    torch.testing.assert_close(ours, theirs - entropy, rtol=1e-5, atol=1e-4)
    g_ours = grads(head, ours)
    g_plain = grads(plain, theirs)
    expected = {
        **{k: v for k, v in g_plain.items() if k.startswith(("encoder.", "decoder."))},
        "mu_weight": g_plain["mean.weight"].T[None],
        "mu_bias": g_plain["mean.bias"][None],
        "logvar_weight": g_plain["logvar.weight"].T[None],
        "logvar_bias": g_plain["logvar.bias"][None],
        "dec_weight": g_plain["decoder_fc.weight"].T[None],
        "dec_bias": g_plain["decoder_fc.bias"][None],
    }
    assert_same_grads(g_ours, expected)


def test_contracts_and_the_tvae_evaluator(tmp_path: Path):
    head, x = make_head(c=2, n=8)
    for contract in (Head, ClusteringHead, RepresentingHead):
        require(head, contract, "loss=tvae_cnn")
    with pytest.raises(ContractError):
        require(head, ReconstructingHead, "loss=tvae_cnn")
    labels = torch.arange(8) % 2
    mu = head.embed(x)
    ctx = EvalContext(
        "train",
        {"inputs": x, "labels": labels},
        head,
        encoder_output=x,
        train_embeddings=mu,
        train_labels=labels,
        run_dir=tmp_path,
    )
    out = TVAELatents(samples_per_cluster=4)(mu, labels, ctx)
    assert 0.5 <= out["tvae/purity"] <= 1
    assert np.load(tmp_path / "tvae_samples.npz")["images"].shape == (2, 4, 144)
    assert (tmp_path / "tvae_latent_train.png").is_file() and (tmp_path / "tvae_samples.png").is_file()


def test_errors():
    with pytest.raises(ValueError, match="channels must be a non-empty list"):
        TensorizedConvVAE([1024], 3, channels=[])
    with pytest.raises(ValueError, match="input_shape must be"):
        TensorizedConvVAE([1000], 3)
    with pytest.raises(ValueError, match="num_clusters must be >= 1"):
        TensorizedConvVAE([1024], 3, num_clusters=0)
    with pytest.raises(ValueError, match="num_classes must be >= 2"):
        TensorizedConvVAE([1024], 1)
    head, _ = make_head()
    with pytest.raises(ValueError, match="144 features"):
        head.per_cluster_loss(torch.rand(2, 100))
