"""The CSRL datasets: the authors' synthetic generators replayed exactly, and the small real readers."""

from __future__ import annotations

import struct
from pathlib import Path

import numpy as np
import pytest
import torch
from hydra.utils import instantiate
from omegaconf import OmegaConf
from sklearn.datasets import load_digits, load_iris

from clusterable.config import CONFIG_DIR
from clusterable.data.memory import synthetic, tabular

CONF = Path(CONFIG_DIR) / "dataset"
# name -> (n, d, C) as the authors' code generates them (repository
# mahalakshmi-sabanayagam/cluster_specific_representation, src/data.py; triangle: d = 5 as coded, the paper's
# appendix B says 6)
SHAPES = {
    "parallel_lines": (150, 5, 2),
    "orthogonal": (150, 5, 2),
    "triangle": (150, 5, 3),
    "lines_3d": (300, 6, 3),
}


def authors_sample_data(mu_list, sigma_list, dummy_dim, n, seed=0, noise=0.1):
    """The authors' ``sample_data`` (``src/data.py``), transcribed as the reference for the draw order."""
    np.random.seed(seed)
    c_size = len(mu_list)
    x = np.zeros((n, len(mu_list[0]) + dummy_dim))
    for i in range(c_size):
        c_i = np.random.multivariate_normal(mu_list[i], sigma_list[i], int(n / c_size))
        dummy = np.random.normal(0, 0.1, int(n / c_size) * dummy_dim).reshape(int(n / c_size), -1)
        x[int(n / c_size) * i : int(n / c_size) * (i + 1), :] = np.concatenate((c_i, dummy), axis=1)
    add_noise = (noise * np.random.normal(0, 1, x.shape[0] * x.shape[1])).reshape(x.shape)
    return x, x.copy() + add_noise


@pytest.mark.parametrize("name", synthetic.NAMES)
def test_synthetic_replays_the_authors_draws_exactly(name):
    means, covs, n = synthetic.definition(name)
    state = np.random.get_state()
    try:
        ref_x, ref_noisy = authors_sample_data(means, covs, 3, n)
    finally:
        np.random.set_state(state)
    x, _, x_noisy = synthetic.make(name)
    np.testing.assert_array_equal(x, ref_x)
    np.testing.assert_array_equal(x_noisy, ref_noisy)


@pytest.mark.parametrize("name", synthetic.NAMES)
def test_synthetic_shapes_order_and_cluster_statistics(name):
    n, d, c = SHAPES[name]
    x, y, x_noisy = synthetic.make(name)
    assert x.shape == x_noisy.shape == (n, d) and y.shape == (n,)
    np.testing.assert_array_equal(y, np.repeat(np.arange(c), n // c))  # equal sizes, rows ordered by cluster
    means, covs, _ = synthetic.definition(name)
    p, per = means.shape[1], n // c
    for j in range(c):
        block = x[y == j]
        # sample means within 4 standard errors of the definition; dummy columns N(0, 0.1^2)
        se = np.sqrt(np.diag(covs[j]) / per)
        assert np.all(np.abs(block[:, :p].mean(0) - means[j]) < 4 * se), (name, j)
        assert np.all(np.abs(block[:, p:].mean(0)) < 4 * 0.1 / np.sqrt(per))
        assert 0.07 < block[:, p:].std() < 0.13
    assert 0.08 < (x_noisy - x).std() < 0.12


def test_triangle_is_five_dimensional_as_coded():
    x, _, _ = synthetic.make("triangle")
    assert x.shape[1] == 5  # the paper says 6; the authors' code gives 2 + 3


def test_synthetic_is_reproducible_and_leaves_the_global_rng_alone():
    np.random.seed(123)
    before = np.random.get_state()
    first = synthetic.make("orthogonal")
    after = np.random.get_state()
    assert before[0] == after[0] and np.array_equal(before[1], after[1]) and before[2:] == after[2:]
    second = synthetic.make("orthogonal")
    for a, b in zip(first, second, strict=True):
        np.testing.assert_array_equal(a, b)
    # the clean points do not depend on the noise level (the noise is drawn after them)
    np.testing.assert_array_equal(synthetic.make("orthogonal", noise=0.5)[0], first[0])


def test_synthetic_rejects_unknown_names_and_negative_noise():
    with pytest.raises(ValueError, match="parallel_lines, orthogonal, triangle, lines_3d"):
        synthetic.make("spiral")
    with pytest.raises(ValueError, match="noise must be >= 0"):
        synthetic.make("triangle", noise=-0.1)


def test_read_synthetic_splits_and_denoise():
    x, y, x_noisy = synthetic.make("lines_3d")
    plain = synthetic.read_synthetic("lines_3d")
    assert set(plain) == {"train", "val", "test"} and "targets" not in plain["train"]
    for split in plain.values():  # the paper trains and evaluates on the same points
        assert torch.equal(split["inputs"], torch.tensor(x, dtype=torch.float32))
        assert split["labels"].dtype == torch.long and torch.equal(split["labels"], torch.tensor(y))
    noisy = synthetic.read_synthetic("lines_3d", denoise=True)["train"]
    assert torch.equal(noisy["inputs"], torch.tensor(x_noisy, dtype=torch.float32))
    assert torch.equal(noisy["targets"], torch.tensor(x, dtype=torch.float32))


def test_penguins_rows_labels_and_normalisation():
    x, y = tabular.load_penguin_arrays()
    assert x.shape == (342, 4)  # the paper's 334 also drops rows with missing sex
    np.testing.assert_allclose(x.max(axis=0), 1.0)
    assert x.min() > 0
    np.testing.assert_array_equal(np.bincount(y), [151, 123, 68])  # Adelie 0, Gentoo 1, Chinstrap 2
    # first row of the data set: an Adelie with bill length 39.1 mm; the longest bill is 59.6 mm
    assert y[0] == 0 and x[0, 0] == pytest.approx(39.1 / 59.6)
    split = tabular.read_penguins()["test"]
    assert split["inputs"].shape == (342, 4) and split["inputs"].dtype == torch.float32


def test_iris_is_unnormalised_and_denoise_is_seeded():
    x, y = load_iris(return_X_y=True)
    plain = tabular.read_iris()["train"]
    np.testing.assert_allclose(plain["inputs"].numpy(), x, rtol=1e-6)
    a, b = tabular.read_iris(denoise=True)["train"], tabular.read_iris(denoise=True)["train"]
    assert torch.equal(a["inputs"], b["inputs"])  # same noise_seed, same noise
    assert torch.equal(a["targets"], plain["inputs"])
    assert 0.08 < float((a["inputs"] - a["targets"]).std()) < 0.12
    assert not torch.equal(tabular.read_iris(denoise=True, noise_seed=1)["train"]["inputs"], a["inputs"])


def test_digits_subset_takes_the_first_rows_of_each_class_in_file_order():
    x, y = load_digits(return_X_y=True)
    split = tabular.read_digits_subset(classes=(3, 7), per_class=5)["train"]
    rows = np.concatenate([np.flatnonzero(y == 3)[:5], np.flatnonzero(y == 7)[:5]])
    np.testing.assert_array_equal(split["inputs"].numpy(), x[rows])  # raw 0..16 pixels
    np.testing.assert_array_equal(split["labels"].numpy(), [0] * 5 + [1] * 5)  # positions in `classes`
    with pytest.raises(ValueError, match="per_class must be <= 183"):
        tabular.read_digits_subset(classes=(3,), per_class=200)


def write_mnist(root: Path, labels: np.ndarray) -> np.ndarray:
    """Tiny idx-ubyte files in torchvision's layout; pixel (0, 0) of image i holds i. Returns the images."""
    raw = root / "MNIST" / "raw"
    raw.mkdir(parents=True)
    images = np.random.default_rng(0).integers(0, 256, size=(len(labels), 28, 28)).astype(np.uint8)
    images[:, 0, 0] = np.arange(len(labels))
    for prefix in ("t10k", "train"):
        (raw / f"{prefix}-images-idx3-ubyte").write_bytes(
            struct.pack(">IIII", 2051, len(labels), 28, 28) + images.tobytes()
        )
        (raw / f"{prefix}-labels-idx1-ubyte").write_bytes(
            struct.pack(">II", 2049, len(labels)) + labels.astype(np.uint8).tobytes()
        )
    return images


def test_mnist_subset_reads_the_first_test_images_of_each_class(tmp_path):
    labels = np.array([1, 0, 2, 1, 0, 0, 1, 2, 9, 0])
    images = write_mnist(tmp_path, labels)
    # Tiny files, not the published MNIST: verify=False reads them as a user's own copy.
    splits = tabular.read_mnist_subset(tmp_path, classes=(0, 1), per_class=2, download=False, verify=False)
    split = splits["train"]
    rows = [1, 4, 0, 3]  # first two 0s, then first two 1s
    np.testing.assert_array_equal(split["inputs"].numpy(), images[rows].reshape(4, 784))  # raw 0..255 values
    np.testing.assert_array_equal(split["labels"].numpy(), [0, 0, 1, 1])


def test_mnist_subset_missing_files_name_the_files_and_folder(tmp_path):
    with pytest.raises(FileNotFoundError, match="t10k-images-idx3-ubyte") as err:
        tabular.read_mnist_subset(tmp_path / "nowhere", download=False)
    assert str((tmp_path / "nowhere" / "MNIST" / "raw").resolve()) in str(err.value)


@pytest.mark.parametrize(
    "name",
    [
        "parallel_lines",
        "orthogonal",
        "triangle",
        "lines_3d",
        "iris",
        "penguins",
        "digits_subset",
        "mnist_subset",
    ],
)
def test_dataset_configs_describe_their_data(tmp_path, name):
    cfg = OmegaConf.load(CONF / f"{name}.yaml")
    cfg = OmegaConf.merge({"paths": {"data_dir": str(tmp_path)}}, {"dataset": cfg}).dataset
    if name == "mnist_subset":  # a fixture with 200 images of each of the classes 0-4
        write_mnist(tmp_path / "mnist", np.repeat(np.arange(5), 200))
        cfg.reader.download = False
        cfg.reader.verify = False  # tiny files, not the published MNIST
    dm = instantiate(cfg)
    assert dm.batch_size == -1  # full batch, one step per epoch as in the authors' code
    splits = dm.load()
    train = splits["train"]
    assert tuple(train["inputs"].shape[1:]) == dm.input_shape
    assert int(train["labels"].max()) + 1 == dm.num_classes and int(train["labels"].min()) == 0
    assert torch.equal(splits["val"]["inputs"], train["inputs"]) and torch.equal(
        splits["test"]["labels"], train["labels"]
    )
