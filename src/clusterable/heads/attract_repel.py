"""What the classifying heads of COREL (Kenyon-Dean et al. 2019) share: class vectors, their own learning rate,
and a loss with an attractive and a repulsive part (the paper's eq. 1), averaged over the labelled samples."""

from __future__ import annotations

import torch
from torch import nn

from clusterable import checks


def labelled_mean(per_sample: torch.Tensor, labelled: torch.Tensor) -> torch.Tensor:
    """Mean of ``per_sample`` (N,) over the rows where ``labelled`` (N,) bool is true; 0 if there are none.

    Masking with ``where`` rather than boolean indexing keeps shapes static (no host sync) and leaves a zero
    loss that is still connected to the graph when a batch has no labelled sample.
    """
    total = torch.where(labelled, per_sample, torch.zeros_like(per_sample)).sum()
    return total / labelled.sum().clamp(min=1).to(per_sample.dtype)


class AttractRepelHead(nn.Module):
    """Base of the COREL heads: ``forward`` returns ``loss``, ``attract`` and ``repel``; each subclass defines
    ``logits(embeddings) -> (N, K)`` (a ``contracts.ClassifyingHead``) and how the two parts make the loss.

    Args:
        num_classes: K, at least 2.
        embedding_dim: D, at least 1.
        lr: learning rate of this head's parameter group, > 0 (None: the optimizer's; ``contracts.OwnLearningRate``).
        train_class_vectors: train the class vectors (the paper: "the loss can be further minimized by directly
            learning the weights", Kenyon-Dean et al. 2019, "Gaussian-COREL"); false keeps them at their random
            initialisation, a buffer. Learned, they collapse under attraction alone (λ = 1) on Fashion-MNIST,
            where the supplement's λ curves show no collapse (docs/corel.md, "The recipe recovered").

    Attributes:
        weight: (K, D) class vectors, xavier-normal initialised as in the authors' code (repository
            ``kiankd/corel2019``, ``corel/corel_wrapper.py``, ``CORELWrapper.reset_parameters``); a parameter, or a
            buffer with ``train_class_vectors: false``.
    """

    loss_parts = ("loss", "attract", "repel")

    def __init__(self, num_classes: int, embedding_dim: int, lr: float | None = None, train_class_vectors: bool = True):
        super().__init__()
        self.num_classes = int(checks.at_least("num_classes", num_classes, 2))
        self.embedding_dim = int(checks.at_least("embedding_dim", embedding_dim, 1))
        self.lr = checks.learning_rate(lr)
        self.train_class_vectors = checks.boolean("train_class_vectors", train_class_vectors)
        weight = nn.init.xavier_normal_(torch.empty(self.num_classes, self.embedding_dim))
        if self.train_class_vectors:
            self.weight = nn.Parameter(weight)
        else:
            self.register_buffer("weight", weight)
