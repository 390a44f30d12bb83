"""Fixtures that write tiny datasets in their real on-disk formats."""

from __future__ import annotations

import gzip
import struct
from pathlib import Path

import numpy as np
import pytest

N_TRAIN, N_TEST, N_CLASSES = 60, 20, 10  # 6 train and 2 test images per class
# Where torchvision looks for each variant below a dataset root (its class name, then "raw").
RAW_SUBDIR = {"mnist": "MNIST/raw", "fashion_mnist": "FashionMNIST/raw"}


def idx_images(images: np.ndarray) -> bytes:
    """idx3-ubyte: magic 2051 (0x0803: unsigned bytes, 3 dims), then N, rows, cols as big-endian int32."""
    n, rows, cols = images.shape
    return struct.pack(">IIII", 2051, n, rows, cols) + images.astype(np.uint8).tobytes()


def idx_labels(labels: np.ndarray) -> bytes:
    """idx1-ubyte: magic 2049 (0x0801: unsigned bytes, 1 dim), then N as big-endian int32."""
    return struct.pack(">II", 2049, len(labels)) + labels.astype(np.uint8).tobytes()


def tiny_split(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """n random 28x28 images, labels 0..9 equally often in shuffled order.

    Pixel (0, 0) holds the image's row number and pixel (0, 1) its label, so a test can trace every image read
    back to where it came from; the last image is all 0 and 255 so the [0, 1] range is reached exactly.
    """
    rng = np.random.default_rng(seed)
    labels = rng.permutation(np.arange(n) % N_CLASSES)
    images = rng.integers(0, 256, size=(n, 28, 28))
    images[-1] = np.where(rng.random((28, 28)) < 0.5, 0, 255)
    images[:, 0, 0] = np.arange(n)
    images[:, 0, 1] = labels
    return images, labels


def write_idx_dataset(root: Path, variant: str, compress: bool = False, flat: bool = False) -> dict[str, np.ndarray]:
    """Write ``variant``'s four idx-ubyte files under ``root`` in torchvision's layout (``flat``: in ``root``
    itself, as the datasets are published and Debian's ``dataset-fashion-mnist`` installs them); return the
    arrays."""
    raw = root if flat else root / RAW_SUBDIR[variant]
    raw.mkdir(parents=True, exist_ok=True)
    train_x, train_y = tiny_split(N_TRAIN, seed=1)
    test_x, test_y = tiny_split(N_TEST, seed=2)
    files = {
        "train-images-idx3-ubyte": idx_images(train_x),
        "train-labels-idx1-ubyte": idx_labels(train_y),
        "t10k-images-idx3-ubyte": idx_images(test_x),
        "t10k-labels-idx1-ubyte": idx_labels(test_y),
    }
    for name, data in files.items():
        if compress:
            (raw / f"{name}.gz").write_bytes(gzip.compress(data))
        else:
            (raw / name).write_bytes(data)
    return {"train_images": train_x, "train_labels": train_y, "test_images": test_x, "test_labels": test_y}


@pytest.fixture
def write_mnist():
    """The writer itself, for tests that need another layout (e.g. only the .gz archives)."""
    return write_idx_dataset


@pytest.fixture
def tiny_mnist(tmp_path: Path) -> dict[str, dict[str, np.ndarray]]:
    """Tiny MNIST and Fashion-MNIST (60 train / 20 test images each) where the dataset configs look when
    ``paths.data_dir`` is ``tmp_path``: ``mnist/MNIST/raw`` and ``fashion_mnist/FashionMNIST/raw``.

    Returns the written arrays per variant."""
    return {variant: write_idx_dataset(tmp_path / variant, variant) for variant in RAW_SUBDIR}


@pytest.fixture
def data_dir(tmp_path: Path, tiny_mnist: dict) -> Path:
    """The ``paths.data_dir`` that holds ``tiny_mnist``."""
    return tmp_path
