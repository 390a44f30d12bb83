"""The image-folder wing: deep-metric-learning datasets of image files (CUB-200-2011, Cars-196, Stanford Online
Products, In-Shop), read from their official file lists.

``ImageDataModule`` (``datamodule.py``) takes a reader of ``retrieval_sets`` (the class-disjoint splits, sizes
asserted), decodes every image once into a memory-mapped cache (``image_cache``), holds out validation classes
(``validation``) and turns batches of cached pixels into views on the training device (``augment``: the
``dataset.augment`` node). ``source=fake`` makes small class-coloured images in memory instead.
"""

from clusterable.data.folders.datamodule import ImageDataModule

__all__ = ["ImageDataModule"]
