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

The same probe decides whether the step is compiled (``torch.compile``, ``steps.compiled_train_step``: the
gradients and the optimizer's update as one graph): with ``compile=auto``, where the eager training is projected
longer than ``COMPILE_WORTH_S`` (``COMPILE_WORTH_WARM_S`` once the process has compiled: a compile costs seconds to
a minute on a CPU; torch keeps its graphs on disk, so later groups and processes of the same shapes pay little)
and a single step is not compute-bound (under ``COMPUTE_BOUND_S``), the compiled step is timed too and kept where
it is faster. A compile that fails leaves the step eager, said in one line.
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
# The eager training a compile must save from to be worth timing: a process's first compile costs 30-50 s on this
# CPU (Inductor's imports; a 30-run digits grid whose groups project 14 s eager ran 40% slower for compiling), a
# later shape 5-10 s; the compiled step of a dispatch-bound stack is 5-10x faster (CSRL's AE3 at M = 15: 1.7 ->
# 0.2 ms), so after a first compile a shorter training pays (csrl/fig2's de-noising stacks: 15 s eager).
COMPILE_WORTH_S = 20.0
COMPILE_WORTH_WARM_S = 10.0
# A single step slower than this is compute-bound: Inductor has few small operations to fuse, and on this CPU the
# compiled step was never faster (COREL's FFNN at M = 4: 22 -> 32 ms; its CNN at M = 10: 779 -> 1040 ms), while
# timing it cost a compile (about 30 s a CNN group: a 30-run CNN grid took 14 min 22 s against 12 min 38 s cell by
# cell). CSRL's AEs (single steps of 0.4-1.4 ms) compile to 2-3x faster.
COMPUTE_BOUND_S = 0.005
# The shapes compiled in this process (architecture, parameter and batch shapes, device): a later group of one of
# them compiles in no time (Dynamo's cache), so it is timed compiled however short its training.
_COMPILED: set[tuple] = set()


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
    compiled_s: float | None = None  # the compiled stacked step, where one was timed
    compile_s: float | None = None  # what compiling took (its first call less a step)
    compile_note: str | None = None  # why the step stays eager, where a compile was asked for or tried

    @property
    def compiled(self) -> bool:
        """Whether training takes the compiled step: it was timed and is the faster."""
        return self.compiled_s is not None and self.compiled_s < self.stacked_s

    @property
    def step_s(self) -> float:
        """The stacked step training takes."""
        return self.compiled_s if self.compiled else self.stacked_s

    @property
    def stacked_total_s(self) -> float:
        return self.step_s * self.steps

    @property
    def one_by_one_total_s(self) -> float:
        return self.members * ((self.single_s + STEP_OVERHEAD_S) * self.steps + RUN_OVERHEAD_S)

    @property
    def stacks(self) -> bool:
        return self.stacked_total_s <= self.one_by_one_total_s + TOLERANCE_S

    def line(self) -> str:
        """One line with both timings and both projections."""
        return (
            f"a step of {self.members} stacked members takes {self.step_s * 1e3:.2f} ms against "
            f"{self.members} x {self.single_s * 1e3:.2f} ms one by one (+{STEP_OVERHEAD_S * 1e3:.1f} ms "
            f"Lightning's loop): {self.steps} steps project to "
            f"{self.stacked_total_s:.0f} s stacked, {self.one_by_one_total_s:.0f} s one by one"
        )

    def compile_line(self) -> str | None:
        """Which step trains and why, where a compile was tried or asked for."""
        if self.compiled:
            return (
                f"compiled step: {self.compiled_s * 1e3:.2f} ms against {self.stacked_s * 1e3:.2f} ms eager "
                f"(compiling took {self.compile_s:.1f} s)"
            )
        if self.compiled_s is not None:
            return (
                f"eager step: {self.stacked_s * 1e3:.2f} ms, the compiled one {self.compiled_s * 1e3:.2f} ms "
                f"is not faster"
            )
        return self.compile_note

    def as_record(self) -> dict[str, Any]:
        return {
            "stacked_step_ms": self.stacked_s * 1e3,
            "single_step_ms": self.single_s * 1e3,
            "steps": self.steps,
            "projected_stacked_s": self.stacked_total_s,
            "projected_one_by_one_s": self.one_by_one_total_s,
            "compiled": self.compiled,
            "compiled_step_ms": None if self.compiled_s is None else self.compiled_s * 1e3,
            "compile_s": self.compile_s,
            "compile_note": self.compile_note,
        }


def worth_timing(bound_s: float, speed_check: bool, compile: bool | str) -> bool:
    """Whether to time the group's steps, given ``bound_s``, an upper bound on its stacked training (its steps at
    the probe step's time, a first call): stacking cannot lose by more than ``TOLERANCE_S`` when the whole stacked
    training takes less, and a compile is not worth it under ``compile_worth_s()``; ``compile=True`` always times."""
    return (
        (speed_check and bound_s > TOLERANCE_S)
        or compile is True
        or (compile == "auto" and bound_s > compile_worth_s())
    )


def compile_worth_s() -> float:
    """``COMPILE_WORTH_S``, or ``COMPILE_WORTH_WARM_S`` once this process has compiled a step (Inductor loaded)."""
    return COMPILE_WORTH_WARM_S if _COMPILED else COMPILE_WORTH_S


def check(times: StepTimes | None) -> None:
    """``SlowerStacked`` (its line names both timings) when stacking is projected slower than one by one."""
    if times is not None and not times.stacks:
        raise SlowerStacked(f"stacking is slower here: {times.line()}")


def time_steps(
    stack: Any, optimizer: Any, train: Any, module: Any, rows: int, steps: int, compile: bool | str = "auto"
) -> StepTimes | None:
    """Time one stacked step (``steps.eager_step``: the summed loss, its backward, the update), eager and, where
    ``compile`` says so, compiled, and one single step of the first member's own module with its own optimizer
    (``loss_parts``, backward, step), on the first ``rows`` rows of ``train`` (a ``fit.StackedSplit``); None where
    the head refuses that batch (``BatchError``). Everything the steps change is restored.

    Args:
        stack: the ``StackedMembers``; ``optimizer``: its ``StackedOptimizer``; ``module``: member 0's module.
        rows: a step's rows (the batch size; 1 for per-sample steps); steps: a member's steps in all.
        compile: ``auto`` (timed where the eager training is projected over ``compile_worth_s()`` and a single step
            is not compute-bound, over ``COMPUTE_BOUND_S``), True (timed
            always) or False (never).
    """
    from clusterable.stacked import steps as forms

    index = torch.arange(rows, device=stack.device).expand(stack.size, rows)
    batch = train.batch(index)
    single_batch = {k: v[0] for k, v in batch.items()}  # member 0's rows
    own = module.build_optimizer()
    alive = torch.ones(stack.size, dtype=torch.bool, device=stack.device)

    def stacked_step(step: Any = forms.eager_step) -> None:
        step(stack, optimizer, batch, 0, alive, None)

    def single_step() -> None:
        module.train()
        loss = module.loss_parts(single_batch, epoch=0)["loss"]
        own.zero_grad(set_to_none=True)
        loss.backward()
        own.step()

    with _restored(stack, optimizer):
        try:
            times = StepTimes(
                _best_of(stacked_step, stack.device), _best_of(single_step, stack.device), stack.size, steps
            )
        except BatchError:
            return None
    shape = _shape(stack, module, batch)
    compute_bound = times.single_s > COMPUTE_BOUND_S
    if compile is True or (
        compile == "auto" and (shape in _COMPILED or (times.stacked_total_s > compile_worth_s() and not compute_bound))
    ):
        with _restored(stack, optimizer):
            _time_compiled(times, lambda: stacked_step(forms.train_step(forms.step_kind(stack.device))), stack.device)
        if times.compiled_s is not None:
            _COMPILED.add(shape)
    elif compile == "auto" and compute_bound:
        times.compile_note = (
            f"eager step: a single step takes {times.single_s * 1e3:.1f} ms, compute-bound: a compile does not pay"
        )
    elif compile == "auto":
        times.compile_note = (
            f"eager step: the training is projected at {times.stacked_total_s:.0f} s, too short to pay for a compile"
        )
    return times


def _shape(stack: Any, module: Any, batch: dict[str, torch.Tensor]) -> tuple:
    """What a compiled graph is specialised on: the architecture, the stacked parameters' and the batch's shapes and
    dtypes, the device."""
    return (
        type(module.encoder).__qualname__,
        type(module.head).__qualname__,
        str(stack.device),
        tuple((k, tuple(v.shape), str(v.dtype)) for k, v in stack.params.items()),
        tuple((k, tuple(v.shape), str(v.dtype)) for k, v in batch.items()),
    )


def _time_compiled(times: StepTimes, step: Callable[[], None], device: torch.device) -> None:
    """The compiled step's time and its compile's into ``times``; a compile that fails is a note (eager)."""
    start = time.perf_counter()
    try:
        step()  # compiles
        _sync(device)
        first = time.perf_counter() - start
        times.compiled_s = _best_of(step, device)
        times.compile_s = max(0.0, first - times.compiled_s)
    except Exception as e:  # noqa: BLE001  (whatever Dynamo or Inductor raise: the eager step is the fallback)
        reason = f"{type(e).__name__}: {e}".splitlines()[0][:160]
        times.compiled_s, times.compile_note = None, f"eager step: the compile failed ({reason})"


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
