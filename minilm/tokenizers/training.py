"""Learning a tokenizer of any family from an iterable of texts."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import tokenizers as hf
from tokenizers import models, pre_tokenizers, trainers

from .families import build_pipeline, finish, get_family
from .tokenizer import Tokenizer


def train_tokenizer(
    texts: Iterable[str], family: str, vocab_size: int, min_frequency: int = 2, show_progress: bool = False
) -> Tokenizer:
    """Learn a ``family`` tokenizer of ``vocab_size`` tokens (special tokens included) from ``texts``.

    ``min_frequency`` applies to WordPiece/BPE merges (Unigram has none).  A small corpus may give fewer
    tokens than asked; Unigram always keeps every character it saw, which may give more.
    """
    fam = get_family(family)
    if isinstance(texts, (str, Path)):
        raise TypeError("texts must be an iterable of strings (e.g. a list of lines), not a single str/Path")
    floor = len(fam.specials) + (256 if fam.model == "bpe" else 1)
    if vocab_size < floor:
        raise ValueError(
            f"vocab_size={vocab_size} is too small for {family}: its {len(fam.specials)} special tokens"
            + (" and 256 byte tokens" if fam.model == "bpe" else "")
            + f" need vocab_size >= {floor}"
        )
    size, common = vocab_size - len(fam.tail), dict(special_tokens=list(fam.head), show_progress=show_progress)
    if fam.model == "wordpiece":
        tok = hf.Tokenizer(models.WordPiece(unk_token=fam.unk, max_input_chars_per_word=100))
        trainer = trainers.WordPieceTrainer(vocab_size=size, min_frequency=min_frequency, **common)
    elif fam.model == "bpe":
        tok = hf.Tokenizer(models.BPE())
        alphabet = pre_tokenizers.ByteLevel.alphabet()
        trainer = trainers.BpeTrainer(vocab_size=size, min_frequency=min_frequency, initial_alphabet=alphabet, **common)
    else:
        tok = hf.Tokenizer(models.Unigram())
        trainer = trainers.UnigramTrainer(vocab_size=size, unk_token=fam.unk, **common)
    build_pipeline(tok, fam)
    tok.train_from_iterator(texts, trainer)
    return Tokenizer(finish(tok, fam), family)
