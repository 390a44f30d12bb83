"""How training batches are drawn (``clusterable.data.sampling``): class-balanced (PK) batches over
pytorch-metric-learning's ``MPerClassSampler``, and the ``Sampler`` config node every datamodule takes."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from clusterable.data.sampling import RANDOM_BATCHES, ClassBalancedBatches, Sampler


def test_class_balanced_batches_have_m_images_of_each_class() -> None:
    labels = torch.arange(60) % 10  # 10 classes of 6
    state = np.random.get_state()
    batches = list(ClassBalancedBatches(labels, 12, 3, seed=0))
    assert len(batches) == 5 and all(len(b) == 12 for b in batches)
    for b in batches:
        counts = torch.bincount(labels[b], minlength=10)
        assert sorted(counts[counts > 0].tolist()) == [3, 3, 3, 3] and len(set(b)) == 12
    assert batches == list(ClassBalancedBatches(labels, 12, 3, seed=0)), "seeded"
    assert batches != list(ClassBalancedBatches(labels, 12, 3, seed=1))
    assert np.array_equal(np.random.get_state()[1], state[1]), "numpy's global RNG untouched"


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        (
            {"images_per_class": 8},
            r"^images_per_class \(8\) exceeds the smallest class \(5 images, class 3\)",
        ),
        ({"batch_size": 10}, r"^batch_size \(10\) must be a multiple of images_per_class \(4\)"),
        (
            {"batch_size": 32},
            r"^batch_size \(32\) needs 8 classes of 4 images each, but there are only 4 classes",
        ),
    ],
)
def test_class_balanced_batches_refuse_what_they_cannot_give(kwargs: dict, message: str) -> None:
    labels = torch.tensor([0] * 6 + [1] * 7 + [2] * 6 + [3] * 5)
    with pytest.raises(ValueError, match=message):
        ClassBalancedBatches(labels, **{"batch_size": 8, "images_per_class": 4, **kwargs})


# ------------------------------------------------------------------------------------------------ the config node


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"kind": "pk"}, "kind must be 'random' or 'class_balanced'"),
        ({"images_per_class": 0}, "images_per_class must be an integer >= 1"),
        ({"images_per_class": True}, "images_per_class must be an integer >= 1"),
    ],
)
def test_out_of_range_settings_name_the_field(kwargs: dict, message: str) -> None:
    with pytest.raises(ValueError) as info:
        Sampler(**kwargs)
    assert str(info.value).startswith(message)


def test_random_batches_are_left_to_the_datamodule_and_class_balanced_ones_are_made_here() -> None:
    labels = torch.arange(60) % 10
    assert RANDOM_BATCHES == Sampler() and Sampler().batches(labels, 12, seed=0) is None
    balanced = Sampler("class_balanced", 3).batches(labels, 12, seed=0, batches_per_epoch=2)
    assert isinstance(balanced, ClassBalancedBatches) and len(balanced) == 2
    assert list(balanced) == list(ClassBalancedBatches(labels, 12, 3, seed=0, batches_per_epoch=2))
    with pytest.raises(ValueError, match=r"^batch_size \(10\) must be a multiple of images_per_class \(3\)"):
        Sampler("class_balanced", 3).batches(labels, 10, seed=0)
