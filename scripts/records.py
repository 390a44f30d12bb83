"""Keep the records of long real-data runs with the repository, so that tables rebuild and grids resume elsewhere.

    python scripts/records.py save corel/fashion150_table1 corel/fashion150_table2   # outputs/ -> results/
    python scripts/records.py restore                                                # results/ -> outputs/

``save`` copies each finished run (metrics.json says ``ok`` or ``diverged``) of the named experiments' full sweeps
from ``<outputs>/multirun/full/<experiment>/`` to ``results/multirun/full/<experiment>/`` in the same layout: its
``metrics.json``, Hydra's record (``.hydra/``), its CSV log and the arrays its evaluators saved, never a checkpoint,
a lock or a log. A cell is any folder below the sweep that holds a ``metrics.json``, at any depth: an override whose
value holds a ``/`` (``loss/metric=triplet``, ``dataset.root=/data/x``) names a cell in a folder below another, and
a cell inside another cell's folder is copied as its own record, never as a file of the other.
``make_tables.py <table> --outputs results`` builds a table from them. ``restore`` copies them back where a sweep
looks for its cells: a re-run of the same grid then skips every saved cell whose recorded config equals the one
asked for, and trains the rest.

Each record is copied whole or not at all: its other files first, its ``metrics.json`` last (a copy cut short is
not a finished record, and is redone by the next copy). Where the destination holds an unfinished attempt of the
cell (failed, or interrupted: its checkpoint, representations, logs), that attempt is removed first, under the
cell's lock, so that nothing of it (a ``best.ckpt`` of epoch 3) is taken for the record's; a cell another process
runs is left alone, and so is a ``partial`` run (trained; an evaluator failed: ``clusterable-eval`` finishes it).
Where it holds the same run (the same config, seed, best epoch and timing), the files it lacks (a CSV log) are added
to it; another finished run there is left as it is. Every record not copied is named with the reason, one line
each; a record already there whole is only counted.

What a kept record keeps for re-scoring: neither representations nor a checkpoint. Measured on COREL's Fashion-MNIST
FFNN (784-500-500, Gaussian-COREL, 648,001 parameters; one real epoch, the sizes do not depend on the epochs): a
150-epoch record is 73 KB (metrics.json 6 KB, ``.hydra/`` 7 KB, the CSV log 60 KB); its representations in float16
are 10.1 MB for the test split alone (10,000 x 500; 9.2 MB compressed) and 70.6 MB for the splits re-scoring reads
(the training split's 55,000 rows are scored with the test's: nearest class means, probes); its Lightning
checkpoint is 7.8 MB (with Adam's state), its weights alone 2.6 MB in float32 and 1.3 MB in float16 (which would not
give back its float32 numbers). For the 39 runs of the 150-epoch grid that is 394 MB of test representations or
101 MB of weights, against 2.8 MB of records: 36 to 140 times the records, in git's history for good, to save 16.7
core-hours that a machine with the time can spend again. So a record restored from ``results/`` cannot gain an
evaluator without training again, and ``clusterable-eval`` says so in one line; a run in ``outputs/`` keeps its
representations and checkpoint and is re-scored from them.

Exit status: 0 done (it says how many runs it copied, completed and left, naming each one left); 1 a record that
cannot be read, a cell another process runs, or a folder that cannot be written (one line, what was copied before
it stays whole); 2 a usage error or an experiment without runs.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path

from filelock import FileLock, Timeout

from clusterable.record import METRICS_FILE, PARTIAL, RecordError, RunRecord
from clusterable.run.cell import LOCK_FILE

KEPT_SUFFIXES = (
    ".json",
    ".yaml",
    ".csv",
    ".npz",
)  # metrics.json, .hydra/*.yaml, csv/metrics.csv, saved arrays
# A run's representations (clusterable.evaluation.saved) are megabytes a run (the docstring's sizes): kept in
# outputs/, not in the repository; its checkpoint likewise (any file under checkpoints/).
LEFT_OUT = ("representations.npz",)
# What makes two records one run: a run trained again differs at least in its timing.
SAME_RUN_KEYS = ("config", "seed", "best_epoch", "timing", "status")


class Unreadable(Exception):
    """A record whose metrics.json cannot be read: a copy cut short or a file edited by hand."""


class CannotWrite(Exception):
    """A file that cannot be written or read (a read-only folder, a full disk): one line, and the copy stops."""


class Tally:
    """What a copy did: the records copied and completed, and those left or refused with why (one line each).
    (A plain class: this script is also imported as a module without a name in ``sys.modules``, which a dataclass
    needs.)"""

    def __init__(self) -> None:
        self.copied = self.completed = 0
        self.there = 0  # the same record whole in the destination already: counted, not named
        # one line each, nothing wrong: a record left (unfinished, or another run there), completed, or copied over
        # an attempt it replaced
        self.lines: list[str] = []
        self.refused: list[str] = []  # something wrong: unreadable, busy


def read_record(cell: Path) -> RunRecord | None:
    """The cell's record, None where there is none; ``Unreadable`` naming the file and why."""
    try:
        return RunRecord.read(cell)
    except RecordError as e:
        path, _, why = str(e).partition(": ")
        raise Unreadable(f"{path} cannot be read ({why})") from None


def finished(record: RunRecord | None) -> bool:
    return record is not None and record.finished


def same_run(a: RunRecord, b: RunRecord) -> bool:
    """Whether two records are of one run (a copy of it), not of two trainings of the same cell."""
    return all(getattr(a, key) == getattr(b, key) for key in SAME_RUN_KEYS)


def cells_below(sweep: Path) -> list[Path]:
    """Every cell below ``sweep``: a folder holding a metrics.json, at any depth (an override's ``/`` nests it)."""
    return sorted(p.parent for p in sweep.rglob(METRICS_FILE) if p.is_file() and p.parent != sweep)


def record_files(cell: Path) -> Iterator[Path]:
    """The files of the cell's record, relative to it: metrics.json, Hydra's record, the CSV log, saved arrays; not
    a checkpoint, its representations, a lock, a temporary file, nor anything of a cell nested in its folder."""
    for entry in sorted(cell.iterdir()):
        if entry.is_dir() and not entry.is_symlink():
            if entry.name == "checkpoints" or (entry / METRICS_FILE).is_file():
                continue  # no checkpoint; a nested cell is a record of its own
            yield from (Path(entry.name) / p for p in record_files(entry))
        elif entry.is_file() and not entry.name.startswith("."):
            if entry.suffix in KEPT_SUFFIXES and entry.name not in LEFT_OUT:
                yield entry.relative_to(cell)


def lacks_csv_log(cell: Path, record: RunRecord) -> bool:
    """Whether the run logged to CSV (``logger.csv``) but its folder holds no ``csv/metrics.csv``."""
    loggers = (record.config or {}).get("logger") or {}
    return "csv" in loggers and not (cell / "csv" / "metrics.csv").is_file()


def clean_attempt(cell: Path) -> None:
    """Remove what an unfinished attempt left in ``cell`` (its checkpoint, representations, logs), but its lock and
    the folders of cells nested in it."""
    for entry in cell.iterdir():
        if entry.name == LOCK_FILE:
            continue
        if entry.is_dir() and not entry.is_symlink():
            if any(entry.rglob(METRICS_FILE)):
                continue
            shutil.rmtree(entry)
        else:
            entry.unlink()


def copy_files(src: Path, dest: Path, files: list[Path]) -> None:
    """Copy ``files`` (relative) from ``src`` to ``dest``, metrics.json last and by rename: never half a record."""
    ordered = sorted(files, key=lambda f: f.as_posix() == METRICS_FILE)
    for relative in ordered:
        target = dest / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        temporary = target.with_name(f".{target.name}.{os.getpid()}.tmp")
        try:
            shutil.copy2(src / relative, temporary)
            os.replace(temporary, target)
        finally:
            temporary.unlink(missing_ok=True)


def copy_cell(src: Path, dest: Path, name: str, tally: Tally, lock: bool) -> None:
    """Copy one run's record from ``src`` to ``dest`` (``name``: the cell, as the lines say it), adding to
    ``tally``. ``lock``: take the destination cell's lock first (a restore into a sweep's folder)."""
    try:
        record = read_record(src)
    except Unreadable as e:
        tally.refused.append(f"unreadable {name}: {e}: restore it, or remove the cell's folder")
        return
    if not finished(record):
        status = None if record is None else record.status
        why = f"status {status}, not finished"
        if status == PARTIAL:
            why += " (trained, an evaluator failed: clusterable-eval finishes it)"
        tally.lines.append(f"left {name}: {why}")
        return
    held = None
    if lock:
        dest.mkdir(parents=True, exist_ok=True)
        held = FileLock(dest / LOCK_FILE, blocking=False, thread_local=False, is_singleton=False)
        try:
            held.acquire()
        except Timeout:
            tally.refused.append(f"busy {name}: another process runs this cell; run the same command once it ends")
            return
    try:
        _copy_locked(src, dest, name, record, tally)
    finally:
        if held is not None:
            held.release(force=True)


def _copy_locked(src: Path, dest: Path, name: str, record: RunRecord, tally: Tally) -> None:
    files = list(record_files(src))
    try:
        there, unreadable = read_record(dest), None
    except Unreadable as e:
        there, unreadable = None, str(e)
    if there is not None and there.status == PARTIAL:
        tally.lines.append(
            f"left {name}: a partial run is there (trained, an evaluator failed): clusterable-eval "
            "finishes it; remove its folder to put this record there instead"
        )
        return
    if finished(there):
        if not same_run(record, there):
            tally.lines.append(f"left {name}: another finished run of this cell is there, left as it is")
            return
        missing = [f for f in files if not (dest / f).exists()]
        if not missing:
            tally.there += 1
            return
        copy_files(src, dest, missing)
        tally.completed += 1
        tally.lines.append(f"completed {name}: added {', '.join(f.as_posix() for f in missing)}, which it lacked")
        return
    note = f" (it replaced {unreadable})" if unreadable else ""
    if dest.is_dir():
        if not note and any(p.name != LOCK_FILE for p in dest.iterdir()):
            status = "no metrics.json" if there is None else f"status {there.status}"
            note = f" (it replaced an unfinished attempt: {status}, and whatever it had written)"
        clean_attempt(dest)
    copy_files(src, dest, files)
    tally.copied += 1
    if note:
        tally.lines.append(f"copied {name}{note}")
    if lacks_csv_log(src, record):
        tally.lines.append(f"copied {name} without its CSV log: {src / 'csv' / 'metrics.csv'} is not there")


def copy_sweeps(src_root: Path, dest_root: Path, experiments: list[str], lock: bool) -> Tally:
    """Copy the finished cells of ``experiments`` (every cell under ``src_root``'s full sweeps when empty).

    Raises:
        SystemExit: an experiment without runs, or a name that leads out of the sweeps' folder (usage errors).
        CannotWrite: a file that cannot be written or read; what was copied before it is whole.
    """
    full, dest_full = src_root / "multirun" / "full", dest_root / "multirun" / "full"
    sweeps = []
    for experiment in experiments or [""]:
        parts = experiment.replace("\\", "/").split("/")
        if experiment and (experiment.startswith(("/", "~")) or any(p in ("", ".", "..") for p in parts)):
            raise SystemExit(f"error: {experiment!r} is not an experiment's name (e.g. corel/fashion150_table1)")
        sweep = full / experiment if experiment else full
        cells = cells_below(sweep) if sweep.is_dir() else []
        if not cells:
            raise SystemExit(f"error: no runs of {experiment or 'any experiment'} under {sweep}")
        sweeps.append(cells)
    tally = Tally()
    for cells in sweeps:
        for cell in cells:
            relative = cell.relative_to(full)
            try:
                copy_cell(cell, dest_full / relative, relative.as_posix(), tally, lock)
            except OSError as e:
                where = e.filename or dest_full / relative
                raise CannotWrite(f"cannot copy {relative.as_posix()}: {where}: {e.strerror or e}") from None
    return tally


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("action", choices=("save", "restore"))
    parser.add_argument("experiments", nargs="*", help="e.g. corel/fashion150_table1 (restore: all when none)")
    parser.add_argument(
        "--outputs",
        default=os.environ.get("CLUSTERABLE_OUTPUTS") or "outputs",
        help="the sweeps' folder ($CLUSTERABLE_OUTPUTS, else outputs)",
    )
    parser.add_argument("--results", default="results", help="the tracked records' folder (results)")
    args = parser.parse_args(argv)
    if args.action == "save" and not args.experiments:
        parser.error("save needs the experiments whose runs to keep, e.g. corel/fashion150_table1")
    outputs, results = Path(args.outputs), Path(args.results)
    src, dest = (outputs, results) if args.action == "save" else (results, outputs)
    try:
        tally = copy_sweeps(src, dest, args.experiments, lock=args.action == "restore")
    except SystemExit as e:
        print(e, file=sys.stderr)
        return 2
    except CannotWrite as e:
        print(
            f"error: {e}; the records copied before it are whole, and the same command goes on from there",
            file=sys.stderr,
        )
        return 1
    for line in tally.lines:
        print(line)
    for line in tally.refused:
        print(line, file=sys.stderr)
    named = len([line for line in tally.lines if line.startswith("left ")]) + len(tally.refused)
    print(
        f"{args.action}: {tally.copied} runs copied to {dest}, {tally.completed} completed, {tally.there} there "
        f"already, {named} left (named above)"
    )
    return 1 if tally.refused else 0


if __name__ == "__main__":
    sys.exit(main())
