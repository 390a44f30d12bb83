"""Configs checked before anything runs, against the code they configure.

Every config node with a ``_target_`` is compared with its target's signature: a key that is not a parameter
fails with one line naming it and the accepted ones, a value of the wrong type (checked by ``typeguard``
against the parameter's type hint) fails with one line naming the key, the value and the expected type, and a
parameter without a default that nobody sets is named too. The framework's own arguments (``num_classes``,
``embedding_dim``, ``input_shape`` ...) are passed only to constructors whose signature has them (``build``).
Ranges stay where they belong, in the constructors (``ValueError("lam must be in [0, 1], got 1.5")``), and
``build`` prefixes the config path. There is no config parser here: Hydra composes, signatures and type hints
say what is accepted.
"""

from __future__ import annotations

import collections.abc
import difflib
import importlib.util
import inspect
import re
import types
import typing
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, Literal, Union

import hydra
from hydra.errors import InstantiationException
from omegaconf import DictConfig, ListConfig, OmegaConf
from typeguard import CollectionCheckStrategy, TypeCheckError, check_type

# The configs (src/clusterable/conf/: train.yaml and the config groups), package data: an installed wheel carries
# them, and a checkout (editable install) reads them in place.
CONFIG_DIR = str(Path(__file__).resolve().parent / "conf")


class ConfigError(ValueError):
    """A configuration value is unknown, of the wrong type or out of range; raised before any training."""


# Hydra's own keys in a node (`_target_`, `_partial_`, ...): not constructor arguments.
def _is_hydra_key(key: str) -> bool:
    return key.startswith("_") and key.endswith("_")


def target_of(node: DictConfig, path: str) -> Any:
    """The class or function named by ``node._target_``; ConfigError if it cannot be imported, or if the node has
    none: settings left for an option that is not selected (an experiment's ``evaluator.clustering.methods`` after
    ``evaluator=[classification]`` dropped the clustering node)."""
    if "_target_" not in node:
        group, _, option = path.rpartition(".")
        where = f"{group}=[..., {option}]" if group == "evaluator" else f"{path.partition('.')[0]}=<option>"
        raise ConfigError(
            f"{path} sets {', '.join(map(str, node.keys())) or 'nothing'} but names no class (_target_): the option "
            f"is not selected; select it ({where}) or drop its settings (~{path})"
        )
    try:
        return hydra.utils.get_object(node._target_)
    except Exception as e:  # ImportError, AttributeError, ValueError: Hydra's message is several lines
        raise ConfigError(f"{path}._target_: cannot import {node._target_!r} ({type(e).__name__})") from None


def _signature(target: Any) -> tuple[Mapping[str, inspect.Parameter], dict[str, Any]]:
    """Parameters and resolved type hints of a class's constructor or of a function (hints {} if unresolvable)."""
    params = inspect.signature(target).parameters
    try:
        hints = typing.get_type_hints(target.__init__ if inspect.isclass(target) else target)
    except Exception:  # a hint naming something imported only for type checkers: check keys, not types
        hints = {}
    return params, hints


def check_evaluator_group(evaluators: Any) -> None:
    """Refuse an evaluator option composed at ``evaluator`` itself rather than at ``evaluator.<name>``: its file's
    ``# @package evaluator.<name>`` header was not read, which Hydra does only above any other line (a comment
    first, and the header is silently an ordinary comment)."""
    if evaluators and "_target_" in evaluators:
        raise ConfigError(
            f"evaluator: an option ({evaluators['_target_']}) was composed at evaluator, not evaluator.<name>: its "
            "file's first line must be `# @package evaluator.<name>` (Hydra reads the header only above any other line)"
        )


def check_node(node: DictConfig, path: str, provided: Iterable[str] = (), require_all: bool = True) -> None:
    """Check ``node``'s keys and values against its ``_target_``'s signature, recursing into nested targets.

    Args:
        node: a config node with ``_target_``.
        path: its dotted path in the config (``loss``, ``dataset.reader``), for the messages.
        provided: parameters the framework passes itself when it builds or calls the target (``num_classes``,
            the evaluators' ``embeddings``...): the config must not set them, and they count as given.
        require_all: name a parameter without a default that the node does not set. Off for a nested
            ``_partial_`` node: the part that calls it supplies the rest (a metric-learning loss built by its head
            with the run's ``num_classes``).
    Raises:
        ConfigError: one line naming the key.
    """
    target = target_of(node, path)
    params, hints = _signature(target)
    provided = set(provided)
    name = getattr(target, "__qualname__", str(target))
    variadic = {p.name for p in params.values() if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD)}
    takes_any = any(p.kind == p.VAR_KEYWORD for p in params.values())
    accepted = [p for p in params if p not in provided and p not in variadic]
    for key in node:
        key = str(key)
        if _is_hydra_key(key):
            continue
        if key in provided:
            raise ConfigError(f"{path}.{key} is set by the framework; remove it from the config")
        if key not in params or key in variadic:
            if takes_any:
                continue
            close = difflib.get_close_matches(key, accepted, n=1)
            hint = f" (did you mean {close[0]}?)" if close else ""
            raise ConfigError(
                f"{path}.{key} is not an option of {name}{hint}; accepted: {', '.join(accepted) or 'none'}"
            )
        if OmegaConf.is_missing(node, key):
            raise ConfigError(f"{path}.{key} is required (the config leaves it ???)")
        value = node[key]
        if isinstance(value, DictConfig) and "_target_" in value:
            check_node(value, f"{path}.{key}", require_all=not value.get("_partial_", False))
        elif key in hints:
            check_value(f"{path}.{key}", plain(value), hints[key])
    required = (
        [
            p.name
            for p in params.values()
            if p.default is p.empty and p.name not in variadic and p.name not in provided and p.name not in node
        ]
        if require_all
        else []
    )
    if required:
        raise ConfigError(f"{path}.{required[0]} is required: {name} has no default for it")


def plain(value: Any) -> Any:
    """A config value as plain Python (lists and dicts resolved), for type checks."""
    if isinstance(value, DictConfig | ListConfig):
        return OmegaConf.to_container(value, resolve=True)
    return value


def check_value(path: str, value: Any, hint: Any) -> None:
    """ConfigError unless ``value`` has type ``hint``: no string is a boolean or a list, no boolean a number,
    no float an integer (an integer is a valid float)."""
    wrong = (isinstance(value, bool) and not _admits(hint, bool)) or (isinstance(value, str) and not _admits(hint, str))
    if not wrong:
        try:
            check_type(value, hint, collection_check_strategy=CollectionCheckStrategy.ALL_ITEMS)
        except TypeCheckError:
            wrong = True
    if wrong:
        raise ConfigError(f"{path} must be {describe(hint)}, got {value!r} ({_kind(value)})")


def _admits(hint: Any, kind: type) -> bool:
    """Whether ``hint`` names ``kind`` itself (or Any): ``int`` admits no ``bool``, ``Sequence[str]`` no ``str``."""
    if hint is Any or hint is object or hint is kind:
        return True
    origin = typing.get_origin(hint)
    if origin in (Union, types.UnionType):
        return any(_admits(a, kind) for a in typing.get_args(hint))
    if origin is Literal:
        return any(isinstance(a, kind) for a in typing.get_args(hint))
    return False


def describe(hint: Any) -> str:
    """``float | None`` -> "a number or null"; for messages."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (Union, types.UnionType):
        return " or ".join(describe(a) for a in args)
    if hint is type(None):
        return "null"
    if origin is Literal:
        return "one of " + ", ".join(repr(a) for a in args)
    if origin in (list, tuple, collections.abc.Sequence):
        return f"a list of {_plural(args[0])}" if args else "a list"
    if origin in (dict, collections.abc.Mapping):
        return "a mapping"
    names = {bool: "a boolean (true or false)", int: "an integer", float: "a number", str: "a string"}
    return names.get(hint, getattr(hint, "__name__", str(hint)))


def _plural(hint: Any) -> str:
    return {int: "integers", float: "numbers", str: "strings", bool: "booleans"}.get(hint, describe(hint))


def _kind(value: Any) -> str:
    return {bool: "a boolean", int: "an integer", float: "a number", str: "a string", list: "a list"}.get(
        type(value), type(value).__name__
    )


def build(node: DictConfig, path: str, call_args: Iterable[str] = (), **available: Any) -> Any:
    """Check ``node``, then ``instantiate`` it with those of ``available`` that its target's signature takes.

    ``call_args``: for a ``_partial_`` node, the arguments the framework passes when it calls the result later
    (an evaluator's ``embeddings, labels, context``; an optimizer's ``params``).

    A constructor's ``ValueError`` becomes one line naming the config path: ``loss.lam must be in [0, 1], got 1.5``.
    """
    params, _ = _signature(target_of(node, path))
    given = {k: v for k, v in available.items() if k in params}
    check_node(node, path, provided=[*given, *call_args])
    try:
        return hydra.utils.instantiate(node, **given)
    except InstantiationException as e:
        from lightning.fabric.utilities.exceptions import MisconfigurationException

        if isinstance(e.__cause__, ValueError | TypeError):
            raise ConfigError(f"{_failed_node(e, path)}.{e.__cause__}") from None
        if isinstance(e.__cause__, MisconfigurationException):  # Lightning's word for a bad Trainer setting
            raise ConfigError(f"{path}: {str(e.__cause__).splitlines()[0]}") from None
        raise


def _failed_node(error: InstantiationException, path: str) -> str:
    """The config path of the node whose constructor failed: ``path``, or a node nested in it
    (``dataset.augment``), which Hydra names on its message's ``full_key:`` line."""
    key = next(
        (line.removeprefix("full_key: ") for line in str(error).splitlines() if line.startswith("full_key: ")),
        "",
    )
    if not key or key == path or key.startswith(f"{path}."):
        return key or path
    return f"{path}.{key}"


# Options of Hydra's own config groups that an extra of the package installs: (group, option) -> (extra, the module
# that provides the option).
EXTRA_OPTIONS: dict[tuple[str, str], tuple[str, str]] = {
    ("hydra/launcher", "joblib"): ("launchers", "hydra_plugins.hydra_joblib_launcher"),
    ("hydra/launcher", "submitit_local"): ("launchers", "hydra_plugins.hydra_submitit_launcher"),
    ("hydra/launcher", "submitit_slurm"): ("launchers", "hydra_plugins.hydra_submitit_launcher"),
}


def missing_extra(group: str, option: str) -> str | None:
    """One line for an option of ``group`` that Hydra cannot find because the extra that installs it is not
    installed (``hydra/launcher=joblib`` without the ``launchers`` extra), naming the command that installs it;
    None for any other option, or when the extra is installed."""
    extra = EXTRA_OPTIONS.get((group, option))
    if extra is None:
        return None
    name, module = extra
    try:
        if importlib.util.find_spec(module) is not None:
            return None
    except (ImportError, ValueError):  # a parent that cannot be imported, or a module without a spec
        pass
    return (
        f"{group}={option} needs the {name} extra, which is not installed: pip install 'clusterable[{name}]' "
        f"(in a checkout: pip install -e '.[{name}]')"
    )


def composition_error(error: BaseException) -> str:
    """One line for Hydra's several-line report that a config does not compose.

    The usual case, a key that does not exist set without ``+`` (``loss.lamda=0.3``), reads
    ``loss.lamda is not a key of the config (a typo? python train.py --cfg job prints the config; +loss.lamda=...
    adds a new key)``. An option that an extra installs, missing because the extra is not installed, names the extra
    (``missing_extra``).
    """
    text = f"{error}\n{error.__cause__ or ''}"
    if "is not in struct" in text and text.startswith("Could not override '"):
        key = text.removeprefix("Could not override '").split("'", 1)[0]
        return (
            f"{key} is not a key of the config (a typo? `python train.py --cfg job` prints the config; "
            f"+{key}=... adds a new key)"
        )
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    missing = re.search(r"Could not find '([^']+)/([^'/]+)'", text)
    if missing and (needs := missing_extra(*missing.groups())):
        return needs
    if missing and "Available options in" in text:  # an option of a group Hydra itself holds (hydra/launcher)
        start = next(i for i, line in enumerate(lines) if line.startswith("Available options in"))
        options = [line for line in lines[start + 1 :] if not line.startswith(("Config search path", "provider="))]
        group, name = missing.groups()
        return f"{group}={name}: no such option of {group}; options: {', '.join(options)}"
    return "; ".join(line for line in lines if not line.startswith(("full_key", "object_type", "reference_type")))
