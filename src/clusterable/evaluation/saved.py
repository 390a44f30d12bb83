"""A run's representations kept in its run directory, so that an evaluator added later scores the run without
training it again (``clusterable.rescore``).

``representations.npz`` holds, for every split the evaluation embedded (the training split and each of
``eval_stages``): ``<split>/representation`` (N, D') what the evaluators score, ``<split>/encoder_output`` (N, D)
where it differs (a ``RepresentingHead``'s), and ``<split>/labels`` (N,). ``head.pt`` holds the trained head's
``state_dict`` (the evaluators that call the head: a classifier's logits, a cluster-specific head's
assignments), which runs without a monitor keep nowhere else. Stored in float16 by default
(``save_representations: float16``; ``float32`` for exact re-scores, ``none`` to keep nothing); a split holding
more than ``MAX_VALUES`` values is left out (its line says so), and values beyond float16's range are stored in
float32.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

import numpy as np
import torch
from torch import Tensor

FILE = "representations.npz"
HEAD_FILE = "head.pt"
MAX_VALUES = 50_000_000  # a split's representation of more values (100 MB in float16) is not kept
DTYPES = {"float16": np.float16, "float32": np.float32}
FLOAT16_MAX = float(np.finfo(np.float16).max)


def save(
    run_dir: Path, splits: Mapping[str, tuple[Tensor, Tensor, Tensor]], head: torch.nn.Module, dtype: str
) -> list[str]:
    """Write ``splits`` (split -> (encoder output, representation, labels)) and ``head``'s state to ``run_dir``;
    returns what was left out, one line each. Written to a temporary name, then renamed: never half a file."""
    if dtype not in DTYPES:
        raise ValueError(f"save_representations must be float16, float32 or none, got {dtype!r}")
    arrays: dict[str, np.ndarray] = {}
    left_out = []
    for stage, (encoder_output, representation, labels) in splits.items():
        if representation.numel() + (0 if encoder_output is representation else encoder_output.numel()) > MAX_VALUES:
            left_out.append(
                f"representations: split {stage!r} not kept ({representation.numel():,} values, more "
                f"than {MAX_VALUES:,})"
            )
            continue
        arrays[f"{stage}/representation"] = _stored(representation, dtype)
        if encoder_output is not representation:
            arrays[f"{stage}/encoder_output"] = _stored(encoder_output, dtype)
        arrays[f"{stage}/labels"] = labels.detach().cpu().numpy()
    run_dir = Path(run_dir)
    _atomic(run_dir / FILE, lambda f: np.savez(f, **arrays))
    _atomic(
        run_dir / HEAD_FILE,
        lambda f: torch.save({k: v.detach().cpu() for k, v in head.state_dict().items()}, f),
    )
    return left_out


def load(run_dir: Path, device: torch.device | str = "cpu") -> dict[str, tuple[Tensor, Tensor, Tensor]] | None:
    """The splits ``save`` kept (split -> (encoder output, representation, labels)) in float32 on ``device``, or
    None when the run kept none. A file that cannot be read raises ``ValueError`` naming it."""
    path = Path(run_dir) / FILE
    if not path.exists():
        return None
    try:
        with np.load(path) as data:
            arrays = {key: data[key] for key in data.files}
    except (OSError, ValueError, EOFError) as e:
        raise ValueError(
            f"{path} cannot be read ({str(e).splitlines()[0]}): re-score from the checkpoint by removing it"
        ) from None
    out = {}
    for key in arrays:
        stage, _, name = key.rpartition("/")
        if name != "representation":
            continue
        representation = torch.as_tensor(arrays[key].astype(np.float32), device=device)
        encoder = arrays.get(f"{stage}/encoder_output")
        encoder_output = (
            representation if encoder is None else torch.as_tensor(encoder.astype(np.float32), device=device)
        )
        out[stage] = (
            encoder_output,
            representation,
            torch.as_tensor(arrays[f"{stage}/labels"], device=device),
        )
    return out


def load_head(run_dir: Path, head: torch.nn.Module) -> bool:
    """Load the kept head state into ``head``; False where the run kept none."""
    path = Path(run_dir) / HEAD_FILE
    if not path.exists():
        return False
    state = torch.load(path, map_location="cpu", weights_only=True)
    set_state(head, state)
    return True


def set_state(module: torch.nn.Module, state: Mapping[str, Tensor]) -> None:
    """``load_state_dict``, resizing buffers set after construction (a clustering head's cluster state)."""
    own = dict(module.named_buffers())
    for name, value in state.items():
        if name in own and own[name].shape != value.shape:
            owner_name, _, attr = name.rpartition(".")
            owner = module.get_submodule(owner_name) if owner_name else module
            setattr(owner, attr, value.clone())
    module.load_state_dict(state)


def _stored(values: Tensor, dtype: str) -> np.ndarray:
    array = values.detach().float().cpu().numpy()
    if dtype == "float16" and np.isfinite(array).all() and np.abs(array).max(initial=0.0) > FLOAT16_MAX:
        return array  # beyond float16's range: kept in float32 rather than as infinities
    return array.astype(DTYPES[dtype])


def _atomic(path: Path, write) -> None:
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with open(temporary, "wb") as f:
            write(f)
        os.replace(temporary, path)
    finally:
        temporary.unlink(missing_ok=True)
