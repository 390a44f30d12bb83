"""The docs cannot drift from the code: what README.md and docs/*.md name exists, and their commands compose.

For every page, in its code spans, links, tables and code blocks:
- a repository path (``src/...``, ``scripts/...``, ``docs/...``, ``tests/...``, ``train.py``) exists (a glob or
  ``{a,b}`` names at least one file); ``conf/...``, the configs' folder before they moved into the package
  (``src/clusterable/conf/``), is checked too, so that a page still naming it fails; a relative link exists, and
  its ``#anchor`` is a heading there;
- ``experiment=<name>`` and every ``<group>=<option>`` of a config group name a file
  ``src/clusterable/conf/<group>/<option>.yaml`` (``hydra/<group>=<option>``: one Hydra composes); so does every
  option a ``| `group` | options |`` table row lists;
- a dotted option ``group.key=value`` names a key of that group's config (of one of its options, composed by Hydra);
  ``+group.key=value`` a parameter of the node's ``_target_``; a key outside the groups, one of ``train.yaml``
  or of an experiment; a lone ``group.key`` code span either;
- ``clusterable.<module>.<name>`` imports; a lone ``<paper>/<name>`` code span is an experiment;
- every ``python train.py ...`` (code blocks and code spans) composes in-process with Hydra's compose API, no
  training (``-m``: the sweep's first and last cell, as ``hydra_plugins.clusterable_sweeper`` expands it);
  ``python scripts/make_tables.py <table>`` names a table ``make_tables.py`` knows, ``scripts/bench.py --only <case>``
  a case, ``make <target>`` a Makefile target; the installed commands ``clusterable-train ...`` and
  ``clusterable-tables ...`` are checked as ``train.py`` and ``make_tables.py``;
- the README's layout tree names files and folders that exist, where it draws them.

A page may write files of its own in code blocks whose first line names them
(``# src/clusterable/conf/loss/prototypes.yaml``, the extension guide's): its paths count as existing on that page
and its configs compose beside the package's (a Hydra search path). So do the files it writes in a folder of a
user's own, outside the repository (``# myproject/conf/loss/soft_prototypes.yaml``: ``outside_files``); ``$PWD`` in
its commands is that folder (``hydra.searchpath=[file://$PWD/conf]``) and ``python <script>`` may run its scripts.
A failure names the page, the line and what is missing. Mistakes the docs show on purpose (``+loss.lamda=0.5``) are
listed in ``SHOWN_FAILING``: the test checks that each still fails, so the list cannot hide drift either.
"""

from __future__ import annotations

import functools
import glob
import importlib
import importlib.util
import inspect
import re
import shlex
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from hydra.core.global_hydra import GlobalHydra
from hydra.core.override_parser.overrides_parser import OverridesParser
from omegaconf import DictConfig, OmegaConf

import clusterable  # noqa: F401  (registers the resolvers the configs name)
from clusterable.config import CONFIG_DIR

ROOT = Path(__file__).resolve().parents[1]
CONF = Path(CONFIG_DIR)
# The configs' folder as a page names it (a repository path); a page's own config files are written below it.
CONF_PATH = CONF.relative_to(ROOT).as_posix() + "/"
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]

# Mistakes the docs show failing on purpose; each must still be refused by the check it would fail.
SHOWN_FAILING = {
    "+loss.lamda=0.5",  # a key that is not a parameter of the head
    "evaluator=[nonexistent]",  # an unknown group option
    "+protocol.budjet=cpu150",  # a protocol key no config sets
}

REPO_PATH = re.compile(
    r"^(?:src|conf|scripts|docs|tests)/|^(?:train\.py|Makefile|pyproject\.toml|constraints\.txt|README\.md)$"
)
FILE_SUFFIX = re.compile(r"\.(?:py|ya?ml|md|json|csv|png|npz|npy|ckpt|txt|pth|mat|bz2|gz|xml|zip|log)$")
DOTTED_KEY = re.compile(r"^[+~]*[a-z_][a-z0-9_]*(?:\.[A-Za-z_@0-9][\w@-]*)+$")
PYTHON = ("python", "python3", ".venv/bin/python")
# The installed package's commands (pyproject.toml's [project.scripts]) and the checkout's scripts they are.
INSTALLED = {"clusterable-train": "train.py", "clusterable-tables": "scripts/make_tables.py"}


@dataclass(frozen=True)
class Mention:
    """A piece of a page to check: a code span, a link target, a command, or an option listed in a group's table
    row (kind ``option:<group>``); ``line`` is 1-based."""

    line: int
    text: str
    kind: str


@dataclass(frozen=True)
class Block:
    """A fenced code block: the line of its first content line, its info string and its lines."""

    line: int
    info: str
    lines: tuple[str, ...]


# ----------------------------------------------------------------------------------------------- reading the pages


def _fences(text: str) -> tuple[str, list[Block]]:
    """The page with its fenced code blocks blanked (line numbers kept), and the blocks."""
    prose: list[str] = []
    blocks: list[Block] = []
    fence, info, start, lines = None, "", 0, []
    for number, line in enumerate(text.splitlines(), start=1):
        marker = re.match(r"^\s*(`{3,}|~{3,})\s*(\S*)", line)
        if marker and fence is None:
            fence, info, start, lines = marker.group(1)[:3], marker.group(2), number + 1, []
        elif marker and marker.group(1).startswith(fence) and not marker.group(2):
            blocks.append(Block(start, info, tuple(lines)))
            fence = None
        elif fence is not None:
            lines.append(line)
        prose.append(line if fence is None and not marker else "")
    return "\n".join(prose), blocks


def _spans(prose: str) -> Iterator[Mention]:
    """Code spans (which may wrap over a line break, not over a blank line) and link targets of the prose."""
    for m in re.finditer(r"(?<!`)(`+)(?!`)(.+?)(?<!`)\1(?!`)", prose, flags=re.DOTALL):
        if "\n\n" not in m.group(2):
            # `a\|b` in a table cell is `a|b` on the page
            text = " ".join(m.group(2).replace("\\|", "|").split())
            yield Mention(prose.count("\n", 0, m.start()) + 1, text, "span")
    for m in re.finditer(r"\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)", prose):
        yield Mention(prose.count("\n", 0, m.start()) + 1, m.group(1), "link")


def _table_options(prose: str) -> Iterator[Mention]:
    """A table whose header is ``| group | options | ...``: each code span of a row's second cell is an option of
    the group its first cell names (``| `model` | `ffnn` (default), `cnn` | ... |``)."""
    header: list[str] = []
    for number, line in enumerate(prose.splitlines(), start=1):
        cells = [c.strip() for c in re.split(r"(?<!\\)\|", line)[1:-1]] if line.startswith("|") else []
        if not cells or not header:
            header = cells
            continue
        group = re.fullmatch(r"`([\w/]+)`", cells[0]) if header[:2] == ["group", "options"] else None
        if group and group.group(1) != "experiment":
            for option in re.findall(r"`([^`]+)`", cells[1]):
                yield Mention(number, option.replace("\\|", "|"), f"option:{group.group(1)}")


def _commands(blocks: list[Block]) -> Iterator[Mention]:
    """Shell commands of the code blocks: backslash continuations joined, split at ``&&``, ``;`` and ``||``."""
    for block in blocks:
        pending, start = "", block.line
        for number, line in enumerate(block.lines, start=block.line):
            if not pending:
                start = number
            if line.rstrip().endswith("\\"):
                pending += line.rstrip()[:-1] + " "
                continue
            yield from _split_commands(start, pending + line)
            pending = ""


def _split_commands(line: int, text: str) -> Iterator[Mention]:
    text = re.sub(r"^\s*\$\s+", "", text)
    try:
        words = shlex.split(text, comments=True)
    except ValueError:
        return  # not shell (a line of Python or YAML in a block)
    command: list[str] = []
    for word in [*words, "&&"]:
        if word in ("&&", "||", ";"):
            if _is_command(command):
                yield Mention(line, shlex.join(command), "command")
            command = []
        else:
            command.append(word)


def _is_command(words: list[str]) -> bool:
    return bool(words) and (words[0] in PYTHON and len(words) > 1 or words[0] in ("make", *INSTALLED))


def mentions(path: Path) -> list[Mention]:
    prose, blocks = _fences(path.read_text())
    found = [*_spans(prose), *_table_options(prose), *_commands(blocks)]
    # A code span that is a command (`python train.py --cfg job`) is checked as one too.
    found += [Mention(m.line, m.text, "command") for m in found if m.kind == "span" and _is_command(m.text.split())]
    return found


def _named_blocks(path: Path) -> dict[str, str]:
    """Code blocks whose first line is ``# <path>`` (one word), or whose second is after a ``# @package`` line
    (Hydra reads a package header only above any other line), by path: their whole text, as a reader copies it."""
    _, blocks = _fences(path.read_text())
    files = {}
    for block in blocks:
        lines = [line.strip() for line in block.lines[:2]]
        first = lines[1] if len(lines) > 1 and lines[0].startswith("# @package") else lines[0] if lines else ""
        name = first[2:].strip() if first.startswith("# ") and not first.startswith("# @") else ""
        if name and " " not in name:
            files[name] = "\n".join(block.lines) + "\n"
    return files


def page_files(path: Path) -> dict[str, str]:
    """The files a page writes: code blocks whose first line is ``# <repository path>``, by path."""
    return {name: text for name, text in _named_blocks(path).items() if REPO_PATH.match(name)}


def _config_dirs(args: list[str], base: Path) -> list[str]:
    """``args`` with Hydra's ``-cd DIR`` / ``--config-dir DIR`` / ``--config-dir=DIR`` as the
    ``hydra.searchpath=[file://...]`` override the commands fold them into (``clusterable.searchpath``), ``DIR``
    relative to ``base``, the folder the command runs in."""
    out, rest = [], iter(args)
    for arg in rest:
        flag, eq, value = arg.partition("=")
        if flag in ("-cd", "--config-dir"):
            folder = value if eq else next(rest, "")
            out.append(f"hydra.searchpath=[file://{(base / folder).resolve()}]")
        else:
            out.append(arg)
    return out


def outside_files(path: Path) -> dict[str, str]:
    """The files a page writes in a folder of a user's own, outside the repository: code blocks whose first line is
    ``# <folder>/<path>`` (``# myproject/myparts.py``), ``<folder>`` no name of the repository's root, by path."""
    return {
        name: text
        for name, text in _named_blocks(path).items()
        if not REPO_PATH.match(name)
        and "/" in name
        and FILE_SUFFIX.search(name)
        and not (ROOT / name.split("/")[0]).exists()
    }


# ------------------------------------------------------------------------------------------------ the config tree


@functools.cache
def composed(*overrides: str) -> DictConfig | str:
    """``train`` composed with ``overrides`` (Hydra's node included), or Hydra's first line of why not."""
    try:
        return compose("train", overrides=list(overrides), return_hydra_config=True)
    except Exception as e:  # ConfigCompositionException and its causes
        return f"{type(e).__name__}: {str(e).strip().splitlines()[0]}"


def _node(cfg: DictConfig, dotted: str) -> object:
    """The node at ``dotted`` in ``cfg`` without resolving interpolations, or None where a key is missing."""
    node: object = cfg
    for key in dotted.split("."):
        if not isinstance(node, DictConfig) or key not in node:
            return None
        node = node._get_node(key)
        if isinstance(node, DictConfig) and node._is_interpolation():
            return node  # a key under an interpolated node: we cannot walk further without resolving
    return node


def _target_params(node: object) -> set[str] | None:
    """The parameters of a config node's ``_target_``, or None if it has none (or it cannot be imported)."""
    if not isinstance(node, DictConfig) or "_target_" not in node:
        return None
    try:
        target = importlib.import_module("hydra.utils").get_object(node._target_)
        return set(inspect.signature(target).parameters)
    except Exception:
        return None


def _values(value: str) -> list[str]:
    """``a,b``, ``[a,b]``, ``a|b``, ``x/{a,b}`` -> the names; ``..`` / ``...`` ranges and placeholders left out."""
    names = []
    for part in re.split(r",(?![^{]*\})|\|", value.strip("[]")):
        names += _braces(part.strip())
    return [n for n in names if n and ".." not in n and "<" not in n]


def _braces(text: str) -> list[str]:
    m = re.search(r"\{([^{}]*)\}", text)
    if not m:
        return [text]
    return [x for alt in m.group(1).split(",") for x in _braces(text[: m.start()] + alt + text[m.end() :])]


@dataclass
class Checker:
    """The checks of one page; ``files`` are the page's own (``page_files``), its configs written below
    ``scratch`` (``scratch / CONF_PATH``) and composed beside the package's; ``outside`` the files it writes in a
    user's own folder (``outside_files``), written below ``scratch / "outside"``, that folder's ``conf/`` composed
    beside the package's too."""

    page: Path
    files: dict[str, str] = field(default_factory=dict)
    scratch: Path | None = None
    outside: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        # The folders (``file://...``) composed beside the package's configs.
        self.searchpath: tuple[str, ...] = ()
        self.pwd: Path | None = None  # the user's folder of ``outside``, where the page's commands run
        written = {k: v for k, v in self.files.items() if k.startswith(CONF_PATH)}
        if written and self.scratch is not None:
            for name, text in written.items():
                (self.scratch / name).parent.mkdir(parents=True, exist_ok=True)
                (self.scratch / name).write_text(text)
            self.searchpath = (f"file://{self.scratch / CONF_PATH}",)
        if self.outside and self.scratch is not None:
            folders = {name.split("/")[0] for name in self.outside}
            assert len(folders) == 1, f"{self.page.name} writes in several folders of its own: {folders}"
            self.pwd = self.scratch / "outside" / folders.pop()
            for name, text in self.outside.items():
                (self.scratch / "outside" / name).parent.mkdir(parents=True, exist_ok=True)
                (self.scratch / "outside" / name).write_text(text)
            self.searchpath += (f"file://{self.pwd / 'conf'}",)

    # --- the config tree, with the page's own files

    def compose(self, *overrides: str) -> DictConfig | str:
        """``composed`` with the page's folders on the search path, merged with a command's own
        ``hydra.searchpath=[...]`` (Hydra reads one such override)."""
        paths, rest = list(self.searchpath), []
        for override in overrides:
            named = re.fullmatch(r"hydra\.searchpath=\[(.*)\]", override)
            if named:
                paths += [p.strip() for p in named.group(1).split(",") if p.strip()]
            else:
                rest.append(override)
        searchpath = [f"hydra.searchpath=[{','.join(dict.fromkeys(paths))}]"] if paths else []
        return composed(*searchpath, *rest)

    def _own_configs(self) -> set[str]:
        """The page's config files relative to their config folder (``loss/prototypes.yaml``): its own and those of
        the user's folder."""
        names = {f[len(CONF_PATH) :] for f in self.files if f.startswith(CONF_PATH)}
        if self.pwd is not None:
            prefix = f"{self.pwd.name}/conf/"
            names |= {f[len(prefix) :] for f in self.outside if f.startswith(prefix)}
        return names

    def groups(self) -> set[str]:
        """Config groups: every folder of the configs but Hydra's own (nested ones too: ``loss/metric``)."""
        names = {p.relative_to(CONF).as_posix() for p in CONF.rglob("*") if p.is_dir()}
        names |= {str(Path(f).parent) for f in self._own_configs()}
        return {n for n in names if n.split("/")[0] != "hydra" and n != "."}

    def options(self, group: str) -> list[str]:
        found = {str(p.relative_to(CONF / group).with_suffix("")) for p in (CONF / group).rglob("*.yaml")}
        prefix = f"{group}/"
        found |= {f[len(prefix) : -len(".yaml")] for f in self._own_configs() if f.startswith(prefix)}
        return sorted(found)

    def configs_for(self, key: str) -> Iterator[DictConfig]:
        """The configs a key may be one of: the default run, each option of its group, each experiment; Hydra's
        node under each launcher."""
        first = key.split(".")[0]
        overrides: list[str] = [""]
        if first in self.groups():
            overrides += [f"{first}={option}" for option in self.options(first)]
        else:
            if first == "hydra":
                overrides += [f"hydra/launcher={x}" for x in ("basic", "joblib", "submitit_local", "submitit_slurm")]
            overrides += [f"experiment={option}" for option in self.options("experiment")]
        for override in overrides:
            cfg = self.compose(*([override] if override else []))
            if isinstance(cfg, DictConfig):
                yield cfg

    def where(self, key: str) -> str:
        first = key.split(".")[0]
        if first in self.groups():
            return f"any {CONF_PATH}{first}/*.yaml"
        return f"{CONF_PATH}train.yaml or any experiment" if first != "hydra" else "Hydra's config under any launcher"

    # --- the checks

    def check_key(self, token: str, named: bool = False, value: str | None = None) -> str | None:
        """A dotted option: ``group.key`` is a key of its group's config; ``+group.key`` a parameter of its
        target; ``named`` (a key named in prose, not set, as a lone ``trainer.limit_train_batches``): either.
        ``value``: what the page sets the key to; a plain value set on a node of keys (``dataset.sampler=x``
        where ``sampler`` holds ``kind``, ...) is refused, as Hydra would refuse it."""
        plus = token.startswith("+")
        key = token.lstrip("+~")
        if not plus and not named:
            plain = value is not None and value != "null" and not value.startswith("{")
            holder = None  # a node of keys found where the page sets a plain value
            for cfg in self.configs_for(key):
                node = _node(cfg, key)
                if node is None:
                    continue
                if not (plain and isinstance(node, DictConfig) and not node._is_interpolation()):
                    return None
                holder = node
            if holder is None:
                return f"`{key}` is not a key of {self.where(key)}"
            return f"`{key}={value}`: `{key}` holds keys ({', '.join(map(str, holder))}), not a value"
        parent, _, last = key.rpartition(".")
        for cfg in self.configs_for(key):
            if _node(cfg, key) is not None:
                return None
            params = _target_params(_node(cfg, parent))
            if params is not None and last in params:
                return None
        return f"`{key}` is neither a key nor a parameter of the target of `{parent}` in {self.where(key)}"

    def check_assignment(self, token: str) -> str | None:
        """``group=option`` (options exist), ``hydra/group=option`` (composes), ``group.key=value`` (check_key)."""
        key, _, value = token.partition("=")
        bare = key.lstrip("+~")
        if "<" in token or not bare:
            return None
        if bare in self.groups() or bare == "experiment":
            missing = [v for v in _values(value) if v != "null" and v not in self.options(bare)]
            return f"no {CONF_PATH}{bare}/{missing[0]}.yaml (`{token}`)" if missing else None
        if bare.startswith("hydra/"):
            problems = [self.compose(f"{bare}={v}") for v in _values(value)]
            return next((f"`{token}`: {p}" for p in problems if isinstance(p, str)), None)
        if "." in bare:
            return self.check_key(key, value=value)
        return None  # a top-level key (`seed=1`): the commands that set one are composed

    def check_path(self, token: str, base: Path = ROOT) -> str | None:
        """A repository path (relative to ``base``) exists, or the page writes it; a glob names a file."""
        target, _, anchor = token.rstrip(".,;:)").partition("#")
        target = re.sub(r"<[^>]*>", "*", target)
        for candidate in _braces(target):
            path = (base / candidate).resolve()
            inside = path.relative_to(ROOT).as_posix() if path.is_relative_to(ROOT) else None
            if inside in self.files:
                continue
            if any(ch in candidate for ch in "*?["):
                if not glob.glob(str(base / candidate)):
                    return f"no file matches `{candidate}`"
                continue
            if not path.exists():
                return f"no such file or folder `{candidate}`" + (f" (in `{token}`)" if candidate != token else "")
            if anchor and path.suffix == ".md" and anchor not in anchors(path):
                return f"`{token}`: no heading #{anchor} in {path.relative_to(ROOT)}"
        return None

    def check_span(self, text: str) -> list[str]:
        """Every word of a code span; a span of one word may also be an experiment, a module or a bare option."""
        problems = []
        words = text.split()
        for word in words:
            word = word.strip("(),;").rstrip(":")
            if REPO_PATH.match(word):
                problems.append(self.check_path(word))
            elif not word.startswith("-") and re.match(r"^[+~]*[\w./@-]+=", word):
                problems.append(self.check_assignment(word))
        if len(words) == 1:
            word = words[0].rstrip(".,;:")
            group = word.lstrip("+~").split(".")[0]
            if re.match(r"^(?:clusterable|hydra_plugins)\.[\w.]+$", word) and not FILE_SUFFIX.search(word):
                problems.append(check_module_name(word))
            elif DOTTED_KEY.match(word) and group in self.groups() and not FILE_SUFFIX.search(word):
                problems.append(self.check_key(word, named=True))
            elif re.match(r"^[a-z]+/[\w{},]+$", word) and (CONF / "experiment" / word.split("/")[0]).is_dir():
                problems += [
                    f"no experiment `{n}` ({CONF_PATH}experiment/{n}.yaml)"
                    for n in _braces(word)
                    if n not in self.options("experiment")
                ]
        return [p for p in problems if p]

    def check_command(self, text: str) -> list[str]:
        """A ``python train.py ...`` composes; make_tables' table, bench's case and make's target exist. An installed
        command (``clusterable-train ...``) is checked as the script it is, and pyproject.toml must declare it."""
        words = shlex.split(text)
        if self.pwd is not None:  # the page's commands run in the user's folder it writes
            words = [w.replace("$PWD", str(self.pwd)) for w in words]
        if words[0] in INSTALLED:
            if words[0] not in declared_commands():
                return [f"pyproject.toml's [project.scripts] declares no `{words[0]}`"]
            words = ["python", INSTALLED[words[0]], *words[1:]]
        if words[0] == "make":
            targets = set(re.findall(r"^([\w-]+):", (ROOT / "Makefile").read_text(), flags=re.MULTILINE))
            return [f"no Makefile target `{t}`" for t in words[1:] if "=" not in t and t not in targets]
        script, args = words[1], words[2:]
        if script.startswith("-"):
            return []  # python -m ..., python -c ...
        own = self.pwd is not None and (self.pwd / script).is_file()  # a script of the user's folder
        problems = [] if own else [self.check_path(script)]
        if script == "train.py":
            problems.append(self.compose_command(args))
        elif script == "scripts/make_tables.py":
            if "--runs" not in args:  # --runs NAME tabulates any runs: no paper's table to look up
                problems += [check_table(a) for a in args if not a.startswith("-") and "/" in a and "<" not in a]
        elif script == "scripts/bench.py" and "--only" in args[:-1]:
            case = args[args.index("--only") + 1]
            if not (ROOT / "scripts" / "benchmarks" / f"{case}.py").is_file():
                problems.append(f"no benchmark case `{case}` (scripts/benchmarks/{case}.py)")
        return [p for p in problems if p]

    def compose_command(self, args: list[str]) -> str | None:
        """Compose a ``train.py`` command line in-process: a single run as it is; a sweep (``-m``) as its first and
        last cell, expanded from the experiment's ``hydra.sweeper`` and the command line as the sweeper does."""
        from hydra_plugins.clusterable_sweeper.cell_sweeper import checked_grids, expand

        takes_value = {
            "--cfg",
            "-c",
            "--package",
            "-p",
            "--config-name",
            "-cn",
            "--config-path",
            "-cp",
            "--info",
        }
        overrides, skip = [], False
        for arg in _config_dirs(args, self.pwd or ROOT):
            if skip or arg.startswith("-"):
                skip = arg in takes_value and not skip
                continue
            overrides.append(arg)
        if any("<" in o for o in overrides):
            return None  # a placeholder (`experiment=csrl/<figure>`): its parts are checked as words
        command = f"`python train.py {' '.join(args)}`"
        parser = OverridesParser.create()
        try:
            parsed = parser.parse_overrides(overrides)
        except Exception as e:
            return f"{command}: {str(e).splitlines()[0]}"
        if not any(a in ("-m", "--multirun") for a in args):
            cfg = self.compose(*overrides)
            return f"{command} does not compose: {cfg}" if isinstance(cfg, str) else None
        hydra_keys = [o.input_line for o in parsed if re.split(r"[./]", o.key_or_group)[0] == "hydra"]
        task = [o for o in parsed if o.input_line not in hydra_keys]
        master = self.compose(*hydra_keys, *(o.input_line for o in task if not o.is_sweep_override()))
        if isinstance(master, str):
            return f"{command} does not compose: {master}"
        sweeper = master.hydra.sweeper
        params = parser.parse_overrides([f"{k}={v}" for k, v in (sweeper.get("params") or {}).items()])
        grids = OmegaConf.to_container(sweeper.grids) if sweeper.get("grids") is not None else None
        try:
            cells = expand(params, checked_grids(grids), task, parser)
        except Exception as e:
            return f"{command}: the sweep does not expand: {str(e).splitlines()[0]}"
        for cell in dict.fromkeys([tuple(cells[0]), tuple(cells[-1])]):
            cfg = self.compose(*hydra_keys, *cell)
            if isinstance(cfg, str):
                return f"{command}: cell {','.join(cell)} does not compose: {cfg}"
        return None

    def problems(self, mention: Mention) -> list[str]:
        if mention.kind == "link":
            target = mention.text
            if re.match(r"^[a-z]+:", target):
                return []  # http(s), mailto
            if target.startswith("#"):
                return [] if target[1:] in anchors(self.page) else [f"no heading {target} on this page"]
            problem = self.check_path(target, self.page.parent)
            return [problem] if problem else []
        if mention.kind == "command":
            return self.check_command(mention.text)
        if mention.kind.startswith("option:"):
            group = mention.kind.partition(":")[2]
            if group not in self.groups():
                return [f"no config group `{group}` ({CONF_PATH}{group}/)"]
            if DOTTED_KEY.match(mention.text) or "=" in mention.text:
                return self.check_span(mention.text)
            missing = [n for n in _values(mention.text) if n not in self.options(group)]
            return [f"`{n}` is not an option of `{group}` (no {CONF_PATH}{group}/{n}.yaml)" for n in missing]
        return self.check_span(mention.text)


@functools.cache
def anchors(path: Path) -> frozenset[str]:
    """GitHub's heading anchors of a markdown page (lower case, punctuation dropped, spaces to hyphens)."""
    prose, _ = _fences(path.read_text())
    seen: dict[str, int] = {}
    out = set()
    for heading in re.findall(r"^#{1,6}\s+(.*?)\s*#*\s*$", prose, flags=re.MULTILINE):
        slug = re.sub(r"[^\w\- ]", "", heading.replace("`", "").lower()).replace(" ", "-")
        n = seen.get(slug, 0)
        out.add(slug if n == 0 else f"{slug}-{n}")
        seen[slug] = n + 1
    return frozenset(out)


def check_module_name(token: str) -> str | None:
    """``clusterable.a.b.Name`` (or ``hydra_plugins...``): the longest importable module, then attributes."""
    parts = token.rstrip(".,;:()").split(".")
    for i in range(len(parts), 0, -1):
        module = ".".join(parts[:i])
        try:
            if importlib.util.find_spec(module) is None:
                continue
            obj = importlib.import_module(module)
        except ModuleNotFoundError as e:
            if e.name and (module + ".").startswith(e.name + "."):
                continue  # not a module (`clusterable.config.build`): its parent may be
            return f"`{token}`: importing {module} fails: ModuleNotFoundError: {e}"
        except Exception as e:
            return f"`{token}`: importing {module} fails: {type(e).__name__}: {str(e).splitlines()[0]}"
        for attr in parts[i:]:
            if not hasattr(obj, attr):
                return f"`{token}`: {'.'.join(parts[:i])} has no {attr!r}"
            obj = getattr(obj, attr)
        return None
    return f"`{token}` does not import"


@functools.cache
def declared_commands() -> set[str]:
    """The commands pyproject.toml's ``[project.scripts]`` declares."""
    text = (ROOT / "pyproject.toml").read_text()
    section = re.search(r"^\[project\.scripts\]\n(.*?)(?=^\[|\Z)", text, flags=re.MULTILINE | re.DOTALL)
    return set(re.findall(r"^([\w-]+)\s*=", section.group(1), flags=re.MULTILINE)) if section else set()


def check_table(name: str) -> str | None:
    """``make_tables.py <paper>/<name>``: the paper's tables module lists it in ``SOURCES``, as the script reads."""
    paper, _, table = name.partition("/")
    if importlib.util.find_spec(f"clusterable.tables.{paper}") is None:
        return f"make_tables.py: no paper {paper!r} (clusterable.tables.{paper})"
    module = importlib.import_module(f"clusterable.tables.{paper}")
    return None if table in module.SOURCES else f"make_tables.py knows no table `{name}`"


def layout_problems(path: Path, text: str | None = None) -> list[str]:
    """The tree in the code block under a ``## Layout`` heading of page ``path`` (``text``: its text, else read):
    each line ``<indent><name>[/]  <what>``, two spaces of indent a level, names a file or folder that exists
    there, from the repository root."""
    text = path.read_text() if text is None else text
    heading = re.search(r"^## Layout\s*$", text, flags=re.MULTILINE)
    if heading is None:
        return []
    _, blocks = _fences(text)
    block = next((b for b in blocks if b.line > text.count("\n", 0, heading.start()) + 1), None)
    if block is None:
        return [f"{path.relative_to(ROOT)}: no tree in a code block under ## Layout"]
    problems, parents = [], []
    for number, line in enumerate(block.lines, start=block.line):
        if not line.strip() or re.match(r"^\s{8,}", line):
            continue  # a blank line, or a description wrapped onto the next line
        depth = (len(line) - len(line.lstrip())) // 2
        name = line.split()[0]
        parents = parents[:depth]
        where = ROOT.joinpath(*parents, re.sub(r"<[^>]*>", "*", name))  # `<group>/`: any folder
        if not (glob.glob(str(where)) if "*" in str(where) else where.exists()):
            problems.append(
                f"{path.relative_to(ROOT)}:{number}: the layout draws `{'/'.join([*parents, name])}`, "
                "which does not exist"
            )
        if name.endswith("/"):
            parents.append(name.rstrip("/"))
    return problems


# ------------------------------------------------------------------------------------------------------ the tests


@pytest.fixture(scope="module")
def hydra_conf():
    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        yield
    composed.cache_clear()


@pytest.mark.catalogue
@pytest.mark.parametrize("page", DOCS, ids=[p.relative_to(ROOT).as_posix() for p in DOCS])
def test_page_names_what_exists(hydra_conf, tmp_path, page: Path):
    checker = Checker(page, page_files(page), tmp_path, outside_files(page))
    problems = []
    for mention in mentions(page):
        found = checker.problems(mention)
        name = page.relative_to(ROOT)
        if mention.kind == "span" and mention.text in SHOWN_FAILING:
            if not found:
                problems.append(
                    f"{name}:{mention.line}: `{mention.text}` is shown failing, but it is accepted "
                    "now: rewrite that example"
                )
            continue
        problems += [f"{name}:{mention.line}: {p}" for p in found]
    problems += layout_problems(page)
    assert not problems, "the docs name what does not exist:\n" + "\n".join(dict.fromkeys(problems))


def test_shown_failing_examples_are_on_a_page():
    spans = {m.text for page in DOCS for m in mentions(page) if m.kind == "span"}
    stale = sorted(SHOWN_FAILING - spans)
    assert not stale, f"SHOWN_FAILING lists examples no page shows any more: {stale}"


# The checker itself: each check refuses what is missing and accepts what exists.


def test_checks_refuse_what_does_not_exist(hydra_conf, tmp_path):
    checker = Checker(ROOT / "README.md")
    assert checker.check_assignment("dataset=digits") is None
    assert "no src/clusterable/conf/dataset/nope.yaml" in checker.check_assignment("dataset=digits,nope")
    assert checker.check_assignment("experiment=corel/{table1,table2}") is None
    assert "conf/experiment/corel/table9.yaml" in checker.check_assignment("experiment=corel/{table1,table9}")
    assert checker.check_assignment("loss.lam=0.5") is None
    assert checker.check_assignment("evaluator.retrieval.ks=[1,10]") is None
    assert "not a key" in checker.check_assignment("loss.lamda=0.5")
    assert checker.check_assignment("+loss.lam=0.5") is None
    assert "nor a parameter" in checker.check_assignment("+loss.lamda=0.5")
    assert "holds keys" in checker.check_assignment("dataset.sampler=class_balanced")
    assert checker.check_assignment("dataset.sampler.kind=class_balanced") is None
    assert checker.check_key("checkpoint.monitor") is None
    assert "not a key" in checker.check_key("checkpoint.monitr")
    assert checker.check_key("trainer.limit_train_batches", named=True) is None  # a Trainer argument
    assert checker.check_assignment("hydra/launcher=joblib") is None
    assert checker.check_assignment("hydra/launcher=nope") is not None
    assert checker.check_path("src/clusterable/conf/model/text_*.yaml") is None
    # The configs' folder before they moved into the package.
    assert "no such file" in checker.check_path("conf/model/ffnn.yaml")
    assert "no such file" in checker.check_path("src/clusterable/nope.py")
    assert "no heading" in checker.check_path("README.md#nope")
    assert check_module_name("clusterable.config.build") is None
    assert check_module_name("clusterable.config.nope") is not None
    assert checker.check_span("csrl/fig2") == [] and checker.check_span("csrl/fig99") != []
    assert checker.compose_command(["loss=cce", "model=cnn"]) is None
    assert "does not compose" in checker.compose_command(["trainer.precison=16"])
    assert checker.compose_command(["-m", "experiment=corel/table2", "dataset=agnews8", "debug=smoke"]) is None
    assert "does not compose" in checker.compose_command(["-m", "experiment=dscl/digits", "loss.nope=1,2"])
    assert check_table("corel/table2") is None and check_table("corel/table9") is not None
    # The installed commands are checked as the checkout's scripts they are.
    assert checker.check_command("clusterable-train loss=cce") == [] and declared_commands() >= set(INSTALLED)
    assert "does not compose" in checker.check_command("clusterable-train trainer.precison=16")[0]
    assert "knows no table" in checker.check_command("clusterable-tables corel/table9")[0]
    # A page's own config files compose beside the package's and its paths count as existing on that page.
    mine = "src/clusterable/conf/loss/mine.yaml"
    own = Checker(ROOT / "README.md", {mine: "_target_: torch.nn.Identity\n"}, tmp_path)
    assert own.check_assignment("loss=mine") is None and checker.check_assignment("loss=mine") is not None
    assert own.compose_command(["loss=mine"]) is None and own.check_path(mine) is None
    # So do the files it writes in a user's folder outside the repository, $PWD in its commands that folder.
    theirs = {"myfolder/conf/loss/theirs.yaml": "_target_: torch.nn.Identity\n", "myfolder/run.py": "\n"}
    outside = Checker(ROOT / "README.md", {}, tmp_path / "outside", theirs)
    assert outside.check_assignment("loss=theirs") is None and checker.check_assignment("loss=theirs")
    searchpath = '"hydra.searchpath=[file://$PWD/conf]"'
    assert outside.check_command(f"clusterable-train {searchpath} loss=theirs") == []
    assert outside.check_command(f"clusterable-train -m {searchpath} loss=theirs,cce") == []
    assert outside.check_command("python run.py") == [] and checker.check_command("python run.py") != []


def test_mentions_are_found_with_their_lines(tmp_path):
    page = tmp_path / "page.md"
    page.write_text(
        "Run `python train.py\nloss=cce` or [the design](docs/design.md).\n\n"
        "```bash\npython train.py -m experiment=corel/table2 \\\n    debug=smoke && python scripts/make_tables.py "
        "corel/table2   # a comment\n```\n\n| group | options |\n|---|---|\n| `model` | `ffnn` (default), `cnn` |\n\n"
        "```yaml\n# src/clusterable/conf/loss/mine.yaml\n_target_: torch.nn.Identity\n```\n"
    )
    found = mentions(page)
    assert Mention(1, "python train.py loss=cce", "span") in found
    assert Mention(1, "python train.py loss=cce", "command") in found
    assert Mention(2, "docs/design.md", "link") in found
    assert Mention(5, "python train.py -m experiment=corel/table2 debug=smoke", "command") in found
    assert Mention(5, "python scripts/make_tables.py corel/table2", "command") in found
    assert Mention(11, "ffnn", "option:model") in found and Mention(11, "cnn", "option:model") in found
    assert page_files(page) == {
        "src/clusterable/conf/loss/mine.yaml": "# src/clusterable/conf/loss/mine.yaml\n_target_: torch.nn.Identity\n"
    }
    page.write_text(page.read_text() + "\n```python\n# myfolder/mine.py\nx = 1\n```\n")
    assert outside_files(page) == {"myfolder/mine.py": "# myfolder/mine.py\nx = 1\n"} and len(page_files(page)) == 1
    # a package header first (Hydra reads none below another line), the file's name after it
    page.write_text("```yaml\n# @package evaluator.mine\n# src/clusterable/conf/evaluator/mine.yaml\np: 1\n```\n")
    assert page_files(page) == {
        "src/clusterable/conf/evaluator/mine.yaml": (
            "# @package evaluator.mine\n# src/clusterable/conf/evaluator/mine.yaml\np: 1\n"
        )
    }


def test_layout_tree_is_checked():
    text = (
        "## Layout\n\n```\nsrc/\n  clusterable/\n    config.py   what\n            wrapped\n    nope.py\n"
        "    conf/\n      <group>/<option>.yaml\n      <group>/<nope>.json\n```\n"
    )
    problems = layout_problems(ROOT / "README.md", text)
    assert len(problems) == 2 and "`src/clusterable/nope.py`" in problems[0], problems
    assert "`src/clusterable/conf/<group>/<nope>.json`" in problems[1], problems


# ------------------------------------------------------------------------------ the cheap commands, run as written

# A single run the docs show that trains in seconds on the CPU: a debug group that cuts it short, or a fake
# stand-in for a dataset with an encoder small enough (an ImageNet backbone on fake 224-pixel images is not).
CHEAP = re.compile(r"debug=(fast|smoke)|dataset\.source=fake")
COSTLY = re.compile(r"model=(resnet50|googlenet|bninception|inception)\b|\s-m\b|--cfg|--help")


def cheap_commands() -> list[tuple[str, int, str]]:
    """(page, line, command) of every ``python train.py ...`` single run on a page that CHEAP and not COSTLY name,
    once each, outside the pages' own files (the extension guide runs those in its own test)."""
    seen: dict[str, tuple[str, int, str]] = {}
    for path in DOCS:
        if page_files(path):
            continue
        for m in mentions(path):
            words = m.text.split()
            if m.kind != "command" or words[:2] != ["python", "train.py"] or not CHEAP.search(m.text):
                continue
            if not COSTLY.search(m.text):
                seen.setdefault(m.text, (path.name, m.line, m.text))
    return sorted(seen.values())


def test_there_are_cheap_commands_to_run():
    assert any("debug=fast" in c for _, _, c in cheap_commands()) and len(cheap_commands()) >= 2


@pytest.mark.parametrize(("page", "line", "command"), cheap_commands(), ids=lambda v: str(v)[:60])
def test_a_cheap_command_runs_as_written(train, page: str, line: int, command: str):
    GlobalHydra.instance().clear()  # the module's compose checks leave Hydra initialised; a run initialises its own
    result = train(*shlex.split(command)[2:])
    assert result.code == 0, f"{page}:{line}: `{command}` ended {result.code}: {result.err[-500:]}"
    assert "run: ok" in result.out, f"{page}:{line}: `{command}`: {result.out[-500:]}"
