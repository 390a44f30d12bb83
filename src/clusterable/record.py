"""What a run records: ``RunRecord``, the one shape of ``metrics.json`` that the run layer, the stacked members,
re-scoring and ``scripts/records.py`` write and that the tables, the launchers and the command line read.

The ground floor: this module imports nothing of the project, so every layer may import it. A key is a field here
before any file writes it; a reader reads a field, never ``record.get("key", default)``, so a renamed key fails
where it is read instead of turning a table's cell into ``n/a``. ``docs/design.md``'s "What a run records" is the
table of these fields (``tests/test_record.py`` checks it both ways).

Shapes. ``SCHEMA`` 2 puts a resolver's remarks (COREL's tuned λ: ``tuned_lambda``, ``lambda_fallback``,
``tuned_lambda_incomplete``) under ``notes``; schema 1 (no ``schema`` key) held them at the top level, listed in
``resolver_notes``. ``RunRecord.from_dict`` reads both; ``to_dict`` writes schema 2 and nothing else differs.
"""

from __future__ import annotations

import json
import math
import os
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, Literal, TypedDict

SCHEMA = 2
METRICS_FILE = "metrics.json"

# How a run (or a sweep's cell) ended. Written to metrics.json: ok, failed, diverged, partial, pruned (an
# interrupted run is written ``failed`` with the error ``interrupted``). Told to a sweep's summary only: skipped (a
# finished run reused), busy (another process runs the cell), interrupted.
Status = Literal["ok", "failed", "diverged", "partial", "skipped", "busy", "interrupted", "pruned"]
OK: Status = "ok"
FAILED: Status = "failed"
# The head saw its loss run away in its unbounded regime: a result its grid keeps (best epoch's metrics, if any).
DIVERGED: Status = "diverged"
# Trained, but an evaluator failed: the others' metrics are kept; no table pools it until clusterable-eval ends it.
PARTIAL: Status = "partial"
SKIPPED: Status = "skipped"
BUSY: Status = "busy"
INTERRUPTED: Status = "interrupted"
# A search's trial that Optuna's pruner stopped (``clusterable.pruning``): its last epoch's metrics, never evaluated;
# no table pools it.
PRUNED: Status = "pruned"
# A sweep summary's statuses, in the order it counts them.
STATUSES: tuple[Status, ...] = (OK, DIVERGED, FAILED, SKIPPED, PARTIAL, BUSY, INTERRUPTED, PRUNED)
# A finished run: a re-run of its grid reuses it.
FINISHED: tuple[Status, ...] = (OK, DIVERGED)
# The runs whose trained model is recorded (metrics, representations, checkpoint): never overwritten by an attempt
# that does not train, and what re-scoring scores.
TRAINED: tuple[Status, ...] = (*FINISHED, PARTIAL)
# The error of a run stopped by Ctrl-C or SIGTERM (recorded ``failed``; the same command redoes it).
INTERRUPTED_ERROR = "interrupted"


class Timing(TypedDict, total=False):
    """Seconds: ``fit_s`` (training), ``eval_s`` (evaluation), ``epoch_s`` (one epoch), ``step_s`` (one optimizer
    step), ``lloyd_s`` (one Lloyd step of a k-means head, else None); ``steps``: optimizer steps taken."""

    fit_s: float | None
    eval_s: float | None
    epoch_s: float | None
    step_s: float | None
    lloyd_s: float | None
    steps: int | None


class Provenance(TypedDict):
    """What actually ran: ``data_source`` (``real``/``fake``), ``debug`` (the debug option or None), the trainer
    ``limits`` that were set, ``max_epochs`` and ``max_steps``."""

    data_source: str
    debug: str | None
    limits: dict[str, Any]
    max_epochs: int | None
    max_steps: int | None


class CodeVersion(TypedDict, total=False):
    """The code a run ran: the package's version, its git ``commit`` and ``dirty`` flag in a checkout, the SHA-256
    of its files (``package_hash``) and ``kind``: which of them names it (``git commit`` or ``package hash``)."""

    package: str | None
    commit: str | None
    dirty: bool | None
    package_hash: str | None
    kind: str | None


class StackInfo(TypedDict, total=False):
    """A member of a stacked group: the group's ``cells`` (their folder names), ``members``, what ``varies``
    between them, the ``device``, this member's ``index``, the ``step`` it took (``eager``/``compiled``) and the
    group's measured ``speed``."""

    cells: list[str]
    members: int
    varies: list[str]
    device: str
    index: int
    step: str
    speed: dict[str, Any] | None


class EvaluatorFailed(TypedDict):
    """An evaluator that failed after training: the ``stage`` (split) it scored and its one-line ``error``."""

    stage: str
    error: str


# One re-scoring (``clusterable-eval``): the ``evaluator`` nodes it ran, the metric ``keys`` it wrote, what it scored
# (``from``: kept representations or the checkpoint), when (``at``), the failed evaluators it ``finished`` and, when
# it scored another dataset than the run's, that ``dataset``'s node. The
# functional form: ``from`` is a Python keyword.
RescoreEntry = TypedDict(
    "RescoreEntry",
    {
        "evaluator": dict[str, Any],
        "keys": list[str],
        "from": str,
        "at": str,
        "finished": list[str],
        "dataset": dict[str, Any],
    },
    total=False,
)


class RecordError(ValueError):
    """A metrics.json that is not a run record (not a mapping, a key no version wrote, a field of the wrong kind)."""


@dataclass
class RunRecord:
    """One run's ``metrics.json``.

    Attributes:
        status: how it ended (``Status``; ``failed`` until it finishes).
        error: its one line when it did not end ``ok`` (``interrupted`` after Ctrl-C), else None.
        experiment: the config's ``name`` (the sweep folder and the tables' key).
        mode: ``full`` (real data, no debug group, no limit that cuts it short) or ``smoke``; None in the oldest
            records (read as full).
        seed: the config's seed.
        overrides: the command line's (or the cell's) overrides, as typed.
        choices: the config group choices (``{"dataset": "digits", "loss": "cce", ...}``); None in records older
            than them (the tables read ``.hydra/hydra.yaml`` instead).
        provenance: what actually ran (``Provenance``).
        code: the code version (``CodeVersion``); None in records older than it.
        config: the resolved config (as written where it did not resolve).
        metrics: metric name -> value (NaN and inf written as null).
        best_epoch: the epoch whose model was evaluated, None when none was.
        timing: ``Timing``.
        torch_threads: the CPU threads it trained with.
        data_notes: what reading the data reported (the files read and their SHA-256).
        stacked: ``StackInfo`` for a member of a stacked group.
        failed_epoch: the epoch at which its loss ran away (a run that diverged).
        stopped_early: why a callback (``callbacks=early_stopping``) stopped training before ``max_epochs``, with
            the epoch; None when it ran them all.
        pruned: why a search's pruner stopped the trial (``MedianPruner at epoch 3: val/acc 0.4120``), for a
            ``pruned`` run.
        training_error: a partial run's divergence, kept until it is finished.
        evaluators_failed: a partial run's failed evaluators: name -> ``EvaluatorFailed``.
        rescored: ``RescoreEntry`` per re-scoring.
        left_out_settings: settings of evaluators the command line no longer selected, dropped from ``config``.
        notes: what the config's resolvers remarked (``{"tuned_lambda": 0.1}``), by key.
        schema: the record's shape (``SCHEMA``).
    """

    status: Status = FAILED
    error: str | None = None
    experiment: str | None = None
    mode: str | None = None
    seed: Any = None
    overrides: list[str] = field(default_factory=list)
    choices: dict[str, Any] | None = None
    provenance: Provenance | None = None
    code: CodeVersion | None = None
    config: dict[str, Any] | None = None
    metrics: dict[str, Any] = field(default_factory=dict)
    best_epoch: int | None = None
    timing: Timing = field(default_factory=Timing)  # type: ignore[arg-type]
    torch_threads: int | None = None
    data_notes: dict[str, Any] | None = None
    stacked: StackInfo | None = None
    failed_epoch: int | None = None
    stopped_early: str | None = None
    pruned: str | None = None
    training_error: str | None = None
    evaluators_failed: dict[str, EvaluatorFailed] | None = None
    rescored: list[RescoreEntry] | None = None
    left_out_settings: list[str] | None = None
    notes: dict[str, Any] = field(default_factory=dict)
    schema: int = SCHEMA

    # Written whatever their value; every other field only when it holds something (not None, ``notes`` not {}).
    ALWAYS = (
        "status",
        "error",
        "experiment",
        "seed",
        "overrides",
        "metrics",
        "best_epoch",
        "timing",
        "schema",
    )
    # Schema 1's resolver notes at the top level (``resolver_notes`` listed them; the oldest records did not).
    LEGACY_NOTES = ("tuned_lambda", "lambda_fallback", "tuned_lambda_incomplete")

    @property
    def ok(self) -> bool:
        return self.status == OK

    @property
    def finished(self) -> bool:
        """A run its grid keeps (``ok`` or ``diverged``)."""
        return self.status in FINISHED

    @property
    def trained(self) -> bool:
        """Training finished and its model is recorded (``ok``, ``diverged`` or ``partial``)."""
        return self.status in TRAINED

    @property
    def diverged(self) -> bool:
        """Its loss ran away (``failed_epoch`` recorded): ``diverged`` when the head knew the regime, ``failed``
        when a loss part became NaN or huge, ``partial`` when an evaluator failed too."""
        return self.failed_epoch is not None

    def optimized(self, key: Any = None) -> float | list[float] | None:
        """What the run gives a hyperparameter sweeper: its metric ``key`` (default: its config's
        ``optimized_metric``; a list of keys, a multi-objective search's, gives a list of values), None unless it
        ended ``ok`` (a diverged run keeps its best epoch's metrics, but its trial failed: told to Optuna as
        complete, the runaway's early value would steer the search) or when it lacks such a number. The one place
        a record's objective is read: ``train.py``'s job, the stacked launcher's members and the cells it reuses
        all return this."""
        if key is None:
            key = (self.config or {}).get("optimized_metric")
        if self.status != OK or key is None:
            return None
        keys = [key] if isinstance(key, str) else list(key)
        values = [self.metrics.get(str(k)) for k in keys]
        if not all(isinstance(v, int | float) and not isinstance(v, bool) for v in values):
            return None
        return float(values[0]) if isinstance(key, str) else [float(v) for v in values]

    @classmethod
    def from_dict(cls, payload: Mapping[str, Any]) -> RunRecord:
        """A record of any shape a version wrote (schema 1 or 2); ``RecordError`` (one line) for anything else."""
        if not isinstance(payload, Mapping):
            raise RecordError(f"not a mapping but {type(payload).__name__}")
        data = dict(payload)
        notes = dict(data.pop("notes", None) or {})
        listed = data.pop("resolver_notes", None) or []
        for key in (*listed, *cls.LEGACY_NOTES):
            if key in data:
                notes[key] = data.pop(key)
        names = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - names)
        if unknown:
            more = " and more" if len(unknown) > 1 else ""
            raise RecordError(
                f"unknown key {unknown[0]!r}{more}: not a field of RunRecord (a record of another "
                "program, or of a newer clusterable)"
            )
        data.setdefault("schema", 1)
        if not isinstance(data["schema"], int) or isinstance(data["schema"], bool):
            raise RecordError(f"schema is {data['schema']!r}, not a version number")
        if data["schema"] > SCHEMA:
            raise RecordError(f"schema {data['schema']} is newer than this clusterable's ({SCHEMA}): upgrade it")
        for name, kind in (("metrics", dict), ("overrides", list), ("timing", dict), ("notes", dict)):
            value = notes if name == "notes" else data.get(name)
            if value is not None and not isinstance(value, kind):
                raise RecordError(f"{name} is a {type(value).__name__}, not a {kind.__name__}")
        for name in ("metrics", "overrides", "timing"):
            if data.get(name) is None:
                data.pop(name, None)
        return cls(**data, notes=notes)

    def to_dict(self) -> dict[str, Any]:
        """The record as metrics.json holds it (schema ``SCHEMA``); NaN and inf as None, tensors as numbers."""
        out = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name in self.ALWAYS or (value is not None and not (f.name == "notes" and not value)):
                out[f.name] = value
        out["schema"] = SCHEMA
        return _plain(out)

    @classmethod
    def read(cls, run_dir: str | Path) -> RunRecord | None:
        """The record in ``run_dir``, None when it has none; ``RecordError`` (one line naming the file) when its
        metrics.json cannot be read or is not a record."""
        path = Path(run_dir) / METRICS_FILE
        try:
            text = path.read_text()
        except FileNotFoundError:
            return None
        except OSError as e:
            raise RecordError(f"{path}: {e.strerror or type(e).__name__}") from None
        try:
            return cls.from_dict(json.loads(text))
        except ValueError as e:  # JSONDecodeError, UnicodeDecodeError, RecordError
            reason = str(e) if isinstance(e, RecordError) else type(e).__name__
            raise RecordError(f"{path}: {reason}") from None

    def write(self, run_dir: str | Path) -> Path:
        """Write ``metrics.json`` atomically (a temporary file in the same folder, then renamed), mode 0644 less the
        umask: a run killed mid-write leaves the old file or the new one, never half a file. A failed write
        (a full disk) leaves no temporary file and raises ``OSError`` naming metrics.json."""
        return write_json(Path(run_dir) / METRICS_FILE, self.to_dict())


def write_json(path: Path, payload: Any) -> Path:
    """``payload`` as JSON in ``path``, atomically and readable by others (see ``RunRecord.write``)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".metrics-", suffix=".json")
    umask = os.umask(0)
    os.umask(umask)
    os.fchmod(fd, 0o644 & ~umask)  # mkstemp makes 0600: tables and colleagues must be able to read it
    try:
        with os.fdopen(fd, "w") as f:
            json.dump(_plain(payload), f, indent=2, sort_keys=True)
        os.replace(tmp, path)
    except OSError as e:  # a full disk: no half-written temporary file left beside the runs
        Path(tmp).unlink(missing_ok=True)
        raise OSError(e.errno, e.strerror, str(path)) from None
    return path


def _plain(value: Any) -> Any:
    """JSON-safe: tensors and NumPy scalars to numbers, NaN and inf to None (JSON has neither)."""
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if hasattr(value, "item") and callable(value.item):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value
