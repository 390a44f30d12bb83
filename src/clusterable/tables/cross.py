"""Every clustering loss of the five papers on one recipe (``experiment=cross/fashion``): a table none of them has.

COREL (Kenyon-Dean et al. 2019) compares four heads, DSCL (Law et al. 2017) one against softmax, Safir (2022) its
own autoencoders, Boudiaf et al. (2020) cross-entropy against pairwise losses, each on its own recipe. Here they
share the encoder, optimizer, epochs, embedding size and seeds, and are scored the same way on the test split:
k-means accuracy (Hungarian), NMI, ARI and silhouette, k-means accuracy on the l2-normalised representations,
Recall@1 and MAP@R (cosine), and the test accuracy of the heads that classify. The figure sets every loss's t-SNE
of its test representations side by side.
"""

from __future__ import annotations

import math
from operator import ge, gt
from pathlib import Path

from clusterable.tables.common import load_npz, pyplot, ranked_column, save_figure
from clusterable.tables.corel import lambda_cells, lambda_notes, with_lambda
from clusterable.tables.report import Cell, Claim, Run, Table, cells, check

SOURCES = {"fashion": "cross/fashion"}

# Rows in the order of the papers: the loss's label and the paper it comes from.
LOSSES = {
    "cce": ("CCE", "COREL"),
    "center": ("Center loss", "COREL"),
    "cosine_corel": ("Cosine-COREL", "COREL"),
    "gaussian_corel": ("Gaussian-COREL", "COREL"),
    "dscl": ("DSCL", "Law et al."),
    "ce": ("Cross-entropy (smoothed)", "Boudiaf et al."),
    "pce": ("Pairwise cross-entropy", "Boudiaf et al."),
    "triplet": ("Triplet (semi-hard)", "Schroff et al."),
    "multi_similarity": ("Multi-similarity", "Wang et al."),
    "proxy_anchor": ("Proxy-anchor", "Kim et al."),
    "dml_ae": ("DML autoencoder", "Safir"),
    "mvae": ("MVAE (VampPrior)", "Safir"),
}
# The heads with class vectors or a classifier (contracts.ClassifyingHead): their test accuracy is their own
# prediction. The classification evaluator scores the others by the nearest class mean, a different quantity,
# so their column reads "—".
CLASSIFYING = ("cce", "center", "cosine_corel", "gaussian_corel", "ce")
# Column key -> (header, scale, digits).
METRICS = {
    "test/kmeans/acc": ("k-means acc", 100, 1),
    "test/kmeans/nmi": ("NMI", 100, 1),
    "test/kmeans/ari": ("ARI", 100, 1),
    "test/kmeans/silhouette": ("silhouette", 1, 3),
    "test/l2/kmeans/acc": ("k-means acc, l2", 100, 1),
    "test/recall@1/cos": ("R@1", 100, 1),
    "test/map@r/cos": ("MAP@R", 100, 1),
    "test/acc": ("test acc", 100, 1),
}
PAIRWISE = ("triplet", "multi_similarity", "proxy_anchor")
# Safir's heads bring the linear embedding layer themselves (their latent layer): their encoder stops before it.
LATENT_HEADS = ("dml_ae", "mvae")


def fashion(runs: list[Run], out_dir: Path) -> Table:
    """One row per loss: every metric's mean ± std over seeds, the best of each column in bold, † where a value
    is below that best by more than the seed spread; and the t-SNE figure."""
    table = {key: cells(runs, ("loss",), key) for key in METRICS}
    columns = {}
    for key, (_, scale, digits) in METRICS.items():
        shown = [_cell(table, key, loss) if key != "test/acc" or loss in CLASSIFYING else None for loss in LOSSES]
        columns[key] = ranked_column(shown, scale, digits)
    header = ["Loss", "Paper", *(h for h, _, _ in METRICS.values()), "seeds"]
    lams = lambda_cells(runs, ("loss",))
    rows = []
    for i, (loss, (label, paper)) in enumerate(LOSSES.items()):
        seeds = len(_cell(table, "test/kmeans/acc", loss).values)
        row = [
            with_lambda(label, lams.get((loss,))),
            paper,
            *(columns[key][i] for key in METRICS),
            str(seeds),
        ]
        rows.append(row)

    notes = [
        _recipe(runs),
        "Test split: k-means with k = the number of classes on the raw representations (Hungarian accuracy, NMI, "
        "ARI; silhouette of the k-means clusters on a 2,000-row sample, Euclidean); k-means acc, l2: the same on "
        "the l2-normalised representations; R@1 and MAP@R by cosine similarity; test acc is the head's own "
        "prediction (— for heads without a classifier). In %, but the silhouette.",
        "Bold: the best mean of the column. †: below it by more than the two standard deviations added (a gap "
        "beyond the seed spread); an unmarked value is within the seed spread of the best. The claims below are "
        "tested over the seeds: Welch's t, one-sided in the claimed direction, α = 0.05 (each gives the "
        "difference and p).",
        *lambda_notes(runs),
    ]
    table_out = Table(
        "Every clustering loss on one recipe, Fashion-MNIST test split (mean ± std over seeds)",
        header,
        rows,
        notes,
        _claims(table),
        claims_of="the papers",
    )
    table_out.figures.append(_tsne_figure(runs, table, out_dir))
    return table_out


def _recipe(runs: list[Run]) -> str:
    """The shared recipe as the runs recorded it (several values joined by "/" where runs differ)."""

    def values(key: str, among: list[Run] | None = None) -> str:
        found = {str(r.get(key)) for r in (runs if among is None else among) if r.get(key) is not None}
        return "/".join(sorted(found)) or "?"

    encoder = [r for r in runs if r.get("loss") not in LATENT_HEADS]
    return (
        f"One recipe for every loss: the FFNN of hidden widths {values('model.hidden', encoder)} (the last a "
        f"linear embedding of {values('protocol.embedding_dim')}; Safir's heads make it their latent layer), "
        f"{values('optimizer')} at lr {values('optimizer.lr')}, {values('trainer.max_epochs')} epochs of "
        f"{values('dataset.batch_size')}-row batches, the last epoch evaluated; each loss keeps its own paper's "
        "settings (src/clusterable/conf/loss/)."
    )


def _cell(table: dict[str, dict[tuple[str, ...], Cell]], key: str, loss: str) -> Cell:
    return table[key].get((loss,), Cell())


def _claims(table: dict[str, dict[tuple[str, ...], Cell]]) -> list[Claim]:
    """The papers' comparisons that this table can check, each on this one recipe: Welch's t over the seeds
    (``report.check``), the difference in the column's unit (points of a percentage but for the silhouette)."""
    r1, acc, nmi = "test/recall@1/cos", "test/kmeans/acc", "test/kmeans/nmi"

    def unit(key: str) -> dict[str, int]:
        _, scale, digits = METRICS[key]
        return {"scale": scale, "digits": digits}

    return [
        check(
            "Boudiaf et al. 2020: cross-entropy's R@1 at least matches the pairwise losses'",
            [(f"vs {LOSSES[o][0]}", _cell(table, r1, "ce"), _cell(table, r1, o)) for o in PAIRWISE],
            ge,
            **unit(r1),
        ),
        check(
            "COREL (Kenyon-Dean et al. 2019, Table 4): Cosine- and Gaussian-COREL's k-means accuracy above CCE's",
            [
                (LOSSES[c][0], _cell(table, acc, c), _cell(table, acc, "cce"))
                for c in ("cosine_corel", "gaussian_corel")
            ],
            gt,
            **unit(acc),
        ),
        check(
            "DSCL (Law et al. 2017): its NMI above a softmax classifier's (CCE)",
            [("vs CCE", _cell(table, nmi, "dscl"), _cell(table, nmi, "cce"))],
            gt,
            **unit(nmi),
        ),
    ]


def _class_names(runs: list[Run]) -> list[str] | None:
    """Fashion-MNIST's class names (Xiao et al. 2017) for a legend, None for any other dataset."""
    if not any(r.get("dataset.name") == "fashion_mnist" and r.get("dataset.source") == "real" for r in runs):
        return None
    from torchvision.datasets import FashionMNIST

    return list(FashionMNIST.classes)


def _tsne_figure(runs: list[Run], table: dict[str, dict[tuple[str, ...], Cell]], out_dir: Path) -> Path:
    """One panel per loss: the t-SNE (latent_plot evaluator) of the lowest-seed finished run's test
    representations, coloured by class, titled with the loss's mean k-means accuracy."""
    plt = pyplot()
    ncols = 4
    nrows = math.ceil(len(LOSSES) / ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(3.2 * ncols, 3.2 * nrows + 0.6))
    names = _class_names(runs)
    cmap = plt.get_cmap("tab10")
    points = set()
    for ax, (loss, (label, _)) in zip(axes.flat, LOSSES.items(), strict=False):
        ax.set_xticks([])
        ax.set_yticks([])
        done = sorted((r for r in runs if r.ok and r.get("loss") == loss), key=lambda r: r.get("seed", 0))
        data = next((d for r in done if (d := load_npz(r, "latent_test_tsne.npz")) is not None), None)
        acc = _cell(table, "test/kmeans/acc", loss)
        said = f"\nk-means acc {100 * acc.mean:.1f}% (mean of {len(acc.values)})" if acc.values else ""
        ax.set_title(label + said, fontsize=9)
        if data is None:
            ax.text(0.5, 0.5, "no run", ha="center", va="center", transform=ax.transAxes)
            continue
        xy = data["xy"]
        points.add(len(xy))
        ax.scatter(xy[:, 0], xy[:, 1], c=data["labels"] % 10, cmap=cmap, vmin=0, vmax=9, s=2, linewidths=0)
    for ax in list(axes.flat)[len(LOSSES) :]:
        ax.axis("off")
    if names:
        handles = [plt.Line2D([], [], ls="", marker="o", color=cmap(i), label=n) for i, n in enumerate(names)]
        fig.legend(handles=handles, loc="lower center", ncol=len(names), fontsize=8, frameon=False)
    count = "/".join(f"{n:,}" for n in sorted(points)) or "no"
    fig.suptitle(f"t-SNE of {count} test representations per loss (its lowest seed), coloured by class")
    fig.tight_layout(rect=(0, 0.04 if names else 0, 1, 0.97))
    return save_figure(fig, out_dir, "cross_fashion_tsne", dpi=100)
