"""Runs -> cells -> a table in markdown, LaTeX and CSV, plus claim checks. Built from metrics.json files alone (and,
for a run recorded before metrics.json held its group choices, the choices in its .hydra/hydra.yaml).

A run's identity is what it recorded, read with ``Run.get``: the option of a config group (``run.get("loss")``),
else a dotted key of the resolved config (``run.get("loss.num_clusters")``). Its override strings (``Run.params``)
are never read for it: a value an experiment file sets is no override, and a table must not miss it."""

from __future__ import annotations

import csv
import io
import json
import math
import operator
import os
import warnings
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np
import yaml
from scipy import stats

from clusterable.record import DIVERGED, FAILED, PRUNED, RunRecord
from clusterable.rundir import IGNORED_IN_COMPARISON, find_runs
from clusterable.tables.latex import escape

# Keys of a recorded config that a table's cell may hold several values of: what changes no number a run computes
# (loggers, paths, progress bars, the CPU threads it used; tuned_lambda_partial only lets a λ through, and the λ is
# recorded as loss.lam) and the seed, over which a cell averages.
POOLED = (*IGNORED_IN_COMPARISON, "torch_threads", "tuned_lambda_partial", "seed")
# What names the code a run ran (``rundir.code_version``): a git checkout's commit and dirty flag, and the hash of
# the package's files, which is all an installed build has.
CODE_KEYS = ("commit", "dirty", "package_hash")


@dataclass
class Run:
    """One run directory: its record (``record``, its metrics.json) and its command-line overrides as a dict
    (``params``, ``{"loss": "cce", "seed": "3"}``), which are for display only: a run's identity is what it
    recorded, read with ``get``. ``code_pooled``: its code version is left out of its identity (runs of several
    code versions share a cell on purpose: ``load_runs(pool_code=True)``); the record itself is never changed."""

    path: Path
    params: dict[str, str]
    record: RunRecord
    copies: list[Path] = field(default_factory=list)  # other folders holding this same run (``once``)
    code_pooled: bool = False

    def get(self, key: str, default: Any = None) -> Any:
        """The run's recorded value of ``key``, the one way the tables read a run's identity.

        A config group's name gives the option the run selected (``"loss"`` -> ``"cce"``, ``"loss/metric"`` ->
        ``"triplet"``, ``"experiment"`` -> ``"corel/table1"``), read from the recorded choices; any other key is a
        dotted path into the recorded resolved config (``"loss.num_clusters"`` -> 3, ``"seed"`` -> 0,
        ``"protocol.task"``), typed as the config holds it. The choice comes first: a group's name is also the
        key of its config node (``dataset``), and the tables want the option, not the node; no other key can
        collide. ``default`` where the run records neither (a value recorded as null is None).
        """
        choices = self.record.choices or {}
        if key in choices:
            return choices[key]
        node: Any = self.record.config or {}
        for part in key.split("."):
            if not isinstance(node, Mapping) or part not in node:
                return default
            node = node[part]
        return node

    @cached_property
    def leaves(self) -> dict[str, str]:
        """The recorded resolved config as ``{dotted key: value as JSON text}``, one entry per leaf (``{}`` for a
        run that records no config): what ``config_differences`` compares. A value left unresolved (a run that
        failed resolving its config records it as written, ``${...}``) is left out: it says nothing to compare."""
        out = _flat(self.record.config or {}, "")
        if out:  # what else makes two runs two configs: the data files they read and the code they ran
            out.update(self.identity_extras)
        return out

    @cached_property
    def rescored(self) -> dict[str, dict[str, Any]]:
        """The metrics a re-scoring (``clusterable.rescore``, its ``rescored`` entries) wrote, each with the
        evaluator node that computed it: the recorded config's ``evaluator`` with the re-scoring's evaluators in
        place of those of the same name (a metric re-scored twice: the last, as its value is). {} for a run never
        re-scored. The config a run records is the one it trained with; these are the settings its re-scored
        numbers were made with."""
        base = (self.record.config or {}).get("evaluator") or {}
        out: dict[str, dict[str, Any]] = {}
        for entry in self.record.rescored or []:
            if isinstance(entry, Mapping) and isinstance(entry.get("evaluator"), Mapping):
                node = {**base, **entry["evaluator"]}
                out.update((str(key), node) for key in entry.get("keys") or [])
        return out

    def leaves_for(self, metric: str | None) -> dict[str, str]:
        """``leaves`` as they stand for ``metric``: for a metric a re-scoring wrote, the evaluator settings that
        computed it in place of the recorded ones (a run re-scored with ``evaluator.clustering.num_clusters=3``
        made its k-means accuracy with k = 3, whatever its config says); the recorded leaves for any other metric
        (and for None)."""
        node = self.rescored.get(metric) if metric is not None else None
        if node is None or not self.leaves:
            return self.leaves
        out = {k: v for k, v in self.leaves.items() if not _is_evaluator(k)}
        return out | _flat(node, "evaluator.")

    @property
    def identity_extras(self) -> dict[str, str]:
        """The data files' checksums (``data_notes``: ``data.<file>.sha256``) and the code version (``code.commit``,
        ``code.dirty``, ``code.package_hash``: the SHA-256 of the package's files, which an installed build records
        in place of a commit) the run recorded, as leaves compared like the config's; {} for what it did not
        record."""
        out: dict[str, str] = {}

        def walk(node: Any, prefix: str) -> None:
            if isinstance(node, Mapping):
                for key, value in node.items():
                    if key == "sha256" and isinstance(value, str):
                        out[f"data.{prefix}sha256"] = json.dumps(value)
                    else:
                        walk(value, f"{prefix}{key}.")

        walk((self.record.data_notes or {}).get("files") or {}, "")
        for key in CODE_KEYS if not self.code_pooled else ():
            value = (self.record.code or {}).get(key)
            if value is not None:
                out[f"code.{key}"] = json.dumps(value)
        return out

    @property
    def identity(self) -> str | None:
        """What the run computed: its recorded config but for the keys that change no number (``POOLED`` but the
        seed), its data files and code; None for a run that records no config (nothing to compare). Two folders
        with one identity are one run (a copy, or a resume under another folder name)."""
        if not self.leaves:
            return None
        kept = {k: v for k, v in self.leaves.items() if k == "seed" or not _pooled(k, ())}
        # the group options too (two options may build equal nodes); Hydra's own (the launcher) change nothing
        chosen = {k: as_text(v) for k, v in (self.record.choices or {}).items() if not k.startswith("hydra/")}
        return json.dumps([self.record.experiment, self.mode, chosen, kept], sort_keys=True)

    @property
    def ok(self) -> bool:
        return self.record.ok

    @property
    def diverged(self) -> bool:
        """The run stopped because its loss ran away (``module.DivergedError``: metrics.json has ``failed_epoch``;
        status ``diverged`` when its head knew the regime, ``failed`` when a loss part became NaN or huge)."""
        return not self.ok and self.record.diverged

    @property
    def kept_divergence(self) -> bool:
        """Diverged after a best epoch whose metrics it kept (status ``diverged`` with metrics)."""
        return self.record.status == DIVERGED and bool(self.record.metrics)

    def metric(self, key: str) -> float | None:
        value = self.record.metrics.get(key)
        return None if value is None else float(value)

    @property
    def provenance(self) -> dict[str, Any]:
        """Where the run's numbers come from: ``data_source``, ``debug``, ``limits``, ``max_epochs`` ({} if legacy)."""
        return dict(self.record.provenance or {})

    @property
    def mode(self) -> str:
        """The run's mode: "full" (real data, no debug group, no batch limits) or "smoke"; legacy files: full."""
        return self.record.mode or "full"

    @property
    def data_source(self) -> str:
        """The run's data: "real" or "fake" (``dataset.source``); legacy files without provenance: real."""
        return self.provenance.get("data_source") or "real"


def _flat(node: Any, prefix: str) -> dict[str, str]:
    """A recorded config (or one node of it below ``prefix``) as ``{dotted key: value as JSON text}``, one entry a
    leaf; a value left unresolved (``${...}``: a run that failed resolving its config records it as written) is
    left out: it says nothing to compare."""
    out: dict[str, str] = {}

    def walk(node: Any, prefix: str) -> None:
        if isinstance(node, Mapping) and node:
            for key, value in node.items():
                walk(value, f"{prefix}{key}.")
        elif prefix and not (isinstance(node, str) and "${" in node):
            out[prefix[:-1]] = json.dumps(node, sort_keys=True, default=str)

    walk(node, prefix)
    return out


def _is_evaluator(key: str) -> bool:
    return key == "evaluator" or key.startswith("evaluator.")


class MixedRuns(ValueError):
    """The runs selected for one table mix modes or data sources: no table is built from them."""


def load_runs(
    outputs: str | Path,
    experiment: str | Sequence[str] | Callable[[RunRecord], bool],
    mode: str = "auto",
    pool_code: bool = False,
    say: Callable[[str], None] | None = None,
) -> tuple[list[Run], str]:
    """Runs of ``experiment`` (or of any of several, for a table that sets grids side by side; or those whose
    record a predicate accepts, for a table of any runs: ``tables.runs``) below ``outputs``;
    ``mode`` "auto" takes the full runs if any exist, else smoke runs. ``pool_code``: runs of different code
    versions may share a cell (their ``code`` is left out of the comparison; ``code_note`` names the versions).
    ``say``: where ``find_runs`` reports its progress through a large outputs folder (None: nowhere).

    The one place that selects runs for a table. Returns the runs and the mode they come from; raises
    ``MixedRuns`` (one line: what is mixed, how many of each, where the odd ones lie) when the selected runs mix
    data sources, so that no table ever averages fake-data runs with real ones.
    """
    if callable(experiment):
        wanted = experiment
    else:
        names = {experiment} if isinstance(experiment, str) else set(experiment)
        wanted = lambda record: record.experiment in names  # noqa: E731
    runs: dict[str, list[Run]] = {"full": [], "smoke": []}
    for path, record in find_runs(outputs, say):
        if not wanted(record):
            continue
        params = dict(o.split("=", 1) for o in record.overrides if "=" in o)
        if record.choices is None:  # recorded before metrics.json held them: Hydra's record of the run
            record.choices = hydra_choices(path)
        run = Run(path, params, record, code_pooled=pool_code)
        runs.setdefault(run.mode, []).append(run)
    if mode == "auto":
        mode = "full" if runs["full"] else "smoke"
    selected = once(runs.get(mode, []))
    require_uniform(selected)
    return selected, mode


def once(runs: Sequence[Run]) -> list[Run]:
    """Each run once: of the folders that hold one run (``Run.identity``: a copied folder, or a resumed grid whose
    folder names changed with an option that changes nothing computed), the finished one (the newest among
    equals) is kept, the others listed in its ``copies``."""
    groups: dict[str, list[Run]] = {}
    out: list[Run] = []
    for run in runs:
        if (key := run.identity) is None:
            out.append(run)
        else:
            groups.setdefault(key, []).append(run)
    for group in groups.values():
        _require_rescored_alike(group)
        keep = max(group, key=lambda r: (r.ok, _mtime(r.path)))
        keep.copies = [r.path for r in group if r is not keep]
        out.append(keep)
    return sorted(out, key=lambda r: str(r.path))


def _require_rescored_alike(copies: Sequence[Run]) -> None:
    """Raise ``MixedConfigs`` (one line) when folders holding one run (``once``) hold a metric made with other
    evaluator settings (one copy re-scored, another not, or re-scored otherwise): which copy a table kept would
    decide its number."""
    for metric in sorted({m for r in copies for m in r.rescored}):
        made: dict[str, list[Run]] = {}
        for run in copies:
            evaluators = {k: v for k, v in run.leaves_for(metric).items() if _is_evaluator(k)}
            made.setdefault(json.dumps(evaluators, sort_keys=True), []).append(run)
        if len(made) > 1:
            paths = ", ".join(str(r.path) for r in copies)
            raise MixedConfigs(
                f"{len(copies)} folders hold the same run but made its {metric} with different evaluator settings "
                f"(re-scored in some: clusterable.rescore): {paths}; keep the one you want, remove the others"
            )


def _mtime(path: Path) -> float:
    try:
        return (path / "metrics.json").stat().st_mtime
    except OSError:
        return 0.0


def code_note(runs: Sequence[Run]) -> str:
    """The code versions of runs pooled across versions (``load_runs(pool_code=True)``); "" for one version."""
    versions: dict[str, int] = {}
    for run in runs:
        if run.code_pooled and (name := version_name(run.record.code or {})):
            versions[name] = versions.get(name, 0) + 1
    if len(versions) < 2:
        return ""
    listed = ", ".join(f"{v}: {n} runs" for v, n in sorted(versions.items()))
    return f"Runs of {len(versions)} code versions pooled on purpose (--pool-code-versions): {listed}."


def version_name(code: Mapping[str, Any]) -> str:
    """A recorded code version as a note names it: the commit's first 10 digits (and "(dirty)"), else the package
    hash's ("package 3f2a...": an installed build); "" for a run that recorded neither."""
    if code.get("commit"):
        return str(code["commit"])[:10] + (" (dirty)" if code.get("dirty") else "")
    if code.get("package_hash"):
        return f"package {str(code['package_hash'])[:10]}"
    return ""


def copies_note(runs: Sequence[Run]) -> str:
    """A table's note on run folders counted once because they hold the same run as another ("" if none)."""
    copies = [p for r in runs for p in r.copies]
    if not copies:
        return ""
    where = os.path.commonpath([str(p) for p in copies])
    return (
        f"{len(copies)} run folder(s) hold the same run as another (the same config, seed, data and code: a "
        f"copy, or a resume under another folder name) and are counted once ({where})."
    )


def hydra_choices(path: Path) -> dict[str, Any]:
    """The config group choices of the run in ``path`` as Hydra recorded them (``hydra.runtime.choices`` in its
    ``.hydra/hydra.yaml``, Hydra's own groups, ``hydra/...``, left out), for a run recorded before metrics.json
    held them; {} when there is none."""
    try:
        hydra = yaml.safe_load((path / ".hydra" / "hydra.yaml").read_text()) or {}
        choices = hydra["hydra"]["runtime"]["choices"] or {}
    except (OSError, yaml.YAMLError, KeyError, TypeError):
        return {}
    return {str(k): v for k, v in choices.items() if not str(k).startswith("hydra/")}


def as_text(value: Any) -> str:
    """A recorded value as a table's key or label spells it, as a sweep's override does: ``0.1`` -> "0.1",
    ``True`` -> "True", ``None`` -> "null", a group's option as it is."""
    return "null" if value is None else str(value)


def require_uniform(runs: Sequence[Run]) -> None:
    """Raise ``MixedRuns`` unless every run has the same mode and the same data source."""
    for what, key, odd in (("modes", "mode", "smoke"), ("data sources", "data_source", "fake")):
        groups: dict[str, list[Run]] = {}
        for run in runs:
            groups.setdefault(getattr(run, key), []).append(run)
        if len(groups) < 2:
            continue
        counts = ", ".join(f"{name}: {len(group)}" for name, group in sorted(groups.items(), key=lambda g: -len(g[1])))
        # The runs to move: the fake (smoke) ones if any, else the smallest group.
        name = odd if odd in groups else min(groups, key=lambda g: len(groups[g]))
        where = os.path.commonpath([str(r.path) for r in groups[name]])
        raise MixedRuns(f"the runs mix {what} ({counts}); remove or move the {name} ones ({where})")


class MixedConfigs(MixedRuns):
    """The runs of one table cell differ in more than their seed and the table's own axes (steps, learning rate,
    batch limits...): no cell averages runs of different configs."""


def _pooled(key: str, axes: Iterable[str]) -> bool:
    """Whether a cell may hold several values of config ``key``: a key of ``POOLED`` or below one, or one of the
    table's ``axes``, or below a dotted axis (``dataset.reader`` covers ``dataset.reader.denoise``). A group's name
    (``loss``) covers no key below it: runs of one option that differ in ``loss.margin`` are two configs."""
    if any(key == p or key.startswith(f"{p}.") for p in POOLED):
        return True
    return any(key == a or ("." in a and key.startswith(f"{a}.")) for a in axes)


def config_differences(
    runs: Iterable[Run], axes: Iterable[str] = (), metric: str | None = None
) -> dict[str, dict[str, list[Run]]]:
    """The recorded config keys whose values differ among ``runs``, beyond ``POOLED`` and ``axes``: ``{key: {value
    as JSON text: runs}}``, empty when the runs may pool into one cell. A key is compared among the runs that record
    it: a run recorded before the key existed cannot be told apart by it (and a run that records no config at all
    is left out: nothing to compare).

    The evaluator settings are those that made ``metric`` (``Run.leaves_for``): a run whose ``metric`` was
    re-scored with other settings differs from the others there, its key named ``<key> of re-scored <metric>``.
    ``metric`` None: the settings of every metric a run of them re-scored, each compared so."""
    axes, runs = tuple(axes), list(runs)
    rescored = [metric] if metric is not None else sorted({m for r in runs for m in r.rescored})
    plain = _differences(runs, axes, None)
    out = {} if metric is not None else dict(plain)
    for m in rescored:
        by_rescoring = any(m in r.rescored for r in runs)
        for key, values in _differences(runs, axes, m).items():
            if metric is None and key in plain:
                continue  # the recorded configs differ there already: said once, as recorded
            out[f"{key} of re-scored {m}" if by_rescoring and _is_evaluator(key) else key] = values
    return out


def _differences(runs: Sequence[Run], axes: tuple[str, ...], metric: str | None) -> dict[str, dict[str, list[Run]]]:
    """``config_differences`` of ``runs`` read as they stand for ``metric`` (``Run.leaves_for``)."""
    recorded = {id(r): r.leaves_for(metric) for r in runs if r.leaves}
    keys = sorted({k for leaves in recorded.values() for k in leaves if not _pooled(k, axes)})
    out: dict[str, dict[str, list[Run]]] = {}
    for key in keys:
        values: dict[str, list[Run]] = {}
        for run in runs:
            leaves = recorded.get(id(run), {})
            if key in leaves:
                values.setdefault(leaves[key], []).append(run)
        if len(values) > 1:
            out[key] = values
    return out


def require_one_config(
    runs: Sequence[Run], axes: Iterable[str] = (), cell: str = "one cell", metric: str | None = None
) -> None:
    """Raise ``MixedConfigs`` (one line: the cell, the keys that differ with their values and counts, where the
    fewer runs lie) unless the recorded configs of ``runs`` differ in ``POOLED`` keys and ``axes`` alone, and the
    evaluator settings that made ``metric`` (of every re-scored metric, for None) are one: the one check every
    table's grouping runs before it averages a cell."""
    diff = config_differences(runs, axes, metric)
    if not diff:
        return
    shown = []
    for key, values in list(diff.items())[:4]:
        counts = ", ".join(f"{v}: {len(rs)}" for v, rs in sorted(values.items(), key=lambda kv: -len(kv[1])))
        shown.append(f"{key} ({counts})")
    more = f" and {len(diff) - 4} more keys" if len(diff) > 4 else ""
    key, values = next(iter(diff.items()))
    odd = min(values.values(), key=len)
    where = os.path.commonpath([str(r.path) for r in odd])
    if " of re-scored " in key:
        what = "were computed differently"
        fix = (
            f"re-score every run of the cell with the same evaluator settings (clusterable.rescore ... "
            f"--replace), or remove or move the runs you do not want ({where})"
        )
    else:
        what = "differ in more than their seed"
        fix = (
            f"remove or move the runs you do not want ({where}), or give them an output folder of their own (--outputs)"
        )
    if any(k.startswith("code.") for k in diff):  # runs of two builds may share a cell only when asked to
        fix += ", or pool the code versions on purpose (--pool-code-versions: the table names them)"
    raise MixedConfigs(
        f"the {len(runs)} runs of {cell} {what}: {'; '.join(shown)}{more} (runs of different configs are never "
        f"averaged); {fix}"
    )


def rescored_note(runs: Sequence[Run]) -> str:
    """A table's note on metrics re-scored after training (``clusterable.rescore``): how many runs, which metrics,
    and the evaluator settings that made them where these are not the recorded config's ("" if none was)."""
    touched = [r for r in runs if r.rescored]
    if not touched:
        return ""
    metrics = sorted({m for r in touched for m in r.rescored})
    named = ", ".join(metrics[:3]) + (f" and {len(metrics) - 3} more" if len(metrics) > 3 else "")
    changed: set[str] = set()
    for run in touched:
        for metric in run.rescored:
            now = {k: v for k, v in run.leaves_for(metric).items() if _is_evaluator(k)}
            was = {k: v for k, v in run.leaves.items() if _is_evaluator(k)}
            changed |= {f"{k}={now[k]} (recorded: {was.get(k, 'unset')})" for k in now if now[k] != was.get(k)}
    settings = (
        f"with evaluator settings other than their recorded config's: {'; '.join(sorted(changed))}"
        if changed
        else "with their recorded evaluator settings"
    )
    if changed and len(touched) < len(runs):  # each cell is one way (require_one_config), its rows may not be
        settings += f" (the other {len(runs) - len(touched)} runs made theirs with their recorded settings)"
    return f"{len(touched)} of {len(runs)} runs re-scored after training (clusterable.rescore): {named}, {settings}."


def seed_note(runs: Sequence[Run]) -> str:
    """How many runs (seeds) each configuration of the table has: its runs grouped by recorded config less
    ``POOLED`` keys ("" without a recorded config)."""
    counts: dict[tuple[tuple[str, str], ...], int] = {}
    for run in runs:
        if run.leaves:
            ident = tuple(sorted((k, v) for k, v in run.leaves.items() if not _pooled(k, ())))
            counts[ident] = counts.get(ident, 0) + 1
    if not counts:
        return ""
    low, high = min(counts.values()), max(counts.values())
    each = f"{low}" if low == high else f"{low} to {high}"
    return f"Runs (seeds) per configuration: {each}, over {len(counts)} configurations."


def describe(runs: Sequence[Run], mode: str) -> tuple[str, str]:
    """A table title's suffix naming the mode, and a note on where the runs' numbers come from ("" if unknown)."""
    if mode == "full":
        suffix = "full runs"
    else:
        suffix = "SMOKE runs (fake data / few batches: tests the pipeline only)"
    parts: list[str] = []
    for label, values in (
        ("data", {r.provenance.get("data_source") for r in runs}),
        ("debug", {r.provenance.get("debug") for r in runs}),
        ("max_epochs", {r.provenance.get("max_epochs") for r in runs}),
    ):
        values.discard(None)
        if values:
            parts.append(f"{label}={'/'.join(sorted(map(str, values)))}")
    # A step budget is a protocol's length of training too (DSCL's rows): said when a run set one (-1: none).
    steps = {r.provenance.get("max_steps") for r in runs} - {None, -1}
    if steps:
        parts.append(f"max_steps={'/'.join(sorted(map(str, steps)))}")
    limits = sorted({f"trainer.{k}={v}" for r in runs for k, v in (r.provenance.get("limits") or {}).items()})
    parts += limits
    if mode == "full":
        note = f"Full runs ({', '.join(parts)})." if parts else ""
    else:
        what = ", ".join(parts) if parts else "debug=smoke: fake data, a few batches"
        note = f"SMOKE RUNS ({what}): the numbers test the pipeline only."
    # How a table treats a run that diverged after a good epoch: never pooled (a stopped run is not the
    # protocol's), counted with its cell's failed runs; its own metrics.json keeps that epoch's metrics.
    kept = sum(r.kept_divergence for r in runs)
    if kept:
        said = (
            f"{kept} run(s) diverged after a good epoch: their metrics.json keeps that epoch's metrics, which no "
            "cell uses (counted with its cell's failed runs)."
        )
        note = f"{note} {said}" if note else said
    return suffix, note


@dataclass
class Cell:
    """The values of one table cell over seeds; ``failed`` counts runs that ended without its number (failed,
    diverged early, partial), ``pruned`` the search's trials its pruner stopped (never a failure, never a value)."""

    values: list[float] = field(default_factory=list)
    failed: int = 0
    pruned: int = 0

    @property
    def mean(self) -> float:
        return float(np.mean(self.values)) if self.values else math.nan

    @property
    def std(self) -> float:
        return float(np.std(self.values, ddof=1)) if len(self.values) > 1 else 0.0

    @property
    def sem(self) -> float:
        return self.std / math.sqrt(len(self.values)) if len(self.values) > 1 else 0.0

    def text(self, scale: float = 1.0, digits: int = 2, spread: str = "std") -> str:
        if not self.values:
            return FAILED if self.failed else PRUNED if self.pruned else "missing"
        s = self.std if spread == "std" else self.sem
        out = f"{self.mean * scale:.{digits}f} ± {s * scale:.{digits}f}"
        return out + self.apart()

    def apart(self) -> str:
        """`` (1 failed, 2 pruned)``: the runs of the cell without a value, "" when none."""
        counts = [f"{n} {what}" for n, what in ((self.failed, FAILED), (self.pruned, PRUNED)) if n]
        return f" ({', '.join(counts)})" if counts else ""


def key_of(run: Run, keys: Sequence[str]) -> tuple[str, ...]:
    """The run's recorded values of ``keys`` as text (``as_text``; "" where it records none): a cell's key."""
    return tuple(as_text(run.get(k, "")) for k in keys)


def cells(
    runs: Iterable[Run], keys: Sequence[str], metric: str, axes: Sequence[str] = ()
) -> dict[tuple[str, ...], Cell]:
    """Group runs by their recorded values of ``keys`` (``key_of``) and collect ``metric`` (failed runs counted
    apart). The runs of a cell must be one config but for their seed, ``keys`` and the table's other ``axes``
    (``require_one_config``; ``MixedConfigs`` otherwise)."""
    groups: dict[tuple[str, ...], list[Run]] = {}
    for run in runs:
        groups.setdefault(key_of(run, keys), []).append(run)
    out: dict[tuple[str, ...], Cell] = {}
    for key, group in groups.items():
        named = ", ".join(f"{k}={v}" for k, v in zip(keys, key, strict=True))
        require_one_config(group, (*keys, *axes), f"the cell {named}" if named else "one cell", metric)
    for run in runs:
        cell = out.setdefault(key_of(run, keys), Cell())
        value = run.metric(metric) if run.ok else None
        if run.record.status == PRUNED:
            cell.pruned += 1
        elif value is None or math.isnan(value):
            cell.failed += 1
        else:
            cell.values.append(value)
    return out


# Claims compare rows by a test over their seeds at this level (one-sided, in the claimed direction).
ALPHA = 0.05
# The verdicts a claim reads (``Claim.verdict``): a test over seeds shows the claim, shows its reverse, or neither
# ("not shown (p = ...)"); a claim on one seed, or on numbers no test applies to, reads its means' verdict.
HOLDS, REVERSED, NOT_SHOWN = "holds", "reversed", "not shown"
DOES_NOT_HOLD, CANNOT_CHECK = "does not hold", "cannot check"
ONE_SEED = "on one seed"  # appended to a means' verdict that rests on one seed: "holds on one seed"


@dataclass
class Claim:
    """A sentence of the paper checked on our numbers.

    ``verdict`` is what ``line`` prints: "holds", "reversed", "not shown (p = 0.33)" for a comparison tested over
    seeds (``check``); "holds on one seed" / "does not hold on one seed" for one resting on one seed (no test);
    "holds" / "does not hold" for a claim no seed test applies to (a threshold, a count, a spread: its detail
    says what was checked); "cannot check" when the numbers needed are missing. ``holds`` is True only for
    "holds", None only for "cannot check" (set from ``verdict``, or ``verdict`` from it when not given).
    ``pairs``: the comparisons ``check`` made, for a caller that words its own detail.
    """

    text: str
    holds: bool | None
    detail: str = ""
    verdict: str = ""
    pairs: list[Comparison] = field(default_factory=list, repr=False)

    def __post_init__(self) -> None:
        if not self.verdict:
            self.verdict = {True: HOLDS, False: DOES_NOT_HOLD, None: CANNOT_CHECK}[self.holds]
        expected = True if self.verdict == HOLDS else None if self.verdict == CANNOT_CHECK else False
        if self.holds is not expected:
            raise ValueError(f"a claim that reads {self.verdict!r} has holds={expected}, not holds={self.holds}")

    def line(self) -> str:
        return f"- [{self.verdict}] {self.text}" + (f" ({self.detail})" if self.detail else "")


@dataclass(frozen=True)
class Comparison:
    """One named pair of a claim, compared (``compare``): ``diff`` is mean(a) − mean(b) as given (unscaled);
    ``p`` the one-sided p of the claimed direction and ``p_reverse`` of the opposite one (NaN where no test ran,
    or where neither side varies and their means are equal: t is 0/0); ``test`` names what was done ("welch",
    "one-sample", "one seed", "numbers"); ``outcome`` is the pair's verdict."""

    name: str
    diff: float
    test: str
    outcome: str
    p: float = math.nan
    p_reverse: float = math.nan


def _values(x: float | Cell) -> list[float]:
    return list(x.values) if isinstance(x, Cell) else [] if math.isnan(x) else [float(x)]


def _direction(relation: Callable[[float, float], bool]) -> str:
    """scipy's ``alternative`` of a claim's relation: "greater" for gt/ge (a > b), "less" for lt/le."""
    if relation in (operator.gt, operator.ge):
        return "greater"
    if relation in (operator.lt, operator.le):
        return "less"
    raise ValueError(f"a claim over seeds compares with operator.gt/ge/lt/le, not {relation!r}")


def _t_test(a: list[float], b: float | list[float], alternative: str) -> tuple[float, float]:
    """One-sided p of ``alternative`` and of the opposite direction: Welch's t (Welch 1947; unequal variances) of
    ``a`` against the values ``b``, or the one-sample t (Student 1908) of ``a`` against the number ``b``. Samples
    that do not vary: a difference of their means is certain (p 0 one way, 1 the other); equal means give NaN
    (t is 0/0: nothing shown either way)."""
    bs = b if isinstance(b, list) else [b]
    diff = float(np.mean(a) - np.mean(bs))
    if np.ptp(a) == 0 and np.ptp(bs) == 0:
        if diff == 0:
            return math.nan, math.nan
        shown = diff > 0 if alternative == "greater" else diff < 0
        return (0.0, 1.0) if shown else (1.0, 0.0)
    with warnings.catch_warnings():  # nearly equal values: scipy warns of precision loss, its p stands
        warnings.simplefilter("ignore", RuntimeWarning)
        if isinstance(b, list):
            p = stats.ttest_ind(a, b, equal_var=False, alternative=alternative).pvalue
        else:
            p = stats.ttest_1samp(a, b, alternative=alternative).pvalue
    p = float(p)
    return p, 1.0 - p  # t is continuous: the two one-sided p add up to 1


def compare(name: str, a: float | Cell, b: float | Cell, relation: Callable[[float, float], bool]) -> Comparison | None:
    """``a`` against ``b`` for the claim ``relation(a, b)``; None when either has no number (a NaN, an empty cell).

    Two cells with at least two values each: Welch's t-test (Welch 1947) over their seeds, one-sided in the
    claimed direction (gt and ge alike: a > b; lt and le: a < b) at ``ALPHA``: "holds" when it shows the claimed
    direction, "reversed" when the opposite one-sided test shows the other, else "not shown". A cell against a
    plain number (a published value, a threshold): the one-sample t-test (Student 1908) over the cell's seeds, read
    the same way. A cell with one value: its means compared by ``relation``, "holds on one seed" or "does not hold
    on one seed" (no test on one seed). Two plain numbers: compared by ``relation``, "holds" or "does not hold"
    (no seeds to test; the caller's detail says what the numbers are)."""
    va, vb = _values(a), _values(b)
    if not va or not vb:
        return None
    diff = float(np.mean(va) - np.mean(vb))
    cells = [x for x in (a, b) if isinstance(x, Cell)]
    if not cells:
        return Comparison(name, diff, "numbers", HOLDS if relation(va[0], vb[0]) else DOES_NOT_HOLD)
    if any(len(c.values) < 2 for c in cells):
        means_hold = relation(float(np.mean(va)), float(np.mean(vb)))
        return Comparison(name, diff, "one seed", f"{HOLDS if means_hold else DOES_NOT_HOLD} {ONE_SEED}")
    alternative = _direction(relation)
    if isinstance(a, Cell) and isinstance(b, Cell):
        p, p_reverse = _t_test(va, vb, alternative)
        test = "welch"
    else:  # one cell against a number: the cell's seeds against it, the direction seen from the cell
        cell, number = (va, vb[0]) if isinstance(a, Cell) else (vb, va[0])
        flipped = alternative if isinstance(a, Cell) else {"greater": "less", "less": "greater"}[alternative]
        p, p_reverse = _t_test(cell, number, flipped)
        test = "one-sample"
    outcome = HOLDS if p < ALPHA else REVERSED if p_reverse < ALPHA else NOT_SHOWN
    return Comparison(name, diff, test, outcome, p, p_reverse)


def p_text(p: float) -> str:
    """A p-value as the claims print it: "p = 0.036", "p < 0.001", "p undefined, no spread" (NaN: neither side
    varies and their means are equal)."""
    if math.isnan(p):
        return "p undefined, no spread"
    if p < 0.001:
        return "p < 0.001"
    said = f"{p:.2g}"
    return f"p = {f'{p:.3g}' if float(said) == ALPHA else said}"  # never 0.05 for a p just below or above it


_TESTS = {
    "welch": f"Welch's t over seeds, one-sided, α = {ALPHA:g}",
    "one-sample": f"one-sample t over seeds against the number, one-sided, α = {ALPHA:g}",
    "one seed": "one seed: means compared, no test",
}
# Which pair a long list shows first: what keeps the claim from holding.
_ORDER = (REVERSED, DOES_NOT_HOLD, f"{DOES_NOT_HOLD} {ONE_SEED}", NOT_SHOWN, f"{HOLDS} {ONE_SEED}", HOLDS)


def verdict_of(comparisons: Sequence[Comparison]) -> str:
    """A claim's verdict over its pairs (it claims every pair): "reversed" if a test shows any pair reversed; else
    "does not hold" (on one seed) if any pair's means fail; else "not shown (p = the largest p)" if any tested pair
    is not shown; else "holds on one seed" if any pair rests on one seed; else "holds". Each pair tested at
    ``ALPHA``: a claim of every pair holds when each does (an intersection-union test, level ``ALPHA``)."""
    outcomes = {c.outcome for c in comparisons}
    for outcome in (REVERSED, DOES_NOT_HOLD, f"{DOES_NOT_HOLD} {ONE_SEED}"):
        if outcome in outcomes:
            return outcome
    if NOT_SHOWN in outcomes:
        ps = [c.p for c in comparisons if c.outcome == NOT_SHOWN]
        worst = max(ps, key=lambda p: math.inf if math.isnan(p) else p)
        return f"{NOT_SHOWN} ({p_text(worst)})"
    return f"{HOLDS} {ONE_SEED}" if f"{HOLDS} {ONE_SEED}" in outcomes else HOLDS


def method_of(comparisons: Sequence[Comparison], basis: str = "numbers compared as given, no seed test") -> str:
    """What judged ``comparisons``, as a claim's detail names it: the test(s) over seeds, "one seed: means
    compared, no test", and ``basis`` for plain numbers."""
    kinds = [t for t in ("welch", "one-sample", "one seed", "numbers") if any(c.test == t for c in comparisons)]
    return "; ".join(basis if t == "numbers" else _TESTS[t] for t in kinds)


def _difference(value: float, digits: int) -> str:
    """A difference with ``digits`` decimals, or two significant digits where those decimals would read 0."""
    return f"{value:+.2g}" if 0 < abs(value) < 0.5 * 10**-digits else f"{value:+.{digits}f}"


def _entry(c: Comparison, scale: float, digits: int) -> str:
    said = f"{c.name} {_difference(scale * c.diff, digits)}"
    if c.test in ("welch", "one-sample"):
        # a reversal's own p is the opposite direction's
        return f"{said} (reversed, {p_text(c.p_reverse)})" if c.outcome == REVERSED else f"{said} ({p_text(c.p)})"
    fails = "" if c.outcome.startswith(HOLDS) else ", fails" if c.test == "one seed" else " (fails)"
    return f"{said} (one seed{fails})" if c.test == "one seed" else said + fails


def _named(names: Sequence[str]) -> str:
    return ", ".join(names) if len(names) <= 6 else f"{', '.join(names[:3])} and {len(names) - 3} more"


def check(
    text: str,
    pairs: Iterable[tuple[str, float | Cell, float | Cell]],
    relation: Callable[[float, float], bool],
    *,
    scale: float = 1.0,
    digits: int = 2,
    basis: str = "numbers compared as given, no seed test",
) -> Claim:
    """A claim that ``relation(a, b)`` holds for every named pair ``(name, a, b)``, each ``a``/``b`` a ``Cell``
    (its values over seeds) or a plain number; checked on the pairs whose numbers are there (a table made for some
    of the paper's settings checks those and names the others), uncheckable only when no pair has its numbers.

    Each pair is compared by ``compare`` (Welch's t over two cells' seeds, the one-sample t of a cell against a
    number, the means of a cell of one seed, or two plain numbers as given) and the claim reads ``verdict_of``
    its pairs. The detail names the test, then per pair the difference of means a − b times ``scale`` (100: in
    points of a percentage) with ``digits`` decimals (two significant digits where those would read 0) and its
    p; a long list shows the pairs that keep the claim from holding first. ``basis``: what plain numbers are and
    why no seed test applies to them (a threshold on one number, a spread over a grid, one run's value), said in
    the detail of a claim on such numbers."""
    pairs = list(pairs)
    compared = [c for name, a, b in pairs if (c := compare(name, a, b, relation)) is not None]
    if not compared:
        return Claim(text, None, "numbers missing")
    verdict = verdict_of(compared)
    said = method_of(compared, basis)
    shown = sorted(compared, key=lambda c: _ORDER.index(c.outcome)) if len(compared) > 6 else compared
    entries = [_entry(c, scale, digits) for c in shown]
    if len(entries) > 6:  # a long list reads as noise: the first few and how many more
        held = sum(c.outcome.startswith(HOLDS) for c in compared)
        listed = f"{'; '.join(entries[:3])} and {len(entries) - 3} more ({held} of {len(compared)} hold)"
    else:
        listed = "; ".join(entries)
    what = "difference (p)" if any(c.test in ("welch", "one-sample") for c in compared) else "difference"
    detail = f"{said}; {what}: {listed}"
    missing = [name for name, a, b in pairs if not (_values(a) and _values(b))]
    if missing:
        detail += f"; checked on {len(compared)} of {len(pairs)}, no numbers for {_named(missing)}"
    return Claim(text, verdict == HOLDS, detail, verdict, compared)


@dataclass
class Table:
    """A rendered table: a header, rows of strings, notes printed under it, and claims."""

    title: str
    header: list[str]
    rows: list[list[str]]
    notes: list[str] = field(default_factory=list)
    claims: list[Claim] = field(default_factory=list)
    figures: list[Path] = field(default_factory=list)
    claims_of: str = "the paper"  # whose claims ``claims`` are: "the papers" for a table across papers
    claims_title: str = ""  # the line above the claims, where they are no paper's ("Claims of ..." otherwise)

    def markdown(self) -> str:
        lines = [f"### {self.title}", "", "| " + " | ".join(self.header) + " |"]
        lines.append("|" + "|".join("---" for _ in self.header) + "|")
        lines += ["| " + " | ".join(r) + " |" for r in self.rows]
        lines += [""] + [f"> {n}" for n in self.notes]
        if self.claims:
            title = self.claims_title or f"Claims of {self.claims_of}, checked on our numbers:"
            lines += ["", title] + [c.line() for c in self.claims]
        if self.figures:
            lines += [""] + [f"Figure: {p}" for p in self.figures]
        return "\n".join(lines)

    def latex(self) -> str:
        """The header and rows as a booktabs tabular, every header and cell escaped (``tables.latex.escape``:
        LaTeX's specials, Greek letters, the other signs, markdown's bold)."""
        cols = "l" * len(self.header)
        body = [" & ".join(escape(c) for c in self.header) + r" \\ \midrule"]
        body += [" & ".join(escape(c) for c in r) + r" \\" for r in self.rows]
        return "\n".join([r"\begin{tabular}{" + cols + "}", r"\toprule", *body, r"\bottomrule", r"\end{tabular}"])

    def csv(self) -> str:
        buf = io.StringIO()
        w = csv.writer(buf)
        w.writerow(self.header)
        w.writerows([c.replace("**", "") for c in row] for row in self.rows)  # no markdown in a CSV cell
        return buf.getvalue()

    def write(self, out_dir: Path, stem: str) -> list[Path]:
        out_dir.mkdir(parents=True, exist_ok=True)
        paths = []
        for ext, text in (("md", self.markdown()), ("tex", self.latex()), ("csv", self.csv())):
            path = out_dir / f"{stem}.{ext}"
            path.write_text(text + ("\n" if not text.endswith("\n") else ""))
            paths.append(path)
        return paths
