"""Reading and writing checkpoints in the Hugging Face layout, for any model family.

A Hugging Face checkpoint is a folder with ``config.json`` (the architecture's hyper-parameters, in the model's own
field names) and ``model.safetensors`` (name -> tensor; large models split it into shards listed in
``model.safetensors.index.json``). Loading one into a minilm model takes four steps, each a function here:

1. :func:`read_config` and :func:`read_safetensors`: the folder's two files, with clear errors when one is missing
   (pickled ``pytorch_model.bin`` weights are refused: unpickling runs arbitrary code); :func:`check_model_type`
   and :func:`check_config_fields` reject configs of another model or with fields a converter does not know.
2. Normalise the names: :func:`strip_prefix` (``transformer.``, ``bert.``: present or not depending on the head
   class that saved the file) and :func:`drop_keys` (buffers such as GPT-2's causal ``attn.bias`` masks or BERT's
   ``position_ids``: derived data, not weights).
3. Rename and reshape, model by model: each family's converter takes tensors from a :class:`CheckpointTensors`,
   which remembers what was taken, so whatever is never taken is reported as unexpected and whatever is absent as
   missing. :func:`transpose` turns GPT-2's ``Conv1D`` weights, stored (in, out), into ``nn.Linear``'s (out, in).
4. :func:`load_converted` copies the converted tensors into the model (or, for a model built on the meta device,
   assigns them) after checking every name and shape, and raises one :class:`CheckpointError` that lists all
   missing, unexpected and mis-shaped tensors at once, each under both its minilm and its checkpoint name.

Saving goes the other way: :func:`write_config` and :func:`write_safetensors`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file
from torch import Tensor, nn

CONFIG_NAME = "config.json"
WEIGHTS_NAME = "model.safetensors"
WEIGHTS_INDEX_NAME = "model.safetensors.index.json"
# weights in other formats, refused: pickles (unpickling runs arbitrary code) and other frameworks' files
OTHER_WEIGHTS_PATTERNS = ("*.bin", "*.bin.index.json", "*.h5", "*.msgpack")

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


class CheckpointError(ValueError):
    """A checkpoint that does not fit the model: wrong model type, unknown config fields, missing, unexpected or
    mis-shaped tensors. The message names every offending field or tensor."""


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


def read_config(path: str | Path, model_type: str | Iterable[str] | None = None) -> dict:
    """``path/config.json`` as a dict; with ``model_type``, check its ``model_type`` field is (one of) that."""
    file = _folder(path) / CONFIG_NAME
    if not file.is_file():
        raise FileNotFoundError(f"no {CONFIG_NAME} in {file.parent}: a Hugging Face checkpoint folder needs one")
    try:
        config = json.loads(file.read_text(encoding="utf-8"))
    except ValueError as e:
        raise CheckpointError(f"{file} is not valid JSON ({e})") from None
    if not isinstance(config, dict):
        raise CheckpointError(f"{file} does not hold a JSON object")
    if model_type is not None:
        check_model_type(config, model_type, str(file))
    return config


def check_model_type(config: Mapping, model_type: str | Iterable[str], source: str = CONFIG_NAME) -> None:
    """Raise :class:`CheckpointError` unless ``config["model_type"]`` is (one of) ``model_type``."""
    expected = (model_type,) if isinstance(model_type, str) else tuple(model_type)
    if config.get("model_type") not in expected:
        raise CheckpointError(
            f"{source} has model_type={config.get('model_type')!r}, expected {' or '.join(map(repr, expected))}"
        )


def check_config_fields(config: Mapping, known: Iterable[str], source: str = "config.json") -> None:
    """Raise :class:`CheckpointError` naming the fields of ``config`` outside ``known`` and the generic ones.

    A field a converter does not know may change the computation (an attention variant, a different
    normalisation) and silently give wrong outputs; better to refuse it and extend the converter.
    """
    unknown = sorted(set(config) - set(known) - GENERIC_CONFIG_FIELDS)
    if unknown:
        raise CheckpointError(
            f"{source} has fields this loader does not know: {', '.join(unknown)}; they may change the model, "
            "so it refuses to guess (pass strict=False to ignore them)"
        )


def read_safetensors(path: str | Path, device: str | torch.device = "cpu") -> dict[str, Tensor]:
    """All tensors of ``path/model.safetensors``, or of the shards listed in ``model.safetensors.index.json``, loaded
    onto ``device``. Never unpickles: a folder with only ``pytorch_model.bin`` (or TF / Flax weights) raises
    :class:`UnsupportedWeightsError`."""
    folder = _folder(path)
    single, index = folder / WEIGHTS_NAME, folder / WEIGHTS_INDEX_NAME
    if single.is_file():
        return load_file(single, device=str(device))
    if index.is_file():
        shards = sorted(set(json.loads(index.read_text(encoding="utf-8"))["weight_map"].values()))
        tensors: dict[str, Tensor] = {}
        for shard in shards:
            if not (folder / shard).is_file():
                raise FileNotFoundError(f"{index} lists the shard {shard}, which is not in {folder}")
            tensors.update(load_file(folder / shard, device=str(device)))
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


def strip_prefix(tensors: Mapping[str, Tensor], prefix: str) -> dict[str, Tensor]:
    """Remove ``prefix`` from the names that start with it; the other names stay (e.g. ``lm_head.weight``)."""
    return {(k[len(prefix) :] if k.startswith(prefix) else k): v for k, v in tensors.items()}


def drop_keys(tensors: Mapping[str, Tensor], pattern: str) -> dict[str, Tensor]:
    """Leave out the names that fully match the regular expression ``pattern`` (buffers, not weights)."""
    regex = re.compile(pattern)
    return {k: v for k, v in tensors.items() if not regex.fullmatch(k)}


def transpose(weight: Tensor) -> Tensor:
    """A ``Conv1D`` weight (in, out) as an ``nn.Linear`` weight (out, in), or back: the same operation."""
    return weight.t().contiguous()


class CheckpointTensors:
    """A checkpoint's tensors, handed out by name; remembers which names were asked for.

    After a converter has taken what it needs, :attr:`missing` lists the names it asked for that were absent and
    :meth:`unused` the names it never asked for (unexpected tensors).
    """

    def __init__(self, tensors: Mapping[str, Tensor]) -> None:
        self.tensors = dict(tensors)
        self.taken: set[str] = set()
        self.missing: list[str] = []

    def __contains__(self, name: str) -> bool:
        return name in self.tensors

    def take(self, name: str) -> Tensor | None:
        """The tensor called ``name`` (None, recorded as missing, when there is none); may be taken again."""
        if name not in self.tensors:
            if name not in self.missing:
                self.missing.append(name)
            return None
        self.taken.add(name)
        return self.tensors[name]

    def unused(self) -> list[str]:
        return sorted(set(self.tensors) - self.taken)


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
    model: nn.Module,
    converted: Mapping[str, Tensor],
    origin: Mapping[str, str] | None = None,
    missing_in_checkpoint: Iterable[str] = (),
    unexpected_in_checkpoint: Iterable[str] = (),
    strict: bool = True,
    source: str = "the checkpoint",
    assign: bool = False,
) -> None:
    """Copy ``converted`` (minilm name -> tensor) into ``model``, after checking names and shapes.

    ``origin`` maps a minilm name to the checkpoint name(s) it came from, for the messages.
    ``missing_in_checkpoint`` / ``unexpected_in_checkpoint``: checkpoint names a converter looked for and did not
    find / found and did not use (:class:`CheckpointTensors`). Shape mismatches and missing tensors always raise;
    unexpected ones only with ``strict``. Tied parameters need loading under one of their names only.
    ``assign``: make the converted tensors the model's parameters (their dtype and device kept) instead of copying
    into the existing ones; for a model built on the meta device. Tied parameters are tied again afterwards.
    """
    origin = origin or {}
    state = model.state_dict()
    aliases = _tied_aliases(model)
    named = lambda ours: f"{ours} (from {origin[ours]})" if ours in origin else ours
    problems = []
    mismatched = [
        f"{named(k)}: checkpoint {tuple(v.shape)}, model {tuple(state[k].shape)}"
        for k, v in converted.items()
        if k in state and v.shape != state[k].shape
    ]
    if mismatched:
        problems.append("shape mismatch: " + "; ".join(mismatched))
    loaded = set(converted) | {alias for alias, name in aliases.items() if name in converted}
    buffers = {name for name, _ in model.named_buffers()}  # derived data (e.g. cached tables), not weights
    missing = list(missing_in_checkpoint) + [k for k in state if k not in loaded and k not in buffers]
    missing = list(dict.fromkeys(missing))
    if missing:
        problems.append("missing: " + ", ".join(missing))
    unexpected = list(unexpected_in_checkpoint) + [k for k in converted if k not in state]
    if unexpected and strict:
        problems.append("unexpected (pass strict=False to ignore): " + ", ".join(unexpected))
    if problems:
        raise CheckpointError(f"{source} does not fit {type(model).__name__}: " + " | ".join(problems))
    if assign:
        model.load_state_dict({k: v for k, v in converted.items() if k in state}, strict=False, assign=True)
        tied: dict[str, list[str]] = {}  # assigning replaced a shared parameter under the loaded name only
        for alias, name in aliases.items():
            tied.setdefault(name, [name]).append(alias)
        for names in tied.values():
            loaded_as = next(n for n in names if n in converted)  # one is: otherwise it was reported missing
            for n in names:
                if n != loaded_as:
                    module, _, attr = n.rpartition(".")
                    setattr(model.get_submodule(module), attr, model.get_parameter(loaded_as))
        return
    with torch.no_grad():
        for k, v in converted.items():
            if k in state:
                state[k].copy_(v)


def write_config(path: str | Path, config: Mapping) -> Path:
    """Write ``config`` as ``path/config.json`` (creating the folder); return the file."""
    folder = Path(path)
    folder.mkdir(parents=True, exist_ok=True)
    file = folder / CONFIG_NAME
    file.write_text(json.dumps(dict(config), indent=2, sort_keys=True) + "\n", encoding="utf-8")
    return file


def write_safetensors(path: str | Path, tensors: Mapping[str, Tensor]) -> Path:
    """Write ``tensors`` as ``path/model.safetensors`` (contiguous CPU copies, so tied weights are stored once per
    name); return the file. The ``format: pt`` metadata is what transformers expects."""
    folder = Path(path)
    folder.mkdir(parents=True, exist_ok=True)
    file = folder / WEIGHTS_NAME
    save_file({k: v.detach().cpu().contiguous().clone() for k, v in tensors.items()}, file, metadata={"format": "pt"})
    return file
