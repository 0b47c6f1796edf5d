"""GPT: a decoder-only Transformer language model (Radford et al. 2018, 2019), composed from :mod:`minilm.nn`.

    ids ──► token + learned position embedding ──► N × DecoderBlock (pre-LN, causal) ──► LayerNorm ──► Linear ──► logits
                                                                                     (tied to the token embedding)

The GPT-2 layout: pre-LN blocks, a final LayerNorm, GELU (tanh approximation), weights initialised N(0, 0.02) with
the residual projections scaled by 1/sqrt(2 N) ("to account for the accumulation on the residual path").
GPT-1 (``gpt_config("gpt1")``) is the same model with post-LN blocks and no final LayerNorm (``norm_first=False``),
512 positions and a 40,478-token BPE vocabulary: 116.5M parameters, the paper's "117M".

:meth:`GPT.from_pretrained` loads GPT-2 and GPT-1 checkpoints in the Hugging Face layout (config.json +
model.safetensors) and :meth:`GPT.save_pretrained` writes them, so transformers' ``GPT2LMHeadModel`` /
``OpenAIGPTLMHeadModel`` load minilm models too (converters: :mod:`minilm.models.hf.gpt2`, ``.openai_gpt``).
:meth:`GPT.generate` decodes with a KV cache (greedy, temperature, top-k, top-p, stop tokens, left-padded batches)
through :func:`minilm.generation.generate`.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import Tensor, nn

from minilm import generation
from minilm.models.pretrained import PretrainedMixin
from minilm.nn import (
    BlockConfig,
    TransformerDecoder,
    TransformerEmbedding,
    TransformerOutput,
    check_token_ids,
    padding_mask,
)
from minilm.ranges import MODEL_RANGES, check_ranges


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
    norm_first: bool = True  # pre-LN blocks and a final LayerNorm (GPT-2); False: post-LN, no final norm (GPT-1)

    def validate(self) -> None:
        self.block().validate()
        check_ranges(self, MODEL_RANGES)

    def block(self) -> BlockConfig:
        return BlockConfig(
            d_model=self.d_model,
            n_heads=self.n_heads,
            d_ff=self.d_ff or 4 * self.d_model,
            dropout=self.dropout,
            attention_dropout=self.dropout,
            activation="gelu_new",
            norm_eps=self.norm_eps,
            norm_first=self.norm_first,
            bias=self.bias,
        )


GPT_PRESETS = {  # name -> GPTConfig overrides; parameter counts as transformers counts them
    # GPT-1 (Radford et al. 2018): 40,478 BPE tokens, 512 positions, post-LN
    "gpt1": dict(vocab_size=40478, max_len=512, n_layers=12, n_heads=12, d_model=768, norm_first=False),  # 117M
    # GPT-2 (Radford et al. 2019), with the 50,257-token byte-level BPE vocabulary
    "gpt2": dict(n_layers=12, n_heads=12, d_model=768),  # 124M
    "gpt2-medium": dict(n_layers=24, n_heads=16, d_model=1024),  # 355M
    "gpt2-large": dict(n_layers=36, n_heads=20, d_model=1280),  # 774M
    "gpt2-xl": dict(n_layers=48, n_heads=25, d_model=1600),  # 1558M
}


def gpt_config(size: str, **overrides) -> GPTConfig:
    """The :class:`GPTConfig` of a preset size (``GPT_PRESETS``), with fields overridden, e.g. ``dropout=0.0``."""
    if size not in GPT_PRESETS:
        raise ValueError(f"unknown GPT size {size!r}; known sizes: {', '.join(GPT_PRESETS)}")
    fields = {f.name for f in dataclasses.fields(GPTConfig)}
    unknown = sorted(set(overrides) - fields)
    if unknown:
        raise ValueError(f"unknown GPTConfig field(s) {', '.join(unknown)}; fields: {', '.join(sorted(fields))}")
    return GPTConfig(**{**GPT_PRESETS[size], **overrides})


class GPT(PretrainedMixin, nn.Module):
    """Decoder-only causal LM. Submodules: ``embedding``, ``decoder`` (layers, final_norm), ``lm_head`` (tied)."""

    def __init__(self, config: GPTConfig) -> None:
        super().__init__()
        self.config = config
        c = config
        self.embedding = TransformerEmbedding(c.vocab_size, c.d_model, c.max_len, position="learned", dropout=c.dropout)
        self.decoder = TransformerDecoder(c.block(), c.n_layers, final_norm=c.norm_first)
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
        self,
        input_ids: Tensor,
        attention_mask: Tensor | None = None,
        token_type_ids: Tensor | None = None,
        output_hidden_states: bool = False,
        cache=None,
    ) -> TransformerOutput:
        """input_ids (B, T) -> the decoder's TransformerOutput (last_hidden_state (B, T, C)), without the LM head.

        ``attention_mask`` (B, T_total) 0/1 hides padding (left padding for batched prompts); ``cache`` from
        :meth:`new_cache` makes ``input_ids`` only the new positions. ``token_type_ids`` are accepted, as every
        registered model's ``features`` takes them, and ignored: GPT has no segment embeddings (its fine-tuning
        inputs mark the second text with a delimiter token instead).
        """
        past = len(cache[0].self_attn) if cache is not None else 0
        check_token_ids(input_ids, self.config.vocab_size, attention_mask, past=past)
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
        out = self.features(input_ids, attention_mask, output_hidden_states=output_hidden_states, cache=cache)
        logits = self.lm_head(out.last_hidden_state)  # (B, T, V)
        return (logits, out) if output_hidden_states else logits

    def new_cache(self):
        return self.decoder.new_cache()

    @torch.no_grad()
    def resize_token_embeddings(self, vocab_size: int) -> None:
        """Grow the vocabulary to ``vocab_size`` tokens: the old rows are kept, the new ones drawn from N(0, 0.02)
        like a fresh embedding (GPT's fine-tuning adds start, delimiter and extract tokens); the head stays tied."""
        old = self.embedding.token
        if vocab_size < old.num_embeddings:
            raise ValueError(f"cannot shrink the vocabulary from {old.num_embeddings} to {vocab_size} tokens")
        new = nn.Embedding(vocab_size, old.embedding_dim, device=old.weight.device, dtype=old.weight.dtype)
        nn.init.normal_(new.weight, std=0.02)
        new.weight[: old.num_embeddings] = old.weight
        self.embedding.token = new
        self.lm_head.weight = new.weight
        self.config = dataclasses.replace(self.config, vocab_size=vocab_size)

    @torch.no_grad()
    def generate(
        self,
        input_ids: Tensor,
        max_new_tokens: int,
        temperature: float = 1.0,
        top_k: int | None = None,
        generator: torch.Generator | None = None,
        *,
        do_sample: bool = True,
        top_p: float | None = None,
        attention_mask: Tensor | None = None,
        eos_token_id: int | Sequence[int] | None = None,
        pad_token_id: int | None = None,
    ) -> Tensor:
        """Continue input_ids (B, T) by up to ``max_new_tokens`` tokens with a KV cache -> (B, T + generated).

        ``do_sample=False``: greedy (argmax). Otherwise each token is drawn after ``temperature`` (> 0), ``top_k``
        and ``top_p`` (nucleus) filtering, with ``generator`` for reproducible draws. Batched prompts of different
        lengths are padded on the left, with ``attention_mask`` (B, T) 0 on the padding. ``eos_token_id`` (one or
        a list) ends a row, which is then filled with ``pad_token_id`` (default: the stop token) until all rows
        end. See :func:`minilm.generation.generate`.
        """
        cache = self.new_cache()

        def step(new_ids: Tensor, mask: Tensor | None) -> Tensor:
            hidden = self.features(new_ids, mask, cache=cache).last_hidden_state  # (B, T_new, C)
            return self.lm_head(hidden[:, -1])  # (B, V): the LM head at the newest position only

        return generation.generate(
            step,
            input_ids,
            max_new_tokens,
            attention_mask,
            do_sample=do_sample,
            temperature=temperature,
            top_k=top_k,
            top_p=top_p,
            eos_token_id=eos_token_id,
            pad_token_id=pad_token_id,
            generator=generator,
            max_len=self.config.max_len,
        )
