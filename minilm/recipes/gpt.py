"""GPT with causal language modelling (Radford et al. 2018): ``python -m minilm.train --model gpt --objective clm``."""

from __future__ import annotations

from minilm.models.gpt import GPT, GPT_PRESETS, GPTConfig
from minilm.objectives.causal_lm import causal_lm_loss_from_states
from minilm.recipes.language_model import lm_blocks, predicted_tokens
from minilm.train.registry import ModelEntry, ObjectiveEntry, register_model, register_objective
from minilm.train.trainer import LossOutput

GPT_SIZES = {
    "tiny": dict(n_layers=4, n_heads=4, d_model=256, max_len=256, dropout=0.0),  # ~6M with an 8k vocabulary
    "small": dict(n_layers=6, n_heads=6, d_model=384, max_len=512, dropout=0.1),  # ~14M with an 8k vocabulary
    **GPT_PRESETS,
}


def clm_loss(model, block) -> LossOutput:
    """block (B, seq_len + 1): read block[:, :-1], predict block[:, 1:]; the mean over the B * seq_len predictions.

    The LM head and the loss run fused (the (B, T, V) logits never exist): the same loss as
    ``causal_lm_loss(model(block[:, :-1]), block)``, faster and in less memory.
    """
    hidden = model.features(block[:, :-1]).last_hidden_state  # (B, T, C)
    return LossOutput(causal_lm_loss_from_states(hidden, model.lm_head, block), n_tokens=predicted_tokens(block))


def clm_counts(block) -> dict[str, int]:
    return {"loss": predicted_tokens(block)}


register_model(
    ModelEntry(
        "gpt",
        GPTConfig,
        GPT,
        kind="decoder",
        sizes=GPT_SIZES,
        tokenizer_family="gpt2",
        input_format="gpt",
        causal_lm=True,  # fine-tuning's auxiliary LM loss (lm_weight) applies
    )
)
register_objective(
    ObjectiveEntry(
        "clm",
        models=("gpt",),
        prepare=lm_blocks,
        loss=clm_loss,
        counts=clm_counts,
        perplexity=True,
        description="causal language modelling: predict each token from the ones before it",
    )
)
