"""The Transformer of "Attention Is All You Need" (Vaswani et al. 2017), composed from :mod:`minilm.nn`.

    source ids ──► Embedding·√d + PE ──► N × EncoderBlock ──────────────┐ memory
    target ids ──► Embedding·√d + PE ──► N × DecoderBlock (masked self-attn, cross-attn) ──► Linear ──► logits

One embedding matrix is shared by source, target and the output projection (the paper's shared BPE vocabulary,
section 3.4). Blocks are post-LN, LayerNorm(x + Sublayer(x)), as in the paper.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import torch
from torch import Tensor, nn

from minilm.nn import (
    BlockConfig,
    TransformerDecoder,
    TransformerEmbedding,
    TransformerEncoder,
    check_token_ids,
    padding_mask,
)


@dataclass
class TransformerConfig:
    vocab_size: int = 37000  # shared source/target vocabulary (WMT'14 En-De BPE in the paper)
    d_model: int = 512  # width of every layer's output
    n_heads: int = 8  # attention heads, each of size d_model / n_heads = 64
    d_ff: int = 2048  # inner size of the position-wise feed-forward network
    n_encoder_layers: int = 6
    n_decoder_layers: int = 6
    dropout: float = 0.1  # residual and embedding dropout (P_drop)
    max_len: int = 512  # longest sequence the position embeddings cover
    positions: str | None = "sinusoidal"  # "sinusoidal" (paper), "learned" (Table 3 row E), None (ablation)
    norm_first: bool = False  # False: post-LN as in the paper; True: pre-LN (more stable when deep)
    pad_id: int = 0  # padding token: never attended to, never a target

    def validate(self) -> None:
        self.block().validate()

    def block(self, cross_attention: bool = False) -> BlockConfig:
        return BlockConfig(
            d_model=self.d_model,
            n_heads=self.n_heads,
            d_ff=self.d_ff,
            dropout=self.dropout,
            activation="relu",
            norm_first=self.norm_first,
            cross_attention=cross_attention,
        )


TRANSFORMER_BASE = TransformerConfig()
TRANSFORMER_BIG = TransformerConfig(d_model=1024, n_heads=16, d_ff=4096, dropout=0.3)


class Transformer(nn.Module):
    """Encoder–decoder Transformer. Submodules: ``embedding``, ``encoder``, ``decoder``, ``lm_head`` (tied)."""

    def __init__(self, config: TransformerConfig) -> None:
        super().__init__()
        self.config = config
        c = config
        self.embedding = TransformerEmbedding(
            c.vocab_size, c.d_model, c.max_len, position=c.positions, dropout=c.dropout, scale_by_sqrt_d=True
        )
        self.encoder = TransformerEncoder(c.block(), c.n_encoder_layers, final_norm=c.norm_first)
        self.decoder = TransformerDecoder(c.block(cross_attention=True), c.n_decoder_layers, final_norm=c.norm_first)
        self.lm_head = nn.Linear(c.d_model, c.vocab_size, bias=False)
        self.lm_head.weight = self.embedding.token.weight  # "we share the same weight matrix" (section 3.4)
        self.apply(self._init_weights)

    def _init_weights(self, module: nn.Module) -> None:
        # tensor2tensor's initialisation: Glorot-uniform matrices; embeddings N(0, d^-1/2), so that after the
        # multiplication by sqrt(d) token vectors have unit scale, like the sinusoids they are added to.
        if module is self.lm_head:
            return  # tied to the embedding, initialised there
        if isinstance(module, nn.Linear):
            nn.init.xavier_uniform_(module.weight)
            if module.bias is not None:
                nn.init.zeros_(module.bias)
        elif isinstance(module, nn.Embedding):
            nn.init.normal_(module.weight, std=self.config.d_model**-0.5)

    def encode(self, src: Tensor, output_attentions: bool = False):
        """src (B, S) -> TransformerOutput with last_hidden_state (B, S, C), the memory the decoder reads."""
        check_token_ids(src, self.config.vocab_size, name="src")
        mask = padding_mask(src != self.config.pad_id)  # (B, 1, 1, S)
        return self.encoder(self.embedding(src), mask=mask, output_attentions=output_attentions)

    def decode(self, tgt: Tensor, memory: Tensor, src: Tensor, cache=None, output_attentions: bool = False):
        """tgt (B, T) target ids so far (only the new ones with a cache) -> (logits (B, T, V), TransformerOutput)."""
        past = len(cache[0].self_attn) if cache is not None else 0
        check_token_ids(tgt, self.config.vocab_size, past=past, name="tgt")
        out = self.decoder(
            self.embedding(tgt, past_length=past),
            memory,
            memory_mask=padding_mask(src != self.config.pad_id),
            cache=cache,
            output_attentions=output_attentions,
        )
        return self.lm_head(out.last_hidden_state), out

    def forward(self, src: Tensor, tgt: Tensor) -> Tensor:
        """Teacher forcing: src (B, S), tgt (B, T) decoder inputs -> next-token logits (B, T, V)."""
        logits, _ = self.decode(tgt, self.encode(src).last_hidden_state, src)
        return logits

    @torch.no_grad()
    def generate(self, src: Tensor, bos_id: int, eos_id: int, max_new_tokens: int) -> Tensor:
        """Greedy decoding with a KV cache: src (B, S) -> (B, ≤ max_new_tokens) ids, padded after each EOS."""
        memory = self.encode(src).last_hidden_state
        cache = self.decoder.new_cache()
        token = torch.full((src.size(0), 1), bos_id, dtype=torch.long, device=src.device)
        finished = torch.zeros(src.size(0), dtype=torch.bool, device=src.device)
        generated = []
        for _ in range(max_new_tokens):
            logits, _ = self.decode(token, memory, src, cache=cache)  # only the newest position is computed
            token = logits[:, -1].argmax(-1, keepdim=True)  # (B, 1)
            token[finished] = self.config.pad_id
            generated.append(token)
            finished |= token.squeeze(1) == eos_id
            if finished.all():
                break
        return torch.cat(generated, dim=1)

    def config_dict(self) -> dict:
        return asdict(self.config)
