"""Ctrl-C and SIGTERM, handled as one: either signal stops a run or a sweep as an interrupt.

A cluster ends a job at its time limit with SIGTERM (SLURM, then SIGKILL some seconds later), where a terminal
sends SIGINT. Python turns only SIGINT into ``KeyboardInterrupt``; SIGTERM's default ends the process on the spot,
with nothing recorded. ``interruptible()`` (``clusterable.cli`` wraps the whole command in it) makes both raise
``KeyboardInterrupt``, so that every path that records Ctrl-C (the run layer's ``wrapper.recorded``, the stacked
members, the joblib launcher's workers) records SIGTERM the same way: the running cells ``interrupted``, the
sweep's summary printed, and the same command resumes. ``exit_status()`` is then the shell's ``128 + signal``:
130 after Ctrl-C, 143 after SIGTERM.

``shielded()`` holds both signals off while a run is being recorded, so that a second signal (the terminal's and
the sweep's Ctrl-C both reach a worker; a cluster may repeat SIGTERM) does not cut its ``metrics.json`` short.

Signal handlers belong to the main thread, where every run of this package records itself.
"""

from __future__ import annotations

import contextlib
import signal
from collections.abc import Iterator
from types import FrameType
from typing import Any

INTERRUPTS = (signal.SIGINT, signal.SIGTERM)
# The interrupting signals this process received since the command started (the first one is the exit status).
_received: list[int] = []
# shielded(): how deep, and the SIGTERM handler to restore when the outermost one ends.
_shield: dict[str, Any] = {"depth": 0, "sigterm": signal.SIG_DFL}


def note(signum: int) -> None:
    """Remember that ``signum`` interrupted this process (a handler of its own, e.g. the joblib launcher's, or a
    worker's signal passed on to the launching process)."""
    _received.append(int(signum))


def interrupt(signum: int, frame: FrameType | None) -> None:
    """The handler of both signals: noted, then ``KeyboardInterrupt``, as Python's own Ctrl-C handler raises."""
    note(signum)
    raise KeyboardInterrupt


def received() -> int | None:
    """The first interrupting signal this process received, or None."""
    return _received[0] if _received else None


def exit_status() -> int:
    """The shell's status of a command stopped by a signal: 128 + the first one received (130 when none was
    noted: a ``KeyboardInterrupt`` raised by hand, as Ctrl-C's)."""
    return 128 + (received() or signal.SIGINT)


@contextlib.contextmanager
def interruptible() -> Iterator[None]:
    """Within the body, SIGINT and SIGTERM both raise ``KeyboardInterrupt`` (noted); the handlers found are put back
    after it (a test that runs the command in its own process keeps its own)."""
    previous = {signum: signal.getsignal(signum) for signum in INTERRUPTS}
    _received.clear()
    for signum in INTERRUPTS:
        signal.signal(signum, interrupt)
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def held(signum: int, frame: FrameType | None) -> None:
    """A signal held off: dropped. Installed in place of ``SIG_IGN``, which lets a signal that arrived just before
    the switch surface later as ``OSError: Signal 15 ignored due to race condition`` (CPython runs the pending
    handler, finds ``SIG_IGN``, and raises), a traceback among a sweep's interrupt lines."""


@contextlib.contextmanager
def shielded() -> Iterator[None]:
    """Neither signal interrupts the body (a run being recorded). Nested uses hold them off until the outermost
    ends; then SIGINT raises ``KeyboardInterrupt`` again (Lightning leaves it ignored once it has handled one) and
    SIGTERM gets back the handler it had."""
    if _shield["depth"] == 0:
        _shield["sigterm"] = signal.getsignal(signal.SIGTERM)
        for signum in INTERRUPTS:
            signal.signal(signum, held)
    _shield["depth"] += 1
    try:
        yield
    finally:
        _shield["depth"] -= 1
        if _shield["depth"] == 0:
            signal.signal(signal.SIGINT, interrupt)
            signal.signal(signal.SIGTERM, _shield["sigterm"] or signal.SIG_DFL)
