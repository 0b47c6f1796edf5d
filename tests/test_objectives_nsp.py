"""NSP pairs and RoBERTa's input formats, on synthetic documents whose token ids say where they come from."""

import math
import os
import random

import pytest
import torch

from minilm.objectives.formats import doc_sentences, full_sentences, make_examples
from minilm.objectives.nsp import IS_NEXT, NOT_NEXT, nsp_loss, nsp_pairs, sentence_pair
from minilm.objectives.segments import Template, pair_budget, segment_pairs, truncate_pair

CLS, SEP = 2, 3
BERT = Template.bert(CLS, SEP)
STRIDE = 100_000  # document d's tokens are STRIDE * (d + 1) + 0, 1, 2, ... in reading order


def documents(n_docs=20, n_sentences=120, seed=0, lengths=(2, 14)):
    """Documents of sentences whose ids are consecutive within a document and tell the document apart."""
    rng = random.Random(seed)
    docs = []
    for d in range(n_docs):
        next_id, doc = STRIDE * (d + 1), []
        for _ in range(n_sentences):
            length = rng.randint(*lengths)
            doc.append(list(range(next_id, next_id + length)))
            next_id += length
        docs.append(doc)
    return docs


def doc_of(token: int) -> int:
    return token // STRIDE - 1


def sentence_index(docs):
    """token -> (document, sentence)."""
    return {t: (d, s) for d, doc in enumerate(docs) for s, sentence in enumerate(doc) for t in sentence}


def split_pair(example):
    """A and B of a [CLS] A [SEP] B [SEP] example, checking the layout, segment ids and special-token mask."""
    ids, types, special = (example[k].tolist() for k in ("input_ids", "token_type_ids", "special_tokens_mask"))
    first = ids.index(SEP)
    assert ids[0] == CLS and ids[-1] == SEP and SEP not in ids[first + 1 : -1]
    assert special == [i in (0, first, len(ids) - 1) for i in range(len(ids))]
    assert types == [0] * (first + 1) + [1] * (len(ids) - first - 1)  # 0 for [CLS] A [SEP], 1 for B [SEP]
    a, b = ids[1:first], ids[first + 1 : -1]
    assert a and b
    return a, b


def assert_binomial(count, n, p, sigmas=4.0):
    sd = math.sqrt(n * p * (1 - p))
    assert abs(count - n * p) <= sigmas * sd, f"{count} of {n}, expected {p:.3f} ± {sigmas * sd / n:.3f}"


def contiguous(tokens):
    return tokens == list(range(tokens[0], tokens[0] + len(tokens)))


# ---------------------------------------------------------------------------------------------- NSP


def test_nsp_pairs_labels_provenance_and_layout():
    max_tokens = 64
    # Long documents and no short targets: almost every chunk has several sentences, so IsNext is drawn at 50%
    # (a single-sentence chunk, e.g. at a document's end or with a short target, can only be NotNext).
    examples = nsp_pairs(documents(n_docs=10, n_sentences=800), max_tokens, BERT, seed=0, short_seq_prob=0.0)
    labels = [int(e["next_sentence_label"]) for e in examples]
    assert_binomial(labels.count(IS_NEXT), len(labels), 0.5)
    assert sum(len(e["input_ids"]) >= max_tokens - 14 for e in examples) > 0.95 * len(examples)  # inputs fill up

    examples += nsp_pairs(documents(n_docs=20, n_sentences=60, seed=1), max_tokens, BERT, seed=1)  # short ones too
    untruncated_is_next = 0
    for e in examples:
        assert len(e["input_ids"]) <= max_tokens
        a, b = split_pair(e)
        assert contiguous(a) and contiguous(b)  # truncation only takes tokens off the ends
        assert len({doc_of(t) for t in a}) == 1 and len({doc_of(t) for t in b}) == 1
        if int(e["next_sentence_label"]) == IS_NEXT:
            assert doc_of(b[0]) == doc_of(a[0]) and b[0] > a[-1]  # B follows A in the same document
            if len(a) + len(b) < max_tokens - 3:  # nothing was truncated: B starts right where A ends
                assert b[0] == a[-1] + 1
                untruncated_is_next += 1
        else:
            assert doc_of(b[0]) != doc_of(a[0])  # B comes from another document
    assert untruncated_is_next > 0


def test_nsp_pairs_are_seeded_and_short_sequences_optional():
    docs = documents(n_docs=4, n_sentences=30)
    a, b = nsp_pairs(docs, 48, BERT, seed=3), nsp_pairs(docs, 48, BERT, seed=3)
    assert all(torch.equal(x["input_ids"], y["input_ids"]) for x, y in zip(a, b, strict=True))
    c = nsp_pairs(docs, 48, BERT, seed=4)
    assert len(a) != len(c) or not all(torch.equal(x["input_ids"], y["input_ids"]) for x, y in zip(a, c, strict=True))
    mean_length = lambda examples: sum(len(e["input_ids"]) for e in examples) / len(examples)
    assert mean_length(nsp_pairs(docs, 48, BERT, short_seq_prob=1.0)) < mean_length(nsp_pairs(docs, 48, BERT, 0, 0.0))
    with pytest.raises(ValueError, match="2 non-empty documents"):
        nsp_pairs(docs[:1] + [[]], 48, BERT)
    with pytest.raises(ValueError, match="max_tokens"):
        nsp_pairs(docs, 4, BERT)


def test_another_pair_objective_reuses_the_segment_cutting():
    """A sentence-order objective (ALBERT's SOP: two consecutive segments, swapped half the time) written in a few
    lines on segment_pairs: the pairs are consecutive, swapped ones read backwards, the labels about 50/50."""
    docs = documents(n_docs=6, n_sentences=200)
    rng = random.Random(0)

    def in_order_or_swapped(index, chunk, a_end, target):
        a, b = [t for s in chunk[:a_end] for t in s], [t for s in chunk[a_end:] for t in s]
        swapped = len(chunk) > 1 and rng.random() < 0.5
        return (b, a, 1, len(chunk)) if swapped else (a, b, 0, len(chunk))

    examples = segment_pairs(docs, pair_budget(64, BERT), BERT, in_order_or_swapped, "sentence_order_label", rng, 0.0)
    pairs = [e for e in examples if (e["token_type_ids"] == 1).sum() > 1]  # a one-sentence chunk has no B
    assert len(pairs) > 0.95 * len(examples) and all(len(e["input_ids"]) <= 64 for e in examples)
    labels = [int(e["sentence_order_label"]) for e in pairs]
    assert_binomial(labels.count(1), len(labels), 0.5)
    for e, label in zip(pairs, labels, strict=True):
        first, second = split_pair(e)
        assert contiguous(first) and contiguous(second) and doc_of(first[0]) == doc_of(second[0])
        assert first[0] > second[-1] if label else second[0] > first[-1]  # swapped pairs read backwards
    with pytest.raises(ValueError, match="leaves no room for A and B"):
        pair_budget(4, BERT)


def test_truncate_pair_longest_first():
    a, b = list(range(10)), list(range(100, 104))
    truncate_pair(a, b, 8)
    assert a == [0, 1, 2, 3] and b == [100, 101, 102, 103]
    a, b = list(range(10)), list(range(100, 104))
    truncate_pair(a, b, 7, random.Random(0))
    assert len(a) + len(b) == 7 and len(b) == 3 and len(a) == 4 and contiguous(a) and contiguous(b)


def test_nsp_loss():
    logits, labels = torch.randn(6, 2), torch.tensor([0, 1, 1, 0, 0, 1])
    expected = -torch.log_softmax(logits, -1)[torch.arange(6), labels].mean()
    torch.testing.assert_close(nsp_loss(logits, labels), expected)


# ---------------------------------------------------------------------------------------------- RoBERTa formats


def test_sentence_pair_uses_single_sentences():
    docs = documents(n_docs=10, n_sentences=60)
    where = sentence_index(docs)
    examples = sentence_pair(docs, 64, BERT, seed=0)  # sentences have at most 14 tokens: nothing is truncated
    labels = [int(e["next_sentence_label"]) for e in examples]
    assert_binomial(labels.count(IS_NEXT), len(labels), 0.5)
    for e, label in zip(examples, labels, strict=True):
        a, b = split_pair(e)
        (da, sa), (db, sb) = where[a[0]], where[b[0]]
        assert a == docs[da][sa] and b == docs[db][sb]  # each side is one whole natural sentence
        assert (db == da and sb == sa + 1) if label == IS_NEXT else db != da
    short = sentence_pair(docs, 12, BERT, seed=0)  # truncated: A and B keep parts of one sentence each
    assert all(len(e["input_ids"]) <= 12 for e in short)
    for a, b in map(split_pair, short):
        assert where[a[0]] == where[a[-1]] and where[b[0]] == where[b[-1]] and contiguous(a) and contiguous(b)


def content_and_docs(example):
    """The non-special tokens of a single-segment example, and the documents they come from, in order."""
    ids, special = example["input_ids"].tolist(), example["special_tokens_mask"].tolist()
    assert ids[0] == CLS and ids[-1] == SEP and special[0] and special[-1]
    assert (example["token_type_ids"] == 0).all() and "next_sentence_label" not in example
    return [t for t, s in zip(ids, special, strict=True) if not s], ids[1:-1], special[1:-1]


def test_full_sentences_pack_across_documents_with_a_separator():
    docs = documents(n_docs=12, n_sentences=15)
    starts = {s[0] for doc in docs for s in doc}
    ends = {s[-1] for doc in docs for s in doc}
    examples = full_sentences(docs, 64, BERT)
    stream, crossed = [], 0
    for e in examples:
        assert len(e["input_ids"]) <= 64
        content, inner, inner_special = content_and_docs(e)
        assert content[0] in starts and content[-1] in ends  # whole sentences only
        stream += content
        for i, (token, special) in enumerate(zip(inner, inner_special, strict=True)):
            if special:  # a separator: only between two documents
                assert token == SEP and doc_of(inner[i + 1]) == doc_of(inner[i - 1]) + 1
                crossed += 1
            elif i + 1 < len(inner) and not inner_special[i + 1]:
                assert doc_of(inner[i + 1]) == doc_of(token)  # no document change without a separator
    assert crossed > 0
    assert stream == [t for doc in docs for s in doc for t in s]  # every sentence once, in order
    assert sum(len(e["input_ids"]) > 50 for e in examples) >= len(examples) - 1  # packed full


def test_doc_sentences_never_cross_documents():
    docs = documents(n_docs=12, n_sentences=15)
    examples = doc_sentences(docs, 64, BERT)
    stream = []
    for e in examples:
        assert len(e["input_ids"]) <= 64
        content, _, inner_special = content_and_docs(e)
        assert not any(inner_special) and len({doc_of(t) for t in content}) == 1
        stream += content
    assert stream == [t for doc in docs for s in doc for t in s]
    ends = [int(e["input_ids"][-2]) for e in examples]
    assert len(examples) > len(docs) and all(doc[-1][-1] in ends for doc in docs)  # each document ends an input
    assert min(len(e["input_ids"]) for e in examples) < 40  # inputs at document ends are short


def test_packing_cuts_a_sentence_longer_than_an_input():
    docs = [[list(range(100, 125))], [list(range(200, 203))]]
    examples = full_sentences(docs, 12, BERT)  # 10 tokens of text per input
    assert [e["input_ids"].tolist() for e in examples] == [
        [CLS, *range(100, 110), SEP],
        [CLS, *range(110, 120), SEP],
        [CLS, *range(120, 125), SEP, 200, 201, 202, SEP],
    ]
    assert examples[-1]["special_tokens_mask"].tolist() == [True] + [False] * 5 + [True] + [False] * 3 + [True]
    assert [len(e["input_ids"]) for e in doc_sentences(docs, 12, BERT)] == [12, 12, 7, 5]


# ---------------------------------------------------------------------------------------------- make_examples


WORDS = (
    "the a cat dog sat ran home slowly quickly garden gardener unbelievable believe walked walking table "
    "under over river mountain bright darkness wonderful terrible happy sad of and to in"
).split()


def text_documents(n_docs=6, n_sentences=25, seed=0):
    rng = random.Random(seed)
    sentence = lambda: " ".join(rng.choice(WORDS) for _ in range(rng.randint(3, 12))).capitalize() + "."
    return [[sentence() for _ in range(n_sentences)] for _ in range(n_docs)]


@pytest.fixture(scope="module")
def tokenizers():
    from minilm.tokenizers import train_tokenizer

    lines = [s for doc in text_documents(seed=1) for s in doc]
    return {family: train_tokenizer(lines, family, vocab_size=300) for family in ("bert", "roberta")}


@pytest.mark.parametrize("family", ["bert", "roberta"])
@pytest.mark.parametrize("format", ["segment_pair", "sentence_pair", "full_sentences", "doc_sentences"])
def test_make_examples(tokenizers, family, format):
    tok = tokenizers[family]
    docs = text_documents()
    examples = make_examples(format, docs, tok, max_tokens=40, seed=0)
    assert examples
    pair = format.endswith("pair")
    for e in examples:
        ids = e["input_ids"]
        assert len(ids) <= 40 and ids[0] == tok.cls_id and ids[-1] == tok.sep_id
        assert ("next_sentence_label" in e) == pair
        special = e["special_tokens_mask"]
        assert torch.equal(special, torch.isin(ids, torch.tensor(tok.special_ids)))
        assert torch.equal(e["word_ids"] == -1, special) and e["word_ids"].max() >= 0
        if family == "roberta":
            assert (e["token_type_ids"] == 0).all()
            if pair:
                seps = (ids == tok.sep_id).nonzero().squeeze(1).tolist()
                assert len(seps) == 3 and seps[1] == seps[0] + 1  # <s> A </s></s> B </s>
        elif pair:
            assert e["token_type_ids"][-1] == 1 and e["token_type_ids"][0] == 0
    if format in ("full_sentences", "doc_sentences"):  # nothing lost: the inputs decode back to the documents
        decoded = "".join("".join(tok.decode(e["input_ids"]).split()) for e in examples)
        original = "".join("".join(sentence.split()) for doc in docs for sentence in doc)
        assert decoded == (original.lower() if family == "bert" else original)  # bert lowercases


def test_make_examples_word_ids_match_the_tokenizer(tokenizers):
    tok = tokenizers["bert"]
    docs = text_documents(n_docs=2, n_sentences=3)
    (example,) = make_examples("full_sentences", docs[:1], tok, max_tokens=200)
    batch = tok(" ".join(docs[0]), return_tensors="pt")
    from minilm.objectives.mlm import word_ids_from_encoding

    assert torch.equal(example["input_ids"], batch.input_ids[0])
    assert torch.equal(example["word_ids"], word_ids_from_encoding(batch)[0])
    # byte-level BPE: each sentence is tokenized as in running text, after a space ("Ġ" starts its first word)
    tok = tokenizers["roberta"]
    (example,) = make_examples("doc_sentences", docs[:1], tok, max_tokens=200)
    assert example["input_ids"].tolist() == tok.encode(" " + " ".join(docs[0]))
    n_words = len(" ".join(docs[0]).replace(".", "").split())  # "Ġword" and "." are one word here
    assert int(example["word_ids"].max()) + 1 == n_words
    with pytest.raises(ValueError, match="format"):
        make_examples("full_documents", docs, tok, 64)


@pytest.mark.skipif("MINILM_DATA_DIR" not in os.environ, reason="needs the data mirror")
def test_make_examples_from_gutenberg_documents(tokenizers):
    from minilm.data import Document, load_gutenberg

    books = load_gutenberg(["Alice's Adventures in Wonderland", "Pride and Prejudice"])
    docs = [Document(b.title, b.paragraphs[20:60]) for b in books]
    examples = make_examples("segment_pair", docs, tokenizers["bert"], max_tokens=64, seed=0)
    assert len(examples) > 10 and all(len(e["input_ids"]) <= 64 for e in examples)
    assert {int(e["next_sentence_label"]) for e in examples} == {IS_NEXT, NOT_NEXT}
