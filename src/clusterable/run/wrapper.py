"""The one wrapper that turns however a run ended into its record's status (``record.RunRecord``).

``recorded(ctx, record)`` is the run layer's ``task_wrapper`` (lightning-hydra-template's ``utils.task_wrapper``):
a mistake in the input (config, contract, data, evaluator, a batch a head refuses) becomes one line and status
``failed``; a head that saw its own loss run away, ``diverged``; an evaluator that failed after training,
``partial`` (the other evaluators' metrics kept, the failed ones named in ``evaluators_failed``); a bug, one line
pointing at ``traceback.txt``; Ctrl-C or SIGTERM, ``interrupted`` and ``KeyboardInterrupt`` again. Whatever
happened, metrics.json is written (rank 0), the loggers are closed, the sweep hears the outcome and the summary is
printed.
"""

from __future__ import annotations

import contextlib
import sys
import traceback
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from omegaconf import DictConfig

from clusterable import interrupts
from clusterable.logs import get_logger, run_log
from clusterable.outcomes import record_outcome
from clusterable.record import (
    DIVERGED,
    FAILED,
    INTERRUPTED,
    INTERRUPTED_ERROR,
    OK,
    PARTIAL,
    PRUNED,
    RunRecord,
    Status,
)
from clusterable.run.cell import release_cell
from clusterable.run.context import RunContext
from clusterable.rundir import (
    code_version,
    is_write_error,
    provenance,
    remove_if_empty,
    run_mode,
    write_error,
)

log = get_logger(__name__)


def new_record(cfg: DictConfig, ctx: RunContext) -> RunRecord:
    """The record of a run that has not finished yet (status ``failed`` until it does)."""
    prov = provenance(cfg, ctx.choices.get("debug"))
    return RunRecord(
        overrides=list(ctx.overrides),
        choices=dict(ctx.choices),
        seed=cfg.get("seed"),
        experiment=cfg.get("name"),
        mode=run_mode(prov),
        provenance=prov,
        code=code_version(),
    )


class EvaluationIncomplete(Exception):
    """Training finished and the run was evaluated, but some evaluators failed (``failures``: name ->
    ``evaluation.runner.EvaluatorFailure``); the others' metrics are in the record already. ``diverged``: the
    ``DivergedError`` that ended training after its best epoch, if any (the run is ``diverged`` once finished)."""

    def __init__(self, failures: dict[str, Any], diverged: BaseException | None = None) -> None:
        super().__init__(", ".join(f.error for f in failures.values()))
        self.failures, self.diverged = failures, diverged

    def record(self, run_dir: Path, record: RunRecord, rank_zero: bool) -> str:
        """Record the failures in ``record`` (``evaluators_failed``; a divergence as ``failed_epoch`` and
        ``training_error``), the tracebacks of the evaluators' bugs in ``<run_dir>/traceback.txt``; the run's one
        line."""
        traces = {name: f.trace for name, f in self.failures.items() if f.trace}
        trace_file = Path(run_dir) / "traceback.txt"
        if traces and rank_zero:
            with contextlib.suppress(OSError):  # the disk may be full: the line still names the evaluator
                trace_file.write_text("".join(f"evaluator.{n}:\n{t}\n" for n, t in traces.items()))
        record.evaluators_failed = {
            name: {"stage": f.stage, "error": f.error + (f" (traceback: {trace_file})" if f.trace else "")}
            for name, f in self.failures.items()
        }
        if self.diverged is not None:
            record.failed_epoch = getattr(self.diverged, "epoch", None)
            record.training_error = str(self.diverged)
        return incomplete_error(record.evaluators_failed)


def incomplete_error(failed: Mapping[str, Mapping[str, Any]]) -> str:
    """The one line of a ``partial`` run: the first failed evaluator's error, how many more failed, and how to
    finish the run."""
    errors = [entry["error"] for entry in failed.values()]
    others = ", ".join(f"evaluator.{name}" for name in list(failed)[1:])
    more = f" ({others} failed too)" if others else ""
    which = "evaluator" if len(errors) == 1 else "evaluators"
    return (
        f"{errors[0]}{more}; training finished and the other evaluators' metrics are kept: "
        f"clusterable-eval <run dir> re-runs the failed {which} without training"
    )


def evaluators_finished(record: RunRecord, names: list[str]) -> None:
    """``names`` scored since (``clusterable.rescore``): taken off ``evaluators_failed``; the run's status is
    what training left (``ok``, or ``diverged`` with its error) once no failed evaluator is left, else the line
    names those that are."""
    failed = {n: e for n, e in (record.evaluators_failed or {}).items() if n not in names}
    if failed:
        record.evaluators_failed, record.error = failed, incomplete_error(failed)
        return
    record.status = DIVERGED if record.diverged else OK
    record.error, record.training_error, record.evaluators_failed = record.training_error, None, None


def input_errors() -> tuple[type[BaseException], ...]:
    """The errors that mean bad input, not a bug: each becomes the run's one-line error."""
    from clusterable.config import ConfigError
    from clusterable.contracts import BatchError, ContractError
    from clusterable.data.errors import DatasetError
    from clusterable.evaluation.runner import EvaluatorError

    return ConfigError, ContractError, DatasetError, EvaluatorError, BatchError


@contextlib.contextmanager
def recorded(ctx: RunContext, record: RunRecord, rank_zero: bool = True) -> Iterator[list]:
    """Run the body, then record how it ended; yields the list the body appends its loggers to (closed here)."""
    from clusterable.module import DivergedError

    loggers: list = []
    error, status = None, FAILED
    with run_log(ctx.log_file):  # the run's console lines, kept in its folder (written on rank zero only)
        try:
            yield loggers
        except EvaluationIncomplete as e:  # trained and evaluated, but not by every evaluator
            error, status = e.record(ctx.run_dir, record, rank_zero), PARTIAL
        except DivergedError as e:  # a result when the head's loss is unbounded there or a best epoch was evaluated
            record.failed_epoch = e.epoch
            error, status = str(e), DIVERGED if e.expected or record.metrics else FAILED
        except input_errors() as e:
            error = str(e)
        except (KeyboardInterrupt, SystemExit):  # Lightning turns Ctrl-C (and SIGTERM) into SystemExit
            # Ctrl-C or SIGTERM (clusterable.interrupts). A second one (the terminal's and the sweep's both reach a
            # worker) must not cut the record short.
            with interrupts.shielded():
                finish(ctx, record, INTERRUPTED_ERROR, rank_zero, loggers)
                if rank_zero:
                    log.error(f"interrupted: {ctx.run_dir} recorded as failed; run the same command again to redo it")
            raise KeyboardInterrupt from None
        except Exception as e:  # a bug rather than bad input: the traceback goes to a file and a sweep goes on
            if is_write_error(e):  # a full disk or an unwritable file, not a bug: one line naming the file
                error = write_error(e)
            else:
                trace = ctx.run_dir / "traceback.txt"
                if rank_zero:  # the disk may be full: the one line still says what failed
                    with contextlib.suppress(OSError):
                        trace.write_text(traceback.format_exc())
                error = f"{type(e).__name__}: {e}".splitlines()[0] + f" (traceback: {trace})"
        finish(ctx, record, error, rank_zero, loggers, status)


def finish(
    ctx: RunContext,
    record: RunRecord,
    error: str | None,
    rank_zero: bool,
    loggers: list = (),
    status: Status = FAILED,
    write: bool = True,
) -> RunRecord:
    """Record the run (rank 0 only): metrics.json, the loggers closed, the sweep's outcome, the printed summary.
    ``error``: the run did not finish, recorded with ``status`` (``failed``, ``diverged`` or ``partial``).
    ``write``: False leaves the cell's metrics.json as it is (a finished run of another config that this attempt
    never replaced)."""
    if error is not None:
        record.status, record.error = status, error
    try:
        close_loggers(loggers, ok=record.ok)
    except OSError as e:  # a logger's last write (metrics.csv) on a full disk: the run cannot count as ok
        if not is_write_error(e):
            raise
        if record.error is None:
            record.status, record.error = FAILED, write_error(e)
    remove_if_empty(ctx.log_file)
    if not rank_zero:
        return record
    try:
        if write:
            record.write(ctx.run_dir)
    except OSError as e:  # nothing could be recorded: the printed line and the sweep's outcome still say why
        if not is_write_error(e):
            raise
        record.status, record.error = FAILED, record.error or write_error(e)
    # An interrupted cell is counted apart in the sweep's summary (it is redone by the same command).
    interrupted = error == INTERRUPTED_ERROR
    record_outcome(ctx.run_dir, INTERRUPTED if interrupted else record.status, record.error)
    release_cell(ctx.run_dir)  # recorded: another process may reuse or redo the cell now
    if not interrupted:
        print_summary(ctx.run_dir, record, ctx.single)
    return record


def close_loggers(loggers: list, ok: bool) -> None:
    """Finish every logger's run now, so a multirun's next job starts a fresh W&B run (also after a failure)."""
    for lg in loggers:
        if type(lg).__name__ == "WandbLogger":
            # imported by the logger when it started a run; without the module there is no run to end
            wandb = sys.modules.get("wandb")
            if wandb is not None and wandb.run is not None:
                wandb.finish(exit_code=0 if ok else 1)
        else:
            lg.finalize("success" if ok else "failed")  # Lightning's words (Logger.finalize), not a status


def print_summary(run_dir: Path, record: RunRecord, single: bool) -> None:
    """Metrics and run directory on stdout (a run that diverged after a good epoch shows that epoch's); a run that
    is not ok ends in one ``error:`` line on stderr when it was asked for alone (``cli.main`` then exits 1; a
    sweep's cells say ``<status>: <cell>: <reason>`` on stdout and the sweep lists them at its end)."""
    metrics = record.metrics
    if metrics:
        rows = [(k, v) for k, v in sorted(metrics.items()) if k.startswith("test/") or k.startswith("model/")]
        width = max((len(k) for k, _ in rows), default=10)
        lines = [f"{k:<{width}}  {v:.4f}" if isinstance(v, float) else f"{k:<{width}}  {v}" for k, v in rows]
        best = "none (not trained)" if record.best_epoch is None else record.best_epoch
        stopped = [f"stopped early: {record.stopped_early}"] if record.stopped_early else []
        log.info("\n".join([f"run: {record.status}", *lines, f"best epoch: {best}", *stopped, f"run dir: {run_dir}"]))
    if record.ok:
        return
    if record.status == PRUNED:  # a search's decision, not a failure
        log.info(f"{PRUNED}: {run_dir.name}: {record.pruned}")
        return
    # a partial run's line says itself that the other evaluators' metrics are kept
    best = metrics and record.status != PARTIAL
    kept = f"; the metrics above are those of its best epoch ({record.best_epoch})" if best else ""
    if single:
        if not metrics:
            log.info(f"run dir: {run_dir}")
        log.error(f"error: {record.error}{kept}")
    else:
        log.info(f"{record.status}: {run_dir.name}: {record.error}{kept}")
