"""Gather the representation once per split and call every configured evaluator on it.

The trained model is what ``contracts.EmbedsSplits`` says (``module.RepresentationModule`` is one): this module
does not import the LightningModule, which runs the validation evaluators through ``callbacks.ValidationMetrics``
and so imports ``call_evaluators`` from here.
"""

from __future__ import annotations

import copy
import dataclasses
import traceback
from collections.abc import Iterable, Mapping
from pathlib import Path

import torch

from clusterable.contracts import (
    ChecksSplits,
    DataModule,
    EmbedsSplits,
    EvalContext,
    Evaluator,
    PartiallyLabelled,
    RepresentingHead,
    declared_metrics,
)
from clusterable.logs import get_logger

log = get_logger(__name__)

# The floating dtypes that NumPy (bfloat16) or scikit-learn (float16) cannot score: what a model trained with
# `trainer.precision=bf16-true` or `16-true` computes in.
HALF_PRECISIONS = (torch.float16, torch.bfloat16)


class EvaluatorError(ValueError):
    """An evaluator refused its option values or its input; the message names the evaluator."""


@dataclasses.dataclass(frozen=True)
class EvaluatorFailure:
    """Why one evaluator of a run's final evaluation gave no metrics, kept so that the others' metrics are not lost
    with it and the run can be finished later (``clusterable.rescore``).

    Attributes:
        name: the evaluator's name (its key under ``evaluator``).
        stage: the split it failed on; its metrics of earlier splits are dropped too, so that it is re-run whole.
        error: one line naming it: ``evaluator.clustering: n_samples=30 should be >= n_clusters=500``.
        trace: the traceback of an error that is not a ``ValueError`` (a bug rather than input it refuses), for a
            file beside the run; None for a ``ValueError``.
    """

    name: str
    stage: str
    error: str
    trace: str | None = None


@torch.no_grad()
def represent(
    model: EmbedsSplits, data: DataModule, stage: str
) -> tuple[torch.Tensor, torch.Tensor, dict[str, torch.Tensor]]:
    """The encoder output (N, D), the representation the evaluators score (N, D') and the split's per-row
    tensors (on the model's device) of split ``stage``, its rows in order.

    The encoder output is ``model.embed_split`` (the batches of ``data.eval_batches``: in-memory inputs in
    chunks, or decoded and transformed images), as the Lloyd steps of a clustering head see it; the
    representation is ``head.embed(...)`` for a ``RepresentingHead`` (autoencoders, cluster-specific heads),
    which learns it itself, computed in eval mode, else the encoder output.
    """
    out, split = model.embed_split(data, stage)
    head = model.head
    if not isinstance(head, RepresentingHead):
        return out, out, split
    was_training = head.training
    head.eval()
    try:
        return out, head.embed(out, **split), split
    finally:
        head.train(was_training)


@torch.no_grad()
def evaluate(
    module: EmbedsSplits,
    data: DataModule,
    evaluators: Mapping[str, Evaluator],
    stages: Iterable[str] = ("val", "test"),
    run_dir: Path | None = None,
    seed: int = 0,
    keep: str | None = None,
    failures: dict[str, EvaluatorFailure] | None = None,
) -> dict[str, float]:
    """Metrics ``{"{stage}/{name}": value}`` of every evaluator on every stage's split.

    Each evaluator is called as ``fn(embeddings (N, D'), labels (N,), context)`` with one ``EvalContext`` per
    stage (see ``represent`` for what it scores). The training split's representation is computed once for all
    stages (the nearest-class-mean classifier needs it), with the training labels as training saw them
    (``train_labels``) and as read (``train_all_labels``: a ``PartiallyLabelled`` dataset's ``all_labels``).
    ``keep`` (``float16`` or ``float32``) keeps the representations and the head in ``run_dir``
    (``evaluation.saved``) for re-scoring later, before any evaluator runs (so a failing one leaves them too).
    ``failures``: where an evaluator that fails is recorded (``EvaluatorFailure``) while the others go on (a run's
    final evaluation: one evaluator's failure must not cost the others' metrics); None raises instead.

    Raises:
        ValueError: a stage that is not one of ``data.splits``, before anything is computed.
        EvaluatorError: without ``failures``, an evaluator's ValueError (a head it cannot score, data it cannot
            fit), one line naming it: ``evaluator.probes: knn_neighbors must be <= 8, the labelled training rows
            ...``. Options out of range are refused earlier, when the evaluator is built (``config.build``).
    """
    stages = list(stages)
    for stage in stages:
        if stage not in data.splits:
            raise ValueError(f"eval_stages: no split named {stage!r}; the dataset has: {', '.join(data.splits)}")
    module.eval()  # the evaluators call the head (logits, assign, reconstruct) as a trained model
    represented = {stage: represent(module, data, stage) for stage in dict.fromkeys(["train", *stages])}
    if keep is not None and run_dir is not None:
        from clusterable.evaluation import saved

        kept = {stage: (out, rep, split["labels"]) for stage, (out, rep, split) in represented.items()}
        for line in saved.save(Path(run_dir), kept, module.head, keep):
            log.info(line)
    return score(represented, data, evaluators, stages, module.head, run_dir, seed, failures)


def score(
    represented: Mapping[str, tuple[torch.Tensor, torch.Tensor, dict[str, torch.Tensor]]],
    data: DataModule,
    evaluators: Mapping[str, Evaluator],
    stages: Iterable[str],
    head: torch.nn.Module,
    run_dir: Path | None = None,
    seed: int = 0,
    failures: dict[str, EvaluatorFailure] | None = None,
) -> dict[str, float]:
    """The evaluators on representations already computed: split -> (encoder output (N, D), representation
    (N, D'), the split's tensors), the training split's among them; ``evaluate``'s second half, and what
    ``clusterable.rescore`` calls on the representations a run kept.

    ``failures`` (see ``evaluate``): an evaluator that fails on one split is not called on the later ones, and its
    metrics of the earlier ones are dropped, so that what a run keeps of an evaluator is all of it or none."""
    _, train_rep, train = represented["train"]
    train_labels = train["labels"]
    # The labels `dataset.labelled_percent` hid from training, for evaluators that score with every label.
    train_all_labels = (
        data.all_labels("train").to(train_labels.device) if isinstance(data, PartiallyLabelled) else train_labels
    )
    by_evaluator: dict[str, dict[str, float]] = {}
    for stage in stages:
        out, rep, split = represented[stage]
        context = EvalContext(
            stage=stage,
            split=split,
            head=head,
            encoder_output=out,
            train_embeddings=train_rep,
            train_labels=train_labels,
            run_dir=run_dir,
            seed=seed,
            train_all_labels=train_all_labels,
        )
        for name, scores in _call_each(evaluators, rep, split["labels"], context, failures).items():
            by_evaluator.setdefault(name, {}).update(scores)
    failed = failures or {}
    return {key: value for name, scores in by_evaluator.items() if name not in failed for key, value in scores.items()}


def check_splits(
    evaluators: Mapping[str, Evaluator],
    data: DataModule,
    stages: Iterable[str],
    validation: Iterable[str] = (),
) -> None:
    """Check, as soon as the data is loaded, every evaluator that checks its options against the splits it
    will score (``contracts.ChecksSplits``: Recall@K's ``ks`` against the gallery): each against every split of
    ``stages``, and those named in ``validation`` (run after every epoch) against ``val`` too when it has rows.

    Raises:
        EvaluatorError: one line naming the evaluator, e.g. ``evaluator.retrieval: ks must be <= 149 on split
            'test', ...``, before any training.
    """
    stages = list(stages)
    for name, fn in evaluators.items():
        if not isinstance(fn, ChecksSplits):
            continue
        scored = stages + (["val"] if name in validation and "val" not in stages else [])
        for stage in scored:
            split = data.splits.get(stage)
            if split is None or (stage not in stages and len(split["labels"]) == 0):
                continue  # an unknown stage is refused by its own check; an empty val split runs no validation
            try:
                fn.check_split(stage, split)
            except ValueError as e:
                raise EvaluatorError(f"evaluator.{name}: {e}") from None


def check_distinct_keys(evaluators: Mapping[str, Evaluator]) -> None:
    """Refuse, before any training, two evaluators that declare the same key (``metric_names``): one would
    overwrite the other's number in metrics.json (two ``clustering`` nodes, raw and l2-normalised, both give
    ``kmeans/acc``). ``EvaluatorError`` naming both."""
    owner: dict[str, str] = {}
    for name, fn in evaluators.items():
        for key in declared_metrics(fn) or ():
            _claim_key(owner, key, name)


def _claim_key(owner: dict[str, str], key: str, name: str) -> None:
    if owner.setdefault(key, name) != name:
        raise EvaluatorError(
            f"evaluator.{owner[key]} and evaluator.{name} both return {key!r}, and one would overwrite the other's "
            "number: keep one of them in a run"
        )


def call_evaluators(
    evaluators: Mapping[str, Evaluator],
    embeddings: torch.Tensor,
    labels: torch.Tensor,
    context: EvalContext,
    failures: dict[str, EvaluatorFailure] | None = None,
) -> dict[str, float]:
    """``{"{stage}/{key}": value}`` of every evaluator on one split; an evaluator's ValueError becomes an
    ``EvaluatorError`` naming it, as does a key that two evaluators return. With ``failures`` (see ``evaluate``)
    each failure is recorded there instead and the other evaluators go on."""
    scored = _call_each(evaluators, embeddings, labels, context, failures)
    return {key: value for scores in scored.values() for key, value in scores.items()}


def _call_each(
    evaluators: Mapping[str, Evaluator],
    embeddings: torch.Tensor,
    labels: torch.Tensor,
    context: EvalContext,
    failures: dict[str, EvaluatorFailure] | None,
) -> dict[str, dict[str, float]]:
    """Evaluator name -> its ``{"{stage}/{key}": value}`` on one split (``call_evaluators``); an evaluator already
    in ``failures`` is not called again."""
    out: dict[str, dict[str, float]] = {}
    owner: dict[str, str] = {}  # an evaluator that declares no keys is checked here, once it has scored
    embeddings, context = in_float32(embeddings, context)
    for name, fn in evaluators.items():
        if failures is not None and name in failures:
            continue
        try:
            scores = {f"{context.stage}/{key}": float(value) for key, value in fn(embeddings, labels, context).items()}
            claimed = dict(owner)  # its keys are claimed once it has scored them all
            for key in scores:
                _claim_key(claimed, key.removeprefix(f"{context.stage}/"), name)
        except ValueError as e:
            error = str(e) if isinstance(e, EvaluatorError) else f"evaluator.{name}: {e}"
            if failures is None:
                raise EvaluatorError(error) from None
            failures[name] = EvaluatorFailure(name, context.stage, error.splitlines()[0] if error else name)
            continue
        except Exception as e:  # a bug in the evaluator: the run's other evaluators still score
            if failures is None:
                raise
            line = f"evaluator.{name}: {type(e).__name__}: {e}".splitlines()[0]
            failures[name] = EvaluatorFailure(name, context.stage, line, traceback.format_exc())
            continue
        owner, out[name] = claimed, scores
    return out


def in_float32(embeddings: torch.Tensor, context: EvalContext) -> tuple[torch.Tensor, EvalContext]:
    """The representation and context the evaluators see, in float32 where the model computes in a half precision
    (``HALF_PRECISIONS``: ``trainer.precision=bf16-true`` or ``16-true``); as they are otherwise.

    Both the evaluation after training and the validation evaluators during it pass through ``call_evaluators``,
    so this is the one place a run's representation leaves for NumPy (which has no bfloat16) and scikit-learn. An
    evaluator that calls the head (its logits, its clusters, its reconstruction) gives it float32 rows then, so it
    gets a float32 copy of the head: exact (every half value is a float32 one), and the trained module, which the
    validation evaluators score in the middle of training, is left in its precision.
    """
    tensors = [embeddings, context.encoder_output, *context.head.parameters(), *context.head.buffers()]
    if not any(t.dtype in HALF_PRECISIONS for t in tensors):
        return embeddings, context

    def wide(t: torch.Tensor | None) -> torch.Tensor | None:
        return t.float() if t is not None and t.dtype in HALF_PRECISIONS else t

    head = copy.deepcopy(context.head).float()
    context = dataclasses.replace(
        context,
        head=head,
        encoder_output=wide(context.encoder_output),
        train_embeddings=wide(context.train_embeddings),
        split={k: wide(v) for k, v in context.split.items()},
    )
    return wide(embeddings), context
