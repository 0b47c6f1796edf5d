"""A character-level token encoder (Kim et al. 2016; ELMo, Peters et al. 2018): a word's characters -> one vector.

    word ──► char ids ──► char embedding ──► Conv1d of each width ──► max over time ──► act ──► highway layers
                          (max_chars, 16)    (1..7 characters wide)   (one value per filter)    ──► Linear ──► x_k

Every filter is an n-gram detector; max-pooling keeps its best match anywhere in the word, so the vector holds
which character patterns (prefixes, suffixes, stems, capitals) occur, for any word, seen in training or not.

Character ids follow ELMo (allennlp's ``ELMoCharacterMapper``): the word's UTF-8 bytes 0-255, then 256/257 for
begin/end of sentence, 258/259 for begin/end of word and 260 for padding, all shifted up by one so that 0 marks a
missing word (batch padding): 262 ids. A word is [bow, bytes..., eow, pad, ...], cut to ``max_chars`` (50).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor, nn

BOS_CHAR, EOS_CHAR, BOW_CHAR, EOW_CHAR, PAD_CHAR = 256, 257, 258, 259, 260  # before the shift by one
N_CHARS = 262  # 0 (missing word) + 256 bytes + 5 markers
BOS_WORD, EOS_WORD = "<S>", "</S>"  # ELMo's sentence boundaries, spelled with their own markers
ELMO_FILTERS = ((1, 32), (2, 32), (3, 64), (4, 128), (5, 256), (6, 512), (7, 1024))  # (width, count): 2048

ACTIVATIONS = {"relu": torch.relu, "tanh": torch.tanh}  # ELMo: relu; Kim et al. 2016: tanh


def word_to_char_ids(word: str | bytes, max_chars: int = 50) -> list[int]:
    """ELMo's character ids of one word: [bow, its UTF-8 bytes (cut to max_chars − 2), eow, padding...] + 1."""
    if max_chars < 3:
        raise ValueError(f"max_chars={max_chars} leaves no room for a character between the word markers")
    if word in (BOS_WORD, EOS_WORD):
        body = [BOS_CHAR if word == BOS_WORD else EOS_CHAR]
    else:
        body = list(word.encode("utf-8") if isinstance(word, str) else word)[: max_chars - 2]
    ids = [BOW_CHAR, *body, EOW_CHAR] + [PAD_CHAR] * (max_chars - len(body) - 2)
    return [c + 1 for c in ids]  # 0 is left for missing words


def batch_to_char_ids(sentences: Sequence[Sequence[str]], max_chars: int = 50) -> Tensor:
    """Sentences of words -> char ids (B, T_max, max_chars), int64; the rows of missing words are all 0."""
    out = torch.zeros(len(sentences), max((len(s) for s in sentences), default=0), max_chars, dtype=torch.long)
    for b, sentence in enumerate(sentences):
        for t, word in enumerate(sentence):
            out[b, t] = torch.tensor(word_to_char_ids(word, max_chars))
    return out


class Highway(nn.Module):
    """``n_layers`` highway layers (Srivastava et al. 2015), each

        y = t ⊙ g(W_H x + b_H) + (1 − t) ⊙ x,    t = σ(W_T x + b_T)    (transform gate t, carry gate 1 − t)

    b_T starts at ``gate_bias`` (−2, Kim et al. 2016), so that each layer first mostly carries its input through.
    Submodules: ``transform.{i}`` (W_H, b_H), ``gate.{i}`` (W_T, b_T).
    """

    def __init__(self, dim: int, n_layers: int = 1, activation: str = "relu", gate_bias: float = -2.0) -> None:
        super().__init__()
        self.transform = nn.ModuleList([nn.Linear(dim, dim) for _ in range(n_layers)])
        self.gate = nn.ModuleList([nn.Linear(dim, dim) for _ in range(n_layers)])
        self.activation = ACTIVATIONS[activation]
        for gate in self.gate:
            nn.init.constant_(gate.bias, gate_bias)

    def forward(self, x: Tensor) -> Tensor:
        for transform, gate in zip(self.transform, self.gate, strict=True):
            t = torch.sigmoid(gate(x))  # (..., dim)
            x = t * self.activation(transform(x)) + (1 - t) * x
        return x


class CharCNN(nn.Module):
    """Char ids (..., max_chars) -> token representations (..., output_dim).

    Submodules: ``char_embedding`` (n_chars, char_dim; row 0 stays zero), ``convs.{i}`` (one Conv1d per (width,
    count) of ``filters``), ``highway`` (:class:`Highway` on the sum of the counts), ``projection`` (Linear).
    """

    def __init__(
        self,
        output_dim: int,
        filters: Sequence[tuple[int, int]] = ELMO_FILTERS,
        n_highway: int = 2,
        char_dim: int = 16,
        n_chars: int = N_CHARS,
        activation: str = "relu",
    ) -> None:
        super().__init__()
        self.char_embedding = nn.Embedding(n_chars, char_dim, padding_idx=0)
        self.convs = nn.ModuleList([nn.Conv1d(char_dim, count, width) for width, count in filters])
        width = sum(count for _, count in filters)
        self.activation = ACTIVATIONS[activation]
        self.highway = Highway(width, n_highway, activation)
        self.projection = nn.Linear(width, output_dim)

    def forward(self, char_ids: Tensor) -> Tensor:
        batch_shape, max_chars = char_ids.shape[:-1], char_ids.size(-1)
        chars = self.char_embedding(char_ids.reshape(-1, max_chars)).transpose(1, 2)  # (N, char_dim, max_chars)
        # each filter's best match anywhere in the word: max over positions of (N, count, max_chars − width + 1)
        pooled = [conv(chars).amax(dim=-1) for conv in self.convs]
        h = self.activation(torch.cat(pooled, dim=-1))  # (N, Σ counts); act(max(.)) = max(act(.)): act is monotone
        h = self.projection(self.highway(h))  # (N, output_dim)
        return h.view(*batch_shape, -1)
