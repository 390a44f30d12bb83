"""What the command line checks before Hydra composes anything: the config group options it names exist.

Parsing alone finds them (no composition): ``loss=nope``, ``evaluator=[nonexistent]``, ``experiment=corel/nope``,
``loss/metric=nope`` (a group chosen inside another group's config) are one line naming the available options.
"""

from __future__ import annotations

from pathlib import Path

from clusterable.config import CONFIG_DIR


def check_group_options(args: list[str], config_dir: str = CONFIG_DIR) -> str | None:
    """One line naming an unknown option of a config group on the command line (``evaluator=[nonexistent]``,
    ``experiment=corel/nonexistent``) and the available ones, or None. Hydra's parser reads the overrides; folders
    added with ``hydra.searchpath=[file://...]`` count too."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    try:
        overrides = OverridesParser.create().parse_overrides(
            [a for a in args if "=" in a and not a.startswith("-")]
        )
    except Exception:
        return None  # Hydra reports syntax errors itself
    roots = [Path(config_dir)]
    for override in overrides:
        if override.key_or_group == "hydra.searchpath" and isinstance(override.value(), list):
            roots += [
                Path(str(p).removeprefix("file://")) for p in override.value() if str(p).startswith("file://")
            ]
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
            names = (
                [str(v) for v in value] if isinstance(value, list) else [] if value is None else [str(value)]
            )
        available = sorted(
            str(p.relative_to(root / group).with_suffix(""))
            for root in roots
            for p in (root / group).rglob("*.yaml")
        )
        for name in names:
            if name not in available:
                return f"{group}: no option {name!r}; available: {', '.join(available)}"
    return None
