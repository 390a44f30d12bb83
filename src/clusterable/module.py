"""The LightningModule: an encoder, a loss head and an optimizer. Nothing paper-specific lives here."""

from __future__ import annotations

import math
from collections.abc import Callable

import lightning as L
import torch
from torch import Tensor, nn

from clusterable.callbacks import ClusterUpdates
from clusterable.contracts import ClassifyingHead, ClusteringHead, OwnLearningRate


class DivergedError(RuntimeError):
    """A logged loss part became NaN, infinite or larger in magnitude than the limit; the run is recorded failed."""

    def __init__(self, epoch: int, key: str, value: float, limit: float):
        what = f"became {value}" if not math.isfinite(value) else f"reached {value:.3g} (limit ±{limit:.3g})"
        super().__init__(f"{key} {what} at epoch {epoch}: the run diverged")
        self.epoch = epoch


class RepresentationModule(L.LightningModule):
    """``encoder(x) -> (N, D)`` embeddings; ``head(embeddings, labels, **batch) -> {"loss": ..., ...}``.

    Args:
        encoder: a ``contracts.Encoder``.
        head: a ``contracts.Head``. An ``OwnLearningRate`` head with ``lr`` set gets its own optimizer group; a
            ``ClusteringHead`` gets its cluster updates from the ``ClusterUpdates`` callback it brings along.
        optimizer: partial optimizer constructor, e.g. ``functools.partial(torch.optim.Adam, lr=1e-3)``.
        divergence_limit: a training-loss part (any of ``head.loss_parts``, epoch mean) that is not finite or
            whose magnitude exceeds this stops the run as diverged. Every part is checked, not only their sum:
            an attraction and a repulsion running off to ±1e32 can cancel to a loss of exactly 0.
    """

    def __init__(
        self,
        encoder: nn.Module,
        head: nn.Module,
        optimizer: Callable[..., torch.optim.Optimizer],
        divergence_limit: float = 1e10,
    ):
        super().__init__()
        self.encoder, self.head, self.optimizer_factory = encoder, head, optimizer
        self.divergence_limit = float(divergence_limit)
        self._sums: dict[str, Tensor] = {}
        self._steps = 0

    def forward(self, x: Tensor) -> Tensor:
        return self.encoder(x)

    def logged_keys(self, validates: bool) -> list[str]:
        """The metric names this module logs during fit (what ``checkpoint.monitor`` may name).

        ``train/<part>`` for every loss part; with a validation loop, ``val/acc`` for classifying heads and
        ``val/loss`` for heads whose loss is defined on new points (not a clustering head's).
        """
        keys = [f"train/{part}" for part in self.head.loss_parts]
        if validates:
            keys += ["val/acc"] if isinstance(self.head, ClassifyingHead) else []
            keys += [] if isinstance(self.head, ClusteringHead) else ["val/loss"]
        return keys

    def configure_callbacks(self) -> list[L.Callback]:
        return [ClusterUpdates()] if isinstance(self.head, ClusteringHead) else []

    def _head(self, batch: dict[str, Tensor]) -> dict[str, Tensor]:
        extra = {k: v for k, v in batch.items() if k not in ("inputs", "labels")}
        embeddings = self.encoder(batch["inputs"])
        # `encoder` lets a head embed views it makes itself (contrastive positives).
        return self.head(
            embeddings, batch["labels"], inputs=batch["inputs"], epoch=self.current_epoch, encoder=self.encoder,
            **extra,
        )  # fmt: skip

    def training_step(self, batch: dict[str, Tensor], batch_idx: int) -> Tensor:
        out = self._head(batch)
        # Sum the parts on the device and log once an epoch: a per-step self.log costs ~1 ms a step on small models.
        for k, v in out.items():
            self._sums[k] = self._sums.get(k, 0.0) + v.detach()
        self._steps += 1
        return out["loss"]

    def on_train_epoch_start(self) -> None:
        self._sums, self._steps = {}, 0

    def on_train_epoch_end(self) -> None:
        means = {f"train/{k}": v / max(self._steps, 1) for k, v in self._sums.items()}
        values = {k: float(v) for k, v in means.items()}  # one host sync an epoch
        for key, value in values.items():
            if not math.isfinite(value) or abs(value) > self.divergence_limit:
                raise DivergedError(self.current_epoch, key, value, self.divergence_limit)
        if means:
            self.log_dict(means, sync_dist=True)

    @torch.no_grad()
    def embed(self, inputs: Tensor, batch_size: int = 4096) -> Tensor:
        """Encoder output for ``inputs`` (N, ...) in eval mode, chunked; restores the previous mode."""
        was_training = self.encoder.training
        self.encoder.eval()
        out = torch.cat([self.encoder(inputs[i : i + batch_size]) for i in range(0, len(inputs), batch_size)])
        self.encoder.train(was_training)
        return out

    def train_split(self) -> tuple[Tensor, dict[str, Tensor]]:
        """The whole training split (every rank holds all of it): encoder output (N, D) and the split's tensors
        on this module's device, with ``index`` (N,) = row positions."""
        split = {k: v.to(self.device) for k, v in self.trainer.datamodule.split("train").items()}
        split["index"] = torch.arange(len(split["labels"]), device=self.device)
        return self.embed(split["inputs"]), split

    def validation_step(self, batch: dict[str, Tensor], batch_idx: int) -> None:
        n = len(batch["labels"])
        if isinstance(self.head, ClassifyingHead):
            logits = self.head.logits(self.encoder(batch["inputs"]))
            labelled = batch["labels"] >= 0
            acc = (logits.argmax(1)[labelled] == batch["labels"][labelled]).float().mean()
            self.log("val/acc", acc, batch_size=int(labelled.sum()), prog_bar=True, sync_dist=True)
        if not isinstance(
            self.head, ClusteringHead
        ):  # a clustering head's loss needs the training assignment
            self.log("val/loss", self._head(batch)["loss"], batch_size=n, sync_dist=True)

    def configure_optimizers(self) -> torch.optim.Optimizer:
        head_lr = self.head.lr if isinstance(self.head, OwnLearningRate) else None
        groups = [
            {"params": [p for p in self.encoder.parameters() if p.requires_grad]},
            {"params": [p for p in self.head.parameters() if p.requires_grad]}
            | ({"lr": head_lr} if head_lr is not None else {}),
        ]
        return self.optimizer_factory([g for g in groups if g["params"]])


def count_parameters(*modules: nn.Module) -> int:
    """Number of trainable parameters (the CSRL paper's Fig. 2/7 counts)."""
    return sum(p.numel() for m in modules for p in m.parameters() if p.requires_grad)
