"""The errors of data that cannot be read: one family, so that the train entry point catches them all at once.

Their messages are one line each (the entry point prints ``error: <message>`` and stops): what is wrong, the
absolute path of the file or folder, and what to do about it. ``first_line`` and ``last_line`` pick the line of
a library's (several-line) error that such a message quotes.
"""

from __future__ import annotations


class DatasetError(Exception):
    """A dataset cannot be read: missing or corrupt files. The message is one line, meant for the user."""


class DatasetNotFoundError(DatasetError, FileNotFoundError):
    """The dataset's files are not on disk and could not be downloaded."""


class CorruptFileError(DatasetError):
    """A dataset file (or its archive) is on disk but is not what its format promises: truncated, garbled, or
    another file under the expected name."""


class WrongFileError(CorruptFileError):
    """A dataset file is well-formed but is not the published file it is named as: its size or checksum is not the
    published one (another dataset's file, the other split's, a subset or a re-encoding). Readers that know the
    published sums raise it unless their ``verify`` is off (``dataset.reader.verify=false``)."""


def first_line(err: BaseException) -> str:
    """The first non-blank line of ``err``'s message (its type's name if it has none): what a reader quotes of a
    library's error in its own one-line message (scipy, NumPy and zipfile put the gist first)."""
    lines = [line.strip() for line in str(err).splitlines() if line.strip()]
    return lines[0] if lines else type(err).__name__


def last_line(err: BaseException) -> str:
    """The last non-blank line of ``err``'s message (its type's name if it has none): torchvision's and medmnist's
    download errors list every mirror tried, and the last line says why the last one failed."""
    lines = [line.strip() for line in str(err).splitlines() if line.strip()]
    return lines[-1] if lines else type(err).__name__
