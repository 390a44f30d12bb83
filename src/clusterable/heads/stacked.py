"""Per-cluster layers stored as stacked tensors, so that all C clusters run in one batched matmul.

A per-cluster weight is one tensor (C, in, out) (bias (C, out)) rather than C modules: applying it to features
(N, in) or to per-cluster activations (C, N, in) is a single ``torch.matmul`` giving (C, N, out), and a shared
weight (in, out) broadcasts over the clusters in the same call. Each point's own cluster is then picked from the
(C, N, ...) result. No Python loop over clusters anywhere (forward, backward or the Lloyd step).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
from torch import Tensor, nn


def uniform_weight(shape: Sequence[int]) -> nn.Parameter:
    """A weight (in, out), or a per-cluster stack (C, in, out), drawn as ``nn.Linear`` draws its weight:
    uniform in ``±1/sqrt(in)``."""
    bound = 1.0 / math.sqrt(shape[-2])
    return nn.Parameter(torch.empty(*shape).uniform_(-bound, bound))


def stacked_linear(c: int, fan_in: int, fan_out: int) -> tuple[nn.Parameter, nn.Parameter]:
    """C independent Linear layers: weight (C, in, out) and bias (C, out), both drawn like ``nn.Linear``'s."""
    weight = uniform_weight((c, fan_in, fan_out))
    bound = 1.0 / math.sqrt(fan_in)
    return weight, nn.Parameter(torch.empty(c, fan_out).uniform_(-bound, bound))


def apply_all(h: Tensor, weight: Tensor, bias: Tensor | None = None) -> Tensor:
    """Every cluster's layer at once: ``h`` (N, in) or (C, N, in) @ ``weight`` (C, in, out) [+ ``bias`` (C, out)]
    -> (C, N, out). A shared weight (in, out) on (C, N, in) gives (C, N, out) too."""
    out = torch.matmul(h, weight)
    return out if bias is None else out + bias.unsqueeze(1)


def pick(per_cluster: Tensor, cluster: Tensor) -> Tensor:
    """(C, N, ...) -> (N, ...): row i taken from cluster ``cluster[i]`` (``cluster`` (N,) long)."""
    return per_cluster[cluster, torch.arange(len(cluster), device=per_cluster.device)]
