"""Feed-forward encoder (COREL's FFNN: two fully connected LeakyReLU layers)."""

from __future__ import annotations

import math
from collections.abc import Sequence

from torch import Tensor, nn


def check_widths(name: str, widths: Sequence[int]) -> list[int]:
    widths = [int(w) for w in widths]
    if not widths or any(w < 1 for w in widths):
        raise ValueError(f"{name} must be a non-empty list of positive integers, got {list(widths)}")
    return widths


class FFNN(nn.Module):
    """x (N, *input_shape) -> flatten -> [Linear -> LeakyReLU -> Dropout] per hidden width -> h (N, hidden[-1]).

    The representation ``h`` is the last hidden layer, activation included (the "final hidden layer" the COREL
    losses act on), so ``embedding_dim == hidden[-1]``.
    """

    def __init__(
        self,
        input_shape: Sequence[int],
        hidden: Sequence[int] = (500, 500),
        negative_slope: float = 0.01,
        dropout: float = 0.0,
        **kwargs,
    ):
        super().__init__()
        hidden = check_widths("hidden", hidden)
        if not 0 <= dropout < 1:
            raise ValueError(f"dropout must be in [0, 1), got {dropout}")
        if negative_slope < 0:
            raise ValueError(f"negative_slope must be >= 0, got {negative_slope}")
        layers: list[nn.Module] = [nn.Flatten()]
        width = math.prod(input_shape)
        for h in hidden:
            layers += [nn.Linear(width, h), nn.LeakyReLU(negative_slope)]
            if dropout > 0:
                layers.append(nn.Dropout(dropout))
            width = h
        self.net = nn.Sequential(*layers)
        self.embedding_dim = width

    def forward(self, x: Tensor) -> Tensor:
        return self.net(x)
