"""COREL (Kenyon-Dean et al. 2019): Tables 1-4 and Figures 1-2 from run directories, with the paper's claims.

The paper's own grids (``corel/table1``, ``table2``, ``fig1``) and the same protocol on scikit-learn's digits with
the FFNN (``digits_*``: a CPU-sized check, no paper column); the builders (``build_table1``, ``build_table2``,
``build_table3_4``, ``build_fig2``, ``fig2_claim``) are shared with the Fashion-MNIST budgets (``corel.fashion``).
Table 1 also writes its winners (``tune_lambda``) to the file Table 2's runs read their λ from
(``clusterable.tuned_lambda``).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from operator import ge, gt, lt
from pathlib import Path
from typing import Any

import numpy as np

from clusterable.record import DIVERGED, FAILED
from clusterable.tables.common import load_npz, na_note, paper_value, pyplot, save_figure
from clusterable.tables.corel import supplement
from clusterable.tables.report import (
    ALPHA,
    HOLDS,
    REVERSED,
    Cell,
    Claim,
    Run,
    Table,
    as_text,
    cells,
    check,
    compare,
    key_of,
    p_text,
    verdict_of,
)
from clusterable.tables.report import require_one_config as one_config
from clusterable.tuned_lambda import experiment_grid, winners_name, write_winners

LOSSES = {
    "cce": "CCE",
    "center": "Center",
    "cosine_corel": "Cosine-COREL",
    "gaussian_corel": "Gaussian-COREL",
}
TUNED = ("center", "cosine_corel", "gaussian_corel")  # the losses with a λ (CCE has none)
# Loss options beyond the paper's four that a grid may add: a row of their own, never part of the paper's claims.
# Gaussian-COREL as the authors' code trains it (src/clusterable/conf/loss/gaussian_corel_authors.yaml; tuned on its
# own λ), and the same loss with γ fixed, the recovered recipe's (corel_recipe=recovered).
VARIANTS = {
    "gaussian_corel_authors": "Gaussian-COREL (authors' code)",
    "gaussian_corel_authors_fixed_gamma": "Gaussian-COREL (authors' loss, γ fixed)",
}
LABELS = {**LOSSES, **VARIANTS}
MODELS = {"ffnn": "FFNN", "cnn": "CNN"}  # the paper's two architectures: its row and column labels
DATASETS = {"mnist": "MNIST", "fashion_mnist": "Fashion", "agnews8": "AGNews"}
# On a text dataset the paper's FFNN and CNN are the text encoders (src/clusterable/conf/model/text_ffnn.yaml,
# text_cnn.yaml): the experiments sweep them in a grid of their own, and their runs fill the same FFNN / CNN rows and
# columns.
TEXT_DATASETS = frozenset({"agnews8"})
DIGITS = {"digits": "Digits"}  # the corel/digits_* tables: the protocol on a CPU, no paper column
# Datasets beyond the paper's: a column of their own when their runs are there (e.g. corel/table1 dataset=digits).
OTHER_DATASETS = DIGITS
# Figures 2 and Tables 3-4 are drawn from the runs of Table 1 and Table 2 (their configs share the sweep).
SOURCES = {
    "table1": "corel/table1",
    "table2": "corel/table2",
    "table3_4": "corel/table2",
    "fig1": "corel/fig1",
    "fig2": "corel/table1",
    "digits_table1": "corel/digits_table1",
    "digits_table2": "corel/digits_table2",
    "digits_table3_4": "corel/digits_table2",
}
# "CCE's k-means accuracy falls well below its test accuracy": the number in the paper's "over X%" is stripped from
# the text we have; we call a drop of at least this many percentage points "well below".
WELL_BELOW_POINTS = 5.0
PAPER = "corel"  # its published numbers: tables/published/corel.yaml
# The λ below which a loss is unbounded below and its runs diverge (Gaussian-COREL: heads/gaussian_corel.py). A smoke
# run is too short to diverge there, so in smoke mode such a λ is never chosen: a smoke winner of 0.15 would hand
# Table 2 a λ its full runs cannot train at.
DIVERGES_BELOW = {"gaussian_corel": 0.5}


def shown(losses: Iterable[str], runs: Iterable[Run]) -> list[str]:
    """The rows of ``losses`` a table shows: the paper's own always (``missing`` where they did not run), a variant
    (``VARIANTS``) only where ``runs`` hold it."""
    ran = {run.get("loss") for run in runs}
    return [loss for loss in losses if loss not in VARIANTS or loss in ran]


def encoder(dataset: str, model: str) -> str:
    """The ``model`` config a run of the paper's ``model`` ("ffnn" / "cnn") on ``dataset`` used: ``text_ffnn`` /
    ``text_cnn`` on a text dataset, else ``model`` itself."""
    return f"text_{model}" if dataset in TEXT_DATASETS else model


def _images(datasets: Iterable[str]) -> list[str]:
    return [d for d in datasets if d not in TEXT_DATASETS]


# ---- λ tuning (Table 1) ------------------------------------------------------------------------------------------


@dataclass
class Tuning:
    """The λ grid of one (dataset, model, loss): validation accuracy per λ that ran, the λ values whose runs
    diverged, the experiment's grid (``grid``: None when unknown) and the λ below which none is chosen (``floor``).

    A λ qualifies when none of its runs diverged, at least one finished and it is not below ``floor``; the winner is
    the qualifying λ with the best mean validation accuracy, ties going to the smaller λ (the paper, "Tuning": λ
    chosen by validation accuracy). The grid is complete when every λ of ``grid`` ran.
    """

    val: dict[float, Cell] = field(default_factory=dict)
    diverged: set[float] = field(default_factory=set)
    grid: tuple[float, ...] | None = None
    floor: float | None = None

    def qualifying(self) -> dict[float, Cell]:
        return {
            lam: c
            for lam, c in self.val.items()
            if lam not in self.diverged and c.values and (self.floor is None or lam >= self.floor)
        }

    def missing(self) -> list[float]:
        """The λ values of the experiment's grid that never ran ([] when the grid is unknown)."""
        return sorted(set(self.grid or ()) - set(self.val))

    def winner(self) -> tuple[float, Cell] | None:
        """The chosen λ and its accuracies; None when no λ qualifies."""
        return min(self.qualifying().items(), key=lambda item: (-item[1].mean, item[0]), default=None)

    def candidate(self, lam: float) -> float | str:
        """λ's mean validation accuracy, or ``diverged`` / ``failed``."""
        if lam in self.diverged:
            return DIVERGED
        cell = self.val[lam]
        return cell.mean if cell.values else FAILED

    def record(self) -> dict[str, Any]:
        """The winners file's entry: the winner, its accuracy and runs, and every λ with what it scored."""
        best = self.winner()
        entry = {
            "lam": None if best is None else best[0],
            "val_acc": math.nan if best is None else best[1].mean,
            "runs": 0 if best is None else len(best[1].values),
            "candidates": {lam: self.candidate(lam) for lam in sorted(self.val)},
        }
        if self.grid is not None:
            entry.update(complete=not self.missing(), missing=self.missing())
        return entry


def tune_lambda(
    runs: Iterable[Run], grid: tuple[float, ...] | None = None, smoke: bool = False
) -> dict[tuple[str, str, str], Tuning]:
    """Table 1's λ grid per (dataset, model, loss), from the runs of a λ loss (CCE has none), checked against the
    experiment's ``grid``; in ``smoke`` mode no λ below the loss's ``DIVERGES_BELOW`` is chosen. The runs of a
    setting must differ in λ and seed alone (``require_one_config``)."""
    out: dict[tuple[str, str, str], Tuning] = {}
    settings: dict[tuple[str, str, str], list[Run]] = {}
    for run in runs:
        lam = run_lambda(run)
        if lam is None:
            continue
        dataset, model, loss = key_of(run, ("dataset", "model", "loss"))
        settings.setdefault((dataset, model, loss), []).append(run)
        floor = DIVERGES_BELOW.get(loss) if smoke else None
        tuning = out.setdefault((dataset, model, loss), Tuning(grid=grid, floor=floor))
        cell = tuning.val.setdefault(lam, Cell())
        value = run.metric("val/acc") if run.ok else None
        if run.diverged:
            tuning.diverged.add(lam)
        if value is None or math.isnan(value):
            cell.failed += 1
        else:
            cell.values.append(value)
    for (dataset, model, loss), group in settings.items():
        one_config(group, ("loss.lam",), f"dataset={dataset}, model={model}, loss={loss}", "val/acc")
    return out


def _lams(values: Iterable[float]) -> str:
    return ", ".join(f"{v:g}" for v in sorted(values))


def _datasets(runs: Iterable[Run], base: dict[str, str]) -> dict[str, str]:
    """``base`` and, after it, any other dataset the runs hold (a column of its own)."""
    present = {as_text(r.get("dataset", "")) for r in runs} - set(base) - {""}
    return {**base, **{d: OTHER_DATASETS.get(d, d) for d in sorted(present)}}


def _write_tuned(
    runs: list[Run], tuning: dict[tuple[str, str, str], Tuning], out_dir: Path, experiment: str
) -> Path | None:
    """Write Table 1's winners where the Table 2 runs read them (the mode's tables folder), under the name a
    ``tuned_lambda_from`` gives: the Table 1 experiment's own (``corel/table1``); None without runs."""
    if not runs:
        return None
    entries = {key: t.record() for key, t in tuning.items()}
    return write_winners(out_dir / winners_name(experiment), experiment, experiment, runs[0].mode, entries)


def build_table1(
    runs: list[Run],
    out_dir: Path,
    experiment: str,
    datasets: dict[str, str],
    models: dict[str, str],
    title: str,
    with_paper: bool,
    tuned: Iterable[str] = TUNED,
    write: bool = True,
) -> Table:
    """Table 1 of ``experiment``'s runs: a row per loss of ``tuned`` (the paper's three, or more where a grid adds
    a variant; the claims stay the paper's), a column per (dataset, model); ``write`` writes the winners file."""
    swept = experiment_grid(experiment)
    smoke = bool(runs) and runs[0].mode == "smoke"
    tuning = tune_lambda(runs, swept, smoke)
    path = _write_tuned(runs, tuning, out_dir, experiment) if write else None
    # Beside each setting of ours, the supplement's winner where it plots that setting (its curves' argmax).
    published = {(d, m) for d in datasets for m in models if supplement.curve(d, m, "center")}
    header = ["Loss"]
    for d in datasets:
        for m in models:
            header += [f"{datasets[d]} {models[m]} (ours)"] + (["paper"] if (d, m) in published else [])
    rows, diverged_notes, ran_notes = [], [], []
    for loss in shown(tuned, runs):
        row = [LABELS[loss]]
        for d in datasets:
            for m in models:
                t = tuning.get((d, encoder(d, m), loss))
                paper = [_published_winner(d, m, loss, t)] if (d, m) in published else []
                if t is None:
                    row += ["missing", *paper]
                    continue
                row += [_tuning_text(t), *paper]
                where = f"{LABELS[loss]} {models[m]}-{datasets[d]}"
                if t.diverged:
                    diverged_notes.append(f"{where}: λ = {_lams(t.diverged)}")
                if t.missing():
                    ran_notes.append(
                        f"{where}: {_lams(t.val)} ({len(t.val)} of {len(t.grid or ())}; never ran: "
                        f"{_lams(t.missing())})"
                    )
        rows.append(row)

    def grid(d: str, m: str, loss: str) -> Tuning:
        return tuning.get((d, encoder(d, m), loss), Tuning())

    def spread(d: str, m: str, loss: str) -> float:
        means = [c.mean for c in grid(d, m, loss).qualifying().values()]
        return 100 * (max(means) - min(means)) if means else math.nan

    def best(d: str, m: str, loss: str) -> Cell:
        winner = grid(d, m, loss).winner()
        return winner[1] if winner else Cell()

    def at(d: str, m: str, loss: str, lam: float) -> Cell:
        return grid(d, m, loss).qualifying().get(lam) or Cell()

    base = DATASETS if with_paper else datasets
    settings = [(d, m) for d in base for m in models]
    claims = [
        check(
            "Center loss is relatively insensitive to λ (validation accuracy varies by < 1 point)",
            ((f"{m}-{d}", spread(d, m, "center"), 1.0) for d, m in settings),
            lt,
            basis="the spread (highest − lowest) of the λ grid's mean validation accuracies against 1 point: a "
            "spread over the grid, no two rows' seeds to test",
        ),
        check(
            "Gaussian-COREL gains from tuning λ (its best λ beats λ = 0.5)",
            ((f"{m}-{d}", best(d, m, "gaussian_corel"), at(d, m, "gaussian_corel", 0.5)) for d, m in settings),
            gt,
            scale=100,
        ),
    ]
    lams = sorted({lam for t in tuning.values() for lam in t.val})
    notes = [supplement.NOTE] if published else []
    notes += [
        f"λ that ran: {_lams(lams) or 'none'} (the experiment's grid: "
        f"{_lams(swept) if swept is not None else 'unknown'}); each setting's λ is the one with the best mean "
        "validation accuracy (ties to the smaller λ); a λ whose run diverged is never chosen."
        + (f" Smoke runs are too short to diverge: no λ below {_bounds()} is chosen." if smoke else ""),
    ]
    if ran_notes:
        notes.append(
            "INCOMPLETE λ grids (marked 'grid incomplete'; their winners are refused by Table 2 unless it runs with "
            "tuned_lambda_partial=true), the λ that ran per setting: " + "; ".join(ran_notes) + "."
        )
    if diverged_notes:
        notes.append("Diverged (Gaussian-COREL below λ = 0.5 is unbounded below): " + "; ".join(diverged_notes) + ".")
    if path is not None:
        notes.append(f"Winners written to {path}, read by the experiments with tuned_lambda_from: {experiment}.")
    return Table(title, header, rows, [n for n in notes if n], claims)


def _bounds() -> str:
    return ", ".join(f"{lam:g} for {LOSSES[loss]}" for loss, lam in DIVERGES_BELOW.items())


def _published_winner(dataset: str, model: str, loss: str, ours: Tuning | None) -> str:
    """The supplement's winner for a Table 1 cell, "λ=0.5 (val 89.74)", with our winner's validation accuracy
    less the supplement's (Δ, points) where ours has one; "n/a" where the supplement has no such curve."""
    best = supplement.winner(dataset, model, loss)
    if best is None:
        return "n/a"
    ours_best = ours.winner() if ours is not None else None
    delta = f"; Δ {100 * ours_best[1].mean - best[1]:+.2f}" if ours_best else ""
    return f"λ={best[0]:g} (val {best[1]:.2f}){delta}"


def _tuning_text(t: Tuning) -> str:
    """A Table 1 cell: the winner and its validation accuracy, or why there is none; how many λ diverged; whether
    the setting's grid is incomplete (never "every λ" when some λ never ran)."""
    best = t.winner()
    missing = t.missing()
    every = "every λ" if not missing else "every λ that ran"
    if best is not None:
        text = f"λ={best[0]:g} (val {100 * best[1].mean:.2f})"
    elif t.diverged and not (set(t.val) - t.diverged):
        text = f"diverged ({every})"
    elif any(c.values for c in t.val.values()):
        text = f"none above the divergence bound ({every})"  # smoke: only λ below DIVERGES_BELOW finished
    else:
        text = f"failed ({every})" if not t.diverged else f"diverged or failed ({every})"
    text += f"; {len(t.diverged)} λ diverged" if t.diverged else ""
    return text + (f"; grid incomplete ({len(t.val)} of {len(t.grid or ())} λ ran)" if missing else "")


def table1(runs: list[Run], out_dir: Path) -> Table:
    """Table 1: the λ with the best validation accuracy per (dataset, model, loss); writes the winners file."""
    return build_table1(
        runs,
        out_dir,
        "corel/table1",
        _datasets(runs, DATASETS),
        MODELS,
        "COREL Table 1: λ chosen by validation accuracy",
        with_paper=True,
    )


def digits_table1(runs: list[Run], out_dir: Path) -> Table:
    """Table 1's protocol on digits with the FFNN (``corel/digits_table1``); writes its winners file."""
    title = "COREL Table 1 protocol on digits (FFNN): λ chosen by validation accuracy"
    return build_table1(runs, out_dir, "corel/digits_table1", DIGITS, {"ffnn": "FFNN"}, title, with_paper=False)


# ---- Table 2 and Tables 3-4: the runs at the tuned λ --------------------------------------------------------------


def run_lambda(run: Run) -> float | None:
    """The λ a run trained with: its recorded ``loss.lam`` (None for CCE, or a run that records no config)."""
    lam = run.get("loss.lam")
    try:
        return None if lam is None or isinstance(lam, bool) else float(lam)
    except (TypeError, ValueError):  # an unresolved interpolation in a failed run's config
        return None


def lambda_cells(runs: list[Run], keys: tuple[str, ...]) -> dict[tuple[str, ...], set[float]]:
    """The λ values of the finished runs of each cell (one value per cell unless runs at several λ were mixed)."""
    out: dict[tuple[str, ...], set[float]] = {}
    for run in runs:
        lam = run_lambda(run) if run.ok else None
        if lam is not None:
            out.setdefault(key_of(run, keys), set()).add(lam)
    return out


def with_lambda(text: str, lams: set[float] | None) -> str:
    return text if not lams else f"{text} (λ {_lams(lams)})"


def lambda_notes(runs: list[Run]) -> list[str]:
    """Where Table 2's λ came from: Table 1's winners (``tuned_lambda_from``), the config's λ where a smoke run found
    no winners (``lambda_fallback``), or a value set on purpose."""
    recorded = [r for r in runs if r.record.config]
    tuned = sorted({str(r.get("tuned_lambda_from")) for r in recorded if r.get("tuned_lambda_from")})
    fallback = sum(bool(r.record.notes.get("lambda_fallback")) for r in runs)
    # What the command lines said (display only): a λ given there replaces the tuned one, which the resolved
    # config cannot tell from a winner.
    fixed = sum("loss.lam" in r.params for r in runs)
    notes = []
    if tuned and fallback < sum(run_lambda(r) is not None for r in recorded):
        notes.append(
            f"λ in each cell: the winner of {', '.join(tuned)} (validation accuracy) for that dataset, "
            "model and loss (tuned_lambda_from)."
        )
    elif recorded and not tuned:
        notes.append(
            "λ NOT tuned: these runs record no tuned_lambda_from (set to null, or run before the tuned-λ "
            "protocol), so every COREL loss ran at its config's λ, shown in its cell."
        )
    if fallback:
        notes.append(
            f"λ NOT tuned in {fallback} run(s): Table 1's winners were missing when they ran, so they ran at "
            "their config's λ (tuned_lambda_fallback, set by debug=smoke; a full run fails instead). To "
            f"smoke-test the hand-off: `python train.py -m experiment={', '.join(tuned) or 'corel/table1'} "
            "debug=smoke`, make its table, then run this grid again."
        )
    if fixed:
        notes.append(f"{fixed} run(s) set loss.lam on the command line (λ fixed on purpose).")
    partial = [r for r in runs if r.record.notes.get("tuned_lambda_incomplete") is not None]
    if partial:
        cells = sorted({"/".join(key_of(r, ("dataset", "model", "loss"))) for r in partial})
        notes.append(
            f"λ from an INCOMPLETE Table 1 grid in {len(partial)} run(s) (tuned_lambda_partial=true: the "
            f"winner among the λ that ran): {', '.join(cells)}."
        )
    return notes


def build_table2(
    runs: list[Run],
    datasets: dict[str, str],
    models: dict[str, str],
    title: str,
    with_paper: bool,
    losses: Mapping[str, str] = LOSSES,
) -> Table:
    """Table 2: test accuracy per (model, loss) row and dataset column; ``losses`` the rows (the paper's four, or
    more where a grid adds a variant); the claims compare the paper's four."""
    keys = ("dataset", "model", "loss")
    acc = cells(runs, keys, "test/acc")  # λ is part of a cell: runs at two λ are refused (MixedConfigs)
    lams = lambda_cells(runs, keys)
    header = ["Model", "Loss"]
    for d in datasets.values():
        header += [f"{d} (ours)", f"{d} (paper)"] if with_paper else [f"{d} (ours)"]
    rows = []
    for m, mname in models.items():
        for loss in shown(losses, runs):
            row = [mname, losses[loss]]
            for d in datasets:
                key = (d, encoder(d, m), loss)
                text = with_lambda(acc.get(key, Cell()).text(100), lams.get(key))
                row += [text, paper_value(PAPER, "table2", f"{d}/{m}/{loss}")] if with_paper else [text]
            rows.append(row)

    def cell(d: str, m: str, loss: str) -> Cell:
        return acc.get((d, encoder(d, m), loss), Cell())

    def best_other(d: str, m: str) -> tuple[str, Cell]:
        """The other loss with the best mean test accuracy and its cell (an empty cell if any is missing)."""
        others = {o: cell(d, m, o) for o in LOSSES if o != "gaussian_corel"}
        if not all(c.values for c in others.values()):
            return "", Cell()
        return max(others.items(), key=lambda item: item[1].mean)

    base = DATASETS if with_paper else datasets
    settings = [(d, m) for m in models for d in base]
    claims = [
        check(
            "Gaussian-COREL beats CCE in every setting",
            ((f"{m}-{d}", cell(d, m, "gaussian_corel"), cell(d, m, "cce")) for d, m in settings),
            gt,
            scale=100,
        ),
    ]
    if with_paper:
        claims.append(
            _gaussian_best_claim(
                {f"{m}-{d}": (cell(d, m, "gaussian_corel").mean, best_other(d, m)[1].mean) for d, m in settings}
            )
        )
    else:
        best = (
            (f"{m}-{d} vs {LOSSES.get(o, 'the others')}", cell(d, m, "gaussian_corel"), c)
            for d, m in settings
            for o, c in [best_other(d, m)]
        )
        claims.append(check("Gaussian-COREL is the best loss in every setting", best, gt, scale=100))
    images = _images(base)
    if "cnn" in models:  # the claim is about the CNN only
        cosine = ((f"cnn-{d}", cell(d, "cnn", "cosine_corel"), cell(d, "cnn", "cce")) for d in images)
        claims.append(check("Cosine-COREL beats CCE with the CNN on both image datasets", cosine, gt, scale=100))
    center = ((f"{m}-{d}", cell(d, m, "center"), cell(d, m, "cce")) for m in models for d in images)
    text = "Center loss beats CCE on both image datasets" if with_paper else "Center loss beats CCE"
    claims.append(check(text, center, gt, scale=100))
    if with_paper:  # the paper's AGNews claims (and Cosine-COREL's other loss, FFNN-MNIST)
        claims += [
            check(
                "Center loss loses to CCE on AGNews with both models",
                ((f"{m}-agnews8", cell("agnews8", m, "center"), cell("agnews8", m, "cce")) for m in models),
                lt,
                scale=100,
            ),
            check(
                "Cosine-COREL loses to CCE with the CNN on AGNews and with the FFNN on MNIST",
                (
                    (f"{m}-{d}", cell(d, m, "cosine_corel"), cell(d, m, "cce"))
                    for d, m in (("agnews8", "cnn"), ("mnist", "ffnn"))
                ),
                lt,
                scale=100,
            ),
        ]
    notes = [na_note(PAPER)] if with_paper else []
    notes += lambda_notes(runs)
    if any(d in TEXT_DATASETS for d in datasets):
        notes.append(_TEXT_NOTE)
    return Table(title, header, rows, [n for n in notes if n], claims)


# Where a text column's FFNN and CNN come from (tables 1-3).
_TEXT_NOTE = (
    "AGNews' FFNN and CNN are the text encoders (model=text_ffnn, text_cnn) over frozen 300-d GloVe vectors; "
    "their runs' data notes (lemmatiser, truncated / empty documents, OOV) are in metrics.json."
)


def _gaussian_best_claim(pairs: dict[str, tuple[float, float]]) -> Claim:
    """The paper: Gaussian-COREL is the best loss in 4 of the 6 settings, FFNN-MNIST not one of them (``pairs``:
    setting -> (Gaussian-COREL's accuracy, the best other loss's))."""
    text = "Gaussian-COREL is the best loss in at least 4 of the 6 settings, FFNN-MNIST not one of them"
    missing = [name for name, pair in pairs.items() if any(math.isnan(v) for v in pair)]
    if not pairs or missing:  # a count over the 6 settings: none can be left out
        return Claim(text, None, f"numbers missing for {', '.join(missing)}" if missing else "numbers missing")
    best = [name for name, (g, other) in pairs.items() if g > other]
    holds = len(best) >= 4 and "ffnn-mnist" not in best
    how = "a count of the settings where its mean test accuracy is the highest, as the paper counts: no seed test"
    return Claim(text, holds, f"best in {len(best)} of {len(pairs)}: {', '.join(best) or 'none'}; {how}")


def table2(runs: list[Run], out_dir: Path) -> Table:
    """Table 2: test accuracy (%) mean ± std over seeds at the best validation epoch, each loss at its tuned λ."""
    title = "COREL Table 2: test accuracy (%), mean ± std over seeds"
    return build_table2(runs, _datasets(runs, DATASETS), MODELS, title, with_paper=True)


def digits_table2(runs: list[Run], out_dir: Path) -> Table:
    """Table 2's protocol on digits with the FFNN (``corel/digits_table2``), each loss at digits_table1's λ."""
    return build_table2(
        runs,
        DIGITS,
        {"ffnn": "FFNN"},
        "COREL Table 2 protocol on digits (FFNN): test accuracy (%), mean ± std over seeds",
        with_paper=False,
    )


CLUSTER_METRICS = {"acc": "Acc", "ari": "ARI", "v_measure": "V-M", "silhouette": "Sil."}


def build_table3_4(
    runs: list[Run],
    datasets: dict[str, str],
    models: dict[str, str],
    title: str,
    notes: list[str],
    losses: Mapping[str, str] = LOSSES,
) -> Table:
    """Clustering of the test representations, one block of rows per dataset (a row per loss of ``losses``), with
    the claims of each (on the paper's four losses)."""
    keys = ("dataset", "model", "loss")
    header = ["Dataset", "Model", "Loss"] + [
        f"{meth} {name}" for meth in ("K-Means", "GMM") for name in CLUSTER_METRICS.values()
    ]
    table = {(meth, k): cells(runs, keys, f"test/{meth}/{k}") for meth in ("kmeans", "gmm") for k in CLUSTER_METRICS}
    drops = _drops(runs, keys)
    lams = lambda_cells(runs, keys)
    rows: list[list[str]] = []
    claims: list[Claim] = []
    for d, dname in datasets.items():
        for m, mname in models.items():
            for loss in shown(losses, runs):
                key = (d, encoder(d, m), loss)
                row = [dname, mname, with_lambda(losses[loss], lams.get(key))]
                for meth in ("kmeans", "gmm"):
                    for k in CLUSTER_METRICS:
                        scale = 1.0 if k == "silhouette" else 100.0
                        row.append(table[(meth, k)].get(key, Cell()).text(scale, 2 if scale > 1 else 3))
                rows.append(row)

        def cell(meth: str, k: str, m: str, loss: str, d: str = d) -> Cell:
            return table[(meth, k)].get((d, encoder(d, m), loss), Cell())

        def best_other(m: str, d: str = d) -> tuple[str, Cell]:
            """The loss but Cosine-COREL with the highest mean k-means silhouette (an empty cell if one is missing)."""
            others = {o: cell("kmeans", "silhouette", m, o) for o in LOSSES if o != "cosine_corel"}
            if not all(c.values for c in others.values()):
                return "the others", Cell()
            return max(others.items(), key=lambda item: item[1].mean)

        if d not in TEXT_DATASETS:  # the paper's silhouette claim is Fashion's (Table 4)
            claims.append(
                check(
                    f"Cosine-COREL has the highest k-means silhouette ({dname})",
                    (
                        (f"{m}-{d} vs {LOSSES.get(o, o)}", cell("kmeans", "silhouette", m, "cosine_corel"), c)
                        for m in models
                        for o, c in [best_other(m)]
                    ),
                    gt,
                    digits=3,
                )
            )
        claims.append(
            _drop_claim(
                dname,
                {m: {loss: drops.get((d, encoder(d, m), loss), Cell()) for loss in ("cce", *COREL)} for m in models},
            )
        )
    notes = notes + [
        "Acc is Hungarian-matched; k = the number of classes; silhouette on a seeded sample of 2,000 test points."
    ]
    notes += lambda_notes([r for r in runs if r.get("dataset") in datasets])
    if any(d in TEXT_DATASETS for d in datasets):
        notes.append(_TEXT_NOTE)
    return Table(title, header, rows, [n for n in notes if n], claims)


def table3_4(runs: list[Run], out_dir: Path) -> Table:
    """Tables 3 (AGNews) and 4 (Fashion-MNIST): k-means / GMM clustering of the test representations."""
    return build_table3_4(
        runs,
        {"agnews8": "AGNews (Table 3)", "fashion_mnist": "Fashion (Table 4)"},
        MODELS,
        "COREL Tables 3-4: clustering the test representations (AGNews, Fashion-MNIST)",
        [na_note(PAPER)],
    )


def digits_table3_4(runs: list[Run], out_dir: Path) -> Table:
    """Tables 3-4's protocol on digits: clustering the test representations of corel/digits_table2's runs."""
    title = "COREL Tables 3-4 protocol on digits (FFNN): clustering the test representations"
    return build_table3_4(runs, DIGITS, {"ffnn": "FFNN"}, title, [])


COREL = {"cosine_corel": "Cosine", "gaussian_corel": "Gaussian"}  # the paper's two COREL losses


def _drops(runs: Iterable[Run], keys: Sequence[str]) -> dict[tuple[str, ...], Cell]:
    """Per cell of ``keys``: each finished run's drop from its test accuracy to the k-means accuracy of its test
    representations, in points (one value per seed: both numbers are the same run's)."""
    out: dict[tuple[str, ...], Cell] = {}
    for run in runs:
        acc, kmeans = run.metric("test/acc"), run.metric("test/kmeans/acc")
        if run.ok and acc is not None and kmeans is not None and not math.isnan(acc - kmeans):
            out.setdefault(key_of(run, keys), Cell()).values.append(100 * (acc - kmeans))
    return out


def _drop_claim(dataset: str, drops: dict[str, dict[str, Cell]]) -> Claim:
    """CCE's k-means accuracy falls well below its test accuracy while the COREL losses' do not (``drops``: model
    -> {loss: its drops over seeds, in points}). Each loss's drops against ``WELL_BELOW_POINTS``: the one-sample t
    over seeds (``report.compare``), CCE's above it, each COREL loss's below it; the detail prints k-means minus
    test accuracy and p."""
    text = (
        f"CCE's k-means accuracy on {dataset} falls well below (>= {WELL_BELOW_POINTS:g} points) its test "
        "accuracy while the COREL losses' (Cosine, Gaussian) do not"
    )
    # Checked on the models whose numbers are there, naming the others.
    known = {m: d for m, d in drops.items() if all(c.values for c in d.values())}
    if not known:
        return Claim(text, None, "numbers missing")
    names = {"cce": "CCE", **COREL}
    compared, parts = [], []
    for m, cells_ in known.items():
        said = []
        for loss, c in cells_.items():
            relation = ge if loss == "cce" else lt
            comparison = compare(f"{m}: {names[loss]}", c, WELL_BELOW_POINTS, relation)
            compared.append(comparison)
            if comparison.test == "one seed":
                p = "one seed" + ("" if comparison.outcome.startswith(HOLDS) else ", fails")
            elif comparison.outcome == REVERSED:  # the other side of the threshold shown: that direction's p
                p = f"reversed, {p_text(comparison.p_reverse)}"
            else:
                p = p_text(comparison.p)
            said.append(f"{names[loss]} {-c.mean:+.1f} ({p})")
        parts.append(f"{m}: {', '.join(said)}")
    kinds = {c.test for c in compared}
    how = "; ".join(
        (
            [
                f"each loss's drops over seeds against {WELL_BELOW_POINTS:g} points, one-sample t, one-sided, "
                f"α = {ALPHA:g}"
            ]
            if "one-sample" in kinds
            else []
        )
        + (["one seed: means compared, no test"] if "one seed" in kinds else [])
    )
    detail = f"{how}; k-means minus test accuracy in points (p): " + "; ".join(parts)
    if missing := [m for m in drops if m not in known]:
        detail += f"; no numbers for {', '.join(missing)}"
    verdict = verdict_of(compared)
    return Claim(text, verdict == HOLDS, detail, verdict, compared)


def fig2(runs: list[Run], out_dir: Path) -> Table:
    """Figure 2: validation accuracy against λ on Fashion-MNIST with the CNN (a PNG line plot); a λ whose run
    diverged is listed as such and not plotted."""
    return build_fig2(runs, out_dir, "cnn", "COREL Figure 2: validation accuracy (%) against λ", "corel_fig2", [])


def fig2_claim(tuning: Tuning | None, model: str = "cnn") -> Claim:
    """Figure 2's claim on Gaussian-COREL's λ grid: its best λ is above 0.5 and beats the best λ at or below 0.5
    (λ = 0.5 itself where it ran; undecided without a run at or below 0.5, or without a winner). The figure is the
    Fashion-MNIST CNN's: a grid of another encoder (``model``) does not test it, and says so."""
    text = (
        "Weighting attraction highly (λ > 0.5) gives Gaussian-COREL its best validation accuracy, above every "
        "λ <= 0.5 (Figure 2: Fashion-MNIST, the CNN)"
    )
    if model != "cnn":
        return Claim(
            text,
            None,
            f"a claim about the CNN, not tested on the {MODELS.get(model, model)}: the CNN's "
            "grid is corel/fashion150_recovered_cnn",
        )
    best = tuning.winner() if tuning is not None else None
    low = {lam: c for lam, c in tuning.qualifying().items() if lam <= 0.5} if tuning is not None else {}
    if best is None or not low:
        return Claim(text, None, "no run at λ <= 0.5" if best is not None else "numbers missing")
    base_lam, base = min(low.items(), key=lambda item: (-item[1].mean, item[0]))
    chosen = f"best λ = {best[0]:g} (the best mean; which λ is best is read off the means, not tested)"
    if best[0] <= 0.5:
        return Claim(text, False, chosen)
    claim = check(text, [(f"λ {best[0]:g} vs {base_lam:g}", best[1], base)], gt, scale=100)
    return replace(claim, detail=f"{chosen}; {claim.detail}")


def build_fig2(
    runs: list[Run], out_dir: Path, model: str, title: str, figure: str, notes: list[str], tuned: Iterable[str] = TUNED
) -> Table:
    """Figure 2 for ``model``: validation accuracy against λ, a line per loss of ``tuned``, the paper's claim on
    Gaussian-COREL."""
    plt = pyplot()
    tuning = tune_lambda(r for r in runs if r.get("dataset") == "fashion_mnist" and r.get("model") == model)
    fig, ax = plt.subplots(figsize=(6, 4))
    rows, diverged = [], []
    for loss in tuned:
        t = tuning.get(("fashion_mnist", model, loss))
        if t is None:
            continue
        for lam, c in sorted(t.val.items()):
            paper = supplement.value("fashion_mnist", model, loss, lam)
            has_paper = not math.isnan(paper)  # NaN: the supplement plots no such λ (or it is below the axis)
            trained = c.values and lam not in t.diverged
            delta = f"{100 * c.mean - paper:+.2f}" if trained and has_paper else "—"
            ours = DIVERGED if lam in t.diverged else c.text(100)
            rows.append([LABELS[loss], f"{lam:g}", ours, f"{paper:.2f}" if has_paper else "n/a", delta])
        if t.diverged:
            diverged.append(f"{LABELS[loss]} λ = {_lams(t.diverged)}")
        pts = sorted(t.qualifying().items())
        if not pts:
            continue
        lams = np.array([p[0] for p in pts])
        means = np.array([100 * p[1].mean for p in pts])
        stds = np.array([100 * p[1].std for p in pts])
        line = ax.errorbar(lams, means, yerr=stds, marker="o", ms=3, capsize=2, label=LABELS[loss])
        published = {lam: v for lam, v in supplement.curve("fashion_mnist", model, loss).items() if v is not None}
        if published:
            ax.plot(
                list(published),
                list(published.values()),
                "--",
                color=line[0].get_color(),
                alpha=0.5,
                label=f"{LABELS[loss]}, paper",
            )
    claims = [fig2_claim(tuning.get(("fashion_mnist", model, "gaussian_corel")), model)]
    ax.set(xlabel="λ (weight of attraction)", ylabel="validation accuracy (%)", title=f"Fashion-MNIST, {MODELS[model]}")
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    path = save_figure(fig, out_dir, figure, dpi=120)
    notes = notes + [supplement.NOTE] + ([f"Diverged, not plotted: {'; '.join(diverged)}."] if diverged else [])
    return Table(title, ["Loss", "λ", "val acc", "paper", "Δ"], rows, [n for n in notes if n], claims, [path])


def fig1(runs: list[Run], out_dir: Path) -> Table:
    """Figure 1: 2-D projections of the MNIST CNN's test representations, one panel per loss."""
    plt = pyplot()
    panels = []
    for loss, lname in LOSSES.items():
        run = next((r for r in runs if r.ok and r.get("loss") == loss), None)
        npz = sorted(run.path.glob("latent_test_*.npz")) if run else []
        panels.append((lname, load_npz(run, npz[0].name) if npz else None, run))
    fig, axes = plt.subplots(1, len(panels), figsize=(4 * len(panels), 4))
    rows = []
    for ax, (lname, data, run) in zip(axes, panels, strict=True):
        ax.set_title(lname)
        ax.set_xticks([])
        ax.set_yticks([])
        if data is None:
            ax.text(0.5, 0.5, "not run", ha="center", transform=ax.transAxes)
            rows.append([lname, "missing", ""])
            continue
        ax.scatter(data["xy"][:, 0], data["xy"][:, 1], c=data["labels"], cmap="tab10", s=3)
        rows.append([lname, f"{100 * (run.metric('test/acc') or math.nan):.2f}", str(run.path)])
    fig.tight_layout()
    path = save_figure(fig, out_dir, "corel_fig1")
    return Table("COREL Figure 1: MNIST CNN latent spaces", ["Loss", "test acc (%)", "run"], rows, [], [], [path])
