"""The small real datasets of the CSRL paper: iris, penguins, an MNIST subset; and a digits subset.

Sabanayagam et al. 2024: §III-B (footnote 4: MNIST classes 0-4, 200 each; penguins), appendix §VIII-B (iris),
§IV-B (TVAE: MNIST digits {0, 1, 9}), §VI-B (TRBM: digits {0, 1}); the authors' code is
github.com/mahalakshmi-sabanayagam/cluster_specific_representation (``src/data.py``, ``src/train.py``).

Like the synthetic data, each reader puts all points in train = val = test (the paper trains and evaluates on
the same points) with ``labels`` = classes. With ``denoise=True`` the ``inputs`` are the points plus
``noise * N(0, 1)`` from a generator seeded with ``noise_seed`` and the ``targets`` are the clean points (the
authors draw this noise from NumPy's unseeded global generator; we seed it so runs repeat). The authors
shuffle the rows once per repetition with ``torch.randperm``; here rows stay in file order.

The image subsets can also hold out unseen test points (``test_per_class``: the TVAE figures embed new
points), scale the pixels (``scale``: the TVAE, TCL and TRBM models read [0, 1] inputs) and zero-pad the images
(``pad_to``: the convolutional TVAE reads Fashion-MNIST padded to 32 x 32).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from sklearn.datasets import load_digits, load_iris

from clusterable.arrays import first_per_class
from clusterable.data.errors import DatasetError
from clusterable.data.memory import mnist
from clusterable.data.memory.synthetic import full_splits
from clusterable.data.splits import Split, SplitsWithNotes

PENGUIN_FEATURES = ("bill_length_mm", "bill_depth_mm", "flipper_length_mm", "body_mass_g")
PENGUIN_LABELS = {"Adelie": 0, "Gentoo": 1, "Chinstrap": 2}  # authors' code


def _splits(x: np.ndarray, y: np.ndarray, denoise: bool, noise: float, noise_seed: int) -> dict[str, Split]:
    """All points in every split; with ``denoise``, seeded Gaussian noise on the inputs, clean targets."""
    if noise < 0:
        raise ValueError(f"noise must be >= 0, got {noise}")
    if noise_seed < 0:
        raise ValueError(f"noise_seed must be >= 0, got {noise_seed}")
    x = np.asarray(x, dtype=np.float64)
    if not denoise:
        return full_splits(x, y)
    noisy = x + noise * np.random.default_rng(noise_seed).standard_normal(x.shape)
    return full_splits(noisy, y, targets=x)


def read_iris(denoise: bool = False, noise: float = 0.1, noise_seed: int = 0) -> dict[str, Split]:
    """scikit-learn's iris, unnormalised: ``inputs`` (150, 4), ``labels`` (150,) in {0, 1, 2}."""
    x, y = load_iris(return_X_y=True)
    return _splits(x, y, denoise, noise, noise_seed)


def load_penguin_arrays() -> tuple[np.ndarray, np.ndarray]:
    """Palmer penguins as (x (N, 4), y (N,)): the four body measurements, each divided by its column max.

    We read the ``palmerpenguins`` package's ``load_penguins()`` and drop the rows missing any of the four
    features or the species: N = 342. The authors read Kaggle's ``penguins_size.csv`` and ``dropna()`` over
    every column, which also drops rows whose *sex* is missing, hence the paper's n = 334 (the same rule
    here would keep 333: 9 of our 342 rows lack the sex; Kaggle's file writes one of them as "."). Their
    ``culmen_*`` columns are our ``bill_*``. Labels: Adelie 0, Gentoo 1, Chinstrap 2.

    Raises:
        DatasetError: the ``palmerpenguins`` package (the ``penguins`` extra) is not installed (one line).
    """
    try:
        from palmerpenguins import load_penguins
    except ImportError:
        raise DatasetError(
            "dataset=penguins reads the palmerpenguins package, which is not installed: pip install "
            "'clusterable[penguins]' (in a checkout: pip install -e '.[penguins]')"
        ) from None

    frame = load_penguins().dropna(subset=[*PENGUIN_FEATURES, "species"])
    x = frame[list(PENGUIN_FEATURES)].to_numpy(dtype=np.float64)
    y = frame["species"].map(PENGUIN_LABELS).to_numpy(dtype=np.int64)
    return x / x.max(axis=0), y


def read_penguins(denoise: bool = False, noise: float = 0.1, noise_seed: int = 0) -> dict[str, Split]:
    """Palmer penguins (see ``load_penguin_arrays``): ``inputs`` (342, 4) in (0, 1], ``labels`` (342,)."""
    x, y = load_penguin_arrays()
    return _splits(x, y, denoise, noise, noise_seed)


def _relabel(y: np.ndarray, classes: Sequence[int]) -> np.ndarray:
    """Class ids -> their positions in ``classes`` (0..C-1), so labels always match ``num_classes``."""
    lookup = np.full(int(max(max(classes), y.max())) + 1, -1, dtype=np.int64)
    lookup[np.asarray(classes, dtype=np.int64)] = np.arange(len(classes))
    return lookup[y]


def _side(x: np.ndarray) -> int:
    """The side s of square images x (N, s, s) or (N, s*s); ValueError for any other shape."""
    side = x.shape[1] if x.ndim == 3 else math.isqrt(int(np.prod(x.shape[1:])))
    if x.ndim not in (2, 3) or side * side != int(np.prod(x.shape[1:])):
        raise ValueError(f"pad_to needs square images, got images of shape {tuple(x.shape[1:])}")
    return side


def _padded(x: np.ndarray, size: int) -> np.ndarray:
    """Square images x (N, s, s) or (N, s*s) zero-padded to (N, size, size), the extra rows and columns split
    evenly around the image (the odd one after it): torchvision's ``transforms.Pad(2)`` for 28 -> 32, as the
    authors' code pads Fashion-MNIST for its CNN VAE (``exp_tensor_vae.ipynb``)."""
    side = _side(x)
    before = (size - side) // 2
    after = size - side - before
    images = x.reshape(len(x), side, side)
    return np.pad(images, ((0, 0), (before, after), (before, after)))


def image_subset(
    train: tuple[np.ndarray, np.ndarray],
    test: tuple[np.ndarray, np.ndarray] | None,
    classes: Sequence[int],
    per_class: int,
    test_per_class: int | None,
    scale: float,
    denoise: bool,
    noise: float,
    noise_seed: int,
    pad_to: int | None = None,
) -> dict[str, Split]:
    """The first ``per_class`` images of each class of ``train`` (x (N, ...), y (N,)) in every split, or, with
    ``test_per_class``, as the training split and the first ``test_per_class`` of each class of ``test`` (None:
    the ones right after the training images in ``train``) as validation and test. Pixels divided by
    ``scale``; labels are positions in ``classes``; square images zero-padded to ``pad_to`` x ``pad_to``
    (``_padded``)."""
    if not scale > 0:
        raise ValueError(f"scale must be > 0, got {scale}")
    if pad_to is not None and not pad_to >= (side := _side(train[0])):
        raise ValueError(f"pad_to must be >= the images' side ({side}) or null, got {pad_to}")
    if test_per_class is not None and test_per_class < 1:
        raise ValueError(f"test_per_class must be >= 1 or null, got {test_per_class}")
    x, y = train
    present = {int(c) for c in np.unique(y)}
    if len(set(classes)) != len(classes) or not set(classes) <= present:
        raise ValueError(
            f"classes must be distinct labels of the data ({', '.join(map(str, sorted(present)))}), got {list(classes)}"
        )
    if test_per_class is not None and test is None:
        # One pass over `train` so that the test images are the ones after each class's training images.
        rows = first_per_class(y, classes, per_class + test_per_class).reshape(len(classes), -1)
        rows, test_rows = rows[:, :per_class].ravel(), rows[:, per_class:].ravel()
        test = (x[test_rows], y[test_rows])
    else:
        rows = first_per_class(y, classes, per_class)
        if test is not None and test_per_class is not None:  # a separate file: its first images per class
            keep = first_per_class(test[1], classes, test_per_class)
            test = (test[0][keep], test[1][keep])

    def flat(images: np.ndarray) -> np.ndarray:
        images = images if pad_to is None else _padded(images, pad_to)
        return images.reshape(len(images), -1) / scale

    x_train = flat(x[rows])
    splits = _splits(x_train, _relabel(y[rows], classes), denoise, noise, noise_seed)
    if test_per_class is None:
        return splits
    x_test = flat(test[0])
    # Another noise draw for the unseen points (seed + 1), so that they are not the training points' noise.
    held = _splits(x_test, _relabel(test[1], classes), denoise, noise, noise_seed + 1)["test"]
    return {"train": splits["train"], "val": held, "test": held}


def read_digits_subset(
    classes: Sequence[int] = (0, 1, 2, 3, 4),
    per_class: int = 170,
    denoise: bool = False,
    noise: float = 0.1,
    noise_seed: int = 0,
    test_per_class: int | None = None,
    scale: float = 1.0,
    pad_to: int | None = None,
) -> dict[str, Split]:
    """An offline stand-in for the MNIST subset: scikit-learn's 8x8 digits, first ``per_class`` of each class.

    Raw pixel values (0..16) divided by ``scale``, ``inputs`` (C * per_class, 64), ``labels`` = the class's
    position in ``classes``. The smallest digits class has 174 images (class 0: 178), so the MNIST subset's
    200 per class is not possible: the default 170 works for any choice of classes. ``test_per_class``: hold
    out the next ``test_per_class`` images of each class as validation and test (None: train = val = test).
    ``pad_to``: zero-pad the 8x8 images to ``pad_to`` x ``pad_to`` (None: as they are), ``inputs`` (N, pad_to^2).
    """
    x, y = load_digits(return_X_y=True)
    return image_subset((x, y), None, classes, per_class, test_per_class, scale, denoise, noise, noise_seed, pad_to)


def read_mnist_subset(
    root: str | Path,
    classes: Sequence[int] = (0, 1, 2, 3, 4),
    per_class: int = 200,
    download: bool = True,
    denoise: bool = False,
    noise: float = 0.1,
    noise_seed: int = 0,
    variant: str = "mnist",
    train_file: str = "test",
    test_per_class: int | None = None,
    scale: float = 1.0,
    pad_to: int | None = None,
    system_root: str | Path | None = None,
    verify: bool = True,
) -> dict[str, Split]:
    """The paper's MNIST subset: the TEST split's first ``per_class`` images of each class, in file order.

    Reads torchvision's layout, ``<root>/MNIST/raw/t10k-images-idx3-ubyte`` etc. (downloaded there when
    ``download`` and a network allow). ``inputs`` (C * per_class, 784) are raw 0..255 pixel values divided by
    ``scale`` (1: not normalised, the authors' AE code); ``labels`` = the class's position in ``classes``.

    ``variant``: ``"mnist"`` or ``"fashion_mnist"`` (``<root>/FashionMNIST/raw``). ``train_file``: ``"test"``
    or ``"train"``, the file the training points come from. ``test_per_class``: None puts the points in every
    split (the AE figures); an integer holds out the first ``test_per_class`` images of each class of the test
    file as validation and test (after the training ones when those come from the test file too). ``pad_to``:
    zero-pad the 28x28 images to ``pad_to`` x ``pad_to`` (the authors pad Fashion-MNIST to 32x32 for their CNN
    VAE), ``inputs`` (N, pad_to^2); None: as they are.

    ``system_root``: a system folder with the four files in the flat layout, searched after ``root``, never written
    (``mnist.load_files``: Debian's ``dataset-fashion-mnist``). The notes name the files read and their SHA-256.
    ``verify``: the files must be the published ones (their counts and checksums, ``mnist.check_published``): a
    subset is taken from the real dataset, never from a copy of another; false reads files of your own.

    Raises ``clusterable.data.errors.DatasetNotFoundError`` (a FileNotFoundError) naming the files and the
    folder when they are missing and cannot be downloaded, and ``clusterable.data.errors.CorruptFileError``
    naming a truncated or garbled file, or (``WrongFileError``) one that is not the published file.
    """
    if train_file not in ("train", "test"):
        raise ValueError(f"train_file must be 'train' or 'test', got {train_file!r}")
    # mnist.load_files: the same places, names, download, checks and messages as read_mnist.
    files, notes = mnist.load_files(root, variant, download, system_root, verify)

    def arrays(train: bool) -> tuple[np.ndarray, np.ndarray]:
        images, labels = mnist.PAIRS[0 if train else 1]
        return files[images].numpy(), files[labels].numpy()

    held = None if test_per_class is None or train_file == "test" else arrays(False)
    splits = image_subset(
        arrays(train_file == "train"),
        held,
        classes,
        per_class,
        test_per_class,
        scale,
        denoise,
        noise,
        noise_seed,
        pad_to,
    )
    return SplitsWithNotes(splits, notes)
