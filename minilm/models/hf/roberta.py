"""RoBERTa checkpoints (``model_type: roberta``: transformers' ``RobertaModel``, ``RobertaForMaskedLM``) <->
:class:`minilm.models.bert.Bert` with a :class:`~minilm.models.bert.RobertaConfig`.

The encoder's names are BERT's (:func:`minilm.models.hf.bert.encoder_names`) under the ``roberta.`` prefix; the MLM
head is ``lm_head.{dense, layer_norm, bias}`` (``lm_head.decoder.weight`` is the word embeddings: tied); there is
no NSP head. Positions start at row ``pad_token_id + 1``: ``max_position_embeddings`` counts ``pad_token_id + 1``
rows more than minilm's ``max_len``. RoBERTa's LM head always uses the exact GELU, so its ``hidden_act`` must be
``gelu`` (minilm's head uses the model's activation).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Mapping

from minilm.files import CheckpointError
from minilm.models.bert import RobertaConfig
from minilm.models.hf import bert
from minilm.models.hf.convert import ConfigFields, Rename, Tied, module

MODEL_TYPE = "roberta"
FIELDS = ConfigFields(
    renamed=bert.FIELDS.renamed,
    fixed={**bert.FIELDS.fixed, "model_type": MODEL_TYPE},
    computed=bert.FIELDS.computed,
    ignored=bert.FIELDS.ignored,
)
PAD_ID = 1  # transformers' RobertaConfig default


def config_from_hf(hf: Mapping, source: str = "config.json", strict: bool = True) -> RobertaConfig:
    """A transformers ``RobertaConfig`` dict -> :class:`RobertaConfig` with the MLM head and the pooler (the file
    decides which are built); absent fields take transformers' RobertaConfig defaults."""
    values = bert.encoder_fields(hf, FIELDS, PAD_ID, source, strict)
    if values["activation"] != "gelu":
        raise CheckpointError(f"{source}: hidden_act {hf['hidden_act']!r} is not supported (RoBERTa's LM head: gelu)")
    offset = values["pad_id"] + 1  # RoBERTa's first position is row pad_id + 1
    if values["max_len"] - offset < 1:
        raise CheckpointError(f"{source}: max_position_embeddings leaves no position after RoBERTa's offset {offset}")
    return RobertaConfig(**{**values, "max_len": values["max_len"] - offset, "position_offset": offset, "nsp": False})


def config_to_hf(config: RobertaConfig) -> dict:
    """A :class:`BertConfig` with RoBERTa's positions -> a transformers ``RobertaConfig`` dict."""
    if config.position_offset != config.pad_id + 1:
        raise CheckpointError("RoBERTa's positions start at pad_id + 1: position_offset=0 is BERT's layout")
    if config.nsp:
        raise CheckpointError("RoBERTa checkpoints have no NSP head; a model with nsp=True saves as bert only")
    if config.activation != "gelu":
        raise CheckpointError(f"RoBERTa's LM head always uses gelu; activation={config.activation!r} is not supported")
    return bert.encoder_to_hf(config, FIELDS)


def names(config: RobertaConfig) -> list[Rename]:
    """The name table of a model with ``config``'s heads (the tied decoder weight is the word embeddings)."""
    table = bert.encoder_names(config)
    if config.mlm:
        table += module("mlm_head.transform", "lm_head.dense") + module("mlm_head.norm", "lm_head.layer_norm")
        table.append(Rename("mlm_head.decoder.bias", "lm_head.bias"))
    return table


def fit_config(config: RobertaConfig, names: Collection[str]) -> RobertaConfig:
    """``config`` with the heads a file has (names without the prefix)."""
    mlm = any(name.startswith("lm_head.") for name in names)
    return dataclasses.replace(config, pooler="pooler.dense.weight" in names, mlm=mlm)


CONVERTER = dataclasses.replace(
    bert.CONVERTER,  # the same model class, buffers and older spellings
    model_type=MODEL_TYPE,
    config_from_hf=config_from_hf,
    config_to_hf=config_to_hf,
    names=names,
    matches=lambda config: config.position_offset > 0,
    architecture=lambda config: "RobertaForMaskedLM" if config.mlm else "RobertaModel",
    prefix="roberta.",
    heads=("lm_head.",),
    prefixed=lambda config: config.mlm,
    tied=(
        Tied(("embeddings.word_embeddings.weight", "lm_head.decoder.weight"), note=bert.CONVERTER.tied[0].note),
        Tied(("lm_head.bias", "lm_head.decoder.bias"), flag=None),
    ),
    task_heads=r"(?!(embeddings|encoder|pooler|lm_head)\.).*",
    fit_config=fit_config,
)
