"""The prepared device check: what a lent GPU shows about the stacked engine, in one call of at most 8 minutes.

    bash scripts/device_check.sh OUT_DIR              # on the GPU machine (docs/benchmarks.md: how to carry it)
    bash scripts/device_check.sh --dry-run OUT_DIR    # on this CPU: every step, tiny, in about a minute

Three steps, each timed, each one's figures kept even if a later one fails:
1. ``stacked_steps`` (scripts/benchmarks/stacked_steps.py): ms a step and effective TFLOP/s of COREL's FFNN and CNN
   and CSRL's AE3 stacked at M = 1 to 40, eager, compiled and graphed, against their single steps;
2. one full-length COREL Table 2 Fashion-MNIST FFNN group stacked (Gaussian-COREL at λ 0.6, 10 seeds, 150
   epochs, ``hydra/launcher=stacked``), its wall time and its members' test accuracy;
3. two COREL FFNN groups (Center and Gaussian-COREL, 5 seeds, 15 epochs) one after the other and side by side
   (``hydra.launcher.n_jobs=2``: each in its own process on the one GPU), the wall times and their ratio;
4. a projection of COREL Table 1 + Table 2's image half (MNIST and Fashion-MNIST, FFNN and CNN: 28 stacks) from
   the group's measured time and the bench's step times, one stack at a time and at the measured side-by-side
   gain.
It prints a short table last and writes ``device_check.json`` (every figure) to OUT_DIR.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# COREL's image half as the experiment files define it (src/clusterable/conf/experiment/corel/table1.yaml,
# table2.yaml): per table, its groups (losses x datasets x models) and members a group (the stacked axis: Table 1's
# 20 λ, Table 2's 10 seeds).
GRIDS = {"table1": {"losses": 3, "members": 20}, "table2": {"losses": 4, "members": 10}}
DATASETS, MODELS = ("mnist", "fashion_mnist"), ("ffnn", "cnn")
EPOCHS, STEPS_PER_EPOCH = 150, 430  # 55,000 training rows in batches of 128


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out_dir", type=Path)
    parser.add_argument("--dry-run", action="store_true", help="on the CPU, tiny: checks the path end to end")
    args = parser.parse_args()
    args.out_dir.mkdir(parents=True, exist_ok=True)
    report: dict = {"dry_run": args.dry_run, "python": platform.python_version(), "started": time.time()}
    report.update(_environment())
    steps: list[tuple[str, float, str]] = []
    for name, step in (
        ("stacked_steps", _bench),
        ("corel_group", _group),
        ("side_by_side", _side_by_side),
        ("projection", _projection),
    ):
        start = time.perf_counter()
        try:
            report[name] = step(args.dry_run, report)
            outcome = "ok"
        except Exception as e:  # noqa: BLE001  (one step's failure is a figure: the others still run)
            report[name] = {"error": f"{type(e).__name__}: {e}".splitlines()[0][:300]}
            outcome = report[name]["error"]
        steps.append((name, time.perf_counter() - start, outcome))
        (args.out_dir / "device_check.json").write_text(json.dumps(report, indent=1, default=str))
    _print_table(report, steps)


def _environment() -> dict:
    import torch

    cuda = torch.cuda.is_available()
    return {
        "torch": torch.__version__,
        "device": torch.cuda.get_device_name(0) if cuda else "cpu",
        "cuda": cuda,
        "cpu_count": os.cpu_count(),
    }


def _bench(dry_run: bool, report: dict) -> dict:
    """The stacked_steps case in a child process (its own threads and compile caches); its JSON line."""
    env = dict(os.environ)
    if dry_run:
        env.update(STACKED_STEPS_MEMBERS="1,2", STACKED_STEPS_COMPILE="0")
    done = subprocess.run(
        [sys.executable, "bench.py", "--only", "stacked_steps"],
        cwd=ROOT / "scripts",
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


def _group(dry_run: bool, report: dict) -> dict:
    """One COREL Table 2 FFNN group trained stacked through train.py; its wall time and members' records."""
    name = "device_check/corel_ffnn_group" + ("_dry" if dry_run else "")
    args = ["loss=gaussian_corel", "loss.lam=0.6"]
    if dry_run:
        args += ["seed=range(2)", "trainer.max_epochs=2"]
    else:
        args += ["seed=range(10)", f"trainer.max_epochs={EPOCHS}"]
    return _train(name, args, dry_run)


def _side_by_side(dry_run: bool, report: dict) -> dict:
    """Two groups (Center at λ 0.2, Gaussian-COREL at λ 0.6) one after the other, then side by side
    (``hydra.launcher.n_jobs=2``): how much of the device one stack leaves to a second."""
    args = [
        "loss=center,gaussian_corel",
        "loss.lam=0.6",
        "seed=range(2)" if dry_run else "seed=range(5)",
        f"trainer.max_epochs={2 if dry_run else 15}",
    ]
    apart = _train("device_check/corel_two_groups_apart" + ("_dry" if dry_run else ""), args, dry_run)
    together = _train(
        "device_check/corel_two_groups_together" + ("_dry" if dry_run else ""),
        [*args, "hydra.launcher.n_jobs=2"],
        dry_run,
    )
    return {
        "one_after_the_other_s": apart["wall_s"],
        "side_by_side_s": together["wall_s"],
        "gain": apart["wall_s"] / together["wall_s"],
        "statuses": sorted(set(apart["statuses"]) | set(together["statuses"])),
    }


def _train(name: str, args: list[str], dry_run: bool) -> dict:
    """``train.py -m`` of COREL's FFNN on Fashion-MNIST, stacked, under ``name``; its wall time and records."""
    out = Path(os.environ.get("CLUSTERABLE_OUTPUTS", ROOT / "outputs"))
    args = [
        "-m",
        "dataset=fashion_mnist",
        "model=ffnn",
        "hydra/launcher=stacked",
        f"name={name}",
        "logger=none",
        "trainer.enable_progress_bar=false",
        *args,
    ]
    if dry_run:
        args += ["dataset.source=fake", "+dataset.fake_size=512"]
    else:
        args += ["trainer=gpu", "dataset.root=data/fashion_mnist"]
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "train.py", *args], cwd=ROOT, capture_output=True, text=True)
    wall = time.perf_counter() - start
    lines = [ln for ln in done.stdout.splitlines() if ln.startswith(("stacked:", "sweep:"))]
    records = [json.loads(p.read_text()) for p in (out / "multirun").glob(f"*/{name}/*/metrics.json")]
    if done.returncode != 0 and not records:
        raise RuntimeError((done.stderr.strip().splitlines() or ["train.py failed"])[-1])
    fits = [r["timing"].get("fit_s") for r in records if r.get("timing", {}).get("fit_s")]
    return {
        "wall_s": wall,
        "exit": done.returncode,
        "lines": lines[-6:],
        "members": len(records),
        "statuses": sorted({r["status"] for r in records}),
        "test_acc": sorted(r["metrics"].get("test/acc") for r in records if "test/acc" in r.get("metrics", {})),
        "fit_s": max(fits) if fits else None,
        "steps": records[0]["timing"].get("steps") if records else None,
        "step_ms": 1e3 * records[0]["timing"]["step_s"] if records and records[0]["timing"].get("step_s") else None,
    }


def _projection(dry_run: bool, report: dict) -> dict:
    """COREL Tables 1 + 2, image half, at the paper's budget on this device, from the measured group: each stack
    costs its steps at the bench's fastest stacked step for its model and width, plus the group's time outside
    its steps (process start, set-up, validation, evaluation), as measured."""
    bench, group = report.get("stacked_steps", {}), report.get("corel_group", {})
    device = "cuda" if report.get("cuda") else "cpu"
    if not group.get("steps") or not group.get("step_ms"):
        raise RuntimeError("the COREL group did not train: nothing to project from")
    outside = max(0.0, group["wall_s"] - group["steps"] * group["step_ms"] / 1e3)
    steps = EPOCHS * STEPS_PER_EPOCH
    total, rows = 0.0, []
    for table, grid in GRIDS.items():
        for model in MODELS:
            step_ms = _best_step_ms(bench, device, model, grid["members"])
            if step_ms is None:
                continue
            stacks = grid["losses"] * len(DATASETS)
            seconds = stacks * (steps * step_ms / 1e3 + outside)
            rows.append(
                {
                    "table": table,
                    "model": model,
                    "stacks": stacks,
                    "members": grid["members"],
                    "step_ms": step_ms,
                    "seconds": seconds,
                }
            )
            total += seconds
    gain = report.get("side_by_side", {}).get("gain")
    return {
        "rows": rows,
        "total_s": total,
        "outside_steps_s_per_stack": outside,
        "steps_per_stack": steps,
        "side_by_side_gain": gain,
        "total_side_by_side_s": total / gain if gain and gain > 1 else None,
    }


def _best_step_ms(bench: dict, device: str, model: str, members: int) -> float | None:
    """The bench's fastest stacked step (eager, compiled, graphed) of ``model`` at the measured width nearest
    ``members``, scaled linearly to ``members``."""
    prefix = f"stacked_steps_{device}_{model}_m"
    widths = sorted({int(k[len(prefix) :].split("_")[0]) for k in bench if k.startswith(prefix)})
    if not widths:
        return None
    width = min(widths, key=lambda w: abs(w - members))
    found = [bench.get(f"{prefix}{width}{how}_ms") for how in ("", "_compiled", "_graphed")]
    found = [v for v in found if v is not None]
    return min(found) * members / width if found else None


def _print_table(report: dict, steps: list[tuple[str, float, str]]) -> None:
    print(f"device check on {report['device']} (torch {report['torch']}){' [dry run]' if report['dry_run'] else ''}")
    for name, seconds, outcome in steps:
        print(f"  {name:<14} {seconds:7.1f} s  {outcome}")
    bench, group, projection = (report.get(k, {}) for k in ("stacked_steps", "corel_group", "projection"))
    device = "cuda" if report.get("cuda") else "cpu"
    for model in ("ffnn", "cnn", "ae3"):
        cols = {
            how: bench.get(f"stacked_steps_{device}_{model}_m10{suffix}_ms")
            for how, suffix in (("eager", ""), ("compiled", "_compiled"), ("graphed", "_graphed"))
        }
        shown = ", ".join(f"{how} {v:.2f} ms" for how, v in cols.items() if v is not None)
        single = bench.get(f"stacked_steps_{device}_{model}_single_ms")
        if single is not None:
            print(f"  {model:<5} single {single:.2f} ms; M=10 stacked: {shown or 'not measured at M=10'}")
    if group.get("members"):
        print(
            f"  COREL FFNN group: {group['members']} members, {group['wall_s']:.0f} s wall, step "
            f"{group['step_ms'] or float('nan'):.2f} ms, statuses {group['statuses']}"
        )
    side = report.get("side_by_side", {})
    if side.get("gain"):
        print(
            f"  two groups: {side['one_after_the_other_s']:.0f} s one after the other, "
            f"{side['side_by_side_s']:.0f} s side by side ({side['gain']:.2f}x)"
        )
    if projection.get("total_s"):
        line = f"  projected COREL Tables 1+2, image half: {projection['total_s'] / 60:.1f} min one stack at a time"
        if projection.get("total_side_by_side_s"):
            line += f", {projection['total_side_by_side_s'] / 60:.1f} min two at a time"
        print(line)


if __name__ == "__main__":
    main()
