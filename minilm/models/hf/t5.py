"""T5 checkpoints (``model_type: t5``: transformers' ``T5ForConditionalGeneration``, ``T5Model``), v1.0 and v1.1
layouts <-> :class:`minilm.models.t5.T5`.

Names (the decoder's sublayers are ``layer.0`` self-attention, ``layer.1`` cross-attention, ``layer.2``
feed-forward; the encoder's ``layer.0`` and ``layer.1``)::

    shared  (= {encoder,decoder}.embed_tokens, and lm_head in v1.0)      -> embedding.token
    {encoder,decoder}.block.0.layer.0.SelfAttention.relative_attention_bias -> {encoder,decoder}_position_bias.embedding
    {side}.block.N.layer.0.SelfAttention.{q,k,v,o}      -> {side}.layers.N.self_attn.{q,k,v,out}_proj
    {side}.block.N.layer.0.layer_norm                   -> {side}.layers.N.self_attn_norm
    decoder.block.N.layer.1.EncDecAttention.{q,k,v,o}   -> decoder.layers.N.cross_attn.{q,k,v,out}_proj
    decoder.block.N.layer.1.layer_norm                  -> decoder.layers.N.cross_attn_norm
    {side}.block.N.layer.F.DenseReluDense.wi            -> {side}.layers.N.ffn.fc1          (F: 1 encoder, 2 decoder)
    {side}.block.N.layer.F.DenseReluDense.wi_0 / wi_1   -> ....ffn.gate / ffn.fc1           (v1.1, gated)
    {side}.block.N.layer.F.DenseReluDense.wo            -> ....ffn.fc2
    {side}.block.N.layer.F.layer_norm                   -> ....ffn_norm
    {side}.final_layer_norm                             -> {side}.final_norm
    lm_head                                             -> lm_head                          (v1.1: its own)

No biases, RMSNorm weights only. ``feed_forward_proj`` "relu" (v1.0) or "gated-gelu" (v1.1: GEGLU with the tanh
GELU). ``tie_word_embeddings`` false (v1.1's configs) gives the LM head its own weights and no d_model^-0.5 output
scaling. transformers 5 writes ``tie_word_embeddings`` true for every T5 and the scaling as its own field
``scale_decoder_outputs``; its ``tie_weights`` then ties the head to the table unless the file holds an
``lm_head.weight`` that differs from ``shared.weight``. minilm reads both fields and decides the head the same way, so
a v1.1 saved by transformers 5 loads as it runs there: with its own head (google/t5-v1_1-*, flan-t5 read and saved
again) or a tied one (a v1.1 built by transformers 5), unscaled either way. T5's task heads (``classification_head``,
``qa_outputs``) are ignored with a warning.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

from torch import Tensor

from minilm.files import CheckpointError
from minilm.models.hf.bert import HF_ACTIVATIONS
from minilm.models.hf.convert import ConfigFields, Converter, Rename, Tied
from minilm.models.t5 import T5, T5Config

MODEL_TYPE = "t5"
FIELDS = ConfigFields(
    renamed={
        "vocab_size": "vocab_size",
        "d_model": "d_model",
        "d_kv": "d_kv",
        "d_ff": "d_ff",
        "num_layers": "n_encoder_layers",
        "num_decoder_layers": "n_decoder_layers",
        "num_heads": "n_heads",
        "relative_attention_num_buckets": "num_buckets",
        "relative_attention_max_distance": "max_distance",
        "dropout_rate": "dropout",
        "layer_norm_epsilon": "norm_eps",
        "initializer_factor": "init_factor",
        "n_positions": "max_len",
        "pad_token_id": "pad_id",
        "eos_token_id": "eos_id",
        "decoder_start_token_id": "decoder_start_id",
    },
    fixed={"model_type": MODEL_TYPE, "is_decoder": False},
    computed=frozenset(
        {"feed_forward_proj", "tie_word_embeddings", "scale_decoder_outputs", "dense_act_fn", "is_gated_act"}
    ),
    ignored=frozenset({"classifier_dropout"}),  # the task heads' (ignored) dropout
)
HF_DEFAULTS = {**dataclasses.asdict(T5Config()), "max_distance": 128}  # transformers' T5Config() is t5-small
LM_HEAD = Tied(
    ("shared.weight", "lm_head.weight"), note="T5 v1.0's LM head is the token table", apart_when_different=True
)
OUR_ACTIVATIONS = {"relu": "relu", "gelu": "gelu", "gelu_new": "gelu_new", "silu": "silu"}  # minilm -> transformers


def _feed_forward(proj: str, source: str) -> dict:
    """transformers' ``feed_forward_proj`` ("relu", "gated-gelu", "gated-silu", ...) -> activation and gating."""
    parts = proj.split("-")
    gated = parts[0] == "gated" and len(parts) == 2
    act = "gelu_new" if proj == "gated-gelu" else parts[-1]  # transformers' historical alias: gated-gelu is tanh GELU
    if (len(parts) == 2 and not gated) or len(parts) > 2 or act not in HF_ACTIVATIONS:
        raise CheckpointError(f"{source}: feed_forward_proj {proj!r} is not supported (e.g. 'relu', 'gated-gelu')")
    return dict(activation=HF_ACTIVATIONS[act], gated_ffn=gated)


def config_from_hf(hf: Mapping, source: str = "config.json", strict: bool = True) -> T5Config:
    """A transformers ``T5Config`` dict -> :class:`T5Config` (a missing ``num_decoder_layers`` is ``num_layers``)."""
    values = {**HF_DEFAULTS, **FIELDS.from_hf(hf, source, strict)}
    if "num_decoder_layers" not in hf or hf["num_decoder_layers"] is None:
        values["n_decoder_layers"] = values["n_encoder_layers"]
    for name in ("pad_id", "eos_id", "decoder_start_id"):
        if values[name] is None:
            values[name] = HF_DEFAULTS[name]
    tie = bool(hf.get("tie_word_embeddings", True))
    scale = bool(hf.get("scale_decoder_outputs", tie))
    values.update(_feed_forward(hf.get("feed_forward_proj", "relu"), source))
    return T5Config(**{**values, "tie_embeddings": tie, "scale_output": scale})


def config_to_hf(config: T5Config) -> dict:
    """:class:`T5Config` -> a transformers ``T5Config`` dict."""
    act = OUR_ACTIVATIONS[config.activation]
    proj = ("gated-gelu" if act == "gelu_new" else f"gated-{act}") if config.gated_ffn else act
    if config.gated_ffn and act == "gelu":
        raise CheckpointError("transformers' T5 has no gated exact-GELU ('gated-gelu' is the tanh one): use gelu_new")
    hf = FIELDS.to_hf(config)
    hf.update(
        feed_forward_proj=proj,
        tie_word_embeddings=config.tie_embeddings,
        scale_decoder_outputs=config.scale_output,
        is_encoder_decoder=True,
    )
    return hf


def fit_config(config: T5Config, tensors: Mapping[str, Tensor]) -> T5Config:
    """The LM head as the file holds it, as transformers 5 decides: tied to the table when the file has no
    ``lm_head.weight`` (although the config unties it: transformers 5 has written v1.1s that way), its
    own when the file's ``lm_head.weight`` differs from ``shared.weight`` (although the config ties it: transformers 5
    writes a Hub v1.1 read and saved again that way). The output scaling stays the config's."""
    if not config.tie_embeddings and "lm_head.weight" not in tensors:
        return dataclasses.replace(config, tie_embeddings=True)
    if config.tie_embeddings and LM_HEAD.held_apart(tensors):
        return dataclasses.replace(config, tie_embeddings=False)
    return config


def _weights(ours: str, theirs: str) -> list[Rename]:
    return [Rename(f"{ours}.weight", f"{theirs}.weight")]


def _stack_names(side: str, config: T5Config) -> list[Rename]:
    n_layers = config.n_encoder_layers if side == "encoder" else config.n_decoder_layers
    table = _weights(f"{side}_position_bias.embedding", f"{side}.block.0.layer.0.SelfAttention.relative_attention_bias")
    sublayers = [("self_attn", "SelfAttention")] + ([("cross_attn", "EncDecAttention")] if side == "decoder" else [])
    for i in range(n_layers):
        ours, theirs = f"{side}.layers.{i}.", f"{side}.block.{i}.layer."
        for index, (our_attn, their_attn) in enumerate(sublayers):
            for proj, their_proj in zip(("q_proj", "k_proj", "v_proj", "out_proj"), "qkvo", strict=True):
                table += _weights(f"{ours}{our_attn}.{proj}", f"{theirs}{index}.{their_attn}.{their_proj}")
            table += _weights(f"{ours}{our_attn}_norm", f"{theirs}{index}.layer_norm")
        ffn = f"{theirs}{len(sublayers)}."
        if config.gated_ffn:
            table += _weights(ours + "ffn.gate", ffn + "DenseReluDense.wi_0")
            table += _weights(ours + "ffn.fc1", ffn + "DenseReluDense.wi_1")
        else:
            table += _weights(ours + "ffn.fc1", ffn + "DenseReluDense.wi")
        table += _weights(ours + "ffn.fc2", ffn + "DenseReluDense.wo")
        table += _weights(ours + "ffn_norm", ffn + "layer_norm")
    return table + _weights(f"{side}.final_norm", f"{side}.final_layer_norm")


def names(config: T5Config) -> list[Rename]:
    """The name table (the token table under ``shared``; the LM head only when it has weights of its own)."""
    table = [Rename("embedding.token.weight", "shared.weight")]
    table += _stack_names("encoder", config) + _stack_names("decoder", config)
    return table + ([] if config.tie_embeddings else [Rename("lm_head.weight", "lm_head.weight")])


CONVERTER = Converter(
    model_type=MODEL_TYPE,
    model=T5,
    config_class=T5Config,
    config_from_hf=config_from_hf,
    config_to_hf=config_to_hf,
    names=names,
    matches=lambda config: True,
    architecture=lambda config: "T5ForConditionalGeneration",
    heads=("lm_head.",),
    tied=(
        Tied(
            ("shared.weight", "encoder.embed_tokens.weight", "decoder.embed_tokens.weight"),
            flag=None,
            note="minilm's T5 has one token table for the encoder and the decoder",
        ),
        LM_HEAD,
    ),
    task_heads=r"(classification_head|qa_outputs)\..*",
    fit_config=fit_config,
)
