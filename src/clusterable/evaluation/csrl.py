"""Evaluators of the Cluster-Specific Representation Learning paper (Sabanayagam et al. 2024; REFERENCE §4).

Numbers: ``csrl_clustering`` (ARI of the learned assignment, or of k-means on the representation, and of k-means
on the raw inputs; Figs. 2/7 left) and ``denoise`` (reconstruction MSE against the clean points; Figs. 2/7
centre). Pictures, written into the run directory with the arrays they show (``.npz``) so that a table script
can compose several runs' panels without the model: ``tvae_latents`` (Figs. 3, 9-11), ``trbm_reconstructions``
(Fig. 5) and ``elastic_pairs`` (Fig. 12). Fig. 4 is ``latent_plot`` with ``method: tsne``.

Figures are drawn on bare ``matplotlib.figure.Figure`` objects with the Agg canvas (no pyplot state).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import torch
from matplotlib import colormaps
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from sklearn.cluster import KMeans
from sklearn.metrics import adjusted_rand_score
from threadpoolctl import threadpool_limits


def _numpy(x: torch.Tensor | np.ndarray) -> np.ndarray:
    return x.detach().cpu().numpy() if isinstance(x, torch.Tensor) else np.asarray(x)


def _kmeans_ari(x: np.ndarray, y: np.ndarray, k: int, seed: int, n_init: int) -> float:
    pred = KMeans(n_clusters=k, n_init=n_init, random_state=seed).fit_predict(x.reshape(len(x), -1))
    return float(adjusted_rand_score(y, pred))


def csrl_clustering(
    embeddings: torch.Tensor,
    labels: torch.Tensor,
    *,
    head: torch.nn.Module | None = None,
    encoder_output: torch.Tensor | None = None,
    split: dict[str, torch.Tensor] | None = None,
    inputs: torch.Tensor | None = None,
    seed: int = 0,
    kmeans_n_init: int = 10,
    num_threads: int | None = 1,
    **context: Any,
) -> dict[str, float]:
    """ARI of the model's clustering and of k-means on the raw inputs (the paper's Figs. 2/7, left).

    ``ari``: for heads with ``assign`` (the cluster-specific models) ``ARI(labels, head.assign(encoder_output,
    **split))``, eq. 2's assignment; for the others (standard AEs) ``ARI`` of ``KMeans(C, n_init, random_state=
    seed)`` on ``embeddings``, the representation. ``kmeans_raw/ari``: the same k-means on ``inputs`` (the
    paper's baseline). C = number of distinct labels; unlabelled points (label -1) are left out of the scores.

    Args:
        embeddings: (N, D) the representation; labels: (N,) classes.
        head, encoder_output, split, inputs, seed: from the runner (``encoder_output`` (N, D0) is what the
            head reads; ``split`` the split's tensors).
        kmeans_n_init: k-means restarts (authors: 10 on the synthetic data).
        num_threads: BLAS/OpenMP threads for k-means (None: the libraries' default); one, because torch's and
            scikit-learn's OpenMP runtimes contend on small inputs.
    """
    y = _numpy(labels).astype(np.int64).ravel()
    keep = y >= 0
    k = len(np.unique(y[keep]))
    if k < 2:
        raise ValueError(f"labels must hold at least 2 classes to score a clustering, got {k}")
    out: dict[str, float] = {}
    with threadpool_limits(limits=num_threads):
        if head is not None and hasattr(head, "assign"):
            source = embeddings if encoder_output is None else encoder_output
            pred = _numpy(head.assign(source, **(split or {})))
            out["ari"] = float(adjusted_rand_score(y[keep], pred[keep]))
        else:
            out["ari"] = _kmeans_ari(_numpy(embeddings)[keep], y[keep], k, seed, kmeans_n_init)
        if inputs is not None:
            out["kmeans_raw/ari"] = _kmeans_ari(_numpy(inputs)[keep], y[keep], k, seed, kmeans_n_init)
    return out


def denoise(
    embeddings: torch.Tensor,
    labels: torch.Tensor,
    *,
    head: torch.nn.Module,
    encoder_output: torch.Tensor,
    split: dict[str, torch.Tensor],
    **context: Any,
) -> dict[str, float]:
    """De-noising MSE (the paper's Figs. 2/7, centre): ``mean (head.reconstruct(x_noisy) - x_clean)^2``.

    The mean runs over points and features, the authors' MSE. ``head.reconstruct`` sees the noisy input only
    (a cluster-specific head picks eq. 2's cluster from it, as for any new point). Also reports
    ``denoise/noise_mse`` = ``mean (x_noisy - x_clean)^2``, the error of returning the input unchanged.
    Splits without ``targets`` (not a de-noising run) give ``{}``.
    """
    targets = split.get("targets")
    if targets is None:
        return {}
    if not hasattr(head, "reconstruct"):
        raise ValueError(
            f"the denoise evaluator needs a head with reconstruct(x); {type(head).__name__} has none"
        )
    clean = targets.flatten(1).to(encoder_output.dtype)
    recon = head.reconstruct(encoder_output)
    noisy = split["inputs"].flatten(1).to(clean.dtype)
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
        ax.set(
            xlim=(-lim, lim), ylim=(-lim, lim), aspect="equal", title=f"cluster {j} ({int(mine.sum())} pts)"
        )
        ax.tick_params(labelsize="x-small")
    axes[-1].legend(
        title="class", fontsize="x-small", markerscale=2, loc="center left", bbox_to_anchor=(1.01, 0.5)
    )


def draw_latents(
    mu: np.ndarray, clusters: np.ndarray, labels: np.ndarray, num_clusters: int, title: str
) -> Figure:
    """``plot_latents`` on a new figure with one panel per cluster."""
    fig = _figure(3.2 * num_clusters, 3.5)
    plot_latents(fig.subplots(1, num_clusters, squeeze=False)[0], mu, clusters, labels)
    fig.suptitle(title, fontsize="medium")
    fig.tight_layout()
    return fig


def tvae_latents(
    embeddings: torch.Tensor,
    labels: torch.Tensor,
    *,
    head: torch.nn.Module,
    encoder_output: torch.Tensor,
    stage: str = "test",
    run_dir: str | Path | None = None,
    seed: int = 0,
    samples_per_cluster: int = 36,
    **context: Any,
) -> dict[str, float]:
    """The TVAE's cluster-specific latent spaces (the paper's Figs. 3, 9-11).

    Writes into ``run_dir``: ``tvae_latent_{stage}.png/.npz`` (each point's latent mean under its eq.-2 cluster,
    one panel per cluster; npz keys ``mu`` (N, h), ``cluster`` (N,), ``labels`` (N,)) and ``tvae_samples.png/
    .npz`` (``head.sample`` of ``samples_per_cluster`` draws z ~ N(0, I) per cluster's decoder, shown in the
    model's own space as the paper does: "we do not re-scale"; npz key ``images`` (C, n, d)). Only the first two
    latent coordinates are drawn.

    Returns ``tvae/purity``: the fraction of points whose eq.-2 cluster's majority class is their class.
    """
    mu, y = _numpy(embeddings), _numpy(labels).astype(np.int64).ravel()
    clusters = _numpy(head.assign(encoder_output))
    out = {"tvae/purity": purity(clusters, y)}
    if run_dir is None:
        return out
    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    c = int(head.num_clusters)
    title = f"TVAE latent means of the {stage} points, per eq.-2 cluster"
    draw_latents(mu, clusters, y, c, title).savefig(run_dir / f"tvae_latent_{stage}.png")
    np.savez(run_dir / f"tvae_latent_{stage}.npz", mu=mu.astype(np.float32), cluster=clusters, labels=y)

    images = _numpy(head.sample(samples_per_cluster, torch.Generator().manual_seed(seed), uncentre=False))
    np.savez(run_dir / "tvae_samples.npz", images=images.astype(np.float32))
    fig = _figure(3.0 * c, 3.3)
    columns = max(1, math.isqrt(samples_per_cluster))
    for j, ax in enumerate(np.atleast_1d(fig.subplots(1, c, squeeze=False)[0])):
        _show(ax, image_grid(images[j], columns), f"samples, cluster {j}")
    fig.tight_layout()
    fig.savefig(run_dir / "tvae_samples.png")
    return out


def _first_per_class(y: np.ndarray, per_class: int) -> np.ndarray:
    """Row indices of the first ``per_class`` rows of each class (labelled rows only), class by class."""
    return np.concatenate([np.flatnonzero(y == c)[:per_class] for c in np.unique(y[y >= 0])])


def trbm_reconstructions(
    embeddings: torch.Tensor,
    labels: torch.Tensor,
    *,
    head: torch.nn.Module,
    encoder_output: torch.Tensor,
    stage: str = "test",
    run_dir: str | Path | None = None,
    per_class: int = 6,
    **context: Any,
) -> dict[str, float]:
    """Each cluster's RBM reconstructing every input (the paper's Fig. 5): ``head.reconstruct(x, cluster=j)``.

    Writes ``trbm_reconstructions_{stage}.png/.npz`` for the first ``per_class`` points of each class: the
    inputs, then one block per cluster (npz keys ``inputs`` (n, d), ``recon`` (C, n, d), ``labels`` (n,)).

    Returns the per-pixel MSE of the reconstructions over all points, ``trbm/mse_own`` under each point's eq.-2
    cluster and ``trbm/mse_other`` under the other clusters (the paper: the other cluster's RBM gives noise).
    """
    x = encoder_output.flatten(1)
    n, c = x.shape[0], int(head.num_clusters)
    # All clusters' reconstructions of all points in one call: the points repeated once per cluster.
    cluster_ids = torch.arange(c, device=x.device).repeat_interleave(n)
    recon = head.reconstruct(x.repeat(c, 1), cluster=cluster_ids).view(c, n, -1)
    err = (recon - x.unsqueeze(0)).pow(2).mean(dim=2)  # (C, N)
    own = head.assign(x)
    is_own = torch.zeros_like(err, dtype=torch.bool)
    is_own[own, torch.arange(n, device=x.device)] = True
    out = {"trbm/mse_own": float(err[is_own].mean())}
    if c > 1:
        out["trbm/mse_other"] = float(err[~is_own].mean())
    if run_dir is None:
        return out
    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    y = _numpy(labels).astype(np.int64).ravel()
    rows = _first_per_class(y, per_class)
    shown_x, shown_recon = _numpy(x)[rows], _numpy(recon)[:, rows]
    np.savez(run_dir / f"trbm_reconstructions_{stage}.npz", inputs=shown_x, recon=shown_recon, labels=y[rows])
    grids = [image_grid(shown_x, per_class)] + [image_grid(r, per_class) for r in shown_recon]
    fig = _figure(2.6 * (c + 1), 2.6 * grids[0].shape[0] / grids[0].shape[1] + 0.7)
    titles = ["inputs"] + [f"reconstruction, cluster {j}" for j in range(c)]
    for ax, grid, title in zip(fig.subplots(1, c + 1, squeeze=False)[0], grids, titles, strict=True):
        _show(ax, grid, title)
    fig.tight_layout()
    fig.savefig(run_dir / f"trbm_reconstructions_{stage}.png")
    return out


def elastic_pairs(
    embeddings: torch.Tensor,
    labels: torch.Tensor,
    *,
    head: torch.nn.Module,
    encoder_output: torch.Tensor,
    inputs: torch.Tensor,
    stage: str = "test",
    run_dir: str | Path | None = None,
    seed: int = 0,
    num_examples: int = 6,
    alpha: float | None = None,
    sigma: float | None = None,
    **context: Any,
) -> dict[str, float]:
    """TCL's training triplets (the paper's Fig. 12): anchor, its elastic transformation, a negative.

    Anchors are the first ``num_examples`` points; each one's negative is the first point of another eq.-2
    cluster (the unsupervised negative). The transformation is the head's (``alpha``/``sigma`` default to the
    head's), drawn from a generator seeded with ``seed``. Writes ``tcl_elastic_{stage}.png/.npz`` (npz keys
    ``anchor``, ``positive``, ``negative``, each (n, d)). Returns ``tcl/elastic_change``: the mean absolute
    pixel change of the transformation (0 would mean the positives are copies of the anchors).
    """
    from clusterable.heads.tcl import _as_images, elastic

    alpha = float(head.alpha if alpha is None else alpha)
    sigma = float(head.sigma if sigma is None else sigma)
    n = min(num_examples, len(inputs))
    anchor = inputs[:n]
    positive = elastic(_as_images(anchor.float()), alpha, sigma, torch.Generator().manual_seed(seed))
    positive = positive.reshape(anchor.shape)
    cluster = head.assign(encoder_output)
    # The first point of any other cluster: argmax over a boolean row picks the first True.
    other = cluster[:n].unsqueeze(1) != cluster.unsqueeze(0)
    negative = inputs[other.to(torch.int8).argmax(dim=1)]
    out = {"tcl/elastic_change": float((positive - anchor).abs().mean())}
    if run_dir is None:
        return out
    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    arrays = {
        k: _numpy(v).reshape(n, -1)
        for k, v in (("anchor", anchor), ("positive", positive), ("negative", negative))
    }
    np.savez(run_dir / f"tcl_elastic_{stage}.npz", **arrays)
    fig = _figure(1.2 * n + 0.4, 4.2)
    for ax, (name, images) in zip(fig.subplots(3, 1), arrays.items(), strict=True):
        _show(ax, image_grid(images, n), name)
    fig.tight_layout()
    fig.savefig(run_dir / f"tcl_elastic_{stage}.png")
    return out
