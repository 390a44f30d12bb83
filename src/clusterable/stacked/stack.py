"""Train prepared cells as one stacked model and record each as its own run.

``run_stack(cells)`` is ``run.run`` for a group: each member is assembled as its single run assembles it (its
seed, its parts, its checks; a member whose parts fail is recorded ``failed`` alone), the members train together
(``stacked.fit``), and each is then restored to its best epoch as a single-run module, checkpointed, evaluated by
the single run's evaluation and recorded by the single run's wrapper (``run.wrapper.recorded``): the same files and
keys, plus ``stacked`` (the group it trained in). A failure of the whole stack (a bug, Ctrl-C, SIGTERM) is
recorded in every member.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from omegaconf import OmegaConf

from clusterable import interrupts
from clusterable.logs import get_logger, run_log
from clusterable.pruning import Reporter
from clusterable.record import StackInfo
from clusterable.run import Prepared
from clusterable.run.wrapper import recorded
from clusterable.stacked.errors import NotStackable
from clusterable.stacked.fit import init_clusters
from clusterable.stacked.grouping import PRECISIONS, flat, why_not_stackable

log = get_logger(__name__)


class Member:
    """One cell of a stack: its prepared record, its parts once built, its loggers."""

    def __init__(self, cell: Prepared):
        self.cell, self.parts, self.loggers = cell, None, []

    @property
    def name(self) -> str:
        return self.cell.ctx.run_dir.name


def run_stack(
    cells: Sequence[Prepared], progress: bool = True, speed_check: bool = True, compile: bool | str = "auto"
) -> list[Prepared]:
    """Train ``cells`` as one stack and record each; returns the cells left unrecorded because they cannot stack
    after all (``NotStackable`` found once their parts are built: the caller runs them one by one), or, with
    ``speed_check``, because stacking is projected slower than one by one on this device (``stacked.speed``).
    ``compile``: ``auto``, True or False, whether the step is compiled (``speed.time_steps``)."""
    from clusterable.run import training

    members = [Member(cell) for cell in cells]
    training.quiet_lightning()
    first = members[0].cell
    threads = training.cpu_threads(first.cfg, first.ctx)
    built = []
    for i, member in enumerate(members):
        member.cell.record.torch_threads = threads
        try:
            error = _build(member)
        except KeyboardInterrupt:  # every member not recorded yet is recorded interrupted
            _record_interrupted([*built, *members[i:]])
        if error is None:
            built.append(member)
        else:
            _record(member, error)
    if not built:
        return []
    bound, why = memory_bound(built, share=1 / first.ctx.parallel_jobs)
    if bound < len(built):
        with run_log(*(m.cell.ctx.log_file for m in built)):
            log.info(f"stacked: {why}: the {len(built)} cells train as {math.ceil(len(built) / bound)} stacks")
    alone: list[Prepared] = []
    for start in range(0, len(built), bound):
        alone += _train(built[start : start + bound], progress, speed_check, compile)
    return alone


@dataclass
class Trained:
    """What a stack's training left: the stack, its settings, the group's record, each member's record and the
    best epoch's stacked parameters and buffers, the timings."""

    stack: Any
    settings: Any
    group: StackInfo
    records: list
    best_params: dict
    best_buffers: dict
    timing: Any


def _train(built: list[Member], progress: bool, speed_check: bool, compile: bool | str) -> list[Prepared]:
    """Train ``built`` members as one stack and record each; the cells to run alone when they cannot stack or
    would train slower stacked. The stack's lines (its speed check, its epochs) go to every member's log; what a
    member's record says, to its own."""
    failure: BaseException | None = None
    with run_log(*(m.cell.ctx.log_file for m in built)):
        try:
            trained = _train_together(built, progress, speed_check, compile)
        except NotStackable as e:
            log.info(f"stacked: {e}; these {len(built)} cells run one by one")
            return [m.cell for m in built]
        except BaseException as e:  # noqa: BLE001  (a bug, Ctrl-C: every member records it)
            failure = e
    if failure is not None:
        _record_all(built, failure)
        return []
    group, records, timing = trained.group, trained.records, trained.timing
    for i, member in enumerate(built):
        record = member.cell.record
        record.stacked = StackInfo(**group, index=i)
        record.timing.update(
            fit_s=timing.fit_s,
            epoch_s=sum(timing.epochs) / len(timing.epochs) if timing.epochs else None,
            steps=records[i].steps,
            step_s=timing.train_s / records[i].steps if records[i].steps else None,
            lloyd_s=sum(timing.lloyd) / len(timing.lloyd) if timing.lloyd else None,
        )
        try:
            _record(
                member,
                None,
                lambda m=member, i=i: _finish_member(
                    m, i, trained.stack, records[i], trained.best_params, trained.best_buffers, trained.settings
                ),
            )
        except KeyboardInterrupt:
            _record_interrupted(built[i + 1 :])
    return []


def _train_together(built: list[Member], progress: bool, speed_check: bool, compile: bool | str) -> Trained:
    """The stack assembled, its speed checked (``NotStackable`` where it cannot stack or would be slower) and
    trained."""
    from clusterable.stacked import speed
    from clusterable.stacked.steps import step_kind

    stack, optimizer, settings = _assemble(built)
    splits = _splits(built, settings, stack.dtype, stack.device)
    init_clusters(stack, [m.parts.datamodule for m in built])  # k-means++ (a clustering head's start)
    rows, probe_s = _probe(stack, splits[0], built)
    steps = _steps(built, settings, splits[0])
    timed = speed.worth_timing(probe_s * steps, speed_check, compile)
    times = (
        speed.time_steps(stack, optimizer, splits[0], built[0].parts.module, rows, steps, compile) if timed else None
    )
    if speed_check:
        speed.check(times)
    if times is not None and times.compiled:
        settings.step = step_kind(stack.device)
    group = StackInfo(
        members=len(built),
        cells=[m.name for m in built],
        varies=_varying(built),
        device=str(stack.device),
        speed=times.as_record() if times is not None else None,
    )
    log.info(
        f"stacked: {len(built)} cells as one model ({', '.join(group['varies']) or 'identical'} vary), "
        f"{settings.max_epochs} epochs on {stack.device}"
    )
    if times is not None:
        log.info(f"stacked: {times.line()}")
        if times.compile_line() is not None:
            log.info(f"stacked: {times.compile_line()}")
    records, best_params, best_buffers, timing = _fit(built, stack, settings, optimizer, splits, progress)
    group["step"] = settings.step  # the step it trained with: eager, compiled or graphed (after any fallback)
    return Trained(stack, settings, group, records, best_params, best_buffers, timing)


def _record_all(members: Sequence[Member], error: BaseException) -> None:
    """The whole stack failed: each member recorded with ``error`` (Ctrl-C: ``interrupted``, then raised)."""
    if isinstance(error, KeyboardInterrupt | SystemExit):
        _record_interrupted(members)
    for member in members:
        _record(member, error)


def record_unfinished(cells: Sequence[Prepared], error: BaseException) -> None:
    """``cells`` were prepared (locked and clean) but the stack never recorded them: ``error`` stopped the group
    first (a full disk writing Hydra's files of the next cell, Ctrl-C or SIGTERM, a bug). Each is recorded as its
    single run records that error: ``failed`` with the one-line write error, ``interrupted`` (then
    KeyboardInterrupt), or a bug's line."""
    _record_all([Member(cell) for cell in cells], error)


def _record_interrupted(members: Sequence[Member]) -> None:
    """Ctrl-C or SIGTERM: every member recorded ``interrupted`` (the same command redoes them), then
    KeyboardInterrupt. A second signal waits until all are recorded (a cluster may send SIGTERM again)."""
    with interrupts.shielded():
        for member in members:
            try:
                _record(member, KeyboardInterrupt())
            except KeyboardInterrupt:
                pass
    raise KeyboardInterrupt


def memory_bound(members: Sequence[Member], share: float = 1.0) -> tuple[int, str]:
    """How many of ``members`` one stack may hold, and why: half its ``share`` of the free memory of the device
    they train on (the GPU's, else the machine's available memory; ``share`` 1/n where n stacks train at once)
    over an estimate of one member's share: its parameters
    with their gradients, Adam's two moments, the best epoch's copy and the update's temporaries (6x), its
    buffers twice, and its batch's activations (batch rows x input size x 16, a rough allowance)."""
    module = members[0].parts.module
    params = sum(p.numel() * p.element_size() for p in module.parameters())
    buffers = sum(b.numel() * b.element_size() for b in module.buffers())
    data = members[0].parts.datamodule
    rows = data.batch_size if data.batch_size > 0 else len(data.split("train")["labels"])
    per_member = 6 * params + 2 * buffers + 16 * 4 * rows * math.prod(data.input_shape)
    accelerator = str(members[0].cell.cfg.trainer.get("accelerator", "cpu"))
    if accelerator in ("gpu", "cuda", "auto") and torch.cuda.is_available():
        free = torch.cuda.mem_get_info()[0]
    else:
        free = _available_memory()
    bound = max(1, int(free * share // 2 // max(per_member, 1)))
    shared = "" if share == 1 else f", {share:.2g} of it this stack's"
    return min(bound, len(members)), (
        f"memory allows {bound} members of ~{per_member / 2**20:.0f} MB each ({free / 2**30:.1f} GiB free{shared})"
    )


def _available_memory() -> int:
    """The machine's available memory in bytes (``MemAvailable``), or 8 GiB where it cannot be read."""
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return 8 * 2**30


def _record(member: Member, error: BaseException | None, body: Any = None) -> None:
    """Record ``member`` through the single run's wrapper: ``error`` raised inside it becomes its status."""
    with recorded(member.cell.ctx, member.cell.record) as loggers:
        loggers.extend(member.loggers)
        if error is not None:
            raise error
        body()


def _build(member: Member) -> BaseException | None:
    """The member's parts, assembled as its single run assembles them (``run.phases.assemble``: its seed first, so
    its initial parameters are its single run's), and its loggers; the error that refused them, or None."""
    from clusterable.config import build
    from clusterable.run.phases import assemble

    cfg, ctx, record = member.cell.cfg, member.cell.ctx, member.cell.record
    try:
        member.parts = assemble(cfg, ctx, record, threads=False)  # the stack set the threads once for all
        for name, node in (cfg.logger or {}).items():
            member.loggers.append(build(node, f"logger.{name}"))
    except KeyboardInterrupt:
        raise
    except Exception as e:
        return e
    return None


def _batch_count(limit: Any) -> int | None:
    """``trainer.limit_train_batches`` as Lightning reads it: an int is a count of batches, 1.0 every batch."""
    return int(limit) if isinstance(limit, int) and not isinstance(limit, bool) else None


def _assemble(members: Sequence[Member]) -> tuple[Any, Any, Any]:
    """The stacked model, its optimizer and the shared settings; ``NotStackable`` when the built parts cannot
    stack."""
    from clusterable.run.parts import validates
    from clusterable.stacked.fit import Settings
    from clusterable.stacked.members import StackedMembers
    from clusterable.stacked.optim import from_optimizers

    cfg = members[0].cell.cfg
    reason = why_not_stackable(OmegaConf.to_container(cfg))
    if reason is not None:
        raise NotStackable(reason)
    dtype = PRECISIONS[str(cfg.trainer.get("precision", "32-true"))]
    accelerator = str(cfg.trainer.get("accelerator", "cpu"))
    wants_gpu = accelerator in ("gpu", "cuda") or (accelerator == "auto" and torch.cuda.is_available())
    device = torch.device("cuda" if wants_gpu else "cpu")
    modules = [m.parts.module.to(device=device, dtype=dtype) for m in members]
    stack = StackedMembers(modules)
    # Each member's optimizer as its single run builds it: the stack takes its kind, options and per-member lr
    # and weight decay from them, never from the raw config.
    optimizer = from_optimizers(stack.params, stack.member_parameters(), [m.build_optimizer() for m in modules])
    datamodule = members[0].parts.datamodule
    settings = Settings(
        max_epochs=int(cfg.trainer.max_epochs),
        divergence_limit=float(cfg.divergence_limit),
        max_batches=_batch_count(cfg.trainer.get("limit_train_batches", 1.0)),
        per_sample=cfg.optimizer_steps == "per_sample",
        monitor=cfg.checkpoint.monitor,
        mode=cfg.checkpoint.mode,
        validates=validates(cfg, members[0].parts),
        class_disjoint=bool(datamodule.class_disjoint),
        eval_batch_size=int(datamodule.eval_batch_size),
    )
    return stack, optimizer, settings


def _splits(members: Sequence[Member], settings: Any, dtype: torch.dtype, device: torch.device) -> tuple:
    """The members' training and validation splits, stacked where they differ (``fit.StackedSplit``)."""
    from clusterable.stacked.fit import StackedSplit

    datamodules = [m.parts.datamodule for m in members]
    train = StackedSplit([d.split("train") for d in datamodules], device, dtype)
    val = StackedSplit([d.split("val") for d in datamodules], device, dtype) if settings.validates else None
    return train, val


def _probe(stack: Any, train: Any, members: Sequence[Member]) -> tuple[int, float]:
    """One stacked forward and backward on the first rows, undone (buffers, RNG, gradients): a head or encoder
    that does not run under ``vmap`` (Python control flow on a tensor, an op without a batching rule) is
    ``NotStackable`` here, before training, and its cells run alone. A batch the head refuses (``BatchError``)
    is not the stack's business: the real batches decide. Returns the rows of a step and the seconds the probe
    took (a first call: more than a step takes, so a bound on it)."""
    from clusterable.contracts import BatchError

    data = members[0].parts.datamodule
    rows = max(1, min(data.batch_size if data.batch_size > 0 else train.size, train.size))
    if members[0].cell.cfg.optimizer_steps == "per_sample":
        rows = 1
    index = torch.arange(rows, device=stack.device).expand(stack.size, rows)
    buffers = {k: v.clone() for k, v in stack.buffers.items()}
    rng = torch.get_rng_state()
    start = time.perf_counter()
    try:
        stack.losses(train.batch(index), epoch=0)["loss"].sum().backward()
    except BatchError:
        pass
    except Exception as e:  # noqa: BLE001  (whatever vmap refuses; the single run reports a real bug itself)
        first = f"{type(e).__name__}: {e}".splitlines()[0].split(". ")[0][:160]  # vmap's first sentence
        raise NotStackable(f"{type(members[0].parts.head).__name__} does not run stacked ({first})") from None
    finally:
        for key, value in buffers.items():
            stack.buffers[key].copy_(value)
        torch.set_rng_state(rng)
        for p in stack.params.values():
            p.grad = None
    return rows, time.perf_counter() - start


def _steps(members: Sequence[Member], settings: Any, train: Any) -> int:
    """Each member's optimizer steps over its training: its batches an epoch (times their rows for per-sample
    steps) times the epochs."""
    data = members[0].parts.datamodule
    batches = len(data.train_dataloader())  # a new loader: its generator is not the one training draws from
    if settings.max_batches is not None:
        batches = min(batches, settings.max_batches)
    batch_rows = data.batch_size if data.batch_size > 0 else train.size  # -1: the whole split a batch
    per_epoch = batches if not settings.per_sample else min(train.size, batches * batch_rows)
    return per_epoch * settings.max_epochs


def _fit(members, stack, settings, optimizer, splits, progress: bool):
    from clusterable.stacked import fit

    datamodules = [m.parts.datamodule for m in members]
    loaders = [d.train_dataloader() for d in datamodules]
    report = None
    if progress:
        every = max(1, settings.max_epochs // 10)
        started = time.perf_counter()

        def report(epoch: int, alive: int) -> None:
            if (epoch + 1) % every == 0 or epoch + 1 == settings.max_epochs:
                log.info(
                    f"stacked: epoch {epoch + 1}/{settings.max_epochs}, {alive}/{len(members)} members "
                    f"training, {time.perf_counter() - started:.0f} s"
                )

    return fit.fit(stack, optimizer, loaders, *splits, datamodules, settings, report, _pruning(members))


def _pruning(members: Sequence[Member]) -> Any:
    """A pruned search's members report their objective to their trials every epoch (``pruning.Reporter``, one
    study handle for all); the function ``fit.fit`` calls after each epoch, or None where no member is a pruned
    search's trial."""
    slots = {i: m.cell.ctx.trial for i, m in enumerate(members) if m.cell.ctx.trial is not None}
    if not slots:
        return None
    reporter = Reporter(list(slots.values()))
    index = {i: j for j, i in enumerate(slots)}

    def prune(epoch: int, rows: dict[int, dict[str, float]]) -> dict[int, str]:
        pruned = {
            member: reporter.prune(index[member], epoch, row[reporter.metric])
            for member, row in rows.items()
            if member in index and reporter.metric in row
        }
        return {member: why for member, why in pruned.items() if why is not None}

    return prune


def _finish_member(
    member: Member, index: int, stack: Any, fitted: Any, best_params: dict, best_buffers: dict, settings: Any
) -> None:
    """Member ``index`` concludes as a single run does (``run.phases.conclude``): its best epoch restored into its
    own module, checkpointed and its epochs logged (``keep_best``), then evaluated and recorded."""
    from clusterable.run.phases import Outcome, conclude

    cfg, ctx = member.cell.cfg, member.cell.ctx
    has_best = bool(settings.monitor and fitted.best_epoch is not None)

    def keep_best() -> int | None:
        import lightning as L

        from clusterable.run.checkpointing import save_checkpoint

        module = stack.unstack_into(index, best_params, best_buffers)
        for lg in member.loggers:
            for row in fitted.rows:
                lg.log_metrics({k: v for k, v in row.items() if k != "step" and not _nan(v)}, step=row["step"])
        if has_best:
            state = {
                "epoch": fitted.best_epoch,
                "global_step": fitted.best_step,
                "state_dict": module.state_dict(),
                "pytorch-lightning_version": L.__version__,
                "stacked": member.cell.record.stacked,
            }
            save_checkpoint(state, Path(ctx.run_dir) / "checkpoints" / "best.ckpt")
        return fitted.best_epoch

    outcome = Outcome(
        steps=fitted.steps,
        last_train=fitted.last_train,
        has_best=has_best,
        diverged=fitted.diverged,
        pruned=fitted.pruned,
        last_epoch=fitted.rows[-1] if fitted.rows else {},
    )
    conclude(cfg, ctx, member.cell.record, member.parts, outcome, keep_best, member.loggers)


def _nan(value: Any) -> bool:
    return isinstance(value, float) and math.isnan(value)


def _varying(members: Sequence[Member]) -> list[str]:
    """The config keys whose values differ between the members (what the stack sweeps)."""
    configs = [flat(OmegaConf.to_container(m.cell.cfg)) for m in members]
    keys = sorted(set().union(*configs))
    return [k for k in keys if len({repr(c.get(k)) for c in configs}) > 1 and not k.startswith("logger.")]
