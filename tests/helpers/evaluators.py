"""An evaluator that forces the failure paths of a run's evaluation through the real pipeline (``hydra.searchpath``
adds its config, ``evaluator=[classification,flaky]``)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from torch import Tensor

from clusterable.contracts import EvalContext


@dataclass(frozen=True)
class Flaky:
    """The mean row norm of the representation, once ``marker`` exists; until then it fails as a fault fixed after
    the run would: a ``ValueError`` (input it refuses), or with ``bug`` a ``RuntimeError`` (a bug). ``stage``: fail
    on that split only (the others score)."""

    marker: str
    bug: bool = False
    stage: str | None = None

    def metric_names(self) -> list[str]:
        return ["flaky/norm"]

    def __call__(self, embeddings: Tensor, labels: Tensor, context: EvalContext) -> dict[str, float]:
        if not Path(self.marker).exists() and self.stage in (None, context.stage):
            if self.bug:
                raise RuntimeError("flaky: an index out of range")
            raise ValueError(f"refuses until {self.marker} exists")
        return {"flaky/norm": float(embeddings.float().norm(dim=1).mean())}
