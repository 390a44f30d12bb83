"""What the semi-supervised heads of Safir 2022 share (MS thesis, University of Georgia, "Variational Autoencoders for
Semi-Supervised Deep Metric Learning", §5, Algorithms 1-5): a latent space of ``latent_dim`` on top of the encoder,
a supervised metric loss L_S on the labelled rows of the latent, an unsupervised loss L_U on every row, and the
schedule that weighs them per epoch. The heads are ``dml.DML``, ``dml_ae.DMLAutoencoder``, ``dml_prior.DMLPrior``
and ``mvae.MVAE``; all are ``contracts.RepresentingHead``s whose representation is the latent (the posterior mean
for the variational ones), so the evaluators score the latent space.

Shapes: N rows, D = ``embedding_dim`` (the encoder's output), d = ``latent_dim``, d_in = prod(input_shape).
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Sequence
from typing import Any, Literal, get_args

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from clusterable import checks
from clusterable.contracts import ContractError, Head, OwnLearningRate, require

Schedule = Literal["alternate", "joint"]
SCHEDULES: tuple[str, ...] = get_args(Schedule)
Reduction = Literal["sum", "mean"]
REDUCTIONS: tuple[str, ...] = get_args(Reduction)


def build_metric(metric: Callable[..., nn.Module], num_classes: int, embedding_dim: int) -> nn.Module:
    """Call ``metric`` (a head class or a partial of one, e.g. ``PMLHead`` or ``CenterLoss``) once with those of
    ``num_classes`` and ``embedding_dim`` (here: the latent dimension) its signature takes, and check the result is
    a ``contracts.Head`` module whose learning rate, if it has one, is left to the optimizer.

    Raises ``ValueError`` (one line starting with ``metric``) for a framework argument the config sets, what the
    metric's constructor raised, or an ``lr`` it would silently lose (the module gives a head's own learning rate
    to the outer head only); ``ContractError`` for something that is not a loss head.
    """
    framework = {"num_classes": num_classes, "embedding_dim": embedding_dim}
    given = metric.keywords if isinstance(metric, functools.partial) else {}
    for key, value in framework.items():
        if key in given:
            raise ValueError(f"metric.{key} is set by the head ({key}={value}); remove it from the config")
    try:
        params = inspect.signature(metric).parameters
    except (TypeError, ValueError):  # no signature to read: pass nothing
        params = {}
    takes_any = any(p.kind == p.VAR_KEYWORD for p in params.values())
    try:
        head = metric(**{k: v for k, v in framework.items() if k in params or takes_any})
    except ValueError as e:  # a range error of the metric's own options: name it under `metric`
        raise ValueError(f"metric.{e}") from None
    if not isinstance(head, nn.Module):
        raise ContractError(f"metric: {type(head).__name__} is not an nn.Module (its parameters would not train)")
    require(head, Head, "metric")
    if isinstance(head, OwnLearningRate) and head.lr is not None:
        raise ValueError(
            f"metric.lr must be null, got {head.lr}: the metric's parameters train in the semi-supervised head's "
            "group, at the optimizer's rate"
        )
    return head


def decoder_mlp(latent_dim: int, hidden: Sequence[int], input_dim: int, negative_slope: float) -> nn.Sequential:
    """The decoder: z (N, d) -> [Linear -> LeakyReLU] per width of ``hidden`` -> Linear -> sigmoid -> (N, d_in).

    The sigmoid keeps the output in (0, 1): the inputs it reconstructs are pixels in [0, 1].
    """
    layers: list[nn.Module] = []
    width = latent_dim
    for h in hidden:
        layers += [nn.Linear(width, h), nn.LeakyReLU(negative_slope)]
        width = h
    return nn.Sequential(*layers, nn.Linear(width, input_dim), nn.Sigmoid())


def reconstruction_error(output: Tensor, target: Tensor, reduction: Reduction) -> Tensor:
    """The reconstruction term of L_U for ``output`` and ``target`` (N, d_in): ``sum`` is the squared error summed
    over the d_in values and averaged over the rows, ``mean/N sum_i ||x_i - x^_i||^2`` (the unit-variance Gaussian
    log-likelihood without its constants, Safir 2022 §4.3); ``mean`` is torch's ``MSELoss``, averaged over the
    values too (Algorithm 5's ``MSE(x, x^)``). Scalar."""
    if reduction == "mean":
        return F.mse_loss(output, target)
    return (output - target).pow(2).sum(1).mean()


def reparameterise(mu: Tensor, logvar: Tensor) -> Tensor:
    """``z = mu + exp(logvar / 2) * eps``, ``eps ~ N(0, I)`` from torch's global generator; (N, d)."""
    return mu + torch.exp(0.5 * logvar) * torch.randn_like(mu)


def flat_target(inputs: Tensor | None, targets: Tensor | None, input_dim: int) -> Tensor:
    """What an autoencoder reconstructs: ``targets`` when the batch has them (de-noising), else ``inputs``;
    flattened to (N, d_in)."""
    x = targets if targets is not None else inputs
    if x is None:
        raise ValueError("this head reconstructs its inputs: call it with inputs=(N, *input_shape)")
    x = x.flatten(1)
    if x.shape[1] != input_dim:
        raise ValueError(f"inputs must have {input_dim} values once flattened, got {x.shape[1]}")
    return x


class SemiSupervisedHead(nn.Module):
    """Base of the Safir 2022 heads: the metric loss on the latent's labelled rows, and the schedule that combines it
    with the head's unsupervised loss.

    Schedules (the epoch is Lightning's 0-based ``current_epoch``):
    - ``alternate`` (§5.1-§5.3, Algorithms 2, 3, 5): on the thesis's odd epochs (1-based: our even ones)
      ``L = (1 - alpha) L_S + alpha L_U``, on the others ``L = alpha L_U``;
    - ``joint`` (Table 6.6): ``L = L_U + gamma L_S`` every epoch.
    L_S is not computed where its weight is 0 (``alpha = 1``, the unsupervised epochs, ``gamma = 0``): the metric
    head's parameters then get no gradient at all (None, so Adam leaves them alone), and ``forward`` returns no
    ``supervised`` part. L_S is the metric loss on the rows with ``labels >= 0``; a batch without any gives 0, still
    connected to the graph.

    A subclass computes its latent and its unsupervised parts and returns ``self.combine(...)``; it declares
    ``loss_parts`` (``"loss"``, ``"supervised"``, then its own).

    Args:
        num_classes: K >= 2, passed to the metric head.
        embedding_dim: D >= 1, the encoder's output width.
        latent_dim: d >= 1, the thesis's lsdim.
        metric: builds the supervised metric-loss head (a ``_partial_`` config node such as
            ``clusterable.heads.pml.PMLHead`` or ``clusterable.heads.center.CenterLoss``); called once as
            ``metric(num_classes=K, embedding_dim=d)`` with the arguments its signature takes; only its ``loss``
            output is used.
        schedule: ``alternate`` or ``joint``.
        alpha: α in (0, 1], the unsupervised share of the alternate schedule (§6.1.3); checked under ``joint`` too,
            where it is not used.
        gamma: γ >= 0, the supervised weight of the joint schedule.

    Attributes:
        metric: the metric-loss head.
    """

    loss_parts: tuple[str, ...] = ("loss", "supervised")

    def __init__(
        self,
        num_classes: int,
        embedding_dim: int,
        latent_dim: int,
        metric: Callable[..., nn.Module],
        schedule: Schedule,
        alpha: float,
        gamma: float,
    ):
        super().__init__()
        self.num_classes = int(checks.at_least("num_classes", num_classes, 2))
        self.embedding_dim = int(checks.at_least("embedding_dim", embedding_dim, 1))
        self.latent_dim = int(checks.at_least("latent_dim", latent_dim, 1))
        self.schedule = checks.one_of("schedule", schedule, SCHEDULES)
        self.alpha = checks.in_interval("alpha", alpha, 0, 1, open_low=True)
        self.gamma = float(checks.at_least("gamma", gamma, 0))
        self.metric = build_metric(metric, self.num_classes, self.latent_dim)

    def weights(self, epoch: int) -> tuple[float, float]:
        """(w_U, w_S): the weights of L_U and L_S in epoch ``epoch`` (0-based), ``L = w_U L_U + w_S L_S``."""
        if self.schedule == "joint":
            return 1.0, self.gamma
        return self.alpha, (1.0 - self.alpha if epoch % 2 == 0 else 0.0)

    def supervised_loss(self, z: Tensor, labels: Tensor) -> Tensor:
        """L_S: the metric head's ``loss`` on the rows of ``z`` (N, d) with ``labels`` (N,) >= 0; scalar.

        0 connected to the graph when no row is labelled or the metric's loss does not depend on ``z`` (e.g. no
        triplet mined), so that a loss made of L_S alone still back-propagates.
        """
        labelled = labels >= 0
        if not bool(labelled.all()):  # a host sync, as PML's own mining does
            if not bool(labelled.any()):
                return (z * 0).sum()
            z, labels = z[labelled], labels[labelled]
        loss = self.metric(z, labels)["loss"]
        if z.requires_grad and loss.grad_fn is None:
            loss = loss + (z * 0).sum()
        return loss

    def combine(
        self, z: Tensor, labels: Tensor, epoch: int, unsupervised: Tensor | None, parts: dict[str, Tensor]
    ) -> dict[str, Tensor]:
        """``{"loss": w_U L_U + w_S L_S, "supervised": L_S (if computed), **parts}`` for epoch ``epoch``.

        ``z`` (N, d) the latent the metric loss sees, ``labels`` (N,), ``unsupervised`` L_U (scalar; None for a
        head without one), ``parts`` its pieces as logged (``recon``, ``kl``).
        """
        w_u, w_s = self.weights(epoch)
        loss = None if unsupervised is None else w_u * unsupervised
        out: dict[str, Tensor] = {}
        if w_s > 0:
            out["supervised"] = self.supervised_loss(z, labels)
            loss = w_s * out["supervised"] if loss is None else loss + w_s * out["supervised"]
        if loss is None:  # no term at all (only a head without L_U and a zero weight): 0, connected
            loss = (z * 0).sum()
        return {"loss": loss, **out, **parts}

    def embed(self, embeddings: Tensor, **split: Any) -> Tensor:
        """The representation the evaluators score: the latent (N, d) of ``embeddings`` (N, D), deterministic."""
        raise NotImplementedError
