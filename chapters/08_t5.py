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
# # Chapter 8 — T5: every task as text to text
#
# Raffel, Shazeer, Roberts, Lee, Narang, Matena, Zhou, Li and Liu ("Exploring the Limits of Transfer Learning with a
# Unified Text-to-Text Transformer", JMLR 2020) asked a question the earlier chapters kept answering piecemeal: with
# so many architectures, objectives, data sets and fine-tuning recipes, which choices matter? To compare them on one
# footing they cast **every task as text to text**: "we cast all of the tasks we consider — including translation,
# question answering, and classification — as feeding our model text as input and training it to generate some
# target text" (§2.4). A classifier writes its label's word, a regression writes a number, a QA model writes its
# answer; one model, one loss (teacher-forced cross-entropy) and one decoding procedure serve them all.
#
# The pretraining text is new too: the **Colossal Clean Crawled Corpus (C4)**, built from the April 2019 snapshot of
# Common Crawl by heuristics anyone can rerun (§2.2): keep only lines that end in terminal punctuation and have at
# least three words; drop pages with fewer than five sentences, with any word of a list of obscene words, with "lorem
# ipsum" or a curly brace (code); keep one copy of any three-sentence span that repeats; keep pages a language
# detector calls English with probability at least 0.99. About 750 GB of clean English, "an order of magnitude
# larger than most data sets used for pre-training" then, so that the final models never repeat their data.
#
# | | BERT (Ch. 3) | GPT (Ch. 2) | BART (Ch. 7) | T5 |
# | --- | --- | --- | --- | --- |
# | architecture | encoder | decoder | encoder–decoder | encoder–decoder (§3.2: the best of three) |
# | positions | learned, absolute | learned, absolute | learned, absolute | relative: a scalar bias per offset bucket |
# | normalisation | post-LN | pre-LN | post-LN | pre-norm **RMSNorm**, no biases at all |
# | objective | predict 15% masked | next token | rewrite the document | **span corruption**: write the spans |
# | fine-tuning | a head per task | a head per task | heads, or generation | **text to text**, also multi-task |
#
# In `minilm`: `minilm.models.t5` (the model, from `minilm.nn`'s blocks with `RMSNorm` and
# `RelativePositionBias`), `minilm.objectives.span_corruption` (span corruption and the paper's other objectives),
# `minilm.finetune.text_to_text` and `minilm.finetune.mixing` (every course task as text, and multi-task mixing),
# `minilm.recipes.t5` (`python -m minilm.train --model t5 --objective span_corruption`). This chapter:
#
# 1. shows every course task as T5 reads and writes it, and how a written answer is scored;
# 2. builds T5's layer: RMSNorm, no biases, no $1/\sqrt{d_k}$, and counts the paper's models;
# 3. draws the relative position bias as a matrix of buckets;
# 4. applies span corruption and its rivals to a real novel, and measures what each costs;
# 5. loads the course T5 and asks whether it reads its source: what its held-out loss is made of, what it writes
#    into blanks, how it compares with BART, and what it gives fine-tuning;
# 6. mixes tasks the three ways T5 compares;
# 7. loads the recorded miniatures of Tables 4 and 7 (objectives), of multi-task training, and BART against T5.

# %%
import re
from collections import Counter

import matplotlib.pyplot as plt
import torch
import torch.nn.functional as F

from minilm.analysis import recorded_results
from minilm.analysis.plateau import PLATEAU_MARGIN, past_plateau, scored_targets, unigram_entropy
from minilm.data import TASKS, Document, load_gutenberg, load_task
from minilm.data.examples import Seq2SeqExample
from minilm.data.toy import colour_questions
from minilm.files import scratch_folder
from minilm.finetune.kinds import Seq2SeqKind, TaskEncoder
from minilm.finetune.mixing import mixing_rates
from minilm.finetune.model import FinetuneModel, finetune_loss
from minilm.finetune.model import from_pretrained as body_from_run
from minilm.finetune.text_to_text import TextToTextKind, to_text
from minilm.models import course_checkpoint, course_run_dir, untrained_like
from minilm.models.t5 import T5, T5_PRESETS, T5Config, t5_config
from minilm.nn import RMSNorm, relative_position_bucket
from minilm.objectives.seq2seq import pad_seq2seq_batch
from minilm.objectives.span_corruption import (
    noise_span_counts,
    random_spans_helper,
    random_spans_noise_mask,
    reconstruct_spans,
    span_corruption,
)
from minilm.recipes.bart import DenoiseSettings, denoise_examples
from minilm.recipes.t5 import SpanCorruptionSettings, span_corruption_examples
from minilm.tokenizers import train_tokenizer
from minilm.train.pretrain import PretrainConfig, load_documents, split_documents
from minilm.train.trainer import TrainConfig, Trainer
from minilm.utils import count_parameters, reproducible
from minilm.widgets import plot_span_corruption, span_corruption_explorer

reproducible(0, threads=1)

# %% [markdown]
# ## 1. Every task is text to text
#
# T5 names the task with a prefix of the input (Appendix D) and writes the label as a word: `sst2 sentence: ...` →
# `positive`. STS-B, a regression on a 0–5 scale, becomes text too: "we simply rounded any score to the nearest
# increment of 0.2 and converted the result to a literal string representation of the number" (§2.4). SQuAD reads
# `question: ... context: ...` and writes the answer. T5 did no tagging; here a tagging task writes one tag per word.
# Here is the first validation example of every course task as the model sees it (`to_text`):

# %%
for name, info in TASKS.items():
    example = to_text(info, load_task(name, "validation")[0])
    source = example.source if len(example.source) <= 92 else example.source[:89] + "..."
    print(f"{name:10s} {source}\n{'':10s} -> {example.target[:80]}")

# %% [markdown]
# What the model writes is parsed back into the task's label space and scored by the task's own metric, exactly as
# the classifier of Chapter 3 would be. A text that is no label counts as wrong ("we always count the model's
# output as wrong", T5's postprocessors: an unknown label is class −1, an unreadable number −1.0), never as an error.
# Four SST-2 answers, two of them unusable; then 100 STS-B pairs answered with their own targets (rounded to 0.2),
# and the same with ten answers unreadable:

# %%
sst2 = TextToTextKind(TASKS["sst2"])
examples = load_task("sst2", "validation")[:4]
written = ["negative", "positive", "Positive!", ""]
print("gold:", [TASKS["sst2"].labels[e.label] for e in examples], "written:", written)
print("accuracy:", sst2.score(examples, written))
stsb = TextToTextKind(TASKS["stsb"])
pairs = load_task("stsb", "validation")[:100]
targets = [to_text(TASKS["stsb"], e).target for e in pairs]
print("gold:", [round(e.label, 2) for e in pairs[:5]], "as targets:", targets[:5])
perfect = stsb.score(pairs, targets)
unreadable = stsb.score(pairs, ["about three"] * 10 + targets[10:])
print("targets as answers:", {k: round(v, 3) for k, v in perfect.items()})
print("ten unreadable:    ", {k: round(v, 3) for k, v in unreadable.items()})
assert sst2.score(examples, [TASKS["sst2"].labels[e.label] for e in examples])["accuracy"] == 1.0
assert perfect["pearson"] > 0.99 and unreadable["pearson"] < perfect["pearson"] - 0.1

# %% [markdown]
# ## 2. The layer: RMSNorm, no biases, no $1/\sqrt{d_k}$
#
# T5's Transformer "closely follows its originally-proposed form" (§2.1) with a few simplifications, each a
# parameter of `minilm.nn.BlockConfig`:
#
# - **pre-norm**: $x \leftarrow x + \text{Sublayer}(\text{Norm}(x))$, with a final norm after each stack (GPT-2's
#   arrangement; BART and BERT normalise after the sum);
# - **RMSNorm** (Zhang & Sennrich 2019): "a simplified version of layer normalization where the activations are
#   only rescaled and no additive bias is applied":
#   $$\text{LN}(x) = \frac{x - \mu}{\sqrt{\sigma^2 + \epsilon}} \odot g + b, \qquad
#     \text{RMS}(x) = \frac{x}{\sqrt{\frac1d \sum_i x_i^2 + \epsilon}} \odot g;$$
# - **no biases** in any linear layer;
# - **no $1/\sqrt{d_k}$** in attention: $\text{softmax}(QK^\top + B)V$; Mesh TensorFlow folds the scaling into the
#   initialisation of $W^Q$, drawn with standard deviation $(d_\text{model} \cdot d_{kv})^{-1/2}$ instead of
#   $d_\text{model}^{-1/2}$;
# - the feed-forward network is ReLU in T5 (v1.0) and gated GELU, GEGLU, in T5 v1.1; v1.0 ties the output layer
#   to the token table (initialised $\mathcal{N}(0, 1)$) and scales the decoder's output by $d_\text{model}^{-1/2}$
#   before it, v1.1 has an output layer of its own.
#
# RMSNorm written out equals `minilm.nn.RMSNorm`; unlike LayerNorm it leaves the mean where it was:

# %%
x = torch.randn(4, 512) * 3 + 1.5  # activations with a mean far from 0
norm = RMSNorm(512, eps=1e-6)
with torch.no_grad():
    norm.weight.copy_(torch.rand(512) + 0.5)
written_out = x / torch.sqrt(x.pow(2).mean(dim=-1, keepdim=True) + 1e-6) * norm.weight
torch.testing.assert_close(norm(x), written_out)
layer_norm = torch.nn.LayerNorm(512)
print(f"mean of a row after LayerNorm {layer_norm(x)[0].mean():+.3f}, after RMSNorm (g = 1) "
      f"{(x / x.pow(2).mean(-1, keepdim=True).sqrt())[0].mean():+.3f}; parameters: LayerNorm "
      f"{count_parameters(layer_norm)}, RMSNorm {count_parameters(norm)}")  # fmt: skip

# %% [markdown]
# The paper's models (§3.7: Small, 60 million parameters; Base, 220 million; Large, 770 million; and 3B and 11B,
# which keep Large's depth and width and widen the feed-forward layers to 16,384 and 65,536 and the attention to 32
# and 128 heads of 128), counted on the meta device as transformers' `T5ForConditionalGeneration` counts them (the
# tests check equality, and that a checkpoint of either version loads with logits equal to transformers'):

# %%
PAPER = {"t5-small": 60, "t5-base": 220, "t5-large": 770, "t5-3b": 3000, "t5-11b": 11000}  # millions, §3.7
for name in T5_PRESETS:
    with torch.device("meta"):
        model = T5(t5_config(name))
    c = model.config
    n = count_parameters(model)
    paper = f"(paper {PAPER[name]}M)" if name in PAPER else ""
    print(f"{name:14s} {c.n_encoder_layers:2d}+{c.n_decoder_layers:2d} layers, d_model {c.d_model:4d}, {c.n_heads:3d} "
          f"heads x {c.d_kv:3d}, FFN {c.d_ff:5d} {'GEGLU' if c.gated_ffn else 'ReLU '}, head "
          f"{'tied ' if c.tie_embeddings else 'own  '}: {n / 1e6:7.1f}M {paper}")  # fmt: skip
    if name in PAPER:  # the paper's names are round numbers: within 6%
        assert abs(n / 1e6 - PAPER[name]) / PAPER[name] < 0.06
torch.manual_seed(0)
small = T5(T5Config(d_model=256, d_kv=64, n_heads=4, d_ff=512, n_encoder_layers=1, n_decoder_layers=1))
attention = small.encoder.layers[0].self_attn
print(
    f"std of W_Q {attention.q_proj.weight.std():.4f} = (256 * 64)^-1/2 = {(256 * 64) ** -0.5:.4f}; "
    f"W_K {attention.k_proj.weight.std():.4f} = 256^-1/2 = {256**-0.5:.4f}; scale in attention: {attention.scale}"
)

# %% [markdown]
# ## 3. Relative position bias
#
# T5 has no position embeddings. "Instead of using a fixed embedding for each position, relative position embeddings
# produce a different learned embedding according to the offset between the 'key' and 'query' being compared ... We
# use a simplified form of position embeddings where each 'embedding' is simply a scalar that is added to the
# corresponding logit used for computing the attention weights" (§2.1):
#
# $$A = \text{softmax}\big(QK^\top + B\big), \qquad B_{h,ij} = b_h\big(\text{bucket}(j - i)\big).$$
#
# "We use 32 embeddings for all of our models with ranges that increase in size logarithmically up to an offset of
# 128 beyond which we assign all relative positions to the same embedding", and the parameters are shared by all the
# layers of a stack (`minilm.nn.RelativePositionBias`, one per stack). In the encoder half of the 32 buckets are for
# keys to the right of the query; each half has 8 exact offsets and 8 log-spaced ranges. The decoder is causal, so
# all 32 buckets describe the past: 16 exact, 16 log-spaced. Lab 8 writes the bucket function.

# %%
offsets = torch.arange(-160, 161)
fig, axes = plt.subplots(1, 3, figsize=(13, 3.4))
_ = axes[0].plot(offsets, relative_position_bucket(offsets, bidirectional=True), label="encoder (bidirectional)")
_ = axes[0].plot(offsets, relative_position_bucket(offsets, bidirectional=False), label="decoder (causal)")
axes[0].set(xlabel="offset j - i (key minus query)", ylabel="bucket", title="32 buckets, max distance 128")
_ = axes[0].legend(fontsize=8)
positions = torch.arange(48)
relative = positions[None, :] - positions[:, None]  # (query i, key j) -> j - i
for ax, bidirectional, title in [(axes[1], True, "encoder buckets"), (axes[2], False, "decoder buckets")]:
    image = ax.imshow(relative_position_bucket(relative, bidirectional), cmap="viridis")
    ax.set(xlabel="key position j", ylabel="query position i", title=title)
    fig.colorbar(image, ax=ax, fraction=0.046)
plt.tight_layout()
plt.show()
exact = [relative_position_bucket(torch.tensor(-d)).item() for d in range(10)]
far = [relative_position_bucket(torch.tensor(-d)).item() for d in (16, 32, 64, 128, 1000)]
print("offsets 0..-9 ->", exact, "; -16, -32, -64, -128, -1000 ->", far)
assert exact[:8] == list(range(8)) and far[-2] == far[-1] == 15

# %% [markdown]
# The bias depends only on $j - i$, so the matrices are constant along diagonals; the decoder's upper triangle (the
# future) is bucket 0 and masked anyway. Because nothing in the model is tied to an absolute position, T5 reads
# inputs longer than any it was trained on (its `max_len` is only a guard). With a KV cache the decoder's new query
# at position $t$ needs only row $t$ of $B$ (`RelativePositionBias(q_len, k_len, past_length=t)`).
#
# ## 4. Span corruption, and what each objective costs
#
# T5's objective (§3.1.4) "randomly samples and then drops out 15% of tokens in the input sequence. All consecutive
# spans of dropped-out tokens are replaced by a single sentinel token ... The target then corresponds to all of the
# dropped-out spans of tokens, delimited by the same sentinel tokens used in the input sequence". The final model
# samples spans of mean length 3 (§3.3.4). T5's vocabulary holds 100 sentinels, `<extra_id_0>` ... `<extra_id_99>`;
# the "t5" tokenizer family of `minilm.tokenizers` has them too. On a paragraph of *A Tale of Two Cities*, with a
# tokenizer trained on the novel:

# %%
books = load_gutenberg()
tale = next(book for book in books if book.title.startswith("A Tale of Two Cities"))
tokenizer = train_tokenizer(tale.paragraphs, "t5", vocab_size=2000)
passage = next(p for p in tale.paragraphs if p.startswith("Their conference was very short"))
text = torch.tensor(tokenizer.encode(passage, add_special_tokens=False)[:60])
sentinels = tokenizer.sentinel_ids
mask = random_spans_noise_mask(len(text), 0.15, 3.0, torch.Generator().manual_seed(3))
inputs, targets = span_corruption(text, sentinels, noise_mask=mask, eos_id=tokenizer.eos_id)
show = lambda ids: tokenizer.decode(ids.tolist(), skip_special_tokens=False)  # noqa: E731
print(f"original ({len(text)} tokens):\n    {show(text)}")
print(f"input ({len(inputs)} tokens):\n    {show(inputs)}")
print(f"target ({len(targets)} tokens):\n    {show(targets)}")
assert torch.equal(reconstruct_spans(inputs, targets, sentinels, eos_id=tokenizer.eos_id), text)
print("noise tokens and spans:", noise_span_counts(len(text), 0.15, 3.0), "=", (int(mask.sum()), "spans"))

# %% [markdown]
# The counts are fixed by the length (`noise_span_counts`: round(0.15 · 60) = 9 tokens in round(9 / 3) = 3 spans);
# only the places are random. The target is short: the spans and their sentinels, about $0.15 \cdot (1 + 1/3)$ of
# the text. T5's `random_spans_helper` picks the raw length whose corrupted input fills the model's input exactly:

# %%
for length in (64, 128, 512):
    raw, target_length = random_spans_helper(length)
    print(f"inputs of {length:3d} tokens <- {raw:3d} raw tokens; targets of {target_length:3d} tokens")
assert random_spans_helper(512) == (568, 114)  # T5's pretraining: 568 raw tokens -> 512 inputs, 114 targets

# %% [markdown]
# The same corruption on a paragraph's words, for settings of your choosing: the noise density, the mean span length
# and the seed (`minilm.widgets.span_corruption_explorer` runs the same `random_spans_noise_mask` and
# `span_corruption`, and prints what `random_spans_helper` gives for 512-token inputs at those settings). Each span
# and its sentinel share a colour. The figure below it draws T5's settings for a reader without a kernel.

# %%
# NBVAL_IGNORE_OUTPUT
span_corruption_explorer(passage)

# %%
fig, ax = plt.subplots(figsize=(12, 4))
view = plot_span_corruption(ax, passage, noise_density=0.15, mean_noise_span_length=3.0, seed=0)
plt.show()
print(f"{len(view.original)} words: {view.n_noise} corrupted in {view.n_spans} spans; input {len(view.inputs)} "
      f"tokens, target {len(view.targets)}; for 512-token inputs: {view.tokens_length} raw tokens, "
      f"{view.targets_length}-token targets")  # fmt: skip
assert (view.tokens_length, view.targets_length) == random_spans_helper(512)
assert len(view.targets) == view.n_noise + view.n_spans + 1  # the spans, a sentinel before each, </s>

# %% [markdown]
# §3.3 compares objectives on the same text (Table 3): **BERT-style** (corrupt 15%, 90% become a mask and 10% a
# random token, and reconstruct the whole text), **MASS-style** (masks only), **replace corrupted spans** with i.i.d.
# corruption (each run of corrupted tokens one sentinel), **drop corrupted tokens** (remove them; the target is them),
# and span corruption with mean span lengths 2, 3, 5 and 10 (Table 7). All are `objective.corruption=` of the
# recipe. What they cost is the length of what the decoder writes: measured on 400 texts of the novel (64-token
# inputs for span corruption):

# %%
documents = [Document("tale", tale.paragraphs)]
job = type("Job", (), {"seq_len": 64, "seed": 0})
rows = {
    "BERT-style": dict(corruption="bert"),
    "MASS-style": dict(corruption="mass"),
    "replace spans (i.i.d.)": dict(corruption="iid"),
    "drop tokens": dict(corruption="drop"),
    **{f"spans, mean length {n}": dict(corruption="spans", mean_noise_span_length=n) for n in (2, 3, 5, 10)},
}
costs = {}
for name, settings in rows.items():
    texts, collate = span_corruption_examples(documents, tokenizer, job, SpanCorruptionSettings(**settings))
    torch.manual_seed(0)
    batch = collate(texts[:400])
    inputs, targets = batch["attention_mask"].sum(1), (batch["labels"] >= 0).sum(1)  # tokens per text
    costs[name] = (inputs.float().mean().item(), targets.float().mean().item())
    print(f"{name:24s} input {costs[name][0]:5.1f} tokens, target {costs[name][1]:5.1f} tokens")
fig, ax = plt.subplots(figsize=(7, 3))
_ = ax.barh(list(costs), [target for _, target in costs.values()], color="C2")
ax.set(xlabel="target tokens per text (the decoder's work)", title=f"the same {len(texts[0]['input_ids'])}-token texts")
ax.invert_yaxis()
plt.show()
assert costs["BERT-style"][1] > 3.5 * costs["spans, mean length 3"][1]
assert costs["spans, mean length 10"][1] < costs["spans, mean length 3"][1] < costs["replace spans (i.i.d.)"][1]

# %% [markdown]
# BERT- and MASS-style targets are the whole text, four to five times longer than span corruption's: the decoder, half
# the model, does four to five times the work per example for the same amount of text read. Longer spans mean fewer
# sentinels, so slightly shorter targets still; i.i.d. corruption makes many one-token spans, each with its own
# sentinel. "Drop corrupted tokens" has the shortest targets of all (no sentinels), and did best on GLUE in Table 5,
# but the model cannot know where tokens went missing, and it did worse on SuperGLUE.
#
# ## 5. Live: does the course T5 read its source?
#
# An encoder–decoder can lower its loss in two ways. Its decoder can learn the language of the targets (which words
# spans hold, how a target is laid out), or its encoder can learn to tell the decoder what the source says. Only the
# second makes a model that answers from its input. Which of the two has a small T5 learned? One pretrained for the
# few hundred steps a notebook affords could not tell us (a model still at chance, on the *unigram plateau* of
# Chapter 3, teaches nothing), so this section loads the **course T5** (`minilm.models.course_checkpoint("t5")`),
# pretrained with this chapter's recipe by `experiments/course_checkpoints.py` for longer than a notebook can run:
# 2 + 2 layers, $d_\text{model} = 128$, a SentencePiece Unigram vocabulary of 8,192 pieces with the 100 sentinels,
# span corruption (15%, mean span 3) on 32-token inputs from the Gutenberg novels, BERT's recipe of Chapter 3 (3,000
# steps on 64-token inputs had left it just short of a nat below the plateau). The last 5% of every novel's
# paragraphs were held out, and everything below is measured on them. Beside it, its untrained twin
# (`untrained_like`): the same architecture, freshly initialised.

# %%
t5 = course_checkpoint("t5")  # .model in eval mode (float32), .tokenizer (the one it was pretrained with), .folder
twin = untrained_like(t5, seed=0)  # the control: the same T5, untrained
entry = recorded_results("course_checkpoints").results["t5"]
course_job = PretrainConfig(**entry["job"])  # seq_len 32, the held-out fraction and the seed of its corruption
course_settings = SpanCorruptionSettings(**entry["objective_settings"])
c = t5.model.config
print(f"course T5: {c.n_encoder_layers}+{c.n_decoder_layers} layers, d_model {c.d_model}, {c.n_heads} heads x "
      f"{c.d_kv}, {count_parameters(t5.model) / 1e6:.1f}M parameters, vocabulary {t5.tokenizer.vocab_size:,} "
      f"({len(t5.tokenizer.sentinel_ids)} sentinels)")  # fmt: skip
print(f"pretrained: {course_settings.corruption}, {course_settings.noise_density:.0%} noise, mean span "
      f"{course_settings.mean_noise_span_length:g}, {course_job.seq_len}-token inputs; {entry['steps']:,} steps of "
      f"{entry['train']['batch_size']} texts ({entry['steps'] * entry['train']['batch_size']:,} texts)")  # fmt: skip
assert (course_settings.corruption, course_settings.noise_density, course_settings.mean_noise_span_length) == (
    "spans",
    0.15,
    3.0,
)

# %% [markdown]
# ### Below the plateau, and what put it there
#
# The held-out texts are corrupted once, with the run's seed (`span_corruption_examples(..., validation=True)`), so
# every model below is scored on the same spans. Three readings, in nats per target token: the untrained twin; the
# course T5 with its encoder reading **another** text's source (each batch's sources rolled by one: the sentinels
# are still there, the words are not, so this is what the decoder knows alone); and the course T5 reading its own
# source. The gap between the last two is what the encoder contributes. Beside each, the unigram entropy $H$ of the
# same tokens. A target holds two kinds of token: the sentinels and the closing `</s>`, which the format decides
# (`<extra_id_0>` always comes first), and the tokens of the hidden spans, split again by whether the token also
# occurs in the uncorrupted source, where an encoder could find it. The cell scores all held-out texts three times
# (about 15 seconds):

# %%
_, held_out_docs = split_documents(load_documents("gutenberg"), course_job.validation_fraction)
held_out, held_out_collate = span_corruption_examples(
    held_out_docs, t5.tokenizer, course_job, course_settings, validation=True
)
format_ids = torch.tensor([*t5.tokenizer.sentinel_ids, t5.tokenizer.eos_id])  # what the target's layout decides


@torch.no_grad()
def target_losses(model: torch.nn.Module, batch: dict, source: dict | None = None) -> torch.Tensor:
    """-log P(y_t | y_<t, x) for every target token (B, T), 0 at padding: x is the batch's own source, or
    ``source``'s (another text's)."""
    source = batch if source is None else source
    logits = model(source["input_ids"], source["attention_mask"], model.shift_right(batch["labels"]))  # (B, T, V)
    return F.cross_entropy(logits.transpose(1, 2), batch["labels"], reduction="none")  # -100 (padding) -> 0


readings = ("untrained twin", "course T5, another text's source", "course T5, its own source")
parts = ("sentinels and </s>", "span tokens in the source", "span tokens not in it")
sums = {name: torch.zeros(3) for name in readings}  # summed nats per part
counts, targets = torch.zeros(3), ([], [], [])
for start in range(0, len(held_out), 64):
    batch = held_out_collate(held_out[start : start + 64])
    labels = batch["labels"]
    other = {key: value.roll(1, dims=0) for key, value in batch.items()}  # row i reads row i - 1's source
    layout = torch.isin(labels, format_ids)
    seen = torch.stack([torch.isin(y, x) for y, x in zip(labels, batch["input_ids"], strict=True)])
    masks = (layout, (labels != -100) & ~layout & seen, (labels != -100) & ~layout & ~seen)
    losses = dict(zip(readings, (target_losses(twin, batch), target_losses(t5.model, batch, other),
                                 target_losses(t5.model, batch)), strict=True))  # fmt: skip
    for name, loss in losses.items():
        sums[name] += torch.stack([loss[mask].sum() for mask in masks])
    counts += torch.stack([mask.sum() for mask in masks])
    for part, mask in zip(targets, masks, strict=True):
        part.append(labels[mask])


def nats(name: str, which: list[int]) -> float:
    return (sums[name][which].sum() / counts[which].sum()).item()


columns = {"all": [0, 1, 2], "sentinels, </s>": [0], "span tokens": [1, 2], "in the source": [1], "not in it": [2]}
entropies = [unigram_entropy([t for k in which for t in targets[k]]) for which in columns.values()]
loss = {name: [nats(name, which) for which in columns.values()] for name in readings}
print(f"{len(held_out):,} held-out texts, {int(counts.sum()):,} target tokens (nats per token)")
print(f"{'':34s}" + "".join(f"{column:>16s}" for column in columns))
shares = [counts[which].sum() / counts.sum() for which in columns.values()]
print(f"{'share of the target tokens':34s}" + "".join(f"{share:16.2f}" for share in shares))
print(f"{'unigram entropy H':34s}" + "".join(f"{h:16.2f}" for h in entropies))
for name in readings:
    print(f"{name:34s}" + "".join(f"{value:16.2f}" for value in loss[name]))
own, alone = loss[readings[2]], loss[readings[1]]
print(f"recorded held-out loss of the course T5: {entry['held_out_loss']:.2f}, H {entry['unigram_entropy']:.2f}")

# %%
fig, axes = plt.subplots(1, 2, figsize=(11, 2.8), sharey=True)
for ax, column in zip(axes, ("all", "span tokens"), strict=True):
    k = list(columns).index(column)
    _ = ax.barh(readings, [loss[name][k] for name in readings], color=["C7", "C1", "C0"])
    _ = ax.axvline(entropies[k], color="k", linestyle="--", label="unigram entropy H")
    ax.set(xlabel="nats per token", title=f"held-out targets: {column}")
    _ = ax.legend(loc="lower right", fontsize=8)
plt.tight_layout()
plt.show()
below = {column: h - mine for column, h, mine in zip(columns, entropies, own, strict=True)}
print(f"nats below H: all targets {below['all']:.2f} (past the course's {PLATEAU_MARGIN:.0f}-nat mark: "
      f"{past_plateau(own[0], entropies[0])}), sentinels and </s> {below['sentinels, </s>']:.2f}, span tokens "
      f"{below['span tokens']:.2f}; reading its own source instead of another's saves {alone[0] - own[0]:.2f} nats per "
      f"target token, {alone[3] - own[3]:.2f} on span tokens found in the source")  # fmt: skip
assert abs(own[0] - entry["held_out_loss"]) < 0.01  # the record's number, scored again
assert below["all"] > 0.8 and loss[readings[0]][0] > entropies[0] + 2  # far below its twin, and below H overall
assert below["sentinels, </s>"] > 0.6 and abs(below["span tokens"]) < 0.3  # ... by the layout, not the words
assert alone[0] - own[0] < 0.1 and alone[3] - own[3] < 0.3  # the encoder adds little

# %% [markdown]
# The course T5 is far below its untrained twin and 1.10 nats below $H$: past the one nat the course asks of a
# checkpoint past the plateau. The split says where those nats come from. Nearly two fifths of the target tokens are
# sentinels and `</s>`, and the layout of a target decides most of them (`<extra_id_0>` first, a few words, the next
# sentinel, ...): the model predicts them at 0.26 nats where their frequencies alone give 1.10, and the unigram entropy
# of all the targets also charges for the choice between "a sentinel next" and "a word next", which the layout answers.
# On the tokens of the hidden spans, the words, it is only 0.20 nats below their unigram entropy: on the plateau. And
# its encoder adds almost nothing: with another text's source the loss rises by 0.03 nats, by 0.12 on the span tokens
# that the source holds (a name that comes back, a word repeated a line later), the very tokens a reader would copy. The
# course T5 has learned the format of span corruption and how often each word is hidden; it has not learned to read its
# source. A loss below $H$, even a nat below, is not yet a model that uses its context when part of every target is
# format: check the part of the loss that matters.
#
# ### Filling the blanks
#
# Teacher forcing measures probabilities; generation shows what the model writes. `T5.generate` (greedy) fills the
# sentinels of 50 held-out texts (every 40th): the target it writes is split at its sentinels and each fill compared
# with the span that was hidden there — **exact** when the tokens are identical, **partial** when it shares at least
# one word with it. Three of them (the input with its sentinels; the hidden spans; the written ones):

# %%
sentinel_set = set(t5.tokenizer.sentinel_ids)


def fills(ids: torch.Tensor) -> list[list[int]]:
    """A target (or a generated target after its start token) split at its sentinels, up to its end-of-sequence
    token: the token ids of each fill, in order."""
    ids = ids.tolist()
    ids = ids[: ids.index(t5.tokenizer.eos_id)] if t5.tokenizer.eos_id in ids else ids
    pieces = []
    for token in ids:
        if token in sentinel_set:
            pieces.append([])
        elif pieces:
            pieces[-1].append(token)
    return pieces


def words(ids: list[int]) -> set[str]:
    return set(re.findall(r"[a-z]+", t5.tokenizer.decode(ids).lower()))


sample = held_out[::40]
sample_batch = held_out_collate(sample)
hidden = [fills(example["labels"]) for example in sample]
written = {}
for name, model in (("course T5", t5.model), ("untrained twin", twin)):
    out = model.generate(sample_batch["input_ids"], sample_batch["attention_mask"], max_new_tokens=32)
    written[name] = [fills(row[1:])[: len(spans)] for row, spans in zip(out, hidden, strict=True)]  # row[0]: start
for i in (0, 1, 2):
    print(t5.tokenizer.decode(sample[i]["input_ids"].tolist(), skip_special_tokens=False).removesuffix("</s>"))
    print("    hidden: ", " | ".join(t5.tokenizer.decode(span) for span in hidden[i]))
    print("    written:", " | ".join(t5.tokenizer.decode(span) for span in written["course T5"][i]), "\n")

# %%
match = {}
for name, rows in written.items():
    pairs = [(span, row[k] if k < len(row) else []) for spans, row in zip(hidden, rows, strict=True)
             for k, span in enumerate(spans)]  # fmt: skip
    match[name] = (sum(w == h for h, w in pairs), sum(bool(words(h) & words(w)) for h, w in pairs), len(pairs))
    print(f"{name:15s} exact {match[name][0]:3d}, partial {match[name][1]:3d} of {match[name][2]} hidden spans")
common = Counter(t5.tokenizer.decode(w) for row in written["course T5"] for w in row).most_common(3)
n_written = sum(len(row) for row in written["course T5"])
print("the course T5's commonest fills:", ", ".join(f"{text!r} x{n}" for text, n in common), f"of {n_written}")
assert match["course T5"][0] <= 10 and sum(n for _, n in common) > n_written / 2  # a few stock fills

# %% [markdown]
# It writes stock fills, a comma above all, then `, and the same` and `, and I was`: the commonest pieces of the
# novels, whatever the blank. None of its fills is exact, and its 11 partial ones share an "and" or a "the" with the
# hidden span; the untrained twin matches nothing at all.
#
# ### Answering from the source
#
# The clearest sign of a model that reads its source is an answer it can only have found there. A name is such an
# answer: eight names from eight novels, each put in three sentences that mention it twice, the second mention hidden
# behind a sentinel. Which of the eight names does the course T5 put in the blank? A model that reads its source picks
# the name the source holds; with the first mention replaced by "the stranger" nothing in the source says which name,
# and the model can only fall back on the one it finds likeliest (3 of the 24 right, if it always picks the same
# one). Each name is scored as the fill ($\log P(\text{target} \mid \text{source})$ of the eight complete targets),
# and the blank is also filled freely by greedy generation:

# %%
NAMES = ["Alice", "Darcy", "Emma", "Holmes", "Jane", "Lorry", "Pip", "Ahab"]
TEMPLATES = [
    "{A} came into the room and sat down by the fire. For a long time nobody spoke, and then {B} said, “I must go.”",
    "It was late when {A} reached the house. The door was locked, so {B} knocked and waited.",
    "“Where have you been?” asked {A}. There was no answer, and {B} turned away.",
]
name_ids = [t5.tokenizer.encode(" " + name, add_special_tokens=False) for name in NAMES]
assert all(len(ids) == 1 for ids in name_ids)  # one piece each: a one-token span
name_ids = [ids[0] for ids in name_ids]


def cloze(template: str, first: str, name: str) -> tuple[torch.Tensor, torch.Tensor]:
    """Span corruption of the sentence with its last mention of ``name`` hidden: (inputs, targets)."""
    ids = torch.tensor(t5.tokenizer.encode(template.format(A=first, B=name), add_special_tokens=False))
    blank = torch.zeros(len(ids), dtype=torch.bool)
    blank[(ids == name_ids[NAMES.index(name)]).nonzero()[-1]] = True
    return span_corruption(ids, t5.tokenizer.sentinel_ids, noise_mask=blank, eos_id=t5.tokenizer.eos_id)


def best_name(model: T5, inputs: torch.Tensor, targets: torch.Tensor) -> str:
    """The name whose complete target (<extra_id_0> name <extra_id_1> </s>) the model finds likeliest."""
    rows = [{"input_ids": inputs, "labels": torch.cat([targets[:1], torch.tensor([i]), targets[2:]])} for i in name_ids]
    return NAMES[int(target_losses(model, pad_seq2seq_batch(rows, t5.tokenizer.pad_id)).sum(1).argmin())]


answers = {}
for source in ("the name", "the stranger"):
    for name, model in (("course T5", t5.model), ("untrained twin", twin)):
        picked, wrote = [], []
        for template in TEMPLATES:
            for answer in NAMES:
                stranger = ("The" if template.startswith("{A}") else "the") + " stranger"
                inputs, targets = cloze(template, answer if source == "the name" else stranger, answer)
                picked.append(best_name(model, inputs, targets))
                out = model.generate(inputs[None], max_new_tokens=4)[0, 1:]
                wrote.append(fills(out)[:1] == [[name_ids[NAMES.index(answer)]]])
        answers[source, name] = (sum(p == a for p, a in zip(picked, NAMES * 3, strict=True)), sum(wrote), picked)
inputs, targets = cloze(TEMPLATES[0], "Darcy", "Darcy")
print("input: ", t5.tokenizer.decode(inputs.tolist(), skip_special_tokens=False))
print("target:", t5.tokenizer.decode(targets.tolist(), skip_special_tokens=False))
print(f"{'the source holds':17s} {'model':15s} {'picks the name':>14s} {'writes it':>9s}  its favourite pick")
for (source, name), (right, wrote, picked) in answers.items():
    favourite, times = Counter(picked).most_common(1)[0]
    print(f"{source:17s} {name:15s} {right:8d} of 24 {wrote:3d} of 24  {favourite} ({times} of 24)")
assert answers["the name", "course T5"][0] <= 8 and answers["the name", "course T5"][1] <= 4  # chance: 3 of 24

# %% [markdown]
# The course T5 has favourite names, not a reader's answers: Emma (10 of 24 picks) when the source names someone,
# Jane (16 of 24) when it says "the stranger". It gets 3 of the 24 right either way, where chance is 3, and it never
# writes the name into the blank itself.
#
# ### Why BART reads its source first
#
# The course BART (Chapter 7) was pretrained on the same novels with the same batch and learning rate, for half the
# course T5's steps on inputs twice as long. Scored the same way on 256 of its held-out texts, with its own source and
# with another text's:

# %%
bart = course_checkpoint("bart")
bart_entry = recorded_results("course_checkpoints").results["bart"]
bart_job, bart_settings = PretrainConfig(**bart_entry["job"]), DenoiseSettings(**bart_entry["objective_settings"])
bart_texts, bart_collate = denoise_examples(held_out_docs, bart.tokenizer, bart_job, bart_settings, validation=True)
bart_batch = bart_collate([bart_texts[i] for i in range(0, len(bart_texts), max(1, len(bart_texts) // 256))][:256])
bart_other = {key: value.roll(1, dims=0) for key, value in bart_batch.items()}
scored = bart_batch["labels"] != -100
bart_own = target_losses(bart.model, bart_batch)[scored].mean().item()
bart_alone = target_losses(bart.model, bart_batch, bart_other)[scored].mean().item()
bart_h = unigram_entropy(scored_targets(bart_batch))
for name, record in (("course BART", bart_entry), ("course T5", entry)):
    print(f"{name}: {record['steps']:,} steps of {record['train']['batch_size']} texts, learning rate "
          f"{record['train']['lr']:g}, {record['job']['seq_len']}-token inputs")  # fmt: skip
print(f"course BART: H {bart_h:.2f}, its own source {bart_own:.2f}, another text's source {bart_alone:.2f} nats "
      f"per target token: reading its source saves {bart_alone - bart_own:.2f}")  # fmt: skip
print(f"course T5:   H {entropies[0]:.2f}, its own source {own[0]:.2f}, another text's source {alone[0]:.2f}: "
      f"{alone[0] - own[0]:.2f}")  # fmt: skip
assert bart_alone - bart_own > 2 and bart_alone - bart_own > 20 * (alone[0] - own[0])

# %% [markdown]
# The same code, the same novels, batch and learning rate: reading its own source saves BART 3.96 nats per target
# token and T5 0.03. BART's target is the whole text, and most of it stands in its input word for word (text
# infilling hides a share of it), so copying it through cross-attention pays from the first steps. T5's targets are, by
# construction, exactly the words *missing* from its input. To use the source, its decoder must find where its current
# sentinel stands in the input and read the words around it, a two-step skill with nothing to copy along the way; until
# it has that skill, the layout and the word frequencies are all it can learn, and after 6,000 steps of 64 texts it had
# not found it (nor after 3,000 steps of texts twice as long). The paper's models trained for hundreds of thousands
# of steps on batches of 128 texts of 512 tokens.
#
# ### Fine-tuning it, text to text
#
# T5's recipe is pretraining, then fine-tuning on the task written as text. The task here cannot be solved without
# the source: `question: what colour is the car ? context: the hat is blue . the car is red .` → `red`, six things,
# six colours, two facts per context (`minilm.data.toy.colour_questions`). A constant answer scores about 1/6, a model
# that copies either colour of the context 1/2; only a model that reads which thing the question asks about scores
# more. Three runs of the same 200 steps (about 10 seconds each): the course T5 (`course_run_dir` writes it as a
# pretraining run that `minilm.finetune` accepts as `pretrained=`), its untrained twin, and the course T5 shown the
# questions without their context (the control that can only learn the colours' frequencies):

# %%
kind = Seq2SeqKind(TASKS["squad2_gen"])  # text in, text out, scored with SQuAD's exact match
encoder = TaskEncoder(t5.tokenizer, 48, "last", max_target_length=4)
run_folder = scratch_folder("ch08-")  # deleted when the kernel stops
starts = {"course T5": course_run_dir("t5", run_folder / "course"),
          "untrained twin": course_run_dir("t5", run_folder / "twin", untrained=True)}  # fmt: skip


def train_reader(start: str, with_context: bool = True) -> tuple[float, FinetuneModel]:
    torch.manual_seed(0)
    model = FinetuneModel(body_from_run(str(starts[start]), {}), None, kind)
    train = kind.encode_examples(colour_questions("train", 600, with_context), encoder)
    settings = TrainConfig(batch_size=16, lr=1e-3, max_steps=200, warmup_steps=10, schedule="linear", eval_every=0,
                           save_every=0, log_every=50, progress=False)  # fmt: skip
    Trainer(model, finetune_loss, train, settings, collate=kind.collate, counts=model.counts).fit()
    test = colour_questions("test", 120, with_context)
    batch = kind.collate(kind.encode_examples(test, encoder))
    model.eval()
    return kind.score(test, kind.generate(model.body, batch, max_new_tokens=4))["squad_em"], model


# %%
# NBVAL_IGNORE_OUTPUT
reader_em, reader = train_reader("course T5")
twin_em, _ = train_reader("untrained twin")
blind_em, _ = train_reader("course T5", with_context=False)
answers = [e.target for e in colour_questions("test", 120)]
constant = 100 * max(answers.count(c) for c in set(answers)) / len(answers)
print(f"exact match: course T5 {reader_em:.0f}%, untrained twin {twin_em:.0f}%, course T5 without the context "
      f"{blind_em:.0f}%, a constant answer {constant:.0f}%")  # fmt: skip

# %%
assert min(reader_em, twin_em) >= blind_em + 20 and abs(reader_em - twin_em) < 15
print("both read the context:", min(reader_em, twin_em) >= blind_em + 20, "; pretraining gives no head start (within "
      "15 points):", abs(reader_em - twin_em) < 15)  # fmt: skip

# %% [markdown]
# Fine-tuning teaches both starts to copy a colour from the context (about 50%, what copying either colour scores),
# while the control without the context stays at the constant answer's level. But the course T5 starts no better than
# its twin (52% against 55%, within the noise of 120 questions): its pretraining taught the layout of span-corruption
# targets and the frequencies of the novels' words, and neither helps a reader. Beam search over the fine-tuned course
# T5's answers (`T5.generate`, the code BART's generation runs too, `minilm.generation`):

# %%
question = Seq2SeqExample("q", "question: what colour is the kite ? context: the kite is green . the lamp is red .",
                          "green", ("green",))  # fmt: skip
batch = kind.collate(kind.encode_examples([question], encoder))
beams = reader.body.generate(batch["input_ids"], batch["attention_mask"], max_new_tokens=4, num_beams=3,
                                   num_return_sequences=3)  # fmt: skip
beam_answers = [t5.tokenizer.decode(ids.tolist()) for ids in beams]  # best first
print(question.source)
print("the three beams' answers (alphabetically: their scores are close, and the order of near-ties can change from")
print("one CPU to another):", sorted(beam_answers))

# %% [markdown]
# Its beams hold the two colours of the context and a stray word: it copies a colour and cannot tell which.
#
# **Takeaway.** The course T5 is below the unigram entropy of its targets, yet it does not answer from its source:
# its decoder does the work, with stock fills and a favourite name, and its pretraining gives fine-tuning no head
# start. Two checks to make before crediting a small sequence-to-sequence model with reading. First, see what a loss
# below $H$ is made of: in span corruption a third or more of the targets are sentinels that the format predicts, and
# the loss on the words alone is the honest measure. Second, test the encoder directly, with the same targets and
# another text's source. BART passes that test on half the steps; span corruption, whose targets are by design absent
# from its input, had not got there. This is the other side of the paper's trade: span corruption's short targets
# make every step cheap (section 4), and T5 takes a great many steps.

# %% [markdown]
# ## 6. Multi-task training: how to mix the tasks
#
# Because every task is text to text, one model can train on all of them at once: the training sets are mixed into
# one stream. What matters is the rate $r_m$ at which task $m$'s examples are drawn (§3.5.2). With $e_m$ the size of
# task $m$'s training set:
#
# - **examples-proportional mixing**: $r_m = \min(e_m, K) / \sum_n \min(e_n, K)$, an artificial limit $K$ keeping
#   the largest sets from drowning the others;
# - **temperature-scaled mixing**: "we raise each mixing rate $r_m$ to the power of $1/T$ and renormalize the rates
#   so that they sum to 1"; $T = 1$ is proportional mixing, large $T$ approaches
# - **equal mixing**: $r_m = 1/N$.
#
# The course's tasks span three orders of magnitude (`minilm.finetune.mixing.mixing_rates`):

# %%
sizes = {name: len(load_task(name, "train")) for name in ("sst2", "cola", "stsb", "mrpc", "rte", "copa")}
strategies = {
    "proportional": mixing_rates(list(sizes.values()), "proportional"),
    "proportional, K = 5,000": mixing_rates(list(sizes.values()), "proportional", limit=5000),
    "temperature T = 2": mixing_rates(list(sizes.values()), "temperature", temperature=2.0),
    "temperature T = 8": mixing_rates(list(sizes.values()), "temperature", temperature=8.0),
    "equal": mixing_rates(list(sizes.values()), "equal"),
}
print(f"{'':24s}" + "".join(f"{name:>8s}" for name in sizes))
print(f"{'training examples':24s}" + "".join(f"{n:8d}" for n in sizes.values()))
for strategy, rates in strategies.items():
    print(f"{strategy:24s}" + "".join(f"{r:8.3f}" for r in rates))
fig, ax = plt.subplots(figsize=(8, 3))
width = 0.16
for k, (strategy, rates) in enumerate(strategies.items()):
    _ = ax.bar([i + k * width for i in range(len(sizes))], rates, width=width, label=strategy)
ax.set(xticks=[i + 2 * width for i in range(len(sizes))], xticklabels=list(sizes), ylabel="mixing rate $r_m$",
       yscale="log", title="how often each task is drawn")  # fmt: skip
_ = ax.legend(fontsize=7)
plt.show()
assert strategies["temperature T = 8"][0] < strategies["temperature T = 2"][0] < strategies["proportional"][0]

# %% [markdown]
# Proportional mixing gives SST-2 most of the stream and COPA almost nothing: the small tasks are under-trained
# (and a large one like C4's unsupervised task would crowd out everything, hence $K$). Equal mixing repeats COPA's
# few hundred examples until the model memorises them. T5 found temperature mixing with $T = 2$ or proportional
# mixing with a well-chosen $K$ best, and multi-task training alone a little worse than pretraining and fine-tuning
# each task (Table 11), closing the gap by fine-tuning after multi-task pretraining (Table 12). From the command
# line: `python -m minilm.finetune --model t5 --task sst2,stsb,squad2 mixing=temperature`.
#
# ## 7. Objectives, mixing, and BART vs T5, in miniature (recorded)
#
# `experiments/ch08_t5.py` pretrains one tiny T5 (2 + 2 layers, $d_\text{model} = 128$, a 4,096-piece Unigram
# vocabulary with 100 sentinels) from the same initial weights, on the same texts in the same order, for the same
# steps, once per objective of Tables 4, 5 and 7 that minilm implements (BERT-style, i.i.d. replaced spans, dropped
# tokens, spans of mean length 2, 3, 5 and 10; not MASS-style, the prefix LM or deshuffling), 15% corrupted, and
# fine-tunes each, text to text, on SST-2; then it
# compares single-task and mixed fine-tuning on SST-2 and STS-B, and pits the span-corruption T5 against a BART of the
# same size and steps on generative SQuAD.

# %%
record = recorded_results("ch08_t5")
results = record.results
runs, labels, paper, baselines = results["runs"], results["labels"], results["paper_glue"], results["baselines"]
print(record.describe())
print(f"{'objective':34s} {'input':>6s} {'target':>7s} {'CPU s':>6s} {'SST-2':>6s}   paper GLUE")
for row in results["rows"]:
    run = runs[row]
    size = run.get("lengths")  # the control was not pretrained
    cost = f"{size['input']:6.1f} {size['target']:7.1f} {run['pretrain_cpu_seconds']:6.0f}" if size else " " * 21
    reference = f"{paper[row]:10.2f}" if row in paper else f"{'—':>10s}"
    print(f"{labels[row]:34s} {cost} {run['sst2']['accuracy']:6.3f}   {reference}")
noise = baselines["standard_error"]["sst2"]
print(f"majority class {baselines['sst2']:.3f}; one standard error ± {noise:.3f}")

# %%
pretrained = [row for row in results["rows"] if row in paper]
targets = [runs[row]["lengths"]["target"] for row in pretrained]
seconds = [runs[row]["pretrain_cpu_seconds"] for row in pretrained]
fig, axes = plt.subplots(1, 2, figsize=(11, 3.5))
_ = axes[0].scatter(targets, seconds)
for row, x, y in zip(pretrained, targets, seconds, strict=True):
    _ = axes[0].annotate(row, (x, y), fontsize=8)
axes[0].set(xlabel="target tokens per example", ylabel="pretraining CPU seconds", title="cost follows the target")
_ = axes[1].barh([labels[r] for r in results["rows"]], [runs[r]["sst2"]["accuracy"] for r in results["rows"]])
_ = axes[1].axvline(baselines["sst2"], color="k", linestyle="--", label="majority class")
axes[1].set(xlabel="SST-2 dev accuracy (text to text)", title="downstream")
_ = axes[1].legend(loc="lower right")
plt.tight_layout()
plt.show()
cost = dict(zip(pretrained, seconds, strict=True))
assert cost["bert"] > 1.5 * cost["spans-3"]  # the whole text as target costs more than the spans
print("BERT-style pretraining costs", cost["bert"] > 1.5 * cost["spans-3"], "more than 1.5x span corruption's")

# %%
multitask = results["multitask"]
print(f"{'fine-tuning':14s} {'SST-2 acc':>9s} {'STS-B pearson':>13s}   mixing rates")
for name, run in multitask.items():
    acc = f"{run['sst2']['accuracy']:9.3f}" if "sst2" in run else f"{'':9s}"
    pearson = f"{run['stsb']['pearson']:13.3f}" if "stsb" in run else f"{'':13s}"
    rates = ", ".join(f"{task} {rate:.2f}" for task, rate in run.get("rates", {}).items())
    print(f"{name:14s} {acc} {pearson}   {rates}")
versus = results["bart_vs_t5"]
for name in ("bart", "t5"):
    squad, target = versus[name]["squad2_gen"], versus[name]["squad2_gen"]["target"]
    print(f"{name:5s} generative SQuAD: EM {squad['squad_em']:.1f}, 'no answer' {squad['no_answer_fraction']:.2f}; "
          f"reference answers: {target['answer_loss_per_word']:.2f} nats per word")  # fmt: skip

# %%
control, noise = runs["no pretraining"]["sst2"]["accuracy"], baselines["standard_error"]["sst2"]
sentinels = [row for row in pretrained if row != "bert"]
assert all(runs[row]["sst2"]["accuracy"] < control - 2 * noise for row in sentinels)
single = {task: multitask[task][task] for task in ("sst2", "stsb")}
mixtures = [multitask[mixing] for mixing in ("proportional", "temperature", "equal")]
assert all(m["sst2"]["accuracy"] < single["sst2"]["accuracy"] for m in mixtures)
assert all(m["stsb"]["pearson"] < single["stsb"]["pearson"] for m in mixtures)
print("every sentinel objective below the untrained control by two standard errors:", True)
print("every mixture below single-task training, on both tasks:", True)

# %% [markdown]
# **What the miniature reproduces.** The cost. With the same texts, steps and model, BERT-style pretraining took
# 2.1 times the CPU time of span corruption (128 against 61 seconds): its decoder writes all 71 tokens of each text,
# span corruption's 14. i.i.d. corruption writes 21 (many one-token spans, each with its sentinel) and costs 1.4
# times as much; dropping tokens writes 12 and costs what span corruption costs; longer spans shorten the target a
# little further. This is the paper's argument for span corruption (§3.3.4: shorter targets, "slightly speeds up
# training") in numbers. And multi-task training trails single-task training (T5's Table 11: mixing alone was a
# little worse than pretraining and fine-tuning each task): with the same 500 steps every mixture scores below
# training on one task alone, on SST-2 (0.53–0.58 against 0.62) and on STS-B (Pearson 0.14–0.16 against 0.17), since
# each task sees only its share of the steps.
#
# **What it does not.** Which objective transfers best. The paper's denoising objectives end within 1.6 points of each
# other on GLUE (Tables 4, 5, 7: from 82.85 for spans of mean length 10 and 82.96 for BERT-style to 84.44 for dropped
# tokens), while the objectives outside this set fall well below (Table 4: prefix LM 80.69, deshuffling 73.17). Here
# BERT-style is the best pretrained row on SST-2 (0.67), level
# with no pretraining at all (0.65, within one standard error), and every sentinel objective sits 4 to 7 standard
# errors *below* the untrained control (0.53–0.59): at this scale they transfer negatively. The scale explains the
# absence of transfer: 600 steps of a 1.4M-parameter model (a tenth of the course T5's 6,000, which still left the
# words of its spans on the unigram plateau, section 5) against the paper's 2^19 = 524,288 pretraining steps of a
# 220M model (2^18 is its fine-tuning).
# Why sentinel pretraining *hurts* is a guess we have not tested: its decoder has learned to open every answer with a
# sentinel and write short fragments, a habit fine-tuning must first unlearn, while BERT-style's decoder writes whole
# sentences, as SST-2's answers are. The ordering among the mixing strategies (temperature scaling ahead on SST-2,
# 0.58 against 0.54) is within about two standard errors: noise for one seed.
#
# **BART against T5**, the same width, depth and steps, each with its own objective: both end at generative SQuAD's
# floor (they answer "no answer" to nearly everything), and BART's decoder is the better language model of the
# answers by 1.1 nats per word. Equal steps are not equal work: BART's decoder wrote all 64 tokens of every piece in
# pretraining, T5's 14, and each BART step cost 1.7 times a T5 step. Comparing the two fairly means equal compute,
# which is what the paper does when it picks span corruption (§3.3.4). `python experiments/ch08_t5.py` is the script
# to scale.

# %% [markdown]
# ## Summary
#
# - T5 casts every task as text to text: a prefix names the task, the label is written as a word or a number, and
#   the written answer is parsed back and scored by the task's own metric (an unreadable answer is wrong).
# - Its Transformer is the original encoder–decoder with pre-norm RMSNorm, no biases, no $1/\sqrt{d_k}$ (folded into
#   the initialisation) and a relative position bias: one learned scalar per head and log-spaced offset bucket,
#   shared by the layers of a stack.
# - Span corruption replaces 15% of the tokens, in spans of mean length 3, by sentinels, and writes only the spans:
#   targets four to five times shorter than BERT-style reconstruction (half the pretraining time here), and as good or
#   better downstream in the paper (Tables 4, 7) — not at this chapter's scale, where no pretraining transfers.
# - Its targets are the words missing from the input, so the decoder can lower its loss a long way alone. The course
#   T5 (6,000 steps) is below the unigram entropy of its targets only by predicting their layout (sentinels, `</s>`):
#   on the words it is on the plateau, and its encoder is worth 0.03 nats, where the course BART's is worth 3.96.
#   Before crediting a sequence-to-sequence model with reading, score the words alone and swap in another source.
# - Multi-task training mixes the tasks' training sets; the rate of each (proportional with a limit, temperature,
#   equal) decides which tasks are under- or over-trained.
#
# ## Exercises
#
# 1. Write the relative position bucket function without looking (Lab 8), then plot the buckets for
#    `num_buckets=8, max_distance=20`. Which offsets share a bucket?
# 2. Span corruption with `noise_density=0.5` (Table 6's 50%): how long are the inputs and the targets of a 568-token
#    text? Use `random_spans_helper` and check on a real text.
# 3. Train section 5's two readers, the course T5 and its untrained twin, for 600 steps instead of 200. Does either
#    leave 50% (binding the thing to its colour), and does pretraining make any difference by then?
# 4. Mix SST-2, CoLA and COPA with proportional, temperature ($T = 2$) and equal mixing for 300 steps each
#    (`python -m minilm.finetune --model t5 --task sst2,cola,copa mixing=...`). Which task suffers under which?
# 5. T5 v1.1 (`t5_config("t5-v1_1-small")`) has more parameters than t5-small with fewer layers' worth of width:
#    count where they are, and explain why untying the output layer costs 16.4M parameters.
# 6. Pretrain `python -m minilm.train --model t5 --objective span_corruption corruption=drop`, then fine-tune it on
#    SQuAD text to text. The paper found dropping tokens good on GLUE but worse on SuperGLUE: why could a model that
#    never sees where text is missing do worse at reading comprehension?
# 7. Continue the course T5's pretraining (load it with `course_checkpoint("t5")`, train on
#    `span_corruption_examples` of the training novels) and every few hundred steps measure section 5's two gaps: the
#    loss on span tokens against their unigram entropy, and another text's source against its own. Which moves first?
#    Then try shorter inputs (`seq_len` 32), which helped the course BERT leave its plateau (Chapter 3).
#
# ## Lab
#
# [Lab 8](../labs/lab08_t5.ipynb): the relative position bucket function, span corruption with sentinels, and T5's
# span counts, autograded.
