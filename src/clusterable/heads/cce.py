"""Categorical cross-entropy on a linear classifier, read as an attractive-repulsive loss (Kenyon-Dean et al.
2019, COREL eq. 2)."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from clusterable.heads.attract_repel import AttractRepelHead, labelled_mean


class CCELoss(AttractRepelHead):
    """Softmax cross-entropy over the logits ``h W^T + b`` of a linear classifier.

    COREL eq. 2 in attractive-repulsive form, per labelled sample i:
    ``L_i = -(h_i . w_{y_i} + b_{y_i}) + log sum_k exp(h_i . w_k + b_k)``, so ``loss = attract + repel``
    with ``attract`` the mean of the first term and ``repel`` the mean log-sum-exp. The bias follows the
    authors' code (repository ``kiankd/corel2019``, ``corel/prediction_functions.py``,
    ``get_cce_predictions``); it is part of the true-class logit in ``attract``.

    Fidelity to the authors' code: their ``CORELWrapper`` (``corel/corel_wrapper.py``, ``reset_parameters``)
    initialises the bias at random, ``xavier_normal_`` on a (1, K) tensor (normal with std ``sqrt(2 / (1 + K))``,
    0.43 for K = 10); ours starts at zero, so every class starts with the logit ``h . w_k``. Only the
    initialisation differs (the bias is trained in both), so we keep zero and leave no option; the loss itself
    (torch's ``CrossEntropyLoss`` there) agrees with theirs on the same weights.

    Args:
        num_classes: K, at least 2.
        embedding_dim: D, at least 1.
        lr: learning rate of this head's parameter group, > 0 (None: the optimizer's).
        train_class_vectors: train ``weight`` (true) or keep it at its initialisation (``AttractRepelHead``);
            the bias is trained either way.

    Attributes:
        weight: (K, D) class vectors, xavier-normal initialised as in the authors' code.
        bias: (K,) initialised to zero (the authors' code: at random, see above).
    """

    def __init__(self, num_classes: int, embedding_dim: int, lr: float | None = None, train_class_vectors: bool = True):
        super().__init__(num_classes, embedding_dim, lr, train_class_vectors)
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
