"""The contracts between the parts of a run, as code: encoders, loss heads, clustering heads and evaluators.

Everything that the LightningModule, the evaluation runner and ``train.py`` expect of a part is written here,
once, as a small ``typing.Protocol``; those modules test ``isinstance(part, Contract)`` instead of probing for
attributes, and ``require`` refuses a part that does not satisfy its contract with one line at build time.
``docs/design.md`` describes the same contracts in prose.

Shapes: N samples, D = ``embedding_dim`` (the encoder's output), K classes, C clusters.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:  # annotations only: `train.py --help` must not pay for importing torch
    from collections.abc import Callable, Iterator, Mapping, Sequence

    from torch import Tensor, nn


class ContractError(TypeError):
    """A part built from the config does not satisfy the contract its config group promises."""


class BatchError(ValueError):
    """A head refuses a training batch it cannot score (bad input, not a bug): the run fails with this one line,
    no traceback (e.g. DSCL on a batch holding a single class)."""


@runtime_checkable
class Encoder(Protocol):
    """``src/clusterable/conf/model``: ``forward(x) -> (N, embedding_dim)`` for inputs ``x`` (N, *input_shape)."""

    embedding_dim: int

    def forward(self, x: Tensor) -> Tensor: ...


@runtime_checkable
class HasEmbeddingLayer(Protocol):
    """An encoder whose last layer maps its features to the embedding: ``embedding_layer`` (an ``nn.Module``;
    None for an encoder configured without one, e.g. a backbone without ``out_dim``). ``trainable:
    embedding_layer`` trains that layer alone, the rest frozen (DSCL's "last layer" fine-tuning)."""

    embedding_layer: nn.Module | None


@runtime_checkable
class HasConstantBuffers(Protocol):
    """A submodule whose buffers named in ``ddp_constant_buffers`` are built identically on every rank (a text
    encoder's frozen word vectors, ~60 MB on AGNews): ``RepresentationModule`` hands their names to
    DistributedDataParallel, which otherwise broadcasts every buffer from rank 0 at each forward."""

    ddp_constant_buffers: tuple[str, ...]


@runtime_checkable
class HasWordVectors(Protocol):
    """A text dataset (``data.text.TextDataModule``): its inputs are (N, L) token ids and ``word_vectors`` (V, D)
    holds one vector per vocabulary id. ``train.py`` passes them as ``word_vectors`` to an encoder whose
    constructor takes them (``models.text``), and refuses such an encoder on any other dataset (and this dataset
    to an encoder that does not take them) in one line."""

    word_vectors: Tensor


@runtime_checkable
class Head(Protocol):
    """``src/clusterable/conf/loss``: ``forward(embeddings (N, D), labels (N,), **batch) -> {part: scalar}``.

    ``loss_parts`` names the scalars ``forward`` returns, ``"loss"`` (the one minimised) first; each is logged as
    ``train/<part>`` once an epoch and checked for divergence. ``labels == -1`` marks an unlabelled sample.
    ``batch`` carries ``inputs``, ``index`` (rows in the split), ``targets`` (if the split has them), ``epoch``
    and ``encoder`` (so a head can embed views it makes itself).
    """

    loss_parts: tuple[str, ...]

    def forward(self, embeddings: Tensor, labels: Tensor, **batch: Any) -> dict[str, Tensor]: ...


@runtime_checkable
class EncodingHead(Protocol):
    """A head that embeds its training batch itself: ``encode(encoder, inputs (N, ...)) -> (N, D)``, called by the
    module instead of ``encoder(inputs)`` in training steps (DSCL's sub-batches: the whole batch embedded without
    activations, then back-propagated sub-batch by sub-batch). ``encoder`` is the module's encoding function."""

    def encode(self, encoder: Callable[[Tensor], Tensor], inputs: Tensor) -> Tensor: ...


@runtime_checkable
class ClassifyingHead(Protocol):
    """A head that predicts classes: ``logits(embeddings (N, D)) -> (N, K)``; the prediction is its argmax.

    The module logs ``val/acc`` for such heads; heads built on class vectors keep them in ``weight`` (K, D).
    """

    def logits(self, embeddings: Tensor) -> Tensor: ...


@runtime_checkable
class RepresentingHead(Protocol):
    """A head that learns the representation itself (autoencoders, cluster-specific models):
    ``embed(embeddings (N, D), **split) -> (N, D')``; evaluators see that instead of the encoder output."""

    def embed(self, embeddings: Tensor, **split: Tensor) -> Tensor: ...


@runtime_checkable
class ClusteringHead(Protocol):
    """A head that alternates gradient steps with a hard cluster assignment of the training split.

    ``init_clusters`` runs once before training and ``update_clusters`` (a Lloyd step) after every training
    epoch, both with the whole training split's encoder output and tensors (``clusterable.callbacks.ClusterUpdates``
    calls them); ``assign`` gives new points their cluster (N,). ``num_clusters`` is C; 1 is the standard (not
    cluster-specific) model, which clustering evaluators score by k-means on its representation instead.
    """

    num_clusters: int

    def init_clusters(self, embeddings: Tensor, **split: Tensor) -> None: ...

    def update_clusters(self, embeddings: Tensor, **split: Tensor) -> None: ...

    def assign(self, embeddings: Tensor, **split: Tensor) -> Tensor: ...


@runtime_checkable
class WatchesDivergence(Protocol):
    """A head that knows how its own loss runs away (Gaussian-COREL below λ = 0.5 is unbounded below).

    ``divergence(history)`` gets the epoch means of the head's loss parts, one dict ``{part: value}`` per finished
    training epoch (the last is the epoch just finished), and returns one line saying what ran away, or None.
    The module raises ``DivergedError`` with it, so the run is recorded like any other diverged run.
    ``unbounded``: the loss is unbounded below in this setting, so a runaway caught by the generic
    ``divergence_limit`` (e.g. inside the first epoch, before ``divergence`` has a history) is a result too.
    """

    unbounded: bool

    def divergence(self, history: Sequence[Mapping[str, float]]) -> str | None: ...


@runtime_checkable
class NeedsBatchOf(Protocol):
    """A head that learns nothing from a training batch of fewer than ``min_batch_size`` rows (a pair loss needs
    two rows, a triplet loss an anchor, a positive and a negative): the run refuses a smaller
    ``dataset.batch_size`` before training (``require_batch_size``), instead of training on a loss that is
    always 0 and recording the run ``ok``."""

    min_batch_size: int


@runtime_checkable
class StacksScalars(Protocol):
    """A head whose number-valued options ``stacked_scalars`` (attribute names, e.g. COREL's ``("lam",)``) may
    differ between the members of a stacked grid (``clusterable.stacked``): its ``forward`` uses them in arithmetic
    only (no ``if``, no Python ``float()``), so the stacked step sets each as a per-member 0-d tensor. A head that
    branches on an option leaves it out (Gaussian-COREL's authors'-code formula tests ``lam == 0.5``): members
    that differ in it run one by one."""

    stacked_scalars: tuple[str, ...]


@runtime_checkable
class ReconstructingHead(Protocol):
    """A head that reconstructs its inputs: ``reconstruct(embeddings (N, D)) -> (N, d)`` (de-noising)."""

    def reconstruct(self, embeddings: Tensor, **batch: Any) -> Tensor: ...


@runtime_checkable
class OwnLearningRate(Protocol):
    """A head whose parameters get their own optimizer group; ``lr`` None means the optimizer's rate."""

    lr: float | None


@dataclass(frozen=True)
class EvalContext:
    """What an evaluator may use besides the embeddings and labels of the split it scores.

    Attributes:
        stage: the split's name (``val``, ``test``, ...); the runner prefixes metric names with it.
        split: the split's tensors: ``inputs`` (N, ...), ``labels`` (N,), ``targets`` if any.
        head: the trained loss head.
        encoder_output: (N, D) the encoder's output; the embeddings are ``head.embed`` of it for a
            ``RepresentingHead``, else the same tensor.
        train_embeddings, train_labels: (M, D'), (M,) the training split's representation and labels; None
            while selecting a model during training (``validation_evaluators``), where they are not computed.
            ``train_labels`` are the labels training saw (``-1`` where ``dataset.labelled_percent`` hid one).
        run_dir: the run directory (plots go there), or None.
        seed: the run's seed, for evaluators that sample or fit.
        train_all_labels: (M,) every training label, before ``dataset.labelled_percent`` hid some; equal to
            ``train_labels`` when none is hidden; None where ``train_labels`` is None.
    """

    stage: str
    split: dict[str, Tensor]
    head: nn.Module
    encoder_output: Tensor
    train_embeddings: Tensor | None
    train_labels: Tensor | None
    run_dir: Path | None = None
    seed: int = 0
    train_all_labels: Tensor | None = None

    @property
    def inputs(self) -> Tensor:
        """(N, ...) the split's inputs; a ValueError for datasets that keep their pixels in a cache on disk."""
        if "inputs" not in self.split:
            raise ValueError(f"needs the inputs of split {self.stage!r} in memory; this dataset streams them")
        return self.split["inputs"]

    def training_split(self, *, all_labels: bool = False) -> tuple[Tensor, Tensor]:
        """(M, D'), (M,) the training representation and labels, or a ValueError where there is none.

        ``all_labels`` gives every training label (``train_all_labels``: for a classifier of the representation
        fitted on all of them, whatever training saw) instead of those training saw (``-1`` where
        ``dataset.labelled_percent`` hid one); ``train_labels`` where the former was not given.
        """
        if self.train_embeddings is None or self.train_labels is None:
            raise ValueError(f"needs the training split's embeddings, which stage {self.stage!r} does not have")
        if all_labels and self.train_all_labels is not None:
            return self.train_embeddings, self.train_all_labels
        return self.train_embeddings, self.train_labels


class Evaluator(Protocol):
    """``src/clusterable/conf/evaluator``: ``(embeddings (N, D'), labels (N,), context) -> {name: value}``.

    Names carry no stage prefix (the runner adds ``"{stage}/"``). An evaluator with options is a small frozen
    dataclass whose fields are its options (the config node sets them, ``check_node`` checks them against the
    constructor, ``__post_init__`` checks their ranges) and whose ``__call__`` scores a split
    (``evaluation.retrieval.RetrievalMetrics``); one without options is a plain function (``_partial_: true``).
    """

    def __call__(self, embeddings: Tensor, labels: Tensor, context: EvalContext) -> dict[str, float]: ...


@runtime_checkable
class ChecksSplits(Protocol):
    """An evaluator whose options depend on the size of the splits it scores (``ks`` of Recall@K against the
    gallery): ``check_split(stage, split)`` gets split ``stage``'s per-row tensors (``labels`` (N,), flags such as
    ``is_query``) as soon as the data is loaded, before training, and raises ``ValueError`` (one line starting
    with the option's name) for an option that split cannot serve."""

    def check_split(self, stage: str, split: Mapping[str, Tensor]) -> None: ...


EVALUATOR_ARGS = ("embeddings", "labels", "context")


@runtime_checkable
class DeclaresMetrics(Protocol):
    """An evaluator that says which keys it returns, without the stage prefix, before it runs:
    ``metric_names() -> ["recall@1/cos", ...]`` (in the order it returns them), so that ``checkpoint.monitor``
    naming a validation evaluator's key is checked before training."""

    def metric_names(self) -> list[str]: ...


def declares(*names: str) -> Callable[[Callable], Callable]:
    """Mark an evaluator written as a function (built with ``_partial_: true``) as declaring the keys it returns:
    ``@declares("acc")`` gives it ``metric_names() -> ["acc"]`` (``DeclaresMetrics``)."""

    def mark(fn: Callable) -> Callable:
        fn.metric_names = lambda: list(names)  # type: ignore[attr-defined]
        return fn

    return mark


def declared_metrics(fn: object) -> list[str] | None:
    """The metric names (no stage prefix) evaluator ``fn`` will return if it declares them
    (``DeclaresMetrics``; a ``functools.partial`` of a function marked with ``declares`` too), else None."""
    import functools

    while isinstance(fn, functools.partial):
        fn = fn.func
    return list(fn.metric_names()) if isinstance(fn, DeclaresMetrics) else None


@runtime_checkable
class DataModule(Protocol):
    """``src/clusterable/conf/dataset``: what the module, the runner and ``train.py`` need of a datamodule besides
    Lightning's loaders. ``splits`` (after ``load()``): name -> per-row tensors (``labels`` (N,), ``inputs`` (N, ...)
    for in-memory datasets, flags such as ``is_query``); ``split(name)`` is one of them, loaded first if need be;
    ``eval_batches(stage, device)`` yields the split's rows in order as batches ready for the encoder (``inputs``
    on ``device``, transformed for evaluation): the one way a whole split is embedded (``EmbedsSplits``);
    ``class_disjoint``: the val/test splits hold classes never seen in training (retrieval benchmarks), so no
    classifier accuracy or loss is computed on them; ``num_classes`` counts the training classes."""

    splits: dict[str, dict[str, Tensor]]
    input_shape: tuple[int, ...]
    num_classes: int
    class_disjoint: bool

    def load(self) -> dict[str, dict[str, Tensor]]: ...

    def split(self, name: str) -> dict[str, Tensor]: ...

    def eval_batches(self, stage: str, device: Any) -> Iterator[dict[str, Tensor]]: ...


@runtime_checkable
class EmbedsSplits(Protocol):
    """The trained model as the evaluation runner and the cluster updates see it (``module.RepresentationModule``):
    its ``head``; ``embed_split(data, stage) -> (encoder output (N, D), split)``, the encoder output of the
    whole split ``stage`` (its rows in order, through ``data.eval_batches``, in eval mode, the previous mode
    restored) and the split's per-row tensors on the model's device; ``eval()`` (``nn.Module``'s) for the
    evaluation after training. The Lloyd steps of a ``ClusteringHead`` and the evaluators embed a split this one
    way, so that both work on datasets whose splits hold no ``inputs`` (image folders)."""

    head: nn.Module

    def embed_split(self, data: DataModule, stage: str) -> tuple[Tensor, dict[str, Tensor]]: ...

    def eval(self) -> Any: ...


@runtime_checkable
class FeedsEncoder(Protocol):
    """A datamodule whose encoder needs more than the inputs: ``encoder_arguments() -> {name: value}`` (a text
    dataset's ``word_vectors`` (V, D)). The run passes them to the encoder's constructor and refuses, in one line,
    an encoder that does not take one of them (it could not read the inputs) or needs one the dataset lacks."""

    def encoder_arguments(self) -> dict[str, Any]: ...


@runtime_checkable
class HasDataNotes(Protocol):
    """A datamodule that says what reading its data did (``notes``: a text corpus's lemmatiser, truncated and
    empty documents, out-of-vocabulary words), recorded as ``data_notes`` in metrics.json."""

    notes: dict[str, Any]


@runtime_checkable
class NamesParts(Protocol):
    """A retrieval-set reader that names the parts its lists split the images into: ``("train", "test")``, or
    In-Shop's ``("train", "query", "gallery")``; the image-folder datamodule's fake source copies them."""

    parts: tuple[str, ...]


@runtime_checkable
class PartiallyLabelled(Protocol):
    """A datamodule that can hide training labels (``dataset.labelled_percent``): ``all_labels(stage) -> (N,)``
    gives every label of split ``stage`` as read, in the split's row order, where its ``labels`` hold ``-1`` for
    the hidden ones. For evaluation only: loss heads see the split's ``labels``."""

    def all_labels(self, stage: str) -> Tensor: ...


def require(part: object, contract: type, what: str) -> None:
    """Raise ``ContractError`` (one line naming ``what`` and the missing members) unless ``part`` satisfies it."""
    if isinstance(part, contract):
        return
    members = [m for m in _members(contract) if not hasattr(part, m)]
    raise ContractError(
        f"{what}: {type(part).__name__} is not a {contract.__name__} (missing: {', '.join(members) or '?'})"
    )


def require_evaluator(fn: object, what: str) -> None:
    """Raise ``ContractError`` unless ``fn`` can be called as ``fn(embeddings, labels, context)``."""
    try:
        params = inspect.signature(fn).parameters  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise ContractError(f"{what}: {fn!r} is not a function") from None
    missing = [name for name in EVALUATOR_ARGS if name not in params]
    if missing:
        raise ContractError(f"{what}: an evaluator takes (embeddings, labels, context); it lacks {', '.join(missing)}")


def require_batch_size(head: object, batch_size: int | None, what: str) -> None:
    """Raise ``ContractError`` (one line naming ``what``) when ``head`` declares a ``min_batch_size``
    (``NeedsBatchOf``) above ``batch_size``, the rows of a training batch; None (a dataset without the option)
    and -1 (the whole split as one batch) pass."""
    if batch_size in (None, -1) or not isinstance(head, NeedsBatchOf) or batch_size >= head.min_batch_size:
        return
    raise ContractError(
        f"dataset.batch_size={batch_size} is too small for {what}: it learns nothing from batches of fewer than "
        f"{head.min_batch_size} rows; raise dataset.batch_size"
    )


def _members(contract: type) -> list[str]:
    names = set(getattr(contract, "__annotations__", {}))
    names |= {n for n, v in vars(contract).items() if callable(v) and not n.startswith("_")}
    return sorted(names)
