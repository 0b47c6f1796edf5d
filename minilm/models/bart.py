"""BART (Lewis et al. 2020): a denoising autoencoder for pretraining sequence-to-sequence models, composed from
:mod:`minilm.nn`. "BART uses a standard Transformer-based neural machine translation architecture which ... can be
seen as generalizing BERT (due to the bidirectional encoder), GPT (with the left-to-right decoder)" (§2, Figure 1).

    corrupted ids ──► shared token + learned position (offset 2), LayerNorm ──► N × EncoderBlock (post-LN) ──┐ memory
    shifted ids   ──► shared token + learned position (offset 2), LayerNorm ──► N × DecoderBlock ─────────────┴──►
                      (causal self-attention, cross-attention to memory, feed-forward; post-LN) ──► hidden
    hidden ──► Linear (tied to the shared token embedding) + final_logits_bias ──► vocabulary logits

The Transformer of :mod:`minilm.models.transformer` with GPT's and BERT's choices: GELU instead of ReLU, learned
positions (each stack its own table, rows 0 and 1 reserved as in fairseq's checkpoints), a LayerNorm over the
embeddings of each stack, weights drawn from N(0, 0.02). One token table serves encoder input, decoder input and
output projection. ``final_logits_bias`` is a buffer of transformers' checkpoints (zero in BART's own, never
trained) that the logits add.

Training reconstructs the original document: the decoder reads it shifted right behind ``</s>`` (its start token,
:func:`minilm.nn.shift_right`) and predicts each token (teacher forcing). The corruptions are in
:mod:`minilm.objectives.denoising`. Fine-tuning for classification feeds the same input to both sides and reads
the decoder's state at the final ``</s>`` (§3.1: :meth:`Bart.features` with ``pooling="last"`` in
:mod:`minilm.heads`, the last real token); for generation the encoder reads the source and the decoder writes the target
(:meth:`Bart.generate`: greedy, sampling or beam search with a KV cache, the encoder run once).

:meth:`Bart.from_pretrained` / :meth:`Bart.save_pretrained` read and write transformers'
``BartForConditionalGeneration`` checkpoints (converter: :mod:`minilm.models.hf.bart`).
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
    TransformerDecoder,
    TransformerEmbedding,
    TransformerEncoder,
    TransformerOutput,
    check_token_ids,
    padding_mask,
)
from minilm.ranges import MODEL_RANGES, check_ranges

POSITION_OFFSET = 2  # fairseq's learned positions start at row 2 (rows 0-1 were reserved for padding); kept


@dataclass
class BartConfig:
    vocab_size: int = 50265  # GPT-2's byte-level BPE, with RoBERTa's special tokens
    max_len: int = 1024  # learned positions of each stack
    n_encoder_layers: int = 12
    n_decoder_layers: int = 12
    n_heads: int = 16  # attention heads of both stacks
    d_model: int = 1024
    d_ff: int = 4096  # feed-forward inner size of both stacks
    dropout: float = 0.1  # on the embeddings and every sublayer's output
    attention_dropout: float = 0.0  # on the attention weights
    activation_dropout: float = 0.0  # on the feed-forward hidden layer
    activation: str = "gelu"
    norm_eps: float = 1e-5
    scale_embedding: bool = False  # token embeddings * sqrt(d_model), as the original Transformer (BART: no)
    init_std: float = 0.02
    pad_id: int = 1  # <pad>: never attended to in the source, its embedding row starts at zero
    bos_id: int = 0  # <s>: a document's first token
    eos_id: int = 2  # </s>: a document's last token, whose decoder state classifies
    decoder_start_id: int = 2  # the decoder's first input: </s>, as fairseq trained it

    def validate(self) -> None:
        self.block().validate()
        if self.activation not in ACTIVATIONS:
            raise ValueError(f"unknown activation {self.activation!r}; expected one of {sorted(ACTIVATIONS)}")
        for name in ("pad_id", "bos_id", "eos_id", "decoder_start_id"):
            if not 0 <= getattr(self, name) < self.vocab_size:
                raise ValueError(f"{name}={getattr(self, name)} is outside the vocabulary of {self.vocab_size}")
        if self.n_encoder_layers < 1 or self.n_decoder_layers < 1:
            raise ValueError("BART needs at least one encoder and one decoder layer")
        check_ranges(self, MODEL_RANGES)

    def block(self, cross_attention: bool = False) -> BlockConfig:
        return BlockConfig(
            d_model=self.d_model,
            n_heads=self.n_heads,
            d_ff=self.d_ff,
            dropout=self.dropout,
            attention_dropout=self.attention_dropout,
            activation_dropout=self.activation_dropout,
            activation=self.activation,
            norm_eps=self.norm_eps,
            norm_first=False,  # post-LN, as BERT: x = LayerNorm(x + Sublayer(x))
            cross_attention=cross_attention,
        )


# name -> BartConfig overrides; parameter counts as transformers' BartForConditionalGeneration counts them
BART_PRESETS = {
    "bart-base": dict(n_encoder_layers=6, n_decoder_layers=6, n_heads=12, d_model=768, d_ff=3072),  # 139,420,416
    "bart-large": {},  # 406,291,456
}


def bart_config(size: str, **overrides) -> BartConfig:
    """The :class:`BartConfig` of a preset size (``BART_PRESETS``), with fields overridden."""
    if size not in BART_PRESETS:
        raise ValueError(f"unknown BART size {size!r}; known sizes: {', '.join(BART_PRESETS)}")
    fields = {f.name for f in dataclasses.fields(BartConfig)}
    unknown = sorted(set(overrides) - fields)
    if unknown:
        raise ValueError(f"unknown BartConfig field(s) {', '.join(unknown)}; fields: {', '.join(sorted(fields))}")
    return BartConfig(**{**BART_PRESETS[size], **overrides})


class Bart(EncoderDecoderMixin, PretrainedMixin, nn.Module):
    """Encoder–decoder. Submodules: ``encoder_embedding``, ``decoder_embedding`` (their ``token`` is one shared
    table), ``encoder``, ``decoder``, ``lm_head`` (tied to the token table); buffer ``final_logits_bias`` (1, V).
    Teacher forcing, ``features`` (the classifier reads the decoder's final ``</s>``, §3.1) and ``generate`` come
    from :class:`~minilm.models.encoder_decoder.EncoderDecoderMixin`."""

    def __init__(self, config: BartConfig) -> None:
        super().__init__()
        config.validate()
        self.config = c = config

        def embedding() -> TransformerEmbedding:
            return TransformerEmbedding(
                c.vocab_size,
                c.d_model,
                c.max_len,
                position="learned",
                norm=True,
                dropout=c.dropout,
                scale_by_sqrt_d=c.scale_embedding,
                padding_idx=c.pad_id,
                position_offset=POSITION_OFFSET,
                norm_eps=c.norm_eps,
            )

        self.encoder_embedding = embedding()
        self.decoder_embedding = embedding()
        self.decoder_embedding.token = self.encoder_embedding.token  # one table for both sides ("shared")
        self.encoder = TransformerEncoder(c.block(), c.n_encoder_layers)
        self.decoder = TransformerDecoder(c.block(cross_attention=True), c.n_decoder_layers)
        self.lm_head = nn.Linear(c.d_model, c.vocab_size, bias=False)
        self.lm_head.weight = self.encoder_embedding.token.weight
        self.register_buffer("final_logits_bias", torch.zeros(1, c.vocab_size))  # (1, V), as checkpoints hold it
        self.apply(self._init_weights)

    def _init_weights(self, module: nn.Module) -> None:
        if isinstance(module, nn.Linear) and module is not self.lm_head:
            nn.init.normal_(module.weight, std=self.config.init_std)
            if module.bias is not None:
                nn.init.zeros_(module.bias)
        elif isinstance(module, nn.Embedding):
            nn.init.normal_(module.weight, std=self.config.init_std)
            if module.padding_idx is not None:
                with torch.no_grad():
                    module.weight[module.padding_idx].zero_()

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
        mask = padding_mask(attention_mask) if attention_mask is not None else None  # (B, 1, 1, S)
        x = self.encoder_embedding(input_ids)  # (B, S, C)
        return self.encoder(
            x, mask=mask, output_hidden_states=output_hidden_states, output_attentions=output_attentions
        )

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
        (B, T_total): the decoder inputs' padding, on top of the causal mask (teacher forcing pads at the end,
        where nothing earlier reads it, so it is rarely needed). ``cache``: from :meth:`new_cache`, updated.
        """
        past = len(cache[0].self_attn) if cache is not None else 0
        check_token_ids(decoder_input_ids, self.config.vocab_size, decoder_attention_mask, past=past)
        self._check_length(past + decoder_input_ids.size(1), "target")
        x = self.decoder_embedding(decoder_input_ids, past_length=past)  # (B, T, C)
        return self.decoder(
            x,
            memory,
            mask=padding_mask(decoder_attention_mask) if decoder_attention_mask is not None else None,
            memory_mask=padding_mask(attention_mask) if attention_mask is not None else None,
            cache=cache,
            output_hidden_states=output_hidden_states,
            output_attentions=output_attentions,
        )

    def logits(self, hidden: Tensor) -> Tensor:
        """Decoder states (..., C) -> vocabulary logits (..., V): the tied projection plus ``final_logits_bias``."""
        return self.lm_head(hidden) + self.final_logits_bias[0]

    def output_projection(self, hidden: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """Decoder states (..., C) -> (them, the tied projection's weight (V, C), ``final_logits_bias`` (V,))."""
        return hidden, self.lm_head.weight, self.final_logits_bias[0]
