"""A run directory: its ``metrics.json`` (the one file tables are built from), what the run really was
(``provenance`` and ``mode``), and when a finished run may be reused by a re-run of its sweep."""

from __future__ import annotations

import errno
import functools
import hashlib
import os
import shutil
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from clusterable.record import METRICS_FILE, CodeVersion, Provenance, RecordError, RunRecord

# Trainer limits that make a run less than a full one; the values that still mean "everything". max_steps is not
# one: like max_epochs it is the length of training a protocol asks for (DSCL's 100 and 200 iterations).
LIMITS = {
    "limit_train_batches": (1.0,),
    "limit_val_batches": (1.0, 0, 0.0),  # 0: no validation loop at all, as experiments without one set
    "limit_test_batches": (1.0,),
    "fast_dev_run": (False, 0),
    "overfit_batches": (0, 0.0),
    "max_time": (None,),
}
# Keys that do not change what a run computes: a finished run is reused whatever they are now.
# tuned_lambda_partial lets Table 2 take a winner from an incomplete λ grid: the λ it ran at is loss.lam.
# What a run keeps besides its metrics (save_representations) changes nothing it computes.
IGNORED_IN_COMPARISON = (
    "logger",
    "paths",
    "trainer.enable_progress_bar",
    "trainer.enable_model_summary",
    "tuned_lambda_partial",
    "save_representations",
)


# Reading run records, a line every this many when there are more (``find_runs``'s ``say``): a results folder of
# thousands of runs can take seconds to read, more on a network disk (each metrics.json holds the run's resolved
# config), and the commands that read it should not look hung meanwhile. 500, as ``clusterable-site`` says its run
# pages per 500.
READ_PROGRESS_EVERY = 500


def tables_dir(outputs: str | Path, mode: str) -> Path:
    """Where tables made from runs of ``mode`` go: ``<outputs>/tables/``, smoke ones in ``<outputs>/tables/smoke/``
    (so that they never overwrite, or are read as, a full table's files)."""
    return Path(outputs) / "tables" / ("smoke" if mode == "smoke" else "")


class UnreadableRuns(ValueError):
    """Some metrics.json below a table's folder cannot be read (truncated, not JSON, not a run record, no
    permission): a table that left them out would count their runs as never run."""


def find_runs(root: str | Path, say: Callable[[str], None] | None = None) -> list[tuple[Path, RunRecord]]:
    """Every run directory below ``root`` with its record, sorted by path; ``UnreadableRuns`` (one line naming
    each file and why) when any metrics.json cannot be read, so that no table silently leaves a run out.

    ``say``: where to report reading progress when there are more than ``READ_PROGRESS_EVERY`` records (``read
    1,000 of 2,012 runs``, every ``READ_PROGRESS_EVERY`` and at the last); the caller puts its command's name in
    front and chooses the stream (stderr, for commands whose stdout is their result)."""
    out, bad = [], []
    paths = sorted(Path(root).rglob(METRICS_FILE))
    tell = say if len(paths) > READ_PROGRESS_EVERY else None  # a few hundred records read in a blink
    for i, path in enumerate(paths):
        if tell is not None and i and i % READ_PROGRESS_EVERY == 0:
            tell(f"read {i:,} of {len(paths):,} runs")
        try:
            record = RunRecord.read(path.parent)
        except RecordError as e:
            bad.append(str(e).replace(f"{path}: ", f"{path} (", 1) + ")")
            continue
        if record is not None:
            out.append((path.parent, record))
    if tell is not None:
        tell(f"read {len(paths):,} of {len(paths):,} runs")
    if bad:
        raise UnreadableRuns(
            f"{len(bad)} metrics.json cannot be read: {', '.join(bad)}; a copy cut short or a file edited by "
            "hand: restore it, or remove its run folder (or run that cell again) and make the table again"
        )
    return out


def provenance(config: Mapping[str, Any], debug: str | None) -> Provenance:
    """What a run really was: its data source, its ``debug`` group and the trainer limits that were set.

    ``config`` is the composed config (resolved or not); ``debug`` the selected debug option or None.
    """
    trainer = config.get("trainer") or {}
    limits = {k: trainer[k] for k in LIMITS if k in trainer and trainer[k] is not None}
    source = (config.get("dataset") or {}).get("source", "real")
    return Provenance(
        data_source=source,
        debug=debug,
        limits=limits,
        max_epochs=trainer.get("max_epochs"),
        max_steps=trainer.get("max_steps"),
    )


@functools.lru_cache(maxsize=1)
def _code_version() -> tuple[tuple[str, Any], ...]:
    return tuple(_read_code_version().items())


def code_version() -> CodeVersion:
    """``_read_code_version`` once per process: the code a process imported is the code it runs, whatever is edited
    on disk while a long sweep goes on."""
    return CodeVersion(**dict(_code_version()))


# What a package hash reads: the package's own folder and its Hydra plugins (the launchers and sweepers train and
# choose cells), every file but the bytecode Python writes beside them on import.
PLUGINS = ("clusterable_launcher", "clusterable_sweeper")
GIT, HASH = "git commit", "package hash"


def package_roots(package_dir: Path | None = None) -> list[Path]:
    """The folders whose files are the code a run runs: the ``clusterable`` package (``package_dir``, default this
    module's) and our Hydra plugins beside it (``hydra_plugins/clusterable_*``, in a checkout's ``src/`` as in
    an installed ``site-packages/``)."""
    package_dir = Path(package_dir or Path(__file__).resolve().parent)
    plugins = [package_dir.parent / "hydra_plugins" / name for name in PLUGINS]
    return [package_dir, *(p for p in plugins if p.is_dir())]


def package_hash(roots: list[Path]) -> str:
    """The SHA-256 of the files below ``roots`` (each named by its path from its root's parent, so ``clusterable/
    cli.py``), sorted: the same for one build wherever it is installed, different when any file differs, is added
    or is removed. ``__pycache__`` folders and ``*.pyc`` files are left out: Python writes them on import, per
    interpreter."""
    digest = hashlib.sha256()
    for root in roots:
        files = sorted(
            p
            for p in root.rglob("*")
            if p.is_file() and "__pycache__" not in p.relative_to(root).parts and p.suffix not in (".pyc", ".pyo")
        )
        for path in files:
            name = path.relative_to(root.parent).as_posix()
            digest.update(name.encode() + b"\0" + hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()


def _read_code_version(package_dir: Path | None = None) -> dict[str, Any]:
    """The code a run ran: the package's version, the SHA-256 of its files (``package_hash``) and, in a git
    checkout, its commit and whether tracked files differ from it (``dirty``). ``kind`` says which version names
    the code: ``git commit`` in a checkout, ``package hash`` where there is no git (an installed wheel, a source
    tree without ``.git``, or no git program), whose ``commit`` and ``dirty`` are None. Recorded by every run as
    ``code`` in metrics.json and compared by the tables like a config key: two versions of the code are two
    configs. The hash is recorded in a checkout too: a dirty tree's commit does not say which edits ran, and a
    wheel built from a clean checkout hashes as that checkout does."""
    import subprocess
    from importlib import metadata

    try:
        package: str | None = metadata.version("clusterable")
    except metadata.PackageNotFoundError:  # run from a source tree that was never installed
        package = None
    package_dir = Path(package_dir or Path(__file__).resolve().parent)
    try:
        files: str | None = package_hash(package_roots(package_dir))
    except OSError:  # a file that cannot be read: the version stays the commit's, or unknown
        files = None
    out: dict[str, Any] = {
        "package": package,
        "commit": None,
        "dirty": None,
        "package_hash": files,
        "kind": HASH if files else None,
    }
    root = package_dir.parents[1]  # src/clusterable -> the checkout
    if not (root / ".git").exists():
        return out

    def git(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True, timeout=20)

    try:
        head = git("rev-parse", "HEAD")
        if head.returncode == 0:
            # untracked files are not the run's code (outputs, a user's notes): only tracked ones count
            status = git("status", "--porcelain", "--untracked-files=no")
            out.update(
                commit=head.stdout.strip(),
                dirty=bool(status.stdout.strip()) if status.returncode == 0 else None,
                kind=GIT,
            )
    except (
        OSError,
        subprocess.SubprocessError,
    ):  # no git on the machine, or it hung: the hash names the code
        pass
    return out


def run_mode(prov: Provenance) -> str:
    """``full`` for a run on real data with no debug group and no limit that cuts it short, else ``smoke``.

    Smoke runs are never stored where full runs live (the mode is part of the sweep folder) and never enter a
    full table.
    """
    # Type matters: limit_train_batches=1.0 is every batch, limit_train_batches=1 is one batch.
    cut = any(not any(type(v) is type(f) and v == f for f in LIMITS[k]) for k, v in prov["limits"].items())
    return "full" if prov["data_source"] == "real" and prov["debug"] is None and not cut else "smoke"


def config_changes(old: Mapping[str, Any], new: Mapping[str, Any], prefix: str = "") -> list[str]:
    """``key: old -> new`` for every leaf that differs between two resolved configs, ignoring
    ``IGNORED_IN_COMPARISON``; empty when the run would compute the same thing."""
    changes = []
    for key in sorted(set(old) | set(new)):
        path = f"{prefix}{key}"
        if path in IGNORED_IN_COMPARISON:
            continue
        a, b = old.get(key, "<unset>"), new.get(key, "<unset>")
        if _absent(a) and _absent(b):
            continue  # a key added to the config with an empty default (null, {}) computes nothing new
        if isinstance(a, str) and a == "<unset>" and _is_default(new, key, b):
            continue  # an option added to a constructor since, at its default: what the old code computed
        if isinstance(a, Mapping) and isinstance(b, Mapping):
            changes += config_changes(a, b, f"{path}.")
        elif a != b:
            changes.append(f"{path}: {a} -> {b}")
    return changes


def _is_default(node: Mapping[str, Any], key: str, value: Any) -> bool:
    """Whether ``value`` is the default of parameter ``key`` of the constructor ``node`` names (``_target_``)."""
    import inspect

    from hydra.utils import get_object

    try:
        parameter = inspect.signature(get_object(str(node["_target_"]))).parameters.get(key)
    except Exception:  # no _target_, or one that no longer imports: not known to be a default
        return False
    return parameter is not None and parameter.default is not inspect.Parameter.empty and parameter.default == value


def _absent(value: Any) -> bool:
    return (
        value is None or (isinstance(value, Mapping) and not value) or (isinstance(value, str) and value == "<unset>")
    )


def clean_cell(run_dir: Path, keep: tuple[str, ...]) -> None:
    """Remove everything an earlier attempt left in ``run_dir`` (checkpoints, logs, plots, metrics.json) but the
    names in ``keep`` (what Hydra wrote for the attempt under way), so that nothing stale survives into it."""
    if not run_dir.is_dir():
        return
    for entry in run_dir.iterdir():
        if entry.name in keep:
            continue
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry)
        else:
            entry.unlink()


def remove_if_empty(path: Path) -> None:
    """Delete ``path`` if it is an empty file (a log nobody wrote to)."""
    try:
        if path.is_file() and path.stat().st_size == 0:
            path.unlink()
    except OSError:
        pass


# The errors of a write that say the disk, not the code, is at fault: a run ends in one line on them.
WRITE_ERRNOS = (errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EACCES, errno.EPERM, errno.EFBIG, errno.EIO)


def is_write_error(e: BaseException) -> bool:
    """Whether ``e`` is a write that failed for want of space or permission (``WRITE_ERRNOS``), not a bug."""
    return isinstance(e, OSError) and e.errno in WRITE_ERRNOS


def write_error(e: OSError) -> str:
    """One line for a failed write: ``no space left on device writing <file>`` (the file when the error names it)."""
    what = (e.strerror or os.strerror(e.errno or 0) or str(e)).lower()
    return f"{what} writing {e.filename}" if e.filename else f"{what} writing the run's files"
