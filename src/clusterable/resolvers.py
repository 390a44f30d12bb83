"""Every OmegaConf resolver the configs use, registered in one place (importing ``clusterable`` registers them).

- ``${run_mode:}``: ``full`` or ``smoke``, derived from the run (``rundir.run_mode``); sweep folders use it.
- ``${inception_arch:}``: ``bninception`` when its weight file is in torch's cache, else ``googlenet``.
- ``${tuned_lambda:<default>}``: COREL's tuned λ (``clusterable.tuned_lambda``).
- ``${run_stamp:}``: a single run's folder name, ``<date>_<time>.<microseconds>_<process id>`` (``run_stamp``).
- ``${monitor_mode:${checkpoint.monitor}}``: ``checkpoint.mode``, the way the monitored metric improves.

Some resolvers need the run's config group choices (``debug``; ``dataset``, ``model``, ``loss`` for the tuned λ).
While Hydra composes, its node holds them; in a run, Hydra has moved that node out of the config, so the run layer
states them for the time it resolves (``with group_choices(ctx.choices):``). Nothing here reads Hydra's global state:
the command line hands a source of choices over once (``set_choices_source``) for Hydra's own printing
(``--cfg job --resolve``).

A resolver may leave a note for the run's record (``note``: e.g. that λ fell back to the config's value): the run
layer collects them with ``collect_notes`` and writes them into metrics.json.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator, Mapping
from contextvars import ContextVar
from datetime import datetime
from typing import Any

from omegaconf import DictConfig, OmegaConf

_choices: ContextVar[Mapping[str, Any] | None] = ContextVar("group_choices", default=None)
_notes: ContextVar[dict[str, tuple[Any, str]] | None] = ContextVar("resolver_notes", default=None)
_source: list[Callable[[], Mapping[str, Any] | None]] = []
# The single run's folder name, made once per command (``new_command`` forgets it).
_stamp: list[str] = []


@contextlib.contextmanager
def group_choices(choices: Mapping[str, Any]) -> Iterator[None]:
    """Resolve the run's config with these group choices (``{"dataset": "digits", "debug": None, ...}``)."""
    token = _choices.set(dict(choices))
    try:
        yield
    finally:
        _choices.reset(token)


def set_choices_source(source: Callable[[], Mapping[str, Any] | None]) -> None:
    """Where choices come from when no run states them (the command line passes Hydra's runtime once)."""
    _source[:] = [source]


def choices_of(root: DictConfig) -> Mapping[str, Any] | None:
    """The group choices of the config ``root``: Hydra's node while composing, else the run's, else the source's;
    None when nothing states them (a config loaded by hand)."""
    if "hydra" in root:
        return root.hydra.runtime.choices
    stated = _choices.get()
    if stated is None and _source:
        stated = _source[0]()
    return stated


@contextlib.contextmanager
def collect_notes() -> Iterator[dict[str, tuple[Any, str]]]:
    """Collect what resolvers ``note`` while the config resolves: ``{key: (value, message)}``."""
    notes: dict[str, tuple[Any, str]] = {}
    token = _notes.set(notes)
    try:
        yield notes
    finally:
        _notes.reset(token)


def note(key: str, value: Any, message: str) -> None:
    """A resolver's remark for the run's record (``metrics.json[key] = value``, ``message`` printed once)."""
    notes = _notes.get()
    if notes is not None:
        notes[key] = (value, message)


def new_command() -> None:
    """A new command starts (``clusterable.cli.main``; a test runs several in one process): its single run gets a
    folder of its own."""
    _stamp.clear()


def run_stamp() -> str:
    """A single run's folder name (``hydra.run.dir``): the time to the microsecond and the process id, so that runs
    started in the same second (a shell loop, a job array) each get their own folder rather than one that they
    would refuse each other as ``busy``. Made once per command: every resolution of the run's folder (Hydra's, and
    Lightning's when it starts DDP's other ranks in it) names the same one."""
    if not _stamp:
        _stamp.append(f"{datetime.now():%Y-%m-%d_%H-%M-%S.%f}_{os.getpid()}")
    return _stamp[0]


def _monitor_mode(monitor: str | None) -> str | None:
    """``checkpoint.mode`` when it is not set: ``min`` for a loss, ``max`` for an accuracy, a recall, an NMI, ...
    (``metric_names.monitor_direction``), None for a metric it does not know (the run refuses it in one line, asking
    for ``checkpoint.mode``). A null monitor (the last epoch is tested: no mode is used) gives ``max``, the value
    the config held before the mode followed the monitor, so that those runs' recorded configs compare equal."""
    if monitor is None:
        return "max"
    from clusterable.metric_names import monitor_direction

    return monitor_direction(str(monitor))


def _run_mode(*, _root_: DictConfig) -> str:
    from clusterable.rundir import provenance, run_mode

    choices = choices_of(_root_) or {}
    return run_mode(provenance(_root_, choices.get("debug")))


def _inception_arch() -> str:
    from clusterable.models.backbones import weight_file  # torch only when a config asks

    return "bninception" if weight_file("bninception").is_file() else "googlenet"


def _tuned_lambda(default: float, *, _root_: DictConfig) -> float:
    from clusterable import tuned_lambda

    return tuned_lambda.resolve(default, _root_, choices_of(_root_), note)


OmegaConf.register_new_resolver("run_mode", _run_mode, replace=True)
OmegaConf.register_new_resolver("inception_arch", _inception_arch, replace=True)
OmegaConf.register_new_resolver("tuned_lambda", _tuned_lambda, replace=True)
OmegaConf.register_new_resolver("run_stamp", run_stamp, replace=True)
OmegaConf.register_new_resolver("monitor_mode", _monitor_mode, replace=True)
