"""Assemble a run's parts from its config: the data, the encoder, the head, the evaluators, the module, the trainer.

Each part is built by ``config.build`` (``_target_`` is the only factory), checked against its group's contract
(``contracts.require``) and refused in one line when it does not fit the others: a stage the dataset lacks, an
encoder that does not take what the dataset feeds it, a ``checkpoint.monitor`` the run never logs.
"""

from __future__ import annotations

import importlib.util
import inspect
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from omegaconf import DictConfig

from clusterable.config import ConfigError, build, target_of
from clusterable.contracts import EVALUATOR_ARGS
from clusterable.extras import LOGGER_EXTRAS
from clusterable.pruning import check_prunable
from clusterable.run.checks import OPTIMIZER_CALL, SCHEDULER_CALL
from clusterable.run.context import RunContext


@dataclass
class Parts:
    """What a run trains and evaluates: the datamodule (loaded), encoder, head, evaluators by name, the module, the
    callback that runs the validation evaluators after every epoch (``callbacks.ValidationMetrics``) and what
    reading the data did (``contracts.HasDataNotes``; None when the dataset says nothing)."""

    datamodule: Any
    encoder: Any
    head: Any
    evaluators: dict[str, Any]
    module: Any
    validation: Any
    data_notes: dict[str, Any] | None = None


def build_data(cfg: DictConfig, ctx: RunContext) -> Any:
    """The datamodule, loaded: splits read, shapes and labels checked (``DatasetError``), stages checked."""
    from clusterable.contracts import DataModule, require

    datamodule = build(cfg.dataset, "dataset", seed=cfg.seed)
    require(datamodule, DataModule, f"dataset={ctx.choices.get('dataset')}")
    try:
        datamodule.load()
    except ValueError as e:
        raise ConfigError(f"dataset.{e}") from None
    unknown = [s for s in cfg.eval_stages if s not in datamodule.splits]
    if unknown:
        raise ConfigError(
            f"eval_stages: no split named {unknown[0]!r}; the dataset has: {', '.join(datamodule.splits)}"
        )
    return datamodule


def encoder_arguments(cfg: DictConfig, ctx: RunContext, datamodule: Any) -> dict[str, Any]:
    """What the dataset feeds its encoder besides the inputs (``contracts.FeedsEncoder``: a text dataset's
    ``word_vectors``), refused in one line when the encoder needs an argument the dataset does not give, or does
    not take one it gives (it could not read the inputs)."""
    from clusterable.contracts import FeedsEncoder

    given = datamodule.encoder_arguments() if isinstance(datamodule, FeedsEncoder) else {}
    params = inspect.signature(target_of(cfg.model, "model")).parameters
    model, dataset = ctx.choices.get("model"), ctx.choices.get("dataset")
    needed = [
        name
        for name, p in params.items()
        if p.default is inspect.Parameter.empty
        and name not in cfg.model
        and name != "input_shape"
        and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
    ]
    for name in needed:
        if name not in given:
            raise ConfigError(f"model {model} needs {name} from its dataset, which dataset {dataset} does not give")
    for name in given:
        if name not in params:
            raise ConfigError(
                f"model {model} does not take the {name} that dataset {dataset} feeds its encoder "
                f"(it could not read its inputs): choose a model that takes {name}"
            )
    return given


def build_parts(cfg: DictConfig, ctx: RunContext) -> Parts:
    """Every part of the run, each checked against its contract; the module wires them together."""
    from clusterable.callbacks import ValidationMetrics
    from clusterable.contracts import (
        Encoder,
        HasDataNotes,
        Head,
        require,
        require_batch_size,
        require_evaluator,
    )
    from clusterable.evaluation.runner import check_distinct_keys, check_splits
    from clusterable.module import RepresentationModule

    datamodule = build_data(cfg, ctx)
    fed = encoder_arguments(cfg, ctx, datamodule)
    encoder = build(cfg.model, "model", input_shape=datamodule.input_shape, **fed)
    require(encoder, Encoder, f"model={ctx.choices.get('model')}")
    check_owns_network(cfg, ctx, encoder, datamodule.input_shape)
    head = build(
        cfg.loss,
        "loss",
        num_classes=datamodule.num_classes,
        embedding_dim=encoder.embedding_dim,
        input_shape=datamodule.input_shape,
    )
    require(head, Head, f"loss={ctx.choices.get('loss')}")
    require_batch_size(head, cfg.dataset.get("batch_size"), f"loss={ctx.choices.get('loss')}")
    evaluators = {
        name: build(node, f"evaluator.{name}", call_args=EVALUATOR_ARGS)
        for name, node in (cfg.get("evaluator") or {}).items()
    }
    for name, fn in evaluators.items():
        require_evaluator(fn, f"evaluator.{name}")
    check_distinct_keys(evaluators)  # two evaluators returning one key would overwrite each other's numbers
    check_splits(evaluators, datamodule, cfg.eval_stages, cfg.validation_evaluators)  # ks against the gallery
    module = RepresentationModule(
        encoder,
        head,
        build(cfg.optimizer, "optimizer", call_args=OPTIMIZER_CALL),
        cfg.divergence_limit,
        cfg.optimizer_steps,
        scheduler=build(cfg.scheduler, "scheduler", call_args=SCHEDULER_CALL) if cfg.get("scheduler") else None,
        weight_decay_on=cfg.weight_decay_on,
        channels_last=cfg.channels_last,
        class_disjoint=datamodule.class_disjoint,
        trainable=cfg.trainable,
    )
    validation = ValidationMetrics({name: evaluators[name] for name in cfg.validation_evaluators})
    notes = datamodule.notes if isinstance(datamodule, HasDataNotes) else None
    return Parts(datamodule, encoder, head, evaluators, module, validation, notes)


def check_owns_network(cfg: DictConfig, ctx: RunContext, encoder: Any, input_shape: Any) -> None:
    """A head that takes the input shape and not an embedding size owns the whole network (the CSRL autoencoders,
    RBM, VAE: they read the inputs themselves), so its encoder must hand the inputs through unchanged
    (``model=identity``); refused in one line before a shape error deep in the first step."""
    params = inspect.signature(target_of(cfg.loss, "loss")).parameters
    if "input_shape" not in params or "embedding_dim" in params:
        return
    size = 1
    for dim in input_shape:
        size *= int(dim)
    if encoder.embedding_dim != size:
        raise ConfigError(
            f"loss={ctx.choices.get('loss')} owns the whole network (it reads the {size} input values itself), but "
            f"model={ctx.choices.get('model')} hands it {encoder.embedding_dim}-d representations: use "
            "model=identity"
        )


def validates(cfg: DictConfig, parts: Parts) -> bool:
    """Whether the run has a validation loop (a non-empty val split, ``trainer.limit_val_batches`` not 0)."""
    return cfg.trainer.get("limit_val_batches", 1.0) != 0 and len(parts.datamodule.splits["val"]["labels"]) > 0


def check_monitor(cfg: DictConfig, ctx: RunContext, parts: Parts) -> None:
    """``checkpoint.monitor`` must name a metric the run logs (or be null: the last epoch), checked before training."""
    monitor, has_val = cfg.checkpoint.monitor, validates(cfg, parts)
    if cfg.validation_evaluators and not has_val:
        raise ConfigError(
            "validation_evaluators need a validation loop, but this run has none (an empty val "
            "split or trainer.limit_val_batches=0)"
        )
    logged = parts.module.logged_keys(has_val) + (parts.validation.logged_keys() if has_val else [])
    if monitor is not None and monitor not in logged and not (has_val and parts.validation.may_log(monitor)):
        raise ConfigError(
            f"checkpoint.monitor: {monitor!r} is never logged by this run "
            f"(loss={ctx.choices.get('loss')}); it logs {', '.join(logged)}, or use null for the "
            "last epoch"
        )


def recorded_keys(cfg: DictConfig, parts: Parts) -> tuple[list[str], list[str]]:
    """The metric keys this run's ``metrics.json`` will hold, known before training: the last epoch's training
    losses (``train/<part>``), each evaluator's declared keys at every stage of ``eval_stages``
    (``test/kmeans/acc``) and ``model/params``; and the stages whose evaluators do not declare their keys (any
    ``<stage>/...`` key may then be recorded). What the module logs on the validation split every epoch
    (``val/loss``) is not recorded: the evaluators score the best epoch."""
    from clusterable.contracts import declared_metrics

    keys = [*(k for k in parts.module.logged_keys(False) if k.startswith("train/")), "model/params"]
    undeclared = []
    for stage in cfg.eval_stages:
        for fn in parts.evaluators.values():
            names = declared_metrics(fn)
            if names is None:
                undeclared.append(str(stage))
            keys += [f"{stage}/{name}" for name in names or ()]
    return list(dict.fromkeys(keys)), sorted(set(undeclared))


def check_objective(cfg: DictConfig, ctx: RunContext, parts: Parts) -> None:
    """A search's trial must record the metrics the search optimises (``ctx.objectives``): one line before
    training otherwise, so that a misspelt ``optimized_metric`` fails its trials in seconds instead of training every
    one and finding nothing. A trial the search prunes (``ctx.trial``) must log its objective every epoch."""
    keys, open_stages = recorded_keys(cfg, parts)
    for objective in ctx.objectives:
        if objective not in keys and objective.split("/")[0] not in open_stages:
            raise ConfigError(
                f"optimized_metric: {objective!r} is never recorded by this run "
                f"(loss={ctx.choices.get('loss')}); it records {', '.join(keys)}"
            )
    if ctx.trial is not None:
        check_prunable(ctx.trial.metric, epoch_keys(cfg, parts))


def epoch_keys(cfg: DictConfig, parts: Parts) -> list[str]:
    """The metric keys this run logs every epoch: the module's and the validation evaluators'."""
    has_val = validates(cfg, parts)
    return [*parts.module.logged_keys(has_val), *(parts.validation.logged_keys() if has_val else [])]


def check_logger_extras(cfg: DictConfig) -> None:
    """Refuse, before training, a logger whose library is not installed: ``logger.wandb needs the wandb module,
    which is not installed: pip install 'clusterable[wandb]' (or logger=csv)``."""
    for name, node in (cfg.get("logger") or {}).items():
        target = str(node.get("_target_", "")) if isinstance(node, DictConfig) else ""
        needed = LOGGER_EXTRAS.get(target.rsplit(".", 1)[-1])
        if needed is None:
            continue
        modules, install = needed
        if any(_importable(m) for m in modules):
            continue
        raise ConfigError(
            f"logger.{name} needs the {' or '.join(modules)} module, which is not installed: {install} (or logger=csv)"
        )


def _importable(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # a parent package that is not there
        return False


def build_callbacks(cfg: DictConfig) -> list:
    """The Lightning callbacks of the ``callbacks`` group (``callbacks=[early_stopping,lr_monitor]``), each refused
    in one line when it is no Lightning callback or cannot be built (a package it needs, a monitor it lacks)."""
    from lightning.pytorch.callbacks import Callback, EarlyStopping, LearningRateMonitor

    built = []
    for name, node in (cfg.get("callbacks") or {}).items():
        try:
            callback = build(node, f"callbacks.{name}")
        except ModuleNotFoundError as e:  # RichProgressBar without rich, ...
            raise ConfigError(f"callbacks.{name} needs the package {e.name}: pip install {e.name}") from None
        if not isinstance(callback, Callback):
            raise ConfigError(f"callbacks.{name}: {type(callback).__name__} is not a Lightning callback")
        if isinstance(callback, EarlyStopping) and not cfg.trainer.get("limit_val_batches", 1.0):
            raise ConfigError(f"callbacks.{name} watches a validation metric, and trainer.limit_val_batches=0")
        if isinstance(callback, LearningRateMonitor) and not cfg.get("logger"):
            raise ConfigError(f"callbacks.{name} writes the learning rate to a logger, and logger=none: use logger=csv")
        built.append(callback)
    return built


def build_trainer(cfg: DictConfig, run_dir: Path, loggers: list, callbacks: list) -> Any:
    """Lightning's Trainer from ``cfg.trainer`` with the run's loggers (``cfg.logger``, appended to ``loggers`` so
    that the record closes them whatever happens) and callbacks, writing below ``run_dir``."""
    for name, node in (cfg.logger or {}).items():
        loggers.append(build(node, f"logger.{name}"))
    return build(cfg.trainer, "trainer", logger=loggers or False, callbacks=callbacks, default_root_dir=str(run_dir))
