"""``python train.py ...``: the command line. It reads Hydra's runtime once into a ``RunContext`` and hands the
composed config to the run layer (``clusterable.run``); nothing below this module reads Hydra's global state.

A mistake on the command line is one line and exit status 2 before anything runs: an unknown group option
(``loss=nope``) is found by parsing alone; a config that does not compose (``loss.lamda=0.3`` without ``+``) or a
wrong sweep setting (``hydra.sweeper.grids`` that is not a mapping of grids) is Hydra's own composition error,
turned into one line, so the config is composed once per command (once per cell under ``-m``).
``-m`` with DDP is such a mistake (``hydra_callbacks.ddp_in_sweep``). A full disk or an unwritable file is one line
(``error: no space left on device writing <file>``), and a sweep that does not finish (Ctrl-C, SIGTERM, a full disk)
still prints its summary.
Exit status: 0 when every run is ok, 1 when one failed, 2 for a mistake on the command line, 130 after Ctrl-C and
143 after SIGTERM (handled as Ctrl-C: ``clusterable.interrupts``).
"""

from __future__ import annotations

import os
import sys
from importlib import metadata

import hydra
from hydra.core.hydra_config import HydraConfig
from hydra.errors import HydraException
from omegaconf import DictConfig
from omegaconf.errors import OmegaConfBaseException

from clusterable import __version__, hydra_callbacks, interrupts, resolvers
from clusterable.config import CONFIG_DIR, composition_error
from clusterable.preflight import check_group_options, null_groups, swept_group_key
from clusterable.record import OK, RunRecord
from clusterable.run import RunContext, run
from clusterable.rundir import is_write_error, write_error
from clusterable.searchpath import SearchPathError, with_searchpath

# The records of the single runs (not a sweep's cells) this command ran: what its exit status is derived from.
_single_runs: list[RunRecord] = []


@hydra.main(version_base="1.3", config_path=CONFIG_DIR, config_name="train")
def hydra_main(cfg: DictConfig) -> float | None:
    """One job. Returns the value of ``cfg.optimized_metric`` (for hyperparameter sweepers such as Optuna), None
    unless the run ended ``ok``."""
    ctx = RunContext.from_hydra(HydraConfig.get(), optimized_metric=cfg.get("optimized_metric"))
    record = run(cfg, ctx)
    if ctx.single:
        _single_runs.append(record)
    return record.optimized()


def exit_status(single_runs: list[RunRecord], sweeps: list[dict[str, int]]) -> int:
    """The command's exit status from what it ran: 1 when a single run did not end ``ok`` (failed, diverged,
    partial, busy) or a sweep counted a failed or partial cell (``hydra_callbacks.sweep_failed``), else 0."""
    failed = any(r.status != OK for r in single_runs) or any(map(hydra_callbacks.sweep_failed, sweeps))
    return 1 if failed else 0


def _hydra_choices() -> dict | None:
    """Hydra's group choices while it prints a config (``--cfg job --resolve``) rather than running one."""
    return HydraConfig.get().runtime.choices if HydraConfig.initialized() else None


def main() -> None:
    if sys.argv[1:] == ["--version"]:  # Hydra's own flag prints Hydra's version
        print(f"clusterable {__version__} (hydra-core {hydra.__version__}, torch {torch_version()})")
        sys.exit(0)
    _single_runs.clear()
    # -cd/--config-dir and $CLUSTERABLE_SEARCHPATH become the one hydra.searchpath override the preflight reads too.
    try:
        sys.argv[1:] = with_searchpath(sys.argv[1:])
    except SearchPathError as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(2)
    # `scheduler=null` (no scheduler) as Hydra takes it, `~scheduler`; a group every run needs is refused.
    args, problem = null_groups(sys.argv[1:])
    if problem:
        print(f"error: {problem}", file=sys.stderr)
        sys.exit(2)
    sys.argv[1:] = args
    problem = check_group_options(sys.argv[1:])
    if problem:
        print(f"error: {problem}", file=sys.stderr)
        sys.exit(2)
    resolvers.set_choices_source(_hydra_choices)
    resolvers.new_command()  # a single run's folder of its own (a test runs several commands in one process)
    # Hydra's errors reach us as exceptions (not its several-line report and exit 1): a config that does not
    # compose becomes one line here.
    os.environ["HYDRA_FULL_ERROR"] = "1"
    try:
        with interrupts.interruptible():  # SIGTERM (a cluster's time limit) stops the command as Ctrl-C does
            hydra_main()
    except KeyboardInterrupt:  # the interrupted cells are recorded (the same command redoes them)
        sys.exit(interrupts.exit_status())  # 130 after Ctrl-C, 143 after SIGTERM
    except hydra_callbacks.CommandLineError as e:  # refused before any cell ran
        hydra_callbacks.discard_sweep()
        print(f"error: {e}", file=sys.stderr)
        sys.exit(2)
    # Before OSError: a missing config option (`hydra/launcher=stack`) is a HydraException that is an OSError too.
    except (HydraException, OmegaConfBaseException) as e:  # a config or sweep setting refused before any run
        hydra_callbacks.discard_sweep()
        print(f"error: {swept_group_key(sys.argv[1:], e) or _one_line(e)}", file=sys.stderr)
        sys.exit(2)
    except OSError as e:  # a full disk or an unwritable file outside any run (Hydra's own files, the sweep's)
        if not is_write_error(e):
            raise
        print(f"error: {write_error(e)}", file=sys.stderr)
        sys.exit(1)
    except ValueError as e:  # Hydra's own refusal of its flags together (-m with --cfg)
        if not str(e).startswith("Only one of --run"):
            raise
        hydra_callbacks.discard_sweep()
        print(f"error: {e}; --cfg job prints one cell's config without -m", file=sys.stderr)
        sys.exit(2)
    finally:  # a sweep Hydra did not finish (Ctrl-C, a full disk) still says what its cells did
        sweeps = hydra_callbacks.end_sweep()
    sys.exit(exit_status(_single_runs, sweeps))


def _one_line(error: BaseException) -> str:
    """Hydra's or OmegaConf's error as one line: a sweep setting refused by the sweeper's constructor (bad grids)
    is its ValueError's message; a value of the wrong type names its key (``Value 'two' of type 'str' could not be
    converted to Integer (hydra.launcher.n_jobs)``)."""
    cause = error.__cause__
    text = str(cause) if isinstance(cause, ValueError) else composition_error(error)
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    key = next((line.removeprefix("full_key: ") for line in lines if line.startswith("full_key: ")), "")
    first = lines[0] if lines else type(error).__name__
    return f"{first} ({key})" if key and key not in first else first


def torch_version() -> str:
    """torch's version, read from its metadata: printing it must not import torch."""
    try:
        return metadata.version("torch")
    except metadata.PackageNotFoundError:
        return "not installed"


if __name__ == "__main__":
    main()
