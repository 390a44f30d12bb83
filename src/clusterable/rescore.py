"""Score finished runs with evaluators they did not run, without training them again.

    python -m clusterable.rescore corel/fashion_table2 evaluator=[clustering]
    python -m clusterable.rescore outputs/multirun/full/dml/losses/<cell> evaluator=[retrieval] \
        evaluator.retrieval.ks=[1,4]
    clusterable-eval ...        (the same, where the package is installed with its console scripts)

Targets are run directories (holding ``metrics.json``) or experiment names (every run of
``<outputs>/multirun/full/<name>``; ``--mode smoke`` for smoke runs). The evaluators are composed as a run composes
them (``evaluator=[...]`` and ``evaluator.<name>.<option>=...`` overrides). For each finished run (``ok`` or
``diverged`` with metrics) its recorded config is rebuilt (the dataset read again, the encoder and head), then:

- where it kept its representations (``representations.npz`` and ``head.pt``, ``evaluation.saved``: every run does
  unless ``save_representations=none``), the evaluators score those;
- else its best checkpoint (``checkpoints/best.ckpt``) is loaded and the splits embedded again, with one line
  saying so; a run with neither is refused in one line.

The new metrics are added to the run's ``metrics.json`` with a ``rescored`` entry (the evaluators' configs, what
they scored, when), so ``make_tables.py`` reads them like any other; a key the run already has is refused unless
``--replace``. ``--projector DIR`` also writes each run's test representation in the TensorBoard projector's
format (``<run>.tsv`` and ``<run>_labels.tsv``). The exit status is 0 when every run was re-scored, 1 when one
failed, 2 for a mistake on the command line.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

import torch
from omegaconf import DictConfig, OmegaConf

from clusterable.run.cell import FINISHED
from clusterable.rundir import read_metrics, write_metrics


class RescoreError(ValueError):
    """A run that cannot be re-scored, or a command line that names nothing to re-score: one line."""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="clusterable-eval", description=__doc__.splitlines()[0])
    parser.add_argument(
        "targets", nargs="+", help="run directories or experiment names, then evaluator overrides"
    )
    parser.add_argument("--outputs", default=None, help="the outputs folder experiment names are found in")
    parser.add_argument("--mode", default="full", choices=("full", "smoke"))
    parser.add_argument("--replace", action="store_true", help="overwrite metrics the runs already have")
    parser.add_argument("--projector", type=Path, default=None, help="also export test representations there")
    args = parser.parse_args(argv)
    overrides = [t for t in args.targets if t.startswith("evaluator")]
    targets = [t for t in args.targets if not t.startswith("evaluator")]
    try:
        evaluators = evaluator_nodes(overrides)
        runs = find_runs(targets, Path(args.outputs) if args.outputs else None, args.mode)
    except RescoreError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    failed = 0
    for run_dir in runs:
        try:
            print(f"{run_dir}: {rescore(run_dir, evaluators, args.replace, args.projector)}")
        except Exception as e:  # noqa: BLE001  (each run's failure is its line; the others go on)
            failed += 1
            print(f"{run_dir}: not re-scored: {str(e).splitlines()[0] if str(e) else type(e).__name__}")
    print(f"rescore: {len(runs) - failed} re-scored, {failed} failed")
    return 1 if failed else 0


def evaluator_nodes(overrides: list[str]) -> DictConfig:
    """The ``evaluator`` nodes that ``overrides`` compose (as a run composes them); refused without any."""
    from hydra import compose, initialize_config_dir
    from hydra.errors import HydraException

    from clusterable.config import CONFIG_DIR

    if not any(o.split("=")[0] in ("evaluator", "+evaluator") for o in overrides):
        raise RescoreError(
            "name the evaluators to run: evaluator=[clustering] (and evaluator.<name>.<option>=...)"
        )
    try:
        with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base="1.3"):
            cfg = compose("train", overrides=overrides)
    except HydraException as e:
        raise RescoreError(str(e).splitlines()[0]) from None
    return cfg.evaluator


def find_runs(targets: list[str], outputs: Path | None, mode: str) -> list[Path]:
    """Every run directory the targets name: a folder with ``metrics.json``, a folder of such folders, or an
    experiment name under ``<outputs>/multirun/<mode>/``."""
    import os

    if not targets:
        raise RescoreError("name the runs to re-score: run directories or experiment names")
    root = outputs or Path(os.environ.get("CLUSTERABLE_OUTPUTS", "outputs"))
    found: list[Path] = []
    for target in targets:
        path = Path(target)
        if not path.exists():
            path = root / "multirun" / mode / target
        if (path / "metrics.json").exists():
            found.append(path)
        elif path.is_dir():
            found += sorted(p.parent for p in path.glob("*/metrics.json"))
        else:
            raise RescoreError(f"{target}: neither a run directory nor an experiment with runs under {root}")
    if not found:
        raise RescoreError(f"no runs found in {', '.join(targets)}")
    return found


def rescore(run_dir: Path, evaluator_cfg: DictConfig, replace: bool, projector: Path | None) -> str:
    """Score one run with ``evaluator_cfg``'s evaluators and add their metrics to its ``metrics.json``; the line
    that says what was done."""
    from clusterable.evaluation.runner import score

    payload = read_metrics(run_dir)
    if payload is None or payload.get("status") not in FINISHED or not payload.get("metrics"):
        raise RescoreError(
            f"not a finished run (status {None if payload is None else payload.get('status')})"
        )
    cfg, parts = _rebuilt(run_dir, payload, evaluator_cfg)
    represented, source = _representations(run_dir, parts, cfg)
    metrics = score(represented, parts.datamodule, parts.evaluators, cfg.eval_stages, parts.module.head, run_dir,
                    cfg.seed)  # fmt: skip
    clash = sorted(set(metrics) & set(payload["metrics"]))
    if clash and not replace:
        raise RescoreError(f"it already has {', '.join(clash[:3])}{' ...' if len(clash) > 3 else ''} (--replace "
                           "overwrites)")  # fmt: skip
    payload["metrics"].update(metrics)
    payload.setdefault("rescored", []).append({
        "evaluator": OmegaConf.to_container(evaluator_cfg, resolve=True), "keys": sorted(metrics),
        "from": source, "at": time.strftime("%Y-%m-%dT%H:%M:%S"),
    })  # fmt: skip
    write_metrics(run_dir, payload)
    if projector is not None and "test" in represented:
        _export(projector, run_dir, represented["test"])
    return f"{len(metrics)} metrics added from {source}"


def _rebuilt(run_dir: Path, payload: dict[str, Any], evaluator_cfg: DictConfig) -> tuple[DictConfig, Any]:
    """The run's recorded config with the new evaluators, and its parts built from it (data read again)."""
    from clusterable.run.context import RunContext
    from clusterable.run.parts import build_parts

    recorded = dict(payload["config"])
    recorded["evaluator"] = OmegaConf.to_container(evaluator_cfg, resolve=True)
    recorded["validation_evaluators"] = []
    cfg = OmegaConf.create(recorded)
    ctx = RunContext(run_dir=Path(run_dir), choices=payload.get("choices") or {}, single=True)
    torch.manual_seed(int(cfg.seed))
    return cfg, build_parts(cfg, ctx)


def _representations(run_dir: Path, parts: Any, cfg: DictConfig) -> tuple[dict, str]:
    """split -> (encoder output, representation, split tensors) from the kept files, or embedded again from the
    best checkpoint; and which."""
    from clusterable.evaluation import saved
    from clusterable.evaluation.runner import represent

    module, data = parts.module, parts.datamodule
    kept = saved.load(run_dir, module.device)
    stages = list(dict.fromkeys(["train", *cfg.eval_stages]))
    if kept is not None and all(s in kept for s in stages) and saved.load_head(run_dir, module.head):
        out = {}
        for stage in stages:
            encoder_output, representation, labels = kept[stage]
            split = {k: v.to(module.device) for k, v in data.split(stage).items()}
            if not torch.equal(split["labels"].to(labels.device), labels):
                raise RescoreError(f"the labels of split {stage!r} differ from those the run kept: the dataset "
                                   "changed since it ran")  # fmt: skip
            out[stage] = (encoder_output, representation, split)
        return out, f"its kept representations ({saved.FILE})"
    checkpoint = Path(run_dir) / "checkpoints" / "best.ckpt"
    if not checkpoint.exists():
        raise RescoreError(f"it kept no representations ({saved.FILE}) and no checkpoint to embed again from")
    print(f"{run_dir}: no kept representations: embedding its splits again from {checkpoint.name}")
    state = torch.load(checkpoint, map_location=module.device, weights_only=True)
    saved.set_state(module, state["state_dict"])
    module.eval()
    return {stage: represent(module, data, stage) for stage in stages}, "best.ckpt, embedded again"


def _export(folder: Path, run_dir: Path, test: tuple) -> None:
    """The TensorBoard projector's two files: the vectors and their labels, tab-separated."""
    folder.mkdir(parents=True, exist_ok=True)
    _, representation, split = test
    name = Path(run_dir).name.replace("/", "_")
    rows = representation.detach().cpu().tolist()
    (folder / f"{name}.tsv").write_text("\n".join("\t".join(f"{v:.6g}" for v in row) for row in rows) + "\n")
    labels = split["labels"].detach().cpu().tolist()
    (folder / f"{name}_labels.tsv").write_text("\n".join(str(v) for v in labels) + "\n")


if __name__ == "__main__":
    sys.exit(main())
