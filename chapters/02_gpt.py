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
# # Chapter 2 — GPT: generative pretraining, decoding, fine-tuning
#
# Labelled data is scarce; raw text is not. Radford, Narasimhan, Salimans and Sutskever ("Improving Language
# Understanding by Generative Pre-Training", 2018) trained the decoder half of a Transformer as a **language model**
# on 7,000 unpublished books (BooksCorpus), then **fine-tuned the same network** on each downstream task with one
# added linear layer. One architecture, almost no task-specific machinery, and state of the art on 9 of the 12
# datasets they studied (Tables 2–4; the previous best beside GPT's score):
#
# | task | dataset | previous best | GPT |
# | --- | --- | ---: | ---: |
# | natural language inference | SNLI / MNLI-m / MNLI-mm | 89.3 / 80.6 / 80.1 | 89.9 / 82.1 / 81.4 |
# | | SciTail / QNLI / RTE | 83.3 / 82.3 / 61.7 | 88.3 / 88.1 / 56.0 |
# | question answering, commonsense | RACE / Story Cloze (ROCStories) | 53.3 / 77.6 | 59.0 / 86.5 |
# | semantic similarity | STS-B / QQP / MRPC | 81.0 / 66.1 / 86.0 | 82.0 / 70.3 / 82.3 |
# | classification | SST-2 / CoLA | 93.2 / 35.0 | 91.3 / 45.4 |
# | | GLUE (average) | 68.9 | 72.8 |
#
# The three it lost (RTE, MRPC, SST-2) include the two smallest datasets; the largest gains are on commonsense
# reasoning (+8.9 on Story Cloze), question answering (+5.7 on RACE) and CoLA (+10.4), where a model of long
# stretches of text brings what the task's own data cannot. GPT-2 (Radford et al. 2019, "Language Models are
# Unsupervised Multitask Learners") kept the recipe, moved the LayerNorms and scaled it up — and the *generation*
# side of the model became the headline.
#
# What you will see:
# 1. the objectives: the language-model likelihood $L_1$, the task loss $L_2$ and their sum $L_3$;
# 2. GPT-1 against GPT-2: post-LN against pre-LN, 117M against 124M parameters;
# 3. pretraining a tiny GPT on the Gutenberg novels: perplexity falls and samples improve;
# 4. decoding side by side — greedy, temperature, top-k, top-p — and what each does to repetition and diversity;
# 5. zero-shot behaviour: a language model that was never shown a sentiment label scores SST-2 (the paper's §5);
# 6. fine-tuning with GPT's input transformations, a miniature of the paper's Table 5 ablation (without
#    pretraining, without the auxiliary LM loss), and frozen probes of what pretraining put into each layer.

# %%
import dataclasses
import itertools
import math

import matplotlib.pyplot as plt
import torch

from minilm.analysis import recorded_results, zero_shot_scores
from minilm.analysis.probing import probe_layers, standardize
from minilm.data import load_gutenberg, load_task
from minilm.data.tasks import TASKS
from minilm.files import scratch_folder
from minilm.finetune import cli as finetune
from minilm.finetune.config import DEFAULT_TRAIN as FINETUNE_TRAIN
from minilm.finetune.config import FinetuneConfig
from minilm.finetune.kinds import TaskEncoder, task_kind
from minilm.finetune.model import GPT_DELIM, GPT_EXTRACT, GPT_START, gpt_inputs
from minilm.generation import top_k_filter, top_p_filter
from minilm.heads import pool
from minilm.models import GPT, GPTConfig, course_checkpoint, course_run_dir, untrained_like
from minilm.models.gpt import gpt_config
from minilm.objectives.causal_lm import causal_lm_loss, language_model_blocks
from minilm.recipes.gpt import clm_loss
from minilm.recipes.language_model import token_stream
from minilm.tokenizers import train_tokenizer
from minilm.train import checkpoint as ckpt
from minilm.train.pretrain import split_documents
from minilm.train.trainer import TrainConfig, Trainer
from minilm.utils import count_parameters, reproducible
from minilm.widgets import decoding_explorer, plot_decoding

reproducible(seed=0, threads=1)

# %% [markdown]
# ## 1. The objectives
#
# **Unsupervised pretraining.** Given a corpus of tokens $\mathcal{U} = \{u_1, \dots, u_n\}$, maximise the
# likelihood of each token given the $k$ before it (the context window):
#
# $$L_1(\mathcal{U}) = \sum_i \log P(u_i \mid u_{i-k}, \dots, u_{i-1}; \Theta)$$
#
# The model is a stack of Transformer decoder blocks — masked (causal) self-attention and a feed-forward layer,
# no cross-attention — over token and learned position embeddings; the output layer is the token embedding matrix
# transposed, $P(u) = \mathrm{softmax}(h_n W_e^\top)$.
#
# **Supervised fine-tuning.** A labelled example is a sequence of tokens $x^1, \dots, x^m$ with a label $y$. The
# final block's state at the last token, $h_l^m$, feeds one new linear layer $W_y$:
#
# $$P(y \mid x^1, \dots, x^m) = \mathrm{softmax}(h_l^m W_y), \qquad L_2(\mathcal{C}) = \sum_{(x, y)} \log P(y \mid x^1,
# \dots, x^m)$$
#
# **Auxiliary objective.** Keeping the language-model loss on the task's own texts while fine-tuning "(a) improves
# generalization of the supervised model, and (b) accelerates convergence":
#
# $$L_3(\mathcal{C}) = L_2(\mathcal{C}) + \lambda \cdot L_1(\mathcal{C}), \qquad \lambda = 0.5$$
#
# In code we minimise the *negative* mean of $L_1$ per token, the cross-entropy `minilm.objectives.causal_lm_loss`.
# Written out:

# %%
toy = GPT(GPTConfig(vocab_size=50, max_len=16, n_layers=1, n_heads=2, d_model=16, dropout=0.0))
block = torch.randint(0, 50, (2, 9))  # (B, seq_len + 1): read block[:, :-1], predict block[:, 1:]
logits = toy(block[:, :-1])  # (B, T, V)
log_p = logits.log_softmax(-1).gather(-1, block[:, 1:, None]).squeeze(-1)  # log P(u_i | u_<i), (B, T)
L1 = log_p.sum()  # eq. (1) of the paper, summed over this batch's 16 predictions
print("-L1 / n equals causal_lm_loss:", torch.allclose(-L1 / log_p.numel(), causal_lm_loss(logits, block)))
print(f"an untrained model's loss ≈ log V: {causal_lm_loss(logits, block).item():.1f} vs {math.log(50):.1f}")

# %% [markdown]
# ## 2. GPT-1 and GPT-2
#
# GPT-1: 12 decoder blocks, 768 wide, 12 heads, feed-forward 3072, GELU, learned positions for 512 tokens, a
# 40,000-merge BPE vocabulary, **post-LN** blocks as in the original Transformer — $x \leftarrow \mathrm{LN}(x +
# \mathrm{Sublayer}(x))$. GPT-2 moved LayerNorm to the input of each sub-block (**pre-LN**), added one after the last
# block, scaled the residual projections at initialisation by $1/\sqrt{N}$, doubled the context to 1024 and used a
# byte-level BPE of 50,257 tokens. `gpt_config("gpt1")` and `gpt_config("gpt2")` give both; we count their parameters
# on the meta device (shapes only, no memory):

# %%
with torch.device("meta"):
    models = {name: GPT(gpt_config(name)) for name in ("gpt1", "gpt2")}
for name, model in models.items():
    c = model.config
    print(
        f"{name}: {'pre-LN ' if c.norm_first else 'post-LN'}, {c.n_layers} layers, d_model {c.d_model}, "
        f"context {c.max_len}, vocabulary {c.vocab_size:,}: {count_parameters(model):,} parameters "
        f"({count_parameters(model) / 1e6:.0f}M)"
    )
embedding_share = {n: m.embedding.token.weight.numel() / count_parameters(m) for n, m in models.items()}
print("share of the token embedding:", {n: round(s, 2) for n, s in embedding_share.items()})

# %% [markdown]
# The 7.9M extra parameters of GPT-2 small are the vocabulary (9,779 more embedding rows: 7.5M), the context (512
# more position rows: 0.4M) and the final LayerNorm (1,536): the blocks themselves are the same size, and moving a
# LayerNorm costs nothing. The famous names — 117M for GPT-1 and 124M for
# GPT-2 small (which the GPT-2 paper itself called "117M") — follow from the configuration alone.
#
# **GPT-2's four sizes and WebText.** GPT-2 is GPT's recipe scaled up, with a new emphasis. Radford et al. (2019)
# trained four models of the same design (their Table 2) on **WebText**: the text of 8 million web pages linked from
# Reddit posts with at least 3 karma (a human filter for quality), 40 GB, with Wikipedia removed so that no test set
# leaked in. The paper's names (117M to 1542M) undercount the models a little; `minilm`'s presets count them exactly:

# %%
PAPER_SIZES = {"gpt2": ("117M", 12, 768), "gpt2-medium": ("345M", 24, 1024), "gpt2-large": ("762M", 36, 1280),
               "gpt2-xl": ("1542M", 48, 1600)}  # fmt: skip
with torch.device("meta"):
    gpt2_sizes = {name: GPT(gpt_config(name)) for name in PAPER_SIZES}
print(f"{'preset':12s} {'paper':>6s} {'layers':>6s} {'d_model':>7s} {'parameters':>14s}")
for name, model in gpt2_sizes.items():
    c = model.config
    print(f"{name:12s} {PAPER_SIZES[name][0]:>6s} {c.n_layers:6d} {c.d_model:7d} {count_parameters(model):14,d}")
assert all((m.config.n_layers, m.config.d_model) == PAPER_SIZES[n][1:] for n, m in gpt2_sizes.items())
counts = [count_parameters(m) for m in gpt2_sizes.values()]
assert counts == sorted(counts) and round(counts[-1] / 1e9, 1) == 1.6, counts

# %% [markdown]
# The change of emphasis is in the paper's title, "Language Models are Unsupervised Multitask Learners": GPT-2 was
# evaluated **zero-shot**, never fine-tuned, on tasks phrased as text to continue. Its largest model set the state of
# the art on 7 of 8 language-modelling datasets without training on any of them (its Table 3 and the announcement's
# summary):
#
# | dataset | metric | GPT-2 (1542M), zero-shot | previous record |
# | --- | --- | ---: | ---: |
# | LAMBADA | accuracy (perplexity) | 63.24% (8.6) | 59.23% (99) |
# | Children's Book Test, common nouns | accuracy | 93.30% | 85.7% |
# | Children's Book Test, named entities | accuracy | 89.05% | 82.3% |
# | Winograd Schema Challenge | accuracy | 70.70% | 63.7% |
# | WikiText-2 | perplexity | 18.34 | 39.14 |
# | Penn Treebank | perplexity | 35.76 | 46.54 |
# | WikiText-103 | perplexity | 17.48 | 18.3 |
# | enwik8 / text8 | bits per character | 0.93 / 0.98 | 0.99 / 1.08 |
#
# (The eighth, the One Billion Word benchmark, stayed with the previous record.) On reading comprehension,
# summarisation and translation the zero-shot scores were far below supervised systems, but rose steadily with size:
# the first sign of what GPT-3 made its thesis. Section 5 tries zero-shot sentiment on this chapter's models.
#
# ## 3. Pretraining a tiny GPT
#
# BooksCorpus held 7,000 books and 800M words; we take five of the course's Gutenberg novels (about 3M
# characters), a 2,048-token byte-level BPE trained on them, and a GPT of 2 blocks, 128 wide — about 0.7M
# parameters, a minute of CPU. `python -m minilm.train` does the same at a larger size; here we call its pieces,
# so that we can stop at a few checkpoints and read what the model writes.

# %%
books = load_gutenberg()[:5]
train_docs, val_docs = split_documents(books, fraction=0.05)  # the last 5% of each book's paragraphs held out
tokenizer = train_tokenizer((p for d in train_docs for p in d.paragraphs), family="gpt2", vocab_size=2048)
SEQ_LEN = 64
train_blocks = language_model_blocks(token_stream(tokenizer, [d.text for d in train_docs]), SEQ_LEN)
val_blocks = language_model_blocks(token_stream(tokenizer, [d.text for d in val_docs]), SEQ_LEN)
print("books:", [b.title for b in books])
print(f"{len(train_blocks):,} training blocks and {len(val_blocks):,} validation blocks of {SEQ_LEN + 1} tokens")

# %%
config = GPTConfig(vocab_size=tokenizer.vocab_size, max_len=128, n_layers=2, n_heads=4, d_model=128, dropout=0.0)
model = GPT(config)
run_dir = scratch_folder("ch02-gpt-")  # checkpoints for zero-shot and fine-tuning; deleted when the kernel stops
tokenizer.save(run_dir / "tokenizer")
STEPS, EVERY = 300, 75
trainer = Trainer(
    model,
    clm_loss,  # causal_lm_loss on block[:, :-1] -> block[:, 1:], as python -m minilm.train uses it
    train_blocks,
    TrainConfig(
        max_steps=STEPS,
        batch_size=16,
        lr=3e-3,
        warmup_steps=20,
        eval_every=EVERY,
        eval_batches=10,
        save_every=EVERY,
        keep_last=10,
        run_dir=str(run_dir),
        progress=False,
    ),
    eval_data=val_blocks,
    run_config={"job": {"model": "gpt"}, "model": dataclasses.asdict(config)},  # what a checkpoint must record
    perplexity=True,  # the loss is a mean negative log-likelihood per token: its exp is the perplexity
)
prompt_ids = torch.tensor([tokenizer.encode("It was", add_special_tokens=False)])
samples = {}


def sample_now(metrics):
    """At each evaluation: a short sample (top-k 40, temperature 0.8, a fixed seed)."""
    out = model.generate(prompt_ids, 30, temperature=0.8, top_k=40, generator=torch.Generator().manual_seed(0))
    samples[metrics["step"]] = tokenizer.decode(out[0].tolist())


trainer.on_eval = sample_now
trainer.evaluate()  # step 0: the random initialisation
_ = trainer.save()  # ... kept as a checkpoint: fine-tuning from it is "w/o pre-training"

# %%
# NBVAL_IGNORE_OUTPUT
trainer.fit()
validation = [m for m in trainer.history if m["split"] == "validation"]
for m in validation:
    print(f"step {m['step']:3d}  perplexity {m['perplexity']:7.1f}  | {samples[m['step']]}")

# %%
assert validation[0]["perplexity"] > 0.8 * tokenizer.vocab_size, "at step 0 every token is about equally likely"
assert validation[-1]["perplexity"] < 0.2 * validation[0]["perplexity"], "validation perplexity should fall >5x"
assert all(a["perplexity"] > b["perplexity"] for a, b in itertools.pairwise(validation)), "and at every checkpoint"
train_log = [m for m in trainer.history if m["split"] == "train"]
fig, ax = plt.subplots(figsize=(6, 3))
_ = ax.semilogy([m["step"] for m in train_log], [math.exp(m["loss"]) for m in train_log], label="training batch")
_ = ax.semilogy([m["step"] for m in validation], [m["perplexity"] for m in validation], "o-", label="validation")
ax.set(xlabel="step", ylabel="perplexity (log scale)", title="pretraining a 0.7M-parameter GPT")
ax.legend()
plt.show()
print("checkpoints:", sorted(p.name for p in (run_dir / "checkpoints").glob("step_*")))

# %% [markdown]
# At step 0 the model spreads its probability over the whole vocabulary (perplexity ≈ 2,048) and its sample is
# random pieces of words. Within a few dozen steps it learns which tokens are frequent and writes little else ("I",
# "the", "and", "a", commas); then which follow which: short pairs such as "I have", "a little", "It was a". The
# sample at the end is still not English — what a language model of 0.7M parameters and a minute of training can
# do. The course GPT of section 4 (3.4M parameters, about 40 minutes) gets further, to a held-out perplexity of 128
# (printed there), and is not fluent either. (The paper's model had 117M parameters and trained for 100 epochs on
# 800M words.)
#
# ## 4. Decoding strategies
#
# A language model gives a distribution over the next token; *decoding* turns it into text, one token at a time
# (`minilm.generation`):
#
# - **greedy**: the most likely token, $\arg\max_v P(v \mid x_{<t})$. Deterministic; prone to loops, because a
#   likely continuation of a likely text is often the same text again.
# - **sampling with temperature** $T$: draw from $\mathrm{softmax}(z / T)$. $T < 1$ sharpens the distribution
#   (towards greedy), $T > 1$ flattens it (towards noise).
# - **top-k** (Fan et al. 2018, "Hierarchical Neural Story Generation"): sample among the $k$ most likely tokens.
# - **top-p**, nucleus sampling (Holtzman et al. 2020, "The Curious Case of Neural Text Degeneration"): sample among
#   the smallest set of tokens whose probabilities add up to $p$ — few tokens where the model is sure, many where it
#   is not.
#
# Our one-minute model is too unsure of everything to show the difference, so we look through a better one: the
# course's own GPT (`minilm.models.course_checkpoint("gpt")`), the same recipe — 4 layers, width 192, a BPE
# vocabulary of 8,192 tokens — pretrained on all 17 novels for about 40 minutes of one CPU core (2,302 s) by
# `experiments/course_checkpoints.py` (its record holds the command, the commit and the validation perplexity).
# Here is what top-k (k = 10) and top-p (p = 0.9) keep of its next-token distribution after a context where the next
# token is nearly certain, and after one where it is wide open:

# %%
course_gpt, course_tokenizer, _ = course_checkpoint("gpt")
gpt_record = recorded_results("course_checkpoints").results["gpt"]
print(
    f"course GPT: {count_parameters(course_gpt):,} parameters, {gpt_record['steps']:,} steps of "
    f"{gpt_record['train']['batch_size']} x {gpt_record['job']['seq_len']} tokens; held-out perplexity "
    f"{gpt_record['validation']['perplexity']:.0f} (untrained: {gpt_record['untrained_validation']['perplexity']:,.0f})"
)
K, P = 10, 0.9
contexts = ["Mr. and Mrs", "It was"]  # the next token nearly certain (the period of "Mrs."); wide open
KEPT = {  # (kept by top-k, kept by top-p) -> colour, legend
    (True, True): ("tab:green", f"kept by both (top-k {K}, top-p {P})"),
    (True, False): ("tab:orange", f"kept by top-k {K} only"),
    (False, True): ("tab:blue", f"kept by top-p {P} only"),
    (False, False): ("lightgray", "dropped by both"),
}
kept = {}
fig, axes = plt.subplots(1, 2, figsize=(11, 3.4), sharey=True)
for ax, text in zip(axes, contexts, strict=True):
    with torch.no_grad():
        next_logits = course_gpt(torch.tensor([course_tokenizer.encode(text, add_special_tokens=False)]))[0, -1]  # (V,)
    probs, order = next_logits.softmax(-1).sort(descending=True)
    by_k = torch.isfinite(top_k_filter(next_logits, K))[order]  # by rank
    by_p = torch.isfinite(top_p_filter(next_logits, P))[order]
    kept[text] = {"top": course_tokenizer.decode([int(order[0])]), "p": float(probs[0]), "top_p": int(by_p.sum())}
    colors = [KEPT[bool(k), bool(p)][0] for k, p in zip(by_k[:40], by_p[:40], strict=True)]
    _ = ax.bar(range(40), probs[:40], color=colors)
    ax.set(title=f"after {text!r}: top-p keeps {kept[text]['top_p']} tokens", xlabel="tokens by rank (first 40)")
axes[0].set(ylabel="probability", ylim=(0, 1))
fig.legend(
    handles=[plt.Rectangle((0, 0), 1, 1, color=color) for color, _ in KEPT.values()],
    labels=[label for _, label in KEPT.values()],
    loc="upper center",
    ncol=4,
    fontsize=8,
)
plt.tight_layout(rect=(0, 0, 1, 0.9))
plt.show()
for text, k in kept.items():
    tokens = f"{k['top_p']} token" + "s" * (k["top_p"] > 1)
    print(f"after {text!r}: most likely {k['top']!r} (p = {k['p']:.2f}); top-p {P} keeps {tokens}, top-k {K}")

# %%
peaked, wide = (kept[text] for text in contexts)
assert peaked["p"] > 0.9 and peaked["top_p"] == 1, "a peaked context: one token holds more than p of the mass"
assert wide["p"] < 0.2 and wide["top_p"] > 100, "an open context: the mass spreads over many tokens"
print(
    "top-p keeps fewer than top-k in the peaked context, many more in the open one:",
    peaked["top_p"] < K < wide["top_p"],
)

# %% [markdown]
# Try the knobs yourself on the open context: temperature, top-k and top-p over the course GPT's distribution after
# "It was" (`minilm.widgets.decoding_explorer` filters with `minilm.generation.filter_logits`, the function sampling
# uses). The figure below it shows temperature 0.8 with top-p 0.9, for a reader without a kernel.

# %%
# NBVAL_IGNORE_OUTPUT
decoding_explorer(next_logits, course_tokenizer, top_p=0.9, n=20)  # next_logits: the last context, "It was"

# %%
fig, ax = plt.subplots(figsize=(8, 3.5))
_ = plot_decoding(ax, next_logits, course_tokenizer, temperature=0.8, top_k=None, top_p=0.9, n=20)
plt.show()

# %% [markdown]
# Top-k keeps 10 tokens in both cases. In the peaked context that is nine tokens too many: the first holds more than
# 0.9 of the probability, so top-p 0.9 keeps it alone, while sampling from top-k would now and then pick one of the
# orange tokens the model itself considers unlikely. In the open context it is too few: after "It was" the
# 11th token is as reasonable as the 10th, and top-p keeps them all — the blue bars, and many more beyond the first 40.
# Top-p adapts. Now all strategies side by side, continuing 16 prompts from the held-out paragraphs of the
# one-minute model by 40 tokens. Two numbers summarise the text:
#
# - **distinct-n** (Li et al. 2016): the fraction of distinct n-grams among all generated n-grams — low means
#   the text repeats itself;
# - **repeated 4-grams**: the fraction of generated 4-grams that already occurred earlier in the same continuation
#   — a direct measure of loops.

# %%
paragraphs = [p for d in val_docs for p in d.paragraphs if len(p.split()) > 30][:16]  # held out, not headings
prompts = torch.tensor([tokenizer.encode(p, add_special_tokens=False)[:6] for p in paragraphs])  # (16, 6)
STRATEGIES = {
    "greedy": dict(do_sample=False),
    "T = 0.7": dict(temperature=0.7),
    "T = 1.0 (pure sampling)": dict(temperature=1.0),
    "top-k 20": dict(top_k=20),
    "top-p 0.9": dict(top_p=0.9),
}


def ngrams(ids, n):
    return [tuple(ids[i : i + n]) for i in range(len(ids) - n + 1)]


def distinct_n(continuations, n):
    """Distinct n-grams / all n-grams over all continuations (Li et al. 2016)."""
    grams = [g for c in continuations for g in ngrams(c, n)]
    return len(set(grams)) / len(grams)


def repeated_4grams(continuations):
    """Fraction of 4-grams that already occurred earlier in the same continuation."""
    repeats = total = 0
    for c in continuations:
        grams = ngrams(c, 4)
        repeats += sum(g in grams[:i] for i, g in enumerate(grams))
        total += len(grams)
    return repeats / total


generations = {}
for name, kwargs in STRATEGIES.items():
    out = model.generate(prompts, 40, generator=torch.Generator().manual_seed(0), **kwargs)
    generations[name] = [row[prompts.size(1) :].tolist() for row in out]
diversity = {name: (distinct_n(c, 1), distinct_n(c, 2), repeated_4grams(c)) for name, c in generations.items()}

# %%
# NBVAL_IGNORE_OUTPUT
print(f"{'strategy':24s} {'distinct-1':>10s} {'distinct-2':>10s} {'repeated 4-grams':>17s}")
for name, (d1, d2, rep) in diversity.items():
    print(f"{name:24s} {d1:10.2f} {d2:10.2f} {rep:17.2f}")
print()
print("prompt:", tokenizer.decode(prompts[1].tolist()))
for name, c in generations.items():
    print(f"{name:24s}", repr(tokenizer.decode(c[1])))

# %%
assert diversity["greedy"][2] > 3 * diversity["T = 1.0 (pure sampling)"][2], "greedy decoding loops"
assert diversity["greedy"][1] < diversity["top-p 0.9"][1] < diversity["T = 1.0 (pure sampling)"][1] + 0.05
assert diversity["T = 0.7"][1] < diversity["T = 1.0 (pure sampling)"][1], "lower temperature, less diversity"
fig, ax = plt.subplots(figsize=(7, 2.8))
_ = ax.barh(list(diversity), [d[1] for d in diversity.values()], color="tab:blue", label="distinct-2")
_ = ax.barh(list(diversity), [-d[2] for d in diversity.values()], color="tab:red", label="repeated 4-grams (left)")
ax.axvline(0, color="black", linewidth=0.8)
ax.set(xlim=(-1, 1), xlabel="← repetition          diversity →")
ax.legend(loc="lower right", fontsize=8)
plt.show()

# %% [markdown]
# Greedy decoding falls into loops — the same phrase over and over — the "degeneration" Holtzman et al. describe
# even for GPT-2. Pure sampling never loops but wanders off into the model's unreliable tail; temperature, top-k and
# top-p trade one failure against the other. Which one reads best is a matter for a human reader (or, for a tiny
# model, none of them).
#
# **Decoding speed on your own machine: mind `OMP_WAIT_POLICY`.** The course's test suite (its `conftest.py`) and CI
# set `OMP_WAIT_POLICY=PASSIVE`, which puts idle OpenMP threads to sleep instead of letting them spin: right when a
# notebook shares two cores with pytest, where a spinning thread steals the core pytest needs. Token-by-token
# decoding is the opposite case: thousands of tiny operations, each of which must wake the sleeping threads. How
# much that costs depends on the machine (`benchmarks/generation.py`, batch 1): on one 2-core VM (Xeon) 2 passive
# threads decoded about 175 tokens/s, 1 thread about 385 and 2 spinning (`ACTIVE`) threads about 466; on another
# (AMD EPYC) 308, 303 and 390. `minilm` itself never sets the variable: when you
# decode on a machine of your own, leave it unset (or `ACTIVE`), or use `torch.set_num_threads(1)` for small models
# on a busy machine. It must be set before torch starts its thread pool to have any effect.
#
# ## 5. Zero-shot behaviour
#
# Why does language-model pretraining help a sentiment classifier at all? Section 5 of the paper asks the question
# directly: before any fine-tuning, can the pretrained model *already* do the task? For SST-2 the heuristic is:
# "we append the token *very* to each example and restrict the language model's output distribution to only the
# words *positive* and *negative* and guess the token it assigns higher probability to as the prediction". Figure 2
# (right) tracks such heuristics over pretraining: they improve steadily, which suggests that language modelling
# itself learns task-relevant behaviour.
#
# Words may span several BPE tokens, so we compare the log-probability of the whole continuation,
# $\log P(\text{" positive"} \mid x, \text{" very"}) = \sum_j \log P(c_j \mid x, \text{" very"}, c_{<j})$, which
# `minilm.generation.continuation_log_prob` computes. `minilm.analysis.zero_shot_scores` applies the rule: the accuracy
# of "the likelier label word", the same rule calibrated (Zhao et al. 2021) by each word's log-probability after the
# content-free prompt "N/A very", and the fraction of examples the raw rule gives each label.

# %%
sst2_sample = finetune.sample(load_task("sst2", "validation"), 200, seed=0)
print("labels in the sample: positive", sum(e.label for e in sst2_sample), "of", len(sst2_sample))
print("' positive' ->", tokenizer.tokenize(" positive"), " ' negative' ->", tokenizer.tokenize(" negative"))

# %%
# NBVAL_IGNORE_OUTPUT
texts, labels = [e.text for e in sst2_sample], [e.label for e in sst2_sample]  # 1 = positive
live_zero_shot = {}
for path in sorted((run_dir / "checkpoints").glob("step_*")):
    ckpt.load_weights(path, model)
    scores = zero_shot_scores(model.eval(), tokenizer, texts, labels, (" negative", " positive"), template="{} very")
    live_zero_shot[ckpt.read_meta(path)["step"]] = scores
for step, s in live_zero_shot.items():
    print(
        f"step {step:3d}: accuracy {s['accuracy']:.3f}, calibrated {s['calibrated_accuracy']:.3f}; "
        f"called positive: {s['predicted_fraction'][1]:.2f}"
    )

# %%
assert len(live_zero_shot) == STEPS // EVERY + 1
assert all(0 <= s["accuracy"] <= 1 and 0 <= s["calibrated_accuracy"] <= 1 for s in live_zero_shot.values())

# %% [markdown]
# The live model's numbers hover around chance: with 0.7M parameters and a minute on five novels it has barely
# seen "very positive" or "very negative" at all. The experiment script `experiments/ch02_gpt.py` runs the same
# measurement on a 5.3M-parameter GPT pretrained for 600 steps on all 17 novels (8,192-token vocabulary), on 500
# SST-2 validation sentences, at every 100 steps. Its recorded results:

# %%
recorded = recorded_results("ch02_gpt")
print(recorded.describe())
results = recorded.results
curve = results["zero_shot"]
print("positive labels in the 500 sentences:", results["zero_shot_positive_fraction"])
for p in curve:
    ppl = f"{p['val_perplexity']:.0f}" if p["val_perplexity"] else "—"
    print(
        f"step {p['step']:3d}: validation perplexity {ppl:>4s}; zero-shot accuracy {p['sst2_zero_shot_accuracy']:.3f}, "
        f"calibrated {p['calibrated_accuracy']:.3f}; called positive {p['predicted_positive']:.2f}"
    )

# %%
steps = [p["step"] for p in curve]
assert all(p["predicted_positive"] in (0.0, 1.0) for p in curve[1:]), "the raw rule always picks the same word"
assert all(p["calibrated_accuracy"] < 0.6 for p in curve), "calibrated: no better than chance at this scale"
fig, ax = plt.subplots(figsize=(6, 3))
_ = ax.plot(steps, [p["sst2_zero_shot_accuracy"] for p in curve], "o-", label="P(positive) > P(negative)")
_ = ax.plot(steps, [p["calibrated_accuracy"] for p in curve], "s-", label="calibrated")
ax.axhline(0.5, color="gray", linestyle="--", label="chance")
ax.set(xlabel="pretraining step", ylabel="SST-2 accuracy", title="zero-shot sentiment over pretraining (cf. Fig. 2)")
ax.legend(fontsize=8)
plt.show()

# %% [markdown]
# An honest negative result. The raw rule calls *every* sentence positive, or every one negative — whichever of
# the two words the model finds likelier after "very" in general — so its accuracy is just the share of that class
# (54% or 46%): the "improvement" from step 300 to 400 is the model changing its mind about " positive" against
# " negative", not about the reviews. Calibration removes that prior, and what is left wanders around chance
# (45–58%; on 500 sentences one standard error is 2.2 points). The paper's Figure 2 curves come from a 117M-parameter
# model trained on 800M words of books; our 5.3M-parameter model read about 1.2M tokens of novels and has not yet
# learned what "very positive" says about the words before it. Zero-shot ability is a property of scale — which is
# exactly the direction GPT-2 and GPT-3 went. (Exercise 2 lets you try other label words.)
#
# ## 6. Fine-tuning: input transformations and the Table 5 ablation
#
# GPT fine-tunes with one new linear layer on the final state of the last token — so every task must become *one
# token sequence*. Figure 1 (right) of the paper gives the transformations: a start token $\langle s \rangle$, the
# texts joined by a delimiter $\$$, and an extract token $\langle e \rangle$ at the end whose final state feeds the
# head. Similarity tasks have no natural order, so both orders are encoded and their final states summed; multiple
# choice encodes one sequence per answer and takes a softmax over the answers' scores. `python -m minilm.finetune`
# does this for GPT (`input_format=gpt`, the default for GPT's tokenizer), adding the three tokens to the tokenizer
# with freshly initialised embedding rows. The actual token sequences minilm's encoder builds:

# %%
gpt_tokenizer = gpt_inputs(tokenizer)  # the three new tokens get ids 2048, 2049, 2050
encoder = TaskEncoder(gpt_tokenizer, max_length=40, pooling="last", both_orders=True)
for task, description in [
    ("sst2", "classification"),
    ("rte", "entailment: premise $ hypothesis"),
    ("mrpc", "similarity: both orders, final states summed"),
    ("copa", "multiple choice: one sequence per answer"),
]:
    kind = task_kind(TASKS[task])
    example = min(load_task(task, "validation")[:50], key=lambda e: len(" ".join(kind.texts(e))))  # a short one
    print(f"{task} ({description}):")
    for ids in kind.encode_examples([example], encoder)[0].input_ids:
        print("   ", "|".join(gpt_tokenizer.decode([i], skip_special_tokens=False) for i in ids))
print("new token ids:", [gpt_tokenizer.token_to_id(t) for t in (GPT_START, GPT_DELIM, GPT_EXTRACT)])

# %% [markdown]
# Now the paper's ablation (Table 5) in miniature: fine-tune on SST-2 from the random initialisation ("Transformer
# w/o pre-training"), from the pretrained model ("w/o aux LM", $\lambda = 0$), and with the auxiliary LM loss
# ($\lambda = 0.5$). Live, with the course GPT of section 4 (pretrained 40 minutes) and, for the first row, the same
# architecture and tokenizer with freshly initialised weights (`course_run_dir(..., untrained=True)`), each fine-tuned
# for 200 steps of 16 sentences (3,200 SST-2 training phrases) and scored on GLUE's 872 dev sentences (the course's
# SST-2 `test` split: whole sentences from other reviews, whereas most phrases of its `validation` split, carved from
# GLUE's training set, also occur inside training phrases):

# %%
FT_STEPS, FT_EXAMPLES, FT_LR, MARGIN = 200, 3200, 5e-4, 0.1
live_rows = {
    "w/o pre-training": (course_run_dir("gpt", run_dir / "course-untrained", untrained=True), 0.0),
    "w/o aux LM (λ = 0)": (course_run_dir("gpt", run_dir / "course"), 0.0),
    "full (λ = 0.5)": (run_dir / "course", 0.5),
}
sst2_test = load_task("sst2", "test")  # what the runs are scored on
majority = max(sum(e.label for e in sst2_test), sum(1 - e.label for e in sst2_test)) / len(sst2_test)
standard_error = math.sqrt(0.7 * 0.3 / len(sst2_test))  # of an accuracy near 0.7
print(f"majority class of the {len(sst2_test)} test sentences: {majority:.3f}; standard error {standard_error:.3f}")

# %%
# NBVAL_IGNORE_OUTPUT
live_ablation = {}
for row, (directory, lm_weight) in live_rows.items():
    job = FinetuneConfig(
        task="sst2",
        pretrained=str(directory),
        lm_weight=lm_weight,
        max_length=48,
        max_train_examples=FT_EXAMPLES,
        eval_split="test",
        max_eval_examples=len(sst2_test),
    )
    train = dataclasses.replace(
        FINETUNE_TRAIN, max_steps=FT_STEPS, lr=FT_LR, batch_size=16, warmup_steps=10, eval_every=0, progress=False
    )
    live_ablation[row] = finetune.run(job, train, {})["metrics"]["accuracy"]
pretrained_rows = ("w/o aux LM (λ = 0)", "full (λ = 0.5)")
scratch_acc = live_ablation["w/o pre-training"]
print({row: round(acc, 3) for row, acc in live_ablation.items()})
print(
    "pretrained rows minus the untrained control:",
    {r: round(live_ablation[r] - scratch_acc, 3) for r in pretrained_rows},
)

# %%
print(f"every row beats the majority class by more than {MARGIN}:", min(live_ablation.values()) > majority + MARGIN)
no_gain = all(live_ablation[row] < scratch_acc + standard_error for row in pretrained_rows)
print("no pretrained row beats the control by one standard error or more:", no_gain)
assert min(live_ablation.values()) > majority + MARGIN and no_gain

# %% [markdown]
# Every row now learns something: all three classifiers beat the majority class of the 872 test sentences by more than
# ten points. But the pretrained rows do not beat the untrained control (the differences are printed above; one
# standard error is 1.6 points): on 3,200 labelled phrases the randomly initialised model learns SST-2 at least as
# well, as in the recorded run below (250 steps on 4,000 sentences). Whether fewer labels, where pretraining should
# matter most, change the order is exercise 7. Have 40 minutes of novels (3.4M parameters, 2.7M tokens) then put
# nothing into the model that movie reviews can use? Fine-tuning cannot tell: with all its parameters free, it
# learns as much from scratch. After the recorded table, a frozen probe asks what a classifier can read from the
# bodies. The paper's 14.8-point gain needs a model and a corpus large enough that what pretraining learns is far
# more than the task's own data can teach.
#
# The experiment script runs the full miniature: the 5.3M-parameter model pretrained on all 17 novels, SST-2
# (4,000 training sentences, 872 test sentences) and RTE (all 2,127 training pairs, 277 test pairs), each from the
# pretraining run's own random initialisation, pretrained with $\lambda = 0$ and pretrained with $\lambda = 0.5$.

# %%
table = results["ablation"]
print(f"{'':24s} {'SST-2':>6s} {'RTE':>6s}")
for row in dict.fromkeys(r["row"] for r in table):
    scores = {r["task"]: r["accuracy"] for r in table if r["row"] == row}
    print(f"{row:24s} {100 * scores['sst2']:6.1f} {100 * scores['rte']:6.1f}")
print(f"{'chance':24s} {50.0:6.1f} {50.0:6.1f}")
assert all(r["accuracy"] > 0.6 for r in table if r["task"] == "sst2"), "SST-2: every row learns something"
assert all(0.4 < r["accuracy"] < 0.6 for r in table if r["task"] == "rte"), "RTE: every row is near chance"

# %%
fig, axes = plt.subplots(1, 2, figsize=(10, 3), sharey=True)
for ax, task in zip(axes, ("sst2", "rte"), strict=True):
    rows = [r for r in table if r["task"] == task]
    _ = ax.barh([r["row"] for r in rows], [100 * r["accuracy"] for r in rows], color="tab:blue")
    ax.axvline(50, color="gray", linestyle="--")
    ax.set(title=f"{task.upper()} accuracy (recorded)", xlim=(0, 100))
plt.tight_layout()
plt.show()

# %% [markdown]
# In the paper (Table 5) the lack of pretraining "hurts performance across all the tasks, resulting in a 14.8%
# decrease compared to our full model", and of the auxiliary loss: "larger datasets benefit from the auxiliary
# objective but smaller datasets do not" — SST-2 and RTE are among the smaller ones.
#
# Our miniature does **not** reproduce the benefit of pretraining, and it is worth saying why rather than tuning until
# it does. On SST-2 the run from the random initialisation scored 66.2, the pretrained one 63.1 and the pretrained one
# with the auxiliary loss 65.0; on RTE, 52.0, 52.7 and 53.8. The 5.3M-parameter model read 1.2M tokens of
# 19th-century novels — GPT-1 read BooksCorpus' 800M words for 100 epochs — on text far from movie reviews (SST-2 is
# lower-cased, tokenised film criticism), and its language-model perplexity was still 155. Differences of 2–3 points
# on 872 sentences are within one or two standard errors (1.6 points) of a single run. RTE, with 2,127 training pairs,
# is near chance for every row; it is hard for GPT-1 too (56.0 in the paper's Table 2). What the experiment does show
# is the machinery: the same checkpoint, the same tokenizer and the same fine-tuning recipe with one switch changed at
# a time — the shape of an ablation you can rerun at a scale where the effect appears (exercise 4).

# %% [markdown]
# ### What pretraining did put in: a frozen probe
#
# Chapter 1's question, asked of GPT: freeze each body, represent a sentence by the mean of one layer's states over
# its tokens (`minilm.heads.pool(..., "mean")`), and train only a linear classifier on these vectors
# (`minilm.analysis.probing.probe_layers`: one probe per layer and one on a learned scalar mix of all, three seeds
# each), on the same 3,200 training phrases, scored on the same 872 test sentences. Layer 0 is the token embeddings
# (with positions); layers 1–4 are the blocks' outputs.


# %%
@torch.no_grad()
def sentence_layers(model, texts: list[str], batch_size: int = 64) -> list[torch.Tensor]:
    """Each layer's mean state over each text's tokens: n_layers + 1 tensors (len(texts), d_model)."""
    per_layer = None
    for start in range(0, len(texts), batch_size):
        batch = course_tokenizer(texts[start : start + batch_size], max_length=64, add_special_tokens=False,
                                 return_tensors="pt")  # fmt: skip
        mask = batch["attention_mask"]  # (B, T): right padding
        states = model.features(batch["input_ids"], mask, output_hidden_states=True).hidden_states  # each (B, T, C)
        per_layer = per_layer or [[] for _ in states]
        for chunks, h in zip(per_layer, states, strict=True):
            chunks.append(pool(h, mask, "mean"))  # (B, C)
    return [torch.cat(chunks) for chunks in per_layer]


probe_train = finetune.sample(load_task("sst2", "train"), FT_EXAMPLES, FINETUNE_TRAIN.seed)  # the fine-tunes' phrases
train_labels, test_labels = (torch.tensor([e.label for e in split]) for split in (probe_train, sst2_test))
probes = {}
for name, body in (("untrained", untrained_like(course_checkpoint("gpt"))), ("pretrained", course_gpt)):
    train_layers, test_layers = standardize(
        sentence_layers(body, [e.text for e in probe_train]), sentence_layers(body, [e.text for e in sst2_test])
    )
    probes[name] = probe_layers(train_layers, train_labels, test_layers, test_labels, 2, seeds=(0, 1, 2), epochs=10)

# %%
# NBVAL_IGNORE_OUTPUT
print(f"{'probe on':10s} {'untrained':>9s} {'pretrained':>10s}")
for layer in probes["pretrained"]:
    print(f"{layer:10s} {probes['untrained'][layer]['accuracy']:9.3f} {probes['pretrained'][layer]['accuracy']:10.3f}")

# %%
layers = list(probes["pretrained"])
fig, ax = plt.subplots(figsize=(7, 3))
for offset, name in ((-0.2, "untrained"), (0.2, "pretrained")):
    xs = [i + offset for i in range(len(layers))]
    _ = ax.bar(xs, [probes[name][layer]["accuracy"] for layer in layers], width=0.4, label=f"{name} body")
ax.axhline(majority, color="gray", linestyle="--", label="majority class")
ax.axhline(scratch_acc, color="tab:green", linestyle=":", label="untrained body fine-tuned (all weights)")
ax.set(xticks=range(len(layers)), xticklabels=layers, ylim=(0, 1), ylabel="SST-2 test accuracy")
ax.set_title("linear probes on the frozen course GPT and its untrained twin")
ax.legend(fontsize=8, loc="upper left", ncol=2)
plt.show()

# %%
gap = {layer: probes["pretrained"][layer]["accuracy"] - probes["untrained"][layer]["accuracy"] for layer in layers}
blocks = [layer for layer in layers if layer not in ("layer 0", "ScalarMix")]
print("the pretrained body is more readable at every block:", all(gap[layer] > 0 for layer in blocks))
print(f"at the top block by more than {MARGIN / 2:.2f}:", gap[blocks[-1]] > MARGIN / 2)
untrained_acc = {layer: probes["untrained"][layer]["accuracy"] for layer in layers}
print("untrained: each random block reads worse than the embeddings:",
      all(untrained_acc[layer] < untrained_acc["layer 0"] for layer in blocks))  # fmt: skip
best_probe = max(probes["pretrained"][layer]["accuracy"] for layer in layers)
print("every frozen probe is below the fine-tuned untrained model:", best_probe < scratch_acc)
assert all(gap[layer] > 0 for layer in blocks) and gap[blocks[-1]] > MARGIN / 2 and best_probe < scratch_acc

# %% [markdown]
# Pretraining did put something in. The untrained body's embeddings are a random bag of words — a linear classifier
# reads which words occur, and does better than chance with it — and every random block blurs that further. The
# pretrained body keeps a readable sentiment signal all the way up: at every block its probe beats the untrained
# one's, at the top by the margin printed above, well beyond the standard error. Language modelling on novels learned
# features that sentiment can use, without ever seeing a label.
#
# Both findings hold at once. Frozen, the pretrained features are better than random ones; but every frozen probe is
# below what full fine-tuning from scratch reaches on the same 3,200 phrases, because 3,200 labels teach a small model
# more about SST-2 than 2.7M tokens of novels did. GPT-1's 14.8 points come from the other side of that comparison:
# features, learned from 800M words, worth more than a task's labels can teach. (Chapter 3's Table 7 compares frozen
# features with fine-tuning for BERT; Chapter 1 probes ELMo the same way.)

# %% [markdown]
# ### Figure 2 (left) in miniature: how many layers to transfer
#
# Radford et al. transferred the embeddings and the first $k$ of the 12 pretrained blocks into the task model, the
# rest freshly initialised, and found that "transferring embeddings improves performance and that each transformer
# layer provides further benefits up to 9% for full transfer on MultiNLI": the lower layers are not the only useful
# ones. `experiments/ch02_transfer_layers.py` does the same with the course GPT (4 blocks), fine-tuning each
# variant on SST-2 and SNLI for the same steps:

# %%
transfer = recorded_results("ch02_transfer_layers")
print(transfer.describe())
transfer_rows = transfer.results["rows"]
print(f"\n{'transferred':24s} {'SST-2':>6s} {'SNLI':>6s}")
for r in transfer_rows:
    what = "nothing" if r["blocks_transferred"] is None else f"embeddings + {r['blocks_transferred']} blocks"
    print(f"{what:24s} {r['sst2_accuracy']:6.3f} {r['snli_accuracy']:6.3f}")

fig, ax = plt.subplots(figsize=(6, 3.5))
ks = [r["blocks_transferred"] for r in transfer_rows[1:]]
for task, label in (("sst2", "SST-2"), ("snli", "SNLI")):
    (line,) = ax.plot(ks, [r[f"{task}_accuracy"] for r in transfer_rows[1:]], "o-", label=label)
    ax.axhline(
        transfer_rows[0][f"{task}_accuracy"],
        color=line.get_color(),
        linestyle=":",
        label=f"{label}, nothing transferred",
    )
ax.set(xlabel="pretrained blocks transferred (besides the embeddings)", ylabel="dev accuracy", ylim=(0, 1), xticks=ks)
ax.legend(fontsize=8)
ax.set_title("Figure 2 (left) in miniature (recorded)")
plt.show()

# %%
none_row, embeddings_only, full = transfer_rows[0], transfer_rows[1], transfer_rows[-1]
gains = {t: full[f"{t}_accuracy"] - embeddings_only[f"{t}_accuracy"] for t in ("sst2", "snli")}
print(f"from the embeddings alone to every block: SST-2 {gains['sst2']:+.3f}, SNLI {gains['snli']:+.3f}")
print("the embeddings alone do worse than no pretraining on both tasks:",
      all(embeddings_only[f"{t}_accuracy"] < none_row[f"{t}_accuracy"] for t in ("sst2", "snli")))  # fmt: skip
print("full transfer is within 1 point of no pretraining on both:",
      all(abs(full[f"{t}_accuracy"] - none_row[f"{t}_accuracy"]) < 0.01 for t in ("sst2", "snli")))  # fmt: skip
steps = {t: [b[f"{t}_accuracy"] - a[f"{t}_accuracy"] for a, b in itertools.pairwise(transfer_rows[1:])]
         for t in ("sst2", "snli")}  # fmt: skip
error = transfer.results["setup"]["accuracy_standard_error"]
for t in ("sst2", "snli"):
    print(f"{t}: block by block {' '.join(f'{d:+.3f}' for d in steps[t])} (one standard error: {error[t]:.3f})")
assert gains["sst2"] > 0.02 and gains["snli"] > 0.02, "the transferred blocks gain back what the embeddings lost"
assert all(steps[t][0] > gains[t] / 2 for t in steps), "the first block carries most of the gain"
assert all(abs(d) < error[t] for t in steps for d in steps[t][1:]), "each later block moves it by < 1 standard error"
print("the first block carries most of the gain; each later one moves it by less than a standard error:", True)

# %% [markdown]
# Half of the paper's figure reproduces, and weakly: from the embeddings alone to all four blocks, the accuracy rises
# by 3 points on SST-2 and 3.6 on SNLI (about two standard errors). Most of it comes with the first block (1.7 and
# 2.3 points); each later block moves the accuracy by less than one standard error, and on SST-2 the fourth gives
# back 0.2. The paper's curve keeps rising with every layer it transfers, up to 9 points on MultiNLI; ours is one
# step and noise after it. The other half does not reproduce. Pretrained embeddings *alone*
# are worse than none: fresh blocks above them have to learn to read vectors shaped by another task, with 200 steps to
# do it. Transferring everything only brings the model back to the level of no pretraining, the same finding as
# the Table 5 rows above. The course GPT read 2.7M tokens of novels and its perplexity is 128; what it passes on is
# worth little for movie reviews and premises. GPT-1's 9 points on MultiNLI came from a model that had read
# BooksCorpus for 100 epochs.

# %% [markdown]
# ## GPT's training recipe
#
# **Pretraining** (§4.1): BooksCorpus (about 7,000 unpublished books, long stretches of contiguous text), byte-pair
# encoding with 40,000 merges, a 12-layer decoder (768 wide, 12 heads, feed-forward 3,072, learned positions, GELU).
# Adam with a maximum learning rate of 2.5e-4, warmed up linearly over the first 2,000 updates and annealed to 0
# on a cosine schedule; 100 epochs of minibatches of 64 random contiguous sequences of 512 tokens; dropout 0.1 on
# residuals, embeddings and attention; a modified L2 weight decay of 0.01 on the non-bias weights.
#
# **Fine-tuning** (§4.1): the same model with a linear head; dropout 0.1 on the classifier; learning rate 6.25e-5,
# batch 32, 3 epochs for most tasks ("fine-tuning is fast"), a linear decay with warm-up over 0.2% of training, and
# the auxiliary language-modelling loss with $\lambda = 0.5$. With `python -m minilm.finetune` these are
# `lr=6.25e-5 batch_size=32 lm_weight=0.5`, with `max_steps` set to three epochs of the task and `warmup_steps` to
# 0.2% of them.
#
# **Table 5's other rows.** Besides "w/o pre-training" and "w/o aux LM", Table 5 swaps the Transformer for a
# single-layer LSTM of 2,048 units, pretrained and fine-tuned the same way: its average score drops by 5.6 points
# (69.1 against 74.7), and it wins only on MRPC. The paper reads this as evidence that the Transformer's attention
# transfers long-range structure that the LSTM's recurrence does not.
#
# ## Summary
# - GPT is a Transformer decoder trained to maximise $L_1 = \sum_i \log P(u_i \mid u_{<i})$ on raw text, then
#   fine-tuned with one linear layer on the last token's state, optionally keeping $\lambda L_1$ in the loss.
# - GPT-1 (post-LN, 512 positions, 40,478 tokens) has 117M parameters; GPT-2 small (pre-LN, 1024 positions,
#   50,257 tokens) 124M, the difference almost all in the embeddings.
# - Pretraining lowers perplexity quickly; samples go from random pieces of words to frequent words and common
#   pairs of words in a minute; fluency needs far more of both model and text.
# - Greedy decoding loops; sampling wanders; temperature, top-k and top-p trade the two, top-p adaptively.
# - In the paper, task behaviour emerges from language modelling alone (zero-shot heuristics improve over
#   pretraining) and pretraining is worth 14.8 points after fine-tuning. At our scale — 3.4–5.3M parameters, 1–3M
#   tokens of novels — neither shows: after fine-tuning, the untrained control does as well on SST-2. Frozen, the
#   pretrained body's layers are more readable than its untrained twin's (linear probes), but less than what 3,200
#   labels teach a model from scratch. Figure 2 (left) half reproduces: on top of the transferred embeddings the
#   transferred blocks help (the first most, the later ones within noise), but full transfer only matches no
#   pretraining.
#
# ## Exercises
# 1. Train the live model twice as long (or with `n_layers=4`). How do the validation perplexity, the greedy loops
#    (repeated 4-grams) and the zero-shot accuracy change?
# 2. Replace " very positive"/" very negative" by " good"/" bad", or by the label words of your choice. How much
#    does the zero-shot accuracy depend on the wording? What fraction of the sample does the model call positive,
#    and what does that tell you about comparing raw probabilities? (Hint: calibrate by subtracting each word's
#    log-probability after a neutral prompt.)
# 3. Write a decoding function with a **repetition penalty** (Keskar et al. 2019: divide the positive logits of
#    tokens already generated by 1.2, multiply the negative ones). Does it fix greedy's loops? What does it break?
# 4. Fine-tune on RTE with `lm_weight` 0, 0.5 and 2. The paper found the auxiliary loss helps the larger datasets
#    more than the small ones: what do you see, and is the difference larger than the spread over 3 seeds?
# 5. Build GPT-1 with `norm_first=True` (pre-LN, as GPT-2) and count its parameters. Which parameter changes, and
#    why does a pre-LN model need a final LayerNorm?
# 6. Pretrain on text like the task's: the course GPT's recipe on movie reviews, `python -m minilm.train
#    corpus=sst2-sentences model.n_layers=4 model.n_heads=4 model.d_model=192 batch_size=16 max_steps=2400`
#    (SST-2's training phrases without their labels; Dai & Le 2015 and ULMFiT pretrained on the task's domain
#    too). Load the run with `minilm.finetune.model.from_pretrained(run_dir)` (its `.model` and `.tokenizer`), and
#    repeat the frozen probes and the Table 5 rows. Does text from the task's domain make the features more
#    readable? Does it change the fine-tuned result? Why might it not?
# 7. Fewer labels: repeat the Table 5 rows with 400 and with 800 training phrases (100 steps), three seeds each.
#    Does pretraining beat the untrained control when labels are scarce? Is the difference larger than the spread
#    over the seeds?
#
# **Lab 2** (`labs/lab02_generation.ipynb`): write the causal mask and causal self-attention, the top-k and top-p
# filters, and greedy decoding with and without a KV cache — graded against `minilm`.
