"""Datasets: in-memory splits, real on-disk readers and synthetic stand-ins."""

from clusterable.data.datamodule import InMemoryDataModule, TensorBatches, make_fake, split_off
from clusterable.data.errors import CorruptFileError, DatasetError, DatasetNotFoundError

__all__ = [
    "CorruptFileError",
    "DatasetError",
    "DatasetNotFoundError",
    "InMemoryDataModule",
    "TensorBatches",
    "make_fake",
    "split_off",
]
