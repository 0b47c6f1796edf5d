"""Token, position and segment embeddings.

Position modules take ``position_ids`` (any shape, usually (T,) or (B, T)) and return their vectors
(``position_ids.shape + (d_model,)``); they raise a ``ValueError`` naming the lengths when a position is past
``max_len``. :class:`TransformerEmbedding` sums token + position (+ segment) embeddings. Its submodules are
``token``, ``position`` (None without positions), ``segment`` (None without segments), ``norm`` (None without),
``projection`` (None without).
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn


def sinusoidal_positions(max_len: int, d_model: int) -> Tensor:
    """(max_len, d_model): PE(pos, 2i) = sin(pos / 10000^(2i/d_model)), PE(pos, 2i+1) = cos(same angle)."""
    if d_model % 2 != 0:
        raise ValueError(f"sinusoidal positions need an even d_model, got {d_model}")
    pos = torch.arange(max_len, dtype=torch.float32)[:, None]  # (max_len, 1)
    two_i = torch.arange(0, d_model, 2, dtype=torch.float32)  # (d_model/2,)
    angle = pos / 10000 ** (two_i / d_model)  # (max_len, d_model/2)
    pe = torch.empty(max_len, d_model)
    pe[:, 0::2] = torch.sin(angle)
    pe[:, 1::2] = torch.cos(angle)
    return pe


def _check_positions(position_ids: Tensor, max_len: int, longest: int | None = None) -> None:
    """Refuse positions past the table. ``longest``: the number of positions, when the shapes already say it (the
    default positions): no look at the values, which would wait for a GPU and break a ``torch.compile`` graph."""
    if longest is None:
        if torch.compiler.is_compiling():  # a value-dependent check breaks the graph: the lookup itself fails instead
            return
        longest = int(position_ids.max()) + 1 if position_ids.numel() else 0
    if longest > max_len:
        raise ValueError(f"a sequence of length {longest} is longer than max_len={max_len} positions")


class SinusoidalPositionEmbedding(nn.Module):
    """Fixed sinusoidal positions (Vaswani et al. 2017), held in the buffer ``pe`` (max_len, d_model).

    The buffer is not a parameter (never trained) and not persistent (not saved in the state dict: it is
    recomputed from max_len and d_model).
    """

    def __init__(self, max_len: int, d_model: int) -> None:
        super().__init__()
        self.max_len = max_len
        self.register_buffer("pe", sinusoidal_positions(max_len, d_model), persistent=False)

    def forward(self, position_ids: Tensor, longest: int | None = None) -> Tensor:
        _check_positions(position_ids, self.max_len, longest)
        return self.pe[position_ids]


class LearnedPositionEmbedding(nn.Embedding):
    """A trained vector per position (BERT, GPT). Row ``offset + p`` holds position p.

    ``offset`` reserves the first rows, as RoBERTa and BART checkpoints do (their position table has
    max_len + 2 rows), so those tables load as they are.
    """

    def __init__(self, max_len: int, d_model: int, offset: int = 0) -> None:
        super().__init__(max_len + offset, d_model)
        self.max_len = max_len
        self.offset = offset

    def forward(self, position_ids: Tensor, longest: int | None = None) -> Tensor:
        _check_positions(position_ids, self.max_len, longest)
        return super().forward(position_ids + self.offset)


class TransformerEmbedding(nn.Module):
    """x = token(ids) [* sqrt(d_model)] + position(pos) [+ segment(seg)], then optional LayerNorm, dropout and
    projection.

    ``position``: "learned", "sinusoidal" or None (T5: positions enter through an attention bias instead).
    ``n_segments`` > 0 adds segment (BERT's "token type") embeddings. ``norm`` adds a LayerNorm over the sum
    (BERT, BART's layernorm_embedding). ``scale_by_sqrt_d`` multiplies the token embeddings by sqrt(d_model), as
    in the original Transformer. ``padding_idx`` keeps that token's embedding at zero and out of training.

    ``project_to`` factorizes the embedding as ALBERT does (Lan et al. 2020, §3.1): the vectors are of a small size
    E = ``d_model`` and a Linear(E, H) maps them to the model's width H = ``project_to``, so the V×H table becomes
    V×E + E×H parameters ("O(V × H) to O(V × E + E × H)"), E independent of H.
    """

    def __init__(
        self,
        vocab_size: int,
        d_model: int,
        max_len: int | None = None,
        position: str | None = "learned",
        n_segments: int = 0,
        norm: bool = False,
        dropout: float = 0.0,
        scale_by_sqrt_d: bool = False,
        padding_idx: int | None = None,
        position_offset: int = 0,
        norm_eps: float = 1e-5,
        project_to: int | None = None,
    ) -> None:
        super().__init__()
        if position is not None and max_len is None:
            raise ValueError(f"position={position!r} needs max_len")
        self.token = nn.Embedding(vocab_size, d_model, padding_idx=padding_idx)
        if position == "learned":
            self.position = LearnedPositionEmbedding(max_len, d_model, offset=position_offset)
        elif position == "sinusoidal":
            self.position = SinusoidalPositionEmbedding(max_len, d_model)
        elif position is None:
            self.position = None
        else:
            raise ValueError(f"unknown position {position!r}; expected 'learned', 'sinusoidal' or None")
        self.segment = nn.Embedding(n_segments, d_model) if n_segments > 0 else None
        self.norm = nn.LayerNorm(d_model, eps=norm_eps) if norm else None
        self.dropout = nn.Dropout(dropout)
        self.token_scale = math.sqrt(d_model) if scale_by_sqrt_d else 1.0
        self.projection = nn.Linear(d_model, project_to) if project_to is not None else None

    def forward(
        self,
        input_ids: Tensor,
        segment_ids: Tensor | None = None,
        position_ids: Tensor | None = None,
        past_length: int = 0,
    ) -> Tensor:
        """input_ids (B, T) -> (B, T, d_model), or (B, T, project_to) with a projection.

        ``position_ids`` (B, T) or (T,) default to past_length, ..., past_length + T - 1; pass ``past_length``
        = the number of positions already in the KV cache when decoding. ``segment_ids`` (B, T) default to 0.
        """
        x = self.token(input_ids) * self.token_scale  # (B, T, C)
        if self.position is not None:
            longest = None
            if position_ids is None:
                longest = past_length + input_ids.size(1)
                position_ids = torch.arange(past_length, longest, device=x.device)
            x = x + self.position(position_ids, longest)  # (T, C) or (B, T, C), broadcast over the batch
        if self.segment is not None:
            x = x + (self.segment(segment_ids) if segment_ids is not None else self.segment.weight[0])
        if self.norm is not None:
            x = self.norm(x)
        x = self.dropout(x)
        return self.projection(x) if self.projection is not None else x  # (B, T, E) -> (B, T, H)
