"""The stacked training step, in the forms training can take it: eager, compiled, graphed.

Every form does the same thing to M members: each member's loss parts on its own batch (``summed_loss``: the
living members' losses summed, so that each member's gradient is its single run's), the gradients, and one update
of the stacked optimizer that leaves the dead members where they stopped. It returns the loss parts (M,), detached.

- ``eager_step``: autograd's backward and ``StackedOptimizer.step``, op for op as the single runs (hundreds of
  small operations a step: on a tiny model the step costs their dispatch, not their arithmetic).
- ``compiled_train_step()``: the gradients (``torch.func.grad`` of the summed loss) and the optimizer's update
  traced into one graph by ``torch.compile``: Inductor fuses the forward, the backward and the update (CSRL's AE
  stacks of 15 per-sample members in ``csrl/fig2``, the launcher's probe: 1.2-2.8 ms a step eager, 0.12-0.4 ms as
  one graph, against 0.6-1.1 ms with only the loss and its backward compiled; 1 torch thread, this repository's
  CPU). The step count goes in as a tensor (``StackedOptimizer.advance``), so one graph serves every step.
- ``compiled_train_step(graphed=True)``: the same graph replayed as a CUDA graph (``mode="reduce-overhead"``): one
  launch a step. The parameters, buffers and optimizer state it updates in place are marked static (the graph
  reads and writes them where they live); the batch is the only copy. A graph is recorded per input shape, so an
  epoch's last, partial batch replays a graph of its own and no member's gradient changes (no padding).
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import torch
from torch import Tensor

from clusterable.stacked.members import StackedMembers
from clusterable.stacked.optim import StackedOptimizer

Step = Callable[[StackedMembers, StackedOptimizer, dict, int, Tensor, Tensor | None], dict[str, Tensor]]

# The shapes one process may compile the step for (Dynamo's ``recompile_limit``, 8 by default).
RECOMPILE_LIMIT = 256

# The devices whose compiled step is also replayed as a CUDA graph (a test adds "cpu", where torch skips the graph
# itself and the wrapper's bookkeeping still runs).
GRAPHED_DEVICES = ("cuda",)


def summed_loss(
    stack: StackedMembers,
    batch: dict[str, Tensor],
    epoch: int,
    alive: Tensor,
    params: dict | None = None,
    buffers: dict | None = None,
) -> tuple[Tensor, dict[str, Tensor]]:
    """The objective of a stacked step: the living members' losses summed (a dead member adds 0), and every
    member's loss parts (M,); at the stacked ``params`` and ``buffers`` (default: the stack's own)."""
    out = stack.losses(batch, epoch, params=params, buffers=buffers)
    return torch.where(alive, out["loss"], torch.zeros_like(out["loss"])).sum(), out


def eager_step(
    stack: StackedMembers,
    optimizer: StackedOptimizer,
    batch: dict[str, Tensor],
    epoch: int,
    alive: Tensor,
    dead: Tensor | None,
) -> dict[str, Tensor]:
    """One step as the single runs take theirs: the summed loss, autograd's backward, the optimizer's step."""
    total, out = summed_loss(stack, batch, epoch, alive)
    optimizer.zero_grad()
    total.backward()
    optimizer.step(dead)
    return {k: v.detach() for k, v in out.items()}


def _gradients_and_update(
    stack: StackedMembers,
    optimizer: StackedOptimizer,
    batch: dict[str, Tensor],
    epoch: int,
    alive: Tensor,
    count: Tensor,
) -> dict[str, Tensor]:
    """What the compiled step traces: the gradients of the summed loss with respect to the stacked parameters
    (functional: no autograd tape at run time) and the optimizer's update from them, in place. A head may update a
    buffer in its forward (the center loss's centres): under ``torch.func.grad`` it updates a copy made inside,
    written back after."""

    def objective(params: dict[str, Tensor]) -> tuple[Tensor, tuple[dict[str, Tensor], dict[str, Tensor]]]:
        buffers = {k: v.clone() for k, v in stack.stacked_buffers().items()}
        total, out = summed_loss(stack, batch, epoch, alive, params, buffers)
        return total, ({k: v.detach() for k, v in out.items()}, {k: v.detach() for k, v in buffers.items()})

    grads, (out, buffers) = torch.func.grad(objective, has_aux=True)(dict(stack.params))
    with torch.no_grad():
        for key, value in buffers.items():
            stack.buffers[key].copy_(value)
    optimizer.update(grads, count)
    return out


@functools.cache
def compiled_train_step(graphed: bool = False) -> Step:
    """The step under ``torch.compile``, made once a process so that its graphs are shared by every stack of the
    same architecture and shapes (torch also keeps them on disk); ``graphed``: replayed as a CUDA graph."""
    # Each architecture and shape a sweep stacks compiles this one function again (a recompile of its code, once per
    # shape: Dynamo's cache keeps them all). Past Dynamo's default limit of 8 (a sweep's 9th shape: csrl/fig2 has
    # 18) it would run the step uncompiled from then on, slower than the eager step.
    torch._dynamo.config.recompile_limit = max(torch._dynamo.config.recompile_limit, RECOMPILE_LIMIT)
    traced = torch.compile(_gradients_and_update, mode="reduce-overhead" if graphed else None)

    def step(stack, optimizer, batch, epoch, alive, dead):  # a Step: eager_step's arguments
        optimizer.freeze(dead)
        count = optimizer.advance()
        if graphed:
            torch.compiler.cudagraph_mark_step_begin()  # the last replay's outputs are consumed by now
            for tensor in _updated_in_place(stack, optimizer, count):
                torch._dynamo.mark_static_address(tensor)  # idempotent; a restacked buffer is marked here
        try:
            out = traced(stack, optimizer, batch, epoch, alive, count)
        except BaseException:  # not taken: the step the caller takes instead counts as this one
            optimizer.steps -= 1
            raise
        optimizer.restore(dead)
        return out

    return step


def _updated_in_place(stack: StackedMembers, optimizer: StackedOptimizer, count: Tensor) -> list[Tensor]:
    states = [t for group in optimizer.groups for state in group.state for t in state.values() if isinstance(t, Tensor)]
    return [*stack.params.values(), *stack.buffers.values(), *states, count]


def step_kind(device: torch.device) -> str:
    """What a compiled step is on ``device``: ``graphed`` (replayed as a CUDA graph) on a GPU, else ``compiled``."""
    return "graphed" if device.type in GRAPHED_DEVICES else "compiled"


def train_step(kind: str) -> Step:
    """The step of ``kind``: ``eager``, ``compiled`` or ``graphed``."""
    return eager_step if kind == "eager" else compiled_train_step(graphed=kind == "graphed")
