"""The large float32 matmuls of the evaluators (retrieval's score blocks, k-means' distance blocks) on the CPU.

On the AMD EPYC cores we measured, NumPy's OpenBLAS sgemm ran at 177-185 GFLOPS on 2 threads where torch's MKL
ran at 118-124 (the same float32 products, summed in another order). So on the CPU the blocks go through
NumPy: one single-threaded BLAS call per torch thread, each on its share of the rows, from a pool of Python
threads (NumPy releases the GIL). OpenBLAS's own threads keep spinning for a while after each call, which
slowed the torch ops that follow it (retrieval's filters, k-means' minimum) twofold; one thread per call keeps
them from existing. On CUDA the blocks are torch's.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import torch
from threadpoolctl import threadpool_limits
from torch import Tensor

# ``scores(left (l, D), right (r, D), out) -> (l, r)``: ``left @ right.T`` into the front of the buffer ``out``.
Matmul = Callable[[Tensor, Tensor, Tensor], Tensor]


@contextlib.contextmanager
def blas_threads() -> Iterator[ThreadPoolExecutor]:
    """A pool of ``torch.get_num_threads()`` Python threads, with NumPy's BLAS held to one thread inside: for
    single-threaded NumPy BLAS calls, one per share of the rows (``row_shares``), run side by side."""
    with threadpool_limits(limits=1, user_api="blas"), ThreadPoolExecutor(torch.get_num_threads()) as pool:
        yield pool


def row_shares(rows: int, parts: int) -> list[slice]:
    """``rows`` split into at most ``parts`` contiguous slices of equal size (the last one shorter)."""
    step = max(1, -(-rows // max(parts, 1)))
    return [slice(i, i + step) for i in range(0, rows, step)]


@contextlib.contextmanager
def score_blocks(device: torch.device) -> Iterator[Matmul]:
    """A function ``scores(left, right, out)``: the (l, r) score block ``left @ right.T`` (float32 (l, D) and
    (r, D) tensors) into the front of the buffer ``out`` (at least l * r entries), returned as an (l, r) view.

    On the CPU through NumPy's BLAS, one single-threaded call per torch thread on its share of the rows (see the
    module docstring); on other devices ``torch.mm``.
    """
    if device.type != "cpu":
        yield lambda left, right, out: torch.mm(left, right.T, out=front(out, len(left), len(right)))
        return
    parts = torch.get_num_threads()
    with blas_threads() as pool:

        def scores(left: Tensor, right: Tensor, out: Tensor) -> Tensor:
            out = front(out, len(left), len(right))
            rows = row_shares(len(left), parts)
            done = pool.map(lambda r: np.matmul(left[r].numpy(), right.numpy().T, out=out[r].numpy()), rows)
            list(done)  # waits, and raises what a part raised
            return out

        yield scores


def front(buffer: Tensor, rows: int, cols: int) -> Tensor:
    """The first ``rows * cols`` entries of a contiguous buffer as a (rows, cols) matrix."""
    return buffer.view(-1)[: rows * cols].view(rows, cols)
