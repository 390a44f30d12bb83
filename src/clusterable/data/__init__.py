"""Datasets, in three wings that share the errors, the splits and the batch sampler kept here at the root.

- ``memory``: datasets held as tensors on the training device (``InMemoryDataModule``; digits, MNIST, Fashion-MNIST,
  OrganAMNIST, the CSRL synthetic and tabular sets).
- ``folders``: deep-metric-learning image folders (``ImageDataModule``; CUB-200-2011, Cars-196, SOP, In-Shop),
  decoded once into a memory-mapped cache and augmented on the training device.
- ``text``: tokenised corpora and their word vectors (``TextDataModule``; AGNews-8 with GloVe).

Shared: ``errors`` (``DatasetError`` and its one-line family, what every reader raises), ``splits`` (``Split``,
``SPLITS``, ``split_off``), ``sampling`` (``Sampler``: the ``dataset.sampler`` node; class-balanced batches) and
``checks``. ``docs/data.md`` lists every dataset config, its files and what is checked.
"""

from clusterable.data.errors import CorruptFileError, DatasetError, DatasetNotFoundError, WrongFileError

__all__ = ["CorruptFileError", "DatasetError", "DatasetNotFoundError", "WrongFileError"]
