"""How much each layer changes its input: ALBERT's Figure 1 (Lan et al. 2020, §3.1 "Cross-layer parameter sharing").

    out = model.features(ids, mask, output_hidden_states=True)
    l2, degrees = layer_transitions(out.hidden_states, mask)     # (L,) each: layer l's input -> its output

For every real token and every layer l, the L2 distance ||h_l - h_{l-1}|| and the angle (in degrees) between
h_{l-1} and h_l, averaged over the tokens. The paper plots both per layer for BERT-large and ALBERT-large and finds
that "the transitions from layer to layer are much smoother for ALBERT than for BERT": weight sharing stabilises
the network's parameters. :func:`oscillation` measures how much a curve zigzags.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor


@torch.no_grad()
def layer_transitions(hidden_states: Sequence[Tensor], attention_mask: Tensor | None = None) -> tuple[Tensor, Tensor]:
    """hidden_states: n_layers + 1 of (B, T, C), the embeddings first (``features(output_hidden_states=True)``);
    attention_mask (B, T) 0/1, None for all real -> (l2 (L,), degrees (L,)): per layer, the mean over real tokens of
    ||h_l - h_{l-1}||_2 and of the angle between h_{l-1} and h_l."""
    if len(hidden_states) < 2:
        raise ValueError(f"need the embeddings and at least one layer's output, got {len(hidden_states)} state(s)")
    first = hidden_states[0]
    real = torch.ones(first.shape[:2], dtype=torch.bool) if attention_mask is None else attention_mask.bool()
    if real.shape != first.shape[:2]:
        raise ValueError(f"attention_mask {tuple(real.shape)} must be (B, T) = {tuple(first.shape[:2])}")
    states = torch.stack([h[real] for h in hidden_states]).double()  # (L + 1, N, C): real tokens only
    inputs, outputs = states[:-1], states[1:]  # (L, N, C) each
    l2 = (outputs - inputs).norm(dim=-1)  # (L, N)
    cosine = torch.nn.functional.cosine_similarity(inputs, outputs, dim=-1).clamp(-1.0, 1.0)  # (L, N)
    return l2.mean(1).float(), torch.rad2deg(torch.acos(cosine)).mean(1).float()


def oscillation(per_layer: Tensor) -> float:
    """How much a per-layer curve goes up and down: its total variation minus its net change, relative to its mean.
    0 for a curve that only rises or only falls, however steeply; the same for a curve and for that curve scaled."""
    if per_layer.numel() < 2:
        raise ValueError("a curve needs at least two layers to change between")
    steps = per_layer.diff()
    return float((steps.abs().sum() - steps.sum().abs()) / per_layer.abs().mean())
