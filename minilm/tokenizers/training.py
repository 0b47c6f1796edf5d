"""Learning a tokenizer of any family from an iterable of texts."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import tokenizers as hf
from tokenizers import models, pre_tokenizers, trainers

from .families import build_pipeline, finish, get_family
from .tokenizer import Tokenizer


def check_vocab_size(family: str, vocab_size: int) -> None:
    """A ValueError unless ``vocab_size`` holds the family's special tokens and its base alphabet (byte-level BPE's
    256 bytes; at least one learned token otherwise): checked before any text is read."""
    fam = get_family(family)
    floor = len(fam.specials) + (256 if fam.model == "bpe" else 1)
    if vocab_size < floor:
        raise ValueError(
            f"vocab_size={vocab_size} is too small for {family}: its {len(fam.specials)} special tokens"
            + (" and 256 byte tokens" if fam.model == "bpe" else "")
            + f" need vocab_size >= {floor}"
        )


def train_tokenizer(
    texts: Iterable[str], family: str, vocab_size: int, min_frequency: int = 2, show_progress: bool = False
) -> Tokenizer:
    """Learn a ``family`` tokenizer of ``vocab_size`` tokens (special tokens included) from ``texts``.

    ``min_frequency`` applies to WordPiece/BPE merges (Unigram has none).  A small corpus may give fewer
    tokens than asked; Unigram always keeps every character it saw, which may give more.
    WordPiece and byte-level BPE learn the same vocabulary from the same texts in every process; Unigram's trainer
    breaks ties between equal scores in hash-map order, so its vocabulary can differ a little from run to run.
    """
    fam = get_family(family)
    if isinstance(texts, (str, Path)):
        raise TypeError("texts must be an iterable of strings (e.g. a list of lines), not a single str/Path")
    check_vocab_size(family, vocab_size)
    size, common = vocab_size - len(fam.tail), dict(special_tokens=list(fam.head), show_progress=show_progress)
    if fam.model == "wordpiece":
        return _train_wordpiece(texts, fam, size, min_frequency, common)
    if fam.model == "bpe":
        tok = hf.Tokenizer(models.BPE())
        alphabet = pre_tokenizers.ByteLevel.alphabet()
        trainer = trainers.BpeTrainer(vocab_size=size, min_frequency=min_frequency, initial_alphabet=alphabet, **common)
    else:
        tok = hf.Tokenizer(models.Unigram())
        trainer = trainers.UnigramTrainer(vocab_size=size, unk_token=fam.unk, **common)
    build_pipeline(tok, fam)
    tok.train_from_iterator(texts, trainer)
    return Tokenizer(finish(tok, fam), family)


# Supplementary Private Use Area-A: stand-ins for word-internal characters while training WordPiece
_CONTINUATION_BASE, _CONTINUATION_END = 0xF0000, 0xFFFFD


def _train_wordpiece(texts: Iterable[str], fam, size: int, min_frequency: int, common: dict) -> Tokenizer:
    """WordPiece learned reproducibly: the same texts give the same vocabulary in every process.

    ``tokenizers``' WordPieceTrainer is BPE whose word-internal pieces carry the "##" prefix; it numbers those
    "##c" pieces in hash-map order, which changes from process to process, and the numbers break ties between
    equally frequent merges, so the vocabulary itself changes (huggingface/tokenizers#1794). Here each word's
    internal characters are written as private-use characters, which BPE numbers in sorted order; the learned pieces
    are then read back, a piece that starts inside a word getting its "##".
    """
    tok = build_pipeline(hf.Tokenizer(models.WordPiece(unk_token=fam.unk, max_input_chars_per_word=100)), fam)
    words: list[str] = []
    for text in texts:
        text = tok.normalizer.normalize_str(text) if tok.normalizer is not None else text
        words += [w for w, _ in tok.pre_tokenizer.pre_tokenize_str(text)]
    inner = sorted({c for w in words for c in w[1:]})
    if _CONTINUATION_BASE + len(inner) > _CONTINUATION_END or any(
        ord(c) >= _CONTINUATION_BASE for w in words for c in w
    ):
        raise ValueError("these texts use private-use characters (U+F0000 and up), which WordPiece training reserves")
    stand_in = {c: chr(_CONTINUATION_BASE + i) for i, c in enumerate(inner)}
    bpe = hf.Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.WhitespaceSplit()  # the words are split already
    trainer = trainers.BpeTrainer(vocab_size=size, min_frequency=min_frequency, **common)
    bpe.train_from_iterator((w[0] + "".join(stand_in[c] for c in w[1:]) for w in words), trainer)
    original = {v: k for k, v in stand_in.items()}
    vocab = {}
    for piece in sorted(bpe.get_vocab(), key=bpe.token_to_id):  # specials, alphabet, merges: in BPE's order
        text = "".join(original.get(c, c) for c in piece)
        vocab.setdefault("##" + text if piece[0] in original else text, len(vocab))
    tok.model = models.WordPiece(vocab, unk_token=fam.unk, max_input_chars_per_word=100)
    return Tokenizer(finish(tok, fam), fam.name)
