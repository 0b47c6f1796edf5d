"""GPT-1 checkpoints (``model_type: openai-gpt``, transformers' ``OpenAIGPTLMHeadModel``) <->
:class:`minilm.models.gpt.GPT` with ``gpt_config("gpt1")``'s layout: post-LN blocks, no final LayerNorm.

Names, without the ``transformer.`` prefix: ``tokens_embed`` / ``positions_embed`` -> ``embedding.token`` /
``embedding.position`` (``tokens_embed`` is also ``lm_head``: tied), and the blocks ``h.N.*`` as GPT-2's
(:func:`minilm.models.hf.gpt2.layer_names`): the same modules, with ``ln_1`` after attention and ``ln_2`` after the
feed-forward network. GPT-1's ``afn: "gelu"`` is transformers' ``gelu_new`` (the tanh approximation), minilm's
``gelu_new``; its feed-forward size is always 4 * n_embd.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

from minilm.files import CheckpointError
from minilm.models.gpt import GPTConfig, gpt_config
from minilm.models.hf import gpt2
from minilm.models.hf.convert import ConfigFields, Rename, Tied

MODEL_TYPE = "openai-gpt"
FIELDS = ConfigFields(
    renamed={k: v for k, v in gpt2.FIELDS.renamed.items() if k != "n_inner"},  # the feed-forward is 4 * n_embd
    fixed={"model_type": MODEL_TYPE, "afn": "gelu", "tie_word_embeddings": True},
    # and old configs' special-token options (extra embedding rows would show as a shape mismatch)
    ignored=gpt2.IGNORED | {"n_special", "predict_special_tokens"},
)


def config_from_hf(hf: Mapping, source: str = "config.json", strict: bool = True) -> GPTConfig:
    """A transformers ``OpenAIGPTConfig`` dict -> ``gpt_config("gpt1", ...)``; absent fields take OpenAIGPTConfig's
    defaults, which the gpt1 preset shares."""
    return gpt_config("gpt1", **FIELDS.from_hf(hf, source, strict))


def config_to_hf(config: GPTConfig) -> dict:
    """A post-LN :class:`GPTConfig` -> a transformers ``OpenAIGPTConfig`` dict (every dropout is ``config.dropout``)."""
    if config.norm_first:
        raise CheckpointError("GPT-1 checkpoints are post-LN; a pre-LN (norm_first=True) model is GPT-2's layout")
    if not config.bias:
        raise CheckpointError("GPT-1 checkpoints have biases everywhere; a GPTConfig(bias=False) model has none")
    if config.d_ff not in (None, 4 * config.d_model):
        raise CheckpointError(
            f"GPT-1 checkpoints have a feed-forward size of 4 * d_model = {4 * config.d_model}, not d_ff={config.d_ff}"
        )
    hf = FIELDS.to_hf(config)
    hf.update(embd_pdrop=config.dropout, attn_pdrop=config.dropout)
    return hf


def names(config: GPTConfig) -> list[Rename]:
    """The name table (no final LayerNorm; the LM head is the token embedding: tied, not in the table)."""
    table = [Rename("embedding.token.weight", "tokens_embed.weight")]
    table.append(Rename("embedding.position.weight", "positions_embed.weight"))
    for i in range(config.n_layers):
        table += gpt2.layer_names(i)
    return table


CONVERTER = dataclasses.replace(
    gpt2.CONVERTER,  # the same model class, prefix and head
    model_type=MODEL_TYPE,
    config_from_hf=config_from_hf,
    config_to_hf=config_to_hf,
    names=names,
    matches=lambda config: not config.norm_first,
    architecture=lambda config: "OpenAIGPTLMHeadModel",
    buffers=r"position_ids|h\.\d+\.attn\.bias",
    tied=(Tied(("tokens_embed.weight", "lm_head.weight"), note=gpt2.TIED_HEAD),),
)
