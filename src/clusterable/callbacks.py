"""Small Lightning callbacks: the epoch timer the entry point attaches, and the cluster updates that a
clustering head brings along (``RepresentationModule.configure_callbacks``)."""

from __future__ import annotations

import time

import lightning as L

from clusterable.contracts import ClusteringHead


class EpochTimer(L.Callback):
    """Wall-clock seconds of each training epoch and of the training steps in it (the CSRL paper's Fig. 8
    compares seconds per epoch).

    An epoch runs from one epoch's start to the next (or to the end of training), so it includes what runs
    after its last step (a clustering head's Lloyd step) and the validation loop, as a user waits for them.
    ``train_s`` sums the training batches only (forward, backward, optimizer steps and Lightning's per-batch work);
    divided by the module's ``steps_taken`` it is the seconds per optimizer step.
    """

    def __init__(self) -> None:
        self.durations: list[float] = []
        self.train_s = 0.0
        self._start: float | None = None
        self._batch_start = 0.0

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

    def on_train_batch_start(self, trainer: L.Trainer, pl_module: L.LightningModule, *args: object) -> None:
        self._batch_start = time.perf_counter()

    def on_train_batch_end(self, trainer: L.Trainer, pl_module: L.LightningModule, *args: object) -> None:
        self.train_s += time.perf_counter() - self._batch_start

    @property
    def mean_epoch_s(self) -> float | None:
        return sum(self.durations) / len(self.durations) if self.durations else None


class ClusterUpdates(L.Callback):
    """A ``ClusteringHead``'s alternation with gradient steps (Sabanayagam et al. 2024, Algorithm 1).

    ``init_clusters`` once before training and ``update_clusters`` (a Lloyd step) after every training epoch,
    both on the whole training split's encoder output. Every DDP rank holds the whole split and the same
    weights, so every rank computes the same assignment. ``seconds`` holds each Lloyd step's wall time.
    """

    def __init__(self) -> None:
        self.seconds: list[float] = []

    def _head(self, pl_module: L.LightningModule) -> ClusteringHead:
        return pl_module.head

    def on_train_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        embeddings, split = pl_module.train_split()
        self._head(pl_module).init_clusters(embeddings, **split)

    def on_train_epoch_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        start = time.perf_counter()
        embeddings, split = pl_module.train_split()
        self._head(pl_module).update_clusters(embeddings, **split)
        self.seconds.append(time.perf_counter() - start)

    @property
    def mean_s(self) -> float | None:
        return sum(self.seconds) / len(self.seconds) if self.seconds else None
