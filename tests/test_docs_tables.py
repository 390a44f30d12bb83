"""The tables the docs pages mark are the table command's output on the kept records (``results/``): every block
of every page is rebuilt and compared (``clusterable.tables.docs_blocks``), so a page cannot print a number that
its records do not give."""

import re
from pathlib import Path

import pytest

from clusterable.tables.docs_blocks import blocks, sync

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
MARKED = [page for page in PAGES if blocks(page.read_text())]


def test_some_page_marks_its_tables():
    assert MARKED, "no docs page marks a generated table"


@pytest.mark.catalogue
@pytest.mark.parametrize("page", MARKED, ids=lambda p: p.name)
def test_every_marked_table_equals_what_its_records_give(page):
    assert sync(page, ROOT, check=True) == [], f"{page.name}: run python scripts/docs_tables.py {page}"


def test_a_changed_number_is_found(tmp_path):
    """A block whose text differs from its records by one digit is named (and rewritten without --check)."""
    page = MARKED[0]
    first = blocks(page.read_text())[0]
    digit = next(i for i, ch in enumerate(first.body) if ch.isdigit())
    changed = first.body[:digit] + str((int(first.body[digit]) + 1) % 10) + first.body[digit + 1 :]
    copy = tmp_path / "page.md"
    copy.write_text(f"<!-- table: {first.args} -->\n{changed}<!-- /table -->\n")
    assert sync(copy, ROOT, check=True) == [first.args]
    assert sync(copy, ROOT, check=False) == [first.args]
    assert sync(copy, ROOT, check=True) == []
    assert blocks(copy.read_text())[0].body == first.body


@pytest.mark.parametrize("args", ["corel/fashion150_tabel1", "nopaper/table1"])
def test_a_mistyped_marker_is_refused_in_one_line(tmp_path, args):
    page = tmp_path / "page.md"
    page.write_text(f"<!-- table: {args} -->\n<!-- /table -->\n")
    with pytest.raises(ValueError, match="unknown (table|paper)"):
        sync(page, ROOT, check=True)


# A table command the docs print on the kept records (``make_tables.py <table> --outputs results [options]``),
# in prose or a code block: as written, it must build its table.
RESULTS_COMMAND = re.compile(r"make_tables\.py (\S+)((?: --?[a-z-]+(?: (?!-)[^\s`|)]+)?)*)")


def results_commands() -> list[tuple[str, list[str]]]:
    found = set()
    for page in PAGES:
        for match in RESULTS_COMMAND.finditer(page.read_text()):
            args = [match.group(1), *match.group(2).split()]
            if "--outputs" in args and args[args.index("--outputs") + 1 :][:1] == ["results"]:
                found.add((page.name, tuple(args)))
    return sorted((page, list(args)) for page, args in found)


def test_the_docs_print_commands_on_the_kept_records():
    assert len(results_commands()) >= 3


@pytest.mark.parametrize(("page", "args"), results_commands(), ids=lambda v: v if isinstance(v, str) else " ".join(v))
def test_every_table_command_on_the_kept_records_works_as_written(page, args):
    """Built as the command builds it (``cli.build``, its figures in a scratch folder): a cell refused for mixed
    code versions or configs raises its one-line error here."""
    from clusterable.tables.docs_blocks import render

    assert "| " in render(" ".join(args), ROOT), f"{page}: make_tables.py {' '.join(args)} printed no table"
