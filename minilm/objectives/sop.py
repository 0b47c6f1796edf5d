"""Sentence-order prediction (ALBERT): two consecutive segments of one document, in order or swapped.

ALBERT (Lan et al. 2020, §3.1 "Inter-sentence coherence loss") replaces NSP, whose NotNext pairs can be told apart
by topic alone, with a loss that "avoids topic prediction and instead focuses on modeling inter-sentence coherence":
it "uses as positive examples the same technique as BERT (two consecutive segments from the same document), and as
negative examples the same two consecutive segments but with their order swapped". The model classifies the [CLS]
vector:

    L_SOP(θ) = -1/B Σ_b log P_θ(y_b | [CLS] X_b [SEP] Y_b [SEP]),   y = 0 if (X, Y) = (A, B), 1 if (X, Y) = (B, A)

Labels as Hugging Face's ``AlbertForPreTraining`` reads them: ``sentence_order_label`` 0 = original order (A then
B), 1 = switched (B then A). :func:`sop_pairs` cuts BERT's segment pairs (ALBERT's inputs), :func:`sop_sentence_pairs`
pairs of single sentences; both share the cutting with NSP (:mod:`minilm.objectives.segments`), and
:func:`sop_loss` is NSP's classifier loss. ``make_examples(format, ..., pair_objective="sop")`` builds them from text
(:mod:`minilm.objectives.formats`).
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
    pair_budget,
    pair_classifier_loss,
    random_segment,
    segment_pairs,
    sentence_pairs,
)

IN_ORDER, SWAPPED = 0, 1  # sentence_order_label values (as in ALBERT's code and Hugging Face)
LABEL_KEY = "sentence_order_label"


def sop_pairs(
    documents: Sequence[Doc], max_tokens: int, template: Template, seed: int = 0, short_seq_prob: float = 0.1
) -> list[dict]:
    """SEGMENT-PAIR inputs with SOP labels, following ALBERT's ``create_pretraining_data.py``.

    Chunks and A as in :func:`~minilm.objectives.segments.segment_pairs` (the target length is ``max_tokens`` minus
    the template's special tokens), exactly as NSP cuts them; B is the rest of the chunk. With probability 1/2 the
    input is ``A B`` (label 0), otherwise ``B A`` (label 1): the same tokens, swapped. The pair is then truncated
    longest-first to fit ``[CLS] X [SEP] Y [SEP]``.

    A chunk of a single sentence (a document's last one, or one sentence that fills the target) has no second
    segment to swap. ALBERT's script treats it as its NSP code did: B is a run of sentences from a random position
    of another document, and the label is 1 (``is_random_next``, written as the sentence-order label). We do the
    same, so the data matches ALBERT's, and a few inputs are cross-document pairs labelled 1 (a topic cue SOP
    otherwise avoids; rare when documents are long and ``short_seq_prob`` small). Hence at least two non-empty
    documents are needed. Other differences from the original are NSP's (see :func:`~minilm.objectives.nsp.nsp_pairs`):
    short targets redrawn per input, the other document drawn directly, no ``dupe_factor``, no shuffling.
    """
    docs = non_empty(documents)
    if len(docs) < 2:
        raise ValueError(
            f"SOP needs at least 2 non-empty documents (a one-sentence chunk takes its B from another document, as "
            f"in ALBERT's create_pretraining_data.py), got {len(docs)}"
        )
    budget = pair_budget(max_tokens, template)
    rng = random.Random(seed)

    def in_order_or_swapped(index: int, chunk: list[Sentence], a_end: int, target: int):
        a = [t for s in chunk[:a_end] for t in s]
        if len(chunk) == 1:  # nothing to swap: ALBERT's fallback to a random B, labelled 1
            return a, random_segment(docs, index, target - len(a), rng), SWAPPED, 1
        b = [t for s in chunk[a_end:] for t in s]
        if rng.random() < 0.5:
            return b, a, SWAPPED, len(chunk)
        return a, b, IN_ORDER, len(chunk)

    return segment_pairs(docs, budget, template, in_order_or_swapped, LABEL_KEY, rng, short_seq_prob)


def sop_sentence_pairs(documents: Sequence[Doc], max_tokens: int, template: Template, seed: int = 0) -> list[dict]:
    """SENTENCE-PAIR inputs with SOP labels: sentences i and i+1 of a document, swapped half the time.

    Each document is read from its first sentence, two sentences per input (so the pairs never share a sentence and
    the labels are exactly 50/50 in expectation); a last sentence left alone is not used. Over-long pairs are
    truncated longest-first to ``max_tokens``.
    """
    docs = non_empty(documents)
    if not any(len(doc) >= 2 for doc in docs):
        raise ValueError("SOP sentence pairs need a document of at least 2 non-empty sentences, found none")
    budget = pair_budget(max_tokens, template)
    rng = random.Random(seed)

    def in_order_or_swapped(index: int, doc: list[Sentence], i: int):
        a, b = list(doc[i]), list(doc[i + 1])
        return (b, a, SWAPPED, 2) if rng.random() < 0.5 else (a, b, IN_ORDER, 2)

    return sentence_pairs(docs, budget, template, in_order_or_swapped, LABEL_KEY, rng)


def sop_loss(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Mean cross-entropy of the in-order/swapped classifier: logits (B, 2), labels (B,) with 0 = in order."""
    return pair_classifier_loss(logits, labels)
