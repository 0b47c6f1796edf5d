"""What every encoder–decoder of the course shares (BART, T5): teacher forcing, the registry's ``features`` and
generation, written once over four methods each model provides in its own way.

A model class mixes in :class:`EncoderDecoderMixin` and defines

    encode(input_ids, attention_mask=None, output_hidden_states=False, output_attentions=False)
        source ids (B, S) -> TransformerOutput, last_hidden_state (B, S, C): the memory, computed once per source
    decode(decoder_input_ids, memory, attention_mask=None, decoder_attention_mask=None, cache=None, ...)
        decoder ids (B, T) (with a cache: only the new ones) reading the memory -> TransformerOutput (B, T, C)
    logits(hidden) -> (..., V)
    output_projection(hidden) -> (states, weight (V, C), bias (V,) or None), with logits = states @ weight.T + bias

and a ``config`` with ``decoder_start_id``, ``pad_id``, ``eos_id`` and ``max_len``, and a ``decoder`` stack (its
``new_cache``). The mixin adds the rest, in the order of d2l's encoder–decoder contract: encode once, then the
decoder takes a state (the memory and, when generating, its KV cache).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor

from minilm import generation
from minilm.nn import TransformerOutput, shift_right


class EncoderDecoderMixin:
    """Teacher forcing (``forward``, ``seq2seq_states``, ``shift_right``), the registry's ``features``, a KV cache
    (``new_cache``) and ``generate`` (greedy, sampling, beam search) for an encoder–decoder (module docstring)."""

    def shift_right(self, labels: Tensor) -> Tensor:
        """Target ids (B, T) (-100 where not scored) -> the decoder's inputs, behind ``decoder_start_id``."""
        return shift_right(labels, self.config.decoder_start_id, self.config.pad_id)

    def forward(
        self,
        input_ids: Tensor,
        attention_mask: Tensor | None = None,
        decoder_input_ids: Tensor | None = None,
        decoder_attention_mask: Tensor | None = None,
    ) -> Tensor:
        """Teacher forcing: source (B, S), decoder inputs (B, T) -> next-token logits (B, T, V).

        Without ``decoder_input_ids`` the decoder reads the source shifted right (what a denoiser reconstructs when
        nothing is corrupted, and transformers' default).
        """
        if decoder_input_ids is None:
            decoder_input_ids = self.shift_right(input_ids)
        memory = self.encode(input_ids, attention_mask).last_hidden_state
        hidden = self.decode(decoder_input_ids, memory, attention_mask, decoder_attention_mask).last_hidden_state
        return self.logits(hidden)

    def seq2seq_states(
        self, input_ids: Tensor, attention_mask: Tensor | None, labels: Tensor
    ) -> tuple[Tensor, Tensor, Tensor | None]:
        """Teacher forcing for training: (the decoder's final states (B, T, C) for ``labels`` (B, T) shifted right,
        as the output projection reads them, its weight (V, C) and bias (V,) or None), for
        :func:`minilm.objectives.seq2seq.seq2seq_loss_from_states` (projection and loss fused)."""
        memory = self.encode(input_ids, attention_mask).last_hidden_state
        hidden = self.decode(self.shift_right(labels), memory, attention_mask).last_hidden_state
        return self.output_projection(hidden)

    def features(
        self,
        input_ids: Tensor,
        attention_mask: Tensor | None = None,
        token_type_ids: Tensor | None = None,
        output_hidden_states: bool = False,
    ) -> TransformerOutput:
        """The registry's contract: the same input to encoder and decoder (shifted right), the decoder's output.

        BART's recipe for classification: "the same input is fed into the encoder and decoder, and the final hidden
        state of the final decoder token is fed into new multi-class linear classifier" (Lewis et al. 2020, §3.1);
        token tasks read every position's state. Position t of the decoder has read tokens < t itself and all of
        them through the encoder, so ``last_hidden_state`` (B, T, C) lines up with ``input_ids``.
        ``token_type_ids`` are ignored (no segments). ``hidden_states``: the decoder's embeddings and layers.
        """
        memory = self.encode(input_ids, attention_mask).last_hidden_state
        return self.decode(
            self.shift_right(input_ids),
            memory,
            attention_mask,
            attention_mask,
            output_hidden_states=output_hidden_states,
        )

    def new_cache(self):
        """An empty KV cache for :meth:`decode`, one :class:`minilm.nn.LayerCache` per decoder layer."""
        return self.decoder.new_cache()

    def _check_length(self, length: int, side: str) -> None:
        if length > self.config.max_len:
            raise ValueError(
                f"the {side} has {length} positions, more than the model's max_len={self.config.max_len}: "
                "give it fewer tokens"
            )

    @torch.no_grad()
    def generate(
        self,
        input_ids: Tensor,
        attention_mask: Tensor | None = None,
        max_new_tokens: int = 20,
        *,
        num_beams: int = 1,
        do_sample: bool = False,
        temperature: float = 1.0,
        top_k: int | None = None,
        top_p: float | None = None,
        length_penalty: float = 1.0,
        early_stopping: bool | str = False,
        no_repeat_ngram_size: int = 0,
        min_new_tokens: int = 0,
        num_return_sequences: int = 1,
        forced_bos_token_id: int | None = None,
        forced_eos_token_id: int | None = None,
        eos_token_id: int | Sequence[int] | None = None,
        generator: torch.Generator | None = None,
    ) -> Tensor:
        """Source ids (B, S) -> generated target ids (B * num_return_sequences, 1 + n), starting with the decoder's
        start token and padded with ``pad_id`` after each row's end-of-sequence token.

        The encoder runs once; the decoder runs one position per step with a KV cache (its cross-attention keys and
        values computed on the first step and reused). ``num_beams`` > 1: :func:`minilm.generation.beam_search`
        (``length_penalty``,
        ``early_stopping``, ``num_return_sequences``); otherwise greedy (``do_sample=False``) or sampling
        (``temperature``, ``top_k``, ``top_p``, ``generator``), :func:`minilm.generation.generate`. Both take
        ``no_repeat_ngram_size``, ``min_new_tokens`` and forced first/last tokens. ``eos_token_id`` defaults to the
        config's.
        """
        c = self.config
        eos = c.eos_id if eos_token_id is None else eos_token_id
        self._check_length(max_new_tokens + 1, "output (max_new_tokens + the start token)")
        state = {"memory": self.encode(input_ids, attention_mask).last_hidden_state, "mask": attention_mask}
        cache = self.new_cache()

        def step(new_ids: Tensor, _decoder_mask: Tensor | None) -> Tensor:
            hidden = self.decode(new_ids, state["memory"], state["mask"], cache=cache).last_hidden_state
            return self.logits(hidden[:, -1])  # (B, V): the newest position only

        def reorder(index: Tensor) -> None:  # beams: keep, repeat or drop rows of everything held per row
            if index.numel() == state["memory"].size(0):  # following parents, which read the same source as the
                for layer in cache:  # child: the memory and the cross-attention keys and values stay as they are
                    layer.self_attn.reorder(index)
                return
            state["memory"] = state["memory"].index_select(0, index)  # expanding each source into its beams
            if state["mask"] is not None:
                state["mask"] = state["mask"].index_select(0, index)
            for layer in cache:
                layer.reorder(index)

        start = torch.full((input_ids.size(0), 1), c.decoder_start_id, dtype=torch.long, device=input_ids.device)
        shared = dict(
            eos_token_id=eos,
            pad_token_id=c.pad_id,
            no_repeat_ngram_size=no_repeat_ngram_size,
            min_new_tokens=min_new_tokens,
            forced_bos_token_id=forced_bos_token_id,
            forced_eos_token_id=forced_eos_token_id,
        )
        if num_beams != 1 or num_return_sequences != 1:
            if do_sample:
                raise ValueError("beam search is deterministic: pass do_sample=False with num_beams > 1")
            return generation.beam_search(
                step,
                reorder,
                start,
                max_new_tokens,
                num_beams=num_beams,
                length_penalty=length_penalty,
                early_stopping=early_stopping,
                num_return_sequences=num_return_sequences,
                **shared,
            )
        return generation.generate(
            step,
            start,
            max_new_tokens,
            do_sample=do_sample,
            temperature=temperature,
            top_k=top_k,
            top_p=top_p,
            generator=generator,
            **shared,
        )
