"""The training loop of a stack: every member's epochs in one loop, each member's bookkeeping its own.

What a single run's Lightning loop does for its module, done here for M members at once, in the same order
(``RepresentationModule`` and its callbacks): the epoch's batches in each member's own order (its datamodule's
``epoch_rows``), one optimizer step per batch (or per row, ``optimizer_steps: per_sample``), the divergence check
after the last batch, the validation loop, the best epoch by ``checkpoint.monitor``, a clustering head's Lloyd
step. One host sync an epoch; no Python loop over members in a step.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import Tensor

from clusterable.contracts import ClusteringHead
from clusterable.logs import get_logger
from clusterable.module import DivergedError, epoch_divergence
from clusterable.stacked import steps
from clusterable.stacked.members import StackedMembers
from clusterable.stacked.optim import StackedOptimizer, from_optimizers

log = get_logger(__name__)


class StackedSplit:
    """A split of every member: a tensor all members share is kept once (N, ...), one that differs (rows
    shuffled by each member's seed) is stacked (M, N, ...). ``batch(rows)`` gathers rows (M, B) per member."""

    def __init__(self, splits: Sequence[dict[str, Tensor]], device: torch.device, dtype: torch.dtype):
        first = splits[0]
        self.shared: set[str] = set()
        self.tensors: dict[str, Tensor] = {}
        for key, value in first.items():
            value = value.to(device, dtype) if value.is_floating_point() else value.to(device)
            if all(s[key] is first[key] or torch.equal(s[key], first[key]) for s in splits[1:]):
                self.tensors[key] = value
                self.shared.add(key)
            else:
                self.tensors[key] = torch.stack(
                    [s[key].to(device, dtype) if s[key].is_floating_point() else s[key].to(device) for s in splits]
                )
        self.size = len(first["labels"])

    def batch(self, rows: Tensor) -> dict[str, Tensor]:
        """rows (M, B) -> every key (M, B, ...) plus ``index`` (M, B)."""
        members = torch.arange(rows.shape[0], device=rows.device)[:, None]
        out = {k: (v[rows] if k in self.shared else v[members, rows]) for k, v in self.tensors.items()}
        out["index"] = rows
        return out

    def select(self, members: Tensor) -> None:
        """Keep only ``members`` (indices into the stack, long): the rows each of them sees, in its order."""
        for key in self.tensors:
            if key not in self.shared:
                self.tensors[key] = self.tensors[key][members]

    def chunks(self, size: int) -> list[tuple[dict[str, Tensor], set[str]]]:
        """The split in order, ``size`` rows at a time, for evaluation: (batch, the keys shared by all members)."""
        out = []
        for start in range(0, self.size, size):
            stop = min(start + size, self.size)
            batch = {k: (v[start:stop] if k in self.shared else v[:, start:stop]) for k, v in self.tensors.items()}
            index = torch.arange(start, stop, device=batch["labels"].device)
            batch["index"] = index
            out.append((batch, self.shared | {"index"}))
        return out


@dataclass
class Settings:
    """What the members share, from their (equal) configs."""

    max_epochs: int
    divergence_limit: float
    max_batches: int | None  # trainer.limit_train_batches as a count (None: every batch)
    per_sample: bool
    monitor: str | None
    mode: str
    validates: bool
    class_disjoint: bool
    eval_batch_size: int
    step: str = "eager"  # eager | compiled | graphed (compiled and replayed as a CUDA graph): stacked.speed decides


@dataclass
class MemberRecord:
    """What training left for one member: its epoch rows for the log, its best epoch, how it stopped."""

    rows: list[dict[str, float]] = field(default_factory=list)
    history: list[dict[str, float]] = field(default_factory=list)
    best_epoch: int | None = None
    best_step: int = 0
    steps: int = 0
    diverged: DivergedError | None = None
    last_train: dict[str, float] = field(default_factory=dict)
    pruned: str | None = None  # why a search's pruner stopped it (``pruning.Reporter.prune``)


@dataclass
class StackTiming:
    fit_s: float = 0.0
    train_s: float = 0.0
    epochs: list[float] = field(default_factory=list)
    lloyd: list[float] = field(default_factory=list)


@dataclass
class Progress:
    """What the loop carries from epoch to epoch: each member's record, who still trains, the best epoch's value
    and stacked copies, the steps taken."""

    records: list[MemberRecord]
    alive: Tensor  # (M,) bool
    best_value: Tensor  # (M,) float64, NaN before the first validation
    best_params: dict[str, Tensor]
    best_buffers: dict[str, Tensor]
    steps: int = 0

    @classmethod
    def start(cls, stack: StackedMembers) -> Progress:
        m, device = stack.size, stack.device
        return cls(
            records=[MemberRecord() for _ in range(m)],
            alive=torch.ones(m, dtype=torch.bool, device=device),
            best_value=torch.full((m,), math.nan, dtype=torch.float64, device=device),
            best_params={k: v.detach().clone() for k, v in stack.params.items()},
            best_buffers={k: v.clone() for k, v in stack.buffers.items()},
        )


def fit(
    stack: StackedMembers,
    optimizer: StackedOptimizer,
    loaders: Sequence[Any],
    train: StackedSplit,
    val: StackedSplit | None,
    datamodules: Sequence[Any],
    settings: Settings,
    progress: Any = None,
    prune: Callable[[int, dict[int, dict[str, float]]], dict[int, str]] | None = None,
) -> tuple[list[MemberRecord], dict[str, Tensor], dict[str, Tensor], StackTiming]:
    """Train every member for ``settings.max_epochs``; returns each member's record and the best epoch's stacked
    parameters and buffers (the last epoch's without a monitor). A clustering head's k-means++ start
    (``init_clusters``) has run before.

    An epoch goes through the single run's phases in its order: train (``_train_epoch``), the divergence check
    (``_check_divergence``), validate (``_validate``), keep the best epoch (``_keep_best``), log, the search's
    pruning (``prune``), the Lloyd step.

    ``loaders``: each member's training ``TensorBatches`` (its batch order); ``datamodules``: each member's, for a
    clustering head's Lloyd steps. ``prune(epoch, rows)``: for a search that prunes, given each living member's
    epoch row (member -> metric -> value), the members Optuna prunes after this epoch, each with why; they stop as
    a diverged member stops.

    Members that stopped (diverged or pruned) are dropped from the stack between epochs (``_compact``), so the
    steps compute the living members only; the returned records and best copies hold every member, in order.
    """
    state = Progress.start(stack)
    records = state.records  # every member's, in order, whatever the stack drops
    kept = Kept(size=stack.size)  # what the stack kept of the members it dropped
    clustering = isinstance(stack.modules[0].head, ClusteringHead)
    timing = StackTiming()
    start = time.perf_counter()
    loaders, datamodules = list(loaders), list(datamodules)
    for epoch in range(settings.max_epochs):
        if not bool(state.alive.any()):
            break
        epoch_start = time.perf_counter()
        means, count = _train_epoch(stack, optimizer, loaders, train, settings, state.alive, epoch, timing)
        state.steps += count
        _check_divergence(stack, state, means, count, epoch, settings)
        metrics = {k: torch.tensor(v, dtype=torch.float64) for k, v in means.items()}
        if settings.validates and val is not None:
            metrics.update(_validate(stack, val, epoch, settings))
        _keep_best(stack, state, metrics, epoch, settings)
        for i in state.alive.nonzero().flatten().tolist():
            row = {k: float(v[i]) for k, v in metrics.items()}
            state.records[i].rows.append({"epoch": epoch, **row, "step": state.steps - 1})
        if prune is not None:
            living = state.alive.nonzero().flatten().tolist()
            rows = {kept.members[i]: {k: float(v[i]) for k, v in metrics.items()} for i in living}
            position = {kept.members[i]: i for i in living}
            for member, why in prune(epoch, rows).items():
                state.records[position[member]].pruned, state.alive[position[member]] = why, False
        if clustering:
            lloyd_start = time.perf_counter()
            _lloyd(stack, datamodules, state.alive, first=False)
            timing.lloyd.append(time.perf_counter() - lloyd_start)
        timing.epochs.append(time.perf_counter() - epoch_start)
        if progress is not None:
            progress(epoch, int(state.alive.sum()))
        if _worth_compacting(state, settings, clustering, epoch):
            stack, optimizer = _compact(stack, optimizer, state, kept, settings, train, val, loaders, datamodules)
    if settings.monitor is None:  # the last epoch is the one tested
        state.best_params = {k: v.detach().clone() for k, v in stack.params.items()}
        state.best_buffers = dict(stack.buffers)
        for record in records:
            record.best_epoch = (len(record.rows) - 1) if record.steps else None
    best_params, best_buffers = kept.whole(state, stack)
    timing.fit_s = time.perf_counter() - start
    return records, best_params, best_buffers, timing


@dataclass
class Kept:
    """What a stack keeps of its members once it drops those that stopped (``_compact``): which member each
    position of the current stack is (``members``), and every member's best copies (the last epoch's without a
    monitor) in full-size tensors, filled as members leave and at the end (None until the first drop)."""

    size: int
    members: list[int] = field(default_factory=list)
    params: dict[str, Tensor] | None = None
    buffers: dict[str, Tensor] | None = None

    def __post_init__(self) -> None:
        self.members = self.members or list(range(self.size))

    def store(self, state: Progress, stack: StackedMembers, monitored: bool) -> None:
        """Write the current stack's members' best copies (their current ones without a monitor) into the
        full-size ones."""
        params = state.best_params if monitored else {k: v.detach() for k, v in stack.params.items()}
        buffers = state.best_buffers if monitored else stack.buffers
        if self.params is None or self.buffers is None:  # the first drop: the stack is still whole
            self.params = {k: v.detach().clone() for k, v in params.items()}
            self.buffers = {k: v if k in stack.shared_buffers else v.clone() for k, v in buffers.items()}
            return
        rows = torch.tensor(self.members, device=stack.device)
        for key, value in params.items():
            self.params[key][rows] = value.detach()
        for key, value in buffers.items():
            if key not in stack.shared_buffers:
                self.buffers[key][rows] = value

    def whole(self, state: Progress, stack: StackedMembers) -> tuple[dict[str, Tensor], dict[str, Tensor]]:
        """Every member's best copies, in member order: the state's own where the stack never dropped one."""
        if self.params is None or self.buffers is None:
            return state.best_params, state.best_buffers
        self.store(state, stack, monitored=True)  # the state holds the last epoch's too without a monitor
        return self.params, self.buffers


def _worth_compacting(state: Progress, settings: Settings, clustering: bool, epoch: int) -> bool:
    """Drop the stopped members from the stack after this epoch: some stopped, some still train, epochs are left,
    and the step is eager (a compiled step's graph holds the stack's size; a clustering head's Lloyd state is
    resized per member: both keep their stopped members, frozen)."""
    living = int(state.alive.sum())
    return (
        settings.step == "eager"
        and not clustering
        and 0 < living < len(state.alive)
        and epoch + 1 < settings.max_epochs
    )


def _compact(
    stack: StackedMembers,
    optimizer: StackedOptimizer,
    state: Progress,
    kept: Kept,
    settings: Settings,
    train: StackedSplit,
    val: StackedSplit | None,
    loaders: list,
    datamodules: list,
) -> tuple[StackedMembers, StackedOptimizer]:
    """The stack of the living members only: each living member's parameters and buffers written into its own
    module and stacked again, its optimizer state (Adam's moments, momentum, the step count) carried over, and the
    progress, the splits, the loaders and the datamodules cut to them (in place). The members that stopped keep
    their records and, in ``kept``, their best copies. A stopped member costs a living one's forward and backward
    until it is dropped: in a pruned search, most of a stack."""
    kept.store(state, stack, monitored=settings.monitor is not None)
    positions = state.alive.nonzero().flatten().tolist()
    index = torch.tensor(positions, device=stack.device)
    modules = [stack.unstack_into(i) for i in positions]
    smaller = StackedMembers(modules)
    carried = from_optimizers(smaller.params, smaller.member_parameters(), [m.build_optimizer() for m in modules])
    for old, new in zip(optimizer.groups, carried.groups, strict=True):
        for old_state, new_state in zip(old.state, new.state, strict=True):
            for key, value in old_state.items():
                if key not in ("frozen", "frozen_rows"):  # the dead members' rows: none are left
                    new_state[key] = value[index].clone()
    carried.steps = optimizer.steps
    state.alive = state.alive[index]
    state.best_value = state.best_value[index]
    state.best_params = {k: v[index] for k, v in state.best_params.items()}
    state.best_buffers = {k: v if k in stack.shared_buffers else v[index] for k, v in state.best_buffers.items()}
    state.records = [state.records[i] for i in positions]
    kept.members = [kept.members[i] for i in positions]
    train.select(index)
    if val is not None:
        val.select(index)
    loaders[:] = [loaders[i] for i in positions]
    datamodules[:] = [datamodules[i] for i in positions]
    return smaller, carried


def _train_epoch(
    stack: StackedMembers,
    optimizer: StackedOptimizer,
    loaders: Sequence[Any],
    train: StackedSplit,
    settings: Settings,
    alive: Tensor,
    epoch: int,
    timing: StackTiming,
) -> tuple[dict[str, list[float]], int]:
    """One epoch of optimizer steps, each member on its own batches; returns the loss parts' epoch means per
    member (``train/<part>`` -> M floats: the epoch's one host sync) and the steps taken."""
    orders = [loader.epoch_rows()[: settings.max_batches] for loader in loaders]
    sizes = [len(rows) for rows in orders[0]]
    if any([len(rows) for rows in o] != sizes for o in orders):
        raise RuntimeError("the members' epochs have different batches")
    # The epoch's rows (M, rows an epoch) on the device once; a batch is a slice of it (no per-member loop).
    epoch_rows = torch.stack([torch.cat(o) for o in orders]).to(stack.device) if sizes else None
    # Who is dead changes only between epochs: computed here, so that a step never syncs with the device.
    dead = (~alive).nonzero().flatten() if not bool(alive.all()) else None
    step = steps.train_step(settings.step)
    train_start = time.perf_counter()
    sums: dict[str, Tensor] = {}
    count = offset = 0
    for size in sizes:
        rows = epoch_rows[:, offset : offset + size]
        offset += size
        units = [rows] if not settings.per_sample else [rows[:, i : i + 1] for i in range(size)]
        for unit in units:
            batch = train.batch(unit)  # the batch's keys (M, B, ...)
            try:
                out = step(stack, optimizer, batch, epoch, alive, dead)
            except Exception as e:  # noqa: BLE001  (a compiled step that fails later: the step again, eager)
                if step is steps.eager_step:
                    raise
                reason = f"{type(e).__name__}: {e}".splitlines()[0][:160]
                log.warning(f"stacked: the {settings.step} step failed in epoch {epoch} ({reason}); eager from here")
                step, settings.step = steps.eager_step, "eager"
                out = step(stack, optimizer, batch, epoch, alive, dead)
            for key, value in out.items():
                sums[key] = sums[key] + value if key in sums else value
            count += 1
    timing.train_s += time.perf_counter() - train_start
    return {f"train/{k}": (v / max(count, 1)).tolist() for k, v in sums.items()}, count


def _check_divergence(
    stack: StackedMembers,
    state: Progress,
    means: dict[str, list[float]],
    count: int,
    epoch: int,
    settings: Settings,
) -> None:
    """The single run's rule (``module.epoch_divergence``) per member: a member whose epoch ran away stops, and
    that epoch is neither validated nor logged for it."""
    for i in state.alive.nonzero().flatten().tolist():
        record = state.records[i]
        record.steps += count
        values = {k: v[i] for k, v in means.items()}
        error = epoch_divergence(stack.modules[i].head, values, record.history, epoch, settings.divergence_limit)
        if error is not None:
            record.diverged, state.alive[i] = error, False
        else:
            record.last_train = values


def _keep_best(
    stack: StackedMembers, state: Progress, metrics: dict[str, Tensor], epoch: int, settings: Settings
) -> None:
    """Where a living member's monitored value improved (``checkpoint.mode``), its parameters and buffers are
    copied into the best epoch's stacked copies; the first validation is kept, as Lightning's checkpoint."""
    if settings.monitor is None or settings.monitor not in metrics:
        return
    value = metrics[settings.monitor].to(stack.device)
    better = value > state.best_value if settings.mode == "max" else value < state.best_value
    better = (better | state.best_value.isnan()) & state.alive
    state.best_value = torch.where(better, value, state.best_value)
    _keep_where(state.best_params, stack.params, better)
    _keep_where(state.best_buffers, stack.buffers, better, shared=stack.shared_buffers)
    for i in better.nonzero().flatten().tolist():
        state.records[i].best_epoch, state.records[i].best_step = epoch, state.steps


def _keep_where(best: dict[str, Tensor], current: dict[str, Tensor], better: Tensor, shared: set = frozenset()):
    for key, value in current.items():
        if key in shared:
            continue
        mask = better.view((-1,) + (1,) * (value.dim() - 1))
        if best[key].shape != value.shape:  # a cluster state sized after the first Lloyd step
            best[key] = value.detach().clone()
            continue
        best[key] = torch.where(mask, value.detach(), best[key])


def _validate(stack: StackedMembers, val: StackedSplit, epoch: int, settings: Settings) -> dict[str, Tensor]:
    """``val/acc`` and ``val/loss`` per member (M,), where the module's ``validation_outputs`` gives them (the
    single run's rule): means over the split weighted by each batch's (labelled) rows, as Lightning logs them."""
    logged = set(stack.modules[0].logged_keys(validates=True))
    if not logged & {"val/acc", "val/loss"}:
        return {}
    correct = labelled_rows = loss_sum = rows = 0
    for batch, shared in val.chunks(settings.eval_batch_size):
        out = stack.validation_outputs(batch, epoch, shared)
        labels = batch["labels"]
        if "logits" in out:
            labelled = labels >= 0
            hits = (out["logits"].argmax(-1) == labels) & labelled
            correct = correct + hits.sum(-1).double()
            labelled_rows = labelled_rows + labelled.sum(-1).double()
        if "loss" in out:
            n = labels.shape[-1]
            loss_sum = loss_sum + out["loss"].double() * n
            rows += n
    metrics = {}
    if "val/acc" in logged:
        metrics["val/acc"] = (correct / labelled_rows).cpu()
    if "val/loss" in logged:
        metrics["val/loss"] = (loss_sum / max(rows, 1)).cpu()
    return metrics


def init_clusters(stack: StackedMembers, datamodules: Sequence[Any]) -> None:
    """A clustering head's k-means++ start, member by member, before the first epoch (``ClusterUpdates``)."""
    if isinstance(stack.modules[0].head, ClusteringHead):
        _lloyd(stack, datamodules, torch.ones(stack.size, dtype=torch.bool), first=True)


def _lloyd(stack: StackedMembers, datamodules: Sequence[Any], alive: Tensor, first: bool) -> None:
    """A clustering head's k-means++ start (``first``) or Lloyd step, member by member on its own module (once an
    epoch, as ``callbacks.ClusterUpdates``), then its cluster state restacked."""
    for i, module in enumerate(stack.modules):
        if not first and not bool(alive[i]):
            continue
        stack.unstack_into(i)
        embeddings, split = module.embed_split(datamodules[i], "train")
        split["index"] = torch.arange(len(embeddings), device=embeddings.device)
        if first:
            module.head.init_clusters(embeddings, **split)
        else:
            module.head.update_clusters(embeddings, **split)
    stack.restack(buffers_only=True)
