"""Which runs of a table are not their experiment's protocol: a length of training, learning rate or batch size set
on the command line (``trainer.max_steps=5`` beside DSCL's 300-step rows) that the table must say.

The protocol of a run is its experiment composed with the run's own choices of the groups the experiment sweeps
(``dscl_row=last_layer`` sets its own step count) and of the hardware and debug groups (``trainer=gpu``,
``debug=smoke``), read from the recorded choices; a key the experiment sweeps is an axis of the table, never a
deviation. Only ``KEYS`` are compared: the settings a paper states as its protocol.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

from clusterable.config import CONFIG_DIR
from clusterable.tables.report import Run, as_text

# The settings a paper's protocol states and a user most often changes on the command line.
KEYS = (
    "trainer.max_epochs",
    "trainer.max_steps",
    "optimizer.lr",
    "optimizer.weight_decay",
    "dataset.batch_size",
)
# Groups whose choice is the machine or the run's size, not the protocol: a run's protocol is composed with them.
HARDWARE = ("trainer", "debug")


def deviations(
    runs: Sequence[Run], experiment: str, searchpath: Sequence[str] = ()
) -> dict[tuple[str, str, str], list[Run]]:
    """``{(key, the run's value, the protocol's value): runs}`` for each of ``KEYS`` where a run's recorded value is
    not its protocol's; {} when the experiment cannot be composed here (e.g. inside a Hydra app, or an experiment
    of your own without ``searchpath``: the ``hydra.searchpath=[...]`` override naming its config folder)."""
    from hydra import compose, initialize_config_dir
    from omegaconf import OmegaConf

    out: dict[tuple[str, str, str], list[Run]] = {}
    try:
        with initialize_config_dir(config_dir=CONFIG_DIR, version_base="1.3"):
            root = compose("train", overrides=[*searchpath, f"experiment={experiment}"], return_hydra_config=True)
            sweeper = root.hydra.sweeper
            swept = set(sweeper.get("params") or {})
            for grid in (sweeper.get("grids") or {}).values():
                swept |= set(grid or {})
            protocols: dict[tuple[str, ...], dict[str, Any]] = {}
            for run in runs:
                choices = run.record.choices or {}
                overrides = tuple(
                    f"{group}={choices[group]}"
                    for group in sorted(swept | set(HARDWARE))
                    if group in choices and choices[group] is not None
                )
                if overrides not in protocols:
                    protocols[overrides] = _values(compose, OmegaConf, experiment, (*searchpath, *overrides), swept)
                for key, expected in protocols[overrides].items():
                    value = run.get(key)
                    if value is not None and value != expected:
                        out.setdefault((key, as_text(value), as_text(expected)), []).append(run)
    except Exception:  # noqa: BLE001  (no note rather than no table: the note is an addition)
        return {}
    return out


def _values(compose, omegaconf, experiment: str, overrides: tuple[str, ...], swept: set[str]) -> dict[str, Any]:
    """The protocol's values of ``KEYS`` for one set of choices (keys it sweeps, or that do not resolve here,
    left out)."""
    try:
        cfg = compose("train", overrides=[f"experiment={experiment}", *overrides])
    except Exception:  # noqa: BLE001  (a choice recorded by an older version that no longer composes)
        return {}
    values = {}
    for key in KEYS:
        if key in swept:
            continue
        try:
            value = omegaconf.select(cfg, key, throw_on_resolution_failure=True)
        except Exception:  # noqa: BLE001  (an interpolation only a run can resolve)
            continue
        if value is not None:
            values[key] = value
    return values


def protocol_note(runs: Sequence[Run], experiment: str, searchpath: Sequence[str] = ()) -> str:
    """A table's note naming the runs that are not their experiment's protocol ("" when every run is)."""
    found = deviations(runs, experiment, searchpath)
    if not found:
        return ""
    parts = [
        f"{key}={value} where the experiment says {expected} ({len(odd)} of {len(runs)} runs, under "
        f"{os.path.commonpath([str(r.path) for r in odd])})"
        for (key, value, expected), odd in sorted(found.items())
    ]
    return f"NOT the protocol of experiment {experiment}: " + "; ".join(parts) + "."
