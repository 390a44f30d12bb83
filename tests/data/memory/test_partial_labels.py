"""``labelled_percent``: which training labels an in-memory dataset hides (how many, which rows, seeded), that
the hidden ones never reach a loss head, and that evaluators can still have them (``all_labels``,
``EvalContext.train_all_labels``)."""

from __future__ import annotations

import functools
import math
import re
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from omegaconf import OmegaConf

from clusterable.config import CONFIG_DIR
from clusterable.contracts import EvalContext, PartiallyLabelled
from clusterable.data.memory import InMemoryDataModule
from clusterable.data.memory.datamodule import hide_labels, labelled_count
from clusterable.evaluation.runner import evaluate
from clusterable.heads.cce import CCELoss
from clusterable.models.identity import Identity
from clusterable.module import RepresentationModule

CONF = Path(CONFIG_DIR) / "dataset"


def splits_of(n_train: int = 200, k: int = 4, n_eval: int = 40, dim: int = 2) -> dict:
    """Splits whose rows carry their own position in ``inputs[:, 0]`` (so a test can tell rows apart after
    ``shuffle_rows``) and labels ``i % k`` (val/test ``(i + 1) % k``, so they differ from training's)."""

    def split(n: int, shift: int) -> dict[str, torch.Tensor]:
        inputs = torch.zeros(n, dim)
        inputs[:, 0] = torch.arange(n, dtype=torch.float32)
        return {"inputs": inputs, "labels": (torch.arange(n) + shift) % k}

    return {"train": split(n_train, 0), "val": split(n_eval, 1), "test": split(n_eval, 1)}


def module(splits: dict, num_classes: int = 4, **kwargs) -> InMemoryDataModule:
    dim = splits["train"]["inputs"].shape[1]
    return InMemoryDataModule("toy", lambda: splits, input_shape=[dim], num_classes=num_classes, **kwargs)


def kept_rows(dm: InMemoryDataModule) -> set[int]:
    """The training rows (by their own position, ``inputs[:, 0]``) that kept a label."""
    train = dm.load()["train"]
    return set(train["inputs"][train["labels"] >= 0, 0].long().tolist())


# ---- how many -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("n", "percent", "count"),
    [
        (55_000, 0.01, 6),  # 5.5, rounded half up: the 6 labels Safir 2022 (section 6.2) gives MNIST at 0.01%
        (55_000, 0.1, 55),
        (55_000, 10, 5_500),
        (55_000, 100, 55_000),
        (10, 25, 3),  # 2.5 -> 3
        (10, 15, 2),  # 1.5 -> 2
        (10, 14, 1),  # 1.4 -> 1
        (200, 0.25, 1),  # 0.5 -> 1
        (200, 0.24, 0),
        (3, 50, 2),
    ],
)
def test_the_count_is_rounded_half_up(n: int, percent: float, count: int) -> None:
    assert labelled_count(n, percent) == count


def test_an_mnist_sized_split_keeps_six_labels_of_six_classes_at_a_hundredth_percent() -> None:
    labels = torch.arange(55_000) % 10
    hidden = hide_labels(labels, 0.01, seed=0)
    kept = hidden >= 0
    assert int(kept.sum()) == 6
    assert torch.equal(hidden[kept], labels[kept]) and len(set(hidden[kept].tolist())) == 6
    assert bool((hidden[~kept] == -1).all())


@pytest.mark.parametrize("percent", [0.5, 10, 37.5, 99])
def test_the_datamodule_keeps_that_many_training_labels(percent: float) -> None:
    dm = module(splits_of(n_train=200), labelled_percent=percent)
    labels = dm.load()["train"]["labels"]
    assert int((labels >= 0).sum()) == labelled_count(200, percent) == math.floor(2 * percent + 0.5)
    assert set(labels.unique().tolist()) <= {-1, 0, 1, 2, 3}


def test_rows_unlabelled_already_are_not_counted_and_stay_unlabelled() -> None:
    splits = splits_of(n_train=200)
    splits["train"]["labels"][100:] = -1  # 100 labelled rows: 10% of them is 10
    dm = module(splits, labelled_percent=10)
    labels = dm.load()["train"]["labels"]
    assert int((labels >= 0).sum()) == 10 and bool((labels[100:] == -1).all())
    torch.testing.assert_close(dm.all_labels("train"), splits["train"]["labels"])


# ---- which rows ------------------------------------------------------------------------------------------------


def test_the_same_seed_keeps_the_same_rows_and_another_seed_others() -> None:
    rows = {seed: kept_rows(module(splits_of(), labelled_percent=5, seed=seed)) for seed in (0, 1, 2)}
    again = kept_rows(module(splits_of(), labelled_percent=5, seed=0))
    assert rows[0] == again and len(again) == 10
    assert rows[1] != rows[0] and rows[2] != rows[0] and rows[1] != rows[2]


@pytest.mark.parametrize("seed", range(20))
def test_every_class_keeps_a_label_when_the_count_allows(seed: int) -> None:
    # Very unequal classes (one of 2 rows in 1,002): a uniform draw of 4 would miss the small ones most of the time.
    labels = torch.cat([torch.zeros(900), torch.ones(98), torch.full((2,), 2), torch.full((2,), 3)]).long()
    hidden = hide_labels(labels, 0.4, seed)  # 4.008 -> 4 labels, one per class
    assert sorted(hidden[hidden >= 0].tolist()) == [0, 1, 2, 3]
    hidden = hide_labels(labels, 1, seed)  # 10 labels: every class, then 6 more
    assert int((hidden >= 0).sum()) == 10 and set(hidden[hidden >= 0].tolist()) == {0, 1, 2, 3}


@pytest.mark.parametrize("seed", range(20))
def test_fewer_labels_than_classes_are_of_distinct_classes(seed: int) -> None:
    labels = torch.arange(1_000) % 10
    hidden = hide_labels(labels, 0.3, seed)  # 3 labels of 10 classes
    kept = hidden[hidden >= 0].tolist()
    assert len(kept) == 3 and len(set(kept)) == 3


def test_which_classes_and_rows_are_kept_varies_with_the_seed() -> None:
    labels = torch.arange(1_000) % 10
    classes = {tuple(sorted(hide_labels(labels, 0.3, seed).unique().tolist())) for seed in range(20)}
    assert len(classes) > 5  # a random class order, not always the first classes
    # Beyond one per class, the rest is uniform: over many seeds every class is about as often kept.
    counts = torch.zeros(10)
    for seed in range(50):
        hidden = hide_labels(labels, 5, seed)  # 50 labels: 10 firsts + 40 drawn from the rest
        counts += torch.bincount(hidden[hidden >= 0], minlength=10)
    assert counts.min() > 0.7 * counts.mean() and counts.max() < 1.3 * counts.mean()


# ---- what is hidden where ----------------------------------------------------------------------------------------


def test_validation_and_test_keep_every_label_and_the_reader_dicts_are_untouched() -> None:
    splits = splits_of()
    before = {s: d["labels"].clone() for s, d in splits.items()}
    dm = module(splits, labelled_percent=10)
    loaded = dm.load()
    for stage in ("val", "test"):
        assert torch.equal(loaded[stage]["labels"], before[stage])
        assert torch.equal(dm.all_labels(stage), before[stage])
    assert all(torch.equal(splits[s]["labels"], before[s]) for s in splits)  # masked in a copy
    assert bool((loaded["train"]["labels"] == -1).any())


def test_at_a_hundred_percent_nothing_changes() -> None:
    splits = splits_of()
    dm = module(splits)
    assert dm.labelled_percent == 100.0
    train = dm.load()["train"]
    assert train["labels"] is splits["train"]["labels"]  # no copy
    assert dm.all_labels("train") is train["labels"]


@pytest.mark.parametrize("shuffle_rows", [False, True])
def test_all_labels_are_the_labels_as_read_in_the_splits_row_order(shuffle_rows: bool) -> None:
    splits = splits_of()
    dm = module(splits, labelled_percent=10, shuffle_rows=shuffle_rows, seed=3)
    train = dm.load()["train"]
    rows = train["inputs"][:, 0].long()  # each row's position as read
    if shuffle_rows:
        assert not torch.equal(rows, torch.arange(200))
    everything = dm.all_labels("train")
    assert torch.equal(everything, splits["train"]["labels"][rows])  # permuted with the rows
    kept = train["labels"] >= 0
    assert torch.equal(train["labels"][kept], everything[kept]) and int(kept.sum()) == 20
    # The subset is drawn before the shuffle: the same rows keep their labels either way.
    assert kept_rows(dm) == kept_rows(module(splits_of(), labelled_percent=10, seed=3))
    assert isinstance(dm, PartiallyLabelled)


def test_all_labels_of_an_unknown_split_is_one_line() -> None:
    dm = module(splits_of(), labelled_percent=10)
    with pytest.raises(ValueError, match=r"^all_labels: no split named 'tset'; the dataset has: train, val, test$"):
        dm.all_labels("tset")


def test_the_fake_source_is_masked_too() -> None:
    dm = InMemoryDataModule("toy", None, [3], 4, source="fake", fake_size=100, labelled_percent=10, seed=1)
    splits = dm.load()
    labels = splits["train"]["labels"]
    assert int((labels >= 0).sum()) == 10 and set(labels[labels >= 0].tolist()) == {0, 1, 2, 3}
    assert bool((dm.all_labels("train") >= 0).all()) and bool((splits["val"]["labels"] >= 0).all())


def test_setup_moves_the_hidden_labels_with_the_splits() -> None:
    dm = module(splits_of(), labelled_percent=10)
    dm.load()
    dm.trainer = SimpleNamespace(strategy=SimpleNamespace(root_device=torch.device("meta")))
    dm.setup("fit")
    assert dm.splits["train"]["labels"].device.type == "meta"
    assert dm.all_labels("train").device.type == "meta"


def test_a_training_batch_never_carries_the_hidden_labels() -> None:
    dm = module(splits_of(), labelled_percent=10, batch_size=32, seed=5)
    dm.load()
    masked, everything = dm.splits["train"]["labels"], dm.all_labels("train")
    assert set(dm.splits["train"]) == {"inputs", "labels"}  # nothing else for a batch to carry
    seen = 0
    for batch in dm.train_dataloader():
        assert set(batch) == {"index", "inputs", "labels"}
        assert torch.equal(batch["labels"], masked[batch["index"]])
        seen += len(batch["index"])
    assert seen == 200 and not torch.equal(masked, everything)


# ---- bad values ------------------------------------------------------------------------------------------------


def test_a_percentage_that_keeps_no_label_is_one_line_with_the_numbers() -> None:
    dm = module(splits_of(n_train=200), labelled_percent=0.01)
    message = "labelled_percent=0.01 keeps 0 of the 200 training labels (0.02 rounds to 0); use at least 0.25"
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        dm.load()
    module(splits_of(n_train=200), labelled_percent=0.25).load()  # the smallest that keeps one does
    message = "keeps 0 of the 55,000 training labels (0.0055 rounds to 0); use at least 0.00091"
    with pytest.raises(ValueError, match=f"{re.escape(message)}$"):
        hide_labels(torch.arange(55_000) % 10, 0.00001, seed=0)
    hidden = hide_labels(torch.arange(55_000) % 10, 0.00091, seed=0)
    assert int((hidden >= 0).sum()) == 1


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (0, "labelled_percent must be in (0, 100], got 0"),
        (100.5, "labelled_percent must be in (0, 100], got 100.5"),
        (-1, "labelled_percent must be in (0, 100], got -1"),
        (float("nan"), "labelled_percent must be in (0, 100], got nan"),
        (True, "labelled_percent must be a number in (0, 100], got True"),
        ("10", "labelled_percent must be a number in (0, 100], got '10'"),
    ],
)
def test_a_percentage_out_of_range_is_refused_by_the_constructor(value: object, message: str) -> None:
    with pytest.raises(ValueError) as info:
        module(splits_of(), labelled_percent=value)
    assert str(info.value) == message


def test_every_in_memory_dataset_config_sets_labelled_percent_to_a_hundred() -> None:
    # So that `dataset.labelled_percent=10` overrides it from the command line without a `+`.
    configs = [p for p in sorted(CONF.glob("*.yaml")) if "clusterable.data.memory.InMemoryDataModule" in p.read_text()]
    assert len(configs) > 10
    for path in configs:
        cfg = OmegaConf.load(path)
        assert cfg.get("labelled_percent") == 100, path.name


# ---- evaluation --------------------------------------------------------------------------------------------------


def test_the_runner_gives_evaluators_every_training_label() -> None:
    torch.manual_seed(0)
    splits = splits_of(n_train=60, k=3, n_eval=12, dim=4)
    dm = InMemoryDataModule("toy", lambda: splits, [4], 3, labelled_percent=10, shuffle_rows=True, seed=2)
    dm.load()
    head = CCELoss(num_classes=3, embedding_dim=4)
    model = RepresentationModule(Identity(input_shape=(4,)), head, functools.partial(torch.optim.Adam))
    seen: list[EvalContext] = []

    def spy(embeddings: torch.Tensor, labels: torch.Tensor, context: EvalContext) -> dict[str, float]:
        seen.append(context)
        return {}

    evaluate(model, dm, {"spy": spy}, stages=["val", "test"])
    assert [c.stage for c in seen] == ["val", "test"]
    for context in seen:
        assert torch.equal(context.train_labels, dm.splits["train"]["labels"])  # what training saw
        assert int((context.train_labels >= 0).sum()) == 6
        assert torch.equal(context.train_all_labels, dm.all_labels("train"))
        assert bool((context.train_all_labels >= 0).all())
        _, labels = context.training_split()
        _, every = context.training_split(all_labels=True)
        assert labels is context.train_labels and every is context.train_all_labels


def test_a_dataset_that_hides_nothing_gives_its_training_labels_twice() -> None:
    # A datamodule without all_labels (not PartiallyLabelled): the runner falls back to the split's labels.
    splits = splits_of(n_train=30, k=3, n_eval=9, dim=4)
    dm = SimpleNamespace(
        splits=splits,
        split=splits.__getitem__,
        eval_batches=InMemoryDataModule("toy", lambda: splits, [4], 3).eval_batches,
    )
    assert not isinstance(dm, PartiallyLabelled)
    head = CCELoss(num_classes=3, embedding_dim=4)
    model = RepresentationModule(Identity(input_shape=(4,)), head, functools.partial(torch.optim.Adam))
    seen: list[EvalContext] = []
    evaluate(model, dm, {"spy": lambda e, y, context: seen.append(context) or {}}, stages=["test"])
    (context,) = seen
    assert torch.equal(context.train_all_labels, splits["train"]["labels"])
    # Built without it (the module's validation contexts, older callers): training_split falls back too.
    bare = EvalContext("val", {}, head, torch.zeros(1, 4), torch.zeros(2, 4), torch.tensor([0, -1]))
    assert bare.train_all_labels is None and torch.equal(bare.training_split(all_labels=True)[1], bare.train_labels)
