"""Score trained runs with evaluators they did not run, or finish runs whose evaluators failed, without training
them again.

    python -m clusterable.rescore corel/fashion_table2 evaluator=[clustering]
    python -m clusterable.rescore outputs/multirun/full/dml/losses/<cell> evaluator=[retrieval] \
        evaluator.retrieval.ks=[1,4]
    python -m clusterable.rescore outputs/runs/default/<run>      # finish it: re-run its failed evaluators
    clusterable-eval ...        (the same, where the package is installed with its console scripts)

Targets are run directories (holding ``metrics.json``) or experiment names (every run of
``<outputs>/multirun/full/<name>``; ``--mode smoke`` for smoke runs). The evaluators are composed as a run composes
them (``evaluator=[...]`` and ``evaluator.<name>.<option>=...`` overrides). For each trained run (``ok``,
``diverged`` with metrics, or ``partial``: trained, but an evaluator failed) its recorded config is rebuilt (the
dataset read again, the encoder and head), then:

- where it kept its representations (``representations.npz`` and ``head.pt``, ``evaluation.saved``: every run does
  unless ``save_representations=none``), the evaluators score those;
- else its best checkpoint (``checkpoints/best.ckpt``) is loaded and the splits embedded again, with one line
  saying so (a checkpoint of another epoch than the run's best is refused: another attempt's);
- a run with neither needs training again, and says so in one line: a record that ``scripts/records.py`` keeps in
  ``results/`` is one (it keeps neither: see its docstring for the sizes that decided it).

Without ``evaluator=...`` it finishes ``partial`` runs: each run's failed evaluators (``evaluators_failed`` in its
``metrics.json``), with the settings its config records, score the weights the run tested (its best checkpoint,
else its kept representations); once none is left failed the run is ``ok`` (or ``diverged``, as training left it).
An evaluator named on the command line finishes a partial run too where its settings are the run's own.

With ``dataset=...`` (and ``dataset.<key>=...``) overrides it scores the runs on another dataset instead, as a run
composes it: each run's best checkpoint embeds that dataset's splits (its inputs must have the run's input shape and
its class count the run's head's), and the metrics are added under ``on/<dataset>/`` (``on/fashion_mnist/test/
kmeans/acc``), beside the run's own, with the dataset's config in the ``rescored`` entry.

The new metrics are added to the run's ``metrics.json`` with a ``rescored`` entry (the evaluators' configs, what
they scored, when; ``finished``: the failed evaluators it finished), so ``make_tables.py`` reads them like any
other; a key the run already has is refused unless ``--replace``. An evaluator that fails costs only its own
metrics: the others' are added, and its line names it. ``--projector DIR`` also writes each run's test
representation in the TensorBoard projector's format (``<run>.tsv`` and ``<run>_labels.tsv``). The exit status is
0 when every run was re-scored (or had nothing to finish), 1 when one failed, 2 for a mistake on the command line.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from typing import Any

import torch
from hydra import compose, initialize_config_dir
from hydra.errors import HydraException
from omegaconf import DictConfig, OmegaConf

from clusterable.config import CONFIG_DIR, ConfigError, check_evaluator_group
from clusterable.evaluation import saved
from clusterable.evaluation.runner import represent, score
from clusterable.preflight import check_group_options
from clusterable.record import METRICS_FILE, PARTIAL, TRAINED, RecordError, RescoreEntry, RunRecord
from clusterable.run.context import RunContext
from clusterable.run.parts import build_parts
from clusterable.run.wrapper import evaluators_finished
from clusterable.searchpath import KEY, SearchPathError, with_searchpath

CHECKPOINT = Path("checkpoints") / "best.ckpt"
DATASET = ("dataset=", "dataset.", "+dataset")  # the overrides that score the runs on another dataset
NAME_EVALUATORS = "name the evaluators to run: evaluator=[clustering] (and evaluator.<name>.<option>=...)"


class RescoreError(ValueError):
    """A run that cannot be re-scored, or a command line that names nothing to re-score: one line."""


class NothingToFinish(Exception):
    """A run asked to be finished (no ``evaluator=...``) whose evaluators all scored: nothing to do, no failure."""


class AlreadyScored(Exception):
    """A run that already has every metric the evaluators made (and no ``--replace``): skipped, no failure."""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="clusterable-eval", description=__doc__.splitlines()[0])
    parser.add_argument("targets", nargs="+", help="run directories or experiment names, then evaluator overrides")
    parser.add_argument("--outputs", default=None, help="the outputs folder experiment names are found in")
    parser.add_argument("--mode", default="full", choices=("full", "smoke"))
    parser.add_argument("--replace", action="store_true", help="overwrite metrics the runs already have")
    parser.add_argument("--projector", type=Path, default=None, help="also export test representations there")
    # intermixed: the runs, options and evaluator overrides in any order (`e2e --outputs X evaluator=[...]`)
    parser.add_argument("-cd", "--config-dir", action="append", default=[], help="a config folder of your own")
    args = parser.parse_intermixed_args(argv)
    # what composes the evaluators and another dataset: a folder of yours holds some
    composing = ("evaluator", "+evaluator", *DATASET, KEY)
    overrides = [t for t in args.targets if t.startswith(composing)]
    targets = [t for t in args.targets if not t.startswith(composing)]
    try:
        other_data = any(o.startswith(DATASET) for o in overrides)
        if any(o.startswith(("evaluator", "+evaluator")) for o in overrides):  # finishing a run composes none
            cfg = composed(with_searchpath([*overrides, *(f"--config-dir={d}" for d in args.config_dir)]))
            evaluators = evaluator_nodes(cfg, overrides)
            dataset = OmegaConf.to_container(cfg.dataset, resolve=False) if other_data else None
        elif other_data:  # finishing a run scores its own data: another dataset needs the evaluators named
            raise RescoreError(f"scoring on another dataset: {NAME_EVALUATORS}")
        else:
            evaluators = dataset = None
        runs = find_runs(targets, Path(args.outputs) if args.outputs else None, args.mode)
        if evaluators is None and not any(_evaluators_failed(r) for r in runs):
            raise RescoreError(
                f"{NAME_EVALUATORS}; without them it finishes runs whose evaluators failed, and none of these has one"
            )
    except (RescoreError, SearchPathError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    failed = idle = skipped = 0
    for run_dir in runs:
        try:
            if dataset is not None:
                line = rescore_on(run_dir, evaluators, dataset, args.replace)
            else:
                line = rescore(run_dir, evaluators, args.replace, args.projector)
            print(f"{run_dir}: {line}")
        except NothingToFinish as e:
            idle += 1
            print(f"{run_dir}: {e}")
        except AlreadyScored as e:
            skipped += 1
            print(f"{run_dir}: skipped: {e}")
        except Exception as e:  # noqa: BLE001  (each run's failure is its line; the others go on)
            failed += 1
            print(f"{run_dir}: not re-scored: {str(e).splitlines()[0] if str(e) else type(e).__name__}")
    nothing = f", {idle} with nothing to finish" if idle else ""
    nothing += f", {skipped} skipped (already scored; --replace scores them again)" if skipped else ""
    print(f"rescore: {len(runs) - failed - idle - skipped} re-scored{nothing}, {failed} failed")
    return 1 if failed else 0


def _evaluators_failed(run_dir: Path) -> bool:
    """Whether the run in ``run_dir`` is partial: an evaluator failed (a record that cannot be read: no)."""
    try:
        record = RunRecord.read(run_dir)
    except RecordError:
        return False
    return record is not None and bool(record.evaluators_failed)


def composed(overrides: list[str]) -> DictConfig:
    """The training config that ``overrides`` compose, as a run composes it; a Hydra error in one line (an unknown
    option names the available ones, as training does)."""
    if problem := check_group_options(overrides):
        raise RescoreError(problem)
    keys = [o.split("=")[0].lstrip("+~") for o in overrides]
    if any(k.startswith("dataset.") for k in keys) and "dataset" not in keys:
        given = next(o for o in overrides if o.lstrip("+~").startswith("dataset."))
        raise RescoreError(
            f"{given}: name the dataset it changes (dataset=<name> {given}); without dataset=..., each run's "
            "own data is used"
        )
    try:
        with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base="1.3"):
            return compose("train", overrides=overrides)
    except HydraException as e:
        lines = [line.strip() for line in str(e).splitlines() if line.strip()]
        # "Could not override 'x'." alone does not say what to do; Hydra's next line does ("use +x=...")
        said = " ".join(lines[:2]) if lines and lines[0].startswith("Could not override") else lines[0]
        raise RescoreError(said) from None


def evaluator_nodes(cfg: DictConfig, overrides: list[str]) -> DictConfig:
    """The ``evaluator`` nodes of ``cfg`` (``composed(overrides)``, as a run composes them); refused without any."""
    if not any(o.split("=")[0] in ("evaluator", "+evaluator") for o in overrides):
        raise RescoreError(NAME_EVALUATORS)
    if not cfg.get("evaluator"):  # evaluator=[] composes no node at all
        raise RescoreError(f"{' '.join(overrides)} names no evaluator: {NAME_EVALUATORS}")
    try:
        check_evaluator_group(cfg.evaluator)
    except ConfigError as e:
        raise RescoreError(str(e)) from None
    return cfg.evaluator


def dataset_node(overrides: list[str]) -> dict:
    """The ``dataset`` node that ``overrides`` compose (as a run composes it), unresolved: the run's own paths
    resolve it where the run is rebuilt."""
    return OmegaConf.to_container(composed(overrides).dataset, resolve=False)


def on_dataset(recorded: dict, node: dict) -> dict:
    """The run's recorded config with ``node`` as its dataset; refused where the inputs' shape is another than the
    run's (its encoder could not read them)."""
    mine = (recorded.get("dataset") or {}).get("input_shape")
    if list(node.get("input_shape") or []) != list(mine or []):
        raise RescoreError(f"{node.get('name')}'s inputs are {node.get('input_shape')}, the run's {mine}")
    return {**recorded, "dataset": node}


def load_best(module: Any, run_dir: Path, best_epoch: int | None) -> bool:
    """Load the run's best checkpoint into ``module``: True when whole, False when only the encoder fits (another
    class count: the head's shapes differ, the encoder's do not). Refused where the checkpoint is of another epoch
    than the run's best: it is another attempt's (a cell run again, stopped, and its record put back)."""
    state = torch.load(Path(run_dir) / CHECKPOINT, map_location=module.device, weights_only=True)
    epoch = int(state["epoch"]) if state.get("global_step", 1) > 0 else None  # as run.training.restore_best
    if epoch != best_epoch:
        raise RescoreError(
            f"its checkpoint ({CHECKPOINT.as_posix()}) is of epoch {epoch}, its record's best epoch is {best_epoch}: "
            "another attempt's model, not the one its metrics are of"
        )
    try:
        saved.set_state(module, state["state_dict"])
        return True
    except RuntimeError:
        encoder = {k.removeprefix("encoder."): v for k, v in state["state_dict"].items() if k.startswith("encoder.")}
        module.encoder.load_state_dict(encoder)
        return False


def find_runs(targets: list[str], outputs: Path | None, mode: str) -> list[Path]:
    """Every run directory the targets name: a folder with ``metrics.json``, a folder with such folders below it
    (at any depth), or an experiment name under ``<outputs>/multirun/<mode>/``."""
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
        elif path.is_dir():  # at any depth: an override's "/" nests a cell's folder
            found += sorted(p.parent for p in path.rglob("metrics.json") if p.is_file())
        else:
            raise RescoreError(f"{target}: neither a run directory nor an experiment with runs under {root}")
    if not found:
        raise RescoreError(f"no runs found in {', '.join(targets)}")
    return found


def rescore(run_dir: Path, evaluator_cfg: DictConfig | None, replace: bool, projector: Path | None) -> str:
    """Score one run with ``evaluator_cfg``'s evaluators (None: its own failed ones, to finish it) and add their
    metrics to its ``metrics.json``; the line that says what was done. ``RescoreError`` when nothing could be
    added, or when an evaluator failed (after the others' metrics were added); ``NothingToFinish``."""
    record = trained_record(run_dir)
    failed_before = dict(record.evaluators_failed or {})
    finishing = evaluator_cfg is None
    if evaluator_cfg is None:
        if not failed_before:
            raise NothingToFinish(f"nothing to finish: status {record.status}, no evaluator failed")
        evaluator_cfg = _own_evaluators(record, list(failed_before))
    _require_kept(run_dir)
    cfg, parts = _rebuilt(run_dir, record, evaluator_cfg)
    represented, source = _representations(run_dir, record, parts, cfg, prefer_checkpoint=finishing)
    failures: dict[str, Any] = {}
    metrics = score(
        represented, parts.datamodule, parts.evaluators, cfg.eval_stages, parts.module.head, run_dir, cfg.seed, failures
    )
    clash = sorted(set(metrics) & set(record.metrics))
    if metrics and len(clash) == len(metrics) and not replace and not failures and not finishing:
        if projector is not None and "test" in represented:
            _export(projector, run_dir, represented["test"])
        raise AlreadyScored(
            f"it already has all {len(clash)} metrics ({', '.join(clash[:3])}{' ...' * (len(clash) > 3)})"
        )
    if clash and not replace:
        raise RescoreError(
            f"it already has {', '.join(clash[:3])}{' ...' if len(clash) > 3 else ''} (--replace overwrites)"
        )
    nodes = OmegaConf.to_container(evaluator_cfg, resolve=True)
    own = (record.config or {}).get("evaluator") or {}
    # A failed evaluator is finished only by its own settings: scored otherwise, the run's config would not say
    # how its numbers were made.
    finished = [n for n in failed_before if n in nodes and n not in failures and nodes[n] == own.get(n)]
    for name, failure in failures.items():
        if name in failed_before:
            failed_before[name] = {"stage": failure.stage, "error": failure.error}
    if failed_before != (record.evaluators_failed or {}):
        record.evaluators_failed = failed_before
    if metrics:
        record.metrics.update(metrics)
        entry = RescoreEntry(evaluator=nodes, keys=sorted(metrics), at=time.strftime("%Y-%m-%dT%H:%M:%S"))
        entry["from"] = source
        if finished:
            entry["finished"] = finished
        record.rescored = [*(record.rescored or []), entry]
    if record.status == PARTIAL:
        evaluators_finished(record, finished)
    if metrics or finished or failures:
        record.write(run_dir)
    if projector is not None and "test" in represented:
        _export(projector, run_dir, represented["test"])
    done = f"{len(metrics)} metrics added from {source}"
    if finished:
        done += f"; finished {', '.join(f'evaluator.{n}' for n in finished)}: status {record.status}"
    if failures:
        still = f"; status {record.status}" if record.status == PARTIAL else ""
        raise RescoreError(f"{'; '.join(f.error for f in failures.values())} ({done}{still})")
    if record.status == PARTIAL:
        left = list(record.evaluators_failed or {})
        named = ", ".join(f"evaluator.{n}" for n in left)
        other = [n for n in left if n in nodes]  # scored here, but not with the settings its config records
        otherwise = f"{', '.join(f'evaluator.{n}' for n in other)} scored with other settings than its config's"
        why = f"{otherwise}, which failed" if other else "run clusterable-eval without evaluator=... to finish it"
        done += f"; still partial: {named} failed ({why})"
    return done


def rescore_on(run_dir: Path, evaluator_cfg: DictConfig, dataset: dict, replace: bool) -> str:
    """Score one run on another dataset: its best checkpoint embeds ``dataset``'s splits, ``evaluator_cfg``'s
    evaluators score them, and their metrics are added under ``on/<dataset>/`` with the dataset in the
    ``rescored`` entry; the line that says what was done. ``RescoreError`` when it cannot be, ``AlreadyScored``."""
    record = trained_record(run_dir)
    if not (Path(run_dir) / CHECKPOINT).exists():
        raise RescoreError(
            f"it kept no checkpoint ({CHECKPOINT.as_posix()}): scoring it on another dataset needs its weights"
        )
    nodes = OmegaConf.to_container(evaluator_cfg, resolve=True)
    cfg = OmegaConf.create({**on_dataset(dict(record.config or {}), dataset), "evaluator": nodes})
    cfg.validation_evaluators = []
    torch.manual_seed(int(cfg.seed))
    parts = build_parts(cfg, RunContext(run_dir=Path(run_dir), choices=record.choices or {}, single=True))
    if not load_best(parts.module, run_dir, record.best_epoch):
        theirs, mine = parts.datamodule.num_classes, ((record.config or {}).get("dataset") or {}).get("num_classes")
        raise RescoreError(
            f"{dataset.get('name')} has {theirs} classes, the run's head {mine}: its head cannot score it "
            "(clusterable-embed writes the encoder's output)"
        )
    parts.module.eval()
    stages = list(dict.fromkeys(["train", *cfg.eval_stages]))
    represented = {stage: represent(parts.module, parts.datamodule, stage) for stage in stages}
    failures: dict[str, Any] = {}
    scores = score(
        represented, parts.datamodule, parts.evaluators, cfg.eval_stages, parts.module.head, None, cfg.seed, failures
    )
    prefix = f"on/{dataset.get('name')}/"
    metrics = {prefix + k: v for k, v in scores.items()}
    clash = sorted(set(metrics) & set(record.metrics))
    # the same keys made from other data (another split seed, another source) are not "already scored"
    earlier = [e for e in record.rescored or [] if set(e.get("keys") or []) & set(clash)]
    if clash and not replace and any(e.get("dataset") != dataset for e in earlier):
        raise RescoreError(
            f"it has {prefix}... from another {dataset.get('name')} config than this one (its rescored entry "
            "keeps it; --replace overwrites)"
        )
    if clash and not replace:
        if len(clash) == len(metrics) and not failures:
            raise AlreadyScored(
                f"it already has all {len(clash)} metrics ({', '.join(clash[:3])}{' ...' * (len(clash) > 3)})"
            )
        raise RescoreError(
            f"it already has {', '.join(clash[:3])}{' ...' if len(clash) > 3 else ''} (--replace overwrites)"
        )
    if metrics:
        record.metrics.update(metrics)
        entry = RescoreEntry(evaluator=nodes, keys=sorted(metrics), at=time.strftime("%Y-%m-%dT%H:%M:%S"))
        entry["from"] = f"{CHECKPOINT.name}, embedding {dataset.get('name')}"
        entry["dataset"] = dataset
        record.rescored = [*(record.rescored or []), entry]
        record.write(run_dir)
    done = f"{len(metrics)} metrics added under {prefix} from {CHECKPOINT.name}"
    if failures:
        raise RescoreError(f"{'; '.join(f.error for f in failures.values())} ({done})")
    return done


def trained_record(run_dir: Path) -> RunRecord:
    """The run's record, refused in one line unless it is of a trained run (``TRAINED``) with metrics."""
    try:
        record = RunRecord.read(run_dir)
    except RecordError as e:  # "<file>: <why>"
        why = str(e).removeprefix(f"{Path(run_dir) / METRICS_FILE}: ")
        raise RescoreError(f"its {METRICS_FILE} cannot be read ({why})") from None
    if record is None:
        raise RescoreError(f"its {METRICS_FILE} is missing")
    if record.status not in TRAINED or not record.metrics:
        raise RescoreError(f"not a trained run (status {record.status}): only a run whose training finished is scored")
    return record


def _own_evaluators(record: RunRecord, names: list[str]) -> DictConfig:
    """The run's own settings (its recorded config) of the evaluators ``names``."""
    own = (record.config or {}).get("evaluator") or {}
    missing = [n for n in names if n not in own]
    if missing:
        raise RescoreError(
            f"its config records no evaluator.{missing[0]}, which failed: name the evaluators to run (evaluator=[...])"
        )
    return OmegaConf.create({n: own[n] for n in names})


def _rebuilt(run_dir: Path, record: RunRecord, evaluator_cfg: DictConfig) -> tuple[DictConfig, Any]:
    """The run's recorded config with the new evaluators, and its parts built from it (data read again)."""
    recorded = dict(record.config or {})
    recorded["evaluator"] = OmegaConf.to_container(evaluator_cfg, resolve=True)
    recorded["validation_evaluators"] = []
    cfg = OmegaConf.create(recorded)
    ctx = RunContext(run_dir=Path(run_dir), choices=record.choices or {}, single=True)
    torch.manual_seed(int(cfg.seed))
    return cfg, build_parts(cfg, ctx)


def _representations(
    run_dir: Path, record: RunRecord, parts: Any, cfg: DictConfig, prefer_checkpoint: bool = False
) -> tuple[dict, str]:
    """split -> (encoder output, representation, split tensors) from the kept files, or embedded again from the
    best checkpoint; and which. ``prefer_checkpoint``: the checkpoint first where there is one (finishing a run:
    the weights it tested, in float32, give the numbers its evaluation would have given)."""
    module, data = parts.module, parts.datamodule
    stages = list(dict.fromkeys(["train", *cfg.eval_stages]))
    checkpoint = Path(run_dir) / CHECKPOINT
    if prefer_checkpoint and checkpoint.exists():
        return _embedded(run_dir, record, parts, stages), f"{CHECKPOINT.name}, embedded again"
    kept = saved.load(run_dir, module.device)
    if kept is not None and all(s in kept for s in stages) and saved.load_head(run_dir, module.head):
        out = {}
        for stage in stages:
            encoder_output, representation, labels = kept[stage]
            split = {k: v.to(module.device) for k, v in data.split(stage).items()}
            if not torch.equal(split["labels"].to(labels.device), labels):
                raise RescoreError(
                    f"the labels of split {stage!r} differ from those the run kept: the dataset changed since it ran"
                )
            out[stage] = (encoder_output, representation, split)
        return out, f"its kept representations ({saved.FILE})"
    _require_kept(run_dir)
    if not checkpoint.exists():
        raise RescoreError(
            f"its kept representations ({saved.FILE}) lack a split or the head ({saved.HEAD_FILE}) "
            f"and it kept no checkpoint ({CHECKPOINT.as_posix()}): re-scoring it needs training "
            "again (run its cell again, with the evaluators added)"
        )
    print(f"{run_dir}: no kept representations: embedding its splits again from {CHECKPOINT.name}")
    return _embedded(run_dir, record, parts, stages), f"{CHECKPOINT.name}, embedded again"


def _require_kept(run_dir: Path) -> None:
    """Refuse, before the data is read, a run that kept neither representations nor a checkpoint (a record
    restored from ``results/``, or ``save_representations=none`` without a monitor): only training makes it
    again."""
    if not (Path(run_dir) / saved.FILE).exists() and not (Path(run_dir) / CHECKPOINT).exists():
        raise RescoreError(
            f"it kept no representations ({saved.FILE}) and no checkpoint "
            f"({CHECKPOINT.as_posix()}): re-scoring it needs training again (run its cell again, with "
            "the evaluators added)"
        )


def _embedded(run_dir: Path, record: RunRecord, parts: Any, stages: list[str]) -> dict:
    """Every split of ``stages`` embedded again from the run's best checkpoint (``load_best``)."""
    if not load_best(parts.module, run_dir, record.best_epoch):
        raise RescoreError(f"its checkpoint ({CHECKPOINT.as_posix()}) does not fit the head its config builds")
    parts.module.eval()
    return {stage: represent(parts.module, parts.datamodule, stage) for stage in stages}


def _export(folder: Path, run_dir: Path, test: tuple) -> None:
    """The run's test representation in the TensorBoard projector's format, named by the run's folder."""
    _, representation, split = test
    write_projector_tsv(folder, Path(run_dir).name.replace("/", "_"), representation, split["labels"])


def write_projector_tsv(folder: Path, name: str, vectors: Any, labels: Any) -> None:
    """``<name>.tsv`` (the vectors (N, D), tab-separated) and ``<name>_labels.tsv`` (N,) in ``folder``, and the
    folder's ``projector_config.pbtxt`` listing them with the others there."""
    folder.mkdir(parents=True, exist_ok=True)
    rows = vectors.detach().cpu().tolist() if isinstance(vectors, torch.Tensor) else vectors.tolist()
    (folder / f"{name}.tsv").write_text("".join("\t".join(f"{v:.6g}" for v in row) + "\n" for row in rows))
    labels = labels.detach().cpu() if isinstance(labels, torch.Tensor) else labels
    (folder / f"{name}_labels.tsv").write_text("".join(f"{v}\n" for v in labels.tolist()))
    write_projector_config(folder)


PROJECTOR_CONFIG = "projector_config.pbtxt"


def write_projector_config(folder: Path) -> Path:
    """``projector_config.pbtxt``: every ``<name>.tsv`` of ``folder`` with its ``<name>_labels.tsv``, the file
    TensorBoard's projector reads (``tensorboard --logdir <folder>`` lists each run's embedding by its name)."""
    blocks = []
    for tensor in sorted(folder.glob("*.tsv")):
        if tensor.name.endswith("_labels.tsv"):
            continue
        labels = tensor.with_name(f"{tensor.stem}_labels.tsv")
        lines = [f'  tensor_name: "{tensor.stem}"', f'  tensor_path: "{tensor.name}"']
        if labels.exists():
            lines.append(f'  metadata_path: "{labels.name}"')
        blocks.append("embeddings {\n" + "\n".join(lines) + "\n}\n")
    path = folder / PROJECTOR_CONFIG
    path.write_text("".join(blocks))
    return path


if __name__ == "__main__":
    sys.exit(main())
