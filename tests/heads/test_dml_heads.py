"""Deep-metric-learning heads: Boudiaf et al.'s cross-entropy and PCE against direct formulas and per-pair loops,
the generic pytorch-metric-learning head against PML called directly, and every src/clusterable/conf/loss file they
use."""

from __future__ import annotations

import functools
import math
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from hydra import compose, initialize_config_dir
from pytorch_metric_learning import distances, losses, miners
from sklearn.cluster import KMeans
from sklearn.datasets import load_digits
from threadpoolctl import threadpool_limits

from clusterable.config import CONFIG_DIR, ConfigError, build
from clusterable.contracts import ClassifyingHead, Head, OwnLearningRate
from clusterable.evaluation.clustering import hungarian_accuracy
from clusterable.heads.ce import CrossEntropy
from clusterable.heads.pce import PairwiseCrossEntropy
from clusterable.heads.pml import PMLHead

CONF = Path(CONFIG_DIR)
K, D = 3, 4
DML_LOSSES = [
    "ce",
    "pce",
    "pml",
    "contrastive",
    "triplet",
    "multi_similarity",
    "supcon",
    "nca",
    "proxy_nca",
    "proxy_anchor",
    "arcface",
    "normsoftmax",
]


def tiny_batch(seed: int = 0, dtype=torch.float64) -> tuple[torch.Tensor, torch.Tensor]:
    """Seven 4-d embeddings, two of them unlabelled (-1); every class has a member."""
    g = torch.Generator().manual_seed(seed)
    return torch.randn(7, D, generator=g, dtype=dtype), torch.tensor([0, 1, 2, -1, 1, -1, 0])


def labelled_rows(h, y):
    return [(h[i], int(y[i])) for i in range(len(y)) if y[i] >= 0]


def loss_config(name: str, *overrides: str, primary: bool = False):
    """``cfg.loss`` composed with ``loss=<name>`` in the training config (``primary``), or alone (twice as fast)."""
    with initialize_config_dir(config_dir=str(CONF), version_base=None):
        if primary:
            return compose(config_name="train", overrides=[f"loss={name}", *overrides]).loss
        return compose(overrides=[f"+loss={name}", *overrides]).loss


# --- cross-entropy (Boudiaf et al. 2020, §5.3) -------------------------------------------------------------------


def with_classifier(head: CrossEntropy, seed: int = 1) -> CrossEntropy:
    g = torch.Generator().manual_seed(seed)
    head = head.double()
    with torch.no_grad():
        head.weight.copy_(torch.randn(K, D, generator=g, dtype=torch.float64))
        head.bias.copy_(torch.randn(K, generator=g, dtype=torch.float64))
    return head


def smoothed_kl(h, y, w, b, eps):
    """mean_i sum_k q_ik log(q_ik / p_ik), q = 1 - eps on the true class, eps / (K - 1) elsewhere (0 log 0 = 0)."""
    terms = []
    for hi, yi in labelled_rows(h, y):
        z = [float(hi @ w[k] + b[k]) for k in range(K)]
        log_norm = math.log(sum(math.exp(v) for v in z))
        q = [1 - eps if k == yi else eps / (K - 1) for k in range(K)]
        terms.append(sum(qk * (math.log(qk) - (z[k] - log_norm)) for k, qk in enumerate(q) if qk > 0))
    return sum(terms) / len(terms)


@pytest.mark.parametrize("eps", [0.0, 0.1, 0.3])
def test_ce_is_the_kl_to_the_authors_smoothed_targets(eps):
    h, y = tiny_batch()
    head = with_classifier(CrossEntropy(K, D, smoothing=eps)).eval()
    expected = smoothed_kl(h, y, head.weight.detach(), head.bias.detach(), eps)
    assert head(h, y)["loss"].item() == pytest.approx(expected, rel=1e-10)


def test_ce_without_smoothing_is_torch_cross_entropy():
    h, y = tiny_batch()
    head = with_classifier(CrossEntropy(K, D, smoothing=0.0)).eval()
    keep = y >= 0
    reference = F.cross_entropy(F.linear(h[keep], head.weight, head.bias), y[keep])
    assert head(h, y)["loss"].item() == pytest.approx(reference.item(), rel=1e-10)


def test_ce_smoothing_is_not_torch_label_smoothing():
    h, y = tiny_batch()
    eps = 0.1
    head = with_classifier(CrossEntropy(K, D, smoothing=eps)).eval()
    keep = y >= 0
    logits = F.linear(h[keep], head.weight, head.bias).detach().requires_grad_(True)
    q = torch.full((int(keep.sum()), K), eps / (K - 1), dtype=torch.float64)
    q[torch.arange(len(q)), y[keep]] = 1 - eps
    ours = -(q * F.log_softmax(logits, 1)).sum(1).mean()  # cross-entropy against the authors' q
    entropy = -(q * q.log()).sum(1).mean()
    assert head(h, y)["loss"].item() == pytest.approx(ours.item() - entropy.item(), rel=1e-10)
    torchs = F.cross_entropy(logits, y[keep], label_smoothing=eps)  # eps / K on every class, the true one too
    assert abs(torchs.item() - ours.item()) > 1e-3
    (grad_ours,) = torch.autograd.grad(ours, logits)
    (grad_torch,) = torch.autograd.grad(torchs, logits)
    assert not torch.allclose(grad_ours, grad_torch, atol=1e-4)


def test_ce_classifier_starts_at_zero():
    head = CrossEntropy(K, D, smoothing=0.1)
    assert torch.equal(head.weight, torch.zeros(K, D)) and torch.equal(head.bias, torch.zeros(K))
    h, y = tiny_batch(dtype=torch.float32)
    q = [0.9, 0.05, 0.05]
    expected = math.log(K) + sum(qk * math.log(qk) for qk in q)  # KL(q || uniform)
    assert head(h, y)["loss"].item() == pytest.approx(expected, rel=1e-6)


def test_ce_dropout_is_on_in_training_only():
    head = with_classifier(CrossEntropy(K, D, dropout=0.5))
    h = torch.randn(64, D, dtype=torch.float64)
    plain = F.linear(h, head.weight, head.bias)
    assert torch.equal(head.eval().logits(h), plain)
    torch.manual_seed(0)
    assert not torch.allclose(head.train().logits(h), plain)
    assert isinstance(head, ClassifyingHead) and isinstance(head, OwnLearningRate) and isinstance(head, Head)


# --- PCE (Boudiaf et al. 2020, eq. 12) -----------------------------------------------------------------------------


def naive_pce(h, y, lam=None, lam_gradient=True):
    """Eq. 12 by loops over pairs, with p_ik = softmax_k(1/(lam n) sum_{j: y_j = k} z_i . z_j), in torch scalars so
    that it differentiates; ``lam=None``: the largest eigenvalue of 1/n sum_i z_i z_i^T by ``eigvalsh``, in the graph
    unless ``lam_gradient`` is False."""
    keep = [i for i in range(len(y)) if y[i] >= 0]
    z = [h[i] for i in keep]
    labels = [int(y[i]) for i in keep]
    n = len(z)
    dot = [[(z[i] * z[j]).sum() for j in range(n)] for i in range(n)]
    if lam is None:
        zl = torch.stack(z)
        lam = torch.linalg.eigvalsh(zl.T @ zl / n)[-1]
        lam = lam if lam_gradient else lam.detach()
    tightness = -sum(dot[i][j] for i in range(n) for j in range(n) if labels[j] == labels[i]) / (2 * lam * n**2)
    p = []
    for i in range(n):
        logits = [sum(dot[i][j] for j in range(n) if labels[j] == k) / (lam * n) for k in range(K)]
        norm = sum(torch.exp(v) for v in logits)
        p.append([torch.exp(v) / norm for v in logits])
    lse = sum(
        torch.log(sum(torch.exp(sum(p[j][k] * dot[i][j] for j in range(n)) / (lam * n)) for k in range(K)))
        for i in range(n)
    )
    soft_means = [sum(p[i][k] * z[i] for i in range(n)) / n for k in range(K)]  # K vectors (D,)
    contrastive = lse / n - sum(c.pow(2).sum() for c in soft_means) / (2 * lam)
    return tightness + contrastive, tightness, contrastive


@pytest.mark.parametrize("lam, lam_gradient", [(None, True), (None, False), (0.7, True), (3.0, True)])
def test_pce_and_its_gradient_match_pair_loop(lam, lam_gradient):
    h, y = tiny_batch()
    h_head, h_loop = h.clone().requires_grad_(True), h.clone().requires_grad_(True)
    out = PairwiseCrossEntropy(K, lam=lam, lam_gradient=lam_gradient)(h_head, y)
    loss, tightness, contrastive = naive_pce(h_loop, y, lam, lam_gradient)
    for part, reference in {"loss": loss, "tightness": tightness, "contrastive": contrastive}.items():
        assert out[part].item() == pytest.approx(reference.item(), rel=1e-10)
    out["loss"].backward()
    loss.backward()
    torch.testing.assert_close(h_head.grad, h_loop.grad, rtol=1e-10, atol=1e-10)
    assert torch.all(h_head.grad[y < 0] == 0) and torch.all(h_head.grad[y >= 0].abs().sum(1) > 0)


def test_pce_gradcheck_with_fixed_and_per_batch_lambda():
    h, y = tiny_batch()
    for head in (PairwiseCrossEntropy(K, lam=1.3), PairwiseCrossEntropy(K)):
        assert torch.autograd.gradcheck(lambda h_, head=head: head(h_, y)["loss"], (h.clone().requires_grad_(True),))


def radial_derivative(head, h, y) -> float:
    """d/ds L(s h) at s = 1: sum_i grad_i . h_i."""
    h = h.clone().requires_grad_(True)
    head(h, y)["loss"].backward()
    return float((h.grad * h.detach()).sum())


def test_pce_with_lambda_in_the_graph_is_scale_invariant_and_the_detached_one_is_not():
    # every term of eq. 12 is a dot product over lambda = lambda_max(1/n Z^T Z), which scales with the embeddings
    h, y = tiny_batch()
    head, detached = PairwiseCrossEntropy(K), PairwiseCrossEntropy(K, lam_gradient=False)
    assert head(3.0 * h, y)["loss"].item() == pytest.approx(head(h, y)["loss"].item(), rel=1e-12)
    assert abs(radial_derivative(head, h, y)) < 1e-12
    assert radial_derivative(detached, h, y) < -0.1  # descent grows the embeddings


def test_pce_lambda_at_a_repeated_top_eigenvalue_has_a_finite_gradient():
    # labelled rows +-e1, +-e2: 1/n Z^T Z = diag(1/2, 1/2, 0, 0), its top eigenvalue repeated
    eye = torch.eye(D, dtype=torch.float64)
    h = torch.stack([eye[0], eye[1], -eye[0], -eye[1], eye[2], eye[3]]).requires_grad_(True)
    y = torch.tensor([0, 1, 2, 0, -1, -1])
    head = PairwiseCrossEntropy(K)
    out = head(h, y)
    lam = torch.linalg.eigvalsh(h[:4].detach().T @ h[:4].detach() / 4)[-1]
    assert lam.item() == pytest.approx(0.5) and out["tightness"].item() == pytest.approx(-4 / (2 * 0.5 * 16))
    out["loss"].backward()
    assert torch.all(torch.isfinite(h.grad)) and torch.all(h.grad[4:] == 0)
    assert abs(float((h.grad * h.detach()).sum())) < 1e-12  # still scale invariant


@pytest.fixture
def one_thread():
    """Torch and scikit-learn on one CPU thread for a training test: two threads against a busy machine ran it
    several times slower."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    with threadpool_limits(limits=1):
        yield
    torch.set_num_threads(threads)


def kmeans_accuracy(z: torch.Tensor, y: torch.Tensor) -> float:
    pred = KMeans(n_clusters=10, n_init=3, random_state=0).fit_predict(z.numpy().astype(np.float64))
    return hungarian_accuracy(y.numpy(), pred)


@pytest.mark.usefixtures("one_thread")
def test_pce_trains_a_linear_encoder_on_digits_and_the_detached_lambda_does_not():
    # scikit-learn's digits, a linear encoder 64 -> 16, 200 Adam steps on batches of 64 of the first 1,000 rows;
    # k-means accuracy on the other 797: untrained 0.70, lambda in the graph 0.80, lambda detached 0.33 with
    # embeddings 40x longer (the Fashion-MNIST symptom in small). Seeds 1 and 2: 0.63 / 0.79 / 0.28, 0.54 / 0.88 / 0.31.
    x, y = load_digits(return_X_y=True)
    x, y = torch.tensor(x / 16, dtype=torch.float32), torch.tensor(y)

    def embed_after_training(head: PairwiseCrossEntropy | None) -> torch.Tensor:
        torch.manual_seed(0)
        encoder = torch.nn.Linear(64, 16)
        if head is not None:
            optimizer = torch.optim.Adam(encoder.parameters(), lr=1e-2)
            g = torch.Generator().manual_seed(0)
            for _ in range(200):
                rows = torch.randint(0, 1000, (64,), generator=g)
                optimizer.zero_grad()
                head(encoder(x[rows]), y[rows])["loss"].backward()
                optimizer.step()
        with torch.no_grad():
            return encoder(x[1000:])

    untrained = embed_after_training(None)
    learned = embed_after_training(PairwiseCrossEntropy(10))
    detached = embed_after_training(PairwiseCrossEntropy(10, lam_gradient=False))
    base = kmeans_accuracy(untrained, y[1000:])
    assert kmeans_accuracy(learned, y[1000:]) > base + 0.05
    assert kmeans_accuracy(detached, y[1000:]) < base - 0.1
    assert detached.norm(dim=1).mean() > 10 * untrained.norm(dim=1).mean()


# --- pytorch-metric-learning ---------------------------------------------------------------------------------------

PML_CASES = {
    "contrastive": (functools.partial(losses.ContrastiveLoss, pos_margin=0.2, neg_margin=0.6), None),
    "triplet+semihard": (
        functools.partial(losses.TripletMarginLoss, margin=0.3),
        functools.partial(miners.TripletMarginMiner, margin=0.3, type_of_triplets="semihard"),
    ),
    "ms+miner": (losses.MultiSimilarityLoss, functools.partial(miners.MultiSimilarityMiner, epsilon=0.1)),
    "proxy_anchor": (functools.partial(losses.ProxyAnchorLoss, margin=0.1, alpha=32), None),
    "arcface": (losses.ArcFaceLoss, None),
}


@pytest.mark.parametrize("case", list(PML_CASES))
def test_pml_head_matches_pml_called_directly(case):
    make_loss, make_miner = PML_CASES[case]
    classes, dim = 5, 16
    g = torch.Generator().manual_seed(3)
    h = torch.randn(40, dim, generator=g)
    y = torch.arange(40) % classes
    y[::7] = -1  # unlabelled rows the head must drop
    head = PMLHead(classes, dim, loss=make_loss, miner=make_miner)
    framework = {"num_classes": classes, "embedding_size": dim} if case in ("proxy_anchor", "arcface") else {}
    reference = make_loss(**framework)
    reference.load_state_dict(head.loss_fn.state_dict())  # the same proxies / class weights
    keep = y >= 0

    h_head = h.clone().requires_grad_(True)
    loss_head = head(h_head, y)["loss"]
    loss_head.backward()
    h_ref = h.clone().requires_grad_(True)
    miner = None if make_miner is None else make_miner()
    indices = None if miner is None else miner(h_ref[keep], y[keep])
    loss_ref = reference(h_ref[keep], y[keep], indices)
    loss_ref.backward()

    assert loss_head.item() == pytest.approx(loss_ref.item(), rel=1e-6) and loss_head.item() > 0
    assert torch.allclose(h_head.grad, h_ref.grad, atol=1e-7) and torch.all(h_head.grad[~keep] == 0)
    for (name, p_head), p_ref in zip(head.loss_fn.named_parameters(), reference.parameters(), strict=True):
        assert classes in p_head.shape and torch.allclose(p_head.grad, p_ref.grad, atol=1e-7), name


def test_pml_head_passes_framework_arguments_only_to_classes_that_take_them():
    head = PMLHead(K, D, loss=losses.ProxyNCALoss, lr=0.5)
    assert head.loss_fn.proxies.shape == (K, D) and head.lr == 0.5 and isinstance(head, OwnLearningRate)
    assert list(PMLHead(K, D, loss=losses.SupConLoss).parameters()) == []
    with pytest.raises(ValueError, match=r"^loss\.num_classes is set by the framework"):
        PMLHead(K, D, loss=functools.partial(losses.ProxyNCALoss, num_classes=7, embedding_size=None))


@pytest.mark.parametrize(
    "make",
    [
        lambda: CrossEntropy(K, D),
        lambda: PairwiseCrossEntropy(K),
        lambda: PMLHead(K, D, loss=losses.ProxyAnchorLoss),
        lambda: PMLHead(K, D, loss=losses.TripletMarginLoss, miner=miners.TripletMarginMiner),
    ],
)
def test_unlabelled_batch_gives_zero_loss_that_backprops(make):
    head = make()
    h = torch.randn(5, D, requires_grad=True)
    out = head(h, torch.full((5,), -1))
    assert set(out) == set(head.loss_parts) and all(v.item() == 0.0 for v in out.values())
    out["loss"].backward()
    assert h.grad is not None and torch.equal(h.grad, torch.zeros_like(h))


@pytest.mark.parametrize(
    "make",
    [
        lambda: PairwiseCrossEntropy(K),
        lambda: PMLHead(K, D, loss=functools.partial(losses.NCALoss, distance=distances.CosineSimilarity())),
    ],
)
def test_pce_and_pml_compute_in_float32_under_mixed_precision(make):
    # on CUDA, bfloat16 breaks PCE's eigenvalue solver and PML's NCALoss masks; the CPU checks the float32 path
    head = make()
    h, y = tiny_batch(dtype=torch.float32)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = head(h.to(torch.bfloat16), y)
    reference = head(h.to(torch.bfloat16).float(), y)
    assert all(
        v.dtype == torch.float32 and v.item() == pytest.approx(reference[k].item(), rel=1e-5) for k, v in out.items()
    )


@pytest.mark.parametrize(
    "make, kwargs, message",
    [
        (CrossEntropy, {"smoothing": 1.5}, "smoothing must be in [0, 1), got 1.5"),
        (CrossEntropy, {"smoothing": 1.0}, "smoothing must be in [0, 1)"),
        (CrossEntropy, {"dropout": 1.0}, "dropout must be in [0, 1)"),
        (CrossEntropy, {"lr": 0.0}, "lr must be > 0 or null"),
        (CrossEntropy, {"num_classes": 1}, "num_classes must be >= 2"),
        (PairwiseCrossEntropy, {"lam": 0.0}, "lam must be > 0, got 0.0"),
        (PairwiseCrossEntropy, {"num_classes": 1}, "num_classes must be >= 2"),
        (PMLHead, {"lr": -1.0}, "lr must be > 0 or null"),
    ],
)
def test_invalid_arguments_raise(make, kwargs, message):
    args = {"num_classes": K, **({"embedding_dim": D} if make is not PairwiseCrossEntropy else {}), **kwargs}
    if make is PMLHead:
        args["loss"] = losses.ContrastiveLoss
    with pytest.raises(ValueError) as error:
        make(**args)
    assert str(error.value).startswith(message)


# --- configs ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", DML_LOSSES)
def test_config_builds_and_trains(name):
    head = build(loss_config(name, primary=True), "loss", num_classes=4, embedding_dim=8, input_shape=[3])
    assert isinstance(head, Head) and head.loss_parts[0] == "loss"
    h = torch.randn(32, 8, generator=torch.Generator().manual_seed(0), requires_grad=True)
    y = torch.arange(32) % 4
    y[-3:] = -1
    out = head(h, y, epoch=0, index=torch.arange(32))
    assert set(out) == set(head.loss_parts) and all(v.ndim == 0 and torch.isfinite(v) for v in out.values())
    out["loss"].backward()
    # ce: its zero-initialised classifier passes no gradient to h at first, only to itself
    grads = [h.grad, *(p.grad for p in head.parameters())]
    assert any(g is not None and g.abs().sum() > 0 for g in grads)


def test_named_configs_carry_their_published_values():
    triplet = build(loss_config("triplet", "loss.loss.margin=0.25"), "loss", num_classes=4, embedding_dim=8)
    assert triplet.miner_fn.margin == 0.25 and triplet.miner_fn.type_of_triplets == "semihard"
    ms = build(loss_config("multi_similarity"), "loss", num_classes=4, embedding_dim=8)
    assert (ms.loss_fn.alpha, ms.loss_fn.beta, ms.loss_fn.base, ms.miner_fn.epsilon) == (2, 50, 1.0, 0.1)
    anchor = build(loss_config("proxy_anchor"), "loss", num_classes=4, embedding_dim=8)
    assert anchor.loss_fn.proxies.shape == (4, 8) and anchor.lr == 0.1
    ce = build(loss_config("ce"), "loss", num_classes=4, embedding_dim=8)
    assert ce.smoothing == 0.1 and ce.dropout.p == 0.5 and isinstance(ce, ClassifyingHead)
    circle_target = "loss.loss._target_=pytorch_metric_learning.losses.CircleLoss"  # a loss no file names
    circle = build(loss_config("pml", circle_target, "+loss.loss.m=0.25"), "loss", num_classes=4, embedding_dim=3)
    assert type(circle.loss_fn).__name__ == "CircleLoss" and circle.loss_fn.m == 0.25


@pytest.mark.parametrize(
    "name, overrides, message",
    [
        (
            "triplet",
            ["+loss.loss.marginn=0.3"],
            "loss.loss.marginn is not an option of TripletMarginLoss (did you mean margin?); accepted: ",
        ),
        (
            "triplet",
            ["+loss.miner.typ=hard"],
            "loss.miner.typ is not an option of TripletMarginMiner; accepted:",
        ),
        (
            "pml",
            ["loss.loss._target_=pytorch_metric_learning.losses.NoSuchLoss"],
            "loss.loss._target_: cannot import 'pytorch_metric_learning.losses.NoSuchLoss'",
        ),
        ("nca", ["loss.loss.softmax_scale=big"], "loss.loss.softmax_scale must be a number, got 'big'"),
        ("proxy_anchor", ["+loss.loss.num_classes=9"], "loss.loss.num_classes is set by the framework"),
        ("pml", ["+loss.loss.mat_based_loss=1"], "loss.loss: ContrastiveLoss: "),  # the constructor's error
        ("ce", ["loss.smoothing=1.5"], "loss.smoothing must be in [0, 1), got 1.5"),
        ("pce", ["loss.lam=-1"], "loss.lam must be > 0"),
    ],
)
def test_config_errors_are_one_line(name, overrides, message):
    with pytest.raises(ConfigError) as error:
        build(loss_config(name, *overrides), "loss", num_classes=4, embedding_dim=8, input_shape=[3])
    assert str(error.value).startswith(message) and "\n" not in str(error.value)
