"""Datasets: in-memory splits, real on-disk readers and synthetic stand-ins."""

from clusterable.data.datamodule import InMemoryDataModule, TensorBatches, make_fake, split_off

__all__ = ["InMemoryDataModule", "TensorBatches", "make_fake", "split_off"]
