"""Checkpoints of a run: they resume it exactly, and neither a crash nor a full disk ever costs the previous one.

    run_dir/checkpoints/
        step_00001000/          committed whole (minilm.files.atomic_folder), so it is complete or absent
            model.safetensors   the weights, tied tensors stored once
            training_state.pt   optimizer, scheduler and grad-scaler states, RNG states, the trainer's state
            meta.json           format, step, model class and config, vocab size, the run's config, tensor shapes,
                                sha256 and size of the two files above
        latest                  the newest step directory's name, replaced after it is committed

A save that fails (a full disk is ``OSError(ENOSPC)``: files are serialized in memory first) leaves the earlier
checkpoints and ``latest`` as they were. ``training_state.pt`` is only read with ``torch.load(weights_only=True)``:
nothing in it is ever unpickled, and a save refuses state such a load could not read back. Every failure a user can
cause or meet is a :class:`minilm.files.CheckpointError` naming the problem and the fix. An FSDP model's full
tensors are gathered and scattered by :mod:`minilm.train.distributed`.

``load_checkpoint`` restores the RNG states (:mod:`minilm.train.rng`) last: call it right before the training loop.
"""

from __future__ import annotations

import dataclasses
import errno
import io
import json
import os
import pickle
import re
import shutil
import warnings
from collections import Counter, OrderedDict
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import safetensors.torch
import torch
from torch import nn

from minilm.files import TMP_PREFIX, CheckpointError, atomic_folder, atomic_write_text, file_sha256, write_durably
from minilm.train.distributed import is_sharded, load_optimizer_state, model_class_name, set_full_model_state
from minilm.train.rng import capture_rng_state, restore_rng_state

__all__ = [
    "CheckpointError",
    "find_checkpoint",
    "load_checkpoint",
    "load_weights",
    "read_meta",
    "save_checkpoint",
    "step_dirs",
]

CHECKPOINTS, LATEST = "checkpoints", "latest"
MODEL_FILE, STATE_FILE, META_FILE = "model.safetensors", "training_state.pt", "meta.json"
FORMAT, FORMAT_VERSION = "minilm-checkpoint", 1
COMPONENTS = ("optimizer", "scheduler", "scaler")
_STEP_DIR = re.compile(r"step_(\d+)")
_DISK_FULL = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG)


def save_checkpoint(
    run_dir: str | os.PathLike,
    step: int,
    model: nn.Module,
    optimizer: torch.optim.Optimizer | None = None,
    scheduler: torch.optim.lr_scheduler.LRScheduler | None = None,
    scaler: torch.amp.GradScaler | None = None,
    trainer_state: dict | None = None,
    config: dict | None = None,
    keep_last: int | None = 3,
    model_state: dict | None = None,
    optimizer_state: dict | None = None,
) -> Path:
    """Write ``run_dir/checkpoints/step_{step:08d}``, point ``latest`` at it, prune the oldest; return it.

    ``trainer_state``: what the trainer needs to continue (step, data position…); ``config``: the run's settings
    (JSON types). ``keep_last=None`` keeps every checkpoint. ``model_state`` / ``optimizer_state`` replace the
    model's and optimizer's own state dicts: an FSDP run passes the full ones it gathered.
    """
    if keep_last is not None and keep_last < 1:
        raise ValueError(f"keep_last must be at least 1 (or None to keep all), got {keep_last}")
    state = {
        "optimizer": optimizer_state if optimizer_state is not None else _state_dict(optimizer),
        "scheduler": _state_dict(scheduler),
        "scaler": _state_dict(scaler),
        "rng": capture_rng_state(),
        "trainer": trainer_state if trainer_state is not None else {},
    }
    _require_weights_only_loadable(state, step)
    weights = model_state if model_state is not None else model.state_dict()
    root = Path(run_dir) / CHECKPOINTS
    previous, final = _latest_or_none(root), root / f"step_{step:08d}"
    try:
        root.mkdir(parents=True, exist_ok=True)
        for leftover in root.glob(f"{TMP_PREFIX}*"):  # of an interrupted save or prune (one writer per run)
            shutil.rmtree(leftover, ignore_errors=True)
        with atomic_folder(final) as tmp:
            files = {
                MODEL_FILE: write_durably(tmp / MODEL_FILE, _weights_bytes(weights)),
                STATE_FILE: write_durably(tmp / STATE_FILE, _state_bytes(state)),
            }
            write_durably(tmp / META_FILE, _meta_bytes(step, model, weights, config, files))
    except Exception as error:
        raise CheckpointError(_save_failure(step, error, previous)) from error
    try:
        atomic_write_text(root / LATEST, f"{final.name}\n")
    except OSError as error:
        raise CheckpointError(
            f"checkpoint step {step} was saved to {final} but {root / LATEST} could not be updated "
            f"({error.strerror or error}); it still names the previous checkpoint; resume from {final} explicitly"
        ) from error
    if keep_last is not None:
        _prune(root, keep_last, final)
    return final


def load_checkpoint(
    path: str | os.PathLike,
    model: nn.Module,
    optimizer: torch.optim.Optimizer | None = None,
    scheduler: torch.optim.lr_scheduler.LRScheduler | None = None,
    scaler: torch.amp.GradScaler | None = None,
    *,
    strict: bool = True,
    map_location: str | torch.device = "cpu",
    restore_rng: bool = True,
) -> dict:
    """Restore a run from the checkpoint at ``path`` (see :func:`find_checkpoint`); return its ``trainer_state``.

    Checked before anything is touched: file hashes, model class, tensor names and shapes, and a saved state for
    each component passed. The RNG states are restored last, unless ``restore_rng=False``.
    """
    checkpoint, meta = _checked(path, model, strict)
    state = _read_state(checkpoint, meta, map_location)
    passed = {name: c for name, c in zip(COMPONENTS, (optimizer, scheduler, scaler), strict=True) if c is not None}
    for name in passed:
        if state[name] is None:  # resuming without it would not be exact
            raise CheckpointError(
                f"checkpoint {checkpoint} has no {name} state (it was saved without one); pass {name}=None to "
                "load_checkpoint, or use load_weights to start a new run from these weights"
            )
    _load_weights_file(checkpoint, model, strict, map_location)
    for name, component in passed.items():
        try:
            if name == "optimizer":
                load_optimizer_state(model, component, state[name])  # into this process's shards under FSDP
            else:
                component.load_state_dict(state[name])
        except Exception as error:
            raise CheckpointError(
                f"checkpoint {checkpoint}: the saved {name} state does not fit this {name} ({error}); build the "
                f"{name} as in the original run"
            ) from error
    if restore_rng:
        restore_rng_state(state["rng"])
    return state["trainer"]


def load_weights(
    path: str | os.PathLike, model: nn.Module, *, strict: bool = True, map_location: str | torch.device = "cpu"
) -> dict:
    """Load only the weights of the checkpoint at ``path`` (to fine-tune a pretrained run, say); return its meta.

    ``strict=False`` allows another model class and tensors missing on either side (a new head), but every tensor
    both have must agree in shape.
    """
    checkpoint, meta = _checked(path, model, strict)
    _load_weights_file(checkpoint, model, strict, map_location)
    return meta


def _save_failure(step: int, error: Exception, previous: Path | None) -> str:
    reason = error.strerror if isinstance(error, OSError) and error.strerror else str(error)
    kept = f"the previous checkpoint {previous} is intact" if previous else "no earlier checkpoint exists"
    full = isinstance(error, OSError) and error.errno in _DISK_FULL
    fix = "free disk space (or lower keep_last) and save again" if full else "fix the cause and save again"
    return f"could not save checkpoint step {step}: {reason}; {kept}; {fix}"


# ---------------------------------------------------------------------------------------------------------------
# checkpoints/latest and the step_* directories


def find_checkpoint(path: str | os.PathLike) -> Path:
    """The checkpoint directory ``path`` designates: a step directory itself, or the one ``latest`` names in a run
    directory or its ``checkpoints/`` directory. When ``latest`` is missing or names a checkpoint that is gone or
    incomplete, the newest complete step directory (with a warning)."""
    path = Path(path)
    if not path.exists():
        raise CheckpointError(
            f"no checkpoint at {path}: it does not exist; pass a run directory, its {CHECKPOINTS}/ directory or a "
            f"{CHECKPOINTS}/step_XXXXXXXX directory"
        )
    if (path / META_FILE).is_file() or _STEP_DIR.fullmatch(path.name):
        return path
    root = path / CHECKPOINTS if (path / CHECKPOINTS).is_dir() else path
    latest = _latest_or_none(root)
    if latest is not None:
        return latest
    complete = [p for p in step_dirs(root) if (p / META_FILE).is_file()]
    if not complete:
        raise CheckpointError(f"no checkpoint in {path}: it holds no complete {CHECKPOINTS}/step_* directory")
    if (root / LATEST).is_file():
        named = (root / LATEST).read_text().strip()
        warnings.warn(
            f"{root / LATEST} names {named!r}, which is not a complete checkpoint; using the newest complete one, "
            f"{complete[-1]}",
            stacklevel=2,
        )
    return complete[-1]


def _latest_or_none(root: Path) -> Path | None:
    """The complete checkpoint ``root/latest`` names, or None when there is none."""
    try:
        name = (root / LATEST).read_text().strip()
    except OSError:
        return None
    return root / name if _STEP_DIR.fullmatch(name) and (root / name / META_FILE).is_file() else None


def step_dirs(root: Path) -> list[Path]:
    """The ``step_*`` directories in ``root``, lowest step first."""
    found = [p for p in root.iterdir() if p.is_dir() and _STEP_DIR.fullmatch(p.name)] if root.is_dir() else []
    return sorted(found, key=lambda p: int(_STEP_DIR.fullmatch(p.name).group(1)))


def _prune(root: Path, keep_last: int, keep: Path) -> None:
    """Delete all but the newest ``keep_last`` checkpoints, never ``keep``; each is renamed away first, so that no
    half-deleted directory ever looks like a checkpoint."""
    for step_dir in step_dirs(root)[:-keep_last]:
        if step_dir == keep:
            continue
        doomed = root / f"{TMP_PREFIX}pruned-{step_dir.name}"
        try:
            os.rename(step_dir, doomed)
            shutil.rmtree(doomed)
        except OSError as error:
            warnings.warn(f"could not delete old checkpoint {step_dir}: {error}", stacklevel=3)


def _corrupt(checkpoint: Path, problem: str) -> CheckpointError:
    """The error for a damaged checkpoint, pointing at the newest earlier one to resume from instead."""
    found = step_dirs(checkpoint.parent)
    earlier = [p for p in found[: found.index(checkpoint)] if (p / META_FILE).is_file()] if checkpoint in found else []
    instead = (
        f"resume from an earlier one: {earlier[-1]} (--resume {earlier[-1]}; its next saves replace this one)"
        if earlier
        else "no earlier checkpoint exists: start the run again (overwrite=true moves the old one aside)"
    )
    return CheckpointError(f"checkpoint {checkpoint} is corrupt or truncated ({problem}); {instead}")


# ---------------------------------------------------------------------------------------------------------------
# meta.json: what the checkpoint holds, checked against the model before anything is loaded


def read_meta(path: str | os.PathLike) -> dict:
    """meta.json of the checkpoint :func:`find_checkpoint` finds at ``path``."""
    checkpoint = find_checkpoint(path)
    try:
        meta = json.loads((checkpoint / META_FILE).read_text())
    except (OSError, ValueError) as error:
        raise _corrupt(checkpoint, f"{META_FILE} is missing or unreadable: {error}") from error
    if not isinstance(meta, dict) or meta.get("format") != FORMAT:
        raise _corrupt(checkpoint, f"{META_FILE} is not a {FORMAT} description")
    if not isinstance(meta.get("format_version"), int) or not isinstance(meta.get("files"), dict):
        raise _corrupt(checkpoint, f"{META_FILE} lacks its format_version or files")
    if meta["format_version"] > FORMAT_VERSION:
        raise CheckpointError(
            f"checkpoint {checkpoint} has format version {meta['format_version']}, newer than this minilm "
            f"understands ({FORMAT_VERSION}); upgrade minilm"
        )
    return meta


def _meta_bytes(step: int, model: nn.Module, weights: dict, config: dict | None, files: dict) -> bytes:
    meta = {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "step": step,
        "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "model_class": model_class_name(model),
        "model_config": _model_config(model),
        "vocab_size": _vocab_size(model),
        "config": config,
        "tensors": {name: list(tensor.shape) for name, tensor in weights.items()},
        "files": files,
        "torch_version": torch.__version__,
    }
    return json.dumps(meta, indent=2, default=str).encode()


def _model_config(model: nn.Module) -> dict | None:
    """The model's configuration as a dict: ``model.config_dict()``, a dataclass ``model.config``, or a dict."""
    if callable(getattr(model, "config_dict", None)):
        return model.config_dict()
    config = getattr(model, "config", None)
    if dataclasses.is_dataclass(config) and not isinstance(config, type):
        return dataclasses.asdict(config)
    return dict(config) if isinstance(config, dict) else None


def _vocab_size(model: nn.Module) -> int | None:
    """``vocab_size`` from the model's config, else the size of its first embedding table."""
    size = (_model_config(model) or {}).get("vocab_size")
    if isinstance(size, int):
        return size
    embedding = next((m for m in model.modules() if isinstance(m, nn.Embedding)), None)
    return None if embedding is None else embedding.num_embeddings


def _checked(path: str | os.PathLike, model: nn.Module, strict: bool) -> tuple[Path, dict]:
    """The checkpoint at ``path`` and its meta, once its tensors fit ``model`` and its weights file is intact."""
    checkpoint = find_checkpoint(path)
    meta = read_meta(checkpoint)
    saved, here = meta["tensors"], {name: list(tensor.shape) for name, tensor in model.state_dict().items()}
    differ = [name for name in saved if name in here and list(saved[name]) != here[name]]
    problems = [f"{n} is {list(saved[n])} in the checkpoint but {here[n]} in this model" for n in differ[:3]]
    problems += [f"{len(differ) - 3} more tensors differ in shape"] if len(differ) > 3 else []
    if strict:
        problems += _listed("this model has tensors the checkpoint lacks", here.keys() - saved.keys())
        problems += _listed("the checkpoint has tensors this model lacks", saved.keys() - here.keys())
        if meta["model_class"] != model_class_name(model) and not problems:
            problems.append("the model classes differ")
    elif not saved.keys() & here.keys():
        problems.append("they have no tensor names in common")
    if problems:
        problems = _config_differences(meta.get("model_config"), _model_config(model)) + problems
        saved_from, this = (meta["model_class"], meta["vocab_size"]), (model_class_name(model), _vocab_size(model))
        raise CheckpointError(
            f"checkpoint {checkpoint} was saved from {_described(*saved_from)}; this model is {_described(*this)} — "
            f"{'; '.join(problems)}. Build the model from the checkpoint's model_config (in {META_FILE}), or load a "
            "checkpoint saved from this model"
        )
    _verify_file(checkpoint, meta, MODEL_FILE)
    return checkpoint, meta


def _config_differences(saved: dict | None, here: dict | None) -> list[str]:
    """The model settings that differ between the checkpoint and this model (e.g. ALBERT's share), first."""
    if not isinstance(saved, dict) or not isinstance(here, dict):
        return []
    keys = [key for key in here if key in saved and saved[key] != here[key]]
    return [f"{key}={saved[key]!r} in the checkpoint but {here[key]!r} here" for key in keys]


def _listed(what: str, names: set[str], shown: int = 3) -> list[str]:
    more = f" and {len(names) - shown} more" if len(names) > shown else ""
    return [f"{what}: {', '.join(sorted(names)[:shown])}{more}"] if names else []


def _described(model_class: str, vocab_size: int | None) -> str:
    return model_class if vocab_size is None else f"{model_class} with vocab_size={vocab_size}"


def _verify_file(checkpoint: Path, meta: dict, name: str) -> None:
    """Check that ``name`` exists with the size and sha256 recorded in meta.json."""
    expected, path = meta["files"].get(name), checkpoint / name
    if expected is None or not path.is_file():
        raise _corrupt(checkpoint, f"{name} is missing")
    if path.stat().st_size != expected["bytes"]:
        raise _corrupt(checkpoint, f"{name} has {path.stat().st_size} bytes, expected {expected['bytes']}")
    if file_sha256(path) != expected["sha256"]:
        raise _corrupt(checkpoint, f"{name} sha256 mismatch")


# ---------------------------------------------------------------------------------------------------------------
# model.safetensors


def _weights_bytes(weights: dict) -> bytes:
    """The state dict as safetensors, each tied tensor once (``load_model`` re-ties the aliases on load)."""
    tensors, seen = {}, set()
    for name, tensor in weights.items():
        identity = (tensor.device, tensor.data_ptr(), tensor.dtype, tuple(tensor.shape), tensor.stride())
        if identity not in seen:
            seen.add(identity)
            tensors[name] = tensor.contiguous()
    return safetensors.torch.save(tensors, metadata={"format": "pt"})


def _load_weights_file(checkpoint: Path, model: nn.Module, strict: bool, map_location: str | torch.device) -> None:
    file = checkpoint / MODEL_FILE
    try:
        if is_sharded(model):  # every process reads the full tensors and keeps its shards
            set_full_model_state(model, safetensors.torch.load_file(file, device=str(map_location)), strict)
        else:
            safetensors.torch.load_model(model, file, strict=strict, device=str(map_location))
    except Exception as error:
        raise CheckpointError(
            f"checkpoint {checkpoint}: {MODEL_FILE} cannot be loaded into this {type(model).__name__} "
            f"({' '.join(str(error).split())}); the file is damaged, or this model ties or names its tensors "
            "differently from the one that saved it"
        ) from error


# ---------------------------------------------------------------------------------------------------------------
# training_state.pt: plain data and tensors only, what torch.load(weights_only=True) reads back

_SAFE_LEAVES = (bool, int, float, complex, str, bytes, bytearray, type(None), torch.dtype, torch.device, torch.Size)
_SAFE_LEAVES += (torch.Tensor, nn.Parameter)
_SAFE_CONTAINERS = (list, tuple, set, dict, OrderedDict, Counter)


def _state_dict(component: Any) -> dict | None:
    return None if component is None else component.state_dict()


def _require_weights_only_loadable(state: dict, step: int) -> None:
    """Refuse, before anything is written, state that ``torch.load(weights_only=True)`` could not read back."""
    unsafe = _first_unsafe(state)
    if unsafe is not None:
        where, value = unsafe
        raise CheckpointError(
            f"cannot save checkpoint step {step}: training state{where} has type {type(value).__qualname__}, which a "
            "safe (weights_only) load refuses; keep only tensors, numbers, strings, lists, tuples and dicts in "
            "trainer_state (e.g. a torch.Generator as generator.get_state())"
        )


def _first_unsafe(value: Any, where: str = "") -> tuple[str, Any] | None:
    """The first (key path, value) in ``value`` that a weights-only load would refuse, or None."""
    if type(value) in _SAFE_LEAVES:
        return None
    if type(value) not in _SAFE_CONTAINERS:
        return where, value
    mapping = isinstance(value, dict)
    for key, item in value.items() if mapping else enumerate(value):
        if mapping and type(key) not in _SAFE_LEAVES:
            return f"{where} key {key!r}", key
        found = _first_unsafe(item, f"{where}[{key!r}]")
        if found is not None:
            return found
    return None


def _state_bytes(state: dict) -> bytes:
    buffer = io.BytesIO()
    torch.save(state, buffer)
    return buffer.getvalue()


def _read_state(checkpoint: Path, meta: dict, map_location: str | torch.device) -> dict:
    """training_state.pt, verified, then loaded with ``weights_only=True``: nothing in it is ever unpickled."""
    _verify_file(checkpoint, meta, STATE_FILE)
    try:
        state = torch.load(checkpoint / STATE_FILE, map_location=map_location, weights_only=True)
    except pickle.UnpicklingError as error:
        refused = re.search(r"GLOBAL (\S+)", str(error))
        what = f"a pickled {refused.group(1)} object" if refused else "objects other than tensors and plain data"
        raise _corrupt(checkpoint, f"{STATE_FILE} holds {what}, which a weights_only load refuses") from error
    except Exception as error:
        raise _corrupt(checkpoint, f"{STATE_FILE} cannot be read: {str(error).splitlines()[0]}") from error
    if not isinstance(state, dict) or not {*COMPONENTS, "rng", "trainer"} <= state.keys():
        raise _corrupt(checkpoint, f"{STATE_FILE} is not a minilm training state")
    return state
