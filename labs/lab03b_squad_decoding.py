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
# # Lab 3b — SQuAD span decoding, no-answer and the official EM/F1
#
# A SQuAD model (BERT, RoBERTa, ...) outputs two numbers per token: a start logit $s_i$ and an end logit $e_j$
# (`minilm.heads.SpanExtractionHead`). Turning them into an answer *text*, and scoring that text the way the
# leaderboard does, is plain code — and where many reported numbers quietly go wrong. You write it here:
#
# 1. **best-span decoding** with the constraints and SQuAD 2.0's no-answer rule (4 points);
# 2. **token span ↔ characters**: from the chosen tokens back to the answer text through the tokenizer's
#    character offsets, and from a gold answer to its tokens (2 points);
# 3. **the official evaluation**: answer normalisation, exact match and token F1 with several gold answers and
#    unanswerable questions (4 points).
#
# Your code is graded against `minilm.heads.best_span`, `minilm.finetune.kinds` and `minilm.metrics`, with the
# visible tests below and hidden ones of the same kind (10 points in all). Chapter 3 (BERT) fine-tunes on
# SQuAD 2.0; Devlin et al. (2019, §4.3) and Rajpurkar et al. (2018, "Know What You Don't Know") give the rules.

# %%
import random
import re
import string
from collections import Counter
from types import SimpleNamespace

import matplotlib.pyplot as plt
import torch

import minilm.metrics as reference_metrics
from minilm.data import load_task
from minilm.data.examples import Answer
from minilm.finetune.kinds import answer_positions as reference_answer_positions
from minilm.finetune.kinds import span_text as reference_span_text
from minilm.heads import best_span as reference_best_span
from minilm.tokenizers import train_tokenizer
from minilm.utils import reproducible

reproducible(seed=0)

# %% [markdown]
# ## Part 1 — Best-span decoding (4 points)
#
# The score of the span from token $i$ to token $j$ (inclusive) is $s_i + e_j$. A span is **valid** when
#
# - $i \le j$ and $j - i + 1 \le$ `max_answer_length` (BERT uses 30 tokens);
# - both $i$ and $j$ are **context** tokens (`context_mask[i]` and `context_mask[j]` true): an answer never starts in
#   the question or on a special token.
#
# Return the valid span $(\hat\imath, \hat\jmath)$ of highest score, or `None` when no span is valid. Break **ties**
# by the smallest start, then the smallest end (the first maximum in row-major order of an (i, j) score table).
#
# **No answer (SQuAD 2.0).** Unanswerable questions are trained to point both ends at the null position
# (`null_index`, [CLS] = 0). At prediction time (Devlin et al. 2019, §4.3) answer only if
#
# $$s_{\hat\imath} + e_{\hat\jmath} \;>\; s_{\text{null}} + e_{\text{null}} + \tau$$
#
# (strictly greater), else return `None`; $\tau$ = `null_threshold` is tuned on the dev set. With
# `null_index=None` (SQuAD 1.1) always answer when a valid span exists. Inputs are 1-D tensors of length T; a
# (T, T) score table or two loops both do.


# %% nbgrader={"grade": false, "grade_id": "answer_best_span", "locked": false, "schema_version": 3, "solution": true}
def best_span(start_logits, end_logits, context_mask, max_answer_length=30, null_index=0, null_threshold=0.0):
    """(T,), (T,), (T,) bool -> (start, end) inclusive, or None for "no answer"."""
    ### BEGIN SOLUTION
    T = start_logits.size(0)
    ctx = context_mask.bool()
    i, j = torch.arange(T)[:, None], torch.arange(T)[None, :]
    valid = (i <= j) & (j - i < max_answer_length) & ctx[:, None] & ctx[None, :]  # (T, T)
    if not valid.any():
        return None
    scores = (start_logits[:, None] + end_logits[None, :]).masked_fill(~valid, float("-inf"))  # (T, T): s_i + e_j
    best = int(scores.flatten().argmax())  # the first maximum: smallest start, then smallest end
    if null_index is not None:
        null_score = start_logits[null_index] + end_logits[null_index]
        if not scores.flatten()[best] > null_score + null_threshold:
            return None
    return best // T, best % T
    ### END SOLUTION


# %% [markdown]
# A worked example: the question is tokens 1–2, the context tokens 4–8. The best unconstrained pair
# (start 1, end 2) lies in the question; the best valid span is (5, 6).

# %%
start = torch.tensor([0.0, 9.0, 0.0, 0.0, 1.0, 3.0, 0.0, 0.0, 0.0])
end = torch.tensor([0.0, 0.0, 9.0, 0.0, 0.0, 1.0, 4.0, 0.0, 2.0])
context = torch.tensor([False, False, False, False, True, True, True, True, True])
print("span:", best_span(start, end, context, null_index=None))
print("with max_answer_length=1:", best_span(start, end, context, max_answer_length=1, null_index=None))
print("null score 0 vs span 7:", best_span(start, end, context))
print("threshold 8:", best_span(start, end, context, null_threshold=8.0))


# %%
def random_case(rng, integer_logits):
    """A random decoding problem; integer logits make ties common."""
    T = rng.randint(1, 12)
    if integer_logits:
        start, end = (torch.tensor([float(rng.randint(-3, 3)) for _ in range(T)]) for _ in range(2))
    else:
        start, end = torch.randn(T), torch.randn(T)
    context = torch.tensor([rng.random() < 0.6 for _ in range(T)])
    return start, end, context


# %% nbgrader={"grade": true, "grade_id": "q1_best_span", "locked": true, "points": 2, "schema_version": 3, "solution": false}
assert best_span(start, end, context, null_index=None) == (5, 6)
assert best_span(start, end, context, max_answer_length=1, null_index=None) == (5, 5), "tie 4 = 4: smallest start"
assert best_span(start, end, torch.zeros(9, dtype=torch.bool), null_index=None) is None, "no context: no span"
rng = random.Random(1)
for trial in range(300):  # SQuAD 1.1 decoding: always answer
    s, e, c = random_case(rng, integer_logits=trial % 2 == 0)
    L = rng.randint(1, len(s) + 1)
    got, expected = best_span(s, e, c, L, null_index=None), reference_best_span(s, e, c, L, null_index=None)
    assert got == expected, f"case {trial}: {got} != {expected} (start {s}, end {e}, context {c}, L={L})"
### BEGIN HIDDEN TESTS
for _ in range(300):
    s, e, c = random_case(rng, integer_logits=True)
    c[:] = True  # every position is context: the length limit and the tie rule decide
    L = rng.randint(1, 4)
    assert best_span(s, e, c, L, null_index=None) == reference_best_span(s, e, c, L, null_index=None)
one = torch.tensor([True])
assert best_span(torch.tensor([1.0]), torch.tensor([2.0]), one, 30, None) == (0, 0)
tie = torch.zeros(6)
assert best_span(tie, tie, torch.ones(6, dtype=torch.bool), 3, None) == (0, 0), "ties: smallest start, then end"
### END HIDDEN TESTS

# %% nbgrader={"grade": true, "grade_id": "q1_no_answer", "locked": true, "points": 2, "schema_version": 3, "solution": false}
assert best_span(start, end, context) == (5, 6), "span score 7 beats the null score 0"
assert best_span(start, end, context, 30, 0, 8.0) is None, "7 does not beat 0 + 8"
assert best_span(start, end, context, 30, 0, 7.0) is None, "the span must beat the null score strictly"
assert best_span(start, end, context, 30, 0, -2.0) == (5, 6)
rng = random.Random(2)  # its own cases: this question does not depend on the one above
for trial in range(300):
    s, e, c = random_case(rng, integer_logits=trial % 2 == 0)
    c[0] = False  # the null position ([CLS]) is never context
    L, tau = rng.randint(1, len(s) + 1), rng.choice([0.0, 1.0, -1.0, 2.5])
    got, expected = best_span(s, e, c, L, 0, tau), reference_best_span(s, e, c, L, 0, tau)
    assert got == expected, f"case {trial}: {got} != {expected} (start {s}, end {e}, context {c}, L={L}, tau={tau})"
### BEGIN HIDDEN TESTS
for _ in range(300):
    s, e, c = random_case(rng, integer_logits=True)
    null = rng.randrange(len(s))
    tau = float(rng.randint(-2, 2))
    assert best_span(s, e, c, 5, null, tau) == reference_best_span(s, e, c, 5, null, tau)
### END HIDDEN TESTS

# %% [markdown]
# ## Part 2 — From tokens to characters and back (2 points)
#
# The tokenizer gives each token its **character offsets** `(start, end)` in its own text (for a (question, context)
# pair, context tokens have offsets into the context; special tokens `(0, 0)`). So
#
# - `answer_text(context, offsets, i, j)` is the context from the first character of token $i$ to the last
#   character of token $j$: `context[offsets[i][0] : offsets[j][1]]` (the original text, spaces and case kept —
#   not the decoded tokens, which lose both);
# - `answer_token_span(offsets, context_mask, answer_start, answer_text)` goes the other way, to build training
#   targets: the first and last context tokens that overlap the answer's characters. Spaces at either end of the
#   gold text do not count (offsets never cover them): take the characters $[a, b)$ of the answer without them.
#   A context token $t$ overlaps when `offsets[t][0] < b` and `offsets[t][1] > a`. If no token overlaps, or the
#   overlapping tokens do not cover the whole answer (the first starts after $a$ or the last ends before $b$:
#   truncation cut it), return `(-1, -1)` — the question is then trained as unanswerable.
#
# A tokenizer trained on the SQuAD subset's training contexts gives the offsets (RoBERTa's byte-level BPE: a token
# carries its leading space as `Ġ`, yet its offsets cover the word alone, in the original text):

# %%
squad_train, squad_validation = load_task("squad2", "train"), load_task("squad2", "validation")
tokenizer = train_tokenizer(sorted({e.context for e in squad_train}), "roberta", vocab_size=4000)
encoded = tokenizer(
    [e.question for e in squad_validation], pairs=[e.context for e in squad_validation], max_length=160
)  # longer inputs are cut: some answers fall off the end
context_masks = [torch.tensor([s == 1 for s in row]) for row in encoded.sequence_ids]  # (T,) per example
example, offsets = squad_validation[0], encoded.offsets[0]
print(example.question, "->", example.answers[0])
print(tokenizer.tokenize(example.context)[:18])
print([example.context[a:b] for a, b in offsets[-30:-20]])  # the last context tokens, read through their offsets


# %% nbgrader={"grade": false, "grade_id": "answer_answer_text", "locked": false, "schema_version": 3, "solution": true}
def answer_text(context, offsets, start, end):
    ### BEGIN SOLUTION
    return context[offsets[start][0] : offsets[end][1]]
    ### END SOLUTION


def answer_token_span(offsets, context_mask, answer_start, answer_text):
    ### BEGIN SOLUTION
    first = answer_start + len(answer_text) - len(answer_text.lstrip())  # [first, last): the answer, unpadded
    last = answer_start + len(answer_text.rstrip())
    tokens = [t for t, (a, b) in enumerate(offsets) if context_mask[t] and a < last and b > first]
    if not tokens or offsets[tokens[0]][0] > first or offsets[tokens[-1]][1] < last:
        return -1, -1
    return tokens[0], tokens[-1]
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "q2_offsets", "locked": true, "points": 2, "schema_version": 3, "solution": false}
gold = example.answers[0]
i, j = answer_token_span(offsets, context_masks[0], gold.start, gold.text)
assert answer_text(example.context, offsets, i, j) == "BSkyB"
n_checked = 0
for k, e in enumerate(squad_validation):
    mask = context_masks[k].tolist()
    for a in e.answers:
        got = answer_token_span(encoded.offsets[k], mask, a.start, a.text)
        assert got == reference_answer_positions(encoded.offsets[k], mask, a), f"example {e.id}, answer {a}"
        if got != (-1, -1):
            text = answer_text(e.context, encoded.offsets[k], *got)
            assert text == reference_span_text(e.context, encoded.offsets[k], *got)
            assert a.text.strip() in text, "the tokens must cover the answer"
            n_checked += 1
assert n_checked > 100, n_checked
### BEGIN HIDDEN TESTS
toy_offsets = [(0, 0), (0, 3), (4, 9), (10, 13), (0, 0)]  # "the quick fox"
toy_mask = [False, True, True, True, False]
assert answer_token_span(toy_offsets, toy_mask, 3, " quick ") == (2, 2), "spaces at the ends do not count"
assert answer_token_span(toy_offsets, toy_mask, 5, "uick fo") == (2, 3), "partial tokens count when they overlap"
assert answer_token_span(toy_offsets, toy_mask, 10, "fox jumps") == (-1, -1), "answer cut off by truncation"
assert answer_token_span(toy_offsets, [False] * 5, 0, "the") == (-1, -1), "only context tokens"
assert answer_text("the quick fox", toy_offsets, 1, 3) == "the quick fox"
### END HIDDEN TESTS

# %% [markdown]
# ## Part 3 — The official SQuAD evaluation (4 points)
#
# The official script (`evaluate-v2.0.py`) compares *normalised* strings. `normalize_answer(s)` does, in this order:
# lower-case; remove every ASCII punctuation character (`string.punctuation`); replace the whole words *a*, *an*,
# *the* by a space (regex `\b(a|an|the)\b`); collapse whitespace (split and join with one space).
#
# For one question with gold answers $G$ (annotators often give several):
#
# - gold answers that normalise to the empty string are dropped; if none is left the question is **unanswerable**
#   and its only right answer is the empty string `""`;
# - **exact match** $= \max_{g \in G} \mathbb{1}[\text{norm}(p) = \text{norm}(g)]$;
# - **F1** $= \max_{g \in G} F_1(p, g)$ over the *bags* of normalised tokens: with $c$ the number of common tokens
#   (counted with multiplicity), $P = c/|p|$, $R = c/|g|$, $F_1 = 2PR/(P+R)$, and 0 when $c = 0$. If either side
#   has no token, $F_1$ is 1 when both are empty, else 0: an unanswerable question scores 1 only for an empty
#   prediction, and an empty prediction scores 0 on an answerable one.
#
# `evaluate(predictions, examples)` maps each example's id to its predicted text and returns percentages, as the
# official script prints them: `exact`, `f1`, `total`, then the same three prefixed `HasAns_` (answerable
# questions) and `NoAns_` (unanswerable), each group only when it is not empty. `examples` have `.id` and
# `.answers` (objects with `.text`).


# %% nbgrader={"grade": false, "grade_id": "answer_normalize_answer", "locked": false, "schema_version": 3, "solution": true}
def normalize_answer(s):
    ### BEGIN SOLUTION
    s = "".join(ch for ch in s.lower() if ch not in set(string.punctuation))
    s = re.sub(r"\b(a|an|the)\b", " ", s)
    return " ".join(s.split())
    ### END SOLUTION


def exact_match(prediction, gold_answers):
    ### BEGIN SOLUTION
    golds = [g for g in gold_answers if normalize_answer(g)] or [""]
    return max(float(normalize_answer(prediction) == normalize_answer(g)) for g in golds)
    ### END SOLUTION


def f1_score(prediction, gold_answers):
    ### BEGIN SOLUTION
    def one(gold):
        p, g = normalize_answer(prediction).split(), normalize_answer(gold).split()
        if not p or not g:
            return float(p == g)
        common = sum((Counter(p) & Counter(g)).values())
        if common == 0:
            return 0.0
        precision, recall = common / len(p), common / len(g)
        return 2 * precision * recall / (precision + recall)

    golds = [g for g in gold_answers if normalize_answer(g)] or [""]
    return max(one(g) for g in golds)
    ### END SOLUTION


def evaluate(predictions, examples):
    ### BEGIN SOLUTION
    def totals(group):
        return {
            "exact": 100.0
            * sum(exact_match(predictions[e.id], [a.text for a in e.answers]) for e in group)
            / len(group),
            "f1": 100.0 * sum(f1_score(predictions[e.id], [a.text for a in e.answers]) for e in group) / len(group),
            "total": len(group),
        }

    scores = totals(examples)
    for prefix, answerable in (("HasAns", True), ("NoAns", False)):
        group = [e for e in examples if bool(e.answers) == answerable]
        if group:
            scores.update({f"{prefix}_{k}": v for k, v in totals(group).items()})
    return scores
    ### END SOLUTION


# %%
print(repr(normalize_answer("The  Norman conquest of England!")))
print(
    exact_match("the Normans", ["Normans", "Norman"]), round(f1_score("the Norman knights", ["Normans", "Norman"]), 3)
)
print(exact_match("", []), exact_match("Normandy", []), f1_score("", ["Rollo"]))

# %% nbgrader={"grade": true, "grade_id": "q3_normalize", "locked": true, "points": 1, "schema_version": 3, "solution": false}
cases = ["The  Cat!", "a", "an apple, the pear", "U.S.A.", "theory of the atom", "Théâtre — 1,000 ft", "  x  y  "]
for s in cases:
    assert normalize_answer(s) == reference_metrics.normalize_answer(s), f"{s!r}: {normalize_answer(s)!r}"
### BEGIN HIDDEN TESTS
for s in ["A.N. Other", "the the", "An", "Anne and Theo", "\t\nX\u00a0Y", "don't-stop", "ÀN apple"]:
    assert normalize_answer(s) == reference_metrics.normalize_answer(s), s
### END HIDDEN TESTS

# %% nbgrader={"grade": true, "grade_id": "q3_em_f1", "locked": true, "points": 2, "schema_version": 3, "solution": false}
golds = ["Normans", "the Norman people", "Norman"]
for prediction in ["normans", "The Normans.", "Norman people", "people of Normandy", "", "norman norman"]:
    assert exact_match(prediction, golds) == reference_metrics.squad_exact(prediction, golds), prediction
    assert abs(f1_score(prediction, golds) - reference_metrics.squad_f1(prediction, golds)) < 1e-9, prediction
assert exact_match("", []) == f1_score("", []) == 1.0, "unanswerable: the empty prediction is right"
assert exact_match("Rollo", []) == f1_score("Rollo", []) == 0.0, "unanswerable: any answer is wrong"
assert f1_score("", ["Rollo"]) == 0.0, "answerable: the empty prediction is wrong"
assert exact_match("", ["The", "a"]) == 1.0, "golds that normalise to nothing are dropped: unanswerable"
### BEGIN HIDDEN TESTS
rng = random.Random(3)
words = [w for e in squad_validation for a in e.answers for w in a.text.split()][:300] + ["the", "a", ","]
for _ in range(500):
    prediction = " ".join(rng.choice(words) for _ in range(rng.randint(0, 5)))
    gold_list = [" ".join(rng.choice(words) for _ in range(rng.randint(0, 4))) for _ in range(rng.randint(0, 3))]
    assert exact_match(prediction, gold_list) == reference_metrics.squad_exact(prediction, gold_list)
    assert abs(f1_score(prediction, gold_list) - reference_metrics.squad_f1(prediction, gold_list)) < 1e-9
for prediction, gold in [("new york new york", "new new york"), ("la la land", "la land"), ("b b b", "b b")]:
    assert abs(f1_score(prediction, [gold]) - reference_metrics.squad_f1(prediction, [gold])) < 1e-9, "tokens repeat"
### END HIDDEN TESTS

# %% nbgrader={"grade": true, "grade_id": "q3_evaluate", "locked": true, "points": 1, "schema_version": 3, "solution": false}
tiny = [
    SimpleNamespace(id="q1", answers=[Answer("Rollo", 0)]),
    SimpleNamespace(id="q2", answers=[Answer("in the 10th century", 0), Answer("10th century", 3)]),
    SimpleNamespace(id="q3", answers=[]),
]
predictions = {"q1": "Rollo", "q2": "the 10th", "q3": "France"}
ours, theirs = evaluate(predictions, tiny), reference_metrics.squad_scores(predictions, tiny)
assert set(ours) == set(theirs), f"keys {sorted(ours)} != {sorted(theirs)}"
assert all(abs(ours[k] - theirs[k]) < 1e-9 for k in theirs)
### BEGIN HIDDEN TESTS
only_answerable = tiny[:2]
assert set(evaluate(predictions, only_answerable)) == set(reference_metrics.squad_scores(predictions, only_answerable))
guesses = {e.id: (e.answers[0].text.upper() if e.answers and k % 3 else "") for k, e in enumerate(squad_validation)}
ours, theirs = evaluate(guesses, squad_validation), reference_metrics.squad_scores(guesses, squad_validation)
assert all(abs(ours[k] - theirs[k]) < 1e-9 for k in theirs)
### END HIDDEN TESTS

# %% [markdown]
# ## Putting it together: the null threshold on real SQuAD 2.0 questions (not graded)
#
# No fine-tuned model here: a *simulated* one. For each of the 210 validation questions (102 unanswerable), the
# start and end logits are noise N(0, 1), plus a bump on the gold start and end tokens — or on the null position
# ([CLS]) when the question is unanswerable, or its answer was cut off. The bump, drawn between 2 and 5 per
# question, plays a model that is sure of some answers and hesitant about others; with ~4,000 candidate spans
# per question the noise often wins, so the "model" is wrong quite often, as a tiny real one is. Decoding with
# your `best_span`, mapping back with `answer_text` and scoring with `evaluate`:

# %%
generator = torch.Generator().manual_seed(0)
logits = []
for k, e in enumerate(squad_validation):
    T = len(encoded.offsets[k])
    start, end = torch.randn(T, generator=generator), torch.randn(T, generator=generator)  # (T,), (T,)
    bump = 2.0 + 3.0 * torch.rand((), generator=generator).item()
    a = e.answers[0] if e.answers else None
    i, j = answer_token_span(encoded.offsets[k], context_masks[k].tolist(), a.start, a.text) if a else (-1, -1)
    target_start, target_end = (0, 0) if i == -1 else (i, j)  # unanswerable (or cut off): the null position
    start[target_start] += bump
    end[target_end] += bump
    logits.append((start, end))


def predict_all(threshold):
    out = {}
    for k, e in enumerate(squad_validation):
        span = best_span(*logits[k], context_masks[k], 30, null_index=0, null_threshold=threshold)
        out[e.id] = "" if span is None else answer_text(e.context, encoded.offsets[k], *span)
    return out


scores = evaluate(predict_all(0.0), squad_validation)
print({k: round(v, 1) for k, v in scores.items()})

# %%
thresholds = [t / 2 for t in range(-12, 13)]
curves = [evaluate(predict_all(t), squad_validation) for t in thresholds]
fig, ax = plt.subplots(figsize=(6, 3.5))
for key, label in (("f1", "all questions"), ("HasAns_f1", "answerable"), ("NoAns_f1", "unanswerable")):
    _ = ax.plot(thresholds, [c[key] for c in curves], label=label)
ax.set(xlabel=r"null threshold $\tau$", ylabel="F1 (%)", title="Answering less often trades HasAns for NoAns")
ax.legend()
plt.show()
best = max(range(len(thresholds)), key=lambda n: curves[n]["f1"])
print(f"best threshold {thresholds[best]}: F1 {curves[best]['f1']:.1f} (at tau = 0: {scores['f1']:.1f})")

# %% [markdown]
# Raising $\tau$ makes the decoder abstain more often: NoAns F1 climbs to 100 while HasAns F1 falls, and the
# overall F1 peaks in between — well above the naive $\tau = 0$ for this over-eager "model". BERT picks $\tau$ on
# the dev set (Devlin et al. 2019, §4.3), and so must you, on a split you do not report.
#
# ## Going further (not graded)
# - Long contexts: BERT slides a window over the context with a stride (`doc_stride = 128`) and keeps the best
#   span over all windows. Write that, comparing null scores across windows.
# - Replace the simulated logits by those of a model fine-tuned with
#   `python -m minilm.finetune --task squad2 ...` (its `SpanKind.predict` uses `minilm.heads.best_span`).
