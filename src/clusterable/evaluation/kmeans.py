"""Batched k-means in torch, for many clusters (Stanford Online Products: 60,502 x 512, k = 11,316 classes).

Lloyd's algorithm (Lloyd 1982) with the distances of a chunk of points to all centres from one matmul,
``|x|^2 - 2 x.c + |c|^2``, on the device of the data (the GPU during training). scikit-learn's ``KMeans`` is
the reference for small k; at SOP's size its k-means++ initialisation alone is 11,316 sequential passes over the
data, which is why this one starts from k distinct random rows when k is large, as faiss does.
"""

from __future__ import annotations

import math
from typing import Literal

import torch
from torch import Tensor

# k-means++ costs k sequential steps, each comparing 2 + log(k) candidates with every point: fine for the
# class counts of CUB/Cars (<= 200 test classes); at SOP's 11,316 it is 11,316 steps of 11 candidates x 60,502
# points x 512 dimensions (~7.7 TFLOP, several Lloyd iterations' worth, in small sequential matmuls). Above
# this, k random distinct rows.
KMEANS_PP_MAX_K = 256

# Points per chunk x centres: bounds the (chunk, k) distance block to 64 MiB of float32.
_CHUNK_ELEMENTS = 1 << 24


def _chunk_rows(k: int, chunk_size: int | None) -> int:
    return chunk_size if chunk_size is not None else max(1, _CHUNK_ELEMENTS // k)


def _nearest(x: Tensor, x_sq: Tensor, centres: Tensor, rows: int) -> tuple[Tensor, Tensor]:
    """(N,) index of the nearest centre and (N,) squared distance to it, ``rows`` points at a time."""
    c_sq = (centres * centres).sum(dim=1)
    assignment = torch.empty(len(x), dtype=torch.long, device=x.device)
    distance = torch.empty(len(x), dtype=x.dtype, device=x.device)
    for start in range(0, len(x), rows):
        chunk = slice(start, start + rows)
        # |c|^2 - 2 x.c: the argmin does not need |x|^2, which is added to the minimum only.
        block = torch.addmm(c_sq[None, :], x[chunk], centres.T, beta=1.0, alpha=-2.0)
        d, a = block.min(dim=1)
        assignment[chunk], distance[chunk] = a, (d + x_sq[chunk]).clamp_(min=0.0)
    return assignment, distance


def _kmeans_plus_plus(x: Tensor, x_sq: Tensor, k: int, generator: torch.Generator, rows: int) -> Tensor:
    """Greedy k-means++ (Arthur & Vassilvitskii 2007; scikit-learn's variant: 2 + log(k) candidates per step,
    the one that lowers the potential most is kept). Returns (k, D) centres, rows of ``x``."""
    n = len(x)
    trials = 2 + int(math.log(k))
    first = int(torch.randint(n, (1,), generator=generator, device=x.device))
    chosen = [first]
    closest = ((x - x[first]) ** 2).sum(dim=1)
    for _ in range(1, k):
        total = float(closest.sum())
        if total > 0:
            candidates = torch.multinomial(closest, trials, replacement=True, generator=generator)
        else:  # every point sits on a centre (duplicates): any row not chosen yet
            free = torch.ones(n, dtype=torch.bool, device=x.device)
            free[torch.tensor(chosen, device=x.device)] = False
            weights = free.to(x.dtype) if bool(free.any()) else torch.ones(n, dtype=x.dtype, device=x.device)
            candidates = torch.multinomial(weights, 1, generator=generator)
        # Squared distances of every point to each candidate, in chunks of points.
        d = torch.empty(len(candidates), n, dtype=x.dtype, device=x.device)
        cand = x[candidates]
        cand_sq = x_sq[candidates]
        for start in range(0, n, rows):
            chunk = slice(start, start + rows)
            block = torch.addmm(cand_sq[:, None] + x_sq[None, chunk], cand, x[chunk].T, alpha=-2.0)
            d[:, chunk] = block.clamp_(min=0.0)
        potentials = torch.minimum(d, closest[None, :]).sum(dim=1)
        best = int(potentials.argmin())
        chosen.append(int(candidates[best]))
        closest = torch.minimum(closest, d[best])
    return x[torch.tensor(chosen, device=x.device)].clone()


def _lloyd(
    x: Tensor, x_sq: Tensor, k: int, generator: torch.Generator, n_iter: int, init: str, rows: int
) -> tuple[Tensor, Tensor, float]:
    if init == "k-means++":
        centres = _kmeans_plus_plus(x, x_sq, k, generator, rows)
    else:  # k distinct rows, uniformly (faiss's initialisation)
        centres = x[torch.randperm(len(x), generator=generator, device=x.device)[:k]].clone()
    previous = None
    for _ in range(n_iter):
        assignment, distance = _nearest(x, x_sq, centres, rows)
        if previous is not None and torch.equal(assignment, previous):
            return assignment, centres, float(distance.sum())  # converged: the centres are these means
        previous = assignment
        counts = torch.bincount(assignment, minlength=k)
        sums = torch.zeros_like(centres).index_add_(0, assignment, x)
        centres = sums / counts.clamp(min=1).unsqueeze(1).to(x.dtype)
        empty = (counts == 0).nonzero().squeeze(1)
        if len(empty):
            # An empty cluster takes the point farthest from its centre (scikit-learn's rule), the farthest
            # points in order, ties to the lower row: deterministic.
            order = torch.sort(distance, descending=True, stable=True).indices[: len(empty)]
            centres[empty] = x[order]
    assignment, distance = _nearest(x, x_sq, centres, rows)
    return assignment, centres, float(distance.sum())


@torch.no_grad()
def kmeans(
    x: Tensor,
    k: int,
    seed: int = 0,
    *,
    n_iter: int = 20,
    init: Literal["auto", "k-means++", "random"] = "auto",
    n_init: int = 1,
    chunk_size: int | None = None,
) -> tuple[Tensor, Tensor]:
    """Lloyd's k-means in float32 on the device of ``x``.

    Args:
        x: (N, D) points. k: the number of clusters, 1 <= k <= N.
        seed: seeds a ``torch.Generator`` on x's device: the same seed gives the same clusters on the CPU (a
            GPU run differs from it, and may differ in the last bits between runs: ``index_add_`` sums with
            atomic additions there).
        n_iter: at most this many Lloyd iterations; it stops earlier when no assignment changes (faiss and
            pytorch-metric-learning use 20).
        init: ``k-means++`` (greedy, 2 + log k candidates a step, as scikit-learn), ``random`` (k distinct
            rows, as faiss), or ``auto``: k-means++ up to ``KMEANS_PP_MAX_K`` = 256 clusters, random above
            (k-means++ is k sequential passes over the data).
        n_init: runs from ``n_init`` initialisations (seeded in turn); the lowest inertia is kept.
        chunk_size: points per distance block; None = as many as keep the (chunk, k) block at 2^24 floats.
    Returns:
        (N,) long assignment to the nearest of the returned (k, D) centres. A cluster that empties during the
        iterations is re-seeded with the point farthest from its centre.
    Raises:
        ValueError: an option out of range (the message starts with its name).
    """
    if x.ndim != 2 or len(x) == 0:
        raise ValueError(f"x must be a non-empty (N, D) tensor, got shape {tuple(x.shape)}")
    if not 1 <= k <= len(x):
        raise ValueError(f"k must be in [1, {len(x)}] (the number of points), got {k}")
    if n_iter < 1:
        raise ValueError(f"n_iter must be >= 1, got {n_iter}")
    if init not in ("auto", "k-means++", "random"):
        raise ValueError(f"init must be auto, k-means++ or random, got {init!r}")
    if n_init < 1:
        raise ValueError(f"n_init must be >= 1, got {n_init}")
    if chunk_size is not None and chunk_size < 1:
        raise ValueError(f"chunk_size must be >= 1 or None, got {chunk_size}")
    x = x.detach().to(torch.float32)
    if not bool(torch.isfinite(x).all()):
        raise ValueError("x must be finite; it contains NaN or inf")
    method = init if init != "auto" else ("k-means++" if k <= KMEANS_PP_MAX_K else "random")
    x_sq = (x * x).sum(dim=1)
    rows = _chunk_rows(k, chunk_size)
    best: tuple[Tensor, Tensor, float] | None = None
    for run in range(n_init):
        generator = torch.Generator(device=x.device).manual_seed(seed + run)
        result = _lloyd(x, x_sq, k, generator, n_iter, method, rows)
        if best is None or result[2] < best[2]:
            best = result
    assert best is not None
    return best[0], best[1]
