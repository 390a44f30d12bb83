"""The two training paths that the overhead cases (``train_overhead``, ``train_overhead_digits``, ``vae_epoch``,
``text``, ``per_sample_ae``) compare: a plain PyTorch loop over in-memory tensors, and the framework's path as
train.py runs it (InMemoryDataModule, RepresentationModule, Lightning's Trainer), without checkpoints, loggers or
validation."""

from __future__ import annotations

from collections.abc import Callable

import torch

from .common import alternated


def plain_loop(encoder, head, split: dict, batch_size: int, epochs: int, lr: float = 1e-3) -> None:
    """The baseline: index-sliced batches from in-memory tensors, forward, backward, Adam step."""
    opt = torch.optim.Adam([*encoder.parameters(), *head.parameters()], lr=lr)
    x, y = split["inputs"], split["labels"]
    for _ in range(epochs):
        order = torch.randperm(len(y))
        for i in range(0, len(y), batch_size):
            idx = order[i : i + batch_size]
            loss = head(encoder(x[idx]), y[idx])["loss"]
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()


def cpu_trainer(epochs: int):
    """Lightning's Trainer as the framework path runs it here: one CPU device, ``epochs`` epochs, and nothing a
    plain loop does not do (no logger, checkpoint, progress bar, model summary or validation)."""
    import lightning as L

    return L.Trainer(
        accelerator="cpu",
        devices=1,
        max_epochs=epochs,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        limit_val_batches=0,
        num_sanity_val_steps=0,
    )


def framework_loop(encoder, head, splits: dict, batch_size: int, epochs: int, lr: float = 1e-3) -> None:
    """The framework's training path, as train.py runs it, without checkpoints, loggers or validation."""
    import functools

    from clusterable.data.memory import InMemoryDataModule
    from clusterable.module import RepresentationModule

    dm = InMemoryDataModule("bench", lambda: splits, splits["train"]["inputs"].shape[1:], 10, batch_size)
    module = RepresentationModule(encoder, head, functools.partial(torch.optim.Adam, lr=lr))
    cpu_trainer(epochs).fit(module, datamodule=dm)


def overhead(splits: dict, make: Callable[[], tuple], batch_size: int, epochs: int) -> tuple[float, float]:
    """Seconds of ``epochs`` epochs of ``plain_loop`` and of ``framework_loop`` on ``splits`` with a fresh
    ``make() -> (encoder, head)`` each run: one warm-up epoch of each, then the best of 3 alternated runs."""
    torch.manual_seed(0)
    plain_loop(*make(), splits["train"], batch_size, 1)  # warm-up: allocator, kernels, imports
    framework_loop(*make(), splits, batch_size, 1)
    return alternated(
        lambda: plain_loop(*make(), splits["train"], batch_size, epochs),
        lambda: framework_loop(*make(), splits, batch_size, epochs),
        rounds=3,
    )
