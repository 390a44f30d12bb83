"""Class-disjoint validation for the image-folder datasets: whole training classes held out.

``class_disjoint_validation`` holds out whole training classes as a validation split, the model-selection split
of the metric-learning protocol Musgrave et al. 2020 ("A Metric Learning Reality Check") argue for; Boudiaf et
al.'s own protocol selects the epoch on the test classes themselves (``ImageDataModule``'s ``validation: test``).
"""

from __future__ import annotations

import torch

__all__ = ["class_disjoint_validation"]


def class_disjoint_validation(
    labels: torch.Tensor, val_classes: float | int, seed: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """Hold out a seeded set of whole classes: (train_rows, val_rows), long, each in increasing order.

    Args:
        labels: (N,) the training split's labels.
        val_classes: below 1, the fraction of the classes to hold out (rounded, at least 1); from 1 on, their
            number (an integer).
        seed: the hold-out's seed; the same seed and labels always give the same classes.

    Raises:
        ValueError: ``val_classes`` would hold out no class or every class (the message starts with its name).
    """
    labels = torch.as_tensor(labels).reshape(-1).cpu()
    classes = torch.unique(labels)
    k = len(classes)
    if isinstance(val_classes, bool) or not isinstance(val_classes, int | float) or val_classes <= 0:
        raise ValueError(f"val_classes must be a fraction in (0, 1) or a count >= 1, got {val_classes!r}")
    if val_classes < 1:
        count = max(1, int(round(val_classes * k)))
    elif float(val_classes).is_integer():
        count = int(val_classes)
    else:
        raise ValueError(f"val_classes must be a fraction in (0, 1) or a whole count >= 1, got {val_classes!r}")
    if count >= k:
        raise ValueError(
            f"val_classes ({val_classes}) would hold out {count} of the {k} training classes, leaving none to train on"
        )
    order = torch.randperm(k, generator=torch.Generator().manual_seed(int(seed)))
    held = torch.isin(labels, classes[order[:count]])
    return torch.nonzero(~held).squeeze(1), torch.nonzero(held).squeeze(1)
