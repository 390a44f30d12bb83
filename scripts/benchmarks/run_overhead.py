"""What one single run costs beyond its optimizer steps: the fixed cost of a run (its parts, Trainer, callbacks,
checkpoint and record, less its evaluation, which a stacked member pays too) and the per-step cost of Lightning's
loop over a plain loop, on a tiny model where the steps themselves cost little. The stacked launcher's speed check
(`clusterable.stacked.speed`: `RUN_OVERHEAD_S`, `STEP_OVERHEAD_S`) projects one-by-one training with them.
Reported."""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

import torch

from .common import best_of
from .loops import overhead


def _one_run(run_dir: Path, epochs: int) -> dict:
    """An in-process single run (iris, the default FFNN and head, the classification evaluator), as ``train.py``
    runs it: its wall seconds and its record's timing."""
    from hydra import compose, initialize_config_dir

    from clusterable.config import CONFIG_DIR
    from clusterable.run import RunContext, run

    overrides = [
        "dataset=iris",
        f"trainer.max_epochs={epochs}",
        "logger=none",
        "evaluator=[classification]",
        "trainer.enable_progress_bar=false",
        "torch_threads=1",
    ]
    with initialize_config_dir(config_dir=CONFIG_DIR, version_base="1.3"):
        cfg = compose("train", overrides=overrides, return_hydra_config=True)
    ctx = RunContext.from_hydra(cfg.hydra, run_dir)
    del cfg.hydra
    start = time.perf_counter()
    record = run(cfg, ctx)
    return {"wall_s": time.perf_counter() - start, **record.timing}


def measure() -> dict:
    """The fixed cost: a 1-epoch iris run's wall time less its evaluation and its steps (best of 3, after a
    warm-up run). The per-step cost: one epoch of a 4 -> 8 -> 8 FFNN + CCE through the framework against a plain
    loop, 8,000 rows in batches of 32 (250 steps), their difference per step."""
    with tempfile.TemporaryDirectory() as tmp:
        runs = iter(range(100))
        _one_run(Path(tmp) / "warm", 1)
        records = []

        def once() -> None:
            records.append(_one_run(Path(tmp) / f"r{next(runs)}", 1))

        best_of(once, 3)
    best = min(records, key=lambda r: r["wall_s"])
    steps_s = (best.get("step_s") or 0.0) * (best.get("steps") or 0)
    fixed = best["wall_s"] - best.get("eval_s", 0.0) - steps_s

    from clusterable.heads import CCELoss
    from clusterable.models import FFNN

    g = torch.Generator().manual_seed(0)
    split = {
        "inputs": torch.rand(8_000, 4, generator=g),
        "labels": torch.randint(0, 3, (8_000,), generator=g),
    }
    splits = {"train": split, "val": split, "test": split}

    def make():
        enc = FFNN((4,), hidden=(8, 8))
        return enc, CCELoss(num_classes=3, embedding_dim=enc.embedding_dim)

    plain, framework = overhead(splits, make, 32, 1)
    steps = 8_000 // 32
    return {
        "run_overhead_fixed_s": fixed,
        "run_overhead_step_ms": (framework - plain) / steps * 1e3,
        "run_overhead_run_wall_s": best["wall_s"],
        "run_overhead_eval_s": best.get("eval_s", 0.0),
        "run_overhead_plain_step_ms": plain / steps * 1e3,
    }
