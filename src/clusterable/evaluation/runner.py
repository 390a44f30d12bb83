"""Gather embeddings once per split and call every configured evaluator on them."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path

import torch

from clusterable.module import RepresentationModule

Evaluator = Callable[..., dict[str, float]]


@torch.no_grad()
def evaluate(
    module: RepresentationModule,
    splits: dict[str, dict[str, torch.Tensor]],
    evaluators: dict[str, Evaluator],
    stages: Iterable[str] = ("val", "test"),
    run_dir: Path | None = None,
    seed: int = 0,
) -> dict[str, float]:
    """Metrics ``{"{stage}/{name}": value}`` of every evaluator on every stage's embeddings.

    The representation evaluators see is the encoder output, or ``head.embed(...)`` for heads that learn it
    themselves (autoencoders, cluster-specific heads). Evaluators also get the head, the split's raw inputs,
    the encoder output (``encoder_output``) and the training split's representation (nearest class mean).
    """
    module.eval()
    head = module.head

    def represent(split: dict[str, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
        out = module.embed(split["inputs"])
        rep = head.embed(out, **split) if hasattr(head, "embed") else out
        return out, rep

    train = splits["train"]
    _, train_rep = represent(train)
    metrics: dict[str, float] = {}
    for stage in stages:
        split = splits[stage]
        out, rep = represent(split)
        context = {
            "stage": stage,
            "head": head,
            "inputs": split["inputs"],
            "split": split,
            "encoder_output": out,
            "train_embeddings": train_rep,
            "train_labels": train["labels"],
            "run_dir": run_dir,
            "seed": seed,
        }
        for fn in evaluators.values():
            for key, value in fn(rep, split["labels"], **context).items():
                metrics[f"{stage}/{key}"] = float(value)
    return metrics
