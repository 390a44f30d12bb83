"""COREL's image CNN: three convolutions (15, 30, 60 filters), each followed by 2x2 max-pooling, then two FC layers."""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
from torch import Tensor, nn

from clusterable.models.ffnn import check_widths


class CNN(nn.Module):
    """x (N, C, H, W) -> 3 x [Conv(k, same padding) -> LeakyReLU -> MaxPool 2] -> 2 x [Linear -> LeakyReLU] -> (N, D).

    A flat input shape ``[d]`` with ``d`` a perfect square (scikit-learn's 8x8 digits) is viewed as one channel
    of ``sqrt(d) x sqrt(d)``. Kernel size, FC widths and the LeakyReLU slope are NF in the paper (our defaults).
    """

    def __init__(
        self,
        input_shape: Sequence[int],
        channels: Sequence[int] = (15, 30, 60),
        kernel_size: int = 3,
        hidden: Sequence[int] = (500, 500),
        negative_slope: float = 0.01,
        dropout: float = 0.0,
        **kwargs,
    ):
        super().__init__()
        channels, hidden = check_widths("channels", channels), check_widths("hidden", hidden)
        if kernel_size < 1 or kernel_size % 2 == 0:
            raise ValueError(f"kernel_size must be a positive odd integer, got {kernel_size}")
        self.image_shape = self._image_shape(input_shape)
        convs: list[nn.Module] = []
        c_in = self.image_shape[0]
        for c in channels:
            convs += [nn.Conv2d(c_in, c, kernel_size, padding=kernel_size // 2), nn.LeakyReLU(negative_slope)]
            convs.append(nn.MaxPool2d(2, ceil_mode=True))  # ceil_mode keeps 8x8 inputs alive through 3 pools
            c_in = c
        self.features = nn.Sequential(*convs, nn.Flatten())
        with torch.no_grad():
            width = self.features(torch.zeros(1, *self.image_shape)).shape[1]
        fcs: list[nn.Module] = []
        for h in hidden:
            fcs += [nn.Linear(width, h), nn.LeakyReLU(negative_slope)]
            if dropout > 0:
                fcs.append(nn.Dropout(dropout))
            width = h
        self.head = nn.Sequential(*fcs)
        self.embedding_dim = width

    @staticmethod
    def _image_shape(input_shape: Sequence[int]) -> tuple[int, int, int]:
        shape = tuple(int(s) for s in input_shape)
        if len(shape) == 3:
            return shape  # type: ignore[return-value]
        if len(shape) == 1 and math.isqrt(shape[0]) ** 2 == shape[0]:
            side = math.isqrt(shape[0])
            return (1, side, side)
        raise ValueError(f"CNN needs an image input shape (C, H, W) or a square flat one, got {list(shape)}")

    def forward(self, x: Tensor) -> Tensor:
        return self.head(self.features(x.reshape(-1, *self.image_shape)))
