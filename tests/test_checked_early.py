"""Mistakes refused before training, not after it: evaluator options (``ks`` against the gallery too, once the
data is loaded), the batch size a loss needs, sampler options without their sampler; and what reading a file
may not do (run code from it). Each in-process case asserts one error line, a non-zero exit, nothing recorded
``ok`` and an empty timing record (``fit`` never ran: no epoch started)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from helpers.running import all_metrics

from clusterable.contracts import ChecksSplits, NeedsBatchOf
from clusterable.data.sampling import Sampler
from clusterable.evaluation.retrieval import RetrievalMetrics

QUICK = ["dataset=iris", "trainer.max_epochs=1", "trainer.enable_progress_bar=false", "logger=none"]


def refused_before_training(result, outputs: Path, message: str) -> None:
    """One error line containing ``message``, exit 1, and the one run recorded failed without having trained."""
    assert result.code == 1, result.err
    lines = result.error_lines()
    assert len(lines) == 1 and message in lines[0], lines
    [record] = all_metrics(outputs)
    assert record["status"] == "failed" and message in record["error"]
    assert record["timing"] == {}, "training started before the mistake was found"


# ------------------------------------------------------------------------------------------------ evaluator options


@pytest.mark.parametrize(
    ("ks", "message"),
    [("[0]", "ks must be distinct positive integers, got [0]"), ("[]", "ks must be a non-empty list")],
)
def test_retrieval_ks_out_of_range_refused_when_built(train, ks: str, message: str) -> None:
    result = train(*QUICK, "evaluator=[retrieval]", f"evaluator.retrieval.ks={ks}")
    refused_before_training(result, train.outputs, f"evaluator.retrieval.{message}")


def test_retrieval_ks_above_the_gallery_refused_once_the_data_is_loaded(train) -> None:
    # iris: 150 rows in every split here, so every row has 149 candidates.
    result = train(*QUICK, "evaluator=[retrieval]", "evaluator.retrieval.ks=[1,100000]")
    refused_before_training(
        result,
        train.outputs,
        "evaluator.retrieval: ks must be <= 149 on split 'val', the gallery size minus one",
    )


def test_retrieval_check_split_counts_candidates_as_the_search_does() -> None:
    metric = RetrievalMetrics(ks=(1, 3))
    assert isinstance(metric, ChecksSplits)
    labels = torch.tensor([0, 0, 1, 1, -1])
    metric.check_split("test", {"labels": labels[:4]})  # 4 labelled rows: 3 candidates each
    with pytest.raises(ValueError, match=r"^ks must be <= 2 on split 'test', the gallery size minus one"):
        metric.check_split("test", {"labels": labels[1:]})  # the unlabelled row is no candidate
    is_query = torch.tensor([True, True, False, False, False])
    with pytest.raises(ValueError, match=r"^ks must be <= 2 on split 'val', the gallery size \(query/gallery\)"):
        metric.check_split("val", {"labels": labels, "is_query": is_query, "is_gallery": ~is_query})


# ------------------------------------------------------------------------------------------------ batch sizes


@pytest.mark.parametrize(("loss", "batch_size", "needed"), [("triplet", 1, 3), ("triplet", 2, 3), ("supcon", 1, 2)])
def test_a_batch_too_small_for_the_loss_is_refused(train, loss: str, batch_size: int, needed: int) -> None:
    result = train(*QUICK, f"loss={loss}", f"dataset.batch_size={batch_size}", "checkpoint.monitor=null")
    refused_before_training(
        result,
        train.outputs,
        f"dataset.batch_size={batch_size} is too small for loss={loss}: it learns nothing from batches of fewer "
        f"than {needed} rows",
    )


def test_heads_declare_the_rows_a_batch_needs() -> None:
    from hydra.utils import instantiate
    from omegaconf import OmegaConf

    from clusterable.config import CONFIG_DIR

    def head(name: str, **extra):
        node = OmegaConf.load(Path(CONFIG_DIR) / "loss" / f"{name}.yaml")
        node = {k: v for k, v in OmegaConf.to_container(node).items() if k != "defaults"}
        return instantiate({**node, **extra}, num_classes=3, embedding_dim=4)

    assert head("triplet").min_batch_size == 3
    assert head("contrastive").min_batch_size == 2
    assert head("proxy_anchor").min_batch_size == 1  # proxies: one row scores against them
    assert isinstance(head("supcon"), NeedsBatchOf) and head("supcon").min_batch_size == 2


def test_dscl_and_dml_declare_their_batch_needs() -> None:
    import functools

    from pytorch_metric_learning.losses import TripletMarginLoss

    from clusterable.heads.dml import DML
    from clusterable.heads.dscl import DSCL
    from clusterable.heads.pml import PMLHead

    assert DSCL.min_batch_size == 2
    metric = functools.partial(PMLHead, loss=TripletMarginLoss)
    assert DML(num_classes=3, embedding_dim=4, latent_dim=2, metric=metric).min_batch_size == 3


# ------------------------------------------------------------------------------------------------ the sampler


def test_images_per_class_with_random_batches_is_refused(train) -> None:
    result = train(*QUICK, "dataset=digits_zeroshot", "dataset.sampler.images_per_class=4")
    refused_before_training(
        result,
        train.outputs,
        "dataset.sampler.images_per_class=4 is used by class-balanced batches only; set "
        "dataset.sampler.kind=class_balanced",
    )


def test_images_per_class_defaults_to_four_and_only_class_balanced_batches_take_it() -> None:
    assert Sampler().images_per_class == 4 and Sampler("class_balanced").images_per_class == 4
    assert Sampler("class_balanced", 2).images_per_class == 2
    with pytest.raises(ValueError, match=r"^images_per_class=2 is used by class-balanced batches only"):
        Sampler("random", 2)


# ------------------------------------------------------------------------------------------------ the trainer


def test_the_readmes_precision_example_runs_with_the_default_trainer(train) -> None:
    result = train(*QUICK, "trainer.precision=bf16-mixed", "trainer.max_steps=2")
    assert result.code == 0, result.err
    [record] = all_metrics(train.outputs)
    assert record["status"] == "ok" and record["config"]["trainer"]["precision"] == "bf16-mixed"


# ------------------------------------------------------------------------------------------------ no code from files


class _RunsCode:
    """Unpickling this creates ``marker``: the proof that loading a file ran code from it."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (Path.touch, (self.marker,))


def test_the_best_checkpoint_is_loaded_as_weights_only(tmp_path: Path) -> None:
    from clusterable.run.training import restore_best

    module = torch.nn.Linear(2, 2)
    module.steps_taken = 1  # type: ignore[attr-defined]
    good = tmp_path / "good.ckpt"
    weights = {k: v + 1 for k, v in module.state_dict().items()}
    torch.save({"epoch": 3, "state_dict": weights, "callbacks": {"score": torch.tensor(0.5)}}, good)
    checkpoint = SimpleNamespace(monitor="val/acc", best_model_path=str(good))
    module.device = torch.device("cpu")  # type: ignore[attr-defined]
    assert restore_best(checkpoint, SimpleNamespace(current_epoch=5), module) == 3
    assert torch.equal(module.weight, weights["weight"])

    marker, bad = tmp_path / "ran", tmp_path / "bad.ckpt"
    torch.save({"epoch": 3, "state_dict": weights, "extra": _RunsCode(marker)}, bad, pickle_protocol=2)
    checkpoint = SimpleNamespace(monitor="val/acc", best_model_path=str(bad))
    with pytest.raises(RuntimeError) as error:
        restore_best(checkpoint, SimpleNamespace(current_epoch=5), module)
    message = str(error.value)
    assert "\n" not in message and str(bad) in message and "could run code" in message
    assert "weights_only=False" not in message and not marker.exists()


def test_a_pickled_agnews_npz_is_refused_unless_allowed(tmp_path: Path) -> None:
    import numpy as np

    from clusterable.data.text.agnews_files import PickledFileError, read_npz

    data = np.empty(2, dtype=object)
    data[0] = {"category": "Sports", "tokens": ["goal"]}
    data[1] = {"category": "World", "tokens": ["summit"]}
    path = tmp_path / "selected_filtered_data.npz"
    np.savez(path, data=data)
    with pytest.raises(PickledFileError) as error:
        read_npz(path, allow_pickle=False)
    message = str(error.value)
    assert "\n" not in message and str(path) in message and "dataset.corpus.allow_pickle=true" in message
    assert [topic for topic, _ in read_npz(path, allow_pickle=True)] == ["Sports", "World"]
    records = np.array([("Sports", "goal", "x")], dtype=[("topic", "U9"), ("title", "U9"), ("description", "U9")])
    np.savez(path, data=records)  # plain records never need pickle
    assert [topic for topic, _ in read_npz(path, allow_pickle=False)] == ["Sports"]


# ------------------------------------------------------------------------------------- the cryptic ones, one line


def test_settings_typed_for_an_unselected_evaluator_name_the_fix(train) -> None:
    # evaluator=[classification] drops the clustering node's _target_; the settings typed for it are a mistake
    # (an experiment's own are left out: test_train's narrowing test)
    result = train(
        "experiment=cross/fashion",
        "debug=smoke",
        "evaluator=[classification]",
        "loss=cce",
        "evaluator.clustering.methods=[gmm]",
    )
    refused_before_training(result, train.outputs, "evaluator.clustering sets methods but names no class")
    assert "select it (evaluator=[..., clustering]) or drop its settings (~evaluator.clustering)" in result.err


def test_an_experiments_recipe_for_another_dataset_names_what_it_covers(train) -> None:
    result = train("experiment=boudiaf/table4", "dataset=digits_zeroshot", "debug=smoke")
    lines = result.error_lines()
    assert result.code == 1 and len(lines) == 1, result
    assert "protocol.feature_norm has no key 'digits_zeroshot' (it has: cub200, cars196, sop, inshop)" in lines[0]


def test_a_head_that_owns_the_network_names_model_identity(train) -> None:
    result = train(*QUICK, "loss=ae1", "checkpoint.monitor=null")
    refused_before_training(result, train.outputs, "loss=ae1 owns the whole network (it reads the 4 input values")
    assert result.err.rstrip().endswith("use model=identity")


@pytest.mark.parametrize("name", ["../..", "/etc", "a/../b", ""])
def test_a_name_that_leads_out_of_the_output_folder_is_refused(train, name: str) -> None:
    result = train(*QUICK, f"name={name}")
    assert result.code == 2 and result.error_lines() == [
        f"error: name={name!r} must be a relative folder name below the output folder (no '..', no absolute path; "
        "'/' between parts): e.g. name=my_study"
    ], result
    assert not train.outputs.exists() or not list(train.outputs.rglob("metrics.json"))


def test_a_list_the_shell_cut_at_a_space_names_the_quoted_form() -> None:
    from clusterable.preflight import split_list

    assert split_list(["-m", "evaluator=[classification,", "clustering]", "seed=0,1"]) == (
        "evaluator=[classification, is cut at a space: the shell split a list; quote it, "
        "'evaluator=[classification, clustering]', or write it without spaces"
    )
    assert split_list(["evaluator=[classification,clustering]", "model.hidden=[500,10]"]) is None


def test_dscl_above_its_regime_names_the_keys_that_exist() -> None:
    from clusterable.heads.dscl import DSCL

    hint = r"the last width of model.hidden for ffnn / cnn, e.g. model.hidden=\[500,10\]"
    with pytest.raises(ValueError, match=hint):
        DSCL(num_classes=3, embedding_dim=5, require_d_le_k=True)
