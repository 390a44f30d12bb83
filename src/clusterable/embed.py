"""Embed a dataset with a finished run: its best checkpoint's representations of each split, written as arrays, in
the TensorBoard projector's format and, with ``--faiss``, as a nearest-neighbour index.

    python -m clusterable.embed outputs/runs/default/<run> --out embeddings            # the run's own data
    python -m clusterable.embed <run> dataset=fashion_mnist dataset.source=fake --out e  # other data, same shape
    clusterable-embed ...        (the same, where the package is installed with its console scripts)

For each split of ``--splits`` (default: test) it writes ``<split>.npz`` (``embeddings`` (N, D) float32 and
``labels`` (N,)), ``<split>.tsv`` and ``<split>_labels.tsv`` with ``projector_config.pbtxt`` (``tensorboard
--logdir <out>`` shows them), and with ``--faiss`` ``<split>.faiss``: an exact L2 index of the embeddings
(``faiss.IndexFlatL2``; ``pip install faiss-cpu``). The embeddings are what the run's evaluators score: the
head's representation for a head that learns one (autoencoders, cluster-specific heads), else the encoder's output.
``dataset=...`` overrides compose another dataset as a run would; its inputs must have the run's input shape. Where
its class count differs from the run's, only the encoder's weights are loaded and its output is written (said in
one line). Exit status: 0 written; 1 the run cannot be embedded (one line); 2 a mistake on the command line.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import torch
from omegaconf import OmegaConf

from clusterable.evaluation.runner import represent
from clusterable.rescore import (
    CHECKPOINT,
    DATASET,
    RescoreError,
    dataset_node,
    load_best,
    on_dataset,
    trained_record,
    write_projector_tsv,
)
from clusterable.run.context import RunContext
from clusterable.run.parts import build_parts
from clusterable.searchpath import KEY, SearchPathError, with_searchpath


class EmbedError(ValueError):
    """A run or a dataset that cannot be embedded: one line."""


def embed(run_dir: Path, overrides: list[str], splits: list[str], out: Path, index: bool) -> str:
    """Write the embeddings of ``splits`` made by the run in ``run_dir`` (``overrides``: another dataset) into
    ``out``; the line that says what was written."""

    record = trained_record(run_dir)
    if not (Path(run_dir) / CHECKPOINT).exists():
        raise EmbedError(f"it kept no checkpoint ({CHECKPOINT.as_posix()}): embedding new data needs its weights")
    recorded = dict(record.config or {})
    if any(o.startswith(DATASET) for o in overrides):  # else only a search path: the run's own data
        recorded = on_dataset(recorded, dataset_node(overrides))
    recorded["evaluator"], recorded["validation_evaluators"] = {}, []
    cfg = OmegaConf.create(recorded)
    unknown = [s for s in splits if s not in ("train", "val", "test")]
    if unknown:
        raise EmbedError(f"no split {unknown[0]!r}: choose from train, val, test")
    torch.manual_seed(int(cfg.seed))
    parts = build_parts(cfg, RunContext(run_dir=Path(run_dir), choices=record.choices or {}, single=True))
    module = parts.module
    whole = load_best(module, run_dir, record.best_epoch)
    said = "" if whole else "; another class count than the run's: the encoder's output, without its head"
    module.eval()
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for split in splits:
        if whole:
            _, representation, tensors = represent(module, parts.datamodule, split)
        else:
            representation, tensors = module.embed_split(parts.datamodule, split)
        vectors = representation.detach().float().cpu().numpy()
        labels = tensors["labels"].detach().cpu().numpy()
        np.savez(out / f"{split}.npz", embeddings=vectors, labels=labels)
        write_projector_tsv(out, split, vectors, labels)
        if index:
            write_index(vectors, out / f"{split}.faiss")
        written.append(f"{split} {vectors.shape[0]} x {vectors.shape[1]}")
    return f"embedded {', '.join(written)} into {out}{said}"


def write_index(vectors: np.ndarray, path: Path) -> None:
    """An exact L2 index of ``vectors`` (N, D) written to ``path`` (faiss's own format)."""
    try:
        import faiss
    except ModuleNotFoundError:
        raise EmbedError("--faiss needs faiss: pip install faiss-cpu") from None
    index = faiss.IndexFlatL2(vectors.shape[1])
    index.add(np.ascontiguousarray(vectors, dtype=np.float32))
    faiss.write_index(index, str(path))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="clusterable-embed", description=__doc__.splitlines()[0])
    parser.add_argument("run", type=Path, help="a finished run's directory (it holds metrics.json)")
    parser.add_argument("overrides", nargs="*", help="dataset=... and dataset.<key>=... for other data")
    parser.add_argument("--out", type=Path, required=True, help="the folder the embeddings are written to")
    parser.add_argument("--splits", default="test", help="comma-separated: train, val, test (default: test)")
    parser.add_argument("--faiss", action="store_true", help="also write a faiss index of each split")
    parser.add_argument("-cd", "--config-dir", action="append", default=[], help="a config folder of your own")
    args = parser.parse_intermixed_args(argv)
    odd = [o for o in args.overrides if not o.startswith(("dataset", "+dataset", KEY))]
    if odd:
        parser.error(f"{odd[0]}: only dataset=... and dataset.<key>=... overrides choose the data to embed")
    overrides = args.overrides
    try:  # the command line: a search path, a dataset option (an unknown one, a key without its dataset)
        if any(o.startswith(DATASET) for o in overrides):
            overrides = with_searchpath([*overrides, *(f"--config-dir={d}" for d in args.config_dir)])
            dataset_node(overrides)
    except (SearchPathError, RescoreError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    try:
        print(embed(args.run, overrides, [s.strip() for s in args.splits.split(",")], args.out, args.faiss))
    except (EmbedError, RescoreError) as e:
        print(f"error: {args.run}: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
