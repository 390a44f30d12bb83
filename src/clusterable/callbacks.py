"""Small Lightning callbacks: the epoch timer the entry point attaches, and the cluster updates that a
clustering head brings along (``RepresentationModule.configure_callbacks``)."""

from __future__ import annotations

import time

import lightning as L

from clusterable.contracts import ClusteringHead


class EpochTimer(L.Callback):
    """Wall-clock seconds of each training epoch (the CSRL paper's Fig. 8 reports seconds per epoch).

    An epoch runs from one epoch's start to the next (or to the end of training), so it includes what runs
    after its last step (a clustering head's Lloyd step) and the validation loop, as a user waits for them.
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


class ClusterUpdates(L.Callback):
    """A ``ClusteringHead``'s alternation with gradient steps (Sabanayagam et al. 2024, Algorithm 1).

    ``init_clusters`` once before training and ``update_clusters`` (a Lloyd step) after every training epoch,
    both on the whole training split's encoder output. Every DDP rank holds the whole split and the same
    weights, so every rank computes the same assignment.
    """

    def _head(self, pl_module: L.LightningModule) -> ClusteringHead:
        return pl_module.head

    def on_train_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        embeddings, split = pl_module.train_split()
        self._head(pl_module).init_clusters(embeddings, **split)

    def on_train_epoch_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        embeddings, split = pl_module.train_split()
        self._head(pl_module).update_clusters(embeddings, **split)
