"""scripts/digitise_corel_figure.py on panels drawn the way COREL's supplementary Figure 1 was (matplotlib's default
style: 'o--' in tab:blue / tab:orange / tab:green, a legend, ~10-pixel markers) from values we chose: it must give
them back within its stated precision, markers under other markers and a curve leaving the axes included, and find
the panels of a PDF page in reading order."""

import importlib
import io
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
YTICKS = (0.865, 0.870, 0.875, 0.880, 0.885, 0.890, 0.895)  # Fashion-MNIST FFNN's panel


@pytest.fixture(scope="module")
def digitiser():
    import sys

    sys.path.insert(0, str(ROOT / "scripts"))
    try:
        yield importlib.import_module("digitise_corel_figure")
    finally:
        sys.path.remove(str(ROOT / "scripts"))


def curves(seed: int) -> dict[str, np.ndarray]:
    """Three curves over the 20 λ in [0.866, 0.894] (above the legend from λ 0.65), with Center's 4th and 5th
    markers exactly under Cosine-COREL's (as in the real Fashion FFNN panel) and Gaussian-COREL's third over
    Cosine-COREL's, half a marker off."""
    rng = np.random.default_rng(seed)
    center, cosine, gaussian = (rng.uniform(0.866, 0.894, 20) for _ in range(3))
    for curve in (center, cosine, gaussian):  # clear of the legend in the lower right, as in the supplement
        curve[12:] = 0.877 + (curve[12:] - 0.866) * (0.894 - 0.877) / (0.894 - 0.866)
    center[3:5] = cosine[3:5]
    gaussian[2] = cosine[2] + 0.0002
    return {"center": center, "cosine_corel": cosine, "gaussian_corel": gaussian}


def draw(values: dict[str, np.ndarray], ylim=(0.8641, 0.8985), yticks=YTICKS) -> np.ndarray:
    """A panel as the supplement's: (H, W, 3) float in [0, 1]."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from PIL import Image

    fig, ax = plt.subplots(figsize=(8.6, 5.8), dpi=120)
    fig.subplots_adjust(left=0.086, right=0.987, top=0.98, bottom=0.096)  # the supplement's margins
    lams = np.round(np.arange(1, 21) * 0.05, 2)
    for name, label in (("center", "Center"), ("cosine_corel", "Cosine"), ("gaussian_corel", "Gaussian")):
        ax.plot(lams, values[name], "o--", label=label)
    ax.set_ylim(*ylim)
    ax.set_yticks(yticks)
    ax.set_xticks((0.2, 0.4, 0.6, 0.8, 1.0))
    ax.set_xlabel("Lambda value", fontsize=18)
    ax.set_ylabel("Optimal validation accuracy", fontsize=18)
    ax.legend(loc="lower right", fontsize=18)
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=120)
    plt.close(fig)
    return np.asarray(Image.open(buf).convert("RGB")).astype(float) / 255


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_values_come_back_within_the_stated_precision(digitiser, seed):
    """Visible markers within 3 pixels (most within half a pixel), markers wholly under another series' marker
    within 12: the script's docstring states these."""
    truth = curves(seed)
    panel = digitiser.digitise(draw(truth), YTICKS)
    assert panel.tick_residual_px <= 0.5
    hidden = set(panel.hidden)
    for name, values in truth.items():
        got = np.array([panel.values[name][lam] for lam in digitiser.LAMBDAS])
        error_px = np.abs(got - 100 * values) / panel.point_per_pixel
        visible = np.array([(name, lam) not in hidden for lam in digitiser.LAMBDAS])
        assert error_px[visible].max() <= 3.0, (name, error_px.round(2))
        assert np.median(error_px[visible]) <= 0.5, (name, error_px.round(2))
        assert error_px.max() <= 12.0, (name, error_px.round(2))
    # Center's markers exactly under Cosine-COREL's are found, as hidden
    assert {("center", 0.2), ("center", 0.25)} <= hidden


def test_a_curve_that_leaves_the_axes_reads_below(digitiser):
    truth = curves(2)
    truth["cosine_corel"][:3] = [0.80, 0.83, 0.86]  # under the axis' bottom (0.8641), then back inside
    truth["center"][3:5] = truth["gaussian_corel"][3:5]
    panel = digitiser.digitise(draw(truth), YTICKS)
    assert [panel.values["cosine_corel"][lam] for lam in (0.05, 0.1, 0.15)] == [None, None, None]
    assert panel.values["cosine_corel"][0.2] == pytest.approx(100 * truth["cosine_corel"][3], abs=0.02)
    assert panel.y_min == pytest.approx(86.41, abs=0.01)


def test_wrong_tick_labels_are_refused(digitiser):
    with pytest.raises(ValueError, match="7 tick marks found for 6 labels"):
        digitiser.digitise(draw(curves(0)), YTICKS[:-1])


def test_pdf_panels_in_reading_order(digitiser, tmp_path):
    """Six panels embedded on a PDF's second page in a shuffled drawing order come back top row first, left to
    right (the caption's MNIST / Fashion / AGNews rows by FFNN / CNN columns)."""
    import matplotlib.pyplot as plt
    from matplotlib.backends.backend_pdf import PdfPages

    pytest.importorskip("pypdf")
    panels = {k: curves(10 + k) for k in range(6)}
    images = {k: draw(v) for k, v in panels.items()}
    pdf = tmp_path / "supplement.pdf"
    with PdfPages(pdf) as pages:
        pages.savefig(plt.figure(figsize=(8.5, 11)))
        fig = plt.figure(figsize=(8.5, 11), dpi=72)
        h, w = images[0].shape[:2]
        for k in (3, 0, 5, 1, 4, 2):  # drawn in another order than read
            row, col = divmod(k, 2)
            ax = fig.add_axes((0.08 + 0.45 * col, 0.68 - 0.3 * row, 0.42, 0.28))
            ax.imshow(images[k], interpolation="none", aspect="auto")
            ax.set_axis_off()
        pages.savefig(fig, dpi=72)
        plt.close("all")
    got = digitiser.page_images(pdf)
    assert len(got) == 6
    for k, image in enumerate(got):
        assert image.shape == images[k].shape
        assert np.abs(image - images[k]).max() < 2 / 255, k
