"""COREL heads (CCE, center, Cosine-COREL, Gaussian-COREL) against per-sample loops over the equations."""

from __future__ import annotations

import math
from pathlib import Path

import hydra
import pytest
import torch
import torch.nn.functional as F
from omegaconf import OmegaConf

from clusterable.config import CONFIG_DIR
from clusterable.heads import CCELoss, CenterLoss, CosineCOREL, GaussianCOREL

CONF = Path(CONFIG_DIR) / "loss"
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
    assert out["attract"].item() == pytest.approx(naive_center_term(h.detach(), y, start))  # pre-update centres
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


# ---- Gaussian-COREL: λ = 0.5 is tied-bias cross-entropy; below 0.5 the loss is unbounded below ---------------


def test_gaussian_at_half_is_half_the_tied_bias_cross_entropy_with_equal_gradients():
    """At λ = 0.5 the loss is half the cross-entropy over the logits 2γ h·w_k - γ|w_k|² (|h|² is common to every
    class and cancels inside the softmax): the same loss and the same gradients for the embeddings and the class
    vectors."""
    h, y = tiny_batch()
    head = with_weight(GaussianCOREL(K, D, lam=0.5, gamma=0.7))
    gamma = head.gamma.item()  # 0.7 through a float32 log: use the head's own value
    h = h.requires_grad_(True)
    ours = head(h, y)["loss"]
    g_h, g_w = torch.autograd.grad(ours, (h, head.weight))

    keep = y >= 0
    h2 = h.detach().clone().requires_grad_(True)
    w2 = head.weight.detach().clone().requires_grad_(True)
    logits = 2 * gamma * h2[keep] @ w2.T - gamma * w2.pow(2).sum(dim=1)
    reference = 0.5 * F.cross_entropy(logits, y[keep])
    r_h, r_w = torch.autograd.grad(reference, (h2, w2))
    assert ours.item() == pytest.approx(reference.item(), rel=1e-12)
    assert torch.allclose(g_h, r_h, rtol=1e-10, atol=1e-12)
    assert torch.allclose(g_w, r_w, rtol=1e-10, atol=1e-12)
    assert torch.all(g_h[~keep] == 0)


@pytest.mark.parametrize("lam", [0.5, 0.7, 1.0])
def test_gaussian_loss_is_never_negative_from_half_up(lam):
    """L = (2λ - 1) γ‖h - w_y‖² + (1 - λ) CE >= 0 for λ >= 0.5: what makes a negative loss a sign of λ < 0.5."""
    head = with_weight(GaussianCOREL(K, D, lam=lam))
    g = torch.Generator().manual_seed(5)
    for scale in (0.1, 1.0, 10.0, 1000.0):
        h = scale * torch.randn(200, D, generator=g, dtype=torch.float64)
        assert head(h, torch.arange(200) % K)["loss"].item() >= 0


@pytest.mark.parametrize("lam", [0.0, 0.3, 0.45])
def test_gaussian_below_half_falls_like_2lam_minus_1_gamma_h_squared(lam):
    """Moving h away from every class vector: loss / (γ|h|²) -> 2λ - 1 < 0 (the class docstring's derivation)."""
    gamma = 0.5
    head = with_weight(GaussianCOREL(K, D, lam=lam, gamma=gamma))
    u = F.normalize(torch.randn(1, D, generator=torch.Generator().manual_seed(6), dtype=torch.float64), dim=1)
    losses = {t: head(t * u, torch.tensor([1]))["loss"].item() for t in (1e2, 1e4)}
    assert losses[1e4] / (gamma * 1e4**2) == pytest.approx(2 * lam - 1, abs=1e-3)
    assert losses[1e4] < losses[1e2] < 0


def test_gaussian_divergence_reports_the_runaway_only_below_half():
    # The epoch means of a digits run at λ = 0.3 (FFNN): the attraction grows 18x in the second epoch.
    runaway = [
        {"loss": -22.6, "attract": 60.7, "repel": -58.3},
        {"loss": -445.0, "attract": 1117.0, "repel": -1115.0},
    ]
    line = GaussianCOREL(K, D, lam=0.3).divergence(runaway)
    assert line is not None and "\n" not in line
    assert "lam = 0.3 < 0.5 is unbounded below" in line and "grew from 60.7 to 1.12e+03" in line
    # Not yet a runaway: one epoch, growth under RUNAWAY_GROWTH, or a loss that is not negative.
    assert GaussianCOREL(K, D, lam=0.3).divergence(runaway[:1]) is None
    slow = [runaway[0], {"loss": -40.0, "attract": 500.0, "repel": -400.0}]
    assert GaussianCOREL(K, D, lam=0.3).divergence(slow) is None
    positive = [runaway[0], {"loss": 0.1, "attract": 1117.0, "repel": -1115.0}]
    assert GaussianCOREL(K, D, lam=0.3).divergence(positive) is None
    # λ >= 0.5: the attraction grows at λ = 0.5 too (measured: 4.7 -> 25 in the first epoch), never a divergence.
    growing = [{"loss": 0.87, "attract": 4.7, "repel": -2.9}, {"loss": -1.0, "attract": 1e9, "repel": -1e9}]
    assert all(GaussianCOREL(K, D, lam=lam).divergence(growing) is None for lam in (0.5, 0.7, 1.0))


# ---- Gaussian-COREL: the authors' code (formula=authors_code, gamma_parametrization=raw) -----------------------


def authors_gaussian_loss(h, output_weights, labels, lam, gamma):
    """The authors' Gaussian-COREL loss, transcribed as plain torch from repository kiankd/corel2019:
    ``corel/prediction_functions.py`` (``get_gaussian_predictions``: ``M = -gamma (|h|^2 + |w|^2 - 2 h.w)`` with
    ``output_weights`` (D, K)) and ``corel/loss_functions.py`` (``get_armask``: -1 at the label; ``GaussianARLoss``:
    the masked log-softmax averaged over N x K at lam = 0.5, else attraction ``mask * M * lam`` and repulsion
    ``log(sum exp(M) + 1e-10) * (1 - lam)``; ``arloss``: ``(lam * sum attraction + (1 - lam) * sum repulsion) / N``).
    Every row is labelled there."""
    n, k = h.shape[0], output_weights.shape[1]
    m = h.norm(dim=1).pow(2)[:, None] + output_weights.norm(dim=0).pow(2)[None, :]
    m = -gamma * (m - 2.0 * h @ output_weights)
    mask = torch.zeros(n, k, dtype=h.dtype)
    mask[torch.arange(n), labels] = -1.0
    if lam == 0.5:
        return (mask * F.log_softmax(m, dim=1)).mean()
    attraction = mask * m * lam
    repulsion = torch.log(torch.exp(m).sum(dim=1) + 1e-10) * (1.0 - lam)
    return (lam * attraction.sum() + (1.0 - lam) * repulsion.sum()) / n


AUTHORS_LAMS = [0.0, 0.3, 0.5, 0.6, 0.8, 1.0]


@pytest.mark.parametrize("lam", AUTHORS_LAMS)
def test_gaussian_authors_code_matches_their_loss_and_gradients(lam):
    h = torch.randn(7, D, generator=torch.Generator().manual_seed(7), dtype=torch.float64).requires_grad_(True)
    y = torch.tensor([0, 1, 2, 0, 1, 2, 2])
    head = with_weight(GaussianCOREL(K, D, lam=lam, gamma=0.5, formula="authors_code"))
    ours = head(h, y)["loss"]
    w_theirs = head.weight.detach().T.clone().requires_grad_(True)  # their W is (D, K)
    theirs = authors_gaussian_loss(h, w_theirs, y, lam, head.gamma.item())
    assert ours.item() == pytest.approx(theirs.item(), rel=1e-12, abs=1e-14)
    g_ours = torch.autograd.grad(ours, (h, head.weight))
    g_theirs = torch.autograd.grad(theirs, (h, w_theirs))
    assert torch.allclose(g_ours[0], g_theirs[0], rtol=1e-10, atol=1e-13)
    assert torch.allclose(g_ours[1], g_theirs[1].T, rtol=1e-10, atol=1e-13)


@pytest.mark.parametrize("lam, effective", [(0.6, 0.692), (0.7, 0.845), (0.8, 0.941), (0.3, 0.155)])
def test_gaussian_authors_lambda_is_the_papers_lam2_over_lam2_plus_1_minus_lam2(lam, effective):
    """Away from the 1e-10 floor, their loss at lam is (lam^2 + (1 - lam)^2) times the paper's at
    lam' = lam^2 / (lam^2 + (1 - lam)^2): their 0.6 / 0.7 / 0.8 are our 0.692 / 0.845 / 0.941."""
    h, y = tiny_batch()
    scale = lam**2 + (1 - lam) ** 2
    assert lam**2 / scale == pytest.approx(effective, abs=5e-4)
    theirs = with_weight(GaussianCOREL(K, D, lam=lam, formula="authors_code"))(h, y)["loss"].item()
    paper = with_weight(GaussianCOREL(K, D, lam=lam**2 / scale))(h, y)["loss"].item()
    assert theirs == pytest.approx(scale * paper, rel=1e-8)
    assert paper != pytest.approx(with_weight(GaussianCOREL(K, D, lam=lam))(h, y)["loss"].item(), rel=1e-3)


def test_gaussian_authors_half_is_the_cross_entropy_over_k():
    h, y = tiny_batch()
    keep = y >= 0
    head = with_weight(GaussianCOREL(K, D, lam=0.5, gamma=0.7, formula="authors_code"))
    reference = F.cross_entropy(head.logits(h[keep]), y[keep]) / K
    assert head(h, y)["loss"].item() == pytest.approx(reference.item(), rel=1e-12)


def test_gaussian_authors_repulsion_floors_at_log_1e_minus_10_for_far_embeddings():
    """Their float32 exp sum underflows to 0 far from every class vector: the repulsion stays at log(1e-10), and
    below lam = 0.5 their loss is bounded, while the paper's keeps falling like (2 lam - 1) gamma |h|^2."""
    lam, gamma = 0.3, 0.5
    head = GaussianCOREL(K, D, lam=lam, gamma=gamma, formula="authors_code")
    u = F.normalize(torch.randn(1, D, generator=torch.Generator().manual_seed(8)), dim=1)
    y = torch.tensor([1])
    for t in (30.0, 1e3):  # gamma |h - w|^2 > 200: exp underflows to exactly 0 in float32
        h = t * u
        theirs = authors_gaussian_loss(h, head.weight.detach().T, y, lam, gamma)
        assert torch.exp(head.logits(h)).sum().item() == 0.0
        out = head(h, y)
        assert out["repel"].item() == pytest.approx(math.log(1e-10), rel=1e-6)
        assert out["loss"].item() == pytest.approx(theirs.item(), rel=1e-5)
        assert out["loss"].item() > 0  # lam^2 a_y outweighs the floored repulsion (1 - lam)^2 * -23.03
    paper = GaussianCOREL(K, D, lam=lam, gamma=gamma)
    paper.load_state_dict(head.state_dict())
    assert paper(1e3 * u, y)["loss"].item() < -1e5


def test_gaussian_raw_gamma_trains_like_the_authors_gamma_and_log_gamma_does_not():
    """``learn_gamma`` with ``raw`` trains gamma itself, as their ``CORELWrapper`` (kiankd/corel2019,
    ``corel/corel_wrapper.py``: ``self.gamma = nn.Parameter(torch.Tensor(1))``, set to 0.5 in
    ``reset_parameters``): one SGD step lands on their gamma; the default log parametrization does not."""
    h = torch.randn(6, D, generator=torch.Generator().manual_seed(9), dtype=torch.float64)
    y = torch.tensor([0, 1, 2, 0, 1, 2])
    lr, lam = 0.5, 0.7
    their_gamma = torch.tensor([0.5], dtype=torch.float64, requires_grad=True)
    their_w = with_weight(GaussianCOREL(K, D)).weight.detach().T.clone()
    authors_gaussian_loss(h, their_w, y, lam, their_gamma).backward()
    with torch.no_grad():
        their_gamma -= lr * their_gamma.grad
    stepped = {}
    for parametrization in ("raw", "log"):
        head = GaussianCOREL(
            K, D, lam=lam, learn_gamma=True, formula="authors_code", gamma_parametrization=parametrization
        )
        head = with_weight(head)
        optimizer = torch.optim.SGD([p for n, p in head.named_parameters() if "gamma" in n], lr=lr)
        head(h, y)["loss"].backward()
        optimizer.step()
        stepped[parametrization] = head.gamma.item()
        assert f"{parametrization}_gamma" in dict(head.named_parameters())
    assert stepped["raw"] == pytest.approx(their_gamma.item(), rel=1e-12)
    assert stepped["log"] != pytest.approx(their_gamma.item(), rel=1e-3)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"formula": "authors"}, "formula must be one of paper, authors_code, got 'authors'"),
        (
            {"gamma_parametrization": "exp", "learn_gamma": True},
            "gamma_parametrization must be one of log, raw",
        ),
        ({"gamma_parametrization": "raw"}, "gamma_parametrization raw needs learn_gamma: true"),
    ],
)
def test_gaussian_fidelity_options_refused_in_one_line(kwargs, message):
    with pytest.raises(ValueError) as error:
        GaussianCOREL(K, D, **kwargs)
    assert str(error.value).startswith(message) and "\n" not in str(error.value)


def test_gaussian_default_is_the_papers_formula():
    h, y = tiny_batch()
    head = with_weight(GaussianCOREL(K, D, lam=0.7))
    assert head.formula == "paper" and head.gamma_parametrization == "log"
    assert "raw_gamma" not in head.state_dict()
    assert head(h, y)["loss"].item() == pytest.approx(
        naive_gaussian(h, y, head.weight.detach(), 0.7, head.gamma.item())
    )


@pytest.mark.parametrize("make", [CCELoss, CenterLoss, CosineCOREL, GaussianCOREL])
def test_untrained_class_vectors_are_a_buffer_that_a_training_step_leaves_alone(make):
    """``train_class_vectors: false``: the class vectors are no parameter (no optimizer sees them), they travel in
    the state dict, the loss is the same function of them, and a training step does not move them."""
    trained = with_weight(make(num_classes=K, embedding_dim=D))
    fixed = make(num_classes=K, embedding_dim=D, train_class_vectors=False).double()
    fixed.load_state_dict(trained.state_dict())
    assert "weight" not in dict(fixed.named_parameters()) and "weight" in dict(fixed.named_buffers())
    h, y = tiny_batch()
    torch.testing.assert_close(fixed(h, y)["loss"], trained(h, y)["loss"])
    before = fixed.weight.clone()
    emb = h.clone().requires_grad_(True)
    params = [emb, *fixed.parameters()]
    torch.optim.Adam(params, lr=0.1).zero_grad()
    fixed(emb, y)["loss"].backward()
    torch.optim.Adam(params, lr=0.1).step()
    assert torch.equal(fixed.weight, before) and emb.grad is not None


@pytest.mark.parametrize("value", ["no", 0, 1.0, None])
def test_train_class_vectors_must_be_a_boolean(value):
    with pytest.raises(ValueError, match="train_class_vectors must be true or false"):
        GaussianCOREL(num_classes=K, embedding_dim=D, train_class_vectors=value)
