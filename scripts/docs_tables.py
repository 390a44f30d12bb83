"""Rebuild the tables the docs pages mark (``<!-- table: <paper>/<table> [--outputs results] ... -->``) from the
kept run records, so that every number they print is the table command's (``clusterable.tables.docs_blocks``).

    python scripts/docs_tables.py                 # rewrite every marked table of README.md and docs/*.md
    python scripts/docs_tables.py --check         # only compare: exit 1 naming each table that differs
    python scripts/docs_tables.py docs/corel.md   # one page

Exit status: 0 every block current (or rewritten); 1 ``--check`` found blocks that differ; 2 a block's table
cannot be built (its one line names the page, the block and why).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from clusterable.rundir import UnreadableRuns
from clusterable.tables.cli import NoRuns
from clusterable.tables.docs_blocks import sync
from clusterable.tables.report import MixedRuns

ROOT = Path(__file__).resolve().parents[1]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("pages", nargs="*", type=Path, help="pages to rebuild (default: README.md, docs/*.md)")
    parser.add_argument("--check", action="store_true", help="compare only; exit 1 if a block differs")
    args = parser.parse_args(argv)
    pages = args.pages or [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    stale_pages = 0
    for page in pages:
        try:
            stale = sync(page, ROOT, check=args.check)
        except (OSError, NoRuns, MixedRuns, UnreadableRuns, ValueError) as err:
            print(f"docs_tables: {page}: {err}", file=sys.stderr)
            return 2
        for block in stale:
            print(f"{page}: {'differs from' if args.check else 'rebuilt from'} the records: {block}")
        stale_pages += bool(stale)
    return 1 if args.check and stale_pages else 0


if __name__ == "__main__":
    sys.exit(main())
