"""COREL's tuned λ (Kenyon-Dean et al. 2019, "Tuning", Tables 1-2), handed from Table 1 to Table 2 by a file.

The paper tunes λ per (dataset, model, loss) on validation accuracy (Table 1) and reports Table 2 at the tuned
values. Here:

1. ``python train.py -m experiment=corel/table1`` trains the λ grid;
2. ``python scripts/make_tables.py corel/table1`` prints Table 1 and writes its winners, with the numbers each was
   chosen on, to ``<outputs>/tables/corel_table1_lambda.yaml`` (``<outputs>/tables/smoke/...`` for smoke runs:
   the two never mix);
3. ``python train.py -m experiment=corel/table2`` runs each COREL loss at its winner: the experiment sets
   ``tuned_lambda_from: corel/table1`` and the λ losses' configs say ``lam: ${tuned_lambda:0.5}``, which this
   module's resolver turns into the winner for the run's (dataset, model, loss), read from that file in the run's
   own mode. Without ``tuned_lambda_from`` (every other experiment) it is the default, 0.5.

A Table 2 cell without a winner fails with one line saying which file or entry is missing and how to fix λ on
purpose instead (``tuned_lambda_from=null``: every loss at 0.5; ``loss.lam=...``: one loss at that value). Smoke runs
(``debug=smoke`` sets ``tuned_lambda_fallback: true``) run at the config's λ instead, so that a Table 2 smoke test
works on a fresh clone: the run records ``lambda_fallback: true`` in metrics.json and the table says so.

A winner chosen from an incomplete grid (a setting where some of the experiment's λ values never ran: an interrupted
sweep, or a sub-grid on the command line) is refused in one line, in every mode, unless the run says
``tuned_lambda_partial=true``: the winners file records, per setting, whether its grid was complete and which λ
values are missing.
Importing ``clusterable`` registers the resolver, so the loss configs load anywhere (tests read them directly).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import yaml
from omegaconf import DictConfig
from omegaconf.errors import InterpolationResolutionError

from clusterable.config import CONFIG_DIR
from clusterable.rundir import tables_dir

RESOLVER = "tuned_lambda"
# How Table 1 picks a winner; written into the file so that it says what its numbers mean.
RULE = (
    "best mean validation accuracy (val/acc at each run's best epoch) over the λ grid; ties go to the smaller λ; "
    "a λ at which any run diverged (or every run failed) is never chosen"
)


class TunedLambdaError(InterpolationResolutionError):
    """No tuned λ for a run that asks for one. OmegaConf passes this type through unwrapped, so the run's error is
    this one line (``config: <message>``)."""


class WinnersMissing(TunedLambdaError):
    """Table 1 has not been made (in this mode) or holds no entry for the run's setting; the one case a smoke run's
    ``tuned_lambda_fallback`` covers (a setting whose every λ diverged is a result, never passed over)."""


class WinnersFileMissing(WinnersMissing):
    """Table 1 has not been made in this mode at all: every cell of a Table 2 grid would fail for it, so the sweeper
    refuses the grid once before any cell runs (``refusal``)."""


class UnknownTable(TunedLambdaError):
    """``tuned_lambda_from`` names no experiment with a λ grid (a typo such as ``corel/tabel1``): refused in every
    mode, a smoke run's fallback included, since no Table 1 could ever give its winners."""


def experiment_grid(experiment: str) -> tuple[float, ...] | None:
    """The λ values ``experiment`` sweeps: ``hydra.sweeper.params["loss.lam"]`` of
    src/clusterable/conf/experiment/<experiment>.yaml, sorted (None when it sweeps no λ, or there is no such
    experiment). The grid a Table 1's settings are checked against: a sub-grid on the command line or an interrupted
    sweep leaves some of its values out."""
    path = Path(CONFIG_DIR) / "experiment" / f"{experiment}.yaml"
    try:
        cfg = yaml.safe_load(path.read_text()) or {}
        values = str(cfg["hydra"]["sweeper"]["params"]["loss.lam"])
        return tuple(sorted(float(v) for v in values.split(",")))
    except (OSError, yaml.YAMLError, KeyError, TypeError, ValueError):
        return None


def tuning_tables() -> list[str]:
    """The experiments a ``tuned_lambda_from`` may name: those that sweep a λ grid (``experiment_grid``)."""
    root = Path(CONFIG_DIR) / "experiment"
    names = (p.relative_to(root).with_suffix("").as_posix() for p in sorted(root.rglob("*.yaml")))
    return [name for name in names if experiment_grid(name) is not None]


def winners_name(table: str) -> str:
    """The winners file's name: ``corel/table1`` -> ``corel_table1_lambda.yaml`` (beside ``corel_table1.md``)."""
    return f"{table.replace('/', '_')}_lambda.yaml"


def winners_file(outputs: str | Path, table: str, mode: str) -> Path:
    """Where ``make_tables.py <table>`` writes the winners of runs of ``mode``: ``corel/table1`` ->
    ``<outputs>/tables/corel_table1_lambda.yaml`` (smoke: ``<outputs>/tables/smoke/corel_table1_lambda.yaml``)."""
    return tables_dir(outputs, mode) / winners_name(table)


def write_winners(
    path: Path,
    table: str,
    experiment: str,
    mode: str,
    winners: Mapping[tuple[str, str, str], Mapping[str, Any]],
) -> Path:
    """Write Table 1's winners: ``winners[(dataset, model, loss)] = {lam, val_acc, runs, candidates}`` where
    ``lam`` is None when no λ qualified and ``candidates`` maps each λ that ran to its mean validation accuracy or
    to ``diverged`` / ``failed``; with ``complete`` (whether every λ of the experiment's grid ran) and ``missing``
    (the λ values that did not) when the entry has them."""
    nested: dict[str, dict[str, dict[str, Any]]] = {}
    for (dataset, model, loss), entry in sorted(winners.items()):
        nested.setdefault(dataset, {}).setdefault(model, {})[loss] = {
            "lam": entry["lam"],
            "val_acc": None if math.isnan(entry["val_acc"]) else round(float(entry["val_acc"]), 6),
            "runs": int(entry["runs"]),
            "candidates": {
                float(lam): v if isinstance(v, str) else round(float(v), 6)
                for lam, v in sorted(entry["candidates"].items())
            },
        }
        if "complete" in entry:
            missing = [float(lam) for lam in sorted(entry.get("missing") or ())]
            nested[dataset][model][loss].update(complete=bool(entry["complete"]), missing=missing)
    header = (
        f"# Table 1's tuned λ, written by `python scripts/make_tables.py {table}` from the {mode} runs of "
        f"{experiment}.\n# Read by the experiments that set `tuned_lambda_from: {table}` (the λ losses' configs: "
        "`lam: ${tuned_lambda:0.5}`).\n# Rewritten each time that table is made: change the runs, not this file.\n"
    )
    body = {"table": table, "experiment": experiment, "mode": mode, "rule": RULE, "winners": nested}
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(header + yaml.safe_dump(body, sort_keys=False, allow_unicode=True, width=110))
    return path


def lookup(
    table: str, outputs: str | Path, mode: str, dataset: str, model: str, loss: str, partial: bool = False
) -> float:
    """Table 1's winner for one (dataset, model, loss) in ``mode``; ``TunedLambdaError`` (one line) when there is
    none, or when it was chosen from an incomplete grid and ``partial`` (``tuned_lambda_partial``) is not set."""
    return float(lookup_entry(table, outputs, mode, dataset, model, loss, partial)["lam"])


def lookup_entry(
    table: str, outputs: str | Path, mode: str, dataset: str, model: str, loss: str, partial: bool = False
) -> dict[str, Any]:
    """``lookup``'s winners-file entry (``lam``, ``complete``, ``missing``...), checked as ``lookup`` says."""
    path = winners_file(outputs, table, mode)
    fixed = "or fix λ on purpose: tuned_lambda_from=null (every loss at 0.5) or loss.lam=<λ> (one loss)"
    if not path.is_file():  # the same line for every cell, so that a sweep's summary prints it once
        raise WinnersFileMissing(
            f"loss.lam is Table 1's tuned λ (tuned_lambda_from: {table}) but {path} does not exist: run Table 1 "
            f"in this mode ({mode}) first, `python train.py -m experiment={table}` then `python scripts/"
            f"make_tables.py {table}`, {fixed}"
        )
    try:
        data = yaml.safe_load(path.read_text()) or {}
        winners = data["winners"]
    except (yaml.YAMLError, KeyError, TypeError) as e:
        raise TunedLambdaError(
            f"{path} is not a winners file ({type(e).__name__}): make it again with "
            f"`python scripts/make_tables.py {table}`"
        ) from None
    entry = ((winners.get(dataset) or {}).get(model) or {}).get(loss)
    setting = f"dataset={dataset}, model={model}, loss={loss}"
    if entry is None:
        have = ", ".join(f"{d}/{m}/{lo}" for d in winners for m in winners[d] for lo in winners[d][m]) or "none"
        raise WinnersMissing(
            f"{path} has no tuned λ for {setting} (it has: {have}): run {table} on that setting and make its "
            f"table again, {fixed}"
        )
    if entry.get("complete") is False and not partial:
        missing = ", ".join(f"{float(v):g}" for v in entry.get("missing") or ()) or "some"
        raise TunedLambdaError(
            f"{table}'s λ grid for {setting} is incomplete (λ {missing} never ran; see {path}): run the rest of "
            f"the grid and make its table again, accept its winner on purpose with tuned_lambda_partial=true, "
            f"{fixed}"
        )
    if entry.get("lam") is None:
        raise TunedLambdaError(
            f"no λ of {table} qualified for {setting} (every one that ran diverged or failed; see {path}), {fixed}"
        )
    return entry


def _lookup_for(root: DictConfig, table: str, choices: Mapping[str, Any] | None) -> dict[str, Any]:
    """Table 1's winners-file entry for the run of ``root`` (its dataset, model and loss choices, output folder and
    mode)."""
    if not isinstance(table, str) or table not in tuning_tables():
        raise UnknownTable(
            f"tuned_lambda_from must name an experiment that tunes λ ({', '.join(tuning_tables())}) or be null, "
            f"got {table!r}"
        )
    if choices is None:
        raise TunedLambdaError("tuned_lambda_from needs the run's config group choices: run it through train.py")
    setting = (str(choices.get(g)) for g in ("dataset", "model", "loss"))
    partial = bool(root.get("tuned_lambda_partial"))
    return lookup_entry(table, root.paths.output_dir, root.mode, *setting, partial=partial)


def resolve(
    default: float, root: DictConfig, choices: Mapping[str, Any] | None, note: Callable[[str, Any, str], None]
) -> float:
    """``${tuned_lambda:<default>}`` (registered in ``clusterable.resolvers``, which passes the run's group
    ``choices``): ``default``, or Table 1's winner when the config sets ``tuned_lambda_from``; ``default`` again when
    the winners are missing and the config sets ``tuned_lambda_fallback`` (smoke runs), told to ``note`` as
    ``lambda_fallback`` for the run's record."""
    table = root.get("tuned_lambda_from")
    if table is None:
        return default
    try:
        entry = _lookup_for(root, table, choices)
    except WinnersMissing:
        if root.get("tuned_lambda_fallback"):
            note(
                "lambda_fallback",
                True,
                f"λ: {default:g}, the config's (Table 1's {root.mode} winners are missing: tuned_lambda_fallback)",
            )
            return default
        raise
    # Each Table 2 cell says the λ it runs at when it starts (and records it: metrics.json's tuned_lambda), and
    # whether its winner came from an incomplete grid (tuned_lambda_partial): the tables say so.
    lam = float(entry["lam"])
    setting = ", ".join(f"{g}={(choices or {}).get(g)}" for g in ("dataset", "model", "loss"))
    note("tuned_lambda", lam, f"λ: {lam:g}, {table}'s winner for {setting} (tuned_lambda_from)")
    if entry.get("complete") is False:
        missing = [float(v) for v in entry.get("missing") or ()]
        note(
            "tuned_lambda_incomplete",
            missing,
            f"λ: {lam:g} was chosen from an INCOMPLETE grid (λ "
            f"{', '.join(f'{v:g}' for v in missing) or '?'} never ran; tuned_lambda_partial=true)",
        )
    return lam


def refusal(cfg: DictConfig) -> TunedLambdaError | None:
    """The tuned-λ error the composed config of a cell would fail with, None when it needs no tuned λ or has one:
    its ``loss.lam`` resolved as the run will resolve it (a smoke cell's fallback included). The sweeper refuses a
    whole grid on ``WinnersFileMissing`` before any cell runs, so that the line is printed once."""
    if cfg.get("tuned_lambda_from") is None:
        return None
    loss = cfg.get("loss")
    if not isinstance(loss, DictConfig) or "lam" not in loss:
        return None  # CCE: no λ
    try:
        loss.lam  # noqa: B018  (the access resolves ${tuned_lambda:...})
    except TunedLambdaError as e:
        return e
    except Exception:  # anything else is the cell's own failure, reported when it runs
        return None
    return None
