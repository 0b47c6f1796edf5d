"""What the encoder–decoder recipes share (BART's denoising, T5's span corruption): the loss of a batch of
(corrupted source, original target) pairs by teacher forcing, and the target tokens it averages over."""

from __future__ import annotations

from minilm.objectives.seq2seq import seq2seq_loss_from_states, target_tokens
from minilm.train.trainer import LossOutput


def teacher_forcing_loss(model, batch) -> LossOutput:
    """-Σ_t log P(y_t | y_<t, x) / |y|: every scored target token, predicted from the source and the target so far
    (``model.seq2seq_states``: the vocabulary projection fused with the loss)."""
    states = model.seq2seq_states(batch["input_ids"], batch["attention_mask"], batch["labels"])
    loss = seq2seq_loss_from_states(*states, batch["labels"])
    return LossOutput(loss, n_tokens=int(batch["attention_mask"].sum()))


def target_counts(batch) -> dict[str, int]:
    return {"loss": target_tokens(batch["labels"])}
