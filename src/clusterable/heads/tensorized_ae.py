"""Cluster-specific linear autoencoders TAE1, TAE2 and PTAE (Sabanayagam et al. 2024, §III, eq. 3).

One autoencoder per cluster j, applied to the point centred on the cluster's mean, ``x~_j = x - c_j``. Every
per-cluster layer is a stacked weight (C, in, out) (``heads.stacked``); nothing loops over clusters:
- a training step needs each point under its own cluster only: the point is centred once and each
  per-cluster layer applies the point's own slice (gathered), so PTAE's step costs what AE3's does;
- the Lloyd step and eq. 2 need every point under every cluster: batched matmuls on (C, N, in) activations,
  and for PTAE, whose outer layers are shared, no (C, N, d) tensor at all (linearity, see ``terms``).
Pair this head with the identity encoder (``src/clusterable/conf/model/identity.yaml``): the head owns the whole
network.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal, get_args

import torch
from torch import nn

from clusterable import checks
from clusterable.heads.cluster_state import ClusterSpecificHead
from clusterable.heads.stacked import apply_all, pick, uniform_weight

Arch = Literal["tae1", "tae2", "ptae"]
ARCHS: tuple[str, ...] = get_args(Arch)


class TensorizedAE(ClusterSpecificHead):
    """Cluster-specific linear autoencoders with a hard assignment S of the training set (a clustering head).

    Architectures (bias-free, linear; "shared" layers are common to all clusters, the others per cluster):
        ``tae1``: C copies of AE1, d -> 1 -> d.
        ``tae2``: C copies of AE2, d -> 2 -> 1 -> 2 -> d.
        ``ptae``: shared d -> 2, per-cluster 2 -> 1 -> 2, shared 2 -> d (only the embedding layer tensorised).
    Parameter counts (the paper's Fig. 2 and 7, right; the authors' code, repository
    ``mahalakshmi-sabanayagam/cluster_specific_representation``, ``src/models.py``): d = 5, C = 2: 20 / 48 /
    28; MNIST (d = 784, C = 5): 7840 / 15700 / 3156.

    Per-sample loss under cluster j (eq. 3 with the authors' MSE and penalty ``p = ||z||^2``):
        ``l_j(x, t) = mean_d (AE_j(x - c_j) - (t - c_j))^2 + lam * ||z_j(x - c_j)||^2``
    with ``t`` the target (clean point when de-noising, else ``x``), ``z_j`` the cluster-j embedding (N, 1).
    Training loss of a batch: ``mean_i l_{S_i}(x_i, t_i)``; after each epoch a Lloyd step sets
    ``S_i = argmin_j l_j(x_i, t_i)`` and ``c_j`` = mean of the targets assigned to j; new points go to
    ``argmin_j l_j`` (eq. 2). Following the authors' code (``src/train.py``, ``train_TAE``), k-means++ seeding
    and the centres use the targets.

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

    loss_parts = ("loss", "recon", "reg")
    stacked_scalars = ("lam",)  # may differ between the members of a stacked grid (contracts.StacksScalars)

    def __init__(
        self,
        arch: Arch,
        input_shape: Sequence[int],
        num_classes: int,
        lam: float = 0.1,
        seed: int = 20,
    ):
        super().__init__(num_classes, seed)
        self.arch = checks.one_of("arch", arch, ARCHS)
        self.lam = float(checks.at_least("lam", lam, 0))
        d, c = checks.input_dim(input_shape), self.num_clusters
        self.input_dim, self.embedding_dim = d, 1
        encoder, decoder = {
            "tae1": ([(c, d, 1)], [(c, 1, d)]),
            "tae2": ([(c, d, 2), (c, 2, 1)], [(c, 1, 2), (c, 2, d)]),
            "ptae": ([(d, 2), (c, 2, 1)], [(c, 1, 2), (2, d)]),
        }[arch]
        self.encoder = nn.ParameterList(uniform_weight(s) for s in encoder)
        self.decoder = nn.ParameterList(uniform_weight(s) for s in decoder)

    # ---- the C autoencoders, all at once -------------------------------------------------------------------

    @staticmethod
    def _layer_own(h: torch.Tensor, w: torch.Tensor, cluster: torch.Tensor) -> torch.Tensor:
        """(N, in) rows, each through its own cluster's slice of a stacked weight, or a shared (in, out) one.

        The slices are gathered (N, in, out): the layers are small (at most d x 2), so this is cheaper than
        running every cluster and picking, which the heads with wide layers do.
        """
        return h @ w if w.dim() == 2 else torch.bmm(h.unsqueeze(1), w[cluster]).squeeze(1)

    def own_cluster(self, x: torch.Tensor, cluster: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Each point under its own cluster only: ``z`` (N, 1), ``AE_s(x - c_s)`` (N, d) and ``c_s`` (N, d).

        ``x`` (N, d), ``cluster`` (N,) long. Costs one centred copy of ``x`` and the small per-cluster slices.
        """
        c = self._centres().to(x.dtype)[cluster]
        h = x - c
        for w in self.encoder:
            h = self._layer_own(h, w, cluster)
        z = h
        for w in self.decoder:
            h = self._layer_own(h, w, cluster)
        return z, h, c

    def terms(self, x: torch.Tensor, target: torch.Tensor | None = None) -> tuple[torch.Tensor, ...]:
        """Per cluster: reconstruction MSE (N, C), penalty ``||z||^2`` (N, C) and embeddings z (C, N, 1).

        ``x`` (N, d) inputs, ``target`` (N, d) what to reconstruct (None: ``x``). The first layer uses
        ``(x - c_j) W = x W - c_j W``, so the (C, N, d) centred copies are never built. With a per-cluster
        output layer (TAE) the (C, N, d) reconstructions are formed; with a shared one (PTAE), ``a_j = h_j W``,
        the squared error is expanded, ``||a_j - (t - c_j)||^2 = h_j (W W^T) h_j^T - 2 h_j W (t - c_j)^T +
        ||t - c_j||^2``: O(N d (m + C)) instead of O(C N d).
        """
        x = x.flatten(1)
        target = x if target is None else target.flatten(1)
        c = self._centres().to(x.dtype)  # (C, d)
        first = self.encoder[0]
        h = apply_all(x, first) - apply_all(c.unsqueeze(1), first)  # (C, N, out) - (C, 1, out)
        for w in self.encoder[1:]:
            h = apply_all(h, w)
        z = h  # (C, N, 1)
        for w in self.decoder[:-1]:
            h = apply_all(h, w)
        last = self.decoder[-1]
        if last.dim() == 3:
            recon = apply_all(h, last)  # (C, N, d)
            mse = (recon - (target.unsqueeze(0) - c.unsqueeze(1))).pow(2).mean(dim=2)
        else:
            mse = self._shared_output_sse(h, last, target, c) / x.shape[1]
        return mse.T, z.pow(2).sum(dim=2).T, z

    @staticmethod
    def _shared_output_sse(h: torch.Tensor, w: torch.Tensor, t: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
        """``||h_j w - (t - c_j)||^2`` (C, N) for activations ``h`` (C, N, m), shared ``w`` (m, d), targets ``t``
        (N, d) and centres ``c`` (C, d), without forming any (C, N, d) tensor.

        The products with the targets run once, in the working precision; the small (N, m), (C, N) and
        (C, N, m) terms are combined in float64, where the expansion's cancellation is harmless.
        """
        tw = (t @ w.T).double()  # (N, m)
        tc = (c @ t.T).double()  # (C, N)
        tt = torch.linalg.vector_norm(t, dim=1).double().square()  # (N,)
        h64, w64, c64 = h.double(), w.double(), c.double()
        recon_sq = ((h64 @ (w64 @ w64.T)) * h64).sum(-1)  # ||h_j w||^2
        cross = (h64 * (tw.unsqueeze(0) - (c64 @ w64.T).unsqueeze(1))).sum(-1)  # (h_j w) . (t - c_j)
        resid_sq = tt - 2 * tc + (c64 * c64).sum(1, keepdim=True)  # ||t - c_j||^2
        # Rounding can leave a perfect reconstruction's error a hair below 0.
        return (recon_sq - 2 * cross + resid_sq).clamp(min=0).to(h.dtype)

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
        x = embeddings.flatten(1)
        target = x if targets is None else targets.flatten(1)
        z, recon, c = self.own_cluster(x, self.batch_clusters(x, index, targets=target))
        mse = (recon - (target - c)).pow(2).mean()
        reg = z.pow(2).sum(dim=1).mean()
        return {"loss": mse + self.lam * reg, "recon": mse, "reg": reg}

    # ---- clustering-head contract (ClusterSpecificHead): scored and centred on the targets ------------------

    def cluster_points(self, embeddings: torch.Tensor, targets: torch.Tensor | None = None, **split) -> torch.Tensor:
        """The targets (N, d) (the clean points when de-noising, else the inputs): the authors seed k-means++
        and compute the centres on them."""
        return embeddings.flatten(1) if targets is None else targets.flatten(1)

    @torch.no_grad()
    def cluster_losses(self, embeddings: torch.Tensor, targets: torch.Tensor | None = None, **split) -> torch.Tensor:
        """``l_j(x_i, t_i)`` (N, C), the Lloyd step's and eq. 2's criterion."""
        return self.per_cluster_loss(embeddings, targets)

    @torch.no_grad()
    def reconstruct(self, embeddings: torch.Tensor, **batch) -> torch.Tensor:
        """``c_s + AE_s(x - c_s)`` (N, d) for inputs (N, d), ``s`` = eq. 2's cluster scored on the input alone.

        No target is used (a new noisy point has none), so this is the de-noised point at inference time.
        """
        x = embeddings.flatten(1)
        _, recon, c = self.own_cluster(x, self.assign(x))
        return recon + c

    @torch.no_grad()
    def embed(self, embeddings: torch.Tensor, targets: torch.Tensor | None = None, **batch) -> torch.Tensor:
        """Each point's embedding (N, 1) under its eq.-2 cluster."""
        mse, penalty, z = self.terms(embeddings, targets)
        return pick(z, (mse + self.lam * penalty).argmin(dim=1))
