"""The classifier probes (Safir 2022, §6): fit on the training split with all its labels, scored on the evaluated
split; their options, errors, declared metric names and config."""

from __future__ import annotations

import dataclasses
import functools
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf
from sklearn.exceptions import ConvergenceWarning
from torch import nn

from clusterable.config import CONFIG_DIR, ConfigError, build
from clusterable.contracts import EVALUATOR_ARGS, EvalContext, declared_metrics
from clusterable.data.memory import InMemoryDataModule
from clusterable.evaluation.probes import CLASSIFIERS, Probes
from clusterable.evaluation.runner import evaluate
from clusterable.heads.cce import CCELoss
from clusterable.models.identity import Identity
from clusterable.module import RepresentationModule

CONF = Path(CONFIG_DIR)
KEYS = [f"{c}/{s}" for c in ("knn", "rf", "mlp") for s in ("acc", "ami")]


def split_blobs(n_train: int, n_test: int, k: int = 4, dim: int = 6, spread: float = 20.0, seed: int = 0):
    """Training and test points (n, dim) float32 drawn around the same k Gaussian centres, and their labels
    (n,) (row i has class i % k)."""
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(k, dim)) * spread

    def draw(n: int) -> tuple[np.ndarray, np.ndarray]:
        labels = np.arange(n) % k
        return (centres[labels] + rng.normal(size=(n, dim))).astype(np.float32), labels

    return (*draw(n_train), *draw(n_test))


def context(train_x, train_y, seen_y=None, seed: int = 0, test_x=None) -> EvalContext:
    """The context of a test split whose training split is ``train_x`` (M, D) with every label ``train_y`` (M,);
    ``seen_y`` (M,): the labels training saw (-1 where hidden), by default all of them."""
    train_x, train_y = torch.as_tensor(train_x), torch.as_tensor(train_y)
    seen_y = train_y if seen_y is None else torch.as_tensor(seen_y)
    out = train_x if test_x is None else torch.as_tensor(test_x)
    return EvalContext(
        "test",
        {},
        nn.Identity(),
        encoder_output=out,
        train_embeddings=train_x,
        train_labels=seen_y,
        train_all_labels=train_y,
        seed=seed,
    )


def run(train_x, train_y, test_x, test_y, seed: int = 0, seen_y=None, **options) -> dict[str, float]:
    return Probes(**options)(
        torch.as_tensor(test_x), torch.as_tensor(test_y), context(train_x, train_y, seen_y, seed, test_x)
    )


def test_probes_on_separable_blobs_are_perfect():
    train_x, train_y, test_x, test_y = split_blobs(400, 200)
    out = run(train_x, train_y, test_x, test_y, classifiers=list(CLASSIFIERS))
    assert list(out) == [f"{c}/{s}" for c in CLASSIFIERS for s in ("acc", "ami")]
    for key, value in out.items():
        assert value == pytest.approx(1.0, abs=1e-6), key


def test_default_probes_are_knn_rf_mlp():
    train_x, train_y, test_x, test_y = split_blobs(100, 40)
    assert list(run(train_x, train_y, test_x, test_y)) == KEYS


def test_probes_on_random_labels_are_near_chance():
    rng = np.random.default_rng(1)
    train_x, test_x = rng.normal(size=(400, 5)), rng.normal(size=(600, 5))
    train_y, test_y = rng.integers(0, 4, 400), rng.integers(0, 4, 600)
    out = run(train_x, train_y, test_x, test_y, classifiers=list(CLASSIFIERS))
    for name in CLASSIFIERS:
        assert abs(out[f"{name}/acc"] - 0.25) < 0.08, (name, out)  # 4 balanced classes; sd of the acc ~0.018
        assert abs(out[f"{name}/ami"]) < 0.03, (name, out)


def test_unlabelled_rows_are_left_out_of_both_splits():
    train_x, train_y, test_x, test_y = split_blobs(120, 60, spread=2.0)  # overlapping: every row counts
    rng = np.random.default_rng(2)
    # Far-away unlabelled rows: a -1 "class" fitted in training would claim the far test rows, and the far test
    # rows, scored, would be misclassified.
    far_train, far_test = rng.normal(size=(30, 6)) + 100, rng.normal(size=(20, 6)) + 100
    train_x_all = np.concatenate([far_train[:10], train_x, far_train[10:]]).astype(np.float32)
    train_y_all = np.concatenate([-np.ones(10), train_y, -np.ones(20)]).astype(np.int64)
    test_x_all = np.concatenate([test_x, far_test]).astype(np.float32)
    test_y_all = np.concatenate([test_y, -np.ones(20)]).astype(np.int64)
    options = {"classifiers": list(CLASSIFIERS), "seed": 5}
    expected = run(train_x, train_y, test_x, test_y, **options)
    assert run(train_x_all, train_y_all, test_x_all, test_y_all, **options) == expected


def test_probes_fit_on_every_training_label_not_only_those_training_saw():
    train_x, train_y, test_x, test_y = split_blobs(200, 80)
    seen = np.where(train_y == 0, train_y, -1)  # labelled_percent hid every label but class 0's
    out = run(train_x, train_y, test_x, test_y, seen_y=seen, classifiers=list(CLASSIFIERS))
    assert all(value == pytest.approx(1.0) for value in out.values()), out


def test_probes_are_seeded():
    train_x, train_y, test_x, test_y = split_blobs(200, 150, spread=0.7)  # overlapping: the seed matters
    options = {"classifiers": ["rf", "mlp"]}
    same = run(train_x, train_y, test_x, test_y, seed=3, **options)
    assert run(train_x, train_y, test_x, test_y, seed=3, **options) == same
    other = run(train_x, train_y, test_x, test_y, seed=4, **options)
    for name in ("rf", "mlp"):
        assert (other[f"{name}/acc"], other[f"{name}/ami"]) != (same[f"{name}/acc"], same[f"{name}/ami"])
    # The max_train sample too (kNN itself is deterministic).
    sample = {"classifiers": ["knn"], "max_train": 50}
    subset = run(train_x, train_y, test_x, test_y, seed=3, **sample)
    assert run(train_x, train_y, test_x, test_y, seed=3, **sample) == subset
    assert run(train_x, train_y, test_x, test_y, seed=4, **sample) != subset


def test_max_train_at_least_the_training_rows_fits_on_all_of_them():
    train_x, train_y, test_x, test_y = split_blobs(80, 40, spread=1.0)
    options = {"classifiers": ["knn", "rf"], "seed": 1}
    assert run(train_x, train_y, test_x, test_y, max_train=80, **options) == run(
        train_x, train_y, test_x, test_y, **options
    )


def test_a_single_class_training_set_predicts_that_class():
    train_x, _, test_x, test_y = split_blobs(30, 40)
    train_y = np.full(30, 2)
    train_y[:5] = -1  # unlabelled rows do not make a second class
    out = run(train_x, train_y, test_x, test_y, classifiers=list(CLASSIFIERS))
    for name in CLASSIFIERS:
        assert out[f"{name}/acc"] == pytest.approx(np.mean(test_y == 2)), name
        assert out[f"{name}/ami"] == pytest.approx(0.0, abs=1e-12), name


def test_no_labelled_test_row_gives_nan():
    train_x, train_y, test_x, _ = split_blobs(30, 10)
    out = run(train_x, train_y, test_x, -np.ones(10, dtype=np.int64))
    assert list(out) == KEYS and all(np.isnan(v) for v in out.values())


def test_standardize_reaches_the_mlp_and_linear_probes_only():
    # Feature 0 carries the class on a scale of 0.01; feature 1 is noise on a scale of 10. Raw Euclidean
    # neighbours see only the noise; z-scored features make the class plain to a linear model.
    rng = np.random.default_rng(0)

    def draw(n: int) -> tuple[np.ndarray, np.ndarray]:
        y = np.arange(n) % 2
        return np.stack([0.01 * y + 0.0005 * rng.normal(size=n), 10 * rng.normal(size=n)], 1), y

    (train_x, train_y), (test_x, test_y) = draw(200), draw(200)
    out = run(train_x, train_y, test_x, test_y, classifiers=["knn", "linear"])
    assert out["linear/acc"] == pytest.approx(1.0) and out["knn/acc"] < 0.75, out
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)  # lbfgs on raw features this badly scaled
        raw = run(train_x, train_y, test_x, test_y, classifiers=["knn", "linear"], standardize=False)
    assert raw["linear/acc"] < 0.75 and raw["knn/acc"] == out["knn/acc"], raw


def test_the_mlps_convergence_warning_is_silenced():
    train_x, train_y, test_x, test_y = split_blobs(60, 20)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        run(train_x, train_y, test_x, test_y, classifiers=["mlp"], mlp_max_iter=1)


@pytest.mark.parametrize(
    "option,value",
    [
        ("classifiers", []),
        ("classifiers", ["knn", "svm"]),
        ("classifiers", ["knn", "rf", "knn"]),
        ("classifiers", "knn"),  # a string is a sequence of letters, not of classifiers
        ("knn_neighbors", 0),
        ("rf_trees", 0),
        ("rf_max_depth", 0),
        ("mlp_hidden", []),
        ("mlp_hidden", [100, 0]),
        ("mlp_max_iter", 0),
        ("linear_max_iter", 0),
        ("standardize", "yes"),
        ("max_train", 0),
        ("num_threads", 0),
    ],
)
def test_options_out_of_range_are_refused_in_one_line_naming_them(option, value):
    # When built, before training: the message starts with the option's name, which the framework prefixes with
    # evaluator.probes.
    with pytest.raises(ValueError, match=f"^{option} must") as error:
        Probes(**{option: value})
    assert "\n" not in str(error.value)


@pytest.mark.parametrize(
    "case,match",
    [
        ("knn_neighbors", r"^knn_neighbors must be <= 8, the labelled training rows"),
        ("max_train", r"^knn_neighbors must be <= 4, the labelled training rows"),
        ("no_label", r"at least one row as labelled"),
        ("no_training_split", r"needs the training split"),
        ("shapes", r"^the training representation must be \(M, 6\)"),
        ("nan", r"finite"),
    ],
)
def test_data_the_probes_cannot_fit_is_refused_in_one_line(case, match):
    train_x, train_y, test_x, test_y = split_blobs(10, 10)
    train_y[:2] = -1  # 8 labelled training rows
    ctx, options = context(train_x, train_y), {}
    if case == "knn_neighbors":
        options = {"knn_neighbors": 9}
    elif case == "max_train":
        options = {"max_train": 4}
    elif case == "no_label":
        ctx = context(train_x, -np.ones(10, dtype=np.int64))
    elif case == "no_training_split":
        ctx = EvalContext("val", {}, nn.Identity(), torch.as_tensor(test_x), None, None)
    elif case == "shapes":
        ctx = context(train_x[:, :3], train_y)
    else:
        train_x[3, 1] = np.nan
        ctx = context(train_x, train_y)
    with pytest.raises(ValueError, match=match) as error:
        Probes(**options)(torch.as_tensor(test_x), torch.as_tensor(test_y), ctx)
    assert "\n" not in str(error.value)


@pytest.mark.parametrize("classifiers", [["knn"], ["linear", "rf", "knn"], list(CLASSIFIERS)])
def test_metric_names_are_the_keys_returned(classifiers):
    train_x, train_y, test_x, test_y = split_blobs(40, 20)
    out = run(train_x, train_y, test_x, test_y, classifiers=classifiers, mlp_max_iter=5)
    assert Probes(classifiers=classifiers, mlp_max_iter=5).metric_names() == list(out)


def compose_probes(*overrides: str):
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        return compose(overrides=["+evaluator=[probes]", *overrides])


def test_the_config_builds_the_evaluator_with_its_defaults():
    cfg = compose_probes()
    assert (CONF / "evaluator" / "probes.yaml").read_text().splitlines()[0] == "# @package evaluator.probes"
    # The YAML documents every option, with the values the evaluator defaults to.
    node = OmegaConf.to_container(cfg.evaluator.probes)
    defaults = {f.name: f.default for f in dataclasses.fields(Probes)}
    assert set(node) - {"_target_"} == set(defaults)
    for name, default in defaults.items():
        assert node[name] == (list(default) if isinstance(default, tuple) else default), name
    fn = build(cfg.evaluator.probes, "evaluator.probes", call_args=EVALUATOR_ARGS)
    assert fn == Probes() and declared_metrics(fn) == KEYS
    train_x, train_y, test_x, test_y = split_blobs(100, 40)
    out = fn(torch.as_tensor(test_x), torch.as_tensor(test_y), context(train_x, train_y))
    assert list(out) == KEYS and all(isinstance(v, float) for v in out.values())


def test_the_config_declares_the_chosen_classifiers():
    cfg = compose_probes("evaluator.probes.classifiers=[linear,rf,knn]")
    fn = build(cfg.evaluator.probes, "evaluator.probes", call_args=EVALUATOR_ARGS)
    assert declared_metrics(fn) == ["linear/acc", "linear/ami", "rf/acc", "rf/ami", "knn/acc", "knn/ami"]


@pytest.mark.parametrize(
    "override,match",
    [
        ("evaluator.probes.classifiers=[knn,svm]", r"evaluator\.probes\.classifiers must be a list of"),
        ("evaluator.probes.knn_neighbors=2.5", r"evaluator\.probes\.knn_neighbors must be an integer"),
        ("evaluator.probes.standardize=yes", r"evaluator\.probes\.standardize must be a boolean"),
        ("+evaluator.probes.n_trees=10", r"evaluator\.probes\.n_trees is not an option"),
    ],
)
def test_the_config_system_refuses_bad_values(override, match):
    cfg = compose_probes(override)
    with pytest.raises(ConfigError, match=match):
        build(cfg.evaluator.probes, "evaluator.probes", call_args=EVALUATOR_ARGS)


def test_the_runner_gives_the_probes_the_labels_training_did_not_see():
    # 2% of 120 training labels: 2 seen. The probes fit on all 120 (with only the seen ones, kNN's 5 neighbours
    # would be refused), and score the separable test blobs perfectly.
    train_x, train_y, test_x, test_y = split_blobs(120, 60, dim=4)
    splits = {
        "train": {"inputs": torch.as_tensor(train_x), "labels": torch.as_tensor(train_y)},
        "test": {"inputs": torch.as_tensor(test_x), "labels": torch.as_tensor(test_y)},
    }
    splits["val"] = splits["test"]
    data = InMemoryDataModule("blobs", lambda: splits, input_shape=[4], num_classes=4, labelled_percent=2)
    data.load()
    assert int((data.splits["train"]["labels"] >= 0).sum()) == 2
    head = CCELoss(num_classes=4, embedding_dim=4)
    module = RepresentationModule(Identity(input_shape=(4,)), head, functools.partial(torch.optim.Adam))
    evaluator = Probes(classifiers=["knn", "linear"])
    out = evaluate(module, data, {"probes": evaluator}, stages=["test"])
    assert out == pytest.approx(
        {"test/knn/acc": 1.0, "test/knn/ami": 1.0, "test/linear/acc": 1.0, "test/linear/ami": 1.0}
    )
