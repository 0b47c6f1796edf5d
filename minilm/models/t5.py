"""T5 (Raffel et al. 2020): "Exploring the Limits of Transfer Learning with a Unified Text-to-Text Transformer",
composed from :mod:`minilm.nn`. "Our encoder-decoder Transformer implementation closely follows its originally-proposed
form" (§2.1), with three changes: "we use a simplified version of layer normalization where the activations are only
rescaled and no additive bias is applied. After layer normalization, a residual skip connection adds each
subcomponent's input to its output"; and "we use a simplified form of position embeddings where each 'embedding' is
simply a scalar that is added to the corresponding logit used for computing the attention weights".

    ids     ──► shared token table, dropout ──► N × EncoderBlock (pre-norm RMSNorm, self-attention + bias_enc) ──►
                final RMSNorm ──► memory
    shifted ──► shared token table, dropout ──► N × DecoderBlock (causal self-attention + bias_dec,
                cross-attention to memory, feed-forward) ──► final RMSNorm ──► hidden
    hidden ──► [× d_model^-0.5, v1.0] Linear (tied to the token table in v1.0, its own in v1.1) ──► vocabulary logits

    bias_enc / bias_dec: :class:`minilm.nn.RelativePositionBias` (32 log-spaced buckets up to offset 128, one scalar
    per head and bucket), bidirectional in the encoder and causal in the decoder, computed once per stack and added
    to every layer's self-attention scores; cross-attention has none.

No 1/sqrt(d_k) in attention (``attention_scale=1.0``): Mesh TensorFlow folds it into the initialisation of the query
projection, N(0, (d_model · d_kv)^-1/2) (:meth:`T5._init_weights`, as transformers initialises). No biases anywhere.
Feed-forward: ReLU (T5 v1.0) or gated GELU, GEGLU (v1.1, Shazeer 2020; ``gated_ffn=True``, ``activation="gelu_new"``).
v1.0 ties the output projection to the token table and rescales the decoder's output by d_model^-0.5 first (the table
is initialised N(0, 1)); v1.1 has its own output projection and no rescaling (``tie_embeddings=False``,
``scale_output=False``).

The decoder starts from ``<pad>`` (id 0); ``</s>`` (id 1) ends every text. :meth:`T5.generate` (greedy, sampling or
beam search) runs the encoder once and the decoder with a KV cache. :meth:`T5.from_pretrained` /
:meth:`T5.save_pretrained` read and write transformers' ``T5ForConditionalGeneration`` checkpoints, v1.0 and v1.1
(converter: :mod:`minilm.models.hf.t5`).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import torch
from torch import Tensor, nn

from minilm.models.encoder_decoder import EncoderDecoderMixin
from minilm.models.pretrained import PretrainedMixin
from minilm.nn import (
    ACTIVATIONS,
    BlockConfig,
    FeedForward,
    MultiHeadAttention,
    RelativePositionBias,
    RMSNorm,
    TransformerDecoder,
    TransformerEmbedding,
    TransformerEncoder,
    TransformerOutput,
    check_token_ids,
    padding_mask,
)
from minilm.ranges import MODEL_RANGES, check_ranges


@dataclass
class T5Config:
    vocab_size: int = 32128  # SentencePiece's 32,000 pieces with 100 sentinels <extra_id_i>, padded to 32,128
    d_model: int = 512
    d_kv: int = 64  # width of each attention head (n_heads * d_kv need not be d_model)
    d_ff: int = 2048  # feed-forward inner size
    n_encoder_layers: int = 6
    n_decoder_layers: int = 6
    n_heads: int = 8
    num_buckets: int = 32  # relative position buckets ...
    max_distance: int = 128  # ... log-spaced up to this offset, beyond which all offsets share one
    dropout: float = 0.1  # on embeddings, sublayer outputs, attention weights, the feed-forward hidden layer, outputs
    activation: str = "relu"  # v1.0: ReLU; v1.1: "gelu_new" with gated_ffn
    gated_ffn: bool = False  # v1.1's GEGLU: act(x W_gate) * (x W_1)
    tie_embeddings: bool = True  # v1.0: the LM head is the token table; v1.1: a head of its own
    scale_output: bool = True  # v1.0: decoder outputs * d_model^-0.5 before the LM head; v1.1: not
    norm_eps: float = 1e-6
    init_factor: float = 1.0  # scales every initial standard deviation (transformers' initializer_factor)
    max_len: int = 512  # longest source or target accepted (relative positions have no hard limit; T5's 512)
    pad_id: int = 0  # <pad>: hidden from attention; also the decoder's start token
    eos_id: int = 1  # </s>: ends every input and target
    decoder_start_id: int = 0

    def validate(self) -> None:
        self.block().validate()
        if self.activation not in ACTIVATIONS:
            raise ValueError(f"unknown activation {self.activation!r}; expected one of {sorted(ACTIVATIONS)}")
        for name in ("pad_id", "eos_id", "decoder_start_id"):
            if not 0 <= getattr(self, name) < self.vocab_size:
                raise ValueError(f"{name}={getattr(self, name)} is outside the vocabulary of {self.vocab_size}")
        if self.n_encoder_layers < 1 or self.n_decoder_layers < 1:
            raise ValueError("T5 needs at least one encoder and one decoder layer")
        check_ranges(self, MODEL_RANGES)

    def block(self, cross_attention: bool = False) -> BlockConfig:
        return BlockConfig(
            d_model=self.d_model,
            n_heads=self.n_heads,
            head_size=self.d_kv,
            d_ff=self.d_ff,
            dropout=self.dropout,
            attention_dropout=self.dropout,
            activation_dropout=self.dropout,
            activation=self.activation,
            gated_ffn=self.gated_ffn,
            norm="rmsnorm",  # scale only: x / RMS(x) * g
            norm_eps=self.norm_eps,
            norm_first=True,  # x + Sublayer(RMSNorm(x)), a final RMSNorm after each stack
            bias=False,
            attention_scale=1.0,  # no 1/sqrt(d_kv): folded into the query's initialisation
            cross_attention=cross_attention,
        )


# v1.1: GEGLU, its own LM head, no output scaling, no dropout in pretraining
V1_1 = dict(activation="gelu_new", gated_ffn=True, tie_embeddings=False, scale_output=False, dropout=0.0)

# name -> T5Config overrides; parameter counts as transformers' T5ForConditionalGeneration counts them
T5_PRESETS = {
    "t5-small": {},  # 60,506,624 (the paper's 60M)
    "t5-base": dict(d_model=768, d_ff=3072, n_encoder_layers=12, n_decoder_layers=12, n_heads=12),  # 222,903,552
    "t5-large": dict(d_model=1024, d_ff=4096, n_encoder_layers=24, n_decoder_layers=24, n_heads=16),  # 737,668,096
    # the paper's two largest: t5-large's depth and width, with far wider feed-forward layers and more, wider heads
    "t5-3b": dict(d_model=1024, d_kv=128, d_ff=16384, n_encoder_layers=24, n_decoder_layers=24, n_heads=32),  # 2.85B
    "t5-11b": dict(d_model=1024, d_kv=128, d_ff=65536, n_encoder_layers=24, n_decoder_layers=24, n_heads=128),  # 11.3B
    "t5-v1_1-small": dict(d_ff=1024, n_encoder_layers=8, n_decoder_layers=8, n_heads=6, **V1_1),  # 76,961,152
    "t5-v1_1-base": dict(d_model=768, d_ff=2048, n_encoder_layers=12, n_decoder_layers=12, n_heads=12, **V1_1),
}


def t5_config(size: str, **overrides) -> T5Config:
    """The :class:`T5Config` of a preset size (``T5_PRESETS``), with fields overridden."""
    if size not in T5_PRESETS:
        raise ValueError(f"unknown T5 size {size!r}; known sizes: {', '.join(T5_PRESETS)}")
    fields = {f.name for f in dataclasses.fields(T5Config)}
    unknown = sorted(set(overrides) - fields)
    if unknown:
        raise ValueError(f"unknown T5Config field(s) {', '.join(unknown)}; fields: {', '.join(sorted(fields))}")
    return T5Config(**{**T5_PRESETS[size], **overrides})


class T5(EncoderDecoderMixin, PretrainedMixin, nn.Module):
    """Encoder–decoder. Submodules: ``embedding`` (one token table, both sides), ``encoder_position_bias``,
    ``decoder_position_bias``, ``encoder``, ``decoder`` (each with its final RMSNorm), ``lm_head`` (tied to the
    token table when ``tie_embeddings``). Teacher forcing, ``features`` (as BART's: T5 itself casts every task as
    text to text, :mod:`minilm.finetune.text_to_text`) and ``generate`` come from
    :class:`~minilm.models.encoder_decoder.EncoderDecoderMixin`."""

    def __init__(self, config: T5Config) -> None:
        super().__init__()
        config.validate()
        self.config = c = config
        self.embedding = TransformerEmbedding(c.vocab_size, c.d_model, position=None, dropout=c.dropout)
        self.encoder_position_bias = RelativePositionBias(c.n_heads, True, c.num_buckets, c.max_distance)
        self.decoder_position_bias = RelativePositionBias(c.n_heads, False, c.num_buckets, c.max_distance)
        self.encoder = TransformerEncoder(c.block(), c.n_encoder_layers, final_norm=True)
        self.decoder = TransformerDecoder(c.block(cross_attention=True), c.n_decoder_layers, final_norm=True)
        self.dropout = nn.Dropout(c.dropout)  # on each stack's output, after its final norm
        self.lm_head = nn.Linear(c.d_model, c.vocab_size, bias=False)
        if c.tie_embeddings:
            self.lm_head.weight = self.embedding.token.weight
        # v1.0's table is N(0, 1): as the output layer its rows would make logits sqrt(d_model) times too large
        self.output_scale = c.d_model**-0.5 if c.scale_output else 1.0
        self.apply(self._init_weights)

    @torch.no_grad()
    def _init_weights(self, module: nn.Module) -> None:
        """Mesh TensorFlow's initialisation, as transformers' ``T5PreTrainedModel`` has it: each weight N(0, σ²) with
        σ = 1/sqrt(fan-in); the query's σ also holds attention's missing 1/sqrt(d_kv)."""
        c, factor = self.config, self.config.init_factor
        if module is self.embedding.token or (module is self.lm_head and not c.tie_embeddings):
            nn.init.normal_(module.weight, std=factor)
        elif isinstance(module, RelativePositionBias):
            nn.init.normal_(module.embedding.weight, std=factor * c.d_model**-0.5)
        elif isinstance(module, MultiHeadAttention):
            nn.init.normal_(module.q_proj.weight, std=factor * (c.d_model * c.d_kv) ** -0.5)
            nn.init.normal_(module.k_proj.weight, std=factor * c.d_model**-0.5)
            nn.init.normal_(module.v_proj.weight, std=factor * c.d_model**-0.5)
            nn.init.normal_(module.out_proj.weight, std=factor * (c.n_heads * c.d_kv) ** -0.5)
        elif isinstance(module, FeedForward):  # fc1 [, gate] (fan-in d_model), fc2 (fan-in d_ff)
            for linear in (module.fc1, module.gate):
                if linear is not None:
                    nn.init.normal_(linear.weight, std=factor * c.d_model**-0.5)
            nn.init.normal_(module.fc2.weight, std=factor * c.d_ff**-0.5)
        elif isinstance(module, RMSNorm):
            nn.init.constant_(module.weight, factor)

    # --- the two stacks -----------------------------------------------------------------------------------------

    def encode(
        self,
        input_ids: Tensor,
        attention_mask: Tensor | None = None,
        output_hidden_states: bool = False,
        output_attentions: bool = False,
    ) -> TransformerOutput:
        """Source ids (B, S) -> the encoder's TransformerOutput; ``last_hidden_state`` (B, S, C) is the memory the
        decoder reads. ``attention_mask`` (B, S) 0/1 marks padding (default: no padding)."""
        check_token_ids(input_ids, self.config.vocab_size, attention_mask)
        self._check_length(input_ids.size(1), "source")
        S = input_ids.size(1)
        out = self.encoder(
            self.embedding(input_ids),  # (B, S, C)
            mask=padding_mask(attention_mask) if attention_mask is not None else None,  # (B, 1, 1, S)
            bias=self.encoder_position_bias(S, S),  # (1, nh, S, S), shared by every layer
            output_hidden_states=output_hidden_states,
            output_attentions=output_attentions,
        )
        out.last_hidden_state = self.dropout(out.last_hidden_state)
        return out

    def decode(
        self,
        decoder_input_ids: Tensor,
        memory: Tensor,
        attention_mask: Tensor | None = None,
        decoder_attention_mask: Tensor | None = None,
        cache=None,
        output_hidden_states: bool = False,
        output_attentions: bool = False,
    ) -> TransformerOutput:
        """Decoder ids (B, T) (with ``cache``: only the new ones) reading ``memory`` (B, S, C) -> the decoder's
        TransformerOutput, ``last_hidden_state`` (B, T, C).

        ``attention_mask`` (B, S): the source's padding, hidden from cross-attention. ``decoder_attention_mask``
        (B, T_total): the decoder inputs' padding, on top of the causal mask. ``cache``: from :meth:`new_cache`,
        updated; the position bias then covers the new queries against every key so far.
        """
        past = len(cache[0].self_attn) if cache is not None else 0
        check_token_ids(decoder_input_ids, self.config.vocab_size, decoder_attention_mask, past=past)
        T = decoder_input_ids.size(1)
        self._check_length(past + T, "target")
        out = self.decoder(
            self.embedding(decoder_input_ids),  # (B, T, C)
            memory,
            mask=padding_mask(decoder_attention_mask) if decoder_attention_mask is not None else None,
            memory_mask=padding_mask(attention_mask) if attention_mask is not None else None,
            bias=self.decoder_position_bias(T, past + T, past_length=past),  # (1, nh, T, past + T)
            cache=cache,
            output_hidden_states=output_hidden_states,
            output_attentions=output_attentions,
        )
        out.last_hidden_state = self.dropout(out.last_hidden_state)
        return out

    def logits(self, hidden: Tensor) -> Tensor:
        """Decoder states (..., C) -> vocabulary logits (..., V): [× d_model^-0.5 (v1.0)] then the LM head."""
        return self.lm_head(hidden * self.output_scale)

    def output_projection(self, hidden: Tensor) -> tuple[Tensor, Tensor, None]:
        """Decoder states (..., C) -> (them rescaled as :meth:`logits` rescales them, the LM head's weight (V, C), no
        bias)."""
        return hidden * self.output_scale, self.lm_head.weight, None
