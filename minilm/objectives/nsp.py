"""Inputs built from documents: BERT's next-sentence-prediction pairs and RoBERTa's four input formats.

BERT (Devlin et al. 2019, §3.1 "Task #2: Next Sentence Prediction"): "when choosing the sentences A and B for each
pre-training example, 50% of the time B is the actual next sentence that follows A (labeled as IsNext), and 50% of
the time it is a random sentence from the corpus (labeled as NotNext)". The model classifies the [CLS] vector:

    L_NSP(θ) = -1/B Σ_b log P_θ(y_b | [CLS] A_b [SEP] B_b [SEP]),   y = 0 (IsNext) or 1 (NotNext)

RoBERTa (Liu et al. 2019, §4.2) compares four ways to fill an input of at most 512 tokens; ``make_examples``
builds each from documents and a tokenizer:

=================  ==============================================================================================
segment_pair       "SEGMENT-PAIR+NSP: This follows the original input format used in BERT, with the NSP loss. Each
                   input has a pair of segments, which can each contain multiple natural sentences, but the total
                   combined length must be less than 512 tokens."  (``nsp_pairs``)
sentence_pair      "SENTENCE-PAIR+NSP: Each input contains a pair of natural sentences, either sampled from a
                   contiguous portion of one document or from separate documents. Since these inputs are
                   significantly shorter than 512 tokens, we increase the batch size so that the total number of
                   tokens remains similar to SEGMENT-PAIR+NSP. We retain the NSP loss."
full_sentences     "FULL-SENTENCES: Each input is packed with full sentences sampled contiguously from one or more
                   documents, such that the total length is at most 512 tokens. Inputs may cross document
                   boundaries. When we reach the end of one document, we begin sampling sentences from the next
                   document and add an extra separator token between documents. We remove the NSP loss."
doc_sentences      "DOC-SENTENCES: Inputs are constructed similarly to FULL-SENTENCES, except that they may not
                   cross document boundaries. Inputs sampled near the end of a document may be shorter than 512
                   tokens, so we dynamically increase the batch size in these cases to achieve a similar number of
                   total tokens as FULL-SENTENCES. We remove the NSP loss."
=================  ==============================================================================================

RoBERTa found DOC-SENTENCES slightly best and kept FULL-SENTENCES (fixed batch sizes are simpler); both beat the
pair formats, and dropping NSP matched or improved downstream results.

Every function here works on token ids: a document is a list of sentences, a sentence a list of ids. An example
is a dict of 1-D tensors ``input_ids``, ``token_type_ids``, ``special_tokens_mask`` (bool), ``word_ids`` (from
``make_examples``; -1 at special tokens) and, for the pair formats, a scalar ``next_sentence_label``.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from minilm.objectives.mlm import is_word_start, word_ids_from_starts

IS_NEXT, NOT_NEXT = 0, 1  # next_sentence_label values (as in BERT's code and Hugging Face)
FORMATS = ("segment_pair", "sentence_pair", "full_sentences", "doc_sentences")

Sentence = Sequence[int]
Doc = Sequence[Sentence]


# ---------------------------------------------------------------------------------------------------- templates


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


# ---------------------------------------------------------------------------------------------------- NSP pairs


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


def _pair_inputs(documents, max_tokens: int, template: Template, drawn: str) -> tuple[list, int]:
    """The non-empty documents (at least two: NotNext ``drawn`` come from another one) and A+B's token budget."""
    docs = _non_empty(documents)
    if len(docs) < 2:
        raise ValueError(f"NSP needs at least 2 non-empty documents to draw NotNext {drawn} from, got {len(docs)}")
    budget = max_tokens - template.n_special(pair=True)
    if budget < 2:
        raise ValueError(f"max_tokens={max_tokens} leaves no room for A and B after the template's special tokens")
    return docs, budget


def nsp_pairs(
    documents: Sequence[Doc], max_tokens: int, template: Template, seed: int = 0, short_seq_prob: float = 0.1
) -> list[dict]:
    """SEGMENT-PAIR inputs with NSP labels, following BERT's ``create_pretraining_data.py``.

    For each document: sentences accumulate into a chunk until it reaches the target length (``max_tokens``
    minus the template's special tokens; with probability ``short_seq_prob`` a random length in [2, target]
    instead, so the model also sees short inputs as in fine-tuning). A is the chunk's first ``a_end`` sentences
    (``a_end`` uniform in [1, len(chunk) - 1]). Then, with probability 1/2, B is the rest of the chunk (IsNext,
    label 0); otherwise B is a run of sentences from a random position of another, uniformly chosen, document,
    long enough to fill the target (NotNext, label 1), and the chunk's unused sentences go back to be read again.
    A and B are truncated longest-first (from the front or back at random) to fit ``[CLS] A [SEP] B [SEP]``.

    Differences from the original: the short target is redrawn for every input (the original draws it once per
    document and pass); the other document is drawn from the other documents directly (the original retries 10
    times); the data is read once (the original repeats it ``dupe_factor`` = 10 times with new masks: use
    dynamic masking instead) and not shuffled (the Trainer shuffles). As in the original, a chunk of a single
    sentence (a document's last one, or one sentence that fills the target) can only be NotNext, so slightly more
    than half of the pairs are NotNext. Empty sentences and documents are dropped; at least two documents needed.
    """
    docs, budget = _pair_inputs(documents, max_tokens, template, "segments")
    rng = random.Random(seed)
    examples = []
    for index, doc in enumerate(docs):
        target = _target_length(budget, short_seq_prob, rng)
        chunk: list[Sentence] = []
        length, i = 0, 0
        while i < len(doc):
            chunk.append(doc[i])
            length += len(doc[i])
            if i == len(doc) - 1 or length >= target:
                a_end = rng.randint(1, len(chunk) - 1) if len(chunk) >= 2 else 1
                a = [t for s in chunk[:a_end] for t in s]
                if len(chunk) == 1 or rng.random() < 0.5:
                    label, b = NOT_NEXT, []
                    other = docs[_other(index, len(docs), rng)]
                    for s in other[rng.randrange(len(other)) :]:
                        b.extend(s)
                        if len(b) >= target - len(a):
                            break
                    i -= len(chunk) - a_end  # the sentences after A were not used: read them again
                else:
                    label, b = IS_NEXT, [t for s in chunk[a_end:] for t in s]
                truncate_pair(a, b, budget, rng)
                examples.append({**template.build(a, b), "next_sentence_label": torch.tensor(label)})
                chunk, length = [], 0
                target = _target_length(budget, short_seq_prob, rng)
            i += 1
    return examples


def nsp_loss(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Mean cross-entropy of the IsNext/NotNext classifier: logits (B, 2), labels (B,) with 0 = IsNext."""
    return F.cross_entropy(logits.float(), labels)


# ---------------------------------------------------------------------------------------------------- RoBERTa


def segment_pair(documents: Sequence[Doc], max_tokens: int, template: Template, seed: int = 0, **options) -> list[dict]:
    """SEGMENT-PAIR+NSP: BERT's pairs of multi-sentence segments with NSP labels (= :func:`nsp_pairs`)."""
    return nsp_pairs(documents, max_tokens, template, seed, **options)


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
    examples = []
    for index, doc in enumerate(docs):
        i = 0
        while i < len(doc) - 1:
            if rng.random() < 0.5:
                label, a, b = IS_NEXT, list(doc[i]), list(doc[i + 1])
                i += 2
            else:
                other = docs[_other(index, len(docs), rng)]
                label, a, b = NOT_NEXT, list(doc[i]), list(other[rng.randrange(len(other))])
                i += 1
            truncate_pair(a, b, budget, rng)
            examples.append({**template.build(a, b), "next_sentence_label": torch.tensor(label)})
    return examples


def full_sentences(documents: Sequence[Doc], max_tokens: int, template: Template) -> list[dict]:
    """FULL-SENTENCES: contiguous sentences packed up to ``max_tokens``, crossing documents; no NSP.

    Sentences are taken in order and added to the current input while they fit; an input never splits a sentence,
    except one too long for any input, which is cut into input-sized pieces. Where an input runs from one document
    into the next, the template's separator (e.g. [SEP] or </s>) goes between them, marked as a special token.
    """
    return _pack(documents, max_tokens, template, cross_documents=True)


def doc_sentences(documents: Sequence[Doc], max_tokens: int, template: Template) -> list[dict]:
    """DOC-SENTENCES: like FULL-SENTENCES, but an input never crosses a document boundary, so the last input of
    each document is usually shorter (RoBERTa raised the batch size for those; here they are simply short)."""
    return _pack(documents, max_tokens, template, cross_documents=False)


def make_examples(
    format: str,
    documents: Sequence,
    tokenizer,
    max_tokens: int,
    seed: int = 0,
    short_seq_prob: float = 0.1,
    word_ids: bool = True,
) -> list[dict]:
    """Examples in one of RoBERTa's input formats (``FORMATS``) from documents and a tokenizer.

    ``documents``: ``minilm.data.Document`` objects (their ``.sentences()`` are used) or lists of sentence strings.
    Sentences are tokenized without special tokens, the byte-level BPE families (roberta, gpt2) with a space
    before each sentence, as it has in running text. The tokenizer's family gives the template (BERT's
    ``[CLS] A [SEP] B [SEP]``, RoBERTa's ``<s> A </s></s> B </s>``, ...). ``word_ids`` adds each token's word
    index (see ``minilm.objectives.mlm.is_word_start``) for whole-word masking. ``seed`` and ``short_seq_prob``
    only matter for the pair formats.
    """
    if format not in FORMATS:
        raise ValueError(f"unknown input format {format!r}: choose one of {', '.join(FORMATS)}")
    docs = tokenize_documents(documents, tokenizer)
    template = Template.from_tokenizer(tokenizer)
    if format == "segment_pair":
        examples = nsp_pairs(docs, max_tokens, template, seed, short_seq_prob)
    elif format == "sentence_pair":
        examples = sentence_pair(docs, max_tokens, template, seed)
    elif format == "full_sentences":
        examples = full_sentences(docs, max_tokens, template)
    else:
        examples = doc_sentences(docs, max_tokens, template)
    if word_ids:
        vocabulary = [tokenizer.id_to_token(i) or "" for i in range(tokenizer.vocab_size)]
        starts = is_word_start(vocabulary, tokenizer.family)
        for e in examples:
            e["word_ids"] = word_ids_from_starts(starts[e["input_ids"]][None], e["special_tokens_mask"][None])[0]
    return examples


def tokenize_documents(documents: Sequence, tokenizer) -> list[list[list[int]]]:
    """Each document as a list of tokenized sentences (ids, no special tokens); see :func:`make_examples`."""
    space = " " if tokenizer.spec.model == "bpe" else ""
    out = []
    for doc in documents:
        sentences = doc.sentences() if hasattr(doc, "sentences") else list(doc)
        sentences = [space + s for s in sentences if s.strip()]
        ids = tokenizer(sentences, padding=False, add_special_tokens=False).input_ids if sentences else []
        out.append([s for s in ids if s])
    return out


# ---------------------------------------------------------------------------------------------------- helpers


def _non_empty(documents: Sequence[Doc]) -> list[list[list[int]]]:
    docs = [[list(s) for s in doc if len(s)] for doc in documents]
    return [doc for doc in docs if doc]


def _target_length(budget: int, short_seq_prob: float, rng: random.Random) -> int:
    return rng.randint(2, budget) if rng.random() < short_seq_prob else budget


def _other(index: int, n: int, rng: random.Random) -> int:
    """A document index drawn uniformly from the n - 1 indices other than ``index``."""
    other = rng.randrange(n - 1)
    return other + 1 if other >= index else other


def _pack(documents: Sequence[Doc], max_tokens: int, template: Template, cross_documents: bool) -> list[dict]:
    budget = max_tokens - template.n_special(pair=False)
    if budget < 1:
        raise ValueError(f"max_tokens={max_tokens} leaves no room for text after the template's special tokens")
    examples: list[dict] = []
    ids: list[int] = []
    special: list[bool] = []

    def emit() -> None:
        if ids:
            examples.append(template.build(ids, a_special=special))
        ids.clear()
        special.clear()

    for doc in _non_empty(documents):
        if not cross_documents:
            emit()
        new_document = True
        for sentence in doc:
            for start in range(0, len(sentence), budget):  # one piece unless the sentence is longer than an input
                piece = sentence[start : start + budget]
                separator = [template.sep_id] if new_document and ids else []
                if len(ids) + len(separator) + len(piece) > budget:
                    emit()
                    separator = []
                ids.extend(separator + piece)
                special.extend([True] * len(separator) + [False] * len(piece))
                new_document = False
    emit()
    return examples
