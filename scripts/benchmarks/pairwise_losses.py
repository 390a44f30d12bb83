"""Forward + backward of each named metric-learning loss head at batch 256 x 128 (32 classes x 8) against the ce
head; seconds a step and ratio to ce. Reported."""

from __future__ import annotations

import torch

from .common import best_of

PAIRWISE_LOSSES = [
    "ce",
    "pce",
    "contrastive",
    "triplet",
    "multi_similarity",
    "supcon",
    "nca",
    "proxy_nca",
    "proxy_anchor",
    "arcface",
    "normsoftmax",
]


def measure(
    batch: int = 256, dim: int = 128, classes: int = 32, steps: int = 10, names: list[str] | None = None
) -> dict:
    """Seconds of one forward + backward step of each named loss head built from src/clusterable/conf/loss, best of 3
    runs of ``steps`` steps on the same random embeddings (batch x dim, ``classes`` classes of batch / classes each),
    and the ratio to the ``ce`` head (Boudiaf et al.'s cross-entropy: a linear classifier, the unary baseline)."""
    from hydra import compose, initialize_config_dir

    from clusterable.config import CONFIG_DIR, build

    names = names or PAIRWISE_LOSSES
    g = torch.Generator().manual_seed(0)
    embeddings = torch.randn(batch, dim, generator=g).requires_grad_(True)
    labels = torch.arange(batch) % classes
    seconds = {}
    with initialize_config_dir(config_dir=CONFIG_DIR, version_base=None):
        for name in ["ce", *(n for n in names if n != "ce")]:
            node = compose(overrides=[f"+loss={name}"]).loss
            head = build(node, "loss", num_classes=classes, embedding_dim=dim)

            def run(head=head) -> None:
                for _ in range(steps):
                    embeddings.grad = None
                    head.zero_grad(set_to_none=True)
                    head(embeddings, labels)["loss"].backward()

            run()  # warm-up (lazy initialisations, allocator)
            seconds[name] = best_of(run) / steps
    result = {}
    for name, s in seconds.items():
        result[f"pairwise_losses_{name}_s"] = s
        if name != "ce":
            result[f"pairwise_losses_{name}_vs_ce"] = s / seconds["ce"]
    return result
