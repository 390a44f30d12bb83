"""Deep metric learning, one recipe for every loss (beyond Boudiaf et al. 2020, whose Table 4 copies the pairwise
losses' numbers from other papers): the same backbone, data, schedule and seeds for cross-entropy and every named
pairwise or proxy loss; R@1, MAP@R (Musgrave et al. 2020) and k-means NMI on the unseen test classes.
"""

from __future__ import annotations

from operator import ge
from pathlib import Path

from clusterable.tables.report import Cell, Run, Table, cells, check, key_of

SOURCES = {"losses": "dml/losses"}
LOSSES = {
    "ce": "Cross-entropy (Boudiaf)",
    "pce": "Pairwise CE (Boudiaf, Prop. 1)",
    "contrastive": "Contrastive",
    "triplet": "Triplet (semi-hard)",
    "multi_similarity": "Multi-Similarity",
    "supcon": "SupCon",
    "nca": "NCA",
    "proxy_nca": "ProxyNCA",
    "proxy_anchor": "ProxyAnchor",
    "arcface": "ArcFace",
    "normsoftmax": "NormSoftmax",
    "center": "Center loss (COREL)",
}
METRICS = {
    "test/recall@1/cos": "R@1 (cos)",
    "test/map@r/cos": "MAP@R (cos)",
    "test/kmeans/nmi": "NMI (k-means)",
}
PAIRWISE = ("contrastive", "triplet", "multi_similarity", "supcon", "nca")


def losses(runs: list[Run], out_dir: Path) -> Table:
    """One row per (dataset, loss): R@1, MAP@R and NMI in %, mean ± std over seeds."""
    table = {key: cells(runs, ("dataset", "loss"), key) for key in METRICS}
    datasets = sorted({key_of(r, ("dataset",))[0] for r in runs})
    header = ["Dataset", "Loss", *METRICS.values(), "seeds"]
    rows = []
    for dataset in datasets:
        for loss, name in LOSSES.items():
            got = {key: table[key].get((dataset, loss), Cell()) for key in METRICS}
            seeds = len(next(iter(got.values())).values)
            rows.append([dataset, name, *[c.text(100, 1) for c in got.values()], str(seeds)])

    def r1(dataset: str, loss: str) -> Cell:
        return table["test/recall@1/cos"].get((dataset, loss), Cell())

    pairs = [(f"{d}: vs {LOSSES[p]}", r1(d, "ce"), r1(d, p)) for d in datasets for p in PAIRWISE]
    claim = check(
        "Cross-entropy's R@1 at least matches every pairwise loss's (Boudiaf et al. 2020's thesis, on one recipe "
        "for all)",
        pairs,
        ge,
        scale=100,
        digits=1,
    )
    claims = [claim]
    notes = [
        "Every loss uses the same encoder, data, optimizer, schedule, epochs and seeds (the experiment file); "
        "the loss's own hyperparameters are those of its paper or MLRC (Musgrave et al. 2020), see "
        "src/clusterable/conf/loss/.",
        "R@1 and MAP@R with cosine similarity on the test classes (never seen in training); NMI of k-means with "
        "k = number of test classes. The last epoch is evaluated (no model selection).",
    ]
    return Table(
        "Deep metric learning: every loss on one recipe (mean ± std over seeds, %)", header, rows, notes, claims
    )
