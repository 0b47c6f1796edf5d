"""The one check of a model's token inputs, shared by every model: (B, T) integer ids inside the vocabulary and an
attention mask of the matching shape, so a mistake is one ValueError naming it instead of an IndexError deep in an
embedding or a broadcast error in attention."""

from __future__ import annotations

import torch
from torch import Tensor


def check_token_ids(
    input_ids: Tensor,
    vocab_size: int,
    attention_mask: Tensor | None = None,
    *,
    past: int = 0,
    name: str = "input_ids",
) -> None:
    """A ValueError unless ``input_ids`` is (B, T) integer ids in 0 .. vocab_size - 1 and ``attention_mask``, when
    given, is (B, past + T) (``past``: positions already in a KV cache).

    Call it once per forward, before the first layer. The shape checks cost nothing; the range check is one pass over
    the ids (one device sync), skipped while torch.compile traces and on the later steps of a cached decode
    (``past > 0``), whose ids the model sampled from its own vocabulary: the prompt is checked on the first step.
    """
    if input_ids.dim() != 2:
        fix = f": add the batch dimension, e.g. {name}[None]" if input_ids.dim() == 1 else ""
        raise ValueError(f"{name} must be (B, T) token ids, got shape {tuple(input_ids.shape)}{fix}")
    if input_ids.is_floating_point() or input_ids.dtype == torch.bool:
        raise ValueError(f"{name} must be integer token ids, got {input_ids.dtype}")
    if attention_mask is not None:
        expected = (input_ids.size(0), past + input_ids.size(1))
        if tuple(attention_mask.shape) != expected:
            cached = f" ({past} cached + {input_ids.size(1)} new positions)" if past else ""
            raise ValueError(
                f"attention_mask {tuple(attention_mask.shape)} must have the shape of {name}: {expected}{cached}"
            )
    if past or not input_ids.numel() or torch.compiler.is_compiling():
        return
    lo, hi = (int(v) for v in torch.aminmax(input_ids))
    if lo < 0 or hi >= vocab_size:
        row, col = (((input_ids < 0) | (input_ids >= vocab_size)).nonzero()[0]).tolist()  # the first bad position
        raise ValueError(
            f"token id {int(input_ids[row, col])} at {name}[{row}, {col}] is outside the model's vocabulary of "
            f"{vocab_size} (ids 0..{vocab_size - 1}): was the input encoded with this model's tokenizer?"
        )


def shift_right(labels: Tensor, start_id: int, pad_id: int, ignore_index: int = -100) -> Tensor:
    """The decoder's inputs for teacher forcing: labels (B, T) -> (B, T) = [start_id, labels[:, :-1]].

    Position t reads the target tokens before t and is scored on ``labels[:, t]``; labels hidden from the loss
    (``ignore_index``, e.g. padding) become ``pad_id``, a token the decoder can read. (transformers'
    ``shift_tokens_right``; BART starts with its end-of-sequence token ``</s>``, T5 with its padding token.)
    """
    if labels.dim() != 2:
        raise ValueError(f"labels must be (B, T) token ids, got shape {tuple(labels.shape)}")
    shifted = labels.new_full(labels.shape, start_id)
    shifted[:, 1:] = labels[:, :-1]
    return shifted.masked_fill(shifted == ignore_index, pad_id)
