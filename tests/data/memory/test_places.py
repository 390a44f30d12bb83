"""Where MNIST and Fashion-MNIST files are found, under which names, and what a lookup leaves behind.

- the mirrors' names (``train-images.idx3-ubyte``, with or without ``.gz``) are read in either layout;
- a place holding some of the four files is refused, naming the missing ones, rather than passed over;
- files there that look like the dataset's under other names are named: in the warning when another place's files
  are read, in the error when none are;
- a failed lookup (a download that fails) leaves no folder behind, and a read-only copy is read without a write.

The files are the conftest's tiny ones, read with ``verify=False`` (test_published.py checks the check).
"""

from __future__ import annotations

import gzip
import logging
from pathlib import Path
from urllib.error import URLError

import pytest
import torchvision

from clusterable.data.errors import DatasetNotFoundError
from clusterable.data.memory import mnist
from clusterable.data.splits import SplitsWithNotes

from .conftest import N_TEST, RAW_SUBDIR

FILES = mnist.expected_files("fashion_mnist")
DOTTED = {name: name.replace("-idx", ".idx") for name in FILES}  # train-images.idx3-ubyte


def read(root: Path, **kwargs) -> SplitsWithNotes:
    return mnist.read_mnist(root, "fashion_mnist", val_size=10, download=False, verify=False, **kwargs)


def read_from(splits: SplitsWithNotes) -> set[Path]:
    """The folders the files recorded in the notes were read from."""
    return {Path(record["path"]).parent for record in splits.notes["files"].values()}


def snapshot(folder: Path) -> dict[str, tuple[int, int]]:
    """Every entry below ``folder`` with its size and modification time: what a write would change."""
    return {str(p.relative_to(folder)): (p.stat().st_size, p.stat().st_mtime_ns) for p in folder.rglob("*")}


@pytest.fixture
def system(tmp_path: Path, write_mnist) -> Path:
    """A complete system copy (Debian's layout: the four archives, flat)."""
    folder = tmp_path / "system"
    write_mnist(folder, "fashion_mnist", compress=True, flat=True)
    return folder


def rename_to_mirror_names(folder: Path) -> None:
    for name in FILES:
        for suffix in ("", ".gz"):
            if (folder / f"{name}{suffix}").is_file():
                (folder / f"{name}{suffix}").rename(folder / f"{DOTTED[name]}{suffix}")


@pytest.mark.parametrize("compress", [False, True])
def test_the_mirrors_names_in_the_root_are_read_before_the_system_copy(
    tmp_path: Path, write_mnist, system: Path, compress: bool
) -> None:
    root = tmp_path / "mine"
    write_mnist(root, "fashion_mnist", compress=compress, flat=True)
    rename_to_mirror_names(root)
    splits = read(root, system_root=system)
    assert read_from(splits) == {root.resolve()}
    assert sorted(Path(r["path"]).name for r in splits.notes["files"].values()) == sorted(
        f"{DOTTED[n]}{'.gz' if compress else ''}" for n in FILES
    )
    assert len(splits["test"]["labels"]) == N_TEST


def test_the_mirrors_names_in_torchvisions_layout_are_read(tmp_path: Path, write_mnist, system: Path) -> None:
    write_mnist(tmp_path / "tv", "fashion_mnist")
    raw = tmp_path / "tv" / RAW_SUBDIR["fashion_mnist"]
    rename_to_mirror_names(raw)
    assert read_from(read(tmp_path / "tv", system_root=system)) == {raw.resolve()}


def test_the_publishers_name_comes_before_the_mirrors(tmp_path: Path, write_mnist) -> None:
    root = tmp_path / "both"
    write_mnist(root, "fashion_mnist", flat=True)
    for name in FILES:
        (root / f"{DOTTED[name]}.gz").write_bytes(gzip.compress((root / name).read_bytes()))
    assert sorted(Path(r["path"]).name for r in read(root).notes["files"].values()) == sorted(FILES)


def test_a_root_holding_some_of_the_files_is_refused_not_passed_over(tmp_path: Path, write_mnist, system: Path) -> None:
    root = tmp_path / "mine"
    write_mnist(root, "fashion_mnist", flat=True)
    (root / FILES[3]).unlink()
    (root / FILES[1]).rename(root / DOTTED[FILES[1]])
    with pytest.raises(DatasetNotFoundError) as info:
        read(root, system_root=system)
    name = FILES[3]
    assert str(info.value) == (
        f"Fashion-MNIST incomplete in {root.resolve()}: it has {FILES[0]}, {DOTTED[FILES[1]]}, {FILES[2]} but no "
        f"{name} or {name}.gz or {DOTTED[name]} or {DOTTED[name]}.gz; put the missing files there too, or move these "
        "away to read the files from the next place searched"
    )


def test_an_incomplete_system_copy_says_to_reinstall_it(tmp_path: Path, system: Path) -> None:
    (system / f"{FILES[0]}.gz").unlink()
    with pytest.raises(DatasetNotFoundError, match=r"^Fashion-MNIST incomplete in .*; reinstall its package$"):
        read(tmp_path / "empty", system_root=system)


def test_files_under_other_names_are_named_when_the_system_copy_is_read(
    tmp_path: Path, write_mnist, system: Path, caplog: pytest.LogCaptureFixture
) -> None:
    root = tmp_path / "mine"
    root.mkdir()
    (root / "train-images-idx3-ubyte (1).gz").write_bytes(b"a browser's second download")
    (root / "t10k-labels-idx1-ubyte").mkdir()  # Kaggle's archive unpacks each file into a folder of its name
    (root / "notes.txt").write_text("not an idx file: not named")
    with caplog.at_level(logging.WARNING, logger=mnist.__name__):
        splits = read(root, system_root=system)
    assert read_from(splits) == {system.resolve()}
    (warning,) = [r.getMessage() for r in caplog.records]
    assert warning.startswith(
        f"Not read, as their names are not Fashion-MNIST's: {(root / 't10k-labels-idx1-ubyte').resolve()}/, "
        f"{(root / 'train-images-idx3-ubyte (1).gz').resolve()} (rename them to {', '.join(FILES)}"
    )
    assert warning.endswith(f"Reading {system.resolve()} instead.") and "notes.txt" not in warning


def test_files_under_other_names_are_named_when_nothing_is_found(tmp_path: Path) -> None:
    root = tmp_path / "mine"
    root.mkdir()
    (root / "Train-Images-Idx3-Ubyte.zip").write_bytes(b"zip")
    with pytest.raises(DatasetNotFoundError) as info:
        read(root, system_root=tmp_path / "no-system")
    message = str(info.value)
    assert message.startswith("Fashion-MNIST not found in") and "\n" not in message
    assert f"Not read, as their names are not Fashion-MNIST's: {(root / 'Train-Images-Idx3-Ubyte.zip').resolve()} " in (
        message
    )


def test_a_failed_lookup_leaves_no_folder_behind(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # torchvision's own download, offline: it creates FashionMNIST/raw before it tries the network.
    def offline(*args, **kwargs) -> None:
        raise URLError("Name or service not known")

    monkeypatch.setattr(torchvision.datasets.mnist, "download_and_extract_archive", offline)
    monkeypatch.chdir(tmp_path)
    with pytest.raises(DatasetNotFoundError, match="Downloading it failed: .*Name or service not known"):
        mnist.read_mnist("data/fashion_mnist", "fashion_mnist", download=True, system_root=tmp_path / "no-system")
    assert list(tmp_path.iterdir()) == []  # not data/, not data/fashion_mnist/FashionMNIST/raw
    (tmp_path / "kept").mkdir()  # a root that was there stays; only what the download created goes
    with pytest.raises(DatasetNotFoundError):
        mnist.read_mnist(tmp_path / "kept", "fashion_mnist", download=True)
    assert list((tmp_path / "kept").iterdir()) == []


def test_a_read_only_torchvision_layout_is_read_in_memory(tmp_path: Path, write_mnist) -> None:
    write_mnist(tmp_path / "ro", "fashion_mnist", compress=True)  # archives only: once unpacked next to themselves
    raw = tmp_path / "ro" / RAW_SUBDIR["fashion_mnist"]
    for folder in (raw, raw.parent, raw.parent.parent):
        folder.chmod(0o555)
    try:
        before = snapshot(tmp_path / "ro")
        splits = mnist.read_mnist(tmp_path / "ro", "fashion_mnist", val_size=10, download=True, verify=False)
        assert snapshot(tmp_path / "ro") == before  # no file unpacked, created or touched, download or not
        assert all(r["path"].endswith(".gz") for r in splits.notes["files"].values())
    finally:
        for folder in (raw, raw.parent, raw.parent.parent):
            folder.chmod(0o755)
