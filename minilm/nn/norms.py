"""Normalisation layers: LayerNorm (torch's) and RMSNorm (written out), and a factory choosing between them.

LayerNorm (Ba et al. 2016):   LN(x)  = (x - mean(x)) / sqrt(var(x) + eps) * g + b   (over the last dim)
RMSNorm (Zhang & Sennrich 2019, used by T5): RMS(x) = x / sqrt(mean(x^2) + eps) * g   (no centring, no bias)
"""

from __future__ import annotations

import torch
from torch import Tensor, nn


class RMSNorm(nn.Module):
    """x / sqrt(mean(x^2) + eps) * g over the last dim; the statistic is computed in float32, as T5 does."""

    def __init__(self, d: int, eps: float = 1e-6) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d))  # g

    def forward(self, x: Tensor) -> Tensor:
        mean_square = x.float().pow(2).mean(dim=-1, keepdim=True)  # (..., 1)
        return (x.float() * torch.rsqrt(mean_square + self.eps)).type_as(x) * self.weight


def make_norm(kind: str, d: int, eps: float = 1e-5, bias: bool = True) -> nn.Module:
    """``"layernorm"`` (``torch.nn.LayerNorm``, with or without b) or ``"rmsnorm"`` (never has a bias)."""
    if kind == "layernorm":
        return nn.LayerNorm(d, eps=eps, bias=bias)
    if kind == "rmsnorm":
        return RMSNorm(d, eps=eps)
    raise ValueError(f"unknown norm {kind!r}; expected 'layernorm' or 'rmsnorm'")
