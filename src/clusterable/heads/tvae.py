"""Tensorized variational autoencoder TVAE (Sabanayagam et al. 2024, §IV, eqs. 4-6), and its standard VAE.

One VAE per cluster j that share most of their weights: a shared encoder g_Omega, per-cluster heads g^mu_j,
g^sigma_j (width -> latent) and f_Phi_j (latent -> width), and a shared decoder f_Theta. Cluster j sees the point
centred on its own centre, ``x~_j = x - c_j`` (passed through a sigmoid in the BCE case, as the authors' code
does, so that it is a valid Bernoulli target). Per-cluster heads are stacked tensors (C, in, out) applied with
batched matmuls (``heads.stacked``): no loop over clusters anywhere. Pair these heads with the identity encoder
(``src/clusterable/conf/model/identity.yaml``): the head owns the whole network.

``ClusterSpecificVAE`` is everything but the shared trunk (losses, sampling, the clustering contract); the trunks
are the MLP of ``TensorizedVAE`` here (the authors' ``VAE``) and the convolutional one of
``heads.tvae_cnn.TensorizedConvVAE`` (their ``VAE_CNN``, the paper's Fig. 10). With ``num_clusters=1`` either is
the authors' standard VAE (the paper's left column of Figs. 3, 9-11) through the same code: one model, its centre
at the origin, and the input itself as the encoder's input and the reconstruction target (no centring, no
sigmoid), as the authors' ``train_VAE`` feeds it. Authors' code: repository
``mahalakshmi-sabanayagam/cluster_specific_representation``, ``src/models.py`` (``VAE``, ``VAE_CNN``),
``src/loss.py`` (``vae_loss``, ``tensorised_vae_loss``), ``src/train.py`` (``train_VAE``, ``train_tensorVAE``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal, get_args

import torch
import torch.nn.functional as F
from torch import nn

from clusterable import checks
from clusterable.heads.cluster_state import CHUNK, ClusterSpecificHead
from clusterable.heads.stacked import apply_all, pick, stacked_linear

Recon = Literal["bce", "mse"]
RECONS: tuple[str, ...] = get_args(Recon)


def _mlp(widths: Sequence[int], slope: float, act_first: bool) -> nn.Sequential:
    layers: list[nn.Module] = []
    for a, b in zip(widths[:-1], widths[1:], strict=True):
        layers += [nn.LeakyReLU(slope), nn.Linear(a, b)] if act_first else [nn.Linear(a, b), nn.LeakyReLU(slope)]
    return nn.Sequential(*layers)


class ClusterSpecificVAE(ClusterSpecificHead):
    """C VAEs around a shared trunk, with a hard assignment S of the training set (a clustering head).

    Per-sample loss under cluster j (eq. 4, the negative ELBO with a weighted KL):
        ``l_j(x) = Rec(x~_j, xhat_j) + kl_weight * KL(N(mu_j, diag exp(logvar_j)) || N(0, I))``
        ``KL = 1/2 sum_l (mu^2 + exp(logvar) - 1 - logvar)``
    with ``Rec`` the Bernoulli reconstruction term ``BCE(sigmoid(out), x~) - H(x~)`` summed over pixels
    (``recon="bce"``, footnote 6) or the unit-variance Gaussian one ``1/2 ||out - x~||^2`` (``recon="mse"``,
    appendix C), ``out`` the decoder's (linear) output. Subtracting the targets' entropy ``H(x~)`` (making the
    term ``sum_d KL(Bern(x~) || Bern(sigmoid(out)))``, 0 at a perfect reconstruction) leaves every gradient as
    it is, but the soft targets ``sigmoid(x - c_j)`` have an entropy that depends on the cluster: it is lowest
    for the centre farthest from x, so raw BCE makes the Lloyd step favour the *worst* centre (on classes
    {0, 1, 9} of scikit-learn's digits it collapsed the clustering: ARI 0.79 at init -> 0.01; fixed: 0.85).
    The latent is drawn with the reparameterisation ``z = mu + exp(logvar / 2) * eps``.

    Training loss of a batch: ``mean_i l_{S_i}(x_i)`` with one reparameterised sample per point; after each
    epoch a Lloyd step sets ``S_i = argmin_j l_j(x_i)`` scored with the posterior mean (z = mu, deterministic)
    and ``c_j`` = mean of its members; new points go to that argmin (eq. 2).

    One cluster (``num_clusters=1``) is the standard VAE: ``x~ = x`` (no centring and, unlike the tensorized
    model, no sigmoid: the authors' ``train_VAE`` reconstructs the [0, 1] pixels themselves), so with BCE the
    inputs must lie in [0, 1]. Its ``Rec`` is the authors' BCE minus ``H(x)``, a constant of the data.

    Differences from the authors' code, on purpose: their KL term is ``reg * sum(...)`` without the 1/2, so
    their ``reg = r`` is our ``kl_weight = 2 r``; their MSE is a per-pixel mean (we use the paper's
    ``1/2 ||.||^2``); their reparameterisation adds ``logvar * eps`` (the paper writes ``sigma^2 * eps``; we
    use the standard ``sigma * eps``); and they reassign each point to its lowest sampled loss at every batch,
    where we keep S fixed during an epoch (the paper's alternation).

    A subclass builds the shared trunk and calls ``_build_heads(width)``; it defines ``encode_shared`` (inputs
    (..., d) -> features (..., width)) and ``decode_shared`` (features (..., width) -> decoder output (..., d)),
    each on any number of leading dimensions.

    Args:
        input_shape: shape of one input; d = prod(input_shape).
        num_classes: the dataset's number of classes: C unless ``num_clusters`` is set.
        latent_dim: h, the latent dimension, >= 1.
        kl_weight: weight of the KL term, >= 0.
        recon: ``"bce"`` (sigmoid output) or ``"mse"`` (linear output).
        seed: ``random_state`` of the k-means++ seeding, >= 0.
        num_clusters: C when it is not ``num_classes``; 1 is the standard VAE.
    """

    loss_parts = ("loss", "recon", "kl")
    score_rows = CHUNK  # rows per block when a whole split is scored under all C clusters

    def __init__(
        self,
        input_shape: Sequence[int],
        num_classes: int,
        latent_dim: int,
        kl_weight: float,
        recon: Recon,
        seed: int,
        num_clusters: int | None,
    ):
        super().__init__(num_classes, seed, num_clusters)
        self.input_dim = checks.input_dim(input_shape)
        self.latent_dim = int(checks.at_least("latent_dim", latent_dim, 1))
        self.kl_weight = float(checks.at_least("kl_weight", kl_weight, 0))
        self.recon = checks.one_of("recon", recon, RECONS)

    def _build_heads(self, width: int) -> None:
        """The per-cluster heads g^mu_j, g^sigma_j (width -> latent) and f_Phi_j (latent -> width), stacked."""
        c, h = self.num_clusters, self.latent_dim
        self.mu_weight, self.mu_bias = stacked_linear(c, width, h)  # g^mu_j
        self.logvar_weight, self.logvar_bias = stacked_linear(c, width, h)  # g^sigma_j
        self.dec_weight, self.dec_bias = stacked_linear(c, h, width)  # f_Phi_j

    def encode_shared(self, x: torch.Tensor) -> torch.Tensor:
        """g_Omega: model-space inputs (..., d) -> features (..., width)."""
        raise NotImplementedError

    def decode_shared(self, h: torch.Tensor) -> torch.Tensor:
        """f_Theta: features (..., width) -> the decoder's linear output (..., d)."""
        raise NotImplementedError

    @property
    def standard(self) -> bool:
        """One cluster: the standard VAE (no centring, no sigmoid on the inputs)."""
        return self.state.standard

    # ---- the C VAEs ----------------------------------------------------------------------------------------

    def _points(self, x: torch.Tensor) -> torch.Tensor:
        x = x.flatten(1)
        if x.shape[1] != self.input_dim:
            raise ValueError(f"inputs must have {self.input_dim} features once flattened, got {x.shape[1]}")
        return x

    def _model_space(self, x: torch.Tensor, centres: torch.Tensor) -> torch.Tensor:
        """``x~ = x - c`` (sigmoid of it for BCE): both the encoder's input and the reconstruction target. The
        standard VAE (one cluster) reads and reconstructs ``x`` itself."""
        if self.standard:
            if self.recon == "bce" and x.numel() and not (0 <= float(x.min()) and float(x.max()) <= 1):
                raise ValueError(
                    "inputs must lie in [0, 1] for the standard VAE with recon='bce' (they are its Bernoulli "
                    f"targets), got values in [{float(x.min()):.4g}, {float(x.max()):.4g}]"
                )
            return x
        x = x - centres
        return torch.sigmoid(x) if self.recon == "bce" else x

    def _neg_log_lik(self, out: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        if self.recon == "bce":
            # BCE minus the targets' entropy = sum_d KL(Bern(target) || Bern(sigmoid(out))): see the class doc
            entropy = F.binary_cross_entropy(target, target, reduction="none")
            return (F.binary_cross_entropy_with_logits(out, target, reduction="none") - entropy).sum(-1)
        return 0.5 * (out - target).pow(2).sum(-1)

    @staticmethod
    def _kl(mu: torch.Tensor, logvar: torch.Tensor) -> torch.Tensor:
        return 0.5 * (mu.pow(2) + logvar.exp() - 1.0 - logvar).sum(-1)

    def all_clusters(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Every point under every cluster, decoding the posterior mean (deterministic).

        ``x`` (N, d). Returns ``recon`` (N, C), ``kl`` (N, C) and ``mu`` (C, N, latent).
        """
        target = self._model_space(x.unsqueeze(0), self._centres().to(x.dtype).unsqueeze(1))  # (C, N, d)
        target = target.expand(self.num_clusters, *x.shape)
        h = self.encode_shared(target)
        # (C, N, w) @ (C, w, l): one batched matmul for all the clusters' heads.
        mu = apply_all(h, self.mu_weight, self.mu_bias)
        logvar = apply_all(h, self.logvar_weight, self.logvar_bias)
        out = self.decode_shared(apply_all(mu, self.dec_weight, self.dec_bias))
        return self._neg_log_lik(out, target).T, self._kl(mu, logvar).T, mu

    def assigned(
        self, x: torch.Tensor, cluster: torch.Tensor, eps: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Each point under its own cluster only, with ``z = mu + exp(logvar / 2) * eps``.

        ``x`` (N, d), ``cluster`` (N,) long, ``eps`` (N, latent) standard normal draws (None: z = mu).
        Returns ``recon`` (N,), ``kl`` (N,) and ``mu`` (N, latent).
        """
        target = self._model_space(x, self._centres().to(x.dtype)[cluster])
        h = self.encode_shared(target)
        # The small heads run for every cluster ((N, w) @ (C, w, l) -> (C, N, l)); each row keeps its own.
        mu = pick(apply_all(h, self.mu_weight, self.mu_bias), cluster)
        logvar = pick(apply_all(h, self.logvar_weight, self.logvar_bias), cluster)
        z = mu if eps is None else mu + torch.exp(0.5 * logvar) * eps
        out = self.decode_shared(pick(apply_all(z, self.dec_weight, self.dec_bias), cluster))
        return self._neg_log_lik(out, target), self._kl(mu, logvar), mu

    def per_cluster_loss(self, x: torch.Tensor) -> torch.Tensor:
        """``l_j(x_i)`` (N, C) with z = mu, for inputs ``x`` (N, d)."""
        recon, kl, _ = self.all_clusters(self._points(x))
        return recon + self.kl_weight * kl

    def forward(
        self, embeddings: torch.Tensor, labels: torch.Tensor, index: torch.Tensor | None = None, **batch
    ) -> dict[str, torch.Tensor]:
        """Mean negative ELBO of the batch under the stored assignment (eq. 4's inner sum, averaged).

        ``embeddings`` (N, d) flattened inputs; ``index`` (N,) their rows in the training split, which select
        their clusters in S (without ``index``, eq. 2's argmin is used). Returns ``loss``, ``recon`` and
        ``kl`` (means).
        """
        x = self._points(embeddings)
        cluster = self.batch_clusters(x, index)
        eps = torch.randn(x.shape[0], self.latent_dim, dtype=x.dtype, device=x.device)
        recon, kl, _ = self.assigned(x, cluster, eps)
        recon, kl = recon.mean(), kl.mean()
        return {"loss": recon + self.kl_weight * kl, "recon": recon, "kl": kl}

    # ---- clustering-head contract (ClusterSpecificHead): k-means++ and centres on the inputs ----------------

    @torch.no_grad()
    def _scores(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``per_cluster_loss`` (N, C) and ``mu`` (C, N, latent) in row blocks of ``score_rows``."""
        parts = [self.all_clusters(block) for block in self._points(x).split(self.score_rows)]
        loss = torch.cat([recon + self.kl_weight * kl for recon, kl, _ in parts])
        return loss, torch.cat([mu for _, _, mu in parts], dim=1)

    def cluster_points(self, embeddings: torch.Tensor, **split) -> torch.Tensor:
        """The flattened inputs (N, d), as the authors' code seeds and centres on them."""
        return self._points(embeddings)

    @torch.no_grad()
    def cluster_losses(self, embeddings: torch.Tensor, **split) -> torch.Tensor:
        """``l_j(x_i)`` (N, C) with z = mu (deterministic): the VAE whose loss is smallest takes the point."""
        return self._scores(embeddings)[0]

    @torch.no_grad()
    def embed(self, embeddings: torch.Tensor, **batch) -> torch.Tensor:
        """The latent mean (N, latent) of each point under its eq.-2 cluster (the paper's Fig. 3)."""
        loss, mu = self._scores(embeddings)
        return pick(mu, loss.argmin(dim=1))

    @torch.no_grad()
    def sample(
        self, num_per_cluster: int, generator: torch.Generator | None = None, uncentre: bool = True
    ) -> torch.Tensor:
        """Decode ``z ~ N(0, I)`` through each cluster's decoder head (the paper's Fig. 3, top row).

        Returns (C, num_per_cluster, d). With ``uncentre`` the centring is undone: the decoder output
        estimates ``x - c_j`` (MSE) or its logit (BCE, since the target was ``sigmoid(x - c_j)``), so
        ``out + c_j`` is in input space. Without it, the decoder mean in the model's own space (what the paper
        plots: "we do not re-scale"). The standard VAE's model space is the input space: both give its decoder
        mean (``sigmoid(out)`` for BCE). ``generator``: a CPU generator for the draws (None: the global one).
        """
        if num_per_cluster < 1:
            raise ValueError(f"num_per_cluster must be >= 1, got {num_per_cluster}")
        centres = self._centres()
        z = torch.randn(self.num_clusters, num_per_cluster, self.latent_dim, generator=generator)
        z = z.to(device=centres.device, dtype=self.dec_weight.dtype)
        out = self.decode_shared(apply_all(z, self.dec_weight, self.dec_bias))
        if uncentre and not self.standard:
            return out + centres.unsqueeze(1).to(out.dtype)
        return torch.sigmoid(out) if self.recon == "bce" else out


class TensorizedVAE(ClusterSpecificVAE):
    """The MLP TVAE of the paper's Figs. 3, 9 and 11 (the authors' ``VAE``): shared encoder g_Omega
    (d -> 400 -> 200, LeakyReLU), per-cluster heads g^mu_j, g^sigma_j (200 -> latent) and f_Phi_j
    (latent -> 200), shared decoder f_Theta (200 -> 400 -> d). Losses, sampling and the clustering contract:
    ``ClusterSpecificVAE``.

    Args:
        input_shape: shape of one input; d = prod(input_shape).
        num_classes: the dataset's number of classes: the number of clusters C unless ``num_clusters`` is set.
        hidden: widths of the shared encoder (the decoder mirrors them); the last one is the width the
            per-cluster heads read and write (authors' code: 400, 200).
        latent_dim: h, the latent dimension (paper: 2).
        kl_weight: weight of the KL term, >= 0.
        recon: ``"bce"`` (sigmoid output; inputs pass through a sigmoid after centring) or ``"mse"`` (linear).
        negative_slope: LeakyReLU slope, >= 0 (authors: 0.2).
        seed: ``random_state`` of the k-means++ seeding (authors: 20).
        num_clusters: C when it is not ``num_classes`` (null: the classes); 1 is the authors' standard VAE
            (``train_VAE``: one model fed ``x`` itself).
    """

    def __init__(
        self,
        input_shape: Sequence[int],
        num_classes: int,
        hidden: Sequence[int] = (400, 200),
        latent_dim: int = 2,
        kl_weight: float = 0.1,
        recon: Recon = "bce",
        negative_slope: float = 0.2,
        seed: int = 20,
        num_clusters: int | None = None,
    ):
        super().__init__(input_shape, num_classes, latent_dim, kl_weight, recon, seed, num_clusters)
        hidden = checks.widths("hidden", hidden)
        negative_slope = float(checks.at_least("negative_slope", negative_slope, 0))
        d = self.input_dim
        self.encoder = _mlp([d, *hidden], negative_slope, act_first=False)  # g_Omega
        self._build_heads(hidden[-1])
        self.decoder = _mlp([*hidden[::-1], d], negative_slope, act_first=True)  # f_Theta

    def encode_shared(self, x: torch.Tensor) -> torch.Tensor:
        return self.encoder(x)

    def decode_shared(self, h: torch.Tensor) -> torch.Tensor:
        return self.decoder(h)
