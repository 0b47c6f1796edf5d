"""Masked language modelling (BERT, RoBERTa, ALBERT): corrupt some tokens, predict the originals from both sides.

    L(θ) = -1/|M| Σ_{i∈M} log P_θ(x_i | x̃)          (Devlin et al. 2019, §3.1 "Task #1: Masked LM")

x is the original sequence, M the set of selected positions and x̃ the corrupted input. Each non-special token is
selected with probability 15%; a selected token is replaced by [MASK] 80% of the time, by a random token 10% of the
time and kept unchanged 10% of the time (so the model cannot learn that only [MASK] positions matter, and must keep
a good representation of every input token). Only the selected positions are scored, so the model may compute its
vocabulary logits at those positions alone (about 15% of the output-layer work). The selection may take whole words
(all the sub-words of a word together) and, as ALBERT's does, spans of 1 to 3 words (:func:`ngram_spans`).

Pieces, smallest first::

    corrupted, labels = mask_tokens(ids, special_tokens_mask, mask_id, vocab_size, generator=g)  # -100: not in M
    index = masked_positions(labels)                       # flat positions in M
    logits = head(hidden.flatten(0, 1)[index])             # (|M|, V): vocabulary logits at M only
    loss = mlm_loss(logits, labels)

    collate = DynamicMasking(MaskingConfig.from_tokenizer(tok))      # fresh masks every time a batch is built
    albert = MaskingConfig.from_tokenizer(tok, whole_word=True, ngram=3)  # n-grams of 1-3 words (ngram_spans)
    data = StaticMaskedDataset(examples, MaskingConfig.from_tokenizer(tok), n_duplicates=10, seed=0)  # fixed masks

Examples are dicts of 1-D tensors: ``input_ids``, ``token_type_ids``, ``special_tokens_mask`` and optionally
``word_ids`` (for whole-word and n-gram masking), ``attention_mask`` and a scalar ``next_sentence_label`` or
``sentence_order_label``; see :mod:`minilm.objectives.formats` for building them from documents.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from numbers import Integral

import torch
import torch.nn.functional as F
from torch import nn

from minilm.nn.linear_cross_entropy import linear_cross_entropy
from minilm.objectives.labels import IGNORE_INDEX

# How each tokenizer family marks word boundaries inside its tokens: "##" continues the previous word (WordPiece),
# "Ġ" (byte-level BPE, a space before the word) and "▁" (SentencePiece-style Unigram) start a new word.
WORD_MARKERS: dict[str, tuple[str, str]] = {
    "bert": ("continues", "##"),
    "roberta": ("starts", "Ġ"),
    "gpt2": ("starts", "Ġ"),
    "albert": ("starts", "▁"),
    "t5": ("starts", "▁"),
}


# ---------------------------------------------------------------------------------------------------- masking


def mask_tokens(
    input_ids: torch.Tensor,
    special_tokens_mask: torch.Tensor,
    mask_id: int,
    vocab_size: int,
    mask_prob: float = 0.15,
    replace_prob: float = 0.8,
    random_prob: float = 0.1,
    word_ids: torch.Tensor | None = None,
    generator: torch.Generator | None = None,
    special_ids: Sequence[int] = (),
    ngram: int = 1,
) -> tuple[torch.Tensor, torch.Tensor]:
    """BERT's masking: select ~``mask_prob`` of the tokens, corrupt them 80/10/10, return (corrupted_ids, labels).

    input_ids (B, T): the original token ids. special_tokens_mask (B, T), bool or 0/1: True at special tokens
    ([CLS], [SEP], ...) *and* padding (the tokenizer's ``special_tokens_mask`` marks both); these are never selected.

    Selection: each other token independently with probability ``mask_prob``. With ``word_ids`` (B, T) (the word
    each token belongs to, unique within a row, -1 for none), whole words are selected instead: each word with
    probability ``mask_prob``, and then all its sub-words (BERT's whole-word masking); tokens with word id -1 are
    never selected. With ``ngram`` > 1, spans of 1 to ``ngram`` consecutive words are selected instead (ALBERT's
    n-gram masking, see :func:`ngram_spans`; without ``word_ids`` each token is a word); ``ngram=1`` is the
    selection above.

    Replacement, decided per selected token: [MASK] with probability ``replace_prob``, a random token with
    probability ``random_prob``, unchanged otherwise. Random tokens are drawn uniformly from the ids
    ``0 .. vocab_size - 1`` other than ``mask_id`` and ``special_ids`` (pass ``tokenizer.special_ids`` so no
    [CLS], [PAD], ... is ever inserted); a random token may happen to equal the original one.

    labels (B, T): the original id at selected positions, -100 elsewhere (not scored). Random numbers come from
    ``generator`` (the global torch generator if None), in a fixed order, so a seeded generator gives the same
    masks every time.
    """
    check_masking(mask_prob, replace_prob, random_prob, ngram)
    if special_tokens_mask.shape != input_ids.shape:
        shapes = f"{tuple(special_tokens_mask.shape)} != {tuple(input_ids.shape)}"
        raise ValueError(f"special_tokens_mask and input_ids must have the same shape: {shapes}")
    if word_ids is not None and word_ids.shape != input_ids.shape:
        raise ValueError(f"word_ids {tuple(word_ids.shape)} != input_ids {tuple(input_ids.shape)}")
    device = input_ids.device
    special = special_tokens_mask.bool()

    # 1. which positions are predicted (M)
    if ngram > 1:
        selected = ngram_spans(special, mask_prob, ngram, word_ids, generator) >= 0
    elif word_ids is None:
        selected = torch.rand(input_ids.shape, generator=generator, device=device) < mask_prob
    else:
        n_words = int(word_ids.max()) + 1 if word_ids.numel() else 0
        word_selected = torch.rand(input_ids.shape[0], max(n_words, 1), generator=generator, device=device) < mask_prob
        selected = word_selected.gather(1, word_ids.clamp(min=0)) & (word_ids >= 0)  # a word's sub-words together
    selected &= ~special

    # 2. what each selected position shows the model: [MASK], a random token, or itself
    u = torch.rand(input_ids.shape, generator=generator, device=device)
    to_mask = selected & (u < replace_prob)
    to_random = selected & (u >= replace_prob) & (u < replace_prob + random_prob)
    candidates = random_token_ids(vocab_size, [mask_id, *special_ids], device=device)
    random_ids = candidates[torch.randint(len(candidates), input_ids.shape, generator=generator, device=device)]

    corrupted = torch.where(to_mask, torch.full_like(input_ids, mask_id), input_ids)
    corrupted = torch.where(to_random, random_ids, corrupted)
    labels = torch.where(selected, input_ids, torch.full_like(input_ids, IGNORE_INDEX))
    return corrupted, labels


def check_masking(mask_prob: float, replace_prob: float = 0.0, random_prob: float = 0.0, ngram: int = 1) -> None:
    """One ValueError for the first bad masking option (probabilities out of range, ``ngram`` not a count >= 1)."""
    if not 0.0 <= mask_prob <= 1.0:
        raise ValueError(f"mask_prob={mask_prob} must be in [0, 1]")
    if replace_prob < 0 or random_prob < 0 or replace_prob + random_prob > 1.0 + 1e-9:
        raise ValueError(f"replace_prob={replace_prob} and random_prob={random_prob} must be >= 0 and sum to <= 1")
    if isinstance(ngram, bool) or not isinstance(ngram, Integral) or ngram < 1:
        raise ValueError(f"ngram={ngram!r} must be a whole number >= 1: the longest span in words (1: no spans)")


def ngram_spans(
    special_tokens_mask: torch.Tensor,
    mask_prob: float,
    ngram: int,
    word_ids: torch.Tensor | None = None,
    generator: torch.Generator | None = None,
) -> torch.Tensor:
    """ALBERT's n-gram masking: which span of 1..``ngram`` whole words each token is selected in; (B, T), -1 if none.

    ALBERT (Lan et al. 2020, §4.1): "We generate masked inputs for the MLM targets using n-gram masking (Joshi et
    al., 2019), with the length of each n-gram mask selected randomly. The probability for the length n is given by

        p(n) = (1/n) / Σ_{k=1}^{N} (1/k)

    We set the maximum length of n-gram (i.e., n) to be 3" (N = 3: p = 6/11, 3/11, 2/11; 1.64 words on average).

    Words are ``word_ids`` (B, T) (-1: no word; a word's tokens consecutive), or each token when None; special tokens
    and padding (``special_tokens_mask``) belong to no word. Each row's words are cut into consecutive spans whose
    lengths are drawn independently from p(n), and a new span also starts after every token of no word (so spans
    never cross [SEP], padding or any special token; a span that would has its end cut off). Each span is then
    selected with probability ``mask_prob``, so every token is selected with probability ``mask_prob``, the
    selected spans do not overlap (neighbours may touch), and their lengths follow p(n) but for the cut ones at
    segment ends. Selected spans are numbered 0, 1, ... in each row (not consecutively).

    ALBERT's ``create_masked_lm_predictions`` instead visits every word as an n-gram start in random order, draws n
    for it, and skips the n-gram if it overlaps an earlier one or would pass the budget round(mask_prob * tokens)
    (capped at ``max_predictions_per_seq``; shorter n are tried first), until the budget is spent. So its number of
    selected tokens is fixed where ours varies around ``mask_prob`` (as BERT's selection does here); its n-grams
    come out shorter than p(n) (collisions and the budget favour short ones: about 58/26/16% 1/2/3-grams in a
    simulation of it, against 55/27/18%) where ours follow p(n); its n-grams may run across the [SEP] between A
    and B, ours never do; and it draws n from numpy's global generator, we from ``generator``. Vectorised over the
    batch: ``mask_tokens`` takes about 3 ms for 32 x 512 tokens on one CPU thread with ``ngram=3``, 1 ms without.
    """
    special = special_tokens_mask.bool()
    device, (n_rows, n_tokens) = special.device, special.shape
    check_masking(mask_prob, ngram=ngram)
    if word_ids is not None and word_ids.shape != special.shape:
        raise ValueError(f"word_ids {tuple(word_ids.shape)} != special_tokens_mask {tuple(special.shape)}")
    if word_ids is None:
        word_ids = torch.arange(n_tokens, device=device).expand(n_rows, -1)
    words = word_ids.masked_fill(special, -1)
    # renumber the words 0, 1, ... in each row, in order (given ids may skip numbers)
    previous = F.pad(words, (1, 0), value=-1)[:, :-1]
    word_start = (words >= 0) & (words != previous)
    run_start = word_start & (previous < 0)  # the first word after a special token (or no word), or of the row
    word = torch.where(words >= 0, word_start.long().cumsum(1) - 1, -1)  # (B, T)
    n_words = int(word.max()) + 1 if word.numel() else 0
    if n_words == 0:
        return word  # nothing to select: all -1

    # word-level: where each span starts. Lengths n ~ p(n), i.i.d.; span j starts at n_1 + ... + n_j (in words)
    p = 1.0 / torch.arange(1, ngram + 1, dtype=torch.float, device=device)  # p(n) ∝ 1/n, normalised by multinomial
    lengths = torch.multinomial(p, n_rows * n_words, replacement=True, generator=generator).view(n_rows, -1) + 1
    starts = (lengths.cumsum(1) - lengths).clamp(max=n_words)  # (B, W): start word of span j; n_words = past the end
    span_start = torch.zeros(n_rows, n_words + 1, dtype=torch.bool, device=device).scatter_(1, starts, True)
    rows, cols = run_start.nonzero(as_tuple=True)
    span_start[rows, word[rows, cols]] = True  # and after every special token: spans end at [SEP], padding, ...
    span = span_start[:, :n_words].long().cumsum(1) - 1  # (B, W): the span each word is in

    chosen = torch.rand(n_rows, n_words, generator=generator, device=device) < mask_prob  # per span j
    span_of_token = span.gather(1, word.clamp(min=0))  # (B, T)
    selected = (word >= 0) & chosen.gather(1, span_of_token)
    return torch.where(selected, span_of_token, -1)


def random_token_ids(vocab_size: int, excluded: Sequence[int], device=None) -> torch.Tensor:
    """The ids ``0 .. vocab_size - 1`` minus ``excluded``: the candidates for the 10% random replacements."""
    allowed = torch.ones(vocab_size, dtype=torch.bool, device=device)
    allowed[torch.as_tensor(list(excluded), dtype=torch.long, device=device)] = False
    candidates = allowed.nonzero().squeeze(1)
    if candidates.numel() == 0:
        raise ValueError(f"no token id is left to draw random replacements from (vocab_size={vocab_size})")
    return candidates


# ---------------------------------------------------------------------------------------------------- word ids


def is_word_start(tokens: Sequence[str], family: str = "bert") -> torch.Tensor:
    """Whether each token (a string) begins a word, by its family's marker (see ``WORD_MARKERS``).

    WordPiece (bert): every token but ``##...`` starts a word. Byte-level BPE (roberta, gpt2): ``Ġ...`` tokens start
    a word, so punctuation attached to a word (``cat`` ``,``) counts as part of it. Give it the whole vocabulary
    (``[tok.id_to_token(i) for i in range(tok.vocab_size)]``) to get a lookup table indexed by token id.
    """
    if family not in WORD_MARKERS:
        raise ValueError(f"unknown tokenizer family {family!r}: choose one of {', '.join(WORD_MARKERS)}")
    kind, marker = WORD_MARKERS[family]
    starts = [(not t.startswith(marker)) if kind == "continues" else t.startswith(marker) for t in tokens]
    return torch.tensor(starts, dtype=torch.bool)


def word_ids_from_starts(starts: torch.Tensor, special_tokens_mask: torch.Tensor) -> torch.Tensor:
    """Word index of each token (B, T) from ``starts`` (B, T) bool (this token begins a word); -1 at special tokens.

    A token right after a special token, or at the start of a row, always begins a word (e.g. a segment that starts
    without a space, or a ``##`` piece left first by truncation). Words are numbered 0, 1, ... within each row.
    """
    special = special_tokens_mask.bool()
    after_special = torch.ones_like(special)
    after_special[:, 1:] = special[:, :-1]
    starts = (starts.bool() | after_special) & ~special
    word_ids = starts.long().cumsum(1) - 1
    return word_ids.masked_fill(special, -1)


def word_ids_from_encoding(batch) -> torch.Tensor:
    """Word index of each token (B, T) from a tokenizer's ``BatchEncoding`` (its ``word_ids`` and ``sequence_ids``).

    The tokenizer numbers words from 0 again in a pair's second text; here a new word starts wherever (sequence,
    word) changes, so ids are unique within a row. Special and padding tokens get -1.
    """
    rows = []
    for words, sequences in zip(batch.word_ids, batch.sequence_ids, strict=True):
        row, previous, index = [], None, -1
        for word, sequence in zip(words, sequences, strict=True):
            if word is None:
                row.append(-1)
                previous = None
                continue
            if (sequence, word) != previous:
                index += 1
                previous = (sequence, word)
            row.append(index)
        rows.append(row)
    return torch.tensor(rows, dtype=torch.long)


# ---------------------------------------------------------------------------------------------------- loss


def masked_positions(labels: torch.Tensor) -> torch.Tensor:
    """Flat indices (|M|,) of the scored positions of ``labels`` (B, T), in row-major order.

    ``hidden.flatten(0, 1)[masked_positions(labels)]`` picks the (|M|, D) hidden states the model turns into
    vocabulary logits; it equals ``hidden[labels != -100]``.
    """
    return (labels.flatten() != IGNORE_INDEX).nonzero().squeeze(1)


def mlm_loss(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """L = -1/|M| Σ_{i∈M} log p(x_i | x̃): mean cross-entropy over the masked positions M only.

    logits: (|M|, V) at ``masked_positions(labels)`` (the cheap way: the model computed logits there only), or
    (B, T, V) at every position (unscored ones are ignored). labels (B, T): original ids, -100 where not scored.
    A batch with no selected position gives a zero loss (connected to the graph) instead of NaN.
    """
    if logits.dim() == 3:
        logits, targets = logits.flatten(0, 1), labels.flatten()
        keep = targets != IGNORE_INDEX
        logits, targets = logits[keep], targets[keep]
    else:
        targets = labels.flatten()[masked_positions(labels)]
        if logits.shape[0] != targets.shape[0]:
            raise ValueError(f"{logits.shape[0]} rows of logits for {targets.shape[0]} masked positions in labels")
    if targets.numel() == 0:
        return logits.float().sum() * 0.0
    return F.cross_entropy(logits.float(), targets)


def mlm_loss_from_states(states: torch.Tensor, decoder: nn.Linear, labels: torch.Tensor) -> torch.Tensor:
    """``mlm_loss(decoder(states), labels)`` without the (|M|, V) logits: ``states`` (|M|, E) are the MLM head's
    vectors at ``masked_positions(labels)`` (``Bert.mlm_states``); the decoder and the loss run fused, in chunks."""
    targets = labels.flatten()[masked_positions(labels)]
    if states.shape[0] != targets.shape[0]:
        raise ValueError(f"{states.shape[0]} rows of states for {targets.shape[0]} masked positions in labels")
    return linear_cross_entropy(states, decoder.weight, decoder.bias, targets)


# ---------------------------------------------------------------------------------------------------- batches


PAD_VALUES = {"labels": IGNORE_INDEX, "word_ids": -1, "special_tokens_mask": True, "attention_mask": 0}


def pad_batch(examples: list[dict], pad_id: int) -> dict[str, torch.Tensor]:
    """Stack examples (dicts of 1-D tensors, scalars allowed) into a batch, right-padding to the longest one.

    Padding: ``input_ids`` get ``pad_id``, ``labels`` -100, ``word_ids`` -1, ``special_tokens_mask`` True, every
    other sequence 0; ``attention_mask`` (1 on real tokens, 0 on padding) is added when the examples lack one.
    """
    if not examples:
        raise ValueError("pad_batch needs at least one example")
    examples = [{"attention_mask": torch.ones_like(e["input_ids"]), **e} for e in examples]
    width = max(len(e["input_ids"]) for e in examples)
    batch = {}
    for key, first in examples[0].items():
        if first.dim() == 0:
            batch[key] = torch.stack([e[key] for e in examples])
            continue
        value = pad_id if key == "input_ids" else PAD_VALUES.get(key, 0)
        out = torch.full((len(examples), width), value, dtype=first.dtype)
        for row, e in zip(out, examples, strict=True):
            row[: len(e[key])] = e[key]
        batch[key] = out
    return batch


@dataclass(frozen=True)
class MaskingConfig:
    """Everything :func:`mask_tokens` needs besides the batch; ``pad_id`` is for padding batches.

    ALBERT's masking is ``MaskingConfig.from_tokenizer(tok, whole_word=True, ngram=3)``: n-grams of whole words
    (with ``whole_word=False`` an n-gram counts tokens).
    """

    mask_id: int
    vocab_size: int
    pad_id: int
    special_ids: tuple[int, ...] = ()  # never drawn as random replacements
    mask_prob: float = 0.15
    replace_prob: float = 0.8
    random_prob: float = 0.1
    whole_word: bool = False  # select whole words (the examples must carry "word_ids")
    ngram: int = 1  # select spans of 1..ngram words, p(n) ∝ 1/n (ALBERT: 3, with whole_word=True); 1: no spans

    def __post_init__(self) -> None:
        check_masking(self.mask_prob, self.replace_prob, self.random_prob, self.ngram)

    @classmethod
    def from_tokenizer(cls, tokenizer, **overrides) -> MaskingConfig:
        """Ids from a ``minilm.tokenizers.Tokenizer`` (mask, pad, special, vocabulary size); options as keywords."""
        if tokenizer.mask_id is None:
            raise ValueError(f"the {tokenizer.family} tokenizer has no mask token: use bert, roberta or albert")
        ids = dict(mask_id=tokenizer.mask_id, vocab_size=tokenizer.vocab_size, pad_id=tokenizer.pad_id)
        return cls(**ids, special_ids=tuple(tokenizer.special_ids), **overrides)

    def __call__(self, batch: dict[str, torch.Tensor], generator: torch.Generator | None = None) -> dict:
        """Mask a padded batch: ``input_ids`` become the corrupted ids and ``labels`` are added (a new dict)."""
        if self.whole_word and "word_ids" not in batch:
            raise ValueError("whole_word=True needs examples with 'word_ids' (see make_examples / word_ids_from_*)")
        corrupted, labels = mask_tokens(
            batch["input_ids"],
            batch["special_tokens_mask"],
            self.mask_id,
            self.vocab_size,
            self.mask_prob,
            self.replace_prob,
            self.random_prob,
            word_ids=batch["word_ids"] if self.whole_word else None,
            generator=generator,
            special_ids=self.special_ids,
            ngram=self.ngram,
        )
        return {**batch, "input_ids": corrupted, "labels": labels}


class DynamicMasking:
    """A collate function that masks at batch time: every epoch sees new masks (RoBERTa's dynamic masking).

    ``Trainer(model, loss_fn, examples, collate=DynamicMasking(config))``. With ``seed=None`` the masks come from
    torch's global generator, which ``torch.manual_seed`` fixes and the Trainer's checkpoints save and restore (so a
    resumed run masks exactly like an uninterrupted one); an int seed gives this collate its own generator, which
    checkpoints do not save.
    """

    def __init__(self, config: MaskingConfig, seed: int | None = None) -> None:
        self.config = config
        self.generator = None if seed is None else torch.Generator().manual_seed(seed)

    def __call__(self, examples: list[dict]) -> dict[str, torch.Tensor]:
        return self.config(pad_batch(examples, self.config.pad_id), self.generator)


_STATIC_CHUNK = 1024  # examples masked together by StaticMaskedDataset (part of what fixes its masks)


class StaticMaskedDataset(Sequence):
    """Masks computed once, ahead of training: BERT's static masking, as RoBERTa's baseline ran it.

    RoBERTa (Liu et al. 2019, §4.1): "training data was duplicated 10 times so that each sequence is masked in
    10 different ways over the 40 epochs of training. Thus, each training sequence was seen with the same mask four
    times during training." Item ``d * len(examples) + i`` is example i under mask number d (d < n_duplicates); it is
    the same tensor every time it is read, whatever the epoch. Copy d is masked with a generator seeded by
    (seed, d). Use ``collate=dataset.collate`` (padding only: the labels are already there).
    """

    def __init__(self, examples: Sequence[dict], config: MaskingConfig, n_duplicates: int = 10, seed: int = 0) -> None:
        if n_duplicates < 1:
            raise ValueError(f"n_duplicates={n_duplicates} must be at least 1")
        self.config, self.n_examples, self.n_duplicates = config, len(examples), n_duplicates
        self.items: list[dict] = []
        for d in range(n_duplicates):
            generator = torch.Generator().manual_seed(seed * 1_000_003 + d)
            for start in range(0, len(examples), _STATIC_CHUNK):  # chunk by chunk: bounded temporary memory
                part = [examples[i] for i in range(start, min(start + _STATIC_CHUNK, len(examples)))]
                masked = config(pad_batch(part, config.pad_id), generator)
                for row, example in enumerate(part):
                    n = len(example["input_ids"])
                    self.items.append({k: v[row] if v.dim() == 1 else v[row, :n].clone() for k, v in masked.items()})

    def __len__(self) -> int:
        return len(self.items)

    def __getitem__(self, index):
        if isinstance(index, slice):
            return [self.items[i] for i in range(*index.indices(len(self)))]
        return self.items[index]

    def collate(self, examples: list[dict]) -> dict[str, torch.Tensor]:
        return pad_batch(examples, self.config.pad_id)
