"""A table's .tex compiles: every header and cell escaped (LaTeX's specials, Greek letters, the other signs, markdown's
bold), each character the tables' code writes has its LaTeX form, and Table.write is the one writer of .tex files.
With pdflatex installed, a table of every such character is compiled."""

from __future__ import annotations

import ast
import shutil
import subprocess
from pathlib import Path

import pytest

from clusterable.tables.latex import GREEK, LATEX, escape
from clusterable.tables.report import Table

TABLES = Path(__file__).resolve().parents[2] / "src" / "clusterable" / "tables"
LOWER = "αβγδεζηθικλμνξοπρστυφχψως"
UPPER = "ΑΒΓΔΕΖΗΘΙΚΛΜΝΞΟΠΡΣΤΥΦΧΨΩ"


def test_headers_and_cells_are_escaped() -> None:
    table = Table(
        "t",
        ["loss", "λ", "γ_1 (%)", "α & β", "# runs"],
        [["**Cosine-COREL**", "0.5", "**71.2 ± 0.3** †", "{a} $5 ~x^2", "3 — 4 ≤ 5 → 6…"]],
    )
    assert table.latex().splitlines() == [
        r"\begin{tabular}{lllll}",
        r"\toprule",
        r"loss & $\lambda$ & $\gamma$\_1 (\%) & $\alpha$ \& $\beta$ & \# runs \\ \midrule",
        r"\textbf{Cosine-COREL} & 0.5 & \textbf{71.2 $\pm$ 0.3} $^\dagger$ & "
        r"\{a\} \$5 \textasciitilde{}x\textasciicircum{}2 & 3 --- 4 $\leq$ 5 $\rightarrow$ 6\ldots{} \\",
        r"\bottomrule",
        r"\end{tabular}",
    ]


def test_every_greek_letter_is_math_or_its_latin_twin() -> None:
    assert set(LOWER) | set(UPPER) <= set(GREEK)
    assert escape("α") == r"$\alpha$" and escape("Ω") == r"$\Omega$" and escape("Α") == "A"
    assert escape("ε ϵ φ ϕ ς") == r"$\varepsilon$ $\epsilon$ $\varphi$ $\phi$ $\varsigma$"
    for char in LOWER + UPPER:
        assert escape(char).isascii(), char


def test_a_backslash_and_a_bold_marker_are_text() -> None:
    assert escape(r"a\b") == r"a\textbackslash{}b"
    assert escape("**a_b** and **c**") == r"\textbf{a\_b} and \textbf{c}"
    assert escape("5 * 3") == "5 * 3"


def test_every_non_ascii_character_of_the_tables_code_has_its_latex_form() -> None:
    """What the tables write comes from their code and the published numbers: each non-ASCII character there is
    mapped, so no table writes one pdflatex cannot read."""
    found = {
        char: str(path.relative_to(TABLES))
        for path in sorted([*TABLES.rglob("*.py"), *TABLES.rglob("*.yaml")])
        if path.name != "latex.py"
        for char in path.read_text()
        if not char.isascii()
    }
    assert not {c: where for c, where in found.items() if c not in LATEX}, found


def test_table_write_is_the_one_writer_of_tex_files() -> None:
    """Every .tex goes through ``Table.latex``: no other code of the tables names the extension."""
    writers = []
    for path in sorted(TABLES.rglob("*.py")):
        source = path.read_text()
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and "tex" in node.value.split("."):
                line = source.splitlines()[node.lineno - 1]
                writers.append((str(path.relative_to(TABLES)), "self.latex()" in line))
    assert writers == [("report.py", True)], writers


@pytest.mark.skipif(shutil.which("pdflatex") is None, reason="pdflatex is not installed")
def test_the_tex_compiles(tmp_path: Path) -> None:
    symbols = "".join(sorted(LATEX))
    table = Table("t", ["λ", "γ", "α_β"], [["**1 ± 2** †", symbols[:40], symbols[40:]]])
    table.write(tmp_path, "table")
    (tmp_path / "doc.tex").write_text(
        "\\documentclass{article}\n\\usepackage[T1]{fontenc}\n\\usepackage{amssymb,booktabs}\n"
        "\\begin{document}\n\\input{table.tex}\n\\end{document}\n"
    )
    proc = subprocess.run(
        ["pdflatex", "-interaction=nonstopmode", "-halt-on-error", "doc.tex"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stdout[-3000:]
