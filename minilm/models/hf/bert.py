"""BERT checkpoints (``model_type: bert``: transformers' ``BertModel``, ``BertForPreTraining``, ``BertForMaskedLM``,
...) <-> :class:`minilm.models.bert.Bert`; :mod:`.roberta` reuses the encoder's part.

Names, without the ``bert.`` prefix (present when a head class saved the file)::

    embeddings.word_embeddings            -> embedding.token        (also the MLM decoder's weight: tied)
    embeddings.position_embeddings        -> embedding.position
    embeddings.token_type_embeddings      -> embedding.segment
    embeddings.LayerNorm                  -> embedding.norm
    encoder.layer.N.attention.self.{query,key,value} -> encoder.layers.N.self_attn.{q,k,v}_proj
    encoder.layer.N.attention.output.dense           -> encoder.layers.N.self_attn.out_proj
    encoder.layer.N.attention.output.LayerNorm       -> encoder.layers.N.self_attn_norm
    encoder.layer.N.intermediate.dense               -> encoder.layers.N.ffn.fc1
    encoder.layer.N.output.dense                     -> encoder.layers.N.ffn.fc2
    encoder.layer.N.output.LayerNorm                 -> encoder.layers.N.ffn_norm
    pooler.dense                          -> pooler.dense
    cls.predictions.transform.{dense,LayerNorm}      -> mlm_head.{transform,norm}
    cls.predictions.bias (= cls.predictions.decoder.bias) -> mlm_head.decoder.bias
    cls.seq_relationship                  -> nsp_head

The int64 ``embeddings.position_ids`` / ``token_type_ids`` buffers of older checkpoints are dropped; TF-converted
``LayerNorm.gamma`` / ``beta`` are read as ``weight`` / ``bias``. The heads present in the file (pooler, MLM, NSP)
are built, the others are not, so no weight is ever left at random. Task heads of the file (``classifier``,
``qa_outputs``: anything outside the encoder and the pretraining heads) are not part of :class:`Bert`: they are
reported in a warning and ignored (:mod:`minilm.heads` has the course's task heads).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Mapping

from minilm.files import CheckpointError
from minilm.models.bert import Bert, BertConfig
from minilm.models.hf.convert import ConfigFields, Converter, Rename, Tied, module

MODEL_TYPE = "bert"

# transformers' hidden_act names -> minilm.nn.ACTIVATIONS (each minilm name is also a transformers name)
HF_ACTIVATIONS = {
    "gelu": "gelu",
    "gelu_python": "gelu",
    "gelu_new": "gelu_new",
    "gelu_pytorch_tanh": "gelu_new",
    "relu": "relu",
    "silu": "silu",
    "swish": "silu",
}
REQUIRED = ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size")
FIELDS = ConfigFields(
    renamed={
        "vocab_size": "vocab_size",
        "hidden_size": "d_model",
        "num_hidden_layers": "n_layers",
        "num_attention_heads": "n_heads",
        "intermediate_size": "d_ff",
        "hidden_dropout_prob": "dropout",
        "attention_probs_dropout_prob": "attention_dropout",
        "type_vocab_size": "n_segments",
        "layer_norm_eps": "norm_eps",
        "initializer_range": "init_std",
    },
    fixed={
        "model_type": MODEL_TYPE,
        "position_embedding_type": "absolute",
        "is_decoder": False,
        "add_cross_attention": False,
        "tie_word_embeddings": True,
    },
    computed=frozenset({"hidden_act", "max_position_embeddings", "pad_token_id"}),
    ignored=frozenset({"classifier_dropout"}),  # task heads' option
)
# BertConfig's defaults are transformers' (tests check it): the values of fields a config.json leaves out
HF_DEFAULTS = dataclasses.asdict(BertConfig())


def encoder_fields(
    hf: Mapping, fields: ConfigFields, pad_id: int, source: str, strict: bool, defaults: Mapping = HF_DEFAULTS
) -> dict:
    """Every :class:`BertConfig` field of a BERT-like transformers config; ``pad_id`` when it names none, and
    ``defaults`` (transformers' defaults, under minilm's names) for the fields it leaves out."""
    missing = [key for key in (*REQUIRED, "max_position_embeddings") if key not in hf]
    if missing:
        model_type = fields.fixed["model_type"]
        raise CheckpointError(f"{source} lacks {', '.join(missing)}: it is not a complete {model_type} config")
    values = {**defaults, **fields.from_hf(hf, source, strict)}
    act = hf.get("hidden_act", defaults["activation"])
    if act not in HF_ACTIVATIONS:
        raise CheckpointError(f"{source}: hidden_act {act!r} is not supported ({', '.join(HF_ACTIVATIONS)})")
    values.update(activation=HF_ACTIVATIONS[act], max_len=hf["max_position_embeddings"])
    values.update(pad_id=pad_id if hf.get("pad_token_id") is None else hf["pad_token_id"])
    return values


def config_from_hf(hf: Mapping, source: str = "config.json", strict: bool = True) -> BertConfig:
    """A transformers ``BertConfig`` dict -> :class:`BertConfig` with every head (the file decides which are built)."""
    return BertConfig(**encoder_fields(hf, FIELDS, HF_DEFAULTS["pad_id"], source, strict))


def config_to_hf(config: BertConfig) -> dict:
    """:class:`BertConfig` -> a transformers ``BertConfig`` dict."""
    if config.position_offset:
        raise CheckpointError("a model with RoBERTa's positions (position_offset > 0) saves as a roberta checkpoint")
    return encoder_to_hf(config, FIELDS)


def encoder_to_hf(config: BertConfig, fields: ConfigFields) -> dict:
    if config.n_segments < 1:
        raise CheckpointError(
            "transformers' BERT always adds a segment (token type) embedding; a model with n_segments=0 has none "
            "(n_segments=1 is RoBERTa's: one learned vector added to every token)"
        )
    hf = fields.to_hf(config)
    hf.update(hidden_act=config.activation, pad_token_id=config.pad_id)
    hf.update(max_position_embeddings=config.max_len + config.position_offset)
    return hf


def embedding_names() -> list[Rename]:
    """Token, position and segment embeddings and their LayerNorm: the names BERT, RoBERTa and ALBERT share."""
    return [
        Rename("embedding.token.weight", "embeddings.word_embeddings.weight"),
        Rename("embedding.position.weight", "embeddings.position_embeddings.weight"),
        Rename("embedding.segment.weight", "embeddings.token_type_embeddings.weight"),
        *module("embedding.norm", "embeddings.LayerNorm"),
    ]


def encoder_names(config: BertConfig) -> list[Rename]:
    """Embeddings, layers and pooler: the names BERT and RoBERTa share."""
    table = embedding_names()
    for i in range(config.n_layers):
        ours, theirs = f"encoder.layers.{i}.", f"encoder.layer.{i}."
        for our_module, their_module in [
            ("self_attn.q_proj", "attention.self.query"),
            ("self_attn.k_proj", "attention.self.key"),
            ("self_attn.v_proj", "attention.self.value"),
            ("self_attn.out_proj", "attention.output.dense"),
            ("self_attn_norm", "attention.output.LayerNorm"),
            ("ffn.fc1", "intermediate.dense"),
            ("ffn.fc2", "output.dense"),
            ("ffn_norm", "output.LayerNorm"),
        ]:
            table += module(ours + our_module, theirs + their_module)
    return table + (module("pooler.dense", "pooler.dense") if config.pooler else [])


def names(config: BertConfig) -> list[Rename]:
    """The name table of a model with ``config``'s heads (the tied decoder weight is the word embeddings)."""
    table = encoder_names(config)
    if config.mlm:
        table += module("mlm_head.transform", "cls.predictions.transform.dense")
        table += module("mlm_head.norm", "cls.predictions.transform.LayerNorm")
        table.append(Rename("mlm_head.decoder.bias", "cls.predictions.bias"))
    return table + (module("nsp_head", "cls.seq_relationship") if config.nsp else [])


def fit_config(config: BertConfig, names: Collection[str]) -> BertConfig:
    """``config`` with the heads a file has (names without the prefix)."""
    return dataclasses.replace(
        config,
        pooler="pooler.dense.weight" in names,
        mlm=any(name.startswith("cls.predictions.") for name in names),
        nsp="cls.seq_relationship.weight" in names,
    )


def architecture(config: BertConfig) -> str:
    heads = {(True, True): "ForPreTraining", (True, False): "ForMaskedLM", (False, True): "ForNextSentencePrediction"}
    return "Bert" + heads.get((config.mlm, config.nsp), "Model")


CONVERTER = Converter(
    model_type=MODEL_TYPE,
    model=Bert,
    config_class=BertConfig,
    config_from_hf=config_from_hf,
    config_to_hf=config_to_hf,
    names=names,
    matches=lambda config: not config.position_offset,
    architecture=architecture,
    prefix="bert.",
    heads=("cls.",),
    prefixed=lambda config: config.mlm or config.nsp,  # BertModel's files have no prefix
    buffers=r"embeddings\.(position_ids|token_type_ids)",
    legacy=((r"LayerNorm\.gamma$", "LayerNorm.weight"), (r"LayerNorm\.beta$", "LayerNorm.bias")),
    tied=(
        Tied(
            ("embeddings.word_embeddings.weight", "cls.predictions.decoder.weight"),
            note="minilm's Bert ties its MLM decoder to the word embeddings",
        ),
        Tied(("cls.predictions.bias", "cls.predictions.decoder.bias"), flag=None),
    ),
    task_heads=r"(?!(embeddings|encoder|pooler|cls)\.).*",
    fit_config=fit_config,
)
