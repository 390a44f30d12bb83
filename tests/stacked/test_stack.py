"""A stacked member is its single run: the same initial parameters and batch order, and in float64 the same
parameters after 20+ steps (1e-10 relative), the same record, the same files; a member that diverges alone stops
alone."""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path

import pytest
import torch
from hydra import compose, initialize_config_dir
from hydra.core.hydra_config import HydraConfig

from clusterable.config import CONFIG_DIR
from clusterable.run import Prepared, RunContext, prepare, run
from clusterable.stacked.stack import run_stack

COMMON = ["torch_threads=1", "logger=none", "trainer.precision=64-true", "trainer.enable_progress_bar=false"]
# ~20 steps or more in each setting: iris has 90 training rows (6 batches of 16 an epoch).
COREL = [
    "dataset=iris",
    "dataset.batch_size=16",
    "trainer.max_epochs=4",
    "evaluator=[classification]",
    "checkpoint.monitor=train/loss",
    "checkpoint.mode=min",
]
CSRL = ["experiment=csrl/fig2", "dataset=parallel_lines"]  # the last epoch is tested (no monitor)


# Two seeds of a tiny CCE run on iris: the cells of the tests of the probe and the compiled step's fallbacks.
IRIS_SEEDS = {
    f"s{seed}": [
        "dataset=iris",
        "dataset.batch_size=16",
        "trainer.max_epochs=2",
        "loss=cce",
        "evaluator=[classification]",
        f"seed={seed}",
    ]
    for seed in (0, 1)
}


def _cell(tmp_path: Path, name: str, overrides: list[str]) -> tuple:
    with initialize_config_dir(config_dir=CONFIG_DIR, version_base="1.3"):
        cfg = compose("train", overrides=[*COMMON, *overrides], return_hydra_config=True)
    ctx = RunContext.from_hydra(cfg.hydra, tmp_path / name)
    del cfg.hydra
    return cfg, ctx


def _without_hydra(body):
    state = HydraConfig.instance().cfg
    HydraConfig.instance().cfg = None
    try:
        return body()
    finally:
        HydraConfig.instance().cfg = state


def single(tmp_path: Path, name: str, overrides: list[str]) -> dict:
    return _without_hydra(lambda: run(*_cell(tmp_path, name, overrides)).to_dict())


def stacked(
    tmp_path: Path, cells: dict[str, list[str]], speed_check: bool = False, compile: bool | str = False
) -> dict[str, dict]:
    """Train ``cells`` as one stack (whatever the speed check would say, unless ``speed_check``), its step eager
    unless ``compile``."""

    def body() -> dict[str, dict]:
        prepared = [prepare(*_cell(tmp_path, name, o)) for name, o in cells.items()]
        assert all(isinstance(p, Prepared) for p in prepared)
        assert run_stack(prepared, progress=False, speed_check=speed_check, compile=compile) == []  # every cell stacked
        return {name: p.record.to_dict() for name, p in zip(cells, prepared, strict=True)}

    return _without_hydra(body)


def weights(run_dir: Path) -> dict[str, torch.Tensor]:
    return torch.load(run_dir / "checkpoints" / "best.ckpt", weights_only=True)["state_dict"]


@pytest.fixture
def evaluated(monkeypatch: pytest.MonkeyPatch) -> dict[Path, dict[str, torch.Tensor]]:
    """The weights each run evaluates (its best or last epoch), by run directory: single and stacked runs both
    hand their restored module to ``training.evaluate``."""
    from clusterable.run import training

    seen: dict[Path, dict[str, torch.Tensor]] = {}
    original = training.evaluate

    def spy(cfg, ctx, parts, last_train):
        seen[Path(ctx.run_dir)] = {k: v.detach().clone() for k, v in parts.module.state_dict().items()}
        return original(cfg, ctx, parts, last_train)

    monkeypatch.setattr(training, "evaluate", spy)
    return seen


def assert_same_weights(wa: dict[str, torch.Tensor], wb: dict[str, torch.Tensor], rtol: float = 1e-10) -> None:
    assert wa.keys() == wb.keys()
    for key in wa:
        torch.testing.assert_close(wb[key], wa[key], rtol=rtol, atol=rtol * max(1.0, float(wa[key].abs().max())))


GRIDS = {
    "ffnn_cce": [COREL + ["loss=cce", "model.hidden=[16,8]", f"seed={s}"] for s in (0, 1)],
    "ffnn_center": [
        COREL + ["loss=center", "model.hidden=[16,8]", f"loss.lam={v}", f"seed={s}"] for v, s in ((0.2, 0), (0.7, 1))
    ],
    "ffnn_cosine": [COREL + ["loss=cosine_corel", "model.hidden=[16,8]", f"loss.lam={v}"] for v in (0.3, 0.8)],
    "ffnn_gaussian": [
        COREL + ["loss=gaussian_corel", "model.hidden=[16,8]", f"loss.lam={v}", f"optimizer.lr={lr}"]
        for v, lr in ((0.6, 1e-3), (0.9, 3e-3))
    ],
    # The recovered COREL recipe: fixed class vectors (a buffer, no head parameter group for Cosine-COREL) and the
    # authors' bounded loss with γ fixed (its λ does not stack: seeds do).
    "ffnn_cosine_fixed_class_vectors": [
        COREL + ["loss=cosine_corel", "model.hidden=[16,8]", f"loss.lam={v}", "loss.train_class_vectors=false"]
        for v in (0.3, 1.0)
    ],
    "ffnn_gaussian_authors_fixed_gamma": [
        COREL
        + [
            "loss=gaussian_corel_authors_fixed_gamma",
            "model.hidden=[16,8]",
            "loss.lam=0.2",
            "loss.train_class_vectors=false",
            f"seed={s}",
        ]
        for s in (0, 1)
    ],
    "cnn": [
        [
            "dataset=mnist",
            "dataset.source=fake",
            "+dataset.fake_size=64",
            "dataset.batch_size=8",
            "model=cnn",
            "model.channels=[2,3,4]",
            "model.hidden=[8,8]",
            "loss=cce",
            "trainer.max_epochs=3",
            "evaluator=[classification]",
            "checkpoint.monitor=train/loss",
            "checkpoint.mode=min",
            f"seed={s}",
        ]
        for s in (0, 1)
    ],
    "csrl_ae_per_sample": [
        CSRL + ["loss=ae1", "trainer.max_epochs=2", f"optimizer.lr={lr}", f"seed={s}"]
        for lr, s in ((0.01, 0), (0.1, 1))
    ],
    "csrl_ptae_lloyd": [
        CSRL + ["loss=ptae", "trainer.max_epochs=20", f"optimizer.lr={lr}", "seed=2"] for lr in (0.01, 0.1)
    ],
}


# Compiled: two grids in every run of the tests (a compile costs 10-40 s on 2 busy cores), the others marked slow.
COMPILED = [
    pytest.param(grid, marks=() if grid in ("ffnn_center", "csrl_ae_per_sample") else pytest.mark.slow)
    for grid in GRIDS
]


@pytest.mark.parametrize("grid", list(GRIDS))
def test_each_member_ends_where_its_single_run_ends(tmp_path: Path, grid: str, evaluated: dict) -> None:
    _compare_with_single_runs(tmp_path, grid, evaluated, compile=False)


@pytest.mark.parametrize("grid", COMPILED)
def test_a_compiled_member_ends_where_its_single_run_ends(
    tmp_path: Path, grid: str, evaluated: dict, monkeypatch
) -> None:
    """The step compiled (``torch.compile``: the gradients and the update as one graph): float64 members within
    1e-10 of their single runs, as eager. Trained compiled wherever the compile succeeds, faster or not."""
    from clusterable.stacked import speed

    monkeypatch.setattr(speed.StepTimes, "compiled", property(lambda self: self.compiled_s is not None))
    together = _compare_with_single_runs(tmp_path, grid, evaluated, compile=True)
    assert {r["stacked"]["step"] for r in together.values()} == {"compiled"}


def test_a_compile_must_save_more_in_a_process_that_has_not_compiled_yet(monkeypatch) -> None:
    """A first compile loads Inductor (30-50 s on this CPU): a group's eager training must be longer to pay for it
    than once the process has compiled; a group projected between the two stays eager in a fresh process."""
    from clusterable.stacked import speed

    monkeypatch.setattr(speed, "_COMPILED", set())
    assert speed.compile_worth_s() == speed.COMPILE_WORTH_S > speed.COMPILE_WORTH_WARM_S
    between = (speed.COMPILE_WORTH_S + speed.COMPILE_WORTH_WARM_S) / 2
    assert not speed.worth_timing(between, speed_check=False, compile="auto")
    speed._COMPILED.add(("an", "earlier", "shape"))
    assert speed.compile_worth_s() == speed.COMPILE_WORTH_WARM_S
    assert speed.worth_timing(between, speed_check=False, compile="auto")


def test_a_sweep_may_compile_the_step_for_more_shapes_than_dynamo_s_default_limit() -> None:
    """Each architecture and shape of a sweep recompiles the one step function; past Dynamo's default limit of 8
    (``csrl/fig2`` has 18) the step would silently run uncompiled and slower than eager: the limit is raised when
    the compiled step is made."""
    import torch

    from clusterable.stacked import steps

    steps.compiled_train_step.cache_clear()
    steps.compiled_train_step()
    assert torch._dynamo.config.recompile_limit >= steps.RECOMPILE_LIMIT > 8


def test_the_graphed_step_s_bookkeeping_leaves_members_where_their_single_runs_end(
    tmp_path: Path, evaluated: dict, monkeypatch
) -> None:
    """The CUDA-graph wrapper (a new step for the graph trees each call, the stack's tensors marked static) run on
    this CPU, where torch skips the graph itself: float64 members still within 1e-10 of their single runs, each
    epoch's last, partial batch included (iris: 90 training rows, 5 batches of 16 and a last one of 10)."""
    from clusterable.stacked import speed, steps

    monkeypatch.setattr(steps, "GRAPHED_DEVICES", ("cuda", "cpu"))
    # Trained graphed even where the tiny model's compiled step is not the faster.
    monkeypatch.setattr(speed.StepTimes, "compiled", property(lambda self: self.compiled_s is not None))
    together = _compare_with_single_runs(tmp_path, "ffnn_center", evaluated, compile=True)
    assert {r["stacked"]["step"] for r in together.values()} == {"graphed"}


def _compare_with_single_runs(tmp_path: Path, grid: str, evaluated: dict, compile: bool) -> dict[str, dict]:
    cells = {f"cell{i}": o for i, o in enumerate(GRIDS[grid])}
    alone = {name: single(tmp_path / "single", name, o) for name, o in cells.items()}
    together = stacked(tmp_path / "stacked", cells, compile=compile)
    for name in cells:
        a, b = alone[name], together[name]
        assert a["status"] == b["status"] == "ok", (a["error"], b["error"])
        assert b["stacked"]["members"] == len(cells) and b["stacked"]["cells"] == list(cells)
        assert a["best_epoch"] == b["best_epoch"] and a["timing"]["steps"] == b["timing"]["steps"] >= 20
        assert_same_weights(evaluated[tmp_path / "single" / name], evaluated[tmp_path / "stacked" / name])
        if (tmp_path / "single" / name / "checkpoints" / "best.ckpt").exists():  # loadable as the single run's
            assert_same_weights(weights(tmp_path / "single" / name), weights(tmp_path / "stacked" / name))
        for key, value in a["metrics"].items():
            assert b["metrics"][key] == pytest.approx(value, rel=1e-8, abs=1e-10), key
        # the same record: the same keys, plus the group it trained in
        assert set(b) - set(a) == {"stacked"} and set(a) <= set(b)
        assert set(b["timing"]) == set(a["timing"])
        on_disk = json.loads((tmp_path / "stacked" / name / "metrics.json").read_text())
        assert on_disk["status"] == "ok" and on_disk["stacked"]["index"] == list(cells).index(name)
    return together


def test_a_member_starts_from_its_single_runs_parameters_in_its_batch_order(tmp_path: Path) -> None:
    """Bitwise: the stacked initial parameters are the members' own, and each member's epoch order is the one its
    single run's loader draws."""
    import lightning as L

    from clusterable.run.parts import build_parts
    from clusterable.stacked.members import StackedMembers

    cells = [COREL + ["loss=center", "model.hidden=[16,8]", f"seed={s}"] for s in (0, 1, 2)]
    modules, loaders, singles = [], [], []
    for i, o in enumerate(cells):
        cfg, ctx = _cell(tmp_path, f"c{i}", o)
        L.seed_everything(cfg.seed, verbose=False)
        parts = build_parts(cfg, ctx)
        modules.append(parts.module)
        loaders.append(parts.datamodule.train_dataloader())
        L.seed_everything(cfg.seed, verbose=False)
        singles.append((build_parts(cfg, ctx), parts.datamodule.train_dataloader()))
    stack = StackedMembers(modules)
    for i, (parts, loader) in enumerate(singles):
        for name, p in parts.module.named_parameters():
            assert torch.equal(stack.params[f"module.{name}"][i], p.detach()), name
        for _ in range(2):  # two epochs: each draws a new order from the member's own generator
            rows = [batch["index"] for batch in loader]
            assert all(torch.equal(a, b) for a, b in zip(rows, loaders[i].epoch_rows(), strict=True))


def test_a_diverged_member_stops_alone_and_moves_nobody(tmp_path: Path) -> None:
    """Gaussian-COREL at λ = 0.3 runs away in its second epoch on digits: recorded diverged at its epoch, while
    the members beside it end bitwise where they end beside a member that does not diverge."""
    base = COMMON + [
        "dataset=digits",
        "loss=gaussian_corel",
        "trainer.max_epochs=3",
        "evaluator=[classification]",
    ]
    with_runaway = {
        "lam0.3": base + ["loss.lam=0.3"],
        "lam0.7": base + ["loss.lam=0.7"],
        "lam0.9": base + ["loss.lam=0.9"],
    }
    healthy = {
        "lam0.6": base + ["loss.lam=0.6"],
        "lam0.7": base + ["loss.lam=0.7"],
        "lam0.9": base + ["loss.lam=0.9"],
    }
    a = stacked(tmp_path / "a", with_runaway)
    b = stacked(tmp_path / "b", healthy)
    assert a["lam0.3"]["status"] == "diverged" and a["lam0.3"]["failed_epoch"] == 1
    assert "unbounded below" in a["lam0.3"]["error"]
    for name in ("lam0.7", "lam0.9"):
        assert a[name]["status"] == b[name]["status"] == "ok"
        wa, wb = weights(tmp_path / "a" / name), weights(tmp_path / "b" / name)
        assert all(torch.equal(wa[k], wb[k]) for k in wa)
        assert a[name]["metrics"] == b[name]["metrics"]


@pytest.mark.parametrize("monitor", ["val/acc", "null"])
def test_a_stack_drops_its_stopped_members_and_the_others_end_as_beside_them(
    tmp_path: Path, monkeypatch, monitor: str
) -> None:
    """Once a member stopped (here: it diverged), the stack trains the living ones only (``fit._compact``: a
    stopped member's forward and backward cost a living one's), carrying their optimizer state over: every member
    ends bitwise where it ends in a stack that keeps its stopped member frozen, with its best epoch's weights (the
    last epoch's without a monitor) and records."""
    from clusterable.stacked import fit

    base = COMMON + ["dataset=digits", "loss=gaussian_corel", "trainer.max_epochs=4", "evaluator=[classification]"]
    base += [f"checkpoint.monitor={monitor}"]
    cells = {name: base + [f"loss.lam={lam}"] for name, lam in (("lam0.3", 0.3), ("lam0.7", 0.7), ("lam0.9", 0.9))}
    living: list[int] = []
    compact = fit._compact

    def spy(*args, **kwargs):
        living.append(int(args[2].alive.sum()))
        return compact(*args, **kwargs)

    monkeypatch.setattr(fit, "_compact", spy)
    dropped = stacked(tmp_path / "dropped", cells)
    assert living == [2]  # after lam0.3 ran away in its second epoch, the last two epochs train 2 members
    monkeypatch.setattr(fit, "_worth_compacting", lambda *args: False)
    frozen = stacked(tmp_path / "frozen", cells)
    for name in cells:
        a, b = dropped[name], frozen[name]
        assert (a["status"], a["best_epoch"], a["metrics"]) == (b["status"], b["best_epoch"], b["metrics"])
        assert a["timing"]["steps"] == b["timing"]["steps"]
        if monitor != "null" and a["best_epoch"] is not None:
            wa, wb = weights(tmp_path / "dropped" / name), weights(tmp_path / "frozen" / name)
            assert all(torch.equal(wa[k], wb[k]) for k in wa)
    assert dropped["lam0.3"]["failed_epoch"] == 1 and dropped["lam0.7"]["status"] == "ok"


def test_member_run_dirs_hold_the_single_runs_files(tmp_path: Path) -> None:
    def cell(root: str, name: str, *more: str) -> list[str]:
        save_dir = f"logger.csv.save_dir={tmp_path / root / name}"
        return [*COREL, "loss=cce", "model.hidden=[16,8]", "logger=csv", save_dir, *more]

    single(tmp_path / "single", "cell", cell("single", "cell"))
    stacked(tmp_path / "stacked", {"cell": cell("stacked", "cell"), "other": cell("stacked", "other", "seed=5")})

    def files(root: Path) -> set[str]:
        return {str(p.relative_to(root)) for p in root.rglob("*") if p.is_file() and p.name != ".lock"}

    assert files(tmp_path / "single" / "cell") == files(tmp_path / "stacked" / "cell")
    assert "csv/metrics.csv" in files(tmp_path / "stacked" / "cell")

    def csv_log(root: Path) -> list[dict[str, str]]:
        with (root / "csv" / "metrics.csv").open() as f:
            return list(csv.DictReader(f))

    a, b = csv_log(tmp_path / "single" / "cell"), csv_log(tmp_path / "stacked" / "cell")
    assert set(a[0]) == set(b[0])
    losses = [float(r["train/loss"]) for r in a if r["train/loss"]]
    assert [float(r["train/loss"]) for r in b if r["train/loss"]] == pytest.approx(losses, rel=1e-10)


def test_the_probe_times_both_ways_and_leaves_no_trace(tmp_path, monkeypatch) -> None:
    """The timing steps change nothing: members trained after the probe equal members trained without it (the
    float64 equality with single runs is tests/stacked/test_stack.py's), and the record keeps both timings. A
    group whose whole stacked training is bound below the tolerance is not timed at all."""
    from clusterable.stacked import speed

    cells = IRIS_SEEDS
    short = stacked(tmp_path / "short", cells, speed_check=True)
    assert all(r["stacked"]["speed"] is None for r in short.values())  # a second at most: not worth timing
    monkeypatch.setattr(speed, "worth_timing", lambda bound_s, speed_check, compile: speed_check)  # even this short
    plain = stacked(tmp_path / "plain", cells)  # neither timed nor compiled
    probed = stacked(tmp_path / "probed", cells, speed_check=True)
    for name in cells:
        assert probed[name]["metrics"] == plain[name]["metrics"]
        timed = probed[name]["stacked"]["speed"]
        assert (
            timed["stacked_step_ms"] > 0
            and timed["single_step_ms"] > 0
            and timed["steps"] == probed[name]["timing"]["steps"]
        )
        assert plain[name]["stacked"]["speed"] is None


def test_a_compile_that_fails_leaves_the_step_eager_with_one_line(tmp_path: Path, monkeypatch, capsys) -> None:
    from clusterable.stacked import steps

    def broken(graphed: bool = False):
        def compiled(*args):
            raise RuntimeError("Inductor could not lower aten::foo\nits long traceback")

        return compiled

    monkeypatch.setattr(steps, "compiled_train_step", broken)
    cells = IRIS_SEEDS
    eager = stacked(tmp_path / "eager", cells)
    fallen = stacked(tmp_path / "fallen", cells, compile=True)
    said = [line for line in capsys.readouterr().out.splitlines() if "compile failed" in line]
    assert said == ["stacked: eager step: the compile failed (RuntimeError: Inductor could not lower aten::foo)"]
    for name in cells:
        assert fallen[name]["status"] == "ok" and fallen[name]["metrics"] == eager[name]["metrics"]
        assert fallen[name]["stacked"]["speed"]["compiled"] is False


def test_a_single_run_and_a_member_assemble_and_conclude_through_the_same_phases(tmp_path: Path, monkeypatch) -> None:
    """``run.phases`` is the one code path by which both widths assemble their parts and end their runs."""
    from clusterable.run import phases

    seen: list[tuple[str, str]] = []
    for name in ("assemble", "conclude"):
        original = getattr(phases, name)

        def spy(cfg, ctx, *args, _original=original, _name=name, **kwargs):
            seen.append((_name, Path(ctx.run_dir).parent.name))
            return _original(cfg, ctx, *args, **kwargs)

        monkeypatch.setattr(phases, name, spy)
    cells = {
        f"s{seed}": ["dataset=iris", "trainer.max_epochs=1", "loss=cce", "evaluator=[classification]", f"seed={seed}"]
        for seed in (0, 1)
    }
    single(tmp_path / "single", "s0", cells["s0"])
    stacked(tmp_path / "stacked", cells)
    assert sorted(seen) == sorted(
        [("assemble", "single"), ("conclude", "single")] + [("assemble", "stacked"), ("conclude", "stacked")] * 2
    )


def test_a_compiled_step_that_fails_during_training_goes_on_eager_with_one_line(
    tmp_path: Path, monkeypatch, capsys
) -> None:
    """A compiled (or graphed) step that fails after the probe (a recompile limit, a graph that cannot re-record)
    is taken again eager, and the rest of the training with it: one line, no traceback, the eager run's numbers."""
    from clusterable.stacked import speed, steps

    def timed_faster(times, step, device) -> None:  # the probe finds a compiled step faster, without a compile
        times.compiled_s, times.compile_s = times.stacked_s / 2, 0.0

    monkeypatch.setattr(speed, "_time_compiled", timed_faster)
    calls: list[int] = []

    def failing(graphed: bool = False):  # training's compiled step: the eager one, whose third call fails
        def step(*args):
            calls.append(1)
            if len(calls) == 3:
                raise RuntimeError("recompile limit reached\nits long traceback")
            return steps.eager_step(*args)

        return step

    monkeypatch.setattr(steps, "compiled_train_step", failing)
    cells = IRIS_SEEDS
    eager = stacked(tmp_path / "eager", cells)
    fallen = stacked(tmp_path / "fallen", cells, compile=True)
    said = [line for line in capsys.readouterr().err.splitlines() if "failed in epoch" in line]
    assert said == [
        "stacked: the compiled step failed in epoch 0 (RuntimeError: recompile limit reached); eager from here"
    ]
    for name in cells:
        assert fallen[name]["status"] == "ok" and fallen[name]["metrics"] == eager[name]["metrics"]
        assert fallen[name]["stacked"]["step"] == "eager" and eager[name]["stacked"]["step"] == "eager"


@pytest.mark.parametrize("compute_bound", [True, False])
def test_auto_compile_is_not_timed_for_a_compute_bound_step(tmp_path: Path, monkeypatch, compute_bound) -> None:
    """``compile=auto`` times a compiled step only where a single step is under ``COMPUTE_BOUND_S`` (a compile
    cost a CNN group about 30 s and was slower); a compute-bound group says why its step stays eager."""
    from clusterable.stacked import speed, steps

    monkeypatch.setattr(steps, "compiled_train_step", lambda graphed=False: steps.eager_step)  # no wait
    monkeypatch.setattr(speed, "worth_timing", lambda bound_s, speed_check, compile: True)
    monkeypatch.setattr(speed, "COMPILE_WORTH_S", 0.0)  # every training long enough to pay for a compile
    monkeypatch.setattr(speed, "COMPUTE_BOUND_S", 0.0 if compute_bound else math.inf)
    monkeypatch.setattr(speed, "_COMPILED", set())  # no shape compiled by an earlier test of this process
    cells = IRIS_SEEDS
    timed = [r["stacked"]["speed"] for r in stacked(tmp_path, cells, speed_check=True, compile="auto").values()]
    if compute_bound:
        assert all(t["compiled_step_ms"] is None for t in timed)
        assert all(t["compile_note"].startswith("eager step: a single step takes ") for t in timed)
        assert all(t["compile_note"].endswith(" ms, compute-bound: a compile does not pay") for t in timed)
    else:
        assert all(t["compiled_step_ms"] is not None for t in timed)
