"""Adam, AdamW and SGD over stacked parameters (M, ...): M optimizers in one, each member's learning rate and
weight decay its own.

All three are elementwise, so one update over a stacked tensor is exactly M updates of the members' own tensors.
The hyperparameters a grid sweeps are tensors with a member axis (``lr`` and ``weight_decay``: (M,), broadcast as
(M, 1, ...)), never Python floats. The update follows torch's single-tensor implementations op for op
(``torch/optim/adam.py`` ``_single_tensor_adam``, ``sgd.py`` ``_single_tensor_sgd``), so in float64 a member agrees
with its single run to rounding. A dead member (one that diverged) keeps its parameters as they were when it
stopped (its moments, in its own slice, no longer matter): no update reads another member's values, and nothing
is reduced across members (no global norm, no ``isfinite`` on a sum), so a member that diverged cannot move the
others.

Two entries share the update's code: ``step`` (eager: the gradients in ``p.grad``, the step count a Python int, as
torch's) and ``advance`` + ``update`` (a compiled step's: the gradients by name, the step count a 0-d tensor, so
that one traced graph serves every step; ``stacked.steps``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import Tensor

from clusterable.stacked.errors import NotStackable

# The options of each kind the stacked update implements (torch's defaults fill them in the built optimizer).
OPTIONS = {
    "adam": ("betas", "eps", "amsgrad", "maximize"),
    "adamw": ("betas", "eps", "amsgrad", "maximize"),
    "sgd": ("momentum", "dampening", "nesterov", "maximize"),
}
# Options that change how torch computes an update, not what: every member of a stack takes the stacked update.
IMPLEMENTATION_OPTIONS = ("fused", "foreach", "capturable", "differentiable", "decoupled_weight_decay")


@dataclass
class Group:
    """Stacked parameters that share their per-member ``lr`` (M,) and ``weight_decay`` (M,); what the update needs
    of them on the host is read once, here (no step waits for the device)."""

    params: list[Tensor]
    lr: Tensor
    weight_decay: Tensor
    # The params' names in the stack (``from_optimizers`` sets them): a compiled step's gradients come by name.
    names: list[str] = field(default_factory=list)
    state: list[dict[str, Tensor]] = field(init=False)
    uniform_lr: bool = field(init=False)  # one lr for all: the update takes it as a Python number, as torch's
    first_lr: float = field(init=False)
    decays: bool = field(init=False)  # some member has weight decay

    def __post_init__(self) -> None:
        self.state = [{} for _ in self.params]
        self.uniform_lr = bool((self.lr == self.lr[0]).all())
        self.first_lr = float(self.lr[0])
        self.decays = bool(self.weight_decay.any())


class StackedOptimizer:
    """``kind`` (adam | adamw | sgd) over groups of stacked parameters; ``step(dead)`` moves all but the dead members.

    Args:
        kind: ``adam`` (L2 weight decay added to the gradient), ``adamw`` (decoupled decay) or ``sgd``.
        groups: the parameter groups, each with per-member ``lr`` and ``weight_decay`` of shape (M,).
        options: the members' shared options: ``betas``, ``eps`` (Adam/AdamW); ``momentum``, ``dampening``,
            ``nesterov`` (SGD). ``amsgrad`` and ``maximize`` have no stacked version.
    """

    def __init__(self, kind: str, groups: Sequence[Group], options: Mapping[str, Any]):
        if kind not in OPTIONS:
            raise NotStackable(f"optimizer {kind!r} has no stacked version (adam, adamw or sgd)")
        missing = sorted(set(OPTIONS[kind]) - {"amsgrad", "maximize"} - set(options))
        if missing:
            raise ValueError(f"the stacked {kind} needs {', '.join(missing)}")
        opts = dict(options)
        for flag in ("amsgrad", "maximize"):
            if opts.get(flag):
                raise NotStackable(f"optimizer.{flag}=true has no stacked version")
        self.kind, self.groups, self.options = kind, list(groups), opts
        self.steps = 0
        self._count: Tensor | None = None  # the steps as a tensor, for a compiled update (``advance``)

    def reset(self) -> None:
        """Forget every step taken (moments, momentum buffers, the step count): as freshly built."""
        self.steps = 0
        for group in self.groups:
            group.state = [{} for _ in group.params]

    def zero_grad(self) -> None:
        for group in self.groups:
            for p in group.params:
                p.grad = None

    def step(self, dead: Tensor | None = None) -> None:
        """One update of every member from the gradients in ``p.grad``, in place; the members ``dead`` (their
        indices, long) stay where they are (``freeze`` / ``restore``). Nothing here waits for the device."""
        self.freeze(dead)
        self.steps += 1
        for group in self.groups:
            live = [(p, state) for p, state in zip(group.params, group.state, strict=True) if p.grad is not None]
            if live:
                self._update([p for p, _ in live], [p.grad for p, _ in live], [st for _, st in live], group, self.steps)
        self.restore(dead)

    def advance(self) -> Tensor:
        """Count a step for ``update`` (a compiled step's): the steps taken, this one included, as a 0-d float64
        tensor (bias corrections computed from it on the device: one compiled graph serves every step), and every
        state tensor made (a compiled update finds them all in place)."""
        self.steps += 1
        first = self.groups[0].params[0]
        if self._count is None or self._count.device != first.device:
            self._count = torch.zeros((), dtype=torch.float64, device=first.device)
        self._count.fill_(self.steps)
        for group in self.groups:
            for p, state in zip(group.params, group.state, strict=True):
                self._init_state(p, state)
        return self._count

    def update(self, grads: Mapping[str, Tensor], count: Tensor) -> None:
        """One update of every member from ``grads`` (name -> (M, ...), the names of ``Group.names``), ``count``
        from ``advance``: the whole update as tensor operations, traceable by ``torch.compile``."""
        for group in self.groups:
            if len(group.names) != len(group.params):
                raise ValueError("update() takes gradients by name: build the groups with their names")
            self._update(group.params, [grads[n] for n in group.names], group.state, group, count)

    def freeze(self, dead: Tensor | None) -> None:
        """Before an update: keep the ``dead`` members' rows (by identity of ``dead``: pass the same tensor until
        it changes, so that its rows are copied once)."""
        if dead is None:
            return
        for group in self.groups:
            for p, state in zip(group.params, group.state, strict=True):
                if state.get("frozen_rows") is not dead:
                    state["frozen_rows"], state["frozen"] = dead, p.detach()[dead].clone()

    @torch.no_grad()
    def restore(self, dead: Tensor | None) -> None:
        """After an update: the ``dead`` members get back the parameters they had when they stopped. Every member
        was updated (elementwise: no member reads another's values), so a diverged member's NaN stays in its own
        slice, and it does not move, at the cost of copying its rows only."""
        if dead is None:
            return
        for group in self.groups:
            for p, state in zip(group.params, group.state, strict=True):
                p.index_copy_(0, dead, state["frozen"])

    def _init_state(self, p: Tensor, state: dict) -> None:
        if self.kind != "sgd":
            if "exp_avg" not in state:
                state["exp_avg"], state["exp_avg_sq"] = torch.zeros_like(p), torch.zeros_like(p)
        elif self.options["momentum"] != 0 and "momentum_buffer" not in state:
            state["momentum_buffer"] = torch.zeros_like(p)

    @torch.no_grad()
    def _update(
        self, params: list[Tensor], grads: list[Tensor], states: list[dict], group: Group, count: int | Tensor
    ) -> None:
        if self.kind == "sgd":
            for p, grad, state in zip(params, grads, states, strict=True):
                shape = (-1,) + (1,) * (p.dim() - 1)
                self._sgd(p, grad, state, group, group.lr.view(shape), group.weight_decay.view(shape), count)
        else:
            self._adam(params, grads, states, group, count)

    def _adam(
        self, params: list[Tensor], grads: list[Tensor], states: list[dict], group: Group, count: int | Tensor
    ) -> None:
        """torch's ``_single_tensor_adam`` (AdamW: ``decoupled_weight_decay``), op for op, on all the group's
        tensors at once (torch's ``_foreach`` ops: one dispatch an op for the group, not one a tensor; bitwise the
        same update: a CSRL AE3 stack's went from 0.10 to 0.075 ms at M = 15). The per-member lr and weight decay
        (M,) are viewed as (M, 1, ...) for each tensor. ``count``: the steps taken, a Python int (the bias
        corrections Python floats, as torch's) or a 0-d tensor (``advance``: a compiled step's)."""
        beta1, beta2 = self.options["betas"]
        shapes = [(-1,) + (1,) * (p.dim() - 1) for p in params]
        if group.decays:
            decays = [group.weight_decay.view(shape) for shape in shapes]
            if self.kind == "adamw":
                torch._foreach_mul_(params, [1 - group.lr.view(sh) * d for sh, d in zip(shapes, decays, strict=True)])
            else:
                grads = torch._foreach_add(grads, torch._foreach_mul(params, decays))
        for p, state in zip(params, states, strict=True):
            self._init_state(p, state)
        exp_avgs = [state["exp_avg"] for state in states]
        exp_avg_sqs = [state["exp_avg_sq"] for state in states]
        torch._foreach_lerp_(exp_avgs, grads, 1 - beta1)
        torch._foreach_mul_(exp_avg_sqs, beta2)
        torch._foreach_addcmul_(exp_avg_sqs, grads, grads, value=1 - beta2)
        bias_correction1 = 1 - beta1**count
        bias_correction2_sqrt = (1 - beta2**count) ** 0.5
        denom = torch._foreach_sqrt(exp_avg_sqs)
        torch._foreach_div_(denom, bias_correction2_sqrt)
        torch._foreach_add_(denom, self.options["eps"])
        if group.uniform_lr and not isinstance(count, Tensor):  # a Python number, as torch's own step
            torch._foreach_addcdiv_(params, exp_avgs, denom, value=-group.first_lr / bias_correction1)
        else:
            update = torch._foreach_div(exp_avgs, denom)
            torch._foreach_mul_(update, [-group.lr.view(shape) / bias_correction1 for shape in shapes])
            torch._foreach_add_(params, update)

    def _sgd(
        self, p: Tensor, grad: Tensor, state: dict, group: Group, lr: Tensor, decay: Tensor, count: int | Tensor
    ) -> None:
        """torch's ``_single_tensor_sgd``, op for op; the momentum buffer starts as the first gradient."""
        momentum, dampening = self.options["momentum"], self.options["dampening"]
        if group.decays:
            grad = grad.add(p * decay)
        if momentum != 0:
            self._init_state(p, state)
            buf = state["momentum_buffer"]
            if isinstance(count, Tensor):  # a compiled step: the first step's branch as a select
                buf.copy_(torch.where(count == 1, grad, buf * momentum + grad * (1 - dampening)))
            elif count == 1:
                buf.copy_(grad)
            else:
                buf.mul_(momentum).add_(grad, alpha=1 - dampening)
            grad = grad.add(buf, alpha=momentum) if self.options["nesterov"] else buf
        if group.uniform_lr:
            p.add_(grad, alpha=-group.first_lr)
        else:
            p.add_(grad * -lr)


def kind_of(optimizer: torch.optim.Optimizer) -> str:
    """``adam``, ``adamw`` or ``sgd`` for a built torch optimizer; ``NotStackable`` for any other."""
    if isinstance(optimizer, torch.optim.AdamW) or (
        isinstance(optimizer, torch.optim.Adam) and optimizer.defaults.get("decoupled_weight_decay")
    ):
        return "adamw"  # torch's AdamW is Adam with decoupled weight decay
    if isinstance(optimizer, torch.optim.Adam):
        return "adam"
    if isinstance(optimizer, torch.optim.SGD):
        return "sgd"
    name = f"{type(optimizer).__module__}.{type(optimizer).__qualname__}"
    raise NotStackable(f"optimizer {name} has no stacked version (torch.optim.Adam, AdamW or SGD)")


def from_optimizers(
    params: Mapping[str, Tensor],
    members: Sequence[Mapping[str, Tensor]],
    optimizers: Sequence[torch.optim.Optimizer],
) -> StackedOptimizer:
    """The stacked optimizer of the optimizers the members' runs built (``RepresentationModule.build_optimizer``):
    its kind, options and parameter groups taken from them, each group's ``lr`` and ``weight_decay`` one value per
    member (M,).

    Args:
        params: name -> the stacked parameter (M, ...).
        members: per member, name -> its own parameter under the same name (the tensors its optimizer holds).
        optimizers: per member, its built optimizer.

    Refused (``NotStackable``, one line): an optimizer with no stacked version, members whose optimizers differ in
    anything but ``lr`` and ``weight_decay`` or group their parameters differently, and a group option the update
    does not implement.
    """
    kinds = {kind_of(o) for o in optimizers}
    if len(kinds) != 1:
        raise NotStackable("the members use different optimizers")
    kind = kinds.pop()
    shared = _shared_options(kind, optimizers)
    group_of = [{id(p): g for g, group in enumerate(o.param_groups) for p in group["params"]} for o in optimizers]
    by_group: dict[int, list[str]] = {}
    for name in params:
        indices = {own.get(id(member[name])) for own, member in zip(group_of, members, strict=True)}
        if len(indices) != 1 or None in indices:
            raise NotStackable(f"the members' optimizers group {name} differently")
        by_group.setdefault(indices.pop(), []).append(name)
    first = next(iter(params.values()))

    def per_member(key: str, g: int) -> Tensor:
        return torch.tensor([float(o.param_groups[g][key]) for o in optimizers], dtype=first.dtype, device=first.device)

    groups = [
        Group([params[n] for n in names], per_member("lr", g), per_member("weight_decay", g), names)
        for g, names in sorted(by_group.items())
    ]
    return StackedOptimizer(kind, groups, shared)


def _shared_options(kind: str, optimizers: Sequence[torch.optim.Optimizer]) -> dict[str, Any]:
    """The options every group of every member's optimizer shares (all but ``lr`` and ``weight_decay``)."""
    shared: dict[str, Any] | None = None
    for optimizer in optimizers:
        for group in optimizer.param_groups:
            options = {
                k: tuple(v) if isinstance(v, list | tuple) else v
                for k, v in group.items()
                if k not in IMPLEMENTATION_OPTIONS + ("params", "lr", "weight_decay", "initial_lr")
            }
            unknown = sorted(set(options) - set(OPTIONS[kind]))
            if unknown:
                raise NotStackable(f"optimizer.{unknown[0]} has no stacked version")
            if shared is not None and options != shared:
                raise NotStackable("the members' optimizers differ in more than lr and weight_decay")
            shared = options
    return shared or {}
