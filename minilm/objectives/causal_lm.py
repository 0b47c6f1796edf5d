"""Causal language modelling (GPT): predict every token from the tokens before it.

    L(θ) = -1/N Σ_t log P_θ(x_t | x_<t)          (Radford et al. 2018, eq. 1, averaged over the N predictions)

A training example is a block of ``seq_len + 1`` consecutive token ids: the model reads ids[:-1] and is scored on
ids[1:], so one block yields ``seq_len`` predictions.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from minilm.nn.linear_cross_entropy import linear_cross_entropy
from minilm.objectives.labels import IGNORE_INDEX


def causal_lm_loss(logits: torch.Tensor, block: torch.Tensor, ignore_index: int = IGNORE_INDEX) -> torch.Tensor:
    """Mean next-token cross-entropy: logits (B, T, V) for inputs block[:, :-1], targets block[:, 1:] (B, T)."""
    targets = block[:, 1:]  # (B, T)
    return F.cross_entropy(logits.float().flatten(0, 1), targets.flatten(), ignore_index=ignore_index)


def causal_lm_loss_from_states(
    hidden: torch.Tensor, lm_head: nn.Linear, block: torch.Tensor, ignore_index: int = IGNORE_INDEX
) -> torch.Tensor:
    """``causal_lm_loss(lm_head(hidden), block)`` without the (B, T, V) logits: hidden (B, T, C) are the final
    states for inputs block[:, :-1]; the LM head and the loss run fused, in chunks (training's way)."""
    targets = block[:, 1:]  # (B, T)
    return linear_cross_entropy(
        hidden.flatten(0, 1), lm_head.weight, lm_head.bias, targets.flatten(), ignore_index=ignore_index
    )


def language_model_blocks(ids: torch.Tensor, seq_len: int) -> torch.Tensor:
    """Cut a 1-D token stream into non-overlapping training blocks (n, seq_len + 1).

    Consecutive blocks share one token (block i's last target is block i+1's first input), so no prediction is
    lost at the seams; the tail that does not fill a block is dropped.
    """
    n = (ids.numel() - 1) // seq_len
    if n < 1:
        raise ValueError(f"{ids.numel()} tokens are fewer than one block of seq_len + 1 = {seq_len + 1}")
    index = torch.arange(seq_len + 1)[None, :] + seq_len * torch.arange(n)[:, None]  # (n, seq_len + 1)
    return ids[index]
