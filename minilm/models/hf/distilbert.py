"""DistilBERT checkpoints (``model_type: distilbert``: transformers' ``DistilBertModel``, ``DistilBertForMaskedLM``)
<-> :class:`minilm.models.distilbert.DistilBert`.

Names, without the ``distilbert.`` prefix (present when a head class saved the file)::

    embeddings.word_embeddings            -> embedding.token        (also the MLM decoder's weight: tied)
    embeddings.position_embeddings        -> embedding.position
    embeddings.LayerNorm                  -> embedding.norm
    transformer.layer.N.attention.{q,k,v}_lin  -> encoder.layers.N.self_attn.{q,k,v}_proj
    transformer.layer.N.attention.out_lin      -> encoder.layers.N.self_attn.out_proj
    transformer.layer.N.sa_layer_norm          -> encoder.layers.N.self_attn_norm
    transformer.layer.N.ffn.lin1               -> encoder.layers.N.ffn.fc1
    transformer.layer.N.ffn.lin2               -> encoder.layers.N.ffn.fc2
    transformer.layer.N.output_layer_norm      -> encoder.layers.N.ffn_norm
    vocab_transform                       -> mlm_head.transform
    vocab_layer_norm                      -> mlm_head.norm
    vocab_projector.bias                  -> mlm_head.decoder.bias  (its weight is the word embeddings: tied)

The config's sizes have their own names (``dim``, ``hidden_dim``, ``n_layers``, ``n_heads``); every LayerNorm's eps
is 1e-12, which transformers does not store. ``sinusoidal_pos_embds: true`` files load: transformers keeps the fixed
sinusoidal table in ``position_embeddings.weight`` and saves it there, so minilm reads it as learned positions that
hold the table (the same outputs; training would update them, where transformers keeps them fixed) and saves them
back as ``sinusoidal_pos_embds: false``, which transformers reads as the same positions. Task heads of the file
(``pre_classifier``, ``classifier``, ``qa_outputs``) are reported in a warning and ignored.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Mapping

from minilm.files import CheckpointError
from minilm.models.distilbert import DistilBert, DistilBertConfig
from minilm.models.hf import bert
from minilm.models.hf.convert import ConfigFields, Converter, Rename, Tied, module

MODEL_TYPE = "distilbert"
REQUIRED = ("vocab_size", "dim", "n_layers", "n_heads", "hidden_dim", "max_position_embeddings")
FIELDS = ConfigFields(
    renamed={
        "vocab_size": "vocab_size",
        "dim": "d_model",
        "n_layers": "n_layers",
        "n_heads": "n_heads",
        "hidden_dim": "d_ff",
        "max_position_embeddings": "max_len",
        "dropout": "dropout",
        "attention_dropout": "attention_dropout",
        "pad_token_id": "pad_id",
        "initializer_range": "init_std",
    },
    fixed={"model_type": MODEL_TYPE, "tie_word_embeddings": True},
    computed=frozenset({"activation", "sinusoidal_pos_embds"}),
    ignored=frozenset({"qa_dropout", "seq_classif_dropout"}),  # task heads' dropouts
)
# DistilBertConfig's defaults are transformers' (tests check it): the values of fields a config.json leaves out
HF_DEFAULTS = dataclasses.asdict(DistilBertConfig())


def config_from_hf(hf: Mapping, source: str = "config.json", strict: bool = True) -> DistilBertConfig:
    """A transformers ``DistilBertConfig`` dict -> :class:`DistilBertConfig` with the MLM head (the file decides)."""
    missing = [key for key in REQUIRED if key not in hf]
    if missing:
        raise CheckpointError(f"{source} lacks {', '.join(missing)}: it is not a complete distilbert config")
    values = {**HF_DEFAULTS, **FIELDS.from_hf(hf, source, strict)}
    act = hf.get("activation", HF_DEFAULTS["activation"])
    if act not in bert.HF_ACTIVATIONS:
        raise CheckpointError(f"{source}: activation {act!r} is not supported ({', '.join(bert.HF_ACTIVATIONS)})")
    values.update(activation=bert.HF_ACTIVATIONS[act], mlm=True)
    if values["pad_id"] is None:
        values["pad_id"] = HF_DEFAULTS["pad_id"]
    return DistilBertConfig(**values)


def config_to_hf(config: DistilBertConfig) -> dict:
    """:class:`DistilBertConfig` -> a transformers ``DistilBertConfig`` dict (learned positions)."""
    if config.n_segments or config.pooler or config.nsp or config.position_offset:
        raise CheckpointError(
            "transformers' DistilBERT has no token-type embeddings, pooler or NSP head, and BERT's positions"
        )
    if config.norm_eps != 1e-12:
        raise CheckpointError(f"transformers' DistilBERT fixes every LayerNorm's eps at 1e-12, not {config.norm_eps}")
    return {**FIELDS.to_hf(config), "activation": config.activation, "sinusoidal_pos_embds": False}


def names(config: DistilBertConfig) -> list[Rename]:
    """The name table of a model with ``config``'s heads (the tied decoder weight is the word embeddings)."""
    table = [
        Rename("embedding.token.weight", "embeddings.word_embeddings.weight"),
        Rename("embedding.position.weight", "embeddings.position_embeddings.weight"),
        *module("embedding.norm", "embeddings.LayerNorm"),
    ]
    for i in range(config.n_layers):
        ours, theirs = f"encoder.layers.{i}.", f"transformer.layer.{i}."
        for our_module, their_module in [
            ("self_attn.q_proj", "attention.q_lin"),
            ("self_attn.k_proj", "attention.k_lin"),
            ("self_attn.v_proj", "attention.v_lin"),
            ("self_attn.out_proj", "attention.out_lin"),
            ("self_attn_norm", "sa_layer_norm"),
            ("ffn.fc1", "ffn.lin1"),
            ("ffn.fc2", "ffn.lin2"),
            ("ffn_norm", "output_layer_norm"),
        ]:
            table += module(ours + our_module, theirs + their_module)
    if config.mlm:
        table += module("mlm_head.transform", "vocab_transform") + module("mlm_head.norm", "vocab_layer_norm")
        table.append(Rename("mlm_head.decoder.bias", "vocab_projector.bias"))
    return table


def fit_config(config: DistilBertConfig, names: Collection[str]) -> DistilBertConfig:
    """``config`` with the MLM head when the file has it (names without the prefix)."""
    return dataclasses.replace(config, mlm=any(name.startswith(HEADS) for name in names))


HEADS = ("vocab_transform.", "vocab_layer_norm.", "vocab_projector.")
CONVERTER = Converter(
    model_type=MODEL_TYPE,
    model=DistilBert,
    config_class=DistilBertConfig,
    config_from_hf=config_from_hf,
    config_to_hf=config_to_hf,
    names=names,
    matches=lambda config: True,
    architecture=lambda config: "DistilBertForMaskedLM" if config.mlm else "DistilBertModel",
    prefix="distilbert.",
    heads=HEADS,
    prefixed=lambda config: config.mlm,  # DistilBertModel's files have no prefix
    buffers=r"embeddings\.position_ids",
    tied=(
        Tied(
            ("embeddings.word_embeddings.weight", "vocab_projector.weight"),
            note="minilm's DistilBert ties its MLM decoder to the word embeddings",
        ),
    ),
    task_heads=r"(?!(embeddings|transformer|vocab_transform|vocab_layer_norm|vocab_projector)\.).*",
    fit_config=fit_config,
)
