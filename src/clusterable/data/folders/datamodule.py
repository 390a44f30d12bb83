"""Image datasets for deep metric learning: decoded once into a memory-mapped cache, augmented in batches on the
training device.

``ImageDataModule`` reads a dataset's file lists (a reader of ``clusterable.data.folders.retrieval_sets``), decodes
every image once into a cache (``clusterable.data.folders.image_cache``: resized by the recipe, uint8, next to the
data or in ``cache_dir``), and serves batches of raw pixels from it; the random crop, flip and colour jitter
(``augment``: ``clusterable.data.folders.augment.Augment``) run on the whole batch on the training device in
``on_after_batch_transfer``, with random parameters drawn per image. Batches are random or class-balanced
(``sampler``: ``clusterable.data.sampling.Sampler``).

The splits (``load()``, also ``self.splits``) are dicts of per-row tensors WITHOUT the pixels, which stay in the
cache: ``labels`` (N,) long, and for In-Shop's test split the flags ``is_query`` and ``is_gallery`` (N,) bool.
``train`` is the training classes (minus the held-out validation classes), ``test`` the class-disjoint test
classes (In-Shop: its query and gallery images together), ``val`` per ``validation``.

Batches from the loaders, on the host: ``images`` uint8 (B, 3, Hc, Wc) (a zero-padded canvas), ``sizes``
(B, 2) long (each image's h, w), ``labels`` (B,), ``index`` (B,) (row positions in the split), plus the split's
flags. After the transfer to the device, ``images`` and ``sizes`` are replaced by ``inputs`` float
(B, 3, crop, crop) in [0, 1]: ``augment``'s random views in training, ``eval_views`` otherwise. ``eval_batches`` gives a
split's rows in order, already as ``inputs`` on a device, for the evaluation runner.

Boudiaf et al. 2020 (``jeromerony/dml_cross_entropy``, ``utils/data/dataset_ingredient.py``) give the recipes
the dataset configs set: batch 128 (``drop_last``), evaluation batch 256, the resize per dataset, crops of 224
with scale (0.16, 1), and per-dataset ratio and colour jitter.
"""

from __future__ import annotations

import functools
import math
import numbers
import queue
import threading
import zlib
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, Literal

import lightning as L
import numpy as np
import torch

from clusterable.contracts import NamesParts
from clusterable.data.checks import is_int
from clusterable.data.errors import DatasetError
from clusterable.data.folders.augment import DEFAULT_AUGMENT, Augment, eval_views
from clusterable.data.folders.image_cache import ImageStore, build_or_open_cache, parse_resize
from clusterable.data.folders.retrieval_sets import RetrievalSet
from clusterable.data.folders.validation import class_disjoint_validation
from clusterable.data.sampling import DEFAULT_IMAGES_PER_CLASS, RANDOM_BATCHES, ClassBalancedBatches, Sampler
from clusterable.data.splits import Split

__all__ = ["ImageBatches", "ImageDataModule"]


class ImageDataModule(L.LightningDataModule):
    """A deep-metric-learning image dataset: class-disjoint splits, cached pixels, batched augmentation.

    Args:
        name: dataset name (the cache folder's prefix; seeds the fake source's images).
        reader: a callable returning the dataset's ``RetrievalSet`` (a ``_partial_`` reader of
            ``clusterable.data.folders.retrieval_sets``); used when ``source == "real"``.
        input_shape: ``[3, crop, crop]``, the shape of one view; Boudiaf et al.: crop 224.
        num_classes: the number of TRAINING classes (before any are held out for validation); every training
            label is below it. Test labels are their own class ids and may exceed it.
        batch_size: training batch size (per rank under data-parallel training); Boudiaf et al.: 128.
        eval_batch_size: batch size of the validation and test loaders and of ``eval_batches``; Boudiaf: 256.
        source: ``"real"`` reads the dataset; ``"fake"`` makes small random images in memory (``fake_size`` a
            split, class-coloured so that retrieval is above chance) and reads no file.
        fake_size: images per split of the fake source.
        seed: the run's seed: training order, class-balanced batches, augmentation.
        root: the dataset's folder (``dataset.root``); its readers get it as ``${..root}``.
        cache_dir: the folder for the decoded-image cache; None: ``<root>/.clusterable_cache``.
        resize: the recipe applied once when caching: ``"shorter:256"`` (shorter side to 256, aspect kept;
            Boudiaf's CUB), ``"square:256"`` (Cars, SOP) or None (In-Shop: the files are 256 x 256).
        augment: the training views (``clusterable.data.folders.augment.Augment``, the ``dataset.augment`` node):
            ``crop_scale`` and ``crop_ratio`` of the random resized crop (Boudiaf: (0.16, 1) and (3/4, 4/3), Cars
            (1, 1)), ``flip`` and colour ``jitter`` (Boudiaf: CUB (0.25, 0.25, 0.25, 0), Cars (0.3, 0.3, 0.3,
            0.1), SOP and In-Shop none). The default: Boudiaf's crop and flip, no jitter.
        sampler: how training batches are drawn (``clusterable.data.sampling.Sampler``, the ``dataset.sampler``
            node): ``kind: random`` (a new permutation every epoch; Boudiaf), or ``class_balanced`` (PK batches of
            ``images_per_class`` images per class). The default: random.
        drop_last: drop the last incomplete training batch (Boudiaf: yes).
        validation: ``"held_out_classes"``: ``val_classes`` of the training classes are held out as the
            validation split (class-disjoint model selection); ``"test"``: the test split is also the validation
            split (Boudiaf et al.'s protocol: the epoch is selected on the test set itself); ``"none"``: no
            validation split (it is empty).
        val_classes: below 1, the fraction of training classes held out; from 1 on, their number.
        val_split_seed: seed of the held-out classes, fixed apart from ``seed`` so that every run of a grid
            selects on the same classes.
        decode_workers: processes that decode the images when the cache is built (once).
        prefetch: batches read ahead from the cache by a background thread (0: none).
        pin_memory: read batches into page-locked memory when CUDA is available (faster, asynchronous copies).
        progress: show a progress bar while the cache is built.

    Raises:
        ValueError: a value out of range; the message starts with the parameter's name.
    """

    # The test (and held-out validation) classes are never seen in training: no classifier accuracy on them.
    class_disjoint = True

    def __init__(
        self,
        name: str,
        reader: Callable[[], RetrievalSet] | None,
        input_shape: Sequence[int],
        num_classes: int,
        batch_size: int = 128,
        eval_batch_size: int = 256,
        source: Literal["real", "fake"] = "real",
        fake_size: int = 64,
        seed: int = 0,
        root: str | None = None,
        cache_dir: str | None = None,
        resize: str | None = None,
        augment: Augment = DEFAULT_AUGMENT,
        sampler: Sampler = RANDOM_BATCHES,
        drop_last: bool = True,
        validation: Literal["test", "held_out_classes", "none"] = "held_out_classes",
        val_classes: float = 0.25,
        val_split_seed: int = 0,
        decode_workers: int = 2,
        prefetch: int = 2,
        pin_memory: bool = True,
        progress: bool = True,
    ):
        super().__init__()
        if source not in ("real", "fake"):
            raise ValueError(f"source must be 'real' or 'fake', got {source!r}")
        shape = list(input_shape) if isinstance(input_shape, Sequence) and not isinstance(input_shape, str) else []
        if len(shape) != 3 or shape[0] != 3 or shape[1] != shape[2] or not all(is_int(d) and d >= 1 for d in shape):
            raise ValueError(f"input_shape must be [3, crop, crop] (RGB square views), got {input_shape}")
        for key, value, low in [
            ("num_classes", num_classes, 1),
            ("batch_size", batch_size, 1),
            ("eval_batch_size", eval_batch_size, 1),
            ("fake_size", fake_size, 4),
            ("decode_workers", decode_workers, 0),
            ("prefetch", prefetch, 0),
        ]:
            if not is_int(value) or value < low:
                raise ValueError(f"{key} must be an integer >= {low}, got {value!r}")
        if not is_int(seed):
            raise ValueError(f"seed must be an integer, got {seed!r}")
        if not is_int(val_split_seed):
            raise ValueError(f"val_split_seed must be an integer, got {val_split_seed!r}")
        parse_resize(resize)
        if not isinstance(augment, Augment):
            raise ValueError(
                f"augment must be an Augment (clusterable.data.folders.augment), got {type(augment).__name__}"
            )
        if not isinstance(sampler, Sampler):
            raise ValueError(f"sampler must be a Sampler (clusterable.data.sampling), got {type(sampler).__name__}")
        if sampler.class_balanced and batch_size % sampler.images_per_class:
            raise ValueError(
                f"batch_size ({batch_size}) must be a multiple of images_per_class ({sampler.images_per_class}) "
                "for class-balanced batches"
            )
        if validation not in ("test", "held_out_classes", "none"):
            raise ValueError(f"validation must be 'test', 'held_out_classes' or 'none', got {validation!r}")
        if isinstance(val_classes, bool) or not isinstance(val_classes, numbers.Real) or val_classes <= 0:
            raise ValueError(f"val_classes must be a fraction in (0, 1) or a count >= 1, got {val_classes!r}")
        self.name, self.reader, self.source = name, reader, source
        self.input_shape = tuple(int(s) for s in shape)
        self.crop = self.input_shape[1]
        self.num_classes, self.batch_size, self.eval_batch_size = (
            int(num_classes),
            int(batch_size),
            int(eval_batch_size),
        )
        self.fake_size, self.seed, self.root, self.cache_dir = int(fake_size), int(seed), root, cache_dir
        self.resize, self.augment, self.sampler, self.drop_last = resize, augment, sampler, bool(drop_last)
        self.validation, self.val_classes, self.val_split_seed = validation, val_classes, int(val_split_seed)
        self.decode_workers, self.prefetch = int(decode_workers), int(prefetch)
        self.pin_memory, self.progress = bool(pin_memory), bool(progress)
        self.splits: dict[str, Split] = {}
        self.store: ImageStore | None = None
        self.train_batch_size = self.batch_size  # the fake source may lower it to fit its few images
        self._rows: dict[str, torch.Tensor] = {}  # each split's rows in the store
        self._generators: dict[str, torch.Generator] = {}

    # ------------------------------------------------------------------------------------------------ loading

    def prepare_data(self) -> None:
        self.load()  # builds the cache once (local rank 0); the other ranks open it in setup

    def setup(self, stage: str | None = None) -> None:
        self.load()

    def load(self) -> dict[str, Split]:
        """Read the file lists and open (or build) the cache once; the splits without pixels. Safe to call again.

        Raises:
            ValueError: the reader rejected an argument (message starting with ``reader.``), ``num_classes`` does
                not match the training classes, or the class-balanced sampler cannot be built on the training
                split (message starting with the parameter's name).
            clusterable.data.errors.DatasetError: missing or corrupt files, unexpected sizes, an unwritable cache.
        """
        if self.splits:
            return self.splits
        if self.source == "fake":
            labels, parts, store = self._fake()
        else:
            data = self._read()
            labels, parts = data.labels, data.part
            store = self._open_store(data)
            parts = _part_names(data.parts, parts)
        splits, rows = self._split(labels, parts)
        if self.sampler.class_balanced:
            self.train_batch_size = self._balanced_batch_size(splits["train"]["labels"])
        elif self.source == "fake":
            self.train_batch_size = min(self.batch_size, len(rows["train"]))
        self.store, self._rows, self.splits = store, rows, splits
        return splits

    def split(self, name: str) -> Split:
        return self.load()[name]

    def _read(self) -> RetrievalSet:
        if self.reader is None:
            raise ValueError(f"reader is missing: dataset {self.name!r} has none for source='real'")
        try:
            data = self.reader()
        except ValueError as e:  # the reader's own argument, named as the config has it
            raise ValueError(f"reader.{e}") from None
        if not isinstance(data, RetrievalSet):
            raise ValueError(f"reader must return a RetrievalSet, got {type(data).__name__}")
        train = data.labels[data.rows("train")]
        classes = torch.unique(train)
        if len(classes) != self.num_classes or (len(train) and int(train.max()) >= self.num_classes):
            found = f"labels {int(classes.min())} to {int(classes.max())}" if len(classes) else "no images"
            raise ValueError(
                f"num_classes is {self.num_classes} but the training split of {data.display_name} has "
                f"{len(classes):,} classes ({found}); num_classes counts the training classes"
            )
        return data

    def _open_store(self, data: RetrievalSet) -> ImageStore:
        cache_dir = Path(self.cache_dir) if self.cache_dir is not None else Path(data.root) / ".clusterable_cache"
        try:
            return build_or_open_cache(
                data.paths, cache_dir, self.resize, self.progress, self.decode_workers, name=self.name
            )
        except DatasetError as e:
            raise type(e)(f"{data.display_name}: {e}") from None

    def _split(self, labels: torch.Tensor, parts: list[str]) -> tuple[dict[str, Split], dict[str, torch.Tensor]]:
        """The train / val / test splits (labels and flags) and their rows in the store."""
        part = np.asarray(parts)
        train_rows = torch.from_numpy(np.flatnonzero(part == "train"))
        test_rows = torch.from_numpy(np.flatnonzero(part != "train"))
        test: Split = {"labels": labels[test_rows]}
        if {"query", "gallery"} & set(parts):
            test["is_query"] = torch.from_numpy(part[test_rows.numpy()] == "query")
            test["is_gallery"] = torch.from_numpy(part[test_rows.numpy()] == "gallery")
        rows = {"train": train_rows, "test": test_rows}
        if self.validation == "held_out_classes":
            val_classes = self.val_classes
            if self.source == "fake" and val_classes >= 1:
                # A count of the real classes: hold out the same share of the stand-in's few classes.
                val_classes = min(0.5, val_classes / self.num_classes)
            keep, held = class_disjoint_validation(labels[train_rows], val_classes, self.val_split_seed)
            rows["train"], rows["val"] = train_rows[keep], train_rows[held]
            val: Split = {"labels": labels[rows["val"]]}
        elif self.validation == "test":
            rows["val"], val = test_rows, dict(test)
        else:
            rows["val"], val = torch.zeros(0, dtype=torch.long), {"labels": torch.zeros(0, dtype=torch.long)}
        splits = {"train": {"labels": labels[rows["train"]]}, "val": val, "test": test}
        return splits, rows

    def _balanced_batch_size(self, labels: torch.Tensor) -> int:
        """The class-balanced batch size: ``batch_size``, checked on the training split (ValueError naming the
        parameter); the fake source lowers it to what its few classes allow."""
        m = self.sampler.images_per_class
        if self.source == "fake":
            return m * max(1, min(self.batch_size // m, len(torch.unique(labels))))
        # Built once here so that a split that cannot give such batches fails before training starts.
        self.sampler.batches(labels, self.batch_size, self.seed)
        return self.batch_size

    def _fake(self) -> tuple[torch.Tensor, list[str], ImageStore]:
        """A synthetic stand-in: ``fake_size`` training and ``fake_size`` test images of a few classes each (test
        classes disjoint, with their own ids from ``num_classes`` on), each class a colour and a stripe pattern
        plus noise, of sizes between crop and 1.25 crop; In-Shop-like readers also get query / gallery flags."""
        n, crop = self.fake_size, self.crop
        per_class = max(DEFAULT_IMAGES_PER_CLASS, self.sampler.images_per_class or DEFAULT_IMAGES_PER_CLASS)
        k = min(self.num_classes, max(2, n // per_class))
        reader = self.reader.func if isinstance(self.reader, functools.partial) else self.reader
        reader_parts = reader.parts if isinstance(reader, NamesParts) else ("train", "test")
        labels = torch.cat([torch.arange(n) % k, self.num_classes + torch.arange(n) % k])
        if len(reader_parts) == 3:  # query / gallery: alternate each class's images between the two
            test_parts = ["query" if (i // k) % 2 == 0 else "gallery" for i in range(n)]
        else:
            test_parts = ["test"] * n
        parts = ["train"] * n + test_parts
        base = zlib.crc32(self.name.encode())
        rng = np.random.default_rng(base + self.seed)
        heights = crop + rng.integers(0, crop // 4 + 1, 2 * n)
        widths = crop + rng.integers(0, crop // 4 + 1, 2 * n)
        pixels, index, offset = [], np.zeros((2 * n, 3), dtype=np.int64), 0
        for i in range(2 * n):
            # The class's look (colour, stripe angle and period): the same in every split and every run.
            style = np.random.default_rng(base + 7919 * int(labels[i]))
            colour = 0.2 + 0.6 * style.random((3, 1, 1))
            angle, period = np.pi * style.random(), 6 + 20 * style.random()
            h, w = int(heights[i]), int(widths[i])
            y, x = np.arange(h)[:, None], np.arange(w)[None, :]
            stripes = np.sin(2 * np.pi * (x * np.cos(angle) + y * np.sin(angle)) / period)
            image = colour + 0.15 * stripes + 0.08 * rng.standard_normal((3, h, w))
            flat = np.round(np.clip(image, 0, 1) * 255).astype(np.uint8).reshape(-1)
            pixels.append(flat)
            index[i] = (offset, h, w)
            offset += flat.size
        return labels, parts, ImageStore(np.concatenate(pixels), index)

    # ------------------------------------------------------------------------------------------------ batches

    def _loader(self, name: str, train: bool) -> ImageBatches:
        """The host-side batches of split ``name``; with a trainer, this rank's share of them."""
        split, store = self.load()[name], self.store
        rank, world_size = 0, 1
        if self.trainer is not None:
            rank, world_size = int(self.trainer.global_rank), int(self.trainer.world_size)
        order: str | ClassBalancedBatches = "sequential"
        if train:
            batches = max(1, len(split["labels"]) // (self.train_batch_size * world_size))
            # Each rank draws its own PK batches (its own seed), as many as the others; random ones: a shuffle.
            balanced = self.sampler.batches(split["labels"], self.train_batch_size, self.seed * 1009 + rank, batches)
            order = "shuffle" if balanced is None else balanced
        return ImageBatches(
            store,
            self._rows[name],
            split,
            self.train_batch_size if train else self.eval_batch_size,
            order=order,
            seed=self.seed,
            drop_last=train and self.drop_last,
            rank=rank,
            world_size=world_size if not isinstance(order, ClassBalancedBatches) else 1,
            prefetch=self.prefetch,
            pin_memory=self.pin_memory,
        )

    def train_dataloader(self) -> ImageBatches:
        return self._loader("train", train=True)

    def val_dataloader(self) -> ImageBatches:
        return self._loader("val", train=False)

    def test_dataloader(self) -> ImageBatches:
        return self._loader("test", train=False)

    def on_after_batch_transfer(self, batch: Any, dataloader_idx: int) -> Any:
        """On the device: ``images`` + ``sizes`` -> ``inputs`` float (B, 3, crop, crop) in [0, 1]; random training
        views while the trainer trains, centre crops otherwise."""
        if not isinstance(batch, dict) or "images" not in batch:
            return batch
        images, sizes = batch["images"], batch["sizes"]
        rest = {k: v for k, v in batch.items() if k not in ("images", "sizes")}
        if self.trainer is not None and self.trainer.training:
            inputs = self.augment(images, sizes, self._generator(images.device), self.crop)
        else:
            inputs = eval_views(images, sizes, self.crop)
        return {"inputs": inputs, **rest}

    def _generator(self, device: torch.device) -> torch.Generator:
        """The augmentation's generator on ``device``, seeded from ``seed`` and the rank (ranks see different
        images, and draw different crops for them)."""
        key = str(device)
        if key not in self._generators:
            rank = int(self.trainer.global_rank) if self.trainer is not None else 0
            seed = zlib.crc32(f"augment/{self.seed}/{rank}".encode())
            self._generators[key] = torch.Generator(device=device).manual_seed(seed)
        return self._generators[key]

    def eval_batches(self, stage: str, device: torch.device | str) -> Iterator[Split]:
        """Split ``stage``'s rows in order, in batches of ``eval_batch_size``, as centre crops on ``device``.

        Yields dicts with ``inputs`` float (B, 3, crop, crop) in [0, 1], ``labels`` (B,), ``index`` (B,) and the
        split's flags, all on ``device``; the whole split, whatever the rank (the evaluation runner embeds it).
        """
        splits = self.load()
        if stage not in splits:
            raise ValueError(f"stage must be one of {', '.join(splits)}, got {stage!r}")
        device = torch.device(device)
        batches = ImageBatches(
            self.store,
            self._rows[stage],
            splits[stage],
            self.eval_batch_size,
            prefetch=self.prefetch,
            pin_memory=self.pin_memory and device.type == "cuda",
        )
        for batch in batches:
            batch = {k: v.to(device, non_blocking=True) for k, v in batch.items()}
            images, sizes = batch.pop("images"), batch.pop("sizes")
            yield {"inputs": eval_views(images, sizes, self.crop), **batch}


class ImageBatches:
    """Batches of a split read from an ``ImageStore``: ``{"images", "sizes", "labels", "index", **flags}``.

    Args:
        store: the pixels.
        rows: (N,) the split's rows in the store.
        split: the split's per-row tensors (``labels`` (N,) and flags).
        batch_size: images a batch.
        order: ``"sequential"`` (evaluation), ``"shuffle"`` (a new permutation every epoch from a generator
            seeded with ``seed``) or a ``ClassBalancedBatches`` (its batches, as they come).
        drop_last: drop the last incomplete batch.
        rank, world_size: under data-parallel training every rank draws the same permutation, pads it to a
            multiple of ``world_size`` by repeating its first rows and takes every ``world_size``-th row from
            ``rank`` on (what ``DistributedSampler`` and ``TensorBatches`` do).
        prefetch: batches a background thread reads ahead (0: read in the consumer's thread).
        pin_memory: read into page-locked memory when CUDA is available.
    """

    def __init__(
        self,
        store: ImageStore,
        rows: torch.Tensor,
        split: Split,
        batch_size: int,
        order: str | ClassBalancedBatches = "sequential",
        seed: int = 0,
        drop_last: bool = False,
        rank: int = 0,
        world_size: int = 1,
        prefetch: int = 2,
        pin_memory: bool = False,
    ):
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        if isinstance(order, str) and order not in ("sequential", "shuffle"):
            raise ValueError(f"order must be 'sequential', 'shuffle' or a ClassBalancedBatches, got {order!r}")
        self.store, self.rows, self.split, self.batch_size = store, rows, split, batch_size
        self.order, self.drop_last, self.rank, self.world_size = order, drop_last, rank, world_size
        self.prefetch, self.pin_memory = prefetch, pin_memory
        self.generator = torch.Generator().manual_seed(seed)

    @property
    def rows_per_rank(self) -> int:
        return math.ceil(len(self.rows) / self.world_size)

    def __len__(self) -> int:
        if isinstance(self.order, ClassBalancedBatches):
            return len(self.order)
        m = self.rows_per_rank
        return m // self.batch_size if self.drop_last else math.ceil(m / self.batch_size)

    def _positions(self) -> list[torch.Tensor]:
        """This epoch's batches as positions in the split; drawn in the caller's thread (seeded, in order)."""
        if isinstance(self.order, ClassBalancedBatches):
            return [torch.tensor(b, dtype=torch.long) for b in self.order]
        n = len(self.rows)
        order = torch.randperm(n, generator=self.generator) if self.order == "shuffle" else torch.arange(n)
        if self.world_size > 1 and n > 0:
            padding = self.rows_per_rank * self.world_size - n
            order = torch.cat([order, order.repeat(math.ceil(padding / n))[:padding]])
            order = order[self.rank :: self.world_size]
        return [order[b * self.batch_size : (b + 1) * self.batch_size] for b in range(len(self))]

    def _batch(self, positions: torch.Tensor) -> Split:
        images, sizes = self.store.batch(self.rows[positions], pin_memory=self.pin_memory)
        return {
            "images": images,
            "sizes": sizes,
            "index": positions,
            **{k: v[positions] for k, v in self.split.items()},
        }

    def __iter__(self) -> Iterator[Split]:
        positions = self._positions()
        if self.prefetch == 0:
            return (self._batch(p) for p in positions)
        return _prefetched((self._batch(p) for p in positions), self.prefetch)


class _Failure:
    def __init__(self, error: BaseException):
        self.error = error


_DONE = object()


def _prefetched(items: Iterator[Any], depth: int) -> Iterator[Any]:
    """``items`` produced by a background thread, up to ``depth`` ahead; an error there is raised here.

    Reading a batch is mostly copies out of the memmap, during which numpy releases the GIL, so the thread reads
    the next batches while the training step runs. Stopping early (a limit on the batches) stops the thread.
    """
    ready: queue.Queue = queue.Queue(maxsize=depth)
    stop = threading.Event()

    def put(item: Any) -> bool:
        while not stop.is_set():
            try:
                ready.put(item, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def work() -> None:
        try:
            for item in items:
                if not put(item):
                    return
            put(_DONE)
        except BaseException as error:  # handed to the consumer, raised there with its traceback
            put(_Failure(error))

    thread = threading.Thread(target=work, name="clusterable-image-prefetch", daemon=True)
    thread.start()
    try:
        while True:
            item = ready.get()
            if item is _DONE:
                return
            if isinstance(item, _Failure):
                raise item.error
            yield item
    finally:
        stop.set()
        thread.join(timeout=5)


def _part_names(parts: tuple[str, ...], codes: torch.Tensor) -> list[str]:
    return [parts[c] for c in codes.tolist()]
