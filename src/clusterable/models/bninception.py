"""BN-Inception (Ioffe & Szegedy 2015, "Batch Normalization"), the ImageNet backbone of DSCL (Law et al. 2017),
Multi-Similarity (Wang et al. 2019), MLRC (Musgrave et al. 2020) and Boudiaf et al. 2020's BN-Inception runs.

Our own definition of the network those codes share: the Caffe model ported to PyTorch in Cadene's
``pretrainedmodels`` (repository ``Cadene/pretrained-models.pytorch``, ``pretrainedmodels/models/bninception.py``).
Every parameter and buffer has the name and shape it has there (``conv1_7x7_s2``, ``inception_3a_1x1_bn``, ...,
``last_linear``), so that the ImageNet weight file ``bn_inception-52deb4733.pth`` loads with ``strict=True``.
The blocks are built from a table instead of written out layer by layer; the computation is the same.

Input convention of those weights: BGR, range [0, 255], mean (104, 117, 128) (B, G, R) subtracted, std 1.
``clusterable.models.backbones`` converts RGB images in [0, 1] to that before this network sees them.
"""

from __future__ import annotations

from typing import NamedTuple

import torch
import torch.nn.functional as F
from torch import Tensor, nn

FEATURES = 1024  # channels of the last block's output (inception_5b)


class _Block(NamedTuple):
    """One inception block: input channels and the width of each branch (0: the branch is absent).

    A reducing block (``stride`` 2) has no 1x1 branch and no pool projection: its max-pooled input is concatenated
    as it is, and its 3x3 and second double-3x3 convolutions have stride 2.
    """

    name: str
    c_in: int
    c1x1: int
    c3x3_reduce: int
    c3x3: int
    double_reduce: int
    double: int
    pool: str  # "avg" (stride 1), "max" (stride 1, 5b) or "max2" (stride 2, reducing blocks)
    pool_proj: int
    stride: int = 1


# The widths of the Caffe model (Cadene's port); each block's output is the sum of its branch widths.
_BLOCKS = (
    _Block("inception_3a", 192, 64, 64, 64, 64, 96, "avg", 32),  # -> 256
    _Block("inception_3b", 256, 64, 64, 96, 64, 96, "avg", 64),  # -> 320
    _Block("inception_3c", 320, 0, 128, 160, 64, 96, "max2", 0, stride=2),  # -> 576
    _Block("inception_4a", 576, 224, 64, 96, 96, 128, "avg", 128),  # -> 576
    _Block("inception_4b", 576, 192, 96, 128, 96, 128, "avg", 128),  # -> 576
    _Block("inception_4c", 576, 160, 128, 160, 128, 160, "avg", 128),  # -> 608
    _Block("inception_4d", 608, 96, 128, 192, 160, 192, "avg", 128),  # -> 608
    _Block("inception_4e", 608, 0, 128, 192, 192, 256, "max2", 0, stride=2),  # -> 1056
    _Block("inception_5a", 1056, 352, 192, 320, 160, 224, "avg", 128),  # -> 1024
    _Block("inception_5b", 1024, 352, 192, 320, 192, 224, "max", 128),  # -> 1024
)


def _pool(kind: str) -> nn.Module:
    if kind == "avg":
        return nn.AvgPool2d(3, stride=1, padding=1, ceil_mode=True, count_include_pad=True)
    if kind == "max":
        return nn.MaxPool2d(3, stride=1, padding=1, ceil_mode=True)
    return nn.MaxPool2d(3, stride=2, ceil_mode=True)


class BNInception(nn.Module):
    """x (N, 3, H, W) BGR in [0, 255] minus the mean -> ``features`` (N, 1024, h, w) -> ``forward`` logits (N, K).

    ``forward`` is the ImageNet classifier (global average pooling, then ``last_linear``); encoders use
    ``features``. BatchNorm momentum is PyTorch's default, as in the Multi-Similarity and Boudiaf et al. copies of
    this network (Cadene's sets 0.9, a literal port of Caffe's moving-average fraction that PyTorch reads the other
    way round); it matters only when BatchNorm is not frozen, and it is not part of the weight file.

    Args:
        num_classes: outputs of ``last_linear`` (ImageNet: 1000, the size the weight file holds).
    """

    def __init__(self, num_classes: int = 1000):
        super().__init__()
        self.conv1_7x7_s2 = nn.Conv2d(3, 64, 7, stride=2, padding=3)
        self.conv1_7x7_s2_bn = nn.BatchNorm2d(64)
        self.pool1_3x3_s2 = nn.MaxPool2d(3, stride=2, ceil_mode=True)
        self.conv2_3x3_reduce = nn.Conv2d(64, 64, 1)
        self.conv2_3x3_reduce_bn = nn.BatchNorm2d(64)
        self.conv2_3x3 = nn.Conv2d(64, 192, 3, padding=1)
        self.conv2_3x3_bn = nn.BatchNorm2d(192)
        self.pool2_3x3_s2 = nn.MaxPool2d(3, stride=2, ceil_mode=True)
        for b in _BLOCKS:
            if b.c1x1:
                self._conv_bn(f"{b.name}_1x1", b.c_in, b.c1x1, 1)
            self._conv_bn(f"{b.name}_3x3_reduce", b.c_in, b.c3x3_reduce, 1)
            self._conv_bn(f"{b.name}_3x3", b.c3x3_reduce, b.c3x3, 3, b.stride)
            self._conv_bn(f"{b.name}_double_3x3_reduce", b.c_in, b.double_reduce, 1)
            self._conv_bn(f"{b.name}_double_3x3_1", b.double_reduce, b.double, 3)
            self._conv_bn(f"{b.name}_double_3x3_2", b.double, b.double, 3, b.stride)
            self.add_module(f"{b.name}_pool", _pool(b.pool))
            if b.pool_proj:
                self._conv_bn(f"{b.name}_pool_proj", b.c_in, b.pool_proj, 1)
        self.last_linear = nn.Linear(FEATURES, num_classes)

    def _conv_bn(self, name: str, c_in: int, c_out: int, kernel: int, stride: int = 1) -> None:
        self.add_module(name, nn.Conv2d(c_in, c_out, kernel, stride=stride, padding=kernel // 2))
        self.add_module(f"{name}_bn", nn.BatchNorm2d(c_out))

    def _unit(self, name: str, x: Tensor) -> Tensor:
        """Conv -> BatchNorm -> ReLU (Cadene's in-place ReLU overwrites the BatchNorm output: the same)."""
        return F.relu(getattr(self, f"{name}_bn")(getattr(self, name)(x)), inplace=True)

    def features(self, x: Tensor) -> Tensor:
        """x (N, 3, H, W) -> (N, 1024, h, w); h = w = 7 for 224 x 224 inputs."""
        x = self.pool1_3x3_s2(self._unit("conv1_7x7_s2", x))
        x = self._unit("conv2_3x3", self._unit("conv2_3x3_reduce", x))
        x = self.pool2_3x3_s2(x)
        for b in _BLOCKS:
            branches = [self._unit(f"{b.name}_1x1", x)] if b.c1x1 else []
            branches.append(self._unit(f"{b.name}_3x3", self._unit(f"{b.name}_3x3_reduce", x)))
            double = self._unit(f"{b.name}_double_3x3_reduce", x)
            double = self._unit(f"{b.name}_double_3x3_2", self._unit(f"{b.name}_double_3x3_1", double))
            branches.append(double)
            pooled = getattr(self, f"{b.name}_pool")(x)
            branches.append(self._unit(f"{b.name}_pool_proj", pooled) if b.pool_proj else pooled)
            x = torch.cat(branches, 1)
        return x

    def forward(self, x: Tensor) -> Tensor:
        """x (N, 3, H, W) -> ImageNet logits (N, num_classes)."""
        return self.last_linear(self.features(x).mean((2, 3)))


def feature_side(side: int) -> int:
    """The side of the feature map for an input side (224 -> 7); 0 if the network cannot take that side.

    The reducing blocks (3c, 4e) concatenate a stride-2 convolution (ceil of half the side) with a stride-2
    ceil-mode max-pool (floor of half the side, for a 3x3 window without padding): their input side must be even,
    else the branches disagree by one and ``torch.cat`` fails. Sides 31-38, 63-70, ..., 224 fit.
    """
    side = (side + 1) // 2  # conv1 7x7 stride 2, padding 3
    for _ in range(2):  # pool1, pool2: 3x3 stride 2, ceil mode, no padding: half the side, rounded down
        if side < 2:
            return 0
        side //= 2
    for _ in range(2):  # inception_3c, inception_4e
        if side < 2 or side % 2:
            return 0
        side //= 2
    return side
