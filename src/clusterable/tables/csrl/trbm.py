"""CSRL Fig. 5 (Sabanayagam et al. 2024): the tensorized RBM, one RBM per cluster, and its reconstructions."""

from __future__ import annotations

import math
from operator import ge, lt
from pathlib import Path

import numpy as np

from clusterable.tables.common import load_npz, metric_text, na_note, pyplot, run_label, save_figure
from clusterable.tables.report import Run, Table, check

PAPER = "csrl"
# "Each cluster's RBM holds one class": ARI of the eq.-2 clusters at least this (the paper states it in words only;
# our threshold).
SPLIT_ARI = 0.9


def fig5(runs: list[Run], out_dir: Path) -> Table:
    """Fig. 5: inputs and every cluster's RBM reconstruction; the reconstruction errors per run."""
    from clusterable.evaluation.csrl import image_grid

    keys = ("dataset", "seed")
    ok = [r for r in runs if r.ok]
    header = ["Run", "ARI", "MSE, own cluster's RBM", "MSE, other cluster's RBM", "paper"]
    rows = [[run_label(r, keys), metric_text(r, "test/ari"), metric_text(r, "test/trbm/mse_own", 4),
             metric_text(r, "test/trbm/mse_other", 4), "n/a"] for r in ok]  # fmt: skip
    figures = []
    run = next((r for r in ok if load_npz(r, "trbm_reconstructions_test.npz") is not None), None)
    if run is not None:
        data = load_npz(run, "trbm_reconstructions_test.npz")
        plt = pyplot()
        per_class = int(np.bincount(data["labels"]).max())
        grids = [image_grid(data["inputs"], per_class)] + [image_grid(r, per_class) for r in data["recon"]]
        fig, axes = plt.subplots(1, len(grids), figsize=(2.8 * len(grids), 2.2), squeeze=False)
        titles = ["inputs"] + [f"RBM of cluster {j}" for j in range(len(grids) - 1)]
        for ax, grid, t in zip(axes[0], grids, titles, strict=True):
            ax.imshow(np.ma.masked_invalid(grid), cmap="gray")
            ax.set(title=t, xticks=[], yticks=[])
        fig.tight_layout()
        figures.append(save_figure(fig, out_dir, "csrl_fig5"))
    claims = [
        check("Each cluster's RBM reconstructs its own class only: lower error under the point's own cluster "
              "than under the other (every run)",
              ((run_label(r, keys), r.metric("test/trbm/mse_own") or math.nan,
                r.metric("test/trbm/mse_other") or math.nan) for r in ok), lt),
        check(f"The RBMs split the classes (ARI of the eq.-2 clusters >= {SPLIT_ARI}, every run)",
              ((run_label(r, keys), r.metric("test/ari") or math.nan, SPLIT_ARI) for r in ok), ge),
    ]  # fmt: skip
    notes = [na_note(PAPER),
             "MSE: per pixel, one mean-field Gibbs step p(v | p(h | x)) of the RBM named."]  # fmt: skip
    return Table("CSRL Figure 5: TRBM reconstructions", header, rows, notes, claims, figures)
