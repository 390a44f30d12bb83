"""Small Lightning callbacks: the epoch timer the entry point attaches, the cluster updates that a clustering
head brings along (``RepresentationModule.configure_callbacks``), and the validation evaluators run on the whole
validation split after every validation epoch (``ValidationMetrics``, as OML's ``MetricValCallback``), a
checkpoint that selects the epoch by Boudiaf et al.'s rule (``BoudiafCheckpoint``), and a search's trial pruned
while it trains (``PruneTrial``)."""

from __future__ import annotations

import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import lightning as L
import numpy as np
import torch
from lightning.pytorch.callbacks import ModelCheckpoint
from lightning.pytorch.utilities.seed import isolate_rng
from torch import Tensor

from clusterable.contracts import (
    ClusteringHead,
    ContractError,
    EmbedsSplits,
    EvalContext,
    Evaluator,
    RepresentingHead,
    declared_metrics,
)
from clusterable.evaluation.runner import call_evaluators
from clusterable.pruning import Reporter, TrialLink

# Per-row tensors of a validation batch that evaluators may use besides the labels (In-Shop's query/gallery).
ROW_FLAGS = ("is_query", "is_gallery")


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
    both on the whole training split's encoder output, embedded as the evaluators embed a split
    (``EmbedsSplits.embed_split``: through the datamodule's ``eval_batches``, so an image-folder dataset, whose
    splits hold no ``inputs``, works too), with the split's tensors and ``index`` (N,) = row positions (what a
    training batch's ``index`` points into). Every DDP rank embeds the whole split with the same weights, so every
    rank computes the same assignment. ``seconds`` holds each Lloyd step's wall time.
    """

    def __init__(self) -> None:
        self.seconds: list[float] = []

    @staticmethod
    def _training_split(trainer: L.Trainer, pl_module: L.LightningModule) -> tuple[Tensor, dict[str, Tensor]]:
        if not isinstance(pl_module, EmbedsSplits) or not isinstance(pl_module.head, ClusteringHead):
            raise ContractError(
                f"ClusterUpdates: {type(pl_module).__name__} must embed splits (EmbedsSplits) for a ClusteringHead"
            )
        embeddings, split = pl_module.embed_split(trainer.datamodule, "train")
        split["index"] = torch.arange(len(embeddings), device=embeddings.device)
        return embeddings, split

    def on_train_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        embeddings, split = self._training_split(trainer, pl_module)
        pl_module.head.init_clusters(embeddings, **split)

    def on_train_epoch_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        start = time.perf_counter()
        embeddings, split = self._training_split(trainer, pl_module)
        pl_module.head.update_clusters(embeddings, **split)
        self.seconds.append(time.perf_counter() - start)

    @property
    def mean_s(self) -> float | None:
        return sum(self.seconds) / len(self.seconds) if self.seconds else None


class PruneTrial(L.Callback):
    """A search's trial pruned while it trains (``clusterable.pruning``): after every epoch (its validation done) the
    objective ``link.metric`` is reported to the trial, and training stops where Optuna's pruner prunes it.
    ``pruned`` says why (None: it trained to its end) and ``last_epoch`` holds the last epoch's metrics."""

    def __init__(self, link: TrialLink) -> None:
        self.link = link
        self.reporter: Reporter | None = None
        self.pruned: str | None = None
        self.last_epoch: dict[str, float] = {}

    def on_train_epoch_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self.last_epoch = {k: float(v) for k, v in trainer.callback_metrics.items() if v.numel() == 1}
        value = self.last_epoch.get(self.link.metric)
        if value is None or self.pruned is not None:  # (logged every epoch: checked before training)
            return
        if self.reporter is None:
            self.reporter = Reporter([self.link])
        self.pruned = self.reporter.prune(0, trainer.current_epoch, value)
        if self.pruned is not None:
            trainer.should_stop = True


class ValidationMetrics(L.Callback):
    """The validation evaluators (``validation_evaluators``) on the whole validation split after every validation
    epoch, logged as ``val/<key>`` (rank 0), so that ``checkpoint.monitor: val/recall@1/cos`` selects the epoch by
    retrieval.

    Each validation batch's ``encoder_output`` (B, D), which the module's ``validation_step`` returns, is kept with
    the representation the evaluators score (``head.embed`` of it for a ``RepresentingHead``), the labels,
    ``index`` and the row flags (``is_query``/``is_gallery``); at the epoch's end every rank's rows are gathered,
    each row kept once (ranks pad their shares with repeated rows) and the evaluators called with an
    ``EvalContext`` without a training split (``train_embeddings`` None). Nothing is kept during the sanity check.

    Args:
        evaluators: name -> ``contracts.Evaluator``.
    """

    def __init__(self, evaluators: Mapping[str, Evaluator]):
        self.evaluators = dict(evaluators)
        self._rows: list[dict[str, Tensor]] = []

    def logged_keys(self) -> list[str]:
        """``val/<key>`` for every key the evaluators declare (``contracts.DeclaresMetrics``)."""
        return [f"val/{name}" for fn in self.evaluators.values() for name in declared_metrics(fn) or []]

    def logs_undeclared_metrics(self) -> bool:
        """Whether an evaluator does not declare its keys (so ``logged_keys`` may miss some ``val/`` key)."""
        return any(declared_metrics(fn) is None for fn in self.evaluators.values())

    def may_log(self, key: str) -> bool:
        """Whether ``key`` (``checkpoint.monitor``) can be one of this callback's: a declared key, or any ``val/``
        key when an evaluator does not declare its own."""
        return key in self.logged_keys() or (key.startswith("val/") and self.logs_undeclared_metrics())

    def on_validation_epoch_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self._rows = []

    def on_validation_batch_end(
        self,
        trainer: L.Trainer,
        pl_module: L.LightningModule,
        outputs: Any,
        batch: Any,
        batch_idx: int,
        dataloader_idx: int = 0,
    ) -> None:
        if trainer.sanity_checking or not self.evaluators:
            return
        if not isinstance(outputs, Mapping) or "encoder_output" not in outputs:
            raise ContractError(
                f"ValidationMetrics: {type(pl_module).__name__}.validation_step must return "
                "{'encoder_output': (B, D)}"
            )
        encoder_output, head = outputs["encoder_output"], pl_module.head
        rep = head.embed(encoder_output, **batch) if isinstance(head, RepresentingHead) else encoder_output
        kept = {"embeddings": rep, "encoder_output": encoder_output, "labels": batch["labels"]}
        kept |= {k: batch[k] for k in ("index", *ROW_FLAGS) if k in batch}
        self._rows.append({k: v.detach() for k, v in kept.items()})

    def on_validation_epoch_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        rows, self._rows = self._rows, []
        if not rows:
            return
        split = {k: torch.cat([r[k] for r in rows]) for k in rows[0]}
        if trainer.world_size > 1:
            split = {k: v.flatten(0, 1) for k, v in pl_module.all_gather(split).items()}
            if "index" in split:  # ranks pad their shares with repeated rows: keep each row once
                _, first = first_occurrences(split["index"])
                split = {k: v[first] for k, v in split.items()}
        context = EvalContext(
            stage="val",
            split=split,
            head=pl_module.head,
            encoder_output=split.pop("encoder_output"),
            train_embeddings=None,
            train_labels=None,
            run_dir=None,
            seed=0,
        )
        embeddings = split.pop("embeddings")
        metrics = call_evaluators(self.evaluators, embeddings, split["labels"], context)
        pl_module.log_dict({k: float(v) for k, v in metrics.items()}, rank_zero_only=True)


def first_occurrences(index: Tensor) -> tuple[Tensor, Tensor]:
    """The unique values of ``index`` (N,) and the position of each one's first occurrence."""
    unique, inverse = torch.unique(index, return_inverse=True)
    first = torch.full((len(unique),), len(index), dtype=torch.long, device=index.device)
    first.scatter_reduce_(0, inverse, torch.arange(len(index), device=index.device), reduce="amin")
    return unique, first


class BoudiafCheckpoint(ModelCheckpoint):
    """Keeps one checkpoint, chosen by Boudiaf et al.'s model-selection rule (repository
    ``jeromerony/dml_cross_entropy``, ``experiment.py``, ``main``), where Lightning's ``ModelCheckpoint`` keeps
    the first epoch that is strictly best by the exact value:

    - the monitored value is compared as ``round(100 * value, decimals)``: their ``recall_at_ks``
      (``utils/metrics.py``) returns ``round(100 * recall, 2)``, and ``main`` compares those;
    - ties go to the later epoch (their ``>=``; ``<=`` with ``mode: min``);
    - the untrained network is a candidate: the validation loop runs once before the first training step and its
      weights are the first best (their ``best_val`` starts from the evaluation before training), kept when no
      epoch reaches its rounded value. That extra validation runs with the random state isolated, so training
      takes the same steps as without it (they reseed after it); it is logged like any validation, at step 0.

    They select on cosine Recall@1 (``checkpoint.monitor: val/recall@1/cos``) of the split they test on; which
    split validates here is the dataset's. The rounding is applied to the logged value (float32 in Lightning's
    metrics), so a value exactly halfway between two hundredths of a percent may round the other way than their
    float64. A checkpoint of the untrained network has ``global_step`` 0 (and ``epoch`` 0, as the first epoch's).

    Args:
        dirpath: where the checkpoint is written.
        filename: its name without ``.ckpt``.
        monitor: the logged key to select by (not None).
        mode: ``max`` or ``min``.
        decimals: the decimals of ``100 * value`` compared (their 2), >= 0.
        untrained_candidate: validate and keep the untrained network first (theirs: true).
    """

    def __init__(
        self,
        dirpath: str | Path,
        filename: str,
        monitor: str,
        mode: str = "max",
        decimals: int = 2,
        untrained_candidate: bool = True,
    ):
        if not monitor:
            raise ValueError("monitor must name a logged metric: Boudiaf et al.'s rule selects by one")
        if mode not in ("max", "min"):
            raise ValueError(f"mode must be max or min, got {mode!r}")
        if isinstance(decimals, bool) or not isinstance(decimals, int) or decimals < 0:
            raise ValueError(f"decimals must be an integer >= 0, got {decimals!r}")
        super().__init__(dirpath=dirpath, filename=filename, monitor=monitor, mode=mode, save_top_k=1)
        self.decimals = decimals
        self.untrained_candidate = bool(untrained_candidate)

    def rounded(self, value: Tensor | float) -> float:
        """``round(100 * value, decimals)`` as their NumPy scalar rounds it (half to even after scaling)."""
        return float(np.round(np.float64(float(value)) * 100, self.decimals))

    def check_monitor_top_k(self, trainer: L.Trainer, current: Tensor | None = None) -> bool:
        """Whether ``current`` replaces the kept checkpoint: at least as good once rounded (ties: the later)."""
        if current is None:
            return False
        if not self.best_k_models:
            return True
        best = self.rounded(self.best_k_models[self.kth_best_model_path])
        now = self.rounded(current)
        better = now >= best if self.mode == "max" else now <= best
        return trainer.strategy.reduce_boolean_decision(bool(better))

    def on_train_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        super().on_train_start(trainer, pl_module)
        if not self.untrained_candidate or trainer.global_step > 0 or not trainer.enable_validation:
            return  # resumed runs have trained weights; without validation there is nothing to select by
        # As Lightning's epoch loop runs validation inside training (training_epoch_loop.py, _run_validation).
        with isolate_rng():
            trainer.validating = True
            trainer.fit_loop.epoch_loop.val_loop.run()
            trainer.training = True
        # ModelCheckpoint saves nothing at global step 0 by itself (nothing trained yet); the untrained network is
        # a candidate here, so it is saved as the first best.
        self._save_topk_checkpoint(trainer, self._monitor_candidates(trainer))
