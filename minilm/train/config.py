"""Configuration: dataclasses filled from a TOML file, then ``key=value`` overrides, each value checked.

A config file has one table per dataclass section, e.g. ``[train]``, ``[model]`` and ``[objective]``::

    [train]
    lr = 3e-4
    max_steps = 2000

    [model]
    n_layers = 6

    [objective]
    format = "segment_pair"

On the command line the same keys are given as ``lr=3e-4`` (no prefix where only one section has the key, see
:mod:`minilm.train.cli`), ``model.n_layers=6`` or ``objective.format=segment_pair``. Unknown keys and values of the
wrong type are errors that name the key, the expected type and the closest known key. A run's config.json reads
back into its dataclasses, nested ones included, with :func:`from_dict`.
"""

from __future__ import annotations

import dataclasses
import difflib
import sys
import types
import typing
from pathlib import Path

from minilm.ranges import MODEL_RANGES, OBJECTIVE_RANGES, check_ranges

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib


SECTION_RANGES = {"model": MODEL_RANGES, "objective": OBJECTIVE_RANGES}  # every numeric setting's range


class ConfigError(ValueError):
    """A configuration the user gave is wrong; the message says which key and how to fix it."""


def _suggest(key: str, known: list[str]) -> str:
    close = difflib.get_close_matches(key, known, n=1)
    return f"; did you mean {close[0]!r}?" if close else f"; known keys: {', '.join(sorted(known))}"


def _field_type(cls, name: str):
    hints = typing.get_type_hints(cls)
    return hints[name]


def parse_value(text: str, annotation):
    """Convert command-line text to the field's type (bool, int, float, str, or ``X | None``)."""
    args = typing.get_args(annotation)
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        if text.lower() in ("none", "null", ""):
            if type(None) in args:
                return None
        inner = [a for a in args if a is not type(None)]
        return parse_value(text, inner[0])
    if annotation is bool:
        lowered = text.lower()
        if lowered in ("true", "1", "yes", "on"):
            return True
        if lowered in ("false", "0", "no", "off"):
            return False
        raise ValueError(f"{text!r} is not a boolean (true/false)")
    if annotation is int:
        return int(text)
    if annotation is float:
        return float(text)
    return text


def _type_name(annotation) -> str:
    if isinstance(annotation, type) and not typing.get_args(annotation):
        return annotation.__name__
    return str(annotation).replace("typing.", "")


def _convert(value, annotation, section: str, key: str):
    """``value`` as read from TOML or JSON, checked against the field's type and rebuilt where JSON loses the type:
    a dataclass from its table, tuples from lists, floats from ints (``X | None``, ``list[X]``, ``tuple[X, ...]``,
    ``tuple[X, Y]`` and ``dict[str, X]`` recursively)."""
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)

    def wrong(what: str = "") -> ConfigError:
        return ConfigError(f"{section} key {key!r} expects {_type_name(annotation)}, got {value!r}{what}")

    if dataclasses.is_dataclass(annotation):
        if isinstance(value, annotation):
            return value
        if not isinstance(value, dict):
            raise wrong()
        return _from_dict(annotation, value, section, f"{key}.")
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        for option in (a for a in args if a is not type(None)):
            try:
                return _convert(value, option, section, key)
            except ConfigError:
                continue
        raise wrong()
    if origin in (list, tuple):
        if not isinstance(value, (list, tuple)):
            raise wrong()
        if origin is tuple and args and args[-1] is not Ellipsis:  # tuple[X, Y]: one type per position
            if len(value) != len(args):
                raise wrong(f" ({len(value)} items for {len(args)})")
            types_ = args
        else:
            types_ = [args[0] if args else typing.Any] * len(value)
        items = zip(value, types_, strict=True)
        return origin(_convert(v, t, section, f"{key}[{i}]") for i, (v, t) in enumerate(items))
    if origin is dict:
        if not isinstance(value, dict):
            raise wrong()
        key_type, value_type = args or (typing.Any, typing.Any)
        return {
            _convert(k, key_type, section, key): _convert(v, value_type, section, f"{key}.{k}")
            for k, v in value.items()
        }
    if annotation is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise wrong()
        return float(value)
    if annotation is int and isinstance(value, bool):
        raise wrong()
    if annotation in (typing.Any, object) or not isinstance(annotation, type):
        return value
    if not isinstance(value, annotation):
        raise wrong()
    return value


def _checked(make, section: str):
    """``make()``, then the config's own ``validate()``; a ValueError of either names the section."""
    try:
        new = make()  # runs the config's __post_init__, if it has one
        check = getattr(new, "validate", None)
        if check is not None:
            check()
        if section in SECTION_RANGES:  # after the config's own checks, whose messages say more
            check_ranges(new, SECTION_RANGES[section])
    except ConfigError:
        raise
    except (TypeError, ValueError) as err:  # a model config's own validation: still the user's setting to fix
        raise ConfigError(f"{section}: {err}") from None
    return new


def update(obj, values: dict, section: str):
    """A copy of dataclass ``obj`` with ``values`` (text from the command line, or typed from TOML) applied."""
    names = [f.name for f in dataclasses.fields(obj)]
    changes = {}
    for key, value in values.items():
        if key not in names:
            raise ConfigError(f"unknown {section} key {key!r}{_suggest(key, names)}")
        annotation = _field_type(type(obj), key)
        if isinstance(value, str) and annotation is not str:
            try:
                changes[key] = parse_value(value, annotation)
            except ValueError as err:
                raise ConfigError(f"{section} key {key!r} expects {_type_name(annotation)}: {err}") from None
        else:
            changes[key] = _convert(value, annotation, section, key)
    return _checked(lambda: dataclasses.replace(obj, **changes), section)


def from_dict(cls, data: dict, section: str | None = None):
    """A ``cls`` dataclass rebuilt from ``data``, a table read back from JSON or TOML (a run's config.json).

    Nested configs come back as their dataclasses (a config holding another, an optional one, a list of them),
    lists as tuples where the field is a tuple; every value is checked against its field's type. Fields missing
    from ``data`` take their defaults; unknown keys and wrong types are ConfigErrors naming the key (e.g.
    ``unknown model key 'generator.n_layer'; did you mean 'generator.n_layers'?``). The inverse of :func:`to_dict`.
    """
    return _from_dict(cls, data, section or cls.__name__, "")


def _from_dict(cls, data: dict, section: str, prefix: str):
    if not isinstance(data, dict):
        raise ConfigError(f"{section} {prefix.rstrip('.') or 'config'} must be a table of keys, got {data!r}")
    names = [f.name for f in dataclasses.fields(cls) if f.init]
    for key in data:
        if key not in names:
            known = [prefix + n for n in names]
            raise ConfigError(f"unknown {section} key {prefix + key!r}{_suggest(prefix + key, known)}")
    hints = typing.get_type_hints(cls)
    values = {key: _convert(value, hints[key], section, prefix + key) for key, value in data.items()}
    return _checked(lambda: cls(**values), section)


def read_toml(path: str | Path) -> dict:
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"config file {path} does not exist")
    try:
        return tomllib.loads(path.read_text())
    except tomllib.TOMLDecodeError as err:
        raise ConfigError(f"config file {path} is not valid TOML: {err}") from None


def split_overrides(pairs: list[str]) -> dict[str, dict[str, str]]:
    """``["lr=3e-4", "model.n_layers=6"]`` -> ``{"": {"lr": "3e-4"}, "model": {"n_layers": "6"}}``."""
    out: dict[str, dict[str, str]] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise ConfigError(f"override {pair!r} is not of the form key=value (e.g. lr=3e-4 or model.n_layers=6)")
        section, _, name = key.rpartition(".")
        out.setdefault(section, {})[name] = value
    return out


def choice(value, options, key: str) -> None:
    """Raise a ConfigError unless ``value`` is one of ``options``."""
    if value not in options:
        raise ConfigError(f"{key}={value!r} is not one of {', '.join(map(str, options))}")


def to_dict(obj) -> dict:
    return dataclasses.asdict(obj)
