"""Safir 2022's DML Autoencoder (MS thesis, University of Georgia, §5.1, Algorithm 2): the plain DML's latent
decoded back to the input, the reconstruction error as the unsupervised loss that every sample, labelled or not,
contributes to."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch import Tensor, nn

from clusterable import checks
from clusterable.heads.semi_supervised import (
    REDUCTIONS,
    Reduction,
    Schedule,
    SemiSupervisedHead,
    decoder_mlp,
    flat_target,
    reconstruction_error,
)


class DMLAutoencoder(SemiSupervisedHead):
    """``z = W h + b`` (N, d) from the encoder output h (N, D), ``x^ = g(z)`` (N, d_in) by the decoder MLP; L_S is
    the metric loss on the labelled rows of z, ``L_U = recon = Rec(x, x^)`` on every row (``reconstruction_error``),
    with x the batch's ``targets`` if it has them, else its ``inputs`` (flattened, pixels in [0, 1]). The schedule
    (``SemiSupervisedHead``) combines them; α = 1 is a plain autoencoder (§6.1.3).

    Args:
        num_classes: K >= 2, passed to the metric head.
        embedding_dim: D >= 1, the encoder's output width.
        input_shape: the shape of one input; d_in = prod(input_shape).
        latent_dim: d >= 1 (the thesis's lsdim).
        metric: builds the metric-loss head (see ``SemiSupervisedHead``).
        schedule: ``alternate`` (the thesis) or ``joint``.
        alpha: α in (0, 1].
        gamma: γ >= 0 (joint schedule).
        decoder_hidden: widths of the decoder's hidden layers, each >= 1.
        recon_reduction: ``mean`` (squared error averaged over the rows and the d_in values: the thesis's
            ``MSE(x, x_hat)``, Algorithm 5, its only written reconstruction loss; §5.1 says "the
            reconstruction loss" alone) or ``sum`` (summed over the values, averaged over the rows: our first
            reading, from §4.3's Gaussian likelihood). Summed over 784 pixels, the reconstruction left the triplet
            term 1.8-2.9% of the encoder's gradient on Fashion-MNIST; averaged, R@1 rose from 81.5 to 84.0.
        negative_slope: the decoder's LeakyReLU slope, >= 0.

    Attributes:
        latent: the Linear layer D -> d; decoder: the decoder MLP; metric: the metric-loss head.
    """

    loss_parts = ("loss", "supervised", "recon")

    def __init__(
        self,
        num_classes: int,
        embedding_dim: int,
        input_shape: Sequence[int],
        latent_dim: int,
        metric: Callable[..., nn.Module],
        schedule: Schedule = "alternate",
        alpha: float = 0.5,
        gamma: float = 1.0,
        decoder_hidden: Sequence[int] = (500, 500),
        recon_reduction: Reduction = "mean",
        negative_slope: float = 0.01,
    ):
        super().__init__(num_classes, embedding_dim, latent_dim, metric, schedule, alpha, gamma)
        self.input_dim = checks.input_dim(input_shape)
        hidden = checks.widths("decoder_hidden", decoder_hidden)
        self.recon_reduction = checks.one_of("recon_reduction", recon_reduction, REDUCTIONS)
        slope = float(checks.at_least("negative_slope", negative_slope, 0))
        self.latent = nn.Linear(self.embedding_dim, self.latent_dim)
        self.decoder = decoder_mlp(self.latent_dim, hidden, self.input_dim, slope)

    def forward(
        self,
        embeddings: Tensor,
        labels: Tensor,
        inputs: Tensor | None = None,
        targets: Tensor | None = None,
        epoch: int = 0,
        **batch: Any,
    ) -> dict[str, Tensor]:
        """``loss``, ``supervised`` (L_S, in the epochs that weigh it) and ``recon`` (L_U) for embeddings (N, D),
        labels (N,) (-1 = unlabelled) and the batch's ``inputs`` (N, *input_shape) (or ``targets``)."""
        x = flat_target(inputs, targets, self.input_dim)
        z = self.latent(embeddings)
        recon = reconstruction_error(self.decoder(z), x.to(z.dtype), self.recon_reduction)
        return self.combine(z, labels, epoch, recon, {"recon": recon})

    @torch.no_grad()
    def embed(self, embeddings: Tensor, **split: Any) -> Tensor:
        """The latent z (N, d) of ``embeddings`` (N, D)."""
        return self.latent(embeddings)
