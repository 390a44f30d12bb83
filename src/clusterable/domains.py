"""The domain of every argument the framework hands on to another library, declared in one table.

Our own constructors check the ranges of their arguments (``checks.py``). The arguments a config passes through to
torch's optimizers and learning-rate schedulers, Lightning's Trainer, pytorch-metric-learning's losses, miners and
distances, the loggers and Optuna's sweeper reach code that checks their types at most (``config.check_node``), and
often not even that: a momentum of 1.5, a negative triplet margin, ``type_of_triplets: semi-hard`` (PML reads an
unknown type as ``all``), ``logger.wandb.offline=no`` or 64 threads on a 2-core machine trained and were recorded
``ok``, and a sweep carried the mistake into a table. Here each such argument has a declared domain:

    LIBRARY    {callable: {argument: domain}}: every argument of a library callable a config can select
               (tests/test_domains.py holds the table to the libraries' signatures: it names no argument a callable
               lacks and leaves none out, and every callable our configs select is in it)
    COUNTS     {our callable: {argument: domain}}: the thread and worker counts our own parts hand to OpenMP,
               scikit-learn and multiprocessing (their other arguments are checked by their constructors)
    KEYS       {top-level key: domain}: ``torch_threads`` (or ``$CLUSTERABLE_TORCH_THREADS``)
    UNUSABLE   {callable: why a config cannot drive it}: the schedulers that take a Python function
    RELATIONS  {callable: checks of two arguments together}: SGD's Nesterov momentum, the contrastive margins

``problem(cfg)`` walks every node of a config that names a ``_target_`` and returns the first value outside its
domain as one line naming the key, the value and the domain
(``optimizer.momentum must be a number in [0, 1), got 1.5 (torch.optim.SGD's momentum)``), or None.

It runs twice before training. ``hydra_callbacks.DomainCheck`` (a Hydra callback, ``hydra.callbacks`` in
``train.yaml``) refuses a single run's or a sweep's config before Hydra creates any run folder (one ``error:`` line,
exit status 2, nothing recorded), and an Optuna search whose range reaches outside its key's domain
(``search_space_problem``), and the cells sweeper checks each cell's config as it composes it (the whole sweep
refused, exit 2, before any cell runs). ``run.checks.check_config`` runs it again in the run layer, for what reaches
a run another way (an Optuna trial's searched value, a stacked member, a test calling ``run.run``): the run is
recorded ``failed``."""

from __future__ import annotations

import difflib
import inspect
import math
import os
import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from omegaconf import DictConfig, ListConfig, OmegaConf

from clusterable.config import ConfigError
from clusterable.extras import LOGGER_EXTRAS


class DomainError(ConfigError):
    """A value handed on to another library lies outside the domain the table declares for it."""


@dataclass(frozen=True)
class Domain:
    """The values one argument accepts: ``accepts(value)`` on the plain (resolved) value, and its description for
    messages (``describe()``, a phrase that follows "must be": "a number in [0, 1)")."""

    text: Callable[[], str]
    test: Callable[[Any], bool]
    framework: bool = False  # passed by the framework or the library itself: not an option a config sets

    def describe(self) -> str:
        return self.text()

    def accepts(self, value: Any) -> bool:
        return bool(self.test(value))


# ------------------------------------------------------------------------------------------------ domain builders


def _fmt(x: float) -> str:
    return str(x) if isinstance(x, int) else f"{x:g}"


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _bounds(low: float | None, high: float | None, open_low: bool, open_high: bool) -> str:
    if low is not None and high is not None:
        return f" in {'(' if open_low else '['}{_fmt(low)}, {_fmt(high)}{')' if open_high else ']'}"
    if low is not None:
        return f" {'>' if open_low else '>='} {_fmt(low)}"
    if high is not None:
        return f" {'<' if open_high else '<='} {_fmt(high)}"
    return ""


def _within(value: float, low: float | None, high: float | None, open_low: bool, open_high: bool) -> bool:
    above = low is None or (value > low if open_low else value >= low)
    below = high is None or (value < high if open_high else value <= high)
    return above and below


def _or_null(domain: Domain, null: bool) -> Domain:
    if not null:
        return domain
    return Domain(lambda: f"{domain.describe()} or null", lambda v: v is None or domain.accepts(v))


def number(
    low: float | None = None,
    high: float | None = None,
    *,
    open_low: bool = False,
    open_high: bool = False,
    null: bool = False,
) -> Domain:
    """A finite number (an integer counts; a boolean does not) within the bounds given."""
    bounded = low is not None or high is not None
    text = f"a number{_bounds(low, high, open_low, open_high)}" if bounded else "a finite number"
    return _or_null(Domain(lambda: text, lambda v: _is_number(v) and _within(v, low, high, open_low, open_high)), null)


def integer(low: int | None = None, high: int | None = None, *, null: bool = False) -> Domain:
    """A whole number (not a boolean, not a float such as 2.0) within the bounds given."""
    text = f"an integer{_bounds(low, high, False, False)}"
    return _or_null(Domain(lambda: text, lambda v: _is_int(v) and _within(v, low, high, False, False)), null)


def boolean(null: bool = False) -> Domain:
    """true or false (a word such as 'no', or a number, is not read as one)."""
    return _or_null(Domain(lambda: "a boolean (true or false)", lambda v: isinstance(v, bool)), null)


def choice(*values: Any, null: bool = False, among: Callable[[], list[Any]] | None = None) -> Domain:
    """One of ``values`` (or of what ``among()`` lists: a library's registry, read when a value is checked)."""

    def options() -> list[Any]:
        return [*values, *(among() if among else [])]

    def accepts(v: Any) -> bool:  # 1 == True in Python: a boolean is one of the values only as itself
        return any(v == o and type(v) is type(o) for o in options())

    return _or_null(Domain(lambda: "one of " + ", ".join(repr(o) for o in options()), accepts), null)


def text(null: bool = False) -> Domain:
    """Any string (a name, a folder, an identifier the library takes as it is)."""
    return _or_null(Domain(lambda: "a string", lambda v: isinstance(v, str)), null)


def mapping(null: bool = False) -> Domain:
    """A mapping of settings (the library reads its keys)."""
    return _or_null(Domain(lambda: "a mapping", lambda v: isinstance(v, Mapping)), null)


def listed(item: Domain, length: int | None = None, *, null: bool = False) -> Domain:
    """A list of ``length`` values (any length >= 1 if None), each in ``item``."""
    count = f"{length} values" if length else "values"

    def accepts(v: Any) -> bool:
        return (
            isinstance(v, list | tuple)
            and (len(v) == length if length else len(v) >= 1)
            and all(item.accepts(x) for x in v)
        )

    return _or_null(Domain(lambda: f"a list of {count}, each {item.describe()}", accepts), null)


def one_of(*domains: Domain) -> Domain:
    """A value in any of ``domains``."""
    return Domain(lambda: ", or ".join(d.describe() for d in domains), lambda v: any(d.accepts(v) for d in domains))


def predicate(description: str, test: Callable[[Any], bool]) -> Domain:
    """A domain no builder above says: its description and its test."""
    return Domain(lambda: description, test)


def node(base: str | None = None, *, null: bool = True) -> Domain:
    """A nested config node naming a class with ``_target_`` (a subclass of ``base``, a dotted path, if given):
    the part the library takes as an object (a PML distance, a Lightning strategy)."""
    what = f"a subclass of {base}" if base else "a class or function"

    def accepts(v: Any) -> bool:
        if not isinstance(v, Mapping) or not isinstance(v.get("_target_"), str):
            return False
        if base is None:
            return True
        target, parent = _import(v["_target_"]), _import(base)
        return inspect.isclass(target) and inspect.isclass(parent) and issubclass(target, parent)

    return _or_null(Domain(lambda: f"a config node naming {what} (_target_: ...)", accepts), null)


def framework(what: str, placeholder: bool = False) -> Domain:
    """An argument the framework passes itself (``what``): left out of the config, or, for a ``placeholder``
    (a PML class's ``num_classes``, which the config check needs a value for), null."""
    if placeholder:
        return Domain(lambda: f"null (a placeholder: {what})", lambda v: v is None, framework=True)
    return Domain(lambda: f"left out of the config ({what})", lambda v: False, framework=True)


def fixed(value: Any, why: str) -> Domain:
    """An argument a config may only leave at ``value`` (``why``: the library sets it itself, or it takes an
    object no config can write)."""
    return Domain(lambda: f"{_yaml(value)} ({why})", lambda v: v == value and type(v) is type(value))


def _yaml(value: Any) -> str:
    """A value as a config writes it: null, true, false, a number, a quoted string."""
    if value is None or isinstance(value, bool):
        return {None: "null", True: "true", False: "false"}[value]
    return repr(value)


def checked_by(who: str) -> Domain:
    """An argument its callable checks itself with a message that knows more than a domain could say (the
    sweepers' grids and search spaces): declared here, and left to ``who``."""
    return Domain(lambda: f"what {who} accepts", lambda v: True)


def available_cores() -> int:
    """The cores this process may run on (its CPU affinity where the system says, else all of the machine's)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def cores(low: int = 1, *, null: bool = False) -> Domain:
    """A count of threads or processes: an integer from ``low`` to the cores this process may use (more contend
    for the same cores: an epoch with 2 threads on 2 busy cores ran 18x slower than with 1)."""

    def describe() -> str:
        return f"an integer in [{low}, {available_cores()}] (the cores this process may use)"

    return _or_null(Domain(describe, lambda v: _is_int(v) and low <= v <= available_cores()), null)


# ------------------------------------------------------------------------------------------------ shared domains

UNIT = number(0, 1, open_high=True)  # a decay or momentum coefficient: 1 would never forget
POSITIVE = number(0, open_low=True)
NON_NEGATIVE = number(0)
BETAS = listed(UNIT, 2)
PARAMS = framework("the framework passes the model's parameter groups")
PML_FRAMEWORK = {
    "num_classes": framework("the head passes the run's num_classes", placeholder=True),
    "embedding_size": framework("the head passes the encoder's embedding_dim", placeholder=True),
}


def _optimizer(**own: Domain) -> dict[str, Domain]:
    """An optimizer's arguments: its parameters (the framework's), the learning rate, and ``own``."""
    return {"params": PARAMS, "lr": POSITIVE, **own}


# torch's flags for its implementations: whichever is set, the same arithmetic.
IMPLEMENTATION = {"foreach": boolean(null=True), "differentiable": boolean(), "capturable": boolean()}
ADAM_LIKE = {
    "betas": BETAS,
    "eps": POSITIVE,
    "weight_decay": NON_NEGATIVE,
    "maximize": boolean(),
    **IMPLEMENTATION,
}


def _scheduler(**own: Domain) -> dict[str, Domain]:
    """A torch scheduler's arguments: the optimizer (the framework's), ``last_epoch`` (a fresh run's), ``own``."""
    return {
        "optimizer": framework("the framework passes the run's optimizer"),
        "last_epoch": fixed(-1, "a run starts its schedule at step 0"),
        **own,
    }


MOMENTUM_RANGE = {"base_momentum": UNIT, "max_momentum": UNIT, "cycle_momentum": boolean()}
LEARNING_RATES = one_of(POSITIVE, listed(POSITIVE))  # one rate, or one per parameter group


def _pml_loss(*, weights: bool = False, pairs: bool = False, **own: Domain) -> dict[str, Domain]:
    """A pytorch-metric-learning loss's arguments: ``own`` and those its base classes take through ``**kwargs``
    (the distance, reducer and embedding regulariser; with ``weights``, the class weights' regulariser and
    initialiser; with ``pairs``, the pair loss's ``mat_based_loss``, which the class sets itself)."""
    base = {
        "distance": node("pytorch_metric_learning.distances.BaseDistance"),
        "reducer": node("pytorch_metric_learning.reducers.BaseReducer"),
        "embedding_regularizer": node("pytorch_metric_learning.regularizers.BaseRegularizer"),
        "embedding_reg_weight": NON_NEGATIVE,
        "collect_stats": boolean(null=True),
    }
    if weights:
        base |= {
            **PML_FRAMEWORK,
            "weight_regularizer": node("pytorch_metric_learning.regularizers.BaseRegularizer"),
            "weight_reg_weight": NON_NEGATIVE,
            "weight_init_func": node(),
        }
    if pairs:
        base["mat_based_loss"] = framework("the loss sets it itself")
    return base | own


def _pml_miner(**own: Domain) -> dict[str, Domain]:
    return {
        "distance": node("pytorch_metric_learning.distances.BaseDistance"),
        "collect_stats": boolean(null=True),
        **own,
    }


DISTANCE = {
    "normalize_embeddings": boolean(),
    "p": POSITIVE,  # the Lp norm's order
    "power": POSITIVE,
    "collect_stats": boolean(null=True),
}
STRATEGIES = ("easy", "semihard", "hard", "all")
MARGINS_RANGE = listed(number(), 2, null=True)


def _devices(value: Any) -> bool:
    """Lightning's ``devices``: a count (>= 1, or -1 for all), a list of distinct indices, 'auto', or such a
    count or list as a string."""
    if _is_int(value):
        return value >= 1 or value == -1
    if isinstance(value, list | tuple):
        return bool(value) and all(_is_int(i) and i >= 0 for i in value) and len(set(value)) == len(value)
    if isinstance(value, str):
        text_ = value.strip()
        if text_ == "auto" or re.fullmatch(r"-1|[1-9]\d*", text_):
            return True
        indices = [i.strip() for i in text_.split(",") if i.strip()]
        return "," in text_ and bool(indices) and all(i.isdigit() for i in indices)
    return False


def _duration(value: Any) -> bool:
    """Lightning's ``max_time``: 'DD:HH:MM:SS', or {days, hours, minutes, seconds} of whole numbers >= 0."""
    if isinstance(value, str):
        return re.fullmatch(r"\d+:\d{1,2}:\d{1,2}:\d{1,2}", value.strip()) is not None
    if isinstance(value, Mapping):
        keys = {"days", "hours", "minutes", "seconds"}
        return bool(value) and set(value) <= keys and all(_is_int(v) and v >= 0 for v in value.values())
    return False


DURATION = predicate("a duration 'DD:HH:MM:SS' or {days, hours, minutes, seconds}", _duration)
BATCH_LIMIT = one_of(integer(0), number(0, 1), fixed(None, "all"))  # batches, or a share of them


def _accelerators() -> list[str]:
    from lightning.pytorch.accelerators import AcceleratorRegistry

    return sorted({"gpu", *AcceleratorRegistry.available_accelerators()})


def _strategies() -> list[str]:
    from lightning.pytorch.strategies import StrategyRegistry

    return sorted(StrategyRegistry.available_strategies())


def _precisions() -> list[Any]:
    """Lightning's precision values, read off the Trainer's type hint."""
    import typing

    import lightning

    hint = typing.get_type_hints(lightning.Trainer.__init__)["precision"]
    values: list[Any] = []
    for arg in typing.get_args(hint):
        values += [a for a in typing.get_args(arg) if a is not None] if typing.get_origin(arg) else []
    return values


OPTUNA_OWN = checked_by("the Optuna sweeper (optuna_sweeper.OptunaSweeper.setup)")

# ------------------------------------------------------------------------------------------------ the table

LIBRARY: dict[str, dict[str, Domain]] = {
    # torch.optim: every optimizer (a config names any of them: optimizer._target_=torch.optim.RMSprop).
    "torch.optim.SGD": _optimizer(
        momentum=UNIT,
        dampening=number(0, 1),
        weight_decay=NON_NEGATIVE,
        nesterov=boolean(),
        maximize=boolean(),
        foreach=boolean(null=True),
        differentiable=boolean(),
        fused=boolean(null=True),
    ),
    "torch.optim.Adam": _optimizer(
        **ADAM_LIKE, amsgrad=boolean(), fused=boolean(null=True), decoupled_weight_decay=boolean()
    ),
    "torch.optim.AdamW": _optimizer(**ADAM_LIKE, amsgrad=boolean(), fused=boolean(null=True)),
    "torch.optim.Adamax": _optimizer(**ADAM_LIKE),
    "torch.optim.NAdam": _optimizer(**ADAM_LIKE, momentum_decay=NON_NEGATIVE, decoupled_weight_decay=boolean()),
    "torch.optim.RAdam": _optimizer(**ADAM_LIKE, decoupled_weight_decay=boolean()),
    "torch.optim.SparseAdam": _optimizer(betas=BETAS, eps=POSITIVE, maximize=boolean()),
    "torch.optim.Adagrad": _optimizer(
        lr_decay=NON_NEGATIVE,
        weight_decay=NON_NEGATIVE,
        initial_accumulator_value=NON_NEGATIVE,
        eps=POSITIVE,
        maximize=boolean(),
        foreach=boolean(null=True),
        differentiable=boolean(),
        fused=boolean(null=True),
    ),
    "torch.optim.Adadelta": _optimizer(
        rho=number(0, 1), eps=POSITIVE, weight_decay=NON_NEGATIVE, maximize=boolean(), **IMPLEMENTATION
    ),
    "torch.optim.Adafactor": _optimizer(
        beta2_decay=number(high=0),
        eps=listed(one_of(NON_NEGATIVE, fixed(None, "the dtype's own")), 2),
        d=number(1),
        weight_decay=NON_NEGATIVE,
        foreach=boolean(null=True),
        maximize=boolean(),
    ),
    "torch.optim.ASGD": _optimizer(
        lambd=NON_NEGATIVE,
        alpha=NON_NEGATIVE,
        t0=NON_NEGATIVE,
        weight_decay=NON_NEGATIVE,
        maximize=boolean(),
        **IMPLEMENTATION,
    ),
    "torch.optim.LBFGS": _optimizer(
        max_iter=integer(1),
        max_eval=integer(1, null=True),
        tolerance_grad=NON_NEGATIVE,
        tolerance_change=NON_NEGATIVE,
        history_size=integer(1),
        line_search_fn=choice("strong_wolfe", null=True),
        maximize=boolean(),
    ),
    "torch.optim.Muon": _optimizer(
        weight_decay=NON_NEGATIVE,
        momentum=UNIT,
        nesterov=boolean(),
        ns_coefficients=listed(number(), 3),
        eps=POSITIVE,
        ns_steps=integer(1, 99),
        adjust_lr_fn=choice("original", "match_rms_adamw", "spectral_unclamped", null=True),
    ),
    "torch.optim.RMSprop": _optimizer(
        alpha=UNIT,
        eps=POSITIVE,
        weight_decay=NON_NEGATIVE,
        momentum=UNIT,
        centered=boolean(),
        maximize=boolean(),
        **IMPLEMENTATION,
    ),
    "torch.optim.Rprop": _optimizer(
        etas=predicate(
            "a list [etaminus, etaplus] with 0 < etaminus < 1 < etaplus",
            lambda v: isinstance(v, list | tuple) and len(v) == 2 and all(map(_is_number, v)) and 0 < v[0] < 1 < v[1],
        ),
        step_sizes=listed(POSITIVE, 2),
        maximize=boolean(),
        **IMPLEMENTATION,
    ),
    # Learning-rate schedules (the `scheduler` group), stepped after every optimizer step: ours, and torch's that
    # take plain values (the framework passes total_steps to those that take it).
    "clusterable.schedules.warmcos": {
        "optimizer": framework("the framework passes the run's optimizer"),
        "total_steps": framework("the framework passes the run's optimizer steps"),
        "warmup_steps": integer(0),
    },
    "torch.optim.lr_scheduler.StepLR": _scheduler(step_size=integer(1), gamma=POSITIVE),
    "torch.optim.lr_scheduler.MultiStepLR": _scheduler(
        milestones=predicate(
            "a list of increasing integers >= 1 (optimizer steps)",
            lambda v: (
                isinstance(v, list | tuple)
                and bool(v)
                and all(_is_int(m) and m >= 1 for m in v)
                and list(v) == sorted(set(v))
            ),
        ),
        gamma=POSITIVE,
    ),
    "torch.optim.lr_scheduler.ConstantLR": _scheduler(factor=number(0, 1, open_low=True), total_iters=integer(0)),
    "torch.optim.lr_scheduler.LinearLR": _scheduler(
        start_factor=number(0, 1, open_low=True), end_factor=number(0, 1), total_iters=integer(0)
    ),
    "torch.optim.lr_scheduler.ExponentialLR": _scheduler(gamma=POSITIVE),
    "torch.optim.lr_scheduler.PolynomialLR": _scheduler(total_iters=integer(0), power=NON_NEGATIVE),
    "torch.optim.lr_scheduler.CosineAnnealingLR": _scheduler(T_max=integer(1), eta_min=NON_NEGATIVE),
    "torch.optim.lr_scheduler.CosineAnnealingWarmRestarts": _scheduler(
        T_0=integer(1), T_mult=integer(1), eta_min=NON_NEGATIVE
    ),
    "torch.optim.lr_scheduler.CyclicLR": _scheduler(
        base_lr=LEARNING_RATES,
        max_lr=LEARNING_RATES,
        step_size_up=integer(1),
        step_size_down=integer(1, null=True),
        mode=choice("triangular", "triangular2", "exp_range"),
        gamma=POSITIVE,
        scale_fn=fixed(None, "a Python function, which a config cannot give; mode chooses one"),
        scale_mode=choice("cycle", "iterations"),
        **MOMENTUM_RANGE,
    ),
    "torch.optim.lr_scheduler.OneCycleLR": _scheduler(
        max_lr=LEARNING_RATES,
        total_steps=framework("the framework passes the run's optimizer steps"),
        epochs=framework("the framework passes total_steps instead", placeholder=True),
        steps_per_epoch=framework("the framework passes total_steps instead", placeholder=True),
        pct_start=number(0, 1, open_low=True, open_high=True),
        anneal_strategy=choice("cos", "linear"),
        div_factor=POSITIVE,
        final_div_factor=POSITIVE,
        three_phase=boolean(),
        **MOMENTUM_RANGE,
    ),
    # Lightning's Trainer (the `trainer` group).
    "lightning.Trainer": {
        "accelerator": one_of(
            choice("auto", among=_accelerators),
            node("lightning.pytorch.accelerators.Accelerator", null=False),
        ),
        "strategy": one_of(
            choice("auto", among=_strategies), node("lightning.pytorch.strategies.Strategy", null=False)
        ),
        "devices": predicate(
            "a number of devices (>= 1, or -1 for all), a list of distinct device indices, 'auto', "
            "or such a number or list as a string ('2', '0,1')",
            _devices,
        ),
        "num_nodes": integer(1),
        "precision": choice(among=_precisions, null=True),
        "logger": framework("the framework passes the loggers of the logger group"),
        "callbacks": framework("the framework passes its checkpoint and timing callbacks"),
        "fast_dev_run": one_of(boolean(), integer(0)),
        # Ours: a run trains for at least one epoch (trainer.max_steps limits it further; 0 steps: untrained).
        "max_epochs": integer(1),
        "min_epochs": integer(0, null=True),
        "max_steps": integer(-1),
        "min_steps": integer(0, null=True),
        "max_time": _or_null(DURATION, True),
        "limit_train_batches": BATCH_LIMIT,
        "limit_val_batches": BATCH_LIMIT,
        "limit_test_batches": BATCH_LIMIT,
        "limit_predict_batches": BATCH_LIMIT,
        "overfit_batches": one_of(integer(0), number(0, 1)),
        "val_check_interval": one_of(integer(1), number(0, 1, open_low=True), DURATION, fixed(None, "every epoch")),
        "check_val_every_n_epoch": integer(1, null=True),
        "num_sanity_val_steps": integer(-1, null=True),
        "log_every_n_steps": integer(0, null=True),
        "enable_checkpointing": boolean(null=True),
        "enable_progress_bar": boolean(null=True),
        "enable_model_summary": boolean(null=True),
        "accumulate_grad_batches": integer(1),
        "gradient_clip_val": number(0, null=True),
        "gradient_clip_algorithm": choice("norm", "value", null=True),
        "deterministic": one_of(boolean(null=True), choice("warn")),
        "benchmark": boolean(null=True),
        "inference_mode": boolean(),
        "use_distributed_sampler": boolean(),
        "profiler": one_of(
            choice("simple", "advanced", "pytorch", "xla", null=True),
            node("lightning.pytorch.profilers.Profiler", null=False),
        ),
        "detect_anomaly": boolean(),
        "barebones": boolean(),
        "plugins": one_of(node(), listed(node(null=False))),
        "sync_batchnorm": boolean(),
        "reload_dataloaders_every_n_epochs": integer(0),
        "default_root_dir": framework("the framework passes the run's folder"),
        "enable_autolog_hparams": boolean(),
        "model_registry": text(null=True),
    },
    # pytorch-metric-learning: the losses and miners our configs select (loss/*.yaml, loss/metric/*.yaml, and
    # CircleLoss, loss/pml.yaml's example), every miner, and the distances a loss or miner takes.
    "pytorch_metric_learning.losses.ContrastiveLoss": _pml_loss(pairs=True, pos_margin=number(), neg_margin=number()),
    "pytorch_metric_learning.losses.TripletMarginLoss": _pml_loss(
        margin=NON_NEGATIVE,
        swap=boolean(),
        smooth_loss=boolean(),
        triplets_per_anchor=one_of(choice("all"), integer(1)),
    ),
    "pytorch_metric_learning.losses.MultiSimilarityLoss": _pml_loss(
        pairs=True, alpha=POSITIVE, beta=POSITIVE, base=number()
    ),
    "pytorch_metric_learning.losses.SupConLoss": _pml_loss(pairs=True, temperature=POSITIVE),
    "pytorch_metric_learning.losses.NCALoss": _pml_loss(softmax_scale=POSITIVE),
    "pytorch_metric_learning.losses.ProxyNCALoss": _pml_loss(weights=True, softmax_scale=POSITIVE),
    "pytorch_metric_learning.losses.ProxyAnchorLoss": _pml_loss(weights=True, margin=NON_NEGATIVE, alpha=POSITIVE),
    # ArcFace's margin is an angle in degrees, added to the angle between a row and its class.
    "pytorch_metric_learning.losses.ArcFaceLoss": _pml_loss(
        weights=True, margin=number(0, 180, open_high=True), scale=POSITIVE
    ),
    "pytorch_metric_learning.losses.NormalizedSoftmaxLoss": _pml_loss(weights=True, temperature=POSITIVE),
    # Circle loss's relaxation m may be negative (Sun et al. 2020 sweep m from -0.2).
    "pytorch_metric_learning.losses.CircleLoss": _pml_loss(pairs=True, m=number(), gamma=POSITIVE),
    "pytorch_metric_learning.miners.TripletMarginMiner": _pml_miner(
        margin=NON_NEGATIVE, type_of_triplets=choice("all", "hard", "semihard", "easy")
    ),
    "pytorch_metric_learning.miners.MultiSimilarityMiner": _pml_miner(epsilon=NON_NEGATIVE),
    "pytorch_metric_learning.miners.PairMarginMiner": _pml_miner(pos_margin=number(), neg_margin=number()),
    "pytorch_metric_learning.miners.AngularMiner": _pml_miner(angle=number(0, 180, open_low=True, open_high=True)),
    "pytorch_metric_learning.miners.BatchEasyHardMiner": _pml_miner(
        pos_strategy=choice(*STRATEGIES),
        neg_strategy=choice(*STRATEGIES),
        allowed_pos_range=MARGINS_RANGE,
        allowed_neg_range=MARGINS_RANGE,
    ),
    "pytorch_metric_learning.miners.BatchHardMiner": _pml_miner(
        pos_strategy=choice(*STRATEGIES),
        neg_strategy=choice(*STRATEGIES),
        allowed_pos_range=MARGINS_RANGE,
        allowed_neg_range=MARGINS_RANGE,
    ),
    "pytorch_metric_learning.miners.DistanceWeightedMiner": _pml_miner(
        cutoff=NON_NEGATIVE, nonzero_loss_cutoff=POSITIVE
    ),
    "pytorch_metric_learning.miners.HDCMiner": _pml_miner(filter_percentage=number(0, 1, open_low=True)),
    "pytorch_metric_learning.miners.UniformHistogramMiner": _pml_miner(
        num_bins=integer(1), pos_per_bin=integer(1), neg_per_bin=integer(1)
    ),
    "pytorch_metric_learning.miners.EmbeddingsAlreadyPackagedAsTriplets": _pml_miner(),
    # A similarity sets is_inverted itself (true): a config that flips it would rank pairs backwards.
    "pytorch_metric_learning.distances.LpDistance": DISTANCE
    | {"is_inverted": fixed(False, "the distance sets it itself")},
    "pytorch_metric_learning.distances.SNRDistance": DISTANCE
    | {"is_inverted": fixed(False, "the distance sets it itself")},
    "pytorch_metric_learning.distances.CosineSimilarity": DISTANCE
    | {"is_inverted": fixed(True, "the similarity sets it itself")},
    "pytorch_metric_learning.distances.DotProductSimilarity": DISTANCE
    | {"is_inverted": fixed(True, "the similarity sets it itself")},
    # Loggers (the `logger` group).
    "lightning.pytorch.loggers.CSVLogger": {
        "save_dir": text(),
        "name": text(null=True),
        "version": one_of(integer(0, null=True), text()),
        "prefix": text(),
        "flush_logs_every_n_steps": integer(1),
    },
    # W&B: WandbLogger's own arguments and wandb.init's, which it passes on (KWARGS_TO).
    "lightning.pytorch.loggers.WandbLogger": {
        "name": text(null=True),
        "save_dir": text(),
        "version": text(null=True),
        "offline": boolean(),
        "dir": text(null=True),
        "id": text(null=True),
        "anonymous": boolean(null=True),
        "project": text(null=True),
        "log_model": one_of(boolean(), choice("all")),
        "experiment": fixed(None, "a live W&B run, which a config cannot give"),
        "prefix": text(),
        "checkpoint_name": text(null=True),
        "add_file_policy": choice("mutable", "immutable"),
        "entity": text(null=True),
        "notes": text(null=True),
        "tags": listed(text(), null=True),
        "config": one_of(mapping(null=True), text()),
        "config_exclude_keys": listed(text(), null=True),
        "config_include_keys": listed(text(), null=True),
        "allow_val_change": boolean(null=True),
        "group": text(null=True),
        "job_type": text(null=True),
        "mode": choice("online", "offline", "disabled", "shared", null=True),
        "force": boolean(null=True),
        "reinit": one_of(boolean(null=True), choice("default", "return_previous", "finish_previous", "create_new")),
        "resume": one_of(boolean(null=True), choice("allow", "never", "must", "auto")),
        "resume_from": text(null=True),
        "fork_from": text(null=True),
        "save_code": boolean(null=True),
        "tensorboard": boolean(null=True),
        "sync_tensorboard": boolean(null=True),
        "monitor_gym": boolean(null=True),
        "settings": mapping(null=True),
    },
    # The other loggers of the logger group (their libraries are extras: the run's check names what to install).
    "lightning.pytorch.loggers.TensorBoardLogger": {
        "save_dir": text(),
        "name": text(null=True),
        "version": one_of(integer(0, null=True), text()),
        "log_graph": boolean(),
        "default_hp_metric": boolean(),
        "prefix": text(),
        "sub_dir": text(null=True),
        "root_dir": fixed(None, "save_dir sets it"),
    },
    "lightning.pytorch.loggers.MLFlowLogger": {
        "experiment_name": text(),
        "run_name": text(null=True),
        "tracking_uri": text(null=True),
        "tags": mapping(null=True),
        "save_dir": text(null=True),
        "log_model": one_of(boolean(), choice("all")),
        "prefix": text(),
        "artifact_location": text(null=True),
        "run_id": text(null=True),
        "synchronous": boolean(null=True),
    },
    # The callbacks group (lightning-hydra-template's names).
    "lightning.pytorch.callbacks.EarlyStopping": {
        "monitor": text(),
        "min_delta": number(0),
        "patience": integer(1),
        "verbose": boolean(),
        "mode": choice("min", "max"),
        "strict": boolean(),
        "check_finite": boolean(),
        "stopping_threshold": number(null=True),
        "divergence_threshold": number(null=True),
        "check_on_train_epoch_end": boolean(null=True),
        "log_rank_zero_only": boolean(),
    },
    "lightning.pytorch.callbacks.LearningRateMonitor": {
        "logging_interval": choice("step", "epoch", null=True),
        "log_momentum": boolean(),
        "log_weight_decay": boolean(),
    },
    "lightning.pytorch.callbacks.RichProgressBar": {
        "refresh_rate": integer(0),
        "leave": boolean(),
        "theme": fixed(None, "a RichProgressBarTheme object, which a config cannot give"),
        "console_kwargs": mapping(null=True),
    },
    "lightning.pytorch.callbacks.RichModelSummary": {
        "max_depth": integer(-1),
    },
    "lightning.pytorch.callbacks.StochasticWeightAveraging": {
        "swa_lrs": one_of(number(0, open_low=True), listed(number(0, open_low=True))),
        "swa_epoch_start": one_of(integer(1), number(0, 1, open_low=True, open_high=True)),
        "annealing_epochs": integer(1),
        "annealing_strategy": choice("cos", "linear"),
        "avg_fn": fixed(None, "a function, which a config cannot give"),
        "device": text(null=True),
    },
    # The sweepers (hydra/sweeper): the cells sweeper's batch size, and Optuna's settings. The Optuna sweeper refuses
    # its trial and job counts, direction, sampler, pruner and flag itself, in one line before any trial; the seed
    # (numpy's range: TPE draws with it), the storage and the study's name are the table's.
    "hydra_plugins.clusterable_sweeper.cell_sweeper.CellSweeper": {
        "max_batch_size": integer(1, null=True),
        "params": checked_by("Hydra's override parser"),
        "grids": checked_by("cell_sweeper.checked_grids"),
    },
    "hydra_plugins.clusterable_sweeper.optuna_sweeper.OptunaSweeper": {
        "search_space": checked_by("optuna_sweeper.distributions"),
        "n_trials": OPTUNA_OWN,
        "n_jobs": OPTUNA_OWN,
        "direction": OPTUNA_OWN,
        "sampler": OPTUNA_OWN,
        "seed": integer(0, 2**32 - 1),
        "storage": text(null=True),
        "study_name": text(null=True),
        "params": checked_by("Hydra's override parser"),
        "allow_test_objective": OPTUNA_OWN,
        "pruner": OPTUNA_OWN,
    },
}

# Callables that take **kwargs and pass them to another callable, whose arguments the table declares with theirs.
KWARGS_TO = {"lightning.pytorch.loggers.WandbLogger": "wandb.init"}

# The thread and worker counts our own parts hand on (to OpenMP and BLAS through threadpoolctl, to scikit-learn's
# n_jobs, to a multiprocessing pool); their other arguments are checked by their constructors.
COUNTS: dict[str, dict[str, Domain]] = {
    "clusterable.evaluation.clustering.ClusterMetrics": {"num_threads": cores(null=True)},
    "clusterable.evaluation.csrl.CSRLClustering": {"num_threads": cores(null=True)},
    "clusterable.evaluation.latent_plot.LatentPlot": {"num_threads": cores(null=True)},
    "clusterable.evaluation.probes.Probes": {"num_threads": cores()},
    "clusterable.data.folders.ImageDataModule": {"decode_workers": cores(0)},
}

# Top-level keys handed on: torch.set_num_threads.
KEYS: dict[str, Domain] = {"torch_threads": cores(null=True)}
THREADS_ENV = "CLUSTERABLE_TORCH_THREADS"  # train.yaml reads torch_threads from it

# Library callables a config selects but cannot drive: each needs a Python object no YAML value gives.
UNUSABLE: dict[str, str] = {
    "torch.optim.lr_scheduler.LambdaLR": "its lr_lambda is a Python function; write a schedule function such as "
    "clusterable.schedules.warmcos",
    "torch.optim.lr_scheduler.MultiplicativeLR": "its lr_lambda is a Python function; write a schedule function "
    "such as clusterable.schedules.warmcos",
    "torch.optim.lr_scheduler.SequentialLR": "it chains scheduler objects; write a schedule function that does",
    "torch.optim.lr_scheduler.ChainedScheduler": "it chains scheduler objects; write a schedule function that does",
    "torch.optim.lr_scheduler.ReduceLROnPlateau": "it steps on a validation metric, and the run steps its schedule "
    "after every optimizer step",
}


# ------------------------------------------------------------------------------------------------ relations


def _contrastive_margins(values: Mapping[str, Any], title: str) -> str | None:
    """A pair loss's (or miner's) margins must not cross: with a distance (PML's default) positives are pulled
    below ``pos_margin`` and negatives pushed beyond ``neg_margin``, so ``pos_margin < neg_margin``; with a
    similarity (``CosineSimilarity``, ``DotProductSimilarity``) the other way round. Crossed, a pair between the
    two margins counts as close and as far at once, and the loss cannot separate it."""
    pos, neg = values.get("pos_margin"), values.get("neg_margin")
    if not (_is_number(pos) and _is_number(neg)):
        return None
    inverted = _inverted(values.get("distance"))
    if inverted is None or (neg > pos if not inverted else pos > neg):
        return None
    kind, need = ("a similarity", "pos_margin > neg_margin") if inverted else ("a distance", "pos_margin < neg_margin")
    return f"the margins of {title} cross ({kind}: it needs {need}), got pos_margin={pos}, neg_margin={neg}"


def _inverted(distance: Any) -> bool | None:
    """Whether a PML distance node (None: PML's default, LpDistance) is a similarity; None if unknown."""
    if distance is None:
        return False
    cls = _import(distance.get("_target_")) if isinstance(distance, Mapping) else None
    if not inspect.isclass(cls):
        return None
    from pytorch_metric_learning.distances import DotProductSimilarity

    return issubclass(cls, DotProductSimilarity) if distance.get("is_inverted") is None else distance["is_inverted"]


def _nesterov(values: Mapping[str, Any], title: str) -> str | None:
    """torch's SGD refuses Nesterov momentum without momentum or with dampening, but only once training builds it."""
    momentum, dampening = values.get("momentum"), values.get("dampening")
    if values.get("nesterov") is not True or (_is_number(momentum) and momentum > 0 and dampening == 0):
        return None
    return f"nesterov=true needs momentum > 0 and dampening 0 ({title}), got momentum={momentum}, dampening={dampening}"


def _at_most(low_key: str, high_key: str, unbounded: Any = None) -> Callable[[Mapping[str, Any], str], str | None]:
    """``low_key`` <= ``high_key`` where both are numbers (``high_key`` = ``unbounded`` is no limit)."""

    def relation(values: Mapping[str, Any], title: str) -> str | None:
        low, high = values.get(low_key), values.get(high_key)
        if _is_number(low) and _is_number(high) and high != unbounded and low > high:
            return f"{low_key}={low} exceeds {high_key}={high} ({title})"
        return None

    return relation


def _cyclic_rates(values: Mapping[str, Any], title: str) -> str | None:
    low, high = values.get("base_lr"), values.get("max_lr")
    if _is_number(low) and _is_number(high) and low >= high:
        return f"base_lr={low} must be below max_lr={high} ({title}: the rate cycles between them)"
    return None


RELATIONS: dict[str, tuple[Callable[[Mapping[str, Any], str], str | None], ...]] = {
    "torch.optim.SGD": (_nesterov,),
    "torch.optim.lr_scheduler.CyclicLR": (_cyclic_rates,),
    "lightning.Trainer": (_at_most("min_epochs", "max_epochs", -1), _at_most("min_steps", "max_steps", -1)),
    "pytorch_metric_learning.losses.ContrastiveLoss": (_contrastive_margins,),
    "pytorch_metric_learning.miners.PairMarginMiner": (_contrastive_margins,),
}


# ------------------------------------------------------------------------------------------------ the check

_imported: dict[str, Any] = {}
_MISSING = object()


def _import(path: Any) -> Any:
    """The object a dotted path names, or None when it does not import (cached)."""
    if not isinstance(path, str):
        return None
    if path not in _imported:
        _imported[path] = _locate(path)
    return _imported[path]


def _locate(path: str) -> Any:
    """``path``'s object: its longest prefix that is a module, then attributes; None if there is none. (Hydra's
    ``get_object`` logs an error line of its own for a path that does not import.)"""
    import importlib

    parts = path.split(".")
    for i in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:i]))
        except ModuleNotFoundError:
            continue
        except Exception:  # a module that fails for a reason of its own: the run's own check names it
            return None
        for attr in parts[i:]:
            obj = getattr(obj, attr, _MISSING)
            if obj is _MISSING:
                return None
        return obj
    return None


def _entry(target: Any) -> tuple[str, str] | None:
    """The table's key for the callable ``target`` names and which table holds it (``library``, ``counts``,
    ``unusable``), or None. A path matches itself or any path to the same object (``torch.optim.sgd.SGD``)."""
    if not isinstance(target, str):
        return None
    tables = (("library", LIBRARY), ("counts", COUNTS), ("unusable", UNUSABLE))
    for kind, table in tables:
        if target in table:
            return target, kind
    name = target.rsplit(".", 1)[-1]
    # Only a callable of a declared name is imported: the check imports nothing else.
    candidates = [(key, kind) for kind, table in tables for key in table if key.rsplit(".", 1)[-1] == name]
    obj = _import(target) if candidates else None
    return next(((key, kind) for key, kind in candidates if obj is not None and _import(key) is obj), None)


def _plain(value: Any) -> Any:
    return OmegaConf.to_container(value, resolve=True) if isinstance(value, DictConfig | ListConfig) else value


def _targets(cfg: DictConfig, path: str = "") -> Iterator[tuple[str, DictConfig]]:
    """Every node of ``cfg`` that names a ``_target_``, with its dotted path, depth first."""
    if "_target_" in cfg and path:
        yield path, cfg
    for key in cfg:
        try:
            child = cfg[key]
        except Exception:  # an interpolation that does not resolve here: the run's own check reports it
            continue
        if isinstance(child, DictConfig):
            yield from _targets(child, f"{path}.{key}" if path else str(key))


def _value(node: DictConfig, key: str) -> Any:
    """The value of ``node[key]`` to check; ``_MISSING`` for one Hydra fills in per run (``${hydra:...}``, e.g. a
    logger's ``save_dir``: None until Hydra has made the run's folder, and never the user's to get wrong)."""
    try:
        raw = OmegaConf.to_container(node, resolve=False).get(key) if isinstance(node, DictConfig) else None
        if isinstance(raw, str) and "${hydra:" in raw:
            return _MISSING
        return _plain(node[key])
    except Exception:
        return _MISSING


def _defaults(target: str) -> dict[str, Any]:
    """The defaults of the arguments ``target`` takes (through its bases' ``**kwargs`` too)."""
    from clusterable.heads.pml import options

    found = options(_import(target)) or {}
    return {k: v for k, v in found.items() if v is not inspect.Parameter.empty}


def _unimportable(path: str, target: Any) -> str | None:
    """One line for a ``_target_`` that names no callable (``pytorch_metric_learning.miners.TripletMarginMinr``),
    with the closest name its module has; None when it imports, or when its module fails for a reason of its own
    (a missing optional package: the run's own check names it)."""
    import importlib

    if not isinstance(target, str) or _import(target) is not None:
        return None
    if target.rsplit(".", 1)[-1] in LOGGER_EXTRAS:  # an integration not installed: the run's check names its package
        return None
    parts = target.split(".")
    for i in range(len(parts) - 1, 0, -1):  # the longest prefix that is a module
        module_name = ".".join(parts[:i])
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as e:
            if e.name and not module_name.startswith(e.name):
                return None  # the module imports something that is not installed
            continue
        except Exception:
            return None
        missing = parts[i]
        names = [n for n in dir(module) if not n.startswith("_")]
        close = difflib.get_close_matches(missing, names, n=1)
        hint = f" (did you mean {module_name}.{close[0]}?)" if close else ""
        return f"{path}._target_: {module_name} has no {missing!r}{hint}"
    return f"{path}._target_: no module {parts[0]!r} ({target})"


def _node_problem(path: str, node: DictConfig) -> str | None:
    if (unknown := _unimportable(path, node.get("_target_"))) is not None:
        return unknown
    entry = _entry(node.get("_target_"))
    if entry is None:
        return None
    key, kind = entry
    title = key
    if kind == "unusable":
        return f"{path}._target_={node._target_} cannot be driven by a config: {UNUSABLE[key]}"
    domains = LIBRARY[key] if kind == "library" else COUNTS[key]
    values: dict[str, Any] = {}
    for arg in node:
        arg = str(arg)
        if arg.startswith("_") and arg.endswith("_"):  # Hydra's own keys
            continue
        domain = domains.get(arg)
        if domain is None:
            if kind == "counts":
                continue  # our constructor's own argument: it checks it
            accepted = sorted(name for name, d in domains.items() if not d.framework)
            close = difflib.get_close_matches(arg, accepted, n=1)
            hint = f" (did you mean {close[0]}?)" if close else ""
            name = key.rsplit(".", 1)[-1]
            return f"{path}.{arg} is not an option of {name}{hint}; accepted: {', '.join(accepted)}"
        value = _value(node, arg)
        if value is _MISSING:
            continue
        values[arg] = value
        if not domain.accepts(value):
            return f"{path}.{arg} must be {domain.describe()}, got {value!r} ({title}'s {arg})"
    relations = RELATIONS.get(key, ())
    if relations:
        given = _defaults(key) | values
        for relation in relations:
            if (problem := relation(given, title)) is not None:
                return f"{path}: {problem}"
    return None


def _key_problem(cfg: DictConfig, key: str, domain: Domain) -> str | None:
    value = OmegaConf.select(cfg, key, default=_MISSING, throw_on_resolution_failure=False)
    value = _plain(value) if value is not _MISSING else value
    if value is _MISSING or domain.accepts(value):
        return None
    env = os.environ.get(THREADS_ENV, "").strip()
    origin = f" (from ${THREADS_ENV}={env})" if key == "torch_threads" and env and env == str(value) else ""
    return f"{key} must be {domain.describe()}, got {value!r}{origin}"


def problem(cfg: DictConfig) -> str | None:
    """The first value of ``cfg`` (a run's config, with or without Hydra's node) outside its declared domain, as
    one line naming the key, the value and the domain; None when every value handed on lies in its domain."""
    for key, domain in KEYS.items():
        if (found := _key_problem(cfg, key, domain)) is not None:
            return found
    for path, node in _targets(cfg):
        if (found := _node_problem(path, node)) is not None:
            return found
    return None


def check(cfg: DictConfig) -> None:
    """Raise ``DomainError`` (one line) for the first value of ``cfg`` outside its domain."""
    if (found := problem(cfg)) is not None:
        raise DomainError(found)


def search_space_problem(cfg: DictConfig) -> str | None:
    """One line for a search range of ``hydra.sweeper.search_space`` (Optuna's) that reaches outside the domain of
    the key it searches (``optimizer.momentum: {type: float, low: 0.5, high: 1.5}``: every trial above 1 would fail),
    or None. A range's ends and a categorical's choices are tried in ``cfg`` one by one (every domain of a number is
    an interval, so its ends stand for the range); a key that names a config group, or that ``cfg`` does not hold
    yet, is left to the trials."""
    space = OmegaConf.select(cfg, "hydra.sweeper.search_space", default=None)
    if not isinstance(space, DictConfig) or problem(cfg) is not None:
        return None
    for key, spec in space.items():
        if not isinstance(spec, DictConfig):
            continue  # the sweeper refuses it itself
        current = OmegaConf.select(cfg, str(key), default=_MISSING, throw_on_resolution_failure=False)
        if current is _MISSING or isinstance(current, DictConfig | ListConfig):
            continue
        values = (
            list(spec.get("choices") or [])
            if spec.get("type") == "categorical"
            else [spec.get("low"), spec.get("high")]
        )
        for value in values:
            trial = OmegaConf.to_container(cfg, resolve=False)
            trial = OmegaConf.create(trial)
            try:
                OmegaConf.update(trial, str(key), _plain(value), merge=False)
            except Exception:
                continue
            if (found := problem(trial)) is not None:
                bounds = "its choices" if spec.get("type") == "categorical" else f"[{values[0]}, {values[1]}]"
                return f"hydra.sweeper.search_space.{key} searches {bounds}, outside its domain: {found}"
    return None
