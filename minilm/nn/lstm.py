"""The LSTM layer (Hochreiter & Schmidhuber 1997, with the forget gate of Gers et al. 2000), written out and fast.

For each time step t, with σ the logistic sigmoid and ⊙ the elementwise product:

    i_t = σ(W_ii x_t + b_ii + W_hi h_{t−1} + b_hi)        input gate:  how much of the candidate to write
    f_t = σ(W_if x_t + b_if + W_hf h_{t−1} + b_hf)        forget gate: how much of the old cell to keep
    g_t = tanh(W_ig x_t + b_ig + W_hg h_{t−1} + b_hg)     candidate cell content
    o_t = σ(W_io x_t + b_io + W_ho h_{t−1} + b_ho)        output gate: how much of the cell to show
    c_t = f_t ⊙ c_{t−1} + i_t ⊙ g_t                        the cell: an additive memory
    h_t = o_t ⊙ tanh(c_t)                                  the output (and the recurrent state)

With a projection (LSTMP, Sak et al. 2014; ELMo: 4096 cells projected to 512) the output is h_t = W_hr (o_t ⊙
tanh(c_t)): the recurrence and the next layer see the small h_t, the cell c_t keeps its full size.

The parameters follow ``torch.nn.LSTM``'s layout: ``weight_ih`` (4·cell, input) and ``weight_hh`` (4·cell, out)
stack the rows of the gates in the order i, f, g, o; ``bias_ih`` + ``bias_hh`` (one would do: torch keeps two);
``weight_hr`` (out, cell) only with a projection. :class:`LSTMLayer` runs either :func:`lstm_reference` (the loop
above, for teaching and tests) or ``torch.nn.LSTM`` itself (cuDNN on GPUs, oneDNN/MKL on CPUs) on the same weights.

Padding: sequences are right-padded (real tokens first) with ``lengths`` (B,) real tokens each. A left-to-right
LSTM never lets padding reach the real positions; a right-to-left one must first reverse the real tokens only
(:func:`reverse_padded`), or it would start from the padding.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence


def lstm_reference(
    x: Tensor,
    weight_ih: Tensor,
    weight_hh: Tensor,
    bias_ih: Tensor | None = None,
    bias_hh: Tensor | None = None,
    weight_hr: Tensor | None = None,
    state: tuple[Tensor, Tensor] | None = None,
    lengths: Tensor | None = None,
) -> tuple[Tensor, tuple[Tensor, Tensor]]:
    """The LSTM equations, step by step: x (B, T, input) -> outputs (B, T, out), (h_n (B, out), c_n (B, cell)).

    ``state``: the initial (h_0, c_0), zeros by default. ``lengths`` (B,): positions t ≥ lengths[b] are padding:
    they output zeros and leave the state alone, so (h_n, c_n) are the states after each sequence's last real token
    (what ``torch.nn.LSTM`` gives for packed sequences).
    """
    B, T, _ = x.shape
    cell = weight_ih.size(0) // 4
    out = weight_hh.size(1)  # the recurrent input: the projection's width, or the cell's without one
    h, c = state if state is not None else (x.new_zeros(B, out), x.new_zeros(B, cell))
    input_part = x @ weight_ih.T  # (B, T, 4·cell): every step's input contribution, in one matrix product
    for bias in (bias_ih, bias_hh):  # both biases are constant in time: add them once
        if bias is not None:
            input_part = input_part + bias
    outputs = []
    for t in range(T):
        gates = input_part[:, t] + h @ weight_hh.T  # (B, 4·cell)
        i, f, g, o = gates.chunk(4, dim=-1)  # torch's gate order
        i, f, g, o = torch.sigmoid(i), torch.sigmoid(f), torch.tanh(g), torch.sigmoid(o)
        c_t = f * c + i * g  # c_t = f ⊙ c_{t−1} + i ⊙ g
        h_t = o * torch.tanh(c_t)  # h_t = o ⊙ tanh(c_t)
        if weight_hr is not None:
            h_t = h_t @ weight_hr.T  # LSTMP: h_t = W_hr (o ⊙ tanh(c_t))
        if lengths is not None:  # padding: keep the state, output zeros
            real = (t < lengths).to(x.device)[:, None]  # (B, 1)
            c_t, h_t = torch.where(real, c_t, c), torch.where(real, h_t, h)
            outputs.append(h_t * real)
        else:
            outputs.append(h_t)
        h, c = h_t, c_t
    return torch.stack(outputs, dim=1), (h, c)


def reverse_padded(x: Tensor, lengths: Tensor | None = None) -> Tensor:
    """Reverse each sequence of x (B, T, ...) along time, its first lengths[b] positions only; padding stays put.

    [a b c PAD PAD] -> [c b a PAD PAD]. Its own inverse. Without ``lengths``: ``x.flip(1)``.
    """
    if lengths is None:
        return x.flip(1)
    T = x.size(1)
    t = torch.arange(T, device=x.device)[None, :]  # (1, T)
    lengths = lengths.to(x.device)[:, None]  # (B, 1)
    index = torch.where(t < lengths, lengths - 1 - t, t)  # (B, T): where position t reads from
    index = index.view(*index.shape, *([1] * (x.dim() - 2))).expand_as(x)
    return x.gather(1, index)


class LSTMLayer(nn.Module):
    """One left-to-right LSTM layer [with a projection], batch first, on ``torch.nn.LSTM``'s weights (``.lstm``).

    ``reference=True`` runs :func:`lstm_reference` instead of torch's kernel: same weights, same results, slower.
    """

    def __init__(self, input_size: int, hidden_size: int, proj_size: int = 0, reference: bool = False) -> None:
        super().__init__()
        self.lstm = nn.LSTM(input_size, hidden_size, proj_size=proj_size, batch_first=True)
        self.reference = reference
        self.output_size = proj_size or hidden_size

    def forward(
        self, x: Tensor, lengths: Tensor | None = None, state: tuple[Tensor, Tensor] | None = None
    ) -> tuple[Tensor, tuple[Tensor, Tensor]]:
        """x (B, T, input) -> outputs (B, T, out), (h_n (B, out), c_n (B, cell)); see :func:`lstm_reference`."""
        if self.reference:
            p = self.lstm
            weights = (p.weight_ih_l0, p.weight_hh_l0, p.bias_ih_l0, p.bias_hh_l0)
            weight_hr = p.weight_hr_l0 if p.proj_size > 0 else None
            return lstm_reference(x, *weights, weight_hr, state, lengths)
        hx = (state[0][None], state[1][None]) if state is not None else None  # torch's (layers, B, ·)
        if lengths is None:
            y, (h, c) = self.lstm(x, hx)
        else:  # packing skips the padding, so (h_n, c_n) come from each sequence's last real token
            packed = pack_padded_sequence(x, lengths.cpu(), batch_first=True, enforce_sorted=False)
            y, (h, c) = self.lstm(packed, hx)
            y, _ = pad_packed_sequence(y, batch_first=True, total_length=x.size(1))  # zeros at the padding
        return y, (h[0], c[0])
