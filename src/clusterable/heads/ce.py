"""Cross-entropy as Boudiaf et al. (2020, "A unifying mutual information view of metric learning: cross-entropy vs.
pairwise losses", ECCV) train it for deep metric learning: dropout, a zero-initialised linear classifier with bias,
and their form of label smoothing."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from clusterable import checks
from clusterable.heads.attract_repel import labelled_mean


class CrossEntropy(nn.Module):
    """Softmax cross-entropy of a linear classifier against smoothed targets (Boudiaf et al. 2020, §5.3).

    Per labelled sample i with logits ``z_i = W dropout(h_i) + b`` (K,) and ``p_i = softmax(z_i)``, the target
    distribution ``q_i`` puts ``1 - eps`` on the true class and ``eps / (K - 1)`` on each of the other K - 1
    classes, and ``L_i = KL(q_i || p_i) = sum_k q_ik (log q_ik - log p_ik)``; ``loss`` is the mean over the
    labelled samples. This is the authors' ``SmoothCrossEntropy`` (repository ``jeromerony/dml_cross_entropy``,
    ``utils/utils.py``): a KL divergence, i.e. the cross-entropy against ``q`` minus the constant entropy of ``q``,
    so the gradient is the cross-entropy's and a perfect fit scores 0. It is not torch's ``label_smoothing``,
    whose target puts ``eps / K`` on every class, the true one included (``1 - eps + eps / K`` there).

    The classifier follows the authors' code (``models/base_model.py``): dropout on the features before a linear
    layer with bias, weight and bias initialised to zero (so every class starts with the same logit).
    ``dropout`` is an ``nn.Dropout``: active in training mode only, so ``logits`` in eval mode is the plain linear
    map. Where their evaluation and model selection differ from ours (the first neighbour dropped, lone queries
    as misses, R@1 rounded with ties to the later epoch, the untrained network a candidate), the options that
    reproduce them are ``evaluation.retrieval.RetrievalMetrics``'s ``self_match``/``lone_queries`` and
    ``callbacks.BoudiafCheckpoint``.

    Args:
        num_classes: K, at least 2.
        embedding_dim: D, at least 1.
        smoothing: eps, in [0, 1) (0: the plain cross-entropy).
        dropout: dropout rate on the embeddings before the classifier, in [0, 1).
        lr: learning rate of this head's parameter group, > 0 (None: the optimizer's).

    Attributes:
        weight: (K, D) class vectors, zero-initialised.
        bias: (K,) zero-initialised.
    """

    loss_parts = ("loss",)

    def __init__(
        self,
        num_classes: int,
        embedding_dim: int,
        smoothing: float = 0.1,
        dropout: float = 0.5,
        lr: float | None = None,
    ):
        super().__init__()
        self.num_classes = int(checks.at_least("num_classes", num_classes, 2))
        self.embedding_dim = int(checks.at_least("embedding_dim", embedding_dim, 1))
        self.smoothing = checks.in_interval("smoothing", smoothing, 0, 1, open_high=True)
        self.dropout = nn.Dropout(checks.dropout(dropout))
        self.lr = checks.learning_rate(lr)
        self.weight = nn.Parameter(torch.zeros(self.num_classes, self.embedding_dim))
        self.bias = nn.Parameter(torch.zeros(self.num_classes))
        eps, off = self.smoothing, self.smoothing / (self.num_classes - 1)
        # sum_k q_k log q_k, a constant (0 log 0 = 0): subtracting it turns the cross-entropy against q into the KL
        self._neg_entropy = (math.log(1 - eps) * (1 - eps)) + (eps * math.log(off) if eps > 0 else 0.0)

    def logits(self, embeddings: torch.Tensor) -> torch.Tensor:
        """(N, D) -> (N, K) logits ``W dropout(h) + b`` (no dropout in eval mode)."""
        return F.linear(self.dropout(embeddings), self.weight, self.bias)

    def forward(self, embeddings: torch.Tensor, labels: torch.Tensor, **batch) -> dict[str, torch.Tensor]:
        """KL to the smoothed targets averaged over the samples with ``labels >= 0``; embeddings (N, D), labels (N,)."""
        log_p = F.log_softmax(self.logits(embeddings), dim=1)
        labelled = labels >= 0
        targets = labels.clamp(min=0)  # any valid class for unlabelled rows; they are masked out below
        true = log_p.gather(1, targets[:, None]).squeeze(1)
        others = log_p.sum(dim=1) - true
        off = self.smoothing / (self.num_classes - 1)
        # -sum_k q_k log p_k without building q (N, K): the true class weighs 1 - eps, every other eps / (K - 1)
        cross = -(1 - self.smoothing) * true - off * others
        return {"loss": labelled_mean(cross + self._neg_entropy, labelled)}
