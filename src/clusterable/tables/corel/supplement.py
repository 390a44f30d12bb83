"""COREL's supplementary Figure 1 as data (Kenyon-Dean et al. 2019): the published best validation accuracy per λ,
digitised into ``tables/published/corel.yaml`` (``figure1``) by ``scripts/digitise_corel_figure.py``, and the
paper's Table 1 winners read off it (each curve's argmax). Our losses map onto the published series: the paper's
three by name, the authors' Gaussian-COREL variants onto Gaussian-COREL (``PUBLISHED_SERIES``)."""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np

from clusterable.tables.common import published

# Our loss -> the supplement's series it is compared with.
PUBLISHED_SERIES = {
    "center": "center",
    "cosine_corel": "cosine_corel",
    "gaussian_corel": "gaussian_corel",
    "gaussian_corel_authors": "gaussian_corel",
    "gaussian_corel_authors_fixed_gamma": "gaussian_corel",
}
FIGURE = "figure1"


def curve(dataset: str, model: str, loss: str) -> dict[float, float | None]:
    """The published validation accuracy (%) per λ of ``loss``'s series in the (dataset, model) panel; None for a
    λ whose marker lies below the panel's axis; {} without such a series or panel."""
    panel = (published("corel").get(FIGURE) or {}).get(f"{dataset}/{model}") or {}
    series = PUBLISHED_SERIES.get(loss)
    values = panel.get(series) or {}
    return {round(float(lam), 2): (None if v == "below" else float(v)) for lam, v in values.items()}


def value(dataset: str, model: str, loss: str, lam: float) -> float:
    """One published value (%), NaN where the figure has none (or the marker is below the axis)."""
    v = curve(dataset, model, loss).get(round(lam, 2))
    return math.nan if v is None else v


def winner(dataset: str, model: str, loss: str) -> tuple[float, float] | None:
    """The published Table 1 winner: the λ with the best published value (ties to the smaller λ) and that value;
    None without a curve."""
    points = [(lam, v) for lam, v in curve(dataset, model, loss).items() if v is not None]
    return min(points, key=lambda p: (-p[1], p[0])) if points else None


def mean_abs_difference(ours: Mapping[float, float], dataset: str, model: str, loss: str) -> tuple[float, int]:
    """Mean |ours − published| (points) over the λ both have, and how many λ that is (NaN, 0 without any);
    ``ours`` in percent."""
    pub = curve(dataset, model, loss)
    diffs = [abs(v - pub[lam]) for lam, v in ours.items() if pub.get(lam) is not None and not math.isnan(v)]
    return (float(np.mean(diffs)), len(diffs)) if diffs else (math.nan, 0)


# Said under every table that shows these numbers.
NOTE = (
    "Paper: the supplement's Figure 1 (Kenyon-Dean et al. 2019, supplemental.pdf in github.com/kiankd/corel2019), "
    "digitised by scripts/digitise_corel_figure.py to 3 pixels (0.02 points on the image panels, 0.05 on AGNews'; "
    "12 pixels where a marker hides under another); its Table 1 winners are each published curve's argmax, Δ = "
    "ours − paper (points). The paper's Tables 2-4 are not available."
)
