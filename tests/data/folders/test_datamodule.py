"""``ImageDataModule`` through the real code path on tiny copies of the datasets in their real formats: splits,
batches, device-side views, ``eval_batches``, validation modes, class-balanced batches, the fake source, its
arguments and its config nodes (``augment``, ``sampler``)."""

from __future__ import annotations

import math
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from hydra import compose, initialize_config_dir
from omegaconf import open_dict

from clusterable.config import CONFIG_DIR, ConfigError, build
from clusterable.data.errors import DatasetNotFoundError
from clusterable.data.folders import ImageDataModule
from clusterable.data.folders.augment import Augment, eval_views
from clusterable.data.folders.image_cache import ImageStore
from clusterable.data.folders.retrieval_sets import read_cub200, read_inshop
from clusterable.data.sampling import Sampler

from .test_retrieval_sets import write_cub200, write_inshop

# ------------------------------------------------------------------------------------------------ the datamodule


def cub_module(root: Path, **kwargs) -> ImageDataModule:
    """The tiny CUB copy (classes 1-3 train with 3, 2, 4 images; 101-102 test with 3, 2) at a small recipe."""
    reader = lambda: read_cub200(root, expected_sizes={"train": 9, "test": 5})  # noqa: E731
    options = {
        "input_shape": [3, 24, 24],
        "num_classes": 3,
        "batch_size": 4,
        "eval_batch_size": 3,
        "resize": "shorter:28",
        "augment": Augment(jitter=[0.25, 0.25, 0.25, 0.0]),
        "progress": False,
        "prefetch": 1,
        "val_classes": 1,
        **kwargs,
    }
    return ImageDataModule("cub200", reader, **options)


def trainer(training: bool) -> SimpleNamespace:
    return SimpleNamespace(training=training, global_rank=0, world_size=1)


def test_datamodule_splits_batches_and_views(tmp_path) -> None:
    write_cub200(tmp_path)
    dm = cub_module(tmp_path)
    splits = dm.load()
    assert set(splits) == {"train", "val", "test"} and all(set(s) == {"labels"} for s in splits.values())
    train, val = set(splits["train"]["labels"].tolist()), set(splits["val"]["labels"].tolist())
    assert len(val) == 1 and len(train) == 2 and not train & val and train | val == {0, 1, 2}
    assert splits["test"]["labels"].tolist() == [100, 100, 100, 101, 101]
    assert dm.store.folder.parent == tmp_path / ".clusterable_cache"

    batches = list(dm.train_dataloader())
    n_train = len(splits["train"]["labels"])
    assert len(batches) == n_train // 4  # drop_last
    batch = batches[0]
    assert set(batch) == {"images", "sizes", "labels", "index"}
    assert batch["images"].dtype == torch.uint8 and batch["images"].shape[:2] == (4, 3)
    assert (batch["sizes"].min(dim=1).values == 28).all()  # shorter side 28
    assert torch.equal(batch["labels"], splits["train"]["labels"][batch["index"]])

    dm.trainer = trainer(training=True)
    views = dm.on_after_batch_transfer(dict(batch), 0)
    assert set(views) == {"inputs", "labels", "index"} and views["inputs"].shape == (4, 3, 24, 24)
    assert views["inputs"].dtype == torch.float32 and 0 <= views["inputs"].min() and views["inputs"].max() <= 1
    dm.trainer = trainer(training=False)
    centre = dm.on_after_batch_transfer(dict(batch), 0)["inputs"]
    assert torch.equal(centre, eval_views(batch["images"], batch["sizes"], 24))

    # Two epochs, two orders, from the same seed every time.
    first = [b["index"].tolist() for b in dm.train_dataloader()]
    again = [b["index"].tolist() for b in cub_module(tmp_path).train_dataloader()]
    assert first == [b["index"].tolist() for b in batches] and again == first


def test_eval_batches_are_the_split_in_order_on_the_device(tmp_path) -> None:
    write_cub200(tmp_path)
    dm = cub_module(tmp_path)
    batches = list(dm.eval_batches("test", torch.device("cpu")))
    assert [len(b["labels"]) for b in batches] == [3, 2]
    assert torch.cat([b["index"] for b in batches]).tolist() == list(range(5))
    assert torch.equal(torch.cat([b["labels"] for b in batches]), dm.splits["test"]["labels"])
    store = dm.store
    first = torch.from_numpy(np.array(store.image(int(dm._rows["test"][0]))))
    assert torch.equal(batches[0]["inputs"][0], eval_views(first[None], torch.tensor([first.shape[1:]]), 24)[0])
    with pytest.raises(ValueError, match="^stage must be one of train, val, test"):
        next(dm.eval_batches("query", "cpu"))


def test_validation_modes(tmp_path) -> None:
    write_cub200(tmp_path)
    on_test = cub_module(tmp_path, validation="test").load()
    assert torch.equal(on_test["val"]["labels"], on_test["test"]["labels"]) and len(on_test["train"]["labels"]) == 9
    none = cub_module(tmp_path, validation="none")
    assert len(none.load()["val"]["labels"]) == 0 and len(none.val_dataloader()) == 0


def test_inshop_test_split_has_query_and_gallery_flags(tmp_path) -> None:
    write_inshop(tmp_path)
    reader = lambda: read_inshop(tmp_path, expected_sizes={"train": 5, "query": 2, "gallery": 3})  # noqa: E731
    dm = ImageDataModule(
        "inshop",
        reader,
        [3, 32, 32],
        2,
        batch_size=2,
        eval_batch_size=4,
        validation="test",
        progress=False,
        cache_dir=str(tmp_path / "elsewhere"),
    )
    test = dm.load()["test"]
    assert test["is_query"].tolist() == [True, False, False, True, False]
    assert test["is_gallery"].tolist() == [False, True, True, False, True]
    assert dm.store.folder.parent == tmp_path / "elsewhere"
    batch = next(iter(dm.test_dataloader()))
    assert set(batch) == {"images", "sizes", "labels", "index", "is_query", "is_gallery"}
    assert batch["images"].shape == (4, 3, 56, 48)  # no resize: the files' own sizes
    dm.trainer = trainer(training=False)
    assert dm.on_after_batch_transfer(batch, 0)["is_query"].tolist() == [True, False, False, True]


def test_class_balanced_sampler_in_the_datamodule(tmp_path) -> None:
    write_cub200(tmp_path, per_class={1: 4, 2: 5, 3: 4, 4: 6, 101: 2, 102: 2})
    dm = cub_module(tmp_path, sampler=Sampler("class_balanced", 2), validation="none")
    dm.reader = lambda: read_cub200(tmp_path, expected_sizes=None)
    dm.num_classes = 4
    labels = dm.load()["train"]["labels"]
    for batch in dm.train_dataloader():
        counts = torch.bincount(batch["labels"])
        assert sorted(counts[counts > 0].tolist()) == [2, 2]
        assert torch.equal(batch["labels"], labels[batch["index"]])
    small = cub_module(tmp_path, sampler=Sampler("class_balanced", 5), batch_size=10, validation="none")
    small.reader, small.num_classes = dm.reader, 4
    with pytest.raises(ValueError, match=r"^images_per_class \(5\) exceeds the smallest class \(4 images, class 0\)"):
        small.load()


def test_num_classes_must_be_the_training_classes(tmp_path) -> None:
    write_cub200(tmp_path)
    with pytest.raises(ValueError, match=r"^num_classes is 5 but the training split of CUB-200-2011 has 3 classes"):
        cub_module(tmp_path, num_classes=5).load()


def test_reader_errors_surface_with_their_one_line(tmp_path) -> None:
    write_cub200(tmp_path)
    (tmp_path / "CUB_200_2011" / "images.txt").unlink()
    with pytest.raises(DatasetNotFoundError, match=r"CUB-200-2011 not found in .*missing: CUB_200_2011/images.txt"):
        cub_module(tmp_path).load()


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"input_shape": [3, 24, 32]}, "input_shape must be [3, crop, crop]"),
        ({"batch_size": 0}, "batch_size must be an integer >= 1, got 0"),
        ({"eval_batch_size": 1.5}, "eval_batch_size must be an integer >= 1"),
        ({"source": "web"}, "source must be 'real' or 'fake'"),
        ({"resize": "256"}, "resize must be 'shorter:N'"),
        ({"augment": [0.16, 1.0]}, "augment must be an Augment (clusterable.data.folders.augment), got list"),
        ({"sampler": "pk"}, "sampler must be a Sampler (clusterable.data.sampling), got str"),
        (
            {"sampler": Sampler("class_balanced"), "batch_size": 10},
            "batch_size (10) must be a multiple of images_per_class (4)",
        ),
        ({"validation": "val"}, "validation must be 'test', 'held_out_classes' or 'none'"),
        ({"val_classes": 0}, "val_classes must be a fraction in (0, 1) or a count >= 1"),
        ({"seed": True}, "seed must be an integer"),
    ],
)
def test_out_of_range_arguments_name_the_parameter(tmp_path, kwargs: dict, message: str) -> None:
    with pytest.raises(ValueError) as info:
        cub_module(tmp_path, **kwargs)
    assert str(info.value).startswith(message)


def test_fake_source_reads_no_file_and_is_above_chance() -> None:
    def no_reading():
        raise AssertionError("the fake source read the dataset")

    no_reading.parts = ("train", "query", "gallery")  # an In-Shop-like reader: the stand-in gets the flags
    dm = ImageDataModule("inshop", no_reading, [3, 32, 32], 3997, batch_size=16, source="fake", fake_size=40)
    splits = dm.load()
    assert len(splits["train"]["labels"]) + len(splits["val"]["labels"]) == 40 and len(splits["test"]["labels"]) == 40
    assert int(splits["train"]["labels"].max()) < 3997 and int(splits["test"]["labels"].min()) >= 3997
    assert splits["test"]["is_query"].any() and splits["test"]["is_gallery"].any()
    batch = next(iter(dm.train_dataloader()))
    dm.trainer = trainer(training=True)
    assert dm.on_after_batch_transfer(batch, 0)["inputs"].shape == (16, 3, 32, 32)
    # Recall@1 of the mean colour of the centre crops: each class has its colour, so far above chance.
    test = list(dm.eval_batches("test", "cpu"))
    features = torch.cat([b["inputs"].mean(dim=(2, 3)) for b in test])
    labels = torch.cat([b["labels"] for b in test])
    distances = torch.cdist(features, features).fill_diagonal_(math.inf)
    assert (labels[distances.argmin(dim=1)] == labels).float().mean() > 0.9


@pytest.mark.parametrize("name", ["cub200", "cars196", "sop", "inshop"])
def test_dataset_configs_build_and_give_views(tmp_path, name: str) -> None:
    with initialize_config_dir(config_dir=CONFIG_DIR, version_base="1.3"):
        cfg = compose("train", overrides=[f"dataset={name}", f"paths.data_dir={tmp_path}"])
    with open_dict(cfg):
        cfg.dataset.source, cfg.dataset.fake_size, cfg.dataset.input_shape = "fake", 16, [3, 32, 32]
    dm = build(cfg.dataset, "dataset", seed=0)
    assert dm.root == str(tmp_path / name) and dm.batch_size == 128 and dm.eval_batch_size == 256
    dm.load()
    dm.trainer = trainer(training=True)
    views = dm.on_after_batch_transfer(next(iter(dm.train_dataloader())), 0)
    assert views["inputs"].shape[1:] == (3, 32, 32) and ("is_query" in dm.splits["test"]) == (name == "inshop")


def test_store_of_the_fake_source_is_in_memory() -> None:
    dm = ImageDataModule("cub200", None, [3, 24, 24], 100, source="fake", fake_size=8)
    dm.load()
    assert isinstance(dm.store, ImageStore) and dm.store.folder is None and not isinstance(dm.store.pixels, np.memmap)


@pytest.mark.filterwarnings("ignore:.*LeafSpec.*is deprecated")  # inside Lightning, not ours
def test_lightning_calls_the_hook_train_views_in_training_centre_crops_in_validation() -> None:
    import lightning as L

    dm = ImageDataModule("cub200", None, [3, 24, 24], 100, batch_size=8, source="fake", fake_size=24)
    dm.load()
    seen = []

    def centre(split: str, index: torch.Tensor) -> torch.Tensor:
        images, sizes = dm.store.batch(dm._rows[split][index.cpu()])
        return eval_views(images, sizes, 24)

    class Probe(L.LightningModule):
        def __init__(self):
            super().__init__()
            self.weight = torch.nn.Parameter(torch.zeros(3))

        def training_step(self, batch, batch_idx):
            seen.append(("train", sorted(batch), torch.equal(batch["inputs"], centre("train", batch["index"]))))
            return (batch["inputs"].mean(dim=(2, 3)) * self.weight).sum()

        def validation_step(self, batch, batch_idx):
            seen.append(("val", sorted(batch), torch.equal(batch["inputs"], centre("val", batch["index"]))))

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.1)

    L.Trainer(
        accelerator="cpu",
        max_epochs=1,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        num_sanity_val_steps=0,
    ).fit(Probe(), datamodule=dm)
    assert {s[0] for s in seen} == {"train", "val"}
    assert all(keys == ["index", "inputs", "labels"] for _, keys, _ in seen)
    assert all(same == (stage == "val") for stage, _, same in seen), "random views in training only"


def test_a_nested_node_is_checked_against_its_class_with_its_path(tmp_path) -> None:
    with initialize_config_dir(config_dir=CONFIG_DIR, version_base="1.3"):
        cfg = compose("train", overrides=["dataset=cub200", f"paths.data_dir={tmp_path}", "dataset.sampler.kind=pk"])
    with pytest.raises(ConfigError, match=r"^dataset\.sampler\.kind must be one of 'random', 'class_balanced'"):
        build(cfg.dataset, "dataset", seed=0)
    with initialize_config_dir(config_dir=CONFIG_DIR, version_base="1.3"):
        cfg = compose(
            "train",
            overrides=[
                "dataset=cub200",
                f"paths.data_dir={tmp_path}",
                "+dataset.augment.crop_scales=[0.5,1]",
            ],
        )
    with pytest.raises(
        ConfigError,
        match=r"^dataset\.augment\.crop_scales is not an option of Augment \(did you mean crop_scale\?\)",
    ):
        build(cfg.dataset, "dataset", seed=0)


@pytest.mark.parametrize("name", ["cub200", "cars196", "sop", "inshop"])
def test_dataset_configs_give_the_recipes_augmentation_and_sampler(tmp_path, name: str) -> None:
    with initialize_config_dir(config_dir=CONFIG_DIR, version_base="1.3"):
        cfg = compose("train", overrides=[f"dataset={name}", f"paths.data_dir={tmp_path}", "dataset.source=fake"])
    dm = build(cfg.dataset, "dataset", seed=0)
    jitter = {"cub200": (0.25, 0.25, 0.25, 0.0), "cars196": (0.3, 0.3, 0.3, 0.1)}.get(name)
    ratio = (1.0, 1.0) if name == "cars196" else (0.75, 4 / 3)
    assert dm.augment == Augment((0.16, 1.0), ratio, True, jitter)
    # Random batches by default, images_per_class left null (set only with class-balanced batches).
    assert dm.sampler == Sampler("random") and cfg.dataset.sampler.images_per_class is None
