"""A results site: plain HTML, CSS and SVG written from an outputs (or ``results/``) folder, with no server, no
script and nothing fetched from the network, so it opens from disk and can be copied anywhere beside the runs.

    clusterable-site --outputs results --out site      # then open site/index.html
    python -m clusterable.site ...                     # the same, in a checkout

- ``index.html``: the papers whose tables have runs here, and every experiment, yours included;
- ``paper-<paper>.html``: each such table as the table command builds it (``tables.cli.build``), ours beside the
  published numbers, its notes, each claim with its verdict, and its figures;
- ``exp-<name>.html``: the experiment's results table (``tables.runs``: a row per setting, seeds pooled), the
  per-epoch curve of its optimised metric for each run, its Optuna study where its runs are a search's trials
  (the best trial from ``optimization_results.yaml``; each trial's state, value and parameters, and the value per
  trial with the best so far, from the study's ``optuna.db`` where optuna is installed), and its runs;
- ``run-<id>.html``: a run's record (status, metrics), its resolved config, its logged curves and links to its files.

A table that cannot be built (its runs mix configs, a record cannot be read) is said on its page in one line; the
other pages are still written. The pages print the numbers the table command prints (the same ``Table``).
Exit status: 0 written; 1 no runs under ``--outputs``; 2 a usage error or a run folder that cannot be read.
"""

from __future__ import annotations

import argparse
import hashlib
import html
import importlib
import itertools
import json
import os
import shutil
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

import yaml

from clusterable.metric_names import objective_keys
from clusterable.rundir import UnreadableRuns, find_runs
from clusterable.tables import runs as own_runs
from clusterable.tables.cli import PAPERS, NoRuns, build, sources
from clusterable.tables.common import logged_curves
from clusterable.tables.report import MixedRuns, Run, Table, as_text

CSS = """body{font:15px/1.45 system-ui,sans-serif;margin:2em auto;max-width:76em;padding:0 1em;color:#222}
table{border-collapse:collapse;margin:1em 0;font-size:13px}
th,td{border:1px solid #ccc;padding:3px 7px;text-align:left}th{background:#f2f2f2}
tr:nth-child(even) td{background:#fafafa}
blockquote{color:#555;margin:.5em 0 .5em 1em;font-size:13px}
.holds{color:#186a1f}.reversed,.does-not-hold{color:#a31515}.not-shown,.cannot-check{color:#8a6d00}
.error{color:#a31515}pre{background:#f6f6f6;padding:.7em;overflow:auto;font-size:12px}nav a{margin-right:1em}
img{max-width:100%}svg{background:#fff;border:1px solid #ddd;margin:.5em 0}h1,h2{overflow-wrap:anywhere}"""
COLOURS = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf", "#8c564b", "#e377c2")


@dataclass
class Site:
    """What was written: pages (path -> title), and the tables that could not be built (page, line)."""

    out: Path
    pages: dict[Path, str] = field(default_factory=dict)
    refused: list[tuple[str, str]] = field(default_factory=list)

    def write(self, name: str, title: str, body: str) -> None:
        path = self.out / name
        nav = '<nav><a href="index.html">index</a></nav>'
        path.write_text(
            f'<!doctype html>\n<html lang="en"><head><meta charset="utf-8"><title>{esc(title)}</title>'
            f'<link rel="stylesheet" href="style.css"></head>\n<body>{nav}<h1>{esc(title)}</h1>\n{body}\n'
            "</body></html>\n"
        )
        self.pages[path] = title


def esc(text: object) -> str:
    return html.escape(str(text), quote=True)


def run_id(run: Run, outputs: Path) -> str:
    """A run's page name: a readable tail of its folder and a hash of its path (folders share names)."""
    rel = os.path.relpath(run.path, outputs)
    tail = "".join(c if c.isalnum() else "-" for c in run.path.name)[:40].strip("-")
    return f"{tail}-{hashlib.sha1(rel.encode()).hexdigest()[:8]}"


def slug(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_" else "_" for c in name)


def table_html(table: Table, site_dir: Path) -> str:
    """A ``Table`` as HTML: its title, header and rows, notes, claims (verdict first, coloured by it) and figures
    (copied next to the pages where they lie elsewhere)."""
    parts = [f"<h2>{esc(table.title)}</h2>", "<table><tr>" + "".join(f"<th>{esc(h)}</th>" for h in table.header)]
    parts[-1] += "</tr>" + "".join("<tr>" + "".join(f"<td>{esc(c)}</td>" for c in r) + "</tr>" for r in table.rows)
    parts[-1] += "</table>"
    parts += [f"<blockquote>{esc(n)}</blockquote>" for n in table.notes]
    if table.claims:
        heading = table.claims_title or f"Claims of {table.claims_of}, checked on our numbers:"
        items = []
        for claim in table.claims:
            kind = claim.verdict.split(" (")[0].split(" on one seed")[0].replace(" ", "-")
            detail = f" ({esc(claim.detail)})" if claim.detail else ""
            items.append(f'<li><b class="{kind}">[{esc(claim.verdict)}]</b> {esc(claim.text)}{detail}</li>')
        parts.append(f"<p>{esc(heading)}</p><ul>{''.join(items)}</ul>")
    for figure in table.figures:
        if figure.suffix.lower() in (".png", ".svg") and figure.is_file():
            target = site_dir / "figures" / figure.name
            if figure.resolve() != target.resolve():
                target.parent.mkdir(exist_ok=True)
                shutil.copyfile(figure, target)
            parts.append(f'<p><img src="figures/{esc(figure.name)}" alt="{esc(figure.stem)}"></p>')
    return "\n".join(parts)


Curves = dict[str, list[tuple[int, float]]]


def read_logs(runs: list[Run]) -> dict[int, tuple[Curves, str | None]]:
    """id(run) -> its CSV log as curves (``tables.common.logged_curves``) and, for a log that cannot be read, the
    line its run page says instead ({} as curves): each log read once for the experiment and the run pages."""
    out: dict[int, tuple[Curves, str | None]] = {}
    for run in runs:
        try:
            out[id(run)] = (logged_curves(run), None)
        except UnreadableRuns as err:
            out[id(run)] = ({}, str(err))
    return out


def svg_curves(
    title: str, series: dict[str, list[tuple[int, float]]], width: int = 520, height: int = 240, x_name: str = "epoch"
) -> str:
    """Curves as an inline SVG: a line per series (``x_name``, an epoch or a trial, against value), the value range
    on the left axis, a legend of the first eight."""
    points = [p for s in series.values() for p in s]
    if not points:
        return ""
    x0, x1 = min(p[0] for p in points), max(p[0] for p in points)
    y0, y1 = min(p[1] for p in points), max(p[1] for p in points)
    x1, y1 = (x1 if x1 > x0 else x0 + 1), (y1 if y1 > y0 else y0 + 1e-9)
    left, top, right, bottom = 60, 22, width - 10, height - 28

    def at(x: float, y: float) -> str:
        return (
            f"{left + (x - x0) / (x1 - x0) * (right - left):.1f},{bottom - (y - y0) / (y1 - y0) * (bottom - top):.1f}"
        )

    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" role="img" '
        f'aria-label="{esc(title)}">',
        f'<text x="{left}" y="14" font-size="12">{esc(title)}</text>',
        f'<line x1="{left}" y1="{bottom}" x2="{right}" y2="{bottom}" stroke="#888"/>',
        f'<line x1="{left}" y1="{top}" x2="{left}" y2="{bottom}" stroke="#888"/>',
        f'<text x="4" y="{top + 8}" font-size="10">{y1:.4g}</text>',
        f'<text x="4" y="{bottom}" font-size="10">{y0:.4g}</text>',
        f'<text x="{left}" y="{height - 8}" font-size="10">{x_name} {x0:.4g}</text>'
        f'<text x="{right - 50}" y="{height - 8}" font-size="10">{x_name} {x1:.4g}</text>',
    ]
    for i, (label, pts) in enumerate(series.items()):
        colour = COLOURS[i % len(COLOURS)]
        out.append(
            f'<polyline fill="none" stroke="{colour}" stroke-width="1.5" points="{" ".join(at(*p) for p in pts)}"/>'
        )
        if 1 < len(series) and i < 8:  # one curve: the title names it
            out.append(
                f'<text x="{right - 170}" y="{top + 12 * i + 10}" font-size="10" fill="{colour}">{esc(label)}</text>'
            )
    return "".join(out) + "</svg>"


def paper_tables(outputs: Path, experiments: set[str]) -> dict[str, list[str]]:
    """paper -> its tables whose experiments all have runs here."""
    out: dict[str, list[str]] = {}
    for paper in PAPERS:
        module = importlib.import_module(f"clusterable.tables.{paper}")
        names = [n for n in module.SOURCES if set(sources(f"{paper}/{n}")) <= experiments]
        if names:
            out[paper] = names
    return out


def build_site(outputs: Path, out: Path, pool_code: bool = False, progress: TextIO | None = None) -> Site:
    """Write the site for the runs under ``outputs`` into ``out``; ``NoRuns`` when there are none. ``pool_code``:
    runs of several code versions may share a cell, as the table command's ``--pool-code-versions``. ``progress``:
    where to say what is being built (a line per 500 runs read when there are more, per paper and experiment,
    and per 500 run pages)."""

    def say(line: str) -> None:
        if progress is not None:
            print(f"site: {line}", file=progress, flush=True)

    found = find_runs(outputs, say)  # UnreadableRuns: one line naming each file
    if not found:
        raise NoRuns(f"no runs under {outputs}/", ())
    out.mkdir(parents=True, exist_ok=True)
    (out / "style.css").write_text(CSS)
    site = Site(out)
    runs = [Run(path, dict(o.split("=", 1) for o in rec.overrides if "=" in o), rec) for path, rec in found]
    by_experiment: dict[str, list[Run]] = {}
    for run in runs:
        by_experiment.setdefault(run.record.experiment or "(unnamed)", []).append(run)
    papers = paper_tables(outputs, set(by_experiment))
    logs = read_logs(runs)
    count = len(by_experiment)
    say(f"{len(runs)} runs of {count} experiment{'s' * (count != 1)} under {outputs}/")
    for paper, names in papers.items():
        say(f"paper {paper}: {len(names)} tables")
        body = []
        for name in names:
            try:
                table = build(f"{paper}/{name}", outputs, pool_code=pool_code, out_dir=out / "figures")[0]
            except (MixedRuns, UnreadableRuns, NoRuns, ValueError) as err:
                site.refused.append((f"{paper}/{name}", str(err).splitlines()[0]))
                body.append(f'<h2>{esc(paper)}/{esc(name)}</h2><p class="error">not built: {esc(err)}</p>')
                continue
            body.append(table_html(table, out))
        site.write(f"paper-{paper}.html", f"{paper}: tables and claims", "\n".join(body))
    for name, members in sorted(by_experiment.items()):
        say(f"experiment {name}: {len(members)} runs")
        body = experiment_body(name, members, outputs, out, site, pool_code, logs)
        site.write(f"exp-{slug(name)}.html", f"experiment {name}", body)
    for i, run in enumerate(runs):
        if i % 500 == 0:
            say(f"run pages {i + 1}-{min(i + 500, len(runs))} of {len(runs)}")
        site.write(
            f"run-{run_id(run, outputs)}.html", f"run {run.path.name}", run_body(run, outputs, out, logs[id(run)])
        )
    site.write("index.html", f"clusterable results: {outputs}", index_body(papers, by_experiment))
    return site


def experiment_body(
    name: str,
    members: list[Run],
    outputs: Path,
    out: Path,
    site: Site,
    pool_code: bool,
    logs: dict[int, tuple[Curves, str | None]],
) -> str:
    body = []
    try:
        selected, _ = own_runs.load(outputs, name, pool_code=pool_code)
        by = own_runs.varying_keys(selected)
        metrics = sorted({m for r in selected for m in objective_keys(r.get("optimized_metric"))})
        known = own_runs.metric_names(selected)
        metrics = [m for m in metrics if m in known] or [m for m in known if m.startswith("test/")][:3]
        if metrics:
            body.append(table_html(own_runs.runs_table(name, selected, by, metrics), out))
    except (MixedRuns, UnreadableRuns, own_runs.RunsError, ValueError) as err:
        site.refused.append((name, str(err).splitlines()[0]))
        body.append(f'<p class="error">no table: {esc(err)}</p>')
    keys = {k for r in members for k in logs[id(r)][0]}
    # the curve the runs selected their epoch by, else the first validation metric they logged
    monitored = [str(m) for r in members if (m := r.get("checkpoint.monitor")) and str(m) in keys]
    key = next(iter(monitored), None) or next((k for k in sorted(keys) if k.startswith("val/")), None)
    if key:
        names = curve_labels(members)
        curves = {names[id(r)]: c for r in members if (c := logs[id(r)][0].get(key))}
        body.append(svg_curves(f"{key} per epoch, each run", curves))
    for folder in sorted({f for r in members if (f := study_folder(r.path, outputs)) is not None}):
        body.append(study_html(folder, outputs))
    rows = "".join(
        f'<tr><td><a href="run-{run_id(r, outputs)}.html">{esc(r.path.name)}</a></td>'
        f"<td>{esc(r.record.status)}</td></tr>"
        for r in sorted(members, key=lambda r: str(r.path))
    )
    body.append(f"<h2>Runs ({len(members)})</h2><table><tr><th>run</th><th>status</th></tr>{rows}</table>")
    return "\n".join(body)


def curve_labels(members: list[Run]) -> dict[int, str]:
    """id(run) -> its curve's legend: the keys the runs differ in and the seed (``loss.temperature=0.5, seed=1``),
    distinct for every run (a numbered suffix where two runs record the same values)."""
    try:
        keys = [k for k in own_runs.varying_keys(members) if k != "seed"] + ["seed"]
    except (MixedRuns, UnreadableRuns, ValueError):  # said on the page by the table; the legend falls back
        keys = []
    out: dict[int, str] = {}
    seen: dict[str, int] = {}
    for run in sorted(members, key=lambda r: str(r.path)):
        label = ", ".join(f"{k}={as_text(v)}" for k in keys if (v := run.get(k)) is not None) or run.path.name[:48]
        seen[label] = seen.get(label, 0) + 1
        out[id(run)] = label if seen[label] == 1 else f"{label} ({seen[label]})"
    return out


def study_folder(run_dir: Path, outputs: Path) -> Path | None:
    """The sweep folder of the search whose trial ran in ``run_dir`` (the nearest folder above it, below
    ``outputs``, that holds ``optuna.db`` or ``optimization_results.yaml``: an override whose value holds a ``/``,
    ``optimized_metric=val/loss``, nests the run folder deeper), or None."""
    for folder in run_dir.parents:
        if folder == outputs or outputs not in folder.parents:
            return None
        if (folder / "optuna.db").is_file() or (folder / "optimization_results.yaml").is_file():
            return folder
    return None


def study_html(folder: Path, outputs: Path) -> str:
    """The Optuna study of the search whose trials ran in ``folder`` ("" where none did): its best trial as the
    sweeper wrote it, and, read from ``optuna.db`` where optuna is installed, a row per trial and the value per
    trial beside the best so far."""
    results, db = folder / "optimization_results.yaml", folder / "optuna.db"
    if not results.is_file() and not db.is_file():
        return ""
    where = esc(os.path.relpath(folder, outputs))
    parts = [f"<h2>Optuna study ({where})</h2>"]
    try:
        best = yaml.safe_load(results.read_text()) if results.is_file() else None
    except yaml.YAMLError as err:
        best = None
        parts.append(f'<p class="error">{esc(results.name)} cannot be read: {esc(str(err).splitlines()[0])}</p>')
    if isinstance(best, dict) and isinstance(best.get("solutions"), list):  # a multi-objective search's front
        metrics = [esc(m) for m in best.get("metrics") or []]
        head = "".join(f"<th>{n}</th>" for n in ("trial", *metrics, "parameters"))
        rows = "".join(
            f"<tr><td>{esc(s.get('trial'))}</td>"
            + "".join(f"<td>{esc(f'{v:.6g}')}</td>" for v in s.get("values") or [])
            + f"<td>{esc(', '.join(f'{k}={v}' for k, v in (s.get('params') or {}).items()))}</td></tr>"
            for s in best["solutions"]
            if isinstance(s, dict)
        )
        parts.append(
            f"<p>Pareto front of {', '.join(metrics)} ({esc(', '.join(best.get('directions') or []))}): "
            f"{len(best['solutions'])} trials ({esc(best.get('complete'))} of {esc(best.get('trials'))} trials "
            f"complete)</p><table><tr>{head}</tr>{rows}</table>"
        )
        front = [s.get("values") or [] for s in best["solutions"] if isinstance(s, dict)]
        if len(metrics) == 2 and all(len(v) == 2 for v in front):
            parts.append(svg_curves("Pareto front", {"front": sorted((v[0], v[1]) for v in front)}, x_name=metrics[0]))
    elif isinstance(best, dict):
        params = ", ".join(f"{k}={v}" for k, v in (best.get("best_params") or {}).items())
        parts.append(
            f"<p>best {esc(best.get('metric'))} ({esc(best.get('direction'))}) <b>{esc(best.get('best_value'))}</b> "
            f"at trial {esc(best.get('trial'))}: {esc(params)} ({esc(best.get('complete'))} of "
            f"{esc(best.get('trials'))} trials complete)</p>"
        )
    if not db.is_file():
        return "\n".join(parts)
    try:
        import optuna
    except ModuleNotFoundError:
        return "\n".join([*parts, "<p>its trials: pip install 'clusterable[optuna]' to list them here</p>"])
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    storage = f"sqlite:///{db.resolve()}"
    try:
        studies = [
            optuna.load_study(study_name=s.study_name, storage=storage) for s in optuna.get_all_study_summaries(storage)
        ]
    except Exception as err:  # noqa: BLE001  (not a study database: SQLAlchemy's and Optuna's errors alike)
        return "\n".join(
            [*parts, f'<p class="error">{esc(db.name)} cannot be read: {esc(str(err).splitlines()[0])}</p>']
        )
    for study in studies:
        trials = study.get_trials(deepcopy=False)
        names = sorted({k for t in trials for k in t.params})
        head = "".join(f"<th>{esc(n)}</th>" for n in ("trial", "state", "value", *names))
        rows = "".join(
            f"<tr><td>{t.number}</td><td>{esc(t.state.name.lower())}</td>"
            f"<td>{esc('' if t.values is None else ', '.join(f'{v:.6g}' for v in t.values))}</td>"
            + "".join(f"<td>{esc(t.params.get(n, ''))}</td>" for n in names)
            + "</tr>"
            for t in trials
        )
        parts.append(f"<p>study {esc(study.study_name)}</p><table><tr>{head}</tr>{rows}</table>")
        done = [(t.number, float(t.values[0])) for t in trials if t.values is not None]
        if done and len(study.directions) == 1:  # a multi-objective study has no best so far: its front above
            pick = max if study.directions[0] == optuna.study.StudyDirection.MAXIMIZE else min
            best_values = itertools.accumulate((v for _, v in done), pick)
            so_far = [(n, b) for (n, _), b in zip(done, best_values, strict=True)]
            parts.append(svg_curves("value per trial", {"trial": done, "best so far": so_far}, x_name="trial"))
    return "\n".join(parts)


def run_body(run: Run, outputs: Path, out: Path, log: tuple[Curves, str | None]) -> str:
    record = run.record
    metrics = "".join(
        f"<tr><td>{esc(k)}</td><td>{esc(f'{v:.6g}' if isinstance(v, float) else v)}</td></tr>"
        for k, v in sorted(record.metrics.items())
    )
    said = [f"<p>status <b>{esc(record.status)}</b>, experiment {esc(record.experiment)}, seed {esc(record.seed)}"]
    if record.error:
        said.append(f'<p class="error">{esc(record.error)}</p>')
    if record.pruned:  # the search's pruner stopped it: its last epoch's metrics, not evaluated
        said.append(f"<p>pruned: {esc(record.pruned)} (its last epoch's metrics; not evaluated)</p>")
    curves, unreadable = log
    if unreadable:
        said.append(f'<p class="error">{esc(unreadable)}</p>')
    plots = [svg_curves(key, {key: pts}) for key, pts in sorted(curves.items()) if not key.startswith("train/")]
    files = sorted(p for p in run.path.rglob("*") if p.is_file())
    links = "".join(
        f'<li><a href="{esc(os.path.relpath(p, out))}">{esc(p.relative_to(run.path))}</a></li>' for p in files[:200]
    )
    config = yaml.safe_dump(record.config or {}, sort_keys=False, allow_unicode=True)
    return "\n".join(
        [
            *said,
            f"<h2>Metrics</h2><table><tr><th>metric</th><th>value</th></tr>{metrics}</table>",
            "<h2>Curves</h2>" + ("".join(plots) or "<p>no CSV log (logger=csv)</p>"),
            f"<h2>Files</h2><ul>{links}</ul>",
            f"<h2>Resolved config</h2><pre>{esc(config)}</pre>",
            f"<h2>Record</h2><pre>{esc(json.dumps(record.to_dict(), indent=1, default=str))}</pre>",
        ]
    )


def index_body(papers: dict[str, list[str]], by_experiment: dict[str, list[Run]]) -> str:
    owned = {e for paper, names in papers.items() for n in names for e in sources(f"{paper}/{n}")}
    paper_items = "".join(
        f'<li><a href="paper-{p}.html">{esc(p)}</a>: {esc(", ".join(names))}</li>' for p, names in papers.items()
    )

    def items(names: Iterable[str]) -> str:
        return "".join(
            f'<li><a href="exp-{slug(n)}.html">{esc(n)}</a> ({len(by_experiment[n])} runs)</li>' for n in sorted(names)
        )

    yours = [n for n in by_experiment if n not in owned]
    return (
        f"<h2>Papers</h2><ul>{paper_items or '<li>none</li>'}</ul>"
        f"<h2>Your experiments</h2><ul>{items(yours) or '<li>none</li>'}</ul>"
        f"<h2>The papers' experiments</h2><ul>{items(owned & set(by_experiment)) or '<li>none</li>'}</ul>"
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="clusterable-site", description=__doc__.splitlines()[0])
    parser.add_argument("--outputs", default=os.environ.get("CLUSTERABLE_OUTPUTS") or "outputs", type=Path)
    parser.add_argument("--out", default=Path("site"), type=Path, help="the folder the site is written to")
    parser.add_argument("--pool-code-versions", action="store_true", help="as the table command's")
    args = parser.parse_args(argv)
    if not args.outputs.is_dir():
        parser.error(f"--outputs {args.outputs}: no such folder")
    try:
        site = build_site(args.outputs, args.out, args.pool_code_versions, progress=sys.stderr)
    except UnreadableRuns as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    except NoRuns as err:
        print(f"{err}: train first (clusterable-train ...)", file=sys.stderr)
        return 1
    for name, why in site.refused:
        print(f"{name}: not built: {why}")
    print(f"site: {len(site.pages)} pages in {args.out}/ (open {args.out / 'index.html'})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
