"""InMemoryDataModule: argument checks, the splits' consistency with the settings, and batching (also sharded
across data-parallel ranks)."""

from __future__ import annotations

import inspect
import math
import typing
from types import SimpleNamespace

import pytest
import torch

from clusterable.data.memory import InMemoryDataModule, TensorBatches, digits, mnist, synthetic, tabular
from clusterable.data.sampling import Sampler


def splits_of(n: int = 12, labels: torch.Tensor | None = None, dim: int = 3) -> dict:
    labels = torch.arange(n) % 3 if labels is None else labels
    split = {"inputs": torch.rand(len(labels), dim), "labels": labels}
    return {"train": split, "val": split, "test": split}


def module(reader_splits: dict, **kwargs) -> InMemoryDataModule:
    kwargs = {"input_shape": [3], "num_classes": 3, **kwargs}
    return InMemoryDataModule("toy", lambda: reader_splits, **kwargs)


# ----------------------------------------------------------------------------------------------- arguments


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"batch_size": 0}, "batch_size must be a positive integer (or -1 for full batch), got 0"),
        ({"batch_size": -2}, "batch_size must be a positive integer"),
        ({"batch_size": 1.5}, "batch_size must be a positive integer"),
        ({"batch_size": True}, "batch_size must be a positive integer"),
        ({"num_classes": 0}, "num_classes must be >= 1, got 0"),
        ({"input_shape": []}, "input_shape must be a non-empty list of positive integers"),
        ({"input_shape": [1, 0]}, "input_shape must be a non-empty list of positive integers"),
        ({"fake_size": 0}, "fake_size must be a positive integer"),
        ({"eval_batch_size": 0}, "eval_batch_size must be a positive integer"),
        ({"seed": 0.5}, "seed must be an integer"),
        ({"source": "real-ish"}, "source must be 'real' or 'fake'"),
    ],
)
def test_out_of_range_arguments_name_the_parameter(kwargs: dict, message: str) -> None:
    with pytest.raises(ValueError) as info:
        module(splits_of(), **kwargs)
    assert str(info.value).startswith(message)


def test_no_var_keyword_arguments() -> None:
    params = inspect.signature(InMemoryDataModule.__init__).parameters.values()
    assert all(p.kind is not inspect.Parameter.VAR_KEYWORD for p in params)
    with pytest.raises(TypeError):
        InMemoryDataModule("toy", None, [3], 3, batch_sise=4)  # type: ignore[call-arg]


@pytest.mark.parametrize(
    "function",
    [
        InMemoryDataModule.__init__,
        digits.read_digits,
        mnist.read_mnist,
        mnist.load_files,
        tabular.read_iris,
        tabular.read_penguins,
        tabular.read_digits_subset,
        tabular.read_mnist_subset,
        synthetic.read_synthetic,
    ],
)
def test_every_parameter_has_a_resolvable_type_hint(function) -> None:
    # The config checker validates YAML values against these hints: each must exist and resolve.
    hints = typing.get_type_hints(function)
    names = [n for n in inspect.signature(function).parameters if n != "self"]
    assert [n for n in names if n not in hints] == []


def test_type_hints_of_the_datamodule() -> None:
    hints = typing.get_type_hints(InMemoryDataModule.__init__)
    assert hints["num_classes"] is int and hints["batch_size"] is int and hints["seed"] is int
    assert hints["root"] == str | None and hints["source"] is str
    assert typing.get_origin(hints["input_shape"]) is typing.get_origin(typing.Sequence[int])
    assert typing.get_args(hints["input_shape"]) == (int,)
    subset = typing.get_type_hints(tabular.read_mnist_subset)
    assert subset["test_per_class"] == int | None and subset["scale"] is float and subset["download"] is bool
    assert subset["verify"] is bool and typing.get_type_hints(mnist.read_mnist)["verify"] is bool


# --------------------------------------------------------------------------------- the splits vs the settings


def test_labels_beyond_num_classes_are_rejected() -> None:
    dm = module(splits_of(labels=torch.arange(10)), num_classes=5, input_shape=[3])
    with pytest.raises(ValueError) as info:
        dm.load()
    assert str(info.value) == "num_classes is 5 but the labels of split 'train' go up to 9"


def test_labels_below_minus_one_are_rejected() -> None:
    splits = splits_of()
    splits["val"] = {"inputs": torch.rand(3, 3), "labels": torch.tensor([0, -2, 1])}
    with pytest.raises(ValueError, match=r"^reader returned labels down to -2 in split 'val'"):
        module(splits).load()


def test_unlabelled_samples_are_allowed() -> None:
    splits = splits_of()
    splits["test"] = {"inputs": torch.rand(4, 3), "labels": torch.tensor([-1, -1, 0, 2])}
    assert module(splits).load()["test"]["labels"].tolist() == [-1, -1, 0, 2]


def test_rows_must_agree_within_a_split() -> None:
    splits = splits_of()
    splits["train"] = {"inputs": torch.rand(12, 3), "labels": torch.arange(11) % 3}
    with pytest.raises(ValueError) as info:
        module(splits).load()
    assert (
        str(info.value)
        == "reader returned split 'train' with tensors of different lengths (rows): inputs 12, labels 11"
    )


def test_inputs_must_have_input_shape() -> None:
    splits = splits_of()
    splits["test"] = {"inputs": torch.rand(12, 1, 28, 28), "labels": torch.arange(12) % 3}
    with pytest.raises(ValueError) as info:
        module(splits, input_shape=[3]).load()
    assert str(info.value) == "input_shape is [3] but the inputs of split 'test' have rows of shape [1, 28, 28]"


def test_the_three_splits_are_required() -> None:
    splits = splits_of()
    del splits["val"]
    with pytest.raises(ValueError, match=r"^reader must return the splits 'train', 'val' and 'test'"):
        module(splits).load()


def test_reader_argument_errors_are_prefixed_with_reader() -> None:
    dm = InMemoryDataModule("digits", lambda: tabular.read_digits_subset(per_class=0), [64], 5)
    with pytest.raises(ValueError, match=r"^reader\.per_class must be >= 1, got 0$"):
        dm.load()


def test_mnist_subset_classes_must_be_in_the_data() -> None:
    with pytest.raises(
        ValueError, match=r"^classes must be distinct labels of the data \(0, 1, .*, 9\), got \[3, 12\]"
    ):
        tabular.read_digits_subset(classes=(3, 12), per_class=2)
    with pytest.raises(ValueError, match="classes must be distinct"):
        tabular.read_digits_subset(classes=(3, 3), per_class=2)
    with pytest.raises(ValueError, match="classes must name at least one class"):
        tabular.read_digits_subset(classes=(), per_class=2)
    with pytest.raises(ValueError, match=r"per_class must be <= 183 \(the size of class 3\), got 200"):
        tabular.read_digits_subset(classes=(3,), per_class=200)


def test_noise_seed_must_be_non_negative() -> None:
    with pytest.raises(ValueError, match=r"^noise_seed must be >= 0, got -1"):
        tabular.read_iris(denoise=True, noise_seed=-1)


# ------------------------------------------------------------------------------------------------- batching


def old_batches(n: int, batch_size: int, shuffle: bool, seed: int, epochs: int) -> list[list[list[int]]]:
    """The single-process batching as it was before sharding: one seeded permutation an epoch, sliced."""
    g = torch.Generator().manual_seed(seed)
    out = []
    for _ in range(epochs):
        order = torch.randperm(n, generator=g) if shuffle else torch.arange(n)
        out.append([order[i : i + batch_size].tolist() for i in range(0, n, batch_size)])
    return out


def epochs_of(batches: TensorBatches, epochs: int) -> list[list[list[int]]]:
    out = []
    for _ in range(epochs):
        epoch = [b["index"].tolist() for b in batches]
        assert len(epoch) == len(batches)  # len() agrees with what is yielded
        out.append(epoch)
    return out


@pytest.mark.parametrize("shuffle", [True, False])
def test_world_size_one_behaves_as_before(shuffle: bool) -> None:
    split = splits_of(23)["train"]
    batches = TensorBatches(split, 5, shuffle=shuffle, seed=7)
    assert epochs_of(batches, 3) == old_batches(23, 5, shuffle, 7, 3)
    first = next(iter(TensorBatches(split, 5, shuffle=shuffle, seed=7)))
    assert torch.equal(first["inputs"], split["inputs"][first["index"]])
    assert torch.equal(first["labels"], split["labels"][first["index"]])


@pytest.mark.parametrize("n", [20, 23])
@pytest.mark.parametrize("shuffle", [True, False])
def test_two_ranks_share_every_epoch_disjointly(n: int, shuffle: bool) -> None:
    split = splits_of(n)["train"]
    ranks = [TensorBatches(split, 4, shuffle=shuffle, seed=3, rank=r, world_size=2) for r in range(2)]
    assert len(ranks[0]) == len(ranks[1]) == math.ceil(math.ceil(n / 2) / 4)
    per_rank = [epochs_of(b, 3) for b in ranks]
    for epoch in range(3):
        a, b = ([i for batch in per_rank[r][epoch] for i in batch] for r in range(2))
        assert len(a) == len(b) == math.ceil(n / 2)
        assert sorted(set(a) | set(b)) == list(range(n))  # the two shares cover the split
        padding = 2 * math.ceil(n / 2) - n
        assert len(set(a) & set(b)) == padding  # and overlap only in the padding (the epoch's first rows)
        assert len(set(a)) == len(a) and len(set(b)) == len(b)
    if shuffle:
        assert per_rank[0][0] != per_rank[0][1]  # reshuffled every epoch


def test_ranks_interleave_one_permutation() -> None:
    n, world = 10, 3
    split = splits_of(n)["train"]
    order = torch.randperm(n, generator=torch.Generator().manual_seed(5)).tolist()
    padded = order + order[:2]  # 10 rows -> 12, a multiple of 3, by repeating the first rows
    for r in range(world):
        (batch,) = TensorBatches(split, 100, shuffle=True, seed=5, rank=r, world_size=world)
        assert batch["index"].tolist() == padded[r::world]


def test_more_ranks_than_rows() -> None:
    split = splits_of(2)["train"]
    shares = [next(iter(TensorBatches(split, 8, False, rank=r, world_size=5)))["index"].tolist() for r in range(5)]
    assert shares == [[0], [1], [0], [1], [0]]


def test_drop_last_counts_per_rank() -> None:
    split = splits_of(23)["train"]
    batches = TensorBatches(split, 5, shuffle=True, drop_last=True, rank=1, world_size=2)
    assert len(batches) == 12 // 5 == len(list(batches))
    assert all(len(b["index"]) == 5 for b in batches)


def test_bad_rank_is_rejected() -> None:
    split = splits_of()["train"]
    with pytest.raises(ValueError, match="rank must be in"):
        TensorBatches(split, 4, True, rank=2, world_size=2)
    with pytest.raises(ValueError, match="batch_size must be >= 1"):
        TensorBatches(split, 0, True)


def attach(dm: InMemoryDataModule, rank: int, world_size: int) -> InMemoryDataModule:
    dm.trainer = SimpleNamespace(global_rank=rank, world_size=world_size)  # what _batches reads of a trainer
    return dm


@pytest.mark.parametrize("batch_size", [4, -1])
def test_datamodule_shards_train_val_and_test(batch_size: int) -> None:
    splits = splits_of(13)
    ranks = [attach(module(splits, batch_size=batch_size, eval_batch_size=5), r, 2) for r in range(2)]
    for loader in ("train_dataloader", "val_dataloader", "test_dataloader"):
        shares = [[b["index"].tolist() for b in getattr(dm, loader)()] for dm in ranks]
        assert len(shares[0]) == len(shares[1])
        flat = [sum(s, []) for s in shares]
        assert len(flat[0]) == len(flat[1]) == 7
        assert sorted(set(flat[0]) | set(flat[1])) == list(range(13)), loader
    if batch_size == -1:  # a full batch is each rank's whole share, in one batch
        assert [len(list(dm.train_dataloader())) for dm in ranks] == [1, 1]
        assert [len(next(iter(dm.train_dataloader()))["index"]) for dm in ranks] == [7, 7]


def test_datamodule_without_trainer_or_with_one_process_iterates_everything() -> None:
    splits = splits_of(13)
    for dm in (module(splits, batch_size=-1), attach(module(splits, batch_size=-1), 0, 1)):
        (batch,) = dm.train_dataloader()
        assert sorted(batch["index"].tolist()) == list(range(13))
        assert [len(b["index"]) for b in dm.val_dataloader()] == [13]


# ---- class-balanced (PK) batches ------------------------------------------------------------------------------


def _labelled(counts: list[int]) -> dict[str, dict[str, torch.Tensor]]:
    labels = torch.cat([torch.full((c,), k) for k, c in enumerate(counts)])
    split = {"inputs": torch.randn(len(labels), 3), "labels": labels}
    return {"train": split, "val": split, "test": split}


def test_class_balanced_batches_hold_m_rows_of_each_class() -> None:
    splits = _labelled([10, 12, 9, 15, 11, 8])
    dm = InMemoryDataModule("pk", lambda: splits, [3], 6, batch_size=12, sampler=Sampler("class_balanced", 4), seed=3)
    dm.load()
    batches = list(dm.train_dataloader())
    assert len(batches) == len(splits["train"]["labels"]) // 12
    for batch in batches:
        _, counts = torch.unique(batch["labels"], return_counts=True)
        assert counts.tolist() == [4, 4, 4]  # 12 / 4 = 3 classes of 4 rows each
        assert len(set(batch["index"].tolist())) == 12  # distinct rows
        torch.testing.assert_close(batch["inputs"], splits["train"]["inputs"][batch["index"]])
    again = InMemoryDataModule(
        "pk", lambda: splits, [3], 6, batch_size=12, sampler=Sampler("class_balanced", 4), seed=3
    )
    again.load()
    assert [b["index"].tolist() for b in again.train_dataloader()] == [b["index"].tolist() for b in batches]


def test_class_balanced_settings_that_cannot_work_fail_at_load_in_one_line() -> None:
    dm = InMemoryDataModule(
        "pk", lambda: _labelled([10, 3, 9]), [3], 3, batch_size=8, sampler=Sampler("class_balanced", 4)
    )
    with pytest.raises(ValueError, match=r"^images_per_class \(4\) exceeds the smallest class \(3 images, class 1\)"):
        dm.load()
    dm = InMemoryDataModule(
        "pk", lambda: _labelled([10, 10]), [3], 2, batch_size=10, sampler=Sampler("class_balanced", 4)
    )
    with pytest.raises(ValueError, match=r"^batch_size \(10\) must be a multiple of images_per_class \(4\)"):
        dm.load()


def test_drop_last_leaves_out_the_short_training_batch_only() -> None:
    splits = _labelled([10, 11])  # 21 rows: batches of 8, 8 and a short one of 5
    dm = InMemoryDataModule("short", lambda: splits, [3], 2, batch_size=8, drop_last=True)
    dm.load()
    assert [len(b["labels"]) for b in dm.train_dataloader()] == [8, 8]
    assert sum(len(b["labels"]) for b in dm.test_dataloader()) == 21  # evaluation sees every row
