"""A sweep's cell: reuse a finished run of the same config, or start the cell clean.

A re-run of a grid keeps a cell whose metrics.json says ``ok`` (or ``diverged``: a result of the grid) and whose
recorded config equals the one asked for now (``rundir.config_changes``: loggers, paths and progress bars aside);
anything else is re-run from a clean folder, so no checkpoint, log or plot of an earlier attempt survives.
"""

from __future__ import annotations

from typing import Any

from clusterable import hydra_callbacks
from clusterable.run.context import RunContext
from clusterable.rundir import clean_cell, config_changes, read_metrics, write_metrics

FINISHED = ("ok", "diverged")


def reuse_or_clean(ctx: RunContext, payload: dict[str, Any], notes: dict[str, Any]) -> dict[str, Any] | None:
    """The finished record to keep (the cell is skipped), or None after cleaning the cell for a new attempt.

    ``notes`` are what the config's resolvers remarked now (``resolvers.note``): a note the previous record holds
    that no resolver makes any more is dropped from it (a λ that fell back to the config's 0.5 is Table 1's winner
    now, and that winner is 0.5: the same value, the same run).
    """
    previous = read_metrics(ctx.run_dir)
    if previous is not None and previous.get("status") in FINISHED:
        if "config" not in previous:
            changes = ["its metrics.json records no config (an older version wrote it)"]
        else:
            changes = config_changes(previous["config"], payload["config"])
        if not changes:
            stale = [key for key in previous.get("resolver_notes", []) if key not in notes]
            for key in stale:
                previous.pop(key, None)
                previous["resolver_notes"].remove(key)
            if stale:
                write_metrics(ctx.run_dir, previous)
            print(
                f"skip {ctx.run_dir}: metrics.json says {previous['status']} and its config is the one asked for"
            )
            hydra_callbacks.record_outcome(ctx.run_dir, "skipped", None)
            return previous
        shown = "; ".join(changes[:3]) + ("; ..." if len(changes) > 3 else "")
        print(f"rerun {ctx.run_dir}: its finished run had another config ({shown})")
    # A new attempt starts from a clean cell: no checkpoint, log or plot of an earlier one survives.
    clean_cell(ctx.run_dir, keep=(".hydra", f"{ctx.job_name}.log"))
    return None
