"""The batched augmentation of the image-folder datasets against torchvision's per-image transforms, and the
``Augment`` config node that applies it.

Tolerances against torchvision: ``eval_views`` is exact (integer crop); ``resized_crops`` given torchvision's box
matches ``resized_crop`` to 1e-4 inside the crop when enlarging (the same bilinear weights; the border row differs,
where roi_align reads one pixel beyond the box and torchvision clamps at it) and to a mean of 0.01 when shrinking
(roi_align averages bilinear samples where torchvision applies its antialiasing triangle filter).
"""

from __future__ import annotations

import pytest
import torch
import torchvision.transforms.functional as F
from scipy.stats import ks_2samp
from torchvision import transforms as T

from clusterable.data.folders.augment import (
    Augment,
    color_jitter,
    crop_boxes,
    eval_views,
    hsv_to_rgb,
    resized_crops,
    rgb_to_hsv,
    train_views,
)


def canvas(images: list[torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
    hc, wc = max(i.shape[1] for i in images), max(i.shape[2] for i in images)
    out = torch.zeros(len(images), 3, hc, wc, dtype=images[0].dtype)
    for b, image in enumerate(images):
        out[b, :, : image.shape[1], : image.shape[2]] = image
    return out, torch.tensor([list(i.shape[1:]) for i in images])


def smooth(h: int, w: int, seed: int) -> torch.Tensor:
    """A smooth float RGB picture (3, h, w), so that interpolation filters differ little."""
    coarse = torch.rand(1, 3, 5, 5, generator=torch.Generator().manual_seed(seed))
    return torch.nn.functional.interpolate(coarse, size=(h, w), mode="bicubic", align_corners=True)[0].clamp(0, 1)


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
        box = crop_boxes(torch.tensor([h]), torch.tensor([w]), torch.Generator().manual_seed(0), (1, 1), (2, 2))
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
    views = train_views(batch, sizes, torch.Generator().manual_seed(0), 32, (1, 1), (1, 1), flip=True, jitter=None)
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
    x = (0.1 + 0.4 * smooth(16, 16, seed=5)).expand(6, 3, 16, 16)  # in (0, 0.5]: no clamping at 1.5x brightness
    out = color_jitter(x, torch.Generator().manual_seed(0), brightness=0.5)
    factors = (out / x).flatten(1)
    assert torch.allclose(factors, factors[:, :1], atol=1e-4), "one brightness factor per image"
    assert factors[:, 0].unique().numel() == 6 and factors.min() >= 0.5 - 1e-4 and factors.max() <= 1.5 + 1e-4
    assert torch.equal(color_jitter(x, torch.Generator().manual_seed(0)), x), "no amounts: unchanged"
    # contrast blends with the given grey mean (the whole image's), as torchvision's adjust_contrast with its own
    mean = torch.full((6,), 0.3)
    out = color_jitter(x, torch.Generator().manual_seed(1), contrast=0.4, grey_mean=mean)
    f = ((out - 0.3) / (x - 0.3)).flatten(1)[:, 0]
    assert torch.allclose(out, (f[:, None, None, None] * x + (1 - f[:, None, None, None]) * 0.3).clamp(0, 1), atol=1e-5)


# ------------------------------------------------------------------------------------------------ the config node


def test_augment_keeps_its_settings_as_tuples_of_floats_and_applies_them() -> None:
    augment = Augment(crop_scale=[1, 1], crop_ratio=[1, 1], flip=False, jitter=[0, 0, 0, 0])
    assert augment == Augment((1.0, 1.0), (1.0, 1.0), False, None), "all-zero jitter is none"
    assert isinstance(augment.crop_scale[0], float)
    image = (smooth(32, 32, seed=4) * 255).round().to(torch.uint8)
    batch, sizes = canvas([image] * 4)
    # The whole image at its own size, never flipped: the view is the image itself.
    views = augment(batch, sizes, torch.Generator().manual_seed(0), 32)
    assert torch.allclose(views, (image.float() / 255).expand(4, 3, 32, 32), atol=1e-5)
    recipe = Augment(jitter=[0.25, 0.25, 0.25, 0.0])
    expected = train_views(
        batch, sizes, torch.Generator().manual_seed(1), 24, (0.16, 1.0), (3 / 4, 4 / 3), True, (0.25, 0.25, 0.25, 0.0)
    )
    assert torch.equal(recipe(batch, sizes, torch.Generator().manual_seed(1), 24), expected)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"crop_scale": [0.5, 0.1]}, "crop_scale must be [low, high] with 0 < low <= high"),
        ({"crop_ratio": [1]}, "crop_ratio must be [low, high]"),
        ({"jitter": [0.1, 0.1, 0.1]}, "jitter must be [brightness, contrast, saturation, hue]"),
        ({"jitter": [0.1, 0.1, 0.1, 0.7]}, "jitter must be [brightness, contrast, saturation, hue]"),
    ],
)
def test_out_of_range_settings_name_the_field(kwargs: dict, message: str) -> None:
    with pytest.raises(ValueError) as info:
        Augment(**kwargs)
    assert str(info.value).startswith(message)
