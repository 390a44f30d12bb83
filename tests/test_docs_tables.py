"""The tables the docs pages mark are the table command's output on the kept records (``results/``): every block
of every page is rebuilt and compared (``clusterable.tables.docs_blocks``), so a page cannot print a number that
its records do not give."""

from pathlib import Path

import pytest

from clusterable.tables.docs_blocks import blocks, sync

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
MARKED = [page for page in PAGES if blocks(page.read_text())]


def test_some_page_marks_its_tables():
    assert MARKED, "no docs page marks a generated table"


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
