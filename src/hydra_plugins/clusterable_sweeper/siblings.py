"""A sweep cell's config derived from a sibling's, where Hydra would compose it again from the YAML files.

Composing a cell (Hydra's ``load_sweep_config``: the defaults tree, the YAML files read again, the merges) costs
0.3-0.6 s. In ``csrl/fig2`` (540 cells: 18 (dataset, loss) pairs, each 30 cells that differ only in task, lr and
seed) that was the largest cost of the sweep after training. Two cells whose overrides differ only in plain values
(``seed=1`` against ``seed=0``, ``optimizer.lr=0.01``, ``loss.lam=0.6``) have the same defaults tree: the second
cell's config is the first's with those values set, as Hydra sets a command-line value (``OmegaConf.update(cfg, key,
value, merge=True)``), and its record of the overrides (``hydra.overrides.task``, ``hydra.job.override_dirname``)
made again.

A value override may be derived when it changes a key (no ``+``, ``++``, ``~`` or ``@package``), is not a config
group nor a Hydra setting, and its value is a scalar (a list or mapping merges, where composing replaces). Any
other difference composes the cell, and so does a derivation that fails: the error is then Hydra's own.
tests/test_sweeper.py checks derived == composed, key order included, over real grids.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence

from hydra._internal.config_loader_impl import (
    get_overrides_dirname,  # the name Hydra gives a cell (private, < 1.4)
)
from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.core.override_parser.types import Override, OverrideType
from omegaconf import DictConfig, OmegaConf, open_dict

# A cell's overrides with each derivable value replaced by its key: cells of one signature derive from each other.
Signature = tuple[str, ...]


class SiblingConfigs:
    """Each cell's sweep config: the first of its signature composed by Hydra, the others derived from it."""

    def __init__(self, loader: object, master_config: DictConfig) -> None:
        self.loader, self.master = loader, master_config
        self.parser = OverridesParser.create(config_loader=loader)  # type: ignore[arg-type]
        self.templates: dict[Signature, tuple[list[Override], DictConfig]] = {}
        self.composed = 0  # how many cells Hydra composed (the others were derived)

    def load(self, overrides: Sequence[str]) -> DictConfig:
        """The sweep config of the cell ``overrides``, equal to ``loader.load_sweep_config(master, overrides)``.
        Raises what Hydra raises for a cell that does not compose."""
        parsed = self.parser.parse_overrides(list(overrides))
        signature = tuple(o.key_or_group if self._derivable(o) else o.input_line or "" for o in parsed)
        template = self.templates.get(signature)
        if template is not None:
            try:
                return _derived(*template, parsed, self.master)
            except Exception:  # a value that does not fit its key: composing says so in Hydra's words
                pass
        config = self.loader.load_sweep_config(  # type: ignore[attr-defined]
            master_config=self.master, sweep_overrides=list(overrides)
        )
        self.composed += 1
        if template is None:  # a copy: the launcher changes the config it gets
            self.templates[signature] = (parsed, copy.deepcopy(config))
        return config

    def _derivable(self, override: Override) -> bool:
        """Whether ``override`` sets a plain value that two siblings may differ in."""
        key = override.key_or_group
        repository = getattr(self.loader, "repository", None)
        return (
            override.type == OverrideType.CHANGE
            and override.package is None
            and not override.is_sweep_override()
            and not override.is_hydra_override()
            and isinstance(override.value(), str | int | float | bool | type(None))
            and repository is not None
            and not any(repository.group_exists(name) for name in {key, key.replace(".", "/")})
        )


def _derived(
    template_overrides: list[Override], template: DictConfig, overrides: list[Override], master: DictConfig
) -> DictConfig:
    """``template``'s config with the values in which ``overrides`` differ from ``template_overrides`` set, as
    Hydra's composition sets a command-line value, and Hydra's record of the cell's overrides made again."""
    config = copy.deepcopy(template)
    choices = set(config.hydra.runtime.choices)
    for mine, theirs in zip(overrides, template_overrides, strict=True):
        if mine.input_line != theirs.input_line:
            key = mine.key_or_group
            if key in choices or key.replace(".", "/") in choices:
                raise ValueError(f"{key} is a config group")
            OmegaConf.update(config, key, mine.value(), merge=True)
    task = [o for o in overrides if not o.is_hydra_override()]
    naming = config.hydra.job.config.override_dirname
    with open_dict(config.hydra):
        config.hydra.overrides.task = [o.input_line for o in task]
        config.hydra.job.override_dirname = get_overrides_dirname(
            overrides=task, kv_sep=naming.kv_sep, item_sep=naming.item_sep, exclude_keys=naming.exclude_keys
        )
    OmegaConf.copy_cache(from_config=master, to_config=config)
    return config
