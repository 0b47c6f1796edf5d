"""Checkpoints that survive crashes and full disks, and resume a run exactly.

Layout of a run directory::

    run_dir/checkpoints/
        step_00001000/
            model.safetensors   weights (tied tensors stored once, re-tied on load)
            training_state.pt   optimizer, scheduler, grad-scaler state, RNG states, trainer state
            meta.json           format version, step, time, model class and config, vocab size,
                                every state-dict tensor's shape, sha256 and size of the two files above
        latest                  text file naming the newest complete checkpoint ("step_00001000")

API::

    save_checkpoint(run_dir, step, model, optimizer=None, scheduler=None, scaler=None,
                    trainer_state=None, config=None, keep_last=3) -> Path          # the new step directory
    load_checkpoint(path, model, optimizer=None, scheduler=None, scaler=None, *,
                    strict=True, map_location="cpu", restore_rng=True) -> dict     # the saved trainer_state
    load_weights(path, model, *, strict=True, map_location="cpu") -> dict         # meta.json, weights only
    find_checkpoint(path) -> Path      # run dir (follows ``latest``), its checkpoints/ dir, or a step dir
    read_meta(path) -> dict            # meta.json, e.g. to rebuild the model from meta["model_config"]

Every failure the user can cause or meet (a checkpoint from another model or vocabulary, a corrupt or truncated
file, a full disk) raises :class:`CheckpointError`, whose message names the problem and the fix.

Atomicity: a checkpoint is written into ``checkpoints/.tmp-step_…``, each file fsynced, then renamed into place,
then ``latest`` is replaced atomically, then checkpoints beyond ``keep_last`` are pruned. If writing fails, the
temporary directory is removed and the earlier checkpoints and ``latest`` are untouched. Files are serialized in
memory and written by this module, so a full disk surfaces as ``OSError(ENOSPC)`` rather than a C++ assertion;
this costs one extra copy of the largest file in memory, which is small for the models of this course. One
process writes a run's checkpoints at a time (directories named ``.tmp-*`` are removed when a save starts).

Safety: ``training_state.pt`` is only ever read with ``torch.load(..., weights_only=True)``, so nothing in it is
unpickled; the save refuses state a weights-only load could not read back (anything beyond tensors, numbers,
strings, bytes, dtypes, devices, lists, tuples, sets and dicts).

Exact resume: ``load_checkpoint`` restores the RNG states as its last action (``restore_rng=True``), so call it
after everything that draws random numbers at start-up (model, optimizer, data loaders) and right before the
training loop. The data position is the trainer's to record in ``trainer_state`` (step, epoch, batch index, the
state of any ``torch.Generator`` it owns), which comes back unchanged.
"""

from __future__ import annotations

import dataclasses
import errno
import hashlib
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

from minilm.train.rng import capture_rng_state, restore_rng_state

__all__ = [
    "CheckpointError",
    "find_checkpoint",
    "load_checkpoint",
    "load_weights",
    "read_meta",
    "save_checkpoint",
]

FORMAT = "minilm-checkpoint"
FORMAT_VERSION = 1
CHECKPOINTS = "checkpoints"
LATEST = "latest"
MODEL_FILE = "model.safetensors"
STATE_FILE = "training_state.pt"
META_FILE = "meta.json"
TMP_PREFIX = ".tmp-"
COMPONENTS = ("optimizer", "scheduler", "scaler")
_STEP_DIR = re.compile(r"step_(\d+)")
_SAFE_LEAVES = (bool, int, float, complex, str, bytes, bytearray, type(None), torch.dtype, torch.device, torch.Size)
_SAFE_SEQUENCES = (list, tuple, set)
_SAFE_MAPPINGS = (dict, OrderedDict, Counter)
_DISK_FULL = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG)


class CheckpointError(Exception):
    """A checkpoint could not be saved or loaded; the message says what is wrong and what to do."""


# ---------------------------------------------------------------------------------------------------------------
# Saving


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
    """Write ``run_dir/checkpoints/step_{step:08d}`` atomically, point ``latest`` at it, prune old ones.

    ``trainer_state`` carries what the trainer needs to continue (step, epoch, data position…) and ``config`` the
    run's configuration (stored in meta.json, so JSON types). ``keep_last=None`` keeps every checkpoint; pruning
    removes the lowest steps and never the one just written. Returns the new checkpoint directory.
    ``model_state`` / ``optimizer_state`` replace ``model.state_dict()`` / ``optimizer.state_dict()``: a sharded
    (FSDP) run gathers full state dicts on every process and passes them to the process that saves.
    """
    if keep_last is not None and keep_last < 1:
        raise ValueError(f"keep_last must be at least 1 (or None to keep all), got {keep_last}")
    root = Path(run_dir) / CHECKPOINTS
    final = root / _step_name(step)
    state = {
        "optimizer": optimizer_state if optimizer_state is not None else _state_dict_or_none(optimizer),
        "scheduler": _state_dict_or_none(scheduler),
        "scaler": _state_dict_or_none(scaler),
        "rng": capture_rng_state(),
        "trainer": trainer_state if trainer_state is not None else {},
    }
    _require_weights_only_loadable(state, step)
    weights = model_state if model_state is not None else model.state_dict()
    _write_checkpoint_dir(root, final, step, model, weights, state, config)
    _write_latest(root, final, step)
    if keep_last is not None:
        _prune(root, keep_last, final)
    return final


def _state_dict_or_none(component: Any) -> dict | None:
    return None if component is None else component.state_dict()


def _require_weights_only_loadable(state: dict, step: int) -> None:
    """Refuse, before anything is written, state that ``torch.load(weights_only=True)`` could not read back."""
    where = _first_unsafe(state, "")
    if where is not None:
        path, value = where
        raise CheckpointError(
            f"cannot save checkpoint step {step}: training state{path} has type {type(value).__qualname__}, which a "
            "safe (weights_only) load refuses; keep only tensors, numbers, strings, lists, tuples and dicts in "
            "trainer_state (e.g. a torch.Generator as generator.get_state())"
        )


def _first_unsafe(value: Any, path: str) -> tuple[str, Any] | None:
    """The first (key path, value) in ``value`` that is not a weights-only-loadable type, or None."""
    if type(value) in _SAFE_LEAVES or type(value) in (torch.Tensor, nn.Parameter):
        return None
    if type(value) in _SAFE_SEQUENCES:
        items = enumerate(value)
    elif type(value) in _SAFE_MAPPINGS:
        for key in value:
            if type(key) not in _SAFE_LEAVES:
                return f"{path} key {key!r}", key
        items = value.items()
    else:
        return path, value
    for key, item in items:
        found = _first_unsafe(item, f"{path}[{key!r}]")
        if found is not None:
            return found
    return None


def _write_checkpoint_dir(
    root: Path, final: Path, step: int, model: nn.Module, weights: dict, state: dict, config: dict | None
):
    """Write the three files into a temporary directory and rename it to ``final``; on failure leave no trace."""
    previous = _latest_or_none(root)
    tmp = root / f"{TMP_PREFIX}{final.name}"
    try:
        root.mkdir(parents=True, exist_ok=True)
        _remove_temporaries(root)
        tmp.mkdir()
        files = {MODEL_FILE: _write_file(tmp / MODEL_FILE, _weights_bytes(weights))}
        files[STATE_FILE] = _write_file(tmp / STATE_FILE, _state_bytes(state))
        _write_file(tmp / META_FILE, _meta_bytes(step, model, weights, config, files))
        _fsync_dir(tmp)
        _rename_into_place(tmp, final)
        _fsync_dir(root)
    except BaseException as error:
        shutil.rmtree(tmp, ignore_errors=True)
        if isinstance(error, Exception):
            raise CheckpointError(_save_failure(step, error, previous)) from error
        raise


def _save_failure(step: int, error: Exception, previous: Path | None) -> str:
    reason = error.strerror if isinstance(error, OSError) and error.strerror else str(error)
    kept = f"the previous checkpoint {previous} is intact" if previous else "no earlier checkpoint exists"
    full = isinstance(error, OSError) and error.errno in _DISK_FULL
    fix = "free disk space (or lower keep_last) and save again" if full else "fix the cause and save again"
    return f"could not save checkpoint step {step}: {reason}; {kept}; {fix}"


def _remove_temporaries(root: Path) -> None:
    """Remove what an interrupted save or prune left behind (``.tmp-*`` directories)."""
    for leftover in root.glob(f"{TMP_PREFIX}*"):
        shutil.rmtree(leftover, ignore_errors=True)


def _weights_bytes(weights: dict) -> bytes:
    """The state dict as safetensors, each tied tensor once (``load_model`` re-ties the aliases on load)."""
    tensors, seen = {}, set()
    for name, tensor in weights.items():
        identity = (tensor.device, tensor.data_ptr(), tensor.dtype, tuple(tensor.shape), tensor.stride())
        if identity not in seen:
            seen.add(identity)
            tensors[name] = tensor.contiguous()
    return safetensors.torch.save(tensors, metadata={"format": "pt"})


def _state_bytes(state: dict) -> bytes:
    buffer = io.BytesIO()
    torch.save(state, buffer)
    return buffer.getvalue()


def _meta_bytes(step: int, model: nn.Module, weights: dict, config: dict | None, files: dict) -> bytes:
    meta = {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "step": step,
        "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "model_class": _class_name(model),
        "model_config": _model_config(model),
        "vocab_size": _vocab_size(model),
        "config": config,
        "tensors": {name: list(tensor.shape) for name, tensor in weights.items()},
        "files": files,
        "torch_version": torch.__version__,
    }
    return json.dumps(meta, indent=2, default=str).encode()


def _write_file(path: Path, data: bytes) -> dict:
    """Write and fsync ``data``; return its sha256 and size for meta.json."""
    with open(path, "wb") as file:
        file.write(data)
        file.flush()
        os.fsync(file.fileno())
    return {"sha256": hashlib.sha256(data).hexdigest(), "bytes": len(data)}


def _fsync_dir(path: Path) -> None:
    """Make a rename or a new entry in ``path`` durable (POSIX only; Windows cannot open directories)."""
    if os.name == "nt":
        return
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _rename_into_place(tmp: Path, final: Path) -> None:
    """Rename ``tmp`` to ``final``; a checkpoint of the same step already there is replaced (and restored on error)."""
    if not final.exists():
        os.rename(tmp, final)
        return
    replaced = final.with_name(f"{TMP_PREFIX}replaced-{final.name}")
    os.rename(final, replaced)
    try:
        os.rename(tmp, final)
    except BaseException:
        os.rename(replaced, final)
        raise
    shutil.rmtree(replaced, ignore_errors=True)


def _write_latest(root: Path, final: Path, step: int) -> None:
    """Point ``latest`` at ``final`` by writing a temporary file and renaming it over the old one."""
    tmp = root / f"{TMP_PREFIX}{LATEST}"
    try:
        _write_file(tmp, f"{final.name}\n".encode())
        os.replace(tmp, root / LATEST)
        _fsync_dir(root)
    except OSError as error:
        tmp.unlink(missing_ok=True)
        raise CheckpointError(
            f"checkpoint step {step} was saved to {final} but {root / LATEST} could not be updated "
            f"({error.strerror or error}); it still names the previous checkpoint; resume from {final} explicitly"
        ) from error


def _prune(root: Path, keep_last: int, keep: Path) -> None:
    """Delete all but the newest ``keep_last`` checkpoints, never ``keep``; renamed away first so that no
    half-deleted directory ever looks like a checkpoint."""
    for step_dir in _step_dirs(root)[:-keep_last]:
        if step_dir == keep:
            continue
        doomed = root / f"{TMP_PREFIX}pruned-{step_dir.name}"
        try:
            os.rename(step_dir, doomed)
            shutil.rmtree(doomed)
        except OSError as error:
            warnings.warn(f"could not delete old checkpoint {step_dir}: {error}", stacklevel=3)


# ---------------------------------------------------------------------------------------------------------------
# Finding and describing checkpoints


def find_checkpoint(path: str | os.PathLike) -> Path:
    """The checkpoint directory ``path`` designates: a step directory itself, or the one ``latest`` names in a run
    directory or its ``checkpoints/`` directory (the highest step when ``latest`` is missing)."""
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
    if (root / LATEST).is_file():
        name = (root / LATEST).read_text().strip()
        raise CheckpointError(
            f"{root / LATEST} names {name!r}, which is not a checkpoint in {root}; pass one of its step_* "
            "directories explicitly"
        )
    step_dirs = _step_dirs(root)
    if not step_dirs:
        raise CheckpointError(f"no checkpoint in {path}; start the run without --resume, or pass another path")
    return step_dirs[-1]


def read_meta(path: str | os.PathLike) -> dict:
    """meta.json of the checkpoint :func:`find_checkpoint` finds at ``path``."""
    checkpoint = find_checkpoint(path)
    try:
        meta = json.loads((checkpoint / META_FILE).read_text())
    except (OSError, ValueError) as error:
        raise _corrupt(checkpoint, f"{META_FILE} is missing or unreadable: {error}") from error
    if not isinstance(meta, dict) or meta.get("format") != FORMAT:
        raise _corrupt(checkpoint, f"{META_FILE} is not a {FORMAT} description")
    if meta["format_version"] > FORMAT_VERSION:
        raise CheckpointError(
            f"checkpoint {checkpoint} has format version {meta['format_version']}, newer than this minilm "
            f"understands ({FORMAT_VERSION}); upgrade minilm"
        )
    return meta


def _step_name(step: int) -> str:
    return f"step_{step:08d}"


def _step_dirs(root: Path) -> list[Path]:
    """The ``step_*`` directories in ``root``, lowest step first."""
    if not root.is_dir():
        return []
    found = [p for p in root.iterdir() if p.is_dir() and _STEP_DIR.fullmatch(p.name)]
    return sorted(found, key=lambda p: int(_STEP_DIR.fullmatch(p.name).group(1)))


def _latest_or_none(root: Path) -> Path | None:
    """The complete checkpoint ``root/latest`` names, or None when there is none."""
    try:
        name = (root / LATEST).read_text().strip()
    except OSError:
        return None
    checkpoint = root / name
    return checkpoint if _STEP_DIR.fullmatch(name) and (checkpoint / META_FILE).is_file() else None


def _corrupt(checkpoint: Path, problem: str) -> CheckpointError:
    """The error for a damaged checkpoint, pointing at the newest earlier one to resume from instead."""
    earlier = [p for p in _step_dirs(checkpoint.parent) if _step_key(p) < _step_key(checkpoint)]
    instead = f"resume from an earlier one: {earlier[-1]}" if earlier else "no earlier one exists, start afresh"
    return CheckpointError(f"checkpoint {checkpoint} is corrupt or truncated ({problem}); delete it and {instead}")


def _step_key(path: Path) -> int:
    match = _STEP_DIR.fullmatch(path.name)
    return int(match.group(1)) if match else -1


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


def _is_sharded(model: nn.Module) -> bool:
    """Whether FSDP (``fully_shard``) manages the model: its tensors are then shards of the full ones."""
    from torch.distributed.fsdp import FSDPModule

    return isinstance(model, FSDPModule)


def _class_name(model: nn.Module) -> str:
    """The model's own class name; FSDP wraps it in a generated subclass called ``FSDP<name>``."""
    if _is_sharded(model):
        from torch.distributed.fsdp import FSDPModule

        return next(c for c in type(model).__mro__ if FSDPModule not in c.__mro__).__name__
    return type(model).__name__


def _full_state_options(strict: bool = True):
    from torch.distributed.checkpoint.state_dict import StateDictOptions

    return StateDictOptions(full_state_dict=True, strict=strict)


def _tensor_shapes(model: nn.Module) -> dict[str, list[int]]:
    return {name: list(tensor.shape) for name, tensor in model.state_dict().items()}


# ---------------------------------------------------------------------------------------------------------------
# Loading


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

    Everything is verified before the model is touched: file hashes, model class, tensor names and shapes, and
    that the checkpoint has a state for each component passed. The RNG states are restored last (unless
    ``restore_rng=False``), so call this right before the training loop.
    """
    checkpoint = find_checkpoint(path)
    meta = read_meta(checkpoint)
    _check_compatible(checkpoint, meta, model, strict)
    _verify_file(checkpoint, meta, MODEL_FILE)
    state = _read_training_state(checkpoint, meta, map_location)
    components = {"optimizer": optimizer, "scheduler": scheduler, "scaler": scaler}
    _check_components(checkpoint, state, components)
    _load_model_file(checkpoint, model, strict, map_location)
    for name, component in components.items():
        if component is not None:
            _load_component(checkpoint, name, component, state[name], model)
    if restore_rng:
        restore_rng_state(state["rng"])
    return state["trainer"]


def load_weights(
    path: str | os.PathLike, model: nn.Module, *, strict: bool = True, map_location: str | torch.device = "cpu"
) -> dict:
    """Load only the weights of the checkpoint at ``path`` (e.g. to fine-tune a pretrained run); return its meta.

    Same checks as :func:`load_checkpoint`. ``strict=False`` allows a different model class and tensors missing
    on either side (a new head, say), but every tensor both have must agree in shape.
    """
    checkpoint = find_checkpoint(path)
    meta = read_meta(checkpoint)
    _check_compatible(checkpoint, meta, model, strict)
    _verify_file(checkpoint, meta, MODEL_FILE)
    _load_model_file(checkpoint, model, strict, map_location)
    return meta


def _check_compatible(checkpoint: Path, meta: dict, model: nn.Module, strict: bool) -> None:
    """Refuse a checkpoint of another architecture or vocabulary, naming the first mismatching tensors."""
    saved, here = meta["tensors"], _tensor_shapes(model)
    problems = _shape_mismatches(saved, here)
    if strict:
        problems += _name_mismatches("this model has tensors the checkpoint lacks", here.keys() - saved.keys())
        problems += _name_mismatches("the checkpoint has tensors this model lacks", saved.keys() - here.keys())
        if meta["model_class"] != _class_name(model) and not problems:
            problems.append("the model classes differ")
    elif not saved.keys() & here.keys():
        problems.append("they have no tensor names in common")
    if problems:
        saved_as = _describe(meta["model_class"], meta["vocab_size"])
        raise CheckpointError(
            f"checkpoint {checkpoint} was saved from {saved_as}; this model is "
            f"{_describe(_class_name(model), _vocab_size(model))} — {'; '.join(problems)}. Build the model "
            f"from the checkpoint's model_config (in {META_FILE}), or load a checkpoint saved from this model"
        )


def _shape_mismatches(saved: dict, here: dict, shown: int = 3) -> list[str]:
    names = [name for name in saved if name in here and list(saved[name]) != list(here[name])]
    problems = [f"{n} is {list(saved[n])} in the checkpoint but {list(here[n])} in this model" for n in names[:shown]]
    if len(names) > shown:
        problems.append(f"{len(names) - shown} more tensors differ in shape")
    return problems


def _name_mismatches(what: str, names: set[str], shown: int = 3) -> list[str]:
    if not names:
        return []
    listed = ", ".join(sorted(names)[:shown])
    more = f" and {len(names) - shown} more" if len(names) > shown else ""
    return [f"{what}: {listed}{more}"]


def _describe(model_class: str, vocab_size: int | None) -> str:
    return model_class if vocab_size is None else f"{model_class} with vocab_size={vocab_size}"


def _verify_file(checkpoint: Path, meta: dict, name: str) -> None:
    """Check that ``name`` exists with the size and sha256 recorded in meta.json."""
    expected = meta["files"].get(name)
    path = checkpoint / name
    if expected is None or not path.is_file():
        raise _corrupt(checkpoint, f"{name} is missing")
    if path.stat().st_size != expected["bytes"]:
        raise _corrupt(checkpoint, f"{name} has {path.stat().st_size} bytes, expected {expected['bytes']}")
    if _sha256(path) != expected["sha256"]:
        raise _corrupt(checkpoint, f"{name} sha256 mismatch")


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as file:
        for block in iter(lambda: file.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _read_training_state(checkpoint: Path, meta: dict, map_location: str | torch.device) -> dict:
    """training_state.pt, verified and loaded with ``weights_only=True``: nothing in it is ever unpickled."""
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


def _check_components(checkpoint: Path, state: dict, components: dict) -> None:
    """Each optimizer/scheduler/scaler passed in needs a saved state; resuming without one would not be exact."""
    for name, component in components.items():
        if component is not None and state[name] is None:
            raise CheckpointError(
                f"checkpoint {checkpoint} has no {name} state (it was saved without one); pass {name}=None to "
                "load_checkpoint, or use load_weights to start a new run from these weights"
            )


def _load_model_file(checkpoint: Path, model: nn.Module, strict: bool, map_location: str | torch.device) -> None:
    try:
        if _is_sharded(model):  # every process reads the full tensors and keeps its shards
            from torch.distributed.checkpoint.state_dict import set_model_state_dict

            weights = safetensors.torch.load_file(checkpoint / MODEL_FILE, device=str(map_location))
            set_model_state_dict(model, weights, options=_full_state_options(strict))
            return
        safetensors.torch.load_model(model, checkpoint / MODEL_FILE, strict=strict, device=str(map_location))
    except Exception as error:
        raise CheckpointError(
            f"checkpoint {checkpoint}: {MODEL_FILE} cannot be loaded into this {type(model).__name__} "
            f"({' '.join(str(error).split())}); the file is damaged, or this model ties or names its tensors "
            "differently from the one that saved it"
        ) from error


def _load_component(checkpoint: Path, name: str, component: Any, state: dict, model: nn.Module) -> None:
    try:
        if name == "optimizer" and _is_sharded(model):
            from torch.distributed.checkpoint.state_dict import set_optimizer_state_dict

            set_optimizer_state_dict(model, component, state, options=_full_state_options())
            return
        component.load_state_dict(state)
    except Exception as error:
        raise CheckpointError(
            f"checkpoint {checkpoint}: the saved {name} state does not fit this {name} ({error}); build the "
            f"{name} as in the original run"
        ) from error
