"""MNIST and Fashion-MNIST under the COREL protocol (Kenyon-Dean et al. 2019, "Experimental design", Datasets).

The 60,000 training images minus a seeded, stratified hold-out of ``val_size`` (5,000 in the paper) for
validation, and the 10,000 test images. ``load_files`` finds the four idx-ubyte files (torchvision's layout
``<root>/FashionMNIST/raw/...``, the flat one in ``root``, then a read-only system folder such as Debian's
``/usr/share/datasets/fashion-mnist``, then torchvision's download), reads them in memory (``idx_files.read_idx``:
nothing is written where they lie) and checks them: first their format (a missing, truncated or garbled file is
one line naming it: ``DatasetNotFoundError``, ``CorruptFileError``), then, unless ``verify`` is off, that each is
the published file (``check_published``: its count of images or labels and the SHA-256 of its content; a subset,
the other split's file or another dataset's is one line naming the file, what it should be and what to do:
``WrongFileError``). Each file read is recorded with its path and SHA-256.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import torch
from torchvision import datasets

from clusterable.data.errors import CorruptFileError, DatasetNotFoundError, WrongFileError, last_line
from clusterable.data.memory.download import DOWNLOAD_TIMEOUT_S, socket_timeout
from clusterable.data.memory.idx_files import (
    IMAGES_MAGIC,
    LABELS_MAGIC,
    file_names,
    find_idx_files,
    read_idx,
    stray_files,
)
from clusterable.data.splits import Split, SplitsWithNotes, split_off

__all__ = [
    "PUBLISHED_COUNTS",
    "PUBLISHED_SHA256",
    "CorruptFileError",
    "DatasetNotFoundError",
    "WrongFileError",
    "expected_files",
    "load_files",
    "raw_folder",
    "read_mnist",
]

log = logging.getLogger(__name__)

VARIANTS: dict[str, type[datasets.MNIST]] = {"mnist": datasets.MNIST, "fashion_mnist": datasets.FashionMNIST}
DISPLAY_NAMES = {"mnist": "MNIST", "fashion_mnist": "Fashion-MNIST"}

# The two (images, labels) pairs torchvision reads (its ``_load_data``): the training and the test set.
PAIRS = (
    ("train-images-idx3-ubyte", "train-labels-idx1-ubyte"),
    ("t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"),
)

# The published files: the images (and labels) each split holds, and the SHA-256 of each file's idx bytes, an
# archive unpacked. Of the content rather than of the archives (whose MD5s torchvision's ``resources`` list) because
# the same files come packed differently: Debian's dataset-fashion-mnist re-compresses them (other archive bytes, the
# same content), torchvision unpacks them next to their archives, mirrors ship them uncompressed. MNIST's: the files
# in the archives torchvision lists, as several projects publish them (checked here against a copy of those archives
# for the three smaller files); Fashion-MNIST's: computed from Debian's package, whose unpacked files have the MD5s
# published for the files of the archives torchvision lists. Module attributes so that tests can put tiny files'
# counts and digests in their place.
PUBLISHED_COUNTS: dict[str, int] = {"train": 60_000, "t10k": 10_000}  # by the file name's prefix
PUBLISHED_SHA256: dict[str, dict[str, str]] = {
    "mnist": {
        "train-images-idx3-ubyte": "ba891046e6505d7aadcbbe25680a0738ad16aec93bde7f9b65e87a2fc25776db",
        "train-labels-idx1-ubyte": "65a50cbbf4e906d70832878ad85ccda5333a97f0f4c3dd2ef09a8a9eef7101c5",
        "t10k-images-idx3-ubyte": "0fa7898d509279e482958e8ce81c8e77db3f2f8254e26661ceb7762c4d494ce7",
        "t10k-labels-idx1-ubyte": "ff7bcfd416de33731a308c3f266cc351222c34898ecbeaf847f06e48f7ec33f2",
    },
    "fashion_mnist": {
        "train-images-idx3-ubyte": "c59f468a2f672dc815687fe0f83887768d799fd8a3f3276145d20f83aa44d888",
        "train-labels-idx1-ubyte": "bad3541b69d912435c50bb6ba87bec294ff4f6a2e1246121d8633921760443d9",
        "t10k-images-idx3-ubyte": "5b4141f0afbad91edebe8549f8fcffe087ea10ca49f1dbef5c9a5cd8815ce37b",
        "t10k-labels-idx1-ubyte": "0402a96d92fd2663957122ceb108a494c5af83dab82d92729df917d7dec38c34",
    },
}

# What to do about a bad file, by where it lies: torchvision's layout is where a download goes, the flat root is the
# user's own copy, the system folder a package's.
FIX_RAW = "replace it (delete it to download again)"
FIX_ROOT = "replace it"
FIX_SYSTEM = "reinstall its package"
OPT_OUT = "or set dataset.reader.verify=false to read files of your own (a subset, a re-encoding)"


def raw_folder(root: str | Path, variant: str = "mnist") -> Path:
    """The folder torchvision reads the idx-ubyte files from: ``<root>/<MNIST|FashionMNIST>/raw``."""
    return Path(root).expanduser() / _dataset_class(variant).__name__ / "raw"


def expected_files(variant: str = "mnist") -> list[str]:
    """The four uncompressed file names torchvision checks for (its ``resources`` without ``.gz``)."""
    return [name.removesuffix(".gz") for name, _ in _dataset_class(variant).resources]


def load_files(
    root: str | Path,
    variant: str = "mnist",
    download: bool = True,
    system_root: str | Path | None = None,
    verify: bool = True,
) -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
    """``variant``'s four idx arrays (uint8, by file name) and the record of the files read (``{"files": {name:
    {"path", "sha256"}}}``), from the first place that has them:

    1. ``root`` in torchvision's layout (``<root>/FashionMNIST/raw``; where a download goes: with ``download``,
       the files missing there are downloaded);
    2. ``root`` itself in the flat layout (``<root>/train-images-idx3-ubyte.gz``, ...);
    3. ``system_root`` in the flat layout (Debian's ``dataset-fashion-mnist``: ``/usr/share/datasets/
       fashion-mnist``);
    4. torchvision's download into 1., when ``download``.

    Each file under any of its ``idx_files.file_names`` (``train-images.idx3-ubyte``, ``.gz`` archives); archives
    are unpacked in memory, so no place but a download's is written. A place holding some of the files but not all
    is refused (it would otherwise be passed over for the next): one line naming the missing ones. ``root`` is
    ``dataset.root``, by default ``$CLUSTERABLE_DATA/<dataset>`` or ``data/<dataset>`` (``paths.data_dir``).

    With ``verify``, each file must be the published one (``check_published``).

    Raises:
        ValueError: ``variant`` is not one of ``VARIANTS``.
        DatasetNotFoundError: no place has the four files (naming every place searched, and the files there that
            look like the dataset's under names not read), or one has only some of them.
        CorruptFileError: a file or archive is truncated or garbled, or an images file does not pair with its
            labels file.
        WrongFileError: with ``verify``, a file is well-formed but is not the published file.
    """
    names = expected_files(variant)
    display = DISPLAY_NAMES[variant]
    root = Path(root).expanduser()
    raw = raw_folder(root, variant)
    found = find_idx_files(raw, names)
    if len(found) == len(names):
        return _read_all(found, variant, FIX_RAW, verify)
    # torchvision's layout begun: complete it by a download or say what it lacks, never look elsewhere.
    if found:
        reason = _download(variant, root, raw) if download else None
        found = find_idx_files(raw, names)
        if len(found) < len(names):
            # `from None`: the download's own error (mirror by mirror) would bury the one thing to do.
            raise DatasetNotFoundError(_not_found_message(variant, raw, _missing(names, found), reason)) from None
        return _read_all(found, variant, FIX_RAW, verify)
    for folder, fix in ((root, FIX_ROOT), (system_root, FIX_SYSTEM)):
        found = find_idx_files(folder, names)
        if len(found) == len(names):
            if folder is system_root:
                _warn_strays(variant, root, raw, folder)
            return _read_all(found, variant, fix, verify)
        if found:
            system = folder is system_root
            raise DatasetNotFoundError(_incomplete_message(variant, Path(folder), found, system))
    reason = None
    if download:
        reason = _download(variant, root, raw)
        found = find_idx_files(raw, names)
        if len(found) == len(names):
            _warn_strays(variant, root, raw, raw)
            return _read_all(found, variant, FIX_RAW, verify)
    message = _not_found_message(variant, raw, _missing(names, found), reason)
    if system_root is not None:
        message += (
            f" Also searched (flat layout): {root.resolve()}, {Path(system_root)} (on Debian or Ubuntu: "
            f"apt-get install dataset-{variant.replace('_', '-')})."
        )
    strays = stray_files(root, names) + stray_files(raw, names)
    if strays:
        message += f" {_strays_sentence(display, strays, names)}"
    raise DatasetNotFoundError(message) from None  # as above: the download's error is in `reason`


def check_published(variant: str, name: str, path: Path, count: int, content_sha256: str, fix: str) -> None:
    """The file ``name`` read from ``path`` (holding ``count`` images or labels, its idx bytes of SHA-256
    ``content_sha256``) is the published one: first its count (a subset, a truncated copy given a new header, the
    other split's file), then its checksum (another dataset's file, other images of the same count).

    Raises:
        WrongFileError: one line naming the file, what it holds against what the published file holds, what it is
            when it is another known file (the other split's, the other dataset's), and ``fix`` or the opt-out.
    """
    display = DISPLAY_NAMES[variant]
    prefix, kind = name.split("-")[:2]
    published_count, published_sha256 = PUBLISHED_COUNTS[prefix], PUBLISHED_SHA256[variant][name]
    todo = f"{fix}, {OPT_OUT}"
    if count != published_count:
        # The splits hold different counts: the other split's count names the likely swap.
        other = next((f"{p}-{name.split('-', 1)[1]}" for p, c in PUBLISHED_COUNTS.items() if c == count), None)
        guess = f": is it {other} (training and test files swapped?)" if other else " (a subset, or cut short?)"
        raise WrongFileError(
            f"{display} file {path.resolve()} holds {count:,} {kind} where the published {name} holds "
            f"{published_count:,}{guess}; {todo}"
        )
    if content_sha256 != published_sha256:
        known = [
            f"{DISPLAY_NAMES[v]}'s {n}"
            for v, digests in PUBLISHED_SHA256.items()
            for n, digest in digests.items()
            if digest == content_sha256
        ]
        what = (
            f"it is {known[0]}"
            if known
            else f"the SHA-256 of its content is {content_sha256}, the published file's {published_sha256}"
        )
        raise WrongFileError(f"{display} file {path.resolve()} is not the published {name}: {what}; {todo}")


def _read_all(
    paths: dict[str, Path], variant: str, fix: str, verify: bool
) -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
    """Read the four files (each one's format checked), then with ``verify`` check each is the published file,
    then that each images file pairs with its labels file."""
    display = DISPLAY_NAMES[variant]
    arrays, files, content = {}, {}, {}
    for name, path in paths.items():
        magic = IMAGES_MAGIC if "images" in name else LABELS_MAGIC
        idx = read_idx(path, magic, display, fix)
        arrays[name], content[name] = idx.data, idx.content_sha256
        files[name] = {"path": str(path.resolve()), "sha256": idx.sha256}
    if verify:  # before the pairing: a file swapped for the other split's is named as such, not as a mismatch
        for name, path in paths.items():
            check_published(variant, name, path, len(arrays[name]), content[name], fix)
    for images, labels in PAIRS:
        if len(arrays[images]) != len(arrays[labels]):
            raise CorruptFileError(
                f"{display} files {paths[images].resolve()} and {paths[labels].resolve()} do not match: "
                f"{len(arrays[images]):,} images but {len(arrays[labels]):,} labels; {fix}"
            )
    return arrays, {"files": files}


def read_mnist(
    root: str | Path,
    variant: str = "mnist",
    val_size: int = 5000,
    split_seed: int = 0,
    download: bool = True,
    system_root: str | Path | None = None,
    verify: bool = True,
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
        verify: check that each file is the published one (60,000 training and 10,000 test images and labels,
            and the SHA-256 of each file's content: ``PUBLISHED_SHA256``); false reads files of your own (a subset, a
            re-encoding) after the format checks alone.

    Returns:
        ``{"train", "val", "test"}`` splits with ``inputs`` (N, 1, 28, 28) float32 in [0, 1] and
        ``labels`` (N,) long; 55,000 / 5,000 / 10,000 images with the defaults. ``notes``: the files read, each
        with its SHA-256 (recorded in metrics.json as ``data_notes``).

    Raises:
        ValueError: a bad ``variant`` or ``val_size`` (the message starts with the parameter's name).
        DatasetNotFoundError: the files are missing and could not be downloaded.
        CorruptFileError: a file or archive is truncated or garbled (``WrongFileError``: not the published file).
    """
    _dataset_class(variant)
    if isinstance(val_size, bool) or not isinstance(val_size, int) or val_size < 1:
        raise ValueError(f"val_size must be a positive integer (a count of training images), got {val_size!r}")
    arrays, notes = load_files(root, variant, download, system_root, verify)
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


def _download(variant: str, root: Path, raw: Path) -> str | None:
    """torchvision's download of the four archives into ``raw`` (unpacked next to them), with a timeout of
    ``DOWNLOAD_TIMEOUT_S`` per socket operation; why it failed, or None.

    Constructing the dataset with ``download=True`` would also parse the training files, and a bad download
    would then fail inside torchvision; ``load_files`` reads and checks them instead. ``download`` needs only
    ``root``. torchvision creates ``raw`` before it tries the network: the folders it created are removed again
    when they stay empty, so that a failed lookup leaves nothing behind in the working directory.
    """
    created = []
    folder = raw
    while not folder.exists():
        created.append(folder)  # deepest first: the order to remove them in
        folder = folder.parent
    cls = _dataset_class(variant)
    dataset = cls.__new__(cls)
    dataset.root = str(root)
    reason = None
    try:
        with socket_timeout(DOWNLOAD_TIMEOUT_S):
            dataset.download()
    except (RuntimeError, OSError) as err:  # URLError is an OSError
        reason = last_line(err)
    for folder in created:
        try:
            folder.rmdir()  # only an empty folder: what a partial download fetched stays
        except OSError:
            break
    return reason


def _missing(names: list[str], found: dict[str, Path]) -> list[str]:
    return [n for n in names if n not in found]


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


def _incomplete_message(variant: str, folder: Path, found: dict[str, Path], system: bool) -> str:
    """One place holds some of the four files: they are named, and the missing ones with the names they may have."""
    display, names = DISPLAY_NAMES[variant], expected_files(variant)
    missing = _missing(names, found)
    have = ", ".join(p.name for p in found.values())
    spellings = "; ".join(" or ".join(file_names(n)) for n in missing)
    todo = (
        "reinstall its package"
        if system
        else "put the missing files there too, or move these away to read the files from the next place searched"
    )
    return f"{display} incomplete in {folder.resolve()}: it has {have} but no {spellings}; {todo}"


def _strays_sentence(display: str, strays: list[Path], names: list[str]) -> str:
    listed = ", ".join(str(p.resolve()) + ("/" if p.is_dir() else "") for p in strays)
    return (
        f"Not read, as their names are not {display}'s: {listed} (rename them to {', '.join(names)}, with .gz for "
        "archives, or the mirrors' train-images.idx3-ubyte style)."
    )


def _warn_strays(variant: str, root: Path, raw: Path, elsewhere: str | Path) -> None:
    """Name the files in ``root`` (or ``raw``) that look like the dataset's but were not read, before reading from
    ``elsewhere`` (the system folder, or ``raw`` after a download), so that the user knows why theirs were not used."""
    names = expected_files(variant)
    strays = stray_files(root, names) + stray_files(raw, names)
    if strays:
        sentence = _strays_sentence(DISPLAY_NAMES[variant], strays, names)
        log.warning("%s Reading %s instead.", sentence, Path(elsewhere).resolve())
