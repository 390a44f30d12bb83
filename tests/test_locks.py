"""The file locks, portable (filelock, no ``fcntl`` of our own): a cell held by one sweep is refused to another
without waiting, in this process as in another, with the one-line ``busy``; the image cache's lock is waited for.
(tests/test_sweeps_survive.py: a lock held by another process, released when it dies; two sweeps on one cell.)"""

from __future__ import annotations

import ast
import threading
import time
from pathlib import Path

import pytest
from filelock import FileLock, Timeout

from clusterable import outcomes
from clusterable.data.folders.image_cache import _locked
from clusterable.record import RunRecord
from clusterable.run.cell import BUSY_ERROR, LOCK_FILE, lock_cell, release_cell, reuse_or_clean
from clusterable.run.context import RunContext

SRC = Path(__file__).resolve().parents[1] / "src"


def _other_sweep(cell: Path) -> FileLock:
    """The lock another sweep would take: an object of its own on the same file."""
    return FileLock(cell / LOCK_FILE, blocking=False, thread_local=False, is_singleton=False)


def test_a_held_cell_is_refused_to_another_lock_without_waiting(tmp_path: Path) -> None:
    cell = tmp_path / "cell"
    assert lock_cell(cell) and lock_cell(cell)  # this process's own lock: taken again without waiting on itself
    other = _other_sweep(cell)
    started = time.monotonic()
    with pytest.raises(Timeout):
        other.acquire()
    assert time.monotonic() - started < 1
    release_cell(cell)
    assert (cell / LOCK_FILE).exists()  # left in place for the next process (POSIX)
    other.acquire()  # free once released
    try:
        assert not lock_cell(cell)  # and refused to this process while the other holds it
    finally:
        other.release()
    assert lock_cell(cell)
    release_cell(cell)


def test_a_busy_cell_is_one_line_and_left_alone(
    tmp_path: Path, capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(outcomes.RECORDS_ENV, raising=False)
    cell = tmp_path / "cell"
    cell.mkdir()
    (cell / "metrics.json").write_text("{}")  # the running sweep's files: never cleaned by the second one
    other = _other_sweep(cell)
    other.acquire()
    try:
        record = reuse_or_clean(RunContext(run_dir=cell, single=False), RunRecord(config={}), {})
    finally:
        other.release()
    assert record == RunRecord(status="busy", error=BUSY_ERROR)
    assert capsys.readouterr().out == f"busy {cell}: another process runs this cell\n"
    assert (cell / "metrics.json").read_text() == "{}"


def test_the_image_cache_lock_is_waited_for(tmp_path: Path) -> None:
    path = tmp_path / "cache.lock"
    order: list[str] = []
    with _locked(path):
        waiter = threading.Thread(target=lambda: _locked_append(path, order))
        waiter.start()
        time.sleep(0.3)
        order.append("holder done")
    waiter.join(timeout=10)
    assert not waiter.is_alive() and order == ["holder done", "waiter"]


def _locked_append(path: Path, order: list[str]) -> None:
    with _locked(path):
        order.append("waiter")


def test_no_module_imports_fcntl() -> None:
    """``fcntl`` is POSIX only: importing it anywhere stops ``python train.py`` on Windows."""
    importing = []
    for path in SRC.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = (
                [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""]
                if isinstance(node, ast.ImportFrom)
                else []
            )
            if any(name.split(".")[0] == "fcntl" for name in names):
                importing.append(str(path.relative_to(SRC)))
    assert not importing, importing
