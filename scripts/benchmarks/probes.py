"""The classifier probes (kNN, random forest, MLP; their defaults) fit on 10,000 x 10 training embeddings (10
overlapping blobs) and scored on 10,000 test rows; seconds and accuracy of each, and of the three in one call.
Goal: <= 5 s."""

from __future__ import annotations

import torch

from .common import best_of


def measure() -> dict:
    """Best-of-3 seconds and the accuracy of each default probe alone, then best-of-3 seconds of the three in one
    call, after a warm-up on 100 test rows."""
    from sklearn.datasets import make_blobs

    from clusterable.contracts import EvalContext
    from clusterable.evaluation.probes import DEFAULT_CLASSIFIERS, Probes

    # 10 blobs in 10-D whose spread makes them overlap (the probes score ~0.96, not 1): training and test rows.
    x, y = make_blobs(20_000, 10, centers=10, cluster_std=4.0, random_state=0)
    x, y = torch.tensor(x, dtype=torch.float32), torch.tensor(y)
    train_x, train_y, test_x, test_y = x[:10_000], y[:10_000], x[10_000:], y[10_000:]
    context = EvalContext(
        "test",
        {},
        torch.nn.Identity(),
        test_x,
        train_embeddings=train_x,
        train_labels=train_y,
        train_all_labels=train_y,
    )

    def score(classifiers: tuple[str, ...], n: int = len(test_y)) -> dict:
        return Probes(classifiers=classifiers)(test_x[:n], test_y[:n], context)

    score(DEFAULT_CLASSIFIERS, 100)  # warm-up (imports, thread pools)
    out = {}
    for name in DEFAULT_CLASSIFIERS:
        out[f"probes_{name}_s"] = best_of(lambda name=name: score((name,)))
        out[f"probes_{name}_acc"] = score((name,))[f"{name}/acc"]
    out["probes_total_s"] = best_of(lambda: score(DEFAULT_CLASSIFIERS))
    return out
