"""MNIST and Fashion-MNIST under the COREL protocol (Kenyon-Dean et al. 2019, "Experimental design", Datasets).

The 60,000 training images minus a seeded, stratified hold-out of ``val_size`` (5,000 in the paper) for
validation, and the 10,000 test images. ``load_files`` finds the four idx-ubyte files (torchvision's layout
``<root>/FashionMNIST/raw/...``, the flat one in ``root``, then a read-only system folder such as Debian's
``/usr/share/datasets/fashion-mnist``) and reads them (``idx_files.read_idx``), recording each file's SHA-256.

``ensure_files`` is how the torchvision layout gets its files: it unpacks ``.gz`` archives, downloads what is
missing (when allowed) and checks each file's idx header and size, so a missing, truncated or garbled file fails
at once with one line naming it (``DatasetNotFoundError``, ``CorruptFileError``).
"""

from __future__ import annotations

import gzip
import os
import shutil
import zlib
from pathlib import Path
from typing import Any

import torch
from torchvision import datasets

from clusterable.data.errors import CorruptFileError, DatasetNotFoundError, last_line
from clusterable.data.memory.download import DOWNLOAD_TIMEOUT_S, socket_timeout
from clusterable.data.memory.idx_files import IMAGES_MAGIC, LABELS_MAGIC, find_flat, idx_dims, read_idx
from clusterable.data.splits import Split, SplitsWithNotes, split_off

__all__ = [
    "CorruptFileError",
    "DatasetNotFoundError",
    "check_files",
    "ensure_files",
    "expected_files",
    "load_files",
    "raw_folder",
    "read_mnist",
]

VARIANTS: dict[str, type[datasets.MNIST]] = {"mnist": datasets.MNIST, "fashion_mnist": datasets.FashionMNIST}
DISPLAY_NAMES = {"mnist": "MNIST", "fashion_mnist": "Fashion-MNIST"}

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


def load_files(
    root: str | Path, variant: str = "mnist", download: bool = True, system_root: str | Path | None = None
) -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
    """``variant``'s four idx arrays (uint8, by file name) and the record of the files read (``{"files": {name:
    {"path", "sha256"}}}``), from the first place that has them:

    1. ``root`` in torchvision's layout (``<root>/FashionMNIST/raw``: the files, or their archives, unpacked
       there; also where a download goes);
    2. ``root`` itself in the flat layout (``<root>/train-images-idx3-ubyte.gz``, ...);
    3. ``system_root`` in the flat layout (Debian's ``dataset-fashion-mnist``: ``/usr/share/datasets/
       fashion-mnist``), read only: an archive is unpacked in memory;
    4. torchvision's download into 1., when ``download``.

    ``root`` is ``dataset.root``, by default ``$CLUSTERABLE_DATA/<dataset>`` or ``data/<dataset>``
    (``paths.data_dir``). Raises ``DatasetNotFoundError`` naming every place searched, ``CorruptFileError``
    naming a bad file.
    """
    names = expected_files(variant)
    display = DISPLAY_NAMES[variant]
    raw = raw_folder(root, variant)
    in_torchvision_layout = any((raw / n).is_file() or (raw / f"{n}.gz").is_file() for n in names)
    if not in_torchvision_layout:
        for folder in (Path(root), system_root):
            flat = find_flat(folder, names)
            if flat is not None:
                system = folder is system_root
                fix = "reinstall its package" if system else "replace it"
                return _read_all(flat, display, fix)
    try:
        ensure_files(root, variant, download)
    except DatasetNotFoundError as e:
        if system_root is None:
            raise
        raise DatasetNotFoundError(
            f"{e} Also searched (flat layout): {Path(root).resolve()}, {Path(system_root)} (on Debian or Ubuntu: "
            f"apt-get install dataset-{variant.replace('_', '-')})"
        ) from None
    return _read_all({n: raw / n for n in names}, display, "replace it")


def _read_all(
    paths: dict[str, Path], display: str, fix: str
) -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
    arrays, files = {}, {}
    for name, path in paths.items():
        magic = IMAGES_MAGIC if "images" in name else LABELS_MAGIC
        arrays[name], digest = read_idx(path, magic, display, fix)
        files[name] = {"path": str(path.resolve()), "sha256": digest}
    for images, labels in PAIRS:
        if len(arrays[images]) != len(arrays[labels]):
            raise CorruptFileError(
                f"{display} files {paths[images].resolve()} and {paths[labels].resolve()} do not match: "
                f"{len(arrays[images]):,} images, {len(arrays[labels]):,} labels; {fix}"
            )
    return arrays, {"files": files}


def read_mnist(
    root: str | Path,
    variant: str = "mnist",
    val_size: int = 5000,
    split_seed: int = 0,
    download: bool = True,
    system_root: str | Path | None = None,
) -> SplitsWithNotes:
    """Read MNIST or Fashion-MNIST as COREL does: train minus a validation hold-out, and the test set.

    Args:
        root: folder holding ``MNIST/raw`` (or ``FashionMNIST/raw``) as torchvision lays it out, or the four
            files themselves (``load_files`` says where else it looks, in which order).
        variant: ``"mnist"`` or ``"fashion_mnist"``.
        val_size: number of training images held out for validation (stratified by label, seeded).
        split_seed: seed of the validation hold-out; the same seed always gives the same split.
        download: try torchvision's download when the files are missing.
        system_root: a system folder holding the four files in the flat layout, searched after ``root`` and
            never written (Debian's ``dataset-fashion-mnist``: ``/usr/share/datasets/fashion-mnist``).

    Returns:
        ``{"train", "val", "test"}`` splits with ``inputs`` (N, 1, 28, 28) float32 in [0, 1] and
        ``labels`` (N,) long; 55,000 / 5,000 / 10,000 images with the defaults. ``notes``: the files read, each
        with its SHA-256 (recorded in metrics.json as ``data_notes``).

    Raises:
        ValueError: a bad ``variant`` or ``val_size`` (the message starts with the parameter's name).
        DatasetNotFoundError: the files are missing and could not be downloaded.
        CorruptFileError: a file or archive is truncated or garbled (see ``ensure_files``).
    """
    _dataset_class(variant)
    if isinstance(val_size, bool) or not isinstance(val_size, int) or val_size < 1:
        raise ValueError(
            f"val_size must be a positive integer (a count of training images), got {val_size!r}"
        )
    arrays, notes = load_files(root, variant, download, system_root)
    (train_images, train_labels), (test_images, test_labels) = ((arrays[x], arrays[y]) for x, y in PAIRS)
    train = _to_split(train_images, train_labels)
    if val_size >= len(train["labels"]):
        raise ValueError(f"val_size must be in [1, {len(train['labels']) - 1}], got {val_size}")
    train, val = split_off(train, val_size, seed=split_seed)
    return SplitsWithNotes({"train": train, "val": val, "test": _to_split(test_images, test_labels)}, notes)


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
    """The dims in the header of the idx file ``path``, after checking its magic number and size
    (``idx_files.idx_dims``); only the header is read."""
    with open(path, "rb") as f:
        head = f.read(4 * (1 + (magic & 0xFF)))

    def corrupt(what: str) -> CorruptFileError:
        return CorruptFileError(
            f"{display_name} file {path.resolve()} is corrupt: {what}; replace it "
            f"({_how_to_redownload(path.parent, path.name)})"
        )

    return idx_dims(head, path.stat().st_size, magic, corrupt)


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
