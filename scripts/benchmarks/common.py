"""What the cases share: the repository root, the timers, the peak-memory probe of child scripts and the child
scripts' JSON report. Every case times through these, so two cases that report seconds measure them alike."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[2]


def best_of(fn: Callable[[], object], repeats: int = 3) -> float:
    """Minimum wall time of ``repeats`` calls (the least disturbed by the rest of the machine)."""
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def alternated(first: Callable[[], object], second: Callable[[], object], rounds: int) -> tuple[float, float]:
    """The minimum seconds of ``first`` and of ``second`` over ``rounds`` rounds of one call each, ``first`` then
    ``second``: alternated so that a busy moment of the machine does not land on one side only."""
    a, b = [], []
    for _ in range(rounds):
        a.append(best_of(first, 1))
        b.append(best_of(second, 1))
    return min(a), min(b)


def loadavg_before_after(before: float) -> str:
    """``"before / now"``: the 1-minute load average before a measurement (``os.getloadavg()[0]``) and after it,
    so that a figure taken while something else ran can be told apart."""
    return f"{before:.2f} / {os.getloadavg()[0]:.2f}"


def cuda_sync() -> None:
    """Wait for the CUDA device's queued work (if there is one), so that a timer stops when the work is done."""
    if torch.cuda.is_available():
        torch.cuda.synchronize()


# The child scripts' peak-memory probe: VmHWM after resetting it through /proc/self/clear_refs, minus VmRSS before.
MEMORY_PROBE = """def status(key):
    return int(next(l.split()[1] for l in open("/proc/self/status") if l.startswith(key)))  # kB
try:
    open("/proc/self/clear_refs", "w").write("5")  # reset the peak resident size (Linux >= 4.0)
    how = "VmHWM - VmRSS before"
except OSError:
    how = "ru_maxrss - VmRSS before (the peak may predate the call)"
before = status("VmRSS:")"""

# Its reading, after the measured call: the peak resident size in kB (extra MB = (peak - before) / 1024).
MEMORY_PEAK = """if how.startswith("VmHWM"):
    peak = status("VmHWM:")
else:
    import resource
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss"""


def indented(snippet: str, indent: str) -> str:
    """``snippet`` (``MEMORY_PROBE``, ``MEMORY_PEAK``) indented to sit inside a dedented child script at ``indent``:
    its first line goes where the placeholder stands, already indented."""
    return textwrap.indent(snippet, indent).lstrip()


def run_child(script: str) -> dict:
    """Run ``script`` in a fresh Python process from the repository root (a fresh process, so that the peak memory
    it reports is its measured call's, not what the bench's process holds) and return the JSON object of its last
    line of output."""
    done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, check=True, capture_output=True, text=True)
    return json.loads(done.stdout.strip().splitlines()[-1])
