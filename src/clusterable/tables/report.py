"""Runs -> cells -> a table in markdown, LaTeX and CSV, plus claim checks. Built from metrics.json files alone."""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from clusterable.rundir import find_runs


@dataclass
class Run:
    """One run directory: its overrides as a dict (``{"loss": "cce", "seed": "3"}``) and its metrics.json."""

    path: Path
    params: dict[str, str]
    payload: dict[str, Any]

    @property
    def ok(self) -> bool:
        return self.payload.get("status") == "ok"

    def metric(self, key: str) -> float | None:
        value = self.payload.get("metrics", {}).get(key)
        return None if value is None else float(value)


def load_runs(outputs: str | Path, experiment: str, mode: str = "auto") -> tuple[list[Run], str]:
    """Runs of ``experiment`` below ``outputs``; ``mode`` "auto" takes the full runs if any exist, else smoke runs.

    Returns the runs and the mode they come from.
    """
    runs: dict[str, list[Run]] = {"full": [], "smoke": []}
    for path, payload in find_runs(outputs):
        if payload.get("experiment") != experiment:
            continue
        params = dict(o.split("=", 1) for o in payload.get("overrides", []) if "=" in o)
        runs.setdefault(payload.get("mode", "full"), []).append(Run(path, params, payload))
    if mode == "auto":
        mode = "full" if runs["full"] else "smoke"
    return runs.get(mode, []), mode


@dataclass
class Cell:
    """The values of one table cell over seeds; ``failed`` counts runs that ended with status failed."""

    values: list[float] = field(default_factory=list)
    failed: int = 0

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
            return "failed" if self.failed else "missing"
        s = self.std if spread == "std" else self.sem
        out = f"{self.mean * scale:.{digits}f} ± {s * scale:.{digits}f}"
        return out + (f" ({self.failed} failed)" if self.failed else "")


def cells(runs: Iterable[Run], keys: Sequence[str], metric: str) -> dict[tuple[str, ...], Cell]:
    """Group runs by the values of the override ``keys`` and collect ``metric`` (failed runs counted apart)."""
    out: dict[tuple[str, ...], Cell] = {}
    for run in runs:
        cell = out.setdefault(tuple(run.params.get(k, "") for k in keys), Cell())
        value = run.metric(metric) if run.ok else None
        if value is None or math.isnan(value):
            cell.failed += 1
        else:
            cell.values.append(value)
    return out


@dataclass
class Claim:
    """A sentence of the paper checked on our numbers: ``holds`` is None when the numbers needed are missing."""

    text: str
    holds: bool | None
    detail: str = ""

    def line(self) -> str:
        verdict = {True: "holds", False: "does not hold", None: "cannot check"}[self.holds]
        return f"- [{verdict}] {self.text}" + (f" ({self.detail})" if self.detail else "")


def check(
    text: str, pairs: Iterable[tuple[str, float, float]], relation: Callable[[float, float], bool]
) -> Claim:
    """A claim that ``relation(a, b)`` holds for every named pair; NaN values make it uncheckable."""
    pairs = list(pairs)
    if not pairs or any(math.isnan(a) or math.isnan(b) for _, a, b in pairs):
        return Claim(text, None, "numbers missing")
    failing = [name for name, a, b in pairs if not relation(a, b)]
    return Claim(
        text, not failing, f"fails for {', '.join(failing)}" if failing else f"{len(pairs)} of {len(pairs)}"
    )


@dataclass
class Table:
    """A rendered table: a header, rows of strings, notes printed under it, and claims."""

    title: str
    header: list[str]
    rows: list[list[str]]
    notes: list[str] = field(default_factory=list)
    claims: list[Claim] = field(default_factory=list)
    figures: list[Path] = field(default_factory=list)

    def markdown(self) -> str:
        lines = [f"### {self.title}", "", "| " + " | ".join(self.header) + " |"]
        lines.append("|" + "|".join("---" for _ in self.header) + "|")
        lines += ["| " + " | ".join(r) + " |" for r in self.rows]
        lines += [""] + [f"> {n}" for n in self.notes]
        if self.claims:
            lines += ["", "Claims of the paper, checked on our numbers:"] + [c.line() for c in self.claims]
        if self.figures:
            lines += [""] + [f"Figure: {p}" for p in self.figures]
        return "\n".join(lines)

    def latex(self) -> str:
        def esc(s: str) -> str:
            return s.replace("±", r"$\pm$").replace("_", r"\_").replace("%", r"\%").replace("&", r"\&")

        cols = "l" * len(self.header)
        body = [" & ".join(esc(c) for c in self.header) + r" \\ \midrule"]
        body += [" & ".join(esc(c) for c in r) + r" \\" for r in self.rows]
        return "\n".join(
            [r"\begin{tabular}{" + cols + "}", r"\toprule", *body, r"\bottomrule", r"\end{tabular}"]
        )

    def csv(self) -> str:
        buf = io.StringIO()
        w = csv.writer(buf)
        w.writerow(self.header)
        w.writerows(self.rows)
        return buf.getvalue()

    def write(self, out_dir: Path, stem: str) -> list[Path]:
        out_dir.mkdir(parents=True, exist_ok=True)
        paths = []
        for ext, text in (("md", self.markdown()), ("tex", self.latex()), ("csv", self.csv())):
            path = out_dir / f"{stem}.{ext}"
            path.write_text(text + ("\n" if not text.endswith("\n") else ""))
            paths.append(path)
        return paths
