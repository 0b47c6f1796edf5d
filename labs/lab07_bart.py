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
# # Lab 7 — BART: text infilling and beam search
#
# BART (Lewis et al. 2020, "BART: Denoising Sequence-to-Sequence Pre-training for Natural Language Generation,
# Translation, and Comprehension") is a whole transformer, a bidirectional encoder (BERT's) and a left-to-right
# decoder (GPT's), pretrained as a **denoising autoencoder**: a document $x$ is corrupted by a noising function, the
# encoder reads the corrupted $\tilde x$, and the decoder writes out all of $x$, token by token,
#
# $$\mathcal{L}(\theta) = -\sum_t \log P_\theta(x_t \mid x_{<t}, \tilde x).$$
#
# The paper compares five noises (§2.2) and finds "the best performance by both randomly shuffling the order of the
# original sentences and using a novel in-filling scheme, where spans of text are replaced with a single mask token"
# (abstract). This lab is about the two ends of that model:
#
# 1. **text infilling** (5 points), the noise the encoder reads, checked structurally on every document and
#    statistically over thousands of spans (your random draws will not be `minilm`'s, so the tests check what any
#    correct answer must do);
# 2. **one step of beam search** (5 points), the heart of how BART's decoder writes a summary, checked exactly.
#
# Fill in every `raise NotImplementedError()` and run the test cell after each part. Your code is graded with the
# visible tests below and hidden ones of the same kind (10 points in all). Use plain torch and Python; do not call
# `minilm.objectives.denoising` or `minilm.generation` in your answers (the lab does, to show yours at work).

# %%
import math

import torch

from minilm import generation
from minilm.objectives import denoising as reference
from minilm.utils import reproducible

reproducible(seed=0)

# %% [markdown]
# ## Part 1 — Text infilling (5 points)
#
# BART's §2.2: "A number of text spans are sampled, with span lengths drawn from a Poisson distribution (λ = 3).
# Each span is replaced with a single [MASK] token. 0-length spans correspond to the insertion of [MASK] tokens."
# And the final models "mask 30% of tokens in each document" (§5.1).
#
# Compare SpanBERT, which inspired it: SpanBERT replaces a span of 4 tokens by 4 masks, so the model always knows
# how many tokens are missing, and its output has the input's length. BART puts **one** mask in place of the whole
# span, so "text infilling teaches the model to predict how many tokens are missing from a span" — zero, one, or
# seven. The **0-length spans** make that question honest: a mask may hide nothing at all (a Poisson(3) length is 0
# with probability $e^{-3} \approx 5\%$), so the model cannot assume that a mask always stands for something.
#
# | | | | | | | | |
# |---|---|---|---|---|---|---|---|
# | document | `<s>` | A B C | D | E | | F G | `</s>` |
# | SpanBERT-style | `<s>` | [M] [M] [M] | D | E | | [M] [M] | `</s>` |
# | BART's infilling | `<s>` | [M] | D | E | [M] | [M] | `</s>` |
#
# (The middle mask of the last row is a 0-length span: an insertion between E and F.)
#
# Write `text_infilling(ids, mask_id, ratio, poisson_lambda, generator, bos_id, eos_id)` for ONE document:
#
# - `ids` (T,) long: `<s> body </s>`, so `ids[0] == bos_id` and `ids[-1] == eos_id`. The $n$ body tokens are the
#   ones to corrupt; `<s>` and `</s>` are never covered and stay first and last.
# - **How many tokens:** the spans cover exactly $m = \lceil \text{ratio} \cdot n \rceil$ body tokens. (Compute it as
#   `math.ceil(ratio * n - 1e-9)`, as `minilm` does: in floating point, `0.55 * 100` is `55.00000000000001`.)
# - **The span lengths:** draw lengths from Poisson(`poisson_lambda`) one after the other (`torch.poisson`) until
#   they add up to at least $m$, then trim the last one so that they add up to exactly $m$. Lengths of 0 are kept:
#   they are the insertions.
# - **Where the spans go:** spans never overlap (two may touch: two masks in a row). The $n - m$ body tokens that
#   stay, in their order, and the $k$ spans are interleaved **uniformly at random**, every arrangement equally likely:
#   for instance choose which $k$ of the $n - m + k$ output slots hold a mask (`torch.randperm`), and shuffle the
#   lengths, so that the trimmed one is not always last.
# - **Each span becomes ONE `mask_id`**, whatever its length (0 included).
# - All randomness comes from `generator` (a `torch.Generator`): the same seed must give the same output.
#
# Return `(noised, lengths)`: `noised` (T',) long, the corrupted document `<s> ... </s>`, and `lengths` (k,) long, the
# length of the span behind each mask, in the order the masks appear in `noised`. (`minilm`'s
# `text_infilling(..., return_spans=True)` returns the same information, and more.) With `lengths` the tests can put
# the document back together, as BART's decoder must.


# %% nbgrader={"grade": false, "grade_id": "answer_text_infilling", "locked": false, "schema_version": 3, "solution": true}
def text_infilling(ids, mask_id, ratio, poisson_lambda, generator, bos_id, eos_id):
    """BART's text infilling of one document <s> body </s> -> (noised (T',) long, span lengths (k,) long)."""
    ### BEGIN SOLUTION
    head, body, tail = ids[:1], ids[1:-1], ids[-1:]  # <s> and </s> are never covered
    n = len(body)
    m = math.ceil(ratio * n - 1e-9)  # tokens the spans cover, exactly
    rate = torch.tensor(float(poisson_lambda))
    lengths, total = [], 0
    while total < m:  # draw until the spans cover m tokens
        length = int(torch.poisson(rate, generator=generator))  # 0 is a length too: an insertion
        lengths.append(min(length, m - total))  # the last span trimmed: exactly m tokens covered
        total += lengths[-1]
    k = len(lengths)
    width = n - sum(lengths) + k  # the output's body: the kept tokens and one mask per span
    is_mask = torch.zeros(width, dtype=torch.bool)
    is_mask[torch.randperm(width, generator=generator)[:k]] = True  # a uniformly random interleaving
    order = torch.randperm(k, generator=generator).tolist()  # spans in random order: the trimmed one anywhere
    tokens, span_lengths, i = [], [], 0  # i: the next body token
    for slot_is_mask in is_mask.tolist():
        if slot_is_mask:
            length = lengths[order.pop()]
            tokens.append(mask_id)  # ONE mask, whatever the span's length
            span_lengths.append(length)
            i += length  # the span's tokens are gone
        else:
            tokens.append(int(body[i]))
            i += 1
    noised = torch.cat([head, torch.tensor(tokens, dtype=torch.long), tail])
    return noised, torch.tensor(span_lengths, dtype=torch.long)
    ### END SOLUTION


# %% [markdown]
# The visible tests use a sentence whose tokens are all different (token `4 + i` is word `i`), so that every token of
# the output can be traced back to its place in the document, and BART's ids for `<s>`, `</s>` and `<mask>`.

# %%
BOS, EOS, MASK = 0, 2, 50264  # BART's <s>, </s>, <mask>
words = "Alice was beginning to get very tired of sitting by her sister on the bank".split()
document = torch.tensor([BOS, *range(4, 4 + len(words)), EOS])  # n = 15 body tokens


def show(ids):
    names = {BOS: "<s>", EOS: "</s>", MASK: "<mask>"}
    return " ".join(names[t] if t in names else words[t - 4] for t in ids.tolist())


def random_document(n, generator):
    """<s> + n distinct body tokens in random order + </s>: any token of an output can be traced back."""
    return torch.cat([torch.tensor([BOS]), 4 + torch.randperm(n, generator=generator), torch.tensor([EOS])])


print(show(document))
print(random_document(8, torch.Generator().manual_seed(0)).tolist())

# %% [markdown]
# The first test cell checks every output with `check_infilling`, which walks through it, puts each span back and
# returns which body tokens the spans covered. Read it: its messages say what went wrong.


# %% nbgrader={"grade": true, "grade_id": "q1_infilling", "locked": true, "points": 3, "schema_version": 3, "solution": false}
def check_infilling(document, noised, lengths, mask_id=MASK, bos_id=BOS, eos_id=EOS):
    """Assert that (noised, lengths) is a valid text infilling of ``document``; return (n,) bool, the covered tokens."""
    assert isinstance(noised, torch.Tensor) and noised.dim() == 1 and noised.dtype == torch.long, "noised: (T',) long"
    assert isinstance(lengths, torch.Tensor) and lengths.dim() == 1, "lengths: a 1-D tensor, one length per mask"
    assert lengths.dtype == torch.long, "lengths: long"
    assert len(noised) >= 2 and noised[0] == bos_id and noised[-1] == eos_id, "<s> and </s> must stay first and last"
    body, out = document[1:-1].tolist(), noised[1:-1].tolist()
    assert bos_id not in out and eos_id not in out, "<s> and </s> must stay where they were, once each"
    kept = [t for t in out if t != mask_id]
    kept_set = set(kept)
    assert kept == [t for t in body if t in kept_set], "the tokens left must be body tokens, in the document's order"
    assert out.count(mask_id) == len(lengths), f"one mask per span: {out.count(mask_id)} masks, {len(lengths)} spans"
    assert all(length >= 0 for length in lengths.tolist()), "span lengths are >= 0"
    covered = torch.zeros(len(body), dtype=torch.bool)
    i, spans = 0, iter(lengths.tolist())
    for t in out:  # put the document back together: each mask stands for the next `length` tokens
        if t == mask_id:
            length = next(spans)
            assert i + length <= len(body), "the spans run past the end of the document"
            covered[i : i + length] = True
            i += length
        else:
            assert i < len(body) and t == body[i], (
                f"token {t} is not the next one of the document: a span without mask?"
            )
            i += 1
    assert i == len(body), f"the spans and the tokens left account for {i} of the {len(body)} body tokens"
    return covered


noised, lengths = text_infilling(document, MASK, 0.3, 3.0, torch.Generator().manual_seed(0), BOS, EOS)
covered = check_infilling(document, noised, lengths)
assert int(covered.sum()) == 5, f"ceil(0.3 · 15) = 5 tokens covered, exactly: got {int(covered.sum())}"
again, _ = text_infilling(document, MASK, 0.3, 3.0, torch.Generator().manual_seed(0), BOS, EOS)
assert torch.equal(again, noised), "the same seed must give the same output: draw everything from `generator`"
for seed in range(20):
    doc = random_document(40, torch.Generator().manual_seed(seed))
    out, spans = text_infilling(doc, MASK, 0.15, 3.0, torch.Generator().manual_seed(seed), BOS, EOS)
    assert int(check_infilling(doc, out, spans).sum()) == 6, "ceil(0.15 · 40) = 6 tokens covered, exactly"
out, spans = text_infilling(document, MASK, 0.0, 3.0, torch.Generator().manual_seed(0), BOS, EOS)
assert torch.equal(out, document) and len(spans) == 0, "ratio 0: no span, the document unchanged"
out, spans = text_infilling(document, MASK, 1.0, 3.0, torch.Generator().manual_seed(0), BOS, EOS)
assert bool(check_infilling(document, out, spans).all()), "ratio 1: every body token covered"
assert set(out[1:-1].tolist()) == {MASK}, "ratio 1: nothing but masks between <s> and </s>"
### BEGIN HIDDEN TESTS
gen_h = torch.Generator().manual_seed(7)
cases_h = [(0, 0.3, 3.0), (1, 0.3, 3.0), (1, 1.0, 3.0), (2, 0.5, 1.0), (100, 0.55, 3.0), (20, 0.7, 3.0)]
for trial in range(150):
    n_h = int(torch.randint(0, 80, (), generator=gen_h))
    ratio_h = [0.1, 0.3, 0.45, 0.8, 1.0, float(torch.rand((), generator=gen_h))][trial % 6]
    cases_h.append((n_h, ratio_h, [3.0, 1.0, 0.5, 6.0, 2.5][trial % 5]))
for n_h, ratio_h, lam_h in cases_h:
    doc_h = random_document(n_h, gen_h)
    seed_h = int(torch.randint(0, 2**31, (), generator=gen_h))
    out_h, spans_h = text_infilling(doc_h, MASK, ratio_h, lam_h, torch.Generator().manual_seed(seed_h), BOS, EOS)
    m_h = math.ceil(ratio_h * n_h - 1e-9)
    covered_h = check_infilling(doc_h, out_h, spans_h)
    assert int(covered_h.sum()) == m_h, f"n={n_h}, ratio={ratio_h}: {int(covered_h.sum())} covered, not {m_h}"
    assert len(out_h) == n_h - m_h + len(spans_h) + 2
    again_h, spans_again_h = text_infilling(
        doc_h, MASK, ratio_h, lam_h, torch.Generator().manual_seed(seed_h), BOS, EOS
    )
    assert torch.equal(again_h, out_h) and torch.equal(spans_again_h, spans_h), "same seed, same output"
outputs_h = set()
doc_h = random_document(50, gen_h)
for seed_h in range(10):  # different seeds, different noise
    out_h, _ = text_infilling(doc_h, MASK, 0.3, 3.0, torch.Generator().manual_seed(seed_h), BOS, EOS)
    outputs_h.add(tuple(out_h.tolist()))
assert len(outputs_h) > 5, "different seeds should give different outputs"
for n_h in (0, 1, 5, 30):
    for lam_h in (0.5, 3.0):
        doc_h = random_document(n_h, gen_h)
        out_h, spans_h = text_infilling(doc_h, MASK, 0.0, lam_h, torch.Generator().manual_seed(n_h), BOS, EOS)
        assert torch.equal(out_h, doc_h) and len(spans_h) == 0, "ratio 0: the document unchanged"
        out_h, spans_h = text_infilling(doc_h, MASK, 1.0, lam_h, torch.Generator().manual_seed(n_h), BOS, EOS)
        assert bool(check_infilling(doc_h, out_h, spans_h).all()) and set(out_h[1:-1].tolist()) <= {MASK}
### END HIDDEN TESTS

# %% [markdown]
# The second test cell looks at thousands of spans at once: long documents, so that the one trimmed span of each is
# lost among the others. Poisson(λ) lengths have mean λ, variance λ, and are 0 with probability $e^{-\lambda}$; and
# uniformly random places cover each quarter of the body about as often as the whole. The tolerances are about six
# standard errors wide: a correct answer passes with all but astronomically rare draws, while the mistakes these
# statistics are there for miss them by far more.


# %%
def span_statistics(poisson_lambda, ratio, n, n_documents, seed):
    """Text-infill n_documents random documents of n body tokens: (all span lengths, covered fraction of each
    quarter of the body, covered fraction of the whole body), from the outputs alone."""
    g = torch.Generator().manual_seed(seed)
    all_lengths, covered = [], torch.zeros(n)
    for _ in range(n_documents):
        doc = random_document(n, g)
        noised, lengths = text_infilling(doc, MASK, ratio, poisson_lambda, g, BOS, EOS)
        all_lengths.append(lengths)
        covered += (~torch.isin(doc[1:-1], noised)).float()  # a body token that is not in the output was covered
    covered /= n_documents
    return torch.cat(all_lengths).double(), covered.view(4, -1).mean(1), covered.mean()


# %% nbgrader={"grade": true, "grade_id": "q1_spans", "locked": true, "points": 2, "schema_version": 3, "solution": false}
lengths, quarters, whole = span_statistics(poisson_lambda=3.0, ratio=0.2, n=3000, n_documents=50, seed=0)
print(f"{len(lengths)} spans: mean {lengths.mean():.2f}, variance {lengths.var():.2f}, ", end="")
print(f"zero-length {(lengths == 0).double().mean():.3f} (e^-3 = {math.exp(-3):.3f})")
assert len(lengths) > 5000, f"only {len(lengths)} spans for 50 · 600 covered tokens: Poisson(3) lengths give ~10,000"
zero = (lengths == 0).double().mean()
assert abs(zero - math.exp(-3)) < 0.013, f"0-length spans: {zero:.3f} of the spans, not P(0) = e^-3 = 0.050"
assert abs(lengths.mean() - 3.0) < 0.1, f"the span lengths' mean {lengths.mean():.3f} should be λ = 3"
assert abs(lengths.var() - 3.0) < 0.3, f"the span lengths' variance {lengths.var():.3f} should be λ = 3 (Poisson)"
assert torch.allclose(quarters, whole, atol=0.04), f"covered fraction by quarter {quarters.tolist()}: not uniform"
### BEGIN HIDDEN TESTS
lengths_h, quarters_h, whole_h = span_statistics(poisson_lambda=1.0, ratio=0.3, n=2000, n_documents=15, seed=1)
assert len(lengths_h) > 8000
zero_h = (lengths_h == 0).double().mean()
assert abs(zero_h - math.exp(-1)) < 0.03, f"λ = 1: 0-length spans {zero_h:.3f}, not e^-1 = 0.368"
assert abs(lengths_h.mean() - 1.0) < 0.06, f"λ = 1: mean {lengths_h.mean():.3f}"
assert abs(lengths_h.var() - 1.0) < 0.11, f"λ = 1: variance {lengths_h.var():.3f}"
assert torch.allclose(quarters_h, whole_h, atol=0.04)
# every arrangement equally likely: the first mask's span and the last one's have the same distribution (the trimmed
# span is not always last), so their mean lengths differ by no more than a few standard errors
g_h, first_h, last_h = torch.Generator().manual_seed(2), [], []
for _ in range(4000):
    _, spans_h = text_infilling(random_document(40, g_h), MASK, 0.25, 3.0, g_h, BOS, EOS)  # 10 tokens covered
    if len(spans_h) >= 2:
        first_h.append(int(spans_h[0]))
        last_h.append(int(spans_h[-1]))
difference_h = torch.tensor(first_h, dtype=torch.double) - torch.tensor(last_h, dtype=torch.double)
z_h = difference_h.mean() / (difference_h.std() / len(difference_h) ** 0.5)
assert abs(z_h) < 5, f"first mask's span {sum(first_h) / len(first_h):.2f} long, last {sum(last_h) / len(last_h):.2f}"
### END HIDDEN TESTS

# %% tags=["instructor"]
# Instructor check (removed from the student version): minilm's own text_infilling passes the same checks.
g_i = torch.Generator().manual_seed(0)
all_i = []
for trial in range(300):
    n_i = int(torch.randint(0, 200, (), generator=g_i))
    ratio_i, lam_i = [0.1, 0.3, 0.55, 1.0][trial % 4], [3.0, 1.0, 0.5][trial % 3]
    doc_i = random_document(n_i, g_i)
    out_i, spans_i = reference.text_infilling(
        doc_i, MASK, ratio_i, lam_i, g_i, bos_id=BOS, eos_id=EOS, return_spans=True
    )
    covered_i = check_infilling(doc_i, out_i, spans_i[:, 2])
    assert int(covered_i.sum()) == math.ceil(ratio_i * n_i - 1e-9)
    if lam_i == 3.0 and n_i >= 150:
        all_i.append(spans_i[:, 2])
all_i = torch.cat(all_i).double()
print(f"minilm: 300 documents pass; λ = 3: {len(all_i)} spans, mean {all_i.mean():.2f}, variance {all_i.var():.2f}")

# %% [markdown]
# ### What the encoder reads
#
# Your infilling of the sentence, beside what SpanBERT-style masks would show (each mask repeated as many times as
# its span is long) and `minilm.objectives.denoising.text_infilling` with its own draw. Then how many tokens hide
# behind each of your masks, over thirty documents, next to the Poisson(3) probabilities.

# %%
g = torch.Generator().manual_seed(3)
noised, lengths = text_infilling(document, MASK, 0.3, 3.0, g, BOS, EOS)
expanded, j = [], 0
for t in noised.tolist():  # SpanBERT-style: a mask per covered token (and nothing for an insertion)
    expanded += [MASK] * int(lengths[j]) if t == MASK else [t]
    j += t == MASK
theirs = reference.text_infilling(document, MASK, 0.3, 3.0, g, bos_id=BOS, eos_id=EOS)
print("document      ", show(document))
print("yours         ", show(noised), " spans:", lengths.tolist())
print("SpanBERT-style", show(torch.tensor(expanded)))
print("minilm        ", show(theirs))

counts = torch.zeros(12)
lengths_seen, _, _ = span_statistics(poisson_lambda=3.0, ratio=0.3, n=1000, n_documents=30, seed=5)
for length in lengths_seen.long().tolist():
    counts[min(length, 11)] += 1
poisson = torch.distributions.Poisson(3.0).log_prob(torch.arange(12.0)).exp()
print("\nlength      ", " ".join(f"{k:>5}" for k in range(11)), "  11+")
print("your spans  ", " ".join(f"{c:5.3f}" for c in (counts / counts.sum()).tolist()))
print("Poisson(3)  ", " ".join(f"{p:5.3f}" for p in poisson[:11].tolist()), f"{1 - poisson[:11].sum():5.3f}")
print(
    f"\n30% of the tokens covered by {len(lengths_seen) / 30:.0f} masks a document: the encoder reads documents "
    f"{1 - (1000 - 300 + len(lengths_seen) / 30) / 1000:.0%} shorter than the decoder writes"
)

# %% [markdown]
# A mask hides about three tokens on average, but any number from 0 to 10 or so: from the length of the input alone
# the decoder cannot tell how long each gap is. And the encoder's input is shorter than the document (about a fifth
# shorter at 30%), which BART's encoder-decoder handles with no effort: the decoder writes the whole document
# anyway, its length its own to decide. An encoder-only model like BERT or SpanBERT predicts one token per input
# position, which is why it needs as many masks as missing tokens.

# %% [markdown]
# ## Part 2 — One step of beam search (5 points)
#
# BART's decoder writes left to right, as GPT does, and greedy decoding (Lab 2) takes the most likely token at each
# step. That is not the most likely *sequence*: a first token that looks best can lead nowhere good.
# **Beam search** keeps the $K$ most likely partial sequences, the *beams*, each scored by its summed
# log-probability
#
# $$s(y_1 \ldots y_t) = \sum_{i=1}^{t} \log P(y_i \mid y_{<i}, x),$$
#
# and at every step extends each of them by every token of the vocabulary. That makes $K \times V$ candidates per
# sequence (of the batch), and the $K$ best of them, whichever beams they come from, are the next beams:
#
# 1. each candidate's score is its beam's score plus the token's log-probability:
#    `totals[b, j, v] = beam_scores[b, j] + log_probs[b, j, v]`;
# 2. flatten the candidates of each row: candidate $c = j \cdot V + v$ extends beam $j$ with token $v$;
# 3. keep the $K$ best of each row, best first: their scores are the new beam scores, and each one's **parent**
#    (the beam it extends, $c \,/\!/\, V$) and **token** ($c \bmod V$) tell the caller how to build the new beams:
#    copy the parent's tokens (and its KV cache) and append the token.
#
# A beam may have several children and another none: the best candidates may all extend one beam. (BART's
# summariser, `facebook/bart-large-cnn`, decodes with $K = 4$.)
#
# Write `beam_step(beam_scores, log_probs, K)`:
#
# - `beam_scores` (B, K_in) float: the summed log-probability of each live beam (K_in = 1 at the first step, when
#   each row has only its start token; K_in = K after);
# - `log_probs` (B, K_in, V) float: the log-probabilities of the next token after each beam;
# - `K`: how many beams to keep, 1 ≤ K ≤ K_in · V.
#
# Return `(new_scores, parent, token)`, each (B, K): the K best candidates of each row, best first (`new_scores` in
# the dtype of `beam_scores`; `parent` and `token` long). Leave out everything about `</s>` and finished beams.


# %% nbgrader={"grade": false, "grade_id": "answer_beam_step", "locked": false, "schema_version": 3, "solution": true}
def beam_step(beam_scores, log_probs, K):
    """The K best one-token extensions of each row's beams -> (new_scores, parent, token), each (B, K)."""
    ### BEGIN SOLUTION
    B, K_in, V = log_probs.shape
    totals = beam_scores[:, :, None] + log_probs  # (B, K_in, V): every beam extended by every token
    new_scores, flat = totals.reshape(B, K_in * V).topk(K, dim=-1)  # the K best of each row's K_in·V, best first
    return new_scores, flat // V, flat % V  # candidate j·V + v extends beam j with token v
    ### END SOLUTION


# %% [markdown]
# The visible tests: two beams, "the cat" (log-probability -1.0) and "a dog" (-2.0), and three next tokens. "a dog"
# likes "sat" best (0.5), more than "the cat" likes anything (0.45), but its beam starts too far behind: both new
# beams extend "the cat". The batch's second row has the same next-token probabilities and better beam scores.

# %%
vocabulary = ["sat", "ran", "slept"]
probs = torch.tensor([[0.45, 0.40, 0.15], [0.50, 0.30, 0.20]], dtype=torch.float64)  # after "the cat", "a dog"
example_scores = torch.tensor([[-1.0, -2.0], [-0.5, -0.6]], dtype=torch.float64)  # (B=2, K_in=2)
example_log_probs = probs.log().repeat(2, 1, 1)  # (B=2, K_in=2, V=3): beam j's next-token log-probabilities
expected_scores = torch.tensor(
    [
        [-1.0 + math.log(0.45), -1.0 + math.log(0.40), -2.0 + math.log(0.50)],  # the cat sat, the cat ran, a dog sat
        [-0.6 + math.log(0.50), -0.5 + math.log(0.45), -0.5 + math.log(0.40)],  # a dog sat, the cat sat, the cat ran
    ],
    dtype=torch.float64,
)
expected_parent = torch.tensor([[0, 0, 1], [1, 0, 0]])
expected_token = torch.tensor([[0, 1, 0], [0, 0, 1]])


def beam_case(B, K_in, V, seed):
    """Random beam scores (B, K_in), sorted as a search keeps them, and next-token log-probabilities (B, K_in, V),
    in float64 so that no two candidates tie."""
    g = torch.Generator().manual_seed(seed)
    beam_scores = -(5 * torch.rand(B, K_in, generator=g, dtype=torch.float64)).sort(-1).values
    log_probs = torch.log_softmax(3 * torch.randn(B, K_in, V, generator=g, dtype=torch.float64), dim=-1)
    return beam_scores, log_probs


case_scores, case_log_probs = beam_case(B=1, K_in=2, V=4, seed=0)
print("beam_scores  ", case_scores.round(decimals=3).tolist())
print("probabilities", case_log_probs.exp().round(decimals=3).tolist())


# %% nbgrader={"grade": true, "grade_id": "q2_scores", "locked": true, "points": 2, "schema_version": 3, "solution": false}
### BEGIN HIDDEN TESTS
def expected_step_h(beam_scores, log_probs, K):
    B, K_in, V = log_probs.shape
    values, flat = (beam_scores[:, :, None] + log_probs).reshape(B, K_in * V).topk(K)
    return values, flat // V, flat % V


### END HIDDEN TESTS
new_scores, parent, token = beam_step(example_scores, example_log_probs, 3)
assert new_scores.shape == (2, 3) and new_scores.dtype == torch.float64, "new_scores: (B, K), beam_scores' dtype"
assert torch.allclose(new_scores[0, :2], expected_scores[0, :2]), (
    "row 0: both best candidates extend 'the cat' (-1 + log 0.45, -1 + log 0.40): the K best of all K·V candidates"
)
assert torch.allclose(new_scores, expected_scores), f"new_scores {new_scores.tolist()}: beam score + log P, best first"
greedy, _, _ = beam_step(example_scores, example_log_probs, 1)
assert torch.allclose(greedy, expected_scores[:, :1]), "K = 1: the single best candidate of each row"
first, _, _ = beam_step(torch.zeros(2, 1, dtype=torch.float64), example_log_probs[:, :1], 2)
assert torch.allclose(first, probs[0].log()[:2].expand(2, 2)), "first step (K_in = 1): the K likeliest tokens"
### BEGIN HIDDEN TESTS
for seed_h, (B_h, K_in_h, V_h, K_h) in enumerate(
    [(1, 4, 10, 4), (3, 5, 7, 5), (4, 1, 50, 6), (2, 6, 3, 6), (5, 3, 20, 1), (2, 4, 3, 12), (8, 8, 100, 8)]
):
    scores_h, lp_h = beam_case(B_h, K_in_h, V_h, seed=100 + seed_h)
    got_h = beam_step(scores_h, lp_h, K_h)[0]
    exp_h = expected_step_h(scores_h, lp_h, K_h)[0]
    assert got_h.shape == exp_h.shape and torch.allclose(got_h, exp_h, atol=1e-9), f"case {seed_h}: new_scores differ"
scores_h, lp_h = beam_case(3, 4, 9, seed=7)
got32_h = beam_step(scores_h.float(), lp_h.float(), 4)[0]
assert got32_h.dtype == torch.float32 and torch.allclose(got32_h, expected_step_h(scores_h, lp_h, 4)[0].float())
### END HIDDEN TESTS


# %% nbgrader={"grade": true, "grade_id": "q2_backpointers", "locked": true, "points": 3, "schema_version": 3, "solution": false}
### BEGIN HIDDEN TESTS
def expected_step_h(beam_scores, log_probs, K):
    B, K_in, V = log_probs.shape
    values, flat = (beam_scores[:, :, None] + log_probs).reshape(B, K_in * V).topk(K)
    return values, flat // V, flat % V


### END HIDDEN TESTS
new_scores, parent, token = beam_step(example_scores, example_log_probs, 3)
assert parent.shape == token.shape == (2, 3), "parent and token: (B, K)"
assert parent.dtype == token.dtype == torch.long, "parent and token: long, they index beams and the vocabulary"
assert parent[0].tolist() == [0, 0, 1], f"row 0: 'the cat' sat, 'the cat' ran, 'a dog' sat; parents {parent[0]}"
assert token[0].tolist() == [0, 1, 0], f"row 0: sat, ran, sat; tokens {[vocabulary[t] for t in token[0]]}"
assert torch.equal(parent, expected_parent) and torch.equal(token, expected_token), (
    f"parents {parent.tolist()} and tokens {token.tolist()}, not {expected_parent.tolist()}, {expected_token.tolist()}"
)
rebuilt = example_scores.gather(1, parent) + example_log_probs[torch.arange(2)[:, None], parent, token]
assert torch.allclose(rebuilt, expected_scores), "each (parent, token): its beam's score + its log-probability"
_, parent_1, token_1 = beam_step(example_scores, example_log_probs, 1)
assert parent_1.tolist() == [[0], [1]] and token_1.tolist() == [[0], [0]], "K = 1: the best candidate of each row"
_, parent_first, token_first = beam_step(torch.zeros(2, 1, dtype=torch.float64), example_log_probs[:, :1], 2)
assert parent_first.tolist() == [[0, 0]] * 2 and token_first.tolist() == [[0, 1]] * 2, "first step: the one beam"
### BEGIN HIDDEN TESTS
for seed_h, (B_h, K_in_h, V_h, K_h) in enumerate(
    [(1, 4, 10, 4), (3, 5, 7, 5), (4, 1, 50, 6), (2, 6, 3, 6), (5, 3, 20, 1), (2, 4, 3, 12), (8, 8, 100, 8)]
):
    scores_h, lp_h = beam_case(B_h, K_in_h, V_h, seed=200 + seed_h)
    _, exp_parent_h, exp_token_h = expected_step_h(scores_h, lp_h, K_h)
    _, parent_h, token_h = beam_step(scores_h, lp_h, K_h)
    assert parent_h.dtype == token_h.dtype == torch.long
    assert torch.equal(parent_h, exp_parent_h), f"case {seed_h}: parents differ"
    assert torch.equal(token_h, exp_token_h), f"case {seed_h}: tokens differ"
    pairs_h = parent_h * V_h + token_h
    assert all(len(set(row)) == K_h for row in pairs_h.tolist()), "no candidate may be kept twice"
    if K_h == 1:  # greedy over the whole row: the argmax of the totals
        assert torch.equal(pairs_h[:, 0], (scores_h[:, :, None] + lp_h).flatten(1).argmax(-1))
for B_h in (1, 3):  # every row on its own: a row's beams do not depend on the other rows
    scores_h, lp_h = beam_case(B_h, 4, 11, seed=300 + B_h)
    scaled_h = scores_h * torch.arange(1, B_h + 1, dtype=torch.float64)[:, None] * 3  # rows far apart
    full_h = beam_step(scaled_h, lp_h, 4)
    for b in range(B_h):
        single_h = beam_step(scaled_h[b : b + 1], lp_h[b : b + 1], 4)
        assert all(torch.equal(f[b : b + 1], s) for f, s in zip(full_h, single_h, strict=True)), "rows mixed"
### END HIDDEN TESTS

# %% [markdown]
# ## See it work (not graded)
#
# A toy "language model": a Markov chain over eight words, whose next-word probabilities depend on the last word only.
# After `<s>`, "the" (0.5) is likelier than "a" (0.4); but after "the" the next word is anyone's guess, while after
# "a" it is "dog" (0.8). Greedy decoding commits to "the"; beam search with two beams keeps "a" alive one step longer
# and finds the likelier sentence. The loop below is beam search built on your `beam_step`, without stop tokens:
# every hypothesis is three words long.

# %%
chain_words = ["<s>", "the", "a", "cat", "dog", "sat", "ran", "."]
V_chain = len(chain_words)
likely = {
    "<s>": {"the": 0.50, "a": 0.40},
    "the": {"cat": 0.30, "dog": 0.28, "sat": 0.12, "ran": 0.11},
    "a": {"dog": 0.80},
    "cat": {"sat": 0.50, "ran": 0.30},
    "dog": {"sat": 0.60, "ran": 0.30},
    "sat": {".": 0.90},
    "ran": {".": 0.90},
    ".": {"the": 0.50, "a": 0.40},
}
transitions = 0.01 * (1 + torch.arange(V_chain) / V_chain).repeat(V_chain, 1)  # a little of everything, no ties
for word, nexts in likely.items():
    for next_word, p in nexts.items():
        transitions[chain_words.index(word), chain_words.index(next_word)] = p
log_transitions = (transitions / transitions.sum(-1, keepdim=True)).log()  # (V, V): log P(next | last)


def step_fn(new_ids, attention_mask=None):
    """minilm.generation's model interface: logits (N, V) for the token after each row's last one."""
    return log_transitions[new_ids[:, -1]]


def our_beam_search(start, n_steps, K):
    """Beam search on your beam_step: sequences (B, K, 1 + n_steps) best first, and their scores (B, K)."""
    beams, scores = start[:, None, :], torch.zeros(start.size(0), 1)  # one beam per row at first
    for _ in range(n_steps):
        log_probs = torch.log_softmax(step_fn(beams.flatten(0, 1)), dim=-1).view(*scores.shape, -1)
        scores, parent, token = beam_step(scores, log_probs, K)
        beams = torch.cat([beams.gather(1, parent[:, :, None].expand(-1, -1, beams.size(-1))), token[:, :, None]], -1)
    return beams, scores


start = torch.tensor([[0]])  # <s>
beams, scores = our_beam_search(start, n_steps=3, K=2)
greedy = generation.generate(step_fn, start, 3, do_sample=False)
theirs = generation.beam_search(step_fn, lambda index: None, start, 3, num_beams=2, eos_token_id=None)
for name, ids, score in [
    ("greedy", greedy[0], log_transitions[greedy[0, :-1], greedy[0, 1:]].sum()),
    ("your beam search", beams[0, 0], scores[0, 0]),
]:
    print(f"{name:<17} {' '.join(chain_words[t] for t in ids):<16} P = {math.exp(score):.3f}")
print("minilm.generation.beam_search finds the same:", torch.equal(theirs[0], beams[0, 0]))

# %% [markdown]
# Greedy takes "the" (0.5 against 0.4) and is then stuck with a word after which nothing is likely. Beam search keeps
# "a" as its second beam; after the second step its beams are "a dog" (0.4 · 0.8 = 0.32) and "the cat" (0.5 · 0.3 =
# 0.15), while "the dog" (0.14) is dropped, and "a dog sat" ends about twice as likely as greedy's sentence. (The
# printed probabilities are a little higher than these products: the table is renormalised after the "little of
# everything".)
#
# `minilm.generation.beam_search`, behind `minilm.models.bart`'s `generate(num_beams=K)`, does this step and more:
# its lines `cand_scores, flat = totals.topk(n_candidates)` and `parent, token = flat // V, flat % V` are yours, but
# with $2K$ candidates rather than $K$, because a candidate that ends with `</s>` leaves the search as a finished
# hypothesis, and $K$ beams must still go on (at most $K$ of the $2K$ can end, with one stop token). It starts with
# $K$ copies of the start, all but the first scored $-10^9$ (so the first step picks $K$ tokens of one beam, as
# yours does with K_in = 1), reorders the KV cache by `parent` after every step, ranks the finished hypotheses by
# $s / \text{length}^{\alpha}$ (the length penalty), and stops when no live beam can beat them.

# %% [markdown]
# ## Going further (not graded)
# - BART's `minilm.objectives.denoising.text_infilling` also has `overlap="merge"`, fairseq's placement, where spans
#   start at random tokens and overlapping ones merge: how much less than 30% of the tokens does it cover? (Run
#   `span_statistics`-style counts on it.)
# - Greedy is beam search with K = 1. On the Markov chain, which K is the smallest that finds the most likely
#   four-word sequence? Is a larger K ever worse?
# - Add a stop token to `our_beam_search`: a candidate ending with "." leaves the beams. Compare with
#   `generation.beam_search(..., eos_token_id=7, length_penalty=...)` for a few length penalties.
