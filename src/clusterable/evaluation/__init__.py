"""Evaluators: functions ``(embeddings, labels, **context) -> dict[str, float]``, metric names unprefixed.

``latent_plot`` is exported as the module, not its function of the same name: a package attribute holding
the function would shadow the submodule, and Hydra could no longer locate ``...latent_plot.latent_plot``.
"""

from clusterable.evaluation import latent_plot
from clusterable.evaluation.classification import accuracy
from clusterable.evaluation.clustering import cluster_metrics, hungarian_accuracy

__all__ = ["accuracy", "cluster_metrics", "hungarian_accuracy", "latent_plot"]
