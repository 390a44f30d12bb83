"""Categorical cross-entropy on a linear classifier, read as an attractive-repulsive loss (COREL eq. 2)."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


def check_head_args(num_classes: int, embedding_dim: int) -> None:
    """Raise ValueError unless ``num_classes >= 2`` and ``embedding_dim >= 1``."""
    if num_classes < 2:
        raise ValueError(f"num_classes must be >= 2, got {num_classes}")
    if embedding_dim < 1:
        raise ValueError(f"embedding_dim must be >= 1, got {embedding_dim}")


def check_lam(lam: float) -> None:
    """Raise ValueError unless the attraction weight ``lam`` lies in [0, 1]."""
    if not 0.0 <= lam <= 1.0:
        raise ValueError(f"lam must be in [0, 1], got {lam}")


def labelled_mean(per_sample: torch.Tensor, labelled: torch.Tensor) -> torch.Tensor:
    """Mean of ``per_sample`` (N,) over the rows where ``labelled`` (N,) bool is true; 0 if there are none.

    Masking with ``where`` rather than boolean indexing keeps shapes static (no host sync) and leaves a zero
    loss that is still connected to the graph when a batch has no labelled sample.
    """
    total = torch.where(labelled, per_sample, torch.zeros_like(per_sample)).sum()
    return total / labelled.sum().clamp(min=1).to(per_sample.dtype)


class CCELoss(nn.Module):
    """Softmax cross-entropy over the logits ``h W^T + b`` of a linear classifier.

    COREL eq. 2 in attractive-repulsive form, per labelled sample i:
    ``L_i = -(h_i . w_{y_i} + b_{y_i}) + log sum_k exp(h_i . w_k + b_k)``, so ``loss = attract + repel``
    with ``attract`` the mean of the first term and ``repel`` the mean log-sum-exp. The bias follows the
    authors' code (``get_cce_predictions``); it is part of the true-class logit in ``attract``.

    Args:
        num_classes: K, at least 2.
        embedding_dim: D, at least 1.
        lr: learning rate of this head's parameter group (None: the optimizer's).

    Attributes:
        weight: (K, D) class vectors, xavier-normal initialised as in the authors' code.
        bias: (K,) initialised to zero.
    """

    def __init__(self, num_classes: int, embedding_dim: int, lr: float | None = None, **kwargs):
        super().__init__()
        check_head_args(num_classes, embedding_dim)
        self.num_classes, self.embedding_dim, self.lr = int(num_classes), int(embedding_dim), lr
        self.weight = nn.Parameter(nn.init.xavier_normal_(torch.empty(self.num_classes, self.embedding_dim)))
        self.bias = nn.Parameter(torch.zeros(self.num_classes))

    def logits(self, embeddings: torch.Tensor) -> torch.Tensor:
        """(N, D) -> (N, K) logits ``h W^T + b``."""
        return F.linear(embeddings, self.weight, self.bias)

    def forward(self, embeddings: torch.Tensor, labels: torch.Tensor, **batch) -> dict[str, torch.Tensor]:
        """Losses averaged over the samples with ``labels >= 0``; embeddings (N, D), labels (N,) long."""
        logits = self.logits(embeddings)
        labelled = labels >= 0
        targets = labels.clamp(min=0)  # any valid class for unlabelled rows; they are masked out below
        cross_entropy = F.cross_entropy(logits, targets, reduction="none")
        true_logit = logits.gather(1, targets[:, None]).squeeze(1)
        return {
            "loss": labelled_mean(cross_entropy, labelled),
            "attract": labelled_mean(-true_logit, labelled),
            "repel": labelled_mean(torch.logsumexp(logits, dim=1), labelled),
        }
