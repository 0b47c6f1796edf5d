"""A paragraph as word-level token ids, for the explorers of the pretraining objectives: no tokenizer to train, and
every token on show is a word or a punctuation mark a reader recognises."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import torch

WORD = re.compile(r"\w+(?:'\w+)*|[^\w\s]")  # words (with their apostrophes) and single punctuation marks


@dataclass(frozen=True)
class Words:
    """A text's words as ids: ``labels[i]`` is id i's text; the special tokens come first, then each distinct word."""

    ids: torch.Tensor  # (T,) long, the text's words
    labels: tuple[str, ...]

    def id(self, label: str) -> int | None:
        return self.labels.index(label) if label in self.labels else None

    def label(self, ids: Iterable[int]) -> list[str]:
        return [self.labels[int(i)] for i in ids]


def split_words(text: str) -> list[str]:
    """``"The cat's hat."`` -> ``["The", "cat's", "hat", "."]``."""
    return WORD.findall(text)


def word_ids(text: str, specials: Sequence[str]) -> Words:
    """``text``'s words as ids after ``specials`` (ids 0 ... len(specials) - 1). A ValueError for a text without
    words."""
    words = split_words(text)
    if not words:
        raise ValueError(f"the text {text!r} has no words to corrupt: give a sentence or a paragraph")
    labels = list(specials) + sorted(set(words) - set(specials))
    index = {label: i for i, label in enumerate(labels)}
    return Words(torch.tensor([index[w] for w in words], dtype=torch.long), tuple(labels))
