"""Hydra callbacks (``hydra.callbacks`` in ``src/clusterable/conf/train.yaml``): the output folder is checked before
anything runs, and a multirun ends with ``N ok, M failed, K skipped`` (and ``D diverged`` when a head recognised its
loss's unbounded regime: results of the grid, not failures; ``P partial`` for cells trained whose evaluators did not
all score; ``B busy`` for cells another process was running; ``I interrupted`` after Ctrl-C), the failed and partial
cells' reasons and a non-zero exit status when any cell failed or is partial. A sweep that
Hydra does not finish (Ctrl-C, a full disk) still prints its summary: ``clusterable.cli`` calls ``end_sweep``.

Jobs may run in other processes (``hydra/launcher=joblib``, ``submitit_*``), so each job writes its outcome as a
small file in a folder the sweep names in an environment variable (inherited by the launched processes); the
summary reads them back in the launching process.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import sys
import time
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from hydra.experimental.callback import Callback
from omegaconf import DictConfig

RECORDS_ENV = "CLUSTERABLE_SWEEP_RECORDS"
# The launching process's exit status, read by ``clusterable.cli.main`` after Hydra returns.
exit_status = {"code": 0}
# Outcomes this process could not write (a full disk), by records folder: the summary counts them all the same.
_unwritten: dict[str, list[dict[str, Any]]] = {}
# The sweep under way in this process, so that one Hydra does not finish (Ctrl-C) still ends with its summary.
_sweeps: list[SweepSummary] = []
STATUSES = ("ok", "diverged", "failed", "skipped", "partial", "busy", "interrupted")


class CommandLineError(Exception):
    """A mistake on the command line found once Hydra has composed the config (``-m`` with DDP): one line, exit
    status 2, before any cell runs."""


def ddp_in_sweep(config: DictConfig) -> str | None:
    """Why ``config`` (a composed ``train.py -m`` config, its ``hydra`` node included) cannot run as a cell of a
    local sweep, or None. Lightning starts DDP's other ranks by running the whole command line again: under ``-m``
    every rank would run the whole sweep. A SLURM launcher starts each cell as its own job with its ranks, so it may.
    """
    trainer = config.get("trainer") or {}
    strategy, devices = str(trainer.get("strategy", "auto")), trainer.get("devices", 1)
    launcher = str(((config.get("hydra") or {}).get("launcher") or {}).get("_target_", ""))
    if "Slurm" in launcher:
        return None
    several = _device_count(devices) not in (0, 1)  # -1: every device
    if not (several or any(name in strategy.lower() for name in ("ddp", "fsdp", "deepspeed"))):
        return None
    return (
        f"-m with DDP (trainer.strategy={strategy}, trainer.devices={devices}): Lightning would start the whole "
        "sweep again in every rank; run each DDP cell as a single run (without -m), or sweep with "
        "hydra/launcher=submitit_slurm"
    )


def _device_count(devices: Any) -> int:
    """Lightning's ``devices`` as a count: an int as it is (-1 for all), a list or ``"0,1"`` by its items, ``"2"``
    as 2, anything else (``"auto"``) as 1."""
    if isinstance(devices, int):
        return devices
    if isinstance(devices, Sequence) and not isinstance(devices, str):
        return len(devices)
    text = str(devices).strip()
    if "," in text:
        return len([d for d in text.split(",") if d.strip()])
    return int(text) if text.lstrip("-").isdigit() else 1


def record_outcome(run_dir: Path, status: str, error: str | None, cell: str | None = None) -> None:
    """Write one job's outcome (one of ``STATUSES``) for the sweep summary; no-op outside a sweep.

    ``cell`` names the cell in the summary (default: the run directory's name, i.e. its overrides).
    """
    folder = os.environ.get(RECORDS_ENV)
    if not folder:
        return
    record = {"dir": str(run_dir), "cell": cell or run_dir.name, "status": status, "error": error}
    path = Path(folder, f"{uuid.uuid4().hex}.json")
    try:  # whole or not at all (the summary globs *.json), and a full disk must not turn the outcome into a crash
        path.with_suffix(".tmp").write_text(json.dumps(record))
        path.with_suffix(".tmp").replace(path)
    except OSError:
        path.with_suffix(".tmp").unlink(missing_ok=True)
        # Kept in memory instead: a cell of this process (basic or stacked launcher) is still counted, and a
        # failure on a full disk still makes the exit status 1.
        _unwritten.setdefault(folder, []).append(record)


# In a sweep's outcome folder: the digest of every config file its cells compose from, taken when the sweep starts.
CONFIG_SNAPSHOT = "config-files.json"


def config_roots(config: DictConfig) -> list[str]:
    """The folders a sweep's cells compose from: the package's configs and each ``hydra.searchpath`` folder."""
    from clusterable.config import CONFIG_DIR

    paths = (config.get("hydra") or {}).get("searchpath") or []
    return [CONFIG_DIR, *(str(p).removeprefix("file://") for p in paths if str(p).startswith("file://"))]


def config_digests(roots: Sequence[str]) -> dict[str, str]:
    """``{path: sha256}`` of every YAML file below ``roots``."""
    import hashlib

    out = {}
    for root in roots:
        for path in sorted(Path(root).rglob("*.yaml")) if Path(root).is_dir() else []:
            with contextlib.suppress(OSError):
                out[str(path)] = hashlib.sha256(path.read_bytes()).hexdigest()
    return out


def config_files_changed() -> str | None:
    """In a cell of a sweep: which config files changed since the sweep started (``experiment/mine.yaml edited``),
    or None. Hydra composes each cell from the files when it starts it, so a file edited during a long sweep
    would give its later cells another config than its earlier ones, under the same experiment."""
    folder = os.environ.get(RECORDS_ENV)
    if not folder:
        return None
    try:
        snapshot = json.loads(Path(folder, CONFIG_SNAPSHOT).read_text())
    except (OSError, ValueError):
        return None  # no snapshot (a full disk when the sweep started): nothing to compare
    now = config_digests(snapshot["roots"])
    before = snapshot["files"]
    changes = [f"{p} {'edited' if p in now else 'removed'}" for p in sorted(before) if now.get(p) != before[p]]
    changes += [f"{p} added" for p in sorted(set(now) - set(before))]
    if not changes:
        return None
    more = f" and {len(changes) - 1} more" if len(changes) > 1 else ""
    return changes[0] + more


def refuse_before_start(found: str | None) -> None:
    """A check of a run's or a sweep's config in a Hydra callback: ``found`` (a problem's one line) ends the command
    with ``error: <found>``, exit status 2, before any folder is made. Hydra turns a callback's exception into a
    warning; an exit it lets through."""
    if found is not None:
        print(f"error: {found}", file=sys.stderr)
        raise SystemExit(2)


class OutputFolderCheck(Callback):
    """Fail with one line, before Hydra creates any run folder, when ``paths.output_dir`` cannot be created or
    ``name`` would lead out of it."""

    def _check(self, config: DictConfig) -> None:
        # ``name`` is a folder below the output folder (runs/<name>/, multirun/<mode>/<name>/, the tables' key):
        # "../.." or an absolute path would put runs anywhere on the disk.
        name = str(config.get("name"))
        parts = name.replace("\\", "/").split("/")
        if not name or name.startswith(("/", "~")) or any(p in ("", ".", "..") for p in parts):
            print(
                f"error: name={name!r} must be a relative folder name below the output folder (no '..', no "
                "absolute path; '/' between parts): e.g. name=my_study",
                file=sys.stderr,
            )
            raise SystemExit(2) from None
        folder = Path(str(config.paths.output_dir))
        try:
            folder.mkdir(parents=True, exist_ok=True)
            probe = folder / f".write-test-{os.getpid()}"
            probe.touch()
            probe.unlink()
        except OSError as e:
            print(
                f"error: cannot write to the output folder {folder} (paths.output_dir): {e.strerror}",
                file=sys.stderr,
            )
            raise SystemExit(1) from None

    def on_run_start(self, config: DictConfig, **kwargs: Any) -> None:
        self._check(config)

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        self._check(config)


class SweepSummary(Callback):
    """Collect every job's outcome and print the sweep's tally at its end; exit status 1 if any cell failed."""

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        sweep_dir = Path(str(config.hydra.sweep.dir))
        for stale in sweep_dir.glob(".outcomes-*"):  # left by a sweep that was interrupted
            if not _alive(int(stale.name.split("-")[1])):
                shutil.rmtree(stale, ignore_errors=True)
        self.records = sweep_dir / f".outcomes-{os.getpid()}-{time.time_ns()}"
        self.records.mkdir(parents=True, exist_ok=True)
        os.environ[RECORDS_ENV] = str(self.records)
        roots = config_roots(config)
        with contextlib.suppress(OSError):  # a full disk: the cells then compare nothing
            snapshot = {"roots": roots, "files": config_digests(roots)}
            Path(self.records, CONFIG_SNAPSHOT).write_text(json.dumps(snapshot))
        _sweeps.append(self)

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        self.summarize()

    def summarize(self) -> None:
        """Print the tally of the outcomes recorded so far and remove their folder (once)."""
        if self in _sweeps:
            _sweeps.remove(self)
        outcomes = []
        for path in sorted(p for p in self.records.glob("*.json") if p.name != CONFIG_SNAPSHOT):
            try:
                outcomes.append(json.loads(path.read_text()))
            except (OSError, ValueError):  # cut short (a full disk, a killed job): that cell goes uncounted
                continue
        outcomes += _unwritten.pop(str(self.records), [])
        shutil.rmtree(self.records, ignore_errors=True)
        os.environ.pop(RECORDS_ENV, None)
        counts = {s: sum(o["status"] == s for o in outcomes) for s in STATUSES}
        diverged = f"{counts['diverged']} diverged, " if counts["diverged"] else ""
        # Shown only when a cell had them, so that the usual line stays the one users (and scripts) know.
        rare = "".join(f", {counts[s]} {s}" for s in ("partial", "busy", "interrupted") if counts[s])
        print(
            f"sweep: {counts['ok']} ok, {diverged}{counts['failed']} failed, {counts['skipped']} skipped{rare} "
            f"({self.records.parent})"
        )
        # Each diverged cell printed its reason when it stopped, and the tables show them: one line here.
        cells = sorted(o["cell"] for o in outcomes if o["status"] == "diverged")
        if cells:
            more = f" and {len(cells) - 1} more" if len(cells) > 1 else ""
            print(f"diverged: {cells[0]}{more} (the loss is unbounded there: a result, see each metrics.json)")
        # Cells that failed for the same reason (a missing input, e.g. Table 1's winners for corel/table2) are one
        # line, naming the first cell and how many more, rather than a screenful of the same sentence.
        # A partial cell (trained; an evaluator failed) is not a result either: said the same way.
        reasons: dict[tuple[str, str | None], list[str]] = {}
        for o in outcomes:
            if o["status"] in ("failed", "partial"):
                reasons.setdefault((o["status"], o["error"]), []).append(o["cell"])
        for (status, error), failed in reasons.items():
            failed.sort()
            more = f"{len(failed)} cells ({failed[0]} and {len(failed) - 1} more)"
            where = failed[0] if len(failed) == 1 else more
            print(f"{status}: {where}: {error}", file=sys.stderr)
        if counts["failed"] or counts["partial"]:
            exit_status["code"] = 1


def end_sweep() -> None:
    """Print the summary of a sweep Hydra did not finish (Ctrl-C, a full disk): the cells recorded so far."""
    while _sweeps:
        _sweeps[-1].summarize()


def discard_sweep() -> None:
    """Forget a sweep refused before any cell ran (its one error line is all there is to say)."""
    while _sweeps:
        sweep = _sweeps.pop()
        shutil.rmtree(sweep.records, ignore_errors=True)
        os.environ.pop(RECORDS_ENV, None)
        with contextlib.suppress(OSError):  # the sweep folder, if it holds nothing else
            sweep.records.parent.rmdir()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's live process
        return True
    return True
