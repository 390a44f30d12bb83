"""Cosine-COREL: attractive-repulsive loss with cosine similarity (Kenyon-Dean et al. 2019, COREL eqs. 3, 5)."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from clusterable import checks
from clusterable.heads.attract_repel import AttractRepelHead, labelled_mean


class CosineCOREL(AttractRepelHead):
    """COREL eq. 5 with the cosine similarity of eq. 3.

    Per labelled sample i, with ``C_ik = cos(h_i, w_k)``:
    ``L_i = lam * (-C_{i y_i}) + (1 - lam) * max(0, max_{k != y_i} C_ik)^2``.
    The ``max(0, .)`` is the authors' code (repository ``kiankd/corel2019``, ``corel/loss_functions.py``,
    ``CosineARLoss``): it zeroes the true-class entry and takes the row maximum, so a sample whose wrong-class
    cosines are all negative is not repelled further. ``attract`` and ``repel`` are the means of the two terms
    without their weights, so
    ``loss = lam * attract + (1 - lam) * repel``.
    There is no softmax and no scale parameter.

    Args:
        num_classes: K, at least 2.
        embedding_dim: D, at least 1.
        lam: attraction weight in [0, 1].
        eps: lower bound on the norms of ``h`` and ``w`` when normalising (a zero vector gets cosine 0).
        lr: learning rate of this head's parameter group, > 0 (None: the optimizer's).
        train_class_vectors: train the class vectors (true) or keep them at their initialisation
            (``AttractRepelHead``).

    Attributes:
        weight: (K, D) class vectors, xavier-normal initialised as in the authors' code.
    """

    # λ may differ between the members of a stacked grid (contracts.StacksScalars): used in arithmetic only.
    stacked_scalars = ("lam",)

    def __init__(
        self,
        num_classes: int,
        embedding_dim: int,
        lam: float = 0.5,
        eps: float = 1e-8,
        lr: float | None = None,
        train_class_vectors: bool = True,
    ):
        super().__init__(num_classes, embedding_dim, lr, train_class_vectors)
        self.lam = checks.in_interval("lam", lam, 0, 1)
        self.eps = checks.positive("eps", eps)

    def logits(self, embeddings: torch.Tensor) -> torch.Tensor:
        """(N, D) -> (N, K) cosine similarities ``cos(h_i, w_k)`` in [-1, 1]."""
        h = F.normalize(embeddings, dim=1, eps=self.eps)
        w = F.normalize(self.weight, dim=1, eps=self.eps)
        return h @ w.T

    def forward(self, embeddings: torch.Tensor, labels: torch.Tensor, **batch) -> dict[str, torch.Tensor]:
        """Losses averaged over the samples with ``labels >= 0``; embeddings (N, D), labels (N,) long."""
        cos = self.logits(embeddings)
        labelled = labels >= 0
        targets = labels.clamp(min=0)[:, None]
        attract = labelled_mean(-cos.gather(1, targets).squeeze(1), labelled)
        # zeroing the true class before the row max gives max(0, max_{k != y} cos), as in the authors' code
        hardest_wrong = cos.scatter(1, targets, 0.0).amax(dim=1)
        repel = labelled_mean(hardest_wrong.pow(2), labelled)
        return {"loss": self.lam * attract + (1.0 - self.lam) * repel, "attract": attract, "repel": repel}
