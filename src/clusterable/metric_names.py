"""The rules of metric names: which way a logged metric improves, read from its name.

The ground floor: this module imports nothing of the project, so the config's resolvers (``${monitor_mode:}``), the
run layer's checks and the Optuna sweeper all read the one rule without importing each other.
"""

from __future__ import annotations

from typing import Literal

# Which way a monitored metric improves, by its name (a segment of the key, before any ``@k``): the metrics the
# module and the evaluators log. ``train/<part>`` are the parts of the loss the head minimises.
MAXIMISED = frozenset(
    {
        "acc",
        "accuracy",
        "recall",
        "precision",
        "map",
        "r_precision",
        "nmi",
        "ami",
        "ari",
        "v_measure",
        "silhouette",
        "homogeneity",
        "completeness",
        "purity",
        "f1",
        "auc",
    }
)
MINIMISED = frozenset({"loss", "mse", "mae", "rmse", "error", "nll", "kl", "recon"})


def monitor_direction(key: str) -> Literal["min", "max"] | None:
    """``min`` or ``max``: which way the metric ``key`` (``checkpoint.monitor``) improves, from its name: a
    ``train/`` key is a loss part (min), else the last segment that names a known metric decides
    (``val/recall@1/cos`` max, ``val/kmeans/nmi`` max, ``val/loss`` min); None for a name it does not know (an
    evaluator of one's own: ``val/separation``)."""
    segments = key.split("/")
    if segments[0] == "train":
        return "min"
    for segment in reversed(segments):
        name = segment.split("@")[0].lower()
        if name in MAXIMISED:
            return "max"
        if name in MINIMISED:
            return "min"
    return None


def objective_keys(optimized_metric: object) -> list[str]:
    """The metric keys of an ``optimized_metric``: one key, or a multi-objective search's list; [] for none."""
    if optimized_metric is None:
        return []
    if isinstance(optimized_metric, str):
        return [optimized_metric]
    return [str(m) for m in optimized_metric]  # type: ignore[attr-defined]
