"""Small Lightning callbacks the entry point always attaches."""

from __future__ import annotations

import time

import lightning as L


class EpochTimer(L.Callback):
    """Wall-clock seconds of each training epoch (the CSRL paper's Fig. 8 reports seconds per epoch).

    An epoch runs from one epoch's start to the next (or to the end of training), so it includes what the module
    does after its last step (a clustering head's Lloyd step) and the validation loop, as a user waits for them.
    """

    def __init__(self) -> None:
        self.durations: list[float] = []
        self._start: float | None = None

    def _lap(self) -> None:
        now = time.perf_counter()
        if self._start is not None:
            self.durations.append(now - self._start)
        self._start = now

    def on_train_epoch_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self._lap()

    def on_train_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self._lap()
        self._start = None

    @property
    def mean_epoch_s(self) -> float | None:
        return sum(self.durations) / len(self.durations) if self.durations else None
