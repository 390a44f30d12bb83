"""The run layer: one configuration trained, evaluated and recorded, callable without Hydra.

``run(cfg, ctx)`` reads like lightning-hydra-template's ``train``: resolve the config once, reuse the cell or
clean it, assemble the parts, fit, evaluate the best epoch, record. Every way a run can end is mapped to a status
by one wrapper (``wrapper.recorded``); each paper's special case lives in the part it concerns (COREL's λ fallback
in its resolver, the word vectors in the text dataset, per-sample steps in the module).

    from clusterable.run import RunContext, run
    cfg = compose("train", overrides=[...], return_hydra_config=True)   # hydra's compose API
    ctx = RunContext.from_hydra(cfg.hydra, run_dir, optimized_metric=cfg.get("optimized_metric"))
    del cfg.hydra
    record = run(cfg, ctx)                                              # its RunRecord (metrics.json)
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from omegaconf import DictConfig, OmegaConf

from clusterable import resolvers
from clusterable.logs import get_logger, run_log
from clusterable.outcomes import config_files_changed
from clusterable.record import RecordError, RunRecord
from clusterable.run.cell import reuse_or_clean
from clusterable.run.context import RunContext
from clusterable.run.wrapper import finish, new_record, recorded

log = get_logger(__name__)

__all__ = ["Prepared", "RunContext", "prepare", "run"]


@dataclass
class Prepared:
    """A cell ready to train: its config resolved once (struct), its context and its record under way. The cell
    is locked and clean (``reuse_or_clean``) and the resolver notes are printed."""

    cfg: DictConfig
    ctx: RunContext
    record: RunRecord


def prepare(cfg: DictConfig, ctx: RunContext) -> Prepared | RunRecord:
    """Resolve the config once, then reuse the cell or lock and clean it: a ``Prepared`` cell to train, or the
    record that ends it here (a finished run reused, ``busy``, or a config that does not resolve, recorded).

    Only DDP rank 0 reuses or cleans the cell.
    """
    rank_zero = _is_rank_zero()
    with resolvers.group_choices(ctx.choices), resolvers.collect_notes() as notes:
        record = new_record(cfg, ctx)
        if not ctx.single and (changed := config_files_changed()) is not None:
            record.config = OmegaConf.to_container(cfg, resolve=False)
            return finish(
                ctx,
                record,
                f"the config files changed after this sweep started ({changed}): one "
                "sweep never mixes two versions of its configs; run the command again for the cells "
                "left (finished ones are kept)",
                rank_zero,
                write=False,
            )
        try:  # resolved once: nothing below resolves an interpolation again
            record.config = OmegaConf.to_container(cfg, resolve=True, throw_on_missing=True)
        except Exception as e:  # a broken interpolation in an experiment file: a config error like any other
            record.config = OmegaConf.to_container(cfg, resolve=False)
            error = f"config: {missing_key(e, cfg) or str(e).splitlines()[0]}"
            # A trained run in the cell is never overwritten by an attempt whose config did not even resolve.
            finished = _trained(ctx.run_dir)
            kept = "; the cell's finished run is left as it was" if finished else ""
            return finish(ctx, record, error + kept, rank_zero, write=not finished)
    # what a resolver remarked (COREL's λ fell back to the config's): recorded with the run
    record.notes = {key: value for key, (value, _) in sorted(notes.items())}
    if left_out := drop_unselected_settings(record.config, ctx.overrides):
        record.left_out_settings = left_out
        log.info(f"note: {', '.join(left_out)} left out: settings of evaluators this run does not select")
    if rank_zero and (previous := reuse_or_clean(ctx, record, notes)) is not None:
        return previous
    resolved = OmegaConf.create(record.config)
    OmegaConf.set_struct(resolved, True)
    with run_log(ctx.log_file):  # the cell is locked and clean: its log is this attempt's
        for _, message in notes.values():
            log.info(message)
    return Prepared(resolved, ctx, record)


def _trained(run_dir: Any) -> bool:
    """Whether the cell holds a trained run's record (one that cannot be read holds none)."""
    try:
        previous = RunRecord.read(run_dir)
    except RecordError:
        return False
    return previous is not None and previous.trained


def drop_unselected_settings(config: dict[str, Any], overrides: Sequence[str]) -> list[str]:
    """Remove from the resolved ``config`` the settings an experiment gives evaluators that the command line no
    longer selects (``experiment=cross/fashion 'evaluator=[classification,clustering]'`` leaves
    ``evaluator.retrieval.ks`` without its ``_target_``), and return their paths. Settings typed on the command line
    for an evaluator that is not selected stay: building them refuses them in one line, a user's mistake."""
    evaluators = config.get("evaluator")
    if not isinstance(evaluators, dict):
        return []
    typed = {o.lstrip("+~").split("=")[0].split(".")[1] for o in overrides if o.lstrip("+~").startswith("evaluator.")}
    left = [
        name
        for name, node in evaluators.items()
        if isinstance(node, dict) and "_target_" not in node and name not in typed
    ]
    for name in left:
        del evaluators[name]
    return [f"evaluator.{name}" for name in left]


def missing_key(e: Exception, cfg: DictConfig) -> str | None:
    """An interpolation that names a key the config lacks, said with what is there: ``protocol.feature_norm has no
    key 'digits_zeroshot' (it has: cub200, cars196, ...)`` — typically an experiment's per-dataset recipe asked for
    a dataset it does not cover. None for any other error."""
    from omegaconf.errors import InterpolationKeyError

    found = re.search(r"Interpolation key '([^']+)' not found", str(e))
    if not isinstance(e, InterpolationKeyError) or found is None:
        return None
    parts = found.group(1).split(".")
    node: Any = OmegaConf.to_container(cfg, resolve=False)
    for i, part in enumerate(parts):
        if not isinstance(node, dict) or part not in node:
            where = ".".join(parts[:i]) or "the config"
            have = ", ".join(map(str, node)) if isinstance(node, dict) else "no keys"
            return (
                f"{where} has no key {part!r} (it has: {have}): the experiment's settings do not cover this "
                "choice; pick one it covers, or set the value on the command line"
            )
        node = node[part]
    return None


def run(cfg: DictConfig, ctx: RunContext) -> RunRecord:
    """Train and evaluate one configuration; returns its record, as metrics.json holds it (``status`` ``ok``,
    ``failed``, ``diverged``: the loss ran away, a result of its grid, with its best epoch's metrics when it had one, or
    ``partial``: trained, but an evaluator failed, the others' metrics kept), or a ``busy`` record, written
    nowhere, when another process holds the cell's lock.

    Only DDP rank 0 reuses or cleans the cell, evaluates, writes ``metrics.json`` and prints.
    """
    cell = prepare(cfg, ctx)
    if not isinstance(cell, Prepared):
        return cell
    rank_zero = _is_rank_zero()
    with recorded(cell.ctx, cell.record, rank_zero) as loggers:
        _train_and_evaluate(cell.cfg, cell.ctx, cell.record, loggers, rank_zero)
    return cell.record


def _train_and_evaluate(cfg: DictConfig, ctx: RunContext, record: RunRecord, loggers: list, rank_zero: bool) -> None:
    """The single run's width of the phases (``run.phases``): assemble, fit in Lightning's loop, conclude."""
    from clusterable.callbacks import EpochTimer, PruneTrial
    from clusterable.run import training
    from clusterable.run.parts import build_callbacks, build_trainer
    from clusterable.run.phases import Outcome, assemble, conclude

    training.quiet_lightning()
    parts = assemble(cfg, ctx, record)
    checkpoint, timer = training.checkpoint_callback(cfg, ctx.run_dir), EpochTimer()
    validation = [parts.validation] if cfg.validation_evaluators else []
    chosen = build_callbacks(cfg)  # the callbacks group's (early stopping, learning-rate monitor, ...)
    pruning = PruneTrial(ctx.trial) if ctx.trial is not None else None  # a search's trial it may prune
    callbacks = [checkpoint, timer, *validation, *chosen, *([pruning] if pruning else [])]
    trainer = build_trainer(cfg, ctx.run_dir, loggers, callbacks=callbacks)
    parts.module.check_devices(trainer.world_size)

    timing, diverged = training.fit(trainer, parts, timer)
    record.timing.update(timing)
    record.stopped_early = training.stopped_early(chosen, trainer)
    outcome = Outcome(
        steps=trainer.global_step,
        last_train=trainer.callback_metrics,
        diverged=diverged,
        has_best=bool(checkpoint.monitor and checkpoint.best_model_path),
        pruned=pruning.pruned if pruning else None,
        last_epoch=pruning.last_epoch if pruning else {},
    )
    conclude(
        cfg,
        ctx,
        record,
        parts,
        outcome,
        lambda: training.restore_best(checkpoint, trainer, parts.module),
        loggers,
        rank_zero,
    )


def _is_rank_zero() -> bool:
    from lightning.fabric.utilities.rank_zero import rank_zero_only

    return getattr(rank_zero_only, "rank", 0) == 0
