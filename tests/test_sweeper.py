"""The sweeper of ``train.py -m`` (src/hydra_plugins/clusterable_sweeper): a union of grids, each combined with the
shared params and the command line; bad grids refused in one line."""

from __future__ import annotations

import pytest
from helpers.running import all_metrics
from hydra.core.override_parser.overrides_parser import OverridesParser

from hydra_plugins.clusterable_sweeper.cell_sweeper import checked_grids, expand

PARSER = OverridesParser.create()
GRIDS = {
    "images": {"dataset": "mnist,fashion_mnist", "model": "ffnn,cnn"},
    "text": {"dataset": "agnews8", "model": "text_ffnn,text_cnn"},
}


def cells(params: dict[str, str], grids, *command_line: str) -> list[list[str]]:
    parsed = PARSER.parse_overrides([f"{k}={v}" for k, v in params.items()])
    return expand(parsed, checked_grids(grids), PARSER.parse_overrides(list(command_line)), PARSER)


def as_dicts(out: list[list[str]]) -> list[dict[str, str]]:
    return [dict(o.split("=", 1) for o in cell) for cell in out]


def test_the_sweep_is_each_grid_times_the_params_in_order():
    out = as_dicts(cells({"loss": "cce,center"}, GRIDS))
    pairs = [(c["dataset"], c["model"]) for c in out]
    # 4 image settings and 2 text ones, each with both losses; no image model ever meets the text dataset.
    assert len(out) == 12 and {c["loss"] for c in out} == {"cce", "center"}
    assert set(pairs) == {
        ("mnist", "ffnn"),
        ("mnist", "cnn"),
        ("fashion_mnist", "ffnn"),
        ("fashion_mnist", "cnn"),
        ("agnews8", "text_ffnn"),
        ("agnews8", "text_cnn"),
    }
    assert [p[0] for p in pairs[:8]].count("agnews8") == 0  # the images grid first, as written


def test_a_grid_key_replaces_the_params_and_the_command_line_replaces_both():
    out = as_dicts(cells({"loss": "cce", "dataset": "digits"}, {"a": {"dataset": "iris"}}))
    assert out == [{"loss": "cce", "dataset": "iris"}]
    out = as_dicts(cells({"loss": "cce", "seed": "0,1"}, GRIDS, "seed=5", "loss=center"))
    assert {(c["loss"], c["seed"]) for c in out} == {("center", "5")} and len(out) == 6


@pytest.mark.parametrize(
    "given, pairs",
    [
        # A value goes to the grids that hold it ...
        (["dataset=agnews8"], [("agnews8", "text_ffnn"), ("agnews8", "text_cnn")]),
        (["dataset=mnist"], [("mnist", "ffnn"), ("mnist", "cnn")]),
        (["model=cnn"], [("mnist", "cnn"), ("fashion_mnist", "cnn")]),
        (["dataset=mnist,agnews8", "model=cnn,text_cnn"], [("mnist", "cnn"), ("agnews8", "text_cnn")]),
        # ... a value no grid holds to the first grid that sweeps its key.
        (["dataset=digits"], [("digits", "ffnn"), ("digits", "cnn")]),
        (["dataset=digits", "model=ffnn"], [("digits", "ffnn")]),
        (["dataset=digits,agnews8", "model=text_cnn"], [("agnews8", "text_cnn")]),
        (["model=text_cnn", "dataset=digits"], [("digits", "text_cnn")]),
    ],
)
def test_command_line_values_go_to_the_grids_that_hold_them(given, pairs):
    out = as_dicts(cells({"loss": "cce"}, GRIDS, *given))
    assert [(c["dataset"], c["model"]) for c in out] == pairs and all(c["loss"] == "cce" for c in out)


def test_a_null_grid_is_dropped_and_no_grids_is_the_plain_product():
    out = as_dicts(cells({"loss": "cce,center"}, {**GRIDS, "text": None}))
    assert len(out) == 8 and "agnews8" not in {c["dataset"] for c in out}
    assert as_dicts(cells({"loss": "cce,center"}, None, "seed=0,1")) == [
        {"loss": "cce", "seed": "0"},
        {"loss": "cce", "seed": "1"},
        {"loss": "center", "seed": "0"},
        {"loss": "center", "seed": "1"},
    ]


@pytest.mark.parametrize(
    "grids, message",
    [
        ([1, 2], "hydra.sweeper.grids must map grid names to {key: values}, got [1, 2]"),
        ({"a": "loss=cce"}, "hydra.sweeper.grids.a must be a non-empty {key: values} mapping"),
        ({"a": {}}, "hydra.sweeper.grids.a must be a non-empty {key: values} mapping"),
        (
            {"a": {"loss": ["cce", "center"]}},
            "hydra.sweeper.grids.a.loss must be a value or a comma-separated",
        ),
        ({"a": {"loss": None}}, "hydra.sweeper.grids.a.loss must be a value or a comma-separated"),
    ],
)
def test_bad_grids_are_refused_in_one_line(grids, message):
    with pytest.raises(ValueError) as e:
        checked_grids(grids)
    assert str(e.value).startswith(message) and "\n" not in str(e.value)


@pytest.mark.parametrize(
    "values, hint",
    [
        (
            ["cce", "center"],
            'to sweep its items write loss: "cce,center", to give it as one list quote it: loss: "[cce,center]"',
        ),
        ([500, 500], 'to sweep its items write loss: "500,500", to give it as one list quote it: loss: "[500,500]"'),
        ({"p": 1}, 'to give it as one value quote it: loss: "{p:1}"'),
    ],
)
def test_an_unquoted_list_in_a_grid_says_how_to_quote_it(values, hint):
    with pytest.raises(ValueError) as e:
        checked_grids({"a": {"loss": values}})
    assert str(e.value).endswith(hint), str(e.value)


QUICK = ["trainer.max_epochs=1", "trainer.enable_progress_bar=false", "evaluator=[classification]"]


def test_train_sweeps_grids_from_the_command_line(train):
    result = train("-m", "hydra.sweeper.grids={a:{loss:cce},b:{loss:center,seed:'0,1'}}", *QUICK)
    assert result.code == 0 and "sweep: 3 ok, 0 failed, 0 skipped" in result.out, result
    runs = {
        tuple(sorted(o for o in m["overrides"] if o.startswith(("loss=", "seed=")))) for m in all_metrics(train.outputs)
    }
    assert runs == {("loss=cce",), ("loss=center", "seed=0"), ("loss=center", "seed=1")}, runs
    assert all(m["status"] == "ok" for m in all_metrics(train.outputs))


def test_train_refuses_a_bad_grid_in_one_line(train):
    result = train("-m", "hydra.sweeper.grids=[1,2]", *QUICK)
    assert result.code == 2 and result.err.strip() == (
        "error: hydra.sweeper.grids must map grid names to {key: values}, got [1, 2]"
    )
    assert not train.outputs.exists() or not any(train.outputs.rglob("metrics.json"))


@pytest.mark.parametrize(
    "override, message",
    [
        ("hydra.sweeper.grids.txt=null", "error: hydra.sweeper.grids.txt is not a key of the config"),
        ("hydra.sweeper.param.seed=0", "error: hydra.sweeper.param.seed is not a key of the config"),
        # the experiment trains stacked (hydra/launcher=stacked): its option is n_jobs, not joblib's name of another
        ("hydra.launcher.pre_dispatch=2", "error: hydra.launcher.pre_dispatch is not a key of the config"),
        ("hydra.launcher.max_member=2", "error: hydra.launcher.max_member is not a key of the config"),
        ("--cfg=job", "error: Only one of --run, --multirun, --cfg"),
    ],
)
def test_a_wrong_sweep_setting_is_one_line_before_anything_runs(train, override, message):
    result = train("-m", "experiment=corel/digits_table2", "debug=smoke", override)
    assert result.code == 2 and result.err.startswith(message) and result.err.count("\n") == 1, result
    assert not train.outputs.exists() or not any(train.outputs.rglob("metrics.json"))


def test_a_launcher_value_of_the_wrong_type_is_one_line_naming_its_key(train):
    result = train("-m", "hydra/launcher=joblib", "hydra.launcher.n_jobs=two", "trainer.max_epochs=1")
    assert result.code == 2 and result.error_lines() == [
        "error: Value 'two' of type 'str' could not be converted to Integer (hydra.launcher.n_jobs)"
    ], result
    assert "sweep:" not in result.out  # refused before the sweep: no summary of nothing


def _loader_and_master(*command_line: str):
    """Hydra's config loader over the package's configs and the sweep's master config of ``command_line``."""
    from hydra import initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra
    from hydra.types import RunMode

    from clusterable.config import CONFIG_DIR

    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base="1.3"):
        loader = GlobalHydra.instance().config_loader()
        master = loader.load_configuration("train", list(command_line), run_mode=RunMode.MULTIRUN)
    return loader, master


@pytest.mark.parametrize(
    ("command_line", "cells", "groups"),
    [  # csrl/fig2's values (task, lr, seed) across two groups; COREL's λ with a +key and a Hydra setting
        (
            ["experiment=csrl/fig2"],
            [
                [f"dataset={d}", "loss=ptae", f"protocol.task={t}", f"optimizer.lr={lr}", f"seed={s}"]
                for d in ("penguins", "lines_3d")
                for t in ("clustering", "denoising")
                for lr in (0.001, 0.1)
                for s in (0, 3)
            ],
            2,
        ),
        (
            ["experiment=corel/digits_table1", "+dataset.fake_size=50", "hydra/launcher=stacked"],
            [
                ["loss=gaussian_corel", f"loss.lam={lam}", f"seed={s}", "dataset.source=fake"]
                for lam in (0.1, 0.9)
                for s in (0, 1)
            ]
            + [["loss=cce", "loss.lam=0.5", "seed=0", "dataset.source=fake"]],
            1,
        ),
    ],
)
def test_a_cell_derived_from_its_sibling_s_config_is_the_config_hydra_composes(command_line, cells, groups):
    from omegaconf import OmegaConf

    from hydra_plugins.clusterable_sweeper.siblings import SiblingConfigs

    loader, master = _loader_and_master(*command_line)
    siblings = SiblingConfigs(loader, master)
    for cell in cells:
        cell = [*command_line[:1], *cell]  # a sweep's cell holds the command line's experiment
        try:
            composed = OmegaConf.to_yaml(loader.load_sweep_config(master_config=master, sweep_overrides=cell))
        except Exception as e:  # cce has no loss.lam: the sibling says what Hydra says
            with pytest.raises(type(e), match="loss.lam"):
                siblings.load(cell)
            continue
        assert OmegaConf.to_yaml(siblings.load(cell)) == composed, cell  # values, Hydra's record, key order
    assert siblings.composed == groups  # one cell of each group composed, its siblings derived


def test_a_cell_that_does_not_compose_fails_in_hydra_s_words_and_its_siblings_too():
    from hydra_plugins.clusterable_sweeper.siblings import SiblingConfigs

    loader, master = _loader_and_master("experiment=corel/digits_table1")
    siblings = SiblingConfigs(loader, master)
    for seed in (0, 1):  # no config to derive the second from: each composed, each refused by Hydra
        with pytest.raises(Exception, match="Could not override 'trainer.nonexistent'"):
            siblings.load(["experiment=corel/digits_table1", "loss=center", f"seed={seed}", "trainer.nonexistent=3"])
    assert siblings.composed == 0 and not siblings.templates
