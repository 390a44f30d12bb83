"""COREL on real Fashion-MNIST at three budgets (Kenyon-Dean et al. 2019, Tables 1, 2, 4 and Figure 2).

One grid, ``corel/fashion_table1`` (λ, one seed each) and ``corel/fashion_table2`` (seeds at Table 1's winners),
at three sizes. Each size is an experiment that inherits the grid and sets ``protocol.budget``; the sizes differ in
epochs, λ, seeds and models, and the ``paper`` size also in its recipe (the one recovered from the supplement's λ
curves, ``corel_recipe=recovered``, with its Gaussian-COREL in place of eq. 6's and the authors' code's):

========  ==========================  ==========  ======  ====  =====  ==========
budget    experiments                 encoders    epochs  λ     seeds  recipe
========  ==========================  ==========  ======  ====  =====  ==========
cpu       fashion_table1, _table2     FFNN        10      6     3      the text's
cpu150    fashion150_table1, _table2  FFNN        150     6     3      the text's
paper     fashion_paper_table1, ...   FFNN, CNN   150     20    10     recovered
========  ==========================  ==========  ======  ====  =====  ==========

Every table here but one is built from one budget's runs and says which in its title (runs of two budgets are
refused in one line); ``fashion_budgets`` sets the budgets side by side, a column group each, with every claim's
verdict at each budget. ``<prefix>_curves`` draws the clustering along training from the Table 2 runs' CSV logs
(the clustering evaluator on the validation split after every epoch). The grids add one loss to the paper's four:
Gaussian-COREL as the authors' code trains it (``gaussian_corel_authors``), a row of its own; the paper's claims
are checked on the paper's losses, and once more with that variant in Gaussian-COREL's place (``[authors' code]``).
The ``paper`` budget runs on the recipe recovered from the supplement's λ curves (``corel_recipe=recovered``), whose
Gaussian-COREL is the authors' loss with γ fixed (``gaussian_corel_authors_fixed_gamma``): its claims read
``[authors' loss, γ fixed]``, the same way.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from clusterable.budgets import SIZES
from clusterable.tables.common import logged_curve, na_note, pyplot, save_figure
from clusterable.tables.corel.paper import (
    LABELS,
    MODELS,
    PAPER,
    TUNED,
    VARIANTS,
    Tuning,
    build_fig2,
    build_table1,
    build_table2,
    build_table3_4,
    fig2_claim,
    shown,
    tune_lambda,
)
from clusterable.tables.report import Cell, Claim, MixedRuns, Run, Table, cells, key_of
from clusterable.tuned_lambda import experiment_grid

FASHION = {"fashion_mnist": "Fashion"}
FASHION_LOSSES = LABELS  # the paper's four and the authors' Gaussian-COREL
FASHION_TUNED = (*TUNED, *VARIANTS)
# The authors' Gaussian-COREL variants a grid may run (paper.VARIANTS), each with the tag its claims carry when it
# stands in Gaussian-COREL's place.
AUTHORS = {
    "gaussian_corel_authors": "authors' code",
    "gaussian_corel_authors_fixed_gamma": "authors' loss, γ fixed",
}
PAPER_PROTOCOL = "the FFNN and the CNN, 150 epochs, 20 λ, 10 seeds"
EARLY_EPOCHS = 10  # the cpu budget's length: marked on the curves of a longer run


@dataclass(frozen=True)
class Budget:
    """One size of the grid: its ``protocol.budget`` value, the prefix of its experiments and tables
    (``<prefix>_table1``), what it is, and its epochs (``clusterable.budgets.SIZES``, which a run is checked
    against before it trains)."""

    name: str
    prefix: str
    about: str
    epochs: int

    @property
    def table1(self) -> str:
        return f"corel/{self.prefix}_table1"

    @property
    def table2(self) -> str:
        return f"corel/{self.prefix}_table2"


BUDGETS = {name: Budget(name, size.prefix, size.about, size.epochs) for name, size in SIZES.items()}

SOURCES: dict[str, str | tuple[str, ...]] = {}
for _b in BUDGETS.values():
    SOURCES |= {
        f"{_b.prefix}_table1": _b.table1,
        f"{_b.prefix}_fig2": _b.table1,
        f"{_b.prefix}_table2": _b.table2,
        f"{_b.prefix}_table4": _b.table2,
        f"{_b.prefix}_curves": _b.table2,
    }
SOURCES["fashion_budgets"] = tuple(e for b in BUDGETS.values() for e in (b.table1, b.table2))


# ---- which budget a table's runs ran under --------------------------------------------------------------------


def budget_of(runs: Sequence[Run]) -> Budget:
    """The one budget ``runs`` ran under (``protocol.budget``); ``MixedRuns`` (one line) for runs of two budgets,
    of none this module knows, or of one their epochs contradict (``require_budget_epochs``): a table never pools
    two budgets, nor titles a run as a budget it did not train."""
    require_budget_epochs(runs)
    groups: dict[str, list[Run]] = {}
    for run in runs:
        groups.setdefault(str(run.get("protocol.budget")), []).append(run)
    if len(groups) > 1:
        counts = ", ".join(f"{name}: {len(group)}" for name, group in sorted(groups.items()))
        raise MixedRuns(
            f"the runs mix budgets ({counts}); a table is built from one budget's runs "
            "(make_tables.py corel/fashion_budgets sets them side by side)"
        )
    name = next(iter(groups), "None")
    if name not in BUDGETS:
        raise MixedRuns(f"protocol.budget={name} is none of {', '.join(BUDGETS)} (runs under {runs[0].path.parent})")
    return BUDGETS[name]


def require_budget_epochs(runs: Sequence[Run]) -> None:
    """``MixedRuns`` (one line naming the first such record and how many there are) for full runs whose recorded
    ``trainer.max_epochs`` is not their ``protocol.budget``'s epochs: set by hand on the command line, a
    ``protocol.budget=cpu150`` would title a 10-epoch grid as the 150-epoch one. A run refused so before it trained
    (``clusterable.budgets``) never gets here: these are records of older code, or edited. Smoke runs are short on
    purpose; a budget that is no size is ``budget_of``'s to name."""
    odd = [
        run
        for run in runs
        if run.mode == "full"
        and (budget := BUDGETS.get(str(run.get("protocol.budget")))) is not None
        and (epochs := run.get("trainer.max_epochs")) is not None
        and epochs != budget.epochs
    ]
    if odd:
        run = odd[0]
        name = str(run.get("protocol.budget"))
        more = f" ({len(odd) - 1} more records do so too)" if len(odd) > 1 else ""
        raise MixedRuns(
            f"the record {run.path} says protocol.budget={name} ({BUDGETS[name].epochs} epochs) but trained "
            f"trainer.max_epochs={run.get('trainer.max_epochs')}{more}: a table would title and pool it as budget "
            f"{name}'s; remove or move it, or train it again at its budget's epochs"
        )


def models_of(runs: Sequence[Run]) -> dict[str, str]:
    """The paper's encoders the runs used, in the paper's order (the FFNN when there are none)."""
    used = {run.get("model") for run in runs}
    return {m: label for m, label in MODELS.items() if m in used} or {"ffnn": "FFNN"}


def size_text(runs: Sequence[Run], budget: Budget) -> str:
    """What the runs' grid holds, read from them: "FFNN, 150 epochs, 6 λ, 3 seeds" (λ from Table 1's grid, seeds
    the most any cell of Table 2 has)."""
    epochs = sorted({int(e) for r in runs if (e := r.get("trainer.max_epochs")) is not None})
    parts = [" and ".join(models_of(runs).values()), f"{'/'.join(map(str, epochs)) or '?'} epochs"]
    grid = experiment_grid(budget.table1)
    if grid is not None:
        parts.append(f"{len(grid)} λ")
    seeds = [r.get("seed") for r in runs if r.record.experiment == budget.table2]
    if seeds:
        parts.append(f"{len(set(seeds))} seeds")
    return ", ".join(parts)


def budget_note(runs: Sequence[Run], budget: Budget) -> str:
    grid = experiment_grid(budget.table1)
    lams = "{" + ", ".join(f"{v:g}" for v in grid) + "}" if grid else "?"
    recipes = sorted({str(r) for run in runs if (r := run.get("protocol.recipe")) is not None})
    recipe = f"; COREL recipe {'/'.join(recipes)} (corel_recipe)" if recipes else ""
    return (
        f"Budget {budget.name} ({budget.about}): {size_text(runs, budget)}; λ in {lams}{recipe}. The paper's "
        f"protocol: {PAPER_PROTOCOL}."
    )


def _titled(what: str, runs: Sequence[Run], budget: Budget) -> str:
    return f"COREL {what} on Fashion-MNIST, budget {budget.name} ({size_text(runs, budget)})"


# ---- the paper's claims once more with the authors' Gaussian-COREL in eq. 6's place ------------------------------


def as_paper_gaussian(runs: Sequence[Run], variant: str) -> list[Run]:
    """The runs with the authors' Gaussian-COREL ``variant`` (a key of ``AUTHORS``) in Gaussian-COREL's place (eq. 6's
    own runs and the other variants left out), so that the paper's claims can be checked on it with the same
    builders."""
    out = []
    for run in runs:
        loss = run.get("loss")
        if loss == "gaussian_corel" or (loss in AUTHORS and loss != variant):
            continue
        if loss == variant:
            choices = {**(run.record.choices or {}), "loss": "gaussian_corel"}
            run = replace(run, record=replace(run.record, choices=choices))
        out.append(run)
    return out


def authors_claims(runs: Sequence[Run], claims_of: Callable[[list[Run]], list[Claim]]) -> list[Claim]:
    """The claims ``claims_of`` checks that name Gaussian-COREL, once per authors' variant the runs hold, on the runs
    with that variant in its place, each marked with the variant's tag (``[authors' code]``); [] without such
    runs."""
    present = {r.get("loss") for r in runs}
    return [
        replace(c, text=f"[{tag}] {c.text}")
        for variant, tag in AUTHORS.items()
        if variant in present
        for c in claims_of(as_paper_gaussian(runs, variant))
        if "Gaussian-COREL" in c.text
    ]


def authors_fig2_claims(tuning: dict[tuple[str, ...], Tuning], model: str) -> list[Claim]:
    """Figure 2's claim on each authors' variant ``tuning`` (``tune_lambda``'s output) holds for ``model``, tagged
    like ``authors_claims``."""
    out = []
    for variant, tag in AUTHORS.items():
        if (authors := tuning.get(("fashion_mnist", model, variant))) is not None:
            claim = fig2_claim(authors, model)
            out.append(replace(claim, text=f"[{tag}] {claim.text} (their λ)"))
    return out


# ---- Tables 1, 2, 4 and Figure 2 at one budget --------------------------------------------------------------------


def experiment_of(runs: Sequence[Run]) -> str:
    return str(runs[0].record.experiment)


def fashion_table1(runs: list[Run], out_dir: Path) -> Table:
    """Table 1 at one budget: the λ with the best validation accuracy per loss; writes the winners file its
    Table 2 reads (``tuned_lambda_from: corel/<prefix>_table1``)."""
    budget = budget_of(runs)
    title = _titled("Table 1 protocol", runs, budget) + ": λ chosen by validation accuracy"
    table = build_table1(
        runs, out_dir, experiment_of(runs), FASHION, models_of(runs), title, with_paper=False, tuned=FASHION_TUNED
    )
    table.notes.insert(0, budget_note(runs, budget))
    return table


def fashion_fig2(runs: list[Run], out_dir: Path) -> Table:
    """Figure 2 at one budget: validation accuracy against λ, on the CNN where the budget trains it (the paper's
    figure), else the FFNN; the claim on eq. 6's Gaussian-COREL and on the authors'."""
    budget = budget_of(runs)
    model = "cnn" if "cnn" in models_of(runs) else "ffnn"
    title = _titled("Figure 2 protocol", runs, budget) + ": validation accuracy (%) against λ"
    table = build_fig2(
        runs, out_dir, model, title, f"corel_{budget.prefix}_fig2", [budget_note(runs, budget)], tuned=FASHION_TUNED
    )
    table.claims += authors_fig2_claims(tune_lambda(r for r in runs if r.get("model") == model), model)
    return table


def fashion_table2(runs: list[Run], out_dir: Path) -> Table:
    """Table 2 at one budget: test accuracy (%), mean ± std over seeds, each loss at its Table 1 winner."""
    budget = budget_of(runs)
    models = models_of(runs)
    title = _titled("Table 2 protocol", runs, budget) + ": test accuracy (%), mean ± std over seeds"

    def build(rs: list[Run]) -> Table:
        return build_table2(rs, FASHION, models, title, with_paper=True, losses=FASHION_LOSSES)

    table = build(runs)
    table.claims += authors_claims(runs, lambda rs: build(rs).claims)
    table.notes.insert(0, budget_note(runs, budget))
    return table


def fashion_table4(runs: list[Run], out_dir: Path) -> Table:
    """Table 4 at one budget: k-means / GMM clustering of the Table 2 runs' test representations."""
    budget = budget_of(runs)
    models = models_of(runs)
    title = _titled("Table 4 protocol", runs, budget) + ": clustering the test representations"
    notes = [budget_note(runs, budget), na_note(PAPER)]

    def build(rs: list[Run]) -> Table:
        return build_table3_4(rs, FASHION, models, title, notes, losses=FASHION_LOSSES)

    table = build(runs)
    table.claims += authors_claims(runs, lambda rs: build(rs).claims)
    return table


fashion150_table1 = fashion_paper_table1 = fashion_table1
fashion150_fig2 = fashion_paper_fig2 = fashion_fig2
fashion150_table2 = fashion_paper_table2 = fashion_table2
fashion150_table4 = fashion_paper_table4 = fashion_table4


# ---- the clustering along training ---------------------------------------------------------------------------------

# The validation metrics the curves follow: (key logged after every epoch, label, scale for the text).
CURVES = (
    ("val/kmeans/acc", "k-means accuracy (%)", 100.0),
    ("val/kmeans/nmi", "k-means NMI", 1.0),
    ("val/kmeans/silhouette", "k-means silhouette", 1.0),
    ("val/acc", "validation accuracy (%)", 100.0),
)


def epoch_cells(runs: Sequence[Run], key: str) -> dict[int, Cell]:
    """``key`` per epoch (1-based: epochs trained) over ``runs`` (the seeds of one cell), from their CSV logs."""
    out: dict[int, Cell] = {}
    for run in runs:
        for epoch, value in logged_curve(run, key):
            out.setdefault(epoch + 1, Cell()).values.append(value)
    return out


def fashion_curves(runs: list[Run], out_dir: Path) -> Table:
    """The clustering along training (budget-wide): each loss's k-means accuracy, NMI and silhouette of the
    validation representations, and its validation accuracy, against the epoch (mean ± std over seeds), epoch 10
    marked on a longer run; a row per loss with the numbers at epoch 10, at the best, and at the last epoch."""
    budget = budget_of(runs)
    models = models_of(runs)
    plt = pyplot()
    finished = [r for r in runs if r.ok]
    fig, axes = plt.subplots(len(models), len(CURVES), figsize=(4.2 * len(CURVES), 3.4 * len(models)), squeeze=False)
    rows, missing = [], []
    last = 0
    for (m, mname), panel in zip(models.items(), axes, strict=True):
        for loss, lname in FASHION_LOSSES.items():
            group = [r for r in finished if key_of(r, ("model", "loss")) == (m, loss)]
            if not group:
                continue
            row = [mname, lname, str(len(group))]
            for (key, _, scale), ax in zip(CURVES, panel, strict=True):
                per_epoch = epoch_cells(group, key)
                if not per_epoch:
                    missing.append(f"{mname} {lname} {key}")
                    row += ["missing"] * 3
                    continue
                epochs = np.array(sorted(per_epoch))
                means = np.array([per_epoch[e].mean for e in epochs]) * scale
                stds = np.array([per_epoch[e].std for e in epochs]) * scale
                line = ax.plot(epochs, means, lw=1.2, label=lname)[0]
                ax.fill_between(epochs, means - stds, means + stds, color=line.get_color(), alpha=0.15, lw=0)
                last = max(last, int(epochs[-1]))
                digits = 2 if scale > 1 else 3
                at_early = per_epoch.get(EARLY_EPOCHS)
                row += [
                    at_early.text(scale, digits) if at_early else "—",
                    f"{means.max():.{digits}f}",
                    per_epoch[int(epochs[-1])].text(scale, digits),
                ]
            rows.append(row)
        for (_, label, _), ax in zip(CURVES, panel, strict=True):
            ax.set(xlabel="epochs trained", ylabel=label, title=f"{mname}: {label}")
            ax.grid(alpha=0.3)
    for ax in axes.flat:
        if last > EARLY_EPOCHS:
            ax.axvline(EARLY_EPOCHS, color="grey", ls="--", lw=1)
    axes[0][0].legend(fontsize=7)
    fig.suptitle(f"Fashion-MNIST, budget {budget.name}: the validation split clustered after every epoch")
    fig.tight_layout()
    path = save_figure(fig, out_dir, f"corel_{budget.prefix}_curves", dpi=110)
    header = ["Model", "Loss", "seeds"] + [
        f"{short} {when}"
        for short in ("k-means acc", "NMI", "silhouette", "val acc")
        for when in (f"@{EARLY_EPOCHS}", "best", "last")
    ]
    notes = [
        budget_note(runs, budget),
        "From each finished run's csv/metrics.csv: the clustering evaluator (k-means, k = 10) on the 5,000 "
        "validation images after every epoch (validation_evaluators), mean ± std over seeds; the dashed line marks "
        f"epoch {EARLY_EPOCHS}, the cpu budget's length. 'best' is the best epoch's mean, 'last' the last epoch's.",
    ]
    if missing:
        notes.append(f"Not logged (a run without validation_evaluators: [clustering]): {'; '.join(missing)}.")
    title = _titled("clustering along training", runs, budget)
    return Table(title, header, rows, notes, [], [path])


fashion150_curves = fashion_paper_curves = fashion_curves


# ---- the budgets side by side ---------------------------------------------------------------------------------------


def fashion_budgets(runs: list[Run], out_dir: Path) -> Table:
    """Tables 1, 2 and 4 at every budget that has runs, side by side: per (model, loss), Table 1's λ, the test
    accuracy, the k-means accuracy and silhouette of the test representations, a column group per budget; and every
    claim's verdict at each budget (Table 1's, Figure 2's, Table 2's and Table 4's, the authors' variant's too).
    Budgets are never pooled: each column group is one budget's runs."""
    require_budget_epochs(runs)
    by_budget: dict[str, list[Run]] = {}
    for run in runs:
        by_budget.setdefault(str(run.get("protocol.budget")), []).append(run)
    unknown = sorted(set(by_budget) - set(BUDGETS))
    if unknown:
        raise MixedRuns(
            f"runs of unknown budget(s) {', '.join(unknown)}: protocol.budget is one of {', '.join(BUDGETS)}"
        )
    present = [b for b in BUDGETS.values() if b.name in by_budget]
    models = models_of(runs)
    header = ["Model", "Loss"]
    columns: dict[str, dict[str, dict[tuple[str, ...], Cell]]] = {}
    winners: dict[str, dict] = {}
    claims: list[Claim] = []
    notes = []
    for b in present:
        t1 = [r for r in by_budget[b.name] if r.record.experiment == b.table1]
        t2 = [r for r in by_budget[b.name] if r.record.experiment == b.table2]
        header += [f"{b.name}: λ", f"{b.name}: test acc", f"{b.name}: k-means acc", f"{b.name}: silhouette"]
        keys = ("dataset", "model", "loss")
        columns[b.name] = {
            "acc": cells(t2, keys, "test/acc"),
            "kmeans": cells(t2, keys, "test/kmeans/acc"),
            "sil": cells(t2, keys, "test/kmeans/silhouette"),
        }
        winners[b.name] = tune_lambda(t1, experiment_grid(b.table1))
        notes.append(budget_note(by_budget[b.name], b) + f" Runs: {len(t1)} of Table 1, {len(t2)} of Table 2.")
        claims += _claims_at(b, t1, t2, out_dir)
    # The paper's claims about MNIST or AGNews alone cannot be checked on a Fashion-MNIST grid: counted, not listed.
    unchecked = [c for c in claims if c.holds is None]
    claims = [c for c in claims if c.holds is not None]
    rows = []
    for m, mname in models.items():
        for loss in shown(FASHION_LOSSES, runs):
            row = [mname, FASHION_LOSSES[loss]]
            for b in present:
                key = ("fashion_mnist", m, loss)
                tuning = winners[b.name].get(key)
                best = tuning.winner() if tuning is not None else None
                row.append("—" if loss == "cce" else f"{best[0]:g}" if best else "none")
                for col, scale, digits in (("acc", 100, 2), ("kmeans", 100, 2), ("sil", 1, 3)):
                    cell = columns[b.name][col].get(key)
                    row.append(cell.text(scale, digits) if cell else "—")
            rows.append(row)
    notes.append(
        "Each column group is one budget's runs (never pooled); — where a budget has no such run. Test accuracy at "
        "the epoch of best validation accuracy; k-means (k = 10) on the test representations."
    )
    notes.append(na_note(PAPER))
    if unchecked:
        notes.append(
            f"{len(unchecked)} claim checks left out: their numbers are not in these runs (the paper's "
            "MNIST and AGNews settings, or a table not run at that budget)."
        )
    title = "COREL on Fashion-MNIST at every budget that has runs: " + ", ".join(b.name for b in present)
    return Table(title, header, rows, [n for n in notes if n], claims)


def _claims_at(budget: Budget, t1: list[Run], t2: list[Run], out_dir: Path) -> list[Claim]:
    """Every claim the budget's tables check, prefixed with the budget: Table 1's (without writing its winners),
    Figure 2's, Table 2's and Table 4's, with the authors' variant's."""
    out: list[Claim] = []
    if t1:
        models = models_of(t1)
        out += build_table1(
            t1, out_dir, budget.table1, FASHION, models, "", with_paper=False, tuned=FASHION_TUNED, write=False
        ).claims
        model = "cnn" if "cnn" in models else "ffnn"
        tuning = tune_lambda(r for r in t1 if r.get("model") == model)
        out.append(fig2_claim(tuning.get(("fashion_mnist", model, "gaussian_corel")), model))
        out += authors_fig2_claims(tuning, model)
    if t2:
        models = models_of(t2)

        def table2_claims(rs: list[Run]) -> list[Claim]:
            return build_table2(rs, FASHION, models, "", with_paper=True, losses=FASHION_LOSSES).claims

        def table4_claims(rs: list[Run]) -> list[Claim]:
            return build_table3_4(rs, FASHION, models, "", [], losses=FASHION_LOSSES).claims

        for claims_of in (table2_claims, table4_claims):
            out += claims_of(t2) + authors_claims(t2, claims_of)
    return [replace(c, text=f"[{budget.name}] {c.text}") for c in out]
