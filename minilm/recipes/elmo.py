"""ELMo with the bidirectional LM (Peters et al. 2018): ``python -m minilm.train --model elmo --objective bilm``."""

from __future__ import annotations

from minilm.models.elmo import ELMO_PRESETS, ELMo, ELMoConfig
from minilm.objectives.bilm import bilm_loss_from_states
from minilm.recipes.language_model import lm_blocks, predicted_tokens
from minilm.train.registry import ModelEntry, ObjectiveEntry, register_model, register_objective
from minilm.train.trainer import LossOutput


def elmo_bilm_loss(model, block) -> LossOutput:
    """block (B, seq_len + 1): both directions read all of it, each predicts seq_len of its tokens.

    Parts ``forward`` and ``backward``, each the mean over its direction's predictions; the loss is their mean
    (weights 1/2: both make as many predictions), the mean over all predictions, so exp(loss) stays a perplexity.
    """
    forward_states, backward_states = model.lm_states(block)  # (B, T, d) each; the softmax runs fused with the loss
    out = bilm_loss_from_states(forward_states, backward_states, model.softmax, block)
    parts, weights = {"forward": out.forward, "backward": out.backward}, {"forward": 0.5, "backward": 0.5}
    return LossOutput(out.mean, n_tokens=predicted_tokens(block), parts=parts, weights=weights)


def bilm_counts(block) -> dict[str, int]:
    n = predicted_tokens(block)
    return {"forward": n, "backward": n}


def spell_vocabulary(model: ELMo, tokenizer) -> None:
    """ELMo reads characters: give it the spelling of every token id."""
    model.set_vocabulary([tokenizer.id_to_token(i) for i in range(tokenizer.vocab_size)])


def elmo_hidden_size(config: ELMoConfig) -> int:
    """Each layer's representation is [forward; backward], 2 * projection_dim wide."""
    return 2 * config.projection_dim


register_model(
    ModelEntry(
        "elmo",
        ELMoConfig,
        ELMo,
        kind="decoder",  # two language models, one reading each way; no encoder-decoder split
        sizes=ELMO_PRESETS,
        tokenizer_family="gpt2",
        attach_tokenizer=spell_vocabulary,
        hidden_size=elmo_hidden_size,
    )
)
register_objective(
    ObjectiveEntry(
        "bilm",
        models=("elmo",),
        prepare=lm_blocks,
        loss=elmo_bilm_loss,
        counts=bilm_counts,
        perplexity=True,
        description="bidirectional LM (ELMo): predict each token from the ones before it and, separately, after it",
    )
)
