"""Converting between a Hugging Face checkpoint's names and a minilm model's, for any family.

Each family's converter (:mod:`.gpt2`, :mod:`.bert`, ...) is declarative: a :class:`Converter` holding its config
mapping (:class:`ConfigFields`), its name table (a list of :class:`Rename`, read both ways), the names a file may
hold one tensor under (:class:`Tied`) and a few facts about the file layout (prefix, buffers, older spellings).
The functions here do the rest, the same way for every family:

1. :func:`normalise`: strip the base-model prefix (``transformer.``, ``bert.``: present or not depending on the head
   class that saved the file), drop derived buffers (GPT-2's causal ``attn.bias`` masks, BERT's ``position_ids``),
   rename older spellings (TF's ``LayerNorm.gamma``).
2. :func:`merge_tied`: where the config ties names (``tie_word_embeddings``, true by default), the copies a file
   holds must be equal and become one tensor; untied names stay separate tensors, for the name table to map.
3. :func:`to_minilm`: rename and reshape through the table (transpose GPT's ``Conv1D`` weights, split fused q, k, v).
4. :func:`load_converted`: check every name and shape against the model and load, or raise one
   :class:`~minilm.files.CheckpointError` listing all missing and mis-shaped tensors under both names (minilm's and
   the checkpoint's) and all unexpected ones (which have only the checkpoint's).

Saving runs the table the other way (:func:`to_hf`); tied copies are written once, under their first name, as
transformers writes them.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import Tensor, nn

from minilm.files import CheckpointError

# Fields any transformers config may carry that say nothing about the architecture: bookkeeping, defaults for the
# forward pass's outputs, special token ids, labels of classification heads, and the generation defaults older
# configs held. Converters accept them on top of their own fields. (Not here, because they change a model:
# is_decoder, add_cross_attention, tie_word_embeddings, pruned_heads; converters check those themselves.)
GENERIC_CONFIG_FIELDS = frozenset(
    {
        # bookkeeping
        "_attn_implementation",
        "_commit_hash",
        "_name_or_path",
        "architectures",
        "dtype",
        "gradient_checkpointing",
        "initializer_range",
        "model_type",
        "torch_dtype",
        "torchscript",
        "transformers_version",
        "use_bfloat16",
        "use_cache",
        # outputs of the forward pass
        "chunk_size_feed_forward",
        "output_attentions",
        "output_hidden_states",
        "return_dict",
        # special tokens and tokenizer
        "bos_token_id",
        "decoder_start_token_id",
        "eos_token_id",
        "pad_token_id",
        "sep_token_id",
        "tokenizer_class",
        "prefix",
        # tasks and labels
        "_num_labels",
        "finetuning_task",
        "id2label",
        "is_encoder_decoder",
        "label2id",
        "num_labels",
        "problem_type",
        "task_specific_params",
        # generation defaults (transformers 4 kept them in config.json)
        "bad_words_ids",
        "begin_suppress_tokens",
        "diversity_penalty",
        "do_sample",
        "early_stopping",
        "encoder_no_repeat_ngram_size",
        "exponential_decay_length_penalty",
        "forced_bos_token_id",
        "forced_eos_token_id",
        "length_penalty",
        "max_length",
        "min_length",
        "no_repeat_ngram_size",
        "num_beam_groups",
        "num_beams",
        "num_return_sequences",
        "output_past",
        "output_scores",
        "remove_invalid_values",
        "repetition_penalty",
        "return_dict_in_generate",
        "suppress_tokens",
        "temperature",
        "top_k",
        "top_p",
        "typical_p",
    }
)


# --- configuration ------------------------------------------------------------------------------------------------


def check_model_type(config: Mapping, expected: Sequence[str], source: str = "config.json") -> None:
    """Raise :class:`CheckpointError` unless ``config["model_type"]`` is one of ``expected``."""
    if config.get("model_type") not in expected:
        raise CheckpointError(
            f"{source} has model_type={config.get('model_type')!r}, expected {' or '.join(map(repr, expected))}"
        )


@dataclass(frozen=True)
class ConfigFields:
    """How a family's transformers config maps onto its minilm config, both ways.

    A field a converter does not know may change the computation (an attention variant, a different normalisation)
    and silently give wrong outputs: :meth:`from_hf` refuses it (``strict``) rather than guess.
    """

    renamed: Mapping[str, str]  # transformers field -> minilm field, the same value
    fixed: Mapping[str, Any] = field(default_factory=dict)  # transformers field -> the one value minilm computes
    computed: frozenset[str] = frozenset()  # fields the converter maps with its own code (not one-to-one)
    ignored: frozenset[str] = frozenset()  # fields that do not change the outputs (other dropouts, other heads)

    def from_hf(self, hf: Mapping, source: str = "config.json", strict: bool = True) -> dict:
        """transformers config -> {minilm field: value} for the renamed fields present, after the checks."""
        for key, value in self.fixed.items():
            if key in hf and hf[key] != value:
                raise CheckpointError(f"{source}: {key}={hf[key]!r} is not supported (minilm's model: {value!r})")
        unknown = sorted(set(hf) - set(self.renamed) - set(self.fixed) - self.computed - self.ignored)
        unknown = [key for key in unknown if key not in GENERIC_CONFIG_FIELDS]
        if strict and unknown:
            raise CheckpointError(
                f"{source} has fields this loader does not know: {', '.join(unknown)}; they may change the model, "
                "so it refuses to guess (pass strict=False to ignore them)"
            )
        return {ours: hf[theirs] for theirs, ours in self.renamed.items() if theirs in hf}

    def to_hf(self, config: Any) -> dict:
        """minilm config -> the renamed and fixed transformers fields."""
        return {**{theirs: getattr(config, ours) for theirs, ours in self.renamed.items()}, **self.fixed}


# --- names --------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Rename:
    """One checkpoint tensor <-> one minilm tensor, or several concatenated along dim 0 (GPT-2's fused q, k, v)."""

    ours: str | tuple[str, ...]  # minilm state-dict name(s)
    theirs: str  # checkpoint name, without the base-model prefix
    conv1d: bool = False  # a GPT Conv1D weight, stored (in, out): transposed both ways

    def __post_init__(self) -> None:
        if isinstance(self.ours, str):
            object.__setattr__(self, "ours", (self.ours,))

    def to_minilm(self, tensor: Tensor, source: str) -> dict[str, Tensor]:
        tensor = tensor.t().contiguous() if self.conv1d else tensor  # Conv1D (in, out) -> Linear (out, in)
        if len(self.ours) == 1:
            return {self.ours[0]: tensor}
        if tensor.size(0) % len(self.ours):
            raise CheckpointError(
                f"{source}: {self.theirs} of shape {tuple(tensor.shape)} is not {len(self.ours)} projections"
            )
        return dict(zip(self.ours, tensor.chunk(len(self.ours), dim=0), strict=True))

    def to_hf(self, state: Mapping[str, Tensor]) -> Tensor:
        tensor = torch.cat([state[name] for name in self.ours], dim=0) if len(self.ours) > 1 else state[self.ours[0]]
        return tensor.t().contiguous() if self.conv1d else tensor


def module(ours: str | tuple[str, ...], theirs: str, conv1d: bool = False) -> list[Rename]:
    """The ``weight`` and ``bias`` of a module, or of several minilm modules fused into one of the checkpoint."""
    ours = (ours,) if isinstance(ours, str) else ours
    weight = Rename(tuple(f"{o}.weight" for o in ours), f"{theirs}.weight", conv1d)
    return [weight, Rename(tuple(f"{o}.bias" for o in ours), f"{theirs}.bias")]


@dataclass(frozen=True)
class Tied:
    """Checkpoint names that hold one tensor when the config ties them.

    ``names[0]`` is the name the table maps and the one written; the others, when a file has them, must be equal
    copies. ``flag``: the config field saying whether they are tied (transformers' ``tie_word_embeddings``, true by
    default); None: always one tensor (e.g. a bias held under two names). When the config unties them, or
    (``apart_when_different``) when the file holds copies that differ, each name is a tensor of its own, which the
    family's name table then maps.
    """

    names: tuple[str, ...]
    flag: str | None = "tie_word_embeddings"
    note: str = ""  # what minilm's model does with them, for the message
    apart_when_different: bool = False  # as transformers 5's tie_weights: copies that differ stay apart, untied

    def ties(self, hf_config: Mapping) -> bool:
        return self.flag is None or bool(hf_config.get(self.flag, True))

    def held_apart(self, tensors: Mapping[str, Tensor]) -> bool:
        """Does a file keep these names apart although its config ties them? With ``apart_when_different``, it
        does when it holds two or more of them and they differ: transformers 5 then leaves them untied (and warns)
        rather than pick one."""
        present = [tensors[name] for name in self.names if name in tensors]
        return self.apart_when_different and any(not _equal(t, present[0]) for t in present[1:])


def _equal(a: Tensor, b: Tensor) -> bool:
    return a.shape == b.shape and torch.equal(a, b)


def merge_tied(tensors: Mapping[str, Tensor], tied: Iterable[Tied], hf_config: Mapping, source: str) -> dict:
    """``tensors`` with every tied group the config ties held once, under its first name; copies must agree."""
    tensors = dict(tensors)
    for group in tied:
        present = [name for name in group.names if name in tensors]
        if not group.ties(hf_config) or not present or group.held_apart(tensors):
            continue
        first = tensors[present[0]]
        for name in present[1:]:
            if not _equal(tensors[name], first):
                raise CheckpointError(
                    f"{source}: {name} differs from {present[0]}; they should be one tied tensor"
                    + (f" ({group.note})" if group.note else "")
                )
        for name in present:
            del tensors[name]
        tensors[group.names[0]] = first
    return tensors


# --- a family ------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Converter:
    """What the generic code needs to know about one family's checkpoints (one ``model_type``)."""

    model_type: str
    model: type[nn.Module]  # the minilm class it builds
    config_class: type  # the minilm config class of ``model``
    config_from_hf: Callable[..., Any]  # (transformers config dict, source=..., strict=...) -> minilm config
    config_to_hf: Callable[[Any], dict]  # minilm config -> transformers config dict (with model_type)
    names: Callable[[Any], list[Rename]]  # minilm config -> the name table
    matches: Callable[[Any], bool]  # does a ``config_class`` config save as this model_type (GPT-1 or GPT-2)?
    architecture: Callable[[Any], str]  # minilm config -> the transformers class written to config.json
    prefix: str = ""  # base-model prefix of head classes' files ("transformer.", "bert."); head names never have it
    heads: tuple[str, ...] = ()  # name prefixes of head tensors ("lm_head.", "cls.")
    prefixed: Callable[[Any], bool] = lambda config: True  # are body names written under the prefix?
    buffers: str | None = None  # regex (full match) of derived buffers older files carry: dropped
    legacy: tuple[tuple[str, str], ...] = ()  # (regex, replacement) for older spellings of names
    tied: tuple[Tied, ...] = ()
    task_heads: str | None = None  # regex (full match) of other heads' tensors: ignored with a warning
    fit_config: Callable[[Any, Mapping[str, Tensor]], Any] | None = None  # optional parts from the file's tensors
    zero_buffers: tuple[str, ...] = ()  # minilm buffers a file may lack, zero then (BART's final_logits_bias)


def normalise(converter: Converter, tensors: Mapping[str, Tensor]) -> dict[str, Tensor]:
    """Checkpoint names without the base-model prefix, derived buffers and older spellings."""
    out = {}
    buffers = re.compile(converter.buffers) if converter.buffers else None
    for name, tensor in tensors.items():
        name = name.removeprefix(converter.prefix) if converter.prefix else name
        if buffers and buffers.fullmatch(name):
            continue
        for pattern, replacement in converter.legacy:
            name = re.sub(pattern, replacement, name)
        out[name] = tensor
    return out


@dataclass
class Converted:
    """Checkpoint tensors under minilm names, with what the messages need."""

    state: dict[str, Tensor]  # minilm name -> tensor
    origin: dict[str, str]  # minilm name -> the checkpoint name it comes from (also for those the file lacks)
    unexpected: list[str]  # checkpoint names the table has no place for


def to_minilm(
    converter: Converter, tensors: Mapping[str, Tensor], config: Any, hf_config: Mapping, source: str
) -> Converted:
    """Normalised checkpoint tensors -> :class:`Converted`, through the family's name table."""
    tensors = merge_tied(tensors, converter.tied, hf_config, source)
    table = converter.names(config)
    state, origin = {}, {}
    for rename in table:
        n = len(rename.ours)
        for i, ours in enumerate(rename.ours):
            origin[ours] = rename.theirs if n == 1 else f"{rename.theirs}, part {i + 1} of {n}"
        if rename.theirs in tensors:
            state.update(rename.to_minilm(tensors[rename.theirs], source))
    used = {rename.theirs for rename in table}
    return Converted(state, origin, sorted(set(tensors) - used))


def to_hf(converter: Converter, state: Mapping[str, Tensor], config: Any) -> dict[str, Tensor]:
    """A minilm state dict -> checkpoint names and layouts, as transformers writes them (tied copies once)."""
    prefix = converter.prefix if converter.prefixed(config) else ""
    tensors = {}
    for rename in converter.names(config):
        name = rename.theirs if rename.theirs.startswith(converter.heads) else prefix + rename.theirs
        tensors[name] = rename.to_hf(state)
    return tensors


# --- loading ------------------------------------------------------------------------------------------------------


def _tied_aliases(model: nn.Module) -> dict[str, str]:
    """State-dict name -> the first name of the same parameter, for the names that share one (tied weights)."""
    first: dict[int, str] = {}
    aliases = {}
    for name, p in model.named_parameters(remove_duplicate=False):
        if id(p) in first:
            aliases[name] = first[id(p)]
        else:
            first[id(p)] = name
    return aliases


def load_converted(
    model: nn.Module, converted: Converted, strict: bool = True, source: str = "the checkpoint", assign: bool = False
) -> None:
    """Load ``converted`` into ``model`` after checking every name and shape.

    Shape mismatches and missing tensors always raise; unexpected ones only with ``strict``. Tied parameters need
    loading under one of their names only. ``assign``: make the converted tensors the model's parameters (their
    dtype and device kept) instead of copying into the existing ones, for a model built on the meta device; tied
    parameters are tied again afterwards.
    """
    state = model.state_dict()
    aliases = _tied_aliases(model)
    origin = converted.origin
    named = lambda ours: f"{ours} (from {origin[ours]})" if ours in origin else ours
    problems = []
    mismatched = [
        f"{named(k)}: checkpoint {tuple(v.shape)}, model {tuple(state[k].shape)}"
        for k, v in converted.state.items()
        if k in state and v.shape != state[k].shape
    ]
    if mismatched:
        problems.append("shape mismatch: " + "; ".join(mismatched))
    loaded = set(converted.state) | {alias for alias, name in aliases.items() if name in converted.state}
    buffers = {name for name, _ in model.named_buffers()}  # derived data (e.g. cached tables), not weights
    missing = [named(k) for k in state if k not in loaded and k not in buffers]
    if missing:
        problems.append("missing: " + ", ".join(missing))
    unexpected = converted.unexpected + [k for k in converted.state if k not in state]
    if unexpected and strict:
        problems.append("unexpected (pass strict=False to ignore): " + ", ".join(unexpected))
    if problems:
        raise CheckpointError(f"{source} does not fit {type(model).__name__}: " + " | ".join(problems))
    weights = {k: v for k, v in converted.state.items() if k in state}
    if not assign:
        with torch.no_grad():
            for k, v in weights.items():
                state[k].copy_(v)
        return
    model.load_state_dict(weights, strict=False, assign=True)
    tied: dict[str, list[str]] = {}  # assigning replaced a shared parameter under the loaded name only
    for alias, name in aliases.items():
        tied.setdefault(name, [name]).append(alias)
    for names in tied.values():
        loaded_as = next(n for n in names if n in weights)  # one is: otherwise it was reported missing
        for n in names:
            if n != loaded_as:
                module_name, _, attr = n.rpartition(".")
                setattr(model.get_submodule(module_name), attr, model.get_parameter(loaded_as))
