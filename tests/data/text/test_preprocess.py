"""The AGNews preprocessing of COREL's supplement, rule by rule, on hand-written sentences: punctuation, the dollar
sign, MONEY / YEAR / NUMBER (with the edge years), lemmas, stop words and case; the lemmatiser named; a missing
spaCy reported in one line."""

from __future__ import annotations

import sys
from types import SimpleNamespace

import pytest
import spacy  # noqa: F401  (installed by the dev extra: a missing spaCy fails these tests, never skips them)

from clusterable.data.errors import DatasetError
from clusterable.data.text import preprocess as tp
from clusterable.data.text.preprocess import (
    MONEY,
    NUMBER,
    YEAR,
    TextDependencyError,
    TextPreprocessor,
    is_year,
    lemmatiser_name,
    number_token,
    preprocess,
    preprocess_many,
    split_number,
    split_separators,
    strip_punctuation,
)


def pre(text: str) -> list[str]:
    # The lookup lemmatiser explicitly: the expected lemmas below are its, whatever else is installed.
    return preprocess(text, lemmatiser="lookup")


# ------------------------------------------------------------------------------------------------ punctuation


@pytest.mark.parametrize(
    ("token", "expected"),
    [
        ("U.S.", "US"),
        ("O'Neill", "ONeill"),
        ("AT&T", "ATT"),
        ("%", ""),
        ("--", ""),
        ("$", "$"),
        ("US$", "US$"),
        ("snake_case", "snakecase"),
        ("«café»", "café"),
    ],
)
def test_strip_punctuation_keeps_letters_digits_and_dollar(token: str, expected: str) -> None:
    assert strip_punctuation(token) == expected


def test_dashes_and_slashes_inside_a_token_separate_words() -> None:
    assert split_separators("F-16") == ["F", "16"]
    assert split_separators("9/11") == ["9", "11"]
    assert split_separators("well—known") == ["well", "known"]  # an em dash
    assert split_separators("--") == []


def test_punctuation_is_removed_and_words_stay_whole() -> None:
    assert pre('Hello, world! (Reuters) "quoted" ... yes; no?') == [
        "hello",
        "world",
        "reuters",
        "quote",
        "yes",
    ]
    # Clitics are split off by spaCy and are stop words, instead of being glued to the word.
    assert pre("Microsoft's chief didn't say") == ["microsoft", "chief"]
    assert pre("U.S.-led talks") == ["us", "lead", "talk"]  # "U.S." is not a stop word as written
    assert pre("Sci/Tech e-mail") == ["sci", "tech", "e", "mail"]


def test_the_dollar_sign_is_kept() -> None:
    assert pre("It cost $ and more") == ["cost", "$"]
    assert pre("It cost $5") == ["cost", "$", MONEY]


# ------------------------------------------------------------------------------------------------ numbers


@pytest.mark.parametrize(
    ("number", "year"),
    [
        ("1699", False),
        ("1700", True),
        ("2004", True),
        ("2200", True),
        ("2201", False),
        ("0800", False),
        ("2,004", False),
        ("200", False),
        ("20040", False),
        ("١٩٩٩", False),
    ],
)
def test_a_year_is_four_bare_digits_from_1700_to_2200(number: str, year: bool) -> None:
    assert is_year(number) is year


def test_number_token_money_wins_over_year() -> None:
    assert number_token("2004", after_dollar=True) == MONEY
    assert number_token("2004", after_dollar=False) == YEAR
    assert number_token("15", after_dollar=False) == NUMBER


@pytest.mark.parametrize(
    ("token", "expected"),
    [
        ("1,000", ("1,000", "")),
        ("3.5", ("3.5", "")),
        ("5bn", ("5", "bn")),
        ("10km", ("10", "km")),
        ("1st", ("1", "")),
        ("1990s", ("1990", "")),
        ("3D", ("3", "")),
        ("-5", ("5", "")),
        ("#1", ("1", "")),
        ("G8", None),
        ("mp3", None),
        ("five", None),
        ("$5", None),
    ],
)
def test_split_number(token: str, expected: tuple[str, str] | None) -> None:
    assert split_number(token) == expected


def test_numbers_become_money_year_or_number() -> None:
    assert pre("1,000 people") == [NUMBER, "people"]
    assert pre("up 3.5 points") == [NUMBER, "point"]
    assert pre("rose 5%") == ["rise", NUMBER]
    assert pre("a $5bn deal") == ["$", MONEY, "bn", "deal"]
    assert pre("$2000 in 2000") == ["$", MONEY, YEAR]
    assert pre("US$ 20") == ["us$", MONEY]
    assert pre("2,004 fans") == [NUMBER, "fan"]  # a separator: not a year
    assert pre("at 20:04") == [NUMBER]  # digits glued by deleted punctuation are never a year
    assert pre("1699 1700 2200 2201") == [NUMBER, YEAR, YEAR, NUMBER]
    assert pre("the 1990s and 1st") == [YEAR, NUMBER]
    assert pre("9/11") == [NUMBER, NUMBER]
    assert pre("G8 summit, five million") == ["g8", "summit", "million"]  # "five" is a stop word


def test_a_dollar_only_reaches_the_next_token() -> None:
    assert pre("$ 5 and 6") == ["$", MONEY, NUMBER]
    assert pre("$5-6") == ["$", MONEY, NUMBER]  # the part after the dash is not after the dollar


# ------------------------------------------------------------------------------------------------ lemmas, stop words


def test_words_are_lemmatised_and_lower_cased() -> None:
    assert pre("Stocks rose as companies were running") == ["stock", "rise", "company", "run"]
    assert pre("Americans mice children") == ["american", "mouse", "child"]  # own form first, then lower case


def test_stop_words_are_removed() -> None:
    assert pre("The and of it is on a") == []
    assert pre("The Iraq war") == ["iraq", "war"]


def test_number_tokens_never_meet_a_word() -> None:
    assert pre("MONEY money YEAR Year") == ["money", "money", "year", "year"]
    assert all(t not in (MONEY, YEAR, NUMBER) for t in pre("MONEY YEAR NUMBER"))


def test_empty_text() -> None:
    assert pre("") == []
    assert pre("   ... !!") == []


def test_preprocess_many_matches_preprocess() -> None:
    texts = ["Stocks rose 5% in 2004", "", "Microsoft's $5bn deal", "The U.S. economy"]
    assert preprocess_many(texts, lemmatiser="lookup", batch_size=2) == [pre(t) for t in texts]
    # The second pass meets remembered tokens: same output.
    assert preprocess_many(texts, lemmatiser="lookup") == [pre(t) for t in texts]


def test_tagger_lemmas_are_remembered_with_their_token() -> None:
    """With a trained pipeline a lemma depends on the sentence: the same text with two lemmas stays two."""

    def tokenize(texts, batch_size):
        for text in texts:
            yield [SimpleNamespace(text=w.split("/")[0], lemma_=w.split("/")[1]) for w in text.split()]

    pre_tagged = TextPreprocessor(tokenize, lambda t: t.lemma_, str, frozenset({"the"}), "test")
    assert pre_tagged("saw/see saw/saw The/the $/$ 5/5") == ["see", "saw", "$", MONEY]


# ------------------------------------------------------------------------------------------------ the lemmatiser


def test_lemmatiser_name_says_which_was_used() -> None:
    name = lemmatiser_name("lookup")
    assert name is not None and "spacy-lookups-data" in name and "lookup lemmatiser" in name
    assert tp.load_preprocessor("lookup").name == name
    auto = lemmatiser_name("auto")
    assert auto == (lemmatiser_name("trained") if tp.resolve_lemmatiser("auto") == "trained" else name)


def test_bad_lemmatiser_name() -> None:
    with pytest.raises(ValueError, match="^lemmatiser must be one of auto, trained, lookup"):
        tp.resolve_lemmatiser("wordnet")


def test_missing_spacy_is_one_line_with_the_install_command(monkeypatch: pytest.MonkeyPatch) -> None:
    tp.load_preprocessor.cache_clear()
    monkeypatch.setitem(sys.modules, "spacy", None)  # import spacy -> ImportError
    try:
        with pytest.raises(TextDependencyError) as err:
            preprocess("anything", lemmatiser="lookup")
    finally:
        tp.load_preprocessor.cache_clear()
    message = str(err.value)
    assert "\n" not in message and 'pip install -e ".[text]"' in message
    assert isinstance(err.value, DatasetError) and isinstance(err.value, ImportError)


@pytest.mark.skipif(tp.resolve_lemmatiser("auto") == "trained", reason="en_core_web_sm is installed here")
def test_asking_for_the_trained_pipeline_without_it_is_one_line() -> None:
    with pytest.raises(TextDependencyError, match="en_core_web_sm is not installed") as err:
        tp.load_preprocessor("trained")
    assert "\n" not in str(err.value) and "lemmatiser=lookup" in str(err.value)
