"""What ``python -m minilm.train`` and ``python -m minilm.finetune`` share: layered settings, help, exit codes.

Settings come in layers, later ones winning: the dataclass defaults, a resumed run's ``config.json``, a TOML file
(``[job]``, ``[train]``, ``[model]``), then the command line (``key=value``, ``model.key=value`` and shorthands
such as ``--task X``). ``--help`` lists every key with the comment written beside its field in the source.
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

SECTIONS = ("job", "train", "model")


def field_help(cls) -> list[tuple[str, object, str]]:
    """(name, default, the comment after the field in the source) for each field of a config dataclass."""
    comments = dict(re.findall(r"^\s+(\w+):[^#\n]*#\s*(.*)$", inspect.getsource(cls), flags=re.M))
    return [(f.name, f.default, comments.get(f.name, "")) for f in dataclasses.fields(cls)]


def settings_help(sections: list[tuple[str, object]]) -> list[str]:
    """Help lines for each (title, config instance): every key with its value there and its comment."""
    lines = ["settings (key=value; or in a TOML file under [job], [train] and [model]):"]
    for title, defaults in sections:
        lines.append(f"  [{title}]")
        lines += [f"    {f'{n}={getattr(defaults, n)}':<26} {text}" for n, _, text in field_help(type(defaults))]
    return lines


def models_help(what: str) -> list[str]:
    """Help lines for the registered models: their size presets and ``model.<key>`` overrides."""
    from minilm.train.registry import MODELS, get_model

    get_model("gpt")  # registers the built-ins
    lines = [f"  [model] model.<key>=value overrides the size preset{what}, e.g. model.n_layers=6:"]
    for name, entry in MODELS.items():
        keys = ", ".join(f.name for f in dataclasses.fields(entry.config_class))
        lines.append(f"    {name}: sizes {', '.join(entry.sizes)}; keys {keys}")
    return lines


def parse_command_line(argv, prog: str, description: str, epilog: str, shorthands, example: str):
    """Both CLIs' arguments: ``key=value`` settings, ``--config``, ``--<shorthand>`` and ``--resume``, in any order."""
    parser = argparse.ArgumentParser(
        prog=prog, description=description, epilog=epilog, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("overrides", nargs="*", metavar="key=value", help=f"settings, e.g. {example}")
    parser.add_argument("--config", help="a TOML file with [job], [train] and [model] tables")
    for key in shorthands:
        parser.add_argument(f"--{key}", help=f"shorthand for {key}=...")
    parser.add_argument("--resume", metavar="RUN_DIR", help="continue the run in RUN_DIR from its latest checkpoint")
    return parser.parse_intermixed_args(argv)  # key=value pairs may come before and after options


def command_line_layer(overrides: list[str], shorthands: dict, job, train) -> dict:
    """The command line as a layer: flat keys go to [job] or [train] (they never clash), ``model.k=v`` to [model]."""
    cli = split_overrides(overrides)
    flat = {**cli.pop("", {}), **{k: v for k, v in shorthands.items() if v is not None}}
    job_keys = {f.name for f in dataclasses.fields(job)}
    train_keys = {f.name for f in dataclasses.fields(train)}
    for key in flat.keys() - job_keys - train_keys:
        close = difflib.get_close_matches(key, sorted(job_keys | train_keys), n=1)
        raise ConfigError(f"unknown key {key!r}" + (f"; did you mean {close[0]!r}?" if close else "; see --help"))
    return {
        "job": {k: v for k, v in flat.items() if k in job_keys},
        "train": {k: v for k, v in flat.items() if k in train_keys},
        **cli,
    }


def resolve_layers(job, train, resume: str | None, config_file: str | None, command_line: dict):
    """Apply defaults <- --resume's config.json <- --config TOML <- the command line; return (job, train, model)."""
    layers = []
    if resume:
        saved = Path(resume) / "config.json"
        if not saved.is_file():
            raise ConfigError(f"--resume {resume}: no config.json there; give the run directory of a run")
        layers.append(json.loads(saved.read_text()))
    if config_file:
        layers.append(read_toml(config_file))
    layers.append(command_line)
    model: dict = {}
    for layer in layers:
        unknown = set(layer) - set(SECTIONS)
        if unknown:
            raise ConfigError(f"unknown section(s) {', '.join(sorted(unknown))}: use [job], [train] and [model]")
        job = update(job, layer.get("job", {}), "job")
        train = update(train, layer.get("train", {}), "train")
        model = {**model, **layer.get("model", {})}
    if resume:
        train = dataclasses.replace(train, run_dir=resume)
    return job, train, model


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
