"""Regenerate a paper's table or figure from run directories, ours beside the published numbers.

    clusterable-tables corel/table1            # after: clusterable-train -m experiment=corel/table1
    clusterable-tables corel/table2            # after: clusterable-train -m experiment=corel/table2
    clusterable-tables corel/digits_table1     # also digits_table2, digits_table3_4 (CPU-sized)
    clusterable-tables csrl/fig2 --mode smoke
    clusterable-tables dscl/digits             # also dscl/table1, dscl/table2, dscl/table3
    clusterable-tables safir/table6_1          # also table6_2 ... table6_6, fig6_2, fig6_3, digits6_1 ...
    clusterable-tables cross/fashion           # every clustering loss of the five papers on one recipe
    clusterable-tables --runs myproject --by loss.temperature --metrics test/acc,test/kmeans/acc   # your own runs

``clusterable-tables`` is the installed command (``pip install clusterable``); in a checkout,
``python scripts/make_tables.py`` is the same (and ``clusterable-train`` is ``python train.py``). Both read the runs
below ``./outputs`` of the folder they run in, or ``$CLUSTERABLE_OUTPUTS``, as the training commands write them.

Progress goes to stderr, and only from an outputs folder of more than 500 runs (``tables: read 500 of 2,012 runs``,
a line per 500 read: ``rundir.READ_PROGRESS_EVERY``); stdout is the table alone.

Writes markdown, LaTeX and CSV (and PNG figures) under ``<outputs>/tables/`` and prints the markdown, followed by
the paper's claims checked on our numbers, each on the settings whose numbers are there (naming the others): a
comparison of rows by Welch's t over their seeds (holds / reversed / not shown, with the difference and p), a claim
on one seed by its means (holds on one seed), one no seed test applies to by its numbers (holds / does not hold). A
cell averages runs of one config (they differ in their seed and the table's own axes alone); the notes say how
many runs each configuration has and which runs are not their experiment's protocol. A table is built from runs of
one mode only (full: real data, whole training; smoke: fake data or a few batches, testing the pipeline) and one
data source; its title says which. ``corel/table1`` (and ``corel/digits_table1``) also writes its
λ winners, which the Table 2 runs read: ``<outputs>/tables/corel_table1_lambda.yaml`` (``clusterable.tuned_lambda``),
with whether each setting's λ grid was complete.

A run's identity is what it recorded (config, group options, data checksums, code version: a git commit, or the
hash of an installed package's files), never its folder name: folders holding one run count once. Runs of two code
versions share a cell only with ``--pool-code-versions``. A metric re-scored after training (``clusterable-eval``)
counts as made with the evaluator settings it was re-scored with: a cell never pools it with the same metric made
otherwise, and a note names the settings.

``--runs NAME`` tabulates any runs, your own experiments' as much as the papers': the runs that recorded NAME as
their config's ``name`` (their sweep folder) or as their ``experiment=`` option, a row per value of the ``--by``
keys (default: the keys their configs differ in, the seed aside), a column per ``--metrics`` metric (default: the
metric the runs optimise), mean ± std over the seeds, under the same rules as the paper tables; the row with the
best mean of each metric is tested against each other row (Welch's t over the seeds; ``--higher`` / ``--lower``
say which way is better for a metric whose name does not). Written as
``<outputs>/tables/runs_<NAME>.md`` (and .tex, .csv). With ``-cd DIR`` (or ``$CLUSTERABLE_SEARCHPATH``) your own
experiments compose, so a note names the runs that depart from their experiment's protocol, as for the papers'.

Exit status: 0 table written; 1 no runs (says what to run); 2 usage error, a metrics.json or an array file that
cannot be read (each one named), the selected runs mix modes, data sources or budgets, or the runs of one cell differ
in more than their seed (trainer steps, learning rate, λ, data files, code...: one line on stderr naming the keys
that differ; nothing written).
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from clusterable.metric_names import objective_keys
from clusterable.record import DIVERGED, PRUNED
from clusterable.rundir import UnreadableRuns, tables_dir
from clusterable.searchpath import SearchPathError, with_searchpath
from clusterable.tables import runs as own_runs
from clusterable.tables.protocol import protocol_note
from clusterable.tables.readings import readings_note
from clusterable.tables.report import (
    MixedRuns,
    Run,
    Table,
    code_note,
    copies_note,
    describe,
    load_runs,
    rescored_note,
    seed_note,
)
from clusterable.tables.runs import RunsError

PAPERS = ("corel", "csrl", "boudiaf", "dml", "dscl", "safir", "cross")


def say(line: str) -> None:
    """A progress line on stderr (``tables: read 1,000 of 2,012 runs``), as ``clusterable-site`` says its own
    (``site: ...``): stdout is the table, which scripts read."""
    print(f"tables: {line}", file=sys.stderr, flush=True)


def main(argv: list[str] | None = None, train: str = "clusterable-train") -> int:
    """The command line (``argv``: sys.argv[1:] if None); ``train``: the training command its messages name.
    Returns the exit status."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("table", nargs="?", help="<paper>/<table>, e.g. corel/table2, csrl/fig2")
    parser.add_argument("--runs", metavar="NAME", help="tabulate the runs named NAME (their name or experiment)")
    parser.add_argument("--by", metavar="KEYS", help="with --runs: comma-separated config keys, a row per value")
    parser.add_argument("--metrics", metavar="KEYS", help="with --runs: comma-separated metrics, a column each")
    parser.add_argument("--higher", metavar="KEYS", help="with --runs: metrics for which higher is better")
    parser.add_argument("--lower", metavar="KEYS", help="with --runs: metrics for which lower is better")
    # The folder the training command writes to: $CLUSTERABLE_OUTPUTS when set (src/clusterable/conf/train.yaml,
    # paths.output_dir), else outputs.
    parser.add_argument(
        "--outputs",
        default=os.environ.get("CLUSTERABLE_OUTPUTS") or "outputs",
        help="folder of the multirun directories ($CLUSTERABLE_OUTPUTS, else outputs)",
    )
    parser.add_argument(
        "--mode",
        choices=("auto", "full", "smoke"),
        default="auto",
        help="which runs: full, smoke (fake data or few batches), auto: full if any",
    )
    parser.add_argument(
        "--pool-code-versions",
        action="store_true",
        help="let runs of different code versions (git commit, dirty flag, package hash) share a "
        "cell; the table names the versions (without it such a cell is refused)",
    )
    parser.add_argument(
        "-cd",
        "--config-dir",
        action="append",
        default=[],
        help="a config folder of your own (also $CLUSTERABLE_SEARCHPATH): its experiments' protocols are composed "
        "to name the runs that depart from them",
    )
    args = parser.parse_args(argv)
    try:
        args.searchpath = with_searchpath([f"--config-dir={d}" for d in args.config_dir])
    except SearchPathError as err:
        parser.error(str(err))

    if (args.table is None) == (args.runs is None):
        parser.error("give a paper's table (<paper>/<table>) or --runs NAME, not both or neither")
    if args.runs is not None:
        return runs_main(args)
    if any(v is not None for v in (args.by, args.metrics, args.higher, args.lower)):
        parser.error("--by, --metrics, --higher and --lower shape a table of --runs; a paper's table has its own rows")
    paper, _, name = args.table.partition("/")
    if paper not in PAPERS:
        parser.error(f"unknown paper {paper!r}; choose from {', '.join(PAPERS)}")
    module = importlib.import_module(f"clusterable.tables.{paper}")
    if name not in module.SOURCES:
        parser.error(f"unknown table {args.table!r}; {paper} has: {', '.join(sorted(module.SOURCES))}")
    try:
        built = build(args.table, args.outputs, args.mode, args.pool_code_versions, searchpath=args.searchpath, say=say)
    except (MixedRuns, UnreadableRuns) as err:
        print(f"error: {args.table}: {err}", file=sys.stderr)
        return 2
    except NoRuns as err:
        print(
            f"{err}; run first:\n" + "\n".join(f"  {train} -m experiment={e}" for e in err.experiments), file=sys.stderr
        )
        return 1
    table, runs, mode, out_dir = built
    paths = table.write(out_dir, f"{paper}_{name}")
    diverged = sum(r.record.status == DIVERGED for r in runs)
    failed = sum(not r.ok for r in runs) - diverged
    print(table.markdown())
    counts = f"{diverged} diverged, {failed} failed" if diverged else f"{failed} failed"
    experiment = " + ".join(sources(args.table))
    print(f"\n{len(runs)} runs ({counts}) of {experiment} [{mode}]; written: {', '.join(map(str, paths))}")
    return 0


def _listed(text: str | None) -> list[str] | None:
    """A comma-separated option as a list (None where not given); an empty item is refused."""
    if text is None:
        return None
    items = [t.strip() for t in text.split(",")]
    if not all(items):
        raise RunsError(f"{text!r} has an empty item: give keys separated by single commas")
    return items


def runs_main(args: argparse.Namespace) -> int:
    """``--runs``: the table of any runs (``tables.runs``), written and printed like a paper's."""
    try:
        by, metrics = _listed(args.by), _listed(args.metrics)
        runs, mode = own_runs.load(args.outputs, args.runs, args.mode, args.pool_code_versions, say)
        if not runs:
            print(
                f"no runs named {args.runs!r} under {args.outputs}/ (mode {args.mode}): a run's name is its config's "
                f"name (its sweep folder) or its experiment= option",
                file=sys.stderr,
            )
            return 1
        if by is None:
            by = own_runs.varying_keys(runs)
        if metrics is None:
            optimized = sorted({tuple(objective_keys(r.get("optimized_metric"))) for r in runs} - {()})
            if len(optimized) != 1:
                named = [", ".join(o) for o in optimized] or "no metric"
                raise RunsError(f"the runs optimise {named}: name the columns with --metrics")
            metrics = list(optimized[0])
        higher, lower = _listed(args.higher) or [], _listed(args.lower) or []
        if clash := sorted(set(higher) & set(lower)):
            raise RunsError(f"{', '.join(clash)}: both --higher and --lower")
        directions = {m: "max" for m in higher} | {m: "min" for m in lower}
        if stray := [m for m in directions if m not in metrics]:
            raise RunsError(f"--higher/--lower {stray[0]}: not a column of the table (--metrics {','.join(metrics)})")
        table = own_runs.runs_table(args.runs, runs, by, metrics, directions)
    except (MixedRuns, UnreadableRuns, RunsError) as err:
        print(f"error: --runs {args.runs}: {err}", file=sys.stderr)
        return 2
    # the protocol of each experiment the runs are of, where it composes (yours: with -cd or the search path)
    experiments = tuple(sorted({r.record.experiment for r in runs if r.record.experiment}))
    annotate(table, runs, mode, experiments, args.searchpath)
    stem = "runs_" + "".join(c if c.isalnum() or c in "-_." else "_" for c in args.runs)
    paths = table.write(tables_dir(args.outputs, mode), stem)
    print(table.markdown())
    failed = sum(not r.ok for r in runs)
    pruned = sum(r.record.status == PRUNED for r in runs)
    apart = f"{failed} not ok" + (f": {pruned} pruned" if pruned else "")
    print(f"\n{len(runs)} runs ({apart}) named {args.runs} [{mode}]; written: {', '.join(map(str, paths))}")
    return 0


class NoRuns(LookupError):
    """A table's experiments have no runs under the outputs folder (``experiments``: what to run)."""

    def __init__(self, message: str, experiments: tuple[str, ...]):
        super().__init__(message)
        self.experiments = experiments


def sources(table: str) -> tuple[str, ...]:
    """The experiments whose runs ``table`` ("<paper>/<name>") is built from; ValueError (one line naming the
    choices) for an unknown paper or table."""
    paper, _, name = table.partition("/")
    if paper not in PAPERS:
        raise ValueError(f"unknown paper {paper!r} in {table!r}; choose from {', '.join(PAPERS)}")
    known = importlib.import_module(f"clusterable.tables.{paper}").SOURCES
    if name not in known:
        raise ValueError(f"unknown table {table!r}; {paper} has: {', '.join(sorted(known))}")
    source = known[name]
    return (source,) if isinstance(source, str) else tuple(source)


def build(
    table_name: str,
    outputs: str | Path,
    mode: str = "auto",
    pool_code: bool = False,
    out_dir: Path | None = None,
    searchpath: Sequence[str] = (),
    say: Callable[[str], None] | None = None,
) -> tuple[Table, list[Run], str, Path]:
    """The table ``table_name`` ("<paper>/<name>") from the runs under ``outputs``, with the notes the command
    prints under it (mode and data, seeds, copies, code versions, protocol departures), its figures drawn into
    ``out_dir`` (default: the outputs' tables folder); ``say`` hears the progress of reading a large outputs folder
    (None: nothing is said). Returns the table, its runs, their mode and the folder.
    Raises ``NoRuns``, ``MixedRuns``, ``UnreadableRuns`` or ``ValueError`` (an unknown table; each says what is
    wrong in one line)."""
    # One experiment's runs, or several for a table that sets grids side by side (corel/fashion_budgets); an
    # unknown paper or table is refused here, in one line.
    experiments = sources(table_name)
    paper, _, name = table_name.partition("/")
    module = importlib.import_module(f"clusterable.tables.{paper}")
    runs, mode = load_runs(outputs, experiments, mode, pool_code=pool_code, say=say)
    if not runs:
        raise NoRuns(f"no runs of experiment {' + '.join(experiments)!r} under {outputs}/ (mode {mode})", experiments)
    # Smoke tables and figures go to their own folder, so they never overwrite a full table's files.
    out_dir = tables_dir(outputs, mode) if out_dir is None else out_dir
    # A cell whose runs are not one config refuses the table (report.MixedConfigs): nothing written.
    table = getattr(module, name)(runs, out_dir)
    annotate(table, runs, mode, experiments, searchpath)
    return table, runs, mode, out_dir


def annotate(
    table: Table, runs: list[Run], mode: str, experiments: tuple[str, ...], searchpath: Sequence[str] = ()
) -> None:
    """The notes every table prints under it, added to ``table``: its mode in the title; where its numbers come
    from, the seeds, copies, code versions, re-scoring, the readings its rows were made under, and each of
    ``experiments`` whose runs depart from its protocol (composed with ``searchpath``: ``hydra.searchpath=[...]``
    naming config folders of your own)."""
    suffix, note = describe(runs, mode)
    table.title = f"{table.title} — {suffix}"
    if note:
        table.notes.insert(0, note)
    if seeds := seed_note(runs):
        table.notes.insert(1 if note else 0, seeds)
    table.notes += [n for n in (copies_note(runs), code_note(runs), rescored_note(runs)) if n]
    table.notes += readings_note(runs)  # a row made under a reading of ours says so, with its switch
    for exp in experiments:  # steps, lr... set on the command line: said under the title
        if odd := protocol_note([r for r in runs if r.record.experiment == exp], exp, searchpath):
            table.notes.insert(0, odd)


if __name__ == "__main__":
    sys.exit(main())
