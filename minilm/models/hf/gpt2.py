"""GPT-2 checkpoints (``model_type: gpt2``, transformers' ``GPT2LMHeadModel``) <-> :class:`minilm.models.gpt.GPT`.

Names, without the ``transformer.`` prefix (absent in the hub's older files)::

    wte / wpe                 -> embedding.token / embedding.position (wte is also lm_head: tied)
    h.N.ln_1                  -> decoder.layers.N.self_attn_norm
    h.N.attn.c_attn           -> decoder.layers.N.self_attn.{q,k,v}_proj   (one Conv1D, q, k, v side by side)
    h.N.attn.c_proj           -> decoder.layers.N.self_attn.out_proj
    h.N.ln_2                  -> decoder.layers.N.ffn_norm
    h.N.mlp.c_fc / c_proj     -> decoder.layers.N.ffn.fc1 / fc2
    ln_f                      -> decoder.final_norm

``Conv1D`` weights are stored (in, out) and transposed to ``nn.Linear``'s (out, in). Older files carry the causal
masks ``h.N.attn.bias`` / ``masked_bias`` as tensors: derived buffers, dropped.
"""

from __future__ import annotations

from collections.abc import Mapping

from minilm.files import CheckpointError
from minilm.models.gpt import GPT, GPTConfig
from minilm.models.hf.convert import ConfigFields, Converter, Rename, Tied, module

MODEL_TYPE = "gpt2"
TIED_HEAD = "minilm's GPT ties its LM head to the token embedding"
# Fields of GPT-1's and GPT-2's configs that do not change the LM's logits: the dropouts GPTConfig does not tell
# apart, the context length of old configs (n_ctx = n_positions), the DoubleHeadsModel's classification head
IGNORED = frozenset(
    {
        "embd_pdrop",
        "attn_pdrop",
        "n_ctx",
        "summary_type",
        "summary_use_proj",
        "summary_activation",
        "summary_proj_to_labels",
        "summary_first_dropout",
    }
)
FIELDS = ConfigFields(
    # GPT-2 has three dropout rates (embeddings, residual branches, attention weights); GPTConfig has one, taken
    # from resid_pdrop (dropout plays no part in evaluation)
    renamed={
        "vocab_size": "vocab_size",
        "n_positions": "max_len",
        "n_layer": "n_layers",
        "n_head": "n_heads",
        "n_embd": "d_model",
        "n_inner": "d_ff",
        "resid_pdrop": "dropout",
        "layer_norm_epsilon": "norm_eps",
    },
    fixed={
        "model_type": MODEL_TYPE,
        "activation_function": "gelu_new",
        "scale_attn_weights": True,
        "scale_attn_by_inverse_layer_idx": False,
        "add_cross_attention": False,
        "tie_word_embeddings": True,
    },
    ignored=IGNORED | {"reorder_and_upcast_attn"},  # float32 attention: numerics only
)


def config_from_hf(hf: Mapping, source: str = "config.json", strict: bool = True) -> GPTConfig:
    """A transformers ``GPT2Config`` dict -> :class:`GPTConfig`; absent fields take GPT2Config's defaults, which
    GPTConfig shares."""
    return GPTConfig(**FIELDS.from_hf(hf, source, strict))


def config_to_hf(config: GPTConfig) -> dict:
    """:class:`GPTConfig` -> a transformers ``GPT2Config`` dict (every dropout rate is ``config.dropout``; no special
    tokens: pass ``bos_token_id`` / ``eos_token_id`` to ``save_pretrained``, or add them)."""
    if not config.bias:
        raise CheckpointError("GPT-2 checkpoints have biases everywhere; a GPTConfig(bias=False) model has none")
    if not config.norm_first:
        raise CheckpointError(
            "GPT-2 checkpoints are pre-LN; a post-LN (norm_first=False) model is GPT-1's layout: save it as openai-gpt"
        )
    hf = FIELDS.to_hf(config)
    hf.update(embd_pdrop=config.dropout, attn_pdrop=config.dropout, bos_token_id=None, eos_token_id=None)
    return hf


def layer_names(i: int) -> list[Rename]:
    """Block ``i``'s names, shared by GPT-1 (whose ``ln_1`` / ``ln_2`` come after their sublayers, post-LN)."""
    ours, theirs = f"decoder.layers.{i}.", f"h.{i}."
    qkv = tuple(f"{ours}self_attn.{p}" for p in ("q_proj", "k_proj", "v_proj"))
    return [
        *module(f"{ours}self_attn_norm", f"{theirs}ln_1"),
        *module(qkv, f"{theirs}attn.c_attn", conv1d=True),
        *module(f"{ours}self_attn.out_proj", f"{theirs}attn.c_proj", conv1d=True),
        *module(f"{ours}ffn_norm", f"{theirs}ln_2"),
        *module(f"{ours}ffn.fc1", f"{theirs}mlp.c_fc", conv1d=True),
        *module(f"{ours}ffn.fc2", f"{theirs}mlp.c_proj", conv1d=True),
    ]


def names(config: GPTConfig) -> list[Rename]:
    """The name table (the LM head is the token embedding: tied, not in the table)."""
    table = [Rename("embedding.token.weight", "wte.weight"), Rename("embedding.position.weight", "wpe.weight")]
    for i in range(config.n_layers):
        table += layer_names(i)
    return table + module("decoder.final_norm", "ln_f")


CONVERTER = Converter(
    model_type=MODEL_TYPE,
    model=GPT,
    config_class=GPTConfig,
    config_from_hf=config_from_hf,
    config_to_hf=config_to_hf,
    names=names,
    matches=lambda config: config.norm_first,
    architecture=lambda config: "GPT2LMHeadModel",
    prefix="transformer.",
    heads=("lm_head.",),
    buffers=r"h\.\d+\.attn\.(bias|masked_bias)",
    tied=(Tied(("wte.weight", "lm_head.weight"), note=TIED_HEAD),),
)
