"""Any loss (and miner) of pytorch-metric-learning (Musgrave et al. 2020) as a loss head, named by its ``_target_``."""

from __future__ import annotations

import difflib
import functools
import inspect
from collections.abc import Callable
from typing import Any

import torch
from torch import nn

from clusterable import checks

# Framework arguments the head gives a PML constructor whose signature names them: PML's name -> ours.
FRAMEWORK_ARGS = {"num_classes": "num_classes", "embedding_size": "embedding_dim"}


class PMLHead(nn.Module):
    """A pytorch-metric-learning loss on the labelled rows of a batch: ``loss = loss_fn(h, y, miner(h, y))``.

    ``loss`` and ``miner`` are callables that build the PML modules, in configs ``_partial_: true`` nodes
    (``loss.loss._target_: pytorch_metric_learning.losses.CircleLoss``), so that any PML class works, named here
    or not. The head calls them once, passing ``num_classes`` (K) and ``embedding_size`` (D) to the classes that
    take them (the proxy and classifier losses: ProxyAnchorLoss, ProxyNCALoss, ArcFaceLoss, NormalizedSoftmaxLoss,
    SoftTripleLoss ...); a config may hold them only as ``null`` placeholders (the config check requires a value
    for a parameter without default). Options are checked against the options of the PML class and its bases
    (PML constructors pass ``**kwargs`` up their class chain), so a typo fails with one line naming the close
    match, and so does a string where PML's default is a number (PML has no type hints for the config check);
    any other ``TypeError`` or ``ValueError`` of the constructor becomes a one-line ``ValueError``.

    Rows with label -1 (unlabelled) are dropped before PML sees the batch; a batch without labelled rows gives
    0 with a gradient path. PML runs in float32 (or float64) with autocast off, also under mixed precision. The
    PML modules are submodules: their parameters (proxies, class weights) train with the head's own learning
    rate ``lr`` (``contracts.OwnLearningRate``; proxy losses usually want a much larger rate than the encoder's).

    Args:
        num_classes: K, at least 2 (the framework's).
        embedding_dim: D, at least 1 (the framework's).
        loss: builds the PML loss (a class or partial); an already built ``nn.Module`` is used as is.
        miner: builds the PML miner, or None (every pair or triplet of the batch).
        lr: learning rate of this head's parameter group, > 0 (None: the optimizer's).

    Attributes:
        loss_fn: the PML loss; miner_fn: the PML miner or None.
    """

    loss_parts = ("loss",)

    def __init__(
        self,
        num_classes: int,
        embedding_dim: int,
        loss: Callable[..., nn.Module],
        miner: Callable[..., nn.Module] | None = None,
        lr: float | None = None,
    ):
        super().__init__()
        self.num_classes = int(checks.at_least("num_classes", num_classes, 2))
        self.embedding_dim = int(checks.at_least("embedding_dim", embedding_dim, 1))
        self.lr = checks.learning_rate(lr)
        framework = {"num_classes": self.num_classes, "embedding_size": self.embedding_dim}
        self.loss_fn = build_pml("loss", loss, framework)
        self.miner_fn = None if miner is None else build_pml("miner", miner, framework)

    @property
    def min_batch_size(self) -> int:
        """``contracts.NeedsBatchOf``: the rows a batch needs for the loss to be anything but 0. A loss with
        learned class vectors (PML's ``WeightRegularizerMixin``: proxies, ArcFace's and NormalizedSoftmax's
        class weights) scores each row against them: 1. A loss of triplets (``TripletMarginLoss``,
        ``MarginLoss``, or any loss behind a ``TripletMarginMiner``) needs an anchor, a positive and a negative:
        3. Every other loss compares the rows of the batch with each other: 2."""
        from pytorch_metric_learning import losses, miners
        from pytorch_metric_learning.losses.mixins import WeightRegularizerMixin

        if isinstance(self.loss_fn, WeightRegularizerMixin):
            return 1
        triplets = isinstance(self.loss_fn, (losses.TripletMarginLoss, losses.MarginLoss))
        return 3 if triplets or isinstance(self.miner_fn, miners.TripletMarginMiner) else 2

    def forward(self, embeddings: torch.Tensor, labels: torch.Tensor, **batch) -> dict[str, torch.Tensor]:
        """PML's loss on the rows with ``labels >= 0``; embeddings (N, D), labels (N,) long."""
        labelled = labels >= 0
        if not bool(labelled.all()):  # a host sync, like PML's own pair mining
            embeddings, labels = embeddings[labelled], labels[labelled]
        if len(labels) == 0:
            return {"loss": (embeddings * 0).sum()}  # 0, still connected to the graph
        # In float32 at least, autocast off: PML masks pairs with its dtype's extremes, which overflow in bfloat16
        # under autocast (NCALoss fails there), and the loss costs little next to the encoder.
        with torch.autocast(embeddings.device.type, enabled=False):
            embeddings = embeddings.to(torch.promote_types(embeddings.dtype, torch.float32))
            indices = None if self.miner_fn is None else self.miner_fn(embeddings, labels)
            return {"loss": self.loss_fn(embeddings, labels, indices)}


def build_pml(name: str, factory: Callable[..., nn.Module], framework: dict[str, int]) -> nn.Module:
    """Call ``factory`` (a PML class or a partial of one) with the framework arguments its class takes.

    Raises ``ValueError`` with one line starting with ``name``: an option that no class in the chain accepts
    (``loss.marginn is not an option of TripletMarginLoss (did you mean margin?); accepted: ...``), a framework
    argument set to something other than null, or what the constructor raised.
    """
    if isinstance(factory, nn.Module):
        return factory
    target = factory.func if isinstance(factory, functools.partial) else factory
    given = dict(factory.keywords) if isinstance(factory, functools.partial) else {}
    title = getattr(target, "__name__", repr(target))
    accepted = options(target)
    if accepted is not None:
        public = sorted(set(accepted) - set(framework))
        for key, value in given.items():
            if key not in accepted:
                close = difflib.get_close_matches(key, public, n=1)
                hint = f" (did you mean {close[0]}?)" if close else ""
                raise ValueError(f"{name}.{key} is not an option of {title}{hint}; accepted: {', '.join(public)}")
            expected = _wrong_type(value, accepted[key])
            if expected is not None:
                raise ValueError(f"{name}.{key} must be {expected}, got {value!r}")
    passed = {}
    for key, value in framework.items():
        if key in given and given[key] is not None:
            raise ValueError(
                f"{name}.{key} is set by the framework ({FRAMEWORK_ARGS[key]}={value}); remove it from the config"
            )
        if key in given or (accepted is not None and key in accepted):
            passed[key] = value
    try:
        return factory(**passed)
    except (TypeError, ValueError) as e:
        message = str(e).splitlines()[0] if str(e) else type(e).__name__
        raise ValueError(f"{name}: {title}: {message}") from None


def options(target: Any) -> dict[str, Any] | None:
    """The keyword options ``target`` accepts with their defaults (``inspect.Parameter.empty`` if none), or None if
    it accepts anything.

    For a class, the named parameters of every ``__init__`` along its method resolution order up to the first one
    without ``**kwargs`` (PML classes pass unknown options to their bases; ``ModuleWithRecords`` ends the chain);
    the most derived class's default wins.
    """
    if not inspect.isclass(target):
        try:
            params = inspect.signature(target).parameters.values()
        except (TypeError, ValueError):
            return None
        if any(p.kind == p.VAR_KEYWORD for p in params):
            return None
        return {p.name: p.default for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}
    found: dict[str, Any] = {}
    for cls in inspect.getmro(target):
        if cls is nn.Module or cls is object:  # nn.Module.__init__(*args, **kwargs) takes no option
            return found
        init = vars(cls).get("__init__")
        if init is None:
            continue
        params = list(inspect.signature(init).parameters.values())[1:]  # without self
        for p in params:
            if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY):
                found.setdefault(p.name, p.default)
        if not any(p.kind == p.VAR_KEYWORD for p in params):
            return found
    return found


def _wrong_type(value: Any, default: Any) -> str | None:
    """What ``value`` should be, judged by the type of the option's default (PML has no type hints), or None.

    Only the unambiguous cases: a string or a boolean where the default is a number, anything but a boolean where
    it is a boolean. A string default proves nothing (``triplets_per_anchor`` takes ``"all"`` or an integer), nor
    does None, and a null value is left to PML.
    """
    if value is None:
        return None
    if isinstance(default, bool):
        return None if isinstance(value, bool) else "a boolean (true or false)"
    if isinstance(default, int | float) and (isinstance(value, bool) or not isinstance(value, int | float)):
        return "a number"
    return None
