"""Hugging Face checkpoints <-> minilm models, one converter per ``model_type``.

    model = minilm.models.from_pretrained(folder)    # the family from config.json's model_type
    model = GPT.from_pretrained(folder)              # or through the model class (minilm.models.pretrained)
    model.save_pretrained(folder)                    # config.json + model.safetensors that transformers loads

:mod:`.folder` reads and writes the files, :mod:`.convert` does what every family shares (config checks, name
tables read both ways, tied weights, name and shape checks), and each family's module holds only its own facts:
:mod:`.gpt2`, :mod:`.openai_gpt` (GPT-1), :mod:`.bert`, :mod:`.roberta`, :mod:`.albert`, :mod:`.electra`,
:mod:`.bart`, :mod:`.t5`, :mod:`.distilbert`. A new family is a new module and an entry in :data:`CONVERTERS`. The
converters import the model files, never the other way: model classes reach this package by name when called
(:class:`minilm.models.pretrained.PretrainedMixin`).
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch
from torch import Tensor, nn

from minilm.files import CheckpointError
from minilm.models.bert import BertConfig
from minilm.models.hf import albert, bart, bert, distilbert, electra, gpt2, openai_gpt, roberta, t5
from minilm.models.hf.convert import Converter, check_model_type, load_converted, normalise, to_hf, to_minilm
from minilm.models.hf.folder import (
    CONFIG_NAME,
    UnsupportedWeightsError,
    read_config,
    read_safetensors,
    write_checkpoint,
)
from minilm.models.pretrained import check_vocabulary

# model_type -> its converter
CONVERTERS: dict[str, Converter] = {
    module.MODEL_TYPE: module.CONVERTER
    for module in (gpt2, openai_gpt, bert, roberta, albert, electra, bart, t5, distilbert)
}

__all__ = [
    "CONVERTERS",
    "CheckpointError",
    "UnsupportedWeightsError",
    "config_to_hf",
    "converter_for",
    "from_pretrained",
    "hf_state_dict",
    "load_hf_state_dict",
    "save_pretrained",
]


def converter_for(config: Any) -> Converter:
    """The converter of a minilm model config: its class and layout decide (GPT-1 or GPT-2, BERT or RoBERTa), the
    most specific class first (an AlbertConfig is a BertConfig, but saves as ALBERT)."""
    if getattr(config, "norm_first", False) and isinstance(config, BertConfig):
        raise CheckpointError(
            f"a pre-LN {type(config).__name__} (norm_first=True) has no Hugging Face layout: transformers' "
            "encoders are post-LN; keep it as a minilm.train checkpoint"
        )
    mro = type(config).__mro__
    candidates = [c for c in CONVERTERS.values() if isinstance(config, c.config_class) and c.matches(config)]
    if candidates:
        return min(candidates, key=lambda c: mro.index(c.config_class))
    supported = sorted({c.config_class.__name__ for c in CONVERTERS.values()})
    raise CheckpointError(
        f"minilm has no Hugging Face converter for a {type(config).__name__}; supported: {', '.join(supported)}"
    )


def config_to_hf(config: Any) -> dict:
    """A minilm model config -> its family's transformers config dict (with ``model_type``), e.g. for
    ``transformers.AutoConfig.for_model(**config_to_hf(config))``."""
    return converter_for(config).config_to_hf(config)


RUN_FILES = ("checkpoints", "meta.json", "metrics.jsonl")  # what a run directory or one of its checkpoints holds


def check_not_a_run(folder: Path) -> None:
    """A CheckpointError saying how runs load when ``folder`` is a run directory of ``python -m minilm.train`` (or
    ``minilm.finetune``) or one of its checkpoints, whose config.json holds the run's settings, not a model_type."""
    if not any((folder / name).exists() for name in RUN_FILES):
        return
    raise CheckpointError(
        f"{folder} is a minilm run (or one of its checkpoints), not a Hugging Face folder: load a pretraining run's "
        f"model with minilm.finetune.model.from_pretrained({str(folder)!r}, {{}}).model (its latest checkpoint), and "
        "save it as a Hugging Face folder with model.save_pretrained(folder)"
    )


def from_pretrained(
    path: str | Path,
    tokenizer=None,
    device: str | torch.device = "cpu",
    dtype: torch.dtype | None = torch.float32,
    *,
    strict: bool = True,
    model_class: type[nn.Module] | None = None,
) -> nn.Module:
    """A Hugging Face checkpoint folder (config.json + model.safetensors) -> the minilm model, in eval mode.

    The family comes from config.json's ``model_type`` (:data:`CONVERTERS`); ``model_class`` restricts it to the
    types that class loads (``GPT``: gpt2 or openai-gpt). ``tokenizer``: checked against the checkpoint's vocabulary
    first (:func:`~minilm.models.pretrained.check_vocabulary`). ``dtype``: the parameters' dtype (None: as stored).
    ``strict=False`` ignores unknown config fields and unexpected tensors (with a warning) instead of raising;
    missing and mis-shaped tensors always raise. Other heads' tensors (a classifier) are ignored with a warning.
    """
    folder = Path(path)
    source = str(folder)
    check_not_a_run(folder)
    hf_config = read_config(folder)
    converters = list(CONVERTERS.values())
    if model_class is not None:  # the converters of the nearest class model_class derives from (Albert: not Bert's)
        converters = [c for c in converters if issubclass(model_class, c.model)]
        nearest = min((model_class.__mro__.index(c.model) for c in converters), default=0)
        converters = [c for c in converters if model_class.__mro__.index(c.model) == nearest]
    check_model_type(hf_config, [c.model_type for c in converters], str(folder / CONFIG_NAME))
    converter = CONVERTERS[hf_config["model_type"]]
    config = converter.config_from_hf(hf_config, source=source, strict=strict)
    if tokenizer is not None:
        check_vocabulary(config, tokenizer, folder)
    tensors = normalise(converter, read_safetensors(folder, device))
    if converter.fit_config is not None:
        config = converter.fit_config(config, tensors)
    with torch.device("meta"):  # no memory, no initialisation: every tensor comes from the file
        model = (model_class or converter.model)(config)
    if dtype is not None:
        tensors = {name: t.to(dtype) if t.is_floating_point() else t for name, t in tensors.items()}
    _load(model, converter, tensors, hf_config, strict, source, assign=True)
    for name in converter.zero_buffers:
        module_name, _, attr = name.rpartition(".")
        owner = model.get_submodule(module_name)
        buffer = getattr(owner, attr)
        if buffer.is_meta:  # not in the file: zero, as transformers starts it
            setattr(owner, attr, torch.zeros(buffer.shape, dtype=dtype or torch.float32, device=device))
    return model.eval()


def _load(
    model: nn.Module,
    converter: Converter,
    tensors: Mapping[str, Tensor],
    hf_config: Mapping,
    strict: bool,
    source: str,
    assign: bool,
) -> None:
    """Normalised checkpoint tensors -> ``model``; other heads' tensors (and, when not strict, unexpected ones)
    ignored with one warning."""
    converted = to_minilm(converter, tensors, model.config, hf_config, source)
    heads = [n for n in converted.unexpected if converter.task_heads and re.fullmatch(converter.task_heads, n)]
    converted.unexpected = [name for name in converted.unexpected if name not in heads]  # never an error
    load_converted(model, converted, strict=strict, source=source, assign=assign)
    for ignored, why in [(heads, "task heads live in minilm.heads"), (converted.unexpected, "strict=False")]:
        if ignored:  # the unexpected ones reach here only when not strict
            names = ", ".join(ignored[:5]) + (", ..." if len(ignored) > 5 else "")
            warnings.warn(
                f"{source}: {len(ignored)} tensor(s) with no place in minilm's {type(model).__name__} were ignored "
                f"({names}); {why}",
                stacklevel=3,
            )


def load_hf_state_dict(model: nn.Module, tensors: Mapping[str, Tensor], strict: bool = True) -> None:
    """Copy tensors under transformers' names (e.g. a transformers model's ``state_dict()``) into ``model``, with
    the checks of :func:`from_pretrained`; the model's configuration decides the family."""
    converter = converter_for(model.config)
    hf_config = converter.config_to_hf(model.config)
    _load(model, converter, normalise(converter, tensors), hf_config, strict, "the state dict", assign=False)


def hf_state_dict(model: nn.Module) -> dict[str, Tensor]:
    """``model``'s tensors under transformers' names and layouts (tied copies once, as transformers saves them)."""
    converter = converter_for(model.config)
    return to_hf(converter, model.state_dict(), model.config)


def save_pretrained(model: nn.Module, path: str | Path, **config_fields) -> Path:
    """Write ``model`` as a Hugging Face checkpoint folder (config.json, model.safetensors) that transformers'
    ``AutoModel*.from_pretrained`` loads; return the folder.

    ``config_fields``: config.json fields the minilm config does not hold, e.g. special tokens
    (``eos_token_id=50256``); they override the converter's.
    """
    converter = converter_for(model.config)
    hf_config = {**converter.config_to_hf(model.config), "architectures": [converter.architecture(model.config)]}
    return write_checkpoint(path, {**hf_config, **config_fields}, hf_state_dict(model))
