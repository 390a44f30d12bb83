"""A loss head slow enough to be interrupted, locked or raced while it trains (the sweep-survival tests)."""

from __future__ import annotations

import os
import time
from pathlib import Path

from torch import Tensor

from clusterable.heads import CCELoss


class Slow(CCELoss):
    """Cross-entropy that sleeps ``seconds`` every training step and, at its first step, writes its process id to
    ``<folder>/<pid>`` (so a test knows a cell is running, and in which process)."""

    def __init__(self, num_classes: int, embedding_dim: int, folder: str, seconds: float = 0.2):
        super().__init__(num_classes=num_classes, embedding_dim=embedding_dim)
        self.folder, self.seconds = Path(folder), seconds
        self.announced = False

    def forward(self, embeddings: Tensor, labels: Tensor, **batch) -> dict[str, Tensor]:
        if self.training:
            if not self.announced:
                self.folder.mkdir(parents=True, exist_ok=True)
                (self.folder / str(os.getpid())).touch()
                self.announced = True
            time.sleep(self.seconds)
        return super().forward(embeddings, labels, **batch)
