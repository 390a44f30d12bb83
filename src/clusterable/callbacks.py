"""Small Lightning callbacks the entry point always attaches."""

from __future__ import annotations

import time

import lightning as L


class EpochTimer(L.Callback):
    """Wall-clock seconds of each training epoch (the CSRL paper's Fig. 8 reports seconds per epoch)."""

    def __init__(self) -> None:
        self.durations: list[float] = []
        self._start = 0.0

    def on_train_epoch_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self._start = time.perf_counter()

    def on_train_epoch_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self.durations.append(time.perf_counter() - self._start)

    @property
    def mean_epoch_s(self) -> float | None:
        return sum(self.durations) / len(self.durations) if self.durations else None
