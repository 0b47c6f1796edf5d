"""ELMo's scalar mix: a task-specific weighted sum of a pretrained model's layers (Peters et al. 2018, §3.2).

    ELMo_k = γ Σ_{j=0}^{L} s_j h_{k,j},     s = softmax(w)

h_{k,j} is layer j's representation of token k (layer 0: the token representation), the s_j are softmax-normalised
layer weights and γ scales the whole vector (the paper found it matters for optimisation). Only w and γ are
learned; the layers are frozen features. The paper's variant applies layer normalisation (Ba et al. 2016, without
learned gain or bias) to each layer before weighting; here per position, over the features.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import Tensor, nn


class ScalarMix(nn.Module):
    """``n_layers`` tensors of one shape (..., C) -> γ Σ_j softmax(w)_j h_j, of that shape. Parameters ``weights``
    (w, zeros: an equal mix to start with) and ``gamma`` (γ, 1.0)."""

    def __init__(self, n_layers: int, layer_norm: bool = False, initial_gamma: float = 1.0) -> None:
        super().__init__()
        self.weights = nn.Parameter(torch.zeros(n_layers))  # w: s = softmax(w)
        self.gamma = nn.Parameter(torch.tensor(float(initial_gamma)))  # γ
        self.layer_norm = layer_norm

    def forward(self, layers: Sequence[Tensor]) -> Tensor:
        if len(layers) != self.weights.numel():
            raise ValueError(f"ScalarMix of {self.weights.numel()} layers got {len(layers)}")
        s = torch.softmax(self.weights, dim=0)  # (L + 1,), sums to 1
        if self.layer_norm:
            layers = [F.layer_norm(h, h.shape[-1:]) for h in layers]
        return self.gamma * sum(s_j * h_j for s_j, h_j in zip(s, layers, strict=True))
