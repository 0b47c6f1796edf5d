"""A Hugging Face checkpoint folder, read and written: ``config.json`` and safetensors weights, nothing else.

A checkpoint is a folder with ``config.json`` (the architecture's hyper-parameters, in the model's own field names)
and ``model.safetensors`` (name -> tensor; large models split it into shards listed in
``model.safetensors.index.json``). Pickled ``pytorch_model.bin`` weights are refused, never unpickled: unpickling
runs arbitrary code. Writing goes through :mod:`minilm.files`, so a crash never leaves a half-written file.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path

import torch
from safetensors.torch import load_file, save
from torch import Tensor

from minilm.files import CheckpointError, atomic_write_bytes, atomic_write_text

CONFIG_NAME = "config.json"
WEIGHTS_NAME = "model.safetensors"
WEIGHTS_INDEX_NAME = "model.safetensors.index.json"
# weights in other formats, refused: pickles (unpickling runs arbitrary code) and other frameworks' files
OTHER_WEIGHTS_PATTERNS = ("*.bin", "*.bin.index.json", "*.h5", "*.msgpack")


class UnsupportedWeightsError(CheckpointError, FileNotFoundError):
    """A folder with weights only in a format minilm does not read (pickled ``pytorch_model.bin``, TF, Flax): there is
    no safetensors file (a FileNotFoundError) and the checkpoint cannot be loaded as it is (a CheckpointError)."""


def _folder(path: str | Path) -> Path:
    folder = Path(path)
    if not folder.is_dir():
        raise FileNotFoundError(
            f"{folder} is not a folder; expected a Hugging Face checkpoint folder with {CONFIG_NAME} and {WEIGHTS_NAME}"
        )
    return folder


def read_config(path: str | Path) -> dict:
    """``path/config.json`` as a dict."""
    file = _folder(path) / CONFIG_NAME
    if not file.is_file():
        raise FileNotFoundError(f"no {CONFIG_NAME} in {file.parent}: a Hugging Face checkpoint folder needs one")
    try:
        config = json.loads(file.read_text(encoding="utf-8"))
    except ValueError as e:
        raise CheckpointError(f"{file} is not valid JSON ({e})") from None
    if not isinstance(config, dict):
        raise CheckpointError(f"{file} does not hold a JSON object")
    return config


def read_safetensors(path: str | Path, device: str | torch.device = "cpu") -> dict[str, Tensor]:
    """All tensors of ``path/model.safetensors``, or of the shards listed in ``model.safetensors.index.json``, loaded
    onto ``device``. Never unpickles: a folder with only ``pytorch_model.bin`` (or TF / Flax weights) raises
    :class:`UnsupportedWeightsError`."""
    folder = _folder(path)
    single, index = folder / WEIGHTS_NAME, folder / WEIGHTS_INDEX_NAME
    if single.is_file():
        return _load_file(single, device)
    if index.is_file():
        shards = sorted(set(json.loads(index.read_text(encoding="utf-8"))["weight_map"].values()))
        tensors: dict[str, Tensor] = {}
        for shard in shards:
            if not (folder / shard).is_file():
                raise FileNotFoundError(f"{index} lists the shard {shard}, which is not in {folder}")
            tensors.update(_load_file(folder / shard, device))
        return tensors
    missing = f"no {WEIGHTS_NAME} or {WEIGHTS_INDEX_NAME} in {folder}"
    others = sorted({p.name for pattern in OTHER_WEIGHTS_PATTERNS for p in folder.glob(pattern)})
    if others:
        raise UnsupportedWeightsError(
            f"{missing}, only {', '.join(others)}; minilm reads safetensors only and does not load pickled weights "
            "(unpickling runs arbitrary code). Convert it once where you trust the file: transformers' "
            f"AutoModel.from_pretrained(folder).save_pretrained(folder) writes {WEIGHTS_NAME}"
        )
    raise FileNotFoundError(missing)


def _load_file(file: Path, device: str | torch.device) -> dict[str, Tensor]:
    """The tensors of one safetensors file; a file that is not one (a renamed pickle, a truncated download) is a
    CheckpointError naming it."""
    try:
        return load_file(file, device=str(device))
    except Exception as error:  # safetensors raises its own SafetensorError (header too large, invalid header, ...)
        raise CheckpointError(
            f"{file} is not a readable safetensors file ({error}): a truncated download, or pickled weights under "
            "the wrong name; download it again, or convert pickled weights with transformers' save_pretrained"
        ) from error


def write_checkpoint(path: str | Path, config: Mapping, tensors: Mapping[str, Tensor]) -> Path:
    """Write ``path/model.safetensors`` and ``path/config.json`` (creating the folder), each atomically; return the
    folder. Tensors are stored as contiguous CPU copies; the ``format: pt`` metadata is what transformers expects."""
    folder = Path(path)
    folder.mkdir(parents=True, exist_ok=True)
    weights = {name: t.detach().to("cpu", copy=True).contiguous() for name, t in tensors.items()}
    atomic_write_bytes(folder / WEIGHTS_NAME, save(weights, metadata={"format": "pt"}))
    atomic_write_text(folder / CONFIG_NAME, json.dumps(dict(config), indent=2, sort_keys=True) + "\n")
    return folder
