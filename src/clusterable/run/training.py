"""Fit the module, take the best checkpoint back, evaluate it: the steps between assembling a run and recording it."""

from __future__ import annotations

import logging
import time
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from omegaconf import DictConfig

from clusterable.config import ConfigError
from clusterable.logs import get_logger
from clusterable.run.context import RunContext
from clusterable.run.parts import Parts

log = get_logger(__name__)


def quiet_lightning() -> None:
    """Lightning's per-run banner (accelerator lines, tips) repeats for every job of a sweep; warnings still show."""
    logging.getLogger("lightning.pytorch.utilities.rank_zero").setLevel(logging.WARNING)
    # Its "Received SIGTERM" says what the run's own "interrupted: <run dir> ..." line says (clusterable.interrupts).
    logging.getLogger("lightning.pytorch.trainer.connectors.signal_connector").setLevel(logging.WARNING)
    warnings.filterwarnings("ignore", message=".*LeafSpec.*is deprecated")  # inside Lightning, not ours
    # Frozen BatchNorm layers (the metric-learning backbones) stay in eval mode on purpose.
    warnings.filterwarnings("ignore", message=r".*module\(s\) in eval mode at the start of training")


def cpu_threads(cfg: DictConfig, ctx: RunContext) -> int:
    """Set torch's CPU threads and return them: ``torch_threads`` when set; when local jobs run side by side
    (joblib launcher), the cores divided among them; else the cores that other processes leave free (one line says
    so when that is fewer than all of them). OpenMP threads contend badly with other work on a small machine: on 2
    cores with another job running, an epoch with 2 threads was 18x slower than with 1."""
    import os

    import torch

    cores = os.cpu_count() or 1
    threads = cfg.torch_threads
    if threads is None and ctx.parallel_jobs > 1:
        threads = max(1, cores // ctx.parallel_jobs)
    elif threads is None and cores > 1:
        busy = busy_elsewhere()
        if busy is not None and busy >= 0.5:
            threads = max(1, cores - round(busy))
            log.info(
                f"torch_threads: {threads} of {cores} cores (other processes keep {busy:.1f} busy; "
                "torch_threads=N sets it)"
            )
    if threads is not None:
        torch.set_num_threads(int(threads))
    return torch.get_num_threads()


def busy_elsewhere(interval_s: float = 0.25) -> float | None:
    """How many cores other processes keep busy, sampled over ``interval_s``: the machine's busy CPU time
    (``/proc/stat``) less this process's own (``os.times``); None where ``/proc/stat`` is not there (not Linux)."""
    import os

    def machine_busy_s() -> float:
        fields = [float(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
        idle = fields[3] + (fields[4] if len(fields) > 4 else 0.0)  # idle + iowait
        return (sum(fields[:8]) - idle) / os.sysconf("SC_CLK_TCK")

    try:
        machine, own = machine_busy_s(), sum(os.times()[:2])
        time.sleep(interval_s)
        machine, own = machine_busy_s() - machine, sum(os.times()[:2]) - own
    except (OSError, ValueError, IndexError):
        return None
    return max(0.0, (machine - own) / interval_s)


def checkpoint_callback(cfg: DictConfig, run_dir: Path) -> Any:
    """Keeps the epoch that is best by ``checkpoint.monitor`` (none when it is null: the last epoch is tested),
    written atomically: a full disk leaves the previous best checkpoint, never a truncated one."""
    from clusterable.run.checkpointing import AtomicBoudiafCheckpoint, AtomicCheckpoint

    monitor = cfg.checkpoint.monitor
    if cfg.checkpoint.get("rule") == "boudiaf":
        if monitor is None:
            raise ConfigError("checkpoint.rule=boudiaf selects an epoch by checkpoint.monitor, which is null")
        return AtomicBoudiafCheckpoint(
            dirpath=run_dir / "checkpoints", filename="best", monitor=monitor, mode=cfg.checkpoint.mode
        )
    return AtomicCheckpoint(
        dirpath=run_dir / "checkpoints",
        filename="best",
        monitor=monitor,
        mode=cfg.checkpoint.mode,
        save_top_k=1 if monitor else 0,
    )


def fit(trainer: Any, parts: Parts, timer: Any) -> tuple[dict[str, float | None], Any]:
    """Train; the timing record (``fit_s``, ``epoch_s``, ``steps``, ``step_s`` per optimizer step, ``lloyd_s`` per
    Lloyd step of a clustering head) and the ``DivergedError`` that stopped training early, or None.

    A run that diverges after a good epoch keeps what it learned: its best checkpoint is still evaluated (the
    caller decides), so the divergence is handed back rather than raised."""
    from clusterable.callbacks import ClusterUpdates
    from clusterable.module import DivergedError

    module, diverged = parts.module, None
    start = time.perf_counter()
    try:
        trainer.fit(module, datamodule=parts.datamodule)
    except DivergedError as e:
        diverged = e
    lloyd = next((c for c in trainer.callbacks if isinstance(c, ClusterUpdates)), None)
    return {
        "fit_s": time.perf_counter() - start,
        "epoch_s": timer.mean_epoch_s,
        "steps": module.steps_taken,
        "step_s": timer.train_s / module.steps_taken if module.steps_taken else None,
        "lloyd_s": lloyd.mean_s if lloyd is not None else None,
    }, diverged


def restore_best(checkpoint: Any, trainer: Any, module: Any) -> int | None:
    """Load the best epoch's weights into ``module`` (the COREL protocol: test the weights of the epoch with the
    best validation score) and return that epoch; without a monitor, the last epoch (None: never trained).

    The checkpoint is read with ``weights_only=True``: Lightning's holds tensors and plain values only (epoch,
    loops, optimizer and callback states), and a file that holds anything else (a checkpoint replaced in a copied
    or shared ``outputs/``) is refused in one line rather than unpickled, which could run code from it."""
    import pickle

    import torch

    if checkpoint.monitor and checkpoint.best_model_path:
        path = checkpoint.best_model_path
        try:
            state = torch.load(path, map_location=module.device, weights_only=True)
        except pickle.UnpicklingError as e:
            found = str(e).split("WeightsUnpickler error:")[-1].strip().split(". ")[0]
            raise RuntimeError(
                f"checkpoint {path} holds more than tensors and plain values ({found}); it was "
                "not loaded, since unpickling it could run code from it"
            ) from None
        module.load_state_dict(state["state_dict"])
        # The untrained network, kept by checkpoint.rule=boudiaf when no epoch beat it: no epoch at all.
        return int(state["epoch"]) if state.get("global_step", 1) > 0 else None
    return trainer.current_epoch - 1 if module.steps_taken else None


def evaluate(
    cfg: DictConfig, ctx: RunContext, parts: Parts, last_train: Mapping[str, Any]
) -> tuple[dict[str, float], dict[str, Any], float]:
    """Every evaluator on every ``eval_stages`` split, the parameter count and the last epoch's training losses
    ``last_train`` (``train/<part>``: the CSRL paper reports the final training loss as de-noising MSE; other keys
    are ignored, so a trainer's ``callback_metrics`` will do); the evaluators that failed (name ->
    ``runner.EvaluatorFailure``: the others' metrics are kept all the same); and the seconds it took."""
    from clusterable.evaluation.runner import evaluate as run_evaluators
    from clusterable.module import count_parameters

    start = time.perf_counter()
    keep = cfg.get("save_representations", "float16")
    failures: dict[str, Any] = {}
    metrics = run_evaluators(
        parts.module,
        parts.datamodule,
        parts.evaluators,
        cfg.eval_stages,
        ctx.run_dir,
        cfg.seed,
        keep=None if keep in (None, "none") else keep,
        failures=failures,
    )
    metrics["model/params"] = count_parameters(parts.encoder, parts.head)
    metrics.update({k: float(v) for k, v in last_train.items() if k.startswith("train/")})
    return metrics, failures, time.perf_counter() - start


def stopped_early(callbacks: list, trainer: Any) -> str | None:
    """Why training stopped before ``max_epochs`` where a callback stopped it (EarlyStopping's own reason, with the
    epoch), else None."""
    for callback in callbacks:
        epoch = getattr(callback, "stopped_epoch", 0)
        if epoch and trainer.should_stop:
            reason = getattr(callback, "stopping_reason_message", None) or "its criterion was met"
            return f"{type(callback).__name__} at epoch {epoch}: {reason.strip()}"
    return None
