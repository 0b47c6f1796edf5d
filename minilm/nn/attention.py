"""Scaled dot-product attention, its masks, and multi-head attention with a KV cache, head masks and head pruning.

Shapes: B batch, nh heads, hs head size, Tq query positions, Tk key/value positions, C = d_model = nh * hs.

Mask convention (the one of ``torch.nn.functional.scaled_dot_product_attention``)
    ``mask`` is a **bool** tensor broadcastable to (B, nh, Tq, Tk); **True means "may attend"**. This is the
    opposite of ``torch.nn.MultiheadAttention``'s ``key_padding_mask``/``attn_mask`` and of Hugging Face's additive
    masks, where True (or -inf) means "masked out". Combine masks with ``&``.
    ``bias`` is an additive **float** tensor broadcastable to (B, nh, Tq, Tk), added to the scores before the
    softmax: T5's relative position bias, ALiBi. Keep it finite; masking is what ``mask`` is for.
    ``is_causal=True`` adds ``causal_mask(Tq, Tk)``, aligned to the *end* of the keys, so a query block that
    continues a KV cache (Tk = past + Tq) sees every cached key and no future one.

Fully masked rows
    A query whose mask row is all False has nothing to attend to. Its attention weights are all 0 and its output
    is the zero vector (never NaN), and no gradient flows through it. Both functions below behave this way; the
    fused one relies on torch's kernel for it, which the tests check on CPU.

Head masks and pruning (Michel, Levy & Neubig 2019, "Are Sixteen Heads Really Better than One?")
    ``MultiHeadAttention.head_mask`` (nh,) scales each head's output before the heads are concatenated:
    MHAtt(x) = Σ_h ξ_h Att_h(x), with ξ_h ∈ {0, 1} to switch heads off, real-valued to differentiate the loss
    with respect to it (the heads' importance). ``prune_heads`` then removes switched-off heads' weights for good.
    The model-level tools are in :mod:`minilm.analysis.pruning`.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

import torch
import torch.nn.functional as F
from torch import Tensor, nn


def causal_mask(q_len: int, k_len: int, device: torch.device | str | None = None) -> Tensor:
    """(q_len, k_len) bool, True where query i may attend to key j: j <= i + (k_len - q_len).

    The triangle is aligned to the end: the last query sees every key. With k_len == q_len this is the usual
    lower triangle; with a KV cache (k_len = past + q_len) query i sits at absolute position past + i.
    """
    return torch.ones(q_len, k_len, dtype=torch.bool, device=device).tril(diagonal=k_len - q_len)


def padding_mask(attention_mask: Tensor) -> Tensor:
    """(B, T) 0/1 tensor (1 = real token, 0 = padding) -> (B, 1, 1, T) bool, True where a key may be attended."""
    return attention_mask.bool()[:, None, None, :]


def _check_mask(mask: Tensor | None) -> None:
    if mask is not None and mask.dtype != torch.bool:
        raise TypeError(f"mask must be a bool tensor (True = may attend), got {mask.dtype}; pass floats as bias")


def _with_causal(mask: Tensor | None, q_len: int, k_len: int, device: torch.device) -> Tensor:
    causal = causal_mask(q_len, k_len, device=device)  # (Tq, Tk)
    return causal if mask is None else mask & causal


def scaled_dot_product_attention_reference(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    mask: Tensor | None = None,
    bias: Tensor | None = None,
    dropout_p: float = 0.0,
    scale: float | None = None,
    is_causal: bool = False,
) -> tuple[Tensor, Tensor]:
    """Attention(Q, K, V) = softmax(Q K^T / sqrt(d_k) + bias) V, written out step by step.

    q (B, nh, Tq, hs), k and v (B, nh, Tk, hs) -> out (B, nh, Tq, hs), weights (B, nh, Tq, Tk) (the ones used:
    after dropout, if any).
    ``scale=None`` means 1/sqrt(hs); T5 uses ``scale=1.0``. ``dropout_p`` is applied to the weights whenever it
    is > 0 (pass 0.0 in eval mode). See the module docstring for ``mask``, ``bias`` and fully masked rows.
    """
    _check_mask(mask)
    scale = 1.0 / math.sqrt(q.size(-1)) if scale is None else scale
    scores = (q @ k.transpose(-2, -1)) * scale  # (B, nh, Tq, hs) @ (B, nh, hs, Tk) -> (B, nh, Tq, Tk)
    if bias is not None:
        scores = scores + bias
    if is_causal:
        mask = _with_causal(mask, q.size(-2), k.size(-2), q.device)
    if mask is not None:
        # The most negative float stands in for -inf: exp() of it underflows to exactly 0, yet a row with no
        # allowed key stays finite (softmax of all -inf would be NaN). Those rows are zeroed after the softmax.
        scores = scores.masked_fill(~mask, torch.finfo(scores.dtype).min)
    weights = F.softmax(scores, dim=-1)  # (B, nh, Tq, Tk), each row sums to 1
    if mask is not None:
        weights = weights.masked_fill(~mask.any(dim=-1, keepdim=True), 0.0)  # nothing to attend to: attend to nothing
    if dropout_p > 0.0:
        weights = F.dropout(weights, p=dropout_p)
    out = weights @ v  # (B, nh, Tq, Tk) @ (B, nh, Tk, hs) -> (B, nh, Tq, hs)
    return out, weights


def scaled_dot_product_attention(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    mask: Tensor | None = None,
    bias: Tensor | None = None,
    dropout_p: float = 0.0,
    scale: float | None = None,
    is_causal: bool = False,
) -> Tensor:
    """Same arguments and result as :func:`scaled_dot_product_attention_reference`, on torch's fused kernel.

    Returns only ``out`` (B, nh, Tq, hs): the fused kernel never materialises the weights.
    """
    _check_mask(mask)
    q_len, k_len = q.size(-2), k.size(-2)
    if is_causal and q_len == 1:  # one query, the last: it may attend to every key, so the causal mask adds nothing
        is_causal = False
    if is_causal and mask is None and bias is None and q_len == k_len:
        return F.scaled_dot_product_attention(q, k, v, dropout_p=dropout_p, is_causal=True, scale=scale)
    if is_causal:
        mask = _with_causal(mask, q_len, k_len, q.device)  # torch's is_causal aligns to the start, not the end
    attn_mask = mask
    if bias is not None:
        attn_mask = bias if mask is None else torch.where(mask, bias, float("-inf"))  # one additive mask
    return F.scaled_dot_product_attention(q, k, v, attn_mask=attn_mask, dropout_p=dropout_p, scale=scale)


class KVCache:
    """The keys and values one attention layer has already computed, kept between decoding steps.

    Self-attention: each step :meth:`append` s the new positions' k, v and attends to everything so far.
    Cross-attention: the context's k, v are stored on the first step and reused (``is_filled``) afterwards.

    They live in buffers that grow by doubling, so a step writes only its own positions; ``torch.cat`` would copy
    the whole cache at every step, a cost quadratic in the length. ``k`` and ``v`` are views of the filled part.
    Beam search moves whole rows of the batch between steps with :meth:`reorder`.
    """

    def __init__(self) -> None:
        self._k: Tensor | None = None  # (B, nh, capacity, hs); positions from len(self) on are not filled yet
        self._v: Tensor | None = None
        self._length = 0

    @property
    def k(self) -> Tensor | None:
        """The cached keys (B, nh, T_cached, hs), or None before the first append."""
        return None if self._k is None else self._k[:, :, : self._length]

    @property
    def v(self) -> Tensor | None:
        """The cached values (B, nh, T_cached, hs), or None before the first append."""
        return None if self._v is None else self._v[:, :, : self._length]

    @property
    def is_filled(self) -> bool:
        return self._k is not None

    def __len__(self) -> int:
        """Number of cached positions."""
        return self._length

    def append(self, k: Tensor, v: Tensor) -> tuple[Tensor, Tensor]:
        """Add k, v (B, nh, T_new, hs) after the cached ones; return all of them (B, nh, T_cached + T_new, hs)."""
        end = self._length + k.size(-2)
        if torch.is_grad_enabled() and (k.requires_grad or v.requires_grad):
            # Training through the cache: concatenate, as writing into a buffer in place would break autograd.
            self._k = k if self._k is None else torch.cat([self.k, k], dim=-2)
            self._v = v if self._v is None else torch.cat([self.v, v], dim=-2)
        else:
            if self._k is None or end > self._k.size(-2):  # the first fill is exact; later ones double
                capacity = max(end, 2 * self._k.size(-2)) if self._k is not None else end
                self._k, self._v = self._grown(self._k, k, capacity), self._grown(self._v, v, capacity)
            self._k[:, :, self._length : end] = k
            self._v[:, :, self._length : end] = v
        self._length = end
        return self.k, self.v

    def reorder(self, index: Tensor) -> None:
        """Keep the rows ``index`` (B',) of the batch, in that order: rows may repeat and B' may differ from B.

        Beam search expands each sequence into its beams (``arange(B).repeat_interleave(K)``), then after each step
        gives every beam the cache of the beam it continues. One gather of the whole buffer, so the capacity (less
        than twice the filled part) and the doubling go on as before; an empty cache stays empty.
        """
        if index.dim() != 1:
            raise ValueError(f"index must be 1-D (one source row per new row), got shape {tuple(index.shape)}")
        if self._k is None:
            return
        index = index.to(self._k.device)
        self._k, self._v = self._k.index_select(0, index), self._v.index_select(0, index)

    def _grown(self, buffer: Tensor | None, new: Tensor, capacity: int) -> Tensor:
        B, nh, _, hs = new.shape
        grown = new.new_empty(B, nh, capacity, hs)
        if buffer is not None:
            grown[:, :, : self._length] = buffer[:, :, : self._length]
        return grown


def check_heads(d_model: int, n_heads: int, head_size: int | None = None) -> None:
    """A ValueError unless ``n_heads`` splits ``d_model`` into equal heads (it lists the counts that would), or, with
    an explicit ``head_size``, unless both are positive."""
    if head_size is not None:
        if n_heads < 1 or head_size < 1:
            raise ValueError(f"n_heads={n_heads} and head_size={head_size} must both be >= 1")
        return
    if n_heads < 1 or d_model % n_heads != 0:
        divisors = [n for n in range(1, d_model + 1) if d_model % n == 0][:12]
        raise ValueError(
            f"d_model={d_model} is not divisible by n_heads={n_heads}: choose n_heads among "
            f"{', '.join(map(str, divisors))}{', ...' if len(divisors) == 12 else ''} (or another d_model)"
        )


@torch.no_grad()
def _keep_features(linear: nn.Linear, index: Tensor, dim: int) -> None:
    """Keep only the output (``dim=0``: weight rows and bias) or input (``dim=1``: weight columns) features
    ``index`` of ``linear``, in place: the module (and its hooks) stays, its parameters are new, smaller ones."""
    keep = lambda p, d: nn.Parameter(p.index_select(d, index), requires_grad=p.requires_grad)
    linear.weight = keep(linear.weight, dim)
    if dim == 0:
        if linear.bias is not None:
            linear.bias = keep(linear.bias, 0)
        linear.out_features = len(index)
    else:
        linear.in_features = len(index)


class MultiHeadAttention(nn.Module):
    """MultiHead(Q, K, V) = Concat(head_1, ..., head_h) W^O, head_i = Attention(Q W_i^Q, K W_i^K, V W_i^V).

    Self-attention when ``context`` is None, cross-attention (queries from ``x``, keys and values from
    ``context``, of size ``kv_dim``) otherwise. Submodules: ``q_proj``, ``k_proj``, ``v_proj``, ``out_proj``
    (checkpoint loaders rely on these names). ``head_size`` defaults to d_model / n_heads; set it to decouple the
    heads' width from the model's (T5's ``d_kv``: v1.1-small has 6 heads of 64 in a 512-wide model), the
    projections then map d_model to n_heads * head_size and back.

    ``head_mask``: None (every head on, at no cost) or a float tensor (n_heads,), ξ of Michel et al. (2019):
    head h's output is multiplied by ξ_h before the heads are concatenated (with the fused kernel, with
    ``need_weights`` and with a cache alike; the returned weights are the heads' own, unscaled). Give it
    ``requires_grad`` to get ∂L/∂ξ_h. It is a non-persistent buffer: it follows ``.to()`` but stays out of the
    state dict, so checkpoints are the same with or without it.
    ``prune_heads`` removes heads for good; ``kept_heads`` and ``pruned_heads`` are the original indices of the
    heads left and of those removed. A pruned checkpoint loads into a model pruned the same way first.
    """

    def __init__(
        self,
        d_model: int,
        n_heads: int,
        dropout: float = 0.0,
        bias: bool = True,
        scale: float | None = None,
        kv_dim: int | None = None,
        fused: bool = True,
        head_size: int | None = None,
    ) -> None:
        super().__init__()
        check_heads(d_model, n_heads, head_size)
        head_size = d_model // n_heads if head_size is None else head_size
        kv_dim = d_model if kv_dim is None else kv_dim
        inner = n_heads * head_size  # the width of the concatenated heads (d_model unless head_size is set)
        self.n_heads = n_heads
        self.head_size = head_size
        self.dropout = dropout  # on the attention weights
        self.scale = scale  # None: 1/sqrt(head_size)
        self.fused = fused  # torch's fused kernel, unless attention weights are asked for
        self.q_proj = nn.Linear(d_model, inner, bias=bias)
        self.k_proj = nn.Linear(kv_dim, inner, bias=bias)
        self.v_proj = nn.Linear(kv_dim, inner, bias=bias)
        self.out_proj = nn.Linear(inner, d_model, bias=bias)
        self.register_buffer("head_mask", None, persistent=False)  # ξ (n_heads,) or None; see the class docstring
        self.kept_heads = list(range(n_heads))  # original indices of the heads left, in order
        self.pruned_heads: list[int] = []  # original indices of the heads removed, sorted

    def prune_heads(self, heads: Iterable[int]) -> list[int]:
        """Remove ``heads`` for good and return the ones removed by this call (sorted).

        Indices are the **original** ones (those of the unpruned layer, as in ``kept_heads``), so they mean the
        same heads however often the layer was pruned before; heads already pruned are skipped. Head h loses its
        rows of W^Q, W^K, W^V (weights and biases) and its columns of W^O: 4 * d_model * hs + 3 * hs parameters
        (with biases and kv_dim = d_model). The output is what it was with ξ_h = 0 (Michel et al. 2019, §4.3: a
        pruned head saves its time and memory). ``head_mask`` keeps the entries of the heads left. With every head
        pruned, the output is out_proj's bias (zeros without one) at every position.
        """
        heads = [int(h) for h in heads]
        n_original = len(self.kept_heads) + len(self.pruned_heads)
        unknown = [h for h in heads if not 0 <= h < n_original]
        if unknown:
            raise ValueError(
                f"heads {unknown} do not exist: this layer had {n_original} heads, 0..{n_original - 1} "
                "(original indices, whether pruned since or not)"
            )
        removed = sorted(set(heads) & set(self.kept_heads))
        if not removed:
            return []
        device, hs = self.q_proj.weight.device, self.head_size
        keep = [i for i, h in enumerate(self.kept_heads) if h not in removed]  # the heads left, by current position
        keep = torch.tensor(keep, dtype=torch.long, device=device)
        features = (keep[:, None] * hs + torch.arange(hs, device=device)).flatten()  # head i: i*hs .. (i+1)*hs - 1
        for projection in (self.q_proj, self.k_proj, self.v_proj):
            _keep_features(projection, features, dim=0)  # (nh * hs, d) -> (nh' * hs, d)
        _keep_features(self.out_proj, features, dim=1)  # (C, nh * hs) -> (C, nh' * hs)
        if self.head_mask is not None:
            self.head_mask = self.head_mask[keep.to(self.head_mask.device)]
        self.kept_heads = [self.kept_heads[i] for i in keep.tolist()]
        self.pruned_heads = sorted(self.pruned_heads + removed)
        self.n_heads = len(self.kept_heads)
        return removed

    def _mask_heads(self, y: Tensor) -> Tensor:
        """ξ_h Att_h(x): the heads' outputs (B, nh, Tq, hs) times ``head_mask`` (nh,)."""
        if self.head_mask.shape != (self.n_heads,):
            raise ValueError(
                f"head_mask must have one entry per head, shape ({self.n_heads},), got {tuple(self.head_mask.shape)}"
                " (after prune_heads, index the mask with kept_heads)"
            )
        return y * self.head_mask.to(y)[:, None, None]  # (B, nh, Tq, hs) * (nh, 1, 1)

    def _split_heads(self, x: Tensor) -> Tensor:
        B, T, _ = x.shape
        return x.view(B, T, self.n_heads, self.head_size).transpose(1, 2)  # (B, T, nh * hs) -> (B, nh, T, hs)

    def _keys_values(self, source: Tensor) -> tuple[Tensor, Tensor]:
        return self._split_heads(self.k_proj(source)), self._split_heads(self.v_proj(source))

    def forward(
        self,
        x: Tensor,
        context: Tensor | None = None,
        mask: Tensor | None = None,
        bias: Tensor | None = None,
        is_causal: bool = False,
        cache: KVCache | None = None,
        need_weights: bool = False,
    ) -> Tensor | tuple[Tensor, Tensor]:
        """x (B, Tq, C), context (B, Tk, kv_dim) or None -> out (B, Tq, C) [, weights (B, nh, Tq, Tk)].

        ``mask``, ``bias``: see the module docstring; they cover all Tk keys, cached ones included.
        ``is_causal``: add the end-aligned causal mask (self-attention; correct with a cache too).
        ``cache``: self-attention appends this call's k, v to it; cross-attention fills it once from ``context``
        and reuses it afterwards (``context`` is then ignored).
        ``need_weights``: also return the attention weights (computed by the reference implementation).
        """
        B, T, _ = x.shape
        q = self._split_heads(self.q_proj(x))  # (B, nh, Tq, hs)
        if context is None:  # self-attention
            k, v = self._keys_values(x)  # (B, nh, Tq, hs)
            if cache is not None:
                k, v = cache.append(k, v)  # (B, nh, T_cached + Tq, hs)
        elif cache is not None and cache.is_filled:  # cross-attention, later steps
            k, v = cache.k, cache.v
        else:  # cross-attention
            k, v = self._keys_values(context)  # (B, nh, Tk, hs)
            if cache is not None:
                cache.append(k, v)
        if self.n_heads == 0:  # every head pruned: nothing to attend with (the cache still counts the positions)
            y, weights = q, q.new_zeros(B, 0, T, k.size(-2))  # (B, 0, Tq, hs), (B, 0, Tq, Tk)
        else:
            dropout_p = self.dropout if self.training else 0.0
            args = dict(mask=mask, bias=bias, dropout_p=dropout_p, scale=self.scale, is_causal=is_causal)
            if need_weights or not self.fused:
                y, weights = scaled_dot_product_attention_reference(q, k, v, **args)
            else:
                y = scaled_dot_product_attention(q, k, v, **args)
        if self.head_mask is not None:
            y = self._mask_heads(y)
        # concatenate heads: (B, nh, Tq, hs) -> (B, Tq, nh * hs); the width is explicit, as it may be 0
        y = y.transpose(1, 2).contiguous().view(B, T, self.n_heads * self.head_size)
        out = self.out_proj(y)  # with no head left, a product over 0 columns: out_proj's bias (or 0) everywhere
        return (out, weights) if need_weights else out
