"""The synthetic Gaussian-line datasets of the cluster-specific AE papers (Sabanayagam et al. 2024, §III-B and
appendix §VIII-B; the authors' code: github.com/mahalakshmi-sabanayagam/cluster_specific_representation,
``src/data.py``).

Each cluster i is ``n / C`` points from ``N(mu_i, Sigma_i)`` in ``dim(mu)`` dimensions, followed by 3
"dummy" columns of ``N(0, 0.1^2)`` noise, so ``d = dim(mu) + 3``. Rows are ordered by cluster (label i).
The draws replay the authors' ``sample_data`` (``src/data.py``, identical in ``data.py`` of
github.com/mahalakshmi-sabanayagam/tensorized, Esser et al. 2023) on NumPy's legacy global generator seeded
with 0, in their order: for each cluster, its Gaussian block, then its dummy block; after all clusters, the
additive noise of the noisy copy. So the points are the authors' exact points.
"""

from __future__ import annotations

import numpy as np
import torch

from clusterable.data.splits import Split

# name -> (cluster means, cluster covariances, n), from the authors' src/data.py. They add
# `np.random.normal(0, 0, ...)` to some of them: exactly zero, drawn before the seed is set, so left out.
_DEFINITIONS: dict[str, tuple[list[list[float]], list[list[list[float]]], int]] = {
    "parallel_lines": ([[-1, -1], [4, -2]], [[[5, 4.95], [4.95, 5]], [[5, 4.95], [4.95, 5]]], 150),
    "orthogonal": ([[-1, -1], [7, 7]], [[[5, 4.9], [4.9, 5]], [[5, -4.9], [-4.9, 5]]], 150),
    "triangle": (
        [[-1, -1], [6, 6], [5, -5]],
        [[[5, 4.9], [4.9, 5]], [[5, -4.5], [-4.5, 5]], [[7, 0], [0, 1]]],
        150,
    ),
    "lines_3d": (
        [[2, 0, 0], [0, 0, 4], [2, 2, 3]],
        [
            [[3, 0.01, 0.01], [0.01, 0.01, 0.01], [0.01, 0.01, 0.01]],
            [[0.01, 0.01, 0.01], [0.01, 3, 0.01], [0.01, 0.01, 0.01]],
            [[0.01, 0.01, 0.01], [0.01, 0.01, 0.01], [0.01, 0.01, 3]],
        ],
        300,
    ),
}
NAMES = tuple(_DEFINITIONS)
DUMMY_DIM, DUMMY_STD, SEED = 3, 0.1, 0


def definition(name: str) -> tuple[np.ndarray, np.ndarray, int]:
    """(means (C, p), covariances (C, p, p), n) of dataset ``name``."""
    if name not in _DEFINITIONS:
        raise ValueError(f"name must be one of {', '.join(NAMES)}, got {name!r}")
    means, covs, n = _DEFINITIONS[name]
    return np.asarray(means, dtype=float), np.asarray(covs, dtype=float), n


def make(name: str, noise: float = 0.1) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Generate dataset ``name`` exactly as the authors' code does.

    ============== = === =========================================================
    name           C n   d
    ============== = === =========================================================
    parallel_lines 2 150 5
    orthogonal     2 150 5
    triangle       3 150 5 (the paper says d = 6; the authors' code, followed here, gives 2 + 3 = 5)
    lines_3d       3 300 6
    ============== = === =========================================================

    Args:
        name: one of ``NAMES``.
        noise: std of the Gaussian noise of the noisy copy, >= 0 (the papers use 0.1).
    Returns:
        ``X`` (n, d) float64, ``y`` (n,) int64 cluster ids with rows ordered by cluster, and
        ``X_noisy = X + noise * N(0, 1)`` (n, d), drawn from the same stream after ``X`` (so ``X`` does not
        depend on ``noise``). NumPy's global random state is restored afterwards.
    """
    means, covs, n = definition(name)
    if noise < 0:
        raise ValueError(f"noise must be >= 0, got {noise}")
    c = len(means)
    per = n // c
    state = np.random.get_state()
    try:
        np.random.seed(SEED)
        blocks = []
        for mu, sigma in zip(means, covs, strict=True):  # one block per cluster, drawn in the authors' order
            gaussian = np.random.multivariate_normal(mu, sigma, per)
            dummy = np.random.normal(0, DUMMY_STD, per * DUMMY_DIM).reshape(per, DUMMY_DIM)
            blocks.append(np.concatenate([gaussian, dummy], axis=1))
        x = np.concatenate(blocks, axis=0)
        x_noisy = x + noise * np.random.normal(0, 1, x.size).reshape(x.shape)
    finally:
        np.random.set_state(state)
    y = np.repeat(np.arange(c, dtype=np.int64), per)
    return x, y, x_noisy


def full_splits(inputs: np.ndarray, labels: np.ndarray, targets: np.ndarray | None = None) -> dict[str, Split]:
    """train = val = test = all points, as in the CSRL paper, which trains and evaluates on the same data.

    ``inputs``/``targets`` (N, d) become float32, ``labels`` (N,) int64. The three splits share the tensors.
    """
    split: Split = {
        "inputs": torch.tensor(inputs, dtype=torch.float32),
        "labels": torch.tensor(labels, dtype=torch.long),
    }
    if targets is not None:
        split["targets"] = torch.tensor(targets, dtype=torch.float32)
    return {"train": split, "val": split, "test": split}


def read_synthetic(name: str, noise: float = 0.1, denoise: bool = False) -> dict[str, Split]:
    """Reader for ``InMemoryDataModule``: all points in every split, ``labels`` = cluster ids.

    With ``denoise=True`` the ``inputs`` are the noisy copy and ``targets`` the clean points (the paper's
    de-noising task); otherwise ``inputs`` are the clean points and there are no ``targets``.
    """
    x, y, x_noisy = make(name, noise=noise)
    return full_splits(x_noisy, y, targets=x) if denoise else full_splits(x, y)
