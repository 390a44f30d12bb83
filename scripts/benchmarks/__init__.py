"""The benchmark cases of ``scripts/bench.py``, one module each, and the command line that runs them.

A case is a module of this package with a ``measure() -> dict`` function (its keys start with the case's name; the
values are numbers, or strings and booleans that qualify them) and a module docstring whose first paragraph says
what it measures and its goal (``--help`` prints it). ``CASES`` lists them in the order they run, which is the
order of their keys in the JSON line. ``common`` holds the timers and the child scripts' memory probe every case
uses; ``loops`` the plain and the framework training paths the overhead cases compare.
"""

from __future__ import annotations

import argparse
import json
import sys
import textwrap
from collections.abc import Callable
from types import ModuleType

import torch

from . import (
    cluster_heads,
    clustering_eval,
    dscl,
    image_pipeline,
    pairwise_losses,
    per_sample_ae,
    probes,
    resnet50_training,
    retrieval_eval,
    run_overhead,
    sc_partition,
    search_pruning,
    stacked_steps,
    startup,
    text,
    train_overhead,
    train_overhead_digits,
    vae_epoch,
)

MODULES: tuple[ModuleType, ...] = (
    train_overhead,
    train_overhead_digits,
    vae_epoch,
    startup,
    clustering_eval,
    probes,
    per_sample_ae,
    cluster_heads,
    retrieval_eval,
    sc_partition,
    pairwise_losses,
    image_pipeline,
    resnet50_training,
    dscl,
    text,
    stacked_steps,
    run_overhead,
    search_pruning,
)


def case_name(module: ModuleType) -> str:
    """A case's name: its module's (``benchmarks.startup`` -> ``startup``), the name ``--only`` takes."""
    return module.__name__.rpartition(".")[2]


# Case name -> its measurement, in the order they run.
CASES: dict[str, Callable[[], dict]] = {case_name(m): m.measure for m in MODULES}


def summary(module: ModuleType) -> str:
    """The first paragraph of a case module's docstring on one line: what it measures and its goal."""
    return " ".join(module.__doc__.strip().split("\n\n")[0].split())


def case_list(width: int = 118) -> str:
    """The cases and their summaries as ``--help`` lists them: the name, then the summary wrapped beside it."""
    return "\n".join(
        textwrap.fill(
            summary(m),
            width,
            initial_indent=f"  {case_name(m):<23}",
            subsequent_indent=" " * 25,
            break_on_hyphens=False,
        )
        for m in MODULES
    )


def main(description: str, argv: list[str] | None = None) -> None:
    """Run every case (or ``--only`` one) in this process, each one's figures to stderr as it ends, then print
    ``{"torch_threads": ..., <every case's keys>}`` as the last line of stdout."""
    parser = argparse.ArgumentParser(
        description=f"{description.rstrip()}\n\nCases (goals from the issues):\n{case_list()}",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--only", choices=sorted(CASES), help="run one case")
    args = parser.parse_args(argv)
    torch.set_num_threads(max(torch.get_num_threads(), 1))
    results: dict = {"torch_threads": torch.get_num_threads()}
    for name, fn in CASES.items():
        if args.only and name != args.only:
            continue
        print(f"[bench] {name} ...", file=sys.stderr, flush=True)
        out = fn()
        for k, v in out.items():
            print(f"[bench]   {k}: {v:.4g}" if isinstance(v, float) else f"[bench]   {k}: {v}", file=sys.stderr)
        results.update(out)
    print(json.dumps(results))
