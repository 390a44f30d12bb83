"""The errors of data that cannot be read: one family, so that the train entry point catches them all at once.

Their messages are one line each (the entry point prints ``error: <message>`` and stops): what is wrong, the
absolute path of the file or folder, and what to do about it.
"""

from __future__ import annotations


class DatasetError(Exception):
    """A dataset cannot be read: missing or corrupt files. The message is one line, meant for the user."""


class DatasetNotFoundError(DatasetError, FileNotFoundError):
    """The dataset's files are not on disk and could not be downloaded."""


class CorruptFileError(DatasetError):
    """A dataset file (or its archive) is on disk but is not what its format promises: truncated, garbled, or
    another file under the expected name."""
