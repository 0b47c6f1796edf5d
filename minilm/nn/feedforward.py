"""The position-wise feed-forward network, plain or gated.

FFN(x) = max(0, x W1 + b1) W2 + b2                     (Vaswani et al. 2017; ``activation`` replaces max(0, .))
FFN_gated(x) = (act(x W_gate) * x W1) W2               (Shazeer 2020, GLU variants: GEGLU in T5 v1.1, SwiGLU)
"""

from __future__ import annotations

import torch.nn.functional as F
from torch import Tensor, nn

ACTIVATIONS = {
    "relu": F.relu,  # max(0, x)
    "gelu": F.gelu,  # x * Phi(x), the exact (erf) form: BERT, BART
    "gelu_new": lambda x: F.gelu(x, approximate="tanh"),  # 0.5x(1 + tanh(sqrt(2/pi)(x + 0.044715x^3))): GPT-2
    "silu": F.silu,  # x * sigmoid(x), a.k.a. swish
}


class FeedForward(nn.Module):
    """Linear ``fc1`` (d_model -> d_ff), activation, dropout, linear ``fc2`` (d_ff -> d_model).

    With ``gated=True`` there is a third linear, ``gate`` (d_model -> d_ff), and the hidden layer is
    act(gate(x)) * fc1(x). ``dropout`` acts on the hidden layer (T5's and BART's "activation dropout").
    """

    def __init__(
        self,
        d_model: int,
        d_ff: int,
        activation: str = "relu",
        dropout: float = 0.0,
        bias: bool = True,
        gated: bool = False,
    ) -> None:
        super().__init__()
        if activation not in ACTIVATIONS:
            raise ValueError(f"unknown activation {activation!r}; expected one of {sorted(ACTIVATIONS)}")
        self.activation = ACTIVATIONS[activation]
        self.fc1 = nn.Linear(d_model, d_ff, bias=bias)
        self.gate = nn.Linear(d_model, d_ff, bias=bias) if gated else None
        self.fc2 = nn.Linear(d_ff, d_model, bias=bias)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: Tensor) -> Tensor:
        """x (B, T, d_model) -> (B, T, d_model)."""
        if self.gate is None:
            h = self.activation(self.fc1(x))  # (B, T, d_ff)
        else:
            h = self.activation(self.gate(x)) * self.fc1(x)  # (B, T, d_ff)
        return self.fc2(self.dropout(h))
