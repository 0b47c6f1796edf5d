"""Hugging Face-layout BERT and RoBERTa checkpoints -> :class:`minilm.models.bert.Bert`.

A checkpoint is a folder with ``config.json`` and ``model.safetensors`` (or shards listed in
``model.safetensors.index.json``), read by :mod:`minilm.models.hf_loading`, which also checks every name and shape
and refuses pickled ``pytorch_model.bin`` files (unpickling runs arbitrary code). This module holds what is BERT's own:
the config fields, the names, the tied copies and the vocabulary.

Names (after an optional ``bert.`` / ``roberta.`` prefix, present when a head class saved the file)::

    embeddings.word_embeddings            -> embedding.token        (also the MLM decoder's weight: tied)
    embeddings.position_embeddings        -> embedding.position     (RoBERTa: max_len + pad_id + 1 rows)
    embeddings.token_type_embeddings      -> embedding.segment
    embeddings.LayerNorm                  -> embedding.norm
    encoder.layer.N.attention.self.{query,key,value} -> encoder.layers.N.self_attn.{q,k,v}_proj
    encoder.layer.N.attention.output.dense           -> encoder.layers.N.self_attn.out_proj
    encoder.layer.N.attention.output.LayerNorm       -> encoder.layers.N.self_attn_norm
    encoder.layer.N.intermediate.dense               -> encoder.layers.N.ffn.fc1
    encoder.layer.N.output.dense                     -> encoder.layers.N.ffn.fc2
    encoder.layer.N.output.LayerNorm                 -> encoder.layers.N.ffn_norm
    pooler.dense                          -> pooler.dense
    cls.predictions.transform.{dense,LayerNorm} / lm_head.{dense,layer_norm} -> mlm_head.{transform,norm}
    cls.predictions.bias, cls.predictions.decoder.bias / lm_head.bias, lm_head.decoder.bias -> mlm_head.decoder.bias
    cls.seq_relationship                  -> nsp_head

The int64 ``embeddings.position_ids`` / ``token_type_ids`` buffers of older checkpoints are dropped; TF-converted
``LayerNorm.gamma`` / ``beta`` are read as ``weight`` / ``bias``. A tied tensor may be stored under several keys (or
under one): duplicates must be equal. The heads present in the file (pooler, MLM, NSP) are built, the others are not,
so no weight is ever left at random. Task heads of the file (``classifier``, ``qa_outputs``) are not part of
:class:`Bert`: they are reported in a warning and ignored (:mod:`minilm.heads` has the course's task heads).
"""

from __future__ import annotations

import json
import re
import warnings
from collections.abc import Mapping
from pathlib import Path

import torch
from torch import Tensor

from minilm.models.bert import Bert, BertConfig
from minilm.models.hf_loading import (
    CONFIG_NAME,
    CheckpointError,
    check_model_type,
    drop_keys,
    load_converted,
    read_config,
    read_safetensors,
    strip_prefix,
)

MODEL_TYPES = ("bert", "roberta")

# transformers' hidden_act names -> minilm.nn.ACTIVATIONS
HF_ACTIVATIONS = {
    "gelu": "gelu",
    "gelu_python": "gelu",
    "gelu_new": "gelu_new",
    "gelu_pytorch_tanh": "gelu_new",
    "relu": "relu",
    "silu": "silu",
    "swish": "silu",
}

_MODULES = {  # checkpoint module -> minilm module (outside the layers)
    "embeddings.word_embeddings": "embedding.token",
    "embeddings.position_embeddings": "embedding.position",
    "embeddings.token_type_embeddings": "embedding.segment",
    "embeddings.LayerNorm": "embedding.norm",
    "pooler.dense": "pooler.dense",
    "cls.predictions.transform.dense": "mlm_head.transform",
    "cls.predictions.transform.LayerNorm": "mlm_head.norm",
    "cls.predictions.decoder": "mlm_head.decoder",
    "cls.predictions": "mlm_head.decoder",  # cls.predictions.bias: the decoder's bias
    "cls.seq_relationship": "nsp_head",
    "lm_head.dense": "mlm_head.transform",
    "lm_head.layer_norm": "mlm_head.norm",
    "lm_head.decoder": "mlm_head.decoder",
    "lm_head": "mlm_head.decoder",  # lm_head.bias: the decoder's bias
}
_LAYER_MODULES = {  # inside encoder.layer.N
    "attention.self.query": "self_attn.q_proj",
    "attention.self.key": "self_attn.k_proj",
    "attention.self.value": "self_attn.v_proj",
    "attention.output.dense": "self_attn.out_proj",
    "attention.output.LayerNorm": "self_attn_norm",
    "intermediate.dense": "ffn.fc1",
    "output.dense": "ffn.fc2",
    "output.LayerNorm": "ffn_norm",
}
_LEAVES = {"weight": "weight", "bias": "bias", "gamma": "weight", "beta": "bias"}
_LAYER = re.compile(r"encoder\.layer\.(\d+)\.(.+)")
_BUFFERS = r"(.*\.)?embeddings\.(position_ids|token_type_ids)"  # whole names
_TIED = "mlm_head.decoder.weight"  # is embedding.token.weight


# --- configuration ------------------------------------------------------------------------------------------------


def bert_config_from_hf(hf: Mapping, source: str = CONFIG_NAME) -> BertConfig:
    """A transformers ``BertConfig`` / ``RobertaConfig`` dict -> :class:`BertConfig` (every head switched on)."""
    check_model_type(hf, MODEL_TYPES, source)
    model_type = hf["model_type"]
    required = [
        "vocab_size",
        "hidden_size",
        "num_hidden_layers",
        "num_attention_heads",
        "intermediate_size",
        "max_position_embeddings",
    ]
    missing = [key for key in required if key not in hf]
    if missing:
        raise CheckpointError(f"{source} lacks {', '.join(missing)}: it is not a complete {model_type} config")
    if hf.get("position_embedding_type", "absolute") != "absolute":
        raise CheckpointError(
            f"{source}: position_embedding_type {hf['position_embedding_type']!r} is not supported (only 'absolute')"
        )
    if hf.get("is_decoder") or hf.get("add_cross_attention"):
        raise CheckpointError(f"{source}: a {model_type} decoder (is_decoder / add_cross_attention) is not supported")
    act = hf.get("hidden_act", "gelu")
    if act not in HF_ACTIVATIONS:
        raise CheckpointError(f"{source}: hidden_act {act!r} is not supported ({', '.join(HF_ACTIVATIONS)})")
    if model_type == "roberta" and HF_ACTIVATIONS[act] != "gelu":
        raise CheckpointError(f"{source}: RoBERTa's LM head always uses gelu; hidden_act {act!r} is not supported")
    pad_id = hf.get("pad_token_id")
    pad_id = (1 if model_type == "roberta" else 0) if pad_id is None else int(pad_id)
    offset = pad_id + 1 if model_type == "roberta" else 0  # RoBERTa's first position is row pad_id + 1
    max_len = int(hf["max_position_embeddings"]) - offset
    if max_len < 1:
        raise CheckpointError(f"{source}: max_position_embeddings leaves no position after RoBERTa's offset {offset}")
    try:
        return BertConfig(
            vocab_size=int(hf["vocab_size"]),
            max_len=max_len,
            n_layers=int(hf["num_hidden_layers"]),
            n_heads=int(hf["num_attention_heads"]),
            d_model=int(hf["hidden_size"]),
            d_ff=int(hf["intermediate_size"]),
            dropout=float(hf.get("hidden_dropout_prob", 0.1)),
            attention_dropout=float(hf.get("attention_probs_dropout_prob", 0.1)),
            n_segments=int(hf.get("type_vocab_size", 2)),
            norm_eps=float(hf.get("layer_norm_eps", 1e-12)),
            activation=HF_ACTIVATIONS[act],
            pad_id=pad_id,
            position_offset=offset,
            init_std=float(hf.get("initializer_range", 0.02)),
        )
    except ValueError as e:
        raise CheckpointError(f"{source}: {e}") from None


# --- tensors ------------------------------------------------------------------------------------------------------


def hf_name_to_minilm(name: str) -> str | None:
    """A checkpoint tensor name (prefix already stripped) -> its minilm name; None for names minilm has no place for."""
    module, _, leaf = name.rpartition(".")
    if leaf not in _LEAVES:
        return None
    leaf = _LEAVES[leaf]
    if module in _MODULES:
        return f"{_MODULES[module]}.{leaf}"
    layer = _LAYER.fullmatch(module)
    if layer and layer.group(2) in _LAYER_MODULES:
        return f"encoder.layers.{layer.group(1)}.{_LAYER_MODULES[layer.group(2)]}.{leaf}"
    return None


def convert_hf_state_dict(tensors: Mapping[str, Tensor], model_type: str) -> tuple[dict[str, Tensor], list[str]]:
    """Checkpoint tensors -> (minilm name -> tensor, the checkpoint names minilm has no place for).

    The tied MLM decoder weight is checked against the word embeddings and left out (the model ties it itself).
    """
    converted, _, ignored = _convert(tensors, model_type)
    return converted, ignored


def _convert(tensors: Mapping[str, Tensor], model_type: str) -> tuple[dict[str, Tensor], dict[str, str], list[str]]:
    """:func:`convert_hf_state_dict`, with the checkpoint name each minilm name came from (for messages) between."""
    tensors = drop_keys(strip_prefix(tensors, f"{model_type}."), _BUFFERS)  # buffers: derived, not weights
    converted: dict[str, Tensor] = {}
    source: dict[str, str] = {}
    ignored = []
    for name, tensor in tensors.items():
        ours = hf_name_to_minilm(name)
        if ours is None:
            ignored.append(name)
            continue
        if ours in converted:  # one tensor under several names (tied): they must agree
            if converted[ours].shape != tensor.shape or not torch.equal(converted[ours], tensor):
                raise CheckpointError(f"{source[ours]} and {name} should be one tied tensor ({ours}) but differ")
            continue
        converted[ours], source[ours] = tensor, name
    decoder = converted.pop(_TIED, None)
    token = converted.get("embedding.token.weight")
    if decoder is not None and token is not None:
        if decoder.shape != token.shape or not torch.equal(decoder, token):
            raise CheckpointError(
                f"{source[_TIED]} differs from the word embeddings: minilm's Bert ties its MLM decoder to them "
                "(tie_word_embeddings=False checkpoints are not supported)"
            )
    return converted, source, ignored


# --- loading ------------------------------------------------------------------------------------------------------


def load_hf_bert(
    path: str | Path,
    tokenizer=None,
    device: str | torch.device = "cpu",
    dtype: torch.dtype | None = torch.float32,
) -> Bert:
    """A Hugging Face BERT / RoBERTa folder -> :class:`Bert` in eval mode, with the heads the file has.

    ``tokenizer``: checked against the checkpoint's vocabulary first (:func:`check_vocabulary`).
    ``dtype``: the parameters' dtype (None: as stored).
    """
    folder = Path(path)
    hf = read_config(folder)
    config = bert_config_from_hf(hf, str(folder / CONFIG_NAME))
    if tokenizer is not None:
        check_vocabulary(config, tokenizer, folder)
    tensors, origin, ignored = _convert(read_safetensors(folder, device), hf["model_type"])
    config.pooler = "pooler.dense.weight" in tensors
    config.mlm = any(name.startswith("mlm_head.") for name in tensors)
    config.nsp = "nsp_head.weight" in tensors
    with torch.device("meta"):  # no memory, no initialisation: every tensor comes from the file
        model = Bert(config)
    if dtype is not None:
        tensors = {name: t.to(dtype) if t.is_floating_point() else t for name, t in tensors.items()}
    # every name and shape checked against the model its config.json implies; the tied decoder weight re-tied
    load_converted(model, tensors, origin, source=str(folder), assign=True)
    if ignored:
        warnings.warn(
            f"{folder}: {len(ignored)} tensor(s) with no place in minilm's Bert were ignored "
            f"({', '.join(ignored[:5])}{', ...' if len(ignored) > 5 else ''}); task heads live in minilm.heads",
            stacklevel=3,
        )
    return model.eval()


# --- vocabulary ---------------------------------------------------------------------------------------------------


def _tokenizer_vocab(tokenizer) -> dict[str, int] | None:
    for owner in (tokenizer, getattr(tokenizer, "backend", None)):
        get_vocab = getattr(owner, "get_vocab", None)
        if callable(get_vocab):
            return dict(get_vocab())
    return None


def folder_vocab(path: str | Path) -> dict[str, int] | None:
    """token -> id of the checkpoint folder's own tokenizer (tokenizer.json, vocab.txt or vocab.json); None if none."""
    folder = Path(path)
    if (folder / "tokenizer.json").is_file():
        spec = json.loads((folder / "tokenizer.json").read_text())
        vocab = (spec.get("model") or {}).get("vocab")
        if isinstance(vocab, dict):
            vocab = dict(vocab)
            vocab.update({t["content"]: t["id"] for t in spec.get("added_tokens") or []})
            return vocab
    if (folder / "vocab.txt").is_file():  # WordPiece: one token per line, id = line number
        lines = (folder / "vocab.txt").read_text(encoding="utf-8").split("\n")
        lines = lines[:-1] if lines and lines[-1] == "" else lines
        return {token: i for i, token in enumerate(lines)}
    if (folder / "vocab.json").is_file():  # byte-level BPE
        return json.loads((folder / "vocab.json").read_text(encoding="utf-8"))
    return None


def check_vocabulary(config: BertConfig, tokenizer, folder: str | Path | None = None) -> None:
    """Raise a ValueError unless ``tokenizer`` (minilm's or transformers') fits a model of ``config``.

    Checked: the number of tokens equals the embedding table's rows; the padding id; and, when ``folder`` holds the
    checkpoint's own vocabulary (tokenizer.json, vocab.txt or vocab.json), that every token has the same id.
    """
    size = len(tokenizer)
    if size != config.vocab_size:
        raise ValueError(
            f"the tokenizer has {size} tokens but the model's vocabulary has {config.vocab_size}: token ids would "
            "index the wrong embeddings; use the tokenizer the checkpoint was trained with (its vocab.txt / "
            "vocab.json + merges.txt)"
        )
    pad = getattr(tokenizer, "pad_id", None)
    pad = getattr(tokenizer, "pad_token_id", None) if pad is None else pad
    if pad is not None and pad != config.pad_id:
        raise ValueError(f"the tokenizer pads with id {pad} but the model's padding id is {config.pad_id}")
    reference = folder_vocab(folder) if folder is not None else None
    ours = _tokenizer_vocab(tokenizer) if reference is not None else None
    if reference is not None and ours is not None:
        wrong = [token for token, i in reference.items() if ours.get(token) != i]
        if wrong:
            examples = ", ".join(f"{t!r}: {reference[t]} vs {ours.get(t)}" for t in wrong[:3])
            raise ValueError(
                f"the tokenizer's vocabulary is not the checkpoint's: {len(wrong)} of {len(reference)} tokens have "
                f"other ids (checkpoint vs tokenizer: {examples}); build the tokenizer from {folder}'s vocabulary"
            )
