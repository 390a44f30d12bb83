"""Fixtures of the evaluator tests."""

from __future__ import annotations

import pytest
import torch


@pytest.fixture
def one_thread():
    """Torch on one thread: these tensors are tiny, and with 2 threads on a busy 2-core machine each op waits ~7 ms
    for the second thread (measured: 1.2-1.9 s against 0.03 s for five k-means calls)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)
