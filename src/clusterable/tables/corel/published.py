"""COREL's published λ curves (Kenyon-Dean et al. 2019, supplementary Figure 1) beside ours.

The supplement plots the best validation accuracy against λ (20 values, 0.05 ... 1.00) for Center loss,
Cosine-COREL and Gaussian-COREL in six settings; ``scripts/digitise_corel_figure.py`` read them off the figure
into ``tables/published/corel.yaml`` (``figure1``; 3 pixels, about 0.02 points on Fashion-MNIST's panels, 12 pixels
for a marker hidden under another). The paper's Table 1 winners are each curve's argmax. Our losses map onto the
published series: the paper's three by name, and both variants of the authors' Gaussian-COREL onto Gaussian-COREL
(the supplement's λ is the authors' λ if their code made the figure; ``PUBLISHED_SERIES``).
"""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path

from clusterable.record import DIVERGED, FAILED
from clusterable.tables.common import logged_curve, pyplot, save_figure
from clusterable.tables.corel import supplement
from clusterable.tables.corel.paper import LABELS, fig2_claim, run_lambda, tune_lambda
from clusterable.tables.corel.supplement import PUBLISHED_SERIES, curve, mean_abs_difference, value
from clusterable.tables.report import Cell, Run, Table, as_text, key_of, require_one_config

# Row labels: the paper's losses and the authors' variants (the recovered recipe's Gaussian-COREL among them).
NAMES = LABELS
SERIES_COLOURS = {"center": "C0", "cosine_corel": "C1", "gaussian_corel": "C2"}  # the supplement's colours
# Ours only (the paper clusters its Table 2 runs, not its λ grids): the validation split at each run's best epoch.
CLUSTERING = {"val/kmeans/acc": "k-means acc (val)", "val/kmeans/silhouette": "silhouette (val)"}
CLUSTERING_FORMAT = ((100, 2), (1, 3))  # (scale, decimals) of each
MARKERS = {"gaussian_corel_authors": "^-", "gaussian_corel_authors_fixed_gamma": "D-"}  # others: squares


def curves_table(runs: list[Run], out_dir: Path, title: str, stem: str) -> Table:
    """Our λ curves (validation accuracy at each run's best epoch, mean over its seeds) beside the supplement's,
    one (dataset, model) panel a block of rows: a row per λ, per loss ours, the paper's and the difference, with
    each loss's mean absolute difference over the λ both have, and a figure of both (``<stem>.png``)."""
    curves: dict[tuple[str, str, str], dict[float, Cell]] = {}
    clustering: dict[tuple[str, str, str, float, str], Cell] = {}
    diverged: dict[tuple[str, str, str], set[float]] = {}
    # A diverged run's best epoch before the runaway (its record keeps it): shown, never in a mean or a Δ.
    best_before: dict[tuple[str, str, str, float], list[float]] = {}
    points: dict[tuple[str, str, str, float], list[Run]] = {}
    for run in runs:
        lam = run_lambda(run)
        setting = key_of(run, ("dataset", "model", "loss"))
        if lam is not None and setting[2] in PUBLISHED_SERIES:
            points.setdefault((*setting, lam), []).append(run)
    for (
        dataset,
        model,
        loss,
        lam,
    ), group in points.items():  # a point of a curve is one config, seeds pooled
        require_one_config(
            group, ("dataset", "model", "loss", "loss.lam"), f"{dataset} {model} {loss} λ={lam:g}", "val/acc"
        )
    for run in runs:
        lam = run_lambda(run)
        setting = key_of(run, ("dataset", "model", "loss"))
        if lam is None or setting[2] not in PUBLISHED_SERIES:
            continue
        cell = curves.setdefault(setting, {}).setdefault(lam, Cell())
        for key in CLUSTERING:  # the validation split clustered at the best epoch, where the run recorded it
            if run.ok and (v := run.metric(key)) is not None:
                clustering.setdefault((*setting, lam, key), Cell()).values.append(v)
        acc = run.metric("val/acc") if run.ok else None
        if run.diverged:
            diverged.setdefault(setting, set()).add(lam)
            if (before := run.metric("val/acc")) is not None and not math.isnan(before):
                best_before.setdefault((*setting, lam), []).append(100 * before)
        if acc is None or math.isnan(acc):
            cell.failed += 1
        else:
            cell.values.append(100 * acc)
    losses = [loss for loss in PUBLISHED_SERIES if any(s[2] == loss for s in curves)]
    panels = sorted({s[:2] for s in curves})
    header = ["Setting", "Loss", "λ", "ours", "paper", "Δ", *CLUSTERING.values()]
    rows, mads = [], []
    for dataset, model in panels:
        for loss in losses:
            grid = curves.get((dataset, model, loss), {})
            gone = diverged.get((dataset, model, loss), set())
            for lam, cell in sorted(grid.items()):
                pub = value(dataset, model, loss, lam)
                before = best_before.get((dataset, model, loss, lam))
                shown_before = f" (best epoch before: {max(before):.2f})" if before else ""
                ours = f"{DIVERGED}{shown_before}" if lam in gone else _cell(cell) if cell.values else FAILED
                delta = _num(cell.mean - pub, sign=True) if cell.values else "—"
                found = [clustering.get((dataset, model, loss, lam, key)) for key in CLUSTERING]
                shown = [
                    f"{c.mean * scale:.{digits}f}" if c else "—"
                    for c, (scale, digits) in zip(found, CLUSTERING_FORMAT, strict=True)
                ]
                rows.append([f"{dataset} {model}", NAMES.get(loss, loss), f"{lam:g}", ours, _num(pub), delta, *shown])
            mad, n = mean_abs_difference({lam: c.mean for lam, c in grid.items() if c.values}, dataset, model, loss)
            if grid:
                left_out = (
                    f", diverged at λ {', '.join(f'{lam:g}' for lam in sorted(gone))} (not in it)" if gone else ""
                )
                mads.append(f"{NAMES.get(loss, loss)} ({dataset} {model}) {_num(mad)} over {n} λ{left_out}")
    notes = [
        supplement.NOTE,
        "Ours: validation accuracy (%) at each run's best epoch, mean over its seeds; Δ = ours − paper (points); "
        "k-means (k = 10) on the validation representations at that epoch, where the grid clusters them (ours "
        "only: the paper clusters no λ grid). "
        "Mean |Δ| per loss: " + ("; ".join(mads) if mads else "none (no λ in common)") + ".",
    ]
    table = Table(title, header, rows, notes)
    table.figures.append(_figure(curves, losses, panels, out_dir, stem))
    return table


def _cell(cell: Cell) -> str:
    return cell.text(digits=2) if len(cell.values) > 1 else f"{cell.mean:.2f}"


def _num(x: float, sign: bool = False) -> str:
    return "n/a" if math.isnan(x) else (f"{x:+.2f}" if sign else f"{x:.2f}")


def _figure(
    curves: dict[tuple[str, str, str], dict[float, Cell]],
    losses: list[str],
    panels: list[tuple[str, str]],
    out_dir: Path,
    stem: str,
) -> Path:
    """Ours (solid, our λ) beside the supplement's curves (dashed, all 20 λ), a panel per setting."""
    plt = pyplot()
    fig, axes = plt.subplots(1, len(panels), figsize=(6.5 * len(panels), 4.2), squeeze=False)
    series = list(dict.fromkeys(PUBLISHED_SERIES[loss] for loss in losses))
    for ax, (dataset, model) in zip(axes[0], panels, strict=True):
        for name in series:  # each published curve once, in its series' colour
            pub = {lam: v for lam, v in curve(dataset, model, name).items() if v is not None}
            ax.plot(
                list(pub),
                list(pub.values()),
                "o--",
                color=SERIES_COLOURS[name],
                alpha=0.45,
                markersize=3,
                label=f"{NAMES[name]}, paper",
            )
        for loss in losses:  # ours in the colour of the series it is compared with, a marker a loss
            ours = sorted((lam, c.mean) for lam, c in curves.get((dataset, model, loss), {}).items() if c.values)
            if ours:
                ax.plot(
                    *zip(*ours, strict=True),
                    MARKERS.get(loss, "s-"),
                    color=SERIES_COLOURS[PUBLISHED_SERIES[loss]],
                    label=f"{NAMES.get(loss, loss)}, ours",
                )
        ax.set(title=f"{dataset} {model}", xlabel="λ", ylabel="best validation accuracy (%)")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    fig.tight_layout()
    return save_figure(fig, out_dir, stem)


# The curve tables: each λ grid on real Fashion-MNIST beside the supplement's, before and after the recipe search.
SOURCES: dict[str, str] = {
    "fashion150_published": "corel/fashion150_table1",
    "fashion150_recovered_published": "corel/fashion150_recovered_table1",
    "fashion_recipe_search": "corel/fashion_recipe_search",
    "fashion150_recovered_cnn_published": "corel/fashion150_recovered_cnn",
    "fashion150_recovered_width_published": "corel/fashion150_recovered_width",
}
# The settings corel/fashion_recipe_search varies, as a run records them, and their column headers.
SEARCHED = {
    "optimizer.lr": "lr",
    "model.negative_slope": "LeakyReLU slope",
    "model.linear_output": "linear output",
    "loss.train_class_vectors": "class vectors trained",
}


def fashion150_published(runs: list[Run], out_dir: Path) -> Table:
    """The 150-epoch Fashion-MNIST λ grid on the recipe the paper's text gives (class vectors learned, eq. 6)
    beside the supplement's curves."""
    return curves_table(
        runs,
        out_dir,
        "COREL λ curves at 150 epochs, the paper's text's recipe, beside the supplement's Figure 1",
        "corel_fashion150_published",
    )


def fashion150_recovered_published(runs: list[Run], out_dir: Path) -> Table:
    """The same grid on the recipe recovered from the curves (class vectors untrained; Gaussian-COREL as the
    authors' bounded loss with γ fixed) beside the supplement's curves."""
    return curves_table(
        runs,
        out_dir,
        "COREL λ curves at 150 epochs, the recovered recipe, beside the supplement's Figure 1",
        "corel_fashion150_recovered_published",
    )


def fashion150_recovered_cnn_published(runs: list[Run], out_dir: Path) -> Table:
    """Gaussian-COREL's λ curve of the Fashion-MNIST CNN at 150 epochs on the recovered recipe beside the
    supplement's CNN curve (the paper's Figure 2), with Figure 2's claim judged on it."""
    table = curves_table(
        runs,
        out_dir,
        "COREL Figure 2 on the CNN at 150 epochs, the recovered recipe, beside the supplement's CNN curve",
        "corel_fashion150_recovered_cnn_published",
    )
    tuning = tune_lambda(r for r in runs if r.get("model") == "cnn")
    claim = fig2_claim(tuning.get(("fashion_mnist", "cnn", "gaussian_corel_authors_fixed_gamma")), "cnn")
    table.claims.append(replace(claim, text=f"[authors' loss, γ fixed] {claim.text}"))
    return table


def fashion150_recovered_width_published(runs: list[Run], out_dir: Path) -> Table:
    """The recovered recipe's 150-epoch FFNN grid at 256 units a layer (ours elsewhere: 500; the paper's width is
    stripped) beside the supplement's curves: whether the width accounts for the offset left at 500."""
    return curves_table(
        runs,
        out_dir,
        "COREL λ curves at 150 epochs, the recovered recipe with 256-unit layers, beside the supplement's Figure 1",
        "corel_fashion150_recovered_width_published",
    )


def fashion_recipe_search(runs: list[Run], out_dir: Path) -> Table:
    """The short runs of the recipe search, a row each: the loss, λ and the settings varied, the best validation
    accuracy and its epoch, the last epoch's (a collapse shows as a best epoch near the start and a last value far
    below it) and the supplement's value at that λ."""
    header = ["Loss", "λ", *SEARCHED.values(), "best val (epoch)", "last epoch's val", "paper"]
    rows = []
    for run in sorted(runs, key=lambda r: (as_text(r.get("loss")), -(run_lambda(r) or 0), key_of(r, SEARCHED))):
        loss, lam = as_text(run.get("loss")), run_lambda(run)
        curve = logged_curve(run, "val/acc")
        best = max(curve, key=lambda p: (p[1], -p[0])) if curve else None
        outcome = (
            DIVERGED
            if run.diverged
            else FAILED
            if not run.ok
            else f"{100 * best[1]:.2f} ({best[0]})"
            if best
            else "no log"
        )
        last = f"{100 * curve[-1][1]:.2f}" if curve and run.ok else "—"
        pub = value(as_text(run.get("dataset")), as_text(run.get("model")), loss, lam or math.nan)
        rows.append([NAMES.get(loss, loss), f"{lam:g}", *key_of(run, SEARCHED), outcome, last, _num(pub)])
    notes = [
        supplement.NOTE,
        "Each run: the FFNN on real Fashion-MNIST, 10 epochs, one seed; one setting varied from the defaults (lr "
        "0.001, slope 0.01, a LeakyReLU after the last layer, class vectors trained). Best val: the best epoch's "
        "validation accuracy (%) and that epoch (0-based); the paper's value is its 150 epochs' best.",
    ]
    return Table(
        "COREL's unpublished settings searched at the ends of the λ range (Fashion-MNIST, FFNN)", header, rows, notes
    )
