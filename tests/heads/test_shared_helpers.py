"""The helpers the heads and encoders share: image shapes, stacked per-cluster layers, the clustering-head block."""

from __future__ import annotations

import pytest
import torch

from clusterable.heads.cluster_state import ClusterSpecificHead
from clusterable.heads.stacked import apply_all, pick, stacked_linear, uniform_weight
from clusterable.heads.tcl import TensorizedContrastive
from clusterable.models import CNN, TCLConv
from clusterable.models.images import as_images, image_shape


@pytest.mark.parametrize(
    "shape, expected",
    [([1, 28, 28], (1, 28, 28)), ([3, 8, 6], (3, 8, 6)), ([28, 28], (1, 28, 28)), ([64], (1, 8, 8))],
)
def test_image_shape_reads_images_and_flat_squares(shape, expected):
    assert image_shape(shape) == expected
    x = torch.rand(2, *shape)
    images = as_images(x)
    assert images.shape == (2, *expected) and torch.equal(images.flatten(1), x.flatten(1))


@pytest.mark.parametrize("shape", [[10], [1, 2, 3, 4], [], [0, 4, 4]])
def test_image_shape_refuses_what_is_no_image(shape):
    with pytest.raises(ValueError, match=r"^input_shape must be \[C, H, W\]"):
        image_shape(shape)


def test_as_images_names_the_tensor_shape():
    with pytest.raises(ValueError, match=r"inputs must be images .* got \(2, 10\)"):
        as_images(torch.rand(2, 10))


def test_image_encoders_and_tcl_read_flat_inputs_alike():
    assert CNN([64]).image_shape == (1, 8, 8) and TCLConv([784]).image_shape == (1, 28, 28)
    head = TensorizedContrastive(embedding_dim=4, num_classes=2, alpha=0.0)  # alpha 0: the identity warp
    x = torch.rand(3, 784)
    torch.testing.assert_close(head._augment(x), x, atol=1e-5, rtol=0)


def test_apply_all_and_pick_match_a_loop_over_clusters():
    torch.manual_seed(0)
    weight, bias = stacked_linear(3, 5, 4)
    shared = uniform_weight((4, 2))
    h = torch.randn(6, 5)
    out = apply_all(h, weight, bias)
    assert out.shape == (3, 6, 4)
    for j in range(3):
        torch.testing.assert_close(out[j], h @ weight[j] + bias[j])
    torch.testing.assert_close(apply_all(out, shared), out @ shared)  # a shared weight broadcasts
    cluster = torch.tensor([2, 0, 1, 1, 0, 2])
    torch.testing.assert_close(pick(out, cluster), torch.stack([out[j, i] for i, j in enumerate(cluster)]))
    assert weight.abs().max() <= 5**-0.5 and shared.abs().max() <= 4**-0.5  # nn.Linear's bound 1/sqrt(in)


class SquaredDistance(ClusterSpecificHead):
    """The clustering-head block around plain k-means: the loss under cluster j is ||x - c_j||^2."""

    loss_parts = ("loss",)

    def cluster_losses(self, embeddings, **split):
        return torch.cdist(embeddings, self._centres()).square()


def test_cluster_specific_head_is_kmeans_around_its_loss():
    x = torch.cat([torch.randn(10, 2, generator=torch.Generator().manual_seed(0)) + 8 * i for i in range(2)])
    head = SquaredDistance(num_classes=2, seed=0)
    with pytest.raises(RuntimeError, match="init_clusters"):
        head.batch_clusters(x, torch.arange(3))
    head.init_clusters(x)  # k-means++ on two far blobs: one cluster each
    found = head.state.assignment.clone()
    assert len(found[:10].unique()) == len(found[10:].unique()) == 1 and found[0] != found[10]
    head.state.assignment[0] = found[10]  # one point in the wrong cluster: one Lloyd step repairs it
    head.state.centres = head.state.cluster_means(x, head.state.assignment, head.state.centres)
    head.update_clusters(x)
    assert torch.equal(head.state.assignment, found)
    torch.testing.assert_close(head.state.centres[found[0]], x[:10].mean(0))
    assert torch.equal(head.assign(x), found)
    index = torch.tensor([3, 15])
    assert torch.equal(head.batch_clusters(x[index], index), head.state.assignment[index])
    assert torch.equal(head.batch_clusters(x[index]), head.assign(x[index]))
