"""The sweeper of ``train.py -m``: Hydra's basic sweeper, with two additions.

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
of ``params``; a key given on the command line replaces it in every grid (``dataset=mnist`` keeps the images grid's
models and runs the text grid's models on MNIST too: say ``model=...`` as well, or drop a grid with
``hydra.sweeper.grids.text=null``). Without ``grids`` (every other experiment) it is Hydra's basic sweeper.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from hydra._internal.core_plugins.basic_sweeper import BasicSweeper
from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.core.override_parser.types import Override

from clusterable.config import composition_error
from clusterable.hydra_callbacks import record_outcome

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
            raise ValueError(f"hydra.sweeper.grids.{name} must be a non-empty {{key: values}} mapping "
                             f"(e.g. {{dataset: 'mnist,fashion_mnist'}}), got {grid!r}")  # fmt: skip
        for key, values in grid.items():
            if values is None or isinstance(values, Mapping | Sequence) and not isinstance(values, str):
                raise ValueError(f"hydra.sweeper.grids.{name}.{key} must be a value or a comma-separated sweep "
                                 f"such as 'a,b', got {values!r}")  # fmt: skip
        out[str(name)] = {str(k): str(v).lower() if isinstance(v, bool) else str(v) for k, v in grid.items()}
    return out


def _key(override: Override) -> str:
    """The key an override sets, without its ``+`` / ``++`` / ``~`` prefix (so that ``+x=1`` replaces ``x=0``)."""
    return (
        override.key_or_group if override.package is None else f"{override.key_or_group}@{override.package}"
    )


def expand(
    params: Sequence[Override], grids: Grids, command_line: Sequence[Override], parser: OverridesParser
) -> list[list[str]]:
    """Every cell of the union of ``grids``, each combined with ``params`` and the ``command_line`` (the overrides
    Hydra's basic sweeper would take as ``params + command line``), in order and without repeats: a list of cells,
    each a list of ``key=value`` overrides. Without grids: the one product of ``params`` and ``command_line``."""
    if not grids:
        return [
            cell for batch in BasicSweeper.split_arguments([*params, *command_line], None) for cell in batch
        ]
    given = {_key(o) for o in command_line}
    cells: dict[frozenset[str], list[str]] = {}
    for grid in grids.values():
        own = [
            o for o in parser.parse_overrides([f"{k}={v}" for k, v in grid.items()]) if _key(o) not in given
        ]
        mine = {_key(o) for o in own}
        merged = [o for o in params if _key(o) not in mine] + own + list(command_line)
        for cell in BasicSweeper.split_arguments(merged, None)[0]:
            cells.setdefault(frozenset(cell), cell)
    return list(cells.values())


class CellSweeper(BasicSweeper):
    """``BasicSweeper`` over a union of grids that launches only the cells of each batch that compose."""

    def __init__(
        self, max_batch_size: int | None, params: dict[str, str] | None = None, grids: Any = None
    ) -> None:
        super().__init__(max_batch_size, params)
        self.grids = checked_grids(grids)
        self._command_line: list[str] = []

    def sweep(self, arguments: list[str]) -> Any:
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
        assert self.hydra_context is not None and self.config is not None
        loader = self.hydra_context.config_loader
        composing = []
        for overrides in super().get_job_batch():
            try:
                loader.load_sweep_config(master_config=self.config, sweep_overrides=list(overrides))
            except Exception as e:  # Hydra's ConfigCompositionException and its causes
                cell = ",".join(overrides)
                reason = composition_error(e)
                print(f"failed: {cell}: {reason}")  # the summary repeats it on stderr
                record_outcome(Path(str(self.config.hydra.sweep.dir)), "failed", reason, cell=cell)
                continue
            composing.append(overrides)
        return composing

    def validate_batch_is_legal(self, batch: Sequence[Sequence[str]]) -> None:
        """Every cell of ``batch`` was composed by ``get_job_batch`` already (Hydra's check would compose each
        a second time, ~0.1 s a cell)."""
