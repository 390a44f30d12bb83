"""OrganAMNIST (MedMNIST; Yang et al. 2021), the second dataset of Safir 2022 (section 6.1.5).

28x28 grey axial slices of abdominal CT scans (the Liver Tumor Segmentation Benchmark), labelled with one of 11
organs (``CLASSES``; Safir 2022's section 6.3 says 10 classes, its section 6.1.5 and the data say 11). The file is
MedMNIST's ``organamnist.npz``, read with NumPy: ``{train,val,test}_images`` (N, 28, 28) uint8 and
``{train,val,test}_labels`` (N, 1). The splits are the file's own.

Two versions of the file exist, told apart by their sizes (``SIZES``):
- ``v2``: MedMNIST v2 (Zenodo record 6496656), 58,850 images, the file Safir 2022 used;
- ``v3``: MedMNIST+ (``medmnist>=3``, Zenodo record 10519652), the current download, with 20 blank training
  images removed.
Only the v3 file can be downloaded (through the optional ``medmnist`` package: ``pip install medmnist``).
Unless ``verify`` is off, the file's MD5 must be the one medmnist publishes for its version (``MD5S``).
"""

from __future__ import annotations

import hashlib
import zipfile
import zlib
from pathlib import Path
from typing import Literal

import numpy as np
import torch

from clusterable.data.errors import CorruptFileError, DatasetNotFoundError, WrongFileError, last_line
from clusterable.data.memory.download import DOWNLOAD_TIMEOUT_S, socket_timeout
from clusterable.data.splits import Split

__all__ = ["CLASSES", "FILE_NAME", "MD5S", "SIZES", "read_organamnist"]

FILE_NAME = "organamnist.npz"
# The label of each organ is its position (MedMNIST's INFO["organamnist"]["label"]).
CLASSES = (
    "bladder",
    "femur-left",
    "femur-right",
    "heart",
    "kidney-left",
    "kidney-right",
    "liver",
    "lung-left",
    "lung-right",
    "pancreas",
    "spleen",
)
SPLIT_NAMES = ("train", "val", "test")
IMAGE_SIZE = (28, 28)
# Images per split of each version of the file, checked on every read. A module attribute (not a constant inside
# the function) so that tests can shrink it for tiny fixture files.
SIZES: dict[str, dict[str, int]] = {
    "v2": {"train": 34_581, "val": 6_491, "test": 17_778},  # MedMNIST v2: 58,850 images (Safir 2022)
    "v3": {"train": 34_561, "val": 6_491, "test": 17_778},  # MedMNIST+: 20 blank training images removed
}
ZENODO_RECORDS = {"v2": "6496656", "v3": "10519652"}
# The MD5 of each version's organamnist.npz as medmnist publishes it (its INFO["organamnist"]["MD5"]: medmnist 2.x
# for v2, the file of Zenodo records 5208230 and 6496656; medmnist 3.x for v3), the sum its download checks.
MD5S = {"v2": "866b832ed4eeba67bfb9edee1d5544e6", "v3": "68e3f8846a6bd62f0c9bf841c0d9eacc"}
ZIP_MAGIC = b"PK\x03\x04"  # an .npz is a zip archive of .npy files
NPY_MAGIC = b"\x93NUMPY"


def read_organamnist(
    root: str, version: Literal["v2", "v3"] = "v3", download: bool = True, verify: bool = True
) -> dict[str, Split]:
    """Read ``<root>/organamnist.npz``: the file's own train/val/test splits.

    Args:
        root: the folder holding ``organamnist.npz``.
        version: which version of the file is expected, ``"v2"`` (MedMNIST v2, Safir 2022's) or ``"v3"``
            (MedMNIST+, the current download); the file's sizes must match it.
        download: when the file is missing and ``version`` is ``"v3"``, download it through the ``medmnist``
            package (if installed), with a timeout of ``DOWNLOAD_TIMEOUT_S`` per socket operation.
        verify: check the file's MD5 against the one medmnist publishes for ``version`` (``MD5S``), after the
            checks of its format and sizes; false reads a file of your own (re-saved, a subset of the arrays).

    Returns:
        ``{"train", "val", "test"}`` splits with ``inputs`` (N, 1, 28, 28) float32 in [0, 1] and ``labels`` (N,)
        long in [0, 11); ``SIZES[version]`` images each.

    Raises:
        ValueError: ``version`` is not v2 or v3, or the file is the other version's (the message starts with
            ``version``, so that the datamodule reports it as ``reader.version``).
        DatasetNotFoundError: the file is missing and was not downloaded (one line: the file, the folder and
            how to get it).
        CorruptFileError: the file cannot be read as an .npz archive, lacks a key, holds images of another shape,
            labels outside 0..10, or sizes of neither version.
        WrongFileError: with ``verify``, a well-formed file that is not the published one (another MD5).
    """
    if version not in SIZES:
        raise ValueError(f"version must be one of {', '.join(SIZES)}, got {version!r}")
    folder = Path(root).expanduser().resolve()
    path = folder / FILE_NAME
    if not path.is_file():
        reason = _download(folder, version) if download else None
        if not path.is_file():
            # `from None`: a download's traceback would bury the one thing to do.
            raise DatasetNotFoundError(_not_found_message(folder, version, reason)) from None
    arrays = _load(path)
    splits = {s: _to_split(path, s, arrays[f"{s}_images"], arrays[f"{s}_labels"]) for s in SPLIT_NAMES}
    _check_sizes(path, version, {s: len(splits[s]["labels"]) for s in SPLIT_NAMES})
    for s in SPLIT_NAMES:
        labels = splits[s]["labels"]
        if labels.size == 0:
            continue
        low, high = int(labels.min()), int(labels.max())
        if low < 0 or high >= len(CLASSES):
            raise CorruptFileError(
                f"OrganAMNIST file {path} is corrupt: {s}_labels go from {low} to {high}, expected organ ids "
                f"0..{len(CLASSES) - 1}; {_replace(version)}"
            )
    if verify:
        _check_md5(path, version)
    return {s: _tensors(split) for s, split in splits.items()}


def _check_md5(path: Path, version: str) -> None:
    """The file's MD5 is the published one of ``version``; checked last, since the format and size checks say
    more about a file that fails them. A ``WrongFileError`` (one line) otherwise."""
    md5 = hashlib.md5(path.read_bytes(), usedforsecurity=False).hexdigest()
    if md5 != MD5S[version]:
        raise WrongFileError(
            f"OrganAMNIST file {path} is not MedMNIST's {version} {FILE_NAME}: its MD5 is {md5}, the published "
            f"file's {MD5S[version]} (medmnist's INFO); {_replace(version)}, or set dataset.reader.verify=false to "
            "read a file of your own (re-saved, a subset)"
        )


def _download(folder: Path, version: str) -> str | None:
    """Fetch the v3 file into ``folder`` through ``medmnist``; why it was not fetched, or None if it was."""
    if version != "v3":
        return "medmnist downloads the v3 file only"
    try:
        import medmnist
    except ImportError:
        return "the medmnist package is not installed"
    try:
        folder.mkdir(parents=True, exist_ok=True)  # medmnist refuses a root that does not exist
        # medmnist downloads with torchvision's download_url, which has no timeout of its own: where packets
        # are dropped it would hang for minutes.
        with socket_timeout(DOWNLOAD_TIMEOUT_S):
            medmnist.OrganAMNIST(split="train", root=str(folder), download=True)
    except Exception as err:  # medmnist turns every download failure into a bare RuntimeError
        return f"downloading it failed: {last_line(err)}"
    return None


def _not_found_message(folder: Path, version: str, reason: str | None) -> str:
    record = ZENODO_RECORDS[version]
    zenodo = f"download {FILE_NAME} ({version}) from Zenodo record {record} (https://zenodo.org/records/{record})"
    if version == "v3":
        how = f"`pip install medmnist` and run again to download it, or {zenodo} and put it in {folder}"
    else:
        how = f"{zenodo} and put it in {folder} (dataset.reader.version=v3 reads the current file instead)"
    tried = f" ({reason})" if reason else ""
    return (
        f"OrganAMNIST {version} not found: no {FILE_NAME} in {folder}{tried}. To get it: {how}; or set "
        "dataset.root=DIR to read it from DIR. dataset.source=fake runs offline on a synthetic stand-in."
    )


def _load(path: Path) -> dict[str, np.ndarray]:
    """Every array of the archive, by key; a ``CorruptFileError`` for anything that is not a readable .npz with
    the six keys."""
    keys = [f"{s}_{kind}" for s in SPLIT_NAMES for kind in ("images", "labels")]

    def corrupt(what: str) -> CorruptFileError:
        return CorruptFileError(f"OrganAMNIST file {path} is corrupt: {what}; replace it with MedMNIST's {FILE_NAME}")

    try:
        with open(path, "rb") as f:
            head = f.read(len(NPY_MAGIC))
        # np.load guesses the format from these bytes and takes anything else for a pickle, which it then
        # refuses with advice to allow pickles: say what the file is instead.
        if head == NPY_MAGIC:
            raise corrupt("it is a single .npy array, not an .npz archive of six")
        if head[: len(ZIP_MAGIC)] != ZIP_MAGIC:
            found = f"it starts with {head!r}" if head else "it is empty"
            raise corrupt(f"it is not an .npz (zip) archive: {found}, not {ZIP_MAGIC!r}")
        # No pickles: an .npz of arrays needs none, and unpickling a file from the internet runs its code.
        with np.load(path, allow_pickle=False) as npz:
            missing = [k for k in keys if k not in npz.files]
            if missing:
                raise corrupt(f"it has no {', '.join(missing)} (its keys: {', '.join(npz.files) or 'none'})")
            return {k: npz[k] for k in keys}
    except (OSError, ValueError, EOFError, zipfile.BadZipFile, zlib.error) as err:  # truncated or garbled
        raise corrupt(f"it cannot be read as a NumPy .npz archive ({type(err).__name__}: {last_line(err)})") from None


def _to_split(path: Path, name: str, images: np.ndarray, labels: np.ndarray) -> dict[str, np.ndarray]:
    """``images`` (N, 28, 28) uint8 and ``labels`` (N, 1) or (N,) integers of split ``name``, checked; labels
    returned as (N,)."""

    def corrupt(what: str) -> CorruptFileError:
        return CorruptFileError(f"OrganAMNIST file {path} is corrupt: {what}; replace it with MedMNIST's {FILE_NAME}")

    if images.ndim != 3 or images.shape[1:] != IMAGE_SIZE or images.dtype != np.uint8:
        raise corrupt(
            f"{name}_images are {images.dtype} of shape {list(images.shape)}, expected uint8 (N, "
            f"{IMAGE_SIZE[0]}, {IMAGE_SIZE[1]})"
        )
    column = labels.ndim == 1 or (labels.ndim == 2 and labels.shape[1] == 1)  # MedMNIST's (N, 1), or (N,)
    if not column or labels.dtype.kind not in "iu":
        raise corrupt(f"{name}_labels are {labels.dtype} of shape {list(labels.shape)}, expected integers (N, 1)")
    if len(labels) != len(images):
        raise corrupt(f"{len(images):,} {name}_images but {len(labels):,} {name}_labels")
    return {"inputs": images, "labels": labels.reshape(-1)}


def _check_sizes(path: Path, version: str, found: dict[str, int]) -> None:
    """The file's split sizes are ``SIZES[version]``: a ValueError when they are another version's, a
    ``CorruptFileError`` when they are no version's."""
    if found == SIZES[version]:
        return
    listed = _sizes(found)
    other = next((v for v, sizes in SIZES.items() if sizes == found), None)
    if other is not None:
        raise ValueError(
            f"version is {version} but {path} is the MedMNIST {other} file ({listed}); set "
            f"dataset.reader.version={other}, or {_replace(version)}"
        )
    expected = "; ".join(f"{v}: {_sizes(sizes)}" for v, sizes in SIZES.items())
    raise CorruptFileError(
        f"OrganAMNIST file {path} holds {listed} images, the sizes of no version ({expected}): truncated or "
        f"another file? Replace it with the {version} {FILE_NAME} (Zenodo record {ZENODO_RECORDS[version]})"
    )


def _sizes(sizes: dict[str, int]) -> str:
    return " / ".join(f"{s} {sizes[s]:,}" for s in SPLIT_NAMES)


def _replace(version: str) -> str:
    record = ZENODO_RECORDS[version]
    return f"replace it with the {version} {FILE_NAME} (Zenodo record {record})"


def _tensors(split: dict[str, np.ndarray]) -> Split:
    """uint8 (N, 28, 28) -> float32 (N, 1, 28, 28) in [0, 1]; labels (N,) long."""
    inputs = torch.from_numpy(split["inputs"]).unsqueeze(1).to(torch.float32).div_(255.0)
    return {"inputs": inputs, "labels": torch.from_numpy(split["labels"].astype(np.int64))}
