"""Safir 2022's plain DML (MS thesis, University of Georgia, §5, Algorithm 1): a metric loss on a linear latent
layer over the encoder, trained on the labelled samples only."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import Tensor, nn

from clusterable import checks
from clusterable.contracts import NeedsBatchOf
from clusterable.heads.semi_supervised import Schedule, SemiSupervisedHead


class DML(SemiSupervisedHead):
    """``z = W h + b`` (N, d) from the encoder output h (N, D); ``L = gamma L_S`` with L_S the metric loss on the
    labelled rows of z (Algorithm 1: ``c = m(z, y)``, so gamma = 1 is the thesis's model).

    The thesis's DML has no unsupervised loss and no α (Table 6.5: "the DML models do not take any alpha value"): the
    only schedule that makes sense for it is ``joint`` every epoch; ``alternate`` would leave every other epoch with
    nothing to train, and is refused. A batch without labelled rows gives loss 0 (connected to the graph).

    Args:
        num_classes: K >= 2, passed to the metric head.
        embedding_dim: D >= 1, the encoder's output width.
        latent_dim: d >= 1 (the thesis's lsdim).
        metric: builds the metric-loss head (see ``SemiSupervisedHead``).
        schedule: must be ``joint``.
        gamma: γ > 0, the weight of L_S.

    Attributes:
        latent: the Linear layer D -> d; metric: the metric-loss head.
    """

    loss_parts = ("loss", "supervised")

    def __init__(
        self,
        num_classes: int,
        embedding_dim: int,
        latent_dim: int,
        metric: Callable[..., nn.Module],
        schedule: Schedule = "joint",
        gamma: float = 1.0,
    ):
        if schedule == "alternate":
            raise ValueError(
                "schedule must be joint for DML: it has no unsupervised loss, so the alternate schedule's "
                "unsupervised epochs would train nothing (the thesis's DML has no alpha)"
            )
        checks.positive("gamma", gamma)  # L = gamma L_S: gamma = 0 trains nothing
        # alpha is not used by the joint schedule: 1.0 only passes the base class's check
        super().__init__(num_classes, embedding_dim, latent_dim, metric, schedule, alpha=1.0, gamma=gamma)
        self.latent = nn.Linear(self.embedding_dim, self.latent_dim)

    @property
    def min_batch_size(self) -> int:
        """``contracts.NeedsBatchOf``: DML's loss is its metric loss alone, so the rows that one needs (1 for a
        metric head that declares none: center loss)."""
        return self.metric.min_batch_size if isinstance(self.metric, NeedsBatchOf) else 1

    def forward(self, embeddings: Tensor, labels: Tensor, epoch: int = 0, **batch: Any) -> dict[str, Tensor]:
        """``loss = gamma L_S`` and ``supervised = L_S`` for embeddings (N, D), labels (N,) (-1 = unlabelled)."""
        return self.combine(self.latent(embeddings), labels, epoch, None, {})

    @torch.no_grad()
    def embed(self, embeddings: Tensor, **split: Any) -> Tensor:
        """The latent z (N, d) of ``embeddings`` (N, D)."""
        return self.latent(embeddings)
