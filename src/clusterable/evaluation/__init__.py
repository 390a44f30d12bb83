"""Evaluators: ``fn(embeddings (N, D'), labels (N,), context, *, options) -> dict[str, float]``.

``context`` is a ``clusterable.contracts.EvalContext``; the options are keyword-only and bound by the config
(``conf/evaluator/*.yaml``, ``_partial_: true``). Metric names carry no stage prefix (the runner adds it).

``latent_plot`` is exported as the module, not its function of the same name: a package attribute holding
the function would shadow the submodule, and Hydra could no longer locate ``...latent_plot.latent_plot``.
"""

from clusterable.evaluation import latent_plot
from clusterable.evaluation.classification import accuracy
from clusterable.evaluation.clustering import cluster_metrics, hungarian_accuracy

__all__ = ["accuracy", "cluster_metrics", "hungarian_accuracy", "latent_plot"]
