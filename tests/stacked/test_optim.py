"""The stacked optimizer is M of torch's optimizers, one per member, each with its own lr and weight decay."""

from __future__ import annotations

import pytest
import torch

from clusterable.stacked.errors import NotStackable
from clusterable.stacked.optim import Group, StackedOptimizer, member_options

CASES = [
    ("adam", torch.optim.Adam, {}),
    ("adam", torch.optim.Adam, {"betas": (0.8, 0.99), "eps": 1e-6}),
    ("adamw", torch.optim.AdamW, {}),
    ("sgd", torch.optim.SGD, {"momentum": 0.9}),
    ("sgd", torch.optim.SGD, {"momentum": 0.9, "nesterov": True}),
    ("sgd", torch.optim.SGD, {"momentum": 0.5, "dampening": 0.1}),
]


def _grad(p: torch.Tensor, step: int) -> torch.Tensor:
    """A made-up gradient that depends on the parameter (so the trajectories differ) and on the step."""
    return torch.sin(3 * p + step) + 0.1 * p**2


@pytest.mark.parametrize(("kind", "torch_cls", "options"), CASES)
def test_each_member_follows_its_own_torch_optimizer(kind: str, torch_cls: type, options: dict) -> None:
    torch.manual_seed(0)
    start = torch.randn(3, 4, 5, dtype=torch.float64)
    lrs, decays = [0.1, 0.01, 0.003], [0.0, 0.1, 0.01]
    stacked = start.clone().requires_grad_(True)
    lr_t, wd_t = (torch.tensor(v, dtype=torch.float64) for v in (lrs, decays))
    opt = StackedOptimizer(kind, [Group([stacked], lr_t, wd_t)], options)
    singles = [start[m].clone().requires_grad_(True) for m in range(3)]
    torch_opts = [
        torch_cls([singles[m]], lr=lrs[m], weight_decay=decays[m], foreach=False, **options) for m in range(3)
    ]
    for step in range(20):
        stacked.grad = _grad(stacked.detach(), step)
        opt.step()
        for p, o in zip(singles, torch_opts, strict=True):
            p.grad = _grad(p.detach(), step)
            o.step()
    for m in range(3):
        torch.testing.assert_close(stacked[m].detach(), singles[m].detach(), rtol=1e-12, atol=1e-14)


def test_a_member_that_is_not_alive_stays_put_and_moves_nobody() -> None:
    torch.manual_seed(1)
    start = torch.randn(3, 6, dtype=torch.float64)
    lr, wd = torch.full((3,), 0.05, dtype=torch.float64), torch.zeros(3, dtype=torch.float64)
    a = start.clone().requires_grad_(True)
    b = start.clone().requires_grad_(True)
    opt_a = StackedOptimizer("adam", [Group([a], lr, wd)], {})
    opt_b = StackedOptimizer("adam", [Group([b], lr, wd)], {})
    dead = torch.tensor([1])
    for step in range(5):
        grad = _grad(a.detach(), step)
        a.grad = grad
        poisoned = grad.clone()
        poisoned[1] = float("nan")  # member 1 diverged: NaN gradients
        b.grad = poisoned
        opt_a.step(dead)
        opt_b.step(dead)
    assert torch.equal(b[1].detach(), start[1])  # the dead member did not move
    assert torch.equal(a[0].detach(), b[0].detach()) and torch.equal(a[2].detach(), b[2].detach())
    assert torch.isfinite(b.detach()).all()


def test_member_options_take_lr_and_weight_decay_per_member() -> None:
    configs = [
        {"_target_": "torch.optim.Adam", "_partial_": True, "lr": 0.1, "fused": True},
        {"_target_": "torch.optim.Adam", "_partial_": True, "lr": 0.01, "weight_decay": 0.1, "fused": True},
    ]
    kind, shared, lrs, decays = member_options(configs)
    assert (kind, shared, lrs, decays) == ("adam", {}, [0.1, 0.01], [0.0, 0.1])


@pytest.mark.parametrize(
    ("configs", "message"),
    [
        (
            [{"_target_": "torch.optim.RMSprop", "lr": 0.1}],
            "optimizer torch.optim.RMSprop has no stacked version",
        ),
        (
            [{"_target_": "torch.optim.Adam", "amsgrad": True}],
            "optimizer.amsgrad=true has no stacked version",
        ),
        (
            [
                {"_target_": "torch.optim.SGD", "momentum": 0.9},
                {"_target_": "torch.optim.SGD", "momentum": 0.5},
            ],
            "the members' optimizers differ in more than lr and weight_decay",
        ),
    ],
)
def test_what_cannot_stack_is_refused_in_one_line(configs: list, message: str) -> None:
    with pytest.raises(NotStackable, match=message):
        kind, shared, _, _ = member_options(configs)
        StackedOptimizer(kind, [], shared)
