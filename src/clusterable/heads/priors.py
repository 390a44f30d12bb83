"""Latent densities and KL divergences of the Safir 2022 heads (MS thesis, University of Georgia, "Variational
Autoencoders for Semi-Supervised Deep Metric Learning", §4.3-§5.3, Algorithms 3-5): diagonal Gaussians, the unit
prior, the fixed GMM prior at the vertices of the hypercube [-1, 1]^d (§5.2) and the VampPrior (Tomczak & Welling
2018, "VAE with a VampPrior", eq. 9), with the KL divergence of a Gaussian posterior from them, analytic for the
unit prior and by Monte Carlo otherwise (Algorithm 4).

Shapes: N points, d latent dimensions, K mixture components, S Monte Carlo samples.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Literal, get_args

import torch
from torch import Tensor, nn

from clusterable import checks

LOG_2PI = math.log(2 * math.pi)


def gaussian_log_density(z: Tensor, mu: Tensor, logvar: Tensor) -> Tensor:
    """``log N(z; mu, diag exp(logvar))`` summed over the last dimension, 2π constant included.

    ``z``, ``mu``, ``logvar`` (..., d), broadcast against each other; returns (...):
    ``-1/2 sum_j (log 2π + logvar_j + (z_j - mu_j)^2 / exp(logvar_j))``.
    """
    return -0.5 * (LOG_2PI + logvar + (z - mu).pow(2) * torch.exp(-logvar)).sum(-1)


def kl_unit_gaussian(mu: Tensor, logvar: Tensor) -> Tensor:
    """``KL(N(mu, diag exp(logvar)) || N(0, I))`` per row, analytic: ``1/2 sum_j (mu^2 + exp(logvar) - 1 - logvar)``.

    ``mu``, ``logvar`` (N, d) -> (N,).
    """
    return 0.5 * (mu.pow(2) + logvar.exp() - 1.0 - logvar).sum(-1)


def mixture_log_density(z: Tensor, means: Tensor, logvars: Tensor) -> Tensor:
    """Log-density of an equally weighted mixture of diagonal Gaussians:
    ``log (1/K) sum_k N(z; m_k, diag exp(lv_k))``, by logsumexp over the components.

    ``z`` (N, d), ``means`` (K, d), ``logvars`` (K, d) -> (N,). Memory N x K x d.
    """
    per_component = gaussian_log_density(z[:, None, :], means[None], logvars[None])  # (N, K)
    return torch.logsumexp(per_component, dim=1) - math.log(means.shape[0])


def hypercube_means(d: int) -> Tensor:
    """The 2^d vertices of the hypercube [-1, 1]^d, (2^d, d) float32: row k has ``+1`` in dimension j where bit j
    of k is set, ``-1`` elsewhere (Safir 2022 §5.2's GMM prior means)."""
    d = int(checks.at_least("d", d, 1))
    bits = (torch.arange(2**d)[:, None] >> torch.arange(d)) & 1
    return bits.float() * 2 - 1


# How a Monte Carlo KL term is computed: ``exact`` (the KL, unbiased) or ``thesis_alg4`` (Safir 2022's Algorithm 4
# as printed: its sign and its quadratic-only posterior term; see ``kl_monte_carlo``).
KLFormula = Literal["exact", "thesis_alg4"]
KL_FORMULAS: tuple[str, ...] = get_args(KLFormula)


def kl_monte_carlo(
    mu: Tensor,
    logvar: Tensor,
    log_prior: Callable[[Tensor], Tensor],
    samples: int,
    generator: torch.Generator | None = None,
    formula: KLFormula = "exact",
) -> Tensor:
    """``KL(q(z|x) || p(z))`` per row by Monte Carlo over reparameterised draws (Safir 2022, Algorithm 4):
    ``mean_s [log q(z_s|x) - log p(z_s)]`` with ``z_s = mu + exp(logvar / 2) * eps_s``, ``eps_s ~ N(0, I)``.

    Algorithm 4 scores both densities by their quadratic terms only, with one prior Gaussian; here both are the
    full log-densities (normalisers included), the prior's being the whole mixture (``log_prior``), so the
    estimate is unbiased and its gradient reaches ``mu`` and ``logvar`` through the draws.

    ``formula="thesis_alg4"`` computes Algorithm 4 as the thesis prints it instead, a reading kept to test which
    one its tables fit: ``P = -0.5 (z - mu)^2 / exp(logvar)`` (the posterior's quadratic term, summed over the
    dimensions), ``Q = log p(z)`` and ``return Q - P``, which is minus a KL estimate: minimised, it pushes the
    draws away from the prior. With ``z`` reparameterised, ``P = -0.5 eps^2`` carries no gradient, so nothing
    keeps the posterior's variance. ``Q`` is the prior's full log-density (for the fixed GMM prior its normaliser
    is a constant: the same gradient as its quadratic terms; the thesis names one prior Gaussian, not a mixture).

    Args:
        mu, logvar: (N, d) the Gaussian posterior q(z|x).
        log_prior: ``(M, d) -> (M,)`` log p(z); called once, on all N * ``samples`` draws.
        samples: S >= 1 draws per row.
        generator: draws from this generator (on its own device, then moved), else torch's global one.
        formula: ``exact`` or ``thesis_alg4`` (above).
    Returns:
        (N,) the estimates.
    """
    samples = int(checks.at_least("samples", samples, 1))
    shape = (samples, *mu.shape)
    if generator is None:
        eps = torch.randn(shape, dtype=mu.dtype, device=mu.device)
    else:
        eps = torch.randn(shape, generator=generator, dtype=mu.dtype, device=generator.device).to(mu.device)
    formula = checks.one_of("formula", formula, KL_FORMULAS)
    z = mu + torch.exp(0.5 * logvar) * eps  # (S, N, d)
    log_p = log_prior(z.reshape(-1, mu.shape[-1])).reshape(samples, -1)
    if formula == "thesis_alg4":  # Q - P, P the posterior's quadratic term alone
        quadratic = -0.5 * ((z - mu).pow(2) / torch.exp(logvar)).sum(-1)  # (S, N)
        return (log_p - quadratic).mean(0)
    log_q = gaussian_log_density(z, mu, logvar)  # (S, N)
    return (log_q - log_p).mean(0)


class WatchesPrintedKL:
    """For a head with a ``kl_formula`` (``contracts.WatchesDivergence``): Algorithm 4 as printed is unbounded
    below (its ``log p(z)`` falls without end as the draws leave the prior), so a runaway under it is a result of
    its grid, recorded ``diverged``, and the generic divergence limit catches it; the exact KL is bounded below."""

    kl_formula: str

    @property
    def unbounded(self) -> bool:
        return self.kl_formula == "thesis_alg4"

    def divergence(self, history: Sequence[Mapping[str, float]]) -> str | None:
        """None: the runaway is caught by ``divergence_limit`` (the loss falls past -1e10 within a few epochs)."""
        return None


class GMMPrior(nn.Module):
    """Safir 2022 §5.2's fixed GMM prior: 2^d equally weighted Gaussians centred at the vertices of [-1, 1]^d, each
    with log-variance ``logvar`` in every dimension (the thesis: 1); nothing is learned.

    Equal weights, means that are every sign combination and a shared isotropic variance make the mixture a
    product over dimensions of two-component mixtures:
    ``(1/2^d) sum_{s in {-1,1}^d} prod_j N(z_j; s_j, v) = prod_j [N(z_j; 1, v) + N(z_j; -1, v)] / 2``,
    so ``log_prob`` costs O(d) per point instead of O(2^d d).

    Args:
        latent_dim: d >= 1.
        logvar: the components' log-variance (every dimension).
        max_latent_dim: the largest d accepted (2^d components), >= 1; a bound on the enumerated ``means``.
    """

    def __init__(self, latent_dim: int, logvar: float = 1.0, max_latent_dim: int = 12):
        super().__init__()
        self.max_latent_dim = int(checks.at_least("max_latent_dim", max_latent_dim, 1))
        self.latent_dim = int(checks.at_least("latent_dim", latent_dim, 1))
        if self.latent_dim > self.max_latent_dim:
            raise ValueError(
                f"latent_dim={self.latent_dim} gives a GMM prior of 2^{self.latent_dim} = {2**self.latent_dim:,} "
                f"components, beyond max_latent_dim={self.max_latent_dim} ({2**self.max_latent_dim:,})"
            )
        if not math.isfinite(logvar):
            raise ValueError(f"logvar must be finite, got {logvar}")
        self.logvar = float(logvar)

    @property
    def means(self) -> Tensor:
        """(2^d, d) the components' means, enumerated (for plots and checks)."""
        return hypercube_means(self.latent_dim)

    def log_prob(self, z: Tensor) -> Tensor:
        """``log p(z)`` (N,) for ``z`` (N, d), factorised over dimensions (see the class doc)."""
        var = math.exp(self.logvar)
        # per dimension: log([N(z; 1, v) + N(z; -1, v)] / 2), the two quadratic terms combined by logaddexp
        pair = torch.logaddexp(-(z - 1).pow(2) / (2 * var), -(z + 1).pow(2) / (2 * var))
        return (pair - math.log(2) - 0.5 * (LOG_2PI + self.logvar)).sum(-1)


class VampPrior(nn.Module):
    """The VampPrior (Tomczak & Welling 2018, eq. 9): ``p(z) = (1/K) sum_k q(z | u_k)``, the posterior averaged over
    K learned pseudo-inputs u_k, used by Safir 2022's MetricVAE (§4.4.1, §5.3).

    The pseudo-inputs are a parameter (K, *input_shape) initialised uniformly in [0, 1) by ``torch.rand`` from
    torch's global generator (our choice; inputs are pixels in [0, 1]; the run seeds that generator before it builds
    the head, so they are reproducible). Tomczak & Welling generate theirs through a learned layer; nothing here
    keeps them in [0, 1] during training.

    Args:
        num_pseudo_inputs: K >= 1.
        input_shape: the shape of one input.

    Attributes:
        pseudo_inputs: (K, *input_shape) learned parameter.
    """

    def __init__(self, num_pseudo_inputs: int, input_shape: Sequence[int]):
        super().__init__()
        k = int(checks.at_least("num_pseudo_inputs", num_pseudo_inputs, 1))
        shape = checks.widths("input_shape", input_shape)
        self.pseudo_inputs = nn.Parameter(torch.rand(k, *shape))

    def log_prob(self, z: Tensor, encode: Callable[[Tensor], tuple[Tensor, Tensor]]) -> Tensor:
        """``log (1/K) sum_k N(z; mu(u_k), diag exp(logvar(u_k)))`` (N,) for ``z`` (N, d), where
        ``encode(u (K, *input_shape)) -> (mu (K, d), logvar (K, d))`` is the posterior's encoder (the gradient
        reaches both it and the pseudo-inputs)."""
        means, logvars = encode(self.pseudo_inputs)
        return mixture_log_density(z, means, logvars)
