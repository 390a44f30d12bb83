"""The AGNews preprocessing of Kenyon-Dean et al. 2019 (COREL), supplement section 1, as small testable rules.

The supplement's recipe, for a document D (an article's title and description, concatenated by the caller):
    - all punctuation, other than dollar signs, is removed;
    - spaCy tokenises and then lemmatises every word of D;
    - all stop words are removed;
    - all numbers are replaced by MONEY if a dollar sign precedes them, YEAR if they are four digits between 1700
      and 2200, and NUMBER otherwise.
The authors' repository (kiankd/corel2019, ``agnews/``) holds only the result, not the code, so every detail below
that the supplement does not state is our reading, chosen so that the rules are well defined and testable:

**Order.** spaCy tokenises the raw text first and punctuation is removed from its tokens. Removing it from the raw
text first would glue clitics to their words ("Microsoft's" -> "Microsofts", "don't" -> "dont": neither a lemma
nor a GloVe word); spaCy splits them off ("Microsoft", "'s"; "do", "n't") and its stop list removes them.

**Punctuation** (``strip_punctuation``): every character that is not a letter, a digit or ``$`` (``[^\\w$]``, and
``_``) is deleted from a token ("U.S." -> "US", "O'Neill" -> "ONeill", "AT&T" -> "ATT"); a token left empty ("%",
"--", "(") is dropped. Dashes and slashes *inside* a token separate words, so they split it instead of being
deleted ("F-16" -> "F", "16"; "9/11" -> "9", "11"): deleting them would glue two words (or two numbers) into one.

**Numbers** (``split_number``, ``number_token``): written in digits, a token (after leading/trailing punctuation
is stripped: "-5", "+3", "#1") that is digits with "," or "." between digits, optionally followed by letters:
    - "1,000" and "3.5" are one number each (spaCy keeps them whole): NUMBER;
    - "5%": spaCy splits off "%", which is punctuation: NUMBER;
    - "$5bn": spaCy splits off "$"; "5bn" is the number 5 followed by the word "bn": ``$ MONEY bn``;
    - a one-letter, ordinal or plural suffix belongs to the number ("3D", "1st", "1990s": NUMBER, NUMBER, YEAR);
      longer letters are a word of their own ("5bn" -> number + "bn", "10km" -> number + "km");
    - MONEY: the token right before it (spaces aside) is or ends with ``$`` ("$ 5", "US$ 5"); MONEY wins over YEAR;
    - YEAR: exactly four digits, no separator, value in [1700, 2200] (1700 and 2200 included): "2,004" and
      "20:04" are not years;
    - digits that only become a number once punctuation is deleted ("10:30" -> "1030") are NUMBER (or MONEY);
    - digits after letters are part of a word ("G8", "mp3"); number words ("five", "million") are words.
The ``$`` itself is kept as a token, as the supplement says ("$5" -> ``$ MONEY``).

**Lemmas and case.** A word is its lemma with punctuation removed, lower-cased. Lower-casing is ours: spaCy's
lemmatisers keep the case of some words and not of others (the lookup table knows "stocks" but not "Stocks"), and
one case gives one vocabulary whatever the lemmatiser. The number tokens MONEY, YEAR and NUMBER stay upper-case, so
they never meet a word. The lookup table has its quirks ("data" -> "datum", "Number" -> "numb"): they are spaCy's.

**Stop words**: spaCy's English list, matched case-insensitively against the token as spaCy split it, before its
punctuation is removed ("'s", "n't", "The" are stop words; "U.S." is not, and becomes "us"). Number tokens and
``$`` are never stop words.

**Lemmatiser.** spaCy's trained English pipeline (``en_core_web_sm``: a tagger and a rule lemmatiser) is a separate
download. ``lemmatiser="auto"`` uses it when it is installed, and otherwise spaCy's lookup lemmatiser: a blank
English tokeniser and the ``lemma_lookup`` table of the ``spacy-lookups-data`` package (the word's own form
looked up first, then its lower-case form: "Americans" -> "American", "Stocks" -> "stock"). ``lemmatiser_name``
says which one a build used; the AGNews reader records it in the corpus notes.
"""

from __future__ import annotations

import functools
import importlib.metadata
import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, Literal

from clusterable.data.errors import DatasetError
from clusterable.data.text.corpus import SPECIAL_TOKENS

__all__ = [
    "INSTALL_HINT",
    "MONEY",
    "NUMBER",
    "PREPROCESS_VERSION",
    "TRAINED_PIPELINE",
    "YEAR",
    "TextDependencyError",
    "TextPreprocessor",
    "is_year",
    "lemmatiser_name",
    "load_preprocessor",
    "number_token",
    "preprocess",
    "preprocess_many",
    "resolve_lemmatiser",
    "split_number",
    "split_separators",
    "strip_punctuation",
]

MONEY, YEAR, NUMBER = SPECIAL_TOKENS
# Part of the AGNews cache key: bump it whenever a rule here changes what a document becomes.
PREPROCESS_VERSION = 1
TRAINED_PIPELINE = "en_core_web_sm"
INSTALL_HINT = 'pip install -e ".[text]"'
Lemmatiser = Literal["auto", "trained", "lookup"]
LEMMATISERS: tuple[str, ...] = ("auto", "trained", "lookup")
YEAR_RANGE = (1700, 2200)  # supplement: "four digits and between 1700 and 2200" (both ends included: ours)

# Not a letter, a digit or "$" ("_" is a word character to Python's \w, but punctuation here).
_PUNCTUATION = re.compile(r"[^\w$]|_")
# Dashes (Unicode's dash punctuation and the minus sign), slashes, "|" and "_" inside a token separate words.
_SEPARATORS = re.compile(r"[-\u2010-\u2015\u2212\u2e3a\u2e3b\ufe58\ufe63\uff0d/\\|_]+")
# A number as written (digits, "," or "." between digits) and the letters that may follow it ("5bn", "1st").
_NUMBER = re.compile(r"(\d+(?:[.,]\d+)*)([^\W\d_]*)")
# Suffixes of two letters or more that belong to the number they follow: ordinals and plurals (decades: "1990s").
_NUMBER_SUFFIXES = frozenset({"st", "nd", "rd", "th", "s"})
# Leading and trailing characters stripped before a token is tested for a number ("-5", "#1", "5.").
_EDGE_PUNCTUATION = re.compile(r"^[^\w$]+|[^\w$]+$")


class TextDependencyError(DatasetError, ImportError):
    """spaCy (or its lookup tables, or the trained pipeline asked for) is not installed: the corpus cannot be
    preprocessed. A ``DatasetError``, so that a run reports its one-line message instead of a traceback."""


# ----------------------------------------------------------------------------------------------- the rules


def strip_punctuation(token: str) -> str:
    """``token`` without the characters that are not letters, digits or ``$`` ("U.S." -> "US", "%" -> "")."""
    return _PUNCTUATION.sub("", token)


def split_separators(token: str) -> list[str]:
    """The parts of ``token`` between dashes and slashes ("F-16" -> ["F", "16"], "9/11" -> ["9", "11"]); empty
    parts are left out ("--" -> [])."""
    return [part for part in _SEPARATORS.split(token) if part]


def split_number(token: str) -> tuple[str, str] | None:
    """The number a token is and the word that follows it, or None if it is not a number.

    ``token`` is tested after its leading and trailing punctuation is stripped (``$`` kept): digits with "," or
    "." between digits, then optionally letters. One-letter, ordinal and plural suffixes belong to the number (the
    word is then ""); longer ones are returned as the word. A leading ``$`` is not part of a number (spaCy splits
    it off).

    >>> split_number("1,000"), split_number("5bn"), split_number("1990s"), split_number("G8")
    (('1,000', ''), ('5', 'bn'), ('1990', ''), None)
    """
    match = _NUMBER.fullmatch(_EDGE_PUNCTUATION.sub("", token))
    if match is None:
        return None
    number, suffix = match.groups()
    return (number, "") if len(suffix) < 2 or suffix.lower() in _NUMBER_SUFFIXES else (number, suffix)


def is_year(number: str) -> bool:
    """Four bare digits (no separator) whose value is in [1700, 2200]: "1700" and "2200" are years, "1699",
    "2201" and "2,004" are not."""
    return len(number) == 4 and number.isascii() and number.isdigit() and YEAR_RANGE[0] <= int(number) <= YEAR_RANGE[1]


def number_token(number: str, after_dollar: bool) -> str:
    """The token that replaces ``number``: MONEY after a dollar sign, else YEAR for a year (``is_year``), else
    NUMBER."""
    if after_dollar:
        return MONEY
    return YEAR if is_year(number) else NUMBER


# ----------------------------------------------------------------------------------------------- the pipeline


class TextPreprocessor:
    """The supplement's rules over one spaCy pipeline (see the module docstring).

    Build it with ``load_preprocessor``; call it on one text, or ``many`` on a stream of texts (``nlp.pipe`` in
    batches). ``name`` says which tokeniser and lemmatiser it uses.

    Args:
        tokenize: texts -> spaCy ``Doc``s, in order (``nlp.pipe`` or the tokenizer's ``pipe``).
        lemma: spaCy token -> its lemma (the trained pipeline's ``lemma_``, or the lookup table).
        lemma_of_text: a word that is not a whole spaCy token (a part of "F-16") -> its lemma.
        stop_words: spaCy's stop list (lower case).
        name: what the build used, recorded in the corpus notes.
        context_free_lemmas: the lemma of a token depends on its text alone (the lookup table), so what a token
            becomes can be remembered by its text; a tagger's lemma depends on the sentence, so it is remembered
            by (text, lemma).
    """

    # What a token becomes is remembered (news text repeats its words: the rules then run once per distinct
    # token, not once per token, which makes them several times faster); the memory is emptied past this size.
    MEMO_SIZE = 1_000_000

    def __init__(
        self,
        tokenize: Callable[[Iterable[str], int], Iterator[Any]],
        lemma: Callable[[Any], str],
        lemma_of_text: Callable[[str], str],
        stop_words: frozenset[str],
        name: str,
        context_free_lemmas: bool = False,
    ):
        self._tokenize, self._lemma, self._lemma_of_text = tokenize, lemma, lemma_of_text
        self.stop_words, self.name = stop_words, name
        self._context_free = context_free_lemmas
        self._memo: dict[Any, tuple[str | tuple[str, bool], ...]] = {}

    def __call__(self, text: str) -> list[str]:
        """The tokens of one document."""
        return self.many([text])[0]

    def many(
        self, texts: Iterable[str], batch_size: int = 1000, progress: bool = False, total: int | None = None
    ) -> list[list[str]]:
        """The tokens of every text, in order; ``progress`` shows a tqdm bar on stderr (``total`` texts)."""
        docs = self._tokenize(texts, batch_size)
        if progress:
            import sys

            from tqdm import tqdm

            docs = tqdm(
                docs, total=total, desc="preprocessing AGNews once", unit="doc", file=sys.stderr, mininterval=2.0
            )
        return [self.tokens(doc) for doc in docs]

    def tokens(self, doc: Iterable[Any]) -> list[str]:
        """The supplement's rules applied to one spaCy ``Doc`` (an iterable of tokens with ``text``)."""
        out: list[str] = []
        memo = self._memo
        after_dollar = False  # the previous token (spaces aside) is or ends with "$"
        for token in doc:
            text = token.text
            if text.isspace():
                continue
            key = text if self._context_free else (text, self._lemma(token))
            items = memo.get(key)
            if items is None:
                if len(memo) >= self.MEMO_SIZE:
                    memo.clear()
                items = memo[key] = self._analyse(text, token)
            for item in items:
                if isinstance(item, str):
                    out.append(item)
                else:  # a number: which token it becomes depends on the token before it
                    number, first = item
                    out.append(number_token(number, after_dollar and first))
            after_dollar = text.endswith("$")
        return out

    def _analyse(self, text: str, token: Any) -> tuple[str | tuple[str, bool], ...]:
        """What the token ``text`` becomes: words, and ``(number, in its first part)`` for each number, resolved
        by ``tokens`` (``number`` is "" for digits that are a number only once punctuation is gone)."""
        items: list[str | tuple[str, bool]] = []
        parts = split_separators(text)
        for i, part in enumerate(parts):
            number = split_number(part)
            if number is not None:
                items.append((number[0], i == 0))
                if number[1]:  # "5bn": the word after the number
                    self._word(number[1], None, False, items)
            else:
                self._word(part, token if len(parts) == 1 else None, i == 0, items)
        return tuple(items)

    def _word(self, text: str, token: Any, first: bool, items: list[str | tuple[str, bool]]) -> None:
        """Append the word ``text`` (the spaCy ``token`` when it is a whole one) unless it is a stop word."""
        if text.lower() in self.stop_words:  # the token as spaCy split it, before its punctuation goes
            return
        word = strip_punctuation(self._lemma(token) if token is not None else self._lemma_of_text(text))
        if not word:
            return
        if word.isdigit():  # "10:30" -> "1030": a number only once punctuation is gone; never a year
            items.append(("", first))
            return
        items.append(word.lower())


def _installed(name: str) -> str | None:
    """The installed version of distribution ``name``, or None (no import: cheap, and safe without spaCy)."""
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


def resolve_lemmatiser(lemmatiser: str) -> str:
    """``"trained"`` or ``"lookup"``: what ``lemmatiser`` means on this machine (``auto``: trained if
    ``en_core_web_sm`` is installed).

    Raises:
        ValueError: ``lemmatiser`` is not auto, trained or lookup.
    """
    if lemmatiser not in LEMMATISERS:
        raise ValueError(f"lemmatiser must be one of {', '.join(LEMMATISERS)}, got {lemmatiser!r}")
    if lemmatiser == "auto":
        return "trained" if _installed(TRAINED_PIPELINE) else "lookup"
    return lemmatiser


def lemmatiser_name(lemmatiser: Lemmatiser = "auto") -> str | None:
    """What ``load_preprocessor(lemmatiser)`` would use, from the installed packages' metadata (nothing is
    imported), e.g. ``"spacy 3.8.18 blank('en') + spacy-lookups-data 1.0.5 lemma_lookup (lookup lemmatiser)"``;
    None when spaCy or the pieces asked for are not installed."""
    kind, spacy_version = resolve_lemmatiser(lemmatiser), _installed("spacy")
    if spacy_version is None:
        return None
    if kind == "trained":
        version = _installed(TRAINED_PIPELINE)
        if version is None:
            return None
        return f"spacy {spacy_version} {TRAINED_PIPELINE} {version} (trained pipeline: tagger + rule lemmatiser)"
    version = _installed("spacy-lookups-data")
    if version is None:
        return None
    return f"spacy {spacy_version} blank('en') + spacy-lookups-data {version} lemma_lookup (lookup lemmatiser)"


@functools.lru_cache(maxsize=4)
def load_preprocessor(lemmatiser: Lemmatiser = "auto") -> TextPreprocessor:
    """The preprocessor for ``lemmatiser`` (``auto``: the trained pipeline if installed, else the lookup one),
    loaded once per process.

    Raises:
        ValueError: ``lemmatiser`` is not auto, trained or lookup.
        TextDependencyError: spaCy, its lookup tables or the trained pipeline asked for is not installed, or the
            trained pipeline cannot be loaded (one line saying what to install).
    """
    kind = resolve_lemmatiser(lemmatiser)
    try:
        import spacy
    except ImportError:
        raise TextDependencyError(
            f"spaCy is not installed: it preprocesses the AGNews corpus (COREL's supplement); install it with "
            f"{INSTALL_HINT} (spacy and spacy-lookups-data)"
        ) from None
    name = lemmatiser_name(kind)  # type: ignore[arg-type]
    if kind == "trained":
        return _trained(spacy, name)
    return _lookup(spacy, name)


def _trained(spacy: Any, name: str | None) -> TextPreprocessor:
    if _installed(TRAINED_PIPELINE) is None:
        raise TextDependencyError(
            f"spaCy's trained pipeline {TRAINED_PIPELINE} is not installed (python -m spacy download "
            f"{TRAINED_PIPELINE}); or set lemmatiser=lookup (or auto) to use spaCy's lookup lemmatiser"
        )
    try:
        # The rule lemmatiser needs the tagger's part-of-speech tags; the parser and the entity recogniser only
        # cost time here.
        nlp = spacy.load(TRAINED_PIPELINE, exclude=["parser", "ner", "senter"])
    except Exception as err:  # an incompatible version, a broken install: spaCy raises many kinds
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise TextDependencyError(
            f"spaCy's trained pipeline {TRAINED_PIPELINE} is installed but cannot be loaded ({first}); install "
            f"the version that matches spaCy {spacy.__version__}, or set lemmatiser=lookup"
        ) from None
    lookup = _lookup_table(spacy, required=False)

    def tokenize(texts: Iterable[str], batch_size: int) -> Iterator[Any]:
        return nlp.pipe(texts, batch_size=batch_size)

    def lemma_of_text(text: str) -> str:  # a part of a token the tagger never saw as a word of its own
        return _looked_up(lookup, text) if lookup is not None else text

    return TextPreprocessor(
        tokenize,
        lambda token: token.lemma_ or token.text,
        lemma_of_text,
        frozenset(nlp.Defaults.stop_words),
        name or f"spacy {spacy.__version__} {TRAINED_PIPELINE}",
    )


def _lookup(spacy: Any, name: str | None) -> TextPreprocessor:
    nlp = spacy.blank("en")  # the tokeniser only: nothing else of a pipeline is needed (or available)
    table = _lookup_table(spacy, required=True)

    def tokenize(texts: Iterable[str], batch_size: int) -> Iterator[Any]:
        return nlp.tokenizer.pipe(texts, batch_size=batch_size)

    return TextPreprocessor(
        tokenize,
        lambda token: _looked_up(table, token.text),
        lambda text: _looked_up(table, text),
        frozenset(nlp.Defaults.stop_words),
        name or f"spacy {spacy.__version__} blank('en') + lemma_lookup",
        context_free_lemmas=True,
    )


def _lookup_table(spacy: Any, required: bool) -> Any:
    """spaCy's English ``lemma_lookup`` table (from spacy-lookups-data), or None when not ``required`` and absent."""
    try:
        from spacy.lookups import load_lookups

        return load_lookups("en", ["lemma_lookup"]).get_table("lemma_lookup")
    except (ValueError, KeyError, ImportError):  # spaCy raises ValueError when spacy-lookups-data is missing
        if not required:
            return None
        raise TextDependencyError(
            f"spacy-lookups-data is not installed: without spaCy's trained pipeline ({TRAINED_PIPELINE}) the AGNews "
            f"preprocessing lemmatises with its lookup tables; install them with {INSTALL_HINT}"
        ) from None


def _looked_up(table: Any, text: str) -> str:
    """The lemma of ``text`` in spaCy's lookup table: its own form first ("Americans" -> "American"), then its
    lower-case form ("Stocks" -> "stock"); the text itself when neither is listed."""
    lemma = table.get(text)
    if lemma is None:
        lower = text.lower()
        lemma = table.get(lower, lower) if lower != text else text
    return lemma


def preprocess(text: str, lemmatiser: Lemmatiser = "auto") -> list[str]:
    """The supplement's preprocessing of one document (title and description already concatenated): its tokens,
    words lower-case, MONEY / YEAR / NUMBER in place of numbers. See the module docstring for the rules.

    >>> preprocess("Stocks rose 5% to $3.5bn in 2004")  # doctest: +SKIP
    ['stock', 'rise', 'NUMBER', '$', 'MONEY', 'bn', 'YEAR']

    Raises:
        TextDependencyError: spaCy is not installed (one line: ``pip install -e ".[text]"``).
    """
    return load_preprocessor(lemmatiser)(text)


def preprocess_many(
    texts: Sequence[str], lemmatiser: Lemmatiser = "auto", batch_size: int = 1000, progress: bool = False
) -> list[list[str]]:
    """``preprocess`` of every text, streamed through spaCy in batches of ``batch_size``; ``progress`` shows a
    tqdm bar on stderr."""
    return load_preprocessor(lemmatiser).many(texts, batch_size=batch_size, progress=progress, total=len(texts))
