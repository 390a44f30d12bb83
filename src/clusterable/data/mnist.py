"""MNIST and Fashion-MNIST under the COREL protocol (Kenyon-Dean et al. 2019, REFERENCE.md §1.3).

The 60,000 training images minus a seeded, stratified hold-out of ``val_size`` (5,000 in the paper) for
validation, and the 10,000 test images. The idx-ubyte files are read through torchvision, so the on-disk
layout is torchvision's: ``<root>/MNIST/raw/train-images-idx3-ubyte`` (``<root>/FashionMNIST/raw/...``).
"""

from __future__ import annotations

import contextlib
import gzip
import shutil
import socket
from collections.abc import Iterator
from pathlib import Path
from urllib.error import URLError

import torch
from torchvision import datasets

from clusterable.data.datamodule import Split, split_off

VARIANTS: dict[str, type[datasets.MNIST]] = {"mnist": datasets.MNIST, "fashion_mnist": datasets.FashionMNIST}
DISPLAY_NAMES = {"mnist": "MNIST", "fashion_mnist": "Fashion-MNIST"}

# torchvision's urlopen has no timeout of its own; where packets are dropped rather than refused, a download
# attempt would otherwise hang for minutes before failing.
DOWNLOAD_TIMEOUT_S = 30.0


class DatasetNotFoundError(FileNotFoundError):
    """The dataset's files are not on disk and could not be downloaded."""


def raw_folder(root: str | Path, variant: str = "mnist") -> Path:
    """The folder torchvision reads the idx-ubyte files from: ``<root>/<MNIST|FashionMNIST>/raw``."""
    return Path(root) / _dataset_class(variant).__name__ / "raw"


def expected_files(variant: str = "mnist") -> list[str]:
    """The four uncompressed file names torchvision checks for (its ``resources`` without ``.gz``)."""
    return [name.removesuffix(".gz") for name, _ in _dataset_class(variant).resources]


def read_mnist(
    root: str,
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
        DatasetNotFoundError: the files are missing and could not be downloaded.
    """
    cls = _dataset_class(variant)
    if isinstance(val_size, bool) or not isinstance(val_size, int) or val_size < 1:
        raise ValueError(
            f"val_size must be a positive integer (a count of training images), got {val_size!r}"
        )
    raw = raw_folder(root, variant)
    _decompress_archives(raw, expected_files(variant))
    missing = _missing_files(raw, variant)
    reason = None
    if missing and download:
        try:
            with _socket_timeout(DOWNLOAD_TIMEOUT_S):
                cls(root, train=True, download=True)
        except (URLError, RuntimeError, OSError) as err:
            reason = _last_line(err)
        missing = _missing_files(raw, variant)
    if missing:
        # `from None`: the download's own traceback (mirror by mirror) would bury the one thing to do.
        raise DatasetNotFoundError(_not_found_message(variant, raw, missing, reason)) from None

    train_set, test_set = cls(root, train=True), cls(root, train=False)
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


def _decompress_archives(raw: Path, names: list[str]) -> None:
    """Unpack ``<name>.gz`` next to itself where only the archive is present.

    torchvision checks for the uncompressed files and, without ``download=True``, ignores the ``.gz``
    archives the dataset is published as; unpacking them here lets a user drop the files in as they come.
    """
    for name in names:
        archive, target = raw / f"{name}.gz", raw / name
        if archive.is_file() and not target.is_file():
            partial = target.with_suffix(".partial")
            with gzip.open(archive, "rb") as src, open(partial, "wb") as dst:
                shutil.copyfileobj(src, dst)
            partial.replace(target)  # atomic: an interrupted unpack never leaves a truncated file behind


@contextlib.contextmanager
def _socket_timeout(seconds: float) -> Iterator[None]:
    previous = socket.getdefaulttimeout()
    socket.setdefaulttimeout(seconds)
    try:
        yield
    finally:
        socket.setdefaulttimeout(previous)


def _last_line(err: BaseException) -> str:
    lines = [line.strip() for line in str(err).splitlines() if line.strip()]
    return lines[-1] if lines else type(err).__name__


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
