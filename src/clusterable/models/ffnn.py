"""Feed-forward encoder (COREL's FFNN, Kenyon-Dean et al. 2019: fully connected LeakyReLU layers)."""

from __future__ import annotations

from collections.abc import Sequence

from torch import Tensor, nn

from clusterable import checks


def leaky_layers(width: int, hidden: Sequence[int], negative_slope: float, dropout: float) -> list[nn.Module]:
    """[Linear -> LeakyReLU (-> Dropout if ``dropout > 0``)] from ``width`` through each of ``hidden``."""
    layers: list[nn.Module] = []
    for h in hidden:
        layers += [nn.Linear(width, h), nn.LeakyReLU(negative_slope)]
        if dropout > 0:
            layers.append(nn.Dropout(dropout))
        width = h
    return layers


class FFNN(nn.Module):
    """x (N, *input_shape) -> flatten -> [Linear -> LeakyReLU -> Dropout] per hidden width -> h (N, hidden[-1]).

    The representation ``h`` is the last hidden layer, activation included (the "final hidden layer" the COREL
    losses act on), so ``embedding_dim == hidden[-1]``.

    Args:
        input_shape: shape of one input; the first layer reads ``prod(input_shape)`` features.
        hidden: widths of the hidden layers, each >= 1.
        negative_slope: LeakyReLU slope, >= 0.
        dropout: dropout after each hidden layer, in [0, 1).
        linear_output: the last layer without its activation and dropout, a linear embedding layer (as metric
            learning and DSCL put after a network); False keeps COREL's activated last hidden layer.
    """

    def __init__(
        self,
        input_shape: Sequence[int],
        hidden: Sequence[int] = (500, 500),
        negative_slope: float = 0.01,
        dropout: float = 0.0,
        linear_output: bool = False,
    ):
        super().__init__()
        hidden = checks.widths("hidden", hidden)
        dropout = checks.dropout(dropout)
        negative_slope = float(checks.at_least("negative_slope", negative_slope, 0))
        if not isinstance(linear_output, bool):
            raise ValueError(f"linear_output must be true or false, got {linear_output!r}")
        layers = leaky_layers(checks.input_dim(input_shape), hidden, negative_slope, dropout)
        if linear_output:  # drop what follows the last Linear: its activation (and dropout)
            last = max(i for i, m in enumerate(layers) if isinstance(m, nn.Linear))
            layers = layers[: last + 1]
        self.net = nn.Sequential(nn.Flatten(), *layers)
        self.embedding_dim = hidden[-1]

    @property
    def embedding_layer(self) -> nn.Linear:
        """The last Linear layer (its LeakyReLU and dropout have no parameters): DSCL's "last layer"."""
        return [m for m in self.net if isinstance(m, nn.Linear)][-1]

    def forward(self, x: Tensor) -> Tensor:
        return self.net(x)
