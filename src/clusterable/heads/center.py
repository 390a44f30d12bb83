"""Center loss (Wen et al. 2016), the baseline of COREL (Kenyon-Dean et al. 2019): cross-entropy plus a pull
towards class centres."""

from __future__ import annotations

import torch

from clusterable import checks
from clusterable.heads.attract_repel import labelled_mean
from clusterable.heads.cce import CCELoss


class CenterLoss(CCELoss):
    """Cross-entropy on a linear classifier plus ``lam`` times a centre term (COREL eq. 8, Wen et al. eq. 5).

    Per labelled sample i: ``L_i = CE_i + lam * 0.5 * ||h_i - c_{y_i}||^2``; ``repel`` is the mean CE (the
    repulsive part of eq. 2), ``attract`` the mean centre term without ``lam``, so
    ``loss = repel + lam * attract``. Wen et al. sum the centre term over the mini-batch; we average it, like
    every other term here.

    The centres ``c`` (K, D) are a buffer: saved in checkpoints, never touched by the optimizer. In training
    mode each forward, after computing the loss from the current centres, moves them by Wen et al.'s rule
    (their eq. 4) on the batch's labelled samples:
    ``c_j <- c_j - alpha * sum_i 1[y_i = j] (c_j - h_i) / (1 + sum_i 1[y_i = j])``.
    Under data parallelism every process updates its own copy from its own batch.

    Args:
        num_classes: K, at least 2.
        embedding_dim: D, at least 1.
        lam: weight of the centre term, in [0, 1] (COREL tunes it per setting; its values are not published).
        alpha: centre learning rate, in (0, 1] (not published in the COREL paper; 0.5 is Wen et al.'s default).
        lr: learning rate of this head's parameter group, > 0 (None: the optimizer's).
        train_class_vectors: train the class vectors (true) or keep them at their initialisation
            (``AttractRepelHead``).

    Attributes:
        weight: (K, D) class vectors of the classifier; bias: (K,).
        centres: (K, D) buffer, initialised to zero.
    """

    # λ and α may differ between the members of a stacked grid (contracts.StacksScalars).
    stacked_scalars = ("lam", "alpha")

    def __init__(
        self,
        num_classes: int,
        embedding_dim: int,
        lam: float = 0.5,
        alpha: float = 0.5,
        lr: float | None = None,
        train_class_vectors: bool = True,
    ):
        super().__init__(num_classes, embedding_dim, lr=lr, train_class_vectors=train_class_vectors)
        self.lam = checks.in_interval("lam", lam, 0, 1)
        self.alpha = checks.in_interval("alpha", alpha, 0, 1, open_low=True)
        self.register_buffer("centres", torch.zeros(self.num_classes, self.embedding_dim))

    def forward(self, embeddings: torch.Tensor, labels: torch.Tensor, **batch) -> dict[str, torch.Tensor]:
        """Losses averaged over the samples with ``labels >= 0``; embeddings (N, D), labels (N,) long."""
        cce = super().forward(embeddings, labels)
        labelled = labels >= 0
        targets = labels.clamp(min=0)
        centre_term = 0.5 * (embeddings - self.centres[targets]).pow(2).sum(dim=1)
        attract = labelled_mean(centre_term, labelled)
        if self.training:
            self.update_centres(embeddings, labels)
        return {"loss": cce["loss"] + self.lam * attract, "attract": attract, "repel": cce["loss"]}

    @torch.no_grad()
    def update_centres(self, embeddings: torch.Tensor, labels: torch.Tensor) -> None:
        """One step of Wen et al.'s centre update from embeddings (N, D), labels (N,); -1 rows are skipped."""
        labelled = (labels >= 0).to(self.centres.dtype)
        targets = labels.clamp(min=0)
        h = embeddings.detach().to(self.centres.dtype)
        counts = torch.zeros_like(self.centres[:, 0]).index_add_(0, targets, labelled)
        # sum_i 1[y_i = j] (c_j - h_i) = n_j c_j - sum_{i: y_i = j} h_i
        member_sums = torch.zeros_like(self.centres).index_add_(0, targets, h * labelled[:, None])
        delta = (counts[:, None] * self.centres - member_sums) / (1.0 + counts[:, None])
        self.centres.sub_(self.alpha * delta)
