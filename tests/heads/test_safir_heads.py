"""The semi-supervised heads of Safir 2022 (DML, DML Autoencoder, DML with a prior, MetricVAE): the schedule's terms
per epoch, unlabelled batches, gradients (none at all for the metric head where L_S weighs 0), the range checks, and
every config run end to end through train.py's pipeline on the digits."""

from __future__ import annotations

import functools
import json
import math

import pytest
import torch
from helpers.running import metrics_files
from hydra import compose, initialize_config_dir
from pytorch_metric_learning import losses, miners

from clusterable.config import CONFIG_DIR, ConfigError, build
from clusterable.contracts import ContractError, Head, RepresentingHead, require
from clusterable.heads.center import CenterLoss
from clusterable.heads.dml import DML
from clusterable.heads.dml_ae import DMLAutoencoder
from clusterable.heads.dml_prior import DMLPrior
from clusterable.heads.mvae import MVAE
from clusterable.heads.pml import PMLHead
from clusterable.heads.priors import kl_unit_gaussian
from clusterable.models import FFNN

K, D, LATENT, SHAPE, N = 3, 8, 4, [12], 24
TRIPLET = functools.partial(
    PMLHead,
    loss=functools.partial(losses.TripletMarginLoss, margin=0.1),
    miner=functools.partial(miners.TripletMarginMiner, margin=0.1, type_of_triplets="semihard"),
)
SUPCON = functools.partial(PMLHead, loss=losses.SupConLoss)
COMMON = {"num_classes": K, "embedding_dim": D, "latent_dim": LATENT}
DECODING = {"input_shape": SHAPE, "decoder_hidden": [6]}
# name -> (class, its small settings); "dml_unit" and "dml_gmm" are the thesis's two priors (Table 6.3)
HEADS = {
    "dml": (DML, COMMON),
    "dml_ae": (DMLAutoencoder, {**COMMON, **DECODING}),
    "dml_unit": (DMLPrior, {**COMMON, "prior": "unit"}),
    "dml_gmm": (DMLPrior, {**COMMON, "prior": "gmm"}),
    "mvae": (MVAE, {**COMMON, **DECODING, "pseudo_inputs": 5, "beta": 0.5}),
}
UNSUPERVISED = {"dml_ae": ("recon",), "dml_unit": ("kl",), "dml_gmm": ("kl",), "mvae": ("recon", "kl")}


def make(name: str, metric=TRIPLET, **kw):
    torch.manual_seed(0)
    cls, settings = HEADS[name]
    return cls(**{**settings, "metric": metric, **kw})


def data(unlabelled: bool = False, seed: int = 0) -> tuple[FFNN, dict]:
    """An encoder (12 -> 8) and a batch: inputs in [0, 1], three classes, every fourth row unlabelled."""
    g = torch.Generator().manual_seed(seed)
    torch.manual_seed(seed)
    encoder = FFNN(SHAPE, hidden=(D,))
    labels = torch.arange(N) % K
    labels[::4] = -1
    if unlabelled:
        labels[:] = -1
    return encoder, {"inputs": torch.rand(N, *SHAPE, generator=g), "labels": labels, "index": torch.arange(N)}


def run(head, encoder, batch, epoch: int) -> dict[str, torch.Tensor]:
    """The head called as the module calls it."""
    return head(
        encoder(batch["inputs"]),
        batch["labels"],
        inputs=batch["inputs"],
        epoch=epoch,
        encoder=encoder,
        index=batch["index"],
    )


def unsupervised(name: str, head, out: dict) -> torch.Tensor:
    """L_U from the logged parts: recon, kl, or recon + kl_weight kl (the MVAE's beta on its kl_scale)."""
    if name == "mvae":
        return out["recon"] + head.kl_weight * out["kl"]
    return out[UNSUPERVISED[name][0]]


def close(a: torch.Tensor, b: torch.Tensor) -> bool:
    return math.isclose(float(a.detach()), float(b.detach()), rel_tol=1e-6, abs_tol=1e-7)


# --- the schedule (Safir 2022 §5, Algorithms 2-5; Table 6.6 for joint) ------------------------------------------


@pytest.mark.parametrize("name", list(UNSUPERVISED))
@pytest.mark.parametrize("metric", [TRIPLET, CenterLoss], ids=["triplet", "center"])
def test_alternate_schedule_weighs_the_terms_per_epoch(name, metric):
    head = make(name, metric=metric, schedule="alternate", alpha=0.25)
    encoder, batch = data()
    own = set(UNSUPERVISED[name])
    for epoch in (0, 1, 2, 3):
        out = run(head, encoder, batch, epoch)
        l_u = unsupervised(name, head, out)
        if epoch % 2 == 0:  # the thesis's odd epochs (1-based): (1 - alpha) L_S + alpha L_U
            assert set(out) == {"loss", "supervised", *own}
            assert close(out["loss"], 0.75 * out["supervised"] + 0.25 * l_u)
        else:  # alpha L_U alone
            assert set(out) == {"loss", *own}
            assert close(out["loss"], 0.25 * l_u)
        assert all(v.ndim == 0 and torch.isfinite(v) for v in out.values())


@pytest.mark.parametrize("name", list(UNSUPERVISED))
def test_alpha_one_never_computes_the_supervised_loss(name):
    head = make(name, schedule="alternate", alpha=1.0)
    encoder, batch = data()
    for epoch in (0, 1, 2):
        out = run(head, encoder, batch, epoch)
        assert set(out) == {"loss", *UNSUPERVISED[name]} and close(out["loss"], unsupervised(name, head, out))


@pytest.mark.parametrize("name", list(UNSUPERVISED))
@pytest.mark.parametrize("gamma", [0.0, 2.0])
def test_joint_schedule_is_the_same_every_epoch(name, gamma):
    head = make(name, schedule="joint", alpha=0.5, gamma=gamma)  # alpha: checked, not used
    encoder, batch = data()
    for epoch in (0, 1, 2):
        out = run(head, encoder, batch, epoch)
        l_u = unsupervised(name, head, out)
        if gamma == 0:
            assert set(out) == {"loss", *UNSUPERVISED[name]} and close(out["loss"], l_u)
        else:
            assert set(out) == {"loss", "supervised", *UNSUPERVISED[name]}
            assert close(out["loss"], l_u + gamma * out["supervised"])


def test_dml_is_gamma_times_the_metric_loss_every_epoch():
    head = make("dml", metric=SUPCON, gamma=2.0)
    encoder, batch = data()
    for epoch in (0, 1, 2):
        out = run(head, encoder, batch, epoch)
        assert set(out) == {"loss", "supervised"} and close(out["loss"], 2.0 * out["supervised"])
    keep = batch["labels"] >= 0
    z = head.latent(encoder(batch["inputs"]))
    direct = losses.SupConLoss()(z[keep], batch["labels"][keep])  # the metric on the labelled rows only
    assert close(out["supervised"], direct)


# --- unlabelled batches and gradients ----------------------------------------------------------------------------


@pytest.mark.parametrize("name", list(HEADS))
@pytest.mark.parametrize("metric", [TRIPLET, SUPCON, CenterLoss], ids=["triplet", "supcon", "center"])
def test_a_batch_without_labels_gives_a_finite_loss_and_zero_supervised(name, metric):
    head = make(name, metric=metric)
    encoder, batch = data(unlabelled=True)
    out = run(head, encoder, batch, epoch=0)
    assert out["supervised"].item() == 0.0 and all(torch.isfinite(v) for v in out.values())
    out["loss"].backward()  # connected to the graph, also for DML whose loss is L_S alone
    assert encoder.net[1].weight.grad is not None


@pytest.mark.parametrize("name", list(HEADS))
@pytest.mark.parametrize("epoch", [0, 1])
def test_gradient_reaches_the_encoder(name, epoch):
    head = make(name, **({} if name == "dml" else {"schedule": "alternate", "alpha": 0.5}))
    encoder, batch = data()
    run(head, encoder, batch, epoch)["loss"].backward()
    grad = encoder.net[1].weight.grad
    assert grad is not None and grad.abs().sum() > 0


@pytest.mark.parametrize("name", list(UNSUPERVISED))
@pytest.mark.parametrize(
    "settings, epoch, trained",
    [
        ({"schedule": "alternate", "alpha": 1.0}, 0, False),
        ({"schedule": "alternate", "alpha": 0.5}, 1, False),
        ({"schedule": "joint", "gamma": 0.0}, 0, False),
        ({"schedule": "alternate", "alpha": 0.5}, 0, True),
    ],
)
def test_metric_parameters_get_no_gradient_where_the_supervised_weight_is_zero(name, settings, epoch, trained):
    head = make(name, metric=CenterLoss, **settings)
    encoder, batch = data()
    run(head, encoder, batch, epoch)["loss"].backward()
    grads = [p.grad for p in head.metric.parameters()]
    assert grads and all((g is not None) == trained for g in grads)
    others = [p.grad for n, p in head.named_parameters() if not n.startswith("metric.")]
    assert all(g is not None for g in others)


def test_mvae_trains_its_pseudo_inputs_through_the_run_encoder():
    head = make("mvae")
    encoder, batch = data()
    out = run(head, encoder, batch, epoch=1)
    out["kl"].backward()
    assert head.prior.pseudo_inputs.grad is not None and head.prior.pseudo_inputs.grad.abs().sum() > 0
    assert encoder.net[1].weight.grad is not None and head.decoder[0].weight.grad is None  # kl: no decoder
    with pytest.raises(ValueError, match="run's encoder"):
        head(encoder(batch["inputs"]), batch["labels"], inputs=batch["inputs"])


# --- representation, evaluation mode, reconstruction ---------------------------------------------------------------


@pytest.mark.parametrize("name", list(HEADS))
def test_embed_is_the_deterministic_latent(name):
    head = make(name)
    require(head, RepresentingHead, name)
    require(head, Head, name)
    encoder, batch = data()
    h = encoder(batch["inputs"])
    z = head.embed(h, **batch)
    assert z.shape == (N, LATENT) and torch.equal(z, head.embed(h, **batch)) and not z.requires_grad
    layer = head.latent if name in ("dml", "dml_ae") else head.mu
    assert torch.allclose(z, layer(h))


def test_prior_head_in_evaluation_uses_the_mean_and_the_analytic_kl():
    head = make("dml_unit").eval()
    encoder, batch = data()
    h = encoder(batch["inputs"])
    first, second = run(head, encoder, batch, 0), run(head, encoder, batch, 0)
    assert all(torch.equal(first[k], second[k]) for k in first)  # no sampling in evaluation
    assert close(first["kl"], kl_unit_gaussian(head.mu(h), head.logvar(h)).mean())


def test_reconstruction_reductions_and_targets():
    encoder, batch = data()
    summed = make("dml_ae", recon_reduction="sum")
    mean = make("dml_ae", recon_reduction="mean")
    h = encoder(batch["inputs"])
    out_sum, out_mean = run(summed, encoder, batch, 1), run(mean, encoder, batch, 1)
    assert close(out_sum["recon"], out_mean["recon"] * SHAPE[0])  # same weights: sum = mean x d_in
    x_hat = summed.decoder(summed.latent(h))
    assert close(out_sum["recon"], (x_hat - batch["inputs"]).pow(2).sum(1).mean())
    targets = torch.zeros_like(batch["inputs"])  # a de-noising batch reconstructs its targets
    out = summed(h, batch["labels"], inputs=batch["inputs"], targets=targets, epoch=1)
    assert close(out["recon"], x_hat.pow(2).sum(1).mean())
    assert 0 < float(x_hat.detach().min()) and float(x_hat.detach().max()) < 1  # sigmoid output: pixels


def with_constant_decoder(head):
    """The head with its decoder's last layer zeroed: every reconstructed value is sigmoid(0) = 0.5."""
    last = head.decoder[-2]
    with torch.no_grad():
        last.weight.zero_()
        last.bias.zero_()
    return head


@pytest.mark.parametrize("name", ["dml_ae", "mvae"])
def test_the_reconstruction_is_the_per_value_mean_by_default(name):
    # Algorithm 5's MSE(x, x_hat): a hand-made batch of 0s and 1s against x_hat = 0.5 gives 0.25 per value, so the
    # mean over rows and values is 0.25 and the first reading (summed over the 12 values) 3.0
    encoder, batch = data()
    batch["inputs"] = (torch.arange(N * SHAPE[0]).reshape(N, *SHAPE) % 3 == 0).to(torch.float32)
    default = with_constant_decoder(make(name))
    summed = with_constant_decoder(make(name, recon_reduction="sum"))
    assert default.recon_reduction == "mean"
    assert run(default, encoder, batch, 1)["recon"].item() == pytest.approx(0.25)
    assert run(summed, encoder, batch, 1)["recon"].item() == pytest.approx(3.0)


def mvae_unsupervised_epoch(head, encoder, batch) -> dict[str, torch.Tensor]:
    """An epoch of L_U alone (alpha = 1), the Monte Carlo draws seeded: two heads see the same noise."""
    torch.manual_seed(5)
    return run(head.eval(), encoder, batch, 1)


def test_mvae_kl_is_scaled_per_reconstructed_value_by_default():
    encoder, batch = data()
    per_value, per_row = make("mvae", alpha=1.0), make("mvae", alpha=1.0, kl_scale="per_row")
    assert per_value.kl_scale == "per_value" and per_value.kl_weight == pytest.approx(0.5 / SHAPE[0])
    assert per_row.kl_weight == 0.5
    out = mvae_unsupervised_epoch(per_value, encoder, batch)
    assert out["kl"].item() > 0 and close(out["loss"], out["recon"] + 0.5 / SHAPE[0] * out["kl"])
    out = mvae_unsupervised_epoch(per_row, encoder, batch)
    assert close(out["loss"], out["recon"] + 0.5 * out["kl"])


def test_mvae_old_setting_reproduces_the_old_loss_and_the_default_is_it_per_value():
    # recon_reduction=sum, kl_scale=per_row: squared error summed over the values plus beta times the per-row KL,
    # the loss before the defaults changed; the defaults give the same L_U divided by d_in (the ELBO's balance)
    encoder, batch = data()
    old = make("mvae", alpha=1.0, recon_reduction="sum", kl_scale="per_row")
    out_old = mvae_unsupervised_epoch(old, encoder, batch)
    h = encoder(batch["inputs"])
    mu, logvar = old.posterior(h)
    torch.manual_seed(5)
    kl = old.kl(mu, logvar, encoder).mean()
    by_hand = (old.decoder(mu) - batch["inputs"]).pow(2).sum(1).mean() + 0.5 * kl
    assert close(out_old["loss"], by_hand) and close(out_old["kl"], kl)
    out_new = mvae_unsupervised_epoch(make("mvae", alpha=1.0), encoder, batch)  # the same weights (make seeds)
    assert close(out_new["loss"], out_old["loss"] / SHAPE[0]) and close(out_new["kl"], out_old["kl"])


# --- constructor checks ----------------------------------------------------------------------------------------


def _not_a_head(num_classes: int, embedding_dim: int) -> torch.nn.Module:
    return torch.nn.Identity()


@pytest.mark.parametrize(
    "name, kwargs, error, message",
    [
        ("dml_ae", {"alpha": 0.0}, ValueError, "alpha must be in (0, 1], got 0.0"),
        ("mvae", {"alpha": 1.5, "schedule": "joint"}, ValueError, "alpha must be in (0, 1], got 1.5"),
        ("dml_unit", {"latent_dim": 0}, ValueError, "latent_dim must be >= 1, got 0"),
        ("dml", {"latent_dim": 0}, ValueError, "latent_dim must be >= 1, got 0"),
        ("dml", {"schedule": "alternate"}, ValueError, "schedule must be joint for DML: it has no unsupervised"),
        ("dml", {"gamma": 0.0}, ValueError, "gamma must be > 0, got 0.0"),
        ("dml_ae", {"gamma": -1.0}, ValueError, "gamma must be >= 0, got -1.0"),
        ("dml_ae", {"schedule": "both"}, ValueError, "schedule must be one of alternate, joint, got 'both'"),
        ("dml_ae", {"recon_reduction": "l1"}, ValueError, "recon_reduction must be one of sum, mean, got 'l1'"),
        ("dml_ae", {"decoder_hidden": []}, ValueError, "decoder_hidden must be a non-empty list of positive"),
        ("mvae", {"negative_slope": -1.0}, ValueError, "negative_slope must be >= 0, got -1.0"),
        ("mvae", {"kl_samples": 0}, ValueError, "kl_samples must be >= 1, got 0"),
        ("mvae", {"pseudo_inputs": 0}, ValueError, "pseudo_inputs must be >= 1, got 0"),
        ("mvae", {"beta": -0.5}, ValueError, "beta must be >= 0, got -0.5"),
        ("mvae", {"kl_scale": "per_pixel"}, ValueError, "kl_scale must be one of per_value, per_row, got 'per_pixel'"),
        ("dml_gmm", {"kl_samples": 0}, ValueError, "kl_samples must be >= 1, got 0"),
        ("dml_gmm", {"latent_dim": 13}, ValueError, "latent_dim=13 gives a GMM prior of 2^13 = 8,192 components"),
        ("dml_gmm", {"gmm_logvar": math.inf}, ValueError, "gmm_logvar must be finite, got inf"),
        ("dml_ae", {"metric": functools.partial(CenterLoss, lr=0.1)}, ValueError, "metric.lr must be null, got 0.1"),
        ("dml_ae", {"metric": functools.partial(CenterLoss, lam=2.0)}, ValueError, "metric.lam must be in [0, 1]"),
        (
            "dml",
            {"metric": functools.partial(CenterLoss, num_classes=5)},
            ValueError,
            "metric.num_classes is set by the head (num_classes=3)",
        ),
        ("dml", {"metric": _not_a_head}, ContractError, "metric: Identity is not a Head (missing: loss_parts"),
    ],
)
def test_out_of_range_arguments_are_refused_in_one_line(name, kwargs, error, message):
    with pytest.raises(error) as caught:
        make(name, **kwargs)
    assert str(caught.value).startswith(message) and "\n" not in str(caught.value)


def test_dml_prior_draws_the_prior_it_is_given():
    assert make("dml_unit").gmm is None
    gmm = make("dml_gmm", gmm_logvar=0.5).gmm
    assert gmm.latent_dim == LATENT and gmm.logvar == 0.5 and len(gmm.means) == 2**LATENT


# --- configs ---------------------------------------------------------------------------------------------------


def loss_config(*overrides: str):
    with initialize_config_dir(config_dir=CONFIG_DIR, version_base=None):
        return compose(config_name="train", overrides=list(overrides)).loss


@pytest.mark.parametrize("name", ["dml", "dml_ae", "dml_prior", "mvae"])
@pytest.mark.parametrize("metric", ["triplet", "supcon", "center"])
def test_configs_build_with_every_metric(name, metric):
    head = build(
        loss_config(f"loss={name}", f"loss/metric={metric}"), "loss", num_classes=4, embedding_dim=D, input_shape=SHAPE
    )
    assert head.latent_dim == 10 and head.metric.embedding_dim == 10 and head.metric.num_classes == 4
    expected = {"triplet": "TripletMarginLoss", "supcon": "SupConLoss", "center": None}[metric]
    if expected is None:
        assert isinstance(head.metric, CenterLoss)
    else:
        assert type(head.metric.loss_fn).__name__ == expected
    if metric == "triplet":
        assert head.metric.loss_fn.margin == 0.1 and head.metric.miner_fn.type_of_triplets == "semihard"
    assert head.schedule == ("joint" if name == "dml" else "alternate")
    if name in ("dml_ae", "mvae"):  # Algorithm 5's MSE; the MVAE's KL per reconstructed value with it
        assert head.recon_reduction == "mean"
    if name == "mvae":
        assert head.kl_scale == "per_value" and head.kl_weight == pytest.approx(head.beta / SHAPE[0])


@pytest.mark.parametrize(
    "overrides, message",
    [
        (
            ["loss=dml_prior", "loss.prior=gmm", "loss.latent_dim=13"],
            "loss.latent_dim=13 gives a GMM prior of",
        ),
        (
            ["loss=mvae", "loss/metric=center", "loss.metric.lam=2"],
            "loss.metric.lam must be in [0, 1], got 2",
        ),
        (["loss=mvae", "+loss.metric.loss.marginn=0.3"], "loss.metric.loss.marginn is not an option of"),
        (["loss=dml", "loss.schedule=alternate"], "loss.schedule must be joint for DML"),
        (["loss=dml_ae", "loss.alpha=0"], "loss.alpha must be in (0, 1], got 0"),
        (
            ["loss=mvae", "loss.schedule=both"],
            "loss.schedule must be one of 'alternate', 'joint', got 'both'",
        ),
        (["loss=dml_ae", "+loss.beta=1.0"], "loss.beta is not an option of DMLAutoencoder"),
        (["loss=dml_ae", "+loss.kl_scale=per_row"], "loss.kl_scale is not an option of DMLAutoencoder"),
        (
            ["loss=mvae", "loss.kl_scale=per_pixel"],
            "loss.kl_scale must be one of 'per_value', 'per_row', got",
        ),
    ],
)
def test_config_errors_are_one_line(overrides, message):
    with pytest.raises(ConfigError) as error:
        build(loss_config(*overrides), "loss", num_classes=4, embedding_dim=D, input_shape=SHAPE)
    assert str(error.value).startswith(message) and "\n" not in str(error.value)


RUN = [
    "dataset=digits",
    "model=ffnn",
    "trainer.max_epochs=2",
    "+trainer.limit_train_batches=2",
    "trainer.enable_progress_bar=false",
    "evaluator=[classification]",
    "checkpoint.monitor=null",
    "logger=none",
]


@pytest.mark.parametrize(
    "overrides",
    [["loss=dml"], ["loss=dml_ae"], ["loss=dml_prior", "loss.prior=gmm", "loss.latent_dim=4"], ["loss=mvae"]],
    ids=["dml", "dml_ae", "dml_prior_gmm", "mvae"],
)
def test_every_head_runs_end_to_end(train, overrides):
    result = train(*overrides, *RUN)
    assert result.code == 0, result.err
    (path,) = metrics_files(train.outputs)
    m = json.loads(path.read_text())
    assert m["status"] == "ok", m["error"]
    assert math.isfinite(m["metrics"]["train/loss"]) and 0 <= m["metrics"]["test/acc"] <= 1


def test_a_run_with_almost_no_labels_goes_on_through_unlabelled_batches(train):
    # 1% of digits' 1,258 training labels: 13, so most batches of 128 hold none and DML's loss is 0 there
    result = train("loss=dml", "loss/metric=center", "dataset.labelled_percent=1", *RUN)
    assert result.code == 0, result.err
    (path,) = metrics_files(train.outputs)
    m = json.loads(path.read_text())
    assert m["status"] == "ok" and math.isfinite(m["metrics"]["train/loss"]), m


def test_algorithm_4_s_printed_sign_is_a_switch_of_the_monte_carlo_kl_heads() -> None:
    with pytest.raises(ValueError, match=r"kl_formula=thesis_alg4 is the thesis's Monte Carlo KL .*set prior=gmm"):
        make("dml_unit", kl_formula="thesis_alg4")
    mu, logvar = torch.zeros(5, LATENT), torch.zeros(5, LATENT)
    exact, printed = make("dml_gmm"), make("dml_gmm", kl_formula="thesis_alg4")
    torch.manual_seed(1)
    a = exact.kl(mu, logvar)
    torch.manual_seed(1)
    b = printed.kl(mu, logvar)
    # the same draws: log q - log p against log p - P, P = -0.5 eps^2 (log q = P - d/2 log 2 pi)
    assert torch.allclose(a + b, torch.full_like(a, -0.5 * LATENT * math.log(2 * math.pi)), atol=1e-5)
    assert make("mvae", kl_formula="thesis_alg4").kl_formula == "thesis_alg4"
    # the printed form is unbounded below: its runaway is a result of the grid (recorded diverged), the KL's is not
    from clusterable.contracts import WatchesDivergence

    assert isinstance(printed, WatchesDivergence) and printed.unbounded and not exact.unbounded
