"""The deep-metric-learning readers on tiny copies of CUB-200-2011, Cars-196, SOP and In-Shop written in their real
on-disk formats (JPEG files of varied sizes, the official lists with their headers, ``cars_annos.mat`` as a MATLAB
struct array): class-disjoint splits, labels, sizes checked, one-line errors for missing or wrong files.

The writers are imported by ``test_datamodule.py`` and ``test_image_cache.py``, which read the same copies."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import scipy.io
import yaml
from PIL import Image

from clusterable.config import CONFIG_DIR
from clusterable.data.errors import CorruptFileError, DatasetError, DatasetNotFoundError
from clusterable.data.folders.retrieval_sets import (
    STANDARD_SIZES,
    read_cars196,
    read_cub200,
    read_inshop,
    read_sop,
)

CONF = Path(CONFIG_DIR) / "dataset"
# Varied sizes, portrait and landscape, so that canvases are padded and resizes keep or change the aspect ratio.
SHAPES = [(40, 60), (64, 48), (50, 50), (33, 70), (72, 40)]


def write_jpeg(path: Path, h: int, w: int, seed: int) -> None:
    """A smooth random RGB picture (a coarse random grid scaled up), so that JPEG keeps it close to the original."""
    rng = np.random.default_rng(seed)
    coarse = Image.fromarray(rng.integers(0, 256, (4, 4, 3), dtype=np.uint8))
    path.parent.mkdir(parents=True, exist_ok=True)
    coarse.resize((w, h), Image.BILINEAR).save(path, quality=95)


def write_cub200(root: Path, per_class: dict[int, int] | None = None) -> dict:
    """``root/CUB_200_2011/{images.txt, image_class_labels.txt, train_test_split.txt, images/...}``.

    Default classes: 1-3 train (3, 2, 4 images), 101-102 test (3, 2). Returns the expected ``paths``, ``labels``
    and ``part`` (0 train, 1 test) in image-id order.
    """
    per_class = per_class or {1: 3, 2: 2, 3: 4, 101: 3, 102: 2}
    base = root / "CUB_200_2011"
    images, labels_lines, split_lines, expected = [], [], [], {"paths": [], "labels": [], "part": []}
    image_id = 0
    for c, count in per_class.items():
        folder = f"{c:03d}.Bird_{c}"
        for k in range(count):
            image_id += 1
            relative = f"{folder}/Bird_{c}_{k:04d}_{image_id}.jpg"
            h, w = SHAPES[image_id % len(SHAPES)]
            write_jpeg(base / "images" / relative, h, w, seed=image_id)
            images.append(f"{image_id} {relative}")
            labels_lines.append(f"{image_id} {c}")
            split_lines.append(f"{image_id} {k % 2}")  # the classification split: must be ignored
            expected["paths"].append(base / "images" / relative)
            expected["labels"].append(c - 1)
            expected["part"].append(0 if c <= 100 else 1)
    (base / "images.txt").write_text("\n".join(images) + "\n")
    (base / "image_class_labels.txt").write_text("\n".join(labels_lines) + "\n")
    (base / "train_test_split.txt").write_text("\n".join(split_lines) + "\n")
    return expected


CARS_FIELDS = ("relative_im_path", "bbox_x1", "bbox_y1", "bbox_x2", "bbox_y2", "class", "test")


def write_cars196(root: Path, per_class: dict[int, int] | None = None) -> dict:
    """``root/cars_annos.mat`` (a 1 x N struct array ``annotations`` with the real file's fields, in its order, and
    ``class_names``) and ``root/car_ims/NNNNNN.jpg``. Default classes 1-2 train, 99-101 test; the ``test`` flag
    alternates (the classification split, to be ignored)."""
    per_class = per_class or {1: 3, 2: 2, 99: 2, 100: 3, 101: 2}
    rows, expected = [], {"paths": [], "labels": [], "part": []}
    for c, count in per_class.items():
        for _ in range(count):
            n = len(rows) + 1
            relative = f"car_ims/{n:06d}.jpg"
            h, w = SHAPES[n % len(SHAPES)]
            write_jpeg(root / relative, h, w, seed=100 + n)
            rows.append((relative, 1, 2, w - 1, h - 1, c, n % 2))
            expected["paths"].append(root / relative)
            expected["labels"].append(c - 1)
            expected["part"].append(0 if c <= 98 else 1)
    annotations = np.empty((1, len(rows)), dtype=[(f, "O") for f in CARS_FIELDS])
    for i, (relative, x1, y1, x2, y2, c, test) in enumerate(rows):
        annotations[0, i] = (
            np.array([relative]),
            np.array([[x1]], dtype=np.uint8),
            np.array([[y1]], dtype=np.uint8),
            np.array([[x2]], dtype=np.uint16),
            np.array([[y2]], dtype=np.uint16),
            np.array([[c]], dtype=np.uint8),
            np.array([[test]], dtype=np.uint8),
        )
    class_names = np.empty((1, 196), dtype=object)
    class_names[0, :] = [f"Car model {k}" for k in range(1, 197)]
    scipy.io.savemat(root / "cars_annos.mat", {"annotations": annotations, "class_names": class_names})
    return expected


def write_sop(root: Path, train: dict[int, int] | None = None, test: dict[int, int] | None = None) -> dict:
    """``root/Stanford_Online_Products/Ebay_{train,test}.txt`` (header, then ``image_id class_id super_class_id
    path``) and the images in their super-class folders. Default products 1-3 train, 4-5 test."""
    train = train or {1: 2, 2: 3, 3: 2}
    test = test or {4: 3, 5: 2}
    base = root / "Stanford_Online_Products"
    expected = {"paths": [], "labels": [], "part": []}
    n = 0
    for part, (name, classes) in enumerate((("Ebay_train.txt", train), ("Ebay_test.txt", test))):
        lines = ["image_id class_id super_class_id path"]
        for image_id, (c, _) in enumerate(((c, k) for c, k in classes.items() for _ in range(k)), start=1):
            n += 1
            super_class = 1 + c % 2
            relative = f"{['bicycle', 'cabinet'][super_class - 1]}_final/{111085122870 + c}_{n}.JPG"
            h, w = SHAPES[n % len(SHAPES)]
            write_jpeg(base / relative, h, w, seed=200 + n)
            lines.append(f"{image_id} {c} {super_class} {relative}")
            expected["paths"].append(base / relative)
            expected["labels"].append(c - 1)
            expected["part"].append(part)
        base.mkdir(parents=True, exist_ok=True)
        (base / name).write_text("\n".join(lines) + "\n")
    return expected


def write_inshop(root: Path) -> dict:
    """``root/list_eval_partition.txt`` (the count, a header, then ``image_name item_id evaluation_status``) and
    ``root/img/...``. Items interleave in the file: id_00000002 (query/gallery) comes before the training ones."""
    rows = [
        ("WOMEN/Dresses/id_00000002", "01_1_front", "query"),
        ("WOMEN/Dresses/id_00000002", "01_2_side", "gallery"),
        ("MEN/Denim/id_00000080", "01_1_front", "train"),
        ("MEN/Denim/id_00000080", "01_2_side", "train"),
        ("WOMEN/Dresses/id_00000002", "02_1_front", "gallery"),
        ("WOMEN/Tees/id_00000007", "01_1_front", "train"),
        ("WOMEN/Tees/id_00000007", "01_3_back", "train"),
        ("MEN/Tees/id_00000011", "01_1_front", "query"),
        ("MEN/Tees/id_00000011", "01_2_side", "gallery"),
        ("WOMEN/Tees/id_00000007", "01_4_full", "train"),
    ]
    lines = [str(len(rows)), "image_name item_id evaluation_status"]
    expected = {"paths": [], "labels": [], "part": []}
    # Training items first, each part's items in order of first appearance: 80 -> 0, 7 -> 1, then 2 -> 2, 11 -> 3.
    numbers = {"id_00000080": 0, "id_00000007": 1, "id_00000002": 2, "id_00000011": 3}
    for n, (folder, image, status) in enumerate(rows):
        name = f"img/{folder}/{image}.jpg"
        write_jpeg(root / name, 48 + 8 * (n % 2), 48, seed=300 + n)  # 48 x 48 and 56 x 48
        item = folder.rsplit("/", 1)[1]
        lines.append(f"{name} {item} {status}")
        expected["paths"].append(root / name)
        expected["labels"].append(numbers[item])
        expected["part"].append(("train", "query", "gallery").index(status))
    (root / "list_eval_partition.txt").write_text("\n".join(lines) + "\n")
    return expected


def sizes_of(expected: dict, parts: tuple[str, ...] = ("train", "test")) -> dict[str, int]:
    return {p: expected["part"].count(k) for k, p in enumerate(parts)}


READERS = {
    "cub200": (read_cub200, write_cub200, ("train", "test")),
    "cars196": (read_cars196, write_cars196, ("train", "test")),
    "sop": (read_sop, write_sop, ("train", "test")),
    "inshop": (read_inshop, write_inshop, ("train", "query", "gallery")),
}


# ------------------------------------------------------------------------------------------------ the splits


@pytest.mark.parametrize("name", sorted(READERS))
def test_reader_gives_the_lists_paths_labels_and_parts(tmp_path: Path, name: str) -> None:
    read, write, parts = READERS[name]
    expected = write(tmp_path)
    data = read(tmp_path, expected_sizes=sizes_of(expected, parts))
    assert data.name == name and data.parts == parts and data.root == tmp_path
    assert data.paths == expected["paths"]
    assert all(p.is_file() for p in data.paths)
    assert data.labels.tolist() == expected["labels"]
    assert data.part.tolist() == expected["part"]
    train = set(data.labels[data.rows("train")].tolist())
    assert train == set(range(len(train))), "training labels are 0 .. K-1"
    assert not train & set(data.labels[data.rows(*parts[1:])].tolist()), "class-disjoint"


def test_cub200_uses_the_class_split_not_train_test_split(tmp_path: Path) -> None:
    write_cub200(tmp_path)
    data = read_cub200(tmp_path, expected_sizes={"train": 9, "test": 5})
    assert sorted(set(data.labels[data.rows("test")].tolist())) == [100, 101]  # classes 101, 102: own ids
    assert data.num_train_classes == 3


def test_cars196_mat_has_the_real_layout_and_the_test_flag_is_ignored(tmp_path: Path) -> None:
    write_cars196(tmp_path)
    raw = scipy.io.loadmat(tmp_path / "cars_annos.mat")["annotations"]
    assert raw.shape == (1, 12) and raw.dtype.names == CARS_FIELDS
    assert raw[0, 0]["relative_im_path"][0] == "car_ims/000001.jpg" and raw[0, 0]["class"][0, 0] == 1
    data = read_cars196(tmp_path, expected_sizes={"train": 5, "test": 7})
    assert sorted(set(data.labels[data.rows("test")].tolist())) == [
        98,
        99,
        100,
    ]  # by class, whatever `test` says


def test_inshop_query_and_gallery_share_items_disjoint_from_training(tmp_path: Path) -> None:
    write_inshop(tmp_path)
    data = read_inshop(tmp_path, expected_sizes={"train": 5, "query": 2, "gallery": 3})
    query, gallery = data.labels[data.rows("query")], data.labels[data.rows("gallery")]
    assert set(query.tolist()) == set(gallery.tolist()) == {2, 3}
    assert data.num_train_classes == 2


def test_configs_expect_the_standard_sizes() -> None:
    for name, sizes in STANDARD_SIZES.items():
        config = yaml.safe_load((CONF / f"{name}.yaml").read_text())
        assert config["reader"]["expected_sizes"] == dict(sizes), name


# ------------------------------------------------------------------------------------------------ errors


@pytest.mark.parametrize(
    ("name", "missing"),
    [
        ("cub200", "CUB_200_2011/images.txt, CUB_200_2011/image_class_labels.txt, CUB_200_2011/images/"),
        ("cars196", "cars_annos.mat, car_ims/"),
        ("sop", "Stanford_Online_Products/Ebay_train.txt, Stanford_Online_Products/Ebay_test.txt"),
        ("inshop", "list_eval_partition.txt, img/"),
    ],
)
def test_missing_files_are_named_with_the_folder_and_where_to_get_them(tmp_path: Path, name: str, missing: str) -> None:
    read = READERS[name][0]
    with pytest.raises(DatasetNotFoundError) as info:
        read(tmp_path / "nowhere")
    message = str(info.value)
    assert "\n" not in message
    assert f"(missing: {missing})" in message
    assert str((tmp_path / "nowhere").resolve()) in message and "dataset.root" in message
    assert "obtained from" in message and "Nothing is downloaded" in message


def test_one_missing_list_is_named_alone(tmp_path: Path) -> None:
    write_sop(tmp_path)
    (tmp_path / "Stanford_Online_Products" / "Ebay_test.txt").unlink()
    with pytest.raises(DatasetNotFoundError, match=r"\(missing: Stanford_Online_Products/Ebay_test.txt\)"):
        read_sop(tmp_path)


@pytest.mark.parametrize("name", sorted(READERS))
def test_wrong_sizes_fail_with_both_numbers(tmp_path: Path, name: str) -> None:
    read, write, parts = READERS[name]
    sizes = sizes_of(write(tmp_path), parts)
    wrong = {**sizes, "train": sizes["train"] + 1000}
    with pytest.raises(DatasetError) as info:
        read(tmp_path, expected_sizes=wrong)
    message = str(info.value)
    assert "\n" not in message
    assert f"the train split has {sizes['train']:,} images, expected {sizes['train'] + 1000:,}" in message
    assert "dataset.reader.expected_sizes.train" in message


def test_the_standard_sizes_are_the_default(tmp_path: Path) -> None:
    write_cub200(tmp_path)
    with pytest.raises(DatasetError, match="the train split has 9 images, expected 5,864"):
        read_cub200(tmp_path)
    assert len(read_cub200(tmp_path, expected_sizes=None).paths) == 14


def test_unknown_part_in_expected_sizes_names_the_parameter(tmp_path: Path) -> None:
    write_inshop(tmp_path)
    with pytest.raises(ValueError, match=r"^expected_sizes names test, which In-Shop does not have"):
        read_inshop(tmp_path, expected_sizes={"test": 5})


def test_shared_classes_fail(tmp_path: Path) -> None:
    write_sop(tmp_path, train={1: 2, 2: 2}, test={2: 2, 3: 2})
    with pytest.raises(DatasetError, match="share 1 classes .* must be class-disjoint"):
        read_sop(tmp_path, expected_sizes=None)


def test_malformed_list_line_is_named(tmp_path: Path) -> None:
    write_cub200(tmp_path)
    listing = tmp_path / "CUB_200_2011" / "image_class_labels.txt"
    listing.write_text(listing.read_text().replace("2 1\n", "2 1 extra\n", 1))
    with pytest.raises(CorruptFileError, match=r"image_class_labels.txt, line 2: expected 2 fields"):
        read_cub200(tmp_path, expected_sizes=None)


def test_inshop_count_line_must_match(tmp_path: Path) -> None:
    write_inshop(tmp_path)
    listing = tmp_path / "list_eval_partition.txt"
    listing.write_text("52712\n" + listing.read_text().split("\n", 1)[1])
    with pytest.raises(CorruptFileError, match="says it lists '52712' images on its first line but lists 10"):
        read_inshop(tmp_path, expected_sizes=None)


def test_cars_file_that_is_not_a_mat_file(tmp_path: Path) -> None:
    write_cars196(tmp_path)
    (tmp_path / "cars_annos.mat").write_bytes(b"<html>404 Not Found</html>")
    with pytest.raises(CorruptFileError) as info:
        read_cars196(tmp_path)
    assert "cannot be read as a MATLAB file" in str(info.value) and "\n" not in str(info.value)
