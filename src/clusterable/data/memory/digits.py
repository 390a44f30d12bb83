"""scikit-learn's bundled 8x8 digits (1,797 images, 10 classes): the offline default dataset."""

from __future__ import annotations

from collections.abc import Sequence

import torch
from sklearn.datasets import load_digits

from clusterable.data.splits import Split, split_off


def read_digits(val_fraction: float = 0.15, test_fraction: float = 0.15, split_seed: int = 0) -> dict[str, Split]:
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


def read_digits_zeroshot(
    train_classes: Sequence[int] = (0, 1, 2, 3, 4),
    val_classes: Sequence[int] | None = None,
    test_classes: Sequence[int] = (5, 6, 7, 8, 9),
) -> dict[str, Split]:
    """The digits split by class, as deep-metric-learning benchmarks split theirs (CUB-200: classes 1-100 train,
    101-200 test): the test classes are never seen in training, and retrieval and clustering are scored on them.

    Training labels are the positions of the digits in ``train_classes`` (0..K-1, what a classifier head
    predicts); validation and test labels are the digits themselves (class ids of their own). ``val_classes``
    null makes the test split the validation split too (Boudiaf et al. 2020's model selection on the test set);
    otherwise its classes are held out of training (class-disjoint validation, the default for new work).
    Pixels scaled from 0..16 to [0, 1]; splits with ``inputs`` (N, 64) and ``labels`` (N,).
    """
    groups = {"train_classes": train_classes, "test_classes": test_classes, "val_classes": val_classes or ()}
    for name, classes in groups.items():
        if any(not 0 <= c <= 9 for c in classes) or len(set(classes)) != len(classes):
            raise ValueError(f"{name} must be distinct digits in 0..9, got {list(classes)}")
    if not train_classes or not test_classes:
        raise ValueError("train_classes and test_classes must each name at least one digit")
    used = [c for classes in groups.values() for c in classes]
    if len(set(used)) != len(used):
        raise ValueError(f"train_classes, val_classes and test_classes must not share a digit, got {groups}")
    x, y = load_digits(return_X_y=True)
    inputs, labels = torch.tensor(x / 16.0, dtype=torch.float32), torch.tensor(y, dtype=torch.long)

    def rows(classes: Sequence[int], relabel: bool) -> Split:
        keep = torch.isin(labels, torch.tensor(list(classes)))
        kept = labels[keep]
        if relabel:
            kept = torch.tensor([list(classes).index(int(c)) for c in kept], dtype=torch.long)
        return {"inputs": inputs[keep], "labels": kept}

    test = rows(test_classes, relabel=False)
    return {"train": rows(train_classes, True), "val": rows(val_classes, False) if val_classes else test, "test": test}
