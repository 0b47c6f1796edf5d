"""Documents of tokenized sentences into model inputs: where the special tokens go (:class:`Template`), pairs of
segments cut from documents as BERT's data script cuts them (:func:`segment_pairs`) and pairs of single sentences
(:func:`sentence_pairs`), which next sentence prediction (:mod:`minilm.objectives.nsp`), sentence-order prediction
(:mod:`minilm.objectives.sop`) and any other pair objective build on, with the loss of their classifier
(:func:`pair_classifier_loss`).

Every function here works on token ids: a document is a list of sentences, a sentence a list of ids. An example
is a dict of 1-D tensors ``input_ids``, ``token_type_ids``, ``special_tokens_mask`` (bool) and, for pairs, a
scalar label.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch
import torch.nn.functional as F

Sentence = Sequence[int]
Doc = Sequence[Sentence]
# (document index, chunk of sentences, a_end, target length) -> (A ids, B ids, label, sentences of the chunk used)
PairMaker = Callable[[int, list[Sentence], int, int], tuple[list[int], list[int], int, int]]
# (document index, document, sentence index i) -> (A ids, B ids, label, sentences read from i on)
SentencePairMaker = Callable[[int, list[Sentence], int], tuple[list[int], list[int], int, int]]


@dataclass(frozen=True)
class Template:
    """Where the special tokens go around one segment (``single``) or a pair (``pair``), with segment ids.

    Each part is ``("A", type_id)``, ``("B", type_id)`` or ``(token_id, type_id)``. ``sep_id`` is the extra
    separator FULL-SENTENCES puts between documents.
    """

    single: tuple[tuple[int | str, int], ...]
    pair: tuple[tuple[int | str, int], ...]
    sep_id: int

    @classmethod
    def bert(cls, cls_id: int, sep_id: int) -> Template:
        """[CLS] A [SEP] with segment ids 0; [CLS] A [SEP] B [SEP] with 0 up to the first [SEP], then 1."""
        pair = ((cls_id, 0), ("A", 0), (sep_id, 0), ("B", 1), (sep_id, 1))
        return cls(((cls_id, 0), ("A", 0), (sep_id, 0)), pair, sep_id)

    @classmethod
    def roberta(cls, bos_id: int, eos_id: int) -> Template:
        """<s> A </s>; <s> A </s> </s> B </s>; every segment id 0 (RoBERTa has no segment embeddings to speak of)."""
        pair = ((bos_id, 0), ("A", 0), (eos_id, 0), (eos_id, 0), ("B", 0), (eos_id, 0))
        return cls(((bos_id, 0), ("A", 0), (eos_id, 0)), pair, eos_id)

    @classmethod
    def from_tokenizer(cls, tokenizer) -> Template:
        """The templates of a ``minilm.tokenizers.Tokenizer``'s family (e.g. ``"[CLS] $A [SEP] $B:1 [SEP]:1"``)."""

        def parse(template: str) -> tuple[tuple[int | str, int], ...]:
            parts = []
            for item in template.split():
                name, _, type_id = item.partition(":")
                parts.append((name[1:] if name.startswith("$") else tokenizer.token_to_id(name), int(type_id or 0)))
            return tuple(parts)

        if tokenizer.sep_id is None:
            raise ValueError(f"the {tokenizer.family} tokenizer has no separator (eos) token")
        return cls(parse(tokenizer.spec.single), parse(tokenizer.spec.pair), tokenizer.sep_id)

    def n_special(self, pair: bool = False) -> int:
        """How many special tokens the template adds to one segment (or to a pair)."""
        return sum(not isinstance(part, str) for part, _ in (self.pair if pair else self.single))

    def build(self, a: Sentence, b: Sentence | None = None, a_special: Sequence[bool] | None = None) -> dict:
        """input_ids, token_type_ids and special_tokens_mask (bool) of A (or of A and B) in the template.

        ``a_special`` marks tokens of A that are special too (FULL-SENTENCES' separators between documents).
        """
        ids, types, special = [], [], []
        for part, type_id in self.single if b is None else self.pair:
            if isinstance(part, str):
                segment = a if part == "A" else b
                ids += segment
                types += [type_id] * len(segment)
                special += list(a_special) if part == "A" and a_special is not None else [False] * len(segment)
            else:
                ids.append(part)
                types.append(type_id)
                special.append(True)
        return {
            "input_ids": torch.tensor(ids, dtype=torch.long),
            "token_type_ids": torch.tensor(types, dtype=torch.long),
            "special_tokens_mask": torch.tensor(special, dtype=torch.bool),
        }


# ---------------------------------------------------------------------------------------------------- pairs


def truncate_pair(a: list[int], b: list[int], max_tokens: int, rng: random.Random | None = None) -> None:
    """Cut A and B in place, longest first, one token at a time, until ``len(a) + len(b) <= max_tokens``.

    With ``rng``, each token comes off the front or the back at random, as BERT's ``truncate_seq_pair`` does "to
    add more randomness and avoid biases"; without, always off the back.
    """
    while len(a) + len(b) > max_tokens:
        longer = a if len(a) > len(b) else b
        if rng is not None and rng.random() < 0.5:
            del longer[0]
        else:
            longer.pop()


def pair_budget(max_tokens: int, template: Template) -> int:
    """The tokens A and B may share in an input of ``max_tokens``: what the pair template's special tokens leave."""
    budget = max_tokens - template.n_special(pair=True)
    if budget < 2:
        raise ValueError(f"max_tokens={max_tokens} leaves no room for A and B after the template's special tokens")
    return budget


def segment_pairs(
    docs: Sequence[Doc],
    budget: int,
    template: Template,
    make_pair: PairMaker,
    label_key: str,
    rng: random.Random,
    short_seq_prob: float = 0.1,
) -> list[dict]:
    """Pairs of segments cut from each document as BERT's ``create_pretraining_data.py`` cuts them.

    For each document: sentences accumulate into a chunk until it reaches the target length (``budget``; with
    probability ``short_seq_prob`` a random length in [2, budget] instead, so the model also sees short inputs as in
    fine-tuning). A is the chunk's first ``a_end`` sentences, ``a_end`` uniform in [1, len(chunk) - 1].
    ``make_pair(index, chunk, a_end, target)`` decides the two segments and the label (the objective's part: NSP's
    next or random B, SOP's order) and how many of the chunk's sentences it used; the unused ones are read again.
    The segments are truncated longest-first (from the front or back at random) to fit ``budget``; the label goes
    under ``label_key``.
    Random numbers come from ``rng``, in a fixed order.
    """
    if not 0.0 <= short_seq_prob <= 1.0:
        raise ValueError(f"short_seq_prob={short_seq_prob} must be in [0, 1] (BERT's and ALBERT's: 0.1)")
    examples = []
    for index, doc in enumerate(docs):
        target = target_length(budget, short_seq_prob, rng)
        chunk: list[Sentence] = []
        length, i = 0, 0
        while i < len(doc):
            chunk.append(doc[i])
            length += len(doc[i])
            if i == len(doc) - 1 or length >= target:
                a_end = rng.randint(1, len(chunk) - 1) if len(chunk) >= 2 else 1
                a, b, label, used = make_pair(index, chunk, a_end, target)
                i -= len(chunk) - used  # the sentences make_pair did not use are read again
                truncate_pair(a, b, budget, rng)
                examples.append({**template.build(a, b), label_key: torch.tensor(label)})
                chunk, length = [], 0
                target = target_length(budget, short_seq_prob, rng)
            i += 1
    return examples


def sentence_pairs(
    docs: Sequence[Doc],
    budget: int,
    template: Template,
    make_pair: SentencePairMaker,
    label_key: str,
    rng: random.Random,
) -> list[dict]:
    """Pairs of single sentences (RoBERTa's SENTENCE-PAIR), each document read from its first sentence.

    ``make_pair(index, doc, i)`` gives A, B and the label for sentence i of document ``index`` (never its last
    sentence: every A has a next sentence) and how many sentences it read, where reading goes on. A and B are
    truncated longest-first (from the front or back at random) to fit ``budget``; the label goes under
    ``label_key``. Random numbers come from ``rng``, in a fixed order.
    """
    examples = []
    for index, doc in enumerate(docs):
        i = 0
        while i < len(doc) - 1:
            a, b, label, used = make_pair(index, doc, i)
            i += used
            truncate_pair(a, b, budget, rng)
            examples.append({**template.build(a, b), label_key: torch.tensor(label)})
    return examples


def random_segment(docs: Sequence[Doc], index: int, length: int, rng: random.Random) -> list[int]:
    """A run of sentences of a document other than ``index`` (uniformly drawn), from a uniformly drawn sentence on,
    until it holds ``length`` tokens or the document ends: the random B of BERT's NotNext pairs."""
    other, b = docs[other_index(index, len(docs), rng)], []
    for s in other[rng.randrange(len(other)) :]:
        b.extend(s)
        if len(b) >= length:
            break
    return b


def pair_classifier_loss(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Mean cross-entropy -1/B Σ_b log P(y_b | pair_b) of a classifier over sentence pairs (NSP, SOP).

    logits (B, C) (C = 2 for NSP and SOP), labels (B,) class indices.
    """
    if logits.dim() != 2 or labels.shape != logits.shape[:1]:
        shapes = f"logits {tuple(logits.shape)}, labels {tuple(labels.shape)}"
        raise ValueError(f"a pair classifier's loss needs logits (B, C) and labels (B,), got {shapes}")
    return F.cross_entropy(logits.float(), labels)


# ---------------------------------------------------------------------------------------------------- helpers


def non_empty(documents: Sequence[Doc]) -> list[list[list[int]]]:
    """The documents without their empty sentences, and without documents left empty."""
    docs = [[list(s) for s in doc if len(s)] for doc in documents]
    return [doc for doc in docs if doc]


def target_length(budget: int, short_seq_prob: float, rng: random.Random) -> int:
    return rng.randint(2, budget) if rng.random() < short_seq_prob else budget


def other_index(index: int, n: int, rng: random.Random) -> int:
    """An index drawn uniformly from the n - 1 indices other than ``index``."""
    other = rng.randrange(n - 1)
    return other + 1 if other >= index else other
