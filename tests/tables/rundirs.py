"""Hand-made run directories: metrics.json (and the arrays evaluators save) as the run layer writes them, with the
record the tables read a run's identity from: the group choices and the resolved config."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import yaml

from clusterable.config import CONFIG_DIR
from clusterable.record import RunRecord

SMOKE_LIMITS = {"limit_train_batches": 3}
CONF = Path(CONFIG_DIR)
# The config groups (``loss``, ``loss/metric``, ...): an override of one selects an option, recorded as a choice.
GROUPS = frozenset(p.relative_to(CONF).as_posix() for p in CONF.rglob("*") if p.is_dir()) - {
    "hydra",
    "hydra/sweeper",
}


def merged(base: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    """``base`` with ``extra`` merged into it, nested mappings key by key."""
    out = dict(base)
    for key, value in extra.items():
        out[key] = merged(out[key], value) if isinstance(value, dict) and isinstance(out.get(key), dict) else value
    return out


def spelled(value: Any) -> str:
    """A value as a sweep writes its override: ``True`` -> "True", ``None`` -> "null"."""
    return "null" if value is None else str(value)


def write_run(
    outputs: Path,
    experiment: str,
    params: dict[str, Any],
    metrics: dict[str, float] | None,
    *,
    mode: str | None = "full",
    source: str | None = "real",
    timing: dict[str, float] | None = None,
    arrays: dict[str, dict[str, np.ndarray]] | None = None,
    config: dict[str, Any] | None = None,
    choices: dict[str, Any] | None = None,
    diverged_at: int | None = None,
) -> Path:
    """One run below ``outputs/multirun/<mode>/<experiment>/<overrides>``; ``metrics=None`` is a failed run,
    ``diverged_at=<epoch>`` a diverged one (``module.DivergedError``'s record: ``failed_epoch``).

    ``params`` are the run's overrides, recorded as a run records them: a config group's option among the choices
    (``loss``, ``loss/metric``), any other key at its dotted path in the resolved config (``loss.lam``, ``seed``;
    a string read as YAML, as Hydra reads an override), and all of them as the ``overrides`` list (display only).
    ``config`` is merged into the recorded config (values the experiment sets, e.g. the model's node) and
    ``choices`` into the recorded choices (groups the experiment selects). ``mode=None`` writes a legacy run: no
    mode, no provenance, and its choices only in ``.hydra/hydra.yaml``, as Hydra wrote them, not in metrics.json;
    ``source=None`` leaves out provenance.
    """
    overrides = [f"{k}={spelled(v)}" for k, v in params.items()]
    path = outputs / "multirun" / (mode or "full") / experiment / ",".join(overrides)
    chosen: dict[str, Any] = {"experiment": experiment, **(choices or {})}
    recorded: dict[str, Any] = {}
    for key, value in params.items():
        if key in GROUPS:
            chosen[key] = value
            continue
        value = yaml.safe_load(value) if isinstance(value, str) else value
        for part in reversed(key.split(".")):
            value = {part: value}
        recorded = merged(recorded, value)
    payload: dict[str, Any] = {
        "status": "ok" if metrics is not None else "failed",
        "error": None if metrics is not None else "RuntimeError: boom",
        "experiment": experiment,
        "overrides": overrides,
        "seed": int(params.get("seed", 0)),
        "metrics": metrics or {},
        "timing": timing or {},
    }
    if diverged_at is not None:
        payload.update(
            status="failed",
            error=f"train/loss ran away at epoch {diverged_at}: the run diverged",
            failed_epoch=diverged_at,
            metrics={},
        )
    if mode is not None:
        payload["mode"] = mode
        payload["choices"] = chosen
    if mode is not None and source is not None:
        smoke = mode == "smoke"
        payload["provenance"] = {
            "data_source": source,
            "debug": "smoke" if smoke and source == "fake" else None,
            "limits": SMOKE_LIMITS if smoke else {},
            "max_epochs": 2 if smoke else 100,
        }
        recorded = merged(
            {"dataset": {"source": source}, "trainer": {"max_epochs": payload["provenance"]["max_epochs"]}},
            recorded,
        )
    payload["config"] = merged(recorded, config or {})
    RunRecord.from_dict(payload).write(path)
    if mode is None:
        hydra = {"hydra": {"runtime": {"choices": {**chosen, "hydra/launcher": "basic"}}}}
        (path / ".hydra").mkdir()
        (path / ".hydra" / "hydra.yaml").write_text(yaml.safe_dump(hydra))
    for name, data in (arrays or {}).items():
        np.savez(path / name, **data)
    return path


def blank_overrides(outputs: Path) -> int:
    """Set every run's recorded ``overrides`` below ``outputs`` to []; returns how many runs it rewrote."""
    n = 0
    for path in outputs.rglob("metrics.json"):
        record = RunRecord.read(path.parent)
        record.overrides = []
        record.write(path.parent)
        n += 1
    return n


def corel_table2_runs(outputs: Path, *, mode: str | None = "full", source: str | None = "real", seeds=(0, 1)) -> int:
    """A complete corel/table2 grid (2 datasets x 2 models x 4 losses x seeds); returns the number of runs."""
    base = {"cce": 0.90, "center": 0.91, "cosine_corel": 0.92, "gaussian_corel": 0.95}
    n = 0
    for d in ("mnist", "fashion_mnist"):
        for m in ("ffnn", "cnn"):
            for loss, acc in base.items():
                for seed in seeds:
                    params = {"dataset": d, "model": m, "loss": loss, "seed": seed}
                    write_run(
                        outputs, "corel/table2", params, {"test/acc": acc + 0.01 * seed}, mode=mode, source=source
                    )
                    n += 1
    return n


AE_MODELS = ("ae1", "ae2", "ae3", "tae1", "tae2", "ptae")
PARAMS = {
    "parallel_lines": {"ae1": 10, "ae2": 24, "ae3": 28, "tae1": 20, "tae2": 48, "ptae": 28},
    "iris": {"ae1": 8, "ae2": 20, "ae3": 28, "tae1": 24, "tae2": 60, "ptae": 28},
}


# The datasets the TVAE experiments select (not overrides: their runs record them as choices).
TVAE_DATA = {fig: {"dataset": "mnist_019"} for fig in ("fig3", "fig9", "fig11")} | {
    "fig10": {"dataset": "fashion_mnist_019"}
}


def csrl_task(task: str) -> dict[str, Any]:
    """What the autoencoder pool's ``protocol.task`` sets in a run's config: noisy inputs for de-noising."""
    return {"dataset": {"reader": {"denoise": task == "denoising"}}}


def csrl_runs(outputs: Path, mode: str = "smoke", source: str = "fake") -> None:
    """Runs of every CSRL experiment (autoencoder pool, TVAE figures, TCL, TRBM) with the arrays they save."""
    rng = np.random.default_rng(0)
    kw = {"mode": mode, "source": source}
    for d in ("parallel_lines", "iris"):
        for i, m in enumerate(AE_MODELS):
            tensorized = m in ("tae1", "tae2", "ptae")
            for lr in ("0.01", "0.1"):
                for seed in (0, 1):
                    params = {"dataset": d, "loss": m, "optimizer.lr": lr, "seed": seed}
                    ari = (0.9 if tensorized else 0.3) + 0.01 * i + 0.02 * seed + (0.05 if lr == "0.1" else 0)
                    write_run(
                        outputs,
                        "csrl/autoencoders",
                        {**params, "protocol.task": "clustering"},
                        {
                            "test/ari": ari,
                            "test/kmeans_raw/ari": 0.5 + 0.1 * seed,
                            "model/params": PARAMS[d][m],
                            "train/loss": 1.0,
                        },
                        timing={"epoch_s": (0.02 if tensorized else 0.01) + 0.001 * i},
                        config=csrl_task("clustering"),
                        **kw,
                    )
                    loss = (0.1 if tensorized else 1.0) * (1 + 0.1 * seed + (0.5 if lr == "0.01" else 0))
                    write_run(
                        outputs,
                        "csrl/autoencoders",
                        {**params, "protocol.task": "denoising"},
                        {"train/loss": loss, "test/denoise/mse": 0.9 * loss, "model/params": PARAMS[d][m]},
                        config=csrl_task("denoising"),
                        **kw,
                    )

    def latents(n_classes: int, n: int = 30) -> dict[str, np.ndarray]:
        labels = np.repeat(np.arange(n_classes), n // n_classes)
        return {
            "mu": rng.normal(size=(len(labels), 2)).astype(np.float32),
            "cluster": labels % 3,
            "labels": labels,
        }

    for fig, classes in (("fig3", 3), ("fig9", 3), ("fig10", 3), ("fig11", 6)):
        clusters = 2 if fig == "fig11" else 3
        for seed in (0, 1):
            lat = latents(classes)
            lat["cluster"] = lat["labels"] % clusters
            write_run(
                outputs,
                f"csrl/{fig}",
                {"loss.kl_weight": 0.2, "seed": seed},
                {
                    "train/tvae/purity": 0.95 - 0.1 * seed,
                    "test/tvae/purity": 0.92,
                    "train/ari": 0.8,
                    "test/ari": 0.75,
                    "train/kl": 1.5,
                },
                arrays={
                    "tvae_samples.npz": {"images": rng.random((clusters, 12, 16))},
                    "tvae_latent_train.npz": lat,
                    "tvae_latent_test.npz": lat,
                },
                choices=TVAE_DATA[fig],
                **kw,
            )
    for supervised in (False, True):
        for seed in (0, 1):
            arrays = {"latent_test_tsne.npz": {"xy": rng.normal(size=(20, 2)), "labels": np.arange(20) % 5}}
            if not supervised:
                anchor = rng.random((4, 16))
                arrays["tcl_elastic_test.npz"] = {
                    "anchor": anchor,
                    "positive": anchor + 0.01,
                    "negative": rng.random((4, 16)),
                }
            write_run(
                outputs,
                "csrl/fig4",
                {"loss.supervised": supervised, "seed": seed},
                {
                    "test/ari": 0.3 + 0.5 * supervised,
                    "test/kmeans/ari": 0.4 + 0.4 * supervised,
                    "test/kmeans/silhouette": 0.2,
                },
                arrays=arrays,
                **kw,
            )
    for seed in (0, 1):
        labels = np.repeat([0, 1], 4)
        write_run(
            outputs,
            "csrl/fig5",
            {"dataset": "mnist_01", "seed": seed},
            {"test/ari": 0.95, "test/trbm/mse_own": 0.01, "test/trbm/mse_other": 0.05},
            arrays={
                "trbm_reconstructions_test.npz": {
                    "inputs": rng.random((8, 16)),
                    "labels": labels,
                    "recon": rng.random((2, 8, 16)),
                }
            },
            **kw,
        )
        # The standard (one-cluster) RBM of the same seed: Fig. 13.
        write_run(
            outputs,
            "csrl/fig5",
            {"dataset": "mnist_01", "loss.num_clusters": 1, "seed": seed},
            {
                "test/ari": 0.0,
                "test/trbm/mse_own": 0.02,
                "test/trbm/mse_own_worst_class": 0.03,
                "test/trbm/class_match": 0.9,
            },
            arrays={
                "trbm_reconstructions_test.npz": {
                    "inputs": rng.random((8, 16)),
                    "labels": labels,
                    "recon": rng.random((1, 8, 16)),
                }
            },
            **kw,
        )
