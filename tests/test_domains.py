"""The domain table of what we hand on to other libraries (``clusterable.domains``): held to the libraries'
signatures, and tried as a new user would, at least three mistakes per argument group (optimizer, scheduler,
trainer, metric-learning loss, miner, logger, thread and worker counts, sweeper), each refused in one line naming the
key, the value and its domain, with the values that are right accepted. Most cases check a composed config in this
process; a few go through ``train.py`` (exit status 2, nothing recorded) and the run layer (recorded ``failed``)."""

from __future__ import annotations

import inspect
import re
from pathlib import Path

import pytest
import torch
from helpers.configs import composed, sweep_cells
from helpers.running import metrics_files
from hydra.core.hydra_config import HydraConfig

from clusterable import domains
from clusterable.config import CONFIG_DIR
from clusterable.domains import COUNTS, KEYS, KWARGS_TO, LIBRARY, UNUSABLE, problem
from clusterable.heads.pml import options

CORES = domains.available_cores()
QUICK = ["dataset=iris", "trainer.max_epochs=1", "trainer.enable_progress_bar=false", "logger=none"]
COSINE = "{_target_:pytorch_metric_learning.distances.CosineSimilarity}"
STEP_LR = ["+scheduler._target_=torch.optim.lr_scheduler.StepLR", "+scheduler._partial_=true"]


# ------------------------------------------------------------------------------------------------ the table


def arguments(path: str) -> set[str]:
    """The arguments the callable at ``path`` accepts: its signature's, its bases' where it passes ``**kwargs`` up
    (PML), and those of the callable it passes ``**kwargs`` to (``KWARGS_TO``)."""
    target = domains._import(path)
    assert target is not None, f"{path} does not import"
    found = options(target)
    if found is None:  # a function that takes **kwargs
        found = {n: None for n, p in inspect.signature(target).parameters.items() if p.kind == p.KEYWORD_ONLY}
    names = set(found)
    if path in KWARGS_TO:
        receiver = domains._import(KWARGS_TO[path])
        assert receiver is not None, f"{KWARGS_TO[path]} does not import"
        names |= set(inspect.signature(receiver).parameters)
    return names


@pytest.mark.parametrize("path", sorted(LIBRARY))
def test_the_table_declares_every_argument_of_each_callable_and_no_other(path: str) -> None:
    if path in KWARGS_TO:
        pytest.importorskip(KWARGS_TO[path].split(".")[0])
    declared, accepted = set(LIBRARY[path]), arguments(path)
    assert not declared - accepted, f"{path} has no argument {sorted(declared - accepted)}"
    assert not accepted - declared, f"{path}'s {sorted(accepted - declared)} have no domain in the table"


def test_our_counts_name_arguments_our_callables_have() -> None:
    for path, entry in COUNTS.items():
        params = inspect.signature(domains._import(path)).parameters
        assert set(entry) <= set(params), (path, sorted(set(entry) - set(params)))
    from clusterable.run.checks import TOP_LEVEL

    assert set(KEYS) <= set(TOP_LEVEL)


def test_every_torch_optimizer_and_scheduler_is_in_the_table() -> None:
    optimizers = {
        f"torch.optim.{name}"
        for name, obj in vars(torch.optim).items()
        if inspect.isclass(obj) and issubclass(obj, torch.optim.Optimizer) and obj is not torch.optim.Optimizer
    }
    assert optimizers and not optimizers - set(LIBRARY), sorted(optimizers - set(LIBRARY))
    schedulers = torch.optim.lr_scheduler
    base = (schedulers.LRScheduler, schedulers.ReduceLROnPlateau)
    found = {
        f"torch.optim.lr_scheduler.{name}"
        for name, obj in vars(schedulers).items()
        if inspect.isclass(obj)
        and issubclass(obj, base)
        and not name.startswith("_")
        and obj is not base[0]
        and obj.__module__.startswith("torch.optim")
    }
    missing = found - set(LIBRARY) - set(UNUSABLE)
    assert found and not missing, sorted(missing)
    assert all(domains._import(path) is not None for path in UNUSABLE)


def test_every_library_callable_our_configs_select_is_in_the_table() -> None:
    """Every ``_target_`` of torch, Lightning or pytorch-metric-learning in the configs (and in their comments:
    ``loss/pml.yaml`` names CircleLoss as the example), and the sweepers Hydra's configs select."""
    library = re.compile(r"\b((?:torch|lightning|pytorch_metric_learning)\.[\w.]*[A-Z]\w*)")
    named = {m for p in Path(CONFIG_DIR).rglob("*.yaml") for m in library.findall(p.read_text())}
    named |= {
        "hydra_plugins.clusterable_sweeper.cell_sweeper.CellSweeper",
        "hydra_plugins.clusterable_sweeper.optuna_sweeper.OptunaSweeper",
    }
    assert "pytorch_metric_learning.losses.CircleLoss" in named and "lightning.Trainer" in named
    assert {path for path in named if domains._entry(path) is None} == set()


def test_the_domains_say_what_they_accept() -> None:
    unit = domains.number(0, 1, open_high=True)
    assert unit.describe() == "a number in [0, 1)" and unit.accepts(0) and unit.accepts(0.99)
    assert not any(unit.accepts(v) for v in (1, 1.0, -0.1, True, "0.5", None, float("nan")))
    assert not domains.number().accepts(float("inf")) and domains.number().describe() == "a finite number"
    count = domains.integer(1, null=True)
    assert count.describe() == "an integer >= 1 or null" and count.accepts(None) and count.accepts(3)
    assert not any(count.accepts(v) for v in (0, 2.0, True, "3"))
    flag = domains.boolean()
    assert flag.accepts(False) and not any(flag.accepts(v) for v in ("no", 0, 1, None))
    kinds = domains.choice("all", "hard")
    assert kinds.accepts("hard") and not kinds.accepts("semi-hard") and kinds.describe() == "one of 'all', 'hard'"
    assert domains.choice(1).accepts(1) and not domains.choice(1).accepts(True)  # 1 == True in Python
    pair = domains.listed(unit, 2)
    assert pair.accepts([0.9, 0.999]) and not pair.accepts([0.9]) and not pair.accepts([0.9, 1.0])
    threads = domains.cores(null=True)
    assert threads.accepts(CORES) and threads.accepts(None) and not threads.accepts(CORES + 1)
    assert not threads.accepts(0)


# ------------------------------------------------------------------------------------------------ the cases

# (group, overrides, the line expected, whole or its start up to "got ...") per argument group.
REFUSED = [
    # optimizers
    (
        "optimizer",
        ["optimizer=sgd", "optimizer.momentum=1.5"],
        "optimizer.momentum must be a number in [0, 1), got 1.5 (torch.optim.SGD's momentum)",
    ),
    (
        "optimizer",
        ["optimizer=sgd", "optimizer.momentum=-0.1"],
        "optimizer.momentum must be a number in [0, 1), got -0.1",
    ),
    (
        "optimizer",
        ["+optimizer.betas=[0.9,1.0]"],
        "optimizer.betas must be a list of 2 values, each a number in [0, 1), got [0.9, 1.0] "
        "(torch.optim.Adam's betas)",
    ),
    (
        "optimizer",
        ["optimizer=adamw", "optimizer.weight_decay=-0.01"],
        "optimizer.weight_decay must be a number >= 0, got -0.01 (torch.optim.AdamW's weight_decay)",
    ),
    ("optimizer", ["+optimizer.eps=0"], "optimizer.eps must be a number > 0, got 0 (torch.optim.Adam's eps)"),
    (
        "optimizer",
        ["optimizer=sgd", "optimizer.nesterov=yes"],
        "optimizer.nesterov must be a boolean (true or false), got 'yes' (torch.optim.SGD's nesterov)",
    ),
    (
        "optimizer",
        ["optimizer=sgd", "optimizer.nesterov=true", "optimizer.momentum=0"],
        "optimizer: nesterov=true needs momentum > 0 and dampening 0 (torch.optim.SGD), got momentum=0, dampening=0",
    ),
    (
        "optimizer",
        ["optimizer._target_=torch.optim.RMSprop", "+optimizer.alpha=1.0"],
        "optimizer.alpha must be a number in [0, 1), got 1.0 (torch.optim.RMSprop's alpha)",
    ),
    (
        "optimizer",
        ["optimizer._target_=torch.optim.Adamm"],
        "optimizer._target_: torch.optim has no 'Adamm' (did you mean torch.optim.Adam?)",
    ),
    # schedulers
    (
        "scheduler",
        ["scheduler=warmcos", "scheduler.warmup_steps=-5"],
        "scheduler.warmup_steps must be an integer >= 0, got -5 (clusterable.schedules.warmcos's warmup_steps)",
    ),
    (
        "scheduler",
        ["scheduler=warmcos", "scheduler.warmup_steps=1.5"],
        "scheduler.warmup_steps must be an integer >= 0, got 1.5",
    ),
    (
        "scheduler",
        [*STEP_LR, "+scheduler.step_size=0"],
        "scheduler.step_size must be an integer >= 1, got 0 (torch.optim.lr_scheduler.StepLR's step_size)",
    ),
    (
        "scheduler",
        [*STEP_LR, "+scheduler.step_size=10", "+scheduler.gamma=-0.5"],
        "scheduler.gamma must be a number > 0, got -0.5",
    ),
    (
        "scheduler",
        [*STEP_LR, "+scheduler.step_size=10", "+scheduler.last_epoch=5"],
        "scheduler.last_epoch must be -1 (a run starts its schedule at step 0), got 5",
    ),
    (
        "scheduler",
        ["+scheduler._target_=torch.optim.lr_scheduler.LambdaLR", "+scheduler._partial_=true"],
        "scheduler._target_=torch.optim.lr_scheduler.LambdaLR cannot be driven by a config: its lr_lambda is a Python "
        "function; write a schedule function such as clusterable.schedules.warmcos",
    ),
    (
        "scheduler",
        [
            "+scheduler._target_=torch.optim.lr_scheduler.CyclicLR",
            "+scheduler._partial_=true",
            "+scheduler.base_lr=0.1",
            "+scheduler.max_lr=0.01",
        ],
        "scheduler: base_lr=0.1 must be below max_lr=0.01 (torch.optim.lr_scheduler.CyclicLR: the rate cycles between "
        "them)",
    ),
    (
        "scheduler",
        [
            "+scheduler._target_=torch.optim.lr_scheduler.OneCycleLR",
            "+scheduler._partial_=true",
            "+scheduler.max_lr=0.01",
            "+scheduler.pct_start=1.5",
        ],
        "scheduler.pct_start must be a number in (0, 1), got 1.5",
    ),
    # Lightning's Trainer
    ("trainer", ["trainer.precision=17"], "trainer.precision must be one of 64, 32, 16, "),
    ("trainer", ["trainer.devices=0"], "trainer.devices must be a number of devices (>= 1, or -1 for all), "),
    ("trainer", ["trainer.accelerator=gpux"], "trainer.accelerator must be one of 'auto', "),
    (
        "trainer",
        ["+trainer.gradient_clip_val=-1"],
        "trainer.gradient_clip_val must be a number >= 0 or null, got -1 (lightning.Trainer's gradient_clip_val)",
    ),
    (
        "trainer",
        ["+trainer.limit_train_batches=1.5"],
        "trainer.limit_train_batches must be an integer >= 0, or a number in [0, 1], or null (all), got 1.5",
    ),
    (
        "trainer",
        ["+trainer.accumulate_grad_batches=0"],
        "trainer.accumulate_grad_batches must be an integer >= 1, got 0",
    ),
    (
        "trainer",
        ["trainer.enable_progress_bar=no"],
        "trainer.enable_progress_bar must be a boolean (true or false) or null, got 'no'",
    ),
    ("trainer", ["+trainer.min_epochs=50"], "trainer: min_epochs=50 exceeds max_epochs=30 (lightning.Trainer)"),
    ("trainer", ["trainer.max_epochs=0"], "trainer.max_epochs must be an integer >= 1, got 0"),
    ("trainer", ["+trainer.max_time=1h"], "trainer.max_time must be a duration 'DD:HH:MM:SS' or "),
    ("trainer", ["+trainer.max_epoch=3"], "trainer.max_epoch is not an option of Trainer (did you mean max_epochs?)"),
    # pytorch-metric-learning losses
    (
        "pml loss",
        ["loss=triplet", "loss.loss.margin=-0.1"],
        "loss.loss.margin must be a number >= 0, got -0.1 (pytorch_metric_learning.losses.TripletMarginLoss's margin)",
    ),
    (
        "pml loss",
        ["loss=contrastive", "loss.loss.pos_margin=0.9"],
        "loss.loss: the margins of pytorch_metric_learning.losses.ContrastiveLoss cross (a distance: it needs "
        "pos_margin < neg_margin), got pos_margin=0.9, neg_margin=0.5409",
    ),
    (
        "pml loss",
        ["loss=contrastive", f"+loss.loss.distance={COSINE}"],
        "loss.loss: the margins of pytorch_metric_learning.losses.ContrastiveLoss cross (a similarity: it needs "
        "pos_margin > neg_margin), got pos_margin=0.2652, neg_margin=0.5409",
    ),
    ("pml loss", ["loss=supcon", "loss.loss.temperature=0"], "loss.loss.temperature must be a number > 0, got 0"),
    ("pml loss", ["loss=arcface", "loss.loss.margin=200"], "loss.loss.margin must be a number in [0, 180), got 200"),
    (
        "pml loss",
        ["loss=nca", "loss.loss.distance._target_=pytorch_metric_learning.reducers.MeanReducer"],
        "loss.loss.distance must be a config node naming a subclass of pytorch_metric_learning.distances.BaseDistance",
    ),
    (
        "pml loss",
        ["loss=nca", "+loss.loss.distance.is_inverted=false"],
        "loss.loss.distance.is_inverted must be true (the similarity sets it itself), got False",
    ),
    (
        "pml loss",
        ["loss=proxy_anchor", "+loss.loss.num_classes=9"],
        "loss.loss.num_classes must be null (a placeholder: the head passes the run's num_classes), got 9",
    ),
    ("pml loss", ["loss=multi_similarity", "loss.loss.base=abc"], "loss.loss.base must be a finite number, got 'abc'"),
    (
        "pml loss",
        ["loss=pml", "+loss.loss.collect_stats=yes"],
        "loss.loss.collect_stats must be a boolean (true or false) or null, got 'yes'",
    ),
    # pytorch-metric-learning miners
    (
        "pml miner",
        ["loss=triplet", "loss.miner.type_of_triplets=semi-hard"],
        "loss.miner.type_of_triplets must be one of 'all', 'hard', 'semihard', 'easy', got 'semi-hard' "
        "(pytorch_metric_learning.miners.TripletMarginMiner's type_of_triplets)",
    ),
    ("pml miner", ["loss=triplet", "loss.miner.margin=-1"], "loss.miner.margin must be a number >= 0, got -1"),
    (
        "pml miner",
        ["loss=multi_similarity", "loss.miner.epsilon=-0.1"],
        "loss.miner.epsilon must be a number >= 0, got -0.1",
    ),
    (
        "pml miner",
        ["loss=triplet", "+loss.miner.typ=hard"],
        "loss.miner.typ is not an option of TripletMarginMiner; accepted: ",
    ),
    (
        "pml miner",
        ["loss=triplet", "loss.miner._target_=pytorch_metric_learning.miners.TripletMarginMinr"],
        "loss.miner._target_: pytorch_metric_learning.miners has no 'TripletMarginMinr' (did you mean "
        "pytorch_metric_learning.miners.TripletMarginMiner?)",
    ),
    (
        "pml miner",
        [
            "loss=pml",
            "loss.miner={_target_:pytorch_metric_learning.miners.BatchEasyHardMiner,_partial_:true,"
            "pos_strategy:hardest}",
        ],
        "loss.miner.pos_strategy must be one of 'easy', 'semihard', 'hard', 'all', got 'hardest'",
    ),
    (
        "pml miner",
        [
            "loss=pml",
            "loss.miner={_target_:pytorch_metric_learning.miners.PairMarginMiner,_partial_:true,"
            "pos_margin:0.9,neg_margin:0.1}",
        ],
        "loss.miner: the margins of pytorch_metric_learning.miners.PairMarginMiner cross",
    ),
    # loggers
    (
        "logger",
        ["logger=wandb", "logger.wandb.offline=no"],
        "logger.wandb.offline must be a boolean (true or false), got 'no' "
        "(lightning.pytorch.loggers.WandbLogger's offline)",
    ),
    (
        "logger",
        ["logger=wandb", "+logger.wandb.mode=offlne"],
        "logger.wandb.mode must be one of 'online', 'offline', 'disabled', 'shared' or null, got 'offlne'",
    ),
    (
        "logger",
        ["logger=wandb", "logger.wandb.log_model=sometimes"],
        "logger.wandb.log_model must be a boolean (true or false), or one of 'all', got 'sometimes'",
    ),
    (
        "logger",
        ["logger=wandb", "+logger.wandb.tags=abc"],
        "logger.wandb.tags must be a list of values, each a string or null",
    ),
    (
        "logger",
        ["+logger.csv.flush_logs_every_n_steps=0"],
        "logger.csv.flush_logs_every_n_steps must be an integer >= 1, got 0 (lightning.pytorch.loggers.CSVLogger's "
        "flush_logs_every_n_steps)",
    ),
    ("logger", ["+logger.csv.nmae=x"], "logger.csv.nmae is not an option of CSVLogger (did you mean name?)"),
    # thread and worker counts
    (
        "threads",
        [f"torch_threads={CORES + 1}"],
        f"torch_threads must be an integer in [1, {CORES}] (the cores this process may use) or null, got {CORES + 1}",
    ),
    ("threads", ["torch_threads=0"], "torch_threads must be an integer in [1, "),
    ("threads", ["torch_threads=2.0"], "torch_threads must be an integer in [1, "),
    (
        "threads",
        [f"evaluator.clustering.num_threads={CORES + 1}"],
        f"evaluator.clustering.num_threads must be an integer in [1, {CORES}] (the cores this process may use) or "
        f"null, got {CORES + 1} (clusterable.evaluation.clustering.ClusterMetrics's num_threads)",
    ),
    (
        "threads",
        ["evaluator=[probes]", "evaluator.probes.num_threads=0"],
        "evaluator.probes.num_threads must be an integer in [1, ",
    ),
    (
        "threads",
        ["dataset=cub200", f"+dataset.decode_workers={CORES + 1}"],
        f"dataset.decode_workers must be an integer in [0, {CORES}] (the cores this process may use), got {CORES + 1}",
    ),
    # sweepers
    (
        "sweeper",
        ["hparams_search=corel_fashion", "hydra.sweeper.seed=-1"],
        "hydra.sweeper.seed must be an integer in [0, 4294967295], got -1",
    ),
    (
        "sweeper",
        ["hparams_search=corel_fashion", "hydra.sweeper.seed=1.5"],
        "hydra.sweeper.seed must be an integer in [0, 4294967295], got 1.5",
    ),
    (
        "sweeper",
        ["hparams_search=corel_fashion", "hydra.sweeper.storage=5"],
        "hydra.sweeper.storage must be a string or null, got 5",
    ),
    (
        "sweeper",
        ["hydra.sweeper.max_batch_size=0"],
        "hydra.sweeper.max_batch_size must be an integer >= 1 or null, got 0",
    ),
]

ACCEPTED = [
    ("optimizer", ["optimizer=sgd", "optimizer.momentum=0.95", "optimizer.nesterov=true"]),
    ("optimizer", ["+optimizer.betas=[0.5,0.9]", "+optimizer.amsgrad=true"]),
    ("optimizer", ["optimizer._target_=torch.optim.RMSprop", "+optimizer.alpha=0.9", "+optimizer.centered=true"]),
    ("scheduler", ["scheduler=warmcos", "scheduler.warmup_steps=0"]),
    ("scheduler", [*STEP_LR, "+scheduler.step_size=5", "+scheduler.gamma=0.5"]),
    (
        "scheduler",
        [
            "+scheduler._target_=torch.optim.lr_scheduler.OneCycleLR",
            "+scheduler._partial_=true",
            "+scheduler.max_lr=0.01",
        ],
    ),
    ("trainer", ["trainer.precision=bf16-mixed", "trainer.devices=-1", "+trainer.limit_train_batches=0.5"]),
    ("trainer", ["trainer.accelerator=gpu", "trainer.devices='0,1'", "+trainer.max_time=00:01:00:00"]),
    ("trainer", ["+trainer.gradient_clip_val=1.0", "+trainer.deterministic=warn", "+trainer.min_epochs=3"]),
    # MLRC's CUB200 optimum puts the positive margin below 0: a distance pulls every positive pair, a legitimate choice
    ("pml loss", ["loss=contrastive", "loss.loss.pos_margin=-0.2", "loss.loss.neg_margin=0.3841"]),
    (
        "pml loss",
        ["loss=contrastive", f"+loss.loss.distance={COSINE}", "loss.loss.pos_margin=0.9", "loss.loss.neg_margin=0.4"],
    ),
    ("pml loss", ["loss=triplet", "loss.loss.margin=0", "+loss.loss.triplets_per_anchor=5"]),
    ("pml miner", ["loss=triplet", "loss.miner.type_of_triplets=hard"]),
    ("pml miner", ["loss=multi_similarity", "loss.miner.epsilon=0"]),
    (
        "pml miner",
        ["loss=pml", "loss.miner={_target_:pytorch_metric_learning.miners.BatchEasyHardMiner,_partial_:true}"],
    ),
    (
        "logger",
        ["logger=wandb", "logger.wandb.log_model=all", "+logger.wandb.mode=disabled", "+logger.wandb.tags=[a,b]"],
    ),
    ("logger", ["logger=none"]),
    ("logger", ["+logger.csv.flush_logs_every_n_steps=10"]),
    ("threads", [f"torch_threads={CORES}"]),
    ("threads", ["torch_threads=null", "evaluator.clustering.num_threads=null"]),
    ("threads", ["dataset=cub200", "+dataset.decode_workers=0"]),
    ("sweeper", ["hparams_search=corel_fashion", "hydra.sweeper.seed=7", "hydra.sweeper.direction=minimize"]),
]


@pytest.mark.parametrize(("group", "overrides", "expected"), REFUSED)
def test_a_value_outside_its_domain_is_one_line_naming_key_value_and_domain(
    tmp_path: Path, group: str, overrides: list[str], expected: str
) -> None:
    found = problem(composed(tmp_path, *overrides))
    assert found is not None and found.startswith(expected) and "\n" not in found, (group, found)


@pytest.mark.parametrize(("group", "overrides"), ACCEPTED)
def test_values_inside_their_domains_pass(tmp_path: Path, group: str, overrides: list[str]) -> None:
    assert problem(composed(tmp_path, *overrides)) is None, group


def test_at_least_three_mistakes_per_group() -> None:
    counts = {g: sum(1 for group, *_ in REFUSED if group == g) for g, *_ in REFUSED}
    assert len(counts) == 8 and min(counts.values()) >= 3, counts


def test_the_thread_count_from_the_environment_names_the_variable(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("CLUSTERABLE_TORCH_THREADS", str(CORES + 1))
    found = problem(composed(tmp_path))
    assert found == (
        f"torch_threads must be an integer in [1, {CORES}] (the cores this process may use) or null, got {CORES + 1} "
        f"(from $CLUSTERABLE_TORCH_THREADS={CORES + 1})"
    )


GROUPS_HANDED_ON = ("optimizer", "scheduler", "trainer", "logger", "loss", "evaluator", "hparams_search")


@pytest.mark.catalogue
@pytest.mark.parametrize("group", GROUPS_HANDED_ON)
def test_every_option_of_our_configs_lies_in_its_domains(tmp_path: Path, group: str) -> None:
    root = Path(CONFIG_DIR) / group
    names = sorted(str(p.relative_to(root).with_suffix("")) for p in root.glob("*.yaml"))
    for name in names:
        choice = f"{group}=[{name}]" if group == "evaluator" else f"{group}={name}"
        extra = ["model=identity"] if group == "loss" else []
        assert problem(composed(tmp_path, choice, *extra)) is None, name


EXPERIMENTS = sorted(
    str(p.relative_to(Path(CONFIG_DIR) / "experiment").with_suffix(""))
    for p in (Path(CONFIG_DIR) / "experiment").rglob("*.yaml")
)


@pytest.mark.slow  # 415 configs, about 5 minutes on 2 busy cores
@pytest.mark.parametrize("name", EXPERIMENTS)
def test_every_cell_of_every_experiment_lies_in_its_domains(tmp_path: Path, name: str) -> None:
    """No paper's grid is refused: a few cells that hold every swept value, each composed as its run is."""
    cfg = composed(tmp_path, f"experiment={name}")
    assert problem(cfg) is None, name
    seen: set[str] = set()
    for cell in sweep_cells(cfg):
        if not set(cell) <= seen:
            seen |= set(cell)
            assert problem(composed(tmp_path, f"experiment={name}", *cell)) is None, (name, cell)


@pytest.mark.parametrize(
    ("space", "expected"),
    [
        (
            "{optimizer.momentum:{type:float,low:0.5,high:1.5}}",
            "hydra.sweeper.search_space.optimizer.momentum searches [0.5, 1.5], outside its domain: optimizer.momentum "
            "must be a number in [0, 1), got 1.5 (torch.optim.SGD's momentum)",
        ),
        (
            "{optimizer.nesterov:{type:categorical,choices:[true,maybe]}}",
            "hydra.sweeper.search_space.optimizer.nesterov searches its choices, outside its domain: "
            "optimizer.nesterov must be a boolean (true or false), got 'maybe'",
        ),
        (
            "{torch_threads:{type:int,low:1,high:512}}",
            "hydra.sweeper.search_space.torch_threads searches [1, 512], outside its domain: torch_threads must be an "
            "integer in [1, ",
        ),
        (
            "{optimizer.momentum:{type:float,low:0.5,high:0.99},optimizer.lr:{type:float,low:1e-4,high:0.1,log:true}}",
            None,
        ),
    ],
)
def test_a_search_range_outside_the_domain_is_refused_before_any_trial(
    tmp_path: Path, space: str, expected: str | None
) -> None:
    cfg = composed(tmp_path, "hparams_search=corel_fashion", "optimizer=sgd", f"++hydra.sweeper.search_space={space}")
    found = domains.search_space_problem(cfg)
    assert found == expected if expected is None else found.startswith(expected), found


# ------------------------------------------------------------------------------------------------ train.py


def test_train_py_refuses_before_any_folder_is_made(train) -> None:
    result = train(*QUICK, "optimizer=sgd", "optimizer.momentum=1.5")
    assert result.code == 2, result
    assert result.error_lines() == [
        "error: optimizer.momentum must be a number in [0, 1), got 1.5 (torch.optim.SGD's momentum)"
    ]
    assert "Traceback" not in result.out + result.err
    assert not metrics_files(train.outputs) and not (train.outputs / "runs").exists()


def test_a_sweep_with_one_cell_outside_its_domain_is_refused_before_any_cell_runs(train) -> None:
    result = train("-m", *QUICK, "loss=triplet", "loss.miner.type_of_triplets=semihard,semi-hard")
    assert result.code == 2, result
    (line,) = result.error_lines()
    expected = "error: loss.miner.type_of_triplets must be one of 'all', 'hard', 'semihard', 'easy', got 'semi-hard'"
    assert line.startswith(expected) and line.endswith("the whole sweep is refused: no cell ran)"), line
    assert "sweep:" not in result.out and not metrics_files(train.outputs)


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        (
            ["hydra.sweeper.seed=-1"],
            "error: hydra.sweeper.seed must be an integer in [0, 4294967295], got -1 "
            "(hydra_plugins.clusterable_sweeper.optuna_sweeper.OptunaSweeper's seed)",
        ),
        (
            ["optimizer=sgd", "++hydra.sweeper.search_space={optimizer.momentum:{type:float,low:0.5,high:1.5}}"],
            "error: hydra.sweeper.search_space.optimizer.momentum searches [0.5, 1.5], outside its domain: "
            "optimizer.momentum must be a number in [0, 1), got 1.5 (torch.optim.SGD's momentum)",
        ),
    ],
)
def test_a_search_outside_the_domains_is_refused_before_its_study(train, given: list[str], expected: str) -> None:
    result = train("-m", *QUICK, "hparams_search=corel_fashion", "name=search/bad", *given)
    assert result.code == 2, result
    assert result.error_lines() == [expected]
    assert not list(train.outputs.rglob("optuna.db")) and not metrics_files(train.outputs)


def test_a_torch_scheduler_runs_stepped_per_optimizer_step(train) -> None:
    result = train(*QUICK, *STEP_LR, "+scheduler.step_size=1", "+scheduler.gamma=0.5")
    assert result.code == 0, result.err
    (path,) = metrics_files(train.outputs)
    assert '"status": "ok"' in path.read_text()


# ------------------------------------------------------------------------------------------------ the run layer


def test_the_run_layer_records_a_value_outside_its_domain_as_failed(tmp_path: Path) -> None:
    """What reaches a run without train.py's check (an Optuna trial's searched value, a test): recorded failed,
    nothing trained."""
    from clusterable.run import RunContext, run

    cfg = composed(tmp_path, *QUICK, "loss=triplet", "loss.loss.margin=-0.5")
    ctx = RunContext.from_hydra(cfg.hydra, tmp_path / "run")
    del cfg.hydra
    state = HydraConfig.instance().cfg
    try:
        payload = run(cfg, ctx).to_dict()
    finally:
        HydraConfig.instance().cfg = state
    assert payload["status"] == "failed" and payload["timing"] == {}
    assert payload["error"].startswith("loss.loss.margin must be a number >= 0, got -0.5")
