"""Gaussian-COREL: attractive-repulsive loss with similarity ``-gamma ||h - w||^2`` (Kenyon-Dean et al. 2019,
COREL eqs. 4, 6)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Literal, get_args

import torch
from torch import nn

from clusterable import checks
from clusterable.heads.attract_repel import AttractRepelHead, labelled_mean

# A runaway: the epoch's mean attraction at least this many times its smallest epoch mean so far (with a negative
# loss). Below lam = 0.5 it grows ~20x in the second epoch on digits; healthy runs shrink it (lam > 0.5).
RUNAWAY_GROWTH = 10.0

# ``formula``: the paper's equations, or the loss of the authors' code (kiankd/corel2019, corel/loss_functions.py).
Formula = Literal["paper", "authors_code"]
FORMULAS: tuple[str, ...] = get_args(Formula)
# ``gamma_parametrization`` of a learned gamma: log gamma (always positive), or gamma itself (the authors' code).
GammaParametrization = Literal["log", "raw"]
GAMMA_PARAMETRIZATIONS: tuple[str, ...] = get_args(GammaParametrization)
# The authors' code takes log(sum_k exp(S_ik) + 1e-10) for the repulsion (kiankd/corel2019, GaussianARLoss).
AUTHORS_LOG_EPS = math.log(1e-10)


class GaussianCOREL(AttractRepelHead):
    """COREL eq. 6 with the Gaussian similarity of eq. 4.

    Per labelled sample i, with ``S_ik = -gamma ||h_i - w_k||^2``:
    ``L_i = lam * gamma ||h_i - w_{y_i}||^2 + (1 - lam) * log sum_k exp(S_ik)``.
    ``attract`` and ``repel`` are the means of the two terms without their weights, so
    ``loss = lam * attract + (1 - lam) * repel``. At ``lam = 0.5`` this is half the softmax cross-entropy over
    the logits ``S``, the same as over ``2 gamma h.w_k - gamma |w_k|^2`` (the ``|h|^2`` term is common to every
    class and cancels inside the softmax): cross-entropy with a bias tied to the class vectors. At ``lam = 1``
    the optimal class vectors are the class centroids (COREL eq. 7).

    **Below lam = 0.5 the loss is unbounded below.** With ``a_k = gamma ||h - w_k||^2`` the two terms are
    ``attract = a_y`` and ``repel = log sum_k exp(-a_k) = -a_y + s``, where ``s = log sum_k exp(a_y - a_k) >= 0``
    is the cross-entropy of the logits ``-a_k``, so ``L = (2 lam - 1) a_y + (1 - lam) s``. For ``lam >= 0.5`` both
    terms are >= 0 and ``L >= 0``. For ``lam < 0.5`` move ``h = t u`` away from every class vector (u a unit
    vector): each ``a_k = gamma t^2 - 2 gamma t u.w_k + gamma |w_k|^2`` grows like ``gamma t^2`` while the
    differences ``a_y - a_k`` grow only linearly in t, so ``s = O(t)`` and
    ``L = (2 lam - 1) gamma |h|^2 + O(|h|)``, which falls without bound. Gradient descent finds that direction
    (the encoder only has to scale its output up): on digits every lam in [0.05, 0.49] sends the attraction from
    ~60 to ~1e3 within the second epoch and to 1e10 by epoch 39-53, at chance accuracy. The paper tunes lam over
    [0, 1] (COREL, "Tuning"); ``divergence`` makes such a run a diverged cell rather than a chance-level number.

    ``divergence`` (``contracts.WatchesDivergence``, asked after every training epoch) reports the runaway when
    ``lam < 0.5``, the epoch's mean loss is negative (impossible for ``lam >= 0.5``, where ``L >= 0``) and the
    mean attraction has grown ``RUNAWAY_GROWTH``-fold over its smallest epoch mean so far. Both conditions are
    needed: at ``lam = 0.5`` the attraction grows too (the tied-bias softmax rewards scaling h and w up; on
    digits 5x in the first epoch, ~1e9 by epoch 150, where float32 can no longer resolve the logits and the
    accuracy collapses after epoch ~125; the best-epoch checkpoint keeps the earlier weights), yet its loss
    stays >= 0. Measured on digits (FFNN, 150 epochs, 2 seeds): it fires at epoch 1 for every lam in {0.05,
    0.1, 0.3, 0.4, 0.45, 0.49} and never for lam in {0.5, 0.55, 0.7, 1.0} (their smallest epoch loss: 5e-5).

    **Fidelity to the authors' code.** By default (``formula: paper``) we follow the paper's equations. The
    authors' code (repository ``kiankd/corel2019``, ``corel/loss_functions.py``, ``GaussianARLoss`` and ``arloss``;
    the similarities in ``corel/prediction_functions.py``, ``get_gaussian_predictions``) differs, and
    ``formula: authors_code`` computes its loss instead:

    - for ``lam != 0.5`` it multiplies the attraction by ``lam`` in ``GaussianARLoss`` and again in ``arloss``, so
      ``L_i = lam^2 a_y + (1 - lam)^2 log(sum_k exp(S_ik) + 1e-10)``: the same loss as the paper's at
      ``lam' = lam^2 / (lam^2 + (1 - lam)^2)``, scaled by ``lam^2 + (1 - lam)^2`` (their 0.6 / 0.7 / 0.8 behave
      like our 0.692 / 0.845 / 0.941; ``lam < 0.5`` still maps below 0.5);
    - for ``lam = 0.5`` it takes ``-log_softmax(S)`` averaged over the whole N x K matrix:
      ``(a_y + log sum_k exp(S_ik)) / K``, the cross-entropy over K (the paper's 0.5 gives half of it);
    - the ``+ 1e-10`` inside the log floors the repulsion at ``log 1e-10 = -23.03``: once every
      ``gamma ||h - w_k||^2`` exceeds ~23 (far embeddings), their ``exp`` sum is negligible or underflows to 0
      in float32, the repulsion stops moving and its gradient vanishes. Below ``lam = 0.5`` this bounds their
      loss below (by ``-23.03 (1 - lam)^2``): the descent described above stops near ``a_k ~ 23`` instead of
      running away. We compute the same value as ``logaddexp(logsumexp_k S_ik, log 1e-10)``, which cannot
      overflow or underflow; ``repel`` reports that term (the plain log-sum-exp at ``lam = 0.5``).

    Their gamma is learned (``CORELWrapper``, ``corel/corel_wrapper.py``: ``nn.Parameter`` set to 0.5 in
    ``reset_parameters``), unconstrained, so it can reach 0 or turn negative; the paper keeps it fixed (the value
    is stripped from the text; 0.5 is the code's initial value and matches the squared-error reading
    ``-||h - w||^2 / 2``). ``learn_gamma: true`` learns it; with ``gamma_parametrization: log`` (the default) the
    trained parameter is log gamma, so gamma stays positive and a gradient step changes it by a factor (a
    different trajectory from theirs); ``gamma_parametrization: raw`` trains gamma itself as they do. Their run:
    ``formula=authors_code learn_gamma=true gamma_parametrization=raw gamma=0.5``.

    Args:
        num_classes: K, at least 2.
        embedding_dim: D, at least 1.
        lam: attraction weight in [0, 1].
        gamma: similarity scale, > 0.
        learn_gamma: make gamma a trained parameter (see ``gamma_parametrization``).
        lr: learning rate of this head's parameter group, > 0 (None: the optimizer's).
        train_class_vectors: train the class vectors (true) or keep them at their initialisation
            (``AttractRepelHead``).
        formula: ``paper`` (eq. 6) or ``authors_code`` (their ``GaussianARLoss``: squared weights, the ``1/K`` of
            ``lam = 0.5``, the ``1e-10`` floor; see above).
        gamma_parametrization: of a learned gamma: ``log`` (trains log gamma; gamma stays positive) or ``raw``
            (trains gamma itself, as the authors' code; needs ``learn_gamma``).

    Attributes:
        weight: (K, D) class vectors, xavier-normal initialised as in the authors' code.
        log_gamma: () parameter if ``learn_gamma`` (``log``) else buffer; absent with ``raw``.
        raw_gamma: () parameter, gamma itself, with ``learn_gamma`` and ``gamma_parametrization: raw`` only.
    """

    # λ may differ between the members of a stacked grid (contracts.StacksScalars), under the paper's formula.
    stacked_scalars: tuple[str, ...] = ("lam",)

    def __init__(
        self,
        num_classes: int,
        embedding_dim: int,
        lam: float = 0.5,
        gamma: float = 0.5,
        learn_gamma: bool = False,
        lr: float | None = None,
        formula: Formula = "paper",
        gamma_parametrization: GammaParametrization = "log",
        train_class_vectors: bool = True,
    ):
        super().__init__(num_classes, embedding_dim, lr, train_class_vectors)
        self.lam = checks.in_interval("lam", lam, 0, 1)
        self.formula = checks.one_of("formula", formula, FORMULAS)
        if self.formula != "paper":  # the authors' loss branches on lam == 0.5: no per-member λ tensor there
            self.stacked_scalars = ()
        self.gamma_parametrization = checks.one_of(
            "gamma_parametrization", gamma_parametrization, GAMMA_PARAMETRIZATIONS
        )
        gamma = checks.positive("gamma", gamma)
        if gamma_parametrization == "raw" and not learn_gamma:
            raise ValueError("gamma_parametrization raw needs learn_gamma: true (a fixed gamma is untrained)")
        if gamma_parametrization == "raw":
            self.raw_gamma = nn.Parameter(torch.tensor(float(gamma)))
        elif learn_gamma:
            self.log_gamma = nn.Parameter(torch.tensor(math.log(gamma)))
        else:
            self.register_buffer("log_gamma", torch.tensor(math.log(gamma)))

    @property
    def gamma(self) -> torch.Tensor:
        """() the similarity scale: positive, unless trained ``raw`` (the authors' gamma is unconstrained)."""
        return self.raw_gamma if self.gamma_parametrization == "raw" else self.log_gamma.exp()

    def squared_distances(self, embeddings: torch.Tensor) -> torch.Tensor:
        """(N, D) -> (N, K) ``||h_i - w_k||^2`` as ``|h|^2 - 2 h.w + |w|^2`` (no N x K x D tensor)."""
        sq = (
            embeddings.pow(2).sum(dim=1, keepdim=True)
            - 2.0 * embeddings @ self.weight.T
            + self.weight.pow(2).sum(dim=1)
        )
        return sq.clamp(min=0.0)  # rounding can make the expansion slightly negative

    def logits(self, embeddings: torch.Tensor) -> torch.Tensor:
        """(N, D) -> (N, K) similarities ``-gamma ||h_i - w_k||^2``; argmax = the nearest class vector."""
        return -self.gamma * self.squared_distances(embeddings)

    def forward(self, embeddings: torch.Tensor, labels: torch.Tensor, **batch) -> dict[str, torch.Tensor]:
        """Losses averaged over the samples with ``labels >= 0``; embeddings (N, D), labels (N,) long."""
        logits = self.logits(embeddings)
        labelled = labels >= 0
        targets = labels.clamp(min=0)
        attract = labelled_mean(-logits.gather(1, targets[:, None]).squeeze(1), labelled)
        log_sum_exp = torch.logsumexp(logits, dim=1)
        if self.formula == "paper":
            repel = labelled_mean(log_sum_exp, labelled)
            return {"loss": self.lam * attract + (1.0 - self.lam) * repel, "attract": attract, "repel": repel}
        # The authors' GaussianARLoss (class docstring): a log-softmax mean over N x K at lam = 0.5, else squared
        # weights and log(sum exp + 1e-10), here as a logaddexp so that it neither overflows nor underflows.
        if self.lam == 0.5:
            repel = labelled_mean(log_sum_exp, labelled)
            return {"loss": (attract + repel) / self.num_classes, "attract": attract, "repel": repel}
        repel = labelled_mean(torch.logaddexp(log_sum_exp, log_sum_exp.new_tensor(AUTHORS_LOG_EPS)), labelled)
        loss = self.lam**2 * attract + (1.0 - self.lam) ** 2 * repel
        return {"loss": loss, "attract": attract, "repel": repel}

    @property
    def unbounded(self) -> bool:
        """Whether the loss is unbounded below (the paper's eq. 6 at ``lam < 0.5``; the authors' code floors its
        log-sum-exp at 1e-10, which bounds it): any runaway of such a run is a result of its grid
        (``contracts.WatchesDivergence``), also one that passes ``divergence_limit`` inside the first epoch."""
        return self.lam < 0.5 and self.formula == "paper"

    def divergence(self, history: Sequence[Mapping[str, float]]) -> str | None:
        """One line when the unbounded descent of ``lam < 0.5`` is under way, else None.

        ``history``: the epoch means of ``loss``, ``attract`` and ``repel``, one dict per finished epoch (the last
        is the epoch just finished). See the class docstring for the criterion and what it was measured on.
        """
        if not self.unbounded or not history:
            return None
        last = history[-1]
        smallest = min(epoch["attract"] for epoch in history)
        if last["loss"] >= 0 or last["attract"] < RUNAWAY_GROWTH * smallest:
            return None
        return (
            f"train/loss fell to {last['loss']:.3g} as train/attract (mean gamma ||h - w_y||^2) grew from "
            f"{smallest:.3g} to {last['attract']:.3g}: Gaussian-COREL with lam = {self.lam:g} < 0.5 is unbounded "
            "below (the loss falls like (2 lam - 1) gamma |h|^2 as h moves away from every class vector; use "
            "lam >= 0.5)"
        )
