"""Every YAML in every config group composes, passes the config checks, builds a part that satisfies its contract
(encoder, head, clustering head, evaluator), and runs one batch."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
import torch
from helpers.configs import composed, sweep_cells
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf, open_dict

from clusterable.config import CONFIG_DIR, ConfigError, build, check_node
from clusterable.contracts import (
    EVALUATOR_ARGS,
    ClusteringHead,
    Encoder,
    HasWordVectors,
    Head,
    require,
    require_evaluator,
)
from clusterable.extras import LOGGER_EXTRAS
from clusterable.run.checks import OPTIMIZER_CALL
from clusterable.tuned_lambda import winners_file, write_winners

CONF = Path(CONFIG_DIR)


def options(group: str) -> list[str]:
    return sorted(str(p.relative_to(CONF / group).with_suffix("")) for p in (CONF / group).rglob("*.yaml"))


def build_and_step(cfg) -> dict:
    """Build dataset (fake), encoder, head, optimizer and evaluators as train.py does (config checks and contracts
    included); one training batch through them."""
    with open_dict(cfg):
        # 40 rows, or what the experiment's smoke runs use (Safir's 0.01% of the labels needs 5,000 to keep one)
        cfg.dataset.source = "fake"
        cfg.dataset.fake_size = OmegaConf.select(cfg, "protocol.smoke_fake_size") or 40
    dm = build(cfg.dataset, "dataset", seed=0)
    splits = dm.load()
    vectors = {"word_vectors": dm.word_vectors} if isinstance(dm, HasWordVectors) else {}  # text datasets
    encoder = build(cfg.model, "model", input_shape=dm.input_shape, **vectors)
    require(encoder, Encoder, "model")
    head = build(
        cfg.loss, "loss", num_classes=dm.num_classes, embedding_dim=encoder.embedding_dim, input_shape=dm.input_shape
    )
    require(head, Head, "loss")
    assert callable(build(cfg.optimizer, "optimizer", call_args=OPTIMIZER_CALL))
    for name, node in (cfg.get("evaluator") or {}).items():
        require_evaluator(build(node, f"evaluator.{name}", call_args=EVALUATOR_ARGS), name)
    # In-memory splits hold their inputs; an image dataset's stay in its cache and come in evaluation views.
    batch = next(iter(dm.train_dataloader() if "inputs" in splits["train"] else dm.eval_batches("train", "cpu")))
    if isinstance(head, ClusteringHead):
        train = splits["train"]
        head.init_clusters(encoder(train["inputs"]), index=torch.arange(len(train["labels"])), **train)
    out = head(
        encoder(batch["inputs"]),
        batch["labels"],
        epoch=0,
        encoder=encoder,
        **{k: v for k, v in batch.items() if k != "labels"},
    )
    assert torch.isfinite(out["loss"]), out
    # a part the head did not compute this epoch is left out (the Safir 2022 heads' L_S where its weight is 0)
    assert "loss" in out and set(out) <= set(head.loss_parts), (set(out), head.loss_parts)
    return out


@pytest.mark.parametrize("name", options("dataset"))
def test_dataset_options(tmp_path, name):
    cfg = composed(tmp_path, f"dataset={name}")
    with open_dict(cfg):
        cfg.dataset.source, cfg.dataset.fake_size = "fake", 30
    dm = build(cfg.dataset, "dataset", seed=0)
    splits = dm.load()
    batch = next(iter(dm.eval_batches("train", "cpu")))
    assert tuple(batch["inputs"].shape[1:]) == dm.input_shape
    assert int(splits["train"]["labels"].max()) < dm.num_classes


@pytest.mark.parametrize("name", options("model"))
def test_model_options(tmp_path, name):
    image = name in (
        "resnet50",
        "googlenet",
        "bninception",
        "inception",
    )  # RGB backbones; no weight file offline
    cfg = composed(tmp_path, f"model={name}", *(["model.weights=null"] if image else []))
    if name.startswith("text_"):  # token ids over a text dataset's vocabulary and its word vectors
        encoder = build(cfg.model, "model", input_shape=(12,), word_vectors=torch.randn(50, 16)).eval()
        require(encoder, Encoder, name)
        assert encoder(torch.randint(0, 50, (2, 12))).shape == (2, encoder.embedding_dim)
        return
    shape = (3, 64, 64) if image else (1, 28, 28)
    encoder = build(cfg.model, "model", input_shape=shape).eval()
    require(encoder, Encoder, name)
    assert encoder(torch.rand(2, *shape)).shape == (2, encoder.embedding_dim)


# src/clusterable/conf/loss/metric is the `loss/metric` group: the metric losses the Safir 2022 heads build, not
# heads of their own.
@pytest.mark.parametrize("name", [n for n in options("loss") if not n.startswith("metric/")])
def test_loss_options(tmp_path, name):
    cfg = composed(tmp_path, f"loss={name}")
    head = build(cfg.loss, "loss", num_classes=3, embedding_dim=784, input_shape=(784,))
    require(head, Head, name)
    assert isinstance(head, torch.nn.Module) and head.loss_parts[0] == "loss"


@pytest.mark.parametrize("name", options("loss/metric"))
def test_loss_metric_options(tmp_path, name):
    cfg = composed(tmp_path, "loss=mvae", f"loss/metric={name}")
    head = build(cfg.loss, "loss", num_classes=3, embedding_dim=784, input_shape=(784,))
    require(head, Head, name)
    require(head.metric, Head, f"loss/metric={name}")


@pytest.mark.parametrize("name", options("evaluator"))
def test_evaluator_options(tmp_path, name):
    cfg = composed(tmp_path, f"evaluator=[{name}]")
    require_evaluator(build(cfg.evaluator[name], f"evaluator.{name}", call_args=EVALUATOR_ARGS), name)


@pytest.mark.parametrize("name", options("optimizer"))
def test_optimizer_options(tmp_path, name):
    cfg = composed(tmp_path, f"optimizer={name}")
    make = build(cfg.optimizer, "optimizer", call_args=OPTIMIZER_CALL)
    assert isinstance(make([torch.nn.Parameter(torch.zeros(2))]), torch.optim.Optimizer)


@pytest.mark.parametrize("name", options("trainer"))
def test_trainer_options(tmp_path, name):
    cfg = composed(tmp_path, f"trainer={name}")
    if cfg.trainer.accelerator == "gpu" and not torch.cuda.is_available():
        check_node(cfg.trainer, "trainer")  # keys and types; building it needs the GPU
    else:
        assert build(cfg.trainer, "trainer", logger=False) is not None


@pytest.mark.parametrize("name", options("logger"))
def test_logger_options(tmp_path, name):
    cfg = composed(tmp_path, f"logger={name}")
    for key, node in cfg.logger.items():
        modules, _ = LOGGER_EXTRAS.get(str(node._target_).rsplit(".", 1)[-1], ((), ""))
        if modules and not any(importlib.util.find_spec(m) for m in modules):
            pytest.skip(
                f"logger={name} needs {' or '.join(modules)}, not installed here (tests/test_train.py: its one line)"
            )
        assert build(node, f"logger.{key}") is not None


@pytest.mark.parametrize("name", options("debug"))
def test_debug_options_with_default_run(tmp_path, name):
    build_and_step(composed(tmp_path, f"debug={name}"))


def covering(cells: list[list[str]]) -> list[list[str]]:
    """A few cells in which every swept key=value appears at least once (each with the values it is swept with)."""
    seen: set[str] = set()
    out = []
    for cell in cells:
        if not set(cell) <= seen:
            out.append(cell)
            seen |= set(cell)
    return out


def tuned_lambda_winners(tmp_path: Path, cfg, cells: list[list[str]], lam: float) -> list[str]:
    """For an experiment that runs at Table 1's tuned λ (``tuned_lambda_from``): smoke winners at ``lam`` for
    every (dataset, model, loss) of its ``cells``, under ``tmp_path``; the overrides that point the run there."""
    table = cfg.get("tuned_lambda_from")
    if table is None:
        return []
    choices = cfg.hydra.runtime.choices
    entry = {"lam": lam, "val_acc": 0.9, "runs": 1, "candidates": {lam: 0.9}}
    winners = {}
    for cell in cells:  # a key a cell does not set keeps the experiment's default
        given = {
            **{g: choices[g] for g in ("dataset", "model", "loss")},
            **dict(o.split("=", 1) for o in cell),
        }
        winners[(given["dataset"], given["model"], given["loss"])] = entry
    write_winners(winners_file(tmp_path, table, "smoke"), table, table, "smoke", winners)
    return [f"paths.output_dir={tmp_path}"]


@pytest.mark.catalogue
@pytest.mark.parametrize("name", options("experiment"))
def test_experiments_compose_and_run_a_batch(tmp_path, name):
    cfg = composed(tmp_path, f"experiment={name}", "debug=smoke")
    assert cfg.name and cfg.mode == "smoke"
    cells = sweep_cells(cfg)
    assert cfg.hydra.sweeper.params and cells, f"{name} defines no sweep grid"
    # Every value of every swept key (in each grid, with that grid's other keys) composes and builds with the rest
    # of the experiment.
    cells = covering(cells)
    tuned = tuned_lambda_winners(tmp_path, cfg, cells, 0.7)
    for cell in cells:
        composed_cell = composed(tmp_path, f"experiment={name}", "debug=smoke", *cell, *tuned)
        build_and_step(composed_cell)
        # the λ losses (loss.lam is ${tuned_lambda:...}; PCE's own lam is another λ) run at Table 1's winner
        if tuned and "tuned_lambda" in str(OmegaConf.to_container(composed_cell.loss).get("lam")):
            assert composed_cell.loss.lam == 0.7, (name, cell)


def test_default_config_values():
    with initialize_config_dir(config_dir=CONFIG_DIR, version_base="1.3"):
        cfg = compose("train", return_hydra_config=True)
    assert cfg.dataset.name == "digits" and cfg.trainer.accelerator == "cpu"
    assert cfg.loss._target_.endswith("GaussianCOREL") and cfg.model._target_.endswith("FFNN")
    assert cfg.dataset.batch_size == 128 and cfg.optimizer._target_ == "torch.optim.Adam"
    assert cfg.mode == "full"


def test_a_range_error_in_a_nested_node_names_that_node(tmp_path) -> None:
    # ImageDataModule's augmentation is a node of its own (dataset.augment): its constructor's error names it.
    cfg = composed(tmp_path, "dataset=cub200", "dataset.augment.crop_scale=[0.5,0.1]")
    with pytest.raises(ConfigError, match=r"^dataset\.augment\.crop_scale must be \[low, high\]"):
        build(cfg.dataset, "dataset", seed=0)
