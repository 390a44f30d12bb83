"""Image datasets for deep metric learning, through the real code path on tiny copies in the real formats: the
decoded-image cache (decoded once, reopened without decoding, rebuilt for another file list, never half-written),
the batched augmentation against torchvision's per-image transforms, class-balanced batches and class-disjoint
validation, and ``ImageDataModule``'s splits, batches, device-side views and ``eval_batches``.

Tolerances against torchvision: ``eval_views`` is exact (integer crop); ``resized_crops`` given torchvision's box
matches ``resized_crop`` to 1e-4 inside the crop when enlarging (the same bilinear weights; the border row differs,
where roi_align reads one pixel beyond the box and torchvision clamps at it) and to a mean of 0.01 when shrinking
(roi_align averages bilinear samples where torchvision applies its antialiasing triangle filter).
"""

from __future__ import annotations

import math
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import torch
import torchvision.transforms.functional as F
from hydra import compose, initialize_config_dir
from omegaconf import open_dict
from PIL import Image
from scipy.stats import ks_2samp
from torchvision import transforms as T

from clusterable.config import build
from clusterable.data import image_cache
from clusterable.data.augment import (
    color_jitter,
    crop_boxes,
    eval_views,
    hsv_to_rgb,
    resized_crops,
    rgb_to_hsv,
    train_views,
)
from clusterable.data.errors import CorruptFileError, DatasetNotFoundError
from clusterable.data.image_cache import ImageStore, build_or_open_cache, decode_image
from clusterable.data.images import ImageDataModule
from clusterable.data.retrieval_sets import read_cub200, read_inshop
from clusterable.data.sampling import ClassBalancedBatches, class_disjoint_validation
from clusterable.train import CONFIG_DIR

from .test_retrieval_sets import write_cub200, write_inshop, write_jpeg


@pytest.fixture(autouse=True, scope="module")
def one_thread():
    """Tiny tensors gain nothing from threads, and on a busy machine their barriers cost seconds."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


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
    assert [
        p.name for p in (tmp_path / "cache").iterdir() if p.is_dir()
    ] == []  # no folder, complete or partial
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
    with pytest.raises(
        DatasetNotFoundError, match=f"image file {paths[3].resolve()} is listed .* does not exist"
    ):
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


# ------------------------------------------------------------------------------------------------ augmentation


def canvas(images: list[torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
    hc, wc = max(i.shape[1] for i in images), max(i.shape[2] for i in images)
    out = torch.zeros(len(images), 3, hc, wc, dtype=images[0].dtype)
    for b, image in enumerate(images):
        out[b, :, : image.shape[1], : image.shape[2]] = image
    return out, torch.tensor([list(i.shape[1:]) for i in images])


def smooth(h: int, w: int, seed: int) -> torch.Tensor:
    """A smooth float RGB picture (3, h, w), so that interpolation filters differ little."""
    coarse = torch.rand(1, 3, 5, 5, generator=torch.Generator().manual_seed(seed))
    return torch.nn.functional.interpolate(coarse, size=(h, w), mode="bicubic", align_corners=True)[0].clamp(
        0, 1
    )


def test_eval_views_are_torchvisions_center_crop() -> None:
    shapes = [
        (40, 60),
        (31, 33),
        (24, 24),
        (20, 26),
        (25, 23),
        (17, 40),
    ]  # even/odd margins, smaller than the crop
    g = torch.Generator().manual_seed(0)
    images = [torch.randint(0, 256, (3, h, w), generator=g, dtype=torch.uint8) for h, w in shapes]
    batch, sizes = canvas(images)
    views = eval_views(batch, sizes, 24)
    assert views.shape == (6, 3, 24, 24) and views.dtype == torch.float32
    for b, image in enumerate(images):
        assert torch.equal(views[b], T.CenterCrop(24)(image).float() / 255), shapes[b]


def test_crop_boxes_follow_torchvisions_distribution() -> None:
    n, h, w = 4000, 48, 64
    boxes = crop_boxes(
        torch.full((n,), h), torch.full((n,), w), torch.Generator().manual_seed(0), (0.16, 1), (0.75, 4 / 3)
    )
    torch.manual_seed(1)
    reference = torch.tensor(
        [T.RandomResizedCrop.get_params(torch.zeros(3, h, w), [0.16, 1], [0.75, 4 / 3]) for _ in range(n)]
    )
    for column, what in enumerate(["top", "left", "height", "width"]):
        assert ks_2samp(boxes[:, column].numpy(), reference[:, column].numpy()).pvalue > 1e-3, what
    top, left, bh, bw = boxes.unbind(1)
    assert (top >= 0).all() and (left >= 0).all() and (top + bh <= h).all() and (left + bw <= w).all()
    area = (bh * bw).float() / (h * w)
    assert area.min() > 0.16 - 0.05 and area.max() <= 1.0


def test_crop_boxes_fall_back_to_the_central_crop_as_torchvision_does() -> None:
    # No attempt can fit a 2:1 box of the whole area, so both take the central crop clamped to the ratio.
    for h, w in [(40, 40), (30, 90)]:
        box = crop_boxes(
            torch.tensor([h]), torch.tensor([w]), torch.Generator().manual_seed(0), (1, 1), (2, 2)
        )
        assert box[0].tolist() == list(T.RandomResizedCrop.get_params(torch.zeros(3, h, w), [1, 1], [2, 2]))


def test_resized_crops_match_torchvisions_resized_crop_on_the_same_box() -> None:
    image = smooth(50, 70, seed=0)
    batch, sizes = canvas([image, smooth(30, 30, seed=1)])
    for box, crop in [
        ((5, 10, 20, 30), 32),
        ((10, 4, 40, 60), 24),
        ((0, 0, 50, 70), 32),
        ((20, 40, 30, 30), 16),
    ]:
        boxes = torch.tensor([box, (0, 0, 30, 30)])
        ours = resized_crops(batch.clone(), sizes, boxes, crop)[0]
        reference = F.resized_crop(image, *box, [crop, crop], antialias=True)
        if box[2] <= crop and box[3] <= crop:  # enlarged: the same bilinear weights inside the border
            assert (ours - reference)[:, 1:-1, 1:-1].abs().max() < 1e-4, box
        assert (ours - reference).abs().mean() < 0.01, box


def test_resized_crops_never_read_the_zero_padding() -> None:
    white = torch.ones(3, 20, 30)
    batch, sizes = canvas([white, torch.ones(3, 40, 50)])
    views = resized_crops(batch, sizes, torch.tensor([[0, 0, 20, 30], [0, 0, 40, 50]]), 32)
    assert torch.allclose(views, torch.ones_like(views))


def test_train_views_draw_per_image_and_are_seeded() -> None:
    image = (smooth(48, 64, seed=3) * 255).round().to(torch.uint8)
    batch, sizes = canvas([image] * 8)

    def views_of(seed: int) -> torch.Tensor:
        recipe = ((0.16, 1), (0.75, 4 / 3), True, (0.25, 0.25, 0.25, 0.1))  # scale, ratio, flip, jitter
        return train_views(batch, sizes, torch.Generator().manual_seed(seed), 32, *recipe)

    views = views_of(0)
    assert views.shape == (8, 3, 32, 32) and views.dtype == torch.float32
    assert views.min() >= 0 and views.max() <= 1
    distinct = {tuple(v.flatten()[:50].tolist()) for v in views}
    assert len(distinct) == 8, "the same image twice in a batch gets two different views"
    assert torch.equal(views, views_of(0))
    assert not torch.equal(views, views_of(1))


def test_flip_per_image() -> None:
    image = (smooth(32, 32, seed=4) * 255).round().to(torch.uint8)
    batch, sizes = canvas([image] * 16)
    views = train_views(
        batch, sizes, torch.Generator().manual_seed(0), 32, (1, 1), (1, 1), flip=True, jitter=None
    )
    whole = image.float() / 255
    flipped = [bool(torch.allclose(v, whole.flip(-1), atol=1e-5)) for v in views]
    kept = [bool(torch.allclose(v, whole, atol=1e-5)) for v in views]
    assert all(f or k for f, k in zip(flipped, kept, strict=True)) and 0 < sum(flipped) < 16


def test_hsv_round_trip_and_hue_match_torchvision() -> None:
    x = torch.rand(4, 3, 9, 11, generator=torch.Generator().manual_seed(0))
    x[0, :, :3] = x[0, :1, :3]  # some greys
    assert torch.allclose(hsv_to_rgb(rgb_to_hsv(x)), x, atol=1e-5)
    for hue in (-0.4, 0.1, 0.5):
        hsv = rgb_to_hsv(x)
        hsv[:, 0] = torch.remainder(hsv[:, 0] + hue, 1.0)
        assert torch.allclose(hsv_to_rgb(hsv), torch.stack([F.adjust_hue(i, hue) for i in x]), atol=1e-5)


def test_color_jitter_factors_per_image() -> None:
    x = (0.1 + 0.4 * smooth(16, 16, seed=5)).expand(
        6, 3, 16, 16
    )  # in (0, 0.5]: no clamping at 1.5x brightness
    out = color_jitter(x, torch.Generator().manual_seed(0), brightness=0.5)
    factors = (out / x).flatten(1)
    assert torch.allclose(factors, factors[:, :1], atol=1e-4), "one brightness factor per image"
    assert factors[:, 0].unique().numel() == 6 and factors.min() >= 0.5 - 1e-4 and factors.max() <= 1.5 + 1e-4
    assert torch.equal(color_jitter(x, torch.Generator().manual_seed(0)), x), "no amounts: unchanged"
    # contrast blends with the given grey mean (the whole image's), as torchvision's adjust_contrast with its own
    mean = torch.full((6,), 0.3)
    out = color_jitter(x, torch.Generator().manual_seed(1), contrast=0.4, grey_mean=mean)
    f = ((out - 0.3) / (x - 0.3)).flatten(1)[:, 0]
    assert torch.allclose(
        out, (f[:, None, None, None] * x + (1 - f[:, None, None, None]) * 0.3).clamp(0, 1), atol=1e-5
    )


# ------------------------------------------------------------------------------------------------ sampling


def test_class_balanced_batches_have_m_images_of_each_class() -> None:
    labels = torch.arange(60) % 10  # 10 classes of 6
    state = np.random.get_state()
    batches = list(ClassBalancedBatches(labels, 12, 3, seed=0))
    assert len(batches) == 5 and all(len(b) == 12 for b in batches)
    for b in batches:
        counts = torch.bincount(labels[b], minlength=10)
        assert sorted(counts[counts > 0].tolist()) == [3, 3, 3, 3] and len(set(b)) == 12
    assert batches == list(ClassBalancedBatches(labels, 12, 3, seed=0)), "seeded"
    assert batches != list(ClassBalancedBatches(labels, 12, 3, seed=1))
    assert np.array_equal(np.random.get_state()[1], state[1]), "numpy's global RNG untouched"


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        (
            {"images_per_class": 8},
            r"^images_per_class \(8\) exceeds the smallest class \(5 images, class 3\)",
        ),
        ({"batch_size": 10}, r"^batch_size \(10\) must be a multiple of images_per_class \(4\)"),
        (
            {"batch_size": 32},
            r"^batch_size \(32\) needs 8 classes of 4 images each, but there are only 4 classes",
        ),
    ],
)
def test_class_balanced_batches_refuse_what_they_cannot_give(kwargs: dict, message: str) -> None:
    labels = torch.tensor([0] * 6 + [1] * 7 + [2] * 6 + [3] * 5)
    with pytest.raises(ValueError, match=message):
        ClassBalancedBatches(labels, **{"batch_size": 8, "images_per_class": 4, **kwargs})


def test_class_disjoint_validation_holds_out_whole_classes() -> None:
    labels = torch.arange(100) % 20
    train, val = class_disjoint_validation(labels, 0.25, seed=0)
    assert len(torch.unique(labels[val])) == 5 and len(train) + len(val) == 100
    assert not set(labels[train].tolist()) & set(labels[val].tolist())
    assert torch.equal(val, class_disjoint_validation(labels, 5, seed=0)[1]), "a count or a fraction"
    assert not torch.equal(val, class_disjoint_validation(labels, 0.25, seed=1)[1])
    with pytest.raises(ValueError, match=r"^val_classes \(20\) would hold out 20 of the 20"):
        class_disjoint_validation(labels, 20, seed=0)


# ------------------------------------------------------------------------------------------------ the datamodule


def cub_module(root: Path, **kwargs) -> ImageDataModule:
    """The tiny CUB copy (classes 1-3 train with 3, 2, 4 images; 101-102 test with 3, 2) at a small recipe."""
    reader = lambda: read_cub200(root, expected_sizes={"train": 9, "test": 5})  # noqa: E731
    options = {"input_shape": [3, 24, 24], "num_classes": 3, "batch_size": 4, "eval_batch_size": 3,
               "resize": "shorter:28", "jitter": [0.25, 0.25, 0.25, 0.0], "progress": False, "prefetch": 1,
               "val_classes": 1, **kwargs}  # fmt: skip
    return ImageDataModule("cub200", reader, **options)


def trainer(training: bool) -> SimpleNamespace:
    return SimpleNamespace(training=training, global_rank=0, world_size=1)


def test_datamodule_splits_batches_and_views(tmp_path) -> None:
    write_cub200(tmp_path)
    dm = cub_module(tmp_path)
    splits = dm.load()
    assert set(splits) == {"train", "val", "test"} and all(set(s) == {"labels"} for s in splits.values())
    train, val = set(splits["train"]["labels"].tolist()), set(splits["val"]["labels"].tolist())
    assert len(val) == 1 and len(train) == 2 and not train & val and train | val == {0, 1, 2}
    assert splits["test"]["labels"].tolist() == [100, 100, 100, 101, 101]
    assert dm.store.folder.parent == tmp_path / ".clusterable_cache"

    batches = list(dm.train_dataloader())
    n_train = len(splits["train"]["labels"])
    assert len(batches) == n_train // 4  # drop_last
    batch = batches[0]
    assert set(batch) == {"images", "sizes", "labels", "index"}
    assert batch["images"].dtype == torch.uint8 and batch["images"].shape[:2] == (4, 3)
    assert (batch["sizes"].min(dim=1).values == 28).all()  # shorter side 28
    assert torch.equal(batch["labels"], splits["train"]["labels"][batch["index"]])

    dm.trainer = trainer(training=True)
    views = dm.on_after_batch_transfer(dict(batch), 0)
    assert set(views) == {"inputs", "labels", "index"} and views["inputs"].shape == (4, 3, 24, 24)
    assert (
        views["inputs"].dtype == torch.float32 and 0 <= views["inputs"].min() and views["inputs"].max() <= 1
    )
    dm.trainer = trainer(training=False)
    centre = dm.on_after_batch_transfer(dict(batch), 0)["inputs"]
    assert torch.equal(centre, eval_views(batch["images"], batch["sizes"], 24))

    # Two epochs, two orders, from the same seed every time.
    first = [b["index"].tolist() for b in dm.train_dataloader()]
    again = [b["index"].tolist() for b in cub_module(tmp_path).train_dataloader()]
    assert first == [b["index"].tolist() for b in batches] and again == first


def test_eval_batches_are_the_split_in_order_on_the_device(tmp_path) -> None:
    write_cub200(tmp_path)
    dm = cub_module(tmp_path)
    batches = list(dm.eval_batches("test", torch.device("cpu")))
    assert [len(b["labels"]) for b in batches] == [3, 2]
    assert torch.cat([b["index"] for b in batches]).tolist() == list(range(5))
    assert torch.equal(torch.cat([b["labels"] for b in batches]), dm.splits["test"]["labels"])
    store = dm.store
    first = torch.from_numpy(np.array(store.image(int(dm._rows["test"][0]))))
    assert torch.equal(
        batches[0]["inputs"][0], eval_views(first[None], torch.tensor([first.shape[1:]]), 24)[0]
    )
    with pytest.raises(ValueError, match="^stage must be one of train, val, test"):
        next(dm.eval_batches("query", "cpu"))


def test_validation_modes(tmp_path) -> None:
    write_cub200(tmp_path)
    on_test = cub_module(tmp_path, validation="test").load()
    assert (
        torch.equal(on_test["val"]["labels"], on_test["test"]["labels"])
        and len(on_test["train"]["labels"]) == 9
    )
    none = cub_module(tmp_path, validation="none")
    assert len(none.load()["val"]["labels"]) == 0 and len(none.val_dataloader()) == 0


def test_inshop_test_split_has_query_and_gallery_flags(tmp_path) -> None:
    write_inshop(tmp_path)
    reader = lambda: read_inshop(tmp_path, expected_sizes={"train": 5, "query": 2, "gallery": 3})  # noqa: E731
    dm = ImageDataModule("inshop", reader, [3, 32, 32], 2, batch_size=2, eval_batch_size=4, validation="test",
                         progress=False, cache_dir=str(tmp_path / "elsewhere"))  # fmt: skip
    test = dm.load()["test"]
    assert test["is_query"].tolist() == [True, False, False, True, False]
    assert test["is_gallery"].tolist() == [False, True, True, False, True]
    assert dm.store.folder.parent == tmp_path / "elsewhere"
    batch = next(iter(dm.test_dataloader()))
    assert set(batch) == {"images", "sizes", "labels", "index", "is_query", "is_gallery"}
    assert batch["images"].shape == (4, 3, 56, 48)  # no resize: the files' own sizes
    dm.trainer = trainer(training=False)
    assert dm.on_after_batch_transfer(batch, 0)["is_query"].tolist() == [True, False, False, True]


def test_class_balanced_sampler_in_the_datamodule(tmp_path) -> None:
    write_cub200(tmp_path, per_class={1: 4, 2: 5, 3: 4, 4: 6, 101: 2, 102: 2})
    dm = cub_module(tmp_path, sampler="class_balanced", images_per_class=2, validation="none")
    dm.reader = lambda: read_cub200(tmp_path, expected_sizes=None)
    dm.num_classes = 4
    labels = dm.load()["train"]["labels"]
    for batch in dm.train_dataloader():
        counts = torch.bincount(batch["labels"])
        assert sorted(counts[counts > 0].tolist()) == [2, 2]
        assert torch.equal(batch["labels"], labels[batch["index"]])
    small = cub_module(
        tmp_path, sampler="class_balanced", images_per_class=5, batch_size=10, validation="none"
    )
    small.reader, small.num_classes = dm.reader, 4
    with pytest.raises(
        ValueError, match=r"^images_per_class \(5\) exceeds the smallest class \(4 images, class 0\)"
    ):
        small.load()


def test_num_classes_must_be_the_training_classes(tmp_path) -> None:
    write_cub200(tmp_path)
    with pytest.raises(
        ValueError, match=r"^num_classes is 5 but the training split of CUB-200-2011 has 3 classes"
    ):
        cub_module(tmp_path, num_classes=5).load()


def test_reader_errors_surface_with_their_one_line(tmp_path) -> None:
    write_cub200(tmp_path)
    (tmp_path / "CUB_200_2011" / "images.txt").unlink()
    with pytest.raises(
        DatasetNotFoundError, match=r"CUB-200-2011 not found in .*missing: CUB_200_2011/images.txt"
    ):
        cub_module(tmp_path).load()


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"input_shape": [3, 24, 32]}, "input_shape must be [3, crop, crop]"),
        ({"batch_size": 0}, "batch_size must be an integer >= 1, got 0"),
        ({"eval_batch_size": 1.5}, "eval_batch_size must be an integer >= 1"),
        ({"source": "web"}, "source must be 'real' or 'fake'"),
        ({"resize": "256"}, "resize must be 'shorter:N'"),
        ({"crop_scale": [0.5, 0.1]}, "crop_scale must be [low, high] with 0 < low <= high"),
        ({"crop_ratio": [1]}, "crop_ratio must be [low, high]"),
        ({"jitter": [0.1, 0.1, 0.1]}, "jitter must be [brightness, contrast, saturation, hue]"),
        ({"jitter": [0.1, 0.1, 0.1, 0.7]}, "jitter must be [brightness, contrast, saturation, hue]"),
        ({"sampler": "pk"}, "sampler must be 'random' or 'class_balanced'"),
        (
            {"sampler": "class_balanced", "batch_size": 10},
            "batch_size (10) must be a multiple of images_per_class (4)",
        ),
        ({"validation": "val"}, "validation must be 'test', 'held_out_classes' or 'none'"),
        ({"val_classes": 0}, "val_classes must be a fraction in (0, 1) or a count >= 1"),
        ({"images_per_class": 0}, "images_per_class must be an integer >= 1"),
        ({"seed": True}, "seed must be an integer"),
    ],
)
def test_out_of_range_arguments_name_the_parameter(tmp_path, kwargs: dict, message: str) -> None:
    with pytest.raises(ValueError) as info:
        cub_module(tmp_path, **kwargs)
    assert str(info.value).startswith(message)


def test_fake_source_reads_no_file_and_is_above_chance() -> None:
    def no_reading():
        raise AssertionError("the fake source read the dataset")

    no_reading.parts = ("train", "query", "gallery")  # an In-Shop-like reader: the stand-in gets the flags
    dm = ImageDataModule("inshop", no_reading, [3, 32, 32], 3997, batch_size=16, source="fake", fake_size=40)
    splits = dm.load()
    assert (
        len(splits["train"]["labels"]) + len(splits["val"]["labels"]) == 40
        and len(splits["test"]["labels"]) == 40
    )
    assert int(splits["train"]["labels"].max()) < 3997 and int(splits["test"]["labels"].min()) >= 3997
    assert splits["test"]["is_query"].any() and splits["test"]["is_gallery"].any()
    batch = next(iter(dm.train_dataloader()))
    dm.trainer = trainer(training=True)
    assert dm.on_after_batch_transfer(batch, 0)["inputs"].shape == (16, 3, 32, 32)
    # Recall@1 of the mean colour of the centre crops: each class has its colour, so far above chance.
    test = list(dm.eval_batches("test", "cpu"))
    features = torch.cat([b["inputs"].mean(dim=(2, 3)) for b in test])
    labels = torch.cat([b["labels"] for b in test])
    distances = torch.cdist(features, features).fill_diagonal_(math.inf)
    assert (labels[distances.argmin(dim=1)] == labels).float().mean() > 0.9


@pytest.mark.parametrize("name", ["cub200", "cars196", "sop", "inshop"])
def test_dataset_configs_build_and_give_views(tmp_path, name: str) -> None:
    with initialize_config_dir(config_dir=CONFIG_DIR, version_base="1.3"):
        cfg = compose("train", overrides=[f"dataset={name}", f"paths.data_dir={tmp_path}"])
    with open_dict(cfg):
        cfg.dataset.source, cfg.dataset.fake_size, cfg.dataset.input_shape = "fake", 16, [3, 32, 32]
    dm = build(cfg.dataset, "dataset", seed=0)
    assert dm.root == str(tmp_path / name) and dm.batch_size == 128 and dm.eval_batch_size == 256
    dm.load()
    dm.trainer = trainer(training=True)
    views = dm.on_after_batch_transfer(next(iter(dm.train_dataloader())), 0)
    assert views["inputs"].shape[1:] == (3, 32, 32) and ("is_query" in dm.splits["test"]) == (
        name == "inshop"
    )


def test_store_of_the_fake_source_is_in_memory() -> None:
    dm = ImageDataModule("cub200", None, [3, 24, 24], 100, source="fake", fake_size=8)
    dm.load()
    assert (
        isinstance(dm.store, ImageStore)
        and dm.store.folder is None
        and not isinstance(dm.store.pixels, np.memmap)
    )


@pytest.mark.filterwarnings("ignore:.*LeafSpec.*is deprecated")  # inside Lightning, not ours
def test_lightning_calls_the_hook_train_views_in_training_centre_crops_in_validation() -> None:
    import lightning as L

    dm = ImageDataModule("cub200", None, [3, 24, 24], 100, batch_size=8, source="fake", fake_size=24)
    dm.load()
    seen = []

    def centre(split: str, index: torch.Tensor) -> torch.Tensor:
        images, sizes = dm.store.batch(dm._rows[split][index.cpu()])
        return eval_views(images, sizes, 24)

    class Probe(L.LightningModule):
        def __init__(self):
            super().__init__()
            self.weight = torch.nn.Parameter(torch.zeros(3))

        def training_step(self, batch, batch_idx):
            seen.append(
                ("train", sorted(batch), torch.equal(batch["inputs"], centre("train", batch["index"])))
            )
            return (batch["inputs"].mean(dim=(2, 3)) * self.weight).sum()

        def validation_step(self, batch, batch_idx):
            seen.append(("val", sorted(batch), torch.equal(batch["inputs"], centre("val", batch["index"]))))

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.1)

    L.Trainer(accelerator="cpu", max_epochs=1, logger=False, enable_checkpointing=False, enable_progress_bar=False,
              enable_model_summary=False, num_sanity_val_steps=0).fit(Probe(), datamodule=dm)  # fmt: skip
    assert {s[0] for s in seen} == {"train", "val"}
    assert all(keys == ["index", "inputs", "labels"] for _, keys, _ in seen)
    assert all(same == (stage == "val") for stage, _, same in seen), "random views in training only"
