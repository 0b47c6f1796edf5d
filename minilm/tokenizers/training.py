"""Learning a tokenizer of any family from an iterable of texts."""

from __future__ import annotations

import io
from collections.abc import Iterable
from pathlib import Path

import sentencepiece as spm
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
    tokens than asked; Unigram keeps every character it saw, so ``vocab_size`` must leave room for them all (a
    ValueError says how much). Every family learns the same vocabulary (ids, merges, Unigram's scores) from the same
    texts in every process, whatever its hash seed or the machine's core count: the processes of a distributed run
    agree, and training again gives the tokenizer a run saved.
    """
    fam = get_family(family)
    if isinstance(texts, (str, Path)):
        raise TypeError("texts must be an iterable of strings (e.g. a list of lines), not a single str/Path")
    check_vocab_size(family, vocab_size)
    size, common = vocab_size - len(fam.tail), dict(special_tokens=list(fam.head), show_progress=show_progress)
    if fam.model == "wordpiece":
        return _train_wordpiece(texts, fam, size, min_frequency, common)
    if fam.model == "unigram":
        return _train_unigram(texts, fam, size, show_progress)
    tok = build_pipeline(hf.Tokenizer(models.BPE()), fam)  # byte-level BPE
    alphabet = pre_tokenizers.ByteLevel.alphabet()
    trainer = trainers.BpeTrainer(vocab_size=size, min_frequency=min_frequency, initial_alphabet=alphabet, **common)
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


# SentencePiece's threads each sum the expected counts of every n-th word, then the sums are added in thread order:
# the thread count decides the last bits of every score, so it is a constant, not this machine's core count
_SENTENCEPIECE_THREADS = 4


def _train_unigram(texts: Iterable[str], fam, size: int, show_progress: bool) -> Tokenizer:
    """Unigram learned reproducibly, by Google's SentencePiece (ALBERT's and T5's own tool).

    ``tokenizers``' UnigramTrainer visits the words in hash-map order, which changes from process to process: its
    floating-point sums round differently, so the scores differ in their last bits, and pieces of equal score (rare
    characters above all) swap ids. SentencePiece visits the words sorted, adds in a fixed order and breaks ties by
    the piece itself. It reads the texts as this family's normalizer leaves them, its own normalisation being the
    identity, and marks spaces and each text's start with "▁" as the pre-tokenizer does, so its pieces are the ones
    the pipeline looks up. Its pieces and scores become a ``tokenizers`` Unigram model behind the family's head
    special tokens (score 0, as ``tokenizers``' trainer gives them).
    """
    tok = build_pipeline(hf.Tokenizer(models.Unigram()), fam)
    lines = [line for line in map(tok.normalizer.normalize_str, texts) if line]
    n_chars = len(set().union(*lines) - {" "} | {"▁"}) if lines else 0  # "▁" stands for the space
    room = size - len(fam.head)
    if n_chars > room:
        raise ValueError(
            f"vocab_size={size + len(fam.tail)} is too small for these texts: {fam.name}'s Unigram vocabulary keeps "
            f"each of their {n_chars} distinct characters besides its {len(fam.specials)} special tokens; "
            f"use vocab_size >= {n_chars + len(fam.specials)}"
        )
    pieces = []
    if lines:  # no text: the special tokens alone
        model = io.BytesIO()
        spm.SentencePieceTrainer.train(
            sentence_iterator=iter(lines), model_writer=model, model_type="unigram",
            vocab_size=room + 1, unk_id=0, bos_id=-1, eos_id=-1, pad_id=-1,  # room + its own <unk>, at id 0
            hard_vocab_limit=False,  # a small corpus may give fewer pieces
            character_coverage=1.0,  # every character seen is a piece
            normalization_rule_name="identity", remove_extra_whitespaces=False,  # normalised already
            add_dummy_prefix=True,  # "▁" before each text, as Metaspace(prepend_scheme="always")
            max_sentence_length=2**30,  # its most: a long text (a whole document) is never dropped
            num_threads=_SENTENCEPIECE_THREADS, minloglevel=0 if show_progress else 2,  # 2: warnings and errors
        )  # fmt: skip
        sp = spm.SentencePieceProcessor(model_proto=model.getvalue())
        # 12 decimals (float32 scores, so nothing lost that counts): tokenizers reads a score written with 17 digits
        # back up to a unit in the last place off (serde_json's fast parser), one of at most 15 digits exactly
        pieces = [(sp.id_to_piece(i), round(sp.get_score(i), 12)) for i in range(1, sp.get_piece_size())]
    tok.model = models.Unigram([(t, 0.0) for t in fam.head] + pieces, unk_id=fam.head.index(fam.unk))
    return Tokenizer(finish(tok, fam), fam.name)
