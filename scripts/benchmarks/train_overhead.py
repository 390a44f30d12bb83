"""One epoch through the framework (LightningModule + Trainer + in-memory batches) against a plain PyTorch loop;
2x500 LeakyReLU FFNN + CCE, 55,000 x 784 random data, batch 128. Goal: ratio <= 1.2."""

from __future__ import annotations

import torch

from .loops import overhead


def measure() -> dict:
    """Seconds of one epoch of each path (``loops.overhead``: the best of 3 alternated runs after a warm-up) and
    their ratio, framework / plain."""
    from clusterable.heads import CCELoss
    from clusterable.models import FFNN

    g = torch.Generator().manual_seed(0)
    split = {
        "inputs": torch.rand(55_000, 784, generator=g),
        "labels": torch.randint(0, 10, (55_000,), generator=g),
    }
    splits = {"train": split, "val": split, "test": split}

    def make():
        enc = FFNN((784,), hidden=(500, 500))
        return enc, CCELoss(num_classes=10, embedding_dim=enc.embedding_dim)

    plain, framework = overhead(splits, make, 128, 1)
    return {
        "train_overhead_ratio": framework / plain,
        "train_overhead_plain_s": plain,
        "train_overhead_framework_s": framework,
    }
