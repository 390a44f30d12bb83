"""Never slower than one by one: before a group trains, its stacked step is timed against one member's single step.

A stacked step is not always cheaper than its members' single steps: under ``vmap`` a convolution becomes a grouped
one, which a CPU runs slower than M separate ones (``scripts/bench.py stacked_steps``: a CNN stack of 20 members
takes about 0.55x the single steps' speed). So before training, the group's step is timed both ways, on the first
rows of the training split, and the whole training projected each way:

    stacked:    steps x t_stacked
    one by one: M x (steps x (t_single + STEP_OVERHEAD_S) + RUN_OVERHEAD_S)

where ``steps`` is a member's optimizer steps over all its epochs, ``t_single`` a plain PyTorch step of one member,
``STEP_OVERHEAD_S`` what Lightning's loop adds to each step and ``RUN_OVERHEAD_S`` what a single run costs beyond
its steps and its evaluation (its parts, Trainer, callbacks, checkpoint and record). The group stacks unless one
by one is projected faster by more than ``TOLERANCE_S`` (a gain within the timings' noise is not worth giving up a
stack for); otherwise its members run one by one, in the same process, each in its own run directory. Both
timings are the best of a few after a warm-up; everything the steps touched (parameters, buffers, the optimizer's
state, the random number generator) is restored, so the probe leaves no trace in the members' training.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from clusterable.contracts import BatchError
from clusterable.stacked.errors import NotStackable

# What a single run costs beyond its plain optimizer steps and its evaluation, measured on this repository's
# 2-core CPU under load (scripts/bench.py --only run_overhead: 0.06 s a run in process, 0.7 ms a step on a tiny
# model). Rounded up for the run (Hydra's job files under a launcher), kept for the step.
RUN_OVERHEAD_S = 0.1
STEP_OVERHEAD_S = 0.0007
TOLERANCE_S = 2.0
REPEATS = 3


class SlowerStacked(NotStackable):
    """The group's stacked training is projected slower than its members' one by one: they run one by one."""


@dataclass
class StepTimes:
    """One stacked step of ``members`` members against one member's single step, in seconds, and the optimizer
    steps each member takes over its whole training."""

    stacked_s: float
    single_s: float
    members: int
    steps: int

    @property
    def stacked_total_s(self) -> float:
        return self.stacked_s * self.steps

    @property
    def one_by_one_total_s(self) -> float:
        return self.members * ((self.single_s + STEP_OVERHEAD_S) * self.steps + RUN_OVERHEAD_S)

    @property
    def stacks(self) -> bool:
        return self.stacked_total_s <= self.one_by_one_total_s + TOLERANCE_S

    def line(self) -> str:
        """One line with both timings and both projections."""
        return (f"a step of {self.members} stacked members takes {self.stacked_s * 1e3:.2f} ms against "
                f"{self.members} x {self.single_s * 1e3:.2f} ms one by one (+{STEP_OVERHEAD_S * 1e3:.1f} ms "
                f"Lightning's loop): {self.steps} steps project to "
                f"{self.stacked_total_s:.0f} s stacked, {self.one_by_one_total_s:.0f} s one by one")  # fmt: skip

    def as_record(self) -> dict[str, float | int]:
        return {"stacked_step_ms": self.stacked_s * 1e3, "single_step_ms": self.single_s * 1e3,
                "steps": self.steps, "projected_stacked_s": self.stacked_total_s,
                "projected_one_by_one_s": self.one_by_one_total_s}  # fmt: skip


def check(times: StepTimes | None) -> None:
    """``SlowerStacked`` (its line names both timings) when stacking is projected slower than one by one."""
    if times is not None and not times.stacks:
        raise SlowerStacked(f"stacking is slower here: {times.line()}")


def time_steps(
    stack: Any, optimizer: Any, train: Any, module: Any, rows: int, steps: int
) -> StepTimes | None:
    """Time one stacked step (``stack.losses``, the summed loss's backward, ``optimizer.step``) and one single
    step of the first member's own module with its own optimizer (``loss_parts``, backward, step) on the first
    ``rows`` rows of ``train`` (a ``fit.StackedSplit``); None where the head refuses that batch (``BatchError``).
    Everything the steps change is restored.

    Args:
        stack: the ``StackedMembers``; ``optimizer``: its ``StackedOptimizer``; ``module``: member 0's module.
        rows: a step's rows (the batch size; 1 for per-sample steps); steps: a member's steps in all.
    """
    index = torch.arange(rows, device=stack.device).expand(stack.size, rows)
    batch = train.batch(index)
    single_batch = {k: v[0] for k, v in batch.items()}  # member 0's rows
    own = module.build_optimizer()

    def stacked_step() -> None:
        loss = stack.losses(batch, epoch=0)["loss"]
        optimizer.zero_grad()
        loss.sum().backward()
        optimizer.step()

    def single_step() -> None:
        module.train()
        loss = module.loss_parts(single_batch, epoch=0)["loss"]
        own.zero_grad(set_to_none=True)
        loss.backward()
        own.step()

    with _restored(stack, optimizer):
        try:
            stacked_s = _best_of(stacked_step, stack.device)
            single_s = _best_of(single_step, stack.device)
        except BatchError:
            return None
    return StepTimes(stacked_s, single_s, stack.size, steps)


def _best_of(step: Callable[[], None], device: torch.device) -> float:
    """The fastest of ``REPEATS`` timed calls after one warm-up call (first-call allocations, lazy set-up)."""
    step()
    best = math.inf
    for _ in range(REPEATS):
        _sync(device)
        start = time.perf_counter()
        step()
        _sync(device)
        best = min(best, time.perf_counter() - start)
    return best


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


class _restored:
    """Within: steps may change the stack's parameters and buffers, its optimizer, member 0's module and the RNG;
    on exit every one is as it was (member 0's module from its slice of the restored stack)."""

    def __init__(self, stack: Any, optimizer: Any):
        self.stack, self.optimizer = stack, optimizer

    def __enter__(self) -> None:
        stack = self.stack
        self.params = {k: v.detach().clone() for k, v in stack.params.items()}
        self.buffers = {k: v.clone() for k, v in stack.buffers.items() if k not in stack.shared_buffers}
        self.rng = torch.get_rng_state()
        self.cuda_rng = torch.cuda.get_rng_state_all() if torch.cuda.is_available() else None

    def __exit__(self, *exc: object) -> None:
        stack = self.stack
        with torch.no_grad():
            for key, value in self.params.items():
                stack.params[key].copy_(value)
                stack.params[key].grad = None
            for key, value in self.buffers.items():
                stack.buffers[key].copy_(value)
        self.optimizer.reset()
        stack.unstack_into(0)
        for p in stack.modules[0].parameters():
            p.grad = None
        torch.set_rng_state(self.rng)
        if self.cuda_rng is not None:
            torch.cuda.set_rng_state_all(self.cuda_rng)
