"""A results table of any runs, your own experiments as much as the papers': rows grouped by the config keys you
name, a column per metric (mean ± std over the seeds), and the best row tested against every other.

    clusterable-tables --runs myproject --by loss.temperature --metrics test/acc,test/kmeans/acc

The rules are the paper tables' (``tables.report``): a run is found by the name it recorded (the config's ``name``,
which is its sweep folder) or by its ``experiment=`` option; a folder copied or resumed counts once; a row averages
runs that differ in their seed and its ``--by`` keys alone (``MixedConfigs`` otherwise, naming the keys that
differ); one mode and one data source per table (``MixedRuns``).
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Literal

from clusterable.metric_names import monitor_direction
from clusterable.record import RunRecord
from clusterable.tables.report import (
    Cell,
    Claim,
    Run,
    Table,
    as_text,
    cells,
    check,
    config_differences,
    load_runs,
)


class RunsError(ValueError):
    """A results table cannot be made as asked (an unknown key or metric, too many keys vary): one line."""


def named(record: RunRecord, name: str) -> bool:
    """Whether a run belongs to ``name``: the name it recorded (the config's ``name``) or its experiment option."""
    return record.experiment == name or (record.choices or {}).get("experiment") == name


def load(
    outputs: str | Path,
    name: str,
    mode: str = "auto",
    pool_code: bool = False,
    say: Callable[[str], None] | None = None,
) -> tuple[list[Run], str]:
    """The runs of ``name`` (``named``) below ``outputs``, selected as a paper table's are (``report.load_runs``,
    which reports its progress through a large outputs folder to ``say``)."""
    return load_runs(outputs, lambda record: named(record, name), mode, pool_code, say)


# What tells two runs apart without being a setting one groups by: the code and data versions (their own refusal).
_NOT_SETTINGS = ("code.", "data.", "evaluator.")


def varying_keys(runs: Sequence[Run]) -> list[str]:
    """What the rows of ``runs`` are when no ``--by`` is given: the config groups whose option differs among them
    (``loss``: cce, center...), then the config keys that differ among runs of one set of those options (``loss.lam``
    within ``loss=center``), the seed aside (code and data versions left out: they are their own refusal)."""
    groups = sorted({g for r in runs for g in (r.record.choices or {}) if not g.startswith(("hydra", "experiment"))})
    varying = [g for g in groups if len({as_text(r.get(g, "")) for r in runs}) > 1]
    nodes = tuple(f"{g.replace('/', '.')}." for g in varying)
    # a key under a varying group's node differs between its options by definition: only within one option it counts
    leaves = {k for k in config_differences(runs) if not k.startswith(nodes)}
    alike: dict[tuple[str, ...], list[Run]] = {}
    for run in runs:
        alike.setdefault(tuple(as_text(run.get(g, "")) for g in varying), []).append(run)
    for part in alike.values():
        leaves |= set(config_differences(part)) if len(part) > 1 else set()
    return varying + sorted(k for k in leaves if not k.startswith(_NOT_SETTINGS))


def metric_names(runs: Sequence[Run]) -> list[str]:
    """Every metric some finished run of ``runs`` recorded as a number, sorted."""
    return sorted({k for r in runs if r.ok for k, v in r.record.metrics.items() if isinstance(v, int | float)})


def runs_table(
    name: str,
    runs: Sequence[Run],
    by: Sequence[str],
    metrics: Sequence[str],
    directions: Mapping[str, Literal["min", "max"]] | None = None,
) -> Table:
    """The table of ``runs``: a row per distinct recorded value of ``by`` (sorted), a column per metric (mean ±
    std over the row's seeds, failed runs counted), the seed count; for each metric whose direction is known
    (``directions``: metric -> "max" or "min", else what its name says, ``metric_names.monitor_direction``), the
    best row against each other row by Welch's t over their seeds (``report.check``: one-sided in the best row's
    favour, α = 0.05; one seed: means only, said so). A metric of unknown direction is named in a note.

    Raises ``RunsError`` for a ``by`` key no run records or a metric no run has (naming those it has), and
    ``MixedConfigs`` when a row's runs differ in more than their seed and ``by``."""
    if not runs:
        raise RunsError(f"no runs named {name!r}")
    for key in by:
        if all(r.get(key, _ABSENT) is _ABSENT for r in runs):
            raise RunsError(
                f"--by {key}: none of the {len(runs)} runs of {name!r} records it; they vary in: "
                f"{', '.join(varying_keys(runs)) or 'nothing but their seed'}"
            )
    known = metric_names(runs)
    for metric in metrics:
        if metric not in known:
            raise RunsError(
                f"--metrics {metric}: no finished run of {name!r} records it; they record: "
                f"{', '.join(known) or 'no metric (no run finished)'}"
            )
    columns = {m: cells(runs, by, m) for m in metrics}  # each row held to one config (MixedConfigs)
    keys = sorted(columns[metrics[0]], key=_natural)
    seeds = {
        k: len({as_text(r.get("seed")) for r in runs if tuple(as_text(r.get(b, "")) for b in by) == k}) for k in keys
    }
    header = [*by, *metrics, "runs"]
    rows = [[*key, *(columns[m][key].text(digits=4) for m in metrics), str(seeds[key])] for key in keys]
    table = Table(f"{name}: {', '.join(metrics)} by {', '.join(by) or 'nothing (one row)'}", header, rows)
    known_direction = {m: (directions or {}).get(m) or monitor_direction(m) for m in metrics}
    table.claims = [c for m in metrics if (c := best_against_rest(m, by, columns[m], known_direction[m])) is not None]
    table.claims_title = "Best row against the others, tested over the seeds:"
    if unknown := [m for m in metrics if known_direction[m] is None]:
        table.notes.append(
            f"Not tested: {', '.join(unknown)}, whose name does not say whether higher or lower is better "
            f"(--higher {unknown[0]} or --lower {unknown[0]} says it)."
        )
    return table


_ABSENT = object()


def _natural(key: tuple[str, ...]) -> tuple:
    """Sort rows as their values read: numbers by value, before words."""
    out = []
    for part in key:
        try:
            out.append((0, float(part), ""))
        except ValueError:
            out.append((1, 0.0, part))
    return tuple(out)


def best_against_rest(
    metric: str, by: Sequence[str], column: dict[tuple[str, ...], Cell], direction: str | None
) -> Claim | None:
    """The claim that the row with the best mean of ``metric`` beats each other row, ``direction`` ("max" or
    "min") the way it improves (None: one row, no number, or no direction)."""
    scored = {k: c for k, c in column.items() if c.values}
    if direction is None or len(scored) < 2:
        return None
    pick = max if direction == "max" else min
    best = pick(scored, key=lambda k: scored[k].mean)
    relation = operator.gt if direction == "max" else operator.lt
    pairs = [(f"vs {_label(by, k)}", scored[best], cell) for k, cell in column.items() if k != best]
    label = _label(by, best)
    word = "highest" if direction == "max" else "lowest"
    return check(f"{label} has the {word} {metric}", pairs, relation, digits=4)


def _label(by: Sequence[str], key: tuple[str, ...]) -> str:
    """A row as its claims name it: ``loss=cce, loss.lam=0.5``, the keys it records no value for left out."""
    return ", ".join(f"{b}={v}" for b, v in zip(by, key, strict=True) if v != "") or "the one row"
