"""Corrupt MNIST files and archives fail at once, with one line naming the file and what is wrong.

The files are the conftest's tiny idx-ubyte files in the real format (60 train / 20 test images), then truncated,
garbled or swapped. The format is checked before the files are compared with the published ones (test_published.py),
so these read them with ``verify=False``, as a user's own copies.
"""

from __future__ import annotations

import gzip
import struct
from pathlib import Path

import numpy as np
import pytest

from clusterable.data.errors import CorruptFileError, DatasetError, DatasetNotFoundError
from clusterable.data.memory import mnist, tabular

from .conftest import N_TEST, N_TRAIN, RAW_SUBDIR, idx_images, idx_labels

TRAIN_IMAGES, TRAIN_LABELS = "train-images-idx3-ubyte", "train-labels-idx1-ubyte"
TEST_IMAGES, TEST_LABELS = "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"


@pytest.fixture
def raw(tmp_path: Path, write_mnist) -> Path:
    """A complete tiny MNIST below ``tmp_path``; returns its raw folder."""
    write_mnist(tmp_path, "mnist")
    return tmp_path / RAW_SUBDIR["mnist"]


def corrupt_error(root: Path, variant: str = "mnist", download: bool = False) -> str:
    """The message of the CorruptFileError that reading ``root`` raises; it must be one line."""
    with pytest.raises(CorruptFileError) as info:
        mnist.read_mnist(str(root), variant=variant, val_size=10, download=download, verify=False)
    message = str(info.value)
    assert "\n" not in message and message.strip() == message
    return message


def test_the_error_family() -> None:
    assert issubclass(CorruptFileError, DatasetError) and issubclass(DatasetNotFoundError, DatasetError)
    assert issubclass(DatasetNotFoundError, FileNotFoundError) and not issubclass(CorruptFileError, ValueError)
    assert mnist.DatasetNotFoundError is DatasetNotFoundError  # still importable from where it used to live
    assert mnist.CorruptFileError is CorruptFileError


def test_truncated_images_file(tmp_path: Path, raw: Path) -> None:
    path = raw / TRAIN_IMAGES
    path.write_bytes(path.read_bytes()[:1000])
    message = corrupt_error(tmp_path)
    promised = 16 + N_TRAIN * 28 * 28
    assert message == (
        f"MNIST file {path.resolve()} is corrupt: header promises {promised:,} bytes, the file has 1,000 "
        "(truncated?); replace it (delete it to download again)"
    )


def test_file_with_extra_bytes(tmp_path: Path, raw: Path) -> None:
    path = raw / TEST_LABELS
    path.write_bytes(path.read_bytes() + b"\0" * 7)
    message = corrupt_error(tmp_path)
    assert str(path.resolve()) in message and f"the file has {8 + N_TEST + 7:,}" in message


@pytest.mark.parametrize("size", [0, 3, 10])
def test_file_shorter_than_its_header(tmp_path: Path, raw: Path, size: int) -> None:
    path = raw / TRAIN_IMAGES
    path.write_bytes(path.read_bytes()[:size])
    message = corrupt_error(tmp_path)
    assert str(path.resolve()) in message and "truncated?" in message


def test_garbled_magic_number(tmp_path: Path, raw: Path) -> None:
    path = raw / TRAIN_LABELS
    data = bytearray(path.read_bytes())
    data[:4] = b"GARB"
    path.write_bytes(bytes(data))
    message = corrupt_error(tmp_path)
    assert str(path.resolve()) in message
    assert "magic number 0x47415242, expected 0x00000801" in message


def test_images_and_labels_swapped(tmp_path: Path, raw: Path) -> None:
    # The labels file where the images should be: the magic number tells them apart.
    (raw / TEST_IMAGES).write_bytes((raw / TEST_LABELS).read_bytes())
    message = corrupt_error(tmp_path)
    assert str((raw / TEST_IMAGES).resolve()) in message and "expected 0x00000803" in message


def test_images_of_another_size(tmp_path: Path, raw: Path) -> None:
    path = raw / TRAIN_IMAGES
    path.write_bytes(idx_images(np.zeros((N_TRAIN, 32, 32))))  # a consistent file, but not 28x28 images
    message = corrupt_error(tmp_path)
    assert str(path.resolve()) in message and "images of 32x32 pixels, expected 28x28" in message


def test_labels_count_must_match_the_images(tmp_path: Path, raw: Path) -> None:
    (raw / TRAIN_LABELS).write_bytes(idx_labels(np.zeros(N_TRAIN - 1)))
    message = corrupt_error(tmp_path)
    assert str((raw / TRAIN_IMAGES).resolve()) in message and str((raw / TRAIN_LABELS).resolve()) in message
    assert f"{N_TRAIN} images but {N_TRAIN - 1} labels" in message


def test_a_truncated_file_inside_an_archive_names_the_archive(tmp_path: Path, write_mnist) -> None:
    write_mnist(tmp_path, "fashion_mnist", compress=True)
    raw = tmp_path / RAW_SUBDIR["fashion_mnist"]
    good = gzip.decompress((raw / f"{TEST_IMAGES}.gz").read_bytes())
    (raw / f"{TEST_IMAGES}.gz").write_bytes(gzip.compress(good[:-5]))  # valid gzip of a truncated file
    message = corrupt_error(tmp_path, "fashion_mnist")
    assert message.startswith(f"Fashion-MNIST file {(raw / TEST_IMAGES).resolve()}.gz is corrupt: header promises")
    assert message.endswith("(truncated?); replace it (delete it to download again)")
    assert not (raw / TEST_IMAGES).exists()  # archives are unpacked in memory, never next to themselves


@pytest.mark.parametrize("damage", ["truncate", "garble"])
def test_corrupt_archive_is_named(tmp_path: Path, write_mnist, damage: str) -> None:
    write_mnist(tmp_path, "mnist", compress=True)
    raw = tmp_path / RAW_SUBDIR["mnist"]
    archive = raw / f"{TRAIN_LABELS}.gz"
    data = archive.read_bytes()
    archive.write_bytes(data[: len(data) // 2] if damage == "truncate" else b"not a gzip archive at all")
    before = sorted(p.name for p in raw.iterdir())
    message = corrupt_error(tmp_path)
    assert message.startswith(f"MNIST file {archive.resolve()} is corrupt: it cannot be unpacked (")
    assert message.endswith("; replace it (delete it to download again)")
    assert sorted(p.name for p in raw.iterdir()) == before  # nothing unpacked or half-unpacked on disk


def test_mnist_subset_reader_checks_the_same_way(tmp_path: Path, raw: Path) -> None:
    path = raw / TEST_IMAGES
    path.write_bytes(path.read_bytes()[:-1])
    with pytest.raises(CorruptFileError, match="header promises") as info:
        tabular.read_mnist_subset(tmp_path, classes=(0, 1), per_class=2, download=False)
    assert str(path.resolve()) in str(info.value) and "\n" not in str(info.value)


def test_mnist_subset_reader_reports_missing_files_the_same_way(tmp_path: Path) -> None:
    with pytest.raises(DatasetNotFoundError) as sub:
        tabular.read_mnist_subset(tmp_path, variant="fashion_mnist", download=False)
    with pytest.raises(DatasetNotFoundError) as full:
        mnist.read_mnist(str(tmp_path), variant="fashion_mnist", download=False)
    assert str(sub.value) == str(full.value)


def test_corrupt_download_is_caught_before_torchvision_reads(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # A download that "succeeds" with a truncated file: reported by the check, not by an AssertionError.
    def download(self) -> None:
        raw = Path(self.raw_folder)
        raw.mkdir(parents=True, exist_ok=True)
        images = np.zeros((N_TEST, 28, 28))
        for prefix in ("train", "t10k"):
            (raw / f"{prefix}-images-idx3-ubyte").write_bytes(idx_images(images)[:-100])
            (raw / f"{prefix}-labels-idx1-ubyte").write_bytes(idx_labels(np.zeros(N_TEST)))

    monkeypatch.setattr(mnist.datasets.MNIST, "download", download)
    message = corrupt_error(tmp_path, download=True)
    assert TRAIN_IMAGES in message and "truncated?" in message


def test_header_format_matches_the_conftest_writer() -> None:
    # The checks' constants are the idx format's, as the tests' writer (and the published files) use it.
    assert struct.unpack(">I", idx_images(np.zeros((1, 28, 28)))[:4])[0] == mnist.IMAGES_MAGIC == 0x00000803
    assert struct.unpack(">I", idx_labels(np.zeros(1))[:4])[0] == mnist.LABELS_MAGIC == 0x00000801
