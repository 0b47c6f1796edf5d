"""Next sentence prediction (BERT): pairs of segments labelled IsNext or NotNext, and the classifier's loss.

BERT (Devlin et al. 2019, §3.1 "Task #2: Next Sentence Prediction"): "when choosing the sentences A and B for each
pre-training example, 50% of the time B is the actual next sentence that follows A (labeled as IsNext), and 50% of
the time it is a random sentence from the corpus (labeled as NotNext)". The model classifies the [CLS] vector:

    L_NSP(θ) = -1/B Σ_b log P_θ(y_b | [CLS] A_b [SEP] B_b [SEP]),   y = 0 (IsNext) or 1 (NotNext)

:func:`nsp_pairs` builds BERT's pairs of multi-sentence segments (RoBERTa's SEGMENT-PAIR), :func:`sentence_pair`
pairs of single sentences (RoBERTa's SENTENCE-PAIR); see :mod:`minilm.objectives.formats`. The segment cutting
(:func:`~minilm.objectives.segments.segment_pairs`, :func:`~minilm.objectives.segments.sentence_pairs`), the random
B (:func:`~minilm.objectives.segments.random_segment`) and the loss are shared with sentence-order prediction
(:mod:`minilm.objectives.sop`).
"""

from __future__ import annotations

import random
from collections.abc import Sequence

import torch

from minilm.objectives.segments import (
    Doc,
    Sentence,
    Template,
    non_empty,
    other_index,
    pair_budget,
    pair_classifier_loss,
    random_segment,
    segment_pairs,
    sentence_pairs,
)

IS_NEXT, NOT_NEXT = 0, 1  # next_sentence_label values (as in BERT's code and Hugging Face)
LABEL_KEY = "next_sentence_label"


def _pair_inputs(documents, max_tokens: int, template: Template, drawn: str) -> tuple[list, int]:
    """The non-empty documents (at least two: NotNext ``drawn`` come from another one) and A+B's token budget."""
    docs = non_empty(documents)
    if len(docs) < 2:
        raise ValueError(f"NSP needs at least 2 non-empty documents to draw NotNext {drawn} from, got {len(docs)}")
    return docs, pair_budget(max_tokens, template)


def nsp_pairs(
    documents: Sequence[Doc], max_tokens: int, template: Template, seed: int = 0, short_seq_prob: float = 0.1
) -> list[dict]:
    """SEGMENT-PAIR inputs with NSP labels, following BERT's ``create_pretraining_data.py``.

    Chunks and A as in :func:`~minilm.objectives.segments.segment_pairs` (the target length is ``max_tokens`` minus
    the template's special tokens). Then, with probability 1/2, B is the rest of the chunk (IsNext, label 0);
    otherwise B is a run of sentences from a random position of another, uniformly chosen, document, long enough to
    fill the target (NotNext, label 1), and the chunk's unused sentences go back to be read again. A and B are
    truncated to fit ``[CLS] A [SEP] B [SEP]``.

    Differences from the original: the short target is redrawn for every input (the original draws it once per
    document and pass); the other document is drawn from the other documents directly (the original retries 10
    times); the data is read once (the original repeats it ``dupe_factor`` = 10 times with new masks: use
    dynamic masking instead) and not shuffled (the Trainer shuffles). As in the original, a chunk of a single
    sentence (a document's last one, or one sentence that fills the target) can only be NotNext, so slightly more
    than half of the pairs are NotNext. Empty sentences and documents are dropped; at least two documents needed.
    """
    docs, budget = _pair_inputs(documents, max_tokens, template, "segments")
    rng = random.Random(seed)

    def next_or_random(index: int, chunk: list[Sentence], a_end: int, target: int):
        a = [t for s in chunk[:a_end] for t in s]
        if len(chunk) > 1 and rng.random() >= 0.5:
            return a, [t for s in chunk[a_end:] for t in s], IS_NEXT, len(chunk)
        return a, random_segment(docs, index, target - len(a), rng), NOT_NEXT, a_end  # the sentences after A: unused

    return segment_pairs(docs, budget, template, next_or_random, LABEL_KEY, rng, short_seq_prob)


def sentence_pair(documents: Sequence[Doc], max_tokens: int, template: Template, seed: int = 0) -> list[dict]:
    """SENTENCE-PAIR+NSP: A is one sentence; B is the next one (IsNext) or, half the time, a random sentence
    of another document (NotNext).

    Reading each document from its first sentence: with probability 1/2 the pair (s_i, s_i+1) is IsNext and
    reading goes on at s_i+2; else (s_i, random sentence elsewhere) is NotNext and reading goes on at s_i+1.
    A document's last sentence is never an A (there is no IsNext for it), so the labels are exactly 50/50 in
    expectation. Over-long pairs are truncated longest-first to ``max_tokens``.
    """
    docs, budget = _pair_inputs(documents, max_tokens, template, "sentences")
    rng = random.Random(seed)

    def next_or_random(index: int, doc: list[Sentence], i: int):
        if rng.random() < 0.5:
            return list(doc[i]), list(doc[i + 1]), IS_NEXT, 2
        other = docs[other_index(index, len(docs), rng)]
        return list(doc[i]), list(other[rng.randrange(len(other))]), NOT_NEXT, 1

    return sentence_pairs(docs, budget, template, next_or_random, LABEL_KEY, rng)


def nsp_loss(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Mean cross-entropy of the IsNext/NotNext classifier: logits (B, 2), labels (B,) with 0 = IsNext."""
    return pair_classifier_loss(logits, labels)
