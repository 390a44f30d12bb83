"""Tables in the docs that the table command writes, so that a page's numbers cannot drift from the run records.

A page marks each generated table with the command's arguments, and the block between the markers is exactly what
``clusterable-tables`` prints for them (its figures aside)::

    <!-- table: corel/fashion150_table1 --outputs results --pool-code-versions -->
    ### COREL Table 1 ...
    ...
    <!-- /table -->

``python scripts/docs_tables.py`` rewrites every block of the pages from the records (``--outputs`` is relative to
the repository root: ``results`` holds the kept records), and copies each table's figures into ``docs/img/``;
``--check`` only compares and names the blocks that differ (``tests/test_docs_tables.py`` runs it on every page).
"""

from __future__ import annotations

import argparse
import re
import shlex
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from clusterable.tables import cli

BLOCK = re.compile(r"<!-- table: (?P<args>[^>]*?) -->\n(?P<body>.*?)<!-- /table -->", re.S)


@dataclass
class Block:
    """One marked table of a page: the command's arguments, the text between the markers and where it is."""

    args: str
    body: str
    start: int
    end: int


def blocks(text: str) -> list[Block]:
    """The marked tables of a page's text, in order."""
    return [Block(m["args"], m["body"], m.start("body"), m.end("body")) for m in BLOCK.finditer(text)]


def _options(args: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="<!-- table: ... -->", add_help=False, exit_on_error=False)
    parser.add_argument("table")
    parser.add_argument("--outputs", default="results")
    parser.add_argument("--mode", choices=("auto", "full", "smoke"), default="full")
    parser.add_argument("--pool-code-versions", action="store_true")
    return parser.parse_args(shlex.split(args))


def render(args: str, root: Path, figures_to: Path | None = None) -> str:
    """The markdown the table command prints for ``args`` (a block's marker), its runs read below ``root``; its
    figures copied into ``figures_to`` (none copied when None)."""
    opts = _options(args)
    with tempfile.TemporaryDirectory() as tmp:  # the figures are drawn here; only their copies are kept
        table, *_ = cli.build(opts.table, root / opts.outputs, opts.mode, opts.pool_code_versions, Path(tmp))
        if figures_to is not None:
            figures_to.mkdir(parents=True, exist_ok=True)
            for figure in table.figures:
                shutil.copyfile(figure, figures_to / figure.name)
    table.figures = []  # a page shows its figures where it says why; their files' paths are no content
    # Files the table writes beside itself (Table 1's winners) are named as the command names them.
    text = table.markdown().replace(tmp, str(Path(opts.outputs) / "tables"))
    return text + "\n"


def sync(page: Path, root: Path, check: bool) -> list[str]:
    """Rewrite (``check``: only compare) the marked tables of ``page`` from the records below ``root``. Returns
    the arguments of the blocks that differed."""
    text = page.read_text()
    out, last, stale = [], 0, []
    for block in blocks(text):
        fresh = render(block.args, root, None if check else page.parent / "img")
        if fresh != block.body:
            stale.append(block.args)
        out += [text[last : block.start], fresh]
        last = block.end
    out.append(text[last:])
    if stale and not check:
        page.write_text("".join(out))
    return stale
