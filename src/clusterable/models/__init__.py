"""Encoders: ``nn.Module`` with ``embedding_dim``; ``forward(x) -> (N, embedding_dim)``."""

from clusterable.models.cnn import CNN
from clusterable.models.ffnn import FFNN

__all__ = ["CNN", "FFNN"]
