"""Encoders: ``nn.Module`` with ``embedding_dim``; ``forward(x) -> (N, embedding_dim)`` (``contracts.Encoder``).

Also the helpers that encoders and heads share: range checks of constructor arguments (``checks``) and the
reading of inputs as images (``images``).
"""

from clusterable.models.cnn import CNN
from clusterable.models.ffnn import FFNN
from clusterable.models.identity import Identity
from clusterable.models.tcl_conv import TCLConv

__all__ = ["CNN", "FFNN", "Identity", "TCLConv"]
