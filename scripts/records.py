"""Keep the records of long real-data runs with the repository, so that tables rebuild and grids resume elsewhere.

    python scripts/records.py save corel/fashion150_table1 corel/fashion150_table2   # outputs/ -> results/
    python scripts/records.py restore                                                # results/ -> outputs/

``save`` copies each finished run (metrics.json says ``ok`` or ``diverged``) of the named experiments' full sweeps
from ``<outputs>/multirun/full/<experiment>/`` to ``results/multirun/full/<experiment>/`` in the same layout: its
``metrics.json``, Hydra's record (``.hydra/``), its CSV log and the arrays its evaluators saved, never a checkpoint,
a lock or a log. ``make_tables.py <table> --outputs results`` builds a table from them. ``restore`` copies them back
where a sweep looks for its cells: a re-run of the same grid then skips every saved cell whose recorded config equals
the one asked for, and trains the rest. A record already in the destination is left alone, unless it is not
finished there and is here.

Exit status: 0 done (it says how many runs it copied and skipped); 2 a usage error or an experiment without runs.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
from pathlib import Path

from clusterable.run.cell import FINISHED
from clusterable.rundir import read_metrics

KEPT_SUFFIXES = (
    ".json",
    ".yaml",
    ".csv",
    ".npz",
)  # metrics.json, .hydra/*.yaml, csv/metrics.csv, saved arrays
# A run's representations (clusterable.evaluation.saved) are megabytes a run: kept in outputs/, not in the repository.
LEFT_OUT = ("representations.npz",)


def finished(cell: Path) -> bool:
    return (read_metrics(cell) or {}).get("status") in FINISHED


def copy_cell(src: Path, dest: Path) -> bool:
    """Copy one run's record files from ``src`` to ``dest``; False (nothing copied) where ``dest`` holds a
    finished run already or ``src`` holds none."""
    if not finished(src) or finished(dest):
        return False
    for path in sorted(src.rglob("*")):
        relative = path.relative_to(src)
        kept = path.suffix in KEPT_SUFFIXES and path.name not in LEFT_OUT
        if path.is_file() and kept and "checkpoints" not in relative.parts:
            target = dest / relative
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(path, target)
    return True


def copy_sweeps(src_root: Path, dest_root: Path, experiments: list[str]) -> tuple[int, int]:
    """Copy the finished cells of ``experiments`` (all found under ``src_root`` when empty); (copied, skipped)."""
    full = src_root / "multirun" / "full"
    if not experiments:
        experiments = sorted(
            {p.parent.parent.relative_to(full).as_posix() for p in full.rglob("metrics.json")}
        )
    copied = skipped = 0
    for experiment in experiments:
        sweep = full / experiment
        cells = [p.parent for p in sweep.glob("*/metrics.json")]
        if not cells:
            raise SystemExit(f"error: no runs of {experiment} under {sweep}")
        for cell in cells:
            if copy_cell(cell, dest_root / "multirun" / "full" / experiment / cell.name):
                copied += 1
            else:
                skipped += 1
    return copied, skipped


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("action", choices=("save", "restore"))
    parser.add_argument(
        "experiments", nargs="*", help="e.g. corel/fashion150_table1 (restore: all when none)"
    )
    parser.add_argument("--outputs", default=os.environ.get("CLUSTERABLE_OUTPUTS") or "outputs",
                        help="the sweeps' folder ($CLUSTERABLE_OUTPUTS, else outputs)")  # fmt: skip
    parser.add_argument("--results", default="results", help="the tracked records' folder (results)")
    args = parser.parse_args(argv)
    if args.action == "save" and not args.experiments:
        parser.error("save needs the experiments whose runs to keep, e.g. corel/fashion150_table1")
    outputs, results = Path(args.outputs), Path(args.results)
    src, dest = (outputs, results) if args.action == "save" else (results, outputs)
    try:
        copied, skipped = copy_sweeps(src, dest, args.experiments)
    except SystemExit as e:
        print(e, file=sys.stderr)
        return 2
    print(
        f"{args.action}: {copied} runs copied to {dest}, {skipped} left (unfinished, or finished there already)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
