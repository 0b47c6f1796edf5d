"""ALBERT checkpoints (``model_type: albert``: transformers' ``AlbertModel``, ``AlbertForPreTraining``,
``AlbertForMaskedLM``) <-> :class:`minilm.models.albert.Albert`.

Names, without the ``albert.`` prefix (present when a head class saved the file); G is a layer group::

    embeddings.{word,position,token_type}_embeddings, LayerNorm   -> embedding.{token,position,segment,norm}
    encoder.embedding_hidden_mapping_in                          -> embedding.projection   (E -> H)
    encoder.albert_layer_groups.G.albert_layers.0.attention.{query,key,value,dense} -> encoder.layers.G.self_attn.*
    encoder.albert_layer_groups.G.albert_layers.0.attention.LayerNorm               -> encoder.layers.G.self_attn_norm
    encoder.albert_layer_groups.G.albert_layers.0.{ffn,ffn_output}                   -> encoder.layers.G.ffn.{fc1,fc2}
    encoder.albert_layer_groups.G.albert_layers.0.full_layer_layer_norm              -> encoder.layers.G.ffn_norm
    pooler                                                       -> pooler.dense
    predictions.{dense,LayerNorm}, predictions.bias              -> mlm_head.{transform,norm}, mlm_head.decoder.bias
    sop_classifier.classifier                                    -> sop_head

transformers' ALBERT shares whole layers (``num_hidden_groups`` groups, each run num_hidden_layers / groups times):
minilm's ``share="all"`` with ``n_groups`` groups, or ``"none"`` as one group per layer. Sharing only the
attention or only the feed-forward (Table 4's middle rows) has no transformers layout, and neither has a group of
several different layers (``inner_group_num`` > 1, which no released checkpoint uses): both are refused.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Mapping

from minilm.files import CheckpointError
from minilm.models.albert import Albert, AlbertConfig
from minilm.models.hf import bert
from minilm.models.hf.convert import ConfigFields, Converter, Rename, Tied, module

MODEL_TYPE = "albert"
FIELDS = ConfigFields(
    renamed={
        **bert.FIELDS.renamed,
        "embedding_size": "embedding_size",
        "classifier_dropout_prob": "classifier_dropout",
    },
    fixed={**bert.FIELDS.fixed, "model_type": MODEL_TYPE, "inner_group_num": 1},
    computed=bert.FIELDS.computed | {"num_hidden_groups"},
)
# transformers' AlbertConfig defaults (albert-xxlarge's sizes), under minilm's names: for fields a file leaves out
HF_DEFAULTS = {
    **dataclasses.asdict(AlbertConfig()),
    **dict(d_model=4096, n_heads=64, d_ff=16384, n_layers=12, n_groups=1),
}


def config_from_hf(hf: Mapping, source: str = "config.json", strict: bool = True) -> AlbertConfig:
    """A transformers ``AlbertConfig`` dict -> :class:`AlbertConfig` with every head (the file decides which)."""
    if hf.get("inner_group_num", 1) != 1:
        raise CheckpointError(
            f"{source}: inner_group_num={hf['inner_group_num']} (several different layers in a group) is not "
            "supported; minilm's ALBERT runs one block per group (inner_group_num=1, as every released checkpoint)"
        )
    values = bert.encoder_fields(hf, FIELDS, HF_DEFAULTS["pad_id"], source, strict, defaults=HF_DEFAULTS)
    n_groups = hf.get("num_hidden_groups", 1)
    if n_groups < 1 or values["n_layers"] % n_groups:
        raise CheckpointError(f"{source}: num_hidden_groups={n_groups} does not divide {values['n_layers']} layers")
    if n_groups == values["n_layers"] > 1:  # every layer its own group: nothing is shared
        return AlbertConfig(**{**values, "share": "none", "n_groups": 1, "nsp": False})
    return AlbertConfig(**{**values, "share": "all", "n_groups": n_groups, "nsp": False})


def config_to_hf(config: AlbertConfig) -> dict:
    """:class:`AlbertConfig` -> a transformers ``AlbertConfig`` dict."""
    if config.share not in ("all", "none"):
        raise CheckpointError(
            f"transformers' ALBERT shares whole layers only: a model with share={config.share!r} has no "
            "Hugging Face layout (save it with minilm's own checkpoints, or train with share='all' or 'none')"
        )
    if config.nsp or config.position_offset:
        raise CheckpointError("transformers' ALBERT has BERT's positions and no NSP head (use sop=True)")
    hf = bert.encoder_to_hf(config, FIELDS)
    hf["num_hidden_groups"] = config.n_groups if config.share == "all" else config.n_layers
    return hf


def names(config: AlbertConfig) -> list[Rename]:
    """The name table of a model with ``config``'s heads (the tied decoder weight is the word embeddings)."""
    table = bert.embedding_names() + module("embedding.projection", "encoder.embedding_hidden_mapping_in")
    n_blocks = config.n_groups if config.share == "all" else config.n_layers
    for g in range(n_blocks):
        ours, theirs = f"encoder.layers.{g}.", f"encoder.albert_layer_groups.{g}.albert_layers.0."
        for our_module, their_module in [
            ("self_attn.q_proj", "attention.query"),
            ("self_attn.k_proj", "attention.key"),
            ("self_attn.v_proj", "attention.value"),
            ("self_attn.out_proj", "attention.dense"),
            ("self_attn_norm", "attention.LayerNorm"),
            ("ffn.fc1", "ffn"),
            ("ffn.fc2", "ffn_output"),
            ("ffn_norm", "full_layer_layer_norm"),
        ]:
            table += module(ours + our_module, theirs + their_module)
    table += module("pooler.dense", "pooler") if config.pooler else []
    if config.mlm:
        table += module("mlm_head.transform", "predictions.dense") + module("mlm_head.norm", "predictions.LayerNorm")
        table.append(Rename("mlm_head.decoder.bias", "predictions.bias"))
    return table + (module("sop_head", "sop_classifier.classifier") if config.sop else [])


def fit_config(config: AlbertConfig, names: Collection[str]) -> AlbertConfig:
    """``config`` with the heads a file has (names without the prefix)."""
    return dataclasses.replace(
        config,
        pooler="pooler.weight" in names,
        mlm=any(name.startswith("predictions.") for name in names),
        sop="sop_classifier.classifier.weight" in names,
    )


def architecture(config: AlbertConfig) -> str:
    heads = {(True, True): "ForPreTraining", (True, False): "ForMaskedLM"}
    return "Albert" + heads.get((config.mlm, config.sop), "Model")


CONVERTER = Converter(
    model_type=MODEL_TYPE,
    model=Albert,
    config_class=AlbertConfig,
    config_from_hf=config_from_hf,
    config_to_hf=config_to_hf,
    names=names,
    matches=lambda config: True,
    architecture=architecture,
    prefix="albert.",
    heads=("predictions.", "sop_classifier."),
    prefixed=lambda config: config.mlm or config.sop,  # AlbertModel's files have no prefix
    buffers=r"embeddings\.(position_ids|token_type_ids)",
    tied=(
        Tied(
            ("embeddings.word_embeddings.weight", "predictions.decoder.weight"),
            note="minilm's Albert ties its MLM decoder to the word embeddings",
        ),
        Tied(("predictions.bias", "predictions.decoder.bias"), flag=None),
    ),
    task_heads=r"(?!(embeddings|encoder|pooler|predictions|sop_classifier)\.).*",
    fit_config=fit_config,
)
