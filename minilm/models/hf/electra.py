"""ELECTRA checkpoints (``model_type: electra``: transformers' ``ElectraModel``, ``ElectraForPreTraining`` (the
discriminator), ``ElectraForMaskedLM`` (the generator)) <-> :class:`minilm.models.electra.Electra`.

The encoder's names are BERT's (:func:`minilm.models.hf.bert.encoder_names`, without a pooler) under the
``electra.`` prefix; the rest, without it::

    embeddings_project                        -> embedding.projection    (E -> H, only when E ≠ H)
    discriminator_predictions.dense           -> rtd_head.dense
    discriminator_predictions.dense_prediction -> rtd_head.out
    generator_predictions.{dense,LayerNorm}   -> mlm_head.{transform,norm}
    generator_lm_head.bias                    -> mlm_head.decoder.bias  (its weight is the word embeddings: tied)

transformers has no model with both heads (generator and discriminator are two models, two checkpoints), so a
minilm model with both (the All-Tokens MLM ablation's copy mechanism) has no Hugging Face layout and is refused.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Mapping

from minilm.files import CheckpointError
from minilm.models.electra import Electra, ElectraConfig
from minilm.models.hf import bert
from minilm.models.hf.convert import ConfigFields, Converter, Rename, Tied, module

MODEL_TYPE = "electra"
FIELDS = ConfigFields(
    renamed={**bert.FIELDS.renamed, "embedding_size": "embedding_size"},
    fixed={**bert.FIELDS.fixed, "model_type": MODEL_TYPE},
    computed=bert.FIELDS.computed,
    # options of transformers' task heads (ElectraForSequenceClassification's summary), not of these models
    ignored=bert.FIELDS.ignored | {"summary_type", "summary_use_proj", "summary_activation", "summary_last_dropout"},
)
# transformers' ElectraConfig defaults (electra-small's discriminator), under minilm's names: for fields a file omits
HF_DEFAULTS = {
    **dataclasses.asdict(ElectraConfig()),
    **dict(d_model=256, n_heads=4, d_ff=1024, n_layers=12, embedding_size=128),
}


def config_from_hf(hf: Mapping, source: str = "config.json", strict: bool = True) -> ElectraConfig:
    """A transformers ``ElectraConfig`` dict -> :class:`ElectraConfig` with both heads (the file decides which)."""
    values = bert.encoder_fields(hf, FIELDS, HF_DEFAULTS["pad_id"], source, strict, defaults=HF_DEFAULTS)
    return ElectraConfig(**{**values, "pooler": False, "nsp": False, "mlm": True, "rtd": True})


def config_to_hf(config: ElectraConfig) -> dict:
    """:class:`ElectraConfig` -> a transformers ``ElectraConfig`` dict."""
    if config.mlm and config.rtd:
        raise CheckpointError(
            "transformers' ELECTRA models have one head: the generator's MLM head (ElectraForMaskedLM) or the "
            "discriminator's (ElectraForPreTraining); this model has both (mlm=True, rtd=True), which no "
            "Hugging Face class holds"
        )
    if config.pooler or config.nsp or config.position_offset:
        raise CheckpointError("transformers' ELECTRA has BERT's positions and no pooler or NSP head")
    return bert.encoder_to_hf(config, FIELDS)


def names(config: ElectraConfig) -> list[Rename]:
    """The name table of a model with ``config``'s heads (the tied decoder weight is the word embeddings)."""
    table = bert.encoder_names(config)
    table += module("embedding.projection", "embeddings_project") if config.factorized() else []
    if config.rtd:
        table += module("rtd_head.dense", "discriminator_predictions.dense")
        table += module("rtd_head.out", "discriminator_predictions.dense_prediction")
    if config.mlm:
        table += module("mlm_head.transform", "generator_predictions.dense")
        table += module("mlm_head.norm", "generator_predictions.LayerNorm")
        table.append(Rename("mlm_head.decoder.bias", "generator_lm_head.bias"))
    return table


def fit_config(config: ElectraConfig, names: Collection[str]) -> ElectraConfig:
    """``config`` with the heads a file has (names without the prefix)."""
    return dataclasses.replace(
        config,
        mlm=any(name.startswith("generator_") for name in names),
        rtd=any(name.startswith("discriminator_predictions.") for name in names),
    )


def architecture(config: ElectraConfig) -> str:
    return "ElectraForMaskedLM" if config.mlm else "ElectraForPreTraining" if config.rtd else "ElectraModel"


HEADS = ("discriminator_predictions.", "generator_predictions.", "generator_lm_head.")
CONVERTER = Converter(
    model_type=MODEL_TYPE,
    model=Electra,
    config_class=ElectraConfig,
    config_from_hf=config_from_hf,
    config_to_hf=config_to_hf,
    names=names,
    matches=lambda config: True,
    architecture=architecture,
    prefix="electra.",
    heads=HEADS,
    prefixed=lambda config: config.mlm or config.rtd,  # ElectraModel's files have no prefix
    buffers=r"embeddings\.(position_ids|token_type_ids)",
    tied=(
        Tied(
            ("embeddings.word_embeddings.weight", "generator_lm_head.weight"),
            note="minilm's Electra ties its generator's MLM decoder to the word embeddings",
        ),
    ),
    task_heads=r"(?!(embeddings|embeddings_project|encoder|discriminator_predictions|generator_\w+)\.).*",
    fit_config=fit_config,
)
