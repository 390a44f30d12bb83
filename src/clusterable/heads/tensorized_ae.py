"""Cluster-specific linear autoencoders TAE1, TAE2 and PTAE (Sabanayagam et al. 2024, eq. 3; REFERENCE §4.2).

One autoencoder per cluster j, applied to the point centred on the cluster's mean, ``x~_j = x - c_j``. Every
per-cluster layer is a stacked weight (C, in, out); nothing loops over clusters:
- a training step needs each point under its own cluster only: the point is centred once and each
  per-cluster layer applies the point's own slice (gathered), so PTAE's step costs what AE3's does;
- the Lloyd step and eq. 2 need every point under every cluster: batched matmuls on (C, N, in) activations,
  and for PTAE, whose outer layers are shared, no (C, N, d) tensor at all (linearity, see ``terms``).
Pair this head with the identity encoder (``conf/model/identity.yaml``): the head owns the whole network.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
from torch import nn

from clusterable.heads.cluster_state import ClusterState
from clusterable.heads.linear_ae import check_lam, input_dim

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
            raise ValueError(
                f"num_classes must be >= 2 (the number of clusters, dataset.num_classes), got {num_classes}"
            )
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
        return self.state.require().centres

    @staticmethod
    def _layer_all(h: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        """(C, N, in) @ (C, in, out): a batched matmul; a shared (in, out) weight broadcasts over clusters."""
        return torch.matmul(h, w)

    @staticmethod
    def _layer_own(h: torch.Tensor, w: torch.Tensor, cluster: torch.Tensor) -> torch.Tensor:
        """(N, in) rows, each through its own cluster's slice of a stacked weight, or a shared (in, out) one."""
        return h @ w if w.dim() == 2 else torch.bmm(h.unsqueeze(1), w[cluster]).squeeze(1)

    def own_cluster(
        self, x: torch.Tensor, cluster: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
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
        h = self._layer_all(x, first) - self._layer_all(c.unsqueeze(1), first)  # (C, N, out) - (C, 1, out)
        for w in self.encoder[1:]:
            h = self._layer_all(h, w)
        z = h  # (C, N, 1)
        for w in self.decoder[:-1]:
            h = self._layer_all(h, w)
        last = self.decoder[-1]
        if last.dim() == 3:
            recon = self._layer_all(h, last)  # (C, N, d)
            mse = (recon - (target.unsqueeze(0) - c.unsqueeze(1))).pow(2).mean(dim=2)
        else:
            mse = self._shared_output_sse(h, last, target, c) / x.shape[1]
        return mse.T, z.pow(2).sum(dim=2).T, z

    @staticmethod
    def _shared_output_sse(
        h: torch.Tensor, w: torch.Tensor, t: torch.Tensor, c: torch.Tensor
    ) -> torch.Tensor:
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
        if index is None:
            with torch.no_grad():
                cluster = self.per_cluster_loss(x, target).argmin(dim=1)
        else:
            cluster = self.state.assignment[index]
        z, recon, c = self.own_cluster(x, cluster)
        mse = (recon - (target - c)).pow(2).mean()
        reg = z.pow(2).sum(dim=1).mean()
        return {"loss": mse + self.lam * reg, "recon": mse, "reg": reg}

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
        _, recon, c = self.own_cluster(x, self.per_cluster_loss(x).argmin(dim=1))
        return recon + c

    @torch.no_grad()
    def embed(self, embeddings: torch.Tensor, targets: torch.Tensor | None = None, **batch) -> torch.Tensor:
        """Each point's embedding (N, 1) under its eq.-2 cluster."""
        mse, penalty, z = self.terms(embeddings, targets)
        cluster = (mse + self.lam * penalty).argmin(dim=1)
        return z[cluster, torch.arange(len(cluster), device=z.device)]
