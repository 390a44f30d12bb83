"""DSCL's loss, forward + backward: closed form (Cholesky; SVD fallback) vs autograd through pinv at n = 1,260,
d = 100, k = 63 and d = k = 512: same gradients. Goal: >= 10x at the first shape."""

from __future__ import annotations

import torch

from .common import best_of


def measure() -> dict:
    """DSCL's loss (Law et al. 2017, Eq. 10), forward + backward, float32 on the CPU: our closed form (Cholesky of F^T
    F; Eq. 9's gradient) and its SVD fallback (forced) against autograd through ``torch.linalg.pinv`` of the same
    trace, at the paper's batch n = 1,260 with d = 100, k = 63 and with d = k = 512 (SOP). Same gradients (relative
    difference reported); goal >= 10x at the first shape."""
    from unittest import mock

    from clusterable.heads.dscl import spectral_trace

    def closed(f: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        x = f.clone().requires_grad_()
        spectral_trace(x, labels)[0].backward()
        return x.grad

    def svd(f: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        failed = lambda a: (a, torch.ones((), dtype=torch.int32))  # noqa: E731 - Cholesky "fails": the SVD path
        with mock.patch("torch.linalg.cholesky_ex", failed):
            return closed(f, labels)

    def through_pinv(f: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        x = f.clone().requires_grad_()
        y = torch.nn.functional.one_hot(labels).to(f.dtype)  # (n, k)
        means = (y / y.sum(0)).T @ x  # Y^+ F (k, d)
        (means * (torch.linalg.pinv(x) @ y).T).sum().backward()  # tr(Y^+ F F^+ Y), autograd through pinv
        return x.grad

    out = {}
    for n, d, k in ((1260, 100, 63), (1260, 512, 512)):
        g = torch.Generator().manual_seed(0)
        f, labels = torch.randn(n, d, generator=g), torch.arange(n) % k
        reference = through_pinv(f, labels)
        times = {
            name: best_of(lambda fn=fn, f=f, labels=labels: fn(f, labels), 5)
            for name, fn in (("closed", closed), ("svd", svd), ("pinv", through_pinv))
        }
        tag = f"n{n}_d{d}_k{k}"
        out[f"dscl_{tag}_closed_ms"] = 1000 * times["closed"]
        out[f"dscl_{tag}_pinv_autograd_over_closed"] = times["pinv"] / times["closed"]
        out[f"dscl_{tag}_pinv_autograd_over_svd"] = times["pinv"] / times["svd"]
        for name, fn in (("closed", closed), ("svd", svd)):
            diff = (fn(f, labels) - reference).norm() / reference.norm()
            out[f"dscl_{tag}_{name}_grad_rel_diff"] = float(diff)
    return out
