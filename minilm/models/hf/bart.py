"""BART checkpoints (``model_type: bart``: transformers' ``BartModel``, ``BartForConditionalGeneration``) <->
:class:`minilm.models.bart.Bart`.

Names, without the ``model.`` prefix (present when a head class saved the file)::

    shared                                  -> encoder_embedding.token  (also the decoder's table and lm_head: tied)
    {encoder,decoder}.embed_positions       -> {encoder,decoder}_embedding.position   (max_len + 2 rows)
    {encoder,decoder}.layernorm_embedding   -> {encoder,decoder}_embedding.norm
    {encoder,decoder}.layers.N.self_attn.{q,k,v,out}_proj -> {encoder,decoder}.layers.N.self_attn.{q,k,v,out}_proj
    {encoder,decoder}.layers.N.self_attn_layer_norm       -> ....self_attn_norm
    decoder.layers.N.encoder_attn.{q,k,v,out}_proj        -> decoder.layers.N.cross_attn.{q,k,v,out}_proj
    decoder.layers.N.encoder_attn_layer_norm              -> decoder.layers.N.cross_attn_norm
    {encoder,decoder}.layers.N.fc1 / fc2 / final_layer_norm -> ....ffn.fc1 / ffn.fc2 / ffn_norm
    final_logits_bias                       -> final_logits_bias (a buffer; files without it leave it at zero)

Task heads of the file (``classification_head``, ``qa_outputs``) are ignored with a warning: :mod:`minilm.heads`
has the course's. transformers lets the encoder and the decoder differ in heads and feed-forward size; BART's
checkpoints never do, and minilm's :class:`~minilm.models.bart.BartConfig` has one of each: a file where they differ
is refused.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

from minilm.files import CheckpointError
from minilm.models.bart import Bart, BartConfig
from minilm.models.hf.bert import HF_ACTIVATIONS
from minilm.models.hf.convert import ConfigFields, Converter, Rename, Tied, module

MODEL_TYPE = "bart"
# fields of transformers 3's BART configs (facebook/bart-large's config.json), with the values BART has
LEGACY_FIXED = {
    "add_bias_logits": False,
    "add_final_layer_norm": False,
    "normalize_before": False,
    "normalize_embedding": True,
    "static_position_embeddings": False,
    "extra_pos_embeddings": 2,
}
FIELDS = ConfigFields(
    renamed={
        "vocab_size": "vocab_size",
        "max_position_embeddings": "max_len",
        "encoder_layers": "n_encoder_layers",
        "decoder_layers": "n_decoder_layers",
        "encoder_attention_heads": "n_heads",
        "encoder_ffn_dim": "d_ff",
        "d_model": "d_model",
        "dropout": "dropout",
        "attention_dropout": "attention_dropout",
        "activation_dropout": "activation_dropout",
        "scale_embedding": "scale_embedding",
        "init_std": "init_std",
        "pad_token_id": "pad_id",
        "bos_token_id": "bos_id",
        "eos_token_id": "eos_id",
        "decoder_start_token_id": "decoder_start_id",
    },
    fixed={
        "model_type": MODEL_TYPE,
        "tie_word_embeddings": True,
        "is_decoder": False,
        **LEGACY_FIXED,
    },
    computed=frozenset({"activation_function", "decoder_attention_heads", "decoder_ffn_dim"}),
    # training-only (LayerDrop), task heads' and generation options, an old alias of encoder_layers
    ignored=frozenset(
        {
            "encoder_layerdrop",
            "decoder_layerdrop",
            "classifier_dropout",
            "classif_dropout",
            "force_bos_token_to_be_generated",
            "num_hidden_layers",
        }
    ),
)
# transformers' BartConfig defaults are minilm's (bart-large): the values of the fields a file leaves out
HF_DEFAULTS = dataclasses.asdict(BartConfig())
HF_DEFAULT_ACTIVATION = "gelu"


def config_from_hf(hf: Mapping, source: str = "config.json", strict: bool = True) -> BartConfig:
    """A transformers ``BartConfig`` dict -> :class:`BartConfig`."""
    values = {**HF_DEFAULTS, **FIELDS.from_hf(hf, source, strict)}
    for theirs, ours in [("decoder_attention_heads", "n_heads"), ("decoder_ffn_dim", "d_ff")]:
        if theirs in hf and hf[theirs] != values[ours]:
            raise CheckpointError(
                f"{source}: {theirs}={hf[theirs]} differs from the encoder's {values[ours]}; minilm's BART has one "
                "value for both stacks (BART's checkpoints never differ)"
            )
    act = hf.get("activation_function", HF_DEFAULT_ACTIVATION)
    if act not in HF_ACTIVATIONS:
        raise CheckpointError(f"{source}: activation_function {act!r} is not supported ({', '.join(HF_ACTIVATIONS)})")
    for name in ("pad_id", "bos_id", "eos_id", "decoder_start_id"):
        if values[name] is None:
            values[name] = HF_DEFAULTS[name]
    return BartConfig(**{**values, "activation": HF_ACTIVATIONS[act]})


def config_to_hf(config: BartConfig) -> dict:
    """:class:`BartConfig` -> a transformers ``BartConfig`` dict (with ``forced_eos_token_id`` unset: minilm's
    :meth:`~minilm.models.bart.Bart.generate` forces nothing unless asked, and transformers would)."""
    hf = FIELDS.to_hf(config)
    hf.update(
        activation_function=config.activation,
        decoder_attention_heads=config.n_heads,
        decoder_ffn_dim=config.d_ff,
        is_encoder_decoder=True,
        forced_eos_token_id=None,
    )
    return {key: value for key, value in hf.items() if key not in LEGACY_FIXED}  # a current config has none


def _stack_names(side: str, n_layers: int) -> list[Rename]:
    table = [Rename(f"{side}_embedding.position.weight", f"{side}.embed_positions.weight")]
    table += module(f"{side}_embedding.norm", f"{side}.layernorm_embedding")
    sublayers = [("self_attn", "self_attn"), ("self_attn_norm", "self_attn_layer_norm")]
    if side == "decoder":
        sublayers += [("cross_attn", "encoder_attn"), ("cross_attn_norm", "encoder_attn_layer_norm")]
    for i in range(n_layers):
        ours, theirs = f"{side}.layers.{i}.", f"{side}.layers.{i}."
        for our_module, their_module in sublayers:
            if our_module.endswith("_norm"):
                table += module(ours + our_module, theirs + their_module)
            else:
                for proj in ("q_proj", "k_proj", "v_proj", "out_proj"):
                    table += module(f"{ours}{our_module}.{proj}", f"{theirs}{their_module}.{proj}")
        table += module(ours + "ffn.fc1", theirs + "fc1")
        table += module(ours + "ffn.fc2", theirs + "fc2")
        table += module(ours + "ffn_norm", theirs + "final_layer_norm")
    return table


def names(config: BartConfig) -> list[Rename]:
    """The name table (the decoder's token table and the LM head are the shared table: tied, not in the table)."""
    table = [Rename("encoder_embedding.token.weight", "shared.weight")]
    table += _stack_names("encoder", config.n_encoder_layers)
    table += _stack_names("decoder", config.n_decoder_layers)
    return table + [Rename("final_logits_bias", "final_logits_bias")]


CONVERTER = Converter(
    model_type=MODEL_TYPE,
    model=Bart,
    config_class=BartConfig,
    config_from_hf=config_from_hf,
    config_to_hf=config_to_hf,
    names=names,
    matches=lambda config: True,
    architecture=lambda config: "BartForConditionalGeneration",
    prefix="model.",
    heads=("lm_head.", "final_logits_bias"),
    tied=(
        Tied(
            ("shared.weight", "encoder.embed_tokens.weight", "decoder.embed_tokens.weight", "lm_head.weight"),
            note="minilm's Bart has one token table for the encoder, the decoder and the LM head",
        ),
    ),
    task_heads=r"(classification_head|qa_outputs)\..*",
    zero_buffers=("final_logits_bias",),
)
