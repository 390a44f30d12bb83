"""The four deep-metric-learning image datasets, read from their official file lists.

Each reader returns a ``RetrievalSet``: every image's path, integer label and part (``train`` / ``test``; In-Shop
``train`` / ``query`` / ``gallery``). The splits are the class-disjoint ones of the metric-learning literature
(Oh Song et al. 2016; Law et al. 2017; Boudiaf et al. 2020, whose ``prepare_data.py`` in
``jeromerony/dml_cross_entropy`` this follows), never the datasets' classification splits:

=========  ==============================================  =================================================
reader     files below ``root``                             split
=========  ==============================================  =================================================
cub200     ``CUB_200_2011/images.txt``,                     classes 1-100 train (5,864 images), 101-200 test
           ``CUB_200_2011/image_class_labels.txt``,         (5,924); ``train_test_split.txt`` (the
           ``CUB_200_2011/images/``                         classification split) is not used
cars196    ``cars_annos.mat``, ``car_ims/``                 classes 1-98 train (8,054), 99-196 test (8,131),
                                                            by the ``class`` field (not the ``test`` flag)
sop        ``Stanford_Online_Products/Ebay_{train,test}     59,551 train images of 11,318 products, 60,502
           .txt`` and the image folders beside them         test of 11,316 others
inshop     ``list_eval_partition.txt``, ``img/``            25,882 train images of 3,997 items; 14,218 query
                                                            and 12,612 gallery of 3,985 others
=========  ==============================================  =================================================

Labels: training labels are 0 .. K-1 (K training classes, the datamodule's ``num_classes``); test labels are
the classes' own ids (CUB 100-199, Cars 98-195, SOP ``class_id - 1``), disjoint from the training ones, and
need not be below K. After reading, each part's size is checked against ``expected_sizes`` (one line with
both numbers: a different or incomplete file list) and the parts' classes against each other (disjoint).

No reader downloads anything: Cars-196's original URLs are dead and In-Shop lives on a Google Drive; a missing
file fails with one line naming it, the folder to put it in and where the dataset can be obtained.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType

import numpy as np
import torch

from clusterable.data.errors import CorruptFileError, DatasetError, DatasetNotFoundError, first_line

__all__ = ["STANDARD_SIZES", "RetrievalSet", "read_cars196", "read_cub200", "read_inshop", "read_sop"]

# The standard split sizes (Boudiaf et al. 2020, Table 1 and prepare_data.py; Oh Song et al. 2016 for SOP; Liu
# et al. 2016 for In-Shop), the default of every reader's `expected_sizes`.
STANDARD_SIZES: Mapping[str, Mapping[str, int]] = MappingProxyType(
    {
        "cub200": MappingProxyType({"train": 5864, "test": 5924}),
        "cars196": MappingProxyType({"train": 8054, "test": 8131}),
        "sop": MappingProxyType({"train": 59551, "test": 60502}),
        "inshop": MappingProxyType({"train": 25882, "query": 14218, "gallery": 12612}),
    }
)

WHERE = {
    "cub200": "https://www.vision.caltech.edu/datasets/cub_200_2011/ (CUB_200_2011.tgz, unpacked here)",
    "cars196": (
        "the Stanford Cars dataset (car_ims.tgz unpacked here, and cars_annos.mat); its original site "
        "ai.stanford.edu/~jkrause/cars/car_dataset.html is offline, so take both files from a mirror"
    ),
    "sop": "https://cvgl.stanford.edu/projects/lifted_struct/ (Stanford_Online_Products.zip, unpacked here)",
    "inshop": (
        "the DeepFashion In-Shop Clothes Retrieval Benchmark's Google Drive, linked from "
        "https://mmlab.ie.cuhk.edu.hk/projects/DeepFashion/InShopRetrieval.html (Img/img.zip unpacked here, "
        "and Eval/list_eval_partition.txt)"
    ),
}
DISPLAY = {
    "cub200": "CUB-200-2011",
    "cars196": "Cars-196",
    "sop": "Stanford Online Products",
    "inshop": "In-Shop",
}


@dataclass(frozen=True)
class RetrievalSet:
    """A dataset's images and how they split.

    Attributes:
        name: the reader's key (``cub200``, ``cars196``, ``sop``, ``inshop``).
        root: the dataset folder the lists were read from (``dataset.root``).
        paths: (N,) every image file, in the order of the lists.
        labels: (N,) long class ids; training ones in [0, ``num_train_classes``).
        part: (N,) long, index into ``parts`` of each image's part.
        parts: the parts' names: ``("train", "test")`` or ``("train", "query", "gallery")``.
    """

    name: str
    root: Path
    paths: list[Path]
    labels: torch.Tensor
    part: torch.Tensor
    parts: tuple[str, ...]

    @property
    def display_name(self) -> str:
        return DISPLAY.get(self.name, self.name)

    def rows(self, *parts: str) -> torch.Tensor:
        """(M,) long: the rows of the images in any of ``parts``, in list order."""
        codes = torch.tensor([self.parts.index(p) for p in parts], dtype=torch.long)
        return torch.nonzero(torch.isin(self.part, codes)).squeeze(1)

    @property
    def num_train_classes(self) -> int:
        return int(torch.unique(self.labels[self.rows("train")]).numel())


def _parts(*parts: str) -> Callable[[Callable[..., RetrievalSet]], Callable[..., RetrievalSet]]:
    """Record on a reader the parts it returns (``reader.parts``), so that a fake stand-in can have the same."""

    def mark(reader: Callable[..., RetrievalSet]) -> Callable[..., RetrievalSet]:
        reader.parts = parts  # type: ignore[attr-defined]
        return reader

    return mark


@_parts("train", "test")
def read_cub200(root: str | Path, expected_sizes: Mapping[str, int] | None = STANDARD_SIZES["cub200"]) -> RetrievalSet:
    """CUB-200-2011, class-disjoint: classes 1-100 train, 101-200 test (labels ``class_id - 1``).

    Args:
        root: the folder holding ``CUB_200_2011/`` (``images.txt``, ``image_class_labels.txt``, ``images/``).
        expected_sizes: ``{"train": 5864, "test": 5924}`` (the standard split); None skips the check.

    Raises:
        DatasetNotFoundError: a list file or the image folder is missing.
        CorruptFileError: a list file is not in its format (line number named).
        DatasetError: the sizes are not ``expected_sizes``, or the parts share a class.
    """
    root = Path(root)
    base = root / "CUB_200_2011"
    _require("cub200", root, [base / "images.txt", base / "image_class_labels.txt", base / "images"])
    images = dict(_columns(base / "images.txt", 2, "image_id path"))
    classes = dict(_columns(base / "image_class_labels.txt", 2, "image_id class_id"))
    if set(images) != set(classes):
        missing = sorted(set(images) ^ set(classes), key=_natural)[:3]
        raise CorruptFileError(
            f"CUB-200-2011 files {base / 'images.txt'} and {base / 'image_class_labels.txt'} list different "
            f"image ids (e.g. {', '.join(missing)}); replace them with the dataset's own"
        )
    ids = sorted(images, key=_natural)
    labels = [_int(classes[i], base / "image_class_labels.txt", "class_id") - 1 for i in ids]
    paths = [base / "images" / images[i] for i in ids]
    # Boudiaf et al.: label < 100 -> train (their label is the class folder's number - 1, the same thing).
    part = [0 if label < 100 else 1 for label in labels]
    return _finish("cub200", root, paths, labels, part, ("train", "test"), expected_sizes)


@_parts("train", "test")
def read_cars196(
    root: str | Path, expected_sizes: Mapping[str, int] | None = STANDARD_SIZES["cars196"]
) -> RetrievalSet:
    """Cars-196, class-disjoint: classes 1-98 train, 99-196 test (labels ``class - 1``), by the ``class`` field of
    ``cars_annos.mat``'s ``annotations`` (the ``test`` flag is the classification split and is ignored).

    Args:
        root: the folder holding ``cars_annos.mat`` and ``car_ims/`` (the paths in the .mat are relative to it).
        expected_sizes: ``{"train": 8054, "test": 8131}``; None skips the check.

    Raises:
        DatasetNotFoundError, CorruptFileError, DatasetError: as ``read_cub200``.
    """
    from scipy.io import loadmat

    root = Path(root)
    mat_path = root / "cars_annos.mat"
    _require("cars196", root, [mat_path, root / "car_ims"])
    try:
        annotations = loadmat(mat_path, squeeze_me=True, struct_as_record=True)["annotations"]
    except KeyError:
        raise CorruptFileError(
            f"Cars-196 file {mat_path.resolve()} has no 'annotations' struct array; replace it with the dataset's "
            "cars_annos.mat"
        ) from None
    except Exception as err:  # scipy raises ValueError, TypeError, MatReadError ... on a file that is not a .mat
        raise CorruptFileError(
            f"Cars-196 file {mat_path.resolve()} cannot be read as a MATLAB file ({type(err).__name__}: "
            f"{first_line(err)}); replace it with the dataset's cars_annos.mat"
        ) from None
    annotations = np.atleast_1d(annotations)
    fields = annotations.dtype.names or ()
    for field in ("relative_im_path", "class"):
        if field not in fields:
            raise CorruptFileError(
                f"Cars-196 file {mat_path.resolve()}: its annotations have no field '{field}' (fields: "
                f"{', '.join(fields) or 'none'}); replace it with the dataset's cars_annos.mat"
            )
    paths = [root / str(p).strip() for p in annotations["relative_im_path"]]
    labels = [int(np.asarray(c).item()) - 1 for c in annotations["class"]]
    part = [0 if label < 98 else 1 for label in labels]  # Boudiaf et al.: label < 98 -> train
    return _finish("cars196", root, paths, labels, part, ("train", "test"), expected_sizes)


@_parts("train", "test")
def read_sop(root: str | Path, expected_sizes: Mapping[str, int] | None = STANDARD_SIZES["sop"]) -> RetrievalSet:
    """Stanford Online Products: ``Ebay_train.txt`` (11,318 products) and ``Ebay_test.txt`` (11,316 others).

    Each list has a header line, then ``image_id class_id super_class_id path`` (path relative to
    ``Stanford_Online_Products/``). Labels are ``class_id - 1``: 0 .. 11,317 for training, and the test products'
    own (disjoint) ids.

    Args:
        root: the folder holding ``Stanford_Online_Products/``.
        expected_sizes: ``{"train": 59551, "test": 60502}``; None skips the check.
    """
    root = Path(root)
    base = root / "Stanford_Online_Products"
    lists = [base / "Ebay_train.txt", base / "Ebay_test.txt"]
    _require("sop", root, lists)
    paths, labels, part = [], [], []
    for code, path in enumerate(lists):
        for _, class_id, _, relative in _columns(path, 4, "image_id class_id super_class_id path", header=1):
            paths.append(base / relative)
            labels.append(_int(class_id, path, "class_id") - 1)
            part.append(code)
    return _finish("sop", root, paths, labels, part, ("train", "test"), expected_sizes)


@_parts("train", "query", "gallery")
def read_inshop(root: str | Path, expected_sizes: Mapping[str, int] | None = STANDARD_SIZES["inshop"]) -> RetrievalSet:
    """DeepFashion In-Shop: ``list_eval_partition.txt`` (its first line the count, its second a header, then
    ``image_name item_id evaluation_status`` with status train / query / gallery; paths relative to ``root``).

    Items become integers in order of first appearance in the file (Boudiaf et al.'s ``prepare_data.py``), the
    training items first: the training items are 0 .. 3,996 in the order they first appear, the query and
    gallery items 3,997 .. in theirs (the same partition into items as numbering over the whole file, with
    training labels below ``num_classes``).

    Args:
        root: the folder holding ``list_eval_partition.txt`` and ``img/``.
        expected_sizes: ``{"train": 25882, "query": 14218, "gallery": 12612}``; None skips the check.
    """
    root = Path(root)
    listing = root / "list_eval_partition.txt"
    _require("inshop", root, [listing, root / "img"])
    rows = _columns(listing, 3, "image_name item_id evaluation_status", header=2)
    with open(listing, encoding="utf-8") as f:
        count = f.readline().strip()
    if not count.isdigit() or int(count) != len(rows):
        raise CorruptFileError(
            f"In-Shop file {listing.resolve()} says it lists {count!r} images on its first line but lists "
            f"{len(rows):,}; replace it with the dataset's list_eval_partition.txt"
        )
    parts = ("train", "query", "gallery")
    codes = []
    for number, (_, _, status) in enumerate(rows, start=3):
        if status not in parts:
            raise CorruptFileError(
                f"In-Shop file {listing.resolve()}, line {number}: evaluation_status {status!r} is not one of "
                "train, query, gallery"
            )
        codes.append(parts.index(status))
    items: dict[str, int] = {}
    for train_first in (True, False):
        for (_, item, _), code in zip(rows, codes, strict=True):
            if (code == 0) == train_first and item not in items:
                items[item] = len(items)
    paths = [root / name for name, _, _ in rows]
    labels = [items[item] for _, item, _ in rows]
    return _finish("inshop", root, paths, labels, codes, parts, expected_sizes)


def _require(name: str, root: Path, needed: list[Path]) -> None:
    missing = [p for p in needed if not p.exists()]
    if not missing:
        return
    folder = root.resolve()
    names = ", ".join(str(p.relative_to(root)) + ("/" if p.suffix == "" else "") for p in missing)
    raise DatasetNotFoundError(
        f"{DISPLAY[name]} not found in {folder} (missing: {names}). Put the dataset's files there, or set "
        f"dataset.root=DIR to read them from DIR; it can be obtained from {WHERE[name]}. Nothing is downloaded. "
        "dataset.source=fake runs offline on a synthetic stand-in."
    )


def _columns(path: Path, n: int, layout: str, header: int = 0) -> list[list[str]]:
    """The lines of ``path`` after ``header`` lines, each split into ``n`` whitespace-separated fields; blank lines
    skipped. CorruptFileError naming the line if one has another number of fields."""
    rows = []
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, start=1):
            if number <= header or not line.strip():
                continue
            fields = line.split()
            if len(fields) != n:
                raise CorruptFileError(
                    f"{path.resolve()}, line {number}: expected {n} fields ({layout}), found {len(fields)} "
                    f"({line.strip()[:60]!r}); replace the file with the dataset's own"
                )
            rows.append(fields)
    return rows


def _int(value: str, path: Path, field: str) -> int:
    try:
        return int(value)
    except ValueError:
        raise CorruptFileError(f"{path.resolve()}: {field} {value!r} is not an integer") from None


def _natural(key: str) -> tuple[int, str]:
    return (int(key), "") if key.isdigit() else (1 << 62, key)


def _finish(
    name: str,
    root: Path,
    paths: list[Path],
    labels: list[int],
    part: list[int],
    parts: tuple[str, ...],
    expected_sizes: Mapping[str, int] | None,
) -> RetrievalSet:
    """Check sizes and class-disjointness; build the ``RetrievalSet``."""
    data = RetrievalSet(
        name=name,
        root=root,
        paths=paths,
        labels=torch.tensor(labels, dtype=torch.long),
        part=torch.tensor(part, dtype=torch.long),
        parts=parts,
    )
    where = _list_files(name, root)
    if expected_sizes is not None:
        unknown = sorted(set(expected_sizes) - set(parts))
        if unknown:
            raise ValueError(
                f"expected_sizes names {', '.join(unknown)}, which {DISPLAY[name]} does not have; its parts are "
                f"{', '.join(parts)}"
            )
        for p, expected in expected_sizes.items():
            found = len(data.rows(p))
            if found != expected:
                raise DatasetError(
                    f"{DISPLAY[name]} in {root.resolve()}: the {p} split has {found:,} images, expected {expected:,} "
                    f"(dataset.reader.expected_sizes.{p}): check {where} (another version of the lists, or cut "
                    "short?)"
                )
    train = set(data.labels[data.rows("train")].tolist())
    evaluation = set(data.labels[data.rows(*parts[1:])].tolist())
    shared = sorted(train & evaluation)
    if shared:
        raise DatasetError(
            f"{DISPLAY[name]} in {root.resolve()}: the training and {'/'.join(parts[1:])} images share "
            f"{len(shared):,} classes (e.g. label {shared[0]}), but the split must be class-disjoint: check {where} "
            "(not the standard lists?)"
        )
    return data


def _list_files(name: str, root: Path) -> str:
    return {
        "cub200": f"{root / 'CUB_200_2011' / 'image_class_labels.txt'}",
        "cars196": f"{root / 'cars_annos.mat'}",
        "sop": f"{root / 'Stanford_Online_Products'}/Ebay_{{train,test}}.txt",
        "inshop": f"{root / 'list_eval_partition.txt'}",
    }[name]
