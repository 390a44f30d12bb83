"""One LightningDataModule for every dataset small enough to hold in memory.

A *reader* returns the splits as tensors; this module keeps them on the training device and batches them by
indexing (no DataLoader workers: for MNIST-size data they cost more than they save).

A split is a dict of tensors with a common first dimension:
    ``inputs``  (N, *input_shape) float
    ``labels``  (N,) long, ``-1`` marks an unlabelled sample
    ``targets`` (N, *input_shape) float, optional: what to reconstruct when it is not ``inputs`` (de-noising)
A reader is a callable ``reader() -> {"train": split, "val": split, "test": split}``.

``labelled_percent`` < 100 hides most training labels (``hide_labels``): the split's ``labels`` then hold ``-1``
for them, and the labels as read are kept apart (``InMemoryDataModule.all_labels``) where no loss head sees them.
"""

from __future__ import annotations

import math
import numbers
import zlib
from collections.abc import Callable, Iterator, Sequence
from fractions import Fraction

import lightning as L
import torch

from clusterable.data.checks import is_int
from clusterable.data.sampling import RANDOM_BATCHES, ClassBalancedBatches, Sampler
from clusterable.data.splits import SPLITS, Split


def make_fake(input_shape: Sequence[int], num_classes: int, n: int, seed: int = 0, sample_seed: int = 0) -> Split:
    """A synthetic stand-in of the same shape and class count: one Gaussian blob per class.

    Returns a split with ``inputs`` (n, *input_shape) in [0, 1] and balanced ``labels`` (n,).
    ``seed`` fixes the blobs' means, ``sample_seed`` the samples drawn around them (one per split). The blobs
    are separable, so a smoke run's metrics move the way real ones would.
    """
    dim = math.prod(input_shape)
    means = torch.rand(num_classes, dim, generator=torch.Generator().manual_seed(seed))
    g = torch.Generator().manual_seed(seed + 1 + sample_seed)
    labels = torch.arange(n) % num_classes
    labels = labels[torch.randperm(n, generator=g)]
    inputs = (means[labels] + 0.15 * torch.randn(n, dim, generator=g)).clamp(0, 1)
    return {"inputs": inputs.view(n, *input_shape), "labels": labels}


def labelled_count(n: int, labelled_percent: float) -> int:
    """How many of ``n`` labels ``labelled_percent`` keeps: ``floor(n * pl / 100 + 1/2)`` (rounded half up).

    Computed in exact fractions of the percentage as written (``str(0.01)`` is ``"0.01"``), so that a product
    such as 55,000 x 0.01% = 5.5 rounds to 6 whatever the float error of ``0.01``.
    """
    return math.floor(n * Fraction(str(labelled_percent)) / 100 + Fraction(1, 2))


def hide_labels(labels: torch.Tensor, labelled_percent: float, seed: int) -> torch.Tensor:
    """A copy of ``labels`` (N,) with all but ``labelled_count(n, labelled_percent)`` of its n labelled
    (``>= 0``) entries set to ``-1``; already unlabelled entries stay ``-1``.

    Which rows keep their label is drawn from a generator seeded with ``seed`` (the run's, so that each
    repetition draws its own subset): one random row of each class, the classes in a random order, of which the
    first ``min(count, classes)`` are kept (so every class keeps a label when the count allows, and the labels
    kept are of distinct classes when it does not); the rest of the count is drawn uniformly from the other rows.
    Safir 2022 (section 6.1.4) makes its partially labelled sets by dropping labels without saying which: the
    one-per-class rule is our choice, so that a small count (0.01% of MNIST's training split: 6 labels) covers as
    many classes as it can instead of leaving some out by chance.

    Returns:
        (N,) long on ``labels``' device.

    Raises:
        ValueError: the count is 0, in one line with the numbers and the smallest percentage that keeps one.
    """
    cpu = labels.cpu()
    rows = torch.nonzero(cpu >= 0).flatten()  # (n,) the labelled rows
    n = len(rows)
    count = labelled_count(n, labelled_percent)
    if count == 0:
        if n == 0:
            raise ValueError(
                f"labelled_percent={_number(labelled_percent)} has no training labels to keep: every training "
                "row is unlabelled (-1) already; use 100"
            )
        exact = n * Fraction(str(labelled_percent)) / 100
        raise ValueError(
            f"labelled_percent={_number(labelled_percent)} keeps 0 of the {n:,} training labels "
            f"({float(exact):.3g} rounds to 0); use at least {_smallest_percent(n)}"
        )
    g = torch.Generator().manual_seed(seed)
    order = rows[torch.randperm(n, generator=g)]  # the labelled rows in a random order
    by_class = torch.argsort(cpu[order], stable=True)  # positions in `order`, grouped by class, random within
    _, sizes = torch.unique_consecutive(cpu[order][by_class], return_counts=True)
    first = by_class[torch.cumsum(sizes, 0) - sizes]  # (C,) each class's first row in `order`: a random one
    first = first[torch.randperm(len(first), generator=g)][: min(count, len(first))]  # random class order
    taken = torch.zeros(n, dtype=torch.bool)
    taken[first] = True
    # The other positions in ascending order are the rest in `order`'s random order: a prefix is uniform.
    rest = torch.nonzero(~taken).flatten()[: count - len(first)]
    keep = order[torch.cat([first, rest])]
    hidden = torch.full_like(cpu, -1)
    hidden[keep] = cpu[keep]
    return hidden.to(labels.device)


def _smallest_percent(n: int) -> str:
    """The smallest percentage, to 3 significant digits rounded up, that keeps one of ``n`` labels (50 / n)."""
    least = Fraction(50, n)  # n * pl / 100 >= 1/2
    digits = max(0, 2 - math.floor(math.log10(least)))
    value = Fraction(math.ceil(least * 10**digits), 10**digits)
    return _number(float(value)) if value.denominator > 1 else str(value.numerator)


def _number(value: float) -> str:
    """``10`` for 10.0, ``0.01`` for 0.01: a percentage as the user would write it."""
    return str(int(value)) if float(value).is_integer() else repr(float(value))


class TensorBatches:
    """Iterate a split in mini-batches by indexing; reshuffled each epoch from a seeded generator.

    Yields dicts with the split's tensors sliced plus ``index`` (B,), the rows' positions in the split
    (heads that keep per-sample state, such as a cluster assignment, need it).

    With ``balanced``, the batches are its class-balanced lists of rows instead (PK batches for pairwise losses).

    Under data-parallel training (``world_size`` > 1) every rank draws the same permutation each epoch (the
    same ``seed``, one draw an epoch), pads it to a multiple of ``world_size`` by repeating its first rows, and
    takes every ``world_size``-th row from position ``rank`` on (what torch's ``DistributedSampler`` does). So
    the ranks see disjoint shares of every epoch (apart from the padding) and the same number of batches;
    ``batch_size`` is per rank. With ``world_size`` 1 the whole split is iterated, without padding.
    """

    def __init__(
        self,
        split: Split,
        batch_size: int,
        shuffle: bool,
        seed: int = 0,
        drop_last: bool = False,
        rank: int = 0,
        world_size: int = 1,
        balanced: ClassBalancedBatches | None = None,
    ):
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        if world_size < 1 or not 0 <= rank < world_size:
            raise ValueError(f"rank must be in [0, world_size) and world_size >= 1, got {rank} and {world_size}")
        self.split, self.batch_size, self.shuffle, self.drop_last = split, batch_size, shuffle, drop_last
        self.rank, self.world_size = rank, world_size
        self.generator = torch.Generator().manual_seed(seed)
        self.balanced = balanced

    @property
    def rows_per_rank(self) -> int:
        """How many rows this rank iterates each epoch: the split's size divided by ``world_size``, rounded up."""
        return math.ceil(len(self.split["labels"]) / self.world_size)

    def __len__(self) -> int:
        if self.balanced is not None:
            return len(self.balanced)
        m = self.rows_per_rank
        return m // self.batch_size if self.drop_last else math.ceil(m / self.batch_size)

    def __iter__(self) -> Iterator[dict[str, torch.Tensor]]:
        for idx in self.epoch_rows():
            yield {"index": idx, **{k: v[idx] for k, v in self.split.items()}}

    def epoch_rows(self) -> list[torch.Tensor]:
        """The row positions (B,) of each batch of the next epoch, drawn as iterating the epoch would draw them:
        the one place an epoch's order is made (a stacked grid takes each member's from it,
        ``clusterable.stacked``)."""
        n = len(self.split["labels"])
        device = self.split["labels"].device
        if self.balanced is not None:  # PK batches: each rank draws its own (seeded by seed + rank)
            return [torch.as_tensor(rows, device=device) for rows in self.balanced]
        order = torch.randperm(n, generator=self.generator) if self.shuffle else torch.arange(n)
        if self.world_size > 1 and n > 0:
            padding = self.rows_per_rank * self.world_size - n
            order = torch.cat([order, order.repeat(math.ceil(padding / n))[:padding]])
            order = order[self.rank :: self.world_size]
        order = order.to(device)
        return [order[b * self.batch_size : (b + 1) * self.batch_size] for b in range(len(self))]


class InMemoryDataModule(L.LightningDataModule):
    """Holds the train/val/test splits as tensors on the training device.

    Args:
        name: dataset name, recorded in the run (and the seed of the fake source's blobs).
        reader: callable returning the splits (see module docstring); used when ``source == "real"``.
        input_shape: shape of one input, e.g. ``[1, 28, 28]`` or ``[64]``; the reader's ``inputs`` must match.
        num_classes: number of classes (or clusters); every label must be below it (or ``-1``, unlabelled).
        batch_size: training mini-batch size (per rank under data-parallel training); ``-1`` means the whole
            training split (each rank's share of it) in one batch.
        source: ``"real"`` reads the dataset; ``"fake"`` builds a synthetic stand-in with the same
            ``input_shape`` and ``num_classes`` (``fake_size`` samples per split), so every command runs offline.
        fake_size: samples per split of the fake source.
        seed: seed of the training-order shuffle and of ``shuffle_rows``.
        shuffle_rows: permute the rows of every split once, with a generator seeded by ``seed``, before anything
            sees them. The CSRL authors do this before every repetition (``torch.randperm`` in
            ``exp_tensor_ae.ipynb``), so that each repetition's k-means++ start (``random_state=20``, fixed) sees
            the points in another order and starts from another assignment; every point keeps its label.
        shuffle_batches: draw a new order of the training rows every epoch (usual); false keeps the row order, as
            the CSRL authors' per-sample loop over the standard AEs does.
        eval_batch_size: mini-batch size of the validation and test loaders.
        root: the dataset's folder, for readers of files on disk (their config passes it on as ``${..root}``).
        sampler: how training batches are drawn (``clusterable.data.sampling.Sampler``, the ``dataset.sampler``
            node): random, or class-balanced (``sampler.kind: class_balanced``: ``batch_size /
            sampler.images_per_class`` classes of ``images_per_class`` rows each, the PK batches pairwise losses
            need). The default: random batches.
        drop_last: leave out the last training batch of an epoch when it is short (metric-learning recipes do:
            a batch of a few rows may hold no two of one class, where a pairwise loss such as NCA is undefined).
        class_disjoint: the val/test splits hold classes never seen in training (zero-shot retrieval, as the
            deep-metric-learning benchmarks split their classes): only the training labels are checked against
            ``num_classes`` (the number of training classes); the others are any class ids >= -1.
        labelled_percent: the percentage of the training labels kept (Safir 2022's "pl%", section 6.1.4: 0.01,
            0.1, 10, 100); the others become ``-1`` (see ``hide_labels``: seeded by ``seed``, at least one per
            class when the count allows). Validation and test keep every label; ``all_labels`` gives the
            training labels as read, for evaluation only.

    Raises:
        ValueError: a value out of range; the message starts with the parameter's name.
    """

    def __init__(
        self,
        name: str,
        reader: Callable[[], dict[str, Split]] | None,
        input_shape: Sequence[int],
        num_classes: int,
        batch_size: int = 128,
        source: str = "real",
        fake_size: int = 300,
        seed: int = 0,
        shuffle_rows: bool = False,
        shuffle_batches: bool = True,
        eval_batch_size: int = 4096,
        root: str | None = None,
        class_disjoint: bool = False,
        sampler: Sampler = RANDOM_BATCHES,
        drop_last: bool = False,
        labelled_percent: float = 100.0,
    ):
        super().__init__()
        if source not in ("real", "fake"):
            raise ValueError(f"source must be 'real' or 'fake', got {source!r}")
        if not is_int(batch_size) or batch_size == 0 or batch_size < -1:
            raise ValueError(f"batch_size must be a positive integer (or -1 for full batch), got {batch_size}")
        if not is_int(num_classes) or num_classes < 1:
            raise ValueError(f"num_classes must be >= 1, got {num_classes}")
        shape = list(input_shape) if isinstance(input_shape, Sequence) else None
        if not shape or not all(is_int(d) and d >= 1 for d in shape):
            raise ValueError(f"input_shape must be a non-empty list of positive integers, got {input_shape}")
        if not is_int(fake_size) or fake_size < 1:
            raise ValueError(f"fake_size must be a positive integer (samples per fake split), got {fake_size}")
        if not is_int(eval_batch_size) or eval_batch_size < 1:
            raise ValueError(f"eval_batch_size must be a positive integer, got {eval_batch_size}")
        if not is_int(seed):
            raise ValueError(f"seed must be an integer, got {seed!r}")
        self.name, self.reader, self.source = name, reader, source
        self.input_shape = tuple(int(s) for s in shape)
        self.num_classes, self.batch_size, self.fake_size = int(num_classes), int(batch_size), int(fake_size)
        self.seed, self.eval_batch_size, self.root = int(seed), int(eval_batch_size), root
        self.shuffle_rows, self.shuffle_batches = bool(shuffle_rows), bool(shuffle_batches)
        self.class_disjoint = bool(class_disjoint)
        if not isinstance(sampler, Sampler):
            raise ValueError(f"sampler must be a Sampler (clusterable.data.sampling), got {type(sampler).__name__}")
        self.sampler = sampler
        self.drop_last = bool(drop_last)
        # NaN fails the range test too; a bool is an int to Python, never a percentage here.
        if isinstance(labelled_percent, bool) or not isinstance(labelled_percent, numbers.Real):
            raise ValueError(f"labelled_percent must be a number in (0, 100], got {labelled_percent!r}")
        if not 0 < labelled_percent <= 100:
            raise ValueError(f"labelled_percent must be in (0, 100], got {labelled_percent!r}")
        self.labelled_percent = float(labelled_percent)
        self.splits: dict[str, Split] = {}
        self._reader_notes: dict | None = None
        # The labels as read of each split whose labels were hidden (only "train"): kept out of the split's dict
        # because a batch carries every tensor of it to the loss head, which must not see them.
        self._unmasked: dict[str, torch.Tensor] = {}

    @property
    def notes(self) -> dict | None:
        """What reading the data did (``contracts.HasDataNotes``), when the reader says it: MNIST's files and
        their SHA-256 (``splits.SplitsWithNotes``); None otherwise."""
        return self._reader_notes

    def prepare_data(self) -> None:
        self.load()

    def load(self) -> dict[str, Split]:
        """Read (or synthesise) the splits once; safe to call repeatedly.

        Raises:
            ValueError: the reader rejected one of its arguments (the message then starts with ``reader.``), or
                the splits do not fit this module's settings: a label ``>= num_classes`` or ``< -1``, inputs not
                of ``input_shape``, tensors of different lengths in one split; or ``labelled_percent`` keeps no
                training label (see ``hide_labels``).
            clusterable.data.errors.DatasetError: the reader's files are missing or corrupt.
        """
        if not self.splits:
            if self.source == "fake":
                splits = self._fake_splits()
            else:
                if self.reader is None:
                    raise ValueError(f"reader is missing: dataset {self.name!r} has none for source='real'")
                try:
                    splits = self.reader()
                except ValueError as e:  # the reader's own argument, named as the config has it
                    raise ValueError(f"reader.{e}") from None
                self._reader_notes = getattr(splits, "notes", None)  # the files read and their checksums
            self._check(splits)
            n_train = len(splits["train"]["labels"])
            if self.num_classes > n_train:
                raise ValueError(
                    f"num_classes ({self.num_classes}, the number of classes or clusters) must not exceed the "
                    f"number of training samples ({n_train})"
                )
            unmasked: dict[str, torch.Tensor] = {}
            # Before the rows are shuffled, so that shuffle_rows leaves the subset of labelled rows as it is; new
            # dicts, so that the reader's (which may be kept and returned again) stay as they were.
            if self.labelled_percent < 100:
                train = splits["train"]
                unmasked["train"] = train["labels"]
                labels = hide_labels(train["labels"], self.labelled_percent, self.seed)
                splits = {**splits, "train": {**train, "labels": labels}}
            # The class-balanced sampler's settings against the classes, before any training.
            size = n_train if self.batch_size == -1 else min(self.batch_size, n_train)
            self.sampler.batches(splits["train"]["labels"], size, self.seed)
            if self.shuffle_rows:
                splits = {s: self._permuted(d) for s, d in splits.items()}
                unmasked = {s: v[self._order(len(v))] for s, v in unmasked.items()}
            self._unmasked = {s: v.contiguous() for s, v in unmasked.items()}
            self.splits = {s: {k: v.contiguous() for k, v in d.items()} for s, d in splits.items()}
        return self.splits

    def _fake_splits(self) -> dict[str, Split]:
        """The splits of ``source="fake"``: Gaussian blobs of ``input_shape``, one per class (``make_fake``);
        a subclass whose inputs are not pixels or features (token ids) makes its own stand-in here."""
        # Seeded by the dataset's name too, so that two datasets' stand-ins differ (same blobs in every split).
        base = zlib.crc32(self.name.encode())
        return {
            s: make_fake(self.input_shape, self.num_classes, self.fake_size, seed=base, sample_seed=i)
            for i, s in enumerate(SPLITS)
        }

    def all_labels(self, stage: str) -> torch.Tensor:
        """(N,) every label of split ``stage`` as read, before ``labelled_percent`` hid any: the split's own
        ``labels`` for val/test or when nothing is hidden. In the split's row order (after ``shuffle_rows``) and
        on its device. For evaluation only: no loss head may see them.

        Raises:
            ValueError: ``stage`` is not one of the splits.
        """
        splits = self.load()
        if stage not in splits:
            raise ValueError(f"all_labels: no split named {stage!r}; the dataset has: {', '.join(splits)}")
        return self._unmasked.get(stage, splits[stage]["labels"])

    def _order(self, n: int) -> torch.Tensor:
        """(n,) ``randperm(n)`` of a generator seeded with ``seed``: the same order for every tensor of n rows."""
        return torch.randperm(n, generator=torch.Generator().manual_seed(self.seed))

    def _permuted(self, split: Split) -> Split:
        """The split's rows in the order ``_order(N)`` (the same order for every split of the same length, so
        splits that hold the same points stay aligned)."""
        order = self._order(len(split["labels"]))
        return {k: v[order] for k, v in split.items()}

    def _check(self, splits: dict[str, Split]) -> None:
        """The splits match the module's settings: one line naming the setting (or the reader), the split and what
        was found. Costs one max and min over the labels."""
        if not isinstance(splits, dict) or not set(SPLITS) <= set(splits):
            found = sorted(splits) if isinstance(splits, dict) else type(splits).__name__
            raise ValueError(f"reader must return the splits 'train', 'val' and 'test', got {found}")
        for s in SPLITS:
            split = splits[s]
            if not {"inputs", "labels"} <= set(split):
                raise ValueError(
                    f"reader must return splits with 'inputs' and 'labels', but split '{s}' has {sorted(split)}"
                )
            lengths = {k: len(v) for k, v in split.items()}
            if len(set(lengths.values())) > 1:
                listed = ", ".join(f"{k} {n:,}" for k, n in lengths.items())
                raise ValueError(f"reader returned split '{s}' with tensors of different lengths (rows): {listed}")
            found = tuple(split["inputs"].shape[1:])
            if found != self.input_shape:
                raise ValueError(
                    f"input_shape is {list(self.input_shape)} but the inputs of split '{s}' have rows of shape "
                    f"{list(found)}"
                )
            labels = split["labels"]
            if labels.dim() != 1:
                raise ValueError(f"reader returned labels of shape {list(labels.shape)} in split '{s}', expected (N,)")
            if labels.numel() == 0:
                continue
            high, low = int(labels.max()), int(labels.min())
            if high >= self.num_classes and not (self.class_disjoint and s != "train"):
                raise ValueError(f"num_classes is {self.num_classes} but the labels of split '{s}' go up to {high}")
            if low < -1:
                raise ValueError(
                    f"reader returned labels down to {low} in split '{s}'; labels are class ids in "
                    f"[0, num_classes) or -1 (unlabelled)"
                )

    def setup(self, stage: str | None = None) -> None:
        self.load()
        # Keep the data where the model trains, so a batch is one index operation with no host-device copy.
        if self.trainer is not None:
            device = self.trainer.strategy.root_device
            self.splits = {s: {k: v.to(device) for k, v in d.items()} for s, d in self.splits.items()}
            self._unmasked = {s: v.to(device) for s, v in self._unmasked.items()}

    def split(self, name: str) -> Split:
        return self.load()[name]

    def _batches(self, name: str, train: bool) -> TensorBatches:
        """The loader of split ``name``; with a trainer attached, this rank's share of it (see ``TensorBatches``)."""
        split = self.split(name)
        rank, world_size = 0, 1
        if self.trainer is not None:
            rank, world_size = int(self.trainer.global_rank), int(self.trainer.world_size)
        per_rank = math.ceil(len(split["labels"]) / world_size)
        size = self.batch_size if train else self.eval_batch_size
        size = per_rank if (train and size == -1) else min(size, per_rank)
        balanced = self.sampler.batches(split["labels"], max(size, 1), self.seed + rank) if train else None
        return TensorBatches(
            split,
            max(size, 1),
            shuffle=train and self.shuffle_batches,
            seed=self.seed,
            drop_last=train and self.drop_last,
            rank=rank,
            world_size=world_size,
            balanced=balanced,
        )

    def eval_batches(self, stage: str, device: torch.device | str) -> Iterator[dict[str, torch.Tensor]]:
        """Split ``stage``'s rows in order, ``eval_batch_size`` at a time: ``{"inputs": (B, ...)}`` on ``device``
        (the evaluation runner embeds a whole split with it)."""
        inputs = self.split(stage)["inputs"]
        for start in range(0, len(inputs), self.eval_batch_size):
            yield {"inputs": inputs[start : start + self.eval_batch_size].to(device)}

    def train_dataloader(self) -> TensorBatches:
        return self._batches("train", train=True)

    def val_dataloader(self) -> TensorBatches:
        return self._batches("val", train=False)

    def test_dataloader(self) -> TensorBatches:
        return self._batches("test", train=False)
