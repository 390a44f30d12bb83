"""The stacked optimizer is M of torch's optimizers, one per member, each with its own lr and weight decay."""

from __future__ import annotations

import pytest
import torch

from clusterable.stacked.errors import NotStackable
from clusterable.stacked.optim import Group, StackedOptimizer, from_optimizers

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
    singles = [start[m].clone().requires_grad_(True) for m in range(3)]
    torch_opts = [
        torch_cls([singles[m]], lr=lrs[m], weight_decay=decays[m], foreach=False, **options) for m in range(3)
    ]
    # The stacked optimizer is read off the members' own optimizers, as a stack reads its runs' optimizers.
    opt = from_optimizers({"w": stacked}, [{"w": p} for p in singles], torch_opts)
    assert opt.kind == kind
    for step in range(20):
        stacked.grad = _grad(stacked.detach(), step)
        opt.step()
        for p, o in zip(singles, torch_opts, strict=True):
            p.grad = _grad(p.detach(), step)
            o.step()
    for m in range(3):
        torch.testing.assert_close(stacked[m].detach(), singles[m].detach(), rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("compiled", [False, True])
@pytest.mark.parametrize(("kind", "torch_cls", "options"), CASES)
def test_the_update_by_name_with_a_tensor_count_is_the_step(
    kind: str, torch_cls: type, options: dict, compiled: bool
) -> None:
    """``advance`` + ``update`` (what a compiled step traces: gradients by name, the step count a tensor) move the
    members as ``step`` does, eager or under ``torch.compile``, a dead member included; float64 to rounding."""
    torch.manual_seed(0)
    start = torch.randn(3, 4, 5, dtype=torch.float64)
    lrs, decays = [0.1, 0.01, 0.003], [0.0, 0.1, 0.01]
    a, b = start.clone().requires_grad_(True), start.clone().requires_grad_(True)
    singles = [start[m].clone().requires_grad_(True) for m in range(3)]

    def built(stacked: torch.Tensor):
        torch_opts = [torch_cls([singles[m]], lr=lrs[m], weight_decay=decays[m], **options) for m in range(3)]
        return from_optimizers({"w": stacked}, [{"w": p} for p in singles], torch_opts)

    by_step, by_update = built(a), built(b)
    update = torch.compile(by_update.update) if compiled else by_update.update
    for step in range(12):
        dead = torch.tensor([1]) if step >= 8 else None  # member 1 stops after 8 steps
        a.grad = _grad(a.detach(), step)
        by_step.step(dead)
        by_update.freeze(dead)
        update({"w": _grad(b.detach(), step)}, by_update.advance())
        by_update.restore(dead)
    assert by_update.steps == by_step.steps == 12
    torch.testing.assert_close(b.detach(), a.detach(), rtol=1e-12, atol=1e-14)


def test_a_member_that_is_not_alive_stays_put_and_moves_nobody() -> None:
    torch.manual_seed(1)
    start = torch.randn(3, 6, dtype=torch.float64)
    lr, wd = torch.full((3,), 0.05, dtype=torch.float64), torch.zeros(3, dtype=torch.float64)
    a = start.clone().requires_grad_(True)
    b = start.clone().requires_grad_(True)
    adam = {"betas": (0.9, 0.999), "eps": 1e-8}
    opt_a = StackedOptimizer("adam", [Group([a], lr, wd)], adam)
    opt_b = StackedOptimizer("adam", [Group([b], lr, wd)], adam)
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


def _built(cls: type, options: list[dict], groups: int = 1) -> tuple[dict, list[dict], list]:
    """Stacked parameters ``a`` (and ``b``) with each member's own tensors and optimizer ``cls(**options[m])``."""
    names = ["a", "b"][:groups] if groups > 1 else ["a"]
    stacked = {n: torch.zeros(len(options), 3, requires_grad=True) for n in names}
    members = [{n: torch.zeros(3, requires_grad=True) for n in names} for _ in options]
    optimizers = [cls([{"params": [own[n]]} for n in names], **o) for own, o in zip(members, options, strict=True)]
    return stacked, members, optimizers


def test_lr_and_weight_decay_are_read_per_member_from_the_built_optimizers() -> None:
    stacked, members, optimizers = _built(
        torch.optim.Adam, [{"lr": 0.1, "fused": False}, {"lr": 0.01, "weight_decay": 0.1, "foreach": False}]
    )
    opt = from_optimizers(stacked, members, optimizers)
    assert (opt.kind, opt.options) == (
        "adam",
        {"betas": (0.9, 0.999), "eps": 1e-8, "amsgrad": False, "maximize": False},
    )
    assert opt.groups[0].lr.tolist() == pytest.approx([0.1, 0.01])
    assert opt.groups[0].weight_decay.tolist() == pytest.approx([0.0, 0.1])


def test_a_group_of_its_own_keeps_its_lr_per_member() -> None:
    """A head at its own learning rate (a second parameter group): the stack keeps the group and its lr."""
    stacked = {n: torch.zeros(2, 3, requires_grad=True) for n in "ab"}
    members = [{n: torch.zeros(3, requires_grad=True) for n in "ab"} for _ in range(2)]
    optimizers = [
        torch.optim.SGD([{"params": [own["a"]]}, {"params": [own["b"]], "lr": 0.5 * (i + 1)}], lr=0.1)
        for i, own in enumerate(members)
    ]
    opt = from_optimizers(stacked, members, optimizers)
    assert [g.lr.tolist() for g in opt.groups] == [pytest.approx([0.1, 0.1]), pytest.approx([0.5, 1.0])]
    assert [len(g.params) for g in opt.groups] == [1, 1] and opt.groups[1].params[0] is stacked["b"]


@pytest.mark.parametrize(
    ("cls", "options", "message"),
    [
        (torch.optim.RMSprop, [{"lr": 0.1}], "optimizer torch.optim.rmsprop.RMSprop has no stacked version"),
        (torch.optim.Adam, [{"amsgrad": True}], "optimizer.amsgrad=true has no stacked version"),
        (
            torch.optim.SGD,
            [{"lr": 0.1, "momentum": 0.9}, {"lr": 0.1, "momentum": 0.5}],
            "the members' optimizers differ in more than lr and weight_decay",
        ),
    ],
)
def test_what_cannot_stack_is_refused_in_one_line(cls: type, options: list, message: str) -> None:
    with pytest.raises(NotStackable, match=message):
        from_optimizers(*_built(cls, options))


def test_members_that_group_their_parameters_differently_are_refused() -> None:
    stacked = {n: torch.zeros(2, 3, requires_grad=True) for n in "ab"}
    members = [{n: torch.zeros(3, requires_grad=True) for n in "ab"} for _ in range(2)]
    optimizers = [
        torch.optim.SGD([members[0]["a"], members[0]["b"]], lr=0.1),
        torch.optim.SGD([{"params": [members[1]["a"]]}, {"params": [members[1]["b"]]}], lr=0.1),
    ]
    with pytest.raises(NotStackable, match="group b differently"):
        from_optimizers(stacked, members, optimizers)
