"""callbacks.BoudiafCheckpoint against a transcription of Boudiaf et al.'s model selection: a tiny Lightning fit
whose validation logs a scripted Recall@1 sequence, the untrained network's first."""

from __future__ import annotations

import lightning as L
import numpy as np
import pytest
import torch
from torch.utils.data import DataLoader, TensorDataset

from clusterable.callbacks import BoudiafCheckpoint

MONITOR = "val/recall@1/cos"


def boudiaf_selected(recalls: list[float]) -> int:
    """The candidate Boudiaf et al. keep, transcribed from repository ``jeromerony/dml_cross_entropy``,
    ``experiment.py`` (``main``): ``best_val`` starts as (0, the evaluation before training); after epoch e
    (0-based) ``if recall@1 >= best: best_val = (e + 1, ...)``; every recall is ``round(v * 100, 2)`` of a NumPy
    float (``utils/metrics.py``, ``recall_at_ks``). ``recalls[0]`` is the untrained network's, ``recalls[i]`` the
    one after epoch i - 1; returns the kept index."""
    best_epoch, best = 0, round(np.float64(recalls[0]) * 100, 2)
    for epoch, recall in enumerate(recalls[1:]):
        value = round(np.float64(recall) * 100, 2)
        if value >= best:
            best_epoch, best = epoch + 1, value
    return best_epoch


class Scripted(L.LightningModule):
    """One weight; every validation logs the next scripted recall and the weight's value, so that the kept
    checkpoint tells which validation it came from."""

    def __init__(self, recalls: list[float]):
        super().__init__()
        self.recalls = recalls
        self.weight = torch.nn.Parameter(torch.zeros(1))
        self.validations = 0

    def training_step(self, batch, batch_idx):
        return (self.weight - 1.0).pow(2).sum()

    def validation_step(self, batch, batch_idx):
        pass

    def on_validation_epoch_end(self):
        self.log(MONITOR, self.recalls[self.validations])
        self.validations += 1

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.1)

    def train_dataloader(self):
        return DataLoader(TensorDataset(torch.zeros(2, 1)), batch_size=1)

    def val_dataloader(self):
        return DataLoader(TensorDataset(torch.zeros(1, 1)), batch_size=1)


class Noisy(Scripted):
    """Training that draws from torch's random state, as dropout and augmentations do."""

    def training_step(self, batch, batch_idx):
        return (self.weight - torch.randn(1)).pow(2).sum()


def fit(recalls: list[float], tmp_path, untrained_candidate: bool = True) -> tuple[dict, BoudiafCheckpoint, Scripted]:
    """Train one epoch per recall after the untrained network's; the kept checkpoint's state."""
    module = Scripted(recalls)
    checkpoint = BoudiafCheckpoint(tmp_path / "checkpoints", "best", MONITOR, untrained_candidate=untrained_candidate)
    trainer = L.Trainer(
        max_epochs=len(recalls) - int(untrained_candidate),
        callbacks=[checkpoint],
        logger=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        num_sanity_val_steps=0,
        accelerator="cpu",
    )
    trainer.fit(module)
    state = torch.load(checkpoint.best_model_path, map_location="cpu", weights_only=True)
    return state, checkpoint, module


def kept_index(state: dict) -> int:
    """0 for the untrained network (no step taken), else the epoch after which it was saved, plus one."""
    return 0 if state["global_step"] == 0 else state["epoch"] + 1


SEQUENCES = [  # (recalls, the index their rule keeps)
    ([0.5, 0.4, 0.3], 0),  # nothing beats the untrained network: it is kept
    ([0.5, 0.4, 0.5, 0.3], 2),  # a tie with the untrained network goes to the later epoch
    ([0.40001, 0.39999, 0.41, 0.409996, 0.2], 3),  # 40.00 = 40.00, then 41.00 = 41.00 once rounded: the later
    ([0.1, 0.2, 0.30004, 0.3, 0.29996], 4),  # 30.00 three times once rounded: the last of them
]


@pytest.mark.parametrize("recalls, expected", SEQUENCES)
def test_keeps_the_candidate_of_their_rule(recalls, expected, tmp_path):
    assert boudiaf_selected(recalls) == expected
    state, checkpoint, module = fit(recalls, tmp_path)
    assert module.validations == len(recalls)  # the untrained network was validated too
    assert kept_index(state) == expected
    assert checkpoint.rounded(checkpoint.best_model_score) == round(np.float64(recalls[expected]) * 100, 2)


def test_untrained_weights_are_what_the_untrained_checkpoint_holds(tmp_path):
    state, _, _ = fit([0.9, 0.1, 0.2], tmp_path)
    assert state["global_step"] == 0 and state["state_dict"]["weight"].item() == 0.0
    state, _, _ = fit([0.1, 0.9, 0.2], tmp_path / "trained")
    assert state["global_step"] > 0 and state["state_dict"]["weight"].item() != 0.0


def test_without_the_untrained_candidate_the_first_epoch_is_the_first_best(tmp_path):
    state, _, module = fit([0.3, 0.3, 0.1], tmp_path, untrained_candidate=False)
    assert module.validations == 3 and state["global_step"] > 0 and state["epoch"] == 1  # tie: the later epoch


def test_the_untrained_validation_leaves_training_unchanged(tmp_path):
    """Isolated random state: the weights after training are the same with and without the extra validation."""

    def trained_weight(untrained_candidate: bool) -> float:
        torch.manual_seed(0)
        module = Noisy([0.1, 0.2, 0.3])
        checkpoint = BoudiafCheckpoint(
            tmp_path / str(untrained_candidate), "best", MONITOR, untrained_candidate=untrained_candidate
        )
        L.Trainer(
            max_epochs=2,
            callbacks=[checkpoint],
            logger=False,
            enable_progress_bar=False,
            enable_model_summary=False,
            num_sanity_val_steps=0,
        ).fit(module)
        return module.weight.item()

    assert trained_weight(True) == trained_weight(False)


@pytest.mark.parametrize(
    "options, message",
    [
        ({"monitor": None}, "monitor must name a logged metric"),
        ({"mode": "maximum"}, "mode must be max or min, got 'maximum'"),
        ({"decimals": -1}, "decimals must be an integer >= 0, got -1"),
        ({"decimals": 1.5}, "decimals must be an integer >= 0, got 1.5"),
    ],
)
def test_options_refused_in_one_line(options, message, tmp_path):
    with pytest.raises(ValueError) as error:
        BoudiafCheckpoint(**{"dirpath": tmp_path, "filename": "best", "monitor": MONITOR, **options})
    assert str(error.value).startswith(message) and "\n" not in str(error.value)
