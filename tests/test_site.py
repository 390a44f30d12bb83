"""The results site (``clusterable.site``) on hand-made run folders: every page written, every link and image
resolving on disk, the paper tables' numbers those of the table command, a table that cannot be built said on its
page in one line; and, where Debian's Chromium is installed, every page loading without a console error and a
screenshot showing its table."""

from __future__ import annotations

import html
import json
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
import yaml
from PIL import Image
from tables.rundirs import corel_table2_runs, write_run

from clusterable import site
from clusterable.tables.cli import build

LINK = re.compile(r'(?:href|src)="([^"]+)"')


def own_sweep(outputs: Path, name: str = "myproject") -> list[Path]:
    """A sweep of one's own: two temperatures x two seeds, each with a CSV log of val/acc over three epochs."""
    paths = []
    for temperature, acc in ((0.5, 0.9), (1.0, 0.8)):
        for seed in (0, 1):
            params = {"loss": "supcon", "loss.temperature": temperature, "seed": seed}
            path = write_run(
                outputs, name, params, {"test/acc": acc + seed / 100}, config={"optimized_metric": "test/acc"}
            )
            (path / "csv").mkdir()
            rows = "".join(f"{e},{e * 10},{acc - 0.1 / (e + 1):.4f}\n" for e in range(3))
            (path / "csv" / "metrics.csv").write_text("epoch,step,val/acc\n" + rows)
            paths.append(path)
    return paths


@pytest.fixture
def built(tmp_path: Path) -> tuple[Path, site.Site]:
    outputs = tmp_path / "outputs"
    corel_table2_runs(outputs)
    own_sweep(outputs)
    return outputs, site.build_site(outputs, tmp_path / "site")


def test_every_page_is_written_and_every_link_resolves_on_disk(built) -> None:
    outputs, written = built
    names = {p.name for p in written.pages}
    assert {"index.html", "paper-corel.html", "exp-myproject.html", "exp-corel_table2.html"} <= names
    assert sum(n.startswith("run-") for n in names) == 32 + 4  # a page per run
    for page in written.pages:
        for target in LINK.findall(page.read_text()):
            assert not target.startswith(("http:", "https:", "//")), (page.name, target)  # nothing from the network
            assert (page.parent / html.unescape(target)).exists(), (page.name, target)


def test_a_paper_page_prints_the_table_command_s_numbers(built) -> None:
    outputs, written = built
    table = build("corel/table2", outputs, out_dir=written.out / "figures")[0]
    page = (written.out / "paper-corel.html").read_text()
    assert f"<h2>{html.escape(table.title)}</h2>" in page
    for row in table.rows:
        assert "<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in row) + "</tr>" in page
    for claim in table.claims:
        assert f"[{html.escape(claim.verdict)}]</b> {html.escape(claim.text)}" in page


def test_your_experiment_has_its_table_its_curves_and_its_runs(built) -> None:
    _, written = built
    page = (written.out / "exp-myproject.html").read_text()
    assert "<td>0.5</td><td>0.9050 ± 0.0071</td><td>2</td>" in page
    assert page.count("<polyline") == 4 and "test/acc per epoch" not in page  # the monitored metric: val/acc
    # a legend entry per run, named by what the runs differ in and the seed (folder names share long prefixes)
    for temperature in ("0.5", "1.0"):
        for seed in (0, 1):
            assert f">loss.temperature={temperature}, seed={seed}</text>" in page
    index = (written.out / "index.html").read_text()
    your = index.split("<h2>Your experiments</h2>")[1].split("<h2>")[0]
    assert 'href="exp-myproject.html"' in your and "corel" not in your


def test_a_search_s_page_shows_its_optuna_study(tmp_path: Path) -> None:
    """The trials' folder holds the study the sweeper kept: its best trial, a row per trial and the value per trial
    beside the best so far."""
    optuna = pytest.importorskip("optuna")
    outputs = tmp_path / "outputs"
    folder = own_sweep(outputs)[0].parent
    study = optuna.create_study(
        study_name="myproject", storage=f"sqlite:///{folder / 'optuna.db'}", direction="maximize"
    )
    space = {"loss.temperature": optuna.distributions.FloatDistribution(0.1, 1.0)}
    for value, temperature in ((0.8, 1.0), (0.9, 0.5), (0.85, 0.7)):
        study.add_trial(
            optuna.trial.create_trial(params={"loss.temperature": temperature}, distributions=space, value=value)
        )
    best = {"name": "myproject", "metric": "test/acc", "direction": "maximize", "best_value": 0.9}
    best |= {"best_params": {"loss.temperature": 0.5}, "trial": 1, "trials": 3, "complete": 3}
    (folder / "optimization_results.yaml").write_text(yaml.safe_dump(best))
    page = (site.build_site(outputs, tmp_path / "site").out / "exp-myproject.html").read_text()
    assert "best test/acc (maximize) <b>0.9</b> at trial 1: loss.temperature=0.5 (3 of 3 trials complete)" in page
    assert "<tr><td>1</td><td>complete</td><td>0.9</td><td>0.5</td></tr>" in page
    chart = page.split('aria-label="value per trial"')[1].split("</svg>")[0]
    assert chart.count("<polyline") == 2 and "best so far" in chart and "trial 2" in chart
    # the best so far, point by point: 0.8, then 0.9 twice
    best = re.findall(r'<polyline[^>]*points="([^"]+)"', chart)[1].split()
    assert best[1].split(",")[1] == best[2].split(",")[1] != best[0].split(",")[1]
    # files that cannot be read: a line each on the page, the site still written
    (folder / "optimization_results.yaml").write_text("best: [unclosed")
    (folder / "optuna.db").write_bytes(b"not a database")
    page = (site.build_site(outputs, tmp_path / "site2").out / "exp-myproject.html").read_text()
    assert '<p class="error">optimization_results.yaml cannot be read: ' in page
    assert '<p class="error">optuna.db cannot be read: ' in page and "<h2>Runs (4)</h2>" in page


def test_a_multi_objective_search_s_page_shows_its_pareto_front(tmp_path: Path) -> None:
    """A search of two metrics: the front the sweeper wrote, as a table and a chart; the study found above run
    folders that a ``/`` in an override nests deeper (``optimized_metric=[val/acc,val/kmeans/acc]``); a pruned
    trial's page says why it stopped."""
    outputs = tmp_path / "outputs"
    objective = {"optimized_metric": ["val/acc", "val/kmeans/acc"]}
    paths = [
        write_run(
            outputs, "search/mine", {"optimized_metric": "[val/acc,val/kmeans/acc]", "seed": s}, m, config=objective
        )
        for s, m in ((0, {"val/acc": 0.9, "val/kmeans/acc": 0.7}), (1, {"val/acc": 0.8, "val/kmeans/acc": 0.8}))
    ]
    folder = outputs / "multirun" / "full" / "search" / "mine"
    assert paths[0].parent != folder  # nested by the override's slashes
    front = [
        {"trial": 0, "values": [0.9, 0.7], "params": {"seed": 0}},
        {"trial": 1, "values": [0.8, 0.8], "params": {"seed": 1}},
    ]
    written = {"name": "search/mine", "metrics": ["val/acc", "val/kmeans/acc"], "directions": ["maximize", "maximize"]}
    written |= {"solutions": front, "trials": 3, "complete": 2, "pruned": 1}
    (folder / "optimization_results.yaml").write_text(yaml.safe_dump(written))
    pruned = write_run(outputs, "search/mine", {"optimized_metric": "[val/acc,val/kmeans/acc]", "seed": 2}, None)
    record = json.loads((pruned / "metrics.json").read_text())
    record |= {"status": "pruned", "error": None, "pruned": "MedianPruner at epoch 2: val/acc 0.4000"}
    (pruned / "metrics.json").write_text(json.dumps(record))
    built = site.build_site(outputs, tmp_path / "site")
    page = (built.out / "exp-search_mine.html").read_text()
    assert "Pareto front of val/acc, val/kmeans/acc (maximize, maximize): 2 trials (2 of 3 trials complete)" in page
    assert "<tr><td>1</td><td>0.8</td><td>0.8</td><td>seed=1</td></tr>" in page
    assert page.count('aria-label="Pareto front"') == 1
    (run_page,) = [p for p in built.pages if "MedianPruner" in p.read_text()]
    assert "pruned: MedianPruner at epoch 2: val/acc 0.4000 (its last epoch's metrics; not evaluated)" in (
        run_page.read_text()
    )


def test_a_table_that_cannot_be_built_is_one_line_on_its_page(tmp_path: Path) -> None:
    outputs = tmp_path / "outputs"
    own_sweep(outputs)
    # one more run of the sweep on fake data: a table never mixes it with the real ones
    params = {"loss": "supcon", "loss.temperature": 0.5, "seed": 2}
    write_run(outputs, "myproject", params, {"test/acc": 0.1}, config={"optimized_metric": "test/acc"}, source="fake")
    own_sweep(outputs, name="other")
    written = site.build_site(outputs, tmp_path / "site")
    ((name, why),) = written.refused
    assert name == "myproject" and "data source" in why and "\n" not in why
    assert '<p class="error">no table: ' in (written.out / "exp-myproject.html").read_text()
    assert "<table>" in (written.out / "exp-other.html").read_text()  # the rest is written


def test_a_log_that_cannot_be_read_is_one_line_on_its_run_s_page(tmp_path: Path) -> None:
    outputs = tmp_path / "outputs"
    first, *_ = own_sweep(outputs)
    (first / "csv" / "metrics.csv").write_text("epoch,step,val/acc\n0,0,0.5\n1,10,garbled\n")
    written = site.build_site(outputs, tmp_path / "site")
    (page,) = [p for p in written.pages if "cannot be read" in p.read_text()]  # the one run's page, no other
    assert f'<p class="error">{first / "csv" / "metrics.csv"} cannot be read (ValueError' in page.read_text()
    assert page.name.startswith("run-") and first.name in page.read_text()
    assert (written.out / "exp-myproject.html").read_text().count("<polyline") == 3  # the other runs' curves


def test_the_command_s_exit_status(tmp_path: Path, capsys) -> None:
    assert site.main(["--outputs", str(tmp_path), "--out", str(tmp_path / "site")]) == 1
    assert "no runs under" in capsys.readouterr().err
    own_sweep(tmp_path / "outputs")
    broken = next((tmp_path / "outputs").rglob("metrics.json"))
    broken.write_text("{cut short")
    assert site.main(["--outputs", str(tmp_path / "outputs"), "--out", str(tmp_path / "site")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: 1 metrics.json cannot be read") and len(err.strip().splitlines()) == 1
    with pytest.raises(SystemExit) as exit_:
        site.main(["--outputs", str(tmp_path / "nowhere")])
    assert exit_.value.code == 2
    # a good folder: progress on stderr (a line per paper and experiment, per 500 run pages), the summary on stdout
    capsys.readouterr()
    broken.unlink()
    assert site.main(["--outputs", str(tmp_path / "outputs"), "--out", str(tmp_path / "site")]) == 0
    out, err = capsys.readouterr()
    assert err.splitlines() == [
        f"site: 3 runs of 1 experiment under {tmp_path / 'outputs'}/",
        "site: experiment myproject: 3 runs",
        "site: run pages 1-3 of 3",
    ]
    assert out.startswith("site: ") and "pages in" in out


FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--enable-logging=stderr",
    "--v=0",
]


@pytest.fixture
def browser() -> str:
    """Debian's Chromium (``apt-get install chromium``); the test is skipped where it is not installed. A test that
    takes it starts a browser a page, so conftest counts it with the command tests."""
    found = shutil.which("chromium")
    if found is None:
        pytest.skip("Debian's chromium is not installed (apt-get install chromium)")
    return found


def test_pages_load_in_headless_chromium_and_show_their_tables(built, browser: str, tmp_path: Path) -> None:
    _, written = built
    pages = [
        "index.html",
        "paper-corel.html",
        "exp-myproject.html",
        next(p.name for p in written.pages if p.name.startswith("run-")),
    ]
    for name in pages:
        shot = tmp_path / f"{name}.png"
        done = subprocess.run(
            [
                browser,
                *FLAGS,
                f"--user-data-dir={tmp_path / 'profile'}",
                f"--screenshot={shot}",
                "--window-size=1200,900",
                (written.out / name).as_uri(),
            ],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0 and shot.is_file(), done.stderr[-2000:]
        console = [line for line in done.stderr.splitlines() if "CONSOLE" in line]
        assert not console, (name, console)  # a resource that failed to load, a script error
        if name != "index.html":  # a table: its header cells' grey (#f2f2f2) fills part of the screenshot
            pixels = np.asarray(Image.open(shot).convert("RGB")).reshape(-1, 3)
            grey = np.all(pixels == (0xF2, 0xF2, 0xF2), axis=1).mean()
            assert grey > 0.002, (name, grey)
