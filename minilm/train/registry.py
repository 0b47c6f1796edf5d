"""Models and pretraining objectives register themselves here, so ``python -m minilm.train --model X --objective Y``
works for every pair without touching the training loop.

A model entry says how to build the model from its config dataclass, its size presets, its tokenizer family and its
``kind``: "encoder" (BERT, RoBERTa: every position reads the whole input), "decoder" (language models that read in
one direction and predict the next token: GPT; ELMo too, two of them reading each way, with no encoder-decoder
split) or "encoder-decoder" (BART, T5). Every registered model keeps one contract, which fine-tuning builds on::

    features(input_ids, attention_mask=None, token_type_ids=None, output_hidden_states=False) -> TransformerOutput

``last_hidden_state`` (B, T, C) without any output head and, when asked, ``hidden_states`` (n_layers + 1 of
(B, T, C): the embeddings, then each layer). A model without segment embeddings accepts ``token_type_ids`` and
ignores them; an encoder-decoder's features are its decoder's final states for the input fed to both sides (BART's
recipe for classification). An encoder-decoder also provides ``seq2seq_states(input_ids, attention_mask, labels)``
(teacher forcing: the decoder states its vocabulary projection reads, with that projection's weight and bias, for
:func:`minilm.objectives.seq2seq.seq2seq_loss_from_states`) and ``generate(input_ids, attention_mask, max_new_tokens,
num_beams=..., ...)``, which text-to-text fine-tuning uses. C and the number of layers come from the model's config
through the entry (``hidden_size``, ``n_layers``), so nothing runs the model to find them.

An objective entry says which models it suits, its settings (a config dataclass, ``objective.<key>=value``), how to
turn the corpus's documents into training examples (and how to collate them), the loss of a batch with its named
parts and the units each part averages over (``counts``: exact gradients under accumulation), whether exp(loss) is
a perplexity, and, for composite training (ELECTRA's generator beside its discriminator, a frozen teacher beside a
student), how to ``wrap`` the model into the module the Trainer trains and saves, and how to ``unwrap`` that module
back to the body that fine-tuning reads.

The built-in entries live in the recipe modules (:data:`RECIPES`, one per family), which this module imports by name
on first use: the recipes import the registry, never the other way at import time. Later chapters add theirs with
:func:`register_model` / :func:`register_objective`, in a recipe module listed there or anywhere they are imported.
"""

from __future__ import annotations

import dataclasses
import importlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from torch import nn

from minilm.train.config import ConfigError, _suggest, choice, update

# modules registering the built-ins
RECIPES = (
    "minilm.recipes.gpt",
    "minilm.recipes.elmo",
    "minilm.recipes.bert",
    "minilm.recipes.albert",
    "minilm.recipes.electra",
    "minilm.recipes.bart",
    "minilm.recipes.t5",
    "minilm.recipes.distilbert",
)
KINDS = ("encoder", "decoder", "encoder-decoder")


def config_d_model(config) -> int:
    return config.d_model


def config_n_layers(config) -> int:
    return config.n_layers


@dataclass
class ModelEntry:
    name: str
    config_class: type  # a dataclass, e.g. GPTConfig; the CLI's model.<key>=value fills it
    build: Callable[[Any], nn.Module]  # config -> model
    kind: str  # "encoder", "decoder" or "encoder-decoder" (see the module's docstring)
    sizes: dict[str, dict] = field(default_factory=dict)  # preset name -> config overrides
    tokenizer_family: str = "gpt2"  # minilm.tokenizers family trained for it
    attach_tokenizer: Callable | None = None  # (model, tokenizer) -> None, for models that read the vocabulary
    input_format: str = "template"  # fine-tuning inputs (minilm.finetune input_format=auto): "template" or "gpt"
    hidden_size: Callable[[Any], int] = config_d_model  # config -> C, the width of features()' hidden states
    n_layers: Callable[[Any], int] = config_n_layers  # config -> layers in features()' hidden_states, less 1
    text_to_text: bool = False  # fine-tuning casts every task as text to text (text_to_text=auto): T5's way
    # features() at position t reads tokens <= t only and lm_head predicts token t + 1 (GPT): fine-tuning's
    # auxiliary LM loss (lm_weight) applies; an encoder's or an encoder-decoder's states have seen the next token
    causal_lm: bool = False

    def __post_init__(self) -> None:
        choice(self.kind, KINDS, f"model {self.name!r} kind")
        if self.text_to_text and self.kind != "encoder-decoder":
            raise ConfigError(f"model {self.name!r}: text_to_text needs an encoder-decoder, not an {self.kind}")


@dataclass
class ObjectiveEntry:
    name: str
    models: tuple[str, ...]  # model names it can train
    # (documents, tokenizer, job, settings, validation=False) -> (examples, collate or None): the corpus as examples;
    # settings is an instance of config_class (None without one)
    prepare: Callable
    loss: Callable  # (module trained, batch) -> LossOutput, with named parts when the loss has several
    counts: Callable | None = None  # batch -> {part: loss-bearing units} ({"loss": n} for one part); None: 1/k each
    perplexity: bool | str = False  # True: exp(loss) is a perplexity; a part's name: exp(that part) is one
    config_class: type | None = None  # a dataclass of its settings (objective.<key>=value, [objective]); None: none
    # (model, model config, settings, tokenizer) -> the module the Trainer trains and saves; None: the model itself
    wrap: Callable | None = None
    unwrap: Callable[[nn.Module], nn.Module] | None = None  # trained module -> the body fine-tuning reads; None: it
    description: str = ""
    model_settings: dict = field(default_factory=dict)  # model config values it needs (e.g. an NSP head or not)
    # settings -> the tokenizer the objective brings (distillation: the teacher's vocabulary), used instead of one
    # trained on the corpus; None: the run trains its own
    tokenizer: Callable | None = None
    # (job, settings) -> None: a ConfigError when the settings cannot serve this job (a seq_len too short for the
    # objective, a teacher of a family that cannot teach), checked before any data is read; None: nothing to check
    check: Callable | None = None

    def wrap_model(self, model: nn.Module, model_config, settings, tokenizer) -> nn.Module:
        """The module this objective trains for ``model``: the model itself, or a composite holding it."""
        return model if self.wrap is None else self.wrap(model, model_config, settings, tokenizer)

    def body(self, trained: nn.Module) -> nn.Module:
        """The registered model inside the module :meth:`wrap_model` made (what fine-tuning and sampling read)."""
        return trained if self.unwrap is None else self.unwrap(trained)


MODELS: dict[str, ModelEntry] = {}
OBJECTIVES: dict[str, ObjectiveEntry] = {}


def register_model(entry: ModelEntry) -> ModelEntry:
    MODELS[entry.name] = entry
    return entry


def register_objective(entry: ObjectiveEntry) -> ObjectiveEntry:
    OBJECTIVES[entry.name] = entry
    return entry


def load_recipes() -> None:
    """Import the recipe modules that register the built-in models and objectives (once; keeps import cheap)."""
    for module in RECIPES:
        importlib.import_module(module)


def models() -> dict[str, ModelEntry]:
    """Every registered model, the built-ins included."""
    load_recipes()
    return MODELS


def objectives() -> dict[str, ObjectiveEntry]:
    """Every registered objective, the built-ins included."""
    load_recipes()
    return OBJECTIVES


def get_model(name: str) -> ModelEntry:
    if name not in models():
        raise ConfigError(f"unknown model {name!r}{_suggest(name, list(MODELS))}")
    return MODELS[name]


def get_objective(name: str, model: str | None = None) -> ObjectiveEntry:
    if name not in objectives():
        raise ConfigError(f"unknown objective {name!r}{_suggest(name, list(OBJECTIVES))}")
    entry = OBJECTIVES[name]
    if model is not None and model not in entry.models:
        theirs = [other for other, e in OBJECTIVES.items() if model in e.models]
        raise ConfigError(
            f"objective {name!r} trains {', '.join(entry.models)}, not model {model!r}"
            + (f"; {model} trains with objective {', '.join(theirs)} (--objective X)" if theirs else "")
        )
    return entry


def check_size(entry: ModelEntry, size: str) -> None:
    if size not in entry.sizes:
        raise ConfigError(f"model {entry.name!r} has no size {size!r}; sizes: {', '.join(entry.sizes)}")


def check_vocab_size(entry: ModelEntry, vocab_size: int) -> None:
    """A ConfigError unless ``vocab_size`` holds the special tokens and base alphabet of ``entry``'s tokenizer
    family (checked before a tokenizer is trained on any text)."""
    from minilm.tokenizers import check_vocab_size as check_family

    try:
        check_family(entry.tokenizer_family, vocab_size)
    except ValueError as err:
        raise ConfigError(str(err)) from None


def model_config(entry: ModelEntry, size: str, vocab_size: int, overrides: dict):
    """The config of ``entry`` at preset ``size`` for a vocabulary of ``vocab_size``, with ``model.<key>`` overrides."""
    check_size(entry, size)
    config = update(entry.config_class(), {**entry.sizes[size], "vocab_size": vocab_size}, "model")
    return update(config, overrides, "model")


def needed_settings(entry: ModelEntry, objective: ObjectiveEntry) -> dict:
    """What ``objective`` needs of a model of ``entry``: its ``model_settings`` that the model's config has (an
    objective of several families may set a head that only some of them have, e.g. ALBERT's SOP head)."""
    fields = {f.name for f in dataclasses.fields(entry.config_class)}
    return {key: value for key, value in objective.model_settings.items() if key in fields}


def build_model(entry: ModelEntry, config, tokenizer=None) -> nn.Module:
    """A fresh model from ``config``; one that reads its vocabulary (ELMo spells tokens) is shown ``tokenizer``."""
    model = entry.build(config)
    if tokenizer is not None and entry.attach_tokenizer is not None:
        entry.attach_tokenizer(model, tokenizer)
    return model


def objective_keys(entry: ObjectiveEntry) -> list[str]:
    """The settings ``entry`` takes (``objective.<key>=value``), in its config's order."""
    return [f.name for f in dataclasses.fields(entry.config_class)] if entry.config_class is not None else []


def objectives_with_key(key: str) -> list[str]:
    """The registered objectives that have a setting ``key``, sorted (messages name them the same whatever order the
    recipe modules were imported in)."""
    return sorted(name for name, entry in objectives().items() if key in objective_keys(entry))


def objective_config(entry: ObjectiveEntry, overrides: dict):
    """The settings of ``entry``: its config's defaults with ``objective.<key>`` overrides (None when it has none)."""
    if entry.config_class is None:
        if overrides:
            key = next(iter(overrides))
            owners = [name for name in objectives_with_key(key) if name != entry.name]
            whose = f" ({key} is a setting of {', '.join(owners)})" if owners else ""
            raise ConfigError(f"objective {entry.name!r} takes no settings: objective.{key} has nothing to set{whose}")
        return None
    return update(entry.config_class(), overrides, "objective")
