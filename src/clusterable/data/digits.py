"""scikit-learn's bundled 8x8 digits (1,797 images, 10 classes): the offline default dataset."""

from __future__ import annotations

import torch
from sklearn.datasets import load_digits

from clusterable.data.datamodule import Split, split_off


def read_digits(
    val_fraction: float = 0.15, test_fraction: float = 0.15, split_seed: int = 0
) -> dict[str, Split]:
    """Fixed, stratified, seeded train/val/test split of the digits; pixels scaled from 0..16 to [0, 1].

    Returns splits with ``inputs`` (N, 64) and ``labels`` (N,).
    """
    if not (0 < val_fraction < 1 and 0 < test_fraction < 1 and val_fraction + test_fraction < 1):
        raise ValueError("val_fraction and test_fraction must be in (0, 1) and sum to less than 1")
    x, y = load_digits(return_X_y=True)
    full = {
        "inputs": torch.tensor(x / 16.0, dtype=torch.float32),
        "labels": torch.tensor(y, dtype=torch.long),
    }
    rest, test = split_off(full, test_fraction, seed=split_seed)
    train, val = split_off(rest, val_fraction / (1 - test_fraction), seed=split_seed + 1)
    return {"train": train, "val": val, "test": test}
