"""The built-in registrations: GPT with causal language modelling, ELMo with the biLM, BERT and RoBERTa with MLM
(and NSP)."""

from __future__ import annotations

import torch

from minilm.models.bert import BERT_SIZES, ROBERTA_SIZES, Bert, BertConfig, RobertaConfig
from minilm.models.elmo import ELMO_PRESETS, ELMo, ELMoConfig
from minilm.models.gpt import GPT, GPT_PRESETS, GPTConfig
from minilm.objectives.bilm import bilm_loss
from minilm.objectives.causal_lm import causal_lm_loss, language_model_blocks
from minilm.objectives.mlm import DynamicMasking, MaskingConfig, StaticMaskedDataset, masked_positions, mlm_loss
from minilm.objectives.nsp import make_examples, nsp_loss
from minilm.train.config import ConfigError
from minilm.train.registry import ModelEntry, ObjectiveEntry, register_model, register_objective
from minilm.train.trainer import LossOutput

GPT_SIZES = {
    "tiny": dict(n_layers=4, n_heads=4, d_model=256, max_len=256, dropout=0.0),  # ~6M with an 8k vocabulary
    "small": dict(n_layers=6, n_heads=6, d_model=384, max_len=512, dropout=0.1),  # ~14M with an 8k vocabulary
    **GPT_PRESETS,
}


def token_stream(tokenizer, texts: list[str]) -> torch.Tensor:
    """All texts' token ids in one 1-D tensor, each text followed by the end-of-text token."""
    separator = [tokenizer.eos_id] if tokenizer.eos_id is not None else []
    encodings = tokenizer.backend.encode_batch(texts, add_special_tokens=False)
    return torch.tensor([i for e in encodings for i in (*e.ids, *separator)], dtype=torch.long)


def lm_blocks(documents, tokenizer, job, validation: bool = False):
    """The documents as one token stream cut into blocks of seq_len + 1 tokens (language models)."""
    return language_model_blocks(token_stream(tokenizer, [d.text for d in documents]), job.seq_len), None


def clm_loss(model, block) -> LossOutput:
    """block (B, seq_len + 1): read block[:, :-1], predict block[:, 1:]."""
    logits = model(block[:, :-1])  # (B, T, V)
    return LossOutput(causal_lm_loss(logits, block), n_tokens=block[:, 1:].numel())


register_model(ModelEntry("gpt", GPTConfig, GPT, sizes=GPT_SIZES, tokenizer_family="gpt2", input_format="gpt"))
register_objective(
    ObjectiveEntry(
        "clm",
        models=("gpt",),
        prepare=lm_blocks,
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
        prepare=lm_blocks,
        loss=elmo_bilm_loss,
        description="bidirectional LM (ELMo): predict each token from the ones before it and, separately, after it",
    )
)
register_model(ModelEntry("bert", BertConfig, Bert, sizes=BERT_SIZES, tokenizer_family="bert"))
register_model(ModelEntry("roberta", RobertaConfig, Bert, sizes=ROBERTA_SIZES, tokenizer_family="roberta"))


def masked_lm_examples(documents, tokenizer, job, validation: bool = False):
    """Examples in the job's input format, masked at batch time (dynamic) or once for all (static, 10 copies).

    Validation examples are masked once, with a fixed seed, so successive evaluations are comparable.
    """
    try:
        examples = make_examples(job.format, documents, tokenizer, max_tokens=job.seq_len, seed=job.seed)
    except ValueError as err:
        raise ConfigError(str(err)) from None
    masking = MaskingConfig.from_tokenizer(tokenizer, whole_word=job.whole_word)
    if validation or job.masking == "static":
        masked = StaticMaskedDataset(examples, masking, n_duplicates=1 if validation else 10, seed=job.seed)
        return masked, masked.collate
    return examples, DynamicMasking(masking)


def sentence_pair_examples(documents, tokenizer, job, validation: bool = False):
    """As :func:`masked_lm_examples`, in a format with a next-sentence label."""
    if job.format not in ("segment_pair", "sentence_pair"):
        raise ConfigError(
            f"objective mlm+nsp needs sentence pairs: format=segment_pair (BERT's) or sentence_pair, not {job.format!r}"
        )
    return masked_lm_examples(documents, tokenizer, job, validation)


def _masked_lm(model, batch):
    hidden = model.features(batch["input_ids"], batch["attention_mask"], batch["token_type_ids"]).last_hidden_state
    logits = model.mlm_logits(hidden, masked_positions(batch["labels"]))  # (|M|, V): only where masked
    return hidden, mlm_loss(logits, batch["labels"])


def bert_mlm_loss(model, batch) -> LossOutput:
    _, loss = _masked_lm(model, batch)
    return LossOutput(loss, n_tokens=int(batch["attention_mask"].sum()))


def bert_mlm_nsp_loss(model, batch) -> LossOutput:
    """BERT's pretraining loss: the MLM loss plus the next-sentence-prediction loss."""
    hidden, loss = _masked_lm(model, batch)
    loss = loss + nsp_loss(model.nsp_logits(hidden), batch["next_sentence_label"])
    return LossOutput(loss, n_tokens=int(batch["attention_mask"].sum()))


register_objective(
    ObjectiveEntry(
        "mlm",
        models=("bert", "roberta"),
        prepare=masked_lm_examples,
        loss=bert_mlm_loss,
        description="masked LM: predict 15% of the tokens, masked 80/10/10 (format=, masking=, whole_word=)",
        model_settings={"nsp": False},
    )
)
register_objective(
    ObjectiveEntry(
        "mlm+nsp",
        models=("bert",),
        prepare=sentence_pair_examples,
        loss=bert_mlm_nsp_loss,
        description="BERT's MLM + next sentence prediction (needs a pair format: segment_pair or sentence_pair)",
        model_settings={"nsp": True, "pooler": True},
    )
)
