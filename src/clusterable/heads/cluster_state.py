"""The hard cluster assignment that cluster-specific heads alternate with gradient steps.

Shared by every head that learns one representation per cluster (Sabanayagam et al. 2024, §II "Optimization"):
the assignment ``S`` is initialised by k-means++ seeds and nearest centre, then refined by Lloyd steps in which
each point moves to the cluster whose model gives it the smallest loss (the paper's eq. 2) and each centre
becomes its members' mean. ``ClusterState`` holds ``S`` and the centres; ``ClusterSpecificHead`` is the
clustering-head contract (``contracts.ClusteringHead``) written once on top of it.
"""

from __future__ import annotations

from typing import Any

import torch
from sklearn.cluster import kmeans_plusplus
from torch import Tensor, nn

from clusterable import checks

CHUNK = 4096  # rows per block when a head scores a whole split under all C clusters (bounds memory)


class ClusterState(nn.Module):
    """Buffers ``centres`` (C, d) and ``assignment`` (N,) of the training set; saved with the checkpoint.

    One cluster is the standard (not cluster-specific) model: every point is in it and its centre is the origin,
    so the model sees the inputs as they are, as the authors' standard VAE and RBM do (``train_VAE``,
    ``train_RBM`` in ``src/train.py``); the Lloyd step has nothing to change.

    Args:
        num_clusters: C, at least 1.
        seed: ``random_state`` of the k-means++ seeding (the authors' code uses 20: repository
            ``mahalakshmi-sabanayagam/cluster_specific_representation``, ``src/train.py``).
    """

    def __init__(self, num_clusters: int, seed: int = 20):
        super().__init__()
        if num_clusters < 1:
            raise ValueError(f"num_clusters must be >= 1, got {num_clusters}")
        self.num_clusters, self.seed = int(num_clusters), seed
        self.register_buffer("centres", torch.zeros(0))
        self.register_buffer("assignment", torch.zeros(0, dtype=torch.long))

    def _load_from_state_dict(self, state_dict: dict, prefix: str, *args, **kwargs) -> None:
        # The buffers' sizes are only known once the training set is seen: take them from the checkpoint.
        for name in ("centres", "assignment"):
            if prefix + name in state_dict:
                setattr(self, name, torch.empty_like(state_dict[prefix + name]))
        super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)

    @property
    def standard(self) -> bool:
        """One cluster: the standard (not cluster-specific) model."""
        return self.num_clusters == 1

    @property
    def initialised(self) -> bool:
        return self.assignment.numel() > 0

    def require(self) -> ClusterState:
        """``self``, once ``init_kmeanspp`` has run; a clear error before (a head used before training)."""
        if not self.initialised:
            raise RuntimeError("the cluster assignment is empty: call init_clusters(...) on the training split first")
        return self

    @torch.no_grad()
    def init_kmeanspp(self, x: torch.Tensor) -> None:
        """Each point to its nearest k-means++ seed, then centres = members' means (authors' code). x: (N, d)."""
        n = x.shape[0]
        if self.num_clusters == 1:  # the standard model: one cluster, no centring
            self.assignment = torch.zeros(n, dtype=torch.long, device=x.device)
            self.centres = torch.zeros(1, x.shape[1], dtype=x.dtype, device=x.device)
            return
        if not self.num_clusters <= n:
            raise ValueError(f"num_clusters ({self.num_clusters}) must not exceed the number of samples ({n})")
        seeds, _ = kmeans_plusplus(x.detach().cpu().double().numpy(), self.num_clusters, random_state=self.seed)
        seeds = torch.as_tensor(seeds, dtype=x.dtype, device=x.device)
        self.assignment = torch.cdist(x, seeds).argmin(dim=1)
        self.centres = self.cluster_means(x, self.assignment, seeds)

    @torch.no_grad()
    def lloyd_step(self, losses: torch.Tensor, x: torch.Tensor) -> int:
        """One Lloyd step: ``assignment = argmin_j losses[:, j]``, then centres = members' means.

        Args:
            losses: (N, C) per-point loss under each cluster's model.
            x: (N, d) the points whose means become the centres.
        Returns:
            the number of points that changed cluster.
        """
        new = losses.argmin(dim=1)
        changed = int((new != self.assignment).sum()) if self.initialised else len(new)
        self.assignment = new
        if self.num_clusters > 1:  # the standard model keeps its centre at the origin
            self.centres = self.cluster_means(x, new, self.centres)
        return changed

    def cluster_means(self, x: torch.Tensor, assignment: torch.Tensor, fallback: torch.Tensor) -> torch.Tensor:
        """(C, d) mean of the points of each cluster; an empty cluster keeps its ``fallback`` centre."""
        c = self.num_clusters
        sums = torch.zeros(c, x.shape[1], dtype=x.dtype, device=x.device).index_add_(0, assignment, x)
        counts = torch.bincount(assignment, minlength=c).to(x.dtype)
        means = sums / counts.clamp(min=1).unsqueeze(1)
        if fallback.shape == means.shape:
            means = torch.where(counts.unsqueeze(1) > 0, means, fallback)
        return means


class ClusterSpecificHead(nn.Module):
    """The clustering-head block of the cluster-specific heads: ``S``, its k-means++ start and its Lloyd steps.

    A subclass defines its model and two functions of a whole split (the encoder output ``embeddings`` (N, D)
    and the split's tensors):
    - ``cluster_losses(embeddings, **split) -> (N, C)``: each point's loss under each cluster's model, the
      criterion of eq. 2 and of the Lloyd step (no gradient; chunked by the head where C x N is large);
    - ``cluster_points(embeddings, **split) -> (N, d)``: the points k-means++ seeds on and whose means are the
      centres (default: the flattened embeddings).
    From them this class gives ``init_clusters`` (k-means++), ``update_clusters`` (Lloyd step: ``S_i =
    argmin_j loss_ij``, centres = members' means), ``assign`` (eq. 2: ``argmin_j loss_ij``) and
    ``batch_clusters`` (the clusters a training batch is scored under). Each head keeps its own ``forward``
    and ``embed``.

    Args:
        num_classes: the dataset's number of classes: the number of clusters C unless ``num_clusters`` is set.
        seed: ``random_state`` of the k-means++ seeding, >= 0.
        num_clusters: C when it is not the number of classes; 1 turns the head into its standard single-model
            baseline through the same code (no centring, one model; the paper's "standard" panels).

    Attributes:
        num_clusters: C.
        state: ``ClusterState`` with ``centres`` (C, d) and ``assignment`` (N,) of the training split.
    """

    def __init__(self, num_classes: int, seed: int, num_clusters: int | None = None):
        super().__init__()
        if num_clusters is None:
            self.num_clusters = checks.num_clusters(num_classes)
        else:
            self.num_clusters = int(checks.at_least("num_clusters", num_clusters, 1))
        self.state = ClusterState(self.num_clusters, seed=int(checks.at_least("seed", seed, 0)))

    def cluster_losses(self, embeddings: Tensor, **split: Any) -> Tensor:
        """(N, C) each point's loss under each cluster's model; every subclass defines it."""
        raise NotImplementedError

    def cluster_points(self, embeddings: Tensor, **split: Any) -> Tensor:
        """(N, d) the points k-means++ seeds on and the centres average: here the flattened embeddings."""
        return embeddings.flatten(1)

    def _centres(self) -> Tensor:
        """(C, d) the centres; a clear error before ``init_clusters`` has run."""
        return self.state.require().centres

    def _assignment(self) -> Tensor:
        """(N,) ``S`` of the training split; a clear error before ``init_clusters`` has run."""
        return self.state.require().assignment

    def batch_clusters(self, embeddings: Tensor, index: Tensor | None = None, **batch: Any) -> Tensor:
        """The cluster (N,) of each row of a batch: ``S`` at its rows ``index`` in the training split, or eq. 2
        (``assign``) for rows without an index."""
        assignment = self._assignment()
        return self.assign(embeddings, **batch) if index is None else assignment[index]

    @torch.no_grad()
    def init_clusters(self, embeddings: Tensor, **split: Any) -> None:
        """S by k-means++ seeds (``random_state=seed``) and nearest seed; centres = members' means."""
        self.state.init_kmeanspp(self.cluster_points(embeddings, **split))

    @torch.no_grad()
    def update_clusters(self, embeddings: Tensor, **split: Any) -> None:
        """Lloyd step on the whole training split: ``S_i = argmin_j l_j(x_i)``, centres = members' means."""
        self.state.lloyd_step(self.cluster_losses(embeddings, **split), self.cluster_points(embeddings, **split))

    @torch.no_grad()
    def assign(self, embeddings: Tensor, **split: Any) -> Tensor:
        """Eq. 2: each point's cluster (N,) is the one whose model gives it the smallest loss."""
        return self.cluster_losses(embeddings, **split).argmin(dim=1)
