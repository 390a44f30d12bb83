"""Decode a dataset's images once, into a memory-mapped cache of uint8 pixels that later runs open in an instant.

Deep-metric-learning recipes (Boudiaf et al. 2020, authors' code ``jeromerony/dml_cross_entropy``) resize every
image with a fixed rule before the random crop; decoding the JPEG and resizing it again every epoch is what
limits a per-sample ``DataLoader``. Here that deterministic part runs once:

- ``build_or_open_cache`` decodes every file with PIL (``convert("RGB")``, as the authors' ``ImageDataset``
  does), resizes it by its recipe (``resize_image``) and appends its pixels, channel-first, to one flat uint8
  file; an index (N, 3) int64 holds each image's (offset, height, width). Nothing of the whole dataset is ever
  held in memory (Stanford Online Products at 256 x 256 is ~24 GB), images are decoded and written one at a
  time, optionally by a pool of worker processes.
- The cache is a folder named by a hash of the file list (absolute paths, in order) and the resize recipe, so
  another list or recipe makes another cache and never reuses a wrong one. It is written under a temporary
  name and renamed when complete: an interrupted decode leaves no folder that looks complete, and the next run
  decodes again. A lock file serialises processes (DDP ranks) that would build the same cache at once.
- ``ImageStore`` reads it back through ``numpy.memmap``: ``batch(indices)`` copies the images of one batch
  into a zero-padded canvas (B, 3, Hc, Wc) plus their true sizes (B, 2); the random crop, flip and colour
  jitter then run on the whole batch on the training device (``clusterable.data.folders.augment``).

Moving the dataset folder changes the absolute paths, so the next run decodes again (into a new folder of the
cache); the old one can be deleted.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import re
import shutil
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import torch
from PIL import Image

from clusterable.data.errors import CorruptFileError, DatasetError, DatasetNotFoundError

__all__ = [
    "CACHE_VERSION",
    "ImageStore",
    "build_or_open_cache",
    "cache_folder",
    "decode_image",
    "resize_image",
]

# Part of every cache's key: bump it when the pixel layout or the decoding changes, so old caches are not read.
CACHE_VERSION = 1
PIXELS, INDEX, META = "pixels.u8", "index.npy", "meta.json"
# Fewer images than this per worker are decoded in this process: starting a pool costs more than it saves.
MIN_IMAGES_PER_WORKER = 200
_RESIZE = re.compile(r"^(shorter|square):([1-9][0-9]*)$")


def parse_resize(resize: str | None) -> tuple[str, int] | None:
    """``"shorter:256"`` -> ("shorter", 256); ``"square:256"`` -> ("square", 256); None -> None.

    Raises:
        ValueError: another value; the message starts with ``resize``.
    """
    if resize is None:
        return None
    match = _RESIZE.match(resize) if isinstance(resize, str) else None
    if match is None:
        raise ValueError(
            f"resize must be 'shorter:N' (shorter side to N pixels, aspect ratio kept), 'square:N' (N x N) or "
            f"null (keep the files' size), got {resize!r}"
        )
    return match.group(1), int(match.group(2))


def resize_image(image: Image.Image, resize: str | None) -> Image.Image:
    """Resize a PIL image by its recipe, exactly as ``torchvision.transforms.Resize`` does on PIL images.

    ``shorter:N`` is ``Resize(N)`` (the shorter side becomes N, the longer ``int(N * long / short)``; Boudiaf et
    al.'s CUB recipe, ``resize = 256``); ``square:N`` is ``Resize((N, N))`` (their Cars-196 and SOP recipe,
    ``resize = (256, 256)``); None keeps the image (their In-Shop recipe: the files are already 256 x 256).
    Both use PIL's bilinear filter, which is antialiased when shrinking (torchvision's default for PIL images).
    """
    spec = parse_resize(resize)
    if spec is None:
        return image
    from torchvision.transforms import functional as F

    mode, size = spec
    return F.resize(image, size if mode == "shorter" else [size, size])


def decode_image(path: str | Path, resize: str | None) -> np.ndarray:
    """One file's pixels as they are cached: uint8 (3, H, W), RGB, resized by ``resize``.

    Raises what PIL raises for an unreadable file (``FileNotFoundError``, ``PIL.UnidentifiedImageError``,
    ``OSError`` for a truncated JPEG ...); ``build_or_open_cache`` turns it into one line naming the file.
    """
    with Image.open(path) as image:
        # convert() loads the pixels, so a truncated file fails here, inside the `with`.
        rgb = image.convert("RGB")  # grey, palette, CMYK and RGBA files -> 3 channels (the authors' loader)
    rgb = resize_image(rgb, resize)
    return np.ascontiguousarray(np.asarray(rgb, dtype=np.uint8).transpose(2, 0, 1))


def cache_key(paths: Sequence[str | Path], resize: str | None) -> str:
    """sha256 of the cache version, the resize recipe and the absolute paths in order (hex)."""
    digest = hashlib.sha256(f"clusterable-image-cache v{CACHE_VERSION}\nresize={resize}\n".encode())
    for path in paths:
        digest.update(os.fsencode(os.path.abspath(path)) + b"\n")
    return digest.hexdigest()


def cache_folder(paths: Sequence[str | Path], cache_dir: str | Path, resize: str | None, name: str) -> Path:
    """Where the cache of ``paths`` under ``resize`` lives: ``<cache_dir>/<name>-<recipe>-<hash>``."""
    recipe = "original" if resize is None else resize.replace(":", "")
    return Path(cache_dir) / f"{name}-{recipe}-{cache_key(paths, resize)[:20]}"


class ImageStore:
    """Images of various sizes in one flat uint8 array (a memmap of the cache, or an array in memory).

    Args:
        pixels: (total,) uint8; image ``i`` is ``pixels[offset : offset + 3*h*w]`` reshaped to (3, h, w).
        index: (N, 3) int64 rows of (offset, h, w).
        folder: the cache folder, or None for images held in memory (the fake source).

    Attributes:
        heights, widths: (N,) long, each image's size in pixels.
    """

    def __init__(self, pixels: np.ndarray, index: np.ndarray, folder: Path | None = None):
        index = np.asarray(index, dtype=np.int64)
        if index.ndim != 2 or index.shape[1] != 3:
            raise ValueError(f"index must have shape (N, 3), got {index.shape}")
        self.pixels, self.index, self.folder = pixels, index, folder
        self.heights = torch.from_numpy(index[:, 1].copy())
        self.widths = torch.from_numpy(index[:, 2].copy())

    def __len__(self) -> int:
        return len(self.index)

    def image(self, i: int) -> np.ndarray:
        """Image ``i``'s pixels, uint8 (3, h, w): a read-only view of the cache."""
        offset, h, w = (int(v) for v in self.index[i])
        return self.pixels[offset : offset + 3 * h * w].reshape(3, h, w)

    def batch(
        self, indices: Sequence[int] | torch.Tensor, pin_memory: bool = False
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """The images ``indices`` on a zero-padded canvas, and their true sizes.

        Returns:
            images: uint8 (B, 3, Hc, Wc), Hc and Wc the largest height and width in the batch; image b fills
                ``[b, :, :h_b, :w_b]`` and the rest is 0.
            sizes: long (B, 2), each image's (h, w).
        ``pin_memory`` allocates the canvas in page-locked memory (when CUDA is available), so that its copy to
        the GPU can run while the next batch is read.
        """
        rows = torch.as_tensor(indices, dtype=torch.long).reshape(-1)
        sizes = torch.stack([self.heights[rows], self.widths[rows]], dim=1)
        hc = int(sizes[:, 0].max()) if len(rows) else 0
        wc = int(sizes[:, 1].max()) if len(rows) else 0
        pin = pin_memory and torch.cuda.is_available()
        images = torch.zeros((len(rows), 3, hc, wc), dtype=torch.uint8, pin_memory=pin)
        canvas = images.numpy()
        for b, i in enumerate(rows.tolist()):
            offset, h, w = self.index[i]
            # A copy out of the memmap (the page faults read the file); numpy releases the GIL while it copies,
            # so a prefetching thread reads the next batch while the main thread trains.
            canvas[b, :, :h, :w] = self.pixels[offset : offset + 3 * h * w].reshape(3, h, w)
        return images, sizes


def build_or_open_cache(
    paths: Sequence[str | Path],
    cache_dir: str | Path,
    resize: str | None,
    progress: bool = True,
    workers: int = 0,
    name: str = "images",
) -> ImageStore:
    """Open the cache of ``paths`` under ``resize`` in ``cache_dir``, decoding the images first if there is none.

    Args:
        paths: the image files, in the order of the store's rows.
        cache_dir: the folder holding caches (created if needed); each cache is a subfolder (``cache_folder``).
        resize: ``"shorter:N"``, ``"square:N"`` or None (see ``resize_image``).
        progress: show a progress bar (tqdm, on stderr) while decoding.
        workers: decode in a pool of this many processes (0: in this process).
        name: the first part of the cache folder's name, for people who look at the folder.

    Returns:
        an ``ImageStore`` over the cache's memmap; row i is ``paths[i]``.

    Raises:
        ValueError: a bad ``resize`` or ``workers``; the message starts with the parameter's name.
        DatasetNotFoundError: a listed image file does not exist (one line naming it).
        CorruptFileError: a listed file cannot be decoded (one line naming it and what PIL said).
        DatasetError: the cache folder cannot be written (permissions, no space left).
    """
    parse_resize(resize)
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 0:
        raise ValueError(f"workers must be an integer >= 0 (decoding processes; 0: none), got {workers!r}")
    paths = [str(p) for p in paths]
    folder = cache_folder(paths, cache_dir, resize, name)
    store = _open(folder, len(paths))
    if store is not None:  # the usual case: no lock, no decoding
        return store
    try:
        folder.parent.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise DatasetError(_unwritable(folder.parent, err)) from None
    with _locked(folder.parent / f"{folder.name}.lock"):
        store = _open(folder, len(paths))  # another process may have built it while we waited for the lock
        if store is None:
            _build(paths, folder, resize, progress, workers)
            store = _open(folder, len(paths))
        if store is None:  # only if the file system lost what was just written
            raise DatasetError(f"the image cache {folder} could not be read back after it was written")
    return store


def _open(folder: Path, count: int) -> ImageStore | None:
    """The complete cache in ``folder``, or None: absent, or not what it should be (it is then removed, so that
    it is rebuilt; a complete cache is only ever renamed into place, so this means someone tampered with it)."""
    if not (folder / META).is_file():
        if folder.exists():
            shutil.rmtree(folder, ignore_errors=True)
        return None
    try:
        meta = json.loads((folder / META).read_text())
        index = np.load(folder / INDEX)
        size = (folder / PIXELS).stat().st_size
        ok = (
            meta.get("version") == CACHE_VERSION
            and meta.get("count") == count
            and index.shape == (count, 3)
            and size == meta.get("bytes")
            and (count == 0 or int(index[-1, 0] + 3 * index[-1, 1] * index[-1, 2]) == size)
        )
    except (OSError, ValueError):
        ok = False
    if not ok:
        shutil.rmtree(folder, ignore_errors=True)
        return None
    pixels = np.memmap(folder / PIXELS, dtype=np.uint8, mode="r") if size else np.zeros(0, np.uint8)
    return ImageStore(pixels, index, folder)


def _build(paths: list[str], folder: Path, resize: str | None, progress: bool, workers: int) -> None:
    """Decode ``paths`` into ``<folder>.partial-<pid>`` and rename it to ``folder`` once complete."""
    for stale in folder.parent.glob(f"{folder.name}.partial-*"):  # left by a killed run (we hold the lock)
        shutil.rmtree(stale, ignore_errors=True)
    partial = folder.with_name(f"{folder.name}.partial-{os.getpid()}")
    n = len(paths)
    index = np.zeros((n, 3), dtype=np.int64)
    offset = 0
    bar = _progress(n, folder, progress)
    try:
        partial.mkdir()
        with open(partial / PIXELS, "wb") as out:
            for i, (_, pixels) in enumerate(_decoded(paths, resize, workers)):
                _, h, w = pixels.shape
                out.write(pixels.tobytes())
                index[i] = (offset, h, w)
                offset += pixels.size
                bar.update(1)
            out.flush()
            os.fsync(out.fileno())  # on disk before the rename says "complete"
        np.save(partial / INDEX, index)
        meta = {
            "version": CACHE_VERSION,
            "count": n,
            "bytes": offset,
            "resize": resize,
            "key": cache_key(paths, resize),
            "first": paths[0] if paths else None,
            "last": paths[-1] if paths else None,
            "created": time.strftime("%Y-%m-%d %H:%M:%S"),
        }
        (partial / META).write_text(json.dumps(meta, indent=1))
        if folder.exists():
            shutil.rmtree(folder)
        os.rename(partial, folder)  # atomic: the cache appears complete or not at all
    except OSError as err:
        shutil.rmtree(partial, ignore_errors=True)
        if isinstance(err, DatasetError):
            raise
        if err.errno == errno.ENOSPC:
            raise DatasetError(
                f"no space left on the device of {folder.parent} after caching {offset:,} bytes of decoded images; "
                "free some space or set dataset.cache_dir=DIR to a folder with more"
            ) from None
        raise DatasetError(_unwritable(folder.parent, err)) from None
    except BaseException:  # KeyboardInterrupt, a corrupt image: nothing half-written stays behind
        shutil.rmtree(partial, ignore_errors=True)
        raise
    finally:
        bar.close()


def _decoded(paths: list[str], resize: str | None, workers: int) -> Iterator[tuple[str, np.ndarray]]:
    """(path, pixels (3, h, w)) in order, decoded here or by ``workers`` processes; the first unreadable file
    raises ``DatasetNotFoundError`` or ``CorruptFileError`` naming it."""
    jobs = ((p, resize) for p in paths)
    if workers == 0 or len(paths) < MIN_IMAGES_PER_WORKER * workers:  # a pool takes seconds to start
        results = map(_decode_job, jobs)
        yield from (_checked(r, len(paths)) for r in results)
        return
    import multiprocessing

    # spawn, not fork: the parent may hold CUDA or OpenMP threads that a forked child must not inherit.
    with multiprocessing.get_context("spawn").Pool(workers) as pool:
        for result in pool.imap(_decode_job, jobs, chunksize=16):
            yield _checked(result, len(paths))


def _decode_job(job: tuple[str, str | None]) -> tuple[str, np.ndarray | None, str | None, str | None]:
    """(path, pixels, error kind, message) for one file; runs in a worker process, so errors are returned."""
    path, resize = job
    try:
        return path, decode_image(path, resize), None, None
    except FileNotFoundError:
        return path, None, "missing", None
    except Exception as err:  # PIL raises UnidentifiedImageError, OSError, SyntaxError, ValueError ...
        lines = [line.strip() for line in str(err).splitlines() if line.strip()]
        return path, None, "corrupt", f"{type(err).__name__}: {lines[0]}" if lines else type(err).__name__


def _checked(result: tuple[str, np.ndarray | None, str | None, str | None], n: int) -> tuple[str, np.ndarray]:
    path, pixels, kind, message = result
    if kind == "missing":
        raise DatasetNotFoundError(
            f"image file {os.path.abspath(path)} is listed in the dataset's file list but does not exist (an "
            "incomplete unpack of the dataset's images?)"
        )
    if kind == "corrupt":
        raise CorruptFileError(
            f"image file {os.path.abspath(path)} cannot be decoded ({message}); replace it with the original file"
        )
    return path, pixels


def _unwritable(folder: Path, err: OSError) -> str:
    reason = err.strerror or type(err).__name__
    return (
        f"cannot write the decoded-image cache in {Path(folder).resolve()} ({reason}); set dataset.cache_dir=DIR "
        "to a writable folder"
    )


@contextmanager
def _locked(path: Path) -> Iterator[None]:
    """An exclusive lock on ``path``, waited for (an OS file lock through ``filelock``, on POSIX and Windows;
    released by the operating system if the holder dies), so that one process decodes a cache while the others
    wait for it."""
    from filelock import FileLock

    with FileLock(path, thread_local=False, is_singleton=False):
        yield


class _NoBar:
    def update(self, n: int) -> None:
        pass

    def close(self) -> None:
        pass


def _progress(total: int, folder: Path, enabled: bool) -> object:
    if not enabled or total == 0:
        return _NoBar()
    from tqdm import tqdm

    return tqdm(total=total, desc=f"decoding images once into {folder}", unit="img", file=sys.stderr, mininterval=2.0)
