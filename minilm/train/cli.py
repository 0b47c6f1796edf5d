"""What ``python -m minilm.train`` and ``python -m minilm.finetune`` share: layered settings, help, exit codes.

Settings come in layers, later ones winning: the dataclass defaults, a resumed run's ``config.json``, a TOML file
(``[job]``, ``[train]``, ``[model]``, ``[objective]``), then the command line (``key=value``, ``model.key=value``,
``objective.key=value`` and shorthands such as ``--task X``). A short ``key=value`` goes to the section that has the
key: [job] or [train] (``seed`` is in both and sets both), or the objective's settings, which are known once the
objective is; a key both the run and the objective have is ambiguous and must be written with its section.
``--help`` lists every key with the comment written beside its field in the source.
"""

from __future__ import annotations

import argparse
import dataclasses
import difflib
import inspect
import json
import re
import sys
from collections.abc import Callable
from pathlib import Path

from minilm.train.config import ConfigError, read_toml, split_overrides, update

SECTIONS = ("job", "train", "model", "objective")
SHORT = ""  # the command line layer's short keys (key=value without a section), see command_line_layer


def field_help(cls) -> list[tuple[str, object, str]]:
    """(name, default, the comment after the field in the source) for each field of a config dataclass."""
    comments = {}
    for klass in reversed([k for k in cls.__mro__ if dataclasses.is_dataclass(k)]):  # a subclass's comment wins
        comments.update(re.findall(r"^\s+(\w+):[^#\n]*#\s*(.*)$", inspect.getsource(klass), flags=re.M))
    return [(f.name, f.default, comments.get(f.name, "")) for f in dataclasses.fields(cls)]


def settings_help(sections: list[tuple[str, object]], tables: tuple[str, ...] = ("model",)) -> list[str]:
    """Help lines for each (title, config instance): every key with its value there and its comment; ``tables`` are
    the other sections a TOML file may have."""
    names = [f"[{name}]" for name in [*(title for title, _ in sections), *tables]]
    lines = [f"settings (key=value; or in a TOML file under {', '.join(names[:-1])} and {names[-1]}):"]
    for title, defaults in sections:
        lines.append(f"  [{title}]")
        lines += [f"    {f'{n}={getattr(defaults, n)}':<26} {text}" for n, _, text in field_help(type(defaults))]
    return lines


def models_help(what: str) -> list[str]:
    """Help lines for the registered models: their size presets and ``model.<key>`` overrides."""
    from minilm.train.registry import models

    lines = [f"  [model] model.<key>=value overrides the size preset{what}, e.g. model.n_layers=6:"]
    for name, entry in models().items():
        keys = ", ".join(f.name for f in dataclasses.fields(entry.config_class))
        lines.append(f"    {name}: sizes {', '.join(entry.sizes)}; keys {keys}; kind {entry.kind}")
    return lines


def parse_command_line(argv, prog: str, description: str, epilog: str, shorthands, example: str):
    """Both CLIs' arguments: ``key=value`` settings, ``--config``, ``--<shorthand>`` and ``--resume``, in any order."""
    parser = argparse.ArgumentParser(
        prog=prog, description=description, epilog=epilog, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("overrides", nargs="*", metavar="key=value", help=f"settings, e.g. {example}")
    parser.add_argument("--config", help="a TOML file with [job], [train], [model] (and [objective]) tables")
    for key in shorthands:
        parser.add_argument(f"--{key}", help=f"shorthand for {key}=...")
    parser.add_argument("--resume", metavar="RUN_DIR", help="continue the run in RUN_DIR from its latest checkpoint")
    return parser.parse_intermixed_args(argv)  # key=value pairs may come before and after options


def unknown_key(key: str, known: set[str]) -> ConfigError:
    """The error for a short key no section has, with the closest known one."""
    close = difflib.get_close_matches(key, sorted(known), n=1)
    return ConfigError(f"unknown key {key!r}" + (f"; did you mean {close[0]!r}?" if close else "; see --help"))


def command_line_layer(overrides: list[str], shorthands: dict, job, train, objective_keys: bool = False) -> dict:
    """The command line as a layer: short keys go to [job] or [train] (``seed``, in both, to both), ``model.k=v`` to
    [model], ``objective.k=v`` to [objective]. With ``objective_keys`` the short keys also stay under
    :data:`SHORT`, for pretraining to route those of the objective's settings once the objective is known; without,
    a short key that neither [job] nor [train] has is an error."""
    cli = split_overrides(overrides)
    flat = {**cli.pop("", {}), **{k: v for k, v in shorthands.items() if v is not None}}
    job_keys = {f.name for f in dataclasses.fields(job)}
    train_keys = {f.name for f in dataclasses.fields(train)}
    unknown = sorted(flat.keys() - job_keys - train_keys)
    if unknown and not objective_keys:
        raise unknown_key(unknown[0], job_keys | train_keys)
    layer = {
        **cli,  # section.key=value, merged with the short keys of [job] and [train]
        "job": {**cli.get("job", {}), **{k: v for k, v in flat.items() if k in job_keys}},
        "train": {**cli.get("train", {}), **{k: v for k, v in flat.items() if k in train_keys}},
    }
    return {**layer, SHORT: flat} if objective_keys else layer


def resolve_layers(job, train, resume: str | None, config_file: str | None, command_line: dict, sections=SECTIONS):
    """Apply defaults <- --resume's config.json <- --config TOML <- the command line.

    Returns (job, train, open sections): [job] and [train] applied to their configs, and the other ``sections``
    ([model], [objective]) as dicts merged layer over layer, for the model's and the objective's configs.
    """
    layers = []
    if resume:
        saved = Path(resume) / "config.json"
        if not saved.is_file():
            raise ConfigError(f"--resume {resume}: no config.json there; give the run directory of a run")
        layers.append(json.loads(saved.read_text()))
    if config_file:
        layers.append(read_toml(config_file))
    layers.append(command_line)
    open_sections: dict[str, dict] = {name: {} for name in sections if name not in ("job", "train")}
    for layer in layers:
        unknown = set(layer) - set(sections)
        if unknown:
            use = ", ".join(f"[{name}]" for name in sections)
            raise ConfigError(f"unknown section(s) {', '.join(sorted(unknown))}: use {use}")
        job = update(job, layer.get("job", {}), "job")
        train = update(train, layer.get("train", {}), "train")
        for name, values in open_sections.items():
            values.update(layer.get(name, {}))
    if resume:
        train = dataclasses.replace(train, run_dir=resume)
    return job, train, open_sections


def exit_code(run: Callable[[], None]) -> int:
    """Run a command; a user's mistake becomes one ``error:`` line and an exit code, never a traceback.

    2: a wrong setting; 1: training, data or checkpoint trouble; 130: Ctrl-C (after the Trainer saved).
    """
    from minilm.data.errors import DataError
    from minilm.train.checkpoint import CheckpointError
    from minilm.train.trainer import TrainingError

    try:
        run()
    except ConfigError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    except (TrainingError, CheckpointError, DataError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    except KeyboardInterrupt as err:
        print(f"\n{err or 'interrupted'}", file=sys.stderr)
        return 130
    return 0
