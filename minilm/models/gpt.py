"""GPT: a decoder-only Transformer language model (Radford et al. 2018, 2019), composed from :mod:`minilm.nn`.

    ids ──► token + learned position embedding ──► N × DecoderBlock (pre-LN, causal) ──► LayerNorm ──► Linear ──► logits
                                                                                     (tied to the token embedding)

The GPT-2 layout: pre-LN blocks, a final LayerNorm, GELU (tanh approximation), weights initialised N(0, 0.02) with
the residual projections scaled by 1/sqrt(2 N) ("to account for the accumulation on the residual path").
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from minilm.nn import BlockConfig, TransformerDecoder, TransformerEmbedding, TransformerOutput, padding_mask


@dataclass
class GPTConfig:
    vocab_size: int = 50257  # GPT-2's byte-level BPE vocabulary
    max_len: int = 1024  # context length: the number of learned positions
    n_layers: int = 12
    n_heads: int = 12
    d_model: int = 768  # width of the residual stream
    d_ff: int | None = None  # feed-forward inner size; None: 4 * d_model
    dropout: float = 0.1  # on embeddings, residual branches and attention weights
    bias: bool = True  # biases in linear layers and LayerNorms (GPT-2: yes)
    norm_eps: float = 1e-5

    def block(self) -> BlockConfig:
        return BlockConfig(
            d_model=self.d_model,
            n_heads=self.n_heads,
            d_ff=self.d_ff or 4 * self.d_model,
            dropout=self.dropout,
            attention_dropout=self.dropout,
            activation="gelu_new",
            norm_eps=self.norm_eps,
            norm_first=True,
            bias=self.bias,
        )


GPT_PRESETS = {  # name -> GPTConfig overrides (GPT-2 sizes; parameter counts with the 50257-token vocabulary)
    "gpt2": dict(n_layers=12, n_heads=12, d_model=768),  # 124M
    "gpt2-medium": dict(n_layers=24, n_heads=16, d_model=1024),  # 355M
    "gpt2-large": dict(n_layers=36, n_heads=20, d_model=1280),  # 774M
    "gpt2-xl": dict(n_layers=48, n_heads=25, d_model=1600),  # 1558M
}


class GPT(nn.Module):
    """Decoder-only causal LM. Submodules: ``embedding``, ``decoder`` (layers, final_norm), ``lm_head`` (tied)."""

    def __init__(self, config: GPTConfig) -> None:
        super().__init__()
        self.config = config
        c = config
        self.embedding = TransformerEmbedding(c.vocab_size, c.d_model, c.max_len, position="learned", dropout=c.dropout)
        self.decoder = TransformerDecoder(c.block(), c.n_layers, final_norm=True)
        self.lm_head = nn.Linear(c.d_model, c.vocab_size, bias=False)
        self.lm_head.weight = self.embedding.token.weight  # weight tying (Press & Wolf 2017)
        self.apply(self._init_weights)
        for name, p in self.named_parameters():
            if name.endswith(("out_proj.weight", "fc2.weight")):  # projections that write to the residual stream
                nn.init.normal_(p, std=0.02 / math.sqrt(2 * c.n_layers))

    def _init_weights(self, module: nn.Module) -> None:
        if isinstance(module, nn.Linear) and module is not self.lm_head:
            nn.init.normal_(module.weight, std=0.02)
            if module.bias is not None:
                nn.init.zeros_(module.bias)
        elif isinstance(module, nn.Embedding):
            nn.init.normal_(module.weight, std=0.02)

    def features(
        self, input_ids: Tensor, attention_mask: Tensor | None = None, cache=None, output_hidden_states: bool = False
    ) -> TransformerOutput:
        """input_ids (B, T) -> the decoder's TransformerOutput (last_hidden_state (B, T, C)), without the LM head.

        ``attention_mask`` (B, T_total) 0/1 hides padding (left padding for batched prompts); ``cache`` from
        :meth:`new_cache` makes ``input_ids`` only the new positions.
        """
        past = len(cache[0].self_attn) if cache is not None else 0
        if past + input_ids.size(1) > self.config.max_len:
            raise ValueError(
                f"sequence of {past + input_ids.size(1)} tokens is longer than the model's context of "
                f"{self.config.max_len}; truncate the input or use a model with a larger max_len"
            )
        position_ids = None
        if attention_mask is not None:  # positions count real tokens only, so left padding does not shift them
            position_ids = (attention_mask.long().cumsum(-1) - 1).clamp(min=0)[:, past:]
        x = self.embedding(input_ids, position_ids=position_ids, past_length=past)  # (B, T, C)
        mask = padding_mask(attention_mask) if attention_mask is not None else None  # (B, 1, 1, T_total)
        return self.decoder(x, mask=mask, cache=cache, output_hidden_states=output_hidden_states)

    def forward(
        self,
        input_ids: Tensor,
        attention_mask: Tensor | None = None,
        cache=None,
        output_hidden_states: bool = False,
    ):
        """input_ids (B, T) -> next-token logits (B, T, V); with ``output_hidden_states`` also the TransformerOutput."""
        out = self.features(input_ids, attention_mask, cache, output_hidden_states)
        logits = self.lm_head(out.last_hidden_state)  # (B, T, V)
        return (logits, out) if output_hidden_states else logits

    def new_cache(self):
        return self.decoder.new_cache()

    @torch.no_grad()
    def generate(
        self,
        input_ids: Tensor,
        max_new_tokens: int,
        temperature: float = 1.0,
        top_k: int | None = None,
        generator: torch.Generator | None = None,
    ) -> Tensor:
        """Sample ``max_new_tokens`` continuations of input_ids (B, T) with a KV cache -> (B, T + new).

        ``temperature`` 0 means greedy; ``top_k`` keeps the k most likely tokens before sampling.
        """
        if input_ids.size(1) == 0:
            raise ValueError("the prompt is empty: give at least one token (e.g. the end-of-text token)")
        if temperature < 0:
            raise ValueError(f"temperature must be >= 0 (0 = greedy), got {temperature}")
        if input_ids.size(1) + max_new_tokens > self.config.max_len:
            raise ValueError(
                f"prompt of {input_ids.size(1)} tokens + {max_new_tokens} new ones exceeds the context of "
                f"{self.config.max_len}"
            )
        cache, ids, step_input = self.new_cache(), input_ids, input_ids
        for _ in range(max_new_tokens):
            logits = self(step_input, cache=cache)[:, -1]  # (B, V), only the newest position
            if temperature == 0:
                next_id = logits.argmax(-1, keepdim=True)
            else:
                logits = logits / temperature
                if top_k is not None:
                    kth = torch.topk(logits, min(top_k, logits.size(-1))).values[:, -1:]
                    logits = logits.masked_fill(logits < kth, float("-inf"))
                next_id = torch.multinomial(F.softmax(logits, -1), 1, generator=generator)  # (B, 1)
            ids = torch.cat([ids, next_id], dim=1)
            step_input = next_id
        return ids
