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
# # Chapter 6 — ELECTRA: pretraining text encoders as discriminators
#
# A masked language model learns from the 15% of the tokens it masks: the other 85% of every input are read but
# never predicted, so most of each forward pass teaches nothing directly. And the [MASK] token it learns to fill in
# never appears when the model is fine-tuned. Clark, Luong, Le and Manning ("ELECTRA: Pre-training Text Encoders as
# Discriminators Rather Than Generators", ICLR 2020) replace the task: a small masked LM, the **generator**, fills
# the masked positions with plausible tokens; the model we keep, the **discriminator**, reads the whole corrupted
# text and says for *every* token whether it is the original or a replacement. The task is defined on all input
# tokens, and the input has no [MASK].
#
# | BERT (Chapter 3) | ELECTRA | paper |
# | --- | --- | --- |
# | predict the 15% masked tokens (softmax over the vocabulary) | at every token: was it replaced? (a sigmoid) | §2 |
# | the input holds [MASK] tokens | the input holds plausible replacements | §2 |
# | one network | a generator (a small MLM) and a discriminator, trained jointly; the generator is dropped | §2, §3.2 |
# | L = L_MLM | L = L_MLM(generator) + λ · L_Disc(discriminator), λ = 50 | §2, §3.1 |
#
# The claim is **compute efficiency**: ELECTRA-Small, trained on one GPU in 4 days, beats GPT on GLUE, which took
# 30 times more compute; ELECTRA-Large matches RoBERTa and XLNet with a quarter of their compute. In `minilm`,
# ELECTRA is `minilm.models.electra` (the networks), `minilm.objectives.rtd` (the corruption and the losses) and
# `minilm.recipes.electra` (the objective `rtd` and the paper's ablations, for `python -m minilm.train --model
# electra`). This chapter:
#
# 1. states the objective and why it is not a GAN;
# 2. builds the paper's generators and discriminators and counts them;
# 3. writes the corruption and the loss out, and checks them against `minilm`;
# 4. loads the course's own ELECTRA, pretrained from scratch past the plateau, walks one batch through it token by
#    token, and measures on held-out text what its generator and discriminator learned, against an untrained twin;
# 5. loads the recorded miniatures of the paper's efficiency curves, generator sizes, weight sharing and Table 5;
# 6. counts the compute of a step, the paper's currency.

# %%
import math

import matplotlib.pyplot as plt
import torch
from sklearn.metrics import roc_auc_score, roc_curve

from minilm.analysis import recorded_results
from minilm.analysis.plateau import binary_entropy, past_plateau, scored_targets, token_counts, unigram_entropy
from minilm.models import course_checkpoint, untrained_like
from minilm.models.electra import (
    ELECTRA_PRESETS,
    GENERATOR_SIZES,
    Electra,
    ElectraPretraining,
    electra_config,
    generator_config,
)
from minilm.objectives.formats import make_examples
from minilm.objectives.labels import IGNORE_INDEX
from minilm.objectives.mlm import StaticMaskedDataset, masked_positions, mlm_loss
from minilm.objectives.rtd import replace_tokens, rtd_loss, sample_replacements
from minilm.recipes.electra import ReplacedTokenConfig, electra_loss, generate, wrap
from minilm.train.pretrain import load_documents, split_documents
from minilm.utils import count_parameters, reproducible
from minilm.widgets import plot_replacements, replacement_explorer

reproducible(seed=0, threads=1)

# %% [markdown]
# ## 1. Replaced-token detection
#
# Take a sequence $x = [x_1, \dots, x_n]$. Choose $k = \lceil 0.15\,n \rceil$ positions $m$ and mask them; the
# generator $G$, a masked LM, samples a token at each; the discriminator $D$ reads the result and gives, at each
# position $t$, the probability $D(x^{\text{corrupt}}, t)$ that the token there is the original (§2):
#
# $$m_i \sim \text{unif}\{1, n\}, \quad x^{\text{masked}} = \text{REPLACE}(x, m, \texttt{[MASK]}), \qquad
# \hat x_i \sim p_G(x_i \mid x^{\text{masked}}) \text{ for } i \in m, \quad
# x^{\text{corrupt}} = \text{REPLACE}(x, m, \hat x)$$
#
# $$\mathcal{L}_{\text{MLM}}(x, \theta_G) = \mathbb{E}\Big[\sum_{i \in m} -\log p_G(x_i \mid x^{\text{masked}})\Big],
# \qquad
# \mathcal{L}_{\text{Disc}}(x, \theta_D) = \mathbb{E}\Big[\sum_{t=1}^{n}
#   -\mathbb{1}(x^{\text{corrupt}}_t = x_t) \log D(x^{\text{corrupt}}, t)
#   -\mathbb{1}(x^{\text{corrupt}}_t \neq x_t) \log\big(1 - D(x^{\text{corrupt}}, t)\big)\Big]$$
#
# $$\min_{\theta_G, \theta_D} \sum_{x \in \mathcal{X}} \mathcal{L}_{\text{MLM}}(x, \theta_G)
#   + \lambda\, \mathcal{L}_{\text{Disc}}(x, \theta_D), \qquad \lambda = 50.$$
#
# The code, like ELECTRA's own and transformers', gives the discriminator one logit per token for the opposite
# event, *replaced*: its sigmoid is $P(\text{replaced}) = 1 - D(x^{\text{corrupt}}, t)$ and its label is 1 where
# $x^{\text{corrupt}}_t \neq x_t$. $\mathcal{L}_{\text{Disc}}$ is the same binary cross-entropy either way.
#
# Three details matter. A generator that samples the **correct** token has not replaced anything: "if the generator
# happens to generate the correct token, that token is considered 'real' instead of 'fake'" — so the labels compare
# $x^{\text{corrupt}}$ with $x$, not the positions with $m$. The discriminator's loss is a mean over every real token
# (padding aside), so each step trains on $n$ decisions where MLM trains on $0.15\,n$. And λ = 50 balances a
# binary cross-entropy (at most ~0.7 nats at chance, and soon far smaller, since 85% of the tokens are originals)
# against a cross-entropy over the vocabulary (several nats).
#
# **It looks like a GAN and is not one.** A generator feeding a discriminator that tells real from fake is the
# picture of a generative adversarial network, but (§2): the generator is trained by *maximum likelihood* — to
# predict the masked tokens — not to fool the discriminator; no gradient flows from the discriminator's loss back
# through the *sampling*, which is discrete; and the generator's input is masked text, not noise. The paper tried
# the adversarial version (training the generator with reinforcement learning to maximise the discriminator's loss)
# and it did worse (§3.2, Figure 3, right): the adversarially trained generator reached 58% MLM accuracy, the
# maximum-likelihood one 65%. In `minilm` the sampling is `minilm.objectives.rtd.sample_replacements`, a
# `torch.no_grad` Gumbel-max draw (as ELECTRA's code samples); the check below shows that the discriminator's loss
# leaves the generator's own weights without a gradient.
#
# **Two-stage training** is the paper's other alternative to training both networks together (§3.2): first train
# the generator alone with $\mathcal{L}_{\text{MLM}}$ for $n$ steps; then initialise the discriminator with the
# generator's weights (so the two must have the same size) and train it with $\mathcal{L}_{\text{Disc}}$ for $n$
# steps, the generator frozen. Switching to the discriminative objective lifts the downstream score at once, but
# the joint objective stays ahead for the same compute (Figure 3, right). The paper's reading: training the two
# together gives the discriminator a curriculum, an easy task while the generator is weak and a harder one as it
# improves, where a frozen, trained generator poses the hard task from the start. `minilm.recipes.electra` trains
# jointly, as the paper's final models do.
#
# ## 2. The generator and the discriminator
#
# Both are BERT encoders. `Electra` is `Bert` with embeddings of size $E$, projected to the width $H$ when
# $E \neq H$ (ELECTRA-Small: $E = 128$, $H = 256$), no pooler, and one of two heads: the discriminator's, a
# two-layer map to one "replaced" logit per token (transformers' `ElectraForPreTraining`), or the generator's, BERT's
# MLM head whose output layer is tied to the token embeddings (`ElectraForMaskedLM`). The generator is smaller: its
# hidden size, feed-forward size and number of heads are the discriminator's times a "generator size" (Table 6: 1/4
# for Small and Large, 1/3 for Base); `generator_config` derives it. The paper's three models, counted on the meta
# device (shapes only) as transformers counts them:

# %%
PAPER_PARAMETERS = {"electra-small": 14, "electra-base": 110, "electra-large": 335}  # Tables 1 and 2, millions

print(f"{'model':14s} {'L':>3s} {'H':>5s} {'E':>5s} {'discriminator':>14s} {'paper':>6s} {'gen. size':>9s} "
      f"{'generator H':>11s} {'generator':>10s}")  # fmt: skip
sizes = {}
for name in ELECTRA_PRESETS:
    with torch.device("meta"):
        discriminator = Electra(electra_config(name))
        generator = Electra(generator_config(discriminator.config, GENERATOR_SIZES[name]))
    sizes[name] = (count_parameters(discriminator), count_parameters(generator))
    c, g = discriminator.config, generator.config
    print(f"{name:14s} {c.n_layers:3d} {c.d_model:5d} {c.embedding_size:5d} {sizes[name][0] / 1e6:13.1f}M "
          f"{PAPER_PARAMETERS[name]:5d}M {GENERATOR_SIZES[name]:9.2f} {g.d_model:11d} "
          f"{sizes[name][1] / 1e6:9.1f}M")  # fmt: skip

# %%
assert all(abs(sizes[name][0] / 1e6 - paper) < 1.0 for name, paper in PAPER_PARAMETERS.items())
print("discriminators within 1M of the paper's counts:", True)

# %% [markdown]
# Most of a small generator is its embedding table, which it shares with the discriminator (below): without it,
# ELECTRA-Base's generator is 10M parameters beside a 110M discriminator. The tests check every count against
# transformers' models of the same configuration.
#
# **Weight sharing** (§3.2). With the generator and discriminator the same size, the paper compares no sharing,
# sharing the token and positional embeddings, and sharing all weights: 83.6, 84.3 and 84.4 GLUE points. The
# embeddings matter most: MLM trains them at every token the generator sees in its softmax output, the discriminator
# only at the tokens of its input. Sharing all weights forces the two networks to be the same size, and a smaller
# generator is better (section 5), so ELECTRA shares **the embeddings only**. `ElectraPretraining` holds the pair
# and makes the shared modules one module under two names:

# %%
torch.manual_seed(0)
tiny = electra_config("tiny", vocab_size=1000, n_layers=2, max_len=64)
pairs = {}
for share in ("none", "embeddings", "all"):
    size = 1.0 if share == "all" else 0.25
    pairs[share] = ElectraPretraining(Electra(tiny), Electra(generator_config(tiny, size, share)), share=share)
for share, pair in pairs.items():
    d, g = pair.discriminator, pair.generator
    print(f"share={share:10s} generator H={g.config.d_model:3d}: token table shared "
          f"{g.embedding.token is d.embedding.token}, encoder shared {g.encoder is d.encoder}, "
          f"parameters of the pair {count_parameters(pair):,}")  # fmt: skip

# %% [markdown]
# ## 3. The corruption and the loss, written out
#
# `minilm.objectives.mlm.mask_tokens` masks as BERT does; ELECTRA's code shows [MASK] at 85% of the chosen positions
# and leaves the other 15% as they are (no random tokens: the generator supplies the replacements), which is what
# `ReplacedTokenConfig().mask_config(tokenizer)` asks of it. Given the generator's samples at the masked positions,
# the corrupted input and the discriminator's labels are:


# %%
def replace_tokens_by_hand(input_ids, labels, samples):
    """x_corrupt = REPLACE(x, m, x̂) and the labels: 1 where x_corrupt differs from the original x, else 0."""
    corrupted, replaced = input_ids.clone(), torch.zeros_like(input_ids, dtype=torch.bool)
    samples = iter(samples.tolist())
    for b in range(input_ids.size(0)):
        for t in range(input_ids.size(1)):
            if labels[b, t] != IGNORE_INDEX:  # a masked position: the generator's token goes in
                corrupted[b, t] = next(samples)
                replaced[b, t] = corrupted[b, t] != labels[b, t]  # a correct sample is an original
    return corrupted, replaced


generator_ids = torch.tensor([[2, 11, 4, 13, 4, 3, 0]])  # [CLS] a [MASK] b [MASK] [SEP] [PAD]; 4 = [MASK]
labels = torch.tensor([[-100, -100, 12, -100, 14, -100, -100]])  # the originals at the masked positions: 12, 14
samples = torch.tensor([17, 14])  # the generator replaced 12 by 17, and guessed 14 right
corrupted, replaced = replace_tokens_by_hand(generator_ids, labels, samples)
print("corrupted:", corrupted.tolist(), " replaced:", replaced.int().tolist())
ours = replace_tokens(generator_ids, labels, samples)
assert torch.equal(corrupted, ours[0]) and torch.equal(replaced, ours[1])
print("equal to minilm.objectives.rtd.replace_tokens:", True)

# %% [markdown]
# The second masked position holds the original again, so it is labelled 0: there is nothing to detect. The loss of
# a batch then puts the pieces together: the generator's MLM loss at the masked positions, its samples (no gradient),
# the discriminator's binary cross-entropy at every real token, λ = 50. Written out on the tiny pair with shared
# embeddings, it equals the recipe's `electra_loss`, which `python -m minilm.train --model electra --objective rtd`
# trains with:


# %%
def electra_loss_by_hand(pair, batch, weight=50.0):
    labels, mask, segments = batch["labels"], batch["attention_mask"], batch["token_type_ids"]
    hidden = pair.generator.features(batch["input_ids"], mask, segments).last_hidden_state
    logits = pair.generator.mlm_logits(hidden, masked_positions(labels))  # (|m|, V): only where masked
    generator_loss = mlm_loss(logits, labels)
    samples = sample_replacements(logits.detach())  # x̂ ~ p_G: a draw, no gradient
    corrupted, replaced = replace_tokens(batch["input_ids"], labels, samples)
    hidden = pair.discriminator.features(corrupted, mask, segments).last_hidden_state
    disc_loss = rtd_loss(pair.discriminator.rtd_logits(hidden), replaced, weights=mask)  # every real token
    return generator_loss + weight * disc_loss, generator_loss, disc_loss


pair = wrap(Electra(tiny), tiny, ReplacedTokenConfig())  # generator 1/4 of the width, embeddings shared
batch_ids = torch.randint(5, 1000, (4, 16), generator=torch.Generator().manual_seed(1))
mlm_labels = torch.full_like(batch_ids, IGNORE_INDEX)
mlm_labels[:, 3::5] = batch_ids[:, 3::5]  # positions 3, 8 and 13 masked
batch = {"input_ids": batch_ids.masked_fill(mlm_labels != IGNORE_INDEX, 4), "labels": mlm_labels,
         "attention_mask": torch.ones_like(batch_ids), "token_type_ids": torch.zeros_like(batch_ids)}  # fmt: skip
torch.manual_seed(2)
total, generator_loss, disc_loss = electra_loss_by_hand(pair, batch)
torch.manual_seed(2)  # the same draws
ours = electra_loss(pair, batch)
parts = ", ".join(f"{name} {value.item():.3f}" for name, value in ours.parts.items())
print(f"by hand: {total.item():.3f} = {generator_loss.item():.3f} + 50 x {disc_loss.item():.3f}")
print(f"minilm:  {ours.loss.item():.3f}, parts: {parts}, weights {ours.weights}")
assert torch.allclose(total, ours.loss) and ours.weights == {"rtd": 50.0}

# %% [markdown]
# **No gradient through the sampling.** Back-propagate the discriminator's part alone: the generator's encoder and
# head get nothing, only the shared embeddings (which are the discriminator's own too) do.

# %%
pair.zero_grad()
ours.parts["rtd"].backward()
own = {name: p.grad for name, p in pair.generator.named_parameters() if not name.startswith("embedding.")}
print("generator weights with a gradient from L_Disc:", sum(g is not None and bool(g.any()) for g in own.values()),
      "of", len(own))  # fmt: skip
print("shared token table has one:", pair.discriminator.embedding.token.weight.grad is not None)
assert all(g is None or not g.any() for g in own.values())

# %% [markdown]
# ## 4. Live: the course's ELECTRA, pretrained from scratch
#
# A tiny ELECTRA trained from scratch in the minutes a notebook has learns nothing to look at: its generator reaches
# the loss of word frequencies (the *unigram plateau*), and its discriminator the base rate, calling every token
# "original" with the same probability (section 5's recorded runs stay there for 800 steps). A model at chance
# teaches nothing about what replaced-token detection learns. So this section loads the course's own ELECTRA,
# pretrained from scratch on the novels with `electra_loss` by `experiments/course_checkpoints.py`, for longer than a
# notebook can: a discriminator of 4 layers at $H = E = 128$ (the course BERT's size), a generator half as wide that
# shares its embeddings, λ = 50, 32-token sequences, and the course's lowercased WordPiece vocabulary of 8,192
# tokens. `course_checkpoint("electra").model` is the pair as it was trained; its control, `untrained_like`, is the
# same two networks freshly initialised: the *untrained twin*. Its record says the generator left the plateau; what
# the discriminator learned beside it is what this section measures.

# %%
electra = course_checkpoint("electra")
pair, tokenizer = electra.model, electra.tokenizer  # ElectraPretraining in eval mode: .discriminator, .generator
record = recorded_results("course_checkpoints").results["electra"]
settings = ReplacedTokenConfig(**record["objective_settings"])  # generator_size 0.5, share "embeddings"; λ = 50
pair.settings = settings  # the recipe's functions read λ and the sampling temperature from here
twin = untrained_like(electra, seed=0)  # the same architecture, freshly initialised: the control
d, g = pair.discriminator.config, pair.generator.config
generator_own = count_parameters(pair.generator) - count_parameters(pair.generator.embedding)
print(f"discriminator: {d.n_layers} layers, H = {d.d_model}, {count_parameters(pair.discriminator):,} parameters")
print(f"generator: {g.n_layers} layers, H = {g.d_model}, {generator_own:,} parameters of its own; embeddings shared: "
      f"{pair.generator.embedding.token is pair.discriminator.embedding.token}")  # fmt: skip
batch_size, seq_len = record["train"]["batch_size"], record["job"]["seq_len"]
print(f"pretrained {record['steps']:,} steps of {batch_size} x {seq_len} tokens ({record['tokens_seen'] / 1e6:.1f}M "
      f"tokens, {record['seconds'] / 60:.0f} minutes on one CPU thread)")  # fmt: skip

# %% [markdown]
# **The held-out text.** The last 5% of each novel's paragraphs, which pretraining never saw, cut into 32-token
# sequences and masked once with a fixed seed, as the course scores its checkpoints (ELECTRA's masking: 15% of the
# tokens, 85% of those shown as [MASK], 15% left as they are), and read in batches of 32 in order, as
# `experiments/course_checkpoints.py` reads them: the generator's draws, seeded per batch, are then those of the
# checkpoint's record, and the losses below must equal it.
#
# **Which probability.** Section 1's $D(x^{\text{corrupt}}, t)$ is the probability that token $t$ is *original*;
# the code's logit is that of *replaced*, so every score below is $P(\text{replaced}) = 1 - D(x^{\text{corrupt}}, t)$,
# with label 1 where the token was replaced.
#
# Two functions run the pair: `corrupt` is the generator's turn, taken as `minilm.recipes.electra.generate` takes
# it (the same draws: checked below) but keeping the generator's log-probabilities; `replaced_logits` is the
# discriminator's. The untrained twin reads the same corrupted text as the trained discriminator.

# %%
_, val_docs = split_documents(load_documents("gutenberg"), 0.05)
masking = settings.mask_config(tokenizer)  # 15% of the tokens; [MASK] 85%, unchanged 15%, no random tokens
examples = make_examples("full_sentences", val_docs, tokenizer, max_tokens=seq_len, seed=0)
held_out = StaticMaskedDataset(examples, masking, n_duplicates=1, seed=0)  # masked once, for every model


@torch.no_grad()
def corrupt(pair, batch):
    """The generator's turn on a masked batch: x_corrupt (B, T), replaced (B, T), and at the masked positions (|m|,)
    its loss -log p_G(x_i | x_masked) and the rank of the token it sampled in its own distribution (1: its top
    guess). Sampled with a fixed seed, as the recipe's `generate` samples in evaluation."""
    hidden = pair.generator.features(batch["input_ids"], batch["attention_mask"], batch["token_type_ids"])
    logits = pair.generator.mlm_logits(hidden.last_hidden_state, masked_positions(batch["labels"]))  # (|m|, V)
    samples = sample_replacements(logits, generator=torch.Generator().manual_seed(0))  # x̂ ~ p_G
    corrupted, replaced = replace_tokens(batch["input_ids"], batch["labels"], samples)
    log_p = logits.log_softmax(-1)  # (|m|, V)
    nll = -log_p.gather(1, scored_targets(batch)[:, None]).squeeze(1)  # the MLM loss at each masked position
    rank = 1 + (log_p > log_p.gather(1, samples[:, None])).sum(1)  # 1 + how many tokens the generator preferred
    return corrupted, replaced, nll, rank


@torch.no_grad()
def replaced_logits(pair, corrupted, batch):
    """The discriminator's "replaced" logits (B, T): sigmoid gives P(replaced) = 1 - D(x_corrupt, t)."""
    out = pair.discriminator.features(corrupted, batch["attention_mask"], batch["token_type_ids"])
    return pair.discriminator.rtd_logits(out.last_hidden_state)


columns = {}  # at every real held-out token, in order; "rank" and the generators' losses at the masked ones only
for start in range(0, len(held_out), 32):
    batch = held_out.collate([held_out[i] for i in range(start, min(start + 32, len(held_out)))])
    corrupted, replaced, nll, rank = corrupt(pair, batch)
    if start == 0:
        assert torch.equal(corrupted, generate(pair, batch)[1]), "not the draws of minilm.recipes.electra.generate"
    real, masked = batch["attention_mask"].bool(), batch["labels"] != IGNORE_INDEX
    values = {
        "original": torch.where(masked, batch["labels"], batch["input_ids"])[real],
        "corrupted": corrupted[real],
        "masked": masked[real],
        "replaced": replaced[real],
        "logit": replaced_logits(pair, corrupted, batch)[real],
        "twin logit": replaced_logits(twin, corrupted, batch)[real],  # the same corrupted text
        "rank": rank,
        "generator": nll,
        "twin generator": corrupt(twin, batch)[2],
    }
    for name, value in values.items():
        columns.setdefault(name, []).append(value)
columns = {name: torch.cat(parts) for name, parts in columns.items()}
is_replaced = columns["replaced"]
print(f"{len(held_out):,} held-out sequences: {len(is_replaced):,} tokens, {int(columns['masked'].sum()):,} masked, "
      f"{int(is_replaced.sum()):,} replaced")  # fmt: skip
print("the generator's draws are those of minilm.recipes.electra.generate:", True)

# %% [markdown]
# **Against the plateau.** Each network has a loss that a model blind to context reaches. For the generator, an MLM,
# it is the *unigram entropy* of the masked tokens, $H = -\sum_w p(w) \log p(w)$ over their empirical frequencies:
# the best loss of a model that knows how often each word occurs and nothing else
# (`minilm.analysis.plateau.unigram_entropy`). For the discriminator it is the binary entropy of the base rate $r$,
# the share of tokens replaced: $H(r) = -r \log r - (1 - r) \log (1 - r)$, the loss of a discriminator that says
# P(replaced) = r everywhere (`binary_entropy`). The course calls a language model past the plateau when its
# held-out loss is at least 1 nat below $H$; the discriminator's whole $H(r)$ is about a third of a nat, so there any
# clear gap counts.

# %%
entropy = unigram_entropy(columns["original"][columns["masked"]])  # of the masked tokens, the generator's targets
rate = is_replaced.float().mean().item()
everywhere = torch.ones_like(is_replaced)  # L_Disc over every real token
losses = {
    "trained": (columns["generator"].mean().item(), rtd_loss(columns["logit"], is_replaced, everywhere).item()),
    "untrained twin": (columns["twin generator"].mean().item(),
                       rtd_loss(columns["twin logit"], is_replaced, everywhere).item()),
}  # fmt: skip
print(f"{'held-out loss (nats)':22s} {'trained':>8s} {'untrained twin':>15s} {'context-blind':>14s}")
print(f"{'generator (MLM)':22s} {losses['trained'][0]:8.2f} {losses['untrained twin'][0]:15.2f} {entropy:14.2f}  "
      f"(unigram entropy of the masked tokens; log V = {math.log(tokenizer.vocab_size):.2f})")  # fmt: skip
print(f"{'discriminator (BCE)':22s} {losses['trained'][1]:8.3f} {losses['untrained twin'][1]:15.3f} "
      f"{binary_entropy(rate):14.3f}  (H(r), base rate r = {rate:.1%} of the tokens replaced)")  # fmt: skip
resampled = (columns["masked"] & ~is_replaced).sum() / columns["masked"].sum()
print(f"the generator sampled the original itself at {resampled:.1%} of the masked positions (label 0)")
same = {"generator": (losses["trained"][0], record["held_out_loss"]), "unigram entropy": (entropy,
        record["unigram_entropy"]), "discriminator": (losses["trained"][1], record["validation"]["parts"]["rtd"]),
        "base rate": (rate, record["validation"]["replaced_rate"])}  # fmt: skip
assert all(abs(ours - recorded) < 1e-3 for ours, recorded in same.values()), same
print("equal to the checkpoint's record (experiments/course_checkpoints.py) within 0.001:", ", ".join(same))

# %%
generator_below = entropy - losses["trained"][0]
disc_below = binary_entropy(rate) - losses["trained"][1]
assert past_plateau(losses["trained"][0], entropy) and losses["untrained twin"][0] > entropy + 1, losses
assert 0.005 < disc_below < 0.05 and losses["untrained twin"][1] > binary_entropy(rate) + 0.2, losses
print(f"generator: {generator_below:.2f} nats below the unigram entropy, past its plateau (> 1 nat):", True)
print(f"discriminator: {disc_below:.3f} nats below the base rate's entropy, barely off its plateau (< 0.05):", True)
print("the untrained twin: above both (a uniform guess over the vocabulary; P(replaced) near 0.5 everywhere):", True)

# %% [markdown]
# The two networks trained side by side for the same 4,000 steps, and they are in different places. The generator
# is 1.45 nats below the unigram entropy: it reads the context around a [MASK], well enough to draw the original word
# itself at nearly a fifth of the masked positions. The discriminator is 0.011 nats below the loss of the base rate:
# it has barely left its plateau. Both untrained twins are where chance puts them: a uniform guess over the 8,192
# tokens ($\log V$) and P(replaced) ≈ 0.5 at every token (0.69 nats). The rest of this section looks at what the
# discriminator's 0.011 nats are made of.

# %% [markdown]
# ### One batch, token by token
#
# Two held-out sequences through the course pair: what the generator was shown, what it sampled (and the rank of
# that sample among its own guesses: 1 is its favourite), what the discriminator read, the label, and the
# discriminator's P(replaced). A `*` marks a replaced token; `=` a masked position where the generator sampled the
# original (label 0).

# %%
WALK = (6, 40)  # two held-out sequences
walk = held_out.collate([held_out[i] for i in WALK])
corrupted, replaced, _, rank = corrupt(pair, walk)
probability = torch.sigmoid(replaced_logits(pair, corrupted, walk))
token = tokenizer.id_to_token
ranks = iter(rank.tolist())
for row in range(len(WALK)):
    print(f"{'original':>12s} | {'generator in':>12s} | {'its rank':>8s} | {'discr. in':>12s} | label | P(replaced)")
    for t in range(int(walk["attention_mask"][row].sum())):
        masked = walk["labels"][row, t] != IGNORE_INDEX
        original = walk["labels"][row, t] if masked else walk["input_ids"][row, t]
        mark = "*" if replaced[row, t] else ("=" if masked else " ")
        sampled = f"{next(ranks):8d}" if masked else " " * 8
        print(f"{token(int(original)):>12s} | {token(int(walk['input_ids'][row, t])):>12s} | {sampled} | "
              f"{token(int(corrupted[row, t])):>12s} | {int(replaced[row, t]):3d} {mark} | "
              f"{probability[row, t]:.2f}")  # fmt: skip
    print()

# %% [markdown]
# Every ordinary token gets a P(replaced) near the base rate, replacements and originals alike: "well" in place of
# "sawyer" (a draw the generator ranked 929th) scores 0.13, as do "confer", "distance" and "was". The discriminator
# is sure of one thing only: [CLS] and [SEP], which are never masked, are never replaced (0.00); and it leans towards
# "original" at some punctuation. The `=` rows are the generator's top guesses that happened to be right, labelled 0
# as the paper requires. Some marked rows show the original token in the generator's input ("sawyer", "outer"):
# ELECTRA leaves 15% of the chosen positions unmasked, and the generator's sample replaces them all the same.
#
# **Explore.** `minilm.widgets.replacement_explorer` runs the same two networks on one sentence of your choice, with
# `minilm.recipes.electra`'s masking and sampling: move the masking rate, the generator's sampling temperature (low:
# it writes its likeliest guesses; high: unlikely draws) and the seed, and read the discriminator's P(replaced)
# under every token. The figure below it is one setting, for readers without a running kernel.

# %%
# NBVAL_IGNORE_OUTPUT
SENTENCE = "she opened the door of the little room and looked out into the garden , where the rain had stopped ."
replacement_explorer(pair, tokenizer, SENTENCE)

# %%
fig, ax = plt.subplots(figsize=(11.5, 4.6))
shown = plot_replacements(ax, pair, tokenizer, SENTENCE, mask_prob=0.3, temperature=1.0, seed=1)
plt.tight_layout()
plt.show()
at_special = [p for p, token in zip(shown.p_replaced, shown.original, strict=True) if token in ("[CLS]", "[SEP]")]
assert any(shown.replaced) and max(at_special) < 0.01 and max(shown.p_replaced) < 0.5, shown
print(f"P(replaced) below 0.01 at [CLS] and [SEP], and at most {max(shown.p_replaced):.2f} anywhere: here too it "
      "calls no token replaced")  # fmt: skip

# %% [markdown]
# ### What the discriminator learned
#
# The area under the ROC curve (AUC) measures how well P(replaced) *ranks* the tokens, whatever the threshold: it is
# the probability that a randomly chosen replaced token scores above a randomly chosen original (0.5: chance; 1:
# every replacement above every original). Three scores of the same corrupted text are compared: the course
# discriminator's; its untrained twin's; and a rule that reads no context and flags a token by its rarity ($-\log$ of
# its frequency in the held-out text itself: a generator's unlikely samples are often rare words). [CLS] and [SEP]
# are never masked, so never replaced, and a discriminator that knows only that already scores above 0.5: the AUC is
# also given over the tokens that can be replaced.

# %%
frequency = token_counts(columns["original"], tokenizer.vocab_size).float()
rarity = -torch.log((frequency + 1) / (frequency.sum() + tokenizer.vocab_size))  # a context-free "replaced" score
scores = {
    "course ELECTRA": torch.sigmoid(columns["logit"]),
    "untrained twin": torch.sigmoid(columns["twin logit"]),
    "rarity of the token (no context)": rarity[columns["corrupted"]],
}
replaceable = ~torch.isin(columns["original"], torch.tensor(tokenizer.special_ids))  # not [CLS], [SEP]
auc, auc_replaceable = {}, {}
print(f"{'AUC of':34s} {'every token':>11s} {'replaceable':>11s}")
for name, score in scores.items():
    auc[name] = roc_auc_score(is_replaced.numpy(), score.numpy())
    auc_replaceable[name] = roc_auc_score(is_replaced[replaceable].numpy(), score[replaceable].numpy())
    print(f"{name:34s} {auc[name]:11.2f} {auc_replaceable[name]:11.2f}")
p_course = scores["course ELECTRA"]
special = ~replaceable
mean_p = {"[CLS] and [SEP]": p_course[special], "the other originals": p_course[replaceable & ~is_replaced],
          "the replacements": p_course[is_replaced]}  # fmt: skip
print("mean P(replaced) at", "; at ".join(f"{where}: {p.mean():.3f}" for where, p in mean_p.items()))
print(f"tokens with P(replaced) > 0.5: {int((p_course > 0.5).sum())}")
suspects = p_course.topk(int(is_replaced.sum())).indices  # its most suspicious tokens, as many as were replaced
precision = is_replaced[suspects].float().mean().item()  # = the recall: as many flagged as replaced
print(f"of its {len(suspects):,} most suspicious tokens, replaced: {precision:.0%} (precision = recall here; "
      f"a blind guess: the base rate {rate:.0%})")  # fmt: skip

# %%
course, blind = auc["course ELECTRA"], auc["rarity of the token (no context)"]
assert course > auc["untrained twin"] + 0.05 and abs(auc["untrained twin"] - 0.5) < 0.03, auc
assert auc_replaceable["course ELECTRA"] > auc_replaceable["untrained twin"] + 0.03, auc_replaceable
assert abs(course - blind) < 0.03 and abs(auc_replaceable["course ELECTRA"] - auc_replaceable[
    "rarity of the token (no context)"]) < 0.03, (auc, auc_replaceable)  # fmt: skip
assert rate + 0.01 < precision < rate + 0.1 and (p_course > 0.5).sum() < 0.001 * len(p_course), (precision, rate)
print("the course discriminator ranks replacements above originals better than its twin (at chance), by > 0.05;",
      "over the replaceable tokens by > 0.03:", True)  # fmt: skip
print("...but no better than the context-free rarity rule (within 0.03), and it almost never says P > 0.5:", True)

# %% [markdown]
# Where the two kinds of token fall, and the ROC curves of the three scores (the true-positive rate against the
# false-positive rate as the threshold falls; the diagonal is chance):

# %%
fig, axes = plt.subplots(1, 2, figsize=(11, 3.2))
bins = torch.linspace(0, 0.5, 26).tolist()
_ = axes[0].hist(p_course[~is_replaced].numpy(), bins=bins, density=True, alpha=0.6, label="original tokens")
_ = axes[0].hist(p_course[is_replaced].numpy(), bins=bins, density=True, alpha=0.6, label="replaced tokens")
axes[0].axvline(rate, color="black", linestyle=":", label="the base rate")
axes[0].set(xlabel="P(replaced)", ylabel="density", yscale="log", title="the course discriminator, held out")
axes[0].legend(fontsize=8)
for name, score in scores.items():
    false_positives, true_positives, _ = roc_curve(is_replaced.numpy(), score.numpy())
    _ = axes[1].plot(false_positives, true_positives, label=f"{name} (AUC {auc[name]:.2f})")
_ = axes[1].plot([0, 1], [0, 1], ":", color="gray")
axes[1].set(xlabel="false-positive rate", ylabel="true-positive rate", title="ROC: replaced against original")
axes[1].legend(fontsize=8)
plt.tight_layout()
plt.show()

# %% [markdown]
# **Plausible and implausible replacements.** The generator's samples are not equally hard to catch. Sort the
# replaced tokens by the rank the generator gave its own sample at that position: a sample it ranked first was its
# best guess, plausible in context (often a near-synonym, or another word that fits the grammar); one it ranked
# far down is an unlikely draw, often odd in context. For each group, the AUC against the originals (those that
# could have been replaced): does the discriminator score that kind of replacement above an original?

# %%
replaced_rank = columns["rank"][is_replaced[columns["masked"]]]  # the generator's rank of each replacement
p_replacements, p_originals = p_course[is_replaced], p_course[replaceable & ~is_replaced]  # not [CLS], [SEP]
groups = {"1 (its top guess)": (1, 1), "2-5": (2, 5), "6-50": (6, 50), "> 50": (51, tokenizer.vocab_size)}
group_auc = {}
print(f"{'generator rank':18s} {'replaced':>8s} {'mean P(replaced)':>16s} {'AUC against the originals':>26s}")
for name, (lo, hi) in groups.items():
    p = p_replacements[(replaced_rank >= lo) & (replaced_rank <= hi)]
    labels = torch.cat([torch.ones(len(p)), torch.zeros(len(p_originals))])
    group_auc[name] = roc_auc_score(labels.numpy(), torch.cat([p, p_originals]).numpy())
    print(f"{name:18s} {len(p):8,d} {p.mean():16.3f} {group_auc[name]:26.2f}")
print(f"{'originals':18s} {len(p_originals):8,d} {p_originals.mean():16.3f}  (not [CLS], [SEP])")

# %%
top_guess, unlikely = group_auc["1 (its top guess)"], group_auc["> 50"]
assert unlikely > 0.65 and top_guess < 0.3 and unlikely > top_guess + 0.4, group_auc
print("unlikely replacements (rank > 50) score above the originals (AUC > 0.65):", True)
print("the generator's top guesses score below them (AUC < 0.3): they look more original than the originals:", True)

# %% [markdown]
# **What this discriminator learned, and what it has not.** It ranks a token by how *typical* it looks, not yet by
# whether it fits: the generator's unlikely draws (rank > 50) score above the originals (AUC 0.72), its top guesses
# below them (0.20), and over all the replacements the two nearly cancel (AUC 0.53 over the replaceable tokens,
# level with the rarity rule; of its 16,587 most suspicious tokens, 14% were replaced, against the base rate's
# 11%). A plausible replacement is, on average, a more typical word than the one the author wrote, so a
# discriminator that does not read the context calls it original. To do better it has to read the context, as the
# generator already does.
#
# This is the difficulty the paper points at when it varies the generator's size (§3.2, Figure 3): "having too
# strong of a generator may pose a too-challenging task for the discriminator, preventing it from learning as
# effectively". The generator learns from a softmax over 8,192 tokens at every masked position; the discriminator
# from one bit per token, and 89% of those bits say "original". In 4,000 steps the first signal taught the
# generator, half as wide as the discriminator, to read context; the second moved the discriminator 0.011 nats. The
# paper's generators are 1/4 to 1/3 of the discriminator's width (whether a weaker one helps here is exercise 6), and
# its ELECTRA-Small trained for a million steps of 128 sequences of 128 tokens, against the course checkpoint's 4,000
# of 64 × 32. The takeaway: replaced-token detection teaches a discriminator only as fast as it learns to read
# context, and a generator that already reads context well makes the replacements hard to find from the start.

# %% [markdown]
# ## 5. The paper's experiments in miniature (recorded)
#
# The paper's evidence is a set of pretraining runs compared downstream: ELECTRA against BERT along training
# (Figures 1 and 3), the generator's size (Figure 3, left), weight sharing (§3.2), and ELECTRA against its variants
# (Table 5, GLUE dev):
#
# | model | GLUE | what differs from ELECTRA |
# | --- | --- | --- |
# | ELECTRA | 85.0 | — |
# | All-Tokens MLM | 84.3 | MLM on the generator's samples, predicting every token, with a copy mechanism |
# | Replace MLM | 82.4 | MLM on the generator's samples instead of [MASK]: the pretrain–finetune mismatch removed |
# | ELECTRA 15% | 82.4 | the discriminator's loss on the 15% masked positions only |
# | BERT | 82.2 | MLM with [MASK] |
#
# Replace MLM barely beats BERT, so the [MASK] mismatch costs little; ELECTRA 15% loses most of ELECTRA's gain, so
# learning from every token is what counts; All-Tokens MLM closes most of the gap. `experiments/ch06_electra.py` runs
# all of it in miniature: one tiny ELECTRA-shaped encoder (4 layers, $H = E = 128$) pretrained from the same
# initial weights on the novels with each objective registered in `minilm.recipes.electra` (and `mlm` for BERT), the
# same data, batch, learning rate and steps, scored by linear probes on its frozen states (SST-2 sentiment and UD
# parts of speech; each on the final layer and on a learned mix of all layers) and by its replaced-token detection.
# Too long for a notebook, it was run once and recorded:

# %%
recorded = recorded_results("ch06_electra")
print(recorded.describe())
setup, runs, tables = recorded.results["setup"], recorded.results["runs"], recorded.results["tables"]
baselines = recorded.results["baselines"]
training = setup["pretraining"]
print(f"model: {setup['model']}")
print(f"{training['steps']} steps of {training['batch_size']} x {training['seq_len']} tokens (efficiency runs: "
      f"{training['curve_steps']}), lr {training['lr']}; probes: {setup['probes']}")  # fmt: skip
for task in ("sst2", "ud_pos"):
    print(f"{task}: majority class {baselines['majority'][task]:.3f}, untrained encoder "
          f"{baselines['untrained'][task]['last']:.3f} (mix {baselines['untrained'][task]['mix']:.3f}), "
          f"one probe's standard error ±{baselines['standard_error'][task]:.3f}")  # fmt: skip


def final(run: str) -> dict:
    """The scores of ``run`` at the tables' step."""
    return next(c for c in runs[run]["checkpoints"] if c["step"] == training["steps"])


TASKS = ("sst2", "ud_pos")


def label_entropy(p: float) -> float:
    """H(p) in nats: the loss of a discriminator that knows only how often tokens are replaced."""
    return -(p * math.log(p) + (1 - p) * math.log(1 - p))


def row(run: str, checkpoint: dict | None = None) -> str:
    c = checkpoint or final(run)
    probes = "  ".join(f"{c['downstream'][t]['last']:.3f}/{c['downstream'][t]['mix']:.3f}" for t in TASKS)
    detection = "  —          —        "
    if "rtd" in c["held_out"]:  # ELECTRA's (every token; its base rate's entropy beside it) or ELECTRA 15%'s
        own = c["detection"]["own_generator"]
        entropy = f"({label_entropy(own['replaced_fraction']):.3f})" if runs[run]["objective"] == "rtd" else "(15%) "
        detection = f"{own['auc']:.3f}   {c['held_out']['rtd']:.3f} {entropy}"
    return f"{run:32s} {c['step']:4d}  {probes}   {detection}   {runs[run]['flops_per_step']['total'] / 1e9:5.1f}"


HEADER = (f"{'run':32s} {'step':>4s}  {'SST-2':>11s}  {'UD POS':>11s}   {'AUC':>5s}   {'D loss (H)':>13s}   "
          "GFLOP/step")  # fmt: skip
print("SST-2 and UD POS: linear probes, final layer / mix of layers; AUC: replaced-token detection on its own")
print("generator's corruption; D loss: the discriminator's held-out loss, (H): that of knowing only the base rate")

# %% [markdown]
# ### ELECTRA against BERT along training (Figures 1 and 3)
#
# The two efficiency runs, ELECTRA (generator 1/4, embeddings shared) and BERT (`mlm` on the same encoder), scored at
# checkpoints up to step 800, against pretraining FLOPs (an ELECTRA step costs more: its
# generator's forward and backward). Dotted lines: the untrained encoder and the majority class.

# %%
efficiency = tables["efficiency"]  # [ELECTRA's run, BERT's run]
fig, axes = plt.subplots(1, 3, figsize=(14, 3.4))
for run, style in zip(efficiency, ("o-", "s-"), strict=True):
    points = runs[run]["checkpoints"]
    flops = [c["step"] * runs[run]["flops_per_step"]["total"] for c in points]
    label = "ELECTRA" if run.startswith("rtd") else "BERT (MLM)"
    for ax, task in zip(axes[:2], ("sst2", "ud_pos"), strict=True):
        _ = ax.plot(flops, [c["downstream"][task]["last"] for c in points], style, label=f"{label}, final layer")
        _ = ax.plot(flops, [c["downstream"][task]["mix"] for c in points], style, alpha=0.4,
                    label=f"{label}, mix of layers")  # fmt: skip
    if run.startswith("rtd"):
        _ = axes[2].plot([c["step"] for c in points], [c["detection"]["own_generator"]["auc"] for c in points], style,
                         label="its own generator's samples")  # fmt: skip
        _ = axes[2].plot([c["step"] for c in points], [c["detection"]["fixed_unigram"]["auc"] for c in points], "^--",
                         label="fixed unigram corruption")  # fmt: skip
for ax, task, title in zip(axes[:2], ("sst2", "ud_pos"), ("SST-2 probe", "UD POS probe"), strict=True):
    ax.axhline(baselines["untrained"][task]["last"], color="gray", linestyle=":")
    ax.axhline(baselines["majority"][task], color="black", linestyle=":")
    ax.set(xlabel="pretraining FLOPs", ylabel="accuracy", title=title)
axes[0].legend(fontsize=7)
axes[2].axhline(0.5, color="black", linestyle=":")
axes[2].set(xlabel="step", ylabel="AUC", title="ELECTRA's replaced-token detection", ylim=(0.4, 1.0))
axes[2].legend(fontsize=7)
plt.tight_layout()
plt.show()
print(HEADER)
for run in efficiency:
    for checkpoint in runs[run]["checkpoints"]:
        if checkpoint["step"] in (100, 200, 400, 800):
            print(row(run, checkpoint))

# %%
electra_run, bert_run = efficiency
electra_points = runs[electra_run]["checkpoints"][1:]  # after step 0
at_base_rate = all(
    abs(c["held_out"]["rtd"] - label_entropy(c["detection"]["own_generator"]["replaced_fraction"])) < 0.01
    for c in electra_points
)
last = {run: runs[run]["checkpoints"][-1]["downstream"]["ud_pos"] for run in efficiency}
error = baselines["standard_error"]
sst2_best = max(c["downstream"]["sst2"][k] for r in runs.values() for c in r["checkpoints"] for k in ("last", "mix"))
print("ELECTRA's discriminator loss within 0.01 nats of the base rate's entropy at every checkpoint:", at_base_rate)
never_replaced = all(c["detection"]["own_generator"]["recall"] == 0 for c in electra_points)
generator_losses = [c["held_out"]["generator"] for c in runs[electra_run]["checkpoints"]]
print("...and at no checkpoint does it call a replaced token replaced (P > 0.5; recall 0):", never_replaced)
print(f"its generator's held-out loss meanwhile: {generator_losses[0]:.1f} -> {generator_losses[-1]:.1f} nats")
print("at step 800, BERT's final layer tags parts of speech better than ELECTRA's by over 0.2:",
      last[bert_run]["last"] > last[electra_run]["last"] + 0.2)  # fmt: skip
print("...while ELECTRA's mix of layers keeps what the untrained encoder had (POS within 0.01 or above):",
      last[electra_run]["mix"] > baselines["untrained"]["ud_pos"]["mix"] - 0.01)  # fmt: skip
print("no run's SST-2 probe beats the untrained encoder's by two standard errors:",
      sst2_best < baselines["untrained"]["sst2"]["last"] + 2 * error["sst2"])  # fmt: skip
assert at_base_rate and never_replaced and last[bert_run]["last"] > last[electra_run]["last"] + 0.2
assert last[electra_run]["mix"] > baselines["untrained"]["ud_pos"]["mix"] - 0.01
assert sst2_best < baselines["untrained"]["sst2"]["last"] + 2 * error["sst2"]

# %% [markdown]
# **The miniature does not reproduce ELECTRA's efficiency, and says why.** In 800 steps (1.6M tokens, about ten
# thousand times fewer than ELECTRA-Small's pretraining), the tiny discriminator learns only how often a token is
# replaced: its held-out loss equals the entropy of that base rate at every checkpoint, its detection AUC stays near
# 0.5, and it never calls a replaced token "replaced". The generator, meanwhile, learns the words' frequencies (its
# loss falls from 8.3 to 5.7 nats), so its samples are common words: a replacement is no rarer than an original, and
# only the context tells them apart, which this encoder has not learned yet. With nothing to detect, the cheapest way to
# output the base rate is a constant, and the final layer drifts towards one: the parts of speech that a linear probe
# reads from it fall from 0.62 (untrained) to 0.26, below what the untrained encoder gives, while the mix of all
# layers stays at 0.66: the lower layers keep the words, the top layer that fine-tuning reads loses them. BERT's MLM,
# a 4,096-way target, rewards word frequencies and then context statistics from the first steps, and its final layer
# improves steadily (0.62 → 0.67). At equal steps and at equal FLOPs, BERT is ahead here. SST-2 is at the untrained
# encoder's level for every run: sentiment is out of reach of 800 tiny steps.
#
# Section 4's course ELECTRA, pretrained about five times longer (8.2M tokens) with the recipe that takes the course's
# encoders past the plateau, shows the next stage: its generator got past its plateau, and its discriminator barely
# left its own, ranking replacements no better than a rule that reads no context (AUC 0.57). What the discriminator
# needs is a body that reads context, and from scratch it gets one slowly. The paper's ELECTRA-Small trained for a
# million steps of 128 sequences of 128 tokens.

# %% [markdown]
# ### The generator's size (Figure 3, left), weight sharing (§3.2) and Table 5
#
# Every run below pretrained for the same 400 steps from the same initial encoder; only the named setting differs.

# %%
TITLES = {
    "generator_size": "generator size (embeddings shared)",
    "sharing": "weight sharing, a generator of the discriminator's size",
    "table5": "Table 5: ELECTRA and its variants",
}
for table, title in TITLES.items():
    print(f"{title}\n{HEADER}")
    for run in tables[table]:
        print(row(run))
    print()

fig, axes = plt.subplots(1, 2, figsize=(11, 3.2))
sweep = tables["generator_size"]
fractions = [runs[run]["generator_size"] for run in sweep]
for key, task, style, label in (
    ("auc", None, "o-", "detection AUC"),
    ("last", "ud_pos", "s-", "UD POS, final layer"),
    ("mix", "ud_pos", "s--", "UD POS, mix of layers"),
    ("last", "sst2", "^-", "SST-2, final layer"),
):
    values = [final(run)["detection"]["own_generator"]["auc"] if task is None else final(run)["downstream"][task][key]
              for run in sweep]  # fmt: skip
    _ = axes[0].plot(fractions, values, style, label=label)
axes[0].set(xscale="log", xlabel="generator size (fraction of the discriminator's width)", ylim=(0.1, 0.8),
            title="Figure 3 (left) in miniature")  # fmt: skip
axes[0].set_xticks(fractions, [f"{f:g}" for f in fractions])
axes[0].minorticks_off()
axes[0].legend(fontsize=7)
variants = tables["table5"]
x = torch.arange(len(variants)).float()
for offset, task in ((-0.2, "sst2"), (0.2, "ud_pos")):
    _ = axes[1].bar(x + offset, [final(run)["downstream"][task]["last"] for run in variants], width=0.4, label=task)
    axes[1].axhline(baselines["untrained"][task]["last"], color="C0" if task == "sst2" else "C1", linestyle=":")
axes[1].set_xticks(x.tolist(), [runs[run]["objective"] for run in variants], rotation=15)
axes[1].set(ylim=(0.1, 0.8), ylabel="probe accuracy, final layer", title="Table 5 in miniature (dotted: untrained)")
axes[1].legend(fontsize=7)
plt.tight_layout()
plt.show()

# %% [markdown]
# **Generator size.** Every discriminator is at the base rate (AUC 0.47–0.59, losses at their entropies), so no
# optimum can be read from this sweep: the final-layer POS probe jumps between 0.21 and 0.59 from run to run, the
# erratic collapse described above, while the mix stays at 0.66–0.67. The paper's finding, that a generator of 1/4
# to 1/2 of the discriminator is best because a stronger one makes the task too hard, needs a discriminator that
# learns something first.
#
# **Weight sharing.** Sharing all weights scores best, as in the paper (84.4 against 84.3 and 83.6), but for another
# reason: with `share=all` the generator *is* the discriminator's encoder, so the body also receives the generator's
# MLM gradient, and it behaves like BERT (POS 0.664, its final layer intact).
#
# **Table 5.** The order is close to the paper's reversed: the rows that put an MLM loss on the body (BERT, Replace
# MLM) keep a useful final layer; those trained on detection alone lose it. ELECTRA 15% is scored only at the masked
# positions, where nearly every token was replaced, and it learns to call everything "replaced". In the paper these
# differences appear after the models have learned the language; in the miniature they are differences between ways
# of staying on the first plateau. Its one clear lesson is the one section 4 shows too: replaced-token detection
# teaches little before the discriminator reads context, and at this scale it is slow to get there.

# %% [markdown]
# ## 6. What a step costs
#
# The paper's currency is pretraining compute (its Table 1 compares models by training FLOPs: ELECTRA-Small's 79.9
# GLUE points against BERT-Small's 75.1 at equal compute). A training step costs about 6 operations per parameter
# per token (2 in the forward pass, 4 in the backward), for the parameters a token passes through: the encoder's
# layers and the embedding projection, plus the output layer over the vocabulary where the loss needs it. Counted
# for the paper's Base model and for BERT-Base trained with MLM on the same 512-token inputs, the output layer
# computed only at the 15% of masked positions (as `minilm` does), per token:


# %%
def step_operations(encoder, head_positions: float, vocab_width: int, vocab_size: int) -> float:
    """~6 x (parameters a token passes through) per token, and the vocabulary projection at a share of the tokens."""
    body = sum(p.numel() for name, p in encoder.named_parameters() if not name.startswith(("embedding.token",
               "embedding.position", "embedding.segment")))  # fmt: skip
    return 6 * body + 6 * head_positions * vocab_width * vocab_size


with torch.device("meta"):
    base = Electra(electra_config("electra-base"))
    base_generator = Electra(generator_config(base.config, GENERATOR_SIZES["electra-base"]))
    bert_like = Electra(electra_config("electra-base", mlm=True, rtd=False))
V = base.config.vocab_size
cost = {
    "BERT (MLM)": step_operations(bert_like, 0.15, bert_like.config.embedding_size, V),
    "ELECTRA discriminator": step_operations(base, 0.0, 0, V),
    "ELECTRA generator (1/3)": step_operations(base_generator, 0.15, base_generator.config.embedding_size, V),
}
cost["ELECTRA, both"] = cost["ELECTRA discriminator"] + cost["ELECTRA generator (1/3)"]
for name, operations in cost.items():
    print(f"{name:25s} {operations / 1e9:5.2f} GFLOP per token  ({operations / cost['BERT (MLM)']:.2f} x BERT)")

# %% [markdown]
# An ELECTRA-Base step costs about 1.1 BERT-Base steps: the generator, a third of the width, costs about a ninth of
# the layers (a layer's cost grows with the square of the width), plus its vocabulary projection at the masked
# positions. (Attention's T×T scores, not counted here, add about a tenth to each network at 512 tokens.) The
# discriminator's head is a 768×768 map and a dot product: nothing beside a softmax over 30,522 words. So the claim
# of Table 1 is per unit of compute: for the same FLOPs, ELECTRA takes fewer steps than BERT and still comes out
# ahead; and the paper's Figure 1 plots GLUE against FLOPs. The benchmark `benchmarks/electra.py` times this step in
# `minilm` against transformers' two models: 1.45x faster, most of it from computing the generator's logits at the
# masked positions only.
#
# ## Summary
#
# - ELECTRA pretrains a discriminator to tell, at every token, whether a small masked-LM generator replaced it:
#   $\mathcal{L} = \mathcal{L}_{\text{MLM}}(\theta_G) + 50\,\mathcal{L}_{\text{Disc}}(\theta_D)$; a correct sample
#   counts as original; the generator is thrown away after pretraining.
# - It is not a GAN: the generator is trained by maximum likelihood, the sampling passes no gradient, and the
#   adversarial variant is worse.
# - The generator is a fraction of the discriminator's width (1/4–1/3), they share their embeddings, and a step costs
#   about 1.1 of BERT's.
# - The course ELECTRA, pretrained from scratch on the novels for 4,000 steps, has a generator 1.45 nats past the
#   unigram plateau but a discriminator only 0.011 nats below its base rate's entropy. It ranks replacements no
#   better than a context-free rarity rule (AUC 0.57): it scores the generator's unlikely draws above the originals
#   (AUC 0.72) and its plausible top guesses below them (0.20). A strong generator makes the discriminator's task
#   hard before it reads context, as the paper warns (§3.2). The recorded miniatures stay at the base rate for 800
#   steps and the final layer degrades, while BERT's improves: in miniature, at this compute, MLM is ahead, and
#   Table 5's order is reversed. ELECTRA's efficiency shows once the discriminator can read context, which the
#   paper's million steps provide.
#
# ## Exercises
#
# 1. **The correct sample.** Continue training the course pair of section 4 for a few hundred steps
#    (`minilm.train.trainer.Trainer` with `DynamicMasking(masking)` from `minilm.objectives.mlm` and `electra_counts`
#    from `minilm.recipes.electra`) with labels that call every masked position replaced (write the loss from
#    `replace_tokens` and `rtd_loss`, changing one line). What happens to the discriminator's P(replaced) at the
#    masked positions where the generator sampled the original, and why does it matter more as the generator
#    improves?
# 2. **λ.** Pretrain with `rtd_weight=1` and `rtd_weight=50` (`python -m minilm.train --model electra --objective
#    rtd rtd_weight=1 max_steps=1000`). Compare the two parts of the loss over training. Why does the paper need λ
#    so large?
# 3. **Temperature.** Sample the course generator at `temperature=0.5` and `2.0` (pass it to
#    `sample_replacements` in `corrupt`) and redo section 4's table of plausible and implausible replacements and its
#    AUC. Which temperature makes the task hardest, and is that the one that would teach the discriminator most?
# 4. **Adversarial ELECTRA, by thought.** The generator could be trained to *maximise* the discriminator's loss
#    with REINFORCE (§3.2). Write down the gradient estimator, and say why it has high variance compared with
#    maximum likelihood.
# 5. **Fine-tune the discriminator.** `minilm.models.course_run_dir("electra", "runs/course-electra")` writes the
#    course discriminator as a run directory; fine-tune it with `python -m minilm.finetune --task sst2 --pretrained
#    runs/course-electra`, and the same from `course_run_dir("bert", ...)` (an MLM of the same size, on the same
#    novels) and from `course_run_dir("electra", ..., untrained=True)`. Which wins, and by how much? How do the two
#    pretraining runs compare in compute (section 6; their records give the steps)?
# 6. **A weaker generator.** Pretrain with the course checkpoint's recipe (`JOBS["electra"]` in
#    `experiments/course_checkpoints.py`) but `generator_size=0.25`, a quarter of the discriminator's width as in
#    ELECTRA-Small, and rerun section 4 on the result. Does the discriminator leave its plateau sooner, and what
#    happens to the AUC of the generator's top guesses?
# 7. **The generator's own checkpoint.** The course folder `checkpoints/course/electra/` keeps the generator in
#    `generator/`, a Hugging Face folder: load it in transformers' `ElectraForMaskedLM` (with the folder's
#    tokenizer) and fill in masked sentences. What kind of MLM is it, next to the course BERT of Chapter 3?
#
# ## Lab
#
# [Lab 6: replaced-token detection](../labs/lab06_electra.py): build the corrupted input and the discriminator's
# labels (the correct sample counts as original) and the combined loss $\mathcal{L}_{\text{MLM}} +
# \lambda \mathcal{L}_{\text{Disc}}$, value and gradient, graded against `minilm.objectives.rtd`.
