"""Batched k-means in torch, for many clusters (Stanford Online Products: 60,502 x 512, k = 11,316 classes).

Lloyd's algorithm (Lloyd 1982) with the distances of a chunk of points to all centres from one matmul,
``|x|^2 - 2 x.c + |c|^2``, on the device of the data (the GPU during training). scikit-learn's ``KMeans`` is
the reference for small k; at SOP's size its k-means++ initialisation alone is 11,316 sequential passes over the
data, which is why this one starts from k distinct random rows when k is large, as faiss does.

At SOP's size one assignment pass is 60,000 x 11,000 x 512 multiply-adds (0.7 TFLOP): on 2 AMD EPYC cores, 5 s
through NumPy's OpenBLAS (``clusterable.evaluation.matmul``; torch's MKL is 1.5x slower there), 100 s for 20
iterations. The iterations after the first two compute again only the distances that moved centres can have
changed (``_Nearest``: exact, not an approximation of Lloyd): on class-structured 60,000 x 512 spectral rows
the 21 passes of ``n_iter=20`` computed 3.3 passes' worth of distances, 18 s in all with the spectral rows
(``scripts/bench.py --only sc_partition``).
"""

from __future__ import annotations

import contextlib
import math
import time
from collections.abc import Iterator
from typing import Literal

import torch
from torch import Tensor

from clusterable.evaluation.matmul import Matmul, score_blocks
from clusterable.logs import get_logger

log = get_logger(__name__)

# k-means++ costs k sequential steps, each comparing 2 + log(k) candidates with every point: fine for the
# class counts of CUB/Cars (<= 200 test classes); at SOP's 11,316 it is 11,316 steps of 11 candidates x 60,502
# points x 512 dimensions (~7.7 TFLOP, several Lloyd iterations' worth, in small sequential matmuls). Above
# this, k random distinct rows.
KMEANS_PP_MAX_K = 256

# Points per chunk x centres: bounds the (chunk, k) distance block to 64 MiB of float32.
_CHUNK_ELEMENTS = 1 << 24

# k-means says how it is getting on when one assignment pass, N x k x D multiply-adds, is at least this much work:
# 10^10 is ~0.15 s a pass on 2 AMD EPYC cores (~70 G multiply-adds/s through OpenBLAS, above), a restart of 20
# passes seconds. SOP's test split (60,502 x 512, k = 11,316: 3.5 x 10^11, 5 s a full pass) is far above; MNIST's
# 70,000 x 784 in 10 clusters (5.5 x 10^8), CUB's 5,924 x 512 in 100 (3 x 10^8) and the tests stay silent. The
# size, not the clock, decides, so a run says the same lines on any machine (a GPU, faster, says them too: a
# start line and one per restart, a handful per evaluation).
KMEANS_PROGRESS_WORK = 10**10
# Within a restart, a line when this many seconds went by since the last one (the restart lines come anyway).
KMEANS_PROGRESS_SECONDS = 10.0


def is_large(n: int, d: int, k: int) -> bool:
    """Whether k-means of ``n`` points in ``d`` dimensions into ``k`` clusters is long enough to report on
    (``KMEANS_PROGRESS_WORK``)."""
    return n * d * k >= KMEANS_PROGRESS_WORK


def _shape(n: int, d: int, k: int) -> str:
    return f"{n:,} x {d:,} (k={k:,})"


class _Progress:
    """The lines of one long ``kmeans`` call (nothing at all when ``is_large`` says it is not): one at the start,
    one per restart, and one when ``KMEANS_PROGRESS_SECONDS`` went by within a restart, each with the seconds
    since the start.

    The clock is read only where the Lloyd loop already waits for the device (at the end of an iteration, after
    the empty-cluster test's ``nonzero``; at a restart's end, after its inertia's ``float``): the lines add no
    host sync to a GPU run.
    """

    def __init__(self, x: Tensor, k: int, n_init: int, n_iter: int) -> None:
        n, d = x.shape
        self.on = is_large(n, d, k)
        self.shape, self.n_init, self.n_iter = _shape(n, d, k), n_init, n_iter
        self.start = self.last = time.monotonic()
        self.run = self.iterations = 0
        if self.on:
            restarts = f"{n_init} restart{'s' * (n_init != 1)}"
            log.info(f"kmeans: {self.shape} on {x.device.type}, {restarts} of at most {n_iter} iterations")

    def iteration(self, i: int) -> None:
        """Iteration ``i`` (from 0) of the current restart is done."""
        self.iterations = i + 1
        if self.on and (now := time.monotonic()) - self.last >= KMEANS_PROGRESS_SECONDS:
            self.last = now
            log.info(
                f"kmeans: restart {self.run + 1}/{self.n_init}, iteration {i + 1}/{self.n_iter}, "
                f"{now - self.start:.1f} s"
            )

    def restart_done(self) -> None:
        """The current restart is done: its line, and the count starts again for the next."""
        if self.on:
            self.last = time.monotonic()
            iterations = f"{self.iterations} iteration{'s' * (self.iterations != 1)}"
            log.info(
                f"kmeans: restart {self.run + 1}/{self.n_init} on {self.shape}, {iterations}, "
                f"{self.last - self.start:.1f} s"
            )
        self.run, self.iterations = self.run + 1, 0


@contextlib.contextmanager
def reported(n: int, d: int, k: int, n_init: int, name: str = "kmeans (scikit-learn)") -> Iterator[None]:
    """A line before and one after a k-means that says nothing in between (scikit-learn's ``KMeans``, whose
    ``verbose`` prints every iteration's inertia with ``print``), when it is large (``is_large``); silent
    otherwise, and no closing line when it raises."""
    if not is_large(n, d, k):
        yield
        return
    restarts = f"{n_init} restart{'s' * (n_init != 1)}"
    log.info(f"{name}: {_shape(n, d, k)}, {restarts}; this can take minutes")
    start = time.monotonic()
    yield
    log.info(f"{name}: {_shape(n, d, k)} done in {time.monotonic() - start:.1f} s")


def _chunk_rows(k: int, chunk_size: int | None) -> int:
    return chunk_size if chunk_size is not None else max(1, _CHUNK_ELEMENTS // k)


class _Nearest:
    """The nearest centre of every point, called once per Lloyd iteration with the new centres: exact, but computing
    again only the distances the centres' moves can have changed.

    Distances are kept as ``p_ij = |c_j|^2 - 2 x_i.c_j`` (the squared distance minus ``|x_i|^2``, which the argmin
    does not need), from one matmul of ``[x, 1]`` (N, D + 1) with ``[-2c, |c|^2]`` (k, D + 1): the norms ride in
    the matmul, which on the CPU is NumPy's (``clusterable.evaluation.matmul``). Each point keeps its centre
    ``a_i``, ``own_i = p_{i a_i}`` and ``low_i``, a lower bound on ``p_ij`` over the centres ``j != a_i`` that
    have not moved since (at first: the second-smallest ``p_ij``).

    A centre moves only when its members change (the same members give the same mean, bit for bit), and in the
    later iterations few do. With S the centres that moved (compared bit for bit with the previous call), every
    point's ``p`` to S is computed (an (N, |S|) matmul); its best among its own centre and S is its nearest
    centre if it is below ``low_i`` (no unmoved centre can be nearer: the bound of Hamerly 2010, "Making k-means
    even faster", with exact distances to the moved centres in place of drift bounds). The points where it is
    not (their centre moved away from them) are compared with all k centres again. When more than half of the
    centres moved, every point is.

    Ties go to the lower centre index, as in a full ``argmin``. ``passes``/``products`` count the calls and
    the point-centre distances computed (N k per call without the pruning).
    """

    def __init__(self, x: Tensor, rows: int, matmul: Matmul) -> None:
        self.left = torch.cat([x, torch.ones(len(x), 1, dtype=x.dtype, device=x.device)], dim=1)
        self.rows, self.matmul = rows, matmul
        self.buffer = torch.empty(0, dtype=x.dtype, device=x.device)
        self.centres: Tensor | None = None
        self.assignment = torch.empty(0, dtype=torch.long, device=x.device)
        self.own = self.low = torch.empty(0, dtype=x.dtype, device=x.device)
        self.passes = self.products = 0

    def __call__(self, centres: Tensor) -> tuple[Tensor, Tensor]:
        """(N,) index of the nearest of ``centres`` (k, D) and (N,) ``p`` to it (the squared distance minus
        ``|x|^2``)."""
        k = len(centres)
        right = torch.cat([-2 * centres, (centres * centres).sum(dim=1, keepdim=True)], dim=1)
        if self.centres is None or self.centres.shape != centres.shape:
            moved = None
        else:
            moved = (centres != self.centres).any(dim=1).nonzero().squeeze(1)
        self.centres = centres.clone()
        self.passes += 1
        if moved is None or 2 * len(moved) > k:
            self.assignment, self.own, self.low = self._full(right, None)
        elif len(moved):
            self._partial(right, moved)
        return self.assignment.clone(), self.own.clone()

    def _scores(self, left: Tensor, right: Tensor) -> Tensor:
        """The (l, r) block of ``p``, in a buffer reused from call to call."""
        if self.buffer.numel() < len(left) * len(right):
            self.buffer = torch.empty(len(left) * len(right), dtype=left.dtype, device=left.device)
        self.products += len(left) * len(right)
        return self.matmul(left, right, self.buffer)

    def _full(self, right: Tensor, index: Tensor | None) -> tuple[Tensor, Tensor, Tensor]:
        """(centre, own, low = the second-smallest p) of the points ``index`` (all: None) against every centre."""
        n = len(self.left) if index is None else len(index)
        device, dtype = self.left.device, self.left.dtype
        assignment = torch.empty(n, dtype=torch.long, device=device)
        own, low = torch.empty(n, dtype=dtype, device=device), torch.empty(n, dtype=dtype, device=device)
        for start in range(0, n, self.rows):
            chunk = slice(start, start + self.rows)
            p = self._scores(self.left[chunk] if index is None else self.left[index[chunk]], right)
            own[chunk], assignment[chunk] = p.min(dim=1)  # the first minimum: ties to the lower centre
            p[torch.arange(len(p), device=device), assignment[chunk]] = float("inf")
            low[chunk] = p.min(dim=1).values  # inf when k = 1
        return assignment, own, low

    def _partial(self, right: Tensor, moved: Tensor) -> None:
        """Update the points against the moved centres ``moved`` (s,) (ascending), and every centre for the
        points whose bound does not settle them."""
        k, s = len(right), len(moved)
        position = torch.full((k,), -1, dtype=torch.long, device=moved.device)
        position[moved] = torch.arange(s, device=moved.device)
        right_moved = right[moved]
        rows = max(1, _CHUNK_ELEMENTS // s)
        unsettled = []
        for start in range(0, len(self.left), rows):
            chunk = slice(start, start + rows)
            p = self._scores(self.left[chunk], right_moved)  # (r, s)
            before, low = self.assignment[chunk], self.low[chunk]
            before_pos = position[before]
            own_moved = before_pos >= 0
            own = torch.where(own_moved, p.gather(1, before_pos.clamp(min=0)[:, None]).squeeze(1), self.own[chunk])
            best_moved, best_pos = p.min(dim=1)  # the lowest index among ties: ``moved`` is ascending
            take = (best_moved < own) | ((best_moved == own) & (moved[best_pos] < before))
            after = torch.where(take, moved[best_pos], before)
            best = torch.where(take, best_moved, own)
            # The bound for the next call, over every centre but the new one: the unmoved ones (low), the moved
            # ones (p, without the chosen one), and the old centre when the point left an unmoved one.
            after_pos = position[after]
            rows_in = (after_pos >= 0).nonzero().squeeze(1)
            p[rows_in, after_pos[rows_in]] = float("inf")
            left_unmoved = torch.where(take & ~own_moved, own, float("inf"))
            new_low = torch.minimum(torch.minimum(low, p.min(dim=1).values), left_unmoved)
            # Settled when no unmoved centre other than the old one can be as near (``low``: strictly, for ties).
            settled = best < low
            self.assignment[chunk] = torch.where(settled, after, before)
            self.own[chunk] = torch.where(settled, best, own)
            self.low[chunk] = torch.where(settled, new_low, low)
            unsettled.append(start + (~settled).nonzero().squeeze(1))
        index = torch.cat(unsettled)
        if len(index):
            self.assignment[index], self.own[index], self.low[index] = self._full(right, index)


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
    x: Tensor,
    x_sq: Tensor,
    k: int,
    generator: torch.Generator,
    n_iter: int,
    init: str,
    rows: int,
    matmul: Matmul,
    progress: _Progress | None = None,
) -> tuple[Tensor, Tensor, float]:
    if init == "k-means++":
        centres = _kmeans_plus_plus(x, x_sq, k, generator, rows)
    else:  # k distinct rows, uniformly (faiss's initialisation)
        centres = x[torch.randperm(len(x), generator=generator, device=x.device)[:k]].clone()
    nearest = _Nearest(x, rows, matmul)
    previous = None
    for i in range(n_iter):
        assignment, own = nearest(centres)
        distance = (own + x_sq).clamp_(min=0.0)
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
        if progress is not None:  # after ``len(empty)``, which waited for the device
            progress.iteration(i)
    assignment, own = nearest(centres)
    return assignment, centres, float((own + x_sq).clamp_(min=0.0).sum())


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

    When it is large (N x k x D >= ``KMEANS_PROGRESS_WORK``: SOP's test split, 20 s to 100 s a restart on 2 CPU
    cores) it logs (``clusterable.logs``) a line as it starts, one per restart and one every
    ``KMEANS_PROGRESS_SECONDS`` within a restart, so that a long evaluation does not look hung; smaller inputs
    say nothing.

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
    progress = _Progress(x, k, n_init, n_iter)
    with score_blocks(x.device) as matmul:
        for run in range(n_init):
            generator = torch.Generator(device=x.device).manual_seed(seed + run)
            result = _lloyd(x, x_sq, k, generator, n_iter, method, rows, matmul, progress)
            progress.restart_done()
            if best is None or result[2] < best[2]:
                best = result
    assert best is not None
    return best[0], best[1]
