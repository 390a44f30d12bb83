"""One epoch of Safir 2022's MVAE (FFNN 2x500, latent 10, triplet, VampPrior of 50; the alternate schedule's first
epoch: both terms) through the framework against a plain loop; 55,000 x 784, 10% labelled, batch 128. Goal: ratio
<= 1.2."""

from __future__ import annotations

import torch

from .common import alternated
from .loops import framework_loop


def _plain_head_loop(encoder, head, split: dict, batch_size: int, lr: float = 1e-3) -> None:
    """``loops.plain_loop`` for a head that reads the batch as the module passes it (``inputs``, ``epoch``,
    ``encoder``, ``index``): one epoch, the first (``epoch=0``)."""
    opt = torch.optim.Adam([*encoder.parameters(), *head.parameters()], lr=lr)
    x, y = split["inputs"], split["labels"]
    order = torch.randperm(len(y))
    for i in range(0, len(y), batch_size):
        idx = order[i : i + batch_size]
        inputs = x[idx]
        loss = head(encoder(inputs), y[idx], inputs=inputs, epoch=0, encoder=encoder, index=idx)["loss"]
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()


def measure() -> dict:
    """One epoch of Safir 2022's MetricVAE (``loss=mvae`` as configured: triplet with semi-hard mining on a 10-d
    latent, VampPrior of 50 pseudo-inputs embedded through the encoder every step, decoder 2x500; epoch 0 of the
    alternate schedule, so L_S and L_U both run) on a 2x500 FFNN (src/clusterable/conf/model/ffnn.yaml), 55,000 x 784
    random pixels with 10 classes and 10% of the labels kept (the rest -1), batches of 128, Adam lr 1e-3: the
    framework (``loops.framework_loop``) against ``_plain_head_loop`` with the same encoder and head; the best of 3
    alternated runs each, after a warm-up on 5,000 rows. Goal: ratio <= 1.2."""
    from hydra import compose, initialize_config_dir

    from clusterable.config import CONFIG_DIR, build
    from clusterable.models import FFNN

    g = torch.Generator().manual_seed(0)
    labels = torch.randint(0, 10, (55_000,), generator=g)
    labels[torch.rand(55_000, generator=g) >= 0.1] = -1
    split = {"inputs": torch.rand(55_000, 784, generator=g), "labels": labels}
    splits = {"train": split, "val": split, "test": split}
    small = {k: v[:5000] for k, v in split.items()}
    with initialize_config_dir(config_dir=CONFIG_DIR, version_base=None):
        node = compose(overrides=["+loss=mvae"]).loss

    def make() -> tuple:
        encoder = FFNN((784,), hidden=(500, 500))
        head = build(node, "loss", num_classes=10, embedding_dim=encoder.embedding_dim, input_shape=[784])
        return encoder, head

    torch.manual_seed(0)
    _plain_head_loop(*make(), small, 128)  # warm-up: allocator, kernels, imports
    framework_loop(*make(), {"train": small, "val": small, "test": small}, 128, 1)
    plain, framework = alternated(
        lambda: _plain_head_loop(*make(), split, 128),
        lambda: framework_loop(*make(), splits, 128, 1),
        rounds=3,
    )
    return {
        "vae_epoch_ratio": framework / plain,
        "vae_epoch_plain_s": plain,
        "vae_epoch_framework_s": framework,
    }
