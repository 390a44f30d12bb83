"""The text wing: tokenised corpora in memory, with the word vectors text encoders embed them with.

``TextDataModule`` (``datamodule.py``, an ``InMemoryDataModule``) holds a ``Corpus`` (``corpus.py``: token ids over
a vocabulary) from a ``corpus`` reader, AGNews-8 (``agnews.py``: COREL's recipe; ``agnews_files.py``: Gulli's files
and the authors' release; ``agnews_cache.py``: the built corpus kept on disk; ``preprocess.py``: the supplement's
tokenising rules), and the vectors of its vocabulary from a ``vectors`` reader (``glove.py``). ``source=fake``
makes a class-dependent corpus and random vectors instead (``fake_corpus``, ``random_vectors``).
"""

from clusterable.data.text.datamodule import TextDataModule, fake_corpus, random_vectors

__all__ = ["TextDataModule", "fake_corpus", "random_vectors"]
