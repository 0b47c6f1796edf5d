"""Transformer blocks and stacks, configurable into the layers of every model in the course.

Each sublayer (attention or feed-forward) sits in a residual connection, in one of two arrangements:
    post-LN (Vaswani et al. 2017; BERT, BART):  x = LN(x + Dropout(Sublayer(x)))
    pre-LN  (GPT-2, T5):                        x = x + Dropout(Sublayer(LN(x)))   (the stack ends with a final LN)

Submodule names (stable: checkpoint loaders rely on them)
    EncoderBlock:        self_attn, self_attn_norm, ffn, ffn_norm
    DecoderBlock:        self_attn, self_attn_norm, [cross_attn, cross_attn_norm], ffn, ffn_norm
    TransformerEncoder / TransformerDecoder:  layers.{i}, final_norm (None unless asked for); an encoder
                         sharing whole blocks (ALBERT) holds one per group: layer i runs layers.{block_of[i]}
    inside attention:    q_proj, k_proj, v_proj, out_proj;  inside ffn: fc1, fc2 [, gate]
Each ``*_norm`` belongs to its sublayer: before it in pre-LN, after the residual sum in post-LN.

Masks are bool, True = may attend (see :mod:`minilm.nn.attention`); a padding mask is (B, 1, 1, T).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from torch import Tensor, nn

from .attention import KVCache, MultiHeadAttention, check_heads
from .feedforward import FeedForward
from .norms import make_norm


@dataclass
class BlockConfig:
    d_model: int = 512  # width of the residual stream (embedding size)
    n_heads: int = 8  # attention heads
    head_size: int | None = None  # width of each head; None: d_model // n_heads (T5 sets its d_kv)
    d_ff: int = 2048  # hidden size of the feed-forward network
    dropout: float = 0.1  # on each sublayer's output, before the residual sum
    attention_dropout: float = 0.0  # on the attention weights
    activation_dropout: float = 0.0  # on the feed-forward hidden layer
    activation: str = "relu"  # "relu", "gelu", "gelu_new" (tanh approximation) or "silu"
    gated_ffn: bool = False  # hidden = act(gate(x)) * fc1(x), as in T5 v1.1 (GEGLU) or SwiGLU
    norm: str = "layernorm"  # "layernorm" or "rmsnorm"
    norm_eps: float = 1e-5  # added to the variance (BERT: 1e-12, T5: 1e-6)
    norm_first: bool = False  # True: pre-LN, x + Sublayer(LN(x)); False: post-LN, LN(x + Sublayer(x))
    bias: bool = True  # biases in the linear layers and LayerNorms (T5: none)
    attention_scale: float | None = None  # multiplies Q K^T; None: 1/sqrt(head size); T5: 1.0
    cross_attention: bool = False  # DecoderBlock only: also attend to an encoder's output (BART, T5; not GPT)
    fused_attention: bool = True  # torch's fused attention kernel (the reference one when weights are asked)

    def validate(self) -> None:
        """The checks a model config runs on its blocks before anything is built (heads that split d_model)."""
        check_heads(self.d_model, self.n_heads, self.head_size)


@dataclass
class LayerCache:
    """What one decoder block keeps between decoding steps."""

    self_attn: KVCache = field(default_factory=KVCache)
    cross_attn: KVCache = field(default_factory=KVCache)

    def reorder(self, index: Tensor) -> None:
        """Keep the batch rows ``index`` (B',) of both caches (see :meth:`KVCache.reorder`)."""
        self.self_attn.reorder(index)
        self.cross_attn.reorder(index)


def reorder_cache(cache: list[LayerCache], index: Tensor) -> None:
    """Keep the batch rows ``index`` (B',) of every layer's cache, in place: the ``reorder_fn`` of beam search.

    ``index`` may repeat rows and change the batch size: ``arange(B).repeat_interleave(K)`` expands B sequences
    into K beams each; after a step, ``index[i]`` is the beam that beam i continues. The encoder output and its
    mask, which the decoder reads at every step, need the same ``index_select(0, index)``.
    """
    for layer in cache:
        layer.reorder(index)


@dataclass
class TransformerOutput:
    last_hidden_state: Tensor  # (B, T, C), after the final norm when there is one
    # n_layers + 1 of (B, T, C): the stack's input, then each layer's output (the last one after the final norm)
    hidden_states: tuple[Tensor, ...] | None = None
    attentions: tuple[Tensor, ...] | None = None  # n_layers of (B, nh, T, T_keys): self-attention weights
    cross_attentions: tuple[Tensor, ...] | None = None  # n_layers of (B, nh, T, T_context), decoders only


def _attention(cfg: BlockConfig) -> MultiHeadAttention:
    return MultiHeadAttention(
        cfg.d_model,
        cfg.n_heads,
        dropout=cfg.attention_dropout,
        bias=cfg.bias,
        scale=cfg.attention_scale,
        fused=cfg.fused_attention,
        head_size=cfg.head_size,
    )


def _norm(cfg: BlockConfig) -> nn.Module:
    return make_norm(cfg.norm, cfg.d_model, eps=cfg.norm_eps, bias=cfg.bias)


class _Block(nn.Module):
    """Self-attention and feed-forward sublayers in residual connections; subclasses choose causal/cross."""

    is_causal = False

    def __init__(self, cfg: BlockConfig) -> None:
        super().__init__()
        self.norm_first = cfg.norm_first
        self.self_attn = _attention(cfg)
        self.self_attn_norm = _norm(cfg)
        self.ffn = FeedForward(
            cfg.d_model, cfg.d_ff, cfg.activation, cfg.activation_dropout, bias=cfg.bias, gated=cfg.gated_ffn
        )
        self.ffn_norm = _norm(cfg)
        self.dropout = nn.Dropout(cfg.dropout)

    def _sublayer_input(self, x: Tensor, norm: nn.Module) -> Tensor:
        return norm(x) if self.norm_first else x  # pre-LN normalises the sublayer's input

    def _residual(self, x: Tensor, sublayer_out: Tensor, norm: nn.Module) -> Tensor:
        x = x + self.dropout(sublayer_out)
        return x if self.norm_first else norm(x)  # post-LN normalises the sum

    def _self_attention(
        self, x: Tensor, mask: Tensor | None, bias: Tensor | None, cache: KVCache | None, need_weights: bool
    ) -> tuple[Tensor, Tensor | None]:
        h = self._sublayer_input(x, self.self_attn_norm)
        h = self.self_attn(h, mask=mask, bias=bias, is_causal=self.is_causal, cache=cache, need_weights=need_weights)
        h, weights = h if need_weights else (h, None)
        return self._residual(x, h, self.self_attn_norm), weights

    def _feed_forward(self, x: Tensor) -> Tensor:
        return self._residual(x, self.ffn(self._sublayer_input(x, self.ffn_norm)), self.ffn_norm)


class EncoderBlock(_Block):
    """Bidirectional self-attention + feed-forward (Transformer encoder, BERT)."""

    def forward(
        self, x: Tensor, mask: Tensor | None = None, bias: Tensor | None = None, need_weights: bool = False
    ) -> Tensor | tuple[Tensor, Tensor]:
        """x (B, T, C) -> (B, T, C) [, self-attention weights (B, nh, T, T)]."""
        x, weights = self._self_attention(x, mask, bias, None, need_weights)
        x = self._feed_forward(x)
        return (x, weights) if need_weights else x


class DecoderBlock(_Block):
    """Causal self-attention [+ cross-attention to ``memory``] + feed-forward (GPT; BART/T5 decoders)."""

    is_causal = True

    def __init__(self, cfg: BlockConfig) -> None:
        super().__init__(cfg)
        self.cross_attn = _attention(cfg) if cfg.cross_attention else None
        self.cross_attn_norm = _norm(cfg) if cfg.cross_attention else None

    def forward(
        self,
        x: Tensor,
        memory: Tensor | None = None,
        mask: Tensor | None = None,
        memory_mask: Tensor | None = None,
        bias: Tensor | None = None,
        cache: LayerCache | None = None,
        need_weights: bool = False,
    ) -> Tensor | tuple[Tensor, Tensor, Tensor | None]:
        """x (B, T, C), memory (B, S, C) -> (B, T, C) [, self weights (B, nh, T, Tk), cross weights (B, nh, T, S)].

        ``mask``: self-attention mask over all Tk = cached + T keys, on top of the causal one (e.g. padding).
        ``memory_mask``: cross-attention mask over the S memory positions (the encoder's padding mask).
        ``bias``: additive self-attention bias (T5's relative positions).
        ``cache``: a :class:`LayerCache`, updated in place; with it, x holds only the new positions.
        """
        if (memory is not None) != (self.cross_attn is not None):
            raise ValueError("pass memory exactly when the block has cross-attention (BlockConfig.cross_attention)")
        self_cache, cross_cache = (cache.self_attn, cache.cross_attn) if cache is not None else (None, None)
        x, self_weights = self._self_attention(x, mask, bias, self_cache, need_weights)
        cross_weights = None
        if self.cross_attn is not None:
            h = self._sublayer_input(x, self.cross_attn_norm)
            h = self.cross_attn(h, context=memory, mask=memory_mask, cache=cross_cache, need_weights=need_weights)
            h, cross_weights = h if need_weights else (h, None)
            x = self._residual(x, h, self.cross_attn_norm)
        x = self._feed_forward(x)
        return (x, self_weights, cross_weights) if need_weights else x


class _Stack(nn.Module):
    def __init__(self, block: type[_Block], cfg: BlockConfig, n_layers: int, final_norm: bool) -> None:
        super().__init__()
        self.layers = nn.ModuleList([block(cfg) for _ in range(n_layers)])
        self.final_norm = _norm(cfg) if final_norm else None  # pre-LN stacks need it, post-LN ones don't

    def _output(
        self, x: Tensor, hidden_states: list | None, attentions: list | None, cross_attentions: list | None = None
    ) -> TransformerOutput:
        if self.final_norm is not None:
            x = self.final_norm(x)
        if hidden_states is not None:
            hidden_states[-1] = x  # the last hidden state is the normalised one
        as_tuple = lambda xs: tuple(xs) if xs is not None else None
        return TransformerOutput(x, as_tuple(hidden_states), as_tuple(attentions), as_tuple(cross_attentions))


SHARING = ("none", "all", "attention", "ffn")  # ALBERT's cross-layer parameter sharing (Table 4)


def check_sharing(share: str, n_layers: int, n_groups: int) -> None:
    """A ValueError unless ``share`` is one of :data:`SHARING` and ``n_groups`` divides ``n_layers``."""
    if share not in SHARING:
        raise ValueError(f"unknown layer sharing share={share!r}; choose one of {', '.join(SHARING)}")
    if n_groups < 1 or n_layers % n_groups:
        raise ValueError(
            f"n_groups={n_groups} must divide n_layers={n_layers}: each group is run n_layers / n_groups times"
        )
    if share == "none" and n_groups != 1:
        raise ValueError(f"share='none' gives every layer its own weights; n_groups={n_groups} needs 'all' etc.")


class TransformerEncoder(_Stack):
    """n_layers :class:`EncoderBlock` s [+ a final norm], their parameters optionally shared across layers.

    ``share`` (ALBERT, Lan et al. 2020, §3.1 "Cross-layer parameter sharing"; Table 4's four settings):
        "none"       every layer its own block (BERT)
        "all"        the layers of a group run one block: ``layers`` holds n_groups blocks (ALBERT's default, one
                     group: the same block applied n_layers times, as in Hugging Face's ``albert_layer_groups``)
        "attention"  every layer its own block, but the self-attention (with its norm) is the group's first one
        "ffn"        the same with the feed-forward sublayer
    Layer i belongs to group i * n_groups // n_layers. Shared sublayers are one module under several names (like
    tied weights): ``parameters()`` counts them once, the state dict lists every name.
    """

    def __init__(
        self, cfg: BlockConfig, n_layers: int, final_norm: bool = False, share: str = "none", n_groups: int = 1
    ) -> None:
        check_sharing(share, n_layers, n_groups)
        super().__init__(EncoderBlock, cfg, n_groups if share == "all" else n_layers, final_norm)
        self.n_layers, self.share, self.n_groups = n_layers, share, n_groups
        group = [i * n_groups // n_layers for i in range(n_layers)]
        self.block_of = group if share == "all" else list(range(n_layers))  # layer i runs layers[block_of[i]]
        shared = {"attention": ("self_attn", "self_attn_norm"), "ffn": ("ffn", "ffn_norm")}.get(share, ())
        for i, block in enumerate(self.layers):
            first = self.layers[group[i] * (n_layers // n_groups)]  # the group's first layer owns the sublayer
            for name in shared:
                setattr(block, name, getattr(first, name))

    def forward(
        self,
        x: Tensor,
        mask: Tensor | None = None,
        bias: Tensor | None = None,
        output_hidden_states: bool = False,
        output_attentions: bool = False,
    ) -> TransformerOutput:
        """x (B, T, C) embeddings; mask e.g. ``padding_mask(attention_mask)``; bias shared by all layers."""
        hidden_states = [x] if output_hidden_states else None
        attentions = [] if output_attentions else None
        for index in self.block_of:
            out = self.layers[index](x, mask=mask, bias=bias, need_weights=output_attentions)
            if output_attentions:
                x, weights = out
                attentions.append(weights)
            else:
                x = out
            if output_hidden_states:
                hidden_states.append(x)
        return self._output(x, hidden_states, attentions)


class TransformerDecoder(_Stack):
    """n_layers :class:`DecoderBlock` s [+ a final norm]; with ``cfg.cross_attention`` they attend to ``memory``."""

    def __init__(self, cfg: BlockConfig, n_layers: int, final_norm: bool = False) -> None:
        super().__init__(DecoderBlock, cfg, n_layers, final_norm)

    def new_cache(self) -> list[LayerCache]:
        """An empty KV cache, one :class:`LayerCache` per layer; ``len(cache[0].self_attn)`` = positions so far.

        :func:`reorder_cache` moves its batch rows between steps of beam search.
        """
        return [LayerCache() for _ in self.layers]

    def forward(
        self,
        x: Tensor,
        memory: Tensor | None = None,
        mask: Tensor | None = None,
        memory_mask: Tensor | None = None,
        bias: Tensor | None = None,
        cache: list[LayerCache] | None = None,
        output_hidden_states: bool = False,
        output_attentions: bool = False,
    ) -> TransformerOutput:
        """x (B, T, C) embeddings of the new positions; memory (B, S, C) the encoder output (or None).

        With ``cache`` (from :meth:`new_cache`, updated in place) pass only the positions not yet seen; the
        embeddings then need ``past_length=len(cache[0].self_attn)`` before the call.
        """
        hidden_states = [x] if output_hidden_states else None
        attentions = [] if output_attentions else None
        cross_attentions = [] if output_attentions and memory is not None else None
        for i, layer in enumerate(self.layers):
            out = layer(
                x,
                memory=memory,
                mask=mask,
                memory_mask=memory_mask,
                bias=bias,
                cache=cache[i] if cache is not None else None,
                need_weights=output_attentions,
            )
            if output_attentions:
                x, self_weights, cross_weights = out
                attentions.append(self_weights)
                if cross_attentions is not None:
                    cross_attentions.append(cross_weights)
            else:
                x = out
            if output_hidden_states:
                hidden_states.append(x)
        return self._output(x, hidden_states, attentions, cross_attentions)
