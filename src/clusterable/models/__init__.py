"""Encoders: ``nn.Module`` with ``embedding_dim``; ``forward(x) -> (N, embedding_dim)`` (``contracts.Encoder``).

Also the helpers that encoders and heads share: range checks of constructor arguments (``checks``) and the
reading of inputs as images (``images``). ``backbones`` holds the ImageNet-pretrained networks (ResNet-50,
GoogLeNet, BN-Inception) of the deep metric learning papers.
"""

from typing import Any

from clusterable.models.bninception import BNInception
from clusterable.models.cnn import CNN
from clusterable.models.ffnn import FFNN
from clusterable.models.identity import Identity
from clusterable.models.tcl_conv import TCLConv

__all__ = [
    "BNInception",
    "BNInceptionEncoder",
    "CNN",
    "FFNN",
    "GoogLeNet",
    "Identity",
    "PretrainedBackbone",
    "ResNet50",
    "TCLConv",
]
_BACKBONES = ("BNInceptionEncoder", "GoogLeNet", "PretrainedBackbone", "ResNet50")


def __getattr__(name: str) -> Any:
    # Imported on first use: backbones imports torchvision (about a second and a half), which every head
    # importing clusterable.models would otherwise pay.
    if name in _BACKBONES:
        from clusterable.models import backbones

        return getattr(backbones, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
