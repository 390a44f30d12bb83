"""The project's console and run logs: Python logging, on rank zero only.

Every module logs through ``get_logger(__name__)``, a child of the ``clusterable`` logger, which

- writes each message as it is to the console (``INFO`` to stdout, warnings and errors to stderr; the streams are
  looked up when a line is written, so a redirected or captured ``sys.stdout`` gets it);
- writes it with its time and level to every log file opened by ``run_log`` (a run's ``<job name>.log`` in its
  folder: a single run's while it runs and is recorded, all the members' while a stacked group trains), so each run
  folder keeps the console lines about it;
- says nothing off DDP rank zero (lightning-hydra-template's ``RankedLogger``): every rank runs the same code, and
  one copy of each line is enough.

The ``clusterable`` logger does not hand its lines on to the root logger, whose handlers Hydra sets per job (its
``[time][name][LEVEL]`` console format and the job's log file): a line appears once on the console and once in each
log that is open. A log file is opened on the first line written to it, so a run that says nothing leaves none.

Ground floor: this module imports nothing of the project.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
from collections.abc import Iterator
from pathlib import Path

ROOT = "clusterable"
FILE_FORMAT = "[%(asctime)s][%(name)s][%(levelname)s] - %(message)s"  # Hydra's job log format


def rank() -> int:
    """This process's DDP rank: Lightning's where it set one, else the launcher's environment (0 outside DDP)."""
    lightning_rank = sys.modules.get("lightning.fabric.utilities.rank_zero")
    if lightning_rank is not None:
        value = getattr(lightning_rank.rank_zero_only, "rank", None)
        if isinstance(value, int):
            return value
    for key in ("RANK", "LOCAL_RANK", "SLURM_PROCID"):
        if os.environ.get(key, "").isdigit():
            return int(os.environ[key])
    return 0


class RankZero(logging.Filter):
    """Lets a line through on DDP rank zero only."""

    def filter(self, record: logging.LogRecord) -> bool:
        return rank() == 0


class Console(logging.Handler):
    """The message alone, ``INFO`` and below to the current ``sys.stdout``, warnings and errors to ``sys.stderr``."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            stream = sys.stderr if record.levelno >= logging.WARNING else sys.stdout
            stream.write(self.format(record) + "\n")
            stream.flush()
        except Exception:  # noqa: BLE001  (a closed console: the line is lost, the run goes on)
            pass


class RunLogFile(logging.FileHandler):
    """A run's log file; a line that cannot be written (a full disk, a removed folder) is dropped without
    logging's traceback: the run's record says what the disk did."""

    def handleError(self, record: logging.LogRecord) -> None:  # noqa: N802  (logging's name)
        pass


def _root() -> logging.Logger:
    logger = logging.getLogger(ROOT)
    if not any(isinstance(h, Console) for h in logger.handlers):
        console = Console()
        console.addFilter(RankZero())  # on the handlers: a logger's own filters skip its children's lines
        logger.addHandler(console)
        logger.setLevel(logging.INFO)
        logger.propagate = False
    return logger


def get_logger(name: str) -> logging.Logger:
    """The logger of module ``name`` (``clusterable.run.wrapper``; a name outside the package goes below
    ``clusterable.``), whose lines reach the console and the open run logs."""
    _root()
    return logging.getLogger(name if name == ROOT or name.startswith(f"{ROOT}.") else f"{ROOT}.{name}")


# The run logs open now (a path -> its handler and how many blocks hold it): a member's own block inside its stack's
# writes each line to its file once.
_open: dict[Path, tuple[logging.Handler, int]] = {}


@contextlib.contextmanager
def run_log(*paths: Path) -> Iterator[None]:
    """While the block runs, every line logged is also appended to each of ``paths`` (created on its first line; a
    line a full disk cannot take is dropped from that file only). A path already open is not opened twice."""
    logger = _root()
    held = [Path(p).absolute() for p in dict.fromkeys(paths)]
    for path in held:
        handler, count = _open.get(path, (None, 0))
        if handler is None:
            handler = RunLogFile(path, mode="a", delay=True)
            handler.setFormatter(logging.Formatter(FILE_FORMAT))
            handler.addFilter(RankZero())
            logger.addHandler(handler)
        _open[path] = (handler, count + 1)
    try:
        yield
    finally:
        for path in held:
            handler, count = _open.pop(path)
            if count > 1:
                _open[path] = (handler, count - 1)
                continue
            logger.removeHandler(handler)
            with contextlib.suppress(OSError):
                handler.close()
