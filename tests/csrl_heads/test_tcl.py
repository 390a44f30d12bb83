"""TensorizedContrastive: batched heads vs a naive loop, pair sampling, elastic positives, assignment rule."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
import torchvision.transforms.v2 as T
import torchvision.transforms.v2.functional as TF
from hydra.utils import instantiate
from omegaconf import OmegaConf

from clusterable.config import CONFIG_DIR
from clusterable.heads.tcl import (
    TensorizedContrastive,
    apply_displacement,
    elastic,
    elastic_displacement,
    random_partner,
)
from clusterable.models.tcl_conv import TCLConv

CONF = Path(CONFIG_DIR)


def make_head(d: int = 12, c: int = 3, n: int = 8, hidden: int = 10, out: int = 5, dropout: float = 0.0, **kw):
    torch.manual_seed(0)
    head = TensorizedContrastive(d, c, out_dim=out, hidden=hidden, dropout=dropout, **kw)
    h = torch.randn(n, d)
    head.init_clusters(h)
    head.state.assignment = torch.arange(n) % c
    return head, h


def naive_z(head: TensorizedContrastive, h_i: torch.Tensor, j: int) -> torch.Tensor:
    """Cluster j's head on one feature vector (D,): Linear -> ReLU -> Linear, L2-normalised."""
    a = torch.relu(F.linear(h_i, head.weight1[j].T, head.bias1[j]))
    z = F.linear(a, head.weight2[j].T, head.bias2[j])
    return z / z.norm()


def grads(module: torch.nn.Module, loss: torch.Tensor, *tensors: torch.Tensor) -> list[torch.Tensor]:
    module.zero_grad()
    for t in tensors:
        t.grad = None
    loss.backward()
    return [p.grad.clone() for p in module.parameters()] + [t.grad.clone() for t in tensors]


def test_project_matches_loop_over_clusters_with_gradients():
    head, h = make_head()
    h.requires_grad_(True)
    weights = torch.randn(head.num_clusters, len(h), 5)
    batched = head.project(h)
    g_batched = grads(head, (weights * batched).sum(), h)
    naive = torch.stack([torch.stack([naive_z(head, h[i], j) for i in range(len(h))]) for j in range(3)])
    g_naive = grads(head, (weights * naive).sum(), h)
    torch.testing.assert_close(batched, naive)
    for a, b in zip(g_batched, g_naive, strict=True):
        torch.testing.assert_close(a, b)


def test_pair_loss_matches_loop_over_anchors_with_gradients():
    head, h = make_head()
    h_pos = (h + 0.1 * torch.randn_like(h)).requires_grad_(True)
    h.requires_grad_(True)
    cluster = head.state.assignment
    negative = torch.tensor([1, 2, 0, 4, 5, 3, 7, 6])
    has_negative = torch.tensor([True, True, False, True, True, True, True, True])
    out = head.pair_loss(h, h_pos, cluster, negative, has_negative)
    g_batched = grads(head, out["loss"], h, h_pos)
    terms = []
    for i, j in enumerate(cluster.tolist()):
        z = naive_z(head, h[i], j)
        neg = z @ naive_z(head, h[negative[i]], j) if has_negative[i] else torch.zeros(())
        terms.append(neg - z @ naive_z(head, h_pos[i], j))
    naive = torch.stack(terms).mean()
    g_naive = grads(head, naive, h, h_pos)
    torch.testing.assert_close(out["loss"], naive)
    for a, b in zip(g_batched, g_naive, strict=True):
        torch.testing.assert_close(a, b)


def test_random_partner_draws_only_allowed_columns():
    mask = torch.rand(50, 50) < 0.1
    mask[3] = False
    col, has = random_partner(mask)
    assert torch.equal(has, mask.any(1))
    assert mask[torch.arange(50)[has], col[has]].all()


def test_per_sample_elastic_field_is_torchvisions():
    image = torch.rand(1, 1, 28, 28)
    torch.manual_seed(4)
    reference = T.ElasticTransform(alpha=34.0, sigma=4.0).make_params([image])["displacement"]
    torch.manual_seed(4)
    ours = elastic_displacement(1, 28, 28, 34.0, 4.0)
    torch.testing.assert_close(ours, reference)
    torch.testing.assert_close(apply_displacement(image, ours), TF.elastic(image, reference))
    fields = elastic_displacement(2, 28, 28, 34.0, 4.0, generator=torch.Generator().manual_seed(0))
    assert not torch.allclose(fields[0], fields[1])  # one field per image, unlike torchvision's per call


def test_forward_needs_the_encoder_and_gives_a_finite_loss_with_it():
    torch.manual_seed(0)
    encoder = TCLConv([1, 28, 28], channels=(4, 8))
    assert encoder.embedding_dim == 8 * 4 * 4
    inputs, labels = torch.rand(8, 1, 28, 28), torch.arange(8) % 3
    head = TensorizedContrastive(encoder.embedding_dim, 3, out_dim=6, hidden=10)
    embeddings = encoder(inputs)
    head.init_clusters(embeddings.detach(), inputs=inputs)
    index = torch.arange(8)
    with pytest.raises(ValueError, match="key 'encoder'"):
        head(embeddings, labels, index=index, inputs=inputs)
    for supervised in (False, True):
        head.supervised = supervised
        out = head(embeddings, labels, index=index, inputs=inputs, encoder=encoder)
        assert set(out) == {"loss", "pos", "neg"} and torch.isfinite(out["loss"])
        head.zero_grad()
        out["loss"].backward(retain_graph=True)
        assert all(torch.isfinite(p.grad).all() for p in head.parameters())


@pytest.mark.parametrize("supervised", [False, True])
def test_negatives_from_another_cluster_or_class(supervised, monkeypatch):
    head, h = make_head(n=12, supervised=supervised)
    head.state.assignment = torch.tensor([0, 0, 1, 1, 2, 2, 0, 1, 2, 0, 1, 2])
    labels = torch.tensor([0, 1, 0, 1, 0, 1, 2, 2, 2, -1, 0, 1])
    captured = {}
    monkeypatch.setattr(head, "pair_loss", lambda *args: captured.update(zip("hpcnm", args, strict=True)))
    # 4x4 "images"; the stand-in encoder returns the anchors' own features as the elastic positives
    head(h, labels, index=torch.arange(12), inputs=torch.rand(12, 16), encoder=lambda x: h.clone())
    cluster, pos, neg, has = captured["c"], captured["p"], captured["n"], captured["m"]
    assert has.all()
    if not supervised:
        assert (cluster[neg] != cluster).all()
        torch.testing.assert_close(pos, h)
        return
    labelled = labels >= 0
    assert (labels[neg] != labels)[labelled].all() and (labels[neg] >= 0)[labelled].all()
    assert (cluster[neg] != cluster)[~labelled].all()
    # positive: another sample of the same class where the batch has one, else the (stand-in) elastic one
    for i, y in enumerate(labels.tolist()):
        row = int((h == pos[i]).all(1).nonzero()[0])
        if y >= 0 and (labels == y).sum() > 1:
            assert row != i and labels[row] == y
        else:
            assert row == i


def test_assignment_rule_is_argmin_of_expected_pair_loss():
    head, h = make_head()
    z = head.project(h, dropout=False).detach()

    def expected_loss(assignment):  # <z_j(x), mean z_j outside j> - <z_j(x), mean z_j inside j>, looped
        loss = torch.empty(len(h), 3)
        for j in range(3):
            direction = z[j][assignment != j].mean(0) - z[j][assignment == j].mean(0)
            for i in range(len(h)):
                loss[i, j] = z[j, i] @ direction
        return loss

    before = expected_loss(head.state.assignment.clone())
    head.update_clusters(h)
    best = before.argmin(dim=1)
    assert torch.equal(head.state.assignment, best)
    torch.testing.assert_close(head.per_cluster_loss(h), expected_loss(best))
    assert torch.equal(head.assign(h), head.per_cluster_loss(h).argmin(1))
    emb = head.embed(h)
    assert emb.shape == (len(h), 5)
    torch.testing.assert_close(emb, z[head.assign(h), torch.arange(len(h))])


def test_yamls_instantiate_the_papers_network():
    encoder = instantiate(OmegaConf.load(CONF / "model" / "tcl_conv.yaml"), input_shape=[784])
    assert encoder.embedding_dim == 1024
    assert encoder(torch.rand(2, 784)).shape == (2, 1024)
    head = instantiate(OmegaConf.load(CONF / "loss" / "tcl.yaml"), num_classes=5, embedding_dim=encoder.embedding_dim)
    assert isinstance(head, TensorizedContrastive)
    assert head.weight1.shape == (5, 1024, 512) and head.weight2.shape == (5, 512, 128) and not head.supervised
    assert not head.standard  # num_clusters: null -> the dataset's classes


# ---- one cluster: the standard contrastive model through the same code -------------------------------------------


def standard_pair(n: int = 8):
    """A small conv encoder (no dropout: deterministic) and a one-cluster head (no dropout), with S set up."""
    torch.manual_seed(0)
    encoder = TCLConv([1, 28, 28], channels=(4, 8), dropout=0.0)
    head = TensorizedContrastive(encoder.embedding_dim, 5, out_dim=6, hidden=10, dropout=0.0, num_clusters=1)
    inputs, labels = torch.rand(n, 1, 28, 28), torch.arange(n) % 3
    head.init_clusters(encoder(inputs).detach(), inputs=inputs)
    return encoder, head, inputs, labels


def test_one_cluster_head_is_a_plain_contrastive_network_same_loss_and_gradients():
    encoder, head, inputs, labels = standard_pair()
    assert head.num_clusters == 1 and head.standard
    assert torch.equal(head.state.assignment, torch.zeros(len(inputs), dtype=torch.long))
    assert not head.state.centres.any()  # one cluster: centred on the origin, nothing to assign
    # The hand-written standard model: encoder -> Linear -> ReLU -> Linear, L2-normalised, with the head's weights.
    net = torch.nn.Sequential(torch.nn.Linear(encoder.embedding_dim, 10), torch.nn.ReLU(), torch.nn.Linear(10, 6))
    with torch.no_grad():
        net[0].weight.copy_(head.weight1[0].T), net[0].bias.copy_(head.bias1[0])
        net[2].weight.copy_(head.weight2[0].T), net[2].bias.copy_(head.bias2[0])

    torch.manual_seed(5)
    out = head(encoder(inputs), labels, index=torch.arange(len(inputs)), inputs=inputs, encoder=encoder)
    g_head = grads(torch.nn.ModuleList([head, encoder]), out["loss"])

    torch.manual_seed(5)  # the same draws: the elastic fields, then each anchor's negative
    positives = elastic(inputs, head.alpha, head.sigma)
    n = len(inputs)
    scores = torch.rand(n, n).masked_fill(torch.eye(n, dtype=torch.bool), -1.0)
    negative = scores.argmax(1)  # a uniformly random other sample of the batch: the standard CL's negative
    assert (negative != torch.arange(n)).all()
    z = F.normalize(net(encoder(inputs)), dim=1)
    z_pos = F.normalize(net(encoder(positives)), dim=1)
    loss = ((z * z[negative]).sum(1) - (z * z_pos).sum(1)).mean()
    g_net = grads(torch.nn.ModuleList([net, encoder]), loss)

    torch.testing.assert_close(out["loss"], loss)
    w1, b1, w2, b2, *g_enc_head = g_head
    n1w, n1b, n2w, n2b, *g_enc_net = g_net
    torch.testing.assert_close(w1[0], n1w.T), torch.testing.assert_close(b1[0], n1b)
    torch.testing.assert_close(w2[0], n2w.T), torch.testing.assert_close(b2[0], n2b)
    for a, b in zip(g_enc_head, g_enc_net, strict=True):
        torch.testing.assert_close(a, b)


def test_one_cluster_head_assigns_nothing_and_embeds_with_its_one_head():
    encoder, head, inputs, labels = standard_pair()
    with torch.no_grad():
        h = encoder.eval()(inputs)
    head.update_clusters(h, inputs=inputs)
    assert torch.equal(head.state.assignment, torch.zeros(len(inputs), dtype=torch.long))
    assert not head.state.centres.any()
    assert torch.equal(head.assign(h), torch.zeros(len(inputs), dtype=torch.long))
    torch.testing.assert_close(head.embed(h), head.project(h, dropout=False)[0])


@pytest.mark.parametrize("supervised", [False, True])
def test_one_cluster_negatives_are_any_other_sample(supervised, monkeypatch):
    head, h = make_head(n=12, supervised=supervised, num_clusters=1)
    head.init_clusters(h)  # one cluster: every point in cluster 0
    assert torch.equal(head.state.assignment, torch.zeros(12, dtype=torch.long))
    labels = torch.tensor([0, 1, 0, 1, 0, 1, 2, 2, 2, -1, 0, -1])
    captured = {}
    monkeypatch.setattr(head, "pair_loss", lambda *args: captured.update(zip("hpcnm", args, strict=True)))
    seen = set()
    for seed in range(20):
        torch.manual_seed(seed)
        head(h, labels, index=torch.arange(12), inputs=torch.rand(12, 16), encoder=lambda x: h.clone())
        neg, has = captured["n"], captured["m"]
        assert has.all() and (neg != torch.arange(12)).all()
        if supervised:
            labelled = labels >= 0
            assert (labels[neg] != labels)[labelled].all() and (labels[neg] >= 0)[labelled].all()
        seen |= set(zip(range(12), neg.tolist(), strict=True))
    assert len(seen) > 40  # drawn at random, not a fixed partner


def test_num_clusters_sets_the_number_of_heads():
    assert TensorizedContrastive(16, 5, hidden=4, out_dim=3).weight1.shape == (5, 16, 4)
    assert TensorizedContrastive(16, 5, hidden=4, out_dim=3, num_clusters=1).weight1.shape == (1, 16, 4)
    with pytest.raises(ValueError, match="num_clusters must be >= 1"):
        TensorizedContrastive(16, 5, num_clusters=0)
