"""Finding and reading the four idx files of MNIST or Fashion-MNIST wherever they lie, without writing there.

The files come in two layouts: torchvision's (``<root>/FashionMNIST/raw/train-images-idx3-ubyte``, the files or
their ``.gz`` archives) and the flat one the datasets are published in and Debian's ``dataset-fashion-mnist``
package installs (``/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz``). ``find_flat`` looks for the
flat layout; ``read_idx`` reads one file (an archive is unpacked in memory, never on disk, so a system folder is
only read) after checking its idx header and size, and returns its SHA-256 for the run's record.
"""

from __future__ import annotations

import gzip
import hashlib
import math
import struct
import zlib
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch

from clusterable.data.errors import CorruptFileError, last_line

# The idx format (torchvision's ``read_sn3_pascalvincent_tensor``): a big-endian int32 magic number whose third
# byte is the element type (0x08: unsigned byte) and fourth the number of dimensions, then one big-endian int32
# per dimension, then the elements.
IMAGES_MAGIC = 0x00000803  # unsigned bytes, 3 dims: N, rows, cols
LABELS_MAGIC = 0x00000801  # unsigned bytes, 1 dim: N
IMAGE_SIZE = (28, 28)


def find_flat(folder: str | Path | None, names: Sequence[str]) -> dict[str, Path] | None:
    """``name -> path`` of every file in ``folder`` itself (``<name>`` or ``<name>.gz``), or None when one is
    missing (or ``folder`` is None or not there)."""
    if folder is None:
        return None
    folder = Path(folder).expanduser()
    found = {}
    for name in names:
        for candidate in (folder / name, folder / f"{name}.gz"):
            if candidate.is_file():
                found[name] = candidate
                break
        else:
            return None
    return found


def read_idx(path: Path, magic: int, display_name: str, fix: str) -> tuple[torch.Tensor, str]:
    """The unsigned-byte tensor of the idx file ``path`` (an archive unpacked in memory) and the SHA-256 of the
    file as it lies on disk. ``fix`` says what to do about a corrupt file (``CorruptFileError``, one line)."""
    raw = path.read_bytes()
    digest = hashlib.sha256(raw).hexdigest()

    def corrupt(what: str) -> CorruptFileError:
        return CorruptFileError(f"{display_name} file {path.resolve()} is corrupt: {what}; {fix}")

    if path.suffix == ".gz":
        try:
            raw = gzip.decompress(raw)
        except (gzip.BadGzipFile, EOFError, zlib.error) as err:
            raise corrupt(f"it cannot be unpacked ({last_line(err)})") from None
    dims = idx_dims(raw[: 4 * (1 + (magic & 0xFF))], len(raw), magic, corrupt)
    header = 4 * (1 + len(dims))
    data = np.frombuffer(raw, dtype=np.uint8, offset=header).reshape(dims)
    return torch.from_numpy(data.copy()), digest


def idx_dims(head: bytes, size: int, magic: int, corrupt) -> tuple[int, ...]:
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
