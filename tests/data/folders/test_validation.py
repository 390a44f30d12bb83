"""Class-disjoint validation: whole training classes held out, seeded."""

from __future__ import annotations

import pytest
import torch

from clusterable.data.folders.validation import class_disjoint_validation


def test_class_disjoint_validation_holds_out_whole_classes() -> None:
    labels = torch.arange(100) % 20
    train, val = class_disjoint_validation(labels, 0.25, seed=0)
    assert len(torch.unique(labels[val])) == 5 and len(train) + len(val) == 100
    assert not set(labels[train].tolist()) & set(labels[val].tolist())
    assert torch.equal(val, class_disjoint_validation(labels, 5, seed=0)[1]), "a count or a fraction"
    assert not torch.equal(val, class_disjoint_validation(labels, 0.25, seed=1)[1])
    with pytest.raises(ValueError, match=r"^val_classes \(20\) would hold out 20 of the 20"):
        class_disjoint_validation(labels, 20, seed=0)
