"""T5's relative position bias (Raffel et al. 2020, §2.1; Shaw et al. 2018 simplified).

T5 has no position embeddings. "Instead of using a fixed embedding for each position, relative position embeddings
produce a different learned embedding according to the offset between the 'key' and 'query' being compared in the
self-attention mechanism. We use a simplified form of position embeddings where each 'embedding' is simply a scalar
that is added to the corresponding logit used for computing the attention weights":

    A = softmax(Q K^T + B),   B[h, i, j] = b_h(bucket(j - i))      (one scalar per head and bucket)

"For efficiency, we also share the position embedding parameters across all layers in our model, though within a
given layer each attention head uses a different learned position embedding. Typically, a fixed number of embeddings
are learned, each corresponding to a range of possible key-query offsets. In this work, we use 32 embeddings for all of
our models with ranges that increase in size logarithmically up to an offset of 128 beyond which we assign all
relative positions to the same embedding."

The buckets (:func:`relative_position_bucket`, Mesh TensorFlow's ``_relative_position_bucket``): half of them
exact offsets 0..max_exact-1, the other half log-spaced up to ``max_distance``; in the bidirectional encoder, half of
the buckets are for keys to the right (j > i), half for the rest; the causal decoder only sees j <= i and uses every
bucket for the past.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn


def relative_position_bucket(
    relative_position: Tensor, bidirectional: bool = True, num_buckets: int = 32, max_distance: int = 128
) -> Tensor:
    """Offsets j - i (any shape, integer) -> bucket ids in [0, num_buckets) (same shape).

    Small offsets |j - i| < max_exact get a bucket each; larger ones share log-spaced buckets, and every offset
    beyond ``max_distance`` the last one. ``bidirectional``: keys after the query (j > i) use the upper half of the
    buckets; otherwise (causal) offsets j > i, never attended to, fall in bucket 0 with the offset 0.
    """
    buckets = torch.zeros_like(relative_position)
    if bidirectional:
        num_buckets //= 2
        buckets += (relative_position > 0).long() * num_buckets  # keys to the right: the upper half
        distance = relative_position.abs()
    else:
        distance = (-relative_position).clamp(min=0)  # how far back the key is; the future counts as 0
    max_exact = num_buckets // 2
    is_small = distance < max_exact
    # log-spaced: distance max_exact -> bucket max_exact, distance max_distance -> bucket num_buckets
    log_ratio = torch.log(distance.float() / max_exact) / math.log(max_distance / max_exact)
    if_large = max_exact + (log_ratio * (num_buckets - max_exact)).long()
    if_large = if_large.clamp(max=num_buckets - 1)  # everything beyond max_distance shares the last bucket
    return buckets + torch.where(is_small, distance, if_large)


class RelativePositionBias(nn.Module):
    """The scalars b_h(bucket) of one stack, shared by all its layers: ``embedding`` (num_buckets, n_heads)."""

    def __init__(self, n_heads: int, bidirectional: bool, num_buckets: int = 32, max_distance: int = 128) -> None:
        super().__init__()
        if num_buckets < 4 or max_distance <= num_buckets // (4 if bidirectional else 2):
            raise ValueError(
                f"num_buckets={num_buckets} and max_distance={max_distance}: need num_buckets >= 4 and max_distance "
                "beyond the exact buckets (T5: 32 and 128)"
            )
        self.bidirectional = bidirectional
        self.num_buckets = num_buckets
        self.max_distance = max_distance
        self.embedding = nn.Embedding(num_buckets, n_heads)

    def buckets(self, q_len: int, k_len: int, past_length: int = 0) -> Tensor:
        """Bucket ids (Tq, Tk) of queries at positions past_length.. and keys at 0..k_len-1."""
        device = self.embedding.weight.device
        query = torch.arange(past_length, past_length + q_len, device=device)[:, None]  # (Tq, 1)
        key = torch.arange(k_len, device=device)[None, :]  # (1, Tk)
        return relative_position_bucket(key - query, self.bidirectional, self.num_buckets, self.max_distance)

    def forward(self, q_len: int, k_len: int, past_length: int = 0) -> Tensor:
        """The additive attention bias B (1, nh, Tq, Tk) for every layer of the stack.

        ``past_length``: positions already in the KV cache when decoding (the new queries come after them).
        """
        bias = self.embedding(self.buckets(q_len, k_len, past_length))  # (Tq, Tk, nh)
        return bias.permute(2, 0, 1).unsqueeze(0)  # (1, nh, Tq, Tk)
