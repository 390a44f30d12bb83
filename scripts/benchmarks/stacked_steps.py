"""Stacked steps (``hydra/launcher=stacked``): one step of M members stacked against M single steps, for COREL's
FFNN 784-500-500 and CNN 15/30/60 (batch 128, Adam) and CSRL's AE3 with one step per sample, at M = 1, 5, 10,
20, 40, as ms per step and effective TFLOP/s; eager and compiled (``torch.compile``, the engine's
``steps.compiled_train_step``: the gradients and the optimizer's update as one graph), and on a GPU also graphed
(``mode="reduce-overhead"``: CUDA graph replay); the aten operations one stacked step dispatches at M = 10
(``torch.profiler``, eager and compiled). Goal: the stacked step well under M single steps (the issue's anchors:
2.4x / 4.1x at 10 / 50 members on the CPU for cluster heads).

``STACKED_STEPS_MEMBERS=1,2`` and ``STACKED_STEPS_COMPILE=0`` narrow it (the device check's dry run)."""

from __future__ import annotations

import math
import os
from collections.abc import Callable

import torch

from .common import best_of, cuda_sync

MEMBERS = (1, 5, 10, 20, 40)


def _models(kind: str) -> tuple[Callable[[], torch.nn.Module], dict[str, torch.Tensor], float]:
    """A builder of one member's module, one batch, and the FLOPs of one member's step (forward + backward ~ 3x
    the forward's multiply-adds x 2)."""
    from clusterable.heads.cce import CCELoss
    from clusterable.heads.linear_ae import LinearAE
    from clusterable.models import CNN, FFNN
    from clusterable.models.identity import Identity
    from clusterable.module import RepresentationModule

    def adam(params):
        return torch.optim.Adam(params, lr=1e-3)

    g = torch.Generator().manual_seed(0)
    if kind == "ae3":  # CSRL's standard AE on 5 features, one row a step
        batch = {"inputs": torch.rand(1, 5, generator=g), "labels": torch.zeros(1, dtype=torch.long)}
        macs = 5 * 2 + 2 * 2 + 2 * 2 + 2 * 5
        return (
            lambda: RepresentationModule(Identity((5,)), LinearAE("ae3", (5,), num_classes=2), adam),
            batch,
            6.0 * macs,
        )
    batch = {
        "inputs": torch.rand(128, 1, 28, 28, generator=g),
        "labels": torch.randint(0, 10, (128,), generator=g),
    }
    if kind == "ffnn":
        macs = 784 * 500 + 500 * 500 + 500 * 10

        def build() -> torch.nn.Module:
            encoder = FFNN((1, 28, 28))
            return RepresentationModule(encoder, CCELoss(10, encoder.embedding_dim), adam)

        return build, batch, 6.0 * 128 * macs
    # CNN 15/30/60, 3x3, pooled twice per block as COREL's; its multiply-adds counted on the built network.
    probe = CNN((1, 28, 28))
    macs = _conv_macs(probe, (1, 28, 28)) + sum(
        m.in_features * m.out_features for m in probe.modules() if isinstance(m, torch.nn.Linear)
    )

    def build_cnn() -> torch.nn.Module:
        encoder = CNN((1, 28, 28))
        return RepresentationModule(encoder, CCELoss(10, encoder.embedding_dim), adam)

    return build_cnn, batch, 6.0 * 128 * (macs + 10 * probe.embedding_dim)


def _conv_macs(model: torch.nn.Module, shape: tuple[int, ...]) -> int:
    total = 0

    def hook(module: torch.nn.Conv2d, inputs: tuple, output: torch.Tensor) -> None:
        nonlocal total
        total += output.numel() * module.in_channels * math.prod(module.kernel_size) // module.groups

    handles = [m.register_forward_hook(hook) for m in model.modules() if isinstance(m, torch.nn.Conv2d)]
    with torch.no_grad():
        model(torch.zeros(1, *shape))
    for h in handles:
        h.remove()
    return total


def _single_step_s(build: Callable, batch: dict, device: torch.device) -> float:
    """One member's training step as a single run takes it: forward through the head, backward, Adam."""
    module = build().to(device)
    opt = torch.optim.Adam(module.parameters(), lr=1e-3)
    data = {k: v.to(device) for k, v in batch.items()}

    def step() -> None:
        loss = module.loss_parts(data, epoch=0)["loss"]
        opt.zero_grad()
        loss.backward()
        opt.step()
        cuda_sync()

    step()
    return best_of(lambda: [step() for _ in range(5)], 3) / 5


def _stacked_step_s(build: Callable, batch: dict, members: int, device: torch.device, how: str = "eager") -> float:
    """Seconds a stacked step of ``members`` members takes (the engine's step: the summed loss, its gradients,
    ``StackedOptimizer``'s update), ``eager``, ``compiled`` or ``graphed`` (CUDA graph replay through
    ``torch.compile``)."""
    step = _stacked_step(build, batch, members, device, how)
    step()
    if how != "eager":
        step()  # a graphed step records its graph on the second call
    repeats = 1 if members * 1e-3 > 0.02 else 3
    return best_of(lambda: [step() for _ in range(3)], repeats) / 3


def _stacked_step(build: Callable, batch: dict, members: int, device: torch.device, how: str) -> Callable:
    """One training step of the engine (``steps.train_step``: ``eager``, ``compiled`` or ``graphed``)."""
    from clusterable.stacked.members import StackedMembers
    from clusterable.stacked.optim import Group, StackedOptimizer
    from clusterable.stacked.steps import train_step

    torch.manual_seed(0)
    stack = StackedMembers([build().to(device) for _ in range(members)])
    ones = torch.full((members,), 1e-3, device=device)
    opt = StackedOptimizer(
        "adam",
        [Group(list(stack.params.values()), ones, torch.zeros_like(ones), names=list(stack.params))],
        {"betas": (0.9, 0.999), "eps": 1e-8},
    )
    data = {k: v.to(device).expand(members, *v.shape).contiguous() for k, v in batch.items()}
    alive = torch.ones(members, dtype=torch.bool, device=device)
    step_of_kind = train_step(how)

    def step() -> None:
        step_of_kind(stack, opt, data, 0, alive, None)
        cuda_sync()

    return step


def _ops_per_step(build: Callable, batch: dict, members: int, how: str = "eager") -> int:
    """The aten operations one stacked step dispatches on the CPU (every level of the profiler's tree), ``eager``
    or ``compiled`` (the fused kernels Inductor generates are not aten operations; what it leaves to aten is)."""
    from torch.profiler import ProfilerActivity, profile

    step = _stacked_step(build, batch, members, torch.device("cpu"), how)
    step()
    step()
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        step()
    return sum(1 for e in prof.events() if e.name.startswith("aten::"))


def measure() -> dict:
    """For each model and device: ms per single step, ms per stacked step at each M (eager, compiled, and graphed
    on a GPU), the speed-up over M single steps and the stacked step's effective TFLOP/s; the aten operations of
    a stacked step dispatches at M = 10, eager and compiled."""
    members = tuple(int(m) for m in os.environ.get("STACKED_STEPS_MEMBERS", "1,5,10,20,40").split(","))
    compiles = os.environ.get("STACKED_STEPS_COMPILE", "1") != "0"
    out: dict = {
        "stacked_steps_cpu_threads": torch.get_num_threads(),
        "stacked_steps_loadavg": os.getloadavg()[0],
    }
    devices = [torch.device("cpu")] + ([torch.device("cuda")] if torch.cuda.is_available() else [])
    for device in devices:
        hows = (
            ["eager"] + (["compiled"] if compiles else []) + (["graphed"] if compiles and device.type == "cuda" else [])
        )
        for kind in ("ffnn", "cnn", "ae3"):
            build, batch, flops = _models(kind)
            single_s = _single_step_s(build, batch, device)
            prefix = f"stacked_steps_{device.type}_{kind}"
            out[f"{prefix}_single_ms"] = 1e3 * single_s
            if device.type == "cpu":
                out[f"stacked_steps_ops_{kind}_m10"] = _ops_per_step(build, batch, 10)
                if compiles:
                    out[f"stacked_steps_ops_{kind}_m10_compiled"] = _ops_per_step(build, batch, 10, "compiled")
            for m in members:
                for how in hows:
                    name = f"{prefix}_m{m}" + ("" if how == "eager" else f"_{how}")
                    try:
                        stacked_s = _stacked_step_s(build, batch, m, device, how)
                    except Exception as e:  # noqa: BLE001  (a compile that fails is a figure too)
                        out[f"{name}_error"] = f"{type(e).__name__}: {e}".splitlines()[0][:160]
                        continue
                    out[f"{name}_ms"] = 1e3 * stacked_s
                    out[f"{name}_speedup"] = m * single_s / stacked_s
                    out[f"{name}_tflops"] = m * flops / stacked_s / 1e12
    return out
