"""The built-in registrations: GPT with causal language modelling, ELMo with the biLM, BERT and RoBERTa models."""

from __future__ import annotations

from minilm.models.bert import BERT_SIZES, ROBERTA_SIZES, Bert, BertConfig, RobertaConfig
from minilm.models.elmo import ELMO_PRESETS, ELMo, ELMoConfig
from minilm.models.gpt import GPT, GPT_PRESETS, GPTConfig
from minilm.objectives.bilm import bilm_loss
from minilm.objectives.causal_lm import causal_lm_loss, language_model_blocks
from minilm.train.registry import ModelEntry, ObjectiveEntry, register_model, register_objective
from minilm.train.trainer import LossOutput

GPT_SIZES = {
    "tiny": dict(n_layers=4, n_heads=4, d_model=256, max_len=256, dropout=0.0),  # ~6M with an 8k vocabulary
    "small": dict(n_layers=6, n_heads=6, d_model=384, max_len=512, dropout=0.1),  # ~14M with an 8k vocabulary
    **GPT_PRESETS,
}


def clm_loss(model, block) -> LossOutput:
    """block (B, seq_len + 1): read block[:, :-1], predict block[:, 1:]."""
    logits = model(block[:, :-1])  # (B, T, V)
    return LossOutput(causal_lm_loss(logits, block), n_tokens=block[:, 1:].numel())


register_model(ModelEntry("gpt", GPTConfig, GPT, sizes=GPT_SIZES, tokenizer_family="gpt2"))
register_objective(
    ObjectiveEntry(
        "clm",
        models=("gpt",),
        make_examples=language_model_blocks,
        loss=clm_loss,
        description="causal language modelling: predict each token from the ones before it",
    )
)


def elmo_bilm_loss(model, block) -> LossOutput:
    """block (B, seq_len + 1): both directions read all of it, each predicts seq_len of its tokens."""
    forward_logits, backward_logits = model(block)  # (B, T, V) each
    out = bilm_loss(forward_logits, backward_logits, block)
    # The mean over both directions' predictions (out.loss is their sum), so exp(loss) stays a perplexity.
    return LossOutput(out.mean, n_tokens=block[:, 1:].numel())


def spell_vocabulary(model: ELMo, tokenizer) -> None:
    """ELMo reads characters: give it the spelling of every token id."""
    model.set_vocabulary([tokenizer.id_to_token(i) for i in range(tokenizer.vocab_size)])


register_model(
    ModelEntry("elmo", ELMoConfig, ELMo, sizes=ELMO_PRESETS, tokenizer_family="gpt2", attach_tokenizer=spell_vocabulary)
)
register_objective(
    ObjectiveEntry(
        "bilm",
        models=("elmo",),
        make_examples=language_model_blocks,
        loss=elmo_bilm_loss,
        description="bidirectional LM (ELMo): predict each token from the ones before it and, separately, after it",
    )
)
register_model(ModelEntry("bert", BertConfig, Bert, sizes=BERT_SIZES, tokenizer_family="bert"))
register_model(ModelEntry("roberta", RobertaConfig, Bert, sizes=ROBERTA_SIZES, tokenizer_family="roberta"))
