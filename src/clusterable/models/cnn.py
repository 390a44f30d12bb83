"""COREL's image CNN (Kenyon-Dean et al. 2019): three convolutions (15, 30, 60 filters), each followed by 2x2
max-pooling, then two FC layers."""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor, nn

from clusterable import checks
from clusterable.models.ffnn import leaky_layers
from clusterable.models.images import image_shape


class CNN(nn.Module):
    """x (N, C, H, W) -> 3 x [Conv(k, same padding) -> LeakyReLU -> MaxPool 2] -> 2 x [Linear -> LeakyReLU] -> (N, D).

    Flat inputs of ``d = s^2`` features (scikit-learn's 8x8 digits) are viewed as one s x s channel
    (``clusterable.models.images``). Kernel size, FC widths and the LeakyReLU slope are not published in the paper (our
    defaults).

    Args:
        input_shape: ``[C, H, W]``, ``[H, W]`` or ``[d]`` with d a perfect square.
        channels: filters of the convolutions, each >= 1.
        kernel_size: a positive odd convolution size.
        hidden: widths of the FC layers, each >= 1; the last one is ``embedding_dim``.
        negative_slope: LeakyReLU slope, >= 0.
        dropout: dropout after each FC layer, in [0, 1).
    """

    def __init__(
        self,
        input_shape: Sequence[int],
        channels: Sequence[int] = (15, 30, 60),
        kernel_size: int = 3,
        hidden: Sequence[int] = (500, 500),
        negative_slope: float = 0.01,
        dropout: float = 0.0,
    ):
        super().__init__()
        channels, hidden = checks.widths("channels", channels), checks.widths("hidden", hidden)
        if kernel_size < 1 or kernel_size % 2 == 0:
            raise ValueError(f"kernel_size must be a positive odd integer, got {kernel_size}")
        negative_slope = float(checks.at_least("negative_slope", negative_slope, 0))
        dropout = checks.dropout(dropout)
        self.image_shape = image_shape(input_shape)
        convs: list[nn.Module] = []
        c_in = self.image_shape[0]
        for c in channels:
            convs += [nn.Conv2d(c_in, c, kernel_size, padding=kernel_size // 2), nn.LeakyReLU(negative_slope)]
            convs.append(nn.MaxPool2d(2, ceil_mode=True))  # ceil_mode keeps 8x8 inputs alive through 3 pools
            c_in = c
        self.features = nn.Sequential(*convs, nn.Flatten())
        with torch.no_grad():
            width = self.features(torch.zeros(1, *self.image_shape)).shape[1]
        self.head = nn.Sequential(*leaky_layers(width, hidden, negative_slope, dropout))
        self.embedding_dim = hidden[-1]

    def forward(self, x: Tensor) -> Tensor:
        return self.head(self.features(x.reshape(-1, *self.image_shape)))
