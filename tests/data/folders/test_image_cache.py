"""The decoded-image cache of the image-folder datasets, through the real code path on tiny JPEG files: decoded
once (torchvision's resize), reopened without decoding, rebuilt for another file list or recipe, never
half-written, one line for a corrupt or missing image, and batches on a zero-padded canvas."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image
from torchvision import transforms as T

from clusterable.data.errors import CorruptFileError, DatasetNotFoundError
from clusterable.data.folders import image_cache
from clusterable.data.folders.image_cache import build_or_open_cache, decode_image

from .test_retrieval_sets import write_jpeg


def jpegs(folder: Path, shapes: list[tuple[int, int]]) -> list[Path]:
    paths = [folder / f"{k:03d}.jpg" for k in range(len(shapes))]
    for k, (path, (h, w)) in enumerate(zip(paths, shapes, strict=True)):
        write_jpeg(path, h, w, seed=k)
    return paths


SHAPES = [(40, 60), (64, 48), (50, 50), (33, 70)]


def count_opens(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Record every PIL ``Image.open`` (the cache decodes through it)."""
    opened, real_open = [], Image.open

    def recording(path, *args, **kwargs):
        opened.append(str(path))
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr(Image, "open", recording)
    return opened


# ------------------------------------------------------------------------------------------------ the cache


def test_cache_holds_the_resized_pixels_and_is_reopened_without_decoding(tmp_path, monkeypatch) -> None:
    paths = jpegs(tmp_path / "images", SHAPES)
    store = build_or_open_cache(paths, tmp_path / "cache", "shorter:32", progress=False)
    assert len(store) == 4 and store.folder.parent == tmp_path / "cache"
    for i, path in enumerate(paths):  # torchvision's Resize(32) on the PIL image, bilinear
        with Image.open(path) as image:
            reference = np.asarray(T.Resize(32)(image.convert("RGB"))).transpose(2, 0, 1)
        assert np.array_equal(store.image(i), reference)
    assert store.heights.tolist() == [32, 42, 32, 32] and store.widths.tolist() == [48, 32, 32, 67]

    def no_decoding(*args, **kwargs):
        raise AssertionError("the second read decoded an image")

    monkeypatch.setattr(Image, "open", no_decoding)
    again = build_or_open_cache(paths, tmp_path / "cache", "shorter:32", progress=False)
    assert again.folder == store.folder and isinstance(again.pixels, np.memmap)
    assert np.array_equal(again.image(3), store.image(3))


def test_another_file_list_or_recipe_makes_another_cache(tmp_path, monkeypatch) -> None:
    paths = jpegs(tmp_path / "images", SHAPES)
    first = build_or_open_cache(paths, tmp_path / "cache", "square:24", progress=False)
    opened = count_opens(monkeypatch)
    fewer = build_or_open_cache(paths[:3], tmp_path / "cache", "square:24", progress=False)
    assert fewer.folder != first.folder and len(fewer) == 3 and len(opened) == 3
    reordered = build_or_open_cache(paths[::-1], tmp_path / "cache", "square:24", progress=False)
    assert reordered.folder != first.folder and np.array_equal(reordered.image(0), first.image(3))
    original = build_or_open_cache(paths, tmp_path / "cache", None, progress=False)
    assert original.folder != first.folder and (original.heights.tolist(), original.widths.tolist()) == (
        [h for h, _ in SHAPES],
        [w for _, w in SHAPES],
    )
    assert (first.heights.tolist(), first.widths.tolist()) == ([24] * 4, [24] * 4)


def test_an_interrupted_build_leaves_nothing_that_is_reused(tmp_path, monkeypatch) -> None:
    paths = jpegs(tmp_path / "images", SHAPES)
    real_decode, calls = image_cache.decode_image, []

    def interrupted(path, resize):
        calls.append(path)
        if len(calls) == 3:
            raise KeyboardInterrupt
        return real_decode(path, resize)

    monkeypatch.setattr(image_cache, "decode_image", interrupted)
    with pytest.raises(KeyboardInterrupt):
        build_or_open_cache(paths, tmp_path / "cache", "square:24", progress=False)
    assert [p.name for p in (tmp_path / "cache").iterdir() if p.is_dir()] == []  # no folder, complete or partial
    monkeypatch.setattr(image_cache, "decode_image", real_decode)

    # A run killed outright leaves its partial folder; one that was tampered with looks complete but is not.
    folder = image_cache.cache_folder(paths, tmp_path / "cache", "square:24", "images")
    (folder.parent / f"{folder.name}.partial-999999").mkdir()
    opened = count_opens(monkeypatch)
    store = build_or_open_cache(paths, tmp_path / "cache", "square:24", progress=False)
    assert len(opened) == 4 and not list(folder.parent.glob("*.partial-*"))
    with open(folder / image_cache.PIXELS, "r+b") as f:
        f.truncate(100)
    opened.clear()
    store = build_or_open_cache(paths, tmp_path / "cache", "square:24", progress=False)
    assert len(opened) == 4 and store.image(2).shape == (3, 24, 24)


def test_a_corrupt_jpeg_fails_with_one_line_naming_it(tmp_path) -> None:
    paths = jpegs(tmp_path / "images", SHAPES)
    data = paths[2].read_bytes()
    paths[2].write_bytes(data[: len(data) // 2])  # truncated
    with pytest.raises(CorruptFileError) as info:
        build_or_open_cache(paths, tmp_path / "cache", "square:24", progress=False)
    message = str(info.value)
    assert "\n" not in message and str(paths[2].resolve()) in message and "cannot be decoded" in message
    assert not [p for p in (tmp_path / "cache").iterdir() if p.is_dir()]
    paths[1].write_bytes(b"not an image")
    with pytest.raises(CorruptFileError, match=f"{paths[1].name} cannot be decoded .*UnidentifiedImageError"):
        build_or_open_cache(paths, tmp_path / "cache", "square:24", progress=False)


def test_a_missing_image_file_is_named(tmp_path) -> None:
    paths = jpegs(tmp_path / "images", SHAPES)
    paths[3].unlink()
    with pytest.raises(DatasetNotFoundError, match=f"image file {paths[3].resolve()} is listed .* does not exist"):
        build_or_open_cache(paths, tmp_path / "cache", None, progress=False)


def test_store_batch_is_a_zero_padded_canvas(tmp_path) -> None:
    paths = jpegs(tmp_path / "images", SHAPES)
    store = build_or_open_cache(paths, tmp_path / "cache", None, progress=False)
    images, sizes = store.batch([3, 0, 1])
    assert images.dtype == torch.uint8 and images.shape == (3, 3, 64, 70)
    assert sizes.tolist() == [[33, 70], [40, 60], [64, 48]]
    for b, i in enumerate([3, 0, 1]):
        h, w = sizes[b].tolist()
        assert torch.equal(images[b, :, :h, :w], torch.from_numpy(decode_image(paths[i], None)))
        assert images[b, :, h:].sum() == 0 and images[b, :, :, w:].sum() == 0


@pytest.mark.slow  # the pool's processes start by importing torch (seconds)
def test_pool_decoding_gives_the_same_cache(tmp_path, monkeypatch) -> None:
    paths = jpegs(tmp_path / "images", SHAPES * 3)
    monkeypatch.setattr(image_cache, "MIN_IMAGES_PER_WORKER", 1)
    serial = build_or_open_cache(paths, tmp_path / "serial", "shorter:32", progress=False)
    pooled = build_or_open_cache(paths, tmp_path / "pooled", "shorter:32", progress=False, workers=2)
    assert np.array_equal(np.asarray(serial.pixels), np.asarray(pooled.pixels))
