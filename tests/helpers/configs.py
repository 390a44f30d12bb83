"""Composing the configs as a run does, and expanding an experiment's sweep into its cells, for the config tests."""

from __future__ import annotations

from pathlib import Path

from hydra import compose, initialize_config_dir
from hydra.core.hydra_config import HydraConfig
from omegaconf import open_dict

from clusterable.config import CONFIG_DIR


def composed(tmp_path: Path, *overrides: str):
    """The run's config of ``overrides`` with Hydra's node, its output folder ``tmp_path``."""
    with initialize_config_dir(config_dir=CONFIG_DIR, version_base="1.3"):
        cfg = compose("train", overrides=list(overrides), return_hydra_config=True)
    with open_dict(cfg):
        cfg.hydra.runtime.output_dir = str(tmp_path)
        cfg.hydra.job.num = 0
    HydraConfig.instance().set_config(cfg)  # so ${hydra:...} resolves as in a real run
    return cfg


def sweep_cells(cfg) -> list[list[str]]:
    """The cells of an experiment's sweep (its params, and its grids if it has any), as the sweeper expands them,
    seeds left out: a list of override lists."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    from hydra_plugins.clusterable_sweeper.cell_sweeper import checked_grids, expand

    parser = OverridesParser.create()
    params = {k: v for k, v in cfg.hydra.sweeper.params.items() if k != "seed"}
    parsed = parser.parse_overrides([f"{k}={v}" for k, v in params.items()])
    return expand(parsed, checked_grids(cfg.hydra.sweeper.get("grids")), [], parser)
