"""The hard cluster assignment that cluster-specific heads alternate with gradient steps.

Shared by every head that learns one representation per cluster (REFERENCE §4.2): the assignment ``S`` is
initialised by k-means++ seeds and nearest centre, then refined by Lloyd steps in which each point moves to the
cluster whose model gives it the smallest loss (the paper's eq. 2) and each centre becomes its members' mean.
"""

from __future__ import annotations

import torch
from sklearn.cluster import kmeans_plusplus
from torch import nn


class ClusterState(nn.Module):
    """Buffers ``centres`` (C, d) and ``assignment`` (N,) of the training set; saved with the checkpoint.

    Args:
        num_clusters: C, at least 2.
        seed: ``random_state`` of the k-means++ seeding (the authors' code uses 20).
    """

    def __init__(self, num_clusters: int, seed: int = 20):
        super().__init__()
        if num_clusters < 2:
            raise ValueError(f"num_clusters must be >= 2, got {num_clusters}")
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
    def initialised(self) -> bool:
        return self.assignment.numel() > 0

    def require(self) -> ClusterState:
        """``self``, once ``init_kmeanspp`` has run; a clear error before (a head used before training)."""
        if not self.initialised:
            raise RuntimeError(
                "the cluster assignment is empty: call init_clusters(...) on the training split first"
            )
        return self

    @torch.no_grad()
    def init_kmeanspp(self, x: torch.Tensor) -> None:
        """Each point to its nearest k-means++ seed, then centres = members' means (authors' code). x: (N, d)."""
        n = x.shape[0]
        if not self.num_clusters <= n:
            raise ValueError(
                f"num_clusters ({self.num_clusters}) must not exceed the number of samples ({n})"
            )
        seeds, _ = kmeans_plusplus(
            x.detach().cpu().double().numpy(), self.num_clusters, random_state=self.seed
        )
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
        self.centres = self.cluster_means(x, new, self.centres)
        return changed

    def cluster_means(
        self, x: torch.Tensor, assignment: torch.Tensor, fallback: torch.Tensor
    ) -> torch.Tensor:
        """(C, d) mean of the points of each cluster; an empty cluster keeps its ``fallback`` centre."""
        c = self.num_clusters
        sums = torch.zeros(c, x.shape[1], dtype=x.dtype, device=x.device).index_add_(0, assignment, x)
        counts = torch.bincount(assignment, minlength=c).to(x.dtype)
        means = sums / counts.clamp(min=1).unsqueeze(1)
        if fallback.shape == means.shape:
            means = torch.where(counts.unsqueeze(1) > 0, means, fallback)
        return means
