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
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import Tensor

from clusterable.stacked.errors import NotStackable

# The optimizers that have a stacked version, by their config's ``_target_``.
KINDS = {"torch.optim.Adam": "adam", "torch.optim.AdamW": "adamw", "torch.optim.SGD": "sgd"}
# Options that change how torch computes an update, not what: every member of a stack takes the stacked update.
IMPLEMENTATION_OPTIONS = ("fused", "foreach", "capturable", "differentiable", "_target_", "_partial_")
SHARED_DEFAULTS = {
    "adam": {"betas": (0.9, 0.999), "eps": 1e-8, "amsgrad": False, "maximize": False},
    "adamw": {"betas": (0.9, 0.999), "eps": 1e-8, "amsgrad": False, "maximize": False},
    "sgd": {"momentum": 0.0, "dampening": 0.0, "nesterov": False, "maximize": False},
}
DEFAULT_WEIGHT_DECAY = {"adam": 0.0, "adamw": 0.01, "sgd": 0.0}


@dataclass
class Group:
    """Stacked parameters that share their per-member ``lr`` (M,) and ``weight_decay`` (M,); what the update needs
    of them on the host is read once, here (no step waits for the device)."""

    params: list[Tensor]
    lr: Tensor
    weight_decay: Tensor
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
        if kind not in SHARED_DEFAULTS:
            raise NotStackable(f"optimizer {kind!r} has no stacked version (adam, adamw or sgd)")
        opts = {**SHARED_DEFAULTS[kind], **options}
        for flag in ("amsgrad", "maximize"):
            if opts.get(flag):
                raise NotStackable(f"optimizer.{flag}=true has no stacked version")
        self.kind, self.groups, self.options = kind, list(groups), opts
        self.steps = 0

    def zero_grad(self) -> None:
        for group in self.groups:
            for p in group.params:
                p.grad = None

    @torch.no_grad()
    def step(self, dead: Tensor | None = None) -> None:
        """One update of every member, in place; the members ``dead`` (their indices, long) stay where they are.

        Every member is updated (elementwise: no member reads another's values), then the dead ones get back the
        parameters they had when they stopped: a diverged member's NaN stays in its own slice and it does not
        move, at the cost of copying its rows only. Nothing here waits for the device: pass the same ``dead``
        tensor until it changes (its rows are kept by identity).
        """
        self.steps += 1
        for group in self.groups:
            for p, state in zip(group.params, group.state, strict=True):
                if dead is not None and state.get("frozen_rows") is not dead:
                    state["frozen_rows"], state["frozen"] = dead, p.detach()[dead].clone()
                if p.grad is None:
                    continue
                shape = (-1,) + (1,) * (p.dim() - 1)
                lr, decay = group.lr.view(shape), group.weight_decay.view(shape)
                if self.kind == "sgd":
                    self._sgd(p, p.grad, state, group, lr, decay)
                else:
                    self._adam(p, p.grad, state, group, lr, decay)
                if dead is not None:
                    p.index_copy_(0, dead, state["frozen"])

    def _adam(self, p: Tensor, grad: Tensor, state: dict, group: Group, lr: Tensor, decay: Tensor) -> None:
        """torch's ``_single_tensor_adam`` (AdamW: ``decoupled_weight_decay``), op for op."""
        beta1, beta2 = self.options["betas"]
        if group.decays:
            if self.kind == "adamw":
                p.mul_(1 - lr * decay)
            else:
                grad = grad.add(p * decay)
        if "exp_avg" not in state:
            state["exp_avg"], state["exp_avg_sq"] = torch.zeros_like(p), torch.zeros_like(p)
        exp_avg, exp_avg_sq = state["exp_avg"], state["exp_avg_sq"]
        exp_avg.lerp_(grad, 1 - beta1)
        exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
        bias_correction1 = 1 - beta1**self.steps
        bias_correction2_sqrt = (1 - beta2**self.steps) ** 0.5
        denom = (exp_avg_sq.sqrt() / bias_correction2_sqrt).add_(self.options["eps"])
        if group.uniform_lr:  # a Python number, as torch's own step
            p.addcdiv_(exp_avg, denom, value=-group.first_lr / bias_correction1)
        else:
            p.add_(exp_avg.div(denom).mul_(-lr / bias_correction1))

    def _sgd(self, p: Tensor, grad: Tensor, state: dict, group: Group, lr: Tensor, decay: Tensor) -> None:
        """torch's ``_single_tensor_sgd``, op for op."""
        momentum, dampening = self.options["momentum"], self.options["dampening"]
        if group.decays:
            grad = grad.add(p * decay)
        if momentum != 0:
            buf = state.get("momentum_buffer")
            if buf is None:
                buf = state["momentum_buffer"] = grad.detach().clone()
            else:
                buf.mul_(momentum).add_(grad, alpha=1 - dampening)
            grad = grad.add(buf, alpha=momentum) if self.options["nesterov"] else buf
        if group.uniform_lr:
            p.add_(grad, alpha=-group.first_lr)
        else:
            p.add_(grad * -lr)


def member_options(
    configs: Sequence[Mapping[str, Any]],
) -> tuple[str, dict[str, Any], list[float], list[float]]:
    """From the members' resolved ``optimizer`` nodes: the kind, the options they share, and each member's lr and
    weight decay. Refused (``NotStackable``, one line) for an optimizer with no stacked version or members that
    differ in anything but ``lr`` and ``weight_decay``."""
    target = str(configs[0].get("_target_"))
    kind = KINDS.get(target)
    if kind is None:
        raise NotStackable(f"optimizer {target} has no stacked version ({', '.join(KINDS)})")
    shared: dict[str, Any] = {}
    for cfg in configs:
        if str(cfg.get("_target_")) != target:
            raise NotStackable("the members use different optimizers")
        options = {
            k: tuple(v) if isinstance(v, list) else v
            for k, v in cfg.items()
            if k not in IMPLEMENTATION_OPTIONS + ("lr", "weight_decay")
        }
        unknown = sorted(set(options) - set(SHARED_DEFAULTS[kind]))
        if unknown:
            raise NotStackable(f"optimizer.{unknown[0]} has no stacked version")
        if shared and options != shared:
            raise NotStackable("the members' optimizers differ in more than lr and weight_decay")
        shared = options
    lrs = [float(cfg.get("lr", 1e-3 if kind != "sgd" else 0.0)) for cfg in configs]
    decays = [float(cfg.get("weight_decay", DEFAULT_WEIGHT_DECAY[kind])) for cfg in configs]
    return kind, shared, lrs, decays
