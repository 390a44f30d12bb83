"""scikit-learn digits reader and the digits dataset config."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import torch
from hydra.utils import instantiate
from omegaconf import OmegaConf
from sklearn.datasets import load_digits

from clusterable.config import CONFIG_DIR
from clusterable.data.memory.digits import read_digits, read_digits_zeroshot

CONF = Path(CONFIG_DIR) / "dataset"
N = 1797


@pytest.fixture(scope="module")
def original() -> tuple[torch.Tensor, torch.Tensor]:
    x, y = load_digits(return_X_y=True)
    return torch.tensor(x, dtype=torch.long), torch.tensor(y)


def source_rows(inputs: torch.Tensor, original: tuple[torch.Tensor, torch.Tensor]) -> list[int]:
    """Each split row's position in load_digits (its 64 pixels identify it: the 1,797 images are distinct)."""
    where = {tuple(row.tolist()): i for i, row in enumerate(original[0])}
    return [where[tuple(row.tolist())] for row in (inputs * 16).round().long()]


def test_splits_are_disjoint_and_cover_every_sample(original) -> None:
    splits = read_digits()
    rows = {name: source_rows(split["inputs"], original) for name, split in splits.items()}
    assert sorted(rows["train"] + rows["val"] + rows["test"]) == list(range(N))
    for name, split in splits.items():
        assert split["inputs"].shape == (len(rows[name]), 64) and split["inputs"].dtype == torch.float32
        assert 0 <= split["inputs"].min() and split["inputs"].max() <= 1  # pixels 0..16 scaled by 1/16
        assert split["labels"].tolist() == original[1][rows[name]].tolist(), name
    assert [len(rows[s]) for s in ("val", "test")] == [269, 270]  # 15 % each of 1,797, rounded


def test_splits_are_stratified(original) -> None:
    overall = torch.bincount(original[1]).float() / N
    for name, split in read_digits(split_seed=5).items():
        counts = torch.bincount(split["labels"], minlength=10).float()
        # Within one sample of each class's overall share (an unstratified split of 270 misses by ~5).
        assert (counts - overall * len(split["labels"])).abs().max() <= 1.5, name


def test_splits_are_reproducible_per_seed() -> None:
    a, b, c = read_digits(split_seed=1), read_digits(split_seed=1), read_digits(split_seed=2)
    for name in ("train", "val", "test"):
        assert torch.equal(a[name]["inputs"], b[name]["inputs"]) and torch.equal(a[name]["labels"], b[name]["labels"])
    assert not torch.equal(a["test"]["inputs"], c["test"]["inputs"])


@pytest.mark.parametrize(
    "kwargs", [{"val_fraction": 0.0}, {"test_fraction": 1.2}, {"val_fraction": 0.5, "test_fraction": 0.5}]
)
def test_bad_fractions_are_rejected(kwargs: dict) -> None:
    with pytest.raises(ValueError, match="val_fraction and test_fraction"):
        read_digits(**kwargs)


@pytest.mark.parametrize("source", ["real", "fake"])
def test_config_builds_a_datamodule(tmp_path: Path, source: str) -> None:
    cfg = OmegaConf.create({"paths": {"data_dir": str(tmp_path)}, "dataset": OmegaConf.load(CONF / "digits.yaml")})
    cfg.dataset.source = source
    dm = instantiate(cfg.dataset)
    dm.setup("fit")
    assert dm.name == "digits" and dm.input_shape == (64,) and dm.num_classes == 10
    train = dm.split("train")
    assert train["inputs"].shape[1:] == (64,) and set(train["labels"].tolist()) == set(range(10))
    if source == "real":
        assert sum(len(dm.split(s)["labels"]) for s in ("train", "val", "test")) == N
    batches = list(dm.train_dataloader())
    assert all(set(b) == {"inputs", "labels", "index"} for b in batches)
    assert [len(b["index"]) for b in batches[:-1]] == [128] * (len(batches) - 1)
    assert sorted(torch.cat([b["index"] for b in batches]).tolist()) == list(range(len(train["labels"])))
    assert torch.equal(batches[0]["inputs"], train["inputs"][batches[0]["index"]])


# ---- digits_zeroshot: the class-disjoint split of the metric-learning benchmarks ------------------------------


def test_zeroshot_split_trains_on_some_digits_and_tests_on_the_others(original):
    splits = read_digits_zeroshot()
    assert sorted(set(splits["train"]["labels"].tolist())) == [0, 1, 2, 3, 4]
    assert sorted(set(splits["test"]["labels"].tolist())) == [5, 6, 7, 8, 9]
    assert splits["val"] is splits["test"]  # val_classes null: Boudiaf et al.'s selection on the test set
    digits = original[1]
    assert len(splits["train"]["labels"]) == int((digits < 5).sum())
    assert len(splits["test"]["labels"]) == int((digits >= 5).sum())
    # Every image once, with its own digit (training labels are positions in train_classes).
    rows = source_rows(splits["train"]["inputs"], original) + source_rows(splits["test"]["inputs"], original)
    assert sorted(rows) == list(range(N))


def test_zeroshot_held_out_validation_classes_are_relabelled_and_disjoint(original):
    splits = read_digits_zeroshot(train_classes=[7, 2, 0], val_classes=[3, 4], test_classes=[5, 6])
    train_rows = source_rows(splits["train"]["inputs"], original)
    # Training labels are positions in train_classes: digit 7 -> 0, 2 -> 1, 0 -> 2.
    assert [int(original[1][r]) for r in train_rows] == [[7, 2, 0][i] for i in splits["train"]["labels"].tolist()]
    assert sorted(set(splits["val"]["labels"].tolist())) == [3, 4]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"train_classes": [0, 10]}, "train_classes must be distinct digits in 0..9, got [0, 10]"),
        ({"test_classes": [5, 5]}, "test_classes must be distinct digits in 0..9, got [5, 5]"),
        ({"train_classes": [0, 5]}, "train_classes, val_classes and test_classes must not share a digit"),
        ({"train_classes": []}, "train_classes and test_classes must each name at least one digit"),
    ],
)
def test_zeroshot_refuses_bad_class_lists_in_one_line(kwargs, message):
    with pytest.raises(ValueError, match=f"^{re.escape(message)}"):
        read_digits_zeroshot(**kwargs)


def test_zeroshot_config_loads_with_test_labels_beyond_num_classes():
    dm = instantiate(OmegaConf.load(CONF / "digits_zeroshot.yaml"))
    splits = dm.load()  # test labels 5-9 >= num_classes 5: allowed because the dataset is class-disjoint
    assert dm.num_classes == 5 and int(splits["test"]["labels"].max()) == 9
