"""Models and pretraining objectives register themselves here, so ``python -m minilm.train --model X --objective Y``
works for every pair without touching the training loop.

A model entry says how to build the model from its config dataclass, its size presets and its tokenizer family.
A registered model keeps one contract: ``features(input_ids, attention_mask=None, ...) -> TransformerOutput``
(hidden states, no output head), which fine-tuning builds on, and a ``config`` dataclass.
An objective entry says which models it suits, how to turn the corpus's documents into training examples (and how to
collate them into batches), and how to compute the loss of a batch. Later chapters add theirs with
:func:`register_model` / :func:`register_objective`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from torch import nn

from minilm.train.config import ConfigError, _suggest, update


@dataclass
class ModelEntry:
    name: str
    config_class: type  # a dataclass, e.g. GPTConfig; the CLI's model.<key>=value fills it
    build: Callable[[object], nn.Module]  # config -> model
    sizes: dict[str, dict] = field(default_factory=dict)  # preset name -> config overrides
    tokenizer_family: str = "gpt2"  # minilm.tokenizers family trained for it
    attach_tokenizer: Callable | None = None  # (model, tokenizer) -> None, for models that read the vocabulary
    input_format: str = "template"  # fine-tuning inputs (minilm.finetune input_format=auto): "template" or "gpt"


@dataclass
class ObjectiveEntry:
    name: str
    models: tuple[str, ...]  # model names it can train
    # (documents, tokenizer, job, validation) -> (examples, collate or None): the corpus as training examples
    prepare: Callable
    loss: Callable  # (model, batch) -> LossOutput
    description: str = ""
    model_settings: dict = field(default_factory=dict)  # model config values it needs (e.g. an NSP head or not)


MODELS: dict[str, ModelEntry] = {}
OBJECTIVES: dict[str, ObjectiveEntry] = {}


def check_size(entry: ModelEntry, size: str) -> None:
    if size not in entry.sizes:
        raise ConfigError(f"model {entry.name!r} has no size {size!r}; sizes: {', '.join(entry.sizes)}")


def model_config(entry: ModelEntry, size: str, vocab_size: int, overrides: dict):
    """The config of ``entry`` at preset ``size`` for a vocabulary of ``vocab_size``, with ``model.<key>`` overrides."""
    check_size(entry, size)
    config = update(entry.config_class(), {**entry.sizes[size], "vocab_size": vocab_size}, "model")
    return update(config, overrides, "model")


def build_model(entry: ModelEntry, config, tokenizer=None) -> nn.Module:
    """A fresh model from ``config``; one that reads its vocabulary (ELMo spells tokens) is shown ``tokenizer``."""
    model = entry.build(config)
    if tokenizer is not None and entry.attach_tokenizer is not None:
        entry.attach_tokenizer(model, tokenizer)
    return model


def register_model(entry: ModelEntry) -> ModelEntry:
    MODELS[entry.name] = entry
    return entry


def register_objective(entry: ObjectiveEntry) -> ObjectiveEntry:
    OBJECTIVES[entry.name] = entry
    return entry


def get_model(name: str) -> ModelEntry:
    _register_builtins()
    if name not in MODELS:
        raise ConfigError(f"unknown model {name!r}{_suggest(name, list(MODELS))}")
    return MODELS[name]


def get_objective(name: str, model: str | None = None) -> ObjectiveEntry:
    _register_builtins()
    if name not in OBJECTIVES:
        raise ConfigError(f"unknown objective {name!r}{_suggest(name, list(OBJECTIVES))}")
    entry = OBJECTIVES[name]
    if model is not None and model not in entry.models:
        raise ConfigError(f"objective {name!r} trains {', '.join(entry.models)}, not model {model!r}")
    return entry


def _register_builtins() -> None:
    """Import the modules that register the built-in models and objectives (on first use: keeps import cheap)."""
    import minilm.train.builtins  # noqa: F401
