"""The LightningModule's training modes against plain PyTorch loops on the same weights and data."""

from __future__ import annotations

import copy
import functools
import math

import lightning as L
import pytest
import torch
from torch import nn

from clusterable.callbacks import ClusterUpdates, ValidationMetrics, first_occurrences
from clusterable.contracts import ContractError, EmbedsSplits
from clusterable.data.folders import ImageDataModule
from clusterable.data.memory import InMemoryDataModule
from clusterable.heads.cce import CCELoss
from clusterable.heads.linear_ae import LinearAE
from clusterable.heads.tensorized_ae import TensorizedAE
from clusterable.models.ffnn import FFNN
from clusterable.models.identity import Identity
from clusterable.module import RepresentationModule


def _module_and_data(steps: str, n: int = 40, d: int = 5):
    torch.manual_seed(0)
    x = torch.randn(n, d)
    split = {"inputs": x, "labels": torch.zeros(n, dtype=torch.long)}
    dm = InMemoryDataModule(
        "tiny", lambda: {"train": split, "val": split, "test": split}, [d], 1, batch_size=-1, shuffle_batches=False
    )
    head = LinearAE("ae3", (d,), num_classes=2)
    optimizer = lambda params: torch.optim.Adam(params, lr=0.01, weight_decay=0.1)  # noqa: E731
    return RepresentationModule(Identity((d,)), head, optimizer, optimizer_steps=steps), dm, x


def _fit_one_epoch(module: RepresentationModule, dm: InMemoryDataModule) -> None:
    trainer = L.Trainer(
        max_epochs=1,
        accelerator="cpu",
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        limit_val_batches=0,
    )
    trainer.fit(module, datamodule=dm)


def test_per_sample_steps_equal_the_authors_plain_loop():
    module, dm, x = _module_and_data("per_sample")
    reference = copy.deepcopy(module.head)
    _fit_one_epoch(module, dm)
    # The CSRL authors' train_AE: for each row in order, one Adam(weight_decay=0.1) step on its MSE.
    opt = torch.optim.Adam(reference.parameters(), lr=0.01, weight_decay=0.1)
    for row in x:
        opt.zero_grad()
        torch.nn.functional.mse_loss(reference.decoder(reference.encoder(row[None])), row[None]).backward()
        opt.step()
    for ours, theirs in zip(module.head.parameters(), reference.parameters(), strict=True):
        torch.testing.assert_close(ours, theirs)
    assert module.steps_taken == len(x)


def test_per_batch_takes_one_step_per_batch():
    module, dm, x = _module_and_data("per_batch")
    before = [p.detach().clone() for p in module.head.parameters()]
    _fit_one_epoch(module, dm)
    assert module.steps_taken == 1  # the whole split is one batch
    assert any(not torch.equal(a, b) for a, b in zip(before, module.head.parameters(), strict=True))


# ---- schedules, weight-decay groups, model selection by an evaluator ----------------------------------------


def test_warmcos_follows_the_papers_formula():
    from clusterable.schedules import warmcos, warmcos_factor

    total, warmup = 1000, 100
    for i in (0, 1, 49, 99, 100, 500, 999):  # min((i+1)/100, (1 + cos(pi i / total)) / 2), Boudiaf et al.
        expected = min((i + 1) / warmup, (1 + math.cos(math.pi * i / total)) / 2)
        assert warmcos_factor(i, total, warmup) == pytest.approx(expected)
    param = torch.nn.Parameter(torch.zeros(1))
    opt = torch.optim.SGD([param], lr=0.5)
    scheduler = warmcos(opt, total_steps=total, warmup_steps=warmup)
    rates = []
    for _ in range(300):
        rates.append(opt.param_groups[0]["lr"])
        opt.step()
        scheduler.step()
    assert rates[0] == pytest.approx(0.5 / 100) and rates[99] == pytest.approx(0.5 * warmcos_factor(99, total, 100))
    assert rates[299] == pytest.approx(0.5 * (1 + math.cos(math.pi * 299 / total)) / 2)
    assert warmcos_factor(5, 10, 0) == pytest.approx((1 + math.cos(math.pi / 2)) / 2)  # cosine only
    with pytest.raises(ValueError, match="^warmup_steps must be >= 0, got -1$"):
        warmcos(opt, total_steps=10, warmup_steps=-1)


def test_scheduler_is_stepped_every_optimizer_step_in_both_modes():
    import functools

    from clusterable.schedules import warmcos

    for steps in ("per_batch", "per_sample"):
        module, dm, x = _module_and_data(steps)
        module.scheduler_factory = functools.partial(warmcos, warmup_steps=1000)
        _fit_one_epoch(module, dm)
        taken = len(x) if steps == "per_sample" else 1
        scheduler = module.lr_schedulers()
        assert scheduler.last_epoch == taken  # stepped once per optimizer step
        # Its total is the run's steps: the cosine reaches 0 at the last step.
        assert module.optimizers().param_groups[0]["lr"] == pytest.approx(0.0, abs=1e-12)
        assert scheduler.lr_lambdas[0](0) == pytest.approx(1 / 1000)


def test_weight_decay_on_matrices_leaves_vectors_undecayed():
    module = RepresentationModule(
        FFNN(input_shape=(6,), hidden=[5, 4]),
        CCELoss(num_classes=3, embedding_dim=4, lr=0.5),
        lambda params: torch.optim.SGD(params, lr=0.1, weight_decay=0.01),
        weight_decay_on="matrices",
    )
    groups = module.configure_optimizers()["optimizer"].param_groups
    for g in groups:
        dims = {p.dim() for p in g["params"]}
        assert dims == {2} and g["weight_decay"] == 0.01 or dims == {1} and g["weight_decay"] == 0.0
    # The head keeps its own learning rate in both of its groups.
    head_params = {id(p) for p in module.head.parameters()}
    assert {g["lr"] for g in groups if id(g["params"][0]) in head_params} == {0.5}
    assert sum(len(g["params"]) for g in groups) == len(list(module.parameters()))


def _spread_evaluator(seen: list):
    """An evaluator that declares its one key and records what it was called with."""

    def spread(embeddings, labels, context):
        seen.append((len(labels), context.stage, context.train_embeddings))
        return {"spread": float(embeddings.std())}

    spread.metric_names = lambda: ["spread"]
    return spread


def _trainer(**options) -> L.Trainer:
    return L.Trainer(
        max_epochs=2,
        accelerator="cpu",
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        **options,
    )


def test_validation_metrics_log_the_evaluators_each_epoch_on_the_whole_split():
    seen = []
    module, dm, x = _module_and_data("per_batch")
    dm.eval_batch_size = 7  # several validation batches, gathered before the evaluator runs
    validation = ValidationMetrics({"spread": _spread_evaluator(seen)})
    # What checkpoint.monitor may name, checked before training.
    assert validation.logged_keys() == ["val/spread"] and not validation.logs_undeclared_metrics()
    assert validation.may_log("val/spread") and not validation.may_log("val/sprad")
    trainer = _trainer(num_sanity_val_steps=2, callbacks=[validation])
    trainer.fit(module, datamodule=dm)
    assert seen == [(len(x), "val", None)] * 2  # not during the sanity check; the whole split each epoch
    # The head is an autoencoder (a RepresentingHead): the evaluator scores its embedding of the encoder output.
    with torch.no_grad():
        expected = float(module.head.embed(module.encoder(x)).std())
    assert float(trainer.callback_metrics["val/spread"]) == pytest.approx(expected, rel=1e-5)


def test_an_evaluator_without_declared_keys_lets_any_val_key_be_monitored():
    validation = ValidationMetrics({"spread": _spread_evaluator([]), "plain": lambda e, y, c: {"x": 1.0}})
    assert validation.logged_keys() == ["val/spread"] and validation.logs_undeclared_metrics()
    assert validation.may_log("val/anything") and not validation.may_log("train/anything")


def test_ranks_rows_are_kept_once_in_order_of_first_occurrence():
    # Under DDP each rank pads its share with repeated rows; the gathered rows are de-duplicated by index.
    unique, first = first_occurrences(torch.tensor([3, 1, 3, 2, 1, 0]))
    assert unique.tolist() == [0, 1, 2, 3] and first.tolist() == [5, 1, 3, 0]


def test_constant_buffers_a_submodule_declares_are_not_broadcast_by_ddp():
    class Vectors(nn.Module):
        ddp_constant_buffers = ("table",)

        def __init__(self):
            super().__init__()
            self.register_buffer("table", torch.zeros(3, 2))
            self.register_buffer("moving", torch.zeros(2))

    encoder = Identity((5,))
    encoder.vectors = Vectors()
    module = RepresentationModule(encoder, LinearAE("ae3", (5,), num_classes=2), torch.optim.Adam)
    assert module._ddp_params_and_buffers_to_ignore == ["encoder.vectors.table"]


def test_embed_split_is_the_encoder_in_eval_mode_over_the_evaluation_batches():
    module, dm, x = _module_and_data("per_batch")
    module.encoder = FFNN(input_shape=(5,), hidden=[8, 3], dropout=0.5)
    dm.eval_batch_size = 7
    dm.load()
    module.train()
    assert isinstance(module, EmbedsSplits)
    out, split = module.embed_split(dm, "val")
    module.encoder.eval()
    torch.testing.assert_close(out, module.encoder(x))  # dropout off: every row as evaluated
    assert split.keys() == {"inputs", "labels"} and module.training  # the previous mode restored


def test_a_clustering_head_on_an_image_folder_dataset_updates_its_clusters_on_its_views():
    # Image-folder splits hold no inputs: the cluster updates embed the training split as the evaluators do, through
    # the datamodule's evaluation batches (decoded centre crops).
    seen = []

    class Spy(TensorizedAE):
        def init_clusters(self, embeddings, **split):
            seen.append(("init", embeddings.clone(), {k: v.clone() for k, v in split.items()}))
            super().init_clusters(embeddings, **split)

        def update_clusters(self, embeddings, **split):
            seen.append(("update", embeddings.clone(), {k: v.clone() for k, v in split.items()}))
            super().update_clusters(embeddings, **split)

    dm = ImageDataModule(
        "cub200",
        None,
        [3, 8, 8],
        3,
        batch_size=8,
        eval_batch_size=5,
        source="fake",
        fake_size=24,
        validation="test",
        pin_memory=False,
        progress=False,
    )
    dm.load()
    assert "inputs" not in dm.splits["train"]
    head = Spy("tae1", (3, 8, 8), num_classes=3)
    module = RepresentationModule(Identity((3, 8, 8)), head, functools.partial(torch.optim.Adam, lr=0.01))
    trainer = _trainer(num_sanity_val_steps=0)
    trainer.fit(module, datamodule=dm)
    assert [what for what, _, _ in seen] == ["init", "update", "update"]
    views = torch.cat([b["inputs"].flatten(1) for b in dm.eval_batches("train", "cpu")])
    for _, embeddings, split in seen:
        torch.testing.assert_close(embeddings, views, rtol=0, atol=0)
        assert torch.equal(split["index"], torch.arange(24)) and torch.equal(
            split["labels"], dm.splits["train"]["labels"]
        )
    assert len(head.state.assignment) == 24
    assert len(next(c for c in trainer.callbacks if isinstance(c, ClusterUpdates)).seconds) == 2


def test_cluster_updates_refuse_a_module_that_cannot_embed_a_split_in_one_line():
    class Plain(L.LightningModule):
        head = TensorizedAE("tae1", (4,), num_classes=2)

    with pytest.raises(ContractError, match=r"^ClusterUpdates: Plain must embed splits \(EmbedsSplits\)"):
        ClusterUpdates().on_train_start(_trainer(), Plain())
