"""CSRL's standard AE (AE3 on the parallel lines, 150 x 5), one Adam step per sample: the framework
(``optimizer_steps=per_sample``) against the authors' plain loop, seconds an epoch. Goal: ratio <= 2."""

from __future__ import annotations

import torch

from .common import best_of
from .loops import cpu_trainer


def measure() -> dict:
    """The CSRL standard AE's protocol: one Adam(weight_decay=0.1) step per sample (AE3, parallel lines, 150 x 5),
    the framework (optimizer_steps=per_sample, the whole split as one Lightning batch) against the authors' plain
    loop, seconds per epoch over 20 epochs."""
    from clusterable.data.memory import InMemoryDataModule
    from clusterable.data.memory.synthetic import read_synthetic
    from clusterable.heads.linear_ae import LinearAE
    from clusterable.models.identity import Identity
    from clusterable.module import RepresentationModule

    splits, epochs = read_synthetic("parallel_lines"), 20
    x = splits["train"]["inputs"]

    def adam(params):
        return torch.optim.Adam(params, lr=0.01, weight_decay=0.1)

    def plain() -> None:
        head = LinearAE("ae3", (5,), num_classes=2)
        opt = adam(head.parameters())
        for _ in range(epochs):
            for row in x:
                opt.zero_grad()
                torch.nn.functional.mse_loss(head.decoder(head.encoder(row[None])), row[None]).backward()
                opt.step()

    def framework() -> None:
        dm = InMemoryDataModule("bench", lambda: splits, [5], 2, batch_size=-1, shuffle_batches=False)
        module = RepresentationModule(
            Identity((5,)), LinearAE("ae3", (5,), num_classes=2), adam, optimizer_steps="per_sample"
        )
        cpu_trainer(epochs).fit(module, datamodule=dm)

    plain(), framework()  # warm-up
    plain_s, framework_s = best_of(plain) / epochs, best_of(framework) / epochs
    return {
        "per_sample_ae_ratio": framework_s / plain_s,
        "per_sample_ae_plain_epoch_s": plain_s,
        "per_sample_ae_framework_epoch_s": framework_s,
        "per_sample_ae_plain_step_ms": 1e3 * plain_s / len(x),
    }
