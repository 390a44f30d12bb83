"""What the command line checks before Hydra composes anything: the config group options it names exist.

Parsing alone finds them (no composition): ``loss=nope``, ``evaluator=[nonexistent]``, ``experiment=corel/nope``,
``loss/metric=nope`` (a group chosen inside another group's config) are one line naming the available options.

``swept_group_key`` explains one refusal of Hydra's after the fact: a sweep's key of a group that the experiment
chooses in its sweep (``-m experiment=corel/fashion_table1 dataset.root=DIR``), refused as "not a key".
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from clusterable.config import CONFIG_DIR


def check_group_options(args: list[str], config_dir: str = CONFIG_DIR) -> str | None:
    """One line naming an unknown option of a config group on the command line (``evaluator=[nonexistent]``,
    ``experiment=corel/nonexistent``) and the available ones, or None. Hydra's parser reads the overrides; folders
    added with ``hydra.searchpath=[file://...]`` count too."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    if problem := split_list(args):
        return problem
    try:
        overrides = OverridesParser.create().parse_overrides([a for a in args if "=" in a and not a.startswith("-")])
    except Exception:
        return None  # Hydra reports syntax errors itself
    roots = [Path(config_dir)]
    for override in overrides:
        if override.key_or_group == "hydra.searchpath" and isinstance(override.value(), list):
            roots += [Path(str(p).removeprefix("file://")) for p in override.value() if str(p).startswith("file://")]
    if problem := shadowed_option(roots[1:], Path(config_dir)) or unknown_protocol_key(overrides, roots):
        return problem
    # Nested groups too (``loss/metric=nope``: a group chosen inside another group's config).
    groups = {
        p.relative_to(config_dir).as_posix()
        for p in Path(config_dir).rglob("*")
        if p.is_dir() and p.relative_to(config_dir).parts[0] != "hydra"
    }
    for override in overrides:
        group = override.key_or_group
        if group not in groups or override.is_delete() or override.package is not None:
            continue
        if override.is_sweep_override():
            names = list(override.sweep_string_iterator())
        else:
            value = override.value()
            names = [str(v) for v in value] if isinstance(value, list) else [] if value is None else [str(value)]
        available = sorted(
            str(p.relative_to(root / group).with_suffix("")) for root in roots for p in (root / group).rglob("*.yaml")
        )
        for name in names:
            if name == "null" and override.is_sweep_override():
                return (
                    f"{group}: null (no {group}) cannot be one value of a sweep, since Hydra removes a group "
                    f"for a whole command only; sweep {group}={','.join(available)} and run {group}=null in "
                    "a command of its own"
                )
            if name not in available:
                return f"{group}: no option {name!r}; available: {', '.join(available)}"
    return None


def null_groups(args: list[str], config_dir: str = CONFIG_DIR) -> tuple[list[str], str | None]:
    """The command line with every ``group=null`` and ``~group`` written as Hydra takes them, or one line refusing
    one: ``(args, None)`` or ``(args, problem)``.

    Hydra refuses ``scheduler=null`` with a ValueError from deep inside, though ``train.yaml`` writes
    ``scheduler: null`` for "no scheduler": a group that ``train.yaml`` leaves null (``scheduler``, ``debug``,
    ``experiment``, ``corel_recipe``) becomes ``~scheduler``, Hydra's way of choosing no option; a group with a
    ``none`` option (``logger``, ``hparams_search``) becomes ``logger=none`` (``~logger`` would leave the run without
    the key it reads); the evaluator list becomes ``evaluator=[]``. A group every run needs (``model=null``,
    ``~dataset``) is refused, naming its options.
    """
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from omegaconf import OmegaConf

    root = Path(config_dir)
    groups = {p.name for p in root.iterdir() if p.is_dir() and p.name != "hydra"}
    defaults = OmegaConf.to_container(OmegaConf.load(root / "train.yaml")).get("defaults", [])  # type: ignore[union-attr]
    optional = {k for d in defaults if isinstance(d, dict) for k, v in d.items() if v is None}
    parser = OverridesParser.create()
    out = []
    for arg in args:
        try:
            override = None if arg.startswith("-") else parser.parse_override(arg)
        except Exception:  # Hydra reports syntax errors itself
            override = None
        if (
            override is None
            or override.key_or_group not in groups
            or override.package is not None
            or override.is_sweep_override()
            or not (override.is_delete() or (override.value() is None and not override.is_add()))
        ):
            out.append(arg)
            continue
        group = override.key_or_group
        if (root / group / "none.yaml").exists():
            out.append(f"{group}=none")
        elif group == "evaluator":
            out.append("evaluator=[]")
        elif group in optional:
            out.append(f"~{group}")
        else:
            options = sorted(str(p.relative_to(root / group).with_suffix("")) for p in (root / group).rglob("*.yaml"))
            return args, f"{arg}: every run needs a {group}; choose one of: {', '.join(options)}"
    return out, None


def shadowed_option(user_roots: list[Path], config_dir: Path) -> str | None:
    """One line for an option in a folder added with ``hydra.searchpath`` that has a package option's name
    (``myproject/conf/loss/cce.yaml``): the package's configs come first on the search path, so that file would
    never be read, and a run would silently train the package's option instead."""
    for root in user_roots:
        if not root.is_dir() or root.resolve() == config_dir.resolve():
            continue
        for path in sorted(root.rglob("*.yaml")):
            relative = path.relative_to(root)
            if len(relative.parts) > 1 and (config_dir / relative).is_file():
                option = f"{relative.parent.as_posix()}={relative.with_suffix('').name}"
                return (
                    f"{path} has the name of the package's own {option} ({config_dir / relative}), which "
                    "comes first on the search path, so yours would never be read: give it a name of its "
                    "own"
                )
    return None


def protocol_keys(roots: list[Path]) -> set[str]:
    """The ``protocol.<key>`` names the configs under ``roots`` set (every YAML file's top-level ``protocol``
    mapping): a paper's own settings, read by its configs and tables."""
    import yaml

    keys: set[str] = set()
    for root in roots:
        for path in root.rglob("*.yaml") if root.is_dir() else []:
            try:
                node = yaml.safe_load(path.read_text())
            except (OSError, yaml.YAMLError):
                continue  # Hydra names a broken config itself when it is chosen
            if isinstance(node, dict) and isinstance(node.get("protocol"), dict):
                keys |= {str(k) for k in node["protocol"]}
    return keys


def unknown_protocol_key(overrides: list[Any], roots: list[Path]) -> str | None:
    """One line for a ``protocol.<key>`` on the command line that no config sets (``+protocol.budjet=cpu``):
    ``protocol`` is a free mapping, so Hydra keeps any key, and a misspelt one changes nothing while the run
    records it as set. A key of your own belongs in a config of your own (``hydra.searchpath``), which makes it
    known."""
    given = [o for o in overrides if o.key_or_group.startswith("protocol.") and not o.is_delete()]
    if not given:
        return None
    known = protocol_keys(roots)
    for override in given:
        key = override.key_or_group.split(".")[1]
        if key not in known:
            return (
                f"{override.key_or_group}: no config sets protocol.{key}, so nothing reads it (protocol keys: "
                f"{', '.join(sorted(known))}); a key of your own belongs in a config of your own on "
                "hydra.searchpath"
            )
    return None


def split_list(args: list[str]) -> str | None:
    """One line for a list or dict the shell cut at a space (``evaluator=[classification, clustering]`` unquoted
    reaches us as ``evaluator=[classification,`` and ``clustering]``), naming the quoted form; None otherwise."""
    for i, arg in enumerate(args):
        if "=" not in arg or arg.startswith("-"):
            continue
        opened = arg.count("[") - arg.count("]") + arg.count("{") - arg.count("}")
        if opened > 0:
            end = next((j for j in range(i + 1, len(args)) if "]" in args[j] or "}" in args[j]), len(args) - 1)
            whole = " ".join(args[i : end + 1])
            return f"{arg} is cut at a space: the shell split a list; quote it, '{whole}', or write it without spaces"
    return None


def swept_group_key(args: list[str], error: BaseException, config_dir: str = CONFIG_DIR) -> str | None:
    """One line for a key of a config group (``dataset.root``) that Hydra refused as not a key in a sweep whose
    experiment chooses that group in its sweep (``hydra.sweeper.params`` or ``grids``), naming the fix; None for
    any other error.

    Under ``-m``, Hydra composes the config once before the sweep, from the command line alone: the group is then
    still the default option (``dataset=digits``, which has no ``root``), since the experiment's sweep chooses it
    only per cell. The key exists in the option the sweep chooses, so the fix is to choose it on the command line
    too (``dataset=fashion_mnist dataset.root=DIR``), which gives the cells the sweep had.
    """
    text = f"{error}\n{error.__cause__ or ''}"
    refused = re.match(r"Could not override '([^']+)'", text)
    if not refused or "is not in struct" not in text or not {"-m", "--multirun"} & set(args):
        return None
    key = refused.group(1)
    group = key.split(".")[0]
    from hydra.core.override_parser.overrides_parser import OverridesParser

    try:
        overrides = OverridesParser.create().parse_overrides([a for a in args if "=" in a and not a.startswith("-")])
    except Exception:
        return None
    if any(o.key_or_group == group for o in overrides):
        return None  # the group is chosen on the command line: the key is wrong for it
    experiment = next((str(o.value()) for o in overrides if o.key_or_group == "experiment"), None)
    searchpath = [a for a in args if a.startswith("hydra.searchpath=")]
    if experiment is None:
        return None
    try:
        default, having = _group_choices(experiment, group, key, searchpath, config_dir)
    except Exception:  # the experiment does not compose alone: Hydra's own message says more
        return None
    if not having:
        return None  # no option the sweep chooses has the key either: a typo, which Hydra's message says
    given = next((a for a in args if a.split("=", 1)[0].lstrip("+~") == key), f"{key}=...")
    return (
        f"{key} is not a key of {group}={default}, the {group} a sweep composes before its cells: "
        f"experiment={experiment} chooses the {group} per cell, in its sweep ({key} is a key of {', '.join(having)}), "
        f"and Hydra applies the command line's {group}.* keys before that; choose the {group} on the command line "
        f"too: {group}={having[0]} {given}"
    )


_ABSENT = object()  # what OmegaConf.select returns for a key a config does not have


def _group_choices(
    experiment: str, group: str, key: str, searchpath: list[str], config_dir: str
) -> tuple[str, list[str]]:
    """The option of ``group`` that ``experiment`` composes with before its sweep, and those of the options its
    sweep gives ``group`` (``hydra.sweeper.params`` and each of ``hydra.sweeper.grids``) that have ``key``, each
    composed as Hydra composes a cell."""
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra
    from omegaconf import OmegaConf

    GlobalHydra.instance().clear()  # the failed command's Hydra, if it left one
    base = [f"experiment={experiment}", *searchpath]
    with initialize_config_dir(config_dir=str(Path(config_dir).resolve()), version_base="1.3"):
        cfg = compose("train", overrides=base, return_hydra_config=True)
        sweeper = cfg.hydra.sweeper
        grids = [grid for grid in (sweeper.get("grids") or {}).values() if grid]
        swept = [str(node[group]) for node in (sweeper.get("params") or {}, *grids) if group in node]
        options = list(dict.fromkeys(v.strip() for values in swept for v in values.split(",")))

        def has_key(option: str) -> bool:
            chosen = compose("train", overrides=[*base, f"{group}={option}"])
            return OmegaConf.select(chosen, key, default=_ABSENT, throw_on_resolution_failure=False) is not _ABSENT

        having = [option for option in options if has_key(option)]
    return str(cfg.hydra.runtime.choices.get(group)), having
