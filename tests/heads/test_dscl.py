"""DSCL's loss (Law et al. 2017, Eqs. 9-10) against direct computations with an explicit n x n C and autograd
through ``pinv``; the rank-deficient fallback; the sub-batch backward; the refusals; last-layer-only training."""

from __future__ import annotations

import functools
import logging

import pytest
import torch
from torch import nn

from clusterable.contracts import BatchError, ContractError, EncodingHead
from clusterable.heads.dscl import DSCL, spectral_trace
from clusterable.models.ffnn import FFNN
from clusterable.models.identity import Identity
from clusterable.module import RepresentationModule


def direct_trace(f: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """tr(C F pinv(F)) with C = Y pinv(Y) built as an explicit n x n matrix (the definition)."""
    y = nn.functional.one_hot(torch.unique(labels, return_inverse=True)[1]).to(f.dtype)
    c = y @ torch.linalg.pinv(y)
    return torch.trace(c @ f @ torch.linalg.pinv(f))


def features(n: int, d: int, seed: int, dtype=torch.float64) -> torch.Tensor:
    return torch.randn(n, d, generator=torch.Generator().manual_seed(seed), dtype=dtype)


CASES = [(12, 3, 4), (30, 5, 5), (40, 4, 9), (25, 6, 3)]  # (n, d, k): d < k, d = k, d > k


@pytest.mark.parametrize("n, d, k", CASES)
def test_loss_is_k_minus_the_trace_of_c_f_pinv_f(n, d, k):
    f, labels = features(n, d, n + d), torch.arange(n) % k * 7  # any label values: k distinct ones
    out = DSCL(num_classes=k, embedding_dim=d)(f, labels)
    expected = k - direct_trace(f, labels)
    assert float(out["dscl"]) == pytest.approx(float(expected), rel=1e-10)
    assert float(out["loss"]) == pytest.approx(float(expected) / 2, rel=1e-10)
    assert 0 <= float(out["dscl"]) <= k


@pytest.mark.parametrize("n, d, k", CASES)
def test_gradient_is_the_closed_form_and_matches_autograd_through_pinv(n, d, k):
    f, labels = features(n, d, 3 * n + d), torch.arange(n) % k
    ours = f.clone().requires_grad_()
    (grad,) = torch.autograd.grad(spectral_trace(ours, labels)[0], ours)
    reference = f.clone().requires_grad_()
    (expected,) = torch.autograd.grad(direct_trace(reference, labels), reference)
    assert float((grad - expected).norm() / expected.norm()) < 1e-8
    # The trained loss (dscl / 2) moves along the paper's G = (I - F F^+) C (F^+)^T (Eq. 8 halved, Eq. 9).
    y = nn.functional.one_hot(labels).double()
    c, pinv = y @ torch.linalg.pinv(y), torch.linalg.pinv(f)
    g = (torch.eye(n, dtype=f.dtype) - f @ pinv) @ c @ pinv.T
    trained = f.clone().requires_grad_()
    (step,) = torch.autograd.grad(DSCL(num_classes=k, embedding_dim=d)(trained, labels)["loss"], trained)
    assert float((step + g).norm() / g.norm()) < 1e-8


def test_gradcheck():
    f, labels = features(15, 3, 1).requires_grad_(), torch.arange(15) % 4
    assert torch.autograd.gradcheck(lambda x: spectral_trace(x, labels)[0], (f,))


def test_rank_deficient_features_fall_back_to_the_svd_once_and_never_give_nan(caplog):
    base = features(20, 3, 2)
    f = torch.cat([base, base[:, :1]], dim=1)  # 4 columns of rank 3: F^T F is singular
    labels = torch.arange(20) % 5
    trace, k, fallback = spectral_trace(f, labels)
    assert fallback and k == 5 and float(trace) == pytest.approx(float(direct_trace(f, labels)), rel=1e-8)
    assert not spectral_trace(base, labels)[2]  # full column rank: Cholesky
    head = DSCL(num_classes=5, embedding_dim=4)
    x = f.clone().requires_grad_()
    with caplog.at_level(logging.WARNING):
        head(x, labels)["loss"].backward()
        head(f, labels)
    assert torch.isfinite(x.grad).all()
    assert sum("rank-deficient" in r.message for r in caplog.records) == 1
    # Collapsed embeddings (every row equal) too.
    trace, _, fallback = spectral_trace(torch.ones(10, 3, dtype=torch.float64), torch.arange(10) % 2)
    assert fallback and torch.isfinite(trace)


def test_float32_inputs_are_scored_in_the_compute_dtype():
    f, labels = features(30, 4, 5, torch.float32), torch.arange(30) % 6
    out64 = DSCL(num_classes=6, embedding_dim=4)(f, labels)
    out32 = DSCL(num_classes=6, embedding_dim=4, compute_dtype="float32")(f, labels)
    assert out64["loss"].dtype == out32["loss"].dtype == torch.float32
    expected = 6 - float(direct_trace(f.double(), labels))
    assert float(out64["dscl"]) == pytest.approx(expected, rel=1e-6)
    assert float(out32["dscl"]) == pytest.approx(expected, rel=1e-3)


class TwoLayers(nn.Module):
    """A small encoder without BatchNorm (the sub-batch scheme gives a full backward's gradient exactly then)."""

    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(6, 16), nn.Tanh())
        self.embedding_layer = nn.Linear(16, 4)
        self.embedding_dim = 4

    def forward(self, x):
        return self.embedding_layer(self.body(x))


def test_sub_batches_give_the_parameter_gradient_of_one_full_backward():
    torch.manual_seed(0)
    x, labels = torch.randn(24, 6), torch.arange(24) % 6
    grads = []
    for sub in (None, 4, 12):
        torch.manual_seed(1)
        encoder, head = TwoLayers(), DSCL(num_classes=6, embedding_dim=4, sub_batch_size=sub)
        assert isinstance(head, EncodingHead)
        head(head.encode(encoder, x), labels)["loss"].backward()
        grads.append(torch.cat([p.grad.flatten() for p in encoder.parameters()]))
    for other in grads[1:]:
        torch.testing.assert_close(other, grads[0], rtol=1e-5, atol=1e-7)
    # Without gradients (validation), the encoder runs once on the whole batch.
    with torch.no_grad():
        assert DSCL(num_classes=6, embedding_dim=4, sub_batch_size=5).encode(encoder, x).shape == (24, 4)


def test_the_module_embeds_training_batches_through_the_head():
    calls = []

    def counting(x):
        calls.append(len(x))
        return encoder(x)

    torch.manual_seed(0)
    encoder = TwoLayers()
    head = DSCL(num_classes=6, embedding_dim=4, sub_batch_size=4)
    module = RepresentationModule(encoder, head, functools.partial(torch.optim.SGD, lr=0.1))
    module.encode = counting  # type: ignore[method-assign]
    batch = {"inputs": torch.randn(12, 6), "labels": torch.arange(12) % 6}
    module.loss_parts(batch)["loss"].backward()
    assert calls == [4, 4, 4, 4, 4, 4]  # 3 sub-batches embedded without activations, then again in backward


@pytest.mark.parametrize(
    "labels, embedding_dim, options, message",
    [
        (torch.zeros(8, dtype=torch.long), 2, {}, "holds a single class"),
        (torch.tensor([0, 1, 2, -1, 0, 1, 2, 0]), 2, {}, "labelled -1"),
        (torch.arange(8) % 3, 4, {"require_d_le_k": True}, "d = 4 exceeds the k = 3 classes in this batch"),
    ],
)
def test_bad_batches_are_refused_in_one_line(labels, embedding_dim, options, message):
    head = DSCL(num_classes=10, embedding_dim=embedding_dim, **options)
    with pytest.raises(BatchError, match=message) as error:
        head(features(8, embedding_dim, 0), labels)
    assert "\n" not in str(error.value)


def test_a_sub_batch_size_that_does_not_divide_the_batch_is_refused():
    head = DSCL(num_classes=6, embedding_dim=4, sub_batch_size=5)
    with pytest.raises(BatchError, match="sub_batch_size = 5 does not divide the batch of 12 rows"):
        head.encode(TwoLayers(), torch.randn(12, 6, requires_grad=True))


@pytest.mark.parametrize(
    "options, message",
    [
        ({"num_classes": 3, "embedding_dim": 5, "require_d_le_k": True}, "d = 5 is larger than the k = 3"),
        ({"num_classes": 3, "embedding_dim": 2, "sub_batch_size": 0}, "sub_batch_size must be >= 1"),
        ({"num_classes": 3, "embedding_dim": 2, "compute_dtype": "float16"}, "compute_dtype must be one of"),
        (
            {"num_classes": 3, "embedding_dim": 2, "require_d_le_k": "yes"},
            "require_d_le_k must be true or false",
        ),
    ],
)
def test_bad_options_are_refused(options, message):
    with pytest.raises(ValueError, match=message):
        DSCL(**options)


def test_trainable_embedding_layer_trains_only_that_layer_and_keeps_the_rest_in_eval_mode():
    torch.manual_seed(0)
    encoder = FFNN(input_shape=[6], hidden=[8, 3], dropout=0.5)
    head = DSCL(num_classes=3, embedding_dim=3)
    module = RepresentationModule(
        encoder, head, functools.partial(torch.optim.SGD, lr=0.5), trainable="embedding_layer"
    )
    module.train()
    first_dropout = encoder.net[3]
    assert isinstance(first_dropout, nn.Dropout) and not first_dropout.training
    assert encoder.embedding_layer.training
    before = {name: p.detach().clone() for name, p in encoder.named_parameters()}
    optimizer = module.configure_optimizers()["optimizer"]
    batch = {"inputs": torch.randn(12, 6), "labels": torch.arange(12) % 3}
    module.loss_parts(batch)["loss"].backward()
    optimizer.step()
    changed = {name for name, p in encoder.named_parameters() if not torch.equal(p, before[name])}
    last = {
        f"net.{i}.{w}" for i, m in enumerate(encoder.net) if m is encoder.embedding_layer for w in ("weight", "bias")
    }
    assert changed == last


def test_trainable_embedding_layer_needs_an_encoder_that_has_one():
    with pytest.raises(ContractError, match="Identity has no embedding layer"):
        RepresentationModule(
            Identity([4]),
            DSCL(num_classes=3, embedding_dim=4),
            functools.partial(torch.optim.SGD, lr=0.1),
            trainable="embedding_layer",
        )
    with pytest.raises(ValueError, match="trainable must be all or embedding_layer, got 'last'"):
        RepresentationModule(
            Identity([4]),
            DSCL(num_classes=3, embedding_dim=4),
            functools.partial(torch.optim.SGD, lr=0.1),
            trainable="last",
        )
