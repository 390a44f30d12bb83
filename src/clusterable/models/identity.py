"""The identity encoder: flattens the input and learns nothing.

Used where the loss head owns the whole network, as the cluster-specific autoencoders do (REFERENCE §4.2):
each cluster's model sees the input centred on its own cluster mean, so no shared encoder comes before it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from torch import Tensor, nn


class Identity(nn.Module):
    """x (N, *input_shape) -> x.flatten(1) (N, prod(input_shape)); ``embedding_dim = prod(input_shape)``."""

    def __init__(self, input_shape: Sequence[int], **kwargs):
        super().__init__()
        if len(input_shape) == 0 or any(int(s) < 1 for s in input_shape):
            raise ValueError(
                f"input_shape must be a non-empty list of positive integers, got {list(input_shape)}"
            )
        self.input_shape = tuple(int(s) for s in input_shape)
        self.embedding_dim = math.prod(self.input_shape)

    def forward(self, x: Tensor) -> Tensor:
        return x.flatten(1)
