"""MNIST / Fashion-MNIST reader (COREL protocol) and their dataset configs, on tiny idx-ubyte files.

The ``tiny_mnist`` fixture (conftest.py) writes 60 train / 20 test images per variant, 6 and 2 per class: never the
published files, so these tests read them with ``verify=False`` (test_published.py checks the check).
"""

from __future__ import annotations

from pathlib import Path
from urllib.error import URLError

import pytest
import torch
import torchvision
from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf

from clusterable.config import CONFIG_DIR
from clusterable.data.memory.mnist import DatasetNotFoundError, read_mnist

CONF = Path(CONFIG_DIR) / "dataset"
VARIANTS = ["mnist", "fashion_mnist"]
FILES = [
    "train-images-idx3-ubyte",
    "train-labels-idx1-ubyte",
    "t10k-images-idx3-ubyte",
    "t10k-labels-idx1-ubyte",
]
RAW = {"mnist": "MNIST/raw", "fashion_mnist": "FashionMNIST/raw"}
N_TRAIN, N_TEST, VAL = 60, 20, 10


def row_ids(split: dict[str, torch.Tensor]) -> torch.Tensor:
    """The row number each image was written at (the fixture stores it in pixel (0, 0))."""
    return (split["inputs"][:, 0, 0, 0] * 255).round().long()


@pytest.mark.parametrize("variant", VARIANTS)
def test_read_mnist_shapes_range_and_labels(data_dir: Path, variant: str) -> None:
    splits = read_mnist(str(data_dir / variant), variant=variant, val_size=VAL, download=False, verify=False)
    for name, n in {"train": N_TRAIN - VAL, "val": VAL, "test": N_TEST}.items():
        inputs, labels = splits[name]["inputs"], splits[name]["labels"]
        assert inputs.shape == (n, 1, 28, 28) and inputs.dtype == torch.float32
        assert labels.shape == (n,) and labels.dtype == torch.long
        assert inputs.min() >= 0 and inputs.max() <= 1
        # Stratified: with 6 train images per class, the hold-out of 10 takes exactly one of each class.
        assert torch.bincount(labels, minlength=10).tolist() == [n // 10] * 10, name
    test = splits["test"]["inputs"]
    assert test.min() == 0 and test.max() == 1  # pixels 0..255 map onto [0, 1] by /255


@pytest.mark.parametrize("variant", VARIANTS)
def test_read_mnist_pairs_images_with_labels_and_splits_disjointly(
    data_dir: Path, tiny_mnist: dict, variant: str
) -> None:
    written = tiny_mnist[variant]
    splits = read_mnist(str(data_dir / variant), variant=variant, val_size=VAL, download=False, verify=False)
    ids = {name: row_ids(split) for name, split in splits.items()}
    assert sorted(torch.cat([ids["train"], ids["val"]]).tolist()) == list(range(N_TRAIN))  # disjoint, complete
    assert ids["test"].tolist() == list(range(N_TEST))  # the test set is kept whole, in file order
    for name in ("train", "val", "test"):
        labels = written["test_labels" if name == "test" else "train_labels"]
        assert splits[name]["labels"].tolist() == labels[ids[name].numpy()].tolist(), name
    image = torch.from_numpy(written["train_images"][ids["val"][0].item()]).float() / 255
    assert torch.allclose(splits["val"]["inputs"][0, 0], image)


def test_read_mnist_split_is_deterministic_per_seed(data_dir: Path) -> None:
    root = str(data_dir / "mnist")
    a, b = (read_mnist(root, val_size=VAL, split_seed=3, download=False, verify=False) for _ in range(2))
    for name in ("train", "val", "test"):
        assert torch.equal(a[name]["inputs"], b[name]["inputs"]) and torch.equal(a[name]["labels"], b[name]["labels"])
    other = read_mnist(root, val_size=VAL, split_seed=4, download=False, verify=False)
    assert set(row_ids(other["val"]).tolist()) != set(row_ids(a["val"]).tolist())


def test_read_mnist_accepts_gz_archives(tmp_path: Path, write_mnist) -> None:
    # The files are published gzipped; torchvision alone ignores the .gz files unless download=True.
    write_mnist(tmp_path, "fashion_mnist", compress=True)
    splits = read_mnist(str(tmp_path), variant="fashion_mnist", val_size=VAL, download=False, verify=False)
    assert splits["train"]["inputs"].shape == (N_TRAIN - VAL, 1, 28, 28)
    assert row_ids(splits["test"]).tolist() == list(range(N_TEST))


@pytest.mark.parametrize("variant", VARIANTS)
def test_missing_files_raise_one_clear_error(tmp_path: Path, variant: str) -> None:
    with pytest.raises(DatasetNotFoundError) as info:
        read_mnist(str(tmp_path / "nowhere"), variant=variant, download=False)
    message = str(info.value)
    assert isinstance(info.value, FileNotFoundError)
    assert all(name in message for name in FILES)
    assert str((tmp_path / "nowhere" / RAW[variant]).resolve()) in message
    assert "dataset.root" in message and "dataset.source=fake" in message
    assert {"mnist": "MNIST not found", "fashion_mnist": "Fashion-MNIST not found"}[variant] in message


def test_partly_missing_files_are_named(data_dir: Path) -> None:
    (data_dir / "mnist" / RAW["mnist"] / "t10k-labels-idx1-ubyte").unlink()
    with pytest.raises(DatasetNotFoundError, match=r"\(missing: t10k-labels-idx1-ubyte\)"):
        read_mnist(str(data_dir / "mnist"), val_size=VAL, download=False)


def test_failed_download_is_reported_as_not_found(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def offline(self) -> None:
        raise URLError("Name or service not known")

    monkeypatch.setattr(torchvision.datasets.MNIST, "download", offline)
    with pytest.raises(DatasetNotFoundError, match="Downloading it failed: .*Name or service not known") as info:
        read_mnist(str(tmp_path), download=True)
    assert info.value.__suppress_context__  # the user sees this message, not the download's traceback


def test_read_mnist_rejects_bad_arguments(data_dir: Path) -> None:
    root = str(data_dir / "mnist")
    with pytest.raises(ValueError, match="variant must be one of"):
        read_mnist(root, variant="kmnist", download=False)
    with pytest.raises(ValueError, match="val_size must be a positive integer"):
        read_mnist(root, val_size=0, download=False)
    with pytest.raises(ValueError, match=r"val_size must be in \[1, 59\], got 60"):
        read_mnist(root, val_size=N_TRAIN, download=False, verify=False)


def compose(variant: str, data_dir: Path, **overrides) -> DictConfig:
    """The dataset node as the main config would give it, with ``paths.data_dir`` pointing at ``data_dir``."""
    cfg = OmegaConf.create({"paths": {"data_dir": str(data_dir)}, "dataset": OmegaConf.load(CONF / f"{variant}.yaml")})
    cfg.dataset.merge_with(overrides)
    return cfg.dataset


@pytest.mark.parametrize("variant", VARIANTS)
def test_config_reads_real_files(data_dir: Path, variant: str) -> None:
    cfg = compose(variant, data_dir, batch_size=16, reader={"val_size": VAL, "download": False, "verify": False})
    assert cfg.reader.root == str(data_dir / variant)
    dm = instantiate(cfg)
    dm.setup("fit")
    assert dm.name == variant and dm.input_shape == (1, 28, 28) and dm.num_classes == 10
    assert [len(dm.split(s)["labels"]) for s in ("train", "val", "test")] == [N_TRAIN - VAL, VAL, N_TEST]
    batches = list(dm.train_dataloader())
    assert [len(b["index"]) for b in batches] == [16, 16, 16, 2]
    assert sorted(torch.cat([b["index"] for b in batches]).tolist()) == list(range(N_TRAIN - VAL))
    first = batches[0]
    assert first["inputs"].shape == (16, 1, 28, 28)
    assert torch.equal(first["labels"], dm.split("train")["labels"][first["index"]])


@pytest.mark.parametrize("variant", VARIANTS)
def test_config_runs_offline_with_fake_source(tmp_path: Path, variant: str) -> None:
    cfg = compose(variant, tmp_path / "empty", source="fake")
    assert cfg.reader.val_size == 5000 and cfg.batch_size == 128  # the paper's protocol as configured
    dm = instantiate(cfg)
    dm.setup("fit")
    train = dm.split("train")
    assert train["inputs"].shape[1:] == (1, 28, 28) and set(train["labels"].tolist()) == set(range(10))
    batch = next(iter(dm.train_dataloader()))
    assert set(batch) == {"inputs", "labels", "index"}
    assert batch["inputs"].shape == (128, 1, 28, 28) and batch["index"].shape == (128,)
    assert not (tmp_path / "empty").exists()  # the fake source never touches the data folder
