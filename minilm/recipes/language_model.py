"""What the language-model recipes share: the corpus as one token stream cut into blocks of ``seq_len + 1`` tokens,
and the number of tokens a block predicts."""

from __future__ import annotations

import torch

from minilm.objectives.causal_lm import language_model_blocks


def token_stream(tokenizer, texts: list[str]) -> torch.Tensor:
    """All texts' token ids in one 1-D tensor, each text followed by the end-of-text token."""
    separator = [tokenizer.eos_id] if tokenizer.eos_id is not None else []
    encodings = tokenizer.backend.encode_batch(texts, add_special_tokens=False)
    return torch.tensor([i for e in encodings for i in (*e.ids, *separator)], dtype=torch.long)


def lm_blocks(documents, tokenizer, job, settings=None, validation: bool = False):
    """The documents as one token stream cut into blocks (n, seq_len + 1); batches stack them (no collate)."""
    return language_model_blocks(token_stream(tokenizer, [d.text for d in documents]), job.seq_len), None


def predicted_tokens(block: torch.Tensor) -> int:
    """The predictions a language model (one direction) makes on blocks (B, seq_len + 1): seq_len per block."""
    return block[:, 1:].numel()
