"""The sizes of COREL's Fashion-MNIST grid (``protocol.budget``) and the length of training each one is, checked
against what a run trains.

A table built from the grid titles and pools its runs by their ``protocol.budget`` (``tables.corel.fashion``), so a
budget that is no size, or one that a run's ``trainer.max_epochs`` contradicts, would put a 10-epoch run in the
150-epoch table under that table's title. Such a value is refused three times, in one line each:

- before anything runs (``hydra_callbacks.BudgetCheck``, a Hydra callback, ``hydra.callbacks`` in ``train.yaml``):
  a single run's or a sweep's config, exit status 2, no folder made;
- by the cells sweeper as it composes the cells of a sweep's first batch (a budget or epochs swept per cell): the
  whole sweep refused, exit 2, before any cell runs;
- in the run layer (``run.checks.check_config``), for what reaches a run another way (a later batch, an Optuna
  trial, a test calling ``run.run``): the run is recorded ``failed``.

The tables check it again on the records (``tables.corel.fashion.budget_of``). A smoke run (``debug=smoke``, fake
data, a batch limit: ``rundir.run_mode``) is short on purpose: only its budget's name is checked, and its tables are
titled smoke.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from omegaconf import DictConfig

from clusterable.config import ConfigError


@dataclass(frozen=True)
class Size:
    """One size of the grid: its experiments (``corel/<prefix>_table1``, ``_table2``), its epochs, what it is."""

    prefix: str
    epochs: int
    about: str


SIZES = {
    "cpu": Size("fashion", 10, "our CPU protocol"),
    "cpu150": Size("fashion150", 150, "the paper's 150 epochs on our CPU grid"),
    "paper": Size("fashion_paper", 150, "the paper's protocol"),
}


def problem(budget: Any, max_epochs: Any, mode: str) -> str | None:
    """Why a run of ``protocol.budget`` = ``budget`` training ``max_epochs`` epochs in ``mode`` (``full`` or
    ``smoke``) may not carry that budget, as one line; None when it may (or when it names none)."""
    if budget is None:
        return None
    name = str(budget)
    if name not in SIZES:
        sizes = ", ".join(f"{n} ({s.epochs} epochs)" for n, s in SIZES.items())
        return f"protocol.budget={name} is no size of COREL's Fashion-MNIST grid; the sizes: {sizes}"
    size = SIZES[name]
    if mode != "full" or max_epochs == size.epochs:
        return None  # a smoke run is short on purpose, and titled smoke
    fits = [n for n, s in SIZES.items() if s.epochs == max_epochs]
    other = f"protocol.budget={' or '.join(fits)} is {max_epochs} epochs; " if fits else ""
    return (
        f"protocol.budget={name} is {size.epochs} epochs of training, but trainer.max_epochs={max_epochs}: its "
        f"tables would title and pool the run as budget {name}'s; {other}budget {name}'s grid is "
        f"experiment=corel/{size.prefix}_table1 and corel/{size.prefix}_table2"
    )


def config_problem(config: DictConfig | Mapping[str, Any], mode: str | None = None) -> str | None:
    """``problem`` of a composed config (``protocol.budget``, ``trainer.max_epochs``); ``mode`` derived from the
    config (its data source, ``debug`` choice among Hydra's runtime choices, batch limits) when not given."""
    from clusterable.rundir import provenance, run_mode

    budget = (config.get("protocol") or {}).get("budget")
    if budget is None:
        return None
    if mode is None:
        hydra = config.get("hydra") or {}
        debug = ((hydra.get("runtime") or {}).get("choices") or {}).get("debug")
        mode = run_mode(provenance(config, None if debug in (None, "none") else str(debug)))
    return problem(budget, (config.get("trainer") or {}).get("max_epochs"), mode)


def check(config: DictConfig, mode: str) -> None:
    """Raise ``ConfigError`` (one line) for a run whose ``protocol.budget`` it may not carry (``problem``)."""
    if found := config_problem(config, mode):
        raise ConfigError(found)
