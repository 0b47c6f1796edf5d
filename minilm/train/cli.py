"""What ``python -m minilm.train`` and ``python -m minilm.finetune`` share: layered settings, help, exit codes.

Settings come in layers, later ones winning: the dataclass defaults, a resumed run's ``config.json``, a TOML file
(``[job]``, ``[train]``, ``[model]``, ``[objective]``), then the command line (``key=value``, ``model.key=value``,
``objective.key=value`` and shorthands such as ``--task X``). A short ``key=value`` goes to the section that has the
key: [job] or [train] (``seed`` is in both and sets both), or the objective's settings, which are known once the
objective is, or else (pretraining) the model's config (``share=all``, ``n_layers=6``); a key both the run and the
objective have, or both the objective and the model, is ambiguous and must be written with its section.
``--help`` lists every key with the comment written beside its field in the source.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import difflib
import errno
import inspect
import json
import re
import shlex
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

from minilm.train import checkpoint as ckpt
from minilm.train.config import ConfigError, read_toml, split_overrides, update
from minilm.train.run_dir import new_run_dir
from minilm.train.trainer import check_same_optimizer

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


IDENTITY = ("model", "objective", "task", "size")  # [job] keys a resumed run keeps: they decide its tensors


def resumed_run(resume: str) -> tuple[Path, dict]:
    """The run directory ``--resume`` designates and the settings it was saved with: a run directory (its
    config.json) or one of its checkpoints (``checkpoints/step_X``, whose meta.json holds the run's settings)."""
    path = Path(resume)
    if (path / ckpt.META_FILE).is_file():
        run_dir = path.parent.parent if path.parent.name == ckpt.CHECKPOINTS else path.parent
        saved = ckpt.read_meta(path).get("config")
        if not isinstance(saved, dict):
            raise ConfigError(f"--resume {resume}: the checkpoint does not record its run's settings")
        return run_dir, saved
    saved_file = path / "config.json"
    if not saved_file.is_file() and path.is_dir() and not ckpt.step_dirs(path / ckpt.CHECKPOINTS):
        raise ConfigError(f"--resume {resume}: no config.json there; {not_resumable(path)}")
    if not saved_file.is_file():
        raise ConfigError(f"--resume {resume}: no config.json there; give the run directory of a run")
    try:
        saved = json.loads(saved_file.read_text())
    except (ValueError, UnicodeDecodeError) as err:
        newest = ckpt.step_dirs(path / ckpt.CHECKPOINTS)[-1:]
        instead = f"; its checkpoints hold the settings too: --resume {shlex.quote(str(newest[0]))}" if newest else ""
        raise ConfigError(f"--resume {resume}: {saved_file} is not valid JSON ({err}){instead}") from None
    if not isinstance(saved, dict):
        raise ConfigError(f"--resume {resume}: {saved_file} does not hold a run's settings")
    return path, saved


def check_resumed_kind(resume: str, saved: dict, sections: tuple[str, ...]) -> None:
    """Refuse to resume a fine-tuning run with ``minilm.train`` and a pretraining run with ``minilm.finetune``."""
    job = saved.get("job") if isinstance(saved.get("job"), dict) else {}
    quoted = shlex.quote(resume)
    if "objective" in saved and "objective" not in sections:
        raise ConfigError(
            f"--resume {resume} is a pretraining run ({job.get('model')}, {job.get('objective')}): fine-tune from "
            f"it with python -m minilm.finetune --pretrained {quoted} (--resume continues a fine-tuning run), or "
            f"continue pretraining it with python -m minilm.train --resume {quoted}"
        )
    if "task" in job and "objective" in sections:
        raise ConfigError(
            f"--resume {resume} is a fine-tuning run (task {job['task']}): continue it with python -m "
            f"minilm.finetune --resume {quoted}"
        )


def resolve_layers(
    job,
    train,
    resume: str | None,
    config_file: str | None,
    command_line: dict,
    sections=SECTIONS,
    upgrade: Callable[[dict], dict] | None = None,
):
    """Apply defaults <- --resume's saved settings <- --config TOML <- the command line.

    Returns (job, train, open sections): [job] and [train] applied to their configs, and the other ``sections``
    ([model], [objective]) as dicts merged layer over layer, for the model's and the objective's configs.
    ``upgrade``: the saved settings of a run written by an older minilm -> today's sections (settings that moved).
    """
    layers = []
    if resume:
        run_dir, saved = resumed_run(resume)
        check_resumed_kind(resume, saved, sections)
        saved = upgrade(saved) if upgrade is not None else saved
        layers.append(saved)
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
        saved_job = saved.get("job", {})
        for key in IDENTITY:
            if key in saved_job and getattr(job, key, saved_job[key]) != saved_job[key]:
                raise ConfigError(
                    f"--resume {resume} continues a run of {key} {saved_job[key]!r}, not {getattr(job, key)!r}: "
                    f"drop {key}={getattr(job, key)}, or start a new run in another run_dir"
                )
        check_same_optimizer(saved, train.optimizer, f"--resume {resume}")  # now, before any data is read
        train = dataclasses.replace(train, run_dir=str(run_dir))
    return job, train, open_sections


@contextlib.contextmanager
def start_run(resume: str | None, train, prog: str) -> Iterator[Path | None]:
    """For the ``with`` block that runs the job: the checkpoint ``--resume`` designates, or None for a new run, whose
    run_dir is claimed (empty, or moved aside with overwrite=true) and cleaned if it fails while it prepares (see
    :mod:`minilm.train.run_dir`)."""
    if not resume:
        with new_run_dir(train.run_dir, train.overwrite, prog):
            yield None
        return
    if not ckpt.step_dirs(Path(train.run_dir) / ckpt.CHECKPOINTS) and not (Path(resume) / ckpt.META_FILE).is_file():
        raise ConfigError(f"--resume {resume}: {not_resumable(Path(train.run_dir))}")
    yield ckpt.find_checkpoint(resume)


def not_resumable(run_dir: Path) -> str:
    """Why a run directory without a checkpoint cannot be resumed, and what to do instead."""
    return (
        f"the run saved no checkpoint (it stopped before its first save), so it cannot be resumed; start it again "
        f"with its settings and run_dir={shlex.quote(str(run_dir))} overwrite=true (moves the old files aside)"
    )


def exit_code(run: Callable[[], None]) -> int:
    """Run a command; a user's mistake becomes one ``error:`` line and an exit code, never a traceback.

    2: a wrong setting; 1: training, data, checkpoint or file trouble; 130: Ctrl-C (after the Trainer saved).
    """
    from minilm.data.errors import DataError
    from minilm.train.checkpoint import CheckpointError
    from minilm.train.distributed import leave_process_group
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
        print(f"\n{str(err) or 'interrupted'}", file=sys.stderr)
        return 130
    except OSError as err:  # the file system's trouble (a full disk, a read-only or missing place): not a bug
        print(f"error: {file_trouble(err)}", file=sys.stderr)
        return 1
    finally:
        leave_process_group()
    return 0


def file_trouble(err: OSError) -> str:
    """One line for an OSError: what failed on which file, and, for a full disk, what to do."""
    names = " -> ".join(str(name) for name in (err.filename, err.filename2) if name is not None)
    line = f"{err.strerror or err}{f': {names}' if names else ''}"
    if err.errno in (errno.ENOSPC, errno.EDQUOT):
        line += "; free some disk space (or choose a run_dir on another disk) and run again"
    elif err.errno in (errno.EACCES, errno.EPERM, errno.EROFS, errno.ENOENT, errno.ENOTDIR, errno.EEXIST):
        line += "; choose a place you can write to (run_dir=..., MINILM_CACHE_DIR=...)"
    return line
