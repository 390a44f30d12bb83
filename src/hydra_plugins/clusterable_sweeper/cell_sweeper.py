"""The sweeper of ``train.py -m``: Hydra's basic sweeper, with four additions.

**A cell that does not compose fails alone** (recorded for the sweep summary with one line) instead of stopping the
whole grid before it starts. ``-m loss=cce,center loss.lam=0.2`` has a cell (cce, which has no ``lam``) that Hydra
cannot compose; the basic sweeper refuses the whole grid. Here the center cell runs and the cce cell is reported
failed.

**A sweep can be a union of grids** (``hydra.sweeper.grids``), for settings whose keys only make sense together: a
cartesian product cannot pair the image datasets with the image encoders and a text dataset with the text encoders.
An experiment writes

.. code-block:: yaml

    hydra:
      sweeper:
        params: {loss: "cce,center", seed: "range(10)"}   # shared by every grid
        grids:
          images: {dataset: "mnist,fashion_mnist", model: "ffnn,cnn"}
          text: {dataset: agnews8, model: "text_ffnn,text_cnn"}

and the sweep is (images x params) followed by (text x params), each cell once. A grid's key replaces the same key
of ``params``. A key given on the command line replaces it everywhere, its values routed to the grids that hold
them: ``dataset=agnews8`` runs the text grid alone, ``dataset=mnist`` the image grid on MNIST, and a value no grid
holds (``dataset=digits``) goes to the first grid that sweeps the key. ``hydra.sweeper.grids.text=null`` drops a
grid. Without ``grids`` (every other experiment) it is Hydra's basic sweeper.

**A cell with a value outside its domain** (``-m optimizer=sgd optimizer.momentum=0.9,1.5``: ``clusterable.domains``)
refuses the whole sweep before any cell runs (one line naming the key, the value, its domain and the cell, exit
status 2), as the same value refuses a single run.

**A grid that needs Table 1's tuned λ when Table 1 has not been made (or names no Table 1) is refused once**,
before any cell runs (one line, exit status 2: ``clusterable.tuned_lambda.refusal``), rather than failing cell
after cell; a smoke grid runs at the configs' λ instead of missing winners (``tuned_lambda_fallback``), and a
winners file without one setting fails that setting's cells alone.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from hydra._internal.core_plugins.basic_sweeper import BasicSweeper
from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.core.override_parser.types import Override
from hydra.errors import HydraException

from clusterable import budgets
from clusterable.config import composition_error
from clusterable.domains import problem as domain_problem
from clusterable.hydra_callbacks import CommandLineError, ddp_in_sweep
from clusterable.outcomes import record_outcome
from clusterable.record import FAILED
from clusterable.tuned_lambda import UnknownTable, WinnersFileMissing, refusal
from hydra_plugins.clusterable_sweeper.siblings import SiblingConfigs

Grids = dict[str, dict[str, str]]


def checked_grids(grids: Any) -> Grids:
    """``hydra.sweeper.grids`` as {name: {key: values}}; a grid set to null is dropped. One-line ``ValueError`` on
    anything else (a grid that is not a mapping, a value that is not a scalar)."""
    if grids is None:
        return {}
    if not isinstance(grids, Mapping):
        raise ValueError(f"hydra.sweeper.grids must map grid names to {{key: values}}, got {grids!r}")
    out: Grids = {}
    for name, grid in grids.items():
        if grid is None:
            continue
        if not isinstance(grid, Mapping) or not grid:
            raise ValueError(
                f"hydra.sweeper.grids.{name} must be a non-empty {{key: values}} mapping "
                f"(e.g. {{dataset: 'mnist,fashion_mnist'}}), got {grid!r}"
            )
        for key, values in grid.items():
            if values is None or isinstance(values, Mapping | Sequence) and not isinstance(values, str):
                raise ValueError(
                    f"hydra.sweeper.grids.{name}.{key} must be a value or a comma-separated sweep "
                    f"such as 'a,b', got {values!r}{_quote_hint(key, values)}"
                )
        out[str(name)] = {str(k): str(v).lower() if isinstance(v, bool) else str(v) for k, v in grid.items()}
    return out


def _quote_hint(key: Any, values: Any) -> str:
    """For a grid value YAML read as a list or mapping (``model.hidden: [500,500]``): how to write the sweep of its
    items (``"500,500"``) or, quoted, the one value it meant (``model.hidden: "[500,500]"``), which is how Hydra's
    sweep overrides take one."""
    if isinstance(values, Mapping):
        text = "{" + ",".join(f"{k}:{v}" for k, v in values.items()) + "}"
        return f'; to give it as one value quote it: {key}: "{text}"'
    if isinstance(values, Sequence) and not isinstance(values, str):
        items = ",".join(map(str, values))
        return f'; to sweep its items write {key}: "{items}", to give it as one list quote it: {key}: "[{items}]"'
    return ""


def _key(override: Override) -> str:
    """The key an override sets, without its ``+`` / ``++`` / ``~`` prefix (so that ``+x=1`` replaces ``x=0``)."""
    return override.key_or_group if override.package is None else f"{override.key_or_group}@{override.package}"


# One swept key: the key as the cell writes it (``+x`` keeps its prefix) and its values, as Hydra's basic sweeper
# writes them into cells.
Axis = tuple[str, list[str]]


def _axes(overrides: Sequence[Override]) -> dict[str, Axis]:
    """``{key: (key as written, values)}`` of ``overrides`` in order; a repeated key keeps its place and takes the
    later values (as the basic sweeper's)."""
    axes: dict[str, Axis] = {}
    for o in overrides:
        if o.is_sweep_override() and not o.is_discrete_sweep():
            raise HydraException(f"{CellSweeper.__name__} does not support sweep type : {o.value_type.name}")
        values = list(o.sweep_string_iterator()) if o.is_sweep_override() else [o.get_value_element_as_str()]
        axes[_key(o)] = (o.get_key_element(), values)
    return axes


def _route(grids: list[dict[str, Axis]], command_line: dict[str, Axis]) -> list[dict[str, Axis] | None]:
    """The grids with the command line's values of the keys they sweep routed to them: each value goes to the grids
    whose own values hold it, a value no grid holds to the first grid that sweeps the key; a grid left without a
    value of such a key is dropped (None); keys in command-line order, each among the grids left. ``dataset=agnews8``
    keeps the text grid alone, ``dataset=digits`` the first (image) grid, ``dataset=mnist,agnews8`` each dataset
    with its own models, ``model=text_cnn dataset=digits`` the text grid on digits."""
    routed: list[dict[str, Axis] | None] = [dict(g) for g in grids]
    for key, (written, values) in command_line.items():
        sweeping = [i for i, g in enumerate(grids) if key in g and routed[i] is not None]
        unheld = [v for v in values if not any(v in grids[i][key][1] for i in sweeping)]
        for n, i in enumerate(sweeping):
            mine = [v for v in values if v in grids[i][key][1]] + (unheld if n == 0 else [])
            routed[i] = {**(routed[i] or {}), key: (written, mine)} if mine else None
    return routed


def expand(
    params: Sequence[Override], grids: Grids, command_line: Sequence[Override], parser: OverridesParser
) -> list[list[str]]:
    """Every cell of the union of ``grids``, each combined with ``params`` and the ``command_line`` (the overrides
    Hydra's basic sweeper would take as ``params + command line``), in order and without repeats: a list of cells,
    each a list of ``key=value`` overrides. A grid's key replaces the same key of ``params``; a key given on the
    command line replaces it everywhere, its values routed to the grids that hold them (``_route``). Without
    grids: the one product of ``params`` and ``command_line``, as Hydra's basic sweeper makes it."""
    if not grids:
        return [cell for batch in BasicSweeper.split_arguments([*params, *command_line], None) for cell in batch]
    shared, given = _axes(params), _axes(command_line)
    parsed = [_axes(parser.parse_overrides([f"{k}={v}" for k, v in grid.items()])) for grid in grids.values()]
    cells: dict[frozenset[str], list[str]] = {}
    for grid in _route(parsed, given):
        if grid is None:
            continue
        axes = {k: a for k, a in shared.items() if k not in grid} | grid
        axes.update((k, a) for k, a in given.items() if k not in grid)
        for cell in itertools.product(*([f"{w}={v}" for v in values] for w, values in axes.values())):
            cells.setdefault(frozenset(cell), list(cell))
    return list(cells.values())


class CellSweeper(BasicSweeper):
    """``BasicSweeper`` over a union of grids that launches only the cells of each batch that compose."""

    def __init__(self, max_batch_size: int | None, params: dict[str, str] | None = None, grids: Any = None) -> None:
        super().__init__(max_batch_size, params)
        self.grids = checked_grids(grids)
        self._command_line: list[str] = []
        self._launched = False  # whether a batch has gone to the launcher (then a refusal is per cell)
        # The cells' configs, composed or derived from a sibling's (made with the first batch).
        self._siblings: SiblingConfigs | None = None

    def sweep(self, arguments: list[str]) -> Any:
        assert self.config is not None
        if problem := ddp_in_sweep(self.config):  # before any cell runs (a swept trainer: each cell, below)
            raise CommandLineError(problem)
        self._command_line = list(arguments)  # split_arguments below tells the command line from params by it
        return super().sweep(arguments)

    def split_arguments(  # type: ignore[override]  # Hydra's is static; the grids need the sweeper
        self, overrides: list[Override], max_batch_size: int | None
    ) -> list[list[list[str]]]:
        """The cells of the sweep in batches of ``max_batch_size``. Hydra passes ``overrides`` as params followed by
        the command line, parsed."""
        assert self.hydra_context is not None
        n_given = len(self._command_line)
        params, command_line = overrides[: len(overrides) - n_given], overrides[len(overrides) - n_given :]
        parser = OverridesParser.create(config_loader=self.hydra_context.config_loader)
        cells = expand(params, self.grids, command_line, parser)
        size = max_batch_size or len(cells) or 1
        return [cells[i : i + size] for i in range(0, len(cells), size)] or [[]]

    def get_job_batch(self) -> Sequence[Sequence[str]]:
        """The next batch's cells that compose (each composed here once, or derived from a sibling's config:
        ``siblings``; a launcher that keeps ``composed``, the stacked one, takes them from there instead of composing
        each a second time, ~0.3-0.6 s a cell)."""
        assert self.hydra_context is not None and self.config is not None
        if self._siblings is None:
            self._siblings = SiblingConfigs(self.hydra_context.config_loader, self.config)
        handed = getattr(self.launcher, "composed", None)
        composing = []
        for overrides in super().get_job_batch():
            try:
                cell_config = self._siblings.load(overrides)
            except Exception as e:  # Hydra's ConfigCompositionException and its causes
                cell = ",".join(overrides)
                reason = composition_error(e)
                print(f"failed: {cell}: {reason}")  # the summary repeats it on stderr
                record_outcome(Path(str(self.config.hydra.sweep.dir)), FAILED, reason, cell=cell)
                continue
            if problem := ddp_in_sweep(cell_config):
                raise CommandLineError(problem)
            if (problem := budgets.config_problem(cell_config)) and not self._launched:
                # a budget or epochs swept per cell: every such cell would be tabulated as a budget it did not train
                raise CommandLineError(f"{problem} (the whole sweep is refused: no cell ran)")
            if (outside := domain_problem(cell_config)) is not None:
                # A mistake of the command line or the experiment: said once, and the sweep runs once it is fixed.
                # In a later batch (the cells before it ran) this cell fails alone.
                cell = ",".join(overrides)
                if not self._launched:
                    raise CommandLineError(f"{outside} (cell {cell}; the whole sweep is refused: no cell ran)")
                print(f"failed: {cell}: {outside}")
                record_outcome(Path(str(self.config.hydra.sweep.dir)), FAILED, outside, cell=cell)
                continue
            if isinstance(handed, dict):
                handed[tuple(overrides)] = cell_config
            missing = refusal(cell_config)
            if isinstance(missing, WinnersFileMissing | UnknownTable) and not self._launched:
                # Every λ cell of the grid would fail for it: say it once and run nothing (CCE's cells included:
                # half a Table 2 is not worth its hours before Table 1 is made).
                reason = str(missing).splitlines()[0]  # OmegaConf appends the key and the node's type
                raise CommandLineError(f"{reason} (the whole sweep is refused: no cell ran)")
            composing.append(overrides)
        self._launched = self._launched or bool(composing)
        return composing

    def validate_batch_is_legal(self, batch: Sequence[Sequence[str]]) -> None:
        """Every cell of ``batch`` was composed by ``get_job_batch`` already (Hydra's check would compose each
        a second time, ~0.1 s a cell)."""
