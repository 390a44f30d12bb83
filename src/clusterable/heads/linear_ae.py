"""The standard linear autoencoders AE1-AE3 of the CSRL paper (Sabanayagam et al. 2024, §III.B).

The baselines against which the cluster-specific (tensorized) autoencoders are compared. The head owns the
whole network; pair it with the identity encoder (``src/clusterable/conf/model/identity.yaml``), so ``embeddings``
are the flattened inputs.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal, get_args

import torch
import torch.nn.functional as F
from torch import nn

from clusterable import checks

Arch = Literal["ae1", "ae2", "ae3"]
ARCHS: tuple[str, ...] = get_args(Arch)


def linear_stack(widths: Sequence[int]) -> nn.Sequential:
    """Bias-free Linear layers widths[0] -> widths[1] -> ... with no activation (the authors' linear AEs)."""
    return nn.Sequential(*(nn.Linear(a, b, bias=False) for a, b in zip(widths[:-1], widths[1:], strict=True)))


class LinearAE(nn.Module):
    """A bias-free linear autoencoder with the paper's widths; the embedding is the encoder's output.

    ``arch``: ``"ae1"`` d -> 1 -> d; ``"ae2"`` d -> 2 -> 1 -> 2 -> d; ``"ae3"`` d -> 2 -> C -> 2 -> d.
    Parameter counts (the paper's Fig. 2 and 7, right; the authors' code, repository
    ``mahalakshmi-sabanayagam/cluster_specific_representation``, ``src/models.py``): d = 5, C = 2: 10 / 24 / 28;
    MNIST (d = 784, C = 5): 1568 / 3140 / 3156.

    Loss per batch (N samples): ``mean_i MSE(AE(x_i), t_i) + lam * mean_i ||z_i||^2`` with ``MSE`` the mean
    over the d features, ``z_i`` the embedding and ``t_i`` the target (the clean point when de-noising, else
    ``x_i``). The authors train the standard AE with plain MSE (``lam = 0``), Adam with ``weight_decay=0.1``
    and batch size 1 (``src/train.py``, ``train_AE``); the optimizer and batch size are configured elsewhere.

    Args:
        arch: one of ``"ae1"``, ``"ae2"``, ``"ae3"``.
        input_shape: shape of one input; d = prod(input_shape).
        num_classes: C, the number of true clusters (AE3's embedding width), at least 1.
        lam: weight of the embedding penalty, >= 0.
    """

    loss_parts = ("loss", "recon", "reg")
    stacked_scalars = ("lam",)  # may differ between the members of a stacked grid (contracts.StacksScalars)

    def __init__(self, arch: Arch, input_shape: Sequence[int], num_classes: int, lam: float = 0.0):
        super().__init__()
        self.arch = checks.one_of("arch", arch, ARCHS)
        self.num_classes = int(checks.at_least("num_classes", num_classes, 1))
        self.lam = float(checks.at_least("lam", lam, 0))
        self.input_dim = checks.input_dim(input_shape)
        widths = {"ae1": [1], "ae2": [2, 1], "ae3": [2, self.num_classes]}[arch]
        self.encoder = linear_stack([self.input_dim, *widths])
        self.decoder = linear_stack([*reversed(widths), self.input_dim])
        self.embedding_dim = widths[-1]

    def embed(self, embeddings: torch.Tensor, **batch) -> torch.Tensor:
        """The encoder's output (N, m) for inputs (N, d); evaluators run k-means on it."""
        return self.encoder(embeddings.flatten(1))

    @torch.no_grad()
    def reconstruct(self, embeddings: torch.Tensor, **batch) -> torch.Tensor:
        """``AE(x)`` (N, d) for inputs (N, d): the de-noised points when the inputs are noisy."""
        return self.decoder(self.encoder(embeddings.flatten(1)))

    def forward(
        self, embeddings: torch.Tensor, labels: torch.Tensor, targets: torch.Tensor | None = None, **batch
    ) -> dict[str, torch.Tensor]:
        """``embeddings`` (N, d) flattened inputs; ``targets`` (N, *input_shape), None: reconstruct the input.

        Returns ``loss`` = ``recon + lam * reg`` with ``recon`` the MSE and ``reg`` the mean ``||z||^2``.
        """
        x = embeddings.flatten(1)
        target = x if targets is None else targets.flatten(1)
        z = self.encoder(x)
        recon = F.mse_loss(self.decoder(z), target)
        reg = z.pow(2).sum(dim=1).mean()
        return {"loss": recon + self.lam * reg, "recon": recon, "reg": reg}
