"""CSRL Figs. 3 and 9-11 (Sabanayagam et al. 2024): the standard VAE's latent space beside the TVAE's cluster-specific
ones.

Each figure redraws, from the arrays the ``tvae_latents`` evaluator saved, the paper's three rows (samples per
latent space, the training points' latent means, the unseen points' latent means) with the standard VAE (the same
head with one cluster, ``loss.num_clusters=1``) in the left column and the TVAE's clusters beside it, and tabulates
every run: purity and ARI of the eq.-2 clusters, how well the latent means group the classes (k-NN accuracy of the
unseen points) and how far each class spreads in its latent space.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from operator import ge, gt
from pathlib import Path

import numpy as np

from clusterable.tables.common import (
    load_npz,
    metric_text,
    na_note,
    num_clusters,
    one_cluster,
    pyplot,
    run_label,
    save_figure,
)
from clusterable.tables.report import Claim, Run, Table, check, key_of

PAPER = "csrl"
# "Each latent space holds one class": purity of the eq.-2 clusters at least this (the paper states it in words only;
# our threshold).
PURE = 0.9
# "All embeddings are grouped by class" (standard VAE, §IV.B): k-NN class accuracy of the unseen points' latent means
# at least this (our threshold and k).
GROUPED = 0.9
K = 5
KEYS = ("dataset", "loss.kl_weight", "seed")  # a run's name; the model has its own column
# The claims hold "every run": each run's numbers are judged on their own, a seed test has nothing to compare.
PER_RUN = "each run's number against the threshold (the claim is of every run): no seed test"


def _majority_space(data: dict[str, np.ndarray]) -> Iterator[tuple[int, np.ndarray]]:
    """For each class (label >= 0): its latent means (n_c, 2) in the latent space that holds most of them."""
    mu, cluster, labels = data["mu"][:, :2], data["cluster"], data["labels"]
    for c in np.unique(labels[labels >= 0]):
        mine = labels == c
        space = np.bincount(cluster[mine]).argmax()
        yield int(c), mu[mine & (cluster == space)]


def class_spread(data: dict[str, np.ndarray] | None) -> float:
    """How far each class spreads in its latent space: the RMS distance of a class's latent means to their mean
    (in the latent space holding most of the class), averaged over the classes. NaN without data."""
    if data is None:
        return math.nan
    spreads = [np.sqrt(((m - m.mean(0)) ** 2).sum(1).mean()) for _, m in _majority_space(data) if len(m)]
    return float(np.mean(spreads)) if spreads else math.nan


def knn_accuracy(train: dict[str, np.ndarray] | None, test: dict[str, np.ndarray] | None, k: int = K) -> float:
    """Fraction of the unseen points whose class is the majority class of their ``k`` nearest training points in
    the same latent space (the same eq.-2 cluster): how well the latent means group the classes. NaN without
    data."""
    if train is None or test is None:
        return math.nan
    keep = test["labels"] >= 0
    hits = []
    for mu, cluster, label in zip(test["mu"][keep, :2], test["cluster"][keep], test["labels"][keep], strict=True):
        same = (train["cluster"] == cluster) & (train["labels"] >= 0)
        if not same.any():
            hits.append(False)
            continue
        nearest = np.argsort(((train["mu"][same, :2] - mu) ** 2).sum(1))[:k]
        votes = np.bincount(train["labels"][same][nearest])
        hits.append(votes.argmax() == label)
    return float(np.mean(hits)) if hits else math.nan


def _latents(run: Run, stage: str) -> dict[str, np.ndarray] | None:
    return load_npz(run, f"tvae_latent_{stage}.npz")


def _model(run: Run) -> str:
    c = num_clusters(run)
    return "standard VAE" if c == 1 else f"TVAE ({c} clusters)" if c else "TVAE"


def _draw(figure: str, title: str, panels: list[Run], out_dir: Path, among: list[Run]) -> Path | None:
    """The paper's three rows, one column per latent space: the standard VAE's (if run) then the TVAE's; runs
    named among the figure's runs ``among``."""
    from clusterable.evaluation.csrl import image_grid, plot_latents

    loaded = [(r, load_npz(r, "tvae_samples.npz")) for r in panels]
    loaded = [(r, s) for r, s in loaded if s is not None]
    if not loaded:
        return None
    plt = pyplot()
    widths = [len(s["images"]) for _, s in loaded]
    fig, axes = plt.subplots(3, sum(widths), figsize=(3.3 * sum(widths) + 0.8, 10), squeeze=False)
    start = 0
    for (run, samples), c in zip(loaded, widths, strict=True):
        names = ["standard VAE"] if one_cluster(run) else [f"TVAE cluster {j}" for j in range(c)]
        for j, ax in enumerate(axes[0, start : start + c]):
            ax.imshow(np.ma.masked_invalid(image_grid(samples["images"][j], 6)), cmap="gray")
            ax.set(title=f"samples, {names[j]}", xticks=[], yticks=[])
        for row, stage in zip(axes[1:], ("train", "test"), strict=True):
            data = _latents(run, stage)
            if data is None:
                continue
            plot_latents(row[start : start + c], data["mu"], data["cluster"], data["labels"])
            for j, ax in enumerate(row[start : start + c]):
                ax.set_title(f"{names[j]} ({int((data['cluster'] == j).sum())} pts)", fontsize="medium")
                if start + j < len(row) - 1 and ax.get_legend() is not None:
                    ax.get_legend().remove()  # one class legend, at the right end of the row
            row[start].set_ylabel(f"{stage} points")
        start += c
    shown = "; ".join(f"{_model(r)}: {run_label(r, KEYS, among)}" for r, _ in loaded)
    fig.suptitle(f"{title} ({shown})", fontsize="medium")
    fig.tight_layout()
    return save_figure(fig, out_dir, f"csrl_{figure}")


def tvae_figure(figure: str, title: str, runs: list[Run], out_dir: Path, one_class_each: bool = True) -> Table:
    """Figs. 3, 9-11: per run, the purity and ARI of the eq.-2 clusters on the training and the unseen points, the
    k-NN accuracy of the unseen points' latent means and the classes' spread; the figure redraws the purest TVAE
    run (training points) beside the standard VAE run of the same KL weight and seed. ``one_class_each``: the
    TVAE has one latent space per class (not Fig. 11), so the claims about one class per space apply."""

    def name(r: Run) -> str:
        return run_label(r, KEYS, runs)

    ok = [r for r in runs if r.ok]
    tvae = sorted((r for r in ok if not one_cluster(r)), key=lambda r: -(r.metric("train/tvae/purity") or -1.0))
    standard = sorted((r for r in ok if one_cluster(r)), key=name)
    knn = {id(r): knn_accuracy(_latents(r, "train"), _latents(r, "test")) for r in ok}
    spread = {id(r): class_spread(_latents(r, "train")) for r in ok}
    rows = [
        [
            name(r),
            _model(r),
            metric_text(r, "train/tvae/purity"),
            metric_text(r, "test/tvae/purity"),
            metric_text(r, "train/ari"),
            metric_text(r, "test/ari"),
            f"{knn[id(r)]:.3f}",
            f"{spread[id(r)]:.3f}",
            metric_text(r, "train/kl", 4),
            "n/a",
        ]
        for r in tvae + standard
    ]
    rows += [[name(r), _model(r), f"failed: {r.record.error}", *[""] * 6, "n/a"] for r in runs if not r.ok]
    header = [
        "Run",
        "model",
        "purity (train)",
        "purity (test)",
        "ARI (train)",
        "ARI (test)",
        f"{K}-NN acc. (test)",
        "class spread (train)",
        "final KL",
        "paper",
    ]

    def same_setting(r: Run) -> tuple[str, ...]:
        return key_of(r, KEYS)

    by_setting = {same_setting(r): r for r in standard}
    # The standard VAE of the shown TVAE run's setting (else the first one), then the TVAE run.
    partner = by_setting.get(same_setting(tvae[0])) if tvae else None
    panels = [partner or next(iter(standard), None), *tvae[:1]]
    figure_path = _draw(figure, title, [r for r in panels if r is not None], out_dir, runs)
    pairs = [(r, by_setting[same_setting(r)]) for r in tvae if same_setting(r) in by_setting]
    claims = [
        check(
            f'The standard VAE\'s embeddings are grouped by class (§IV.B: "all embeddings are grouped by class"; '
            f"{K}-NN class accuracy of the unseen points' latent means >= {GROUPED}, every standard-VAE run)",
            ((name(r), knn[id(r)], GROUPED) for r in standard),
            ge,
            digits=3,
            basis=PER_RUN,
        ),
    ]
    if one_class_each:
        claims = [
            check(
                f"Each cluster-specific latent space holds one class (purity of the eq.-2 clusters >= {PURE} on "
                "the training points, every TVAE run)",
                ((name(r), r.metric("train/tvae/purity") or math.nan, PURE) for r in tvae),
                ge,
                digits=3,
                basis=PER_RUN,
            ),
            check(
                f"Unseen points are assigned as well (test purity >= {PURE}, every TVAE run)",
                ((name(r), r.metric("test/tvae/purity") or math.nan, PURE) for r in tvae),
                ge,
                digits=3,
                basis=PER_RUN,
            ),
            *claims,
            check(
                "Each class gets a latent Gaussian of its own in the TVAE, where the standard VAE constrains all "
                "classes to one N(0, I) (§IV.B): each class spreads further in its TVAE latent space than in the "
                "standard VAE's (class spread of the training latent means, TVAE > standard VAE at the same KL "
                "weight and seed)",
                ((name(t), spread[id(t)], spread[id(s)]) for t, s in pairs),
                gt,
                digits=3,
                basis="each TVAE run against the standard VAE run of its KL weight and seed (the claim is of "
                "every run): no seed test",
            ),
        ]
    notes = [
        na_note(PAPER),
        "purity: the fraction of points whose eq.-2 cluster's majority class is their class (the standard VAE has "
        "one cluster: its purity is the largest class's share); ARI of the eq.-2 assignment against the classes.",
        f"{K}-NN acc.: the fraction of unseen points whose class is the majority class of their {K} nearest "
        "training points in the same latent space. Class spread: the RMS distance of a class's training latent "
        "means to their mean, in the latent space holding most of the class, averaged over the classes.",
        "The paper's other statements on these panels (samples of the standard VAE show every class with "
        "interpolations between them, those of each TVAE latent space one class; the standard VAE's samples have "
        "a higher contrast because the TVAE's data are centred) are read off the figure.",
    ]
    if not standard:
        notes.append("No standard-VAE run (loss.num_clusters=1): its column and claims are missing.")
    return Table(title, header, rows, notes, claims, [figure_path] if figure_path else [])


def fig3(runs: list[Run], out_dir: Path) -> Table:
    return tvae_figure("fig3", "CSRL Figure 3: VAE and TVAE latent spaces, MNIST {0, 1, 9}, BCE", runs, out_dir)


def fig9(runs: list[Run], out_dir: Path) -> Table:
    return tvae_figure("fig9", "CSRL Figure 9: VAE and TVAE latent spaces, MNIST {0, 1, 9}, MSE", runs, out_dir)


def fig10(runs: list[Run], out_dir: Path) -> Table:
    return tvae_figure(
        "fig10", "CSRL Figure 10: CNN VAE and TVAE latent spaces, Fashion-MNIST {0, 1, 9}, BCE", runs, out_dir
    )


def fig11(runs: list[Run], out_dir: Path) -> Table:
    """Fig. 11: two encodings for six classes; the paper: {0, 6} in one, {1, 3, 7, 9} in the other."""
    table = tvae_figure(
        "fig11",
        "CSRL Figure 11: VAE and TVAE with 2 encodings, MNIST {0, 1, 3, 6, 7, 9}",
        runs,
        out_dir,
        one_class_each=False,  # six classes in two encodings
    )
    # Labels are positions in [0, 1, 3, 6, 7, 9]: 0 -> digit 0, 3 -> digit 6, and 1, 2, 4, 5 -> 1, 3, 7, 9.
    groups: list[bool | None] = []
    detail = []
    for r in (r for r in runs if r.ok and not one_cluster(r)):
        data = _latents(r, "train")
        if data is None:
            continue
        name = run_label(r, ("loss.kl_weight", "seed"), runs)
        if len(np.unique(data["labels"])) != 6:  # smoke runs' stand-in data have other classes
            groups.append(None)
            detail.append(f"{name}: the data do not hold the six classes")
            continue
        majority = {
            int(c): int(np.bincount(data["cluster"][data["labels"] == c]).argmax()) for c in np.unique(data["labels"])
        }
        round_ = {majority[0], majority[3]}
        straight = {majority[k] for k in (1, 2, 4, 5)}
        ok = len(round_) == 1 and len(straight) == 1 and round_ != straight
        groups.append(ok)
        detail.append(f"{name}: " + ("yes" if ok else f"majority cluster per class {majority}"))
    text = "Similar classes share an encoding: {0, 6} in one, {1, 3, 7, 9} in the other (majority cluster of each "
    text += "class, training points)"
    holds = None if not groups or None in groups else all(groups)
    how = "per run, the majority cluster of each class (the claim is of every run): no seed test"
    table.claims.insert(0, Claim(text, holds, f"{how}; {'; '.join(detail)}" if detail else "numbers missing"))
    return table
