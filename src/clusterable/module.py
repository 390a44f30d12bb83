"""The LightningModule: an encoder, a loss head and an optimizer. Nothing paper-specific lives here."""

from __future__ import annotations

import functools
import inspect
import math
from collections.abc import Callable
from typing import Any, Literal

import lightning as L
import torch
from torch import Tensor, nn

from clusterable.callbacks import ClusterUpdates
from clusterable.config import ConfigError
from clusterable.contracts import (
    ClassifyingHead,
    ClusteringHead,
    ContractError,
    DataModule,
    EncodingHead,
    HasConstantBuffers,
    HasEmbeddingLayer,
    OwnLearningRate,
    WatchesDivergence,
)


class DivergedError(RuntimeError):
    """The training loss ran away; the run is recorded with this one line and ``failed_epoch``.

    Either a logged loss part became NaN, infinite or larger in magnitude than ``divergence_limit``
    (``beyond_limit``), or a ``WatchesDivergence`` head recognised its own runaway (``reason``). ``expected``: the
    head says its loss is unbounded in this setting (``WatchesDivergence.unbounded``: Gaussian-COREL below
    λ = 0.5), so the runaway is a result of its grid, whichever rule caught it, even in the first epoch.

    What the run keeps is the run layer's business: a run with a best checkpoint from an epoch before the runaway
    is evaluated there and recorded ``diverged`` with those metrics; without one it is ``diverged`` when
    ``expected``, else ``failed`` (NaN in the first epoch: a learning rate or a bug, not a result).
    """

    def __init__(self, epoch: int, reason: str, expected: bool = False):
        super().__init__(f"{reason} at epoch {epoch}: the run diverged")
        self.epoch = epoch
        self.expected = expected

    @classmethod
    def beyond_limit(cls, epoch: int, key: str, value: float, limit: float, expected: bool) -> DivergedError:
        what = f"became {value}" if not math.isfinite(value) else f"reached {value:.3g} (limit ±{limit:.3g})"
        return cls(epoch, f"{key} {what}", expected)


def epoch_divergence(
    head: nn.Module, values: dict[str, float], history: list[dict[str, float]], epoch: int, limit: float
) -> DivergedError | None:
    """The ``DivergedError`` of a training epoch whose loss ran away, or None: a part of ``values`` (``train/<part>``
    epoch means) not finite or beyond ``±limit``, or a ``WatchesDivergence`` head recognising its runaway from
    ``history`` (the epochs' means so far, this one appended here). The one check of a single run and of every
    member of a stacked one."""
    watches = isinstance(head, WatchesDivergence)
    for key, value in values.items():
        if not math.isfinite(value) or abs(value) > limit:
            return DivergedError.beyond_limit(epoch, key, value, limit, expected=watches and head.unbounded)
    if watches and values:
        history.append({k.removeprefix("train/"): v for k, v in values.items()})
        reason = head.divergence(history)
        if reason is not None:
            return DivergedError(epoch, reason, expected=True)
    return None


class RepresentationModule(L.LightningModule):
    """``encoder(x) -> (N, D)`` embeddings; ``head(embeddings, labels, **batch) -> {"loss": ..., ...}``.

    Args:
        encoder: a ``contracts.Encoder``.
        head: a ``contracts.Head``. An ``OwnLearningRate`` head with ``lr`` set gets its own optimizer group; a
            ``ClusteringHead`` gets its cluster updates from the ``ClusterUpdates`` callback it brings along.
        optimizer: partial optimizer constructor, e.g. ``functools.partial(torch.optim.Adam, lr=1e-3)``.
        divergence_limit: a training-loss part (any of ``head.loss_parts``, epoch mean) that is not finite or
            whose magnitude exceeds this stops the run as diverged. Every part is checked, not only their sum:
            an attraction and a repulsion running off to ±1e32 can cancel to a loss of exactly 0. A head that
            satisfies ``WatchesDivergence`` is also asked after every epoch, so that a runaway it can recognise
            (Gaussian-COREL below λ = 0.5) stops the run long before any part reaches the limit.
            Why a part's size, not only the loss's: the limit is a numerical one. At the default 1e10 a float32
            part can no longer resolve differences of ~1e3 (eps 1.2e-7), so a loss or logits built from it are
            noise, bounded or not: Gaussian-COREL at λ = 0.5, whose loss is half a cross-entropy, lets the
            features' norm grow (attraction ~1e9 by epoch 150 on digits, where its accuracy collapses). Below the
            limit a growing norm with a finite loss is training, not divergence. Either way the run keeps its best
            epoch: the check runs after the epoch's last batch, before validation, so a runaway epoch is never
            checkpointed, and the run layer evaluates the best checkpoint of the epochs before it.
        optimizer_steps: ``per_batch`` (one optimizer step per mini-batch, the usual) or ``per_sample`` (one step
            per row of each batch, in the batch's order: the CSRL authors train their standard AEs so,
            ``train_AE`` in ``src/train.py``). ``per_sample`` runs the rows of a batch in a plain loop inside one
            Lightning step (manual optimization), so that Lightning's per-step cost is paid once a batch, not once
            a row: give it large batches (``dataset.batch_size=-1``). One device only.
        scheduler: partial learning-rate schedule ``scheduler(optimizer, total_steps) -> LRScheduler``, stepped
            after every optimizer step (``clusterable.schedules``), or a partial torch scheduler that takes no
            ``total_steps`` (``StepLR``: its steps are optimizer steps); None keeps the rate constant.
        weight_decay_on: ``all`` parameters, or only ``matrices`` (parameters with more than one dimension: no
            decay on biases and normalisation parameters, as Boudiaf et al. 2020 train).
        channels_last: image inputs and the encoder in channels-last memory format (faster convolutions on GPUs
            with tensor cores).
        class_disjoint: the validation split holds classes never seen in training: no ``val/acc`` or ``val/loss``
            (a classifier has no output for them); only the validation evaluators score it.
        trainable: ``all`` of the encoder trains, or only its ``embedding_layer`` (``contracts.HasEmbeddingLayer``;
            DSCL's "last layer" fine-tuning): every other encoder parameter is frozen and the rest of the encoder
            stays in eval mode (BatchNorm statistics and dropout as at evaluation). The head trains either way.

    Attributes:
        steps_taken: optimizer steps taken so far (for seconds per step).
    """

    def __init__(
        self,
        encoder: nn.Module,
        head: nn.Module,
        optimizer: Callable[..., torch.optim.Optimizer],
        divergence_limit: float = 1e10,
        optimizer_steps: Literal["per_batch", "per_sample"] = "per_batch",
        scheduler: Callable[..., torch.optim.lr_scheduler.LRScheduler] | None = None,
        weight_decay_on: Literal["all", "matrices"] = "all",
        channels_last: bool = False,
        class_disjoint: bool = False,
        trainable: Literal["all", "embedding_layer"] = "all",
    ):
        super().__init__()
        if optimizer_steps not in ("per_batch", "per_sample"):
            raise ValueError(f"optimizer_steps must be per_batch or per_sample, got {optimizer_steps!r}")
        if weight_decay_on not in ("all", "matrices"):
            raise ValueError(f"weight_decay_on must be all or matrices, got {weight_decay_on!r}")
        self.encoder, self.head, self.optimizer_factory = encoder, head, optimizer
        self.scheduler_factory, self.weight_decay_on = scheduler, weight_decay_on
        self.channels_last, self.class_disjoint = bool(channels_last), bool(class_disjoint)
        if trainable not in ("all", "embedding_layer"):
            raise ValueError(f"trainable must be all or embedding_layer, got {trainable!r}")
        self._frozen: list[nn.Module] = _freeze_all_but_embedding_layer(encoder) if trainable != "all" else []
        # DistributedDataParallel broadcasts every buffer from rank 0 at each forward unless it is named here
        # (torch's hook for it): the constant ones a submodule declares, e.g. a text encoder's word vectors.
        self._ddp_params_and_buffers_to_ignore = [
            f"{prefix}.{name}" if prefix else name
            for prefix, sub in self.named_modules()
            if isinstance(sub, HasConstantBuffers)
            for name in sub.ddp_constant_buffers
        ]
        self.divergence_limit = float(divergence_limit)
        self.automatic_optimization = optimizer_steps == "per_batch"
        self.steps_taken = 0
        self._sums: dict[str, Tensor] = {}
        self._steps, self._checked = 0, False
        self._means: dict[str, Tensor] = {}
        # Epoch means of the loss parts, for a head that watches its own divergence (WatchesDivergence).
        self._history: list[dict[str, float]] = []

    def forward(self, x: Tensor) -> Tensor:
        return self.encoder(x)

    def train(self, mode: bool = True) -> RepresentationModule:
        """Set train or eval mode; with ``trainable: embedding_layer`` the frozen encoder layers stay in eval mode."""
        super().train(mode)
        for module in self._frozen:
            module.eval()
        return self

    def logged_keys(self, validates: bool) -> list[str]:
        """The metric names this module logs during fit (what ``checkpoint.monitor`` may name).

        ``train/<part>`` for every loss part; with a validation loop, ``val/acc`` for classifying heads and
        ``val/loss`` for heads whose loss is defined on new points (not a clustering head's). The validation
        evaluators' keys are their callback's (``callbacks.ValidationMetrics.logged_keys``).
        """
        keys = [f"train/{part}" for part in self.head.loss_parts]
        if validates and not self.class_disjoint:
            keys += ["val/acc"] if isinstance(self.head, ClassifyingHead) else []
            keys += [] if isinstance(self.head, ClusteringHead) else ["val/loss"]
        return keys

    def configure_callbacks(self) -> list[L.Callback]:
        return [ClusterUpdates()] if isinstance(self.head, ClusteringHead) else []

    def check_devices(self, world_size: int) -> None:
        """Refuse, before ``fit`` launches any process, a device count this module cannot train on: per-sample
        steps run on one device."""
        if not self.automatic_optimization and world_size > 1:
            raise ConfigError(
                f"optimizer_steps=per_sample runs on one device, not {world_size}: set "
                "trainer.devices=1 or optimizer_steps=per_batch"
            )

    def on_fit_start(self) -> None:
        self._history = []
        if self.channels_last:
            self.encoder.to(memory_format=torch.channels_last)

    def encode(self, inputs: Tensor) -> Tensor:
        """The encoder's output (N, D) for ``inputs`` (N, *input_shape), channels-last where the run asks for it.

        Part of the step API the stacked engine calls under ``vmap`` (``clusterable.stacked.members``).
        """
        if self.channels_last and inputs.dim() == 4:
            inputs = inputs.contiguous(memory_format=torch.channels_last)
        return self.encoder(inputs)

    def loss_parts(
        self, batch: dict[str, Tensor], embeddings: Tensor | None = None, epoch: int | None = None
    ) -> dict[str, Tensor]:
        """The head's loss parts on ``batch`` (each a 0-d tensor, ``loss`` the one minimised); ``embeddings``
        (B, D) when the batch is already encoded; ``epoch`` (default: Lightning's ``current_epoch``) for heads
        with schedules. One training step's arithmetic, called by ``training_step`` and, under ``vmap`` with its
        own epoch, by the stacked engine."""
        epoch = self.current_epoch if epoch is None else epoch
        extra = {k: v for k, v in batch.items() if k not in ("inputs", "labels")}
        if embeddings is None:  # a training step: an EncodingHead embeds the batch its own way (sub-batches)
            encode = self.head.encode if isinstance(self.head, EncodingHead) else None
            embeddings = self.encode(batch["inputs"]) if encode is None else encode(self.encode, batch["inputs"])
        # `encoder` lets a head embed views it makes itself (contrastive positives).
        return self.head(
            embeddings,
            batch["labels"],
            inputs=batch["inputs"],
            epoch=epoch,
            encoder=self.encoder,
            **extra,
        )

    def validation_outputs(self, batch: dict[str, Tensor], epoch: int | None = None) -> dict[str, Tensor]:
        """What validation computes on ``batch``: ``encoder_output`` (B, D); ``logits`` (B, K) for a classifying
        head and ``loss`` (0-d) for a head whose loss is defined on new points (not a clustering head's, which
        needs the training assignment), neither when the validation classes are disjoint from training's.
        The one rule for which heads log ``val/acc`` and ``val/loss``, for a single run and a stacked member."""
        embeddings = self.encode(batch["inputs"])
        out = {"encoder_output": embeddings}
        if self.class_disjoint:
            return out
        if isinstance(self.head, ClassifyingHead):
            out["logits"] = self.head.logits(embeddings)
        if not isinstance(self.head, ClusteringHead):
            out["loss"] = self.loss_parts(batch, embeddings, epoch=epoch)["loss"]
        return out

    def training_step(self, batch: dict[str, Tensor], batch_idx: int) -> Tensor | None:
        if not self.automatic_optimization:
            self._per_sample_steps(batch)
            return None
        out = self.loss_parts(batch)
        self._accumulate(out)
        self.steps_taken += 1
        return out["loss"]

    def _accumulate(self, out: dict[str, Tensor]) -> None:
        # Sum the parts on the device and log once an epoch: a per-step self.log costs ~1 ms a step on small models.
        for k, v in out.items():
            self._sums[k] = self._sums.get(k, 0.0) + v.detach()
        self._steps += 1

    def _per_sample_steps(self, batch: dict[str, Tensor]) -> None:
        """One optimizer step per row of ``batch``, in order; the epoch's parts are means over the rows.

        A plain loop (no Lightning hook per row): what is left per step is PyTorch's own cost of a forward, a
        backward and an optimizer step, so the loop runs at a plain training loop's speed (scripts/bench.py).
        """
        optimizer = self.optimizers(use_pl_optimizer=False)
        scheduler = self.lr_schedulers()
        rows = [{k: v[i : i + 1] for k, v in batch.items()} for i in range(len(batch["labels"]))]
        parts = []
        for row in rows:
            out = self.loss_parts(row)
            optimizer.zero_grad(set_to_none=True)
            out["loss"].backward()
            optimizer.step()
            if scheduler is not None:
                scheduler.step()
            parts.append(out)
        for key in parts[0] if parts else ():
            self._sums[key] = self._sums.get(key, 0.0) + torch.stack([p[key].detach() for p in parts]).sum()
        self._steps += len(parts)
        self.steps_taken += len(parts)

    def on_train_epoch_start(self) -> None:
        self._sums, self._steps, self._checked = {}, 0, False

    def on_train_batch_end(self, outputs: object, batch: object, batch_idx: int) -> None:
        # The epoch's divergence check runs after its last training batch, before the validation loop: a runaway
        # epoch is never validated, so it can never become the best checkpoint that a diverged run keeps.
        if self.trainer.is_last_batch:
            self._check_epoch()

    def on_train_epoch_end(self) -> None:
        if not self._checked:  # an epoch cut short by trainer.max_steps has no last batch
            self._check_epoch()
        if self._means:
            self.log_dict(self._means, sync_dist=True)

    def _check_epoch(self) -> None:
        """Stop the run (``DivergedError``) when this epoch's loss ran away; keep its means for the log."""
        self._checked = True
        self._means = {f"train/{k}": v / max(self._steps, 1) for k, v in self._sums.items()}
        values = {k: float(v) for k, v in self._means.items()}  # one host sync an epoch
        diverged = epoch_divergence(self.head, values, self._history, self.current_epoch, self.divergence_limit)
        if diverged is not None:
            raise diverged

    @torch.no_grad()
    def embed_split(self, data: DataModule, stage: str) -> tuple[Tensor, dict[str, Tensor]]:
        """The encoder output (N, D) of the whole split ``stage``, its rows in order, and the split's per-row
        tensors (``data.split(stage)``) on this module's device.

        The one way a whole split is embedded, by the Lloyd steps (``callbacks.ClusterUpdates``) and the
        evaluators (``evaluation.runner.represent``) alike: the encoder sees ``data.eval_batches(stage, device)``
        (an in-memory split's inputs in chunks, or an image folder's decoded centre crops: its splits hold no
        ``inputs``) in eval mode, and the previous mode is restored. Every DDP rank embeds the whole split.
        """
        was_training = self.training
        self.eval()
        try:
            batches = data.eval_batches(stage, self.device)
            out = [self.encoder(_as_dtype(batch["inputs"], self.dtype)) for batch in batches]
        finally:
            self.train(was_training)
        split = {k: v.to(self.device) for k, v in data.split(stage).items()}
        out = torch.cat(out) if out else torch.zeros(0, self.encoder.embedding_dim, device=self.device)
        return out, split

    def validation_step(self, batch: dict[str, Tensor], batch_idx: int) -> dict[str, Tensor]:
        """``val/acc`` and ``val/loss`` where they are defined (``validation_outputs``); returns
        ``{"encoder_output": (B, D)}`` for the callbacks (``ValidationMetrics`` gathers it for the validation
        evaluators)."""
        out = self.validation_outputs(batch)
        if "logits" in out:
            labelled = batch["labels"] >= 0
            acc = (out["logits"].argmax(1)[labelled] == batch["labels"][labelled]).float().mean()
            self.log("val/acc", acc, batch_size=int(labelled.sum()), prog_bar=True, sync_dist=True)
        if "loss" in out:
            self.log("val/loss", out["loss"], batch_size=len(batch["labels"]), sync_dist=True)
        return {"encoder_output": out["encoder_output"].detach()}

    def parameter_groups(self) -> list[dict]:
        """The optimizer's parameter groups: the encoder's trainable parameters, the head's (at its own ``lr``
        where it has one, ``contracts.OwnLearningRate``), and, with ``weight_decay_on: matrices``, each split in
        two so that vectors (biases, norms) get no decay. Empty groups are left out. The stacked engine maps its
        stacked tensors onto these same groups (``stacked.optim.from_optimizers``)."""
        head_lr = self.head.lr if isinstance(self.head, OwnLearningRate) else None
        groups = [
            {"params": [p for p in self.encoder.parameters() if p.requires_grad]},
            {"params": [p for p in self.head.parameters() if p.requires_grad]}
            | ({"lr": head_lr} if head_lr is not None else {}),
        ]
        if self.weight_decay_on == "matrices":
            groups = [{**g, "params": [p for p in g["params"] if p.dim() > 1]} for g in groups] + [
                {**g, "params": [p for p in g["params"] if p.dim() <= 1], "weight_decay": 0.0} for g in groups
            ]
        return [g for g in groups if g["params"]]

    def build_optimizer(self) -> torch.optim.Optimizer:
        """The run's optimizer over ``parameter_groups()``, as the config's ``optimizer`` node builds it."""
        return self.optimizer_factory(self.parameter_groups())

    def configure_optimizers(self) -> dict:
        optimizer = self.build_optimizer()
        if self.scheduler_factory is None:
            return {"optimizer": optimizer}
        total = self.trainer.estimated_stepping_batches
        if not self.automatic_optimization:  # one step per row of the training split
            total = self.trainer.max_epochs * len(self.trainer.datamodule.split("train")["labels"])
        if total == 0:  # trainer.max_steps=0: nothing to schedule
            return {"optimizer": optimizer}
        scheduler = self.scheduler_factory(optimizer, **_total_steps_if_taken(self.scheduler_factory, int(total)))
        return {"optimizer": optimizer, "lr_scheduler": {"scheduler": scheduler, "interval": "step"}}


def _total_steps_if_taken(schedule: Callable[..., Any], total: int) -> dict[str, int]:
    """``{"total_steps": total}`` for a schedule that takes the run's number of optimizer steps (ours,
    ``clusterable.schedules``, and torch's ``OneCycleLR``), else nothing: torch's ``StepLR``, ``CosineAnnealingLR``
    ... take their step counts from the config (``scheduler.step_size``, ``scheduler.T_max``), in optimizer steps."""
    target = schedule.func if isinstance(schedule, functools.partial) else schedule
    try:
        parameters = inspect.signature(target).parameters
    except (TypeError, ValueError):  # a callable without a signature: given the steps, as before
        return {"total_steps": total}
    takes_any = any(p.kind == p.VAR_KEYWORD for p in parameters.values())
    return {"total_steps": total} if "total_steps" in parameters or takes_any else {}


def _freeze_all_but_embedding_layer(encoder: nn.Module) -> list[nn.Module]:
    """Freeze every encoder parameter outside ``encoder.embedding_layer``; return the encoder's direct and
    nested submodules that hold none of it (kept in eval mode by ``RepresentationModule.train``)."""
    layer = encoder.embedding_layer if isinstance(encoder, HasEmbeddingLayer) else None
    if not isinstance(layer, nn.Module) or not any(True for _ in layer.parameters()):
        raise ContractError(
            f"trainable=embedding_layer: {type(encoder).__name__} has no embedding layer with parameters "
            "(an encoder declares it as `embedding_layer`; a backbone has one when model.out_dim is set)"
        )
    keep = {id(p) for p in layer.parameters()}
    for p in encoder.parameters():
        if id(p) not in keep:
            p.requires_grad_(False)
    inside = {id(m) for m in layer.modules()}
    # The leaf modules outside the layer: putting them in eval mode leaves the layer (and its parents' own
    # flags, which no layer reads) alone.
    return [m for m in encoder.modules() if id(m) not in inside and not any(True for _ in m.children())]


def _as_dtype(inputs: Tensor, dtype: torch.dtype) -> Tensor:
    """Pixels or features in the module's precision (float64 under ``trainer.precision=64-true``, which Lightning
    applies to training batches only); token ids stay integers."""
    return inputs.to(dtype) if inputs.is_floating_point() else inputs


def count_parameters(*modules: nn.Module) -> int:
    """Number of trainable parameters (the CSRL paper's Fig. 2/7 counts)."""
    return sum(p.numel() for m in modules for p in m.parameters() if p.requires_grad)
