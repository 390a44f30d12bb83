"""Hydra callbacks (``hydra.callbacks`` in ``src/clusterable/conf/train.yaml``): the output folder is checked before
anything runs, and a multirun ends with ``N ok, M failed, K skipped`` (and ``D diverged`` when a head recognised its
loss's unbounded regime: results of the grid, not failures; ``P partial`` for cells trained whose evaluators did not
all score; ``B busy`` for cells another process was running; ``I interrupted`` after Ctrl-C), the failed and partial
cells' reasons and a non-zero exit status when any cell failed or is partial. A sweep that
Hydra does not finish (Ctrl-C, a full disk) still prints its summary: ``clusterable.cli`` calls ``end_sweep``.

Jobs may run in other processes (``hydra/launcher=joblib``, ``submitit_*``), so each job writes its outcome as a
small file (``clusterable.outcomes``) in a folder the sweep names in an environment variable (inherited by the
launched processes); the summary reads them back in the launching process, and ``end_sweep`` hands its tally to
``clusterable.cli``, which derives the exit status from it.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import shutil
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from hydra.experimental.callback import Callback
from omegaconf import DictConfig, open_dict, read_write

from clusterable import budgets, domains
from clusterable.outcomes import CONFIG_SNAPSHOT, RECORDS_ENV, SWEEP_ERROR, config_digests, unwritten
from clusterable.record import DIVERGED, FAILED, OK, PARTIAL, SKIPPED, STATUSES

# The sweep under way in this process, so that one Hydra does not finish (Ctrl-C) still ends with its summary.
_sweeps: list[SweepSummary] = []
# The tallies of the sweeps summarized since ``end_sweep`` last returned them: what ``cli.main`` derives its exit
# status from.
_tallies: list[dict[str, int]] = []
# A tally's count of the sweep's own failures (outcomes.record_sweep_error), beside its cells' statuses.
SWEEP_FAILED = "sweep_failed"


class CommandLineError(Exception):
    """A mistake on the command line found once Hydra has composed the config (``-m`` with DDP): one line, exit
    status 2, before any cell runs."""


# The launcher options that start each cell as a job of its own, with its own ranks (a DDP cell may sweep there).
OWN_JOB_LAUNCHERS = ("submitit_slurm",)


def ddp_in_sweep(config: DictConfig) -> str | None:
    """Why ``config`` (a composed ``train.py -m`` config, its ``hydra`` node included) cannot run as a cell of a
    local sweep, or None. Lightning starts DDP's other ranks by running the whole command line again: under ``-m``
    every rank would run the whole sweep. A SLURM launcher starts each cell as its own job with its ranks, so it may.
    """
    trainer = config.get("trainer") or {}
    strategy, devices = str(trainer.get("strategy", "auto")), trainer.get("devices", 1)
    choices = ((config.get("hydra") or {}).get("runtime") or {}).get("choices") or {}
    if choices.get("hydra/launcher") in OWN_JOB_LAUNCHERS:
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


def config_roots(config: DictConfig) -> list[str]:
    """The folders a sweep's cells compose from: the package's configs and each ``hydra.searchpath`` folder."""
    from clusterable.config import CONFIG_DIR

    paths = (config.get("hydra") or {}).get("searchpath") or []
    return [CONFIG_DIR, *(str(p).removeprefix("file://") for p in paths if str(p).startswith("file://"))]


def refuse_before_start(found: str | None) -> None:
    """A check of a run's or a sweep's config in a Hydra callback: ``found`` (a problem's one line) ends the command
    with ``error: <found>``, exit status 2, before any folder is made. Hydra turns a callback's exception into a
    warning; an exit it lets through."""
    if found is not None:
        print(f"error: {found}", file=sys.stderr)
        raise SystemExit(2)


HYDRA_OPTUNA_SWEEPER = "hydra_plugins.hydra_optuna_sweeper.optuna_sweeper.OptunaSweeper"
OUR_OPTUNA_SWEEPER = "hydra_plugins.clusterable_sweeper.optuna_sweeper.OptunaSweeper"


class OptunaSweeperTarget(Callback):
    """A search file written for hydra-optuna-sweeper (lightning-hydra-template's ``hparams_search`` files) names
    that plugin's class as ``hydra.sweeper._target_``. Where the plugin is not installed (it pins optuna < 3, which
    this package's extra does not take), the search runs with this package's Optuna sweeper, which reads the same
    file (its ``params`` syntax, its ``sampler`` block); where it is installed, it runs as the file says."""

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        sweeper = config.hydra.get("sweeper")
        if sweeper is None or sweeper.get("_target_") != HYDRA_OPTUNA_SWEEPER:
            return
        if importlib.util.find_spec("hydra_plugins.hydra_optuna_sweeper") is not None:
            return
        with read_write(config), open_dict(config):
            config.hydra.sweeper._target_ = OUR_OPTUNA_SWEEPER


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
    """Collect every job's outcome and print the sweep's tally at its end (``end_sweep`` hands the tallies to the
    command line, whose exit status is 1 if any cell failed)."""

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
        outcomes += unwritten.pop(str(self.records), [])
        shutil.rmtree(self.records, ignore_errors=True)
        os.environ.pop(RECORDS_ENV, None)
        errors = [o["error"] for o in outcomes if o["cell"] == SWEEP_ERROR]  # the sweep's own: no cell's
        outcomes = [o for o in outcomes if o["cell"] != SWEEP_ERROR]
        counts = {s: sum(o["status"] == s for o in outcomes) for s in STATUSES}
        _tallies.append({**counts, SWEEP_FAILED: len(errors)})
        diverged = f"{counts[DIVERGED]} diverged, " if counts[DIVERGED] else ""
        # Shown only when a cell had them, so that the usual line stays the one users (and scripts) know.
        rare = "".join(f", {counts[s]} {s}" for s in STATUSES[4:] if counts[s])
        print(
            f"sweep: {counts[OK]} ok, {diverged}{counts[FAILED]} failed, {counts[SKIPPED]} skipped{rare} "
            f"({self.records.parent})"
        )
        # Each diverged cell printed its reason when it stopped, and the tables show them: one line here.
        cells = sorted(o["cell"] for o in outcomes if o["status"] == DIVERGED)
        if cells:
            more = f" and {len(cells) - 1} more" if len(cells) > 1 else ""
            print(f"diverged: {cells[0]}{more} (the loss is unbounded there: a result, see each metrics.json)")
        # Cells that failed for the same reason (a missing input, e.g. Table 1's winners for corel/table2) are one
        # line, naming the first cell and how many more, rather than a screenful of the same sentence.
        # A partial cell (trained; an evaluator failed) is not a result either: said the same way.
        reasons: dict[tuple[str, str | None], list[str]] = {}
        for o in outcomes:
            if o["status"] in (FAILED, PARTIAL):
                reasons.setdefault((o["status"], o["error"]), []).append(o["cell"])
        for (status, error), failed in reasons.items():
            failed.sort()
            more = f"{len(failed)} cells ({failed[0]} and {len(failed) - 1} more)"
            where = failed[0] if len(failed) == 1 else more
            print(f"{status}: {where}: {error}", file=sys.stderr)
        for error in errors:
            print(error, file=sys.stderr)


def end_sweep() -> list[dict[str, int]]:
    """Print the summary of a sweep Hydra did not finish (Ctrl-C, a full disk): the cells recorded so far. Returns
    the tallies (status -> cells) of every sweep summarized since the last call, and forgets them."""
    while _sweeps:
        _sweeps[-1].summarize()
    tallies = list(_tallies)
    _tallies.clear()
    return tallies


def sweep_failed(tally: dict[str, int]) -> bool:
    """Whether a sweep's tally makes its command fail (exit 1): a cell failed, or is partial (trained, an
    evaluator failed), or the sweep itself failed (a search in which no trial finished). Diverged cells are results
    of their grid; skipped ones were finished before."""
    return bool(tally.get(FAILED) or tally.get(PARTIAL) or tally.get(SWEEP_FAILED))


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


class DomainCheck(Callback):
    """Refuse a run's or a sweep's config before Hydra creates any folder for it: one ``error:`` line naming the
    key, the value and its domain, exit status 2, nothing recorded (``hydra.callbacks.domains`` in train.yaml,
    before the sweep summary starts, so a refused sweep prints no tally)."""

    def on_run_start(self, config: DictConfig, **kwargs: Any) -> None:
        refuse_before_start(domains.problem(config))

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        refuse_before_start(domains.problem(config))
        refuse_before_start(domains.search_space_problem(config))


class BudgetCheck(Callback):
    """Refuse a run's or a sweep's config whose ``protocol.budget`` is no size or contradicts its epochs, before
    Hydra creates any folder: one ``error:`` line, exit status 2, nothing recorded."""

    def _check(self, config: DictConfig) -> None:
        refuse_before_start(budgets.config_problem(config) or None)

    def on_run_start(self, config: DictConfig, **kwargs: Any) -> None:
        self._check(config)

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        self._check(config)
