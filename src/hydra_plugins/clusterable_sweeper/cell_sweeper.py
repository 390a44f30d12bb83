"""The sweeper of ``train.py -m``: Hydra's basic sweeper, except that a cell whose config does not compose fails
alone (recorded for the sweep summary with one line) instead of stopping the whole grid before it starts.

``-m loss=cce,center loss.lam=0.2`` has a cell (cce, which has no ``lam``) that Hydra cannot compose; the basic
sweeper refuses the whole grid. Here the center cell runs and the cce cell is reported failed.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from hydra._internal.core_plugins.basic_sweeper import BasicSweeper

from clusterable.config import composition_error
from clusterable.hydra_callbacks import record_outcome


class CellSweeper(BasicSweeper):
    """``BasicSweeper`` that launches only the cells of each batch that compose."""

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
