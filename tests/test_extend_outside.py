"""The extension guide's section on a repository of one's own (docs/extend.md, "From your own repository") runs as
written, from a folder outside this repository.

The files its code blocks name (``# myproject/myparts.py``, ``# myproject/conf/loss/soft_prototypes.yaml``, ...) are
written below ``tmp_path``, never below the repository; its shell block runs line by line in-process (the ``train``
fixture): ``cd`` moves into the folder, ``export PYTHONPATH=$PWD`` puts it on ``sys.path``, ``$PWD`` is that folder in
every command (so ``hydra.searchpath`` names ``tmp_path``'s ``conf/``), ``clusterable-train ...`` runs
``clusterable.cli.main`` and ``python <script>`` runs the folder's script. The outputs go where a user's would, to
``outputs/`` in the folder. The mistakes the section shows print the lines it shows (a line ending in ``...`` is
the start of the line printed), and its "were `member` missing" refusal is the one a head without that member gets.
"""

from __future__ import annotations

import importlib
import json
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from helpers.running import Result
from hydra import compose, initialize_config_dir
from hydra.core.global_hydra import GlobalHydra
from test_docs import CONF, ROOT, _fences, outside_files
from test_extend_examples import GUIDE, OUTSIDE

from clusterable.contracts import Head, StacksScalars, require
from clusterable.rescore import main as eval_main
from clusterable.site import main as site_main
from clusterable.tables.cli import main as tables_main


def _section() -> str:
    text = GUIDE.read_text()
    assert f"\n{OUTSIDE}\n" in text, f"docs/extend.md has no section {OUTSIDE!r}"
    section = text[text.index(f"\n{OUTSIDE}\n") + 1 :]
    following = re.search(r"^## ", section[len(OUTSIDE) :], flags=re.MULTILINE)
    return section[: len(OUTSIDE) + following.start()] if following else section


SECTION = _section()
FILES = {name: text for name, text in outside_files(GUIDE).items() if f"# {name}\n" in SECTION}
FOLDER = next(iter(FILES)).split("/")[0] if FILES else ""
MODULES = [Path(f).stem for f in FILES if f.count("/") == 1 and f.endswith(".py")]


def _shell() -> list[list[str]]:
    """The lines of the section's ``bash`` blocks as words (continuations joined, comments left out)."""
    _, blocks = _fences(SECTION)
    text = "\n".join(line for b in blocks if b.info == "bash" for line in b.lines).replace("\\\n", " ")
    return [words for line in text.splitlines() if (words := shlex.split(line, comments=True))]


def _shown_failing() -> list[tuple[list[str], list[str]]]:
    """(command, the lines it prints) of every ``$ ...`` line of the section's ``text`` blocks."""
    _, blocks = _fences(SECTION)
    found: list[tuple[list[str], list[str]]] = []
    for line in (line for b in blocks if b.info == "text" for line in b.lines):
        if line.startswith("$ "):
            found.append((shlex.split(line[2:]), []))
        elif found and line.strip():
            found[-1][1].append(line.strip())
    return found


def _train_commands() -> list[list[str]]:
    return [words for words in _shell() if words[0] == "clusterable-train"]


class Shell:
    """The section's shell lines run in this process: ``cd``, ``export PYTHONPATH=...``, ``env -u PYTHONPATH``,
    ``clusterable-train``, ``clusterable-eval``, ``clusterable-tables`` and ``clusterable-site``."""

    def __init__(self, root: Path, train, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture):
        self.cwd, self.train, self.monkeypatch, self.capsys = root, train, monkeypatch, capsys
        self.pythonpath: list[str] = []

    def run(self, words: list[str]) -> Result | None:
        words = [w.replace("$PWD", str(self.cwd)) for w in words]
        if words[0] == "cd":
            self.cwd = (self.cwd / words[1]).resolve()
            self.monkeypatch.chdir(self.cwd)
            return None
        if words[0] == "export" and words[1].startswith("PYTHONPATH="):
            self.pythonpath = words[1].partition("=")[2].split(":")
            for entry in reversed(self.pythonpath):
                self.monkeypatch.syspath_prepend(entry)
            return None
        if words[:3] == ["env", "-u", "PYTHONPATH"]:
            return self.without_pythonpath(words[3:])
        if words[0] == "clusterable-train":
            GlobalHydra.instance().clear()
            return self.train(*words[1:])
        commands = {"clusterable-eval": eval_main, "clusterable-tables": tables_main, "clusterable-site": site_main}
        if words[0] in commands:
            GlobalHydra.instance().clear()
            self.capsys.readouterr()
            with self.monkeypatch.context() as patch:
                patch.chdir(self.cwd)
                code = commands[words[0]](words[1:])
            out, err = self.capsys.readouterr()
            return Result(code, out, err)
        raise AssertionError(f"the test does not run `{shlex.join(words)}`: teach Shell.run")

    def without_pythonpath(self, words: list[str]) -> Result | None:
        """``words`` run as a process without ``PYTHONPATH`` would: the folders it named, and the folder the
        command runs in (``clusterable-train`` does not import from it), off ``sys.path``; their modules unloaded."""
        with self.monkeypatch.context() as patch:
            off = {str(Path(p or ".").resolve()) for p in self.pythonpath} | {str(self.cwd)}
            patch.setattr(sys, "path", [p for p in sys.path if str(Path(p or ".").resolve()) not in off])
            for name in MODULES:
                patch.delitem(sys.modules, name, raising=False)
            return self.run(words)


@pytest.fixture
def shell(tmp_path: Path, train, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture) -> Shell:
    """The section's files written below ``tmp_path`` (outside the repository), a shell in ``tmp_path``; the runs
    write to ``outputs/`` of the folder they run in, as a user's do. The folder's modules are unloaded afterwards."""
    assert not tmp_path.resolve().is_relative_to(ROOT)
    for name, text in FILES.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    for name in MODULES:
        monkeypatch.delitem(sys.modules, name, raising=False)
    monkeypatch.delenv("CLUSTERABLE_OUTPUTS")
    return Shell(tmp_path, train, monkeypatch, capsys)


def _setup(shell: Shell) -> None:
    """The section's ``cd`` and ``export`` lines: the shell the commands it shows run in."""
    for words in _shell():
        if words[0] in ("cd", "export"):
            shell.run(words)


def test_the_section_writes_a_head_and_a_dataset_in_a_folder_of_its_own():
    assert FOLDER and not (ROOT / FOLDER).exists(), FILES.keys()
    assert {f"{FOLDER}/conf/loss", f"{FOLDER}/conf/dataset"} <= {str(Path(f).parent) for f in FILES}
    assert MODULES, "the section writes no Python module"
    for name in FILES:
        if name.endswith(".yaml"):  # an option of the user's own: no package option of that name shadows it
            assert not (CONF / Path(name).relative_to(f"{FOLDER}/conf")).exists(), name


def test_the_section_head_is_a_head_that_stacks(shell):
    _setup(shell)
    target = re.search(r"^_target_: (\S+)", FILES[f"{FOLDER}/conf/loss/{_option('loss')}.yaml"], re.M).group(1)
    module, _, name = target.rpartition(".")
    head = getattr(importlib.import_module(module), name)(num_classes=3, embedding_dim=4)
    require(head, Head, "loss")
    assert isinstance(head, StacksScalars) and head.stacked_scalars


def _option(group: str) -> str:
    return next(Path(f).stem for f in FILES if f.startswith(f"{FOLDER}/conf/{group}/"))


def test_the_section_commands_run_as_shown(shell):
    """A run, a stacked sweep, the sweep re-scored by the folder's evaluator, a table of it and a site, in the order
    the section shows them."""
    results: list[tuple[list[str], Result]] = []
    for words in _shell():
        result = shell.run(words)
        if result is not None:
            assert result.code == 0, (shlex.join(words), result.out[-2000:], result.err)
            results.append((words, result))
    commands = ["clusterable-train", "clusterable-train", "clusterable-eval", "clusterable-tables", "clusterable-site"]
    assert [w[0] for w, _ in results] == commands, results
    (single, run), (sweep, swept), (_, scored), (_, table), (site_words, site) = results
    assert "run: ok" in run.out
    # The sweep stacks, as the section says it does, and records a run per cell where the section says.
    said = re.search(r"`(stacked: [^`]+)`", " ".join(SECTION.split())).group(1)
    assert said in swept.out, swept.out[-3000:]
    name = next(w.partition("=")[2] for w in sweep if w.startswith("name="))
    folder = shell.cwd / "outputs" / "multirun" / "full" / name
    assert f"`outputs/multirun/full/{name}/`" in SECTION
    runs = [json.loads(p.read_text()) for p in sorted(folder.rglob("metrics.json"))]
    cells = int(re.search(r"(\d+) cells", said).group(1))
    assert len(runs) == cells and all(r["status"] == "ok" and r["stacked"]["members"] == cells for r in runs)
    # The table: a row per temperature of the sweep, each cell a mean ± std over its seeds.
    temperatures = next(w.partition("=")[2] for w in sweep if w.startswith("loss.temperature=")).split(",")
    rows = [line for line in table.out.splitlines() if line.split("|")[1:2] in ([f" {t} "] for t in temperatures)]
    assert [row.split("|")[1].strip() for row in rows] == temperatures, table.out
    tables = next(w for w in _shell() if w[0] == "clusterable-tables")
    columns = len(tables[tables.index("--metrics") + 1].split(","))
    assert (
        all(row.count("±") == columns for row in rows) and f"{cells} runs (0 not ok) named {name} [full]" in table.out
    )
    assert "Runs (seeds) per configuration: 2" in table.out, table.out
    assert re.search(r"^- \[(holds|not shown \(p = [0-9.]+\))\] loss.temperature=", table.out, re.M), table.out
    assert (shell.cwd / "outputs" / "tables" / f"runs_{name}.csv").is_file()
    # The folder's evaluator scored each run of the sweep from what it kept, and the table has its column.
    assert scored.out.splitlines()[-1] == f"rescore: {cells} re-scored, 0 failed", scored.out
    for record in (json.loads(p.read_text()) for p in folder.rglob("metrics.json")):
        assert record["metrics"]["test/fisher"] > 0 and record["rescored"][0]["keys"] == ["test/fisher", "val/fisher"]
    assert "| loss.temperature | test/acc | test/kmeans/acc | test/fisher | runs |" in table.out, table.out
    assert re.search(
        r"^- \[(holds|not shown \(p = [0-9.]+\))\] loss.temperature=\S+ has the highest test/fisher", table.out, re.M
    )
    # The site lists the sweep among your experiments, with its table.
    out_dir = shell.cwd / site_words[site_words.index("--out") + 1]
    index = (out_dir / "index.html").read_text()
    assert f'href="exp-{name}.html"' in index.split("<h2>Your experiments</h2>")[1], index
    assert "<th>loss.temperature</th>" in (out_dir / f"exp-{name}.html").read_text()
    assert site.out.strip().endswith(f"(open {out_dir.relative_to(shell.cwd) / 'index.html'})"), site.out


@pytest.mark.parametrize("args, printed", _shown_failing(), ids=[" ".join(a[-3:]) for a, _ in _shown_failing()])
def test_a_mistake_the_section_shows_prints_what_it_shows(shell, args, printed):
    _setup(shell)
    result = shell.run(args)
    assert result is not None and result.code != 0, (result.out[-2000:], result.err)
    lines = result.error_lines()
    assert len(lines) == len(printed), result.err
    for line, shown in zip(lines, printed, strict=True):
        assert line.startswith(shown[:-3]) if shown.endswith("...") else line == shown, (line, shown)


def test_a_misspelled_key_in_the_yaml_is_refused_as_on_the_command_line(shell):
    """ "The last line is the same where ``.../soft_prototypes.yaml`` itself misspells the key"."""
    typo = next(a for args, _ in _shown_failing() for a in args if re.match(r"^\+loss\.\w+=", a))
    args, printed = next((a, p) for a, p in _shown_failing() if typo in a)
    key, _, value = typo.removeprefix("+loss.").partition("=")
    meant = re.search(r"did you mean (\w+)\?", printed[-1]).group(1)
    yaml = shell.cwd / FOLDER / "conf" / "loss" / f"{_option('loss')}.yaml"
    assert f"`{FOLDER}/conf/loss/{_option('loss')}.yaml` itself misspells" in " ".join(SECTION.split())
    misspelt = re.sub(rf"^{meant}:", f"{key}:", yaml.read_text(), flags=re.MULTILINE)
    assert misspelt != yaml.read_text(), f"{yaml.name} sets no {meant}"
    yaml.write_text(misspelt)
    _setup(shell)
    result = shell.run([a for a in args if a != typo])
    assert result is not None and result.code == 1 and result.error_lines() == printed, result.err


def test_a_head_without_a_contract_member_is_refused_as_shown(shell, monkeypatch):
    refusals = re.findall(r"were `(\w+)` missing, `(error: [^`]+)`", " ".join(SECTION.split()))
    assert refusals, "the section shows the refusal of a head without a member of its contract"
    _setup(shell)
    target = re.search(r"^_target_: (\S+)", FILES[f"{FOLDER}/conf/loss/{_option('loss')}.yaml"], re.M).group(1)
    module, _, name = target.rpartition(".")
    cls = getattr(importlib.import_module(module), name)
    for member, error in refusals:
        with monkeypatch.context() as patch:
            patch.delattr(cls, member)
            result = shell.run(_train_commands()[0])
        assert result is not None and result.code == 1 and result.error_lines() == [error], result.err


def test_an_option_named_as_a_package_option_is_never_read(shell):
    """ "the package's configs come first on the search path, so a ``myproject/conf/loss/cce.yaml`` would never be
    read": such a file composes as the package's option."""
    named = re.search(rf"`{FOLDER}/conf/(\w+)/(\w+)\.yaml` would never be read", " ".join(SECTION.split()))
    assert named, "the section says that an option named as one of the package's is never read"
    group, option = named.groups()
    mine = shell.cwd / FOLDER / "conf" / group / f"{option}.yaml"
    mine.write_text("_target_: torch.nn.Identity\n")
    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        cfg = compose("train", overrides=[f"hydra.searchpath=[file://{mine.parents[1]}]", f"{group}={option}"])
    assert cfg[group]["_target_"] != "torch.nn.Identity"
    GlobalHydra.instance().clear()


def test_the_section_code_is_lint_clean(tmp_path):
    """The project's ruff rules and format on the section's Python, as a user's repository sees it: clusterable is
    a third-party package there, the folder's modules first-party."""
    written = []
    for name, text in FILES.items():
        if name.endswith(".py"):
            (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
            (tmp_path / name).write_text(text)
            written.append(str(tmp_path / name))
    settings = ["--config", str(ROOT / "pyproject.toml"), "--no-cache"]
    settings += ["--config", f"lint.isort.known-first-party = {MODULES}"]
    settings += ["--config", "lint.isort.known-third-party = ['clusterable']"]
    for command in (["check"], ["format", "--check"]):
        proc = subprocess.run(
            [sys.executable, "-m", "ruff", *command, *settings, *written], capture_output=True, text=True
        )
        assert proc.returncode == 0, f"ruff {' '.join(command)}:\n{proc.stdout}{proc.stderr}"
