"""The best checkpoint, written whole or not at all.

Lightning's own save of a local checkpoint goes through an fsspec transaction whose temporary file lives in the
system's temporary folder and is then moved (copied, across filesystems) onto the run's: on a full disk the copy
stops midway and leaves a truncated ``best.ckpt`` that the run would later load as the best epoch. Here the
checkpoint is written to a temporary file beside it and renamed over it (a rename within a folder is atomic): a
failed write leaves the previous best checkpoint, or none, never half of one.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from lightning.pytorch.callbacks import ModelCheckpoint

from clusterable.callbacks import BoudiafCheckpoint
from clusterable.rundir import WRITE_ERRNOS


class AtomicCheckpoint(ModelCheckpoint):
    """``ModelCheckpoint`` whose every save is a temporary file in the checkpoint folder renamed over the target.

    A failed write raises ``OSError`` naming the checkpoint (``no space left on device writing .../best.ckpt``);
    torch's own writer says only ``file write failed`` in a ``RuntimeError``, which is turned into ENOSPC when the
    disk has no space left (else EIO).
    """

    def _save_checkpoint(self, trainer: Any, filepath: str) -> None:
        def write(tmp: Path) -> None:
            super(AtomicCheckpoint, self)._save_checkpoint(trainer, str(tmp))

        written_whole(write, Path(filepath), rename=trainer.is_global_zero)
        self._last_checkpoint_saved = filepath  # the file that now holds it, not the temporary one


def _why_not_written(folder: Path) -> int:
    """ENOSPC when ``folder``'s filesystem has no space left for us, else EIO."""
    try:
        stats = os.statvfs(folder)
    except OSError:
        return errno.EIO
    return errno.ENOSPC if stats.f_bavail * stats.f_frsize < 1 << 20 else errno.EIO


class AtomicBoudiafCheckpoint(AtomicCheckpoint, BoudiafCheckpoint):
    """Boudiaf et al.'s model-selection rule (``callbacks.BoudiafCheckpoint``: ``checkpoint.rule: boudiaf``),
    written atomically like every best checkpoint."""


def save_checkpoint(state: dict[str, Any], target: Path) -> None:
    """``torch.save(state)`` to ``target``, whole or not at all: the stacked path's best checkpoint of a member, in
    the single run's format (``epoch``, ``global_step``, ``state_dict``)."""
    import torch

    target.parent.mkdir(parents=True, exist_ok=True)
    written_whole(lambda tmp: torch.save(state, tmp), target)


def written_whole(write: Callable[[Path], None], target: Path, rename: bool = True) -> None:
    """``write(tmp)`` to a temporary file beside ``target``, then renamed over it (only where ``rename``: DDP's
    other ranks write nothing). A failed write raises ``OSError`` naming ``target`` (``no space left on device
    writing .../best.ckpt``); torch's own writer says only ``file write failed`` in a ``RuntimeError``, which is
    turned into ENOSPC when the disk has no space left (else EIO)."""
    tmp = target.with_name(f".{target.name}.tmp-{os.getpid()}")
    try:
        write(tmp)
        if rename:
            os.replace(tmp, target)
    except (OSError, RuntimeError) as e:
        tmp.unlink(missing_ok=True)
        if isinstance(e, OSError) and e.errno not in WRITE_ERRNOS:
            raise
        code = e.errno if isinstance(e, OSError) else _why_not_written(target.parent)
        # torch's writer on a full disk says "file write failed" or "unexpected pos ..." (its zip container)
        if isinstance(e, RuntimeError) and "write" not in str(e).lower() and code != errno.ENOSPC:
            raise  # not a failed write: a bug, with its traceback
        raise OSError(code, os.strerror(code), str(target)) from None
