"""RoBERTa's four input formats (Liu et al. 2019, §4.2): ways to fill an input of at most 512 tokens from
documents. :func:`make_examples` builds each from documents and a tokenizer:

=================  ==============================================================================================
segment_pair       "SEGMENT-PAIR+NSP: This follows the original input format used in BERT, with the NSP loss. Each
                   input has a pair of segments, which can each contain multiple natural sentences, but the total
                   combined length must be less than 512 tokens."  (:func:`minilm.objectives.nsp.nsp_pairs`)
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

The pair formats serve either pair objective (``PAIR_OBJECTIVES``): with ``pair_objective="sop"``, the same
pairs are labelled for ALBERT's sentence-order prediction (:mod:`minilm.objectives.sop`) instead of NSP, e.g.
``make_examples("segment_pair", docs, tok, 512, pair_objective="sop")`` for ALBERT's inputs.

An example is a dict of 1-D tensors ``input_ids``, ``token_type_ids``, ``special_tokens_mask`` (bool), ``word_ids``
(-1 at special tokens) and, for the pair formats, a scalar ``next_sentence_label`` (NSP) or ``sentence_order_label``
(SOP); the special tokens go where the tokenizer's :class:`~minilm.objectives.segments.Template` puts them.
"""

from __future__ import annotations

from collections.abc import Sequence

from minilm.objectives.mlm import is_word_start, word_ids_from_starts
from minilm.objectives.nsp import nsp_pairs, sentence_pair
from minilm.objectives.segments import Doc, Template, non_empty
from minilm.objectives.sop import sop_pairs, sop_sentence_pairs

FORMATS = ("segment_pair", "sentence_pair", "full_sentences", "doc_sentences")
PAIR_FORMATS = ("segment_pair", "sentence_pair")  # the formats with a pair label (NSP's or SOP's)
PAIR_OBJECTIVES = ("nsp", "sop")  # the labels of a pair format: next sentence or sentence order


def segment_pair(documents: Sequence[Doc], max_tokens: int, template: Template, seed: int = 0, **options) -> list[dict]:
    """SEGMENT-PAIR+NSP: BERT's pairs of multi-sentence segments with NSP labels (= :func:`nsp_pairs`)."""
    return nsp_pairs(documents, max_tokens, template, seed, **options)


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
    pair_objective: str | None = None,
) -> list[dict]:
    """Examples in one of RoBERTa's input formats (``FORMATS``) from documents and a tokenizer.

    ``documents``: ``minilm.data.Document`` objects (their ``.sentences()`` are used) or lists of sentence strings.
    Sentences are tokenized without special tokens, the byte-level BPE families (roberta, gpt2) with a space
    before each sentence, as it has in running text. The tokenizer's family gives the template (BERT's
    ``[CLS] A [SEP] B [SEP]``, RoBERTa's ``<s> A </s></s> B </s>``, ...). ``word_ids`` adds each token's word
    index (see ``minilm.objectives.mlm.is_word_start``) for whole-word masking. ``seed`` and ``short_seq_prob``
    only matter for the pair formats (``short_seq_prob`` for segment_pair alone).

    ``pair_objective`` labels the pairs of a pair format: ``"nsp"`` (None means it: BERT's IsNext/NotNext,
    ``next_sentence_label``) or ``"sop"`` (ALBERT's in order/swapped, ``sentence_order_label``). Naming one for
    full_sentences or doc_sentences, which have no pairs, is an error.
    """
    if format not in FORMATS:
        raise ValueError(f"unknown input format {format!r}: choose one of {', '.join(FORMATS)}")
    if pair_objective is not None and pair_objective not in PAIR_OBJECTIVES:
        raise ValueError(f"unknown pair_objective {pair_objective!r}: choose one of {', '.join(PAIR_OBJECTIVES)}")
    if pair_objective is not None and format not in PAIR_FORMATS:
        pairs = " or ".join(PAIR_FORMATS)
        raise ValueError(f"pair_objective={pair_objective!r} needs sentence pairs: format {pairs}, not {format}")
    docs = tokenize_documents(documents, tokenizer)
    template = Template.from_tokenizer(tokenizer)
    sop = pair_objective == "sop"
    if format == "segment_pair":
        examples = (sop_pairs if sop else nsp_pairs)(docs, max_tokens, template, seed, short_seq_prob)
    elif format == "sentence_pair":
        examples = (sop_sentence_pairs if sop else sentence_pair)(docs, max_tokens, template, seed)
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

    for doc in non_empty(documents):
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
