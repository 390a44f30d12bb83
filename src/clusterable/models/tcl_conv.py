"""The shared convolutional encoder g_Omega of the tensorized contrastive model TCL (Sabanayagam et al. 2024,
§V.A: "two convolutional layers"; the layer sizes are the authors' code, repository
``mahalakshmi-sabanayagam/cluster_specific_representation``, ``exp_tensor_contrastive.ipynb``)."""

from __future__ import annotations

from collections.abc import Sequence

from torch import Tensor, nn

from clusterable import checks
from clusterable.models.images import image_shape


class TCLConv(nn.Module):
    """x (N, 1, 28, 28) -> 2 x [Conv k x k -> BatchNorm -> ReLU -> MaxPool 2 -> Dropout] -> flatten (N, D).

    The authors' network (32 then 64 filters of 5x5 without padding, dropout 0.3): on 28x28 images the
    flattened features are 64 x 4 x 4 = 1024 = ``embedding_dim``. In their code the next layers (1024 -> 512
    -> 128) belong to each cluster's network; here they are the per-cluster heads of
    ``TensorizedContrastive``. A flat input of ``d = s^2`` features is viewed as one s x s channel.

    Args:
        input_shape: ``[C, H, W]``, ``[H, W]`` or ``[d]`` with d a perfect square.
        channels: filters of the two convolutions (authors: 32, 64).
        kernel_size: convolution size (authors: 5).
        dropout: dropout after each block (authors: 0.3).
        out_dim: None keeps the flattened features as the embedding (authors); an integer adds a shared
            Linear + ReLU to that width.
    """

    def __init__(
        self,
        input_shape: Sequence[int],
        channels: Sequence[int] = (32, 64),
        kernel_size: int = 5,
        dropout: float = 0.3,
        out_dim: int | None = None,
    ):
        super().__init__()
        channels = checks.widths("channels", channels)
        kernel_size = int(checks.at_least("kernel_size", kernel_size, 1))
        dropout = checks.dropout(dropout)
        self.image_shape = image_shape(input_shape)
        blocks: list[nn.Module] = []
        c_in, side_h, side_w = self.image_shape
        for c in channels:
            side_h, side_w = (side_h - kernel_size + 1) // 2, (side_w - kernel_size + 1) // 2
            if min(side_h, side_w) < 1:
                raise ValueError(f"input_shape {list(input_shape)} is too small for {len(channels)} conv blocks")
            blocks += [
                nn.Conv2d(c_in, c, kernel_size),
                nn.BatchNorm2d(c),
                nn.ReLU(),
                nn.MaxPool2d(2),
                nn.Dropout(dropout),
            ]
            c_in = c
        blocks.append(nn.Flatten())
        width = c_in * side_h * side_w
        if out_dim is not None:
            if out_dim < 1:
                raise ValueError(f"out_dim must be >= 1 or null, got {out_dim}")
            blocks += [nn.Linear(width, int(out_dim)), nn.ReLU()]
            width = int(out_dim)
        self.features = nn.Sequential(*blocks)
        self.embedding_dim = width

    def forward(self, x: Tensor) -> Tensor:
        return self.features(x.reshape(x.shape[0], *self.image_shape))
