"""Gulli's AG corpus of news articles and the COREL authors' release of AGNews, read as records (the AGNews-8
recipe, ``clusterable.data.text.agnews``, makes the corpus of them).

**The distributed files** (http://groups.di.unipi.it/~gulli/AG_corpus_of_news_articles.html), read as found,
plain or compressed (bzip2 or gzip, told by their first bytes, whatever their name):
    - ``newsSpace`` (``newsSpace.bz2``): a MySQL dump (``SELECT ... INTO OUTFILE`` defaults), one article per
      line, 9 tab-separated fields source, url, title, image, category, description, rank, pubdate, video; NULL is
      ``\\N``; a backslash escapes a tab, a newline (an article's line breaks are backslash + newline), a
      backslash, and stands before ``0 b n r t Z`` for NUL, backspace, newline, carriage return, tab, Ctrl-Z.
      The bytes are mostly UTF-8, with older records in a single-byte encoding: a field that is not UTF-8 is read
      as Windows-1252 (Latin-1 where that fails). A line with another number of fields (8, without video, is
      accepted) is skipped and counted.
    - ``newsspace200.xml`` (``.bz``): one ``<all_news>`` element whose children are the fields of one article
      after another, ``<source>``, ``<url>``, ``<title>``, ``<image>``, ``<category>``, ``<description>``,
      ``<rank>``, ``<pubdate>``; a new article starts where a field repeats (and at the end of a wrapper element,
      if a copy wraps each article in one); a backslash before a line break is dropped.
This description rests on what public readers of these files rely on (loaders of the tab-separated dump that join
backslash-continued lines and split them on tabs into the 9 fields above, XML loaders that walk ``<all_news>``'s
flat children in cycles of the 8 tags) and on MySQL's documented ``INTO OUTFILE`` escaping, not on a copy of the
files: the notes of a build count the records read and the dump's lines skipped, to check a real copy against it.

**The authors' release** ``selected_filtered_data.npz`` (kiankd/corel2019, ``agnews/``): its ``agnews/example.py``
shows only that the archive holds an array under the key ``data``, one entry per document, and the file itself is
not in the repository's stored copy, so the layout of an entry is NOT verified. This reader accepts entries that
are mappings or NumPy records with a topic field (``topic``, ``category`` or ``label``, the topic's name;
``TrueEntertainment``, the name in the authors' ``stats.txt``, is Entertainment) and either ``tokens`` (already
preprocessed: used as they are) or ``title`` and ``description`` (or ``text``) (preprocessed here); any other
layout fails with one line describing the first entry. Object arrays are unpickled: read only a file you trust.
"""

from __future__ import annotations

import bz2
import gzip
import re
import sys
import xml.etree.ElementTree as ET
import zipfile
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any, NamedTuple

import numpy as np

from clusterable.data.errors import CorruptFileError, DatasetError, first_line

__all__ = [
    "AUTHORS_REPO",
    "GULLI_PAGE",
    "NPZ_FILE",
    "RAW_FIELDS",
    "RAW_FILES",
    "Article",
    "read_articles",
    "read_npz",
]

# The raw files looked for when ``raw_file`` is not given, in this order: the dump as distributed and unpacked.
RAW_FILES = ("newsSpace", "newsSpace.bz2", "newsspace200.xml", "newsspace200.xml.bz", "newsspace200.xml.bz2")
NPZ_FILE = "selected_filtered_data.npz"
RAW_FIELDS = ("source", "url", "title", "image", "category", "description", "rank", "pubdate", "video")
GULLI_PAGE = "http://groups.di.unipi.it/~gulli/AG_corpus_of_news_articles.html"
AUTHORS_REPO = "https://github.com/kiankd/corel2019 (agnews/selected_filtered_data.npz)"


class Article(NamedTuple):
    """The fields of one article the recipe uses (None where the file has NULL or no such field)."""

    source: str | None
    category: str | None
    title: str | None
    description: str | None


def _replace() -> str:
    return f"replace it with the file from {GULLI_PAGE}"


# ------------------------------------------------------------------------------------------------ raw formats


def read_articles(path: str | Path, stats: dict[str, Any] | None = None, progress: bool = False) -> Iterator[Article]:
    """The articles of Gulli's file at ``path``, in file order: the tab-separated ``newsSpace`` dump or the
    ``newsspace200.xml`` dump, plain, bzip2 or gzip (told by the first bytes; see the module docstring).

    ``stats`` (if given) receives ``format``, ``records`` and ``malformed_records`` (lines of the dump with another
    number of fields than 8 or 9, skipped).

    Raises:
        CorruptFileError: a compressed file that ends early or is not what its first bytes say, or XML that is not
            well-formed (one line naming the file).
    """
    path = Path(path)
    stats = {} if stats is None else stats
    stats.setdefault("records", 0)
    stats.setdefault("malformed_records", 0)
    bar = _bar(progress, f"reading {path.name}", "article")
    try:
        with _open_raw(path) as stream:
            head = stream.read(1024)
        is_xml = head.lstrip(b"\xef\xbb\xbf \t\r\n").startswith(b"<")
        stats["format"] = "newsspace200.xml (XML)" if is_xml else "newsSpace (tab-separated MySQL dump)"
        with _open_raw(path) as stream:
            articles = _xml_articles(stream, path) if is_xml else _dump_articles(stream, stats)
            for article in articles:
                stats["records"] += 1
                bar.update(1)
                yield article
    except (OSError, EOFError, zlib.error) as err:  # bz2 / gzip: truncated or garbled data
        raise CorruptFileError(
            f"AG corpus file {path} is corrupt: it cannot be read to the end ({first_line(err)}); {_replace()}"
        ) from None
    finally:
        bar.close()


def _open_raw(path: Path) -> IO[bytes]:
    """``path`` opened for reading bytes, decompressed if its first bytes are bzip2's or gzip's."""
    with open(path, "rb") as f:
        magic = f.read(3)
    if magic == b"BZh":
        return bz2.open(path, "rb")
    if magic[:2] == b"\x1f\x8b":
        return gzip.open(path, "rb")
    return open(path, "rb")


# The escapes of MySQL's INTO OUTFILE: a backslash before one of these letters stands for a control character;
# before anything else (tab, newline, backslash) for that character itself.
_ESCAPES = {b"0": b"\0", b"b": b"\b", b"n": b"\n", b"r": b"\r", b"t": b"\t", b"Z": b"\x1a"}
_PIECES = re.compile(rb"\\(.)|(\t)|([^\\\t]+)", re.S)
_NULL = b"\\N"


def _dump_articles(stream: IO[bytes], stats: dict[str, Any]) -> Iterator[Article]:
    """The articles of the tab-separated dump: lines joined where a newline is escaped, split into fields."""
    pending: list[bytes] = []
    for line in stream:
        pending.append(line)
        body = line[:-1] if line.endswith(b"\n") else line
        if line.endswith(b"\n") and (len(body) - len(body.rstrip(b"\\"))) % 2 == 1:
            continue  # an escaped newline: the article goes on on the next line
        record = b"".join(pending).rstrip(b"\r\n") if len(pending) > 1 else body.rstrip(b"\r")
        pending = []
        if not record:
            continue
        fields = _fields(record)
        if len(fields) not in (len(RAW_FIELDS), len(RAW_FIELDS) - 1):
            stats["malformed_records"] += 1
            continue
        source, _, title, _, category, description = (_decode(f) for f in fields[:6])
        yield Article(source, category, title, description)
    if pending:  # the file ends inside an escaped newline: a truncated last record
        stats["malformed_records"] += 1


def _fields(record: bytes) -> list[bytes | None]:
    """The fields of one record of the dump, unescaped; ``None`` for NULL (``\\N``)."""
    fields: list[bytes | None] = [None if f == _NULL else f for f in record.split(b"\t")]
    if not any(f is not None and b"\\" in f for f in fields):
        return fields  # the usual case: no escape but NULLs, no tab inside a field
    fields, buffer, pieces, null = [], bytearray(), 0, False
    for escaped, tab, text in _PIECES.findall(record):
        if tab:
            fields.append(None if null and pieces == 1 else bytes(buffer))
            buffer, pieces, null = bytearray(), 0, False
            continue
        pieces += 1
        if text:
            buffer += text
        else:
            null = escaped == b"N"
            buffer += _ESCAPES.get(escaped, escaped)
    fields.append(None if null and pieces == 1 else bytes(buffer))
    return fields


def _decode(field: bytes | None) -> str | None:
    """UTF-8, or (older records) Windows-1252, or Latin-1, which decodes any byte."""
    if field is None:
        return None
    for encoding in ("utf-8", "cp1252"):
        try:
            return field.decode(encoding)
        except UnicodeDecodeError:
            pass
    return field.decode("latin-1")


_XML_FIELDS = frozenset(RAW_FIELDS)


def _xml_articles(stream: IO[bytes], path: Path) -> Iterator[Article]:
    """The articles of the XML dump: the field elements in document order, a new article wherever a field
    repeats or a wrapper element ends; the tree is cleared as it goes, so memory stays small."""
    fields: dict[str, str | None] = {}
    root = None
    try:
        for event, element in ET.iterparse(stream, events=("start", "end")):
            if event == "start":
                root = element if root is None else root
                continue
            tag = element.tag
            if tag in _XML_FIELDS:
                if tag in fields:
                    yield _xml_article(fields)
                    fields = {}
                    root.clear()  # type: ignore[union-attr]
                fields[tag] = element.text
            # A wrapper element (one per article in some copies) ends, or the root: the article is complete.
            elif fields and len(element):
                yield _xml_article(fields)
                fields = {}
                if element is not root:
                    root.clear()  # type: ignore[union-attr]
    except ET.ParseError as err:
        raise CorruptFileError(f"AG corpus file {path} is not well-formed XML ({err}); {_replace()}") from None
    if fields:
        yield _xml_article(fields)


def _xml_article(fields: dict[str, str | None]) -> Article:
    def text(name: str) -> str | None:
        value = fields.get(name)
        # The XML dump keeps the database's line continuations: a backslash before a line break.
        return None if value is None else value.replace("\\\n", "\n")

    return Article(text("source"), text("category"), text("title"), text("description"))


# ------------------------------------------------------------------------------------------------ the authors' npz


_ZIP_MAGIC = b"PK\x03\x04"


# The option that lets a run unpickle the authors' object arrays (named in the refusal).
ALLOW_PICKLE_OPTION = "dataset.corpus.allow_pickle=true"


class PickledFileError(DatasetError):
    """A data file whose arrays are pickled Python objects, which unpickling could make run code: refused unless
    the user allows it."""


def read_npz(path: str | Path, allow_pickle: bool = False) -> list[tuple[str, list[str] | Article]]:
    """The entries of the authors' release at ``path``, in order: (the topic's name as stored, the tokens as stored
    or an ``Article`` whose title and description (or text, as the title) the recipe makes a document of).

    ``allow_pickle``: whether an object array (pickled entries: unpickling a file can run code from it) is read;
    False refuses it in one line naming ``ALLOW_PICKLE_OPTION``. Arrays of plain records never need it.

    Raises:
        CorruptFileError: not a readable .npz archive, no ``data`` array, or an entry of a layout this reader does
            not know (one line describing the first such entry).
        PickledFileError: an object array and ``allow_pickle`` False.
    """
    path = Path(path)
    return [_npz_entry(entry, i, path) for i, entry in enumerate(_npz_data(path, allow_pickle))]


def _npz_data(path: Path, allow_objects: bool) -> np.ndarray:
    """The archive's ``data`` array; object arrays (pickled entries) only with ``allow_objects``."""

    def corrupt(what: str) -> CorruptFileError:
        return CorruptFileError(
            f"AGNews npz file {path} is corrupt: {what}; replace it with {NPZ_FILE} from {AUTHORS_REPO}"
        )

    # np.load would take anything but a zip archive for a pickle and say so: say what the file is not instead.
    with open(path, "rb") as f:
        if f.read(4) != _ZIP_MAGIC:
            raise corrupt("it is not an .npz (zip) archive")
    try:
        for allow_pickle in (False, True):
            with np.load(path, allow_pickle=allow_pickle) as archive:
                if "data" not in archive.files:
                    raise corrupt(f"it has no array 'data' (its arrays: {', '.join(archive.files) or 'none'})")
                try:
                    return np.asarray(archive["data"])
                except ValueError:  # an object array: its entries are pickled Python objects
                    if allow_pickle:
                        raise
                    if not allow_objects:
                        raise PickledFileError(
                            f"AGNews npz file {path} holds pickled Python objects (an object array), which could run "
                            f"code when read: {ALLOW_PICKLE_OPTION} reads it if you trust the file"
                        ) from None
    except (OSError, EOFError, ValueError, zipfile.BadZipFile, zlib.error) as err:
        raise corrupt(f"it cannot be read ({first_line(err)})") from None
    raise AssertionError("unreachable")  # the loop returns or raises


def _npz_entry(entry: Any, index: int, path: Path) -> tuple[str, list[str] | Article]:
    """(topic, tokens or the article's fields) of one entry of the authors' ``data`` array, for the layouts this
    reader knows."""
    fields: dict[str, Any] | None = None
    if isinstance(entry, dict):
        fields = entry
    elif isinstance(entry, np.void) and entry.dtype.names:
        fields = {name: entry[name] for name in entry.dtype.names}
    if fields is not None:
        topic = next((fields[k] for k in ("topic", "category", "label") if k in fields), None)
        tokens = fields.get("tokens")
        if isinstance(topic, (str, np.str_)):
            if tokens is not None and not isinstance(tokens, (str, np.str_)):
                return str(topic), [str(t) for t in tokens]
            if "title" in fields or "description" in fields:
                return str(topic), Article(None, str(topic), _str(fields.get("title")), _str(fields.get("description")))
            if "text" in fields:
                return str(topic), Article(None, str(topic), _str(fields["text"]), None)
    raise CorruptFileError(
        f"AGNews npz file {path}: data[{index}] has a layout this reader does not know ({_describe(entry)}); it "
        "reads entries that are mappings or records with a topic name (topic, category or label) and tokens, or "
        "title and description, or text (the release's layout could not be verified)"
    )


def _str(value: Any) -> str | None:
    return None if value is None else str(value)


def _describe(entry: Any) -> str:
    if isinstance(entry, dict):
        return f"a dict with keys {', '.join(map(str, list(entry)[:10]))}"
    if isinstance(entry, np.void) and entry.dtype.names:
        return f"a record with fields {', '.join(entry.dtype.names)}"
    if isinstance(entry, (tuple, list, np.ndarray)):
        kinds = ", ".join(type(x).__name__ for x in list(entry)[:10])
        return f"a {type(entry).__name__} of {len(entry)} items ({kinds})"
    return f"a {type(entry).__name__}"


# ------------------------------------------------------------------------------------------------ helpers


class _NoBar:
    def update(self, n: int) -> None:
        pass

    def close(self) -> None:
        pass


def _bar(enabled: bool, desc: str, unit: str) -> Any:
    if not enabled:
        return _NoBar()
    from tqdm import tqdm

    return tqdm(desc=desc, unit=unit, file=sys.stderr, mininterval=2.0, unit_scale=True)
