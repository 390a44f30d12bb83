"""Evaluators: ``evaluator(embeddings (N, D'), labels (N,), context) -> dict[str, float]``.

``context`` is a ``clusterable.contracts.EvalContext``. An evaluator with options is a small frozen dataclass
whose fields are the options (``src/clusterable/conf/evaluator/*.yaml`` sets them; ranges are checked when it is
built) and which declares its keys (``metric_names()``); one without options is a function (``_partial_: true``).
Metric names carry no stage prefix (the runner adds it).

The package imports none of its modules: ``evaluation.runner`` is imported by the training callbacks, which must
not pay for scikit-learn and matplotlib.
"""
