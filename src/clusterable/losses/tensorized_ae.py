"""Cluster-specific linear autoencoders TAE1, TAE2 and PTAE (Sabanayagam et al. 2024, eq. 3; REFERENCE §4.2).

One autoencoder per cluster j, applied to the point centred on the cluster's mean, ``x~_j = x - c_j``. All
clusters are computed at once: every per-cluster layer is a stacked weight (C, in, out) applied with a
batched matmul to the (C, N, in) activations, so the forward, its backward and the Lloyd step have no loop
over clusters. Pair this head with the identity encoder (``conf/model/identity.yaml``): the head owns the
whole network.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
from torch import nn

from clusterable.losses.cluster_state import ClusterState
from clusterable.losses.linear_ae import check_lam, input_dim

ARCHS = ("tae1", "tae2", "ptae")


def _layer(shape: Sequence[int]) -> nn.Parameter:
    """A bias-free weight (in, out) or per-cluster stack (C, in, out), drawn as ``nn.Linear`` draws it."""
    bound = 1.0 / math.sqrt(shape[-2])
    return nn.Parameter(torch.empty(*shape).uniform_(-bound, bound))


class TensorizedAE(nn.Module):
    """Cluster-specific linear autoencoders with a hard assignment S of the training set (a clustering head).

    Architectures (bias-free, linear; "shared" layers are common to all clusters, the others per cluster):
        ``tae1``: C copies of AE1, d -> 1 -> d.
        ``tae2``: C copies of AE2, d -> 2 -> 1 -> 2 -> d.
        ``ptae``: shared d -> 2, per-cluster 2 -> 1 -> 2, shared 2 -> d (only the embedding layer tensorised).
    Parameter counts: d = 5, C = 2: 20 / 48 / 28; MNIST (d = 784, C = 5): 7840 / 15700 / 3156 (REFERENCE
    §4.2).

    Per-sample loss under cluster j (eq. 3 with the authors' MSE and penalty ``p = ||z||^2``):
        ``l_j(x, t) = mean_d (AE_j(x - c_j) - (t - c_j))^2 + lam * ||z_j(x - c_j)||^2``
    with ``t`` the target (clean point when de-noising, else ``x``), ``z_j`` the cluster-j embedding (N, 1).
    Training loss of a batch: ``mean_i l_{S_i}(x_i, t_i)``; after each epoch a Lloyd step sets
    ``S_i = argmin_j l_j(x_i, t_i)`` and ``c_j`` = mean of the targets assigned to j; new points go to
    ``argmin_j l_j`` (eq. 2). Following the authors' code, k-means++ seeding and the centres use the targets.

    The authors reassign each point with the losses computed *before* the epoch's optimizer step (in the same
    forward); here the Lloyd step runs after it, on the updated weights.

    Args:
        arch: ``"tae1"``, ``"tae2"`` or ``"ptae"``.
        input_shape: shape of one input; d = prod(input_shape).
        num_classes: C, the number of clusters, at least 2.
        lam: weight of the embedding penalty, >= 0 (the authors' ``reg`` = 0.1).
        seed: ``random_state`` of the k-means++ seeding (authors: 20).

    Attributes:
        encoder, decoder: ``nn.ParameterList`` of weights, (in, out) shared or (C, in, out) per cluster.
        state: ``ClusterState`` with ``centres`` (C, d) and ``assignment`` (N,) of the training set.
    """

    def __init__(
        self,
        arch: str,
        input_shape: Sequence[int],
        num_classes: int,
        lam: float = 0.1,
        seed: int = 20,
        **kwargs,
    ):
        super().__init__()
        if arch not in ARCHS:
            raise ValueError(f"arch must be one of {', '.join(ARCHS)}, got {arch!r}")
        if num_classes < 2:
            raise ValueError(f"num_classes must be >= 2, got {num_classes}")
        self.arch, self.lam, self.num_clusters = arch, check_lam(lam), int(num_classes)
        d, c = input_dim(input_shape), self.num_clusters
        self.input_dim, self.embedding_dim = d, 1
        encoder, decoder = {
            "tae1": ([(c, d, 1)], [(c, 1, d)]),
            "tae2": ([(c, d, 2), (c, 2, 1)], [(c, 1, 2), (c, 2, d)]),
            "ptae": ([(d, 2), (c, 2, 1)], [(c, 1, 2), (2, d)]),
        }[arch]
        self.encoder = nn.ParameterList(_layer(s) for s in encoder)
        self.decoder = nn.ParameterList(_layer(s) for s in decoder)
        self.state = ClusterState(c, seed=seed)

    # ---- the C autoencoders, all at once -------------------------------------------------------------------

    def _centres(self) -> torch.Tensor:
        if not self.state.initialised:
            raise RuntimeError(
                "the cluster assignment is empty: call init_clusters(...) on the training split first"
            )
        return self.state.centres

    @staticmethod
    def _chain(h: torch.Tensor, weights: nn.ParameterList) -> torch.Tensor:
        # (C, N, in) @ (C, in, out) is a batched matmul; a shared (in, out) weight broadcasts over clusters.
        for w in weights:
            h = torch.matmul(h, w)
        return h

    def terms(self, x: torch.Tensor, target: torch.Tensor | None = None) -> tuple[torch.Tensor, ...]:
        """Per cluster: reconstruction MSE (N, C), penalty ``||z||^2`` (N, C) and embeddings z (C, N, 1).

        ``x`` (N, d) inputs, ``target`` (N, d) what to reconstruct (None: ``x``).
        """
        x = x.flatten(1)
        target = x if target is None else target.flatten(1)
        centres = self._centres().to(x.dtype).unsqueeze(1)  # (C, 1, d)
        z = self._chain(x.unsqueeze(0) - centres, self.encoder)  # (C, N, 1)
        recon = self._chain(z, self.decoder)  # (C, N, d)
        mse = (recon - (target.unsqueeze(0) - centres)).pow(2).mean(dim=2)
        return mse.T, z.pow(2).sum(dim=2).T, z

    def per_cluster_loss(self, x: torch.Tensor, target: torch.Tensor | None = None) -> torch.Tensor:
        """``l_j(x_i, t_i)`` (N, C) for inputs ``x`` (N, d) and targets (N, d) (None: ``x``)."""
        mse, penalty, _ = self.terms(x, target)
        return mse + self.lam * penalty

    def forward(
        self,
        embeddings: torch.Tensor,
        labels: torch.Tensor,
        index: torch.Tensor | None = None,
        targets: torch.Tensor | None = None,
        **batch,
    ) -> dict[str, torch.Tensor]:
        """Mean loss of the batch under the stored assignment (the inner sum of eq. 3, averaged).

        ``embeddings`` (N, d) flattened inputs; ``index`` (N,) their rows in the training split, which select
        their clusters in S (without ``index``: eq. 2's argmin); ``targets`` (N, *input_shape) or None.
        Returns ``loss = recon + lam * reg``, ``recon`` the mean MSE and ``reg`` the mean ``||z||^2``.
        """
        mse, penalty, _ = self.terms(embeddings, targets)
        if index is None:
            cluster = (mse + self.lam * penalty).detach().argmin(dim=1)
        else:
            cluster = self.state.assignment[index]
        recon = mse.gather(1, cluster.unsqueeze(1)).mean()
        reg = penalty.gather(1, cluster.unsqueeze(1)).mean()
        return {"loss": recon + self.lam * reg, "recon": recon, "reg": reg}

    # ---- clustering-head contract -------------------------------------------------------------------------

    @staticmethod
    def _target(embeddings: torch.Tensor, targets: torch.Tensor | None) -> torch.Tensor:
        return embeddings.flatten(1) if targets is None else targets.flatten(1)

    @torch.no_grad()
    def init_clusters(self, embeddings: torch.Tensor, targets: torch.Tensor | None = None, **split) -> None:
        """S by k-means++ seeds (``random_state=seed``) and nearest seed, centres = members' means.

        Run on the targets (the clean points when de-noising), as the authors do. ``embeddings`` (N, d).
        """
        points = self._target(embeddings, targets)
        self.state.init_kmeanspp(points)
        self.state.centres = self.state.cluster_means(points, self.state.assignment, self.state.centres)

    @torch.no_grad()
    def update_clusters(self, embeddings: torch.Tensor, targets: torch.Tensor | None = None, **split) -> None:
        """Lloyd step on the whole training split: ``S_i = argmin_j l_j(x_i)``, centres = members' means."""
        points = self._target(embeddings, targets)
        self.state.lloyd_step(self.per_cluster_loss(embeddings, points), points)

    @torch.no_grad()
    def assign(self, embeddings: torch.Tensor, targets: torch.Tensor | None = None, **batch) -> torch.Tensor:
        """Eq. 2: each point's cluster (N,) is the one whose autoencoder gives it the smallest loss."""
        return self.per_cluster_loss(embeddings, targets).argmin(dim=1)

    @torch.no_grad()
    def reconstruct(self, embeddings: torch.Tensor, **batch) -> torch.Tensor:
        """``c_s + AE_s(x - c_s)`` (N, d) for inputs (N, d), ``s`` = eq. 2's cluster scored on the input alone.

        No target is used (a new noisy point has none), so this is the de-noised point at inference time.
        """
        x = embeddings.flatten(1)
        mse, penalty, z = self.terms(x)
        cluster = (mse + self.lam * penalty).argmin(dim=1)
        rows = torch.arange(len(cluster), device=x.device)
        recon = self._chain(z, self.decoder)[cluster, rows]  # (N, d): each point under its own cluster
        return recon + self._centres().to(x.dtype)[cluster]

    @torch.no_grad()
    def embed(self, embeddings: torch.Tensor, targets: torch.Tensor | None = None, **batch) -> torch.Tensor:
        """Each point's embedding (N, 1) under its eq.-2 cluster."""
        mse, penalty, z = self.terms(embeddings, targets)
        cluster = (mse + self.lam * penalty).argmin(dim=1)
        return z[cluster, torch.arange(len(cluster), device=z.device)]
