"""Gaussian-COREL: attractive-repulsive loss with similarity ``-gamma ||h - w||^2`` (Kenyon-Dean et al. 2019,
COREL eqs. 4, 6)."""

from __future__ import annotations

import math

import torch
from torch import nn

from clusterable.heads.attract_repel import AttractRepelHead, labelled_mean
from clusterable.models import checks


class GaussianCOREL(AttractRepelHead):
    """COREL eq. 6 with the Gaussian similarity of eq. 4.

    Per labelled sample i, with ``S_ik = -gamma ||h_i - w_k||^2``:
    ``L_i = lam * gamma ||h_i - w_{y_i}||^2 + (1 - lam) * log sum_k exp(S_ik)``.
    ``attract`` and ``repel`` are the means of the two terms without their weights, so
    ``loss = lam * attract + (1 - lam) * repel``. At ``lam = 0.5`` this is half the softmax cross-entropy over
    the logits ``S``; at ``lam = 1`` the optimal class vectors are the class centroids (COREL eq. 7).

    We follow the paper's equations. The authors' code (repository ``kiankd/corel2019``,
    ``corel/loss_functions.py``, ``GaussianARLoss``) differs:
    for ``lam != 0.5`` it multiplies the attraction by ``lam`` and then again in ``arloss``, so attraction
    gets ``lam^2`` (repulsion ``(1 - lam)^2`` likewise); for ``lam = 0.5`` it takes ``-log_softmax`` averaged
    over the whole N x K matrix, an extra ``1/K`` factor; and it makes gamma an unconstrained learnable
    parameter initialised to 0.5, while the paper keeps gamma fixed (the value is stripped from the text; 0.5
    is the code's initial value and matches the squared-error reading ``-||h - w||^2 / 2``).

    Args:
        num_classes: K, at least 2.
        embedding_dim: D, at least 1.
        lam: attraction weight in [0, 1].
        gamma: similarity scale, > 0.
        learn_gamma: make gamma a trained parameter (stored as log gamma so it stays positive).
        lr: learning rate of this head's parameter group, > 0 (None: the optimizer's).

    Attributes:
        weight: (K, D) class vectors, xavier-normal initialised as in the authors' code.
        log_gamma: () parameter if ``learn_gamma`` else buffer.
    """

    def __init__(
        self,
        num_classes: int,
        embedding_dim: int,
        lam: float = 0.5,
        gamma: float = 0.5,
        learn_gamma: bool = False,
        lr: float | None = None,
    ):
        super().__init__(num_classes, embedding_dim, lr)
        self.lam = checks.in_interval("lam", lam, 0, 1)
        log_gamma = torch.tensor(math.log(checks.positive("gamma", gamma)))
        if learn_gamma:
            self.log_gamma = nn.Parameter(log_gamma)
        else:
            self.register_buffer("log_gamma", log_gamma)

    @property
    def gamma(self) -> torch.Tensor:
        """() the similarity scale, always positive."""
        return self.log_gamma.exp()

    def squared_distances(self, embeddings: torch.Tensor) -> torch.Tensor:
        """(N, D) -> (N, K) ``||h_i - w_k||^2`` as ``|h|^2 - 2 h.w + |w|^2`` (no N x K x D tensor)."""
        sq = (
            embeddings.pow(2).sum(dim=1, keepdim=True)
            - 2.0 * embeddings @ self.weight.T
            + self.weight.pow(2).sum(dim=1)
        )
        return sq.clamp(min=0.0)  # rounding can make the expansion slightly negative

    def logits(self, embeddings: torch.Tensor) -> torch.Tensor:
        """(N, D) -> (N, K) similarities ``-gamma ||h_i - w_k||^2``; argmax = the nearest class vector."""
        return -self.gamma * self.squared_distances(embeddings)

    def forward(self, embeddings: torch.Tensor, labels: torch.Tensor, **batch) -> dict[str, torch.Tensor]:
        """Losses averaged over the samples with ``labels >= 0``; embeddings (N, D), labels (N,) long."""
        logits = self.logits(embeddings)
        labelled = labels >= 0
        targets = labels.clamp(min=0)
        attract = labelled_mean(-logits.gather(1, targets[:, None]).squeeze(1), labelled)
        repel = labelled_mean(torch.logsumexp(logits, dim=1), labelled)
        return {"loss": self.lam * attract + (1.0 - self.lam) * repel, "attract": attract, "repel": repel}
