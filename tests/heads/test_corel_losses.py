"""COREL heads (CCE, center, Cosine-COREL, Gaussian-COREL) against per-sample loops over the equations."""

from __future__ import annotations

import math
from pathlib import Path

import hydra
import pytest
import torch
import torch.nn.functional as F
from omegaconf import OmegaConf

from clusterable.heads import CCELoss, CenterLoss, CosineCOREL, GaussianCOREL

CONF = Path(__file__).resolve().parents[2] / "conf" / "loss"
K, D = 3, 4
LAMS = [0.0, 0.3, 0.5, 1.0]


def tiny_batch(seed: int = 0, dtype=torch.float64) -> tuple[torch.Tensor, torch.Tensor]:
    """Six 4-d embeddings, two of them unlabelled (-1)."""
    g = torch.Generator().manual_seed(seed)
    h = torch.randn(6, D, generator=g, dtype=dtype)
    y = torch.tensor([0, 1, 2, -1, 1, -1])
    return h, y


def with_weight(head: torch.nn.Module, seed: int = 1) -> torch.nn.Module:
    g = torch.Generator().manual_seed(seed)
    head = head.double()
    with torch.no_grad():
        head.weight.copy_(torch.randn(K, D, generator=g, dtype=torch.float64))
        if hasattr(head, "bias"):
            head.bias.copy_(torch.randn(K, generator=g, dtype=torch.float64))
    return head


def labelled_rows(h, y):
    return [(h[i], int(y[i])) for i in range(len(y)) if y[i] >= 0]


def naive_gaussian(h, y, w, lam, gamma):
    terms = []
    for hi, yi in labelled_rows(h, y):
        sims = [-gamma * float(((hi - w[k]) ** 2).sum()) for k in range(K)]
        attract = -sims[yi]
        repel = math.log(sum(math.exp(s) for s in sims))
        terms.append(lam * attract + (1 - lam) * repel)
    return sum(terms) / len(terms)


def naive_cosine(h, y, w, lam):
    terms = []
    for hi, yi in labelled_rows(h, y):
        cos = [float(hi @ w[k] / (hi.norm() * w[k].norm())) for k in range(K)]
        wrong = max(cos[k] for k in range(K) if k != yi)
        terms.append(lam * -cos[yi] + (1 - lam) * max(0.0, wrong) ** 2)
    return sum(terms) / len(terms)


def naive_cce(h, y, w, b):
    terms = []
    for hi, yi in labelled_rows(h, y):
        z = [float(hi @ w[k] + b[k]) for k in range(K)]
        terms.append(-z[yi] + math.log(sum(math.exp(v) for v in z)))
    return sum(terms) / len(terms)


def naive_center_term(h, y, c):
    terms = [0.5 * float(((hi - c[yi]) ** 2).sum()) for hi, yi in labelled_rows(h, y)]
    return sum(terms) / len(terms)


@pytest.mark.parametrize("lam", LAMS)
def test_gaussian_matches_loop(lam):
    h, y = tiny_batch()
    head = with_weight(GaussianCOREL(K, D, lam=lam, gamma=0.7))
    out = head(h, y)
    assert head.gamma.item() == pytest.approx(0.7, rel=1e-6)  # stored as float32 log gamma
    expected = naive_gaussian(h, y, head.weight.detach(), lam, head.gamma.item())
    assert out["loss"].item() == pytest.approx(expected, rel=1e-10)
    assert out["loss"].item() == pytest.approx(lam * out["attract"].item() + (1 - lam) * out["repel"].item())


@pytest.mark.parametrize("lam", LAMS)
def test_cosine_matches_loop(lam):
    h, y = tiny_batch()
    head = with_weight(CosineCOREL(K, D, lam=lam))
    expected = naive_cosine(h, y, head.weight.detach(), lam)
    assert head(h, y)["loss"].item() == pytest.approx(expected, rel=1e-10)


def test_cosine_repulsion_is_zero_when_wrong_classes_are_negative():
    head = CosineCOREL(K, D, lam=0.0).double()
    with torch.no_grad():
        head.weight.copy_(torch.eye(K, D, dtype=torch.float64))
    h = torch.tensor([[1.0, -1.0, -1.0, 0.0]], dtype=torch.float64)
    assert head(h, torch.tensor([0]))["repel"].item() == 0.0


@pytest.mark.parametrize("lam", LAMS)
def test_center_matches_loop(lam):
    h, y = tiny_batch()
    head = with_weight(CenterLoss(K, D, lam=lam)).eval()
    head.centres.copy_(torch.randn(K, D, generator=torch.Generator().manual_seed(2), dtype=torch.float64))
    out = head(h, y)
    w, b, c = head.weight.detach(), head.bias.detach(), head.centres
    assert out["repel"].item() == pytest.approx(naive_cce(h, y, w, b), rel=1e-10)
    assert out["attract"].item() == pytest.approx(naive_center_term(h, y, c), rel=1e-10)
    expected = naive_cce(h, y, w, b) + lam * naive_center_term(h, y, c)
    assert out["loss"].item() == pytest.approx(expected, rel=1e-10)


def test_cce_matches_loop_and_torch_cross_entropy():
    h, y = tiny_batch()
    head = with_weight(CCELoss(K, D))
    out = head(h, y)
    keep = y >= 0
    reference = F.cross_entropy(h[keep] @ head.weight.T + head.bias, y[keep])
    assert out["loss"].item() == pytest.approx(reference.item(), rel=1e-10)
    assert out["loss"].item() == pytest.approx(naive_cce(h, y, head.weight.detach(), head.bias.detach()))
    assert out["loss"].item() == pytest.approx(out["attract"].item() + out["repel"].item(), rel=1e-10)


@pytest.mark.parametrize("make", [CCELoss, CenterLoss, CosineCOREL, GaussianCOREL])
def test_unlabelled_batch_gives_zero_loss_that_backprops(make):
    head = make(K, D)
    h = torch.randn(5, D, requires_grad=True)
    out = head(h, torch.full((5,), -1))
    assert out["loss"].item() == 0.0
    out["loss"].backward()
    assert h.grad is not None and torch.equal(h.grad, torch.zeros_like(h))


@pytest.mark.parametrize("make", [CCELoss, CenterLoss, CosineCOREL, GaussianCOREL])
def test_unlabelled_samples_get_no_gradient(make):
    h, y = tiny_batch(dtype=torch.float32)
    h.requires_grad_(True)
    head = make(K, D)
    head(h, y)["loss"].backward()
    assert torch.all(h.grad[y < 0] == 0)
    assert torch.all(h.grad[y >= 0].abs().sum(dim=1) > 0)
    assert head.weight.grad is not None and head.weight.grad.abs().sum() > 0


@pytest.mark.parametrize("make", [GaussianCOREL, CosineCOREL])
@pytest.mark.parametrize("lam", [0.3, 0.5])
def test_gradcheck(make, lam):
    h, y = tiny_batch()
    head = with_weight(make(K, D, lam=lam))
    weight = head.weight.detach().clone().requires_grad_(True)

    def loss(h_, w_):
        return torch.func.functional_call(head, {"weight": w_}, (h_, y))["loss"]

    assert torch.autograd.gradcheck(loss, (h.clone().requires_grad_(True), weight))


def test_learn_gamma_is_a_positive_trainable_parameter():
    head = GaussianCOREL(K, D, gamma=0.5, learn_gamma=True)
    params = dict(head.named_parameters())
    assert "log_gamma" in params and head.gamma.item() == pytest.approx(0.5)
    optimizer = torch.optim.SGD(head.parameters(), lr=10.0)
    h, y = tiny_batch(dtype=torch.float32)
    for _ in range(5):  # large steps that would drive an unconstrained gamma negative
        optimizer.zero_grad()
        head(h * 5, y)["loss"].backward()
        assert head.log_gamma.grad is not None and head.log_gamma.grad != 0
        optimizer.step()
    assert head.gamma.item() > 0 and head.gamma.item() != pytest.approx(0.5)


def test_fixed_gamma_is_not_a_parameter():
    head = GaussianCOREL(K, D, gamma=0.5)
    assert all("gamma" not in name for name, _ in head.named_parameters())
    assert "log_gamma" in head.state_dict() and head.gamma.item() == pytest.approx(0.5)


def test_gaussian_argmax_is_nearest_class_vector():
    head = GaussianCOREL(K, D)
    h = torch.randn(50, D, generator=torch.Generator().manual_seed(3))
    nearest = torch.stack([torch.stack([(hi - wk).norm() for wk in head.weight]).argmin() for hi in h])
    assert torch.equal(head.logits(h).argmax(dim=1), nearest)


def wen_update(centres, h, y, alpha):
    new = centres.clone()
    for j in range(K):
        members = [h[i] for i in range(len(y)) if y[i] == j]
        diff = sum((centres[j] - hi for hi in members), torch.zeros(D, dtype=centres.dtype))
        new[j] = centres[j] - alpha * diff / (1 + len(members))
    return new


def test_center_update_follows_wen_rule_in_train_mode():
    h, y = tiny_batch()
    y = torch.tensor([0, 1, 1, -1, 1, -1])  # class 2 has no member: its centre must stay put
    head = CenterLoss(K, D, alpha=0.3).double().train()
    start = torch.randn(K, D, generator=torch.Generator().manual_seed(4), dtype=torch.float64)
    head.centres.copy_(start)
    h = h.requires_grad_(True)
    out = head(h, y)
    assert torch.allclose(head.centres, wen_update(start, h.detach(), y, 0.3), atol=1e-12)
    assert out["attract"].item() == pytest.approx(
        naive_center_term(h.detach(), y, start)
    )  # pre-update centres
    out["loss"].backward()  # the in-place centre update must not break the graph
    assert "centres" in head.state_dict() and "centres" not in dict(head.named_parameters())


def test_center_eval_mode_keeps_centres():
    h, y = tiny_batch()
    head = CenterLoss(K, D).double().eval()
    head(h, y)
    assert torch.equal(head.centres, torch.zeros(K, D, dtype=torch.float64))


@pytest.mark.parametrize(
    "make, kwargs, name",
    [
        (GaussianCOREL, {"lam": 1.5}, "lam must be in [0, 1], got 1.5"),
        (CosineCOREL, {"lam": -0.1}, "lam must be in [0, 1]"),
        (CenterLoss, {"lam": 2.0}, "lam must be in [0, 1]"),
        (GaussianCOREL, {"gamma": 0.0}, "gamma must be > 0"),
        (CenterLoss, {"alpha": 0.0}, "alpha must be in (0, 1]"),
        (CenterLoss, {"alpha": 1.5}, "alpha must be in (0, 1]"),
        (CCELoss, {"num_classes": 1}, "num_classes must be >= 2"),
        (CosineCOREL, {"embedding_dim": 0}, "embedding_dim must be >= 1"),
        (CosineCOREL, {"eps": 0.0}, "eps must be > 0"),
        (GaussianCOREL, {"lr": -1}, "lr must be > 0 or null, got -1"),
        (CCELoss, {"lr": 0.0}, "lr must be > 0 or null, got 0.0"),
    ],
)
def test_invalid_arguments_raise(make, kwargs, name):
    args = {"num_classes": K, "embedding_dim": D, **kwargs}
    with pytest.raises(ValueError) as error:
        make(**args)
    assert str(error.value).startswith(name)


@pytest.mark.parametrize(
    "name, cls",
    [
        ("cce", CCELoss),
        ("center", CenterLoss),
        ("cosine_corel", CosineCOREL),
        ("gaussian_corel", GaussianCOREL),
    ],
)
def test_yaml_instantiates_and_runs(name, cls):
    head = hydra.utils.instantiate(OmegaConf.load(CONF / f"{name}.yaml"), num_classes=K, embedding_dim=D)
    assert type(head) is cls and head.weight.shape == (K, D) and head.lr is None
    out = head(torch.randn(6, D), torch.tensor([0, 1, 2, -1, 0, 1]), epoch=0, index=torch.arange(6))
    assert head.loss_parts == ("loss", "attract", "repel") and set(out) == set(head.loss_parts)
    assert all(v.ndim == 0 for v in out.values())
    assert torch.isfinite(out["loss"])
