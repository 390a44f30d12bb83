"""Finding and reading the four idx files of MNIST or Fashion-MNIST wherever they lie, without writing there.

The files come in two layouts: torchvision's (``<root>/FashionMNIST/raw/train-images-idx3-ubyte``) and the flat one
the datasets are published in and Debian's ``dataset-fashion-mnist`` package installs
(``/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz``), and under two spellings of each name: the
publishers' (``train-images-idx3-ubyte``) and the mirrors' (``train-images.idx3-ubyte``, Kaggle's copies), each
uncompressed or as a ``.gz`` archive (``file_names``). ``find_idx_files`` looks for them in one folder and
``stray_files`` names what looks like an idx file there under another name; ``read_idx`` reads one file (an archive
is unpacked in memory, never on disk, so a read-only folder is only read) after checking its idx header and size,
and returns the SHA-256 of the file and of its content for the run's record and the checksum check.
"""

from __future__ import annotations

import gzip
import hashlib
import math
import struct
import zlib
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import NamedTuple

import numpy as np
import torch

from clusterable.data.errors import CorruptFileError, last_line

# The idx format (torchvision's ``read_sn3_pascalvincent_tensor``): a big-endian int32 magic number whose third
# byte is the element type (0x08: unsigned byte) and fourth the number of dimensions, then one big-endian int32
# per dimension, then the elements.
IMAGES_MAGIC = 0x00000803  # unsigned bytes, 3 dims: N, rows, cols
LABELS_MAGIC = 0x00000801  # unsigned bytes, 1 dim: N
IMAGE_SIZE = (28, 28)


class IdxFile(NamedTuple):
    """One idx file read: its array and two SHA-256 digests."""

    data: torch.Tensor  # unsigned bytes of the header's dims
    sha256: str  # of the file as it lies on disk (an archive's own bytes): what the run records
    content_sha256: str  # of the idx bytes (an archive unpacked): what the published checksums are of


def file_names(name: str) -> tuple[str, ...]:
    """The names the file ``name`` (``train-images-idx3-ubyte``) is looked for under, in this order: itself, its
    ``.gz`` archive, then the mirrors' spelling with a dot before ``idx`` (``train-images.idx3-ubyte``, as Kaggle's
    copies and some unpacking tools name them) and its archive. The content decides whether a file is the
    dataset's (the checksum check), not the name, so every spelling of one format is read alike."""
    dotted = name.replace("-idx", ".idx")
    return (name, f"{name}.gz", dotted, f"{dotted}.gz")


def find_idx_files(folder: str | Path | None, names: Sequence[str]) -> dict[str, Path]:
    """``name -> path`` of each of ``names`` found in ``folder`` itself under one of its ``file_names`` (the first
    that is a file); the names not found are left out. Empty when ``folder`` is None or not there."""
    if folder is None:
        return {}
    folder = Path(folder).expanduser()
    found = {}
    for name in names:
        path = next((folder / n for n in file_names(name) if (folder / n).is_file()), None)
        if path is not None:
            found[name] = path
    return found


def stray_files(folder: str | Path | None, names: Sequence[str]) -> list[Path]:
    """Entries of ``folder`` whose name says idx (``ubyte``, any case) but is none of ``names``' ``file_names``
    (``train-images-idx3-ubyte (1).gz``, a folder ``train-images-idx3-ubyte/`` as Kaggle's archive unpacks): what a
    user put there for the dataset and the reader does not read, to be named rather than passed over."""
    if folder is None or not Path(folder).expanduser().is_dir():
        return []
    known = {n for name in names for n in file_names(name)}
    entries = Path(folder).expanduser().iterdir()
    return sorted(p for p in entries if "ubyte" in p.name.lower() and not (p.name in known and p.is_file()))


def read_idx(path: Path, magic: int, display_name: str, fix: str) -> IdxFile:
    """The unsigned-byte tensor of the idx file ``path`` (an archive unpacked in memory) with the SHA-256 of the
    file and of its content. ``fix`` says what to do about a corrupt file (``CorruptFileError``, one line)."""
    raw = path.read_bytes()
    digest = hashlib.sha256(raw).hexdigest()

    def corrupt(what: str) -> CorruptFileError:
        return CorruptFileError(f"{display_name} file {path.resolve()} is corrupt: {what}; {fix}")

    content_digest = digest
    if path.suffix == ".gz":
        try:
            raw = gzip.decompress(raw)
        except (gzip.BadGzipFile, EOFError, zlib.error) as err:
            raise corrupt(f"it cannot be unpacked ({last_line(err)})") from None
        content_digest = hashlib.sha256(raw).hexdigest()
    dims = idx_dims(raw[: 4 * (1 + (magic & 0xFF))], len(raw), magic, corrupt)
    header = 4 * (1 + len(dims))
    data = np.frombuffer(raw, dtype=np.uint8, offset=header).reshape(dims)
    return IdxFile(torch.from_numpy(data.copy()), digest, content_digest)


def idx_dims(head: bytes, size: int, magic: int, corrupt: Callable[[str], Exception]) -> tuple[int, ...]:
    """The dims in an idx header ``head`` of a file of ``size`` bytes, after checking its magic number and size;
    ``corrupt(what)`` makes the error. For images, the rows and columns must be ``IMAGE_SIZE``."""
    ndim = magic & 0xFF
    header = 4 * (1 + ndim)
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
    dims = struct.unpack(f">{ndim}I", head[4:header])
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
