"""MNIST and Fashion-MNIST under the COREL protocol (Kenyon-Dean et al. 2019, "Experimental design", Datasets).

The 60,000 training images minus a seeded, stratified hold-out of ``val_size`` (5,000 in the paper) for
validation, and the 10,000 test images. The idx-ubyte files are read through torchvision, so the on-disk
layout is torchvision's: ``<root>/MNIST/raw/train-images-idx3-ubyte`` (``<root>/FashionMNIST/raw/...``).

``ensure_files`` is the one way every MNIST reader gets at the files: it unpacks ``.gz`` archives, downloads
what is missing (when allowed) and checks each file's idx header and size before torchvision reads it, so a
missing, truncated or garbled file fails at once with one line naming it (``DatasetNotFoundError``,
``CorruptFileError``), not minutes later with a bare ``AssertionError`` from inside torchvision.
"""

from __future__ import annotations

import gzip
import math
import os
import shutil
import struct
import zlib
from pathlib import Path

import torch
from torchvision import datasets

from clusterable.data.errors import CorruptFileError, DatasetNotFoundError, last_line
from clusterable.data.memory.download import DOWNLOAD_TIMEOUT_S, socket_timeout
from clusterable.data.splits import Split, split_off

__all__ = [
    "CorruptFileError",
    "DatasetNotFoundError",
    "check_files",
    "ensure_files",
    "expected_files",
    "raw_folder",
    "read_mnist",
]

VARIANTS: dict[str, type[datasets.MNIST]] = {"mnist": datasets.MNIST, "fashion_mnist": datasets.FashionMNIST}
DISPLAY_NAMES = {"mnist": "MNIST", "fashion_mnist": "Fashion-MNIST"}

# The idx format (torchvision's ``read_sn3_pascalvincent_tensor``): a big-endian int32 magic number whose third
# byte is the element type (0x08: unsigned byte) and fourth the number of dimensions, then one big-endian int32
# per dimension, then the elements.
IMAGES_MAGIC = 0x00000803  # unsigned bytes, 3 dims: N, rows, cols
LABELS_MAGIC = 0x00000801  # unsigned bytes, 1 dim: N
IMAGE_SIZE = (28, 28)
# The two (images, labels) pairs torchvision reads (its ``_load_data``): the training and the test set.
PAIRS = (
    ("train-images-idx3-ubyte", "train-labels-idx1-ubyte"),
    ("t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"),
)


def raw_folder(root: str | Path, variant: str = "mnist") -> Path:
    """The folder torchvision reads the idx-ubyte files from: ``<root>/<MNIST|FashionMNIST>/raw``."""
    return Path(root) / _dataset_class(variant).__name__ / "raw"


def expected_files(variant: str = "mnist") -> list[str]:
    """The four uncompressed file names torchvision checks for (its ``resources`` without ``.gz``)."""
    return [name.removesuffix(".gz") for name, _ in _dataset_class(variant).resources]


def ensure_files(root: str | Path, variant: str = "mnist", download: bool = True) -> Path:
    """Make ``variant``'s four idx-ubyte files readable below ``root`` and return their folder.

    In order: unpack each ``<name>.gz`` whose ``<name>`` is absent; download the files still missing (when
    ``download``, with a timeout of ``DOWNLOAD_TIMEOUT_S`` per socket operation); check every file's header
    and size (``check_files``).

    Returns:
        ``raw_folder(root, variant)``, where torchvision will find the four files.

    Raises:
        ValueError: ``variant`` is not one of ``VARIANTS``.
        DatasetNotFoundError: files are missing and could not be downloaded (the message names them, the folder
            and what to do).
        CorruptFileError: a ``.gz`` archive cannot be unpacked, or a file is not what its idx header promises.
    """
    cls = _dataset_class(variant)
    raw = raw_folder(root, variant)
    _decompress_archives(raw, expected_files(variant), DISPLAY_NAMES[variant])
    missing, reason = _missing_files(raw, variant), None
    if missing and download:
        try:
            with socket_timeout(DOWNLOAD_TIMEOUT_S):
                _download(cls, root)
        except (RuntimeError, OSError) as err:  # URLError is an OSError
            reason = last_line(err)
        missing = _missing_files(raw, variant)
    if missing:
        # `from None`: the download's own traceback (mirror by mirror) would bury the one thing to do.
        raise DatasetNotFoundError(_not_found_message(variant, raw, missing, reason)) from None
    check_files(raw, variant)
    return raw


def check_files(raw: str | Path, variant: str = "mnist") -> None:
    """Check the four idx-ubyte files in ``raw`` without reading their data (headers and sizes only).

    Each file's magic number (images ``0x00000803``, labels ``0x00000801``), images of 28x28 pixels, its size
    equal to its header plus the product of its dims, and as many labels as images in each pair.

    Raises:
        CorruptFileError: one line naming the first file found wrong, what is wrong, and what to do.
    """
    raw, name = Path(raw), DISPLAY_NAMES[variant]
    for images_name, labels_name in PAIRS:
        images = _idx_dims(raw / images_name, IMAGES_MAGIC, name)
        labels = _idx_dims(raw / labels_name, LABELS_MAGIC, name)
        if images[0] != labels[0]:
            raise CorruptFileError(
                f"{name} files {(raw / images_name).resolve()} and {(raw / labels_name).resolve()} do not match: "
                f"{images[0]:,} images but {labels[0]:,} labels; replace them "
                f"({_how_to_redownload(raw, images_name, labels_name)})"
            )


def read_mnist(
    root: str | Path,
    variant: str = "mnist",
    val_size: int = 5000,
    split_seed: int = 0,
    download: bool = True,
) -> dict[str, Split]:
    """Read MNIST or Fashion-MNIST as COREL does: train minus a validation hold-out, and the test set.

    Args:
        root: folder holding ``MNIST/raw`` (or ``FashionMNIST/raw``) as torchvision lays it out.
        variant: ``"mnist"`` or ``"fashion_mnist"``.
        val_size: number of training images held out for validation (stratified by label, seeded).
        split_seed: seed of the validation hold-out; the same seed always gives the same split.
        download: try torchvision's download when the files are missing.

    Returns:
        ``{"train", "val", "test"}`` splits with ``inputs`` (N, 1, 28, 28) float32 in [0, 1] and
        ``labels`` (N,) long; 55,000 / 5,000 / 10,000 images with the defaults.

    Raises:
        ValueError: a bad ``variant`` or ``val_size`` (the message starts with the parameter's name).
        DatasetNotFoundError: the files are missing and could not be downloaded.
        CorruptFileError: a file or archive is truncated or garbled (see ``ensure_files``).
    """
    cls = _dataset_class(variant)
    if isinstance(val_size, bool) or not isinstance(val_size, int) or val_size < 1:
        raise ValueError(
            f"val_size must be a positive integer (a count of training images), got {val_size!r}"
        )
    ensure_files(root, variant, download)
    train_set, test_set = cls(str(root), train=True), cls(str(root), train=False)
    train = _to_split(train_set.data, train_set.targets)
    if val_size >= len(train["labels"]):
        raise ValueError(f"val_size must be in [1, {len(train['labels']) - 1}], got {val_size}")
    train, val = split_off(train, val_size, seed=split_seed)
    return {"train": train, "val": val, "test": _to_split(test_set.data, test_set.targets)}


def _dataset_class(variant: str) -> type[datasets.MNIST]:
    if variant not in VARIANTS:
        raise ValueError(f"variant must be one of {sorted(VARIANTS)}, got {variant!r}")
    return VARIANTS[variant]


def _to_split(images: torch.Tensor, labels: torch.Tensor) -> Split:
    """uint8 images (N, 28, 28) -> float32 (N, 1, 28, 28) in [0, 1]; labels (N,) long."""
    return {"inputs": images.unsqueeze(1).to(torch.float32).div_(255.0), "labels": labels.long()}


def _missing_files(raw: Path, variant: str) -> list[str]:
    return [name for name in expected_files(variant) if not (raw / name).is_file()]


def _download(cls: type[datasets.MNIST], root: str | Path) -> None:
    """torchvision's download of all four archives (unpacked next to them), without reading the files.

    Constructing the dataset with ``download=True`` would also parse the training files, and a bad download
    would then fail inside torchvision; ``check_files`` reports it instead. ``download`` needs only ``root``.
    """
    dataset = cls.__new__(cls)
    dataset.root = os.path.expanduser(str(root))
    dataset.download()


def _decompress_archives(raw: Path, names: list[str], display_name: str = "MNIST") -> None:
    """Unpack ``<name>.gz`` next to itself where only the archive is present.

    torchvision checks for the uncompressed files and, without ``download=True``, ignores the ``.gz``
    archives the dataset is published as; unpacking them here lets a user drop the files in as they come.

    Raises:
        CorruptFileError: an archive is not gzip data or ends early; nothing is left behind for it.
    """
    for name in names:
        archive, target = raw / f"{name}.gz", raw / name
        if archive.is_file() and not target.is_file():
            # One partial file per process: DDP ranks may unpack the same archive at the same time.
            partial = target.with_name(f"{name}.{os.getpid()}.partial")
            try:
                with gzip.open(archive, "rb") as src, open(partial, "wb") as dst:
                    shutil.copyfileobj(src, dst)
            except (gzip.BadGzipFile, EOFError, zlib.error) as err:
                partial.unlink(missing_ok=True)
                raise CorruptFileError(
                    f"{display_name} archive {archive.resolve()} is corrupt: it cannot be unpacked "
                    f"({last_line(err)}); replace it (delete it to download again)"
                ) from None
            except BaseException:
                partial.unlink(missing_ok=True)
                raise
            partial.replace(target)  # atomic: an interrupted unpack never leaves a truncated file behind


def _idx_dims(path: Path, magic: int, display_name: str) -> tuple[int, ...]:
    """The dims in the header of the idx file ``path``, after checking its magic number and size.

    ``magic`` is the expected magic number (``IMAGES_MAGIC`` or ``LABELS_MAGIC``); for images, the rows and
    columns must be ``IMAGE_SIZE``.
    """
    ndim = magic & 0xFF
    header = 4 * (1 + ndim)
    size = path.stat().st_size
    with open(path, "rb") as f:
        head = f.read(header)

    def corrupt(what: str) -> CorruptFileError:
        return CorruptFileError(
            f"{display_name} file {path.resolve()} is corrupt: {what}; replace it "
            f"({_how_to_redownload(path.parent, path.name)})"
        )

    kind = "images" if magic == IMAGES_MAGIC else "labels"
    if len(head) < 4:
        raise corrupt(f"it has {size:,} bytes, too few for an idx header (empty or truncated?)")
    found = struct.unpack(">I", head[:4])[0]
    if found != magic:
        raise corrupt(
            f"magic number 0x{found:08X}, expected 0x{magic:08X} for idx {kind} "
            f"(unsigned bytes, {ndim} dim{'s' if ndim > 1 else ''}: is it another file?)"
        )
    if len(head) < header:
        raise corrupt(f"it has {size:,} bytes, fewer than its {header}-byte header (truncated?)")
    dims = struct.unpack(f">{ndim}I", head[4:])
    if magic == IMAGES_MAGIC and dims[1:] != IMAGE_SIZE:
        raise corrupt(
            f"its header gives images of {dims[1]}x{dims[2]} pixels, expected "
            f"{IMAGE_SIZE[0]}x{IMAGE_SIZE[1]} (garbled header or another dataset's file?)"
        )
    promised = header + math.prod(dims)
    if size != promised:
        why = "truncated?" if size < promised else "extra bytes at the end, or a garbled header?"
        raise corrupt(f"header promises {promised:,} bytes, the file has {size:,} ({why})")
    return dims


def _how_to_redownload(raw: Path, *names: str) -> str:
    """What to delete so that the next run fetches ``names`` again: their ``.gz`` archives too where present,
    since an archive next to a missing file is unpacked again."""
    archives = [f"{name}.gz" for name in names if (raw / f"{name}.gz").is_file()]
    also = f" and {', '.join(archives)}" if archives else ""
    return f"delete {'it' if len(names) == 1 else 'them'}{also} to download again"


def _not_found_message(variant: str, raw: Path, missing: list[str], reason: str | None) -> str:
    name, folder, files = DISPLAY_NAMES[variant], raw.resolve(), expected_files(variant)
    which = "" if len(missing) == len(files) else f" (missing: {', '.join(missing)})"
    tried = f" Downloading it failed: {reason}." if reason else ""
    return (
        f"{name} not found in {folder}{which}.{tried} Put the four idx-ubyte files {', '.join(files)} "
        f"(or their .gz archives) in {folder}, or set dataset.root=DIR to read "
        f"DIR/{raw.parent.name}/raw instead (paths.data_dir moves every dataset). "
        "dataset.source=fake runs offline on a synthetic stand-in."
    )
