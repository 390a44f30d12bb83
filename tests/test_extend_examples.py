"""The extension guide (docs/extend.md) runs as written: its code is the code tested here, so it cannot rot.

Each code block of the guide whose first line names a file (``# src/clusterable/heads/prototypes.py``,
``# src/clusterable/conf/loss/prototypes.yaml``, ``# tests/heads/test_prototypes.py``) is installed for the test
only: the YAML files in a folder added with ``hydra.searchpath`` (as a user outside the repository would), the
modules under their dotted names in this process, and the test files' functions run. Then every part is built through
``clusterable.config.build`` from a composed config and checked against its contract as a run does, every
``python train.py ...`` of the guide runs in-process (the ``train`` fixture), the errors the guide shows are the
ones printed, and each "were `<member>` missing" refusal is the one a part without that member gets.
"""

from __future__ import annotations

import functools
import importlib
import re
import shlex
import subprocess
import sys
import types
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from hydra.core.global_hydra import GlobalHydra
from test_docs import CONF, CONF_PATH, ROOT, _fences, page_files

from clusterable.config import build
from clusterable.contracts import (
    EVALUATOR_ARGS,
    DataModule,
    Encoder,
    Evaluator,
    Head,
    require,
    require_evaluator,
)

GUIDE = ROOT / "docs" / "extend.md"
FILES = page_files(GUIDE)
# What each group's part is checked against, and the framework's arguments to its constructor or call.
CONTRACTS = {"loss": Head, "model": Encoder, "dataset": DataModule, "evaluator": Evaluator}
# The guide's last section runs a head and a dataset from a folder outside the repository: tests/test_extend_outside.py
# runs it; the helpers here read the guide above it.
OUTSIDE = "## From your own repository"


def _in_repository() -> str:
    """The guide's text above its section on a repository of one's own."""
    text = GUIDE.read_text()
    return text[: text.index(f"\n{OUTSIDE}\n")] if f"\n{OUTSIDE}\n" in text else text


def _guide_options() -> dict[str, str]:
    """{group: option} of the YAML files the guide writes."""
    return {Path(f).parent.name: Path(f).stem for f in FILES if f.startswith(CONF_PATH)}


def _commands() -> list[tuple[list[str], list[str]]]:
    """Every ``python train.py ...`` of the guide's code blocks, with the lines its ``text`` blocks show it prints."""
    _, blocks = _fences(_in_repository())
    found: list[tuple[list[str], list[str]]] = []
    for block in blocks:
        for line in block.lines:
            command = re.match(r"^\$?\s*python train\.py(.*)$", line.split(" #")[0].strip())
            if command:
                found.append((shlex.split(command.group(1)), []))
            elif block.info == "text" and found and line.strip():
                found[-1][1].append(line.strip())
    return found


def _refusals() -> list[tuple[str, str]]:
    """("member", "error: ...") of each "were `member` missing, `error: ...`" sentence of the guide."""
    text = " ".join(_in_repository().split())
    return re.findall(r"were `(\w+)` missing, `(error: [^`]+)`", text)


@pytest.fixture
def guide(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """Install the guide's files for this test: the YAML below ``tmp_path / CONF_PATH``, the modules in this process
    under their dotted names (``clusterable.heads.prototypes``), which are removed again afterwards. Returns the
    ``hydra.searchpath=...`` override that adds the YAML files."""
    for name, text in FILES.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        if name.startswith("src/") and name.endswith(".py"):
            dotted = name.removeprefix("src/").removesuffix(".py").replace("/", ".")
            module = types.ModuleType(dotted)
            module.__file__ = str(path)
            monkeypatch.setitem(sys.modules, dotted, module)  # before its code runs, as an import does
            exec(compile(text, str(path), "exec"), module.__dict__)
            parent, _, leaf = dotted.rpartition(".")
            monkeypatch.setattr(importlib.import_module(parent), leaf, module, raising=False)
    return f"hydra.searchpath=[file://{tmp_path / CONF_PATH}]"


def test_the_guide_writes_a_part_of_each_group_with_its_code_and_test():
    assert set(_guide_options()) == set(CONTRACTS), _guide_options()
    for group, option in _guide_options().items():
        assert not (CONF / group / f"{option}.yaml").exists(), f"the guide's {group}={option} shadows a real one"
    assert sum(f.startswith("src/") for f in FILES) >= len(CONTRACTS)
    assert sum(f.startswith("tests/") for f in FILES) >= len(CONTRACTS)


def test_the_guide_parts_build_through_the_config_path(guide):
    """The path a run takes (``clusterable.run.parts``): ``build`` with the framework's arguments, ``require``."""
    options = _guide_options()
    overrides = [guide, *(f"{g}={o}" for g, o in options.items() if g != "evaluator")]
    overrides.append(f"evaluator=[{options['evaluator']}]")
    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        cfg = compose("train", overrides=overrides)
    datamodule = build(cfg.dataset, "dataset", seed=0)
    require(datamodule, DataModule, "dataset")
    datamodule.load()
    encoder = build(cfg.model, "model", input_shape=datamodule.input_shape)
    require(encoder, Encoder, "model")
    head = build(
        cfg.loss,
        "loss",
        num_classes=datamodule.num_classes,
        embedding_dim=encoder.embedding_dim,
        input_shape=datamodule.input_shape,
    )
    require(head, Head, "loss")
    evaluator = build(cfg.evaluator[options["evaluator"]], "evaluator", call_args=EVALUATOR_ARGS)
    require_evaluator(evaluator, "evaluator")
    batch = next(iter(datamodule.train_dataloader()))
    out = head(encoder(batch["inputs"]), batch["labels"], epoch=0, encoder=encoder)
    assert set(out) == set(head.loss_parts) and out["loss"].requires_grad


def test_the_guide_tests_pass(guide):
    tests = {name: text for name, text in FILES.items() if name.startswith("tests/")}
    ran = 0
    for name, text in tests.items():
        namespace: dict = {"__name__": Path(name).stem}
        exec(compile(text, name, "exec"), namespace)
        for function in [v for k, v in namespace.items() if k.startswith("test_") and callable(v)]:
            function()
            ran += 1
    assert ran >= len(tests)


@pytest.mark.parametrize("args, printed", _commands(), ids=[" ".join(a) for a, _ in _commands()])
def test_the_guide_commands_run_as_shown(guide, train, args, printed):
    result = train(*args, guide)
    if printed:  # the guide shows it failing: one error line, exit status 1, before training
        assert result.code == 1, (result.out, result.err)
        assert result.error_lines() == printed, result.err
    else:
        assert result.code == 0, (result.out, result.err)


@pytest.mark.parametrize("member, error", _refusals())
def test_a_part_without_a_contract_member_is_refused_as_shown(guide, train, monkeypatch, member, error):
    """``error: loss=prototypes: PrototypeHead is not a Head (missing: loss_parts)``: the part built without
    ``member`` (a class attribute removed, or an instance attribute deleted after ``__init__``)."""
    choice = re.match(r"error: (\S+)=", error).group(1)
    option = _guide_options()[choice]
    target = re.search(r"^_target_: (\S+)", FILES[f"{CONF_PATH}{choice}/{option}.yaml"], flags=re.MULTILINE).group(1)
    module, _, name = target.rpartition(".")
    cls = getattr(importlib.import_module(module), name)
    if member in vars(cls):
        monkeypatch.delattr(cls, member)
    else:
        init = cls.__init__

        @functools.wraps(init)  # the same signature, which `build` reads for the framework's arguments
        def without(self, *args, **kwargs):
            init(self, *args, **kwargs)
            delattr(self, member)

        monkeypatch.setattr(cls, "__init__", without)
    result = train(f"{choice}={option}", "trainer.max_epochs=1", guide)
    assert result.code == 1 and result.error_lines() == [error], result.err


def test_an_evaluator_that_takes_no_context_is_refused_as_shown(guide, train, monkeypatch):
    option = _guide_options()["evaluator"]
    error = re.search(r"`(error: evaluator\.\w+: an evaluator takes [^`]+)`", " ".join(_in_repository().split()))
    assert error, "the guide shows the refusal of an evaluator that takes no context"
    target = re.search(r"^_target_: (\S+)", FILES[f"{CONF_PATH}evaluator/{option}.yaml"], flags=re.MULTILINE).group(1)
    module, _, name = target.rpartition(".")
    cls = getattr(importlib.import_module(module), name)
    call = cls.__call__
    monkeypatch.setattr(cls, "__call__", lambda self, embeddings, labels: call(self, embeddings, labels, None))
    result = train(f"evaluator=[{option}]", "trainer.max_epochs=1", guide)
    assert result.code == 1 and result.error_lines() == [error.group(1)], result.err


def test_the_guide_code_is_lint_clean(tmp_path):
    """The project's ruff rules and format, on the guide's Python as the test writes it."""
    written = []
    for name, text in FILES.items():
        if name.endswith(".py"):
            (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
            (tmp_path / name).write_text(text)
            written.append(str(tmp_path / name))
    # The guide's modules are not in src/: say what ruff would see there, that clusterable is first-party.
    settings = [
        "--config",
        str(ROOT / "pyproject.toml"),
        "--config",
        "lint.isort.known-first-party = ['clusterable']",
    ]
    settings.append("--no-cache")
    for command in (["check"], ["format", "--check"]):
        proc = subprocess.run(
            [sys.executable, "-m", "ruff", *command, *settings, *written], capture_output=True, text=True
        )
        assert proc.returncode == 0, f"ruff {' '.join(command)}:\n{proc.stdout}{proc.stderr}"
