"""A 2-D picture of the embedding space, coloured by class (COREL's Fig. 1, Kenyon-Dean et al. 2019).

The figure is drawn on a bare ``matplotlib.figure.Figure`` with the Agg canvas, so nothing opens a window and
pyplot's global backend is left alone. The 2-D coordinates are saved beside the PNG so that a table script can
compose multi-panel figures later without the model.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from matplotlib import colormaps
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from sklearn.decomposition import PCA
from sklearn.manifold import TSNE
from threadpoolctl import threadpool_limits
from torch import Tensor

from clusterable.arrays import to_numpy
from clusterable.contracts import EvalContext
from clusterable.logs import get_logger

log = get_logger(__name__)

METHODS = ("pca", "tsne")
# Beyond this many classes a legend is unreadable; a colour bar stands in for it.
_MAX_LEGEND = 20
# t-SNE of this many rows or more is announced, and timed when done: scikit-learn's Barnes-Hut t-SNE of 64-dim
# rows took 4 s at 1,000 rows and 27 s at 3,000 (``LatentPlot``'s default ``max_points``) on one busy AMD EPYC
# core, and says nothing meanwhile (its ``verbose`` prints its own ``[t-SNE]`` lines with ``print``).
TSNE_PROGRESS_ROWS = 2000


def project(x: np.ndarray, method: str, seed: int, perplexity: float = 30.0) -> tuple[np.ndarray, dict[str, float]]:
    """(n, 2) coordinates of the (n, D) rows of ``x`` and the projection's scalar metrics. A t-SNE of
    ``TSNE_PROGRESS_ROWS`` rows or more logs a line as it starts and one when done, with its seconds."""
    if method == "pca":
        pca = PCA(n_components=2, random_state=seed).fit(x)
        return pca.transform(x), {"pca/explained_variance": float(pca.explained_variance_ratio_.sum())}
    # t-SNE needs perplexity < n; a third of n keeps tiny inputs (smoke runs, tests) valid.
    perplexity = min(perplexity, max(1.0, (len(x) - 1) / 3))
    tsne = TSNE(n_components=2, perplexity=perplexity, init="pca", random_state=seed)
    if len(x) < TSNE_PROGRESS_ROWS:
        return tsne.fit_transform(x), {}
    log.info(f"t-SNE: {len(x):,} x {x.shape[1]:,} to 2-D; this can take minutes")
    start = time.monotonic()
    xy = tsne.fit_transform(x)
    log.info(f"t-SNE: {len(x):,} x {x.shape[1]:,} done in {time.monotonic() - start:.1f} s")
    return xy, {}


def draw(xy: np.ndarray, labels: np.ndarray, title: str) -> Figure:
    """Scatter of ``xy`` (n, 2) coloured by ``labels`` (n,); ``-1`` (unlabelled) in grey, behind the rest."""
    fig = Figure(figsize=(7, 5.5), dpi=120)
    FigureCanvasAgg(fig)
    ax = fig.subplots()
    unlabelled = labels < 0
    if unlabelled.any():
        ax.scatter(*xy[unlabelled].T, s=4, c="lightgrey", label="unlabelled")
    classes = np.unique(labels[~unlabelled])
    if len(classes) <= _MAX_LEGEND:
        cmap = colormaps["tab10" if len(classes) <= 10 else "tab20"]
        for i, c in enumerate(classes):
            ax.scatter(*xy[labels == c].T, s=4, color=cmap(i), label=str(c))
        # Outside the axes, so that it never hides points.
        ax.legend(markerscale=3, fontsize="small", title="class", loc="center left", bbox_to_anchor=(1.01, 0.5))
    else:
        points = ax.scatter(*xy[~unlabelled].T, s=4, c=labels[~unlabelled], cmap="viridis")
        fig.colorbar(points, ax=ax, label="class")
    ax.set_title(title)
    ax.set_xticks([])
    ax.set_yticks([])
    fig.tight_layout()
    return fig


@dataclass(frozen=True)
class LatentPlot:
    """Project the embeddings to 2-D, plot them coloured by class, save PNG + coordinates under the run dir.

    Args:
        method: "pca" (fitted on all N rows) or "tsne" (fitted on the plotted subsample only).
        max_points: rows plotted, a seeded random subsample; None = all.
        filename: file stem; None = ``latent_{stage}_{method}``.
        perplexity: t-SNE perplexity (capped at (n - 1) / 3 for tiny inputs).
        num_threads: OpenMP/BLAS threads while projecting; None = the libraries' default. One, because
            torch's and scikit-learn's OpenMP runtimes contend: t-SNE of 500 points took 25 s on 2 threads,
            4 s on 1.
    Raises:
        ValueError: an option out of range, when built (the message starts with its name).

    It declares no keys (``contracts.DeclaresMetrics``): 2-D embeddings are drawn as they are, without one.
    """

    method: str = "pca"
    max_points: int | None = 3000
    filename: str | None = None
    perplexity: float = 30.0
    num_threads: int | None = 1

    def __post_init__(self) -> None:
        if self.method not in METHODS:
            raise ValueError(f"method must be one of {list(METHODS)}, got {self.method!r}")
        if self.max_points is not None and self.max_points < 2:
            raise ValueError(f"max_points must be >= 2 or null, got {self.max_points}")
        if not self.perplexity > 0:
            raise ValueError(f"perplexity must be > 0, got {self.perplexity}")
        if self.num_threads is not None and self.num_threads < 1:
            raise ValueError(f"num_threads must be >= 1 or null, got {self.num_threads}")

    def __call__(self, embeddings: Tensor, labels: Tensor, context: EvalContext) -> dict[str, float]:
        """``{"pca/explained_variance": float}`` (fraction of variance on the 2 components) for PCA, else ``{}``.

        Args:
            embeddings: (N, D) the representation, D >= 2; with D == 2 it is plotted as it is (``method``
                ignored, files named ``raw``).
            labels: (N,) class labels; ``-1`` marks unlabelled samples (drawn in grey).
            context: ``run_dir`` is the folder for ``{filename}.png`` and ``{filename}.npz`` (keys ``xy`` (n, 2),
                ``labels`` (n,)), None saves nothing; ``stage`` names the files; ``seed`` seeds the subsample, PCA
                and t-SNE.
        """
        stage, seed, method = context.stage, context.seed, self.method
        x, y = to_numpy(embeddings).astype(np.float32), to_numpy(labels).astype(np.int64).ravel()
        if x.ndim != 2 or len(x) != len(y) or x.shape[1] < 2:
            raise ValueError(f"embeddings must be (N, D>=2) and labels (N,), got {x.shape} and {y.shape}")

        keep = np.arange(len(x))
        if self.max_points is not None and len(x) > self.max_points:
            keep = np.sort(np.random.default_rng(seed).choice(len(x), size=self.max_points, replace=False))
        scalars: dict[str, float] = {}
        with threadpool_limits(limits=self.num_threads):
            if x.shape[1] == 2:
                method, xy = "raw", x[keep]
            elif method == "pca":
                xy, scalars = project(x, "pca", seed)
                xy = xy[keep]
            else:
                xy, scalars = project(x[keep], "tsne", seed, self.perplexity)
        y = y[keep]

        if context.run_dir is not None:
            stem = Path(self.filename).stem if self.filename else f"latent_{stage}_{method}"
            run_dir = Path(context.run_dir)
            run_dir.mkdir(parents=True, exist_ok=True)
            title = {"raw": "2-D embeddings", "pca": "PCA", "tsne": "t-SNE"}[method] + f" of {stage} embeddings"
            draw(xy, y, title).savefig(run_dir / f"{stem}.png")
            np.savez(run_dir / f"{stem}.npz", xy=xy.astype(np.float32), labels=y)
        return scalars
