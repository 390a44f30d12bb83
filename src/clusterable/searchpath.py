"""Where config folders of your own are found: one ``hydra.searchpath=[...]`` override that every command reads.

A folder of your own with config groups (``myproject/conf/loss/mine.yaml``) reaches Hydra's search path three
ways, all ending as that one override, so that the preflight, the training command and ``clusterable-eval`` see
the same folders:

- ``hydra.searchpath=[file:///abs/conf]`` on the command line, as Hydra takes it;
- Hydra's own ``-cd DIR`` / ``--config-dir DIR`` flag;
- ``$CLUSTERABLE_SEARCHPATH``: folders separated by ``os.pathsep`` (``:``), set once in a shell or a project's
  ``.env``, so no command needs to repeat them.

The ground floor: this module imports nothing of the project.
"""

from __future__ import annotations

import os
from pathlib import Path

ENV = "CLUSTERABLE_SEARCHPATH"
KEY = "hydra.searchpath="
FLAGS = ("-cd", "--config-dir")


class SearchPathError(ValueError):
    """A config folder that does not exist, or a flag without its folder: one line."""


def _folder(path: str, said: str) -> str:
    """``path`` as the ``file://`` entry of an existing folder; ``SearchPathError`` naming ``said`` otherwise."""
    folder = Path(path).expanduser()
    if not folder.is_dir():
        raise SearchPathError(f"{said}: no folder {path!r}")
    return f"file://{folder.resolve()}"


def _entries(value: str) -> list[str]:
    """The entries of a ``hydra.searchpath`` value: ``[file://a,file://b]`` -> ["file://a", "file://b"]."""
    inner = value.strip()
    inner = inner[1:-1] if inner.startswith("[") and inner.endswith("]") else inner
    return [e.strip().strip("'\"") for e in inner.split(",") if e.strip()]


def with_searchpath(args: list[str], environ: dict[str, str] | None = None) -> list[str]:
    """``args`` with ``-cd DIR`` / ``--config-dir DIR`` / ``--config-dir=DIR`` and ``$CLUSTERABLE_SEARCHPATH``'s
    folders folded into one ``hydra.searchpath=[...]`` override (after the entries the command line gives, in
    the order given; the environment's last, and only those not given already). Raises ``SearchPathError`` for a
    folder that does not exist or a flag without its folder."""
    environ = os.environ if environ is None else environ
    out: list[str] = []
    given: list[str] = []
    added: list[str] = []
    rest = iter(args)
    for arg in rest:
        flag, eq, value = arg.partition("=")
        if flag in FLAGS:
            if not eq:
                value = next(rest, None)
                if value is None or value.startswith("-"):
                    raise SearchPathError(f"{flag} needs a folder: {flag} path/to/conf")
            added.append(_folder(value, flag))
        elif arg.startswith(KEY):
            given += _entries(arg[len(KEY) :])
        else:
            out.append(arg)
    for path in filter(None, environ.get(ENV, "").split(os.pathsep)):
        added.append(_folder(path, f"${ENV}"))
    entries = list(dict.fromkeys([*given, *added]))
    return [*out, f"{KEY}[{','.join(entries)}]"] if entries else out
