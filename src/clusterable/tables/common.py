"""What every paper's tables share: published numbers, cell and run text, saved arrays and figures.

``report`` holds the data model (runs, cells, claims, tables); this module holds the helpers the paper modules
(``corel``, ``csrl``) build their tables with. Claims compare numbers with ``operator.gt/lt/ge/le``.
"""

from __future__ import annotations

import csv
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from clusterable.rundir import UnreadableRuns
from clusterable.tables.report import Cell, Run, as_text

PUBLISHED = Path(__file__).parent / "published"


def published(paper: str) -> dict[str, Any]:
    """The paper's published numbers, ``tables/published/<paper>.yaml`` (``available``, ``reason``, the maps)."""
    return yaml.safe_load((PUBLISHED / f"{paper}.yaml").read_text())


def paper_value(paper: str, section: str, key: str) -> str:
    """One published number as text, "n/a" where the paper gives none."""
    values = published(paper).get(section) or {}
    return str(values[key]) if key in values else "n/a"


def na_note(paper: str) -> str:
    """Why the paper columns read n/a ("" when the published numbers are available)."""
    pub = published(paper)
    return "" if pub.get("available") else f"Paper columns read n/a: {pub['reason']}."


def cell_text(cell: Cell | None, digits: int = 3, sci: bool = False) -> str:
    """Mean ± standard error of a cell (``sci``: 3 significant digits), "missing", "failed" or "pruned" without
    values."""
    if cell is None or not cell.values:
        return cell.text() if cell is not None else "missing"
    if sci:
        return f"{cell.mean:.3g} ± {cell.sem:.2g}" + cell.apart()
    return cell.text(digits=digits, spread="sem")


def ranked_column(column: Sequence[Cell | None], scale: float = 1.0, digits: int = 2) -> list[str]:
    """A column's texts (mean ± std, ``Cell.text``) with the best mean in bold (``**...**``; higher is better) and
    † after each mean that is below the best by more than the two cells' standard deviations added: a difference
    beyond the seed spread. ``None`` (no such number for that row) reads "—"; a cell without values is never
    ranked."""
    present = [c for c in column if c is not None and c.values]
    best = max(present, key=lambda c: c.mean) if present else None
    out = []
    for cell in column:
        if cell is None:
            out.append("—")
        elif best is None or not cell.values:
            out.append(cell.text(scale, digits))
        elif cell.mean == best.mean:
            out.append(f"**{cell.text(scale, digits)}**")
        else:
            beyond = best.mean - cell.mean > best.std + cell.std
            out.append(cell.text(scale, digits) + (" †" if beyond else ""))
    return out


def metric_text(run: Run, key: str, digits: int = 3) -> str:
    """One metric of one run, "missing" if the run failed or lacks it."""
    value = run.metric(key) if run.ok else None
    return "missing" if value is None else f"{value:.{digits}f}"


def run_label(run: Run, keys: tuple[str, ...], among: Iterable[Run] = ()) -> str:
    """A run named by its recorded values of ``keys`` ("loss.kl_weight=0.2, seed=0"), the dataset only where the
    runs of ``among`` (the figure's runs) are on more than one (else the figure's title says which)."""
    among = list(among)
    shown = [k for k in keys if k != "dataset" or len({as_text(r.get(k)) for r in among}) > 1]
    return ", ".join(f"{k}={as_text(run.get(k))}" for k in shown) or "default"


def logged_curves(run: Run) -> dict[str, list[tuple[int, float]]]:
    """Every metric of the run's CSV log (``csv/metrics.csv``, logger=csv) as (epoch, value) in epoch order (0-based
    as Lightning logs it); {} without a log. Rows logged outside the epochs (the test metrics) carry no epoch or no
    value and are skipped. ``UnreadableRuns`` (one line naming the file) for a log cut short or garbled."""
    path = run.path / "csv" / "metrics.csv"
    if not path.is_file():
        return {}
    out: dict[str, list[tuple[int, float]]] = {}
    try:
        with path.open(newline="") as f:
            for row in csv.DictReader(f):
                if not row.get("epoch"):
                    continue
                for key, value in row.items():
                    if key not in ("epoch", "step") and value:
                        out.setdefault(key, []).append((int(row["epoch"]), float(value)))
    except (OSError, UnicodeDecodeError, csv.Error, ValueError, TypeError) as e:  # cut short, garbled, edited by hand
        raise UnreadableRuns(
            f"{path} cannot be read ({type(e).__name__}: {str(e).splitlines()[0] if str(e) else 'empty'}): restore "
            "it, or run that cell again, and make the table again"
        ) from None
    return {key: sorted(points) for key, points in out.items()}


def logged_curve(run: Run, key: str) -> list[tuple[int, float]]:
    """(epoch, value) of ``key`` from the run's CSV log (``logged_curves``); [] without a log or without the key."""
    return logged_curves(run).get(key, [])


def load_npz(run: Run, name: str) -> dict[str, np.ndarray] | None:
    """An array file an evaluator saved in the run directory, or None if there is none."""
    path = run.path / name
    if not path.is_file():
        return None
    try:
        with np.load(path) as data:
            return {k: data[k] for k in data.files}
    # truncated (BadZipFile), garbled (a header that does not parse: ValueError, TokenError, zlib.error...), unreadable
    except Exception as e:
        raise UnreadableRuns(
            f"{path} cannot be read ({type(e).__name__}: {str(e).splitlines()[0] if str(e) else 'empty'}); a copy cut "
            "short or a file edited by hand: restore it, or run that cell again, and make the table again"
        ) from None


def pyplot():
    """matplotlib.pyplot on the non-interactive Agg backend (tables run headless)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def save_figure(fig, out_dir: Path, stem: str, dpi: int = 110) -> Path:
    """Write ``<out_dir>/<stem>.png`` and close the figure."""
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / f"{stem}.png"
    fig.savefig(path, dpi=dpi)
    pyplot().close(fig)
    return path


def num_clusters(run: Run) -> int | None:
    """A CSRL run's number of cluster-specific models, ``loss.num_clusters`` (None: one per class, or not
    recorded)."""
    value = run.get("loss.num_clusters")
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def one_cluster(run: Run) -> bool:
    """Whether a run is of a standard (one-cluster) model."""
    return num_clusters(run) == 1
