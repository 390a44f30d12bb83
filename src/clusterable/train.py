"""The Hydra entry point: seed, instantiate, fit, pick the best checkpoint, evaluate, write metrics.json.

Heavy imports (torch, Lightning) happen inside ``run`` so that ``python train.py --help`` stays fast.
"""

from __future__ import annotations

import logging
import sys
import time
import warnings
from pathlib import Path
from typing import Any

import hydra
from hydra.core.hydra_config import HydraConfig
from hydra.errors import InstantiationException
from omegaconf import DictConfig, OmegaConf

from clusterable.rundir import is_done, read_metrics, write_metrics

log = logging.getLogger("clusterable")
CONFIG_DIR = str(Path(__file__).resolve().parents[2] / "conf")


class ConfigError(ValueError):
    """A configuration value is out of range; raised before any training."""


def build(node: DictConfig, group: str, **kwargs: Any) -> Any:
    """``instantiate(node, **kwargs)``, re-raising a constructor's ValueError/TypeError as one line naming the group:
    ``loss.lam must be in [0, 1], got 1.5``."""
    try:
        return hydra.utils.instantiate(node, **kwargs)
    except InstantiationException as e:
        if isinstance(e.__cause__, ValueError | TypeError):
            raise ConfigError(f"{group}.{e.__cause__}") from None
        raise


def check_config(cfg: DictConfig) -> None:
    """The generic keys no constructor sees before training starts."""
    if not cfg.optimizer.lr > 0:
        raise ConfigError(f"optimizer.lr must be > 0, got {cfg.optimizer.lr}")
    if not (isinstance(cfg.trainer.max_epochs, int) and cfg.trainer.max_epochs >= 1):
        raise ConfigError(f"trainer.max_epochs must be an integer >= 1, got {cfg.trainer.max_epochs}")


def run(cfg: DictConfig) -> dict[str, Any]:
    """Train and evaluate one configuration; returns the metrics.json payload."""
    run_dir = Path(HydraConfig.get().runtime.output_dir)
    if is_done(run_dir):
        print(f"skip {run_dir}: metrics.json says ok")
        return read_metrics(run_dir)  # type: ignore[return-value]

    import lightning as L
    import torch

    # Lightning's per-run banner (accelerator lines, tips) repeats for every job of a sweep; warnings still show.
    logging.getLogger("lightning.pytorch.utilities.rank_zero").setLevel(logging.WARNING)
    warnings.filterwarnings("ignore", message=".*LeafSpec.*is deprecated")  # inside Lightning, not ours
    from lightning.pytorch.callbacks import ModelCheckpoint

    from clusterable.callbacks import EpochTimer
    from clusterable.data.mnist import DatasetNotFoundError
    from clusterable.evaluation.runner import evaluate
    from clusterable.module import NonFiniteLossError, RepresentationModule, count_parameters

    payload: dict[str, Any] = {
        "status": "failed", "error": None, "overrides": list(HydraConfig.get().overrides.task), "seed": cfg.seed,
        "experiment": cfg.name, "mode": cfg.mode, "metrics": {}, "best_epoch": None, "timing": {},
    }  # fmt: skip
    loggers: list = []
    try:
        check_config(cfg)
        L.seed_everything(cfg.seed, workers=True, verbose=False)
        datamodule = build(cfg.dataset, "dataset", seed=cfg.seed)
        try:
            datamodule.load()
        except ValueError as e:
            raise ConfigError(f"dataset.{e}") from None
        encoder = build(cfg.model, "model", input_shape=datamodule.input_shape)
        head = build(
            cfg.loss, "loss", num_classes=datamodule.num_classes, embedding_dim=encoder.embedding_dim,
            input_shape=datamodule.input_shape,
        )  # fmt: skip
        module = RepresentationModule(encoder, head, build(cfg.optimizer, "optimizer"))
        evaluators = {
            name: hydra.utils.instantiate(node) for name, node in (cfg.get("evaluator") or {}).items()
        }
        loggers = [hydra.utils.instantiate(node) for node in (cfg.logger or {}).values()]
        checkpoint = ModelCheckpoint(
            dirpath=run_dir / "checkpoints", filename="best", monitor=cfg.checkpoint.monitor,
            mode=cfg.checkpoint.mode, save_top_k=1 if cfg.checkpoint.monitor else 0,
        )  # fmt: skip
        timer = EpochTimer()
        trainer = hydra.utils.instantiate(
            cfg.trainer, logger=loggers or False, callbacks=[checkpoint, timer], default_root_dir=str(run_dir)
        )

        start = time.perf_counter()
        trainer.fit(module, datamodule=datamodule)
        payload["timing"]["fit_s"] = time.perf_counter() - start
        payload["timing"]["epoch_s"] = timer.mean_epoch_s

        # The paper's protocol: test the weights of the epoch with the best validation score.
        if checkpoint.monitor and checkpoint.best_model_path:
            state = torch.load(checkpoint.best_model_path, map_location=module.device, weights_only=False)
            module.load_state_dict(state["state_dict"])
            payload["best_epoch"] = int(state["epoch"])
        else:
            payload["best_epoch"] = trainer.current_epoch - 1

        start = time.perf_counter()
        metrics = evaluate(module, datamodule.splits, evaluators, cfg.eval_stages, run_dir, cfg.seed)
        metrics["model/params"] = count_parameters(encoder, head)
        # The last epoch's training losses (the CSRL paper reports the final training loss as de-noising MSE).
        metrics.update({k: float(v) for k, v in trainer.callback_metrics.items() if k.startswith("train/")})
        payload["timing"]["eval_s"] = time.perf_counter() - start
        payload.update(status="ok", metrics=metrics)
        for lg in loggers:
            lg.log_metrics({k: v for k, v in metrics.items() if v == v}, step=trainer.global_step)
    except NonFiniteLossError as e:
        # Recorded as a failed cell; the sweep goes on.
        payload.update(error=str(e), failed_epoch=e.epoch)
        log.error("run failed: %s", e)
    except (ConfigError, DatasetNotFoundError) as e:
        payload["error"] = str(e)
        write_metrics(run_dir, payload)
        _close(loggers, ok=False)
        sys.exit(f"error: {e}")
    except BaseException as e:  # also Ctrl+C (Lightning turns it into SystemExit): record why the run stopped
        interrupted = isinstance(e, KeyboardInterrupt | SystemExit)
        payload["error"] = "interrupted" if interrupted else f"{type(e).__name__}: {e}"
        write_metrics(run_dir, payload)
        _close(loggers, ok=False)
        raise
    write_metrics(run_dir, payload)
    _close(loggers, ok=payload["status"] == "ok")
    _print_summary(run_dir, payload)
    return payload


def _close(loggers: list, ok: bool) -> None:
    """Finish every logger's run now, so a multirun's next job starts a fresh W&B run (also after a failure)."""
    for lg in loggers:
        if type(lg).__name__ == "WandbLogger":
            import wandb

            if wandb.run is not None:
                wandb.finish(exit_code=0 if ok else 1)
        else:
            lg.finalize("success" if ok else "failed")


def _print_summary(run_dir: Path, payload: dict[str, Any]) -> None:
    metrics = payload["metrics"]
    rows = [(k, v) for k, v in sorted(metrics.items()) if k.startswith("test/") or k.startswith("model/")]
    width = max((len(k) for k, _ in rows), default=10)
    lines = [f"{k:<{width}}  {v:.4f}" if isinstance(v, float) else f"{k:<{width}}  {v}" for k, v in rows]
    status = payload["status"] if payload["status"] == "ok" else f"failed: {payload['error']}"
    print(
        "\n".join([f"run: {status}", *lines, f"best epoch: {payload['best_epoch']}", f"run dir: {run_dir}"])
    )


@hydra.main(version_base="1.3", config_path=CONFIG_DIR, config_name="train")
def main(cfg: DictConfig) -> float | None:
    """Returns the value of ``cfg.optimized_metric`` (for hyperparameter sweepers)."""
    OmegaConf.resolve(cfg)
    payload = run(cfg)
    value = payload.get("metrics", {}).get(cfg.get("optimized_metric"))
    return float(value) if value is not None else None
