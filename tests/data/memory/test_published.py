"""MNIST and Fashion-MNIST files checked against the published ones (``dataset.reader.verify``, on by default):
each file's count of images or labels, then the SHA-256 of its content; one line naming the file, what it holds
against what the published file holds, and what to do (``WrongFileError``).

The published counts and digests are of the real files (60,000 / 10,000 images, 30 MB), so most tests put the
conftest's tiny files' counts and digests in their place (``published``), as test_medmnist.py does with its sizes;
the real Fashion-MNIST files are checked where Debian's package is installed.
"""

from __future__ import annotations

import gzip
import hashlib
from pathlib import Path

import numpy as np
import pytest
from hydra.utils import instantiate
from omegaconf import OmegaConf

from clusterable.config import CONFIG_DIR
from clusterable.data.errors import CorruptFileError, WrongFileError
from clusterable.data.memory import mnist
from clusterable.data.memory.tabular import read_mnist_subset

from .conftest import N_TEST, N_TRAIN, RAW_SUBDIR, idx_labels

CONF = Path(CONFIG_DIR) / "dataset"
SYSTEM = Path("/usr/share/datasets/fashion-mnist")  # Debian's and Ubuntu's dataset-fashion-mnist
TRAIN_IMAGES, TRAIN_LABELS = "train-images-idx3-ubyte", "train-labels-idx1-ubyte"
TEST_IMAGES, TEST_LABELS = "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"
OPT_OUT = "or set dataset.reader.verify=false to read files of your own (a subset, a re-encoding)"


def content_sha256(path: Path) -> str:
    data = path.read_bytes()
    return hashlib.sha256(gzip.decompress(data) if path.suffix == ".gz" else data).hexdigest()


@pytest.fixture
def published(tmp_path: Path, write_mnist, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Tiny Fashion-MNIST in torchvision's layout below ``tmp_path / "fashion"``, made the published files: their
    counts (60 train, 20 test) and content digests in place of the real ones. Tiny MNIST files of other content
    (each image's first pixel + 1) are MNIST's published ones, so that one dataset's file can be found in the
    other's place. Returns the Fashion-MNIST raw folder."""
    write_mnist(tmp_path / "fashion", "fashion_mnist")
    raw = tmp_path / "fashion" / RAW_SUBDIR["fashion_mnist"]
    write_mnist(tmp_path / "digits", "mnist")
    other = tmp_path / "digits" / RAW_SUBDIR["mnist"]
    for name in (TRAIN_IMAGES, TEST_IMAGES):
        data = bytearray((other / name).read_bytes())
        data[16] = (data[16] + 1) % 256  # pixel (0, 0) of the first image
        (other / name).write_bytes(bytes(data))
    (other / TEST_LABELS).write_bytes(idx_labels((np.arange(N_TEST) + 3) % 10))
    monkeypatch.setattr(mnist, "PUBLISHED_COUNTS", {"train": N_TRAIN, "t10k": N_TEST})
    for variant, folder in (("fashion_mnist", raw), ("mnist", other)):
        digests = {name: content_sha256(folder / name) for name in mnist.expected_files(variant)}
        monkeypatch.setitem(mnist.PUBLISHED_SHA256, variant, digests)
    assert len({content_sha256(raw / n) for n in mnist.expected_files()} | {content_sha256(other / TEST_LABELS)}) == 5
    return raw


def wrong(root: Path, **kwargs) -> str:
    """The message of the WrongFileError that reading ``root`` (Fashion-MNIST, verify on) raises; one line."""
    with pytest.raises(WrongFileError) as info:
        mnist.read_mnist(root, "fashion_mnist", val_size=10, download=False, **kwargs)
    message = str(info.value)
    assert "\n" not in message and isinstance(info.value, CorruptFileError)
    return message


def test_the_published_files_read_however_they_are_packed(published: Path, tmp_path: Path) -> None:
    splits = mnist.read_mnist(tmp_path / "fashion", "fashion_mnist", val_size=10, download=False)
    assert [len(splits[s]["labels"]) for s in ("train", "val", "test")] == [N_TRAIN - 10, 10, N_TEST]
    # Re-compressed archives (other bytes, as Debian's package re-gzips the files): the content is what counts.
    for name in mnist.expected_files("fashion_mnist"):
        data = (published / name).read_bytes()
        (published / f"{name}.gz").write_bytes(gzip.compress(data, compresslevel=1, mtime=0))
        (published / name).unlink()
    again = mnist.read_mnist(tmp_path / "fashion", "fashion_mnist", val_size=10, download=False)
    assert all(r["path"].endswith(".gz") for r in again.notes["files"].values())
    assert [len(again[s]["labels"]) for s in ("train", "val", "test")] == [N_TRAIN - 10, 10, N_TEST]


def test_other_images_of_the_same_count_are_refused_with_both_digests(published: Path, tmp_path: Path) -> None:
    path = published / TEST_IMAGES
    expected = content_sha256(path)
    data = bytearray(path.read_bytes())
    data[-1] ^= 0xFF  # one pixel of the last image
    path.write_bytes(bytes(data))
    assert wrong(tmp_path / "fashion") == (
        f"Fashion-MNIST file {path.resolve()} is not the published {TEST_IMAGES}: the SHA-256 of its content is "
        f"{content_sha256(path)}, the published file's {expected}; replace it (delete it to download again), "
        f"{OPT_OUT}"
    )


def test_training_and_test_files_swapped_are_named_as_such(published: Path, tmp_path: Path) -> None:
    train, test = (published / TRAIN_IMAGES).read_bytes(), (published / TEST_IMAGES).read_bytes()
    (published / TRAIN_IMAGES).write_bytes(test)
    (published / TEST_IMAGES).write_bytes(train)
    assert wrong(tmp_path / "fashion") == (
        f"Fashion-MNIST file {(published / TRAIN_IMAGES).resolve()} holds {N_TEST} images where the published "
        f"{TRAIN_IMAGES} holds {N_TRAIN}: is it {TEST_IMAGES} (training and test files swapped?); replace it (delete "
        f"it to download again), {OPT_OUT}"
    )


def test_the_other_datasets_file_is_named(published: Path, tmp_path: Path) -> None:
    # MNIST's test labels where Fashion-MNIST's should be: the same count, the digest of the other dataset's file.
    other = tmp_path / "digits" / RAW_SUBDIR["mnist"] / TEST_LABELS
    (published / TEST_LABELS).write_bytes(other.read_bytes())
    message = wrong(tmp_path / "fashion")
    assert message.startswith(
        f"Fashion-MNIST file {(published / TEST_LABELS).resolve()} is not the published {TEST_LABELS}: it is "
        f"MNIST's {TEST_LABELS}; replace it"
    )


def test_a_subset_with_a_header_of_its_own_is_refused(published: Path, tmp_path: Path) -> None:
    # A copy cut short but given a consistent header: the format checks pass, the count does not.
    (published / TRAIN_LABELS).write_bytes(idx_labels(np.zeros(30)))
    images = published / TRAIN_IMAGES
    head = bytearray(images.read_bytes()[: 16 + 30 * 28 * 28])
    head[4:8] = (30).to_bytes(4, "big")
    images.write_bytes(bytes(head))
    assert wrong(tmp_path / "fashion").endswith(
        f"holds 30 images where the published {TRAIN_IMAGES} holds {N_TRAIN} (a subset, or cut short?); replace it "
        f"(delete it to download again), {OPT_OUT}"
    )
    # The opt-out reads it (and its 30 images split as the config says).
    splits = mnist.read_mnist(tmp_path / "fashion", "fashion_mnist", val_size=10, download=False, verify=False)
    assert len(splits["train"]["labels"]) == 20


def test_the_fix_names_the_place_the_file_lies_in(published: Path, tmp_path: Path) -> None:
    system = tmp_path / "system"
    system.mkdir()
    for name in mnist.expected_files("fashion_mnist"):
        (system / f"{name}.gz").write_bytes(gzip.compress((published / name).read_bytes()))
    (system / f"{TEST_LABELS}.gz").write_bytes(gzip.compress(idx_labels(np.zeros(N_TEST))))
    message = wrong(tmp_path / "nothing", system_root=system)
    assert message.startswith(f"Fashion-MNIST file {(system / TEST_LABELS).resolve()}.gz is not the published")
    assert message.endswith(f"; reinstall its package, {OPT_OUT}")


def test_the_csrl_subsets_check_their_files_too(published: Path, tmp_path: Path) -> None:
    (published / TRAIN_IMAGES).write_bytes((published / TEST_IMAGES).read_bytes())
    with pytest.raises(WrongFileError, match=f"is it {TEST_IMAGES}"):
        read_mnist_subset(tmp_path / "fashion", variant="fashion_mnist", classes=(0, 1), per_class=2, download=False)


def test_files_of_your_own_fail_by_default_and_read_with_the_opt_out(data_dir: Path) -> None:
    # The real counts against the conftest's tiny files: the message a user's own copy gets, and its way out.
    message = wrong(data_dir / "fashion_mnist")
    path = (data_dir / "fashion_mnist" / RAW_SUBDIR["fashion_mnist"] / TRAIN_IMAGES).resolve()
    assert message == (
        f"Fashion-MNIST file {path} holds {N_TRAIN} images where the published {TRAIN_IMAGES} holds 60,000 (a "
        f"subset, or cut short?); replace it (delete it to download again), {OPT_OUT}"
    )
    cfg = OmegaConf.create(
        {"paths": {"data_dir": str(data_dir)}, "dataset": OmegaConf.load(CONF / "fashion_mnist.yaml")}
    ).dataset
    cfg.reader.download = False
    assert cfg.reader.verify is True
    with pytest.raises(WrongFileError, match="dataset.reader.verify=false"):
        instantiate(cfg).setup("fit")
    cfg.reader.merge_with({"verify": False, "val_size": 10})
    dm = instantiate(cfg)
    dm.setup("fit")
    assert [len(dm.split(s)["labels"]) for s in ("train", "val", "test")] == [N_TRAIN - 10, 10, N_TEST]


@pytest.mark.skipif(not SYSTEM.is_dir(), reason="needs Debian's dataset-fashion-mnist")
def test_debians_fashion_mnist_is_the_published_one(tmp_path: Path) -> None:
    # The real files against the real table: the split sizes of the COREL protocol, nothing written anywhere.
    splits = mnist.read_mnist(tmp_path / "data", "fashion_mnist", download=False, system_root=SYSTEM)
    assert [len(splits[s]["labels"]) for s in ("train", "val", "test")] == [55_000, 5_000, 10_000]
    assert not (tmp_path / "data").exists()
    for name, record in splits.notes["files"].items():
        assert content_sha256(Path(record["path"])) == mnist.PUBLISHED_SHA256["fashion_mnist"][name]
