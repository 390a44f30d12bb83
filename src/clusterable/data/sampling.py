"""How training batches are drawn, for every datamodule: at random, or class-balanced ("PK") for pairwise losses.

``Sampler`` is the ``dataset.sampler`` config node (``_target_: clusterable.data.sampling.Sampler``) of the
in-memory, image-folder and text datamodules alike: ``kind`` (``random`` or ``class_balanced``) and
``images_per_class`` (null unless ``kind`` is ``class_balanced``); ``RANDOM_BATCHES`` is their default.

``ClassBalancedBatches`` makes batches of ``batch_size / m`` classes with ``m`` images each (the "PK" batches of
Hermans et al. 2017, the usual sampling for pair-based losses) with pytorch-metric-learning's
``samplers.MPerClassSampler``, which is used as it is, not rewritten. Two things about it that this wrapper
makes explicit:

- A class with fewer than ``m`` images does not fail in ``MPerClassSampler``: its ``safe_random_choice`` then
  draws WITH replacement, so a batch holds the same image several times. Here that is an error naming the class.
- Its randomness is ``pytorch_metric_learning.utils.common_functions.NUMPY_RANDOM``, numpy's global RNG by
  default. Here each sampler has its own ``numpy.random.RandomState`` seeded from the run's seed, installed in
  that module attribute only while the epoch's indices are drawn (``MPerClassSampler.__iter__`` draws them
  all at once), so the batches depend on the seed alone and nothing else's randomness is touched.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Literal

import numpy as np
import torch

from clusterable.data.checks import is_int

__all__ = ["DEFAULT_IMAGES_PER_CLASS", "RANDOM_BATCHES", "ClassBalancedBatches", "Sampler"]

DEFAULT_IMAGES_PER_CLASS = 4  # m of class-balanced batches when the config leaves it null (MLRC's m = 4)


@dataclass(frozen=True)
class Sampler:
    """How a datamodule draws its training batches (``dataset.sampler``).

    Args:
        kind: ``"random"``: a new permutation of the training rows every epoch, cut into batches of
            ``batch_size``; ``"class_balanced"``: ``batch_size / images_per_class`` classes of
            ``images_per_class`` rows each (the PK batches pairwise losses need; pytorch-metric-learning's
            ``MPerClassSampler``, see ``ClassBalancedBatches``), as many batches an epoch as random sampling gives.
        images_per_class: m of the class-balanced batches; null (the default) means ``DEFAULT_IMAGES_PER_CLASS``.
            Set with ``kind: random`` it is refused: random batches would silently ignore it. Once built, it
            holds the m a class-balanced batch uses (the default filled in), whatever the kind.

    Raises:
        ValueError: a value out of range, or ``images_per_class`` set for random batches; the message starts with
            the field's name.
    """

    kind: Literal["random", "class_balanced"] = "random"
    images_per_class: int | None = None

    def __post_init__(self) -> None:
        if self.kind not in ("random", "class_balanced"):
            raise ValueError(f"kind must be 'random' or 'class_balanced', got {self.kind!r}")
        if self.images_per_class is None:
            # Filled in so that readers of the field (a fake image source sizes its classes by it) see a number.
            object.__setattr__(self, "images_per_class", DEFAULT_IMAGES_PER_CLASS)
            return
        if not is_int(self.images_per_class) or self.images_per_class < 1:
            raise ValueError(f"images_per_class must be an integer >= 1, got {self.images_per_class!r}")
        if self.kind == "random":
            raise ValueError(
                f"images_per_class={self.images_per_class} is used by class-balanced batches only; "
                "set dataset.sampler.kind=class_balanced, or leave images_per_class null for random "
                "batches"
            )

    @property
    def class_balanced(self) -> bool:
        return self.kind == "class_balanced"

    def batches(
        self, labels: torch.Tensor, batch_size: int, seed: int, batches_per_epoch: int | None = None
    ) -> ClassBalancedBatches | None:
        """The class-balanced batches of the training rows ``labels`` (N,), or None for random batches (the
        datamodule then permutes the rows itself). Raises ``ClassBalancedBatches``' one-line ValueErrors."""
        if not self.class_balanced:
            return None
        return ClassBalancedBatches(labels, batch_size, int(self.images_per_class), seed, batches_per_epoch)


# The datamodules' default: a new permutation every epoch.
RANDOM_BATCHES = Sampler()


class ClassBalancedBatches:
    """Epochs of PK batches: each batch ``batch_size // images_per_class`` distinct classes, ``images_per_class``
    distinct images of each.

    Args:
        labels: (N,) the training rows' labels.
        batch_size: images per batch; a multiple of ``images_per_class``.
        images_per_class: m, images of each class in a batch; at most the smallest class's size.
        seed: the run's seed; the same seed gives the same batches.
        batches_per_epoch: batches an epoch (default ``N // batch_size``, as many as a random sampler with
            ``drop_last``, at least 1).

    Iterating yields one epoch: lists of row indices (into ``labels``), one list per batch; the next iteration
    draws another epoch from the same RNG.

    Raises:
        ValueError: the message starts with the parameter's name, e.g. ``images_per_class (8) exceeds the
            smallest class (5 images, class 3)``.
    """

    def __init__(
        self,
        labels: torch.Tensor,
        batch_size: int,
        images_per_class: int,
        seed: int = 0,
        batches_per_epoch: int | None = None,
    ):
        from pytorch_metric_learning.samplers import MPerClassSampler

        labels = torch.as_tensor(labels).reshape(-1).cpu()
        m = images_per_class
        if isinstance(m, bool) or not isinstance(m, int) or m < 1:
            raise ValueError(f"images_per_class must be a positive integer, got {m!r}")
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise ValueError(f"batch_size must be a positive integer, got {batch_size!r}")
        if batch_size % m:
            raise ValueError(
                f"batch_size ({batch_size}) must be a multiple of images_per_class ({m}) for class-balanced batches"
            )
        if len(labels) == 0:
            raise ValueError("labels must not be empty: there is nothing to sample")
        classes, counts = torch.unique(labels, return_counts=True)
        smallest = int(torch.argmin(counts))
        if int(counts[smallest]) < m:
            raise ValueError(
                f"images_per_class ({m}) exceeds the smallest class ({int(counts[smallest])} images, class "
                f"{int(classes[smallest])}); MPerClassSampler would repeat that class's images within a batch. "
                "Lower images_per_class or use sampler=random"
            )
        per_batch = batch_size // m
        if per_batch > len(classes):
            raise ValueError(
                f"batch_size ({batch_size}) needs {per_batch} classes of {m} images each, but there are only "
                f"{len(classes)} classes; lower batch_size or raise images_per_class"
            )
        if batches_per_epoch is None:
            batches_per_epoch = max(1, len(labels) // batch_size)
        if isinstance(batches_per_epoch, bool) or not isinstance(batches_per_epoch, int) or batches_per_epoch < 1:
            raise ValueError(f"batches_per_epoch must be a positive integer, got {batches_per_epoch!r}")
        self.batch_size, self.images_per_class, self.batches = batch_size, m, batches_per_epoch
        self.rng = np.random.RandomState(seed % 2**32)
        self.sampler = MPerClassSampler(
            labels.numpy(), m, batch_size=batch_size, length_before_new_iter=batches_per_epoch * batch_size
        )

    def __len__(self) -> int:
        return self.batches

    def __iter__(self) -> Iterator[list[int]]:
        with _numpy_random(self.rng):
            flat = [int(i) for i in iter(self.sampler)]  # MPerClassSampler draws the whole epoch here
        for b in range(self.batches):
            yield flat[b * self.batch_size : (b + 1) * self.batch_size]


@contextmanager
def _numpy_random(rng: np.random.RandomState) -> Iterator[None]:
    """pytorch-metric-learning's RNG is its module attribute ``NUMPY_RANDOM``: ``rng`` stands in for it a while."""
    from pytorch_metric_learning.utils import common_functions

    previous = common_functions.NUMPY_RANDOM
    common_functions.NUMPY_RANDOM = rng
    try:
        yield
    finally:
        common_functions.NUMPY_RANDOM = previous
