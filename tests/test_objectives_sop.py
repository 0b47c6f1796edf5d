"""Sentence-order prediction (ALBERT) on synthetic documents whose token ids say where they come from; SOP through
make_examples; NSP's pairs unchanged by the segment code SOP now shares."""

import hashlib
import math
import random

import pytest
import torch
import torch.nn.functional as F

from minilm.objectives.formats import make_examples
from minilm.objectives.nsp import IS_NEXT, NOT_NEXT, nsp_pairs, sentence_pair
from minilm.objectives.segments import Template
from minilm.objectives.sop import IN_ORDER, SWAPPED, sop_loss, sop_pairs, sop_sentence_pairs

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


def contiguous(tokens):
    return tokens == list(range(tokens[0], tokens[0] + len(tokens)))


def split_pair(example):
    """The two segments of a [CLS] X [SEP] Y [SEP] example, checking the layout, segment ids and special mask."""
    ids, types, special = (example[k].tolist() for k in ("input_ids", "token_type_ids", "special_tokens_mask"))
    first = ids.index(SEP)
    assert ids[0] == CLS and ids[-1] == SEP and SEP not in ids[first + 1 : -1]
    assert special == [i in (0, first, len(ids) - 1) for i in range(len(ids))]
    assert types == [0] * (first + 1) + [1] * (len(ids) - first - 1)  # 0 for [CLS] X [SEP], 1 for Y [SEP]
    x, y = ids[1:first], ids[first + 1 : -1]
    assert x and y
    return x, y


def assert_binomial(count, n, p, sigmas=4.0):
    sd = math.sqrt(n * p * (1 - p))
    assert abs(count - n * p) <= sigmas * sd, f"{count} of {n}, expected {p:.3f} ± {sigmas * sd / n:.3f}"


def where_token(docs, token):
    """(document, sentence) of a token."""
    d = doc_of(token)
    return next((d, i) for i, s in enumerate(docs[d]) if s[0] <= token <= s[-1])


def labels_of(examples, key="sentence_order_label"):
    return [int(e[key]) for e in examples]


# ---------------------------------------------------------------------------------------------- segment pairs


def test_sop_pairs_are_consecutive_segments_in_order_or_swapped():
    max_tokens = 64
    same_document, untruncated, n_examples = [], {IN_ORDER: 0, SWAPPED: 0}, 0
    long_docs, short_docs = documents(n_docs=10, n_sentences=800), documents(n_docs=20, n_sentences=60, seed=1)
    for docs, seed, short_seq_prob in ((long_docs, 0, 0.0), (short_docs, 1, 0.5)):  # full inputs, then short ones
        sentence_starts = {s[0] for doc in docs for s in doc}
        sentence_ends = {s[-1] for doc in docs for s in doc}
        examples = sop_pairs(docs, max_tokens, BERT, seed, short_seq_prob)
        n_examples += len(examples)
        for e in examples:
            assert len(e["input_ids"]) <= max_tokens and "next_sentence_label" not in e
            x, y = split_pair(e)
            assert contiguous(x) and contiguous(y)  # truncation only takes tokens off the ends
            if doc_of(x[0]) != doc_of(y[0]):  # a one-sentence chunk with ALBERT's random B: see the test below
                assert int(e["sentence_order_label"]) == SWAPPED
                continue
            label = int(e["sentence_order_label"])
            same_document.append(label)
            a, b = (x, y) if label == IN_ORDER else (y, x)  # swapped inputs show B first
            assert b[0] > a[-1]  # A comes before B in the document
            if len(e["input_ids"]) < max_tokens:  # not truncated: the input is the cut A | B, as it is or swapped
                assert a[0] in sentence_starts and a[-1] in sentence_ends and b[-1] in sentence_ends
                assert a + b == list(range(a[0], b[-1] + 1))  # B starts where A ends: the same tokens, in one order
                untruncated[label] += 1
    assert len(same_document) > 0.95 * n_examples  # cross-document pairs are rare
    assert_binomial(same_document.count(SWAPPED), len(same_document), 0.5)
    assert min(untruncated.values()) > 30


def test_a_one_sentence_chunk_takes_b_from_another_document_as_albert_does():
    # every sentence is longer than the budget: every chunk is one sentence, so nothing can be swapped
    docs = documents(n_docs=5, n_sentences=20, lengths=(40, 60))
    examples = sop_pairs(docs, 32, BERT, seed=0)
    assert len(examples) == 5 * 20  # each sentence is an A once (ALBERT puts no sentence back here)
    for e in examples:
        x, y = split_pair(e)
        assert int(e["sentence_order_label"]) == SWAPPED  # ALBERT writes is_random_next as the order label
        assert doc_of(x[0]) != doc_of(y[0]) and contiguous(x) and contiguous(y)
    with pytest.raises(ValueError, match="2 non-empty documents"):
        sop_pairs([docs[0], [[], []]], 32, BERT)


def test_sop_cuts_like_nsp():
    """SOP and NSP share the cutting: with the same seed they read the same chunks, and one draw u decides both
    (IsNext iff u >= 1/2, swapped iff u < 1/2), so their inputs agree pair for pair until NSP's first NotNext, which
    is SOP's first swap; on a one-sentence chunk both take the same random B from another document."""
    docs = documents(n_docs=4, n_sentences=40)
    agreed = swaps = 0
    for seed in range(40):
        for s, n in zip(sop_pairs(docs, 48, BERT, seed=seed), nsp_pairs(docs, 48, BERT, seed=seed), strict=False):
            if int(n["next_sentence_label"]) == IS_NEXT:
                assert torch.equal(s["input_ids"], n["input_ids"]) and int(s["sentence_order_label"]) == IN_ORDER
                agreed += 1
                continue
            assert int(s["sentence_order_label"]) == SWAPPED
            if not torch.equal(s["input_ids"], n["input_ids"]):  # a swap: A and B of one document, B first
                x, y = split_pair(s)
                assert doc_of(x[0]) == doc_of(y[0]) and y[-1] < x[0]
                swaps += 1
                break  # NSP's B came from elsewhere (and it puts A's chunk back): the two part ways here
            agreed += 1  # a one-sentence chunk: the same random B for both
    assert agreed > 40 and swaps > 30


def test_sop_pairs_are_seeded():
    docs = documents(n_docs=4, n_sentences=30)
    a, b, c = (sop_pairs(docs, 48, BERT, seed=s) for s in (3, 3, 4))
    assert all(torch.equal(x["input_ids"], y["input_ids"]) for x, y in zip(a, b, strict=True))
    assert labels_of(a) == labels_of(b)
    assert len(a) != len(c) or not all(torch.equal(x["input_ids"], y["input_ids"]) for x, y in zip(a, c, strict=True))
    mean_length = lambda examples: sum(len(e["input_ids"]) for e in examples) / len(examples)
    assert mean_length(sop_pairs(docs, 48, BERT, short_seq_prob=1.0)) < mean_length(sop_pairs(docs, 48, BERT, 0, 0.0))


def test_bad_input():
    docs = documents(n_docs=3, n_sentences=10)
    with pytest.raises(ValueError, match="max_tokens=4 leaves no room for A and B"):
        sop_pairs(docs, 4, BERT)  # [CLS] A [SEP] B [SEP] needs 3 special tokens and one token each for A and B
    with pytest.raises(ValueError, match="2 non-empty documents"):
        sop_pairs(docs[:1] + [[[]]], 48, BERT)
    with pytest.raises(ValueError, match="short_seq_prob"):
        sop_pairs(docs, 48, BERT, short_seq_prob=1.5)
    with pytest.raises(ValueError, match="max_tokens"):
        sop_sentence_pairs(docs, 4, BERT)
    with pytest.raises(ValueError, match="at least 2 non-empty sentences"):
        sop_sentence_pairs([[s] for s in docs[0]], 48, BERT)  # one-sentence documents have no pair


# ---------------------------------------------------------------------------------------------- sentence pairs


def test_sop_sentence_pairs_are_two_consecutive_sentences():
    docs = documents(n_docs=10, n_sentences=61)
    where = {s[0]: (d, i) for d, doc in enumerate(docs) for i, s in enumerate(doc)}
    examples = sop_sentence_pairs(docs, 64, BERT, seed=0)  # sentences have at most 14 tokens: nothing is truncated
    assert len(examples) == 10 * 30  # sentences 2k and 2k + 1; each document's last (61st) is left alone
    labels = labels_of(examples)
    assert_binomial(labels.count(SWAPPED), len(labels), 0.5)
    for e, label in zip(examples, labels, strict=True):
        x, y = split_pair(e)
        (dx, ix), (dy, iy) = where[x[0]], where[y[0]]
        assert x == docs[dx][ix] and y == docs[dy][iy] and dx == dy  # whole sentences of one document
        assert iy == ix + 1 if label == IN_ORDER else ix == iy + 1
        assert min(ix, iy) % 2 == 0  # pairs never share a sentence
    short = sop_sentence_pairs(docs, 12, BERT, seed=0)  # truncated: X and Y keep parts of one sentence each
    assert len(short) == len(examples) and all(len(e["input_ids"]) <= 12 for e in short)
    for x, y in map(split_pair, short):
        assert contiguous(x) and contiguous(y) and where_token(docs, x[0])[:2] == where_token(docs, x[-1])[:2]
    assert labels_of(sop_sentence_pairs(docs, 64, BERT, seed=0)) == labels


# ---------------------------------------------------------------------------------------------- loss


def test_sop_loss():
    logits, labels = torch.randn(6, 2), torch.tensor([0, 1, 1, 0, 0, 1])
    expected = -torch.log_softmax(logits, -1)[torch.arange(6), labels].mean()
    torch.testing.assert_close(sop_loss(logits, labels), expected)
    torch.testing.assert_close(sop_loss(logits.half(), labels), F.cross_entropy(logits.half().float(), labels))
    with pytest.raises(ValueError, match=r"logits \(B, C\) and labels \(B,\)"):
        sop_loss(logits, labels[:5])


# ---------------------------------------------------------------------------------------------- NSP unchanged


def fingerprint(examples, key):
    h = hashlib.sha256()
    for e in examples:
        for k in ("input_ids", "token_type_ids", "special_tokens_mask"):
            h.update(str(e[k].tolist()).encode())
        h.update(str(int(e[key])).encode())
    return h.hexdigest()[:16]


def test_nsp_pairs_are_exactly_those_before_sop_shared_their_code():
    """Hashes of NSP's inputs and labels recorded before segments.py took NSP's random B and sentence pairs."""
    docs = documents(n_docs=8, n_sentences=60, seed=2)
    docs[3] = docs[3][:1]
    assert fingerprint(nsp_pairs(docs, 48, BERT, seed=5), "next_sentence_label") == "97a558208535c8ed"
    assert fingerprint(nsp_pairs(docs, 48, BERT, 6, short_seq_prob=0.5), "next_sentence_label") == "e2a678aba25815ed"
    assert fingerprint(sentence_pair(docs, 20, BERT, seed=5), "next_sentence_label") == "54ee3e04bb14fe4a"


# ---------------------------------------------------------------------------------------------- make_examples


WORDS = "the a cat dog sat ran home slowly quickly garden table under over river mountain bright happy sad".split()


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
@pytest.mark.parametrize("format", ["segment_pair", "sentence_pair"])
def test_make_examples_with_sop(tokenizers, family, format):
    tok = tokenizers[family]
    docs = text_documents()
    examples = make_examples(format, docs, tok, max_tokens=40, seed=0, pair_objective="sop")
    assert {int(e["sentence_order_label"]) for e in examples} == {IN_ORDER, SWAPPED}
    for e in examples:
        ids = e["input_ids"]
        assert "next_sentence_label" not in e and len(ids) <= 40
        assert torch.equal(e["special_tokens_mask"], torch.isin(ids, torch.tensor(tok.special_ids)))
        assert torch.equal(e["word_ids"] == -1, e["special_tokens_mask"])
        seps = (ids == tok.sep_id).nonzero().squeeze(1).tolist()
        if family == "roberta":  # <s> X </s></s> Y </s>, segment ids all 0
            assert len(seps) == 3 and seps[1] == seps[0] + 1 and (e["token_type_ids"] == 0).all()
        else:  # [CLS] X [SEP] Y [SEP], segment ids 0 then 1
            assert len(seps) == 2 and e["token_type_ids"].tolist() == [0] * (seps[0] + 1) + [1] * (
                len(ids) - seps[0] - 1
            )
    nsp = make_examples(format, docs, tok, max_tokens=40, seed=0)  # no pair_objective: NSP, as before
    assert all("next_sentence_label" in e and "sentence_order_label" not in e for e in nsp)
    assert {int(e["next_sentence_label"]) for e in nsp} == {IS_NEXT, NOT_NEXT}
    explicit = make_examples(format, docs, tok, max_tokens=40, seed=0, pair_objective="nsp")
    assert all(torch.equal(a["input_ids"], b["input_ids"]) for a, b in zip(nsp, explicit, strict=True))


def test_make_examples_pair_objective_errors(tokenizers):
    tok, docs = tokenizers["bert"], text_documents(n_docs=2)
    with pytest.raises(ValueError, match="unknown pair_objective 'order': choose one of nsp, sop"):
        make_examples("segment_pair", docs, tok, 40, pair_objective="order")
    with pytest.raises(ValueError, match="needs sentence pairs: format segment_pair or sentence_pair"):
        make_examples("full_sentences", docs, tok, 40, pair_objective="sop")
