"""The LightningModule: an encoder, a loss head and an optimizer. Nothing paper-specific lives here."""

from __future__ import annotations

from collections.abc import Callable

import lightning as L
import torch
from torch import Tensor, nn


class NonFiniteLossError(RuntimeError):
    """The training loss became NaN or infinite; the run stops and is recorded as failed."""

    def __init__(self, epoch: int, value: float):
        super().__init__(f"training loss became {value} at epoch {epoch}")
        self.epoch = epoch


class RepresentationModule(L.LightningModule):
    """``encoder(x) -> (N, D)`` embeddings; ``head(embeddings, labels, **batch) -> {"loss": ..., ...}``.

    Args:
        encoder: see ``clusterable.models``; must have ``embedding_dim``.
        head: see ``clusterable.heads``. If it has ``lr`` (not None) its parameters get their own optimizer group
            with that learning rate. Heads that hold a cluster assignment (``init_clusters``/``update_clusters``)
            get the whole training split once before training and after every training epoch (a Lloyd step).
        optimizer: partial optimizer constructor, e.g. ``functools.partial(torch.optim.Adam, lr=1e-3)``.
    """

    def __init__(self, encoder: nn.Module, head: nn.Module, optimizer: Callable[..., torch.optim.Optimizer]):
        super().__init__()
        self.encoder, self.head, self.optimizer_factory = encoder, head, optimizer
        self._sums: dict[str, Tensor] = {}
        self._steps = 0

    def forward(self, x: Tensor) -> Tensor:
        return self.encoder(x)

    def _head(self, batch: dict[str, Tensor]) -> dict[str, Tensor]:
        extra = {k: v for k, v in batch.items() if k not in ("inputs", "labels")}
        embeddings = self.encoder(batch["inputs"])
        # `encoder` lets a head embed views it makes itself (contrastive positives).
        return self.head(
            embeddings,
            batch["labels"],
            inputs=batch["inputs"],
            epoch=self.current_epoch,
            encoder=self.encoder,
            **extra,
        )

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
        if means:
            loss = float(means["train/loss"])
            if not torch.isfinite(torch.tensor(loss)):
                raise NonFiniteLossError(self.current_epoch, loss)
            self.log_dict(means)
        if hasattr(self.head, "update_clusters"):
            embeddings, split = self._train_split_embeddings()
            self.head.update_clusters(embeddings, **split)

    def on_train_start(self) -> None:
        if hasattr(self.head, "init_clusters"):
            embeddings, split = self._train_split_embeddings()
            self.head.init_clusters(embeddings, **split)

    @torch.no_grad()
    def embed(self, inputs: Tensor, batch_size: int = 4096) -> Tensor:
        """Encoder output for ``inputs`` (N, ...) in eval mode, chunked; restores the previous mode."""
        was_training = self.encoder.training
        self.encoder.eval()
        out = torch.cat([self.encoder(inputs[i : i + batch_size]) for i in range(0, len(inputs), batch_size)])
        self.encoder.train(was_training)
        return out

    def _train_split_embeddings(self) -> tuple[Tensor, dict]:
        split = self.trainer.datamodule.split("train")
        split = {k: v.to(self.device) for k, v in split.items()}
        return self.embed(split["inputs"]), {
            "index": torch.arange(len(split["labels"]), device=self.device),
            **split,
        }

    def validation_step(self, batch: dict[str, Tensor], batch_idx: int) -> None:
        n = len(batch["labels"])
        if hasattr(self.head, "logits"):
            logits = self.head.logits(self.encoder(batch["inputs"]))
            labelled = batch["labels"] >= 0
            acc = (logits.argmax(1)[labelled] == batch["labels"][labelled]).float().mean()
            self.log("val/acc", acc, batch_size=int(labelled.sum()), prog_bar=True)
        if not hasattr(
            self.head, "assign"
        ):  # a clustering head's loss is defined on the training assignment only
            self.log("val/loss", self._head(batch)["loss"], batch_size=n)

    def configure_optimizers(self) -> torch.optim.Optimizer:
        head_lr = getattr(self.head, "lr", None)
        groups = [
            {"params": [p for p in self.encoder.parameters() if p.requires_grad]},
            {"params": [p for p in self.head.parameters() if p.requires_grad]}
            | ({"lr": head_lr} if head_lr is not None else {}),
        ]
        return self.optimizer_factory([g for g in groups if g["params"]])


def count_parameters(*modules: nn.Module) -> int:
    """Number of trainable parameters (the CSRL paper's Fig. 2/7 counts)."""
    return sum(p.numel() for m in modules for p in m.parameters() if p.requires_grad)
