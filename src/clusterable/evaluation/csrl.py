"""Evaluators of the Cluster-Specific Representation Learning paper (CSRL, Sabanayagam et al. 2024).

Numbers: ``CSRLClustering`` (ARI of the learned assignment, or of k-means on the representation, and of k-means
on the raw inputs; Figs. 2/7 left) and ``denoise`` (reconstruction MSE against the clean points; Figs. 2/7
centre). Pictures, written into the run directory with the arrays they show (``.npz``) so that a table script
can compose several runs' panels without the model: ``TVAELatents`` (Figs. 3, 9-11), ``TRBMReconstructions``
(Fig. 5) and ``ElasticPairs`` (Fig. 12). Fig. 4 is ``latent_plot.LatentPlot`` with ``method: tsne``.

Each is an evaluator ``(embeddings (N, D'), labels (N,), context) -> {name: value}``, a frozen dataclass of its
options (ranges checked when it is built) or, without options, a function (``denoise``); the head
they need is checked against the contracts in ``clusterable.contracts`` (or, for the figures of one model, its
class), and a head they cannot use is refused with one line. Figures are drawn on bare
``matplotlib.figure.Figure`` objects with the Agg canvas (no pyplot state).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from matplotlib import colormaps
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from sklearn.cluster import KMeans
from sklearn.metrics import adjusted_rand_score
from threadpoolctl import threadpool_limits
from torch import Tensor

from clusterable.arrays import first_per_class, to_numpy
from clusterable.contracts import ClusteringHead, EvalContext, ReconstructingHead
from clusterable.evaluation.kmeans import reported
from clusterable.heads.trbm import TensorizedRBM
from clusterable.heads.tvae import ClusterSpecificVAE


def _at_least_one(name: str, value: int) -> None:
    if value < 1:
        raise ValueError(f"{name} must be >= 1, got {value}")


def _run_dir(context: EvalContext) -> Path | None:
    """The run directory, created, or None when the figures are not wanted."""
    if context.run_dir is None:
        return None
    run_dir = Path(context.run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    return run_dir


def _kmeans_ari(x: np.ndarray, y: np.ndarray, k: int, seed: int, n_init: int) -> float:
    rows = x.reshape(len(x), -1)
    with reported(*rows.shape, k, n_init):
        pred = KMeans(n_clusters=k, n_init=n_init, random_state=seed).fit_predict(rows)
    return float(adjusted_rand_score(y, pred))


@dataclass(frozen=True)
class CSRLClustering:
    """ARI of the model's clustering and of k-means on the raw inputs (CSRL Figs. 2/7, left).

    ``ari``: for a ``ClusteringHead`` (the cluster-specific models) ``ARI(labels, head.assign(encoder_output,
    **split))``, eq. 2's assignment; for the others (standard AEs) the ARI of ``KMeans(C, n_init, random_state=
    seed)`` on ``embeddings``, the representation. ``kmeans_raw/ari``: the same k-means on the split's inputs
    (the paper's baseline). C = number of distinct labels; unlabelled points (label -1) are left out of the
    scores.

    Args:
        kmeans_n_init: k-means restarts (the authors' code, github mahalakshmi-sabanayagam/
            cluster_specific_representation ``exp_tensor_ae.ipynb``: 10 on the synthetic data).
        num_threads: BLAS/OpenMP threads for k-means (None: the libraries' default); one, because torch's and
            scikit-learn's OpenMP runtimes contend on small inputs.
    """

    kmeans_n_init: int = 10
    num_threads: int | None = 1

    def __post_init__(self) -> None:
        _at_least_one("kmeans_n_init", self.kmeans_n_init)
        if self.num_threads is not None:
            _at_least_one("num_threads", self.num_threads)

    def metric_names(self) -> list[str]:
        return ["ari", "kmeans_raw/ari"]

    def __call__(self, embeddings: Tensor, labels: Tensor, context: EvalContext) -> dict[str, float]:
        """``{"ari", "kmeans_raw/ari": float}``.

        Args:
            embeddings: (N, D') the representation. labels: (N,) classes.
            context: ``head``, ``encoder_output`` (N, D) (what the head reads), ``split`` and ``seed``.
        """
        y = to_numpy(labels).astype(np.int64).ravel()
        keep = y >= 0
        k = len(np.unique(y[keep]))
        if k < 2:
            raise ValueError(f"labels must hold at least 2 classes to score a clustering, got {k}")
        head, seed, n_init = context.head, context.seed, self.kmeans_n_init
        out: dict[str, float] = {}
        with threadpool_limits(limits=self.num_threads):
            if isinstance(head, ClusteringHead) and head.num_clusters > 1:
                pred = to_numpy(head.assign(context.encoder_output, **context.split))
                out["ari"] = float(adjusted_rand_score(y[keep], pred[keep]))
            else:
                out["ari"] = _kmeans_ari(to_numpy(embeddings)[keep], y[keep], k, seed, n_init)
            out["kmeans_raw/ari"] = _kmeans_ari(to_numpy(context.inputs)[keep], y[keep], k, seed, n_init)
        return out


def denoise(embeddings: Tensor, labels: Tensor, context: EvalContext) -> dict[str, float]:
    """De-noising MSE (CSRL Figs. 2/7, centre): ``mean (head.reconstruct(x_noisy) - x_clean)^2``.

    The mean runs over points and features, the authors' MSE. ``head.reconstruct`` sees the noisy input
    (``context.encoder_output`` (N, D)) only: a cluster-specific head picks eq. 2's cluster from it, as for any
    new point. The clean points are the split's ``targets`` (N, ...). Also reports ``denoise/noise_mse`` =
    ``mean (x_noisy - x_clean)^2``, the error of returning the input unchanged. Splits without ``targets`` (not
    a de-noising run) give ``{}``.
    """
    targets = context.split.get("targets")
    if targets is None:
        return {}
    head = context.head
    if not isinstance(head, ReconstructingHead):
        raise ValueError(
            f"the denoise evaluator needs a head with reconstruct (a ReconstructingHead); "
            f"{type(head).__name__} is not one"
        )
    clean = targets.flatten(1).to(context.encoder_output.dtype)
    recon = head.reconstruct(context.encoder_output)
    noisy = context.inputs.flatten(1).to(clean.dtype)
    return {
        "denoise/mse": float((recon.flatten(1) - clean).pow(2).mean()),
        "denoise/noise_mse": float((noisy - clean).pow(2).mean()),
    }


# ---- pictures ---------------------------------------------------------------------------------------------------


def image_grid(images: np.ndarray, columns: int) -> np.ndarray:
    """Tile ``images`` (n, d) into one array; square images (d = s^2) as s x s, others as 1 x d strips.

    Returns (rows * h, columns * w) with a one-pixel NaN gutter (drawn as background).
    """
    n, d = images.shape
    side = math.isqrt(d)
    h, w = (side, side) if side * side == d else (1, d)
    rows = max(1, math.ceil(n / columns))
    grid = np.full((rows * (h + 1) - 1, columns * (w + 1) - 1), np.nan, dtype=np.float32)
    for i, img in enumerate(images):  # a few dozen images for a figure, not a hot path
        r, c = divmod(i, columns)
        grid[r * (h + 1) : r * (h + 1) + h, c * (w + 1) : c * (w + 1) + w] = img.reshape(h, w)
    return grid


def _figure(width: float, height: float) -> Figure:
    fig = Figure(figsize=(width, height), dpi=110)
    FigureCanvasAgg(fig)
    return fig


def _show(ax, grid: np.ndarray, title: str) -> None:
    ax.imshow(np.ma.masked_invalid(grid), cmap="gray", interpolation="nearest")
    ax.set_title(title, fontsize="small")
    ax.set_xticks([])
    ax.set_yticks([])


def purity(clusters: np.ndarray, labels: np.ndarray) -> float:
    """Fraction of points whose cluster's majority class is their class (1 = every cluster holds one class)."""
    keep = labels >= 0
    clusters, labels = clusters[keep], labels[keep]
    if len(labels) == 0:
        return math.nan
    _, cluster_ids = np.unique(clusters, return_inverse=True)
    _, class_ids = np.unique(labels, return_inverse=True)
    counts = np.zeros((cluster_ids.max() + 1, class_ids.max() + 1), dtype=np.int64)
    np.add.at(counts, (cluster_ids, class_ids), 1)
    return float(counts.max(axis=1).sum() / len(labels))


def plot_latents(axes, mu: np.ndarray, clusters: np.ndarray, labels: np.ndarray) -> None:
    """Into ``axes`` (one per cluster): the 2-D latent means ``mu`` (N, >=2) of the cluster's points, coloured
    by class, with the N(0, I) prior's 1, 2 and 3 sigma circles (the paper's Fig. 3, middle and bottom rows).

    The axes fit the points (the same limits in every panel), so a collapsed latent space (all means near 0)
    still shows its structure; the circles give the scale where they fall inside."""
    classes = np.unique(labels)
    cmap = colormaps["tab10" if len(classes) <= 10 else "tab20"]
    finite = mu[:, :2][np.isfinite(mu[:, :2]).all(axis=1)]
    lim = max(1.1 * float(np.abs(finite).max()) if len(finite) else 3.5, 1e-3)
    theta = np.linspace(0, 2 * np.pi, 200)
    for j, ax in enumerate(axes):
        for r in (1, 2, 3):
            ax.plot(r * np.cos(theta), r * np.sin(theta), color="grey", lw=0.6, alpha=0.6)
        mine = clusters == j
        for i, c in enumerate(classes):
            pts = mu[mine & (labels == c)]
            ax.scatter(pts[:, 0], pts[:, 1], s=5, color=cmap(i), label=str(c))
        ax.set(xlim=(-lim, lim), ylim=(-lim, lim), aspect="equal", title=f"cluster {j} ({int(mine.sum())} pts)")
        ax.tick_params(labelsize="x-small")
    axes[-1].legend(title="class", fontsize="x-small", markerscale=2, loc="center left", bbox_to_anchor=(1.01, 0.5))


def draw_latents(mu: np.ndarray, clusters: np.ndarray, labels: np.ndarray, num_clusters: int, title: str) -> Figure:
    """``plot_latents`` on a new figure with one panel per cluster."""
    fig = _figure(3.2 * num_clusters, 3.5)
    plot_latents(fig.subplots(1, num_clusters, squeeze=False)[0], mu, clusters, labels)
    fig.suptitle(title, fontsize="medium")
    fig.tight_layout()
    return fig


@dataclass(frozen=True)
class TVAELatents:
    """The TVAE's cluster-specific latent spaces (CSRL Figs. 3, 9-11); the head must be a ``ClusterSpecificVAE``
    (``loss=tvae`` or ``loss=tvae_cnn``; one cluster: the standard VAE's latent space, the figures' left column).

    ``embeddings`` (N, h) are the latent means of the points under their eq.-2 cluster (``head.embed``). Writes
    into the run directory: ``tvae_latent_{stage}.png/.npz`` (one panel per cluster; npz keys ``mu`` (N, h),
    ``cluster`` (N,), ``labels`` (N,)) and ``tvae_samples.png/.npz`` (``head.sample`` of
    ``samples_per_cluster`` draws z ~ N(0, I) per cluster's decoder, shown in the model's own space as the
    paper does: "we do not re-scale"; npz key ``images`` (C, n, d)). Only the first two latent coordinates are
    drawn.

    Returns ``tvae/purity``: the fraction of points whose eq.-2 cluster's majority class is their class.

    Args:
        samples_per_cluster: >= 1 draws decoded per cluster.
    """

    samples_per_cluster: int = 36

    def __post_init__(self) -> None:
        _at_least_one("samples_per_cluster", self.samples_per_cluster)

    def metric_names(self) -> list[str]:
        return ["tvae/purity"]

    def __call__(self, embeddings: Tensor, labels: Tensor, context: EvalContext) -> dict[str, float]:
        head = context.head
        if not isinstance(head, ClusterSpecificVAE):
            raise ValueError(f"the tvae_latents evaluator needs the TVAE head (loss=tvae), got {type(head).__name__}")
        mu, y = to_numpy(embeddings), to_numpy(labels).astype(np.int64).ravel()
        clusters = to_numpy(head.assign(context.encoder_output))
        out = {"tvae/purity": purity(clusters, y)}
        run_dir = _run_dir(context)
        if run_dir is None:
            return out
        c, stage = head.num_clusters, context.stage
        title = (
            f"standard VAE latent means of the {stage} points"
            if c == 1
            else f"TVAE latent means of the {stage} points, per eq.-2 cluster"
        )
        draw_latents(mu, clusters, y, c, title).savefig(run_dir / f"tvae_latent_{stage}.png")
        np.savez(run_dir / f"tvae_latent_{stage}.npz", mu=mu.astype(np.float32), cluster=clusters, labels=y)

        generator = torch.Generator().manual_seed(context.seed)
        images = to_numpy(head.sample(self.samples_per_cluster, generator, uncentre=False))
        np.savez(run_dir / "tvae_samples.npz", images=images.astype(np.float32))
        fig = _figure(3.0 * c, 3.3)
        columns = max(1, math.isqrt(self.samples_per_cluster))
        names = ["standard VAE"] if c == 1 else [f"cluster {j}" for j in range(c)]
        for j, ax in enumerate(fig.subplots(1, c, squeeze=False)[0]):
            _show(ax, image_grid(images[j], columns), f"samples, {names[j]}")
        fig.tight_layout()
        fig.savefig(run_dir / "tvae_samples.png")
        return out


@dataclass(frozen=True)
class TRBMReconstructions:
    """Each cluster's RBM reconstructing every input (CSRL Fig. 5; Fig. 13 for the standard, one-cluster RBM);
    the head must be a ``TensorizedRBM``.

    ``head.reconstruct(x, cluster=j)`` is one mean-field Gibbs step of cluster j's RBM on the inputs ``x``
    (``context.encoder_output`` (N, d)). Writes ``trbm_reconstructions_{stage}.png/.npz`` for the first
    ``per_class`` points of each class: the inputs, then one block per cluster (npz keys ``inputs`` (n, d),
    ``recon`` (C, n, d), ``labels`` (n,)).

    Returns the per-pixel MSE of the reconstructions over all points, ``trbm/mse_own`` under each point's eq.-2
    cluster (the standard RBM: its one RBM) and, with more than one cluster, ``trbm/mse_other`` under the other
    clusters (the paper: the other cluster's RBM gives noise); ``trbm/mse_own_worst_class``: the largest mean
    of the own-cluster error over the classes (labels >= 0), i.e. how well the class reconstructed worst is
    reconstructed; ``trbm/class_match``: the fraction of labelled points whose own-cluster reconstruction is
    nearest (Euclidean) to the mean input of their own class, i.e. comes out as its own digit rather than a
    blend or another digit (the standard RBM reconstructs every digit, Fig. 13).

    Args:
        per_class: >= 1 points of each class drawn.
    """

    per_class: int = 6

    def __post_init__(self) -> None:
        _at_least_one("per_class", self.per_class)

    def __call__(self, embeddings: Tensor, labels: Tensor, context: EvalContext) -> dict[str, float]:
        head = context.head
        if not isinstance(head, TensorizedRBM):
            raise ValueError(
                f"the trbm_reconstructions evaluator needs the TRBM head (loss=trbm), got {type(head).__name__}"
            )
        x = context.encoder_output.flatten(1)
        n, c = x.shape[0], head.num_clusters
        # All clusters' reconstructions of all points in one call: the points repeated once per cluster.
        cluster_ids = torch.arange(c, device=x.device).repeat_interleave(n)
        recon = head.reconstruct(x.repeat(c, 1), cluster=cluster_ids).view(c, n, -1)
        err = (recon - x.unsqueeze(0)).pow(2).mean(dim=2)  # (C, N)
        assigned, points = head.assign(x), torch.arange(n, device=x.device)
        is_own = torch.zeros_like(err, dtype=torch.bool)
        is_own[assigned, points] = True
        own = err[assigned, points]  # (N,) each point's error under its own cluster's RBM
        out = {"trbm/mse_own": float(own.mean())}
        if c > 1:
            out["trbm/mse_other"] = float(err[~is_own].mean())
        y = to_numpy(labels).astype(np.int64).ravel()
        own_np, classes = to_numpy(own), np.unique(y[y >= 0])
        if len(classes):
            out["trbm/mse_own_worst_class"] = float(max(own_np[y == k].mean() for k in classes))
            # Is each reconstruction its own digit? Nearest class mean of the inputs = the point's class.
            y_t = torch.as_tensor(y, device=x.device)
            means = torch.stack([x[y_t == k].mean(0) for k in classes.tolist()])  # (K, d)
            nearest = torch.cdist(recon[assigned, points], means).argmin(1)
            labelled = y >= 0
            out["trbm/class_match"] = float((classes[to_numpy(nearest)] == y)[labelled].mean())
        run_dir = _run_dir(context)
        if run_dir is None:
            return out
        rows = first_per_class(y, None, self.per_class)
        shown_x, shown_recon = to_numpy(x)[rows], to_numpy(recon)[:, rows]
        stem = f"trbm_reconstructions_{context.stage}"
        np.savez(run_dir / f"{stem}.npz", inputs=shown_x, recon=shown_recon, labels=y[rows])
        grids = [image_grid(shown_x, self.per_class)] + [image_grid(r, self.per_class) for r in shown_recon]
        fig = _figure(2.6 * (c + 1), 2.6 * grids[0].shape[0] / grids[0].shape[1] + 0.7)
        titles = ["inputs"] + (
            ["reconstruction, standard RBM"] if c == 1 else [f"reconstruction, cluster {j}" for j in range(c)]
        )
        for ax, grid, title in zip(fig.subplots(1, c + 1, squeeze=False)[0], grids, titles, strict=True):
            _show(ax, grid, title)
        fig.tight_layout()
        fig.savefig(run_dir / f"{stem}.png")
        return out


@dataclass(frozen=True)
class ElasticPairs:
    """TCL's training triplets (CSRL Fig. 12): anchor, its elastic transformation, a negative.

    The head must be a ``TensorizedContrastive``. Anchors are the first ``num_examples`` inputs (the split's
    ``inputs`` (N, 1, H, W) or (N, H * W)); each one's negative is the first point of another eq.-2 cluster
    (the unsupervised negative), or for the standard model (one cluster) a random other point (the standard
    CL's independent negative). The transformation is the head's (``alpha``/``sigma`` None take the head's),
    drawn, like the standard model's negatives, from a generator seeded with ``context.seed``. Writes
    ``tcl_elastic_{stage}.png/.npz`` (npz keys ``anchor``, ``positive``, ``negative``, each (n, d)). Returns
    ``tcl/elastic_change``: the mean absolute pixel change of the transformation (0 would mean the positives are
    copies of the anchors).

    Args:
        num_examples: >= 1 anchors drawn.
        alpha, sigma: >= 0, the elastic transformation's; None takes the head's.
    """

    num_examples: int = 6
    alpha: float | None = None
    sigma: float | None = None

    def __post_init__(self) -> None:
        _at_least_one("num_examples", self.num_examples)
        for name, value in (("alpha", self.alpha), ("sigma", self.sigma)):
            if value is not None and not value >= 0:
                raise ValueError(f"{name} must be >= 0 or null, got {value}")

    def metric_names(self) -> list[str]:
        return ["tcl/elastic_change"]

    def __call__(self, embeddings: Tensor, labels: Tensor, context: EvalContext) -> dict[str, float]:
        # Imported here: the TCL head pulls in torchvision (~1 s), which no other evaluator needs.
        from clusterable.heads.tcl import TensorizedContrastive, elastic
        from clusterable.models.images import as_images

        head = context.head
        if not isinstance(head, TensorizedContrastive):
            raise ValueError(f"the elastic_pairs evaluator needs the TCL head (loss=tcl), got {type(head).__name__}")
        alpha = head.alpha if self.alpha is None else float(self.alpha)
        sigma = head.sigma if self.sigma is None else float(self.sigma)
        inputs = context.inputs
        n = min(self.num_examples, len(inputs))
        anchor = inputs[:n]
        generator = torch.Generator().manual_seed(context.seed)
        positive = elastic(as_images(anchor.float()), alpha, sigma, generator).reshape(anchor.shape)
        if head.num_clusters == 1 and len(inputs) > 1:
            # Anchor i's negative: a uniformly random other point, i + 1 + U{0, ..., N - 2} (mod N).
            shift = 1 + torch.randint(len(inputs) - 1, (n,), generator=generator)
            negative = inputs[(torch.arange(n) + shift).remainder(len(inputs)).to(inputs.device)]
        else:
            cluster = head.assign(context.encoder_output)
            # The first point of any other cluster: argmax over a boolean row picks the first True.
            other = cluster[:n].unsqueeze(1) != cluster.unsqueeze(0)
            negative = inputs[other.to(torch.int8).argmax(dim=1)]
        out = {"tcl/elastic_change": float((positive - anchor).abs().mean())}
        run_dir = _run_dir(context)
        if run_dir is None:
            return out
        arrays = {
            k: to_numpy(v).reshape(n, -1)
            for k, v in (("anchor", anchor), ("positive", positive), ("negative", negative))
        }
        np.savez(run_dir / f"tcl_elastic_{context.stage}.npz", **arrays)
        fig = _figure(1.2 * n + 0.4, 4.2)
        for ax, (name, images) in zip(fig.subplots(3, 1), arrays.items(), strict=True):
            _show(ax, image_grid(images, n), name)
        fig.tight_layout()
        fig.savefig(run_dir / f"tcl_elastic_{context.stage}.png")
        return out
