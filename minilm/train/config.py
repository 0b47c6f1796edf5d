"""Configuration: dataclasses filled from a TOML file, then ``key=value`` overrides, each value checked.

A config file has one table per dataclass section, e.g. ``[train]`` and ``[model]``::

    [train]
    lr = 3e-4
    max_steps = 2000

    [model]
    n_layers = 6

On the command line the same keys are given as ``lr=3e-4`` (a section's keys are unique, so no prefix is needed)
or ``model.n_layers=6``. Unknown keys and values of the wrong type are errors that name the key, the expected type
and the closest known key.
"""

from __future__ import annotations

import dataclasses
import difflib
import sys
import types
import typing
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib


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


def _check_type(value, annotation):
    """Accept TOML values that already have the right type (ints where floats are expected too)."""
    args = typing.get_args(annotation)
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        return value is None and type(None) in args or any(_check_type(value, a) for a in args if a is not type(None))
    if annotation is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if annotation is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if annotation in (bool, str):
        return isinstance(value, annotation)
    return True


def _type_name(annotation) -> str:
    return getattr(annotation, "__name__", None) or str(annotation).replace("typing.", "")


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
                value = parse_value(value, annotation)
            except ValueError as err:
                raise ConfigError(f"{section} key {key!r} expects {_type_name(annotation)}: {err}") from None
        elif not _check_type(value, annotation):
            raise ConfigError(f"{section} key {key!r} expects {_type_name(annotation)}, got {value!r}")
        changes[key] = float(value) if annotation is float and isinstance(value, int) else value
    try:
        new = dataclasses.replace(obj, **changes)  # runs the config's __post_init__, if it has one
        check = getattr(new, "validate", None)
        if check is not None:
            check()
    except ConfigError:
        raise
    except ValueError as err:  # a model config's own validation: still the user's setting to fix
        raise ConfigError(f"{section}: {err}") from None
    return new


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
