"""A made-up AG corpus in the ``newsSpace`` dump format, for the ``text`` case's AGNews-8 build: news articles whose
preprocessing costs what real ones do (amounts, years, possessives, HTML, source prefixes), in the AG corpus's
proportion of records to AGNews-8 documents."""

from __future__ import annotations

import itertools
import random
from pathlib import Path

# Frequent words of news text, most frequent first (stop words among them: they are most of its tokens); the rest of
# ``news_articles``' vocabulary is made-up words, so that the distinct tokens, which the preprocessing's memory of
# tokens caches, keep growing with the corpus as a news corpus's do.
NEWS_WORDS = tuple(
    "the to of a in and on for said its with has that is at by as from was will after new an it have be more are "
    "over two first year says company officials government president people but up not than week last Monday "
    "Tuesday Wednesday Thursday Friday million billion percent shares market report quarter profit Iraq Bush "
    "election team game season win won players coach league software Microsoft Internet computer users study "
    "researchers health drug patients oil prices stocks investors deal chief executive minister talks troops police "
    "killed European Union film star music show album singer".split()
)
NEWS_SOURCES = ("Reuters", "AP", "AFP", "Yahoo Business", "BBC News", "CNN", "USATODAY.com", "Forbes")
NEWS_ENTERTAINMENT_SOURCES = ("E! Online", "TheCelebrityCafe.com", "Reuters Entertainment")
# Categories of the AG corpus that are none of AGNews-8's topics (Entertainment / Top News / Top Stories from
# sources that are not entertainment ones are none either).
OTHER_CATEGORIES = ("Italia", "Software and Developement", "Music Feeds", "Toons", "Top News", "Top Stories")


def news_articles(n: int, rng: random.Random, made_up: int = 40_000) -> list[tuple[str, str]]:
    """``n`` made-up news articles, (title, description): a title of 5-9 words and a description of 18-28 (the
    supplement's documents average 20-24 words after preprocessing), words drawn by Zipf's law from ``NEWS_WORDS``
    then ``made_up`` made-up words (a fifth of them names, capitalised), with what the preprocessing has to handle:
    amounts ("$2.5 billion", "$40 million"), years, percentages, numbers with separators, possessives (some as
    "&#39;s", AG's escaped form), an HTML tag, a source prefix ("AP - "), commas, quotes and line breaks."""
    onsets = ("b c d f g h j k l m n p r s t v w z br cr dr st tr ch sh th pl gr").split()
    nuclei, codas = ("a e i o u ai ea ou io").split(), ("", "n", "r", "s", "t", "l", "m", "nd", "st", "ck")
    words, seen = list(NEWS_WORDS), set(NEWS_WORDS)
    while len(words) < len(NEWS_WORDS) + made_up:
        syllables = rng.choice((1, 1, 2, 2, 2, 3))  # words of 2-15 letters, most of 4-8
        word = "".join(rng.choice(onsets) + rng.choice(nuclei) + rng.choice(codas) for _ in range(syllables))
        if word not in seen:
            seen.add(word)
            words.append(word.capitalize() if rng.random() < 0.2 else word)
    cum = list(itertools.accumulate(1.0 / (rank + 2.7) for rank in range(len(words))))

    def number() -> str:
        kind = rng.randrange(6)
        if kind == 0:
            return f"${rng.uniform(1, 99):.1f} billion"
        if kind == 1:
            return f"${rng.randrange(2, 900)} million"
        if kind == 2:
            return str(rng.randrange(1990, 2006))
        if kind == 3:
            return f"{rng.uniform(0.1, 30):.1f}%"
        return f"{rng.randrange(1000, 500_000):,}" if kind == 4 else str(rng.randrange(2, 100))

    def sentence(length: int) -> str:
        out = []
        for word in rng.choices(words, cum_weights=cum, k=length):
            r = rng.random()
            if r < 0.07:
                word = number()
            elif r < 0.09:
                word += rng.choice(("'s", "&#39;s"))
            elif r < 0.15:
                word += ","
            out.append(word)
        out[0] = out[0][0].upper() + out[0][1:]
        if rng.random() < 0.1:
            out[-1] = f'"{out[-1]}"'
        return " ".join(out)

    articles = []
    for _ in range(n):
        prefix = f"{rng.choice(('AP', 'AFP', 'Reuters'))} - " if rng.random() < 0.3 else ""
        description = prefix + sentence(rng.randint(18, 28)) + "."
        if rng.random() < 0.02:
            description += " <b>" + sentence(3) + "</b>"
        # A line break inside the text, now and then: the dump escapes it, the reader joins the lines again.
        if rng.random() < 0.01:
            description = description.replace(", ", ",\n", 1)
        articles.append((sentence(rng.randint(5, 9)), description))
    return articles


def dump_line(fields: tuple[str | None, ...]) -> bytes:
    """One record of the ``newsSpace`` dump as MySQL's ``INTO OUTFILE`` writes it: tab-separated, NULL as \\N,
    backslash, tab and newline escaped with a backslash."""

    def escape(field: str) -> bytes:
        return field.encode().replace(b"\\", b"\\\\").replace(b"\t", b"\\\t").replace(b"\n", b"\\\n")

    return b"\t".join(b"\\N" if f is None else escape(f) for f in fields) + b"\n"


def write_newsspace(path: Path, per_topic: int, seed: int = 0) -> int:
    """A made-up AG corpus for AGNews-8 at ``per_topic`` documents a topic, written at ``path`` as the ``newsSpace``
    dump; returns its number of records. Each of the seven plain topics has 2 x ``per_topic`` articles (so that
    the recipe samples), Entertainment ``per_topic`` from its sources in its three categories; then articles of no
    topic, so that there are as many records per document as the AG corpus (more than a million articles) has for
    AGNews-8's 94,721. The candidates' texts are all different (their preprocessing is what is timed); the others,
    only read, repeat 1,000 texts."""
    from clusterable.data.text.agnews import ENTERTAINMENT_CATEGORIES, TOPICS

    rng = random.Random(seed)
    seven = [topic for topic in TOPICS if topic != "Entertainment"]
    texts = news_articles(15 * per_topic + 1000, rng)
    rows = [(rng.choice(NEWS_SOURCES), topic) for topic in seven for _ in range(2 * per_topic)]
    entertainment = NEWS_ENTERTAINMENT_SOURCES
    rows += [(rng.choice(entertainment), rng.choice(ENTERTAINMENT_CATEGORIES)) for _ in range(per_topic)]
    records = round(8 * per_topic * 1_000_000 / 94_721)
    lines = [
        dump_line(
            (
                source,
                f"http://example.com/{i}",
                texts[i][0],
                None,
                category,
                texts[i][1],
                "5",
                "2004-08-16 00:00:00",
                None,
            )
        )
        for i, (source, category) in enumerate(rows)
    ]
    pool = [
        dump_line(
            (
                rng.choice(NEWS_SOURCES),
                f"http://example.com/x{j}",
                title,
                None,
                rng.choice(OTHER_CATEGORIES),
                description,
                "5",
                "2004-08-16 00:00:00",
                None,
            )
        )
        for j, (title, description) in enumerate(texts[len(rows) :])
    ]
    lines += [pool[j % len(pool)] for j in range(records - len(lines))]
    rng.shuffle(lines)  # the dump's order is the articles' arrival, topics mixed
    with open(path, "wb") as f:
        f.writelines(lines)
    return len(lines)
