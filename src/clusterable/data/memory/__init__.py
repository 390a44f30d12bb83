"""The in-memory wing: datasets small enough to hold as tensors on the training device.

``InMemoryDataModule`` (``datamodule.py``) batches the splits a *reader* returns by indexing them; the readers,
one module each: ``digits`` (scikit-learn's 8x8 digits), ``mnist`` (MNIST and Fashion-MNIST idx files),
``medmnist`` (OrganAMNIST's ``.npz``), ``synthetic`` (the CSRL Gaussian lines) and ``tabular`` (iris, penguins, the
MNIST and digits subsets). ``source=fake`` replaces any reader with Gaussian blobs of the same shape (``make_fake``).
"""

from clusterable.data.memory.datamodule import InMemoryDataModule, TensorBatches, make_fake

__all__ = ["InMemoryDataModule", "TensorBatches", "make_fake"]
