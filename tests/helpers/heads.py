"""Loss heads that force the failure paths through the real pipeline (``hydra.searchpath`` adds their configs)."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import torch
import torch.distributed as dist
from torch import Tensor

from clusterable.heads import CCELoss


class NaNAfter(CCELoss):
    """Cross-entropy whose loss turns NaN from ``epoch`` on."""

    def __init__(self, num_classes: int, embedding_dim: int, epoch: int = 1):
        super().__init__(num_classes=num_classes, embedding_dim=embedding_dim)
        self.nan_epoch = epoch

    def forward(self, embeddings: Tensor, labels: Tensor, epoch: int = 0, **batch) -> dict[str, Tensor]:
        out = super().forward(embeddings, labels, **batch)
        if epoch >= self.nan_epoch:
            out["loss"] = out["loss"] * torch.tensor(float("nan"))
        return out


class Cancelling(CCELoss):
    """From ``epoch`` on, attraction and repulsion run off to +-1e32 and cancel: the loss is exactly 0."""

    def __init__(self, num_classes: int, embedding_dim: int, epoch: int = 1):
        super().__init__(num_classes=num_classes, embedding_dim=embedding_dim)
        self.from_epoch = epoch

    def forward(self, embeddings: Tensor, labels: Tensor, epoch: int = 0, **batch) -> dict[str, Tensor]:
        out = super().forward(embeddings, labels, **batch)
        if epoch >= self.from_epoch:
            huge = torch.tensor(1e32) + 0 * out["loss"]
            out = {"loss": huge - huge, "attract": huge, "repel": -huge}
        return out


class InterruptOnce(CCELoss):
    """Raises KeyboardInterrupt (what Ctrl-C raises) at ``epoch`` unless ``marker`` exists; creates it first, so
    the same command run again trains through. ``send``: a signal's name (``SIGTERM``, a cluster's time limit) sent
    to its own process instead, whose handler must stop the run."""

    def __init__(self, num_classes: int, embedding_dim: int, marker: str, epoch: int = 1, send: str | None = None):
        super().__init__(num_classes=num_classes, embedding_dim=embedding_dim)
        self.marker, self.at_epoch, self.send = Path(marker), epoch, send

    def forward(self, embeddings: Tensor, labels: Tensor, epoch: int = 0, **batch) -> dict[str, Tensor]:
        if epoch >= self.at_epoch and self.training and not self.marker.exists():
            self.marker.touch()
            if self.send is None:
                raise KeyboardInterrupt
            signum = signal.Signals[self.send]
            # Never the default action here: it would end the test session, not the run.
            assert signal.getsignal(signum) not in (signal.SIG_DFL, signal.SIG_IGN, None), f"{self.send} unhandled"
            os.kill(os.getpid(), signum)
        return super().forward(embeddings, labels, **batch)


class RecordBatches(CCELoss):
    """Cross-entropy that appends the training rows it sees to ``<folder>/rank<r>.txt`` (one line a batch)."""

    def __init__(self, num_classes: int, embedding_dim: int, folder: str):
        super().__init__(num_classes=num_classes, embedding_dim=embedding_dim)
        self.folder = Path(folder)

    def forward(self, embeddings: Tensor, labels: Tensor, index: Tensor | None = None, **batch) -> dict[str, Tensor]:
        if self.training and index is not None:
            rank = dist.get_rank() if dist.is_available() and dist.is_initialized() else 0
            self.folder.mkdir(parents=True, exist_ok=True)
            with open(self.folder / f"rank{rank}.txt", "a") as f:
                f.write(" ".join(str(i) for i in index.tolist()) + "\n")
        return super().forward(embeddings, labels, **batch)
