"""What every reader returns and every datamodule holds: splits of per-row tensors, and a seeded hold-out.

A split is a dict of tensors with a common first dimension N: ``labels`` (N,) long (``-1`` marks an unlabelled
row), and what the wing's datamodule needs besides (in-memory and text splits: ``inputs``; image-folder splits
hold no pixels, only ``labels`` and flags such as In-Shop's ``is_query``). Readers return the splits ``SPLITS``.
"""

from __future__ import annotations

import torch

Split = dict[str, torch.Tensor]


class SplitsWithNotes(dict):
    """A reader's splits (``{"train": Split, ...}``) with ``notes`` on what reading them did (the files read and
    their checksums): ``InMemoryDataModule`` keeps them as its ``notes``, recorded as ``data_notes``."""

    def __init__(self, splits: dict[str, Split], notes: dict):
        super().__init__(splits)
        self.notes = notes


SPLITS = ("train", "val", "test")


def split_off(split: Split, fraction_or_count: float, seed: int, stratify: bool = True) -> tuple[Split, Split]:
    """Split ``split`` into (rest, held_out), seeded and (by default) stratified by label.

    ``fraction_or_count`` < 1 is a fraction of the samples, otherwise a count.
    """
    labels = split["labels"]
    n = len(labels)
    count = int(round(fraction_or_count * n)) if fraction_or_count < 1 else int(fraction_or_count)
    if not 0 < count < n:
        raise ValueError(f"cannot hold out {fraction_or_count} of {n} samples")
    g = torch.Generator().manual_seed(seed)
    order = torch.randperm(n, generator=g)
    if stratify:
        # Take from each class in proportion: sort the permutation by label, then deal out every n/count-th.
        by_class = order[torch.argsort(labels[order], stable=True)]
        pick = torch.zeros(n, dtype=torch.bool)
        pick[by_class[(torch.arange(count) * n) // count]] = True
        held = order[pick[order]]
        rest = order[~pick[order]]
    else:
        held, rest = order[:count], order[count:]
    return {k: v[rest] for k, v in split.items()}, {k: v[held] for k, v in split.items()}
