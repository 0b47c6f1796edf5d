"""Typed examples for the fine-tuning tasks: one small frozen dataclass per task shape."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class SentenceExample:
    """Single-sentence classification (SST-2, CoLA): ``label`` indexes the task's label names."""

    text: str
    label: int


@dataclass(frozen=True)
class PairExample:
    """Sentence-pair classification (int label) or regression (float label, STS-B)."""

    text_a: str
    text_b: str
    label: int | float


@dataclass(frozen=True)
class TaggingExample:
    """A tokenized sentence with one tag per token (WNUT-17 BIO tags, UD UPOS tags)."""

    tokens: list[str]
    tags: list[str]


@dataclass(frozen=True)
class Answer:
    """An answer span: ``context[start : start + len(text)] == text``."""

    text: str
    start: int


@dataclass(frozen=True)
class QAExample:
    """Extractive QA (SQuAD 2.0); no answers means the question cannot be answered from the context."""

    id: str
    question: str
    context: str
    answers: list[Answer]
    title: str

    @property
    def is_impossible(self) -> bool:
        return not self.answers


@dataclass(frozen=True)
class ChoiceExample:
    """Two-way multiple choice (COPA): which of ``choices`` is the ``question`` ("cause"/"effect") of
    ``premise``; ``label`` indexes ``choices``."""

    id: int
    premise: str
    question: str
    choices: list[str]
    label: int


@dataclass(frozen=True)
class Seq2SeqExample:
    """Text to text (generative QA): the model reads ``source`` and writes ``target``; ``references`` are every
    acceptable output the prediction is scored against (SQuAD's several answers; empty: "no answer")."""

    id: str
    source: str
    target: str
    references: tuple[str, ...]

    @property
    def answers(self) -> tuple[str, ...]:
        """The references under SQuAD's name, for :func:`minilm.metrics.squad_scores`."""
        return self.references
