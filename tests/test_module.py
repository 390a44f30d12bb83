"""The LightningModule's training modes against plain PyTorch loops on the same weights and data."""

from __future__ import annotations

import copy

import lightning as L
import torch

from clusterable.data import InMemoryDataModule
from clusterable.heads.linear_ae import LinearAE
from clusterable.models.identity import Identity
from clusterable.module import RepresentationModule


def _module_and_data(steps: str, n: int = 40, d: int = 5):
    torch.manual_seed(0)
    x = torch.randn(n, d)
    split = {"inputs": x, "labels": torch.zeros(n, dtype=torch.long)}
    dm = InMemoryDataModule("tiny", lambda: {"train": split, "val": split, "test": split}, [d], 1,
                            batch_size=-1, shuffle_batches=False)  # fmt: skip
    head = LinearAE("ae3", (d,), num_classes=2)
    optimizer = lambda params: torch.optim.Adam(params, lr=0.01, weight_decay=0.1)  # noqa: E731
    return RepresentationModule(Identity((d,)), head, optimizer, optimizer_steps=steps), dm, x


def _fit_one_epoch(module: RepresentationModule, dm: InMemoryDataModule) -> None:
    trainer = L.Trainer(max_epochs=1, accelerator="cpu", logger=False, enable_checkpointing=False,
                        enable_progress_bar=False, enable_model_summary=False, limit_val_batches=0)  # fmt: skip
    trainer.fit(module, datamodule=dm)


def test_per_sample_steps_equal_the_authors_plain_loop():
    module, dm, x = _module_and_data("per_sample")
    reference = copy.deepcopy(module.head)
    _fit_one_epoch(module, dm)
    # The CSRL authors' train_AE: for each row in order, one Adam(weight_decay=0.1) step on its MSE.
    opt = torch.optim.Adam(reference.parameters(), lr=0.01, weight_decay=0.1)
    for row in x:
        opt.zero_grad()
        torch.nn.functional.mse_loss(reference.decoder(reference.encoder(row[None])), row[None]).backward()
        opt.step()
    for ours, theirs in zip(module.head.parameters(), reference.parameters(), strict=True):
        torch.testing.assert_close(ours, theirs)
    assert module.steps_taken == len(x)


def test_per_batch_takes_one_step_per_batch():
    module, dm, x = _module_and_data("per_batch")
    before = [p.detach().clone() for p in module.head.parameters()]
    _fit_one_epoch(module, dm)
    assert module.steps_taken == 1  # the whole split is one batch
    assert any(not torch.equal(a, b) for a, b in zip(before, module.head.parameters(), strict=True))
