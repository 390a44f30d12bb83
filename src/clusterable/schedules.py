"""Learning-rate schedules, stepped once per optimizer step (``src/clusterable/conf/scheduler``; none by default).

A schedule is a function ``schedule(optimizer, total_steps, *, <options>) -> LRScheduler``; the config binds the
options (``_partial_``) and the module passes the optimizer and the run's number of optimizer steps. torch's
schedulers that take plain values work too (``+scheduler._target_=torch.optim.lr_scheduler.StepLR
+scheduler._partial_=true +scheduler.step_size=100``): the module passes ``total_steps`` only to those that take it
(``OneCycleLR``), and each of their arguments has a domain (``clusterable.domains``).
"""

from __future__ import annotations

import math

import torch
from torch.optim.lr_scheduler import LambdaLR


def warmcos_factor(step: int, total_steps: int, warmup_steps: int) -> float:
    """``min((i + 1) / warmup, (1 + cos(pi i / total)) / 2)`` at step ``i`` (0-based): a linear warm-up over
    ``warmup_steps`` steps that meets a cosine decay from 1 to 0 over ``total_steps`` (Boudiaf et al. 2020,
    authors' code ``jeromerony/dml_cross_entropy``, ``experiment.py``, ``get_optimizer_scheduler``, scheduler
    ``warmcos`` with a fixed warm-up of 100 steps; ``warmup_steps`` 0: cosine only). Their cosine is not clamped
    at ``total_steps``; it is never stepped past it there, nor here."""
    cosine = (1 + math.cos(math.pi * min(step, total_steps) / total_steps)) / 2
    return cosine if warmup_steps == 0 else min((step + 1) / warmup_steps, cosine)


def warmcos(optimizer: torch.optim.Optimizer, total_steps: int, warmup_steps: int = 100) -> LambdaLR:
    """Every parameter group's rate times ``warmcos_factor(i, total_steps, warmup_steps)`` at step ``i``.

    Raises:
        ValueError: ``warmup_steps`` < 0, or ``total_steps`` < 1.
    """
    if warmup_steps < 0:
        raise ValueError(f"warmup_steps must be >= 0, got {warmup_steps}")
    if total_steps < 1:
        raise ValueError(f"total_steps must be >= 1, got {total_steps}")
    return LambdaLR(optimizer, lambda step: warmcos_factor(step, total_steps, warmup_steps))
