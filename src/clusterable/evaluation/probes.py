"""Classifier probes: scikit-learn classifiers fit on the training split's representation, scored on a test split.

Safir 2022 ("Variational Autoencoders for Semi-Supervised Deep Metric Learning", MS thesis, University of Georgia,
§6) embeds a test partition and scores the embeddings with scikit-learn classifiers, a random forest, an MLP and
k-nearest neighbours (Tables 6.1-6.5 print kNN, Table 6.6 a linear classifier, a random forest and kNN), reporting
the accuracy and scikit-learn's ``adjusted_mutual_info_score`` of the predicted labels (the thesis's tables head
that column "MI"; its §6.1.7 says AMI). The thesis does not publish the classifiers' settings: every setting here
is our choice, scikit-learn's default wherever the time budget allows: the three default probes on 10,000 x 10
training and test embeddings (10 overlapping blobs) in <= 5 s on 2 CPU cores. Measured (``scripts/bench.py --only
probes``): 4.5 s on idle cores (kNN 0.55 s, forest 2.4 s, MLP 1.5 s; accuracy 0.96, 0.96, 0.97), 4.9-5.2 s
while another process kept a core busy.

Each probe is fit on the training split with all its labels (the labels before ``dataset.labelled_percent`` hid
some: the probes measure the representation, not the semi-supervised labels the model saw).
"""

from __future__ import annotations

import numbers
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
from sklearn import metrics
from sklearn.base import ClassifierMixin
from sklearn.ensemble import RandomForestClassifier
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import LogisticRegression
from sklearn.neighbors import KNeighborsClassifier
from sklearn.neural_network import MLPClassifier
from threadpoolctl import threadpool_limits
from torch import Tensor

from clusterable.arrays import to_numpy
from clusterable.contracts import EvalContext

CLASSIFIERS = ("knn", "rf", "mlp", "linear")
# The thesis's three (§6); "linear" is the extra column of its Table 6.6.
DEFAULT_CLASSIFIERS = ("knn", "rf", "mlp")
# Scale-sensitive probes, fit on z-scored features when ``standardize``: the MLP's initialisation and Adam steps
# and the logistic regression's L2 penalty assume unit-scale inputs. kNN and the random forest see the raw
# embeddings: the forest is invariant to per-feature scaling, and kNN's Euclidean metric is the embedding's own
# geometry, which is what a metric-learning representation is trained for.
SCALED = ("mlp", "linear")
SCORES = ("acc", "ami")


def _is_int(value: object) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def _classifier(
    name: str,
    seed: int,
    knn_neighbors: int,
    rf_trees: int,
    rf_max_depth: int | None,
    mlp_hidden: Sequence[int],
    mlp_max_iter: int,
    linear_max_iter: int,
    num_threads: int,
) -> ClassifierMixin:
    """An unfitted scikit-learn classifier for probe ``name``; settings not named here are scikit-learn's."""
    if name == "knn":  # Euclidean, uniform votes (a tie goes to the smallest label, scikit-learn's rule)
        return KNeighborsClassifier(n_neighbors=knn_neighbors, n_jobs=num_threads)
    if name == "rf":
        return RandomForestClassifier(
            n_estimators=rf_trees, max_depth=rf_max_depth, random_state=seed, n_jobs=num_threads
        )
    if name == "mlp":  # ReLU, Adam (lr 1e-3), batches of 200, L2 1e-4: scikit-learn's defaults
        return MLPClassifier(hidden_layer_sizes=tuple(mlp_hidden), max_iter=mlp_max_iter, random_state=seed)
    # Multinomial logistic regression, L2 with C = 1, lbfgs (deterministic: no seed needed).
    return LogisticRegression(max_iter=linear_max_iter)


def _standardized(train_x: np.ndarray, test_x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``train_x`` (M, D) and ``test_x`` (N, D) z-scored with the training rows' mean and standard deviation
    (computed in float64, returned in float32). A constant feature is only centred (a zero deviation would divide
    by zero): it stays 0 in the training rows and carries no weight the probes could learn."""
    mean = train_x.mean(axis=0, dtype=np.float64)
    std = train_x.std(axis=0, dtype=np.float64)
    std[std == 0] = 1.0
    return ((train_x - mean) / std).astype(np.float32), ((test_x - mean) / std).astype(np.float32)


@dataclass(frozen=True)
class Probes:
    """Fit each classifier on the training split's representation and all its labels; score its predictions
    on the split being evaluated by accuracy and adjusted mutual information (Safir 2022, §6).

    Rows labelled ``-1`` are left out of both splits (in the training split, only rows whose label no one ever
    knew: ``context.training_split(all_labels=True)`` gives the labels ``dataset.labelled_percent`` hid). A training
    split of a single class needs no fit: every probe predicts that class (scikit-learn's MLP and logistic
    regression refuse to fit one class). The MLP's ``ConvergenceWarning`` (it stops at ``mlp_max_iter`` epochs
    by design) is silenced; the logistic regression's is not (at 1,000 iterations it means an ill-conditioned
    problem). On a class-disjoint split (retrieval datasets) every test row has a class the probes never saw:
    the accuracy is 0 and only the AMI (an agreement of partitions) is meaningful.

    Args:
        classifiers: a non-empty subset of ``("knn", "rf", "mlp", "linear")``, no name twice; each gives its
            own keys. ``knn``: k-nearest neighbours (Euclidean, uniform votes); ``rf``: a random forest;
            ``mlp``: a multi-layer perceptron (scikit-learn's ReLU/Adam defaults); ``linear``: multinomial
            logistic regression (L2, C = 1).
        knn_neighbors: k; at most the number of labelled training rows fit on. Our choice: 5, scikit-learn's
            default.
        rf_trees, rf_max_depth: the forest's size and the trees' depth limit (None = grown until pure). Our
            choice: 100 and None, scikit-learn's defaults (2.4 s on the bench's 10,000 x 10 training rows).
        mlp_hidden: the MLP's hidden layer widths; our choice: scikit-learn's default (100,).
        mlp_max_iter: the MLP's epochs (passes over the training rows, not steps). Our choice: 50, where
            scikit-learn's 200 took 5.8 s alone on the bench's 10,000 x 10 rows (50: 1.5 s), for the same test
            accuracy (0.968 at 50, 0.964 at 200; on 300- and 1,257-row sets within 0.01 of 200).
        linear_max_iter: lbfgs iterations of the logistic regression; our choice: 1000, not scikit-learn's 100,
            for ``standardize: false``: the bench's raw blobs took 255 iterations (617 scaled by 30), z-scored
            ones 33 (0.07 s).
        standardize: z-score the features with the training rows' mean and standard deviation before the
            ``mlp`` and ``linear`` probes (scale-sensitive); ``knn`` and ``rf`` always get the raw embeddings.
        max_train: fit on a seeded random subset of at most this many labelled training rows (None = all): the
            forest and the MLP cost time in proportion to the training rows.
        num_threads: BLAS/OpenMP threads (threadpoolctl) and ``n_jobs`` of kNN and the forest. One by default:
            torch and scikit-learn each bring an OpenMP runtime, which contend on a small machine.
    Raises:
        ValueError: an option out of range, when built (the message starts with its name).
    """

    classifiers: Sequence[Literal["knn", "rf", "mlp", "linear"]] = DEFAULT_CLASSIFIERS
    knn_neighbors: int = 5
    rf_trees: int = 100
    rf_max_depth: int | None = None
    mlp_hidden: Sequence[int] = (100,)
    mlp_max_iter: int = 50
    linear_max_iter: int = 1000
    standardize: bool = True
    max_train: int | None = None
    num_threads: int = 1

    def __post_init__(self) -> None:
        classifiers, mlp_hidden = self.classifiers, self.mlp_hidden
        unknown = isinstance(classifiers, str) or any(c not in CLASSIFIERS for c in classifiers)
        if unknown or len(classifiers) == 0:
            raise ValueError(f"classifiers must be a non-empty subset of {list(CLASSIFIERS)}, got {classifiers!r}")
        if len(set(classifiers)) != len(classifiers):
            raise ValueError(f"classifiers must not name a classifier twice, got {list(classifiers)}")
        for name, value in (
            ("knn_neighbors", self.knn_neighbors),
            ("rf_trees", self.rf_trees),
            ("mlp_max_iter", self.mlp_max_iter),
            ("linear_max_iter", self.linear_max_iter),
            ("num_threads", self.num_threads),
        ):
            if not _is_int(value) or value < 1:
                raise ValueError(f"{name} must be an integer >= 1, got {value!r}")
        for name, value in (("rf_max_depth", self.rf_max_depth), ("max_train", self.max_train)):
            if value is not None and (not _is_int(value) or value < 1):
                raise ValueError(f"{name} must be an integer >= 1 or null, got {value!r}")
        widths = not isinstance(mlp_hidden, str) and all(_is_int(h) and h >= 1 for h in mlp_hidden)
        if not widths or len(mlp_hidden) == 0:
            raise ValueError(f"mlp_hidden must be a non-empty list of integers >= 1, got {mlp_hidden!r}")
        if not isinstance(self.standardize, bool):
            raise ValueError(f"standardize must be true or false, got {self.standardize!r}")
        # Tuples: the config's lists arrive as OmegaConf ListConfigs, and a frozen evaluator holds no mutable list.
        object.__setattr__(self, "classifiers", tuple(str(c) for c in classifiers))
        object.__setattr__(self, "mlp_hidden", tuple(int(h) for h in mlp_hidden))

    def metric_names(self) -> list[str]:
        """The keys ``__call__`` returns, in its order (no stage prefix): ``{classifier}/acc`` and
        ``{classifier}/ami`` for every classifier, in the order given."""
        return [f"{name}/{score}" for name in self.classifiers for score in SCORES]

    def __call__(self, embeddings: Tensor, labels: Tensor, context: EvalContext) -> dict[str, float]:
        """``metric_names()``: ``{"{classifier}/acc", "{classifier}/ami": float}``; NaN for every key when no row
        of the evaluated split is labelled.

        Args:
            embeddings: (N, D') the evaluated split's representation. labels: (N,) its labels, ``-1`` =
                unlabelled.
            context: ``context.training_split(all_labels=True)`` gives the training representation (M, D') and
                its labels (M,); ``context.seed`` seeds the random forest, the MLP and the ``max_train`` sample.
        Raises:
            ValueError: mismatched shapes, non-finite embeddings, no labelled training row, ``knn_neighbors``
                larger than the labelled training rows fit on, or no training split (during model selection).
        """
        names, classifiers = self.metric_names(), self.classifiers
        train_embeddings, train_labels = context.training_split(all_labels=True)
        # float32: the forest's own dtype (it would copy float64 to float32), and half the MLP's arithmetic.
        x, y = to_numpy(embeddings).astype(np.float32, copy=False), to_numpy(labels).astype(np.int64).ravel()
        train_x = to_numpy(train_embeddings).astype(np.float32, copy=False)
        train_y = to_numpy(train_labels).astype(np.int64).ravel()
        if x.ndim != 2 or len(x) != len(y):
            raise ValueError(f"embeddings must be (N, D) and labels (N,), got {x.shape} and {y.shape}")
        if train_x.ndim != 2 or len(train_x) != len(train_y) or train_x.shape[1] != x.shape[1]:
            raise ValueError(
                f"the training representation must be (M, {x.shape[1]}) and its labels (M,), "
                f"got {train_x.shape} and {train_y.shape}"
            )
        x, y = x[y >= 0], y[y >= 0]
        train_x, train_y = train_x[train_y >= 0], train_y[train_y >= 0]
        if len(train_y) == 0:
            raise ValueError("the training labels must mark at least one row as labelled (>= 0); all are -1")
        if self.max_train is not None and len(train_y) > self.max_train:
            rng = np.random.default_rng(context.seed)
            rows = np.sort(rng.choice(len(train_y), size=self.max_train, replace=False))
            train_x, train_y = train_x[rows], train_y[rows]
        if "knn" in classifiers and self.knn_neighbors > len(train_y):
            raise ValueError(
                f"knn_neighbors must be <= {len(train_y)}, the labelled training rows the probes are fit on, "
                f"got {self.knn_neighbors}"
            )
        if not (np.isfinite(x).all() and np.isfinite(train_x).all()):
            raise ValueError("embeddings must be finite; they contain NaN or inf (did training diverge?)")
        if len(y) == 0:
            return dict.fromkeys(names, float("nan"))

        classes = np.unique(train_y)
        scaled = _standardized(train_x, x) if self.standardize and any(c in SCALED for c in classifiers) else None
        out: dict[str, float] = {}
        with threadpool_limits(limits=self.num_threads):
            for name in classifiers:
                if len(classes) == 1:
                    pred = np.full(len(y), classes[0])
                else:
                    fit_x, test_x = scaled if scaled is not None and name in SCALED else (train_x, x)
                    clf = _classifier(
                        name,
                        context.seed,
                        self.knn_neighbors,
                        self.rf_trees,
                        self.rf_max_depth,
                        self.mlp_hidden,
                        self.mlp_max_iter,
                        self.linear_max_iter,
                        self.num_threads,
                    )
                    with warnings.catch_warnings():
                        if name == "mlp":  # it stops at mlp_max_iter epochs by design; errors still raise
                            warnings.simplefilter("ignore", ConvergenceWarning)
                        clf.fit(fit_x, train_y)
                    pred = clf.predict(test_x)
                out[f"{name}/acc"] = float(np.mean(pred == y))
                out[f"{name}/ami"] = float(metrics.adjusted_mutual_info_score(y, pred))
        return {name: out[name] for name in names}
