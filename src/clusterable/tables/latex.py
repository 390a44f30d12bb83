"""Text of a table's header or cell as LaTeX that pdflatex compiles: its special characters escaped, Greek letters
as math (``λ`` -> ``$\\lambda$``), the other non-ASCII signs the tables write (``±``, ``—``, ``†``, ...) as their
LaTeX forms, and markdown's bold (a column's best, ``**...**``) as ``\\textbf{...}``.

A document that inputs the tables needs ``booktabs`` (the rules) and ``amssymb`` (``\\checkmark``, ``\\varkappa``).
Greek letters follow their glyphs: ``ε`` (U+03B5) is ``\\varepsilon`` and ``ϵ`` (U+03F5) ``\\epsilon``, ``φ`` is
``\\varphi`` and ``ϕ`` ``\\phi``; capitals written as Latin ones (``Α``, ``Β``, ...) are those Latin letters. Other
characters pass through (accented Latin letters compile with pdflatex's default UTF-8 input).
"""

from __future__ import annotations

import re

# LaTeX's special characters in text.
SPECIALS: dict[str, str] = {
    "\\": r"\textbackslash{}",
    "&": r"\&",
    "%": r"\%",
    "$": r"\$",
    "#": r"\#",
    "_": r"\_",
    "{": r"\{",
    "}": r"\}",
    "~": r"\textasciitilde{}",
    "^": r"\textasciicircum{}",
    "<": r"\textless{}",
    ">": r"\textgreater{}",
    "|": r"\textbar{}",
}

_LOWER = (
    "α alpha, β beta, γ gamma, δ delta, ε varepsilon, ζ zeta, η eta, θ theta, ι iota, κ kappa, λ lambda, μ mu, "
    "ν nu, ξ xi, π pi, ρ rho, ς varsigma, σ sigma, τ tau, υ upsilon, φ varphi, χ chi, ψ psi, ω omega, "
    "ϵ epsilon, ϑ vartheta, ϕ phi, ϖ varpi, ϱ varrho, ϰ varkappa"
)
_UPPER = "Γ Gamma, Δ Delta, Θ Theta, Λ Lambda, Ξ Xi, Π Pi, Σ Sigma, Υ Upsilon, Φ Phi, Ψ Psi, Ω Omega"


def _math(pairs: str) -> dict[str, str]:
    """``"α alpha, β beta"`` -> ``{"α": "$\\alpha$", "β": "$\\beta$"}``."""
    return {char: f"$\\{name}$" for char, name in (pair.split() for pair in pairs.split(", "))}


# Greek letters: math commands; omicron and the capitals that look like Latin letters are those letters.
GREEK: dict[str, str] = {
    **_math(_LOWER),
    **_math(_UPPER),
    "ο": "$o$",
    **dict(zip("ΑΒΕΖΗΙΚΜΝΟΡΤΧ", "ABEZHIKMNOPTX", strict=True)),
    "µ": r"$\mu$",  # the micro sign, not the Greek letter
}

# The other non-ASCII characters a table may hold.
SYMBOLS: dict[str, str] = {
    "±": r"$\pm$",
    "×": r"$\times$",
    "÷": r"$\div$",
    "·": r"$\cdot$",
    "−": r"$-$",  # the minus sign
    "≤": r"$\leq$",
    "≥": r"$\geq$",
    "≈": r"$\approx$",
    "≠": r"$\neq$",
    "∞": r"$\infty$",
    "√": r"$\surd$",
    "∈": r"$\in$",
    "°": r"$^\circ$",
    "²": r"$^2$",
    "³": r"$^3$",
    "ᵀ": r"$^\top$",  # a transpose (PCE's reading: ZᵀZ/n)
    "₂": r"$_2$",
    "→": r"$\rightarrow$",
    "←": r"$\leftarrow$",
    "↔": r"$\leftrightarrow$",
    "⇒": r"$\Rightarrow$",
    "ℓ": r"$\ell$",
    "✓": r"$\checkmark$",
    "✗": r"$\times$",
    "†": r"$^\dagger$",  # a mark after a number (beyond the seed spread)
    "‡": r"$^\ddagger$",
    "§": r"\S{}",
    "–": "--",
    "—": "---",
    "…": r"\ldots{}",
    "‘": "`",
    "’": "'",
    "“": "``",
    "”": "''",
    "\u00a0": "~",  # a no-break space
}

LATEX: dict[str, str] = {**SPECIALS, **GREEK, **SYMBOLS}
_BOLD = re.compile(r"\*\*(.+?)\*\*")


def escape_text(text: str) -> str:
    """``text`` with every character that has a LaTeX form in ``LATEX`` replaced by it (no markdown read)."""
    return "".join(LATEX.get(ch, ch) for ch in text)


def escape(text: str) -> str:
    """A header or cell as LaTeX: ``escape_text`` around markdown's bold, which becomes ``\\textbf{...}``."""
    out, end = [], 0
    for bold in _BOLD.finditer(text):
        out += [escape_text(text[end : bold.start()]), r"\textbf{" + escape_text(bold.group(1)) + "}"]
        end = bold.end()
    return "".join(out) + escape_text(text[end:])
