"""Gather the representation once per split and call every configured evaluator on it."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import torch

from clusterable.contracts import EvalContext, Evaluator, RepresentingHead
from clusterable.module import RepresentationModule


class EvaluatorError(ValueError):
    """An evaluator refused its option values or its input; the message names the evaluator."""


@torch.no_grad()
def evaluate(
    module: RepresentationModule,
    splits: dict[str, dict[str, torch.Tensor]],
    evaluators: dict[str, Evaluator],
    stages: Iterable[str] = ("val", "test"),
    run_dir: Path | None = None,
    seed: int = 0,
) -> dict[str, float]:
    """Metrics ``{"{stage}/{name}": value}`` of every evaluator on every stage's split.

    Each evaluator is called as ``fn(embeddings (N, D'), labels (N,), context)`` with one ``EvalContext`` per
    stage. The representation it scores is the encoder output (N, D), or ``head.embed(...)`` (N, D') for a
    ``RepresentingHead`` (autoencoders, cluster-specific heads), which learns it itself. The training split's
    representation is computed once for all stages (the nearest-class-mean classifier needs it).

    Raises:
        ValueError: a stage that is not one of ``splits``, before anything is computed.
        EvaluatorError: an evaluator's ValueError (an option out of range, a head it cannot score), one line
            naming it: ``evaluator.clustering: kmeans_n_init must be >= 1, got 0``.
    """
    stages = list(stages)
    for stage in stages:
        if stage not in splits:
            raise ValueError(f"eval_stages: no split named {stage!r}; the dataset has: {', '.join(splits)}")
    module.eval()
    head = module.head

    def represent(split: dict[str, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
        out = module.embed(split["inputs"])
        rep = head.embed(out, **split) if isinstance(head, RepresentingHead) else out
        return out, rep

    train = splits["train"]
    _, train_rep = represent(train)
    metrics: dict[str, float] = {}
    for stage in stages:
        split = splits[stage]
        out, rep = represent(split)
        context = EvalContext(
            stage=stage,
            split=split,
            head=head,
            encoder_output=out,
            train_embeddings=train_rep,
            train_labels=train["labels"],
            run_dir=run_dir,
            seed=seed,
        )
        for name, fn in evaluators.items():
            try:
                scores = fn(rep, split["labels"], context)
            except ValueError as e:
                raise EvaluatorError(f"evaluator.{name}: {e}") from None
            for key, value in scores.items():
                metrics[f"{stage}/{key}"] = float(value)
    return metrics
