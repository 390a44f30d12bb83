"""OrganAMNIST's reader on tiny ``organamnist.npz`` files in MedMNIST's format: both versions of the file, each
way the file can be wrong (one line each), a missing file (and the optional download), and the datamodule and
config reading it end to end. The tiny files are never MedMNIST's published ones: the reads that get past the
format and size checks are made with ``verify=False``, and the MD5 check is tested with the published sums swapped
for a tiny file's."""

from __future__ import annotations

import hashlib
import socket
import sys
import typing
from functools import partial
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from hydra import compose, initialize_config_dir
from omegaconf import open_dict

from clusterable.config import CONFIG_DIR, build
from clusterable.data import CorruptFileError, DatasetNotFoundError, WrongFileError
from clusterable.data.memory import InMemoryDataModule
from clusterable.data.memory import medmnist as reader
from clusterable.data.memory.medmnist import read_organamnist

# Tiny stand-ins for the real sizes (34,581 / 6,491 / 17,778 images of 28x28 bytes are 46 MB): the versions
# differ in their training split only, as the real ones do.
REAL_SIZES = reader.SIZES  # before the fixture below swaps it
TINY = {"v2": {"train": 24, "val": 11, "test": 13}, "v3": {"train": 22, "val": 11, "test": 13}}
SPLITS = ("train", "val", "test")


@pytest.fixture(autouse=True)
def tiny_sizes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(reader, "SIZES", TINY)


def arrays(version: str, seed: int = 0) -> dict[str, np.ndarray]:
    """The six arrays of an ``organamnist.npz`` of ``TINY[version]``'s sizes, as MedMNIST stores them: images
    (N, 28, 28) uint8 (the first of each split all 0 and 255, so [0, 1] is reached exactly), labels (N, 1) uint8
    0..10 cycling."""
    rng = np.random.default_rng(seed)
    out = {}
    for s in SPLITS:
        n = TINY[version][s]
        images = rng.integers(0, 256, size=(n, 28, 28), dtype=np.uint8)
        images[0] = np.where(rng.random((28, 28)) < 0.5, 0, 255)
        out[f"{s}_images"] = images
        out[f"{s}_labels"] = (np.arange(n) % 11).astype(np.uint8).reshape(n, 1)
    return out


def write(folder: Path, content: dict[str, np.ndarray]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "organamnist.npz"
    np.savez_compressed(path, **content)
    return path


def one_line(err: pytest.ExceptionInfo) -> str:
    message = str(err.value)
    assert "\n" not in message
    return message


# ---- both versions -------------------------------------------------------------------------------------------


@pytest.mark.parametrize("version", ["v2", "v3"])
def test_each_version_reads_as_float_images_in_0_1_and_long_labels(tmp_path: Path, version: str) -> None:
    content = arrays(version)
    write(tmp_path, content)
    splits = read_organamnist(str(tmp_path), version=version, download=False, verify=False)
    assert sorted(splits) == ["test", "train", "val"]
    for s in SPLITS:
        inputs, labels = splits[s]["inputs"], splits[s]["labels"]
        n = TINY[version][s]
        assert inputs.shape == (n, 1, 28, 28) and inputs.dtype == torch.float32
        assert labels.shape == (n,) and labels.dtype == torch.long
        torch.testing.assert_close(inputs[:, 0], torch.from_numpy(content[f"{s}_images"]).float() / 255)
        assert float(inputs.min()) == 0.0 and float(inputs.max()) == 1.0
        assert labels.tolist() == content[f"{s}_labels"].reshape(-1).tolist()


def test_labels_stored_flat_are_read_too(tmp_path: Path) -> None:
    content = arrays("v3")
    content["val_labels"] = content["val_labels"].reshape(-1).astype(np.int64)
    write(tmp_path, content)
    assert read_organamnist(str(tmp_path), download=False, verify=False)["val"]["labels"].shape == (11,)


def test_the_real_sizes_and_classes() -> None:
    # MedMNIST v2's file and v3's (medmnist>=3's INFO["organamnist"]["n_samples"]).
    assert REAL_SIZES["v2"] == {"train": 34_581, "val": 6_491, "test": 17_778}
    assert sum(REAL_SIZES["v2"].values()) == 58_850  # Safir 2022, section 6.1.5
    assert REAL_SIZES["v3"] == {"train": 34_561, "val": 6_491, "test": 17_778}
    assert len(reader.CLASSES) == 11 and reader.CLASSES[0] == "bladder" and reader.CLASSES[-1] == "spleen"


def test_the_parameters_have_type_hints_the_config_checker_can_read() -> None:
    hints = typing.get_type_hints(read_organamnist)
    assert hints["root"] is str and hints["download"] is bool and hints["verify"] is bool
    assert typing.get_args(hints["version"]) == ("v2", "v3")


# ---- the wrong file --------------------------------------------------------------------------------------------


def test_the_other_versions_file_is_named_with_what_to_set(tmp_path: Path) -> None:
    path = write(tmp_path, arrays("v3"))
    with pytest.raises(ValueError) as err:
        read_organamnist(str(tmp_path), version="v2", download=False)
    assert one_line(err) == (
        f"version is v2 but {path.resolve()} is the MedMNIST v3 file (train 22 / val 11 / test 13); set "
        "dataset.reader.version=v3, or replace it with the v2 organamnist.npz (Zenodo record 6496656)"
    )
    write(tmp_path, arrays("v2"))
    with pytest.raises(ValueError, match=r"^version is v3 but .* is the MedMNIST v2 file .*version=v2"):
        read_organamnist(str(tmp_path), version="v3", download=False)


def test_sizes_of_no_version_name_the_file_the_sizes_and_both_versions(tmp_path: Path) -> None:
    content = arrays("v3")
    content["test_images"], content["test_labels"] = content["test_images"][:-1], content["test_labels"][:-1]
    path = write(tmp_path, content)
    with pytest.raises(CorruptFileError) as err:
        read_organamnist(str(tmp_path), download=False)
    message = one_line(err)
    assert message.startswith(f"OrganAMNIST file {path.resolve()} holds train 22 / val 11 / test 12 images")
    assert "v2: train 24 / val 11 / test 13; v3: train 22 / val 11 / test 13" in message


def test_a_missing_key_is_named(tmp_path: Path) -> None:
    content = arrays("v3")
    del content["val_labels"]
    path = write(tmp_path, content)
    with pytest.raises(CorruptFileError) as err:
        read_organamnist(str(tmp_path), download=False)
    assert one_line(err).startswith(f"OrganAMNIST file {path.resolve()} is corrupt: it has no val_labels (its keys:")


@pytest.mark.parametrize(
    ("key", "value", "what"),
    [
        ("train_images", np.zeros((22, 28, 27), np.uint8), "train_images are uint8 of shape [22, 28, 27]"),
        ("val_images", np.zeros((11, 28, 28, 3), np.uint8), "val_images are uint8 of shape [11, 28, 28, 3]"),
        ("test_images", np.zeros((13, 28, 28), np.float32), "test_images are float32 of shape [13, 28, 28]"),
        ("train_labels", np.zeros((22, 2), np.uint8), "train_labels are uint8 of shape [22, 2]"),
        ("train_labels", np.zeros((22, 1), np.float64), "train_labels are float64 of shape [22, 1]"),
        ("val_labels", np.zeros((10, 1), np.uint8), "11 val_images but 10 val_labels"),
    ],
)
def test_arrays_of_the_wrong_shape_or_type_are_named(tmp_path: Path, key: str, value: np.ndarray, what: str) -> None:
    path = write(tmp_path, {**arrays("v3"), key: value})
    with pytest.raises(CorruptFileError) as err:
        read_organamnist(str(tmp_path), download=False)
    assert one_line(err).startswith(f"OrganAMNIST file {path.resolve()} is corrupt: {what}")


@pytest.mark.parametrize("bad", [11, 255])
def test_labels_outside_the_eleven_organs_are_refused(tmp_path: Path, bad: int) -> None:
    content = arrays("v3")
    content["test_labels"][3] = bad
    path = write(tmp_path, content)
    with pytest.raises(CorruptFileError) as err:
        read_organamnist(str(tmp_path), download=False)
    assert one_line(err).startswith(
        f"OrganAMNIST file {path.resolve()} is corrupt: test_labels go from 0 to {bad}, expected organ ids 0..10"
    )


@pytest.mark.parametrize(
    ("garble", "what"),
    [
        ("random", "it is not an .npz (zip) archive: it starts with b'"),
        ("empty", "it is not an .npz (zip) archive: it is empty, not b'PK\\x03\\x04'"),
        ("npy", "it is a single .npy array, not an .npz archive of six"),
        ("truncated", "it cannot be read as a NumPy .npz archive (BadZipFile: "),
        ("flipped", "it cannot be read as a NumPy .npz archive ("),
    ],
)
def test_a_garbled_file_is_one_line(tmp_path: Path, garble: str, what: str) -> None:
    path = write(tmp_path, arrays("v3"))
    data = bytearray(path.read_bytes())
    if garble == "random":
        path.write_bytes(np.random.default_rng(0).integers(0, 256, 5000, dtype=np.uint8).tobytes())
    elif garble == "empty":
        path.write_bytes(b"")
    elif garble == "npy":  # another NumPy file under the name: one array, not an archive
        with open(path, "wb") as f:
            np.save(f, np.zeros(3))
    elif garble == "truncated":
        path.write_bytes(data[: len(data) // 2])
    else:  # the zip's structure intact, the compressed data of its first member garbled
        data[100:400] = bytes(300)
        path.write_bytes(bytes(data))
    with pytest.raises(CorruptFileError) as err:
        read_organamnist(str(tmp_path), download=False)
    assert one_line(err).startswith(f"OrganAMNIST file {path.resolve()} is corrupt: {what}")


@pytest.mark.parametrize("version", ["v2", "v3"])
def test_a_file_of_another_md5_is_refused_in_one_line_naming_both_sums(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, version: str
) -> None:
    # The published sums are of the real files; a tiny file stands in for one by its own MD5.
    path = write(tmp_path, arrays(version))
    md5 = hashlib.md5(path.read_bytes()).hexdigest()
    monkeypatch.setitem(reader.MD5S, version, md5)
    assert len(read_organamnist(str(tmp_path), version=version, download=False)["train"]["labels"]) > 0
    content = arrays(version)
    content["val_images"][0, 0, 0] ^= 1  # one pixel of one image: another file of the same sizes
    write(tmp_path, content)
    with pytest.raises(WrongFileError) as err:
        read_organamnist(str(tmp_path), version=version, download=False)
    found = hashlib.md5(path.read_bytes()).hexdigest()
    record = reader.ZENODO_RECORDS[version]
    assert one_line(err) == (
        f"OrganAMNIST file {path.resolve()} is not MedMNIST's {version} organamnist.npz: its MD5 is {found}, the "
        f"published file's {md5} (medmnist's INFO); replace it with the {version} organamnist.npz (Zenodo record "
        f"{record}), or set dataset.reader.verify=false to read a file of your own (re-saved, a subset)"
    )
    assert len(read_organamnist(str(tmp_path), version=version, download=False, verify=False)["val"]["labels"])


# ---- a missing file ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("version", ["v2", "v3"])
def test_a_missing_file_names_the_file_the_folder_and_where_to_get_it(tmp_path: Path, version: str) -> None:
    folder = tmp_path / "nowhere"
    with pytest.raises(DatasetNotFoundError) as err:
        read_organamnist(str(folder), version=version, download=False)
    message = one_line(err)
    assert message.startswith(f"OrganAMNIST {version} not found: no organamnist.npz in {folder.resolve()}. ")
    assert f"put it in {folder.resolve()}" in message
    if version == "v3":
        assert "`pip install medmnist`" in message and "Zenodo record 10519652" in message
    else:
        assert "Zenodo record 6496656" in message and "pip install" not in message
    assert not folder.exists()  # nothing created without a download


def test_v2_is_never_downloaded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "medmnist", SimpleNamespace(OrganAMNIST=pytest.fail))
    with pytest.raises(DatasetNotFoundError, match=r"\(medmnist downloads the v3 file only\)"):
        read_organamnist(str(tmp_path), version="v2", download=True)


def test_without_the_medmnist_package_the_message_says_so(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "medmnist", None)  # `import medmnist` raises ImportError
    with pytest.raises(DatasetNotFoundError) as err:
        read_organamnist(str(tmp_path), version="v3", download=True)
    assert "(the medmnist package is not installed)" in one_line(err)


def test_the_v3_file_is_downloaded_through_medmnist_with_a_timeout(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = []

    def organamnist(split: str, root: str, download: bool) -> None:
        # What medmnist does: fetch organamnist.npz into root, which must exist, then open it.
        calls.append((split, Path(root), download, socket.getdefaulttimeout()))
        assert Path(root).is_dir()
        write(Path(root), arrays("v3"))

    monkeypatch.setitem(sys.modules, "medmnist", SimpleNamespace(OrganAMNIST=organamnist))
    folder = tmp_path / "medmnist"
    splits = read_organamnist(str(folder), version="v3", download=True, verify=False)
    assert calls == [("train", folder.resolve(), True, reader.DOWNLOAD_TIMEOUT_S)]
    assert len(splits["train"]["labels"]) == 22 and socket.getdefaulttimeout() is None


def test_a_failed_download_is_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def organamnist(split: str, root: str, download: bool) -> None:
        raise RuntimeError("Something went wrong when downloading!\nGo to the homepage to download manually.")

    monkeypatch.setitem(sys.modules, "medmnist", SimpleNamespace(OrganAMNIST=organamnist))
    with pytest.raises(DatasetNotFoundError) as err:
        read_organamnist(str(tmp_path), version="v3", download=True)
    message = one_line(err)
    assert "(downloading it failed: Go to the homepage to download manually.)" in message
    assert "`pip install medmnist`" in message


def test_a_bad_version_is_named() -> None:
    with pytest.raises(ValueError, match=r"^version must be one of v2, v3, got 'v1'$"):
        read_organamnist("anywhere", version="v1")  # type: ignore[arg-type]


# ---- end to end ------------------------------------------------------------------------------------------------


def test_the_datamodule_reads_it_end_to_end(tmp_path: Path) -> None:
    write(tmp_path, arrays("v3"))
    dm = InMemoryDataModule(
        "organamnist",
        partial(read_organamnist, root=str(tmp_path), version="v3", download=False, verify=False),
        input_shape=[1, 28, 28],
        num_classes=11,
        batch_size=8,
        labelled_percent=50,
    )
    splits = dm.load()
    assert [len(splits[s]["labels"]) for s in SPLITS] == [22, 11, 13]
    assert int((splits["train"]["labels"] >= 0).sum()) == 11  # one of each organ
    batch = next(iter(dm.train_dataloader()))
    assert batch["inputs"].shape == (8, 1, 28, 28)
    # The other version's file through the datamodule: the setting is named as the config has it.
    wrong = InMemoryDataModule(
        "organamnist",
        partial(read_organamnist, root=str(tmp_path), version="v2", download=False),
        [1, 28, 28],
        11,
    )
    with pytest.raises(ValueError, match=r"^reader\.version is v2 but .* is the MedMNIST v3 file"):
        wrong.load()


def test_the_config_builds_and_reads_the_file(tmp_path: Path) -> None:
    write(tmp_path / "medmnist", arrays("v2"))
    with initialize_config_dir(config_dir=CONFIG_DIR, version_base="1.3"):
        cfg = compose("train", overrides=["dataset=organamnist", f"paths.data_dir={tmp_path}"])
    assert cfg.dataset.reader.version == "v2" and cfg.dataset.num_classes == 11
    assert cfg.dataset.reader.verify is True  # the published file's MD5 is checked unless the config says not to
    with pytest.raises(WrongFileError, match=r"^OrganAMNIST file .* is not MedMNIST's v2 organamnist\.npz"):
        build(cfg.dataset, "dataset", seed=0).load()
    assert cfg.dataset.labelled_percent == 100 and cfg.dataset.batch_size == 128
    with open_dict(cfg):
        cfg.dataset.labelled_percent = 10
        cfg.dataset.reader.verify = False
    dm = build(cfg.dataset, "dataset", seed=0)
    splits = dm.load()
    assert splits["train"]["inputs"].shape == (24, 1, 28, 28)
    assert int((splits["train"]["labels"] >= 0).sum()) == 2  # 2.4 -> 2
