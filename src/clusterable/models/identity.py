"""The identity encoder: flattens the input and learns nothing.

Used where the loss head owns the whole network, as the cluster-specific models of Sabanayagam et al. 2024 do
(the autoencoders of §III, the VAE of §IV, the RBM of §VI): each cluster's model sees the input centred on its
own cluster mean, so no shared encoder comes before it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from torch import Tensor, nn

from clusterable import checks


class Identity(nn.Module):
    """x (N, *input_shape) -> x.flatten(1) (N, prod(input_shape)); ``embedding_dim = prod(input_shape)``.

    Args:
        input_shape: shape of one input, a non-empty list of positive integers.
    """

    def __init__(self, input_shape: Sequence[int]):
        super().__init__()
        self.input_shape = tuple(checks.widths("input_shape", input_shape))
        self.embedding_dim = math.prod(self.input_shape)

    def forward(self, x: Tensor) -> Tensor:
        return x.flatten(1)
