"""How well embeddings cluster: k-means and a Gaussian mixture with K = #classes, scored against the labels.

COREL's Tables 3-4 (Kenyon-Dean et al. 2019): Hungarian-matched accuracy, ARI, V-measure and the silhouette
of the representations w.r.t. the predicted clusters, for K-Means and a GMM. NMI and AMI are added because the
DSCL and VAE-DML papers report them. Fitting and scoring are scikit-learn's (k-means optionally our torch
implementation, ``kmeans_backend=torch``, for thousands of clusters); matching is scipy's Hungarian solver.
DSCL's two protocols (Law et al. 2017, "Deep Spectral Clustering Learning", ICML): "without SC", k-means on the
l2-normalised embeddings (``l2_normalize``), and "with SC", k-means on the spectral rows of Algorithm 2 (the
``sc`` method, ``clusterable.evaluation.spectral``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
import torch
from scipy.optimize import linear_sum_assignment
from sklearn import metrics
from sklearn.cluster import KMeans
from sklearn.mixture import GaussianMixture
from threadpoolctl import threadpool_limits
from torch import Tensor

from clusterable.arrays import to_numpy, to_tensor
from clusterable.contracts import EvalContext
from clusterable.evaluation.kmeans import kmeans as torch_kmeans
from clusterable.evaluation.kmeans import reported
from clusterable.evaluation.spectral import spectral_rows

METHODS = ("kmeans", "gmm", "sc")
DEFAULT_METHODS = ("kmeans", "gmm")  # COREL's two; sc costs an SVD and is DSCL's
COVARIANCE_TYPES = ("full", "tied", "diag", "spherical")  # scikit-learn's GaussianMixture
KMEANS_BACKENDS = ("sklearn", "torch")
_TINY = float(np.finfo(np.float64).tiny)


def hungarian_accuracy(y_true: np.ndarray | Tensor, y_pred: np.ndarray | Tensor) -> float:
    """Accuracy under the one-to-one cluster-to-class map that maximises it.

    ``acc = max_m (1/N) sum_i 1[y_i = m(c_i)]`` over injective maps m (clusters to classes), solved by the
    Hungarian algorithm on the (classes, clusters) contingency matrix. With more clusters than classes the
    unmatched clusters count as wrong, and vice versa.

    Args:
        y_true: (N,) class labels. y_pred: (N,) cluster ids; any integers.
    """
    y_true, y_pred = to_numpy(y_true).ravel(), to_numpy(y_pred).ravel()
    if len(y_true) != len(y_pred):
        raise ValueError(f"y_true and y_pred must have the same length, got {len(y_true)} and {len(y_pred)}")
    if len(y_true) == 0:
        return float("nan")
    table = metrics.cluster.contingency_matrix(y_true, y_pred)
    rows, cols = linear_sum_assignment(table, maximize=True)
    return float(table[rows, cols].sum() / len(y_true))


def _fit_predict(
    method: str,
    x: np.ndarray,
    k: int,
    seed: int,
    kmeans_n_init: int,
    gmm_covariance_type: str,
    gmm_n_init: int,
    gmm_max_iter: int,
    kmeans_backend: str = "sklearn",
    x_torch: Tensor | None = None,
) -> np.ndarray:
    """(N,) cluster ids of ``method`` on the labelled rows ``x`` (N, D) float64; ``x_torch`` (N, D) is the same
    rows as a tensor on the embeddings' device, for the torch k-means backend and ``sc``."""
    if method == "sc":
        assert x_torch is not None
        rows = spectral_rows(x_torch)  # (N, r), on the embeddings' device
        if kmeans_backend == "torch":
            return torch_kmeans(rows, k, seed, n_init=kmeans_n_init)[0].cpu().numpy()
        with reported(*rows.shape, k, kmeans_n_init):
            return KMeans(n_clusters=k, n_init=kmeans_n_init, random_state=seed).fit_predict(rows.cpu().numpy())
    if method == "kmeans" and kmeans_backend == "torch" and x_torch is not None:
        assignment, _ = torch_kmeans(x_torch, k, seed, n_init=kmeans_n_init)
        return assignment.cpu().numpy()
    if method == "kmeans":
        # scikit-learn's Lloyd loop runs natively in float32, twice as fast as in float64 (10k x 64: 0.04 s).
        x32 = x.astype(np.float32)
        with reported(*x32.shape, k, kmeans_n_init):
            return KMeans(n_clusters=k, n_init=kmeans_n_init, random_state=seed).fit_predict(x32)
    gmm = GaussianMixture(
        n_components=k,
        covariance_type=gmm_covariance_type,
        n_init=gmm_n_init,
        max_iter=gmm_max_iter,
        random_state=seed,
    )
    return gmm.fit_predict(x)


def _silhouette(distances: np.ndarray, pred: np.ndarray) -> float:
    """Mean silhouette from (n, n) Euclidean distances and (n,) clusters; NaN where it is undefined."""
    n_clusters = len(np.unique(pred))
    if not 2 <= n_clusters <= len(pred) - 1:
        return float("nan")
    return float(metrics.silhouette_score(distances, pred, metric="precomputed"))


@dataclass(frozen=True)
class ClusterMetrics:
    """Cluster the labelled embeddings with each method and score the clusters against the labels.

    Args:
        num_clusters: K; None = the number of distinct labels (COREL: K = number of classes).
        methods: a non-empty subset of ``("kmeans", "gmm", "sc")``. ``sc``: DSCL's spectral clustering (Law et
            al. 2017, Algorithm 2): k-means (``kmeans_backend``, ``kmeans_n_init``) on ``spectral_rows`` of the
            labelled embeddings, the l2-normalised rows of the leading left singular vectors of the centred
            embeddings; DSCL's NMI "with SC".
        silhouette_sample: size of the seeded sample the silhouette is computed on (it costs O(n^2));
            None = all rows.
        kmeans_n_init, gmm_covariance_type, gmm_n_init, gmm_max_iter: scikit-learn settings.
        num_threads: BLAS/OpenMP threads while clustering; None = the libraries' default. One is the default
            because torch and scikit-learn each bring an OpenMP runtime, and the two spinning against each
            other (or against other processes) made 2 threads 5-10x slower than 1 on a 2-core machine.
        kmeans_backend: ``sklearn`` (scikit-learn's KMeans, k-means++ and ``kmeans_n_init`` restarts) or
            ``torch`` (``clusterable.evaluation.kmeans``: Lloyd's iterations in matmuls on the embeddings'
            device, random distinct rows as the start above 256 clusters, ``kmeans_n_init`` starts), for many
            clusters (SOP's 11,316 classes), where scikit-learn's k-means++ alone is 11,316 sequential steps
            that each compare 11 candidates with every point.
        ami: whether to compute AMI. scikit-learn's expected mutual information grows with the number of
            clusters: 37 s at 60,502 points in 11,316 classes and 11,316 clusters (SOP's test split; 2 busy
            cores), when ARI, NMI and V-measure take < 0.1 s; ``ami: false`` leaves the key out.
        l2_normalize: divide each embedding by its l2 norm before ``kmeans`` and ``gmm`` (a zero row stays
            zero): DSCL's NMI "without SC" (Law et al. 2017). Not before ``sc``, whose Algorithm 2
            centres the embeddings as they are.
        key_prefix: put before every key (``"l2/"`` gives ``l2/kmeans/acc``), so that two clustering nodes in
            one run, raw and l2-normalised (``evaluator=[clustering,clustering_l2]``), keep their numbers apart.
    Raises:
        ValueError: an option out of range, when built (the message starts with its name).
    """

    num_clusters: int | None = None
    methods: Sequence[str] = DEFAULT_METHODS
    silhouette_sample: int | None = 2000
    kmeans_n_init: int = 3
    gmm_covariance_type: str = "diag"
    gmm_n_init: int = 2
    gmm_max_iter: int = 100
    num_threads: int | None = 1
    kmeans_backend: Literal["sklearn", "torch"] = "sklearn"
    ami: bool = True
    l2_normalize: bool = False
    key_prefix: str = ""

    def __post_init__(self) -> None:
        methods = self.methods
        if self.num_clusters is not None and self.num_clusters < 1:
            raise ValueError(f"num_clusters must be >= 1 or null, got {self.num_clusters}")
        if isinstance(methods, str) or not methods or any(m not in METHODS for m in methods):
            raise ValueError(f"methods must be a non-empty subset of {list(METHODS)}, got {methods!r}")
        if self.silhouette_sample is not None and self.silhouette_sample < 2:
            raise ValueError(f"silhouette_sample must be >= 2 or null, got {self.silhouette_sample}")
        if self.gmm_covariance_type not in COVARIANCE_TYPES:
            raise ValueError(
                f"gmm_covariance_type must be one of {list(COVARIANCE_TYPES)}, got {self.gmm_covariance_type!r}"
            )
        for name, value in (
            ("kmeans_n_init", self.kmeans_n_init),
            ("gmm_n_init", self.gmm_n_init),
            ("gmm_max_iter", self.gmm_max_iter),
        ):
            if value < 1:
                raise ValueError(f"{name} must be >= 1, got {value}")
        if self.num_threads is not None and self.num_threads < 1:
            raise ValueError(f"num_threads must be >= 1 or null, got {self.num_threads}")
        if self.kmeans_backend not in KMEANS_BACKENDS:
            raise ValueError(f"kmeans_backend must be one of {list(KMEANS_BACKENDS)}, got {self.kmeans_backend!r}")
        if not isinstance(self.l2_normalize, bool):
            raise ValueError(f"l2_normalize must be true or false, got {self.l2_normalize!r}")
        if not isinstance(self.key_prefix, str) or any(c.isspace() for c in self.key_prefix):
            raise ValueError(f"key_prefix must be a string without spaces (e.g. 'l2/'), got {self.key_prefix!r}")
        # A tuple: the config's list arrives as an OmegaConf ListConfig, and a frozen evaluator holds no list.
        object.__setattr__(self, "methods", tuple(str(m) for m in methods))

    def metric_names(self) -> list[str]:
        """The keys ``__call__`` returns, in its order (no stage prefix): ``{key_prefix}{method}/{name}`` for name
        in acc, ari, nmi, ami (if ``ami``), v_measure, silhouette, for every method."""
        names = ("acc", "ari", "nmi", *(("ami",) if self.ami else ()), "v_measure", "silhouette")
        return [f"{self.key_prefix}{method}/{name}" for method in self.methods for name in names]

    def __call__(self, embeddings: Tensor, labels: Tensor, context: EvalContext) -> dict[str, float]:
        """``{f"{key_prefix}{method}/{name}": float}`` for name in acc (Hungarian), ari, nmi, ami (if ``ami``),
        v_measure, silhouette. The silhouette is always that of the embeddings as given (Euclidean, whatever
        ``l2_normalize``, and for ``sc`` too), so that the methods' silhouettes compare.

        Args:
            embeddings: (N, D) the representation. labels: (N,) class labels; ``-1`` (unlabelled) rows are left
                out.
            context: ``context.seed`` is the random state of k-means, the GMM and the silhouette sample.
        Raises:
            ValueError: mismatched shapes, non-finite embeddings, no labelled row, ``num_clusters`` above the
                labelled rows, or (``sc``) labelled embeddings of rank 0 once centred.
        """
        methods, backend, seed = self.methods, self.kmeans_backend, context.seed
        x, y = to_numpy(embeddings), to_numpy(labels).astype(np.int64).ravel()
        if x.ndim != 2 or len(x) != len(y):
            raise ValueError(f"embeddings must be (N, D) and labels (N,), got {x.shape} and {y.shape}")
        # The torch backend clusters the labelled rows where the embeddings are (the GPU during training).
        x_torch = None
        if (backend == "torch" and "kmeans" in methods) or "sc" in methods:
            rows = to_tensor(embeddings)
            x_torch = rows[torch.from_numpy(y >= 0).to(rows.device)]
        # float64 keeps the GMM's variance estimates (E[x^2] - E[x]^2) from cancelling to <= 0 on large-valued
        # embeddings, at ~25% more time than float32; k-means, which has no such cancellation, runs in float32.
        x, y = x[y >= 0].astype(np.float64), y[y >= 0]
        if not np.isfinite(x).all():
            raise ValueError("embeddings must be finite; they contain NaN or inf (did training diverge?)")
        x_raw, x_kmeans_torch = x, x_torch  # x_raw: the silhouette's space; x_torch: sc's input
        if self.l2_normalize:  # DSCL "without SC"; a zero row stays zero
            x = x / np.maximum(np.linalg.norm(x, axis=1, keepdims=True), _TINY)
            if x_torch is not None:
                x_float = x_torch.to(torch.float64 if x_torch.dtype == torch.float64 else torch.float32)
                x_kmeans_torch = x_float / x_float.norm(dim=1, keepdim=True).clamp_min(_TINY)
        if len(y) == 0:
            raise ValueError("labels must mark at least one sample as labelled (>= 0); all are -1")
        k = len(np.unique(y)) if self.num_clusters is None else int(self.num_clusters)
        if not 1 <= k <= len(y):
            raise ValueError(f"num_clusters must be in [1, {len(y)}] (the number of labelled samples), got {k}")

        # One seeded sample shared by every method, so their silhouettes are computed on the same points.
        size = len(y) if self.silhouette_sample is None else min(len(y), self.silhouette_sample)
        sample = np.sort(np.random.default_rng(seed).choice(len(y), size=size, replace=False))
        out: dict[str, float] = {}
        with threadpool_limits(limits=self.num_threads):
            # Distances computed once for all methods; sklearn's silhouette would recompute them per call.
            distances = metrics.pairwise_distances(x_raw[sample])
            np.fill_diagonal(distances, 0.0)
            for method in methods:
                pred = _fit_predict(
                    method,
                    x,
                    k,
                    seed,
                    self.kmeans_n_init,
                    self.gmm_covariance_type,
                    self.gmm_n_init,
                    self.gmm_max_iter,
                    backend,
                    x_torch if method == "sc" else x_kmeans_torch,
                )
                out[f"{method}/acc"] = hungarian_accuracy(y, pred)
                out[f"{method}/ari"] = float(metrics.adjusted_rand_score(y, pred))
                out[f"{method}/nmi"] = float(metrics.normalized_mutual_info_score(y, pred))
                if self.ami:
                    out[f"{method}/ami"] = float(metrics.adjusted_mutual_info_score(y, pred))
                out[f"{method}/v_measure"] = float(metrics.v_measure_score(y, pred))
                out[f"{method}/silhouette"] = _silhouette(distances, pred[sample])
        return {f"{self.key_prefix}{key}": value for key, value in out.items()}
