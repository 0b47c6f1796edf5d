"""Sequence-to-sequence training with teacher forcing (BART, T5): the decoder reads the target shifted right and
predicts each target token from the source and the target tokens before it.

    L(θ) = -1/N Σ_t log P_θ(y_t | y_<t, x)          (averaged over the N scored target tokens)

``labels`` (B, T) are the target ids, ``IGNORE_INDEX`` (-100) where nothing is scored (padding); the decoder's inputs
are ``[start, y_0, ..., y_{T-2}]`` (:func:`minilm.nn.shift_right`), so position t is scored on y_t. Denoising
pretraining is this loss with a corrupted document as x and the original as y (:mod:`minilm.objectives.denoising`);
fine-tuning for generation is the same with a task's source and target.

An encoder–decoder model of the registry provides ``seq2seq_states(input_ids, attention_mask, labels)``: the states
its vocabulary projection reads, with that projection's weight and bias, so that the projection and the loss run
fused (:func:`minilm.nn.linear_cross_entropy`) and the (B, T, V) logits never exist.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from minilm.nn.linear_cross_entropy import linear_cross_entropy
from minilm.objectives.labels import IGNORE_INDEX


def seq2seq_loss(logits: torch.Tensor, labels: torch.Tensor, ignore_index: int = IGNORE_INDEX) -> torch.Tensor:
    """Mean cross-entropy of the decoder's logits (B, T, V) against ``labels`` (B, T), skipping ``ignore_index``."""
    if logits.shape[:-1] != labels.shape:
        raise ValueError(f"labels {tuple(labels.shape)} do not match the logits {tuple(logits.shape)}")
    return F.cross_entropy(logits.float().flatten(0, 1), labels.flatten(), ignore_index=ignore_index)


def seq2seq_loss_from_states(
    states: torch.Tensor,
    weight: torch.Tensor,
    bias: torch.Tensor | None,
    labels: torch.Tensor,
    ignore_index: int = IGNORE_INDEX,
) -> torch.Tensor:
    """``seq2seq_loss(states @ weight.T + bias, labels)`` without the (B, T, V) logits: states (B, T, C) are what the
    vocabulary projection (weight (V, C), bias (V,) or None) reads at each decoder position."""
    if states.shape[:-1] != labels.shape:
        raise ValueError(f"labels {tuple(labels.shape)} do not match the decoder states {tuple(states.shape)}")
    return linear_cross_entropy(states.flatten(0, 1), weight, bias, labels.flatten(), ignore_index=ignore_index)


def target_tokens(labels: torch.Tensor, ignore_index: int = IGNORE_INDEX) -> int:
    """The number of scored target tokens in ``labels``: the units the loss averages over."""
    return int((labels != ignore_index).sum())


def pad_seq2seq_batch(examples: list[dict], pad_id: int) -> dict[str, torch.Tensor]:
    """Examples ``{"input_ids": source (S_i,), "labels": target (T_i,)}`` -> a batch: ``input_ids`` (B, S) right-padded
    with ``pad_id``, ``attention_mask`` (B, S), ``labels`` (B, T) right-padded with ``IGNORE_INDEX``. Source and
    target are padded to their own widths (a denoised source is rarely as long as its original)."""
    if not examples:
        raise ValueError("pad_seq2seq_batch needs at least one example")
    sources, targets = [e["input_ids"] for e in examples], [e["labels"] for e in examples]
    input_ids = torch.full((len(examples), max(map(len, sources))), pad_id, dtype=torch.long)
    attention_mask = torch.zeros_like(input_ids)
    labels = torch.full((len(examples), max(map(len, targets))), IGNORE_INDEX, dtype=torch.long)
    for row, (source, target) in enumerate(zip(sources, targets, strict=True)):
        input_ids[row, : len(source)] = source
        attention_mask[row, : len(source)] = 1
        labels[row, : len(target)] = target
    return {"input_ids": input_ids, "attention_mask": attention_mask, "labels": labels}
