"""The phases every run goes through, named once and used by both widths: a single run (``run.run``) and a member
of a stacked grid (``stacked.stack``).

    assemble   the config checked, the seed set, the parts built and checked (what training needs)
    fit        the single run's Lightning loop, or the stack's loop for all its members (each width its own)
    conclude   what training left (``Outcome``) -> the rule for a run that diverged, the best epoch restored,
               the evaluation, the log, the status

So a single run and a member record the same keys through the same code: a change to how a run ends (a new
metric, a new rule) lands here once.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from omegaconf import DictConfig

from clusterable.record import OK, PRUNED, RunRecord
from clusterable.run.context import RunContext
from clusterable.run.parts import Parts


@dataclass
class Outcome:
    """What training left for one run, whatever the width that trained it.

    Attributes:
        steps: the optimizer steps taken (the step the final metrics are logged at).
        last_train: the last kept epoch's training losses, ``train/<part>`` -> value (other keys are ignored).
        has_best: a best epoch was kept by ``checkpoint.monitor`` (a run that diverged after it keeps it).
        diverged: the ``DivergedError`` that stopped training, or None.
        pruned: why a search's pruner stopped training (``pruning.Reporter.prune``), or None.
        last_epoch: the metrics of the last epoch trained (``train/...``, ``val/...``): a pruned run's record.
    """

    steps: int
    last_train: Mapping[str, Any] = field(default_factory=dict)
    has_best: bool = False
    diverged: BaseException | None = None
    pruned: str | None = None
    last_epoch: Mapping[str, Any] = field(default_factory=dict)


def assemble(cfg: DictConfig, ctx: RunContext, record: RunRecord, threads: bool = True) -> Parts:
    """Check the config, set torch's threads (``threads``: a stack sets them once for all its members) and the
    seed, build the parts and check the monitor (and a search's objective) against what they log; ``data_notes``
    recorded. Raises the one-line errors of each check."""
    import lightning as L

    from clusterable.run import training
    from clusterable.run.checks import check_config
    from clusterable.run.parts import build_parts, check_logger_extras, check_monitor, check_objective

    check_config(cfg, record.mode)
    check_logger_extras(cfg)
    if threads:
        record.torch_threads = training.cpu_threads(cfg, ctx)
    L.seed_everything(cfg.seed, workers=True, verbose=False)
    parts = build_parts(cfg, ctx)
    if parts.data_notes is not None:  # what reading the data did (a corpus's lemmatiser, OOV words)
        record.data_notes = parts.data_notes
    check_monitor(cfg, ctx, parts)
    check_objective(cfg, ctx, parts)
    return parts


def conclude(
    cfg: DictConfig,
    ctx: RunContext,
    record: RunRecord,
    parts: Parts,
    outcome: Outcome,
    keep_best: Callable[[], int | None],
    loggers: Sequence[Any] = (),
    rank_zero: bool = True,
) -> None:
    """The end of a run: a run that diverged before any best epoch raises its ``DivergedError`` (nothing learned
    before the runaway is kept: no metrics); else ``keep_best()`` restores the best epoch into ``parts.module``
    (writing what the width keeps of it) and returns it, every evaluator scores it, the loggers get the final
    metrics, and the run is ``ok``, or raises its ``DivergedError`` with those metrics recorded (``diverged``).
    A run a search pruned is ``pruned`` with its last epoch's metrics, its best epoch kept but not evaluated
    (evaluating a trial the search gave up on is what pruning saves). An evaluator that fails costs only its own
    metrics: the others' are recorded and ``EvaluationIncomplete`` names it (``partial``). Off DDP rank 0
    only the status is set."""
    from clusterable.run import training
    from clusterable.run.wrapper import EvaluationIncomplete

    if outcome.diverged is not None and not outcome.has_best:
        raise outcome.diverged
    if not rank_zero:
        record.status = OK
        return
    record.best_epoch = keep_best()
    if outcome.pruned is not None:
        record.metrics = {k: float(v) for k, v in outcome.last_epoch.items() if k.split("/")[0] in ("train", "val")}
        record.status, record.pruned = PRUNED, outcome.pruned
        return
    record.metrics, failures, record.timing["eval_s"] = training.evaluate(cfg, ctx, parts, outcome.last_train)
    for lg in loggers:
        lg.log_metrics({k: v for k, v in record.metrics.items() if v == v}, step=outcome.steps)  # not NaN
    if failures:  # recorded partial, with the other evaluators' metrics (and the divergence, if any)
        raise EvaluationIncomplete(failures, outcome.diverged)
    if outcome.diverged is not None:  # recorded diverged, with the best epoch's metrics
        raise outcome.diverged
    record.status = OK
