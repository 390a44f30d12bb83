"""The latent densities and KL divergences of the Safir 2022 heads (``clusterable.heads.priors``) against
torch.distributions, numerical integration and direct loops over mixture components."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from scipy import integrate
from torch.distributions import Independent, Normal, kl_divergence

from clusterable.heads.priors import (
    GMMPrior,
    VampPrior,
    gaussian_log_density,
    hypercube_means,
    kl_monte_carlo,
    kl_unit_gaussian,
    mixture_log_density,
)


def posterior(n: int = 6, d: int = 3, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return torch.randn(n, d, generator=g, dtype=torch.float64), 0.5 * torch.randn(
        n, d, generator=g, dtype=torch.float64
    )


def diagonal(mu: torch.Tensor, logvar: torch.Tensor) -> Independent:
    return Independent(Normal(mu, torch.exp(0.5 * logvar)), 1)


def test_gaussian_log_density_is_torch_normal():
    mu, logvar = posterior()
    z = torch.randn_like(mu)
    expected = diagonal(mu, logvar).log_prob(z)
    assert torch.allclose(gaussian_log_density(z, mu, logvar), expected, rtol=1e-12)


def test_unit_kl_is_torch_kl_divergence():
    mu, logvar = posterior()
    unit = diagonal(torch.zeros_like(mu), torch.zeros_like(logvar))
    expected = kl_divergence(diagonal(mu, logvar), unit)
    assert kl_unit_gaussian(mu, logvar).shape == (6,)
    assert torch.allclose(kl_unit_gaussian(mu, logvar), expected, rtol=1e-12)


def test_mixture_log_density_is_a_log_mean_exp_over_components():
    g = torch.Generator().manual_seed(1)
    z = torch.randn(5, 3, generator=g, dtype=torch.float64)
    means = torch.randn(4, 3, generator=g, dtype=torch.float64)
    logvars = torch.randn(4, 3, generator=g, dtype=torch.float64)
    densities = [diagonal(means[k], logvars[k]).log_prob(z).exp() for k in range(4)]
    expected = (sum(densities) / 4).log()
    assert torch.allclose(mixture_log_density(z, means, logvars), expected, rtol=1e-12)


@pytest.mark.parametrize("d", [1, 2, 3])
def test_hypercube_means_are_the_vertices(d):
    means = hypercube_means(d)
    assert means.shape == (2**d, d) and set(means.unique().tolist()) == {-1.0, 1.0}
    assert len({tuple(row) for row in means.tolist()}) == 2**d


@pytest.mark.parametrize("d", [1, 2, 3, 4, 5, 6])
@pytest.mark.parametrize("logvar", [1.0, -0.7])
def test_gmm_prior_factorised_density_is_the_enumerated_mixture(d, logvar):
    prior = GMMPrior(d, logvar=logvar)
    z = 1.5 * torch.randn(20, d, generator=torch.Generator().manual_seed(d), dtype=torch.float64)
    means = prior.means.double()
    expected = mixture_log_density(z, means, torch.full_like(means, logvar))
    assert prior.log_prob(z).shape == (20,)
    assert torch.allclose(prior.log_prob(z), expected, rtol=1e-10, atol=1e-12)


def test_gmm_prior_refuses_too_many_components():
    assert len(GMMPrior(12).means) == 4096
    with pytest.raises(ValueError) as error:
        GMMPrior(13)
    assert str(error.value) == (
        "latent_dim=13 gives a GMM prior of 2^13 = 8,192 components, beyond max_latent_dim=12 (4,096)"
    )
    assert GMMPrior(13, max_latent_dim=13).latent_dim == 13
    with pytest.raises(ValueError, match=r"^latent_dim must be >= 1"):
        GMMPrior(0)


def integrated_kl(mu: float, logvar: float, log_p) -> float:
    """KL(N(mu, e^logvar) || p) in one dimension by quadrature of q log(q / p) over mu +- 12 sigma."""
    sigma = math.exp(0.5 * logvar)

    def integrand(z: float) -> float:
        log_q = -0.5 * (math.log(2 * math.pi) + logvar + (z - mu) ** 2 / sigma**2)
        return math.exp(log_q) * (log_q - log_p(z))

    value, _ = integrate.quad(integrand, mu - 12 * sigma, mu + 12 * sigma, limit=200, epsabs=1e-12)
    return value


def test_kl_monte_carlo_with_the_gmm_prior_converges_to_the_integral():
    prior = GMMPrior(1, logvar=1.0)
    mu, logvar = 0.3, -0.5
    exact = integrated_kl(mu, logvar, lambda z: float(prior.log_prob(torch.tensor([[z]], dtype=torch.float64))))
    # 200,000 independent one-sample estimates: their mean and its standard error.
    n = 200_000
    g = torch.Generator().manual_seed(0)
    rows = kl_monte_carlo(
        torch.full((n, 1), mu, dtype=torch.float64),
        torch.full((n, 1), logvar, dtype=torch.float64),
        prior.log_prob,
        samples=1,
        generator=g,
    )
    estimate, stderr = float(rows.mean()), float(rows.std()) / math.sqrt(n)
    assert exact > 0 and abs(estimate - exact) < 4 * stderr, (estimate, exact, stderr)
    # `samples` averages draws per row: the same estimator, lower variance per row.
    averaged = kl_monte_carlo(
        torch.full((2000, 1), mu, dtype=torch.float64),
        torch.full((2000, 1), logvar, dtype=torch.float64),
        prior.log_prob,
        samples=100,
        generator=g,
    )
    assert averaged.shape == (2000,) and float(averaged.std()) < float(rows.std()) / 5
    assert abs(float(averaged.mean()) - exact) < 4 * float(averaged.std()) / math.sqrt(2000)


def test_kl_monte_carlo_with_one_component_is_the_analytic_gaussian_kl():
    mu, logvar = posterior(n=4, d=3, seed=2)
    m, lv = posterior(n=1, d=3, seed=3)
    exact = kl_divergence(diagonal(mu, logvar), diagonal(m.expand_as(mu), lv.expand_as(logvar)))
    n = 200_000
    g = torch.Generator().manual_seed(0)
    rows = kl_monte_carlo(mu, logvar, lambda z: mixture_log_density(z, m, lv), samples=n, generator=g)
    assert rows.shape == (4,)
    # the standard error of each row's mean, from n one-sample estimates of the same row
    draws = kl_monte_carlo(
        mu.repeat_interleave(n, 0),
        logvar.repeat_interleave(n, 0),
        lambda z: mixture_log_density(z, m, lv),
        samples=1,
        generator=g,
    ).reshape(4, n)
    stderr = draws.std(1) / math.sqrt(n)
    assert torch.all((rows - exact).abs() < 4 * stderr), (rows, exact, stderr)
    assert torch.all((draws.mean(1) - exact).abs() < 4 * stderr)


def test_kl_monte_carlo_gradient_reaches_the_posterior():
    mu, logvar = (t.clone().requires_grad_(True) for t in posterior())
    kl_monte_carlo(mu, logvar, GMMPrior(3).log_prob, samples=2).sum().backward()
    assert mu.grad is not None and logvar.grad is not None and mu.grad.abs().sum() > 0
    with pytest.raises(ValueError, match=r"^samples must be >= 1"):
        kl_monte_carlo(mu, logvar, GMMPrior(3).log_prob, samples=0)


def test_vamp_prior_is_the_posterior_averaged_over_pseudo_inputs():
    torch.manual_seed(0)
    prior = VampPrior(5, [2, 3]).double()
    assert prior.pseudo_inputs.shape == (5, 2, 3)
    assert 0 <= float(prior.pseudo_inputs.detach().min()) and float(prior.pseudo_inputs.detach().max()) <= 1
    mu_layer, logvar_layer = torch.nn.Linear(6, 4).double(), torch.nn.Linear(6, 4).double()

    def encode(u: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        h = u.flatten(1)
        return mu_layer(h), logvar_layer(h)

    z = torch.randn(7, 4, dtype=torch.float64)
    out = prior.log_prob(z, encode)
    with torch.no_grad():
        for i in range(7):  # log (1/K) sum_k N(z_i; mu(u_k), e^logvar(u_k)), one component at a time
            logs = []
            for k in range(5):
                m, lv = encode(prior.pseudo_inputs[k : k + 1])
                logs.append(float(diagonal(m[0], lv[0]).log_prob(z[i])))
            top = max(logs)
            expected = top + math.log(np.mean([math.exp(v - top) for v in logs]))
            assert float(out[i]) == pytest.approx(expected, rel=1e-12)
    out.sum().backward()
    assert prior.pseudo_inputs.grad is not None and mu_layer.weight.grad is not None
    with pytest.raises(ValueError, match=r"^num_pseudo_inputs must be >= 1"):
        VampPrior(0, [3])


def test_algorithm_4_as_printed_is_q_minus_p_and_pushes_the_posterior_away_from_the_prior():
    """``formula="thesis_alg4"``: Safir 2022's Algorithm 4 as printed, ``Q - P`` with ``P`` the posterior's quadratic
    term, by a loop over the draws; minimised, it moves ``mu`` away from the prior where the KL moves it towards."""
    mu, logvar = posterior(n=3, d=2, seed=4)
    g = torch.Generator().manual_seed(5)
    eps = torch.randn((1, 3, 2), generator=g, dtype=torch.float64)
    unit = lambda z: gaussian_log_density(z, torch.zeros_like(z), torch.zeros_like(z))  # noqa: E731
    got = kl_monte_carlo(mu, logvar, unit, samples=1, generator=torch.Generator().manual_seed(5), formula="thesis_alg4")
    for row in range(3):
        z = mu[row] + torch.exp(0.5 * logvar[row]) * eps[0, row]
        q = float(unit(z[None])[0])
        p = sum(-0.5 * float((z[j] - mu[row, j]) ** 2 / torch.exp(logvar[row, j])) for j in range(2))
        assert float(got[row]) == pytest.approx(q - p, rel=1e-12)
    far = torch.full((1, 2), 2.0, dtype=torch.float64, requires_grad=True)
    spread = torch.zeros((1, 2), dtype=torch.float64)
    for formula, way in (("exact", 1.0), ("thesis_alg4", -1.0)):
        far.grad = None
        kl = kl_monte_carlo(
            far.expand(20_000, 2),
            spread.expand(20_000, 2),
            unit,
            samples=1,
            generator=torch.Generator().manual_seed(0),
            formula=formula,
        ).mean()
        kl.backward()
        assert torch.all(torch.sign(far.grad) == way), (formula, far.grad)  # descent: towards 0 / away from it
    with pytest.raises(ValueError, match="formula must be one of"):
        kl_monte_carlo(mu, logvar, unit, samples=1, formula="alg4")
