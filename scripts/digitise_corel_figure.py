"""Read the λ curves of COREL's supplement (Kenyon-Dean et al. 2019, supplementary material, Figure 1) as numbers.

    python scripts/digitise_corel_figure.py supplemental.pdf            # prints the values and their precision
    python scripts/digitise_corel_figure.py supplemental.pdf --write    # and writes them into the published file

The supplement (``supplemental.pdf`` in the authors' repository, github.com/kiankd/corel2019) plots the best
validation accuracy against λ for Center loss, Cosine-COREL and Gaussian-COREL, 20 λ from 0.05 to 1.00, in six
panels: MNIST, Fashion-MNIST and AGNews (rows) by the FFNN and the CNN (columns). No number is printed: the panels
are raster images (matplotlib's default style), embedded at about 320 dpi.

**Method.** The page's six images are taken from the PDF as embedded (no re-rendering) and placed by their position
on the page (rows top to bottom: MNIST, Fashion, AGNews; columns: FFNN, CNN, as the caption says). In each image:

1. the axes are the black frame (rows and columns that are dark over half their length); the tick marks are the
   dark 1-pixel stubs just outside its left and bottom spines;
2. the y axis is calibrated by a least-squares line through the tick marks' rows and the tick labels, which are
   read by eye from the image and written in ``Y_TICKS`` below (the script checks that it finds as many tick
   marks as labels, evenly spaced); the x axis likewise through the ticks 0.2 ... 1.0;
3. each pixel is unmixed into "a share α of one series colour over white" (matplotlib's tab:blue, tab:orange,
   tab:green for Center, Cosine, Gaussian); the pixels of a series are its α;
4. for each series and each of the 20 λ, a disk the size of a marker is slid along that λ's column: its best place
   has the most pixels of the series' colour, counting as present the pixels of series drawn later (a marker under
   a later marker or line is hidden, not absent). The centre is then refined to a fraction of a pixel by fitting
   an anti-aliased disk (centre and radius) to the α of the visible pixels around it;
5. a marker outside the axes (AGNews' Cosine-COREL at small λ, whose line leaves the panel) has no disk of its
   colour in its column: its value is recorded as below the axis (``below``), not guessed.

**Precision.** One pixel is 0.006 points of accuracy on Fashion-MNIST's FFNN panel, 0.001 on MNIST's CNN panel and
0.017 on AGNews' panels (each panel's ``point_per_pixel`` is written beside its values). On panels drawn by
matplotlib in the same style from known values (``tests/tables/test_digitise.py``), a visible marker comes back
within 3 pixels, most within half a pixel: 0.05 points on the coarsest panel. A marker wholly under another
series' marker (listed as ``hidden`` beside its panel) comes back within 12 pixels: 0.07 points on Fashion-MNIST's
FFNN panel, 0.2 on AGNews'. The tick marks are whole pixels; the calibration's worst residual is half a pixel.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import re
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from scipy import ndimage, optimize

# The supplement as the authors' repository ships it (kiankd/corel2019 @ 9791d8a, supplemental.pdf).
PDF_SHA256 = "75f8daaf13b888cde5abd06f591cdcac1cc2016efe90a5527fff02f2ba34f946"
FIGURE_PAGE = 1  # 0-based: Figure 1 is on the supplement's second page
# Panels in reading order on the page: the caption's rows (MNIST, Fashion-MNIST, AGNews) by columns (FFNN, CNN).
PANELS = (
    ("mnist", "ffnn"),
    ("mnist", "cnn"),
    ("fashion_mnist", "ffnn"),
    ("fashion_mnist", "cnn"),
    ("agnews8", "ffnn"),
    ("agnews8", "cnn"),
)
# Each panel's y tick labels, read by eye from the image, bottom to top, as printed (fractions on the image panels,
# percent on AGNews'); values are written in percent.
Y_TICKS: dict[tuple[str, str], tuple[float, ...]] = {
    ("mnist", "ffnn"): (0.950, 0.955, 0.960, 0.965, 0.970, 0.975, 0.980, 0.985),
    ("mnist", "cnn"): (0.991, 0.992, 0.993, 0.994, 0.995, 0.996),
    ("fashion_mnist", "ffnn"): (0.865, 0.870, 0.875, 0.880, 0.885, 0.890, 0.895),
    ("fashion_mnist", "cnn"): (0.9075, 0.9100, 0.9125, 0.9150, 0.9175, 0.9200, 0.9225, 0.9250),
    ("agnews8", "ffnn"): (68.0, 70.0, 72.0, 74.0, 76.0, 78.0),
    ("agnews8", "cnn"): (72.0, 74.0, 76.0, 78.0, 80.0),
}
PERCENT_TICKS = {("agnews8", "ffnn"), ("agnews8", "cnn")}  # the others print fractions
X_TICKS = (0.2, 0.4, 0.6, 0.8, 1.0)
LAMBDAS = tuple(round(0.05 * k, 2) for k in range(1, 21))
# The series in drawing order (a later one hides an earlier one) and their colours: matplotlib's tab10 C0, C1, C2.
SERIES = {"center": (31, 119, 180), "cosine_corel": (255, 127, 14), "gaussian_corel": (44, 160, 44)}
MARKER_RADIUS = 4.8  # pixels: matplotlib's default marker (6 pt) is 9-10 pixels across in these images
DARK = 0.3  # a pixel whose brightest channel is below this is black ink (frame, ticks, text)


@dataclass
class Panel:
    """One panel's digitised curves: ``values[series][λ]`` in percent (None: below the axis), the axis bottom in
    percent (``y_min``), the scale (``point_per_pixel``), the calibration's worst residual in pixels and the markers
    found wholly under another series' marker (``hidden``: good to about 2 pixels, not a quarter)."""

    values: dict[str, dict[float, float | None]]
    y_min: float
    point_per_pixel: float
    tick_residual_px: float
    hidden: list[tuple[str, float]]


def composite(rgba: np.ndarray) -> np.ndarray:
    """(H, W, 3 or 4) uint8 -> (H, W, 3) float in [0, 1], over white where there is an alpha channel."""
    img = rgba.astype(float) / 255
    if img.shape[-1] == 4:
        img = img[..., :3] * img[..., 3:] + (1 - img[..., 3:])
    return img


def axes_frame(rgb: np.ndarray) -> tuple[int, int, int, int]:
    """(top, bottom, left, right) pixel rows / columns of the axes' black frame."""
    dark = rgb.max(-1) < DARK
    rows = np.flatnonzero(dark.mean(1) > 0.5)
    cols = np.flatnonzero(dark.mean(0) > 0.5)
    if len(rows) < 2 or len(cols) < 2:
        raise ValueError("no axes frame found (no dark rows and columns spanning half the image)")
    return int(rows[0]), int(rows[-1]), int(cols[0]), int(cols[-1])


def _stubs(line: np.ndarray) -> np.ndarray:
    """Centres of the runs of True in a 1-D mask."""
    labels, n = ndimage.label(line)
    return np.array(ndimage.center_of_mass(line, labels, range(1, n + 1))).reshape(-1)


def legend_area(rgb: np.ndarray) -> np.ndarray:
    """(H, W) mask of the legend box: the bounding box of the largest connected set of light-grey pixels (the
    legend's frame, matplotlib's 0.8 grey at alpha 0.8); all False when there is none."""
    lo, hi = rgb.min(-1), rgb.max(-1)
    grey = (hi - lo < 0.02) & (lo > 0.75) & (hi < 0.9)
    labels, n = ndimage.label(grey)
    mask = np.zeros(grey.shape, bool)
    if n:
        boxes = ndimage.find_objects(labels)
        biggest = max(boxes, key=lambda b: (b[0].stop - b[0].start) * (b[1].stop - b[1].start))
        mask[biggest] = True
    return mask


def tick_positions(rgb: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Rows of the y ticks (bottom to top) and columns of the x ticks (left to right): the dark stubs in the two
    pixels just outside the left and the bottom spine."""
    top, bottom, left, right = axes_frame(rgb)
    dark = rgb.max(-1) < DARK
    y_ticks = _stubs(dark[top : bottom + 1, left - 3] & dark[top : bottom + 1, left - 2]) + top
    x_ticks = _stubs(dark[bottom + 2, left : right + 1] & dark[bottom + 3, left : right + 1]) + left
    return y_ticks[::-1], x_ticks


def calibrate(pixels: np.ndarray, values: tuple[float, ...], axis: str) -> tuple[np.ndarray, float]:
    """Least-squares ``value = a + b * pixel`` through the tick marks: (a, b) and the worst residual in pixels.
    Refuses a count of tick marks that is not the count of labels, or ticks that are not evenly spaced."""
    if len(pixels) != len(values):
        raise ValueError(f"{axis} axis: {len(pixels)} tick marks found for {len(values)} labels {values}")
    b, a = np.polyfit(pixels, values, 1)
    residual_px = float(np.max(np.abs(a + b * pixels - np.asarray(values))) / abs(b))
    if residual_px > 1.0:
        raise ValueError(f"{axis} axis: ticks not evenly spaced (a residual of {residual_px:.2f} pixels)")
    return np.array([a, b]), residual_px


def unmix(rgb: np.ndarray, colour: tuple[int, int, int]) -> np.ndarray:
    """(H, W) share α of ``colour`` over white in each pixel; 0 where the pixel is not such a blend (another
    colour, black, or white)."""
    ink = 1 - np.asarray(colour, float) / 255
    paint = 1 - rgb
    alpha = paint @ ink / (ink @ ink)
    off = np.linalg.norm(paint - alpha[..., None] * ink, axis=-1)
    return np.where((off < 0.08) & (alpha > 0.1), np.clip(alpha, 0, 1), 0.0)


def _disk(radius: float) -> np.ndarray:
    r = int(np.ceil(radius))
    yy, xx = np.mgrid[-r : r + 1, -r : r + 1]
    return (np.hypot(yy, xx) <= radius).astype(float)


def _refine(alpha: np.ndarray, known: np.ndarray, cy: float, cx: float, reach: float = 2) -> tuple[float, float]:
    """Sub-pixel centre: an anti-aliased disk (coverage ``clip(R + 0.5 - distance, 0, 1)``) fitted by least
    squares to the α of the pixels within R + 2 of (cy, cx) whose α is known (``known``: the series' colour over
    white, or white; not another colour, which may hide it), within ``reach`` pixels of (cy, cx)."""
    r = int(MARKER_RADIUS + reach + 3)
    y0, x0 = int(round(cy)), int(round(cx))
    yy, xx = np.mgrid[y0 - r : y0 + r + 1, x0 - r : x0 + r + 1]
    inside = (yy >= 0) & (yy < alpha.shape[0]) & (xx >= 0) & (xx < alpha.shape[1])
    yy, xx = np.clip(yy, 0, alpha.shape[0] - 1), np.clip(xx, 0, alpha.shape[1] - 1)
    near = inside & (np.hypot(yy - cy, xx - cx) <= MARKER_RADIUS + reach + 1) & known[yy, xx]
    a = alpha[yy, xx][near]
    py, px = yy[near], xx[near]

    def residual(p: np.ndarray) -> np.ndarray:
        coverage = np.clip(p[2] + 0.5 - np.hypot(py - p[0], px - p[1]), 0, 1)
        return coverage - a

    fit = optimize.least_squares(
        residual,
        [cy, cx, MARKER_RADIUS],
        bounds=([cy - reach, cx - reach, MARKER_RADIUS - 1], [cy + reach, cx + reach, MARKER_RADIUS + 1]),
    )
    return float(fit.x[0]), float(fit.x[1])


def digitise(rgb: np.ndarray, y_ticks: tuple[float, ...], percent_ticks: bool = False) -> Panel:
    """The three curves of one panel: (H, W, 3) float image -> ``Panel`` (values in percent)."""
    top, bottom, left, right = axes_frame(rgb)
    tick_rows, tick_cols = tick_positions(rgb)
    scale = 1.0 if percent_ticks else 100.0
    (ya, yb), y_res = calibrate(tick_rows, tuple(v * scale for v in y_ticks), "y")
    (xa, xb), x_res = calibrate(tick_cols, X_TICKS, "x")
    alphas = {name: unmix(rgb, colour) for name, colour in SERIES.items()}
    legend = legend_area(rgb)  # its sample markers are no data: nothing is found there
    disk = _disk(MARKER_RADIUS - 0.5)  # the marker's fully painted inside
    names = list(SERIES)
    x = (np.array(LAMBDAS) - xa) / xb
    centres: dict[str, dict[float, tuple[float, float]]] = {}
    hidden_markers: list[tuple[str, float]] = []
    for i in reversed(range(len(names))):  # the last drawn first: a hidden marker lies under one already found
        name, later = names[i], names[i + 1 :]
        # Pixels of a series drawn later (or black ink: the frame, the legend's text) may hide this one's marker.
        hidden = rgb.max(-1) < DARK
        for other in later:
            hidden |= alphas[other] > 0.5
        known = (alphas[name] > 0) | (rgb.min(-1) > 0.97)  # its colour over white, or white: α is known there
        present = np.maximum(alphas[name], hidden.astype(float))
        score = ndimage.correlate(present, disk, mode="constant") / disk.sum()
        own = ndimage.correlate(alphas[name], disk, mode="constant") / disk.sum()
        score[legend | (own < 0.45)] = 0  # a marker shows half its own colour or so (a line crossing shows less)
        centres[name] = {}
        for lam, col in zip(LAMBDAS, x, strict=True):
            c0, c1 = int(np.floor(col - 2)), int(np.ceil(col + 2)) + 1
            band = score[top + 1 : bottom, c0:c1]
            if band.max() >= 0.8:  # its whole disk in place, visibly its own colour in part
                cy, cx = np.unravel_index(np.argmax(band), band.shape)
                centres[name][lam] = _refine(alphas[name], known, float(cy + top + 1), float(cx + c0))
        # A marker not found lies wholly under a later series' marker at the same λ (with less than half of it
        # showing, within 4 pixels of that marker's centre): under the one its line runs to, the line to a
        # neighbouring marker found keeping to its colour or to hidden pixels, where from another it would cross
        # white paper.
        trace = ndimage.maximum_filter(np.maximum(alphas[name], hidden), size=9)  # a hidden marker may sit 4 px off
        for j, lam in enumerate(LAMBDAS):
            under = [centres[other][lam] for other in later if lam in centres[other]]
            if lam in centres[name] or not under:
                continue
            ends = [
                centres[name][LAMBDAS[k]]
                for k in (j - 1, j + 1)
                if 0 <= k < len(LAMBDAS) and LAMBDAS[k] in centres[name]
            ]
            follows = {c: max((_along(trace, c, end) for end in ends), default=0.0) for c in under}
            cy, cx = max(follows, key=follows.get)
            if follows[(cy, cx)] < 0.5:  # no line of its own runs there: off the axes (_check_below)
                continue
            showing = _disk(MARKER_RADIUS + 4) * alphas[name][_window(alphas[name].shape, cy, cx, MARKER_RADIUS + 4)]
            refined = (showing > 0.5).sum() >= 3  # a crescent of its own to fit, else the covering marker's centre
            centres[name][lam] = _refine(alphas[name], known, cy, cx, reach=4) if refined else (cy, cx)
            hidden_markers.append((name, lam))
        _check_below(name, [lam in centres[name] for lam in LAMBDAS], alphas[name], bottom, x)
    values = {
        name: {lam: float(ya + yb * centres[name][lam][0]) if lam in centres[name] else None for lam in LAMBDAS}
        for name in names
    }
    return Panel(values, float(ya + yb * bottom), float(abs(yb)), max(y_res, x_res), sorted(hidden_markers))


def _window(shape: tuple[int, ...], cy: float, cx: float, radius: float) -> tuple[slice, slice]:
    """The square of pixels within ``radius`` of (cy, cx), the same shape as ``_disk(radius)`` (never off the
    image: markers lie inside the axes)."""
    r = int(np.ceil(radius))
    y, x = int(round(cy)), int(round(cx))
    return slice(y - r, y + r + 1), slice(x - r, x + r + 1)


def _along(mask: np.ndarray, a: tuple[float, float], b: tuple[float, float]) -> float:
    """The mean of ``mask`` along the segment from pixel ``a`` to pixel ``b`` (one sample a pixel)."""
    n = int(np.hypot(b[0] - a[0], b[1] - a[1])) + 1
    yy = np.rint(np.linspace(a[0], b[0], n)).astype(int)
    xx = np.rint(np.linspace(a[1], b[1], n)).astype(int)
    return float(mask[yy, xx].mean())


def _check_below(name: str, found: list[bool], alpha: np.ndarray, bottom: int, x: np.ndarray) -> None:
    """Refuse markers not found unless they are the first λ values of a curve whose line then meets the bottom
    spine before its first marker found (``x``: the λ values' columns): a curve that leaves the axes downwards."""
    first = found.index(True) if any(found) else len(found)
    if not all(found[first:]) or first == len(found):
        missing = [lam for lam, f in zip(LAMBDAS, found, strict=True) if not f]
        raise ValueError(f"{name}: no marker found at λ {missing}")
    if first and not (alpha[bottom - 3 : bottom, int(x[first - 1]) : int(x[first]) + 1] > 0.5).any():
        raise ValueError(f"{name}: no marker at λ <= {LAMBDAS[first - 1]}, and its line does not leave the axes")


def page_images(pdf: Path) -> list[np.ndarray]:
    """The figure page's images in reading order (top row first, left to right), as (H, W, 3) float arrays."""
    import pypdf  # the `digitise` extra: only this script reads PDFs
    from PIL import Image

    page = pypdf.PdfReader(pdf).pages[FIGURE_PAGE]
    placed: dict[str, tuple[float, float]] = {}  # name -> (-top, left): top row first, then left to right
    flipped: dict[str, tuple[bool, bool]] = {}  # a negative scale draws the image upside down (or mirrored)

    def visit(op: bytes, args: list, cm: list, tm: list) -> None:
        if op == b"Do":
            name = str(args[0]).lstrip("/")
            placed[name] = (-(cm[5] + max(cm[3], 0)), cm[4] + min(cm[0], 0))
            flipped[name] = (cm[3] < 0, cm[0] < 0)

    page.extract_text(visitor_operand_before=visit)
    images = {Path(im.name).stem: im for im in page.images}
    if set(images) != set(placed) or len(images) != len(PANELS):
        raise ValueError(f"{pdf}: page {FIGURE_PAGE + 1} holds {len(images)} images, expected {len(PANELS)}")
    order = sorted(placed, key=placed.get)
    out = []
    for name in order:
        img = Image.open(io.BytesIO(images[name].data)) if images[name].image is None else images[name].image
        rgb = composite(np.asarray(img.convert("RGBA")))
        upside_down, mirrored = flipped[name]
        out.append(rgb[:: -1 if upside_down else 1, :: -1 if mirrored else 1])
    return out


def digitise_pdf(pdf: Path) -> dict[tuple[str, str], Panel]:
    return {
        panel: digitise(img, Y_TICKS[panel], panel in PERCENT_TICKS)
        for panel, img in zip(PANELS, page_images(pdf), strict=True)
    }


def as_yaml(panels: dict[tuple[str, str], Panel]) -> str:
    """The ``figure1`` block of ``tables/published/corel.yaml``: per "<dataset>/<model>/<loss>" the 20 λ's values in
    percent (two decimals; ``below <y_min>`` for a marker under the axis)."""
    lines = [
        "# Supplementary Figure 1 (Kenyon-Dean et al. 2019, supplemental.pdf in github.com/kiankd/corel2019, page 2):",
        "# validation accuracy (%, the best epoch's) against λ, DIGITISED from the raster image by",
        "# scripts/digitise_corel_figure.py (its docstring: method and precision: 3 pixels, 12 for a marker hidden",
        "# under another; point_per_pixel converts), never printed as numbers by the authors. Generated: edit the",
        "# script, not this block.",
        "figure1:",
        f"  source_sha256: {PDF_SHA256}",
    ]
    for (dataset, model), panel in panels.items():
        lines.append(f"  {dataset}/{model}:")
        lines.append(f"    point_per_pixel: {panel.point_per_pixel:.4f}")
        lines.append(f"    y_min: {panel.y_min:.2f}   # the axis' bottom: a marker below it is 'below'")
        if panel.hidden:
            hidden = ", ".join(f"{loss} {lam:.2f}" for loss, lam in panel.hidden)
            lines.append(f"    # wholly under another series' marker, so good to 12 pixels, not 3: {hidden}")
        for loss, curve in panel.values.items():
            cells = ", ".join(f"{lam:.2f}: {'below' if v is None else f'{v:.2f}'}" for lam, v in curve.items())
            lines.append(f"    {loss}: {{{cells}}}")
    return "\n".join(lines) + "\n"


def write(block: str, path: Path) -> None:
    """Replace the ``figure1`` block (and its comment) at the end of ``path``, or append it."""
    text = path.read_text()
    start = re.search(r"^# Supplementary Figure 1 .*$", text, flags=re.M)
    text = (text[: start.start()] if start else text.rstrip("\n") + "\n\n") + block
    path.write_text(text)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("pdf", type=Path, help="supplemental.pdf of github.com/kiankd/corel2019")
    parser.add_argument("--write", action="store_true", help="write the values into tables/published/corel.yaml")
    args = parser.parse_args(argv)
    if not args.pdf.is_file():
        print(f"digitise: no file {args.pdf}", file=sys.stderr)
        return 2
    digest = hashlib.sha256(args.pdf.read_bytes()).hexdigest()
    if digest != PDF_SHA256:
        print(
            f"digitise: {args.pdf} is not the supplement this script reads (SHA-256 {digest[:12]}..., expected "
            f"{PDF_SHA256[:12]}...)",
            file=sys.stderr,
        )
        return 2
    block = as_yaml(digitise_pdf(args.pdf))
    print(block, end="")
    if args.write:
        target = Path(__file__).resolve().parents[1] / "src/clusterable/tables/published/corel.yaml"
        write(block, target)
        print(f"written: {target}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
