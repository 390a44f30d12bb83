"""Each CSRL repetition permutes the rows with its seed before the k-means++ start, as the authors do: other
seeds start from other assignments, the same seed repeats its run exactly."""

from __future__ import annotations

from helpers.running import all_metrics
from hydra import compose, initialize_config_dir
from sklearn.metrics import adjusted_rand_score

from clusterable.config import CONFIG_DIR, build
from clusterable.heads.tensorized_ae import TensorizedAE


def _initial_assignment(seed: int):
    with initialize_config_dir(config_dir=CONFIG_DIR, version_base="1.3"):
        cfg = compose("train", overrides=["experiment=csrl/fig2", "dataset=lines_3d"], return_hydra_config=True)
    splits = build(cfg.dataset, "dataset", seed=seed).load()
    head = TensorizedAE("ptae", (6,), num_classes=3)
    head.init_clusters(splits["train"]["inputs"])
    return splits["train"]["labels"], head.state.assignment


def test_seeds_start_from_different_assignments():
    starts = [adjusted_rand_score(*_initial_assignment(seed)) for seed in range(3)]
    assert len({round(a, 6) for a in starts}) == 3, starts  # three different k-means++ starts
    labels, first = _initial_assignment(1)
    labels_again, again = _initial_assignment(1)
    assert (labels == labels_again).all() and (first == again).all()


def test_the_same_seed_repeats_its_run_exactly(train):
    args = ["experiment=csrl/fig2", "dataset=parallel_lines", "loss=tae1", "seed=3", "trainer.max_epochs=5"]
    assert train(*args).code == 0 and train(*args, "name=again").code == 0
    first, second = all_metrics(train.outputs)
    assert first["metrics"]["test/ari"] == second["metrics"]["test/ari"]
    assert first["metrics"]["train/loss"] == second["metrics"]["train/loss"]
