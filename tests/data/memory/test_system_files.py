"""Fashion-MNIST where Debian's ``dataset-fashion-mnist`` puts it (the four ``.gz`` files, flat), found after
``dataset.root`` without a setting, read in memory (the system folder is never written), each file's path and
SHA-256 recorded. The files are the conftest's tiny ones, read with ``verify=False`` (test_published.py checks the
real package's files against the published checksums)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pytest

from clusterable.data.errors import CorruptFileError, DatasetNotFoundError
from clusterable.data.memory.mnist import read_mnist
from clusterable.data.memory.tabular import read_mnist_subset

FILES = [
    "train-images-idx3-ubyte",
    "train-labels-idx1-ubyte",
    "t10k-images-idx3-ubyte",
    "t10k-labels-idx1-ubyte",
]


def snapshot(folder: Path) -> dict[str, tuple[int, int]]:
    """Every entry below ``folder`` with its size and modification time: what a write would change."""
    return {str(p.relative_to(folder)): (p.stat().st_size, p.stat().st_mtime_ns) for p in folder.rglob("*")}


@pytest.fixture
def system(tmp_path: Path, write_mnist) -> tuple[Path, dict]:
    folder = tmp_path / "usr" / "share" / "datasets" / "fashion-mnist"
    arrays = write_mnist(folder, "fashion_mnist", compress=True, flat=True)
    folder.chmod(0o555)
    return folder, arrays


def test_the_system_folder_is_read_after_the_root_and_never_written(tmp_path: Path, system) -> None:
    folder, arrays = system
    before = snapshot(folder)
    splits = read_mnist(
        tmp_path / "empty", "fashion_mnist", val_size=10, download=False, system_root=folder, verify=False
    )
    assert snapshot(folder) == before and not (tmp_path / "empty").exists()
    test = splits["test"]
    assert np.array_equal((test["inputs"][:, 0] * 255).round().numpy().astype(int), arrays["test_images"])
    assert np.array_equal(test["labels"].numpy(), arrays["test_labels"])
    assert len(splits["train"]["labels"]) + len(splits["val"]["labels"]) == len(arrays["train_labels"])
    files = splits.notes["files"]
    assert sorted(files) == sorted(FILES)
    for name, record in files.items():
        path = folder / f"{name}.gz"
        assert record == {
            "path": str(path.resolve()),
            "sha256": hashlib.sha256(path.read_bytes()).hexdigest(),
        }


def test_the_root_comes_first_in_either_layout(tmp_path: Path, system, write_mnist) -> None:
    folder, _ = system
    write_mnist(tmp_path / "tv", "fashion_mnist")  # torchvision's layout
    tv = read_mnist(tmp_path / "tv", "fashion_mnist", val_size=10, download=False, system_root=folder, verify=False)
    assert all(r["path"].startswith(str((tmp_path / "tv").resolve())) for r in tv.notes["files"].values())
    write_mnist(tmp_path / "flat", "fashion_mnist", flat=True)  # the four files in the root itself
    flat = read_mnist(tmp_path / "flat", "fashion_mnist", val_size=10, download=False, system_root=folder, verify=False)
    assert all(r["path"].startswith(str((tmp_path / "flat").resolve())) for r in flat.notes["files"].values())


def test_csrl_fashion_subset_reads_the_system_folder_too(tmp_path: Path, system) -> None:
    folder, _ = system
    splits = read_mnist_subset(
        tmp_path / "none",
        variant="fashion_mnist",
        classes=(0, 1, 9),
        per_class=2,
        download=False,
        train_file="train",
        test_per_class=1,
        system_root=folder,
        verify=False,
    )
    assert len(splits["train"]["labels"]) == 6 and sorted(splits.notes["files"]) == sorted(FILES)


def test_nothing_anywhere_names_every_place_searched(tmp_path: Path) -> None:
    with pytest.raises(DatasetNotFoundError) as caught:
        read_mnist(tmp_path / "root", "fashion_mnist", download=False, system_root=tmp_path / "system")
    message = str(caught.value)
    assert "Fashion-MNIST not found in" in message and "\n" not in message
    assert f"Also searched (flat layout): {(tmp_path / 'root').resolve()}, {tmp_path / 'system'}" in message
    assert "apt-get install dataset-fashion-mnist" in message


def test_a_corrupt_system_archive_is_one_line(tmp_path: Path, write_mnist) -> None:
    folder = tmp_path / "system"
    write_mnist(folder, "fashion_mnist", compress=True, flat=True)
    archive = folder / "train-labels-idx1-ubyte.gz"
    archive.write_bytes(archive.read_bytes()[:20])
    with pytest.raises(
        CorruptFileError,
        match=r"^Fashion-MNIST file .*train-labels-idx1-ubyte.gz is corrupt: it "
        r"cannot be unpacked \(.*\); reinstall its package$",
    ):
        read_mnist(tmp_path / "root", "fashion_mnist", val_size=10, download=False, system_root=folder)


def test_a_run_records_the_files_it_read(train, tmp_path: Path, write_mnist) -> None:
    folder = tmp_path / "system"
    write_mnist(folder, "fashion_mnist", compress=True, flat=True)
    result = train(
        "dataset=fashion_mnist",
        f"dataset.reader.system_root={folder}",
        f"dataset.root={tmp_path / 'no'}",
        "dataset.reader.val_size=10",
        "dataset.reader.verify=false",
        "trainer.max_epochs=1",
        "logger=none",
        "evaluator=[classification]",
        "model.hidden=[8,8]",
    )
    assert result.code == 0, result.err
    record = json.loads(next(train.outputs.rglob("metrics.json")).read_text())
    files = record["data_notes"]["files"]
    assert files["t10k-images-idx3-ubyte"]["path"] == str((folder / "t10k-images-idx3-ubyte.gz").resolve())
    assert len(files["t10k-images-idx3-ubyte"]["sha256"]) == 64
