"""Inputs read as images: the one place that turns an input shape into (channels, height, width).

Image encoders (``CNN``, ``TCLConv``) and the elastic positives of ``TensorizedContrastive`` accept an input shape
``[C, H, W]``, ``[H, W]`` (one channel) or a flat ``[d]`` with ``d = s^2`` (one s x s channel, e.g.
scikit-learn's 8x8 digits as 64 features).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from torch import Tensor


def image_shape(input_shape: Sequence[int]) -> tuple[int, int, int]:
    """(C, H, W) of one input of shape ``[C, H, W]``, ``[H, W]`` or ``[d]`` with d a perfect square.

    Raises:
        ValueError: any other shape, or a non-positive size.
    """
    shape = tuple(int(s) for s in input_shape)
    if shape and min(shape) >= 1:
        if len(shape) == 3:
            return shape  # type: ignore[return-value]
        if len(shape) == 2:
            return (1, *shape)  # type: ignore[return-value]
        side = math.isqrt(shape[0])
        if len(shape) == 1 and side * side == shape[0]:
            return (1, side, side)
    raise ValueError(f"input_shape must be [C, H, W], [H, W] or [d] with d a perfect square, got {list(shape)}")


def as_images(inputs: Tensor) -> Tensor:
    """(N, C, H, W) view of inputs (N, *input_shape), for any input shape ``image_shape`` accepts."""
    try:
        shape = image_shape(inputs.shape[1:])
    except ValueError:
        raise ValueError(
            f"inputs must be images (N, C, H, W), (N, H, W) or flat squares (N, s*s), got {tuple(inputs.shape)}"
        ) from None
    return inputs.reshape(inputs.shape[0], *shape)
