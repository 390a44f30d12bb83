"""The same as train_overhead on the default run (digits, Gaussian-COREL, its epochs). Reported."""

from __future__ import annotations

from pathlib import Path

from .loops import overhead


def measure() -> dict:
    """Seconds of ``src/clusterable/conf/trainer/default.yaml``'s ``max_epochs`` epochs of each path on
    scikit-learn's digits (2x500 FFNN, Gaussian-COREL head, batch 128; ``loops.overhead``) and their ratio,
    framework / plain."""
    from omegaconf import OmegaConf

    from clusterable.config import CONFIG_DIR
    from clusterable.data.memory.digits import read_digits
    from clusterable.heads import GaussianCOREL
    from clusterable.models import FFNN

    cfg = OmegaConf.load(Path(CONFIG_DIR) / "trainer" / "default.yaml")
    splits = read_digits()

    def make():
        enc = FFNN((64,), hidden=(500, 500))
        return enc, GaussianCOREL(num_classes=10, embedding_dim=enc.embedding_dim)

    plain, framework = overhead(splits, make, 128, int(cfg.max_epochs))
    return {
        "train_overhead_digits_ratio": framework / plain,
        "train_overhead_digits_plain_s": plain,
        "train_overhead_digits_framework_s": framework,
        "train_overhead_digits_epochs": int(cfg.max_epochs),
    }
