"""Batched image augmentation on the device of the batch, with random parameters drawn per image.

``Augment`` is the ``dataset.augment`` config node of the image-folder datasets (``_target_:
clusterable.data.folders.augment.Augment``): the crop's scale and ratio ranges, flips and colour jitter, checked
when it is built; ``ImageDataModule`` calls it on every training batch (``train_views``).

The input is what ``ImageStore.batch`` makes: uint8 images (B, 3, Hc, Wc) on a zero-padded canvas and each
image's true size (B, 2) = (h, w), its pixels at ``[b, :, :h, :w]``. The output is float RGB in [0, 1]
(B, 3, crop, crop); ImageNet normalisation is the encoder's business.

``train_views`` is Boudiaf et al.'s training transform (``utils/data/dataset_ingredient.py`` of
``jeromerony/dml_cross_entropy``: ``ColorJitter``, ``RandomResizedCrop``, ``RandomHorizontalFlip``, on images
already resized by their recipe) with every random parameter drawn per image, as a per-sample ``DataLoader``
does. (torchvision's v2 transforms applied to a batch tensor draw ONE crop box, flip and jitter for the whole
batch, which is why they are not used on batches here.)

- crop boxes: torchvision's ``RandomResizedCrop.get_params`` algorithm, vectorised: 10 attempts of an area
  fraction uniform in ``scale`` and a log-uniform aspect ratio in ``ratio``, the first attempt that fits,
  otherwise the central crop clamped to ``ratio``; then a uniform position.
- crop + resize: ``torchvision.ops.roi_align`` (bilinear, ``aligned=True``: pixel centres at +0.5, as in
  torchvision's ``resize``), its adaptive sampling averaging ``ceil(box / crop)``^2 bilinear samples per output
  pixel when the box is shrunk, an antialiasing filter close to PIL's (which the authors' PIL pipeline used).
  The one difference from cropping then resizing: at the box's border, bilinear weights reach one pixel
  beyond the box (into the image, or into its edge pixel replicated; never into the zero padding).
- horizontal flip with probability 1/2 per image.
- colour jitter: brightness, contrast, saturation and hue factors per image, applied in a random order drawn
  per image (torchvision's ``ColorJitter`` draws a new order per call, i.e. per image in a per-sample pipeline).
  The authors jitter the whole (resized) image before cropping; here the jitter runs on the 224 x 224 crops,
  which is cheaper and the same for the per-pixel operations (brightness, saturation, hue up to interpolation),
  and contrast blends with the grey mean of the WHOLE image (computed on the canvas first, then tracked
  through the brightness and hue steps that precede it), as when jittering before the crop.
  PIL rounds to uint8 after each operation; here everything stays float.

``eval_views`` is ``CenterCrop(crop)`` of each image's valid region, exactly torchvision's (its rounding and its
zero padding of an image smaller than the crop).
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torchvision.ops import roi_align

__all__ = [
    "DEFAULT_AUGMENT",
    "Augment",
    "color_jitter",
    "crop_boxes",
    "eval_views",
    "grey",
    "hsv_to_rgb",
    "resized_crops",
    "rgb_to_hsv",
    "train_views",
]

# ITU-R 601-2 luma, as PIL's convert("L") and torchvision's rgb_to_grayscale weigh the channels.
LUMA = (0.2989, 0.587, 0.114)


@dataclass(frozen=True)
class Augment:
    """The random training views of an image-folder dataset (``dataset.augment``): Boudiaf et al.'s
    ``RandomResizedCrop``, ``RandomHorizontalFlip`` and ``ColorJitter``, every parameter drawn per image.

    Args:
        crop_scale: ``RandomResizedCrop``'s area range; Boudiaf: (0.16, 1).
        crop_ratio: its aspect-ratio range; Boudiaf: (3/4, 4/3), Cars (1, 1).
        flip: random horizontal flips (Boudiaf: yes).
        jitter: ``ColorJitter``'s (brightness, contrast, saturation, hue), or None; Boudiaf: CUB
            (0.25, 0.25, 0.25, 0), Cars (0.3, 0.3, 0.3, 0.1), SOP and In-Shop none. All zeros is kept as None.

    The values are kept as tuples of floats (a config gives lists).

    Raises:
        ValueError: a value out of range; the message starts with the field's name.
    """

    crop_scale: Sequence[float] = (0.16, 1.0)
    crop_ratio: Sequence[float] = (3 / 4, 4 / 3)
    flip: bool = True
    jitter: Sequence[float] | None = None

    def __post_init__(self) -> None:
        for key in ("crop_scale", "crop_ratio"):
            pair = getattr(self, key)
            if not _numbers(pair, 2) or not 0 < pair[0] <= pair[1]:
                raise ValueError(f"{key} must be [low, high] with 0 < low <= high, got {pair}")
        jitter = self.jitter
        if jitter is not None and (not _numbers(jitter, 4) or min(jitter) < 0 or jitter[3] > 0.5):
            raise ValueError(
                f"jitter must be [brightness, contrast, saturation, hue] (each >= 0, hue <= 0.5) or null, got {jitter}"
            )
        # Frozen: the normalised values are set once, here.
        object.__setattr__(self, "crop_scale", (float(self.crop_scale[0]), float(self.crop_scale[1])))
        object.__setattr__(self, "crop_ratio", (float(self.crop_ratio[0]), float(self.crop_ratio[1])))
        object.__setattr__(self, "flip", bool(self.flip))
        jitter = None if jitter is None or not any(jitter) else tuple(float(j) for j in jitter)
        object.__setattr__(self, "jitter", jitter)

    def __call__(
        self, images: torch.Tensor, sizes: torch.Tensor, generator: torch.Generator, crop: int
    ) -> torch.Tensor:
        """``train_views`` of a batch with these settings: uint8 (B, 3, Hc, Wc) canvases and their (B, 2) sizes
        -> float (B, 3, crop, crop) in [0, 1]."""
        return train_views(images, sizes, generator, crop, self.crop_scale, self.crop_ratio, self.flip, self.jitter)


def _numbers(value: object, n: int) -> bool:
    """``value`` is a list of ``n`` numbers (no string, no boolean)."""
    return (
        isinstance(value, Sequence)
        and not isinstance(value, str)
        and len(value) == n
        and all(isinstance(v, numbers.Real) and not isinstance(v, bool) for v in value)
    )


# ImageDataModule's default: Boudiaf et al.'s crop and flip, no colour jitter.
DEFAULT_AUGMENT = Augment()


def train_views(
    images: torch.Tensor,
    sizes: torch.Tensor,
    generator: torch.Generator,
    crop: int,
    scale: Sequence[float] = (0.08, 1.0),
    ratio: Sequence[float] = (3 / 4, 4 / 3),
    flip: bool = True,
    jitter: Sequence[float] | None = None,
) -> torch.Tensor:
    """Random training views of a batch: per-image resized crop, horizontal flip and colour jitter.

    Args:
        images: uint8 (B, 3, Hc, Wc), zero-padded canvas; image b is ``images[b, :, :h_b, :w_b]``.
        sizes: long (B, 2), each image's (h, w).
        generator: the source of every random draw; on ``images.device``.
        crop: output side; Boudiaf et al.: 224.
        scale: range of the crop's area as a fraction of the image's; Boudiaf et al.: (0.16, 1).
        ratio: range of the crop's aspect ratio w/h; Boudiaf et al.: (3/4, 4/3), for Cars-196 (1, 1).
        flip: flip each image horizontally with probability 1/2 (``RandomHorizontalFlip``).
        jitter: (brightness, contrast, saturation, hue) as ``ColorJitter`` takes them, or None for none;
            Boudiaf et al.: CUB (0.25, 0.25, 0.25, 0), Cars (0.3, 0.3, 0.3, 0.1), SOP and In-Shop none.

    Returns:
        float (B, 3, crop, crop) in [0, 1].
    """
    x = images.to(torch.float32).div_(255.0)
    heights, widths = sizes[:, 0].to(x.device), sizes[:, 1].to(x.device)
    grey_mean = None
    if jitter is not None and jitter[1] > 0:
        # The whole image's grey mean, before the crop (the padding is 0, so a sum over the canvas will do).
        grey_mean = grey(x).sum(dim=(-3, -2, -1)) / (heights * widths).to(x.dtype)
    boxes = crop_boxes(heights, widths, generator, scale, ratio)
    out = resized_crops(x, sizes, boxes, crop)
    if flip:
        flipped = torch.nonzero(torch.rand(len(out), generator=generator, device=out.device) < 0.5).squeeze(1)
        out.index_copy_(0, flipped, out.index_select(0, flipped).flip(-1))
    if jitter is not None:
        out = color_jitter(out, generator, *jitter, grey_mean=grey_mean)
    return out


def eval_views(images: torch.Tensor, sizes: torch.Tensor, crop: int) -> torch.Tensor:
    """``CenterCrop(crop)`` of each image's valid region: float (B, 3, crop, crop) in [0, 1].

    torchvision's arithmetic: the top-left corner is ``round((h - crop) / 2)`` (Python's round, half to even),
    and an image smaller than the crop is first padded with zeros, ``(crop - h) // 2`` rows above it.
    """
    b, _, hc, wc = images.shape
    device = images.device
    heights, widths = sizes[:, 0].to(device), sizes[:, 1].to(device)
    top, left = _centre_offset(heights, crop), _centre_offset(widths, crop)
    steps = torch.arange(crop, device=device)
    rows, cols = top[:, None] + steps, left[:, None] + steps  # (B, crop) source rows and columns
    inside = ((rows >= 0) & (rows < heights[:, None]))[:, :, None] & ((cols >= 0) & (cols < widths[:, None]))[:, None]
    batch = torch.arange(b, device=device)[:, None, None]
    # (B, crop, crop, 3): the advanced indices broadcast to (B, crop, crop) and go first, the channels last.
    out = images[batch, :, rows.clamp(0, max(hc - 1, 0))[:, :, None], cols.clamp(0, max(wc - 1, 0))[:, None, :]]
    out = out * inside[..., None].to(out.dtype)
    return out.permute(0, 3, 1, 2).to(torch.float32).div_(255.0).contiguous()


def _centre_offset(length: torch.Tensor, crop: int) -> torch.Tensor:
    """torchvision's center_crop offset along one axis (negative: the image is padded by that much)."""
    larger = torch.round((length - crop).to(torch.float64) / 2.0).to(torch.long)
    return torch.where(length >= crop, larger, -((crop - length) // 2))


def crop_boxes(
    heights: torch.Tensor,
    widths: torch.Tensor,
    generator: torch.Generator,
    scale: Sequence[float] = (0.08, 1.0),
    ratio: Sequence[float] = (3 / 4, 4 / 3),
    attempts: int = 10,
) -> torch.Tensor:
    """``RandomResizedCrop.get_params`` for every image at once: long (B, 4) rows of (top, left, h, w).

    Per image: ``attempts`` draws of a target area ``area * U(scale)`` and an aspect ratio
    ``exp(U(log ratio))``, ``w = round(sqrt(area * ratio))``, ``h = round(sqrt(area / ratio))``; the first draw
    with ``0 < w <= width`` and ``0 < h <= height`` is placed uniformly at random; if none fits, the central
    crop of the whole image with its aspect ratio clamped to ``ratio``. Rounding is half to even, as Python's.
    """
    if not (0 < scale[0] <= scale[1]) or not (0 < ratio[0] <= ratio[1]):
        raise ValueError(f"scale and ratio must be increasing positive ranges, got {list(scale)}, {list(ratio)}")
    device = heights.device
    dtype = torch.float32 if device.type == "mps" else torch.float64
    h_img, w_img = heights.to(dtype), widths.to(dtype)
    n = len(heights)
    u = torch.rand(n, attempts, generator=generator, device=device, dtype=dtype)
    v = torch.rand(n, attempts, generator=generator, device=device, dtype=dtype)
    target = (h_img * w_img)[:, None] * (scale[0] + (scale[1] - scale[0]) * u)
    log_lo, log_hi = math.log(ratio[0]), math.log(ratio[1])
    aspect = torch.exp(log_lo + (log_hi - log_lo) * v)
    w = torch.round(torch.sqrt(target * aspect))
    h = torch.round(torch.sqrt(target / aspect))
    fits = (w > 0) & (w <= w_img[:, None]) & (h > 0) & (h <= h_img[:, None])
    first = torch.argmax(fits.to(torch.uint8), dim=1, keepdim=True)  # the first attempt that fits
    found = fits.any(dim=1)
    w, h = w.gather(1, first).squeeze(1), h.gather(1, first).squeeze(1)
    # The fallback: the whole image, cut to the nearest allowed aspect ratio, centred.
    in_ratio = w_img / h_img
    too_tall, too_wide = in_ratio < min(ratio), in_ratio > max(ratio)
    fallback_w = torch.where(too_wide, torch.round(h_img * max(ratio)), w_img)
    fallback_h = torch.where(too_tall, torch.round(w_img / min(ratio)), h_img)
    w, h = torch.where(found, w, fallback_w), torch.where(found, h, fallback_h)
    r_top = torch.rand(n, generator=generator, device=device, dtype=dtype)
    r_left = torch.rand(n, generator=generator, device=device, dtype=dtype)
    top = torch.where(found, torch.floor(r_top * (h_img - h + 1)), torch.floor((h_img - h) / 2))
    left = torch.where(found, torch.floor(r_left * (w_img - w + 1)), torch.floor((w_img - w) / 2))
    return torch.stack([top, left, h, w], dim=1).to(torch.long)


def resized_crops(x: torch.Tensor, sizes: torch.Tensor, boxes: torch.Tensor, crop: int) -> torch.Tensor:
    """Crop box b of image b and resize it to crop x crop (bilinear, antialiased when shrinking): (B, 3, crop, crop).

    Args:
        x: float (B, 3, Hc, Wc) canvas; the padding row below and column right of each image are overwritten
            with the image's edge pixels (so that interpolation at the border never reads the zero padding).
        sizes: long (B, 2), each image's (h, w).
        boxes: long (B, 4) rows of (top, left, h, w), as ``crop_boxes`` gives them.
        crop: output side.
    """
    _, _, hc, wc = x.shape
    heights, widths = sizes[:, 0].to(x.device), sizes[:, 1].to(x.device)
    short = torch.nonzero(heights < hc).squeeze(1)
    if len(short):
        x[short, :, heights[short], :] = x[short, :, heights[short] - 1, :]
    narrow = torch.nonzero(widths < wc).squeeze(1)
    if len(narrow):
        x[narrow, :, :, widths[narrow]] = x[narrow, :, :, widths[narrow] - 1]
    top, left, h, w = boxes.to(x.device, x.dtype).unbind(1)
    index = torch.arange(len(x), device=x.device, dtype=x.dtype)
    rois = torch.stack([index, left, top, left + w, top + h], dim=1)  # (batch index, x1, y1, x2, y2)
    # aligned=True: box [j, j + w] covers exactly the pixels j .. j + w - 1 (centres at +0.5), as a crop does;
    # sampling_ratio=-1: ceil(box / crop) samples per output pixel and axis, averaged (antialiasing).
    return roi_align(x, rois, output_size=(crop, crop), spatial_scale=1.0, sampling_ratio=-1, aligned=True)


def grey(x: torch.Tensor) -> torch.Tensor:
    """Luma (..., 1, H, W) of RGB (..., 3, H, W), torchvision's ``rgb_to_grayscale`` weights."""
    weights = torch.tensor(LUMA, dtype=x.dtype, device=x.device)
    return torch.einsum("...chw,c->...hw", x, weights).unsqueeze(-3)


def color_jitter(
    x: torch.Tensor,
    generator: torch.Generator,
    brightness: float = 0.0,
    contrast: float = 0.0,
    saturation: float = 0.0,
    hue: float = 0.0,
    grey_mean: torch.Tensor | None = None,
) -> torch.Tensor:
    """``ColorJitter(brightness, contrast, saturation, hue)`` with factors and order drawn per image.

    Factors as torchvision draws them: brightness, contrast and saturation uniform in
    ``[max(0, 1 - a), 1 + a]``, hue uniform in ``[-hue, hue]``; an amount of 0 skips that operation. Each image
    gets its own random order of the four. The operations are torchvision's tensor ones: brightness scales,
    contrast blends with the grey mean, saturation with the grey image, hue rotates in HSV; each clamps to [0, 1].

    Args:
        x: float (B, 3, H, W) in [0, 1] (not modified).
        grey_mean: (B,) the grey mean contrast blends with, before any jitter (e.g. of the whole image the
            crop came from; it is then tracked through brightness and hue); None: each crop's own mean.

    Returns:
        float (B, 3, H, W) in [0, 1].
    """
    if not 0 <= hue <= 0.5:
        raise ValueError(f"hue must be in [0, 0.5], got {hue}")
    if min(brightness, contrast, saturation) < 0:
        raise ValueError(f"brightness, contrast and saturation must be >= 0, got {brightness, contrast, saturation}")
    n, device = len(x), x.device
    u = torch.rand(n, 4, generator=generator, device=device, dtype=x.dtype)
    order = torch.rand(n, 4, generator=generator, device=device).argsort(dim=1)  # order[b, p]: op at position p
    amounts = (brightness, contrast, saturation)
    factors = [(max(0.0, 1 - a) + (1 + a - max(0.0, 1 - a)) * u[:, k]) for k, a in enumerate(amounts)]
    factors.append(hue * (2 * u[:, 3] - 1))
    out = x.clone()
    mean = grey_mean.clone().to(x.dtype) if grey_mean is not None else None
    enabled = [k for k, a in enumerate((brightness, contrast, saturation, hue)) if a > 0]
    for position in range(4):
        for op in enabled:
            rows = torch.nonzero(order[:, position] == op).squeeze(1)
            if len(rows) == 0:
                continue
            f = factors[op][rows]
            part = out.index_select(0, rows)
            if op == 0:  # brightness: blend with black
                part = part.mul_(f[:, None, None, None]).clamp_(0, 1)
                if mean is not None:
                    mean[rows] = (mean[rows] * f).clamp_(0, 1)
            elif op == 1:  # contrast: blend with the grey mean
                m = mean[rows] if mean is not None else grey(part).mean(dim=(-3, -2, -1))
                part = _blend(part, m[:, None, None, None], f)
            elif op == 2:  # saturation: blend with the grey image
                part = _blend(part, grey(part), f)
            else:  # hue: rotate the hue channel
                before = grey(part).mean(dim=(-3, -2, -1))
                hsv = rgb_to_hsv(part)
                hsv[:, 0] = torch.remainder(hsv[:, 0] + f[:, None, None], 1.0)
                part = hsv_to_rgb(hsv)
                if mean is not None:  # the whole image's grey changes about as its crop's does
                    after = grey(part).mean(dim=(-3, -2, -1))
                    mean[rows] = torch.where(before > 0, mean[rows] * after / before.clamp_min(1e-12), mean[rows])
            out.index_copy_(0, rows, part)
    return out


def _blend(x: torch.Tensor, other: torch.Tensor, factor: torch.Tensor) -> torch.Tensor:
    """torchvision's ``_blend``: ``factor * x + (1 - factor) * other``, clamped to [0, 1]; factor (B,).

    One fused ``lerp`` (``other + factor * (x - other)``) rather than four passes over the images."""
    return torch.lerp(other.expand_as(x), x, factor[:, None, None, None].expand_as(x)).clamp_(0, 1)


def rgb_to_hsv(x: torch.Tensor) -> torch.Tensor:
    """RGB (..., 3, H, W) in [0, 1] -> HSV (..., 3, H, W), hue in [0, 1); torchvision's ``_rgb2hsv`` conventions
    (hue 0 and saturation 0 for greys; red wins ties, then green)."""
    r, g, b = x.unbind(dim=-3)
    maxc = x.amax(dim=-3)
    delta = maxc - x.amin(dim=-3)
    s = torch.where(maxc > 0, delta / maxc.clamp_min(1e-12), torch.zeros_like(maxc))
    d = delta.clamp_min(1e-12)
    rc, gc, bc = (maxc - r) / d, (maxc - g) / d, (maxc - b) / d
    h = torch.where(maxc == r, bc - gc, torch.where(maxc == g, 2.0 + rc - bc, 4.0 + gc - rc))
    h = torch.where(delta > 0, torch.remainder(h / 6.0, 1.0), torch.zeros_like(h))
    return torch.stack([h, s, maxc], dim=-3)


def hsv_to_rgb(x: torch.Tensor) -> torch.Tensor:
    """HSV (..., 3, H, W) -> RGB (..., 3, H, W): channel n (R 5, G 3, B 1) is ``v - v s clamp(min(k, 4 - k), 0, 1)``
    with ``k = (n + 6 h) mod 6``, the closed form of the six-sector formula torchvision's ``_hsv2rgb`` uses."""
    h, s, v = x.unbind(dim=-3)
    n = torch.tensor([5.0, 3.0, 1.0], device=x.device, dtype=x.dtype).view(3, 1, 1)
    k = torch.remainder(n + 6.0 * h.unsqueeze(-3), 6.0)
    weight = torch.minimum(k, 4.0 - k).clamp(0, 1)
    return (v.unsqueeze(-3) * (1 - s.unsqueeze(-3) * weight)).clamp(0, 1)
