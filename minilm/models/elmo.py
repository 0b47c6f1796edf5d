"""ELMo: a bidirectional LSTM language model on characters (Peters et al. 2018), composed from :mod:`minilm.nn`.

    ids (B, T) ─► char_table ─► char ids (B, T, 50) ─► CharCNN (convolutions, highway, projection) ─► x_k (B, T, d)
    x_k ─► forward LSTMP 1 ─► forward LSTMP 2 (+ its input)  ─► h→_k ─┐   shared    ─► p(t_{k+1} | t_1 .. t_k)
           left to right                                              ├─► softmax
    x_k ─► backward LSTMP 1 ─► backward LSTMP 2 (+ its input) ─► h←_k ─┘   (d -> V) ─► p(t_{k−1} | t_k .. t_N)
           right to left

Two language models, kept separate (no state crosses between the directions), share the token representation
(Θ_x: the character CNN) and the softmax (Θ_s); the objective is :func:`minilm.objectives.bilm.bilm_loss`. Each
direction has ``n_layers`` LSTM layers with projections (LSTMP: 4096 cells -> d = 512 in the paper) and a residual
connection from the first layer to the second. Dropout acts on every LSTM layer's input and before the softmax.

The representations of token k (``features(...).hidden_states``, each (B, T, 2d), as allennlp's ELMo gives them):
    layer 0: [x_k; x_k]        layer j ≥ 1: [h→_{k,j}; h←_{k,j}]
A task mixes them with :class:`minilm.nn.ScalarMix`: ELMo_k = γ Σ_j s_j h_{k,j}.

Words and characters. ELMo reads each word's characters, so any word gets a representation, and predicts words
from a fixed vocabulary (the softmax). Here the model takes token ids (B, T), like every registered model, and
spells them through a fixed table: the buffer ``char_table`` (V, max_chars) holds the character ids of every
token of the tokenizer's vocabulary, filled by :meth:`ELMo.set_vocabulary` (saved with the weights). So the data
pipeline, the objectives' examples and fine-tuning work unchanged, and the character CNN still sees spellings
("Ġthe" for a GPT-2 BPE token: the Ġ marks a word start). Until ``set_vocabulary`` is called, token i is spelled
as its id in decimal ("00042"): the model runs, but learns from no spelling. Words outside the vocabulary can be
read as characters directly: ``features(char_ids=batch_to_char_ids(sentences))``.

Left out: the original's cell and projection clipping (|c|, |h| ≤ 3; torch.nn.LSTM has no clipping), its
sampled softmax over 793k words (a full softmax over the tokenizer's vocabulary here), and carrying the LSTM
states from one batch to the next. torch.nn.LSTM keeps two bias vectors per layer where ELMo has one (the same
function: 4·cells more parameters per layer).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import Tensor, nn

from minilm.nn import TransformerOutput, check_token_ids
from minilm.nn.char_cnn import BOW_CHAR, ELMO_FILTERS, EOW_CHAR, N_CHARS, PAD_CHAR, CharCNN, word_to_char_ids
from minilm.nn.lstm import LSTMLayer, reverse_padded
from minilm.ranges import MODEL_RANGES, check_ranges


@dataclass
class ELMoConfig:
    vocab_size: int = 8192  # tokens the shared softmax predicts (the tokenizer's vocabulary)
    max_chars: int = 50  # characters per token, word markers included (longer tokens are cut)
    n_chars: int = N_CHARS  # character ids: 256 bytes + 5 markers, shifted by one (0 pads missing tokens)
    char_embed_dim: int = 16  # width of a character embedding
    # (width, count) of the character convolutions, e.g. ((1, 32), (2, 32)); on the command line "1:32,2:32"
    filters: tuple[tuple[int, int], ...] = ELMO_FILTERS
    cnn_activation: str = "relu"  # after the max-pooling and in the highway layers: "relu" (ELMo) or "tanh" (Kim)
    n_highway: int = 2  # highway layers on the pooled filters
    projection_dim: int = 512  # d: token representation and LSTM output width (the projection of LSTMP)
    hidden_size: int = 4096  # LSTM cells; projected down to projection_dim when larger (equal: no projection)
    n_layers: int = 2  # LSTM layers per direction
    residual: bool = True  # layers after the first add their input to their output
    dropout: float = 0.1  # on every LSTM layer's input and before the softmax
    max_len: int | None = None  # longest sequence accepted (None: any; an LSTM has no position limit)

    def __post_init__(self) -> None:
        if isinstance(self.filters, str):  # "1:32,2:32" from the command line
            try:
                self.filters = tuple(tuple(int(n) for n in f.split(":")) for f in self.filters.split(","))
            except ValueError:
                raise ValueError(f"filters={self.filters!r}: write width:count pairs, e.g. 1:32,2:32") from None
        self.filters = tuple((int(width), int(count)) for width, count in self.filters)  # JSON gives lists
        if self.projection_dim > self.hidden_size:
            raise ValueError(f"projection_dim={self.projection_dim} is larger than hidden_size={self.hidden_size}")
        if any(width > self.max_chars for width, _ in self.filters):
            raise ValueError(f"a filter is wider than max_chars={self.max_chars}")
        if not self.filters or any(width < 1 or count < 1 for width, count in self.filters):
            raise ValueError(f"filters={self.filters}: each filter needs a width and a count of at least 1")
        check_ranges(self, MODEL_RANGES)


ELMO_PRESETS = {  # name -> ELMoConfig overrides; parameters without the softmax, one LSTM bias (allennlp's table)
    "tiny": dict(
        filters=((1, 32), (2, 32), (3, 64), (4, 128)), n_highway=1, hidden_size=512, projection_dim=128, dropout=0.0
    ),  # ~2.6M (+ 1.1M softmax with an 8k vocabulary)
    "small": dict(
        filters=((1, 32), (2, 32), (3, 64), (4, 128), (5, 256), (6, 512)), hidden_size=1024, projection_dim=256
    ),  # ~14M (+ 2.1M softmax with an 8k vocabulary)
    "elmo-small": dict(hidden_size=1024, projection_dim=128, n_highway=1),  # 13.6M
    "elmo-medium": dict(hidden_size=2048, projection_dim=256, n_highway=1),  # 28.0M
    "elmo-original": dict(hidden_size=4096, projection_dim=512, n_highway=2),  # 93.6M: the paper's biLM
}


def spell_ids(vocab_size: int, max_chars: int = 50) -> Tensor:
    """The placeholder ``char_table`` (V, max_chars): token i spelled as its id in decimal, zero-padded."""
    digits = len(str(max(vocab_size - 1, 0)))
    if digits > max_chars - 2:
        raise ValueError(f"max_chars={max_chars} cannot spell {vocab_size} ids")
    powers = 10 ** torch.arange(digits - 1, -1, -1)  # (digits,)
    ascii_digits = torch.arange(vocab_size)[:, None] // powers % 10 + ord("0")  # (V, digits)
    table = torch.full((vocab_size, max_chars), PAD_CHAR)
    table[:, 0], table[:, 1 : digits + 1], table[:, digits + 1] = BOW_CHAR, ascii_digits, EOW_CHAR
    return table + 1  # as word_to_char_ids: 0 is left for missing words


class ELMo(nn.Module):
    """The biLM. Submodules: ``token_encoder`` (:class:`~minilm.nn.CharCNN`), ``forward_lm.{j}`` and
    ``backward_lm.{j}`` (:class:`~minilm.nn.LSTMLayer`), ``softmax`` (Linear d -> V, both directions); buffer
    ``char_table``."""

    def __init__(self, config: ELMoConfig) -> None:
        super().__init__()
        self.config = c = config
        self.token_encoder = CharCNN(
            c.projection_dim, c.filters, c.n_highway, c.char_embed_dim, c.n_chars, c.cnn_activation
        )
        proj_size = c.projection_dim if c.projection_dim < c.hidden_size else 0  # 0: a plain LSTM
        self.forward_lm = nn.ModuleList(
            [LSTMLayer(c.projection_dim, c.hidden_size, proj_size) for _ in range(c.n_layers)]
        )
        self.backward_lm = nn.ModuleList(
            [LSTMLayer(c.projection_dim, c.hidden_size, proj_size) for _ in range(c.n_layers)]
        )
        self.softmax = nn.Linear(c.projection_dim, c.vocab_size)  # Θ_s, shared by both directions
        self.dropout = nn.Dropout(c.dropout)
        self.register_buffer("char_table", spell_ids(c.vocab_size, c.max_chars))  # (V, max_chars)

    @torch.no_grad()
    def set_vocabulary(self, tokens: Sequence[str | bytes]) -> None:
        """Spell token ids 0 .. len(tokens) − 1 as these strings (a tokenizer's ``id_to_token`` for every id)."""
        if len(tokens) > self.config.vocab_size:
            raise ValueError(f"{len(tokens)} tokens do not fit the model's vocab_size={self.config.vocab_size}")
        table = torch.tensor([word_to_char_ids(t, self.config.max_chars) for t in tokens], dtype=torch.long)
        self.char_table[: len(tokens)] = table.to(self.char_table.device)

    def embed(self, input_ids: Tensor | None = None, char_ids: Tensor | None = None) -> Tensor:
        """x_k (B, T, d), the context-independent token representation, from ids (B, T) or char ids (B, T, chars)."""
        if char_ids is not None:
            return self.token_encoder(char_ids)
        # every distinct token is spelled and encoded once per batch (its x_k depends on nothing else)
        unique, inverse = torch.unique(input_ids, return_inverse=True)
        return self.token_encoder(self.char_table[unique])[inverse]

    def _run(self, layers: nn.ModuleList, x: Tensor, lengths: Tensor | None) -> list[Tensor]:
        """One direction's LSTM stack, left to right over x (B, T, d) -> each layer's output (B, T, d)."""
        states = []
        for j, layer in enumerate(layers):
            h, _ = layer(self.dropout(x), lengths)  # (B, T, d)
            if j > 0 and self.config.residual:
                h = h + x  # the residual connection between layers
            states.append(h)
            x = h
        return states

    def _bilm(
        self, input_ids: Tensor | None, attention_mask: Tensor | None, char_ids: Tensor | None
    ) -> tuple[Tensor, list[Tensor], list[Tensor]]:
        """x (B, T, d), the forward LM's layers, the backward LM's layers (each (B, T, d), in reading order)."""
        if (input_ids is None) == (char_ids is None):
            raise ValueError("pass either input_ids (B, T) or char_ids (B, T, max_chars)")
        if input_ids is not None:
            check_token_ids(input_ids, self.config.vocab_size, attention_mask)
        elif char_ids.dim() != 3:
            raise ValueError(f"char_ids must be (B, T, max_chars), got shape {tuple(char_ids.shape)}")
        elif attention_mask is not None and attention_mask.shape != char_ids.shape[:2]:
            raise ValueError(
                f"attention_mask {tuple(attention_mask.shape)} must be (B, T) = {tuple(char_ids.shape[:2])}, the "
                "first two dimensions of char_ids"
            )
        T = (input_ids if input_ids is not None else char_ids).size(1)
        if self.config.max_len is not None and T > self.config.max_len:
            raise ValueError(f"sequence of {T} tokens is longer than the model's max_len={self.config.max_len}")
        lengths = _lengths(attention_mask, T)
        x = self.embed(input_ids, char_ids)  # (B, T, d)
        forward = self._run(self.forward_lm, x, lengths)  # h→_{k,j}: has read t_1 .. t_k
        # the backward LM reads each sequence's real tokens from the last to the first, then is put back in order
        backward = self._run(self.backward_lm, reverse_padded(x, lengths), lengths)
        backward = [reverse_padded(h, lengths) for h in backward]  # h←_{k,j}: has read t_N .. t_k
        return x, forward, backward

    def features(
        self,
        input_ids: Tensor | None = None,
        attention_mask: Tensor | None = None,
        token_type_ids: Tensor | None = None,
        output_hidden_states: bool = False,
        char_ids: Tensor | None = None,
    ) -> TransformerOutput:
        """ids (B, T) [or char_ids (B, T, max_chars)] -> every layer's representation, each (B, T, 2d).

        ``hidden_states``: n_layers + 1 of them ([x; x], then [h→_j; h←_j]); ``last_hidden_state`` is the top one.
        They come even with ``output_hidden_states=False``: the biLM computes every layer anyway, and ELMo's use
        is to mix them. ``attention_mask`` (B, T) 0/1 marks right padding (real tokens first); padded positions come
        out zero. ``token_type_ids`` are accepted, as every registered model's ``features`` takes them, and ignored:
        ELMo has no segment embeddings.
        """
        x, forward, backward = self._bilm(input_ids, attention_mask, char_ids)
        layers = [torch.cat([x, x], dim=-1)] + [torch.cat(fb, dim=-1) for fb in zip(forward, backward, strict=True)]
        if attention_mask is not None:
            layers = [h * attention_mask[..., None].to(h.dtype) for h in layers]
        return TransformerOutput(layers[-1], hidden_states=tuple(layers))

    def forward(
        self, input_ids: Tensor | None = None, attention_mask: Tensor | None = None, char_ids: Tensor | None = None
    ) -> tuple[Tensor, Tensor]:
        """ids (B, T) -> (forward logits, backward logits), each (B, T, V).

        Position k's forward logits predict token k + 1, its backward logits token k − 1.
        """
        forward, backward = self.lm_states(input_ids, attention_mask, char_ids)
        return self.softmax(forward), self.softmax(backward)

    def lm_states(
        self, input_ids: Tensor | None = None, attention_mask: Tensor | None = None, char_ids: Tensor | None = None
    ) -> tuple[Tensor, Tensor]:
        """What the shared softmax reads: the top forward and backward states after dropout, each (B, T, d).

        With ``softmax`` they give the biLM loss without the logits
        (:func:`~minilm.objectives.bilm.bilm_loss_from_states`).
        """
        _, forward, backward = self._bilm(input_ids, attention_mask, char_ids)
        return self.dropout(forward[-1]), self.dropout(backward[-1])


def _lengths(attention_mask: Tensor | None, T: int) -> Tensor | None:
    """Real tokens per row (B,) of a right-padded 0/1 mask (B, T); None when there is no padding at all."""
    if attention_mask is None:
        return None
    mask = attention_mask.bool()
    lengths = mask.sum(dim=1)
    if not torch.equal(mask, torch.arange(T, device=mask.device)[None, :] < lengths[:, None]):
        raise ValueError("ELMo reads right-padded batches: each attention_mask row must be 1s, then 0s")
    if bool((lengths == 0).any()):
        raise ValueError("a row of the batch has no real token")
    return None if bool((lengths == T).all()) else lengths
