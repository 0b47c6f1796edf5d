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
# # Chapter 4 — RoBERTa: BERT, trained properly
#
# A year after BERT, Liu et al. ("RoBERTa: A Robustly Optimized BERT Pretraining Approach", 2019) made a claim
# that changed how the field reads leaderboards: **BERT was significantly undertrained**. They kept BERT's
# architecture exactly — the same encoder, the same masked-language-model loss — and changed only the *recipe*:
#
# | BERT (Devlin et al. 2019) | RoBERTa (Liu et al. 2019) | paper |
# | --- | --- | --- |
# | masks fixed once in preprocessing (static) | new masks every time a sequence is seen (dynamic) | §4.1, Table 1 |
# | pairs of segments + next-sentence prediction | full sentences packed to 512 tokens, no NSP | §4.2, Table 2 |
# | batch 256, 1M steps | batch 8K (§4.3, Table 3); 500K steps for the final model (§5, Table 4) | §4.3, §5 |
# | 30K WordPiece vocabulary | 50K byte-level BPE vocabulary: no unknown tokens | §4.4 |
# | 16 GB of text | 160 GB | §3.2, Table 4 |
# | Adam β2 = 0.999, ε = 1e-6 | β2 = 0.98 (stabler with large batches), ε = 1e-6 | §3.1 |
#
# The 160 GB (§3.2) are five corpora: BookCorpus and English Wikipedia (BERT's 16 GB), CC-News (76 GB of news
# articles crawled from CommonCrawl between September 2016 and February 2019), OpenWebText (38 GB, the web pages
# linked from Reddit posts with at least three upvotes, an open recreation of GPT-2's WebText) and Stories (31 GB,
# a CommonCrawl subset filtered to resemble Winograd schemas' story-like style). Table 4 separates what the data
# and the training time each add: RoBERTa-large on BERT's 16 GB for 100K steps at batch 8K already beats
# BERT-large; the full 160 GB adds more (SQuAD 2.0 F1 87.3 → 87.7, MNLI 89.0 → 89.3 for 100K steps), and
# training longer adds more still (300K steps, then 500K: SQuAD 2.0 89.4, MNLI 90.2), with no sign of
# overfitting at 500K.
#
# How the headline GLUE numbers were made matters as much as the recipe (§5.1). The dev-set results are single
# models fine-tuned per task (the median of five seeds). For the *test-set* leaderboard the authors ensembled 5–7
# models per task and started RTE, STS-B and MRPC from the model already fine-tuned on MNLI rather than from the
# pretrained one (a transfer that helps small tasks); QNLI was recast as a ranking of candidate answers and WNLI
# reformatted with SuperGLUE's span annotations. Test-set numbers from such set-ups do not compare directly with
# single-model, single-task fine-tunes like BERT's; the paper's dev-set tables do.
#
# With these changes, the BERT-large architecture matched or beat every model published after BERT (XLNet
# included) on GLUE, SQuAD and RACE. The single models on the dev sets (Tables 5–7; RoBERTa's dev numbers are medians
# over five runs, all three models 24 layers):
#
# | single model, dev | MNLI-m | QNLI | QQP | RTE | SST-2 | MRPC | CoLA | STS-B | SQuAD 1.1 F1 | SQuAD 2.0 F1 |
# | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |
# | BERT-large | 86.6 | 92.3 | 91.3 | 70.4 | 93.2 | 88.0 | 60.6 | 90.0 | 90.9 | 81.8 |
# | XLNet-large | 89.8 | 93.9 | 91.8 | 83.8 | 95.6 | 89.2 | 63.6 | 91.8 | 94.5 | 88.8 |
# | RoBERTa | 90.2 | 94.7 | 92.2 | 86.6 | 96.4 | 90.9 | 68.0 | 92.4 | 94.6 | 89.4 |
#
# On RACE (reading comprehension from English exams, test set) RoBERTa scores 83.2 against XLNet-large's 81.7 and
# BERT-large's 72.0. On the GLUE leaderboard (test, ensembles, July 2019) it averaged 88.5, level with XLNet's 88.4.
# The largest gains over BERT-large are on the small tasks (RTE +16.2, CoLA +7.4) and on SQuAD 2.0 (+7.6 F1), where
# a better-trained encoder matters most. The lesson is methodological: before crediting a new architecture, check
# that the baseline was tuned as hard.
#
# In `minilm` RoBERTa is therefore not a new model but a **configuration** of `minilm.models.Bert`, trained with
# different data pipelines. This chapter takes the recipe apart, one ingredient at a time:
#
# 1. RoBERTa as a configuration of BERT;
# 2. static vs dynamic masking — counting the masks a sentence sees, and a live comparison (Table 1);
# 3. the four input formats, with and without NSP, on real documents (Table 2), and a live mini-run;
# 4. larger batches through gradient accumulation — an exact identity, and a small batch/lr comparison (Table 3);
# 5. byte-level BPE vs WordPiece;
# 6. a miniature of Table 2: a tiny model pretrained per format, then fine-tuned on SST-2 and SNLI;
# 7. a miniature of Table 4: more data, then longer training.

# %%
import math

import matplotlib.pyplot as plt
import torch

from minilm.analysis import recorded_results
from minilm.data import load_wikitext
from minilm.models.bert import ROBERTA, ROBERTA_SIZES, Bert, BertConfig, RobertaConfig
from minilm.objectives.formats import FORMATS, make_examples
from minilm.objectives.mlm import DynamicMasking, MaskingConfig, StaticMaskedDataset, masked_positions
from minilm.recipes.bert import bert_mlm_loss, bert_mlm_nsp_loss
from minilm.tokenizers import train_tokenizer
from minilm.train.pretrain import split_documents
from minilm.train.trainer import TrainConfig, Trainer
from minilm.utils import count_parameters, reproducible

reproducible(seed=0, threads=1)

# %% [markdown]
# ## 1. RoBERTa is a configuration of BERT
#
# `RobertaConfig` is `BertConfig` with a handful of different defaults, and the registry builds both with the same
# `Bert` class. The differences: a 50,265-token byte-level BPE vocabulary; one segment row (RoBERTa marks no
# sentence B); LayerNorm ε = 1e-5; the padding token is id 1 and positions are counted from `pad_id + 1`, as in the
# original fairseq code; and no NSP head.

# %%
bert, roberta = BertConfig(), RobertaConfig()
for field in ROBERTA:
    print(f"{field:16s} BERT {getattr(bert, field)!s:>6}   RoBERTa {getattr(roberta, field)!s:>6}")
same = [f for f in ("n_layers", "n_heads", "d_model", "d_ff", "activation") if getattr(bert, f) == getattr(roberta, f)]
print("identical architecture fields:", same)

# %% [markdown]
# The tiny size used below for live runs keeps RoBERTa's choices but shrinks everything, and drops the pooler
# (pretraining with MLM alone never trains it).

# %%
documents = load_wikitext("valid")  # 60 Wikipedia articles: real document boundaries for the input formats
train_docs, val_docs = split_documents(documents, 0.05)  # the last 5% of each article's paragraphs held out
tokenizer = train_tokenizer([d.text for d in train_docs], "roberta", vocab_size=4096)  # byte-level BPE
TINY = {**ROBERTA_SIZES["tiny"], "n_layers": 2, "d_model": 64, "n_heads": 2, "d_ff": 256, "max_len": 128}


def tiny_roberta(**overrides):
    """A 2-layer RoBERTa with this chapter's vocabulary (dropout 0, as ROBERTA_SIZES['tiny'])."""
    return Bert(RobertaConfig(**{**TINY, "vocab_size": tokenizer.vocab_size, **overrides}))


print("tokenizer:", tokenizer, "| tiny RoBERTa:", count_parameters(tiny_roberta()), "parameters")

# %% [markdown]
# ## 2. Static vs dynamic masking (Table 1)
#
# MLM picks a random set $M$ of ~15% of the positions, corrupts them (80% `<mask>`, 10% a random token, 10%
# unchanged) into $\tilde x$, and scores only those positions:
#
# $$\mathcal{L}_{\text{MLM}}(\theta) = -\frac{1}{|M|}\sum_{i \in M} \log p_\theta(x_i \mid \tilde x)$$
#
# BERT's preprocessing drew $M$ **once**. To see more than one mask per sentence, it duplicated the data 10 times
# with different masks; over 40 epochs "each training sequence was seen with the same mask four times" (§4.1).
# RoBERTa instead draws a new $M$ every time a sequence enters a batch: **dynamic masking**. In `minilm` the first
# is `StaticMaskedDataset` (masks precomputed, `n_duplicates` copies), the second the `DynamicMasking` collate.
#
# Count the distinct masks one sequence gets over 40 epochs of training:

# %%
examples = make_examples("full_sentences", train_docs, tokenizer, max_tokens=64)
masking = MaskingConfig.from_tokenizer(tokenizer)
static = StaticMaskedDataset(examples, masking, n_duplicates=10, seed=0)
dynamic = DynamicMasking(masking, seed=0)
n, epochs = len(examples), 40
# 40 epochs of the original data are 4 passes over the 10 static copies; item d * n + 0 is copy d of sequence 0
static_masks = [static[(epoch % 10) * n]["labels"] != -100 for epoch in range(epochs)]
dynamic_masks = [dynamic([examples[0]])["labels"][0] != -100 for _ in range(epochs)]
for name, masks in (("static (10 copies)", static_masks), ("dynamic", dynamic_masks)):
    distinct = len({tuple(m.tolist()) for m in masks})
    share = float(torch.stack(masks).float().mean())
    print(f"{name:18s}: {distinct:2d} distinct masks in {epochs} epochs; {share:.2f} of tokens masked")
    assert distinct == (10 if name.startswith("static") else epochs) and 0.08 < share < 0.2, (name, distinct, share)

fig, axes = plt.subplots(1, 2, figsize=(11, 3.2), sharey=True)
for ax, (title, masks) in zip(axes, (("static, 10 copies", static_masks), ("dynamic", dynamic_masks)), strict=True):
    ax.imshow(torch.stack(masks).T.float(), aspect="auto", cmap="Greys", interpolation="nearest")
    ax.set(title=f"{title}: masked positions of one sequence", xlabel="epoch")
axes[0].set_ylabel("token position")
plt.tight_layout()
plt.show()

# %% [markdown]
# The static pattern repeats with period 10. Does it matter? The paper's answer (Table 1, BERT-base on 16 GB):
# barely — SQuAD 2.0 F1 78.3 static vs 78.7 dynamic, MNLI 84.3 vs 84.0, SST-2 92.5 vs 92.9 — "comparable or slightly
# better", and dynamic masking is free and needed anyway when data is streamed for many epochs.
#
# A live miniature where it *should* matter: a small corpus seen for many epochs, so that a fixed mask can be
# memorised. We pretrain the tiny RoBERTa three times — one fixed mask (BERT without duplication), 10 copies
# (BERT's recipe), dynamic — and measure the MLM loss on the same held-out paragraphs, masked once with a fixed seed.

# %%
train_examples = examples[:100]  # ~6K tokens: 200 steps of 16 are 32 epochs
held_out = StaticMaskedDataset(make_examples("full_sentences", val_docs, tokenizer, max_tokens=64), masking, 1, seed=1)


def pretrain(data, collate, steps=200, batch_size=16, lr=2e-3, loss_fn=bert_mlm_loss, model=None, eval_data=held_out):
    """Pretrain a fresh tiny RoBERTa (same initial weights every time); return (trainer, held-out metrics)."""
    torch.manual_seed(0)
    model = model or tiny_roberta()
    config = TrainConfig(
        batch_size=batch_size, lr=lr, max_steps=steps, warmup_steps=steps // 10, eval_every=0, progress=False
    )
    trainer = Trainer(model, loss_fn, data, config, eval_data=eval_data, collate=collate, eval_collate=held_out.collate)
    return trainer, trainer.fit()


masking_runs = {}
for name, n_copies in (("static, 1 mask", 1), ("static, 10 copies", 10), ("dynamic", None)):
    if n_copies is None:
        data, collate = train_examples, DynamicMasking(masking)
    else:
        data = StaticMaskedDataset(train_examples, masking, n_copies, seed=0)
        collate = data.collate
    masking_runs[name] = pretrain(data, collate)

# %%
# NBVAL_IGNORE_OUTPUT
for name, (trainer, metrics) in masking_runs.items():
    losses = [e["loss"] for e in trainer.history if e["split"] == "train"]
    print(f"{name:18s} train loss {losses[0]:.3f} -> {losses[-1]:.3f}; held-out MLM loss {metrics['loss']:.3f}")

# %%
held = {name: metrics["loss"] for name, (_, metrics) in masking_runs.items()}
for trainer, _ in masking_runs.values():
    losses = [e["loss"] for e in trainer.history if e["split"] == "train"]
    assert losses[-1] < 0.8 * losses[0], "every run learned"
print("one fixed mask generalises worst:", held["static, 1 mask"] > max(held["static, 10 copies"], held["dynamic"]))
print("dynamic beats 10 copies:", held["dynamic"] < held["static, 10 copies"])

# %% [markdown]
# With a single fixed mask the model sees the same 15% of each sequence as targets every epoch: its *training*
# loss falls fastest (it memorises which tokens hide where) while its held-out loss is the worst. Ten copies
# remove most of that gap; dynamic masking is better still, by about 0.1 nats here — over 32 epochs of a tiny
# corpus, the setting most favourable to dynamic masking. In the paper, on 16 GB, the gain was a few tenths of a
# point downstream: a small effect, not a revolution, but free.
#
# ## 3. Input formats and next-sentence prediction (Table 2)
#
# BERT trained on pairs of segments and added a classifier for "is B the real continuation of A?" (NSP):
#
# $$\mathcal{L} = \mathcal{L}_{\text{MLM}} + \mathcal{L}_{\text{NSP}}, \qquad
# \mathcal{L}_{\text{NSP}} = -\log p_\theta(y \mid \texttt{[CLS]}\ A\ \texttt{[SEP]}\ B\ \texttt{[SEP]}),\ y \in
# \{\text{IsNext}, \text{NotNext}\}$$
#
# RoBERTa compared four ways of filling an input (§4.2); `minilm.objectives.formats.make_examples` builds each from
# documents. Here is what one training example of each looks like, from the WikiText articles (RoBERTa's template:
# `<s> A </s></s> B </s>` for pairs, `</s>` also separating documents inside FULL-SENTENCES):

# %%
format_examples = {f: make_examples(f, train_docs[:30], tokenizer, max_tokens=128, seed=0) for f in FORMATS}


def show(example, width=230):
    text = tokenizer.decode(example["input_ids"], skip_special_tokens=False)
    return text if len(text) <= width else text[: width // 2] + " [...] " + text[-width // 2 :]


for fmt, exs in format_examples.items():
    e = next(e for e in exs if fmt != "full_sentences" or (e["input_ids"][1:-1] == tokenizer.sep_id).any())
    label = {0: "IsNext", 1: "NotNext"}[int(e["next_sentence_label"])] if "next_sentence_label" in e else "no NSP"
    print(f"== {fmt.upper()} ({len(e['input_ids'])} tokens, {label})\n{show(e)}\n")

# %%
print(f"{'format':15s} {'examples':>8s} {'mean tokens':>11s} {'NotNext':>8s}")
for fmt, exs in format_examples.items():
    lengths = torch.tensor([len(e["input_ids"]) for e in exs], dtype=torch.float)
    labels = [int(e["next_sentence_label"]) for e in exs if "next_sentence_label" in e]
    not_next = f"{sum(labels) / len(labels):.2f}" if labels else "-"
    print(f"{fmt:15s} {len(exs):8d} {lengths.mean():11.1f} {not_next:>8s}")

# %% [markdown]
# SENTENCE-PAIR inputs are much shorter than the 128-token limit, so the paper raised their batch size to keep the
# tokens per step the same. DOC-SENTENCES leaves short inputs at the end of every document; FULL-SENTENCES crosses
# the boundary instead (the `</s>` in its example above).
#
# Table 2's finding: SENTENCE-PAIR+NSP is clearly worst (MNLI 82.9 vs 84.0 for SEGMENT-PAIR+NSP) — "using
# individual sentences hurts performance on downstream tasks, which we hypothesize is because the model is not
# able to learn long-range dependencies" — while removing NSP and packing full sentences **matches or improves**
# (FULL-SENTENCES MNLI 84.7, DOC-SENTENCES 84.7, SQuAD 2.0 F1 79.1 and 79.7).
#
# A live miniature of the two extremes, SENTENCE-PAIR+NSP and FULL-SENTENCES, with the same number of steps and
# tokens per step, scored by the MLM loss on the same held-out inputs (the NSP run needs a pooler and an NSP head):

# %%
held_out_128 = StaticMaskedDataset(make_examples("full_sentences", val_docs, tokenizer, max_tokens=128), masking, 1, 1)
format_runs = {}
for fmt, loss_fn, heads in (
    ("sentence_pair", bert_mlm_nsp_loss, {"pooler": True, "nsp": True}),
    ("full_sentences", bert_mlm_loss, {}),
):
    exs = format_examples[fmt]
    batch = round(16 * 128 / (sum(len(e["input_ids"]) for e in exs) / len(exs)))  # ~2K tokens per step
    trainer, _ = pretrain(
        exs, DynamicMasking(masking), steps=100, batch_size=batch, loss_fn=loss_fn, model=tiny_roberta(**heads),
        eval_data=None,
    )  # fmt: skip
    # the shared held-out set has no NSP labels: score the MLM loss alone
    trainer.loss_fn, trainer.eval_data = bert_mlm_loss, held_out_128
    format_runs[fmt] = (batch, trainer.evaluate()["loss"])

# %%
# NBVAL_IGNORE_OUTPUT
for fmt, (batch, loss) in format_runs.items():
    print(f"{fmt:15s} batch {batch:3d}: held-out MLM loss {loss:.3f}")

# %%
live_format_loss = {fmt: loss for fmt, (_, loss) in format_runs.items()}
gap = live_format_loss["full_sentences"] - live_format_loss["sentence_pair"]
print("the two formats are within 0.1 nats of each other:", abs(gap) < 0.1)
assert abs(gap) < 0.1, live_format_loss

# %% [markdown]
# At this size the two are indistinguishable: one tiny run per format and 100 steps are far too little to rank
# formats. Section 6 runs the full miniature (all four formats, and SEGMENT-PAIR without NSP, each fine-tuned on
# two tasks) as a script.
#
# ## 4. Larger batches through gradient accumulation (Table 3)
#
# RoBERTa's batches held 8K sequences of up to 512 tokens — about 4M tokens, far beyond one accelerator's memory.
# The paper spread them over many GPUs, and notes that large batches are within reach of small hardware through
# **gradient accumulation** (Ott et al. 2018): split the batch of $B = kb$ into $k$ micro-batches, run backward on
# each, add the gradients, step once. For a loss that is a mean over the batch's $B$ items,
#
# $$\nabla_\theta \frac{1}{B}\sum_{n=1}^{B} \ell_n = \sum_{j=1}^{k} \frac{b}{B}\, \nabla_\theta \Big(\frac{1}{b}
# \sum_{n \in \text{micro-batch } j} \ell_n\Big),$$
#
# so weighting micro-batch $j$'s mean loss by its share of the items gives **exactly** the big batch's gradient.
# The MLM loss averages over *masked tokens*, whose number varies between micro-batches: the right weight is
# $|M_j| / |M|$. Weighting by $1/k$ instead — what the `Trainer` did until it was told the counts, and what many
# training loops still do — is exact only when every micro-batch holds the same number of masked tokens; otherwise
# each masked token of micro-batch $j$ weighs $1/(k|M_j|)$ instead of $1/|M|$, and the step follows the gradient
# of a different loss.
#
# The `Trainer` takes `counts=`: a function that says, before the forward pass, how many units each part of the
# loss has in a batch — `{"loss": number of masked tokens}` here (BERT's MLM + NSP would give
# `{"mlm": masked tokens, "nsp": examples}`, each part weighted by its own units). It sums the counts over the
# step's micro-batches (and over the processes of a distributed run, where DDP's gradient average is the same
# problem again), weights micro-batch $j$ by $|M_j| / |M|$, and logs the big batch's loss. Below, its first step
# on 16 sequences, as one batch and as $k = 4$ micro-batches of 4, with and without the counts, for five maskings:


# %%
def masked_tokens(batch):
    """The MLM loss's units in a batch, counted before the forward pass: its masked tokens."""
    return {"loss": masked_positions(batch["labels"]).numel()}


def first_step(data, grad_accum, counts):
    """The Trainer's first step on 16 sequences in grad_accum micro-batches: (gradient, logged loss, trainer)."""
    config = TrainConfig(batch_size=16, grad_accum=grad_accum, max_steps=1, grad_clip=0.0, progress=False)
    torch.manual_seed(0)
    trainer = Trainer(tiny_roberta(), bert_mlm_loss, data, config, collate=data.collate, counts=counts)
    params = [p for p in trainer.model.parameters() if p.requires_grad]
    grads = []  # what the optimizer receives, all parameters flattened
    # torch.optim calls a step pre-hook just before optimizer.step(): the gradients as the update will use them,
    # after the Trainer summed the micro-batches, and before the weights change
    trainer.optimizer.register_step_pre_hook(
        lambda *_: grads.append(torch.cat([p.grad.flatten() for p in params if p.grad is not None]))
    )
    loss, _ = trainer.train_step()
    return grads[0], loss, trainer


def relative_difference(gradient, reference):
    return float((gradient - reference).norm() / reference.norm())


exact_every_time, uniform_off = [], []
for seed in range(5):  # five maskings of the same 16 sequences (masked once each: the same masks in every run)
    data = StaticMaskedDataset(examples[:16], masking, n_duplicates=1, seed=seed)
    one_batch, one_batch_loss, trainer = first_step(data, 1, masked_tokens)
    exact, exact_loss, _ = first_step(data, 4, masked_tokens)  # weights |M_j| / |M|
    uniform, _, _ = first_step(data, 4, None)  # weights 1/k
    same_gradient = torch.allclose(exact, one_batch, rtol=1e-4, atol=1e-7)
    exact_every_time.append(same_gradient and math.isclose(exact_loss, one_batch_loss, rel_tol=1e-6))
    uniform_off.append(relative_difference(uniform, one_batch))
assert all(exact_every_time), "accumulation weighted by |M_j| is exact"
# the Trainer reads its examples in a seeded order (trainer.order, a minilm.train.BatchOrder): .indices(step) are
# the examples of that step, here its 16 sequences; micro-batch j holds order[4j : 4j + 4]
order = trainer.order.indices(0)
n_masked = [masked_tokens(data.collate([data[i] for i in order[j : j + 4]]))["loss"] for j in range(0, 16, 4)]
token_weights = [sum(n_masked) / (len(n_masked) * m) for m in n_masked]  # what 1/k makes of a token's 1/|M|
print("accumulated with counts == one big batch (gradient and logged loss):", exact_every_time)
print("accumulated with weights 1/k, relative difference of the gradient:", [round(d, 2) for d in uniform_off])
print(f"last masking: masked tokens per micro-batch {n_masked}; with 1/k a masked token weighs "
      f"{min(token_weights):.2f}x to {max(token_weights):.2f}x what it should")  # fmt: skip

# %% [markdown]
# With the counts, four micro-batches give the big batch's gradient to float precision, and the same logged loss,
# for every masking. With $1/k$, the masked tokens of a micro-batch with few masks count for more than their share
# and those of a full one for less, and the gradient is off by 7% to 30% of its norm, depending on where the masks
# fell — a reweighting of the objective towards lightly masked micro-batches, not noise. (The logged loss hardly
# shows it at initialisation, where every token costs about $\log V$; the gradient does.) A token-level loss over
# padded sequences (tagging, span extraction) has the same problem, with real tokens as its units; so does DDP,
# which averages the processes' gradients with equal weights.
#
# Table 3 of the paper trains BERT-base for the same number of passes over the data with bigger batches and fewer
# steps: batch 256 × 1M steps (lr 1e-4) gives MLM perplexity 3.99, 2K × 125K (lr 7e-4) **3.68**, 8K × 31K (lr 1e-3)
# 3.77 — larger batches, with a larger learning rate, are as good or better, and far easier to parallelise. A small
# version, same number of tokens (batch × steps constant), learning rate raised with the batch:

# %%
batch_runs = {}
for batch_size, steps, lr in ((8, 160, 1e-3), (32, 40, 2e-3)):
    batch_runs[batch_size] = pretrain(examples, DynamicMasking(masking), steps, batch_size, lr)[1]["loss"]

# %%
# NBVAL_IGNORE_OUTPUT
for batch_size, loss in batch_runs.items():
    print(f"batch {batch_size:2d}: held-out MLM loss {loss:.3f}")

# %%
print("the same tokens in 4x fewer steps costs less than 0.5 nats:", batch_runs[32] - batch_runs[8] < 0.5)
assert batch_runs[32] - batch_runs[8] < 0.5, batch_runs

# %% [markdown]
# At this scale the small batch usually wins: 40 steps are too few updates for a model that is still far from
# converged, whereas the paper's 31K–125K steps are plenty. The benefit Table 3 shows — same perplexity, far fewer
# sequential steps — needs a model and run long enough that the *number of updates* stops being the bottleneck.
#
# ## 5. Byte-level BPE vs WordPiece (§4.4)
#
# BERT's WordPiece vocabulary is built over Unicode characters; any character it never saw becomes `[UNK]`, and the
# uncased model also strips accents. GPT-2's **byte-level BPE** (Radford et al. 2019), which RoBERTa adopted, starts
# from the 256 bytes, so every string has an encoding and decodes back exactly. The price: rare characters cost
# several tokens (an emoji is 4 bytes in UTF-8).

# %%
wordpiece = train_tokenizer([d.text for d in train_docs], "bert", vocab_size=4096)  # same texts, same vocabulary
unusual = ["Naïve café owners in Zürich said “Ωmega”.", "Tokyo is 東京 😀", "the cat sat on the mat"]
for name, tok in (("WordPiece", wordpiece), ("byte-level BPE", tokenizer)):
    print(f"== {name} ({tok.vocab_size} tokens)")
    for text in unusual:
        ids = tok.encode(text, add_special_tokens=False)
        unk = sum(i == tok.token_to_id(tok.spec.unk) for i in ids) if tok.spec.unk else 0
        exact = tok.decode(ids) == text
        print(f"  {len(ids):2d} tokens, {unk} unknown, decodes exactly: {exact!s:5s}  {tok.tokenize(text)[:12]}")


def unknowns(tok, texts):
    ids = tok(texts, padding=False, add_special_tokens=False).input_ids
    return sum(i == tok.token_to_id(tok.spec.unk) for x in ids for i in x)


def round_trips(tok, texts):
    return all(tok.decode(tok.encode(t, add_special_tokens=False)) == t for t in texts)


# %%
# WikiText already replaced its rare words by the string "<unk>": drop those, so only real text is tokenized
test_sentences = [s.replace("<unk>", "") for d in load_wikitext("test") for s in d.sentences()]
lengths = {}
for name, tok in (("WordPiece", wordpiece), ("byte-level BPE", tokenizer)):
    ids = tok(test_sentences, padding=False, add_special_tokens=False).input_ids
    lengths[name] = torch.tensor([len(x) for x in ids], dtype=torch.float)
    words = sum(len(s.split()) for s in test_sentences)
    unk = unknowns(tok, test_sentences)
    print(f"{name:15s} tokens per word {lengths[name].sum() / words:.2f}, unknown tokens {unk}")

fig, ax = plt.subplots(figsize=(6, 3))
_ = ax.hist(
    [v.numpy() for v in lengths.values()], bins=40, range=(0, 120), label=list(lengths), histtype="step", linewidth=1.5
)
ax.set(xlabel="tokens per sentence (WikiText-2 test)", ylabel="sentences", title="Same vocabulary size, 4,096")
ax.legend()
plt.show()

# %%
print("byte-level BPE: no unknown token, exact round trip:",
      unknowns(tokenizer, unusual + test_sentences) == 0 and round_trips(tokenizer, unusual))  # fmt: skip
print("WordPiece: unknown tokens on the unusual texts:", unknowns(wordpiece, unusual) > 0,
      "; exact round trip:", round_trips(wordpiece, unusual))  # fmt: skip
ratio = float(lengths["byte-level BPE"].sum() / lengths["WordPiece"].sum())
print("byte-level BPE sequences within 15% of WordPiece's on WikiText:", abs(ratio - 1) < 0.15)
assert unknowns(tokenizer, unusual + test_sentences) == 0 and round_trips(tokenizer, unusual)
assert unknowns(wordpiece, unusual) > 0 and not round_trips(wordpiece, unusual) and abs(ratio - 1) < 0.15

# %% [markdown]
# On clean English the two are close — about 1.35 vs 1.5 tokens per word: the byte-level vocabulary spends some of
# its 4,096 entries on byte pieces and on case variants that the uncased WordPiece folds together — but WordPiece
# still meets a few dozen characters it cannot encode in WikiText's test set, and on unusual text it loses information
# (accents, case, emoji) where byte-level BPE never does. The paper found its 50K byte-level vocabulary slightly
# *worse* on some tasks than BERT's 30K one, and kept it anyway: a universal encoding is worth the small cost.
#
# ## 6. A miniature of Table 2: formats, with and without NSP
#
# `experiments/ch04_input_formats.py` pretrains a tiny BERT (2 layers, d_model 128, 4,096 WordPiece tokens) on
# WikiText-2 for 300 steps per format, with about 2K tokens per step for every format (SENTENCE-PAIR gets larger
# batches, as in the paper), plus SEGMENT-PAIR *without* NSP to isolate the NSP loss. Each model is scored by its
# MLM loss on one shared held-out set and by fine-tuning on SST-2 and SNLI (4,000 training examples, 120 steps,
# accuracy on 1,000 validation examples). It ran once; its recorded results:

# %%
recorded = recorded_results("ch04_input_formats")
print(recorded.describe())
setup, rows = recorded.results["setup"], recorded.results["rows"]
print(f"model: {setup['model']}; {setup['pretrain_steps']} steps x {setup['tokens_per_step']} tokens")

# %%
print(f"{'input format':22s} {'NSP':>4s} {'batch':>5s} {'held-out MLM':>12s} {'SST-2':>6s} {'SNLI':>6s}")
for r in rows:
    print(f"{r['row']:22s} {'yes' if r['nsp'] else 'no':>4s} {r['batch_size']:5d} {r['held_out_mlm_loss']:12.3f} "
          f"{r['sst2_accuracy']:6.3f} {r['snli_accuracy']:6.3f}")  # fmt: skip

fig, axes = plt.subplots(1, 3, figsize=(13, 3.4), sharey=True)
names = [r["row"] for r in rows]
colors = ["tab:orange" if r["nsp"] else "tab:blue" for r in rows]
error = setup["accuracy_standard_error"]
losses = [r["held_out_mlm_loss"] for r in rows]  # a few hundredths apart: dots on a narrow axis, not bars
_ = axes[0].scatter(losses, names, color=colors, zorder=3)
axes[0].set(title="held-out MLM loss (lower is better)", xlim=(min(losses) - 0.05, max(losses) + 0.05))
axes[0].grid(axis="x", alpha=0.3)
for ax, (key, title, err, chance) in zip(
    axes[1:],
    (("sst2_accuracy", "SST-2 accuracy", error["sst2"], 0.5), ("snli_accuracy", "SNLI accuracy", error["snli"], 1 / 3)),
    strict=True,
):  # fmt: skip
    _ = ax.barh(names, [r[key] for r in rows], xerr=err, color=colors)  # bars start at zero
    ax.axvline(chance, color="gray", linestyle=":", label="chance")
    ax.set(title=title, xlim=(0, 1))
    ax.legend(loc="lower right")
axes[0].invert_yaxis()
plt.suptitle("Miniature of RoBERTa's Table 2 (orange: with NSP)")
plt.tight_layout()
plt.show()

# %%
lowest = min(rows, key=lambda r: r["held_out_mlm_loss"])["row"]
by_name = {r["row"]: r for r in rows}
spread = max(r["held_out_mlm_loss"] for r in rows) - min(r["held_out_mlm_loss"] for r in rows)
print("lowest held-out MLM loss:", lowest, f"(spread over formats {spread:.2f} nats)")
packed = ("FULL-SENTENCES", "DOC-SENTENCES")
packed_lead = min(by_name[p]["snli_accuracy"] for p in packed) - by_name["SENTENCE-PAIR+NSP"]["snli_accuracy"]
print("both packed formats (no NSP) beat SENTENCE-PAIR+NSP on SNLI:", packed_lead > 0)
assert spread < 0.1 and packed_lead > 0, (spread, packed_lead)

# %% [markdown]
# **What the miniature shows, honestly.** The MLM losses differ by a few hundredths of a nat — DOC-SENTENCES
# lowest (the paper's Table 2 reports downstream scores, not an MLM loss per format), but within what another seed
# would change. On SNLI the two packed formats without NSP
# come first (0.42 and 0.41 against 0.35–0.37), the direction of Table 2, by more than the error bars but from one
# run. Removing NSP from SEGMENT-PAIR gave mixed results (better on SNLI, worse on SST-2).
# Every number comes from one pretraining and one fine-tuning seed; SNLI accuracies are not far above chance (three
# classes); the binomial standard error alone is ±1.5 points (the error bars). A tiny model trained for 300 steps
# cannot learn what NSP or long contexts are for; the paper's conclusions rest on BERT-base trained for days. What
# the notebook *can* show exactly — the masks, the formats, the accumulation identity, the vocabularies — it shows
# with asserts.
#
# ## 7. A miniature of Table 4: more data, longer training
#
# Table 4 of the paper climbs a ladder with RoBERTa-large: BERT's 16 GB for 100K steps, then ten times the data for
# the same steps, then 300K and 500K steps. Each rung helps (SQuAD 2.0 F1 87.3, 87.7, 88.7, 89.4). The paper has no
# row that trains longer on the *old* data, so it cannot say how much of the gain is the data and how much the
# steps. `experiments/ch04_data_and_steps.py` climbs the same ladder with the tiny BERT of section 6. The small
# corpus is WikiText; the larger one adds the 17 Gutenberg novels (about five times the text). The ladder runs N =
# 300 steps, then 3N and 5N, and adds the missing row: the small corpus for 5N steps. Each model is scored on
# both corpora's held-out paragraphs and fine-tuned on SST-2 and SNLI as before:

# %%
ladder = recorded_results("ch04_data_and_steps")
print(ladder.describe())
table4 = ladder.results["rows"]
header = f"{'row':22s} {'epochs':>6s} {'WikiText loss':>13s} {'novels loss':>11s} {'SST-2':>6s} {'SNLI':>6s}"
print(f"\n{header}  paper's row")
for r in table4:
    print(f"{r['row']:22s} {r['epochs']:6.2f} {r['held_out_mlm_loss_wikitext']:13.3f} "
          f"{r['held_out_mlm_loss_gutenberg']:11.3f} {r['sst2_accuracy']:6.3f} {r['snli_accuracy']:6.3f}  "
          f"{r['paper_row']}")  # fmt: skip

fig, axes = plt.subplots(1, 3, figsize=(13, 3.4), sharey=True)
names = [r["row"] for r in table4]
for key, label, marker in (("wikitext", "WikiText", "o"), ("gutenberg", "novels", "s")):
    _ = axes[0].scatter([r[f"held_out_mlm_loss_{key}"] for r in table4], names, marker=marker, label=label, zorder=3)
axes[0].set(title="held-out MLM loss (lower is better)")
axes[0].legend(loc="center right")
axes[0].grid(axis="x", alpha=0.3)
error = ladder.results["setup"]["accuracy_standard_error"]
for ax, (task, title, chance) in zip(
    axes[1:], (("sst2", "SST-2 accuracy", 0.5), ("snli", "SNLI accuracy", 1 / 3)), strict=True
):
    _ = ax.barh(names, [r[f"{task}_accuracy"] for r in table4], xerr=error[task], color="tab:blue")
    ax.axvline(chance, color="gray", linestyle=":", label="chance")
    ax.set(title=title, xlim=(0, 1))
    ax.legend(loc="lower right")
axes[0].invert_yaxis()
plt.suptitle("Miniature of RoBERTa's Table 4 (recorded)")
plt.tight_layout()
plt.show()

# %%
row = {r["row"]: r for r in table4}
ladder_rows = ["more data, N steps", "more data, 3N steps", "more data, 5N steps"]
longer_helps = all(
    row[a][f"held_out_mlm_loss_{c}"] > row[b][f"held_out_mlm_loss_{c}"]
    for a, b in zip(ladder_rows, ladder_rows[1:], strict=False)  # consecutive rungs
    for c in ("wikitext", "gutenberg")
)
small, more = row["small data, N steps"], row["more data, N steps"]
print("longer training lowers both held-out losses at every rung:", longer_helps)
print("more data at N steps: better on the novels, worse on WikiText:",
      more["held_out_mlm_loss_gutenberg"] < small["held_out_mlm_loss_gutenberg"]
      and more["held_out_mlm_loss_wikitext"] > small["held_out_mlm_loss_wikitext"])  # fmt: skip
control = row["small data, 5N steps"]
print("the small corpus for 5N steps has the lowest WikiText loss and the best SNLI accuracy:",
      all(control["held_out_mlm_loss_wikitext"] <= r["held_out_mlm_loss_wikitext"] for r in table4)
      and all(control["snli_accuracy"] >= r["snli_accuracy"] for r in table4))  # fmt: skip
assert longer_helps

# %% [markdown]
# **What the miniature shows.** The *longer training* half of Table 4 reproduces. On the larger corpus, each rung
# lowers the held-out loss on both corpora (WikiText 6.52 → 5.96 → 5.85). The *more data* half does not, at this
# scale. At the same 300 steps the larger corpus helps on the novels and hurts on WikiText: the model saw a fifth as
# much Wikipedia text. The missing row settles the question. Five passes over the small corpus (4.7 epochs) beat
# less than one pass over the large one (0.85 epochs) on WikiText (5.63 against 5.85), and on SNLI (0.43 against
# 0.39–0.40 for every other row, about three standard errors). On SST-2 it is level with the best rung (0.66
# against 0.65); single SST-2 runs swing by several points here (0.65 to 0.59 between the last two rungs, where
# the held-out losses barely moved), so read that column loosely. A 1M-parameter model trained for
# minutes has not fit even the small corpus, so repeating it costs nothing. It is limited by its steps and its
# size, not by its data. RoBERTa-large was different: trained on 16 GB, it had more capacity than that data could
# fill, and new text beat repetition. How much data a model can use grows with its size (Kaplan et al. 2020 measure
# it; Hoffmann et al. 2022 find the best number of tokens grows in proportion to the parameters).
#
# ## Summary
#
# - RoBERTa is BERT's architecture with a better recipe: in `minilm`, a `RobertaConfig` of the same `Bert` class.
# - Dynamic masking draws new masks every time a sequence is seen. Static masking with 10 copies repeats each
#   mask 4 times over 40 epochs; with one copy the model memorises its masks (its train loss falls furthest,
#   its held-out loss least).
# - The input format decides what a sequence holds: segment or sentence pairs for NSP, or sentences packed to the
#   length budget, within one document (DOC-SENTENCES) or across documents (FULL-SENTENCES). The paper drops NSP.
# - Gradient accumulation makes a batch of any size on one device. For MLM it must weigh each micro-batch by its
#   number of masked tokens to equal one big batch exactly.
# - Byte-level BPE never produces an unknown token; WordPiece maps unseen characters to `[UNK]`.
# - More data and longer training (Table 4) explain much of RoBERTa's gain; a tiny model trained for minutes shows
#   the mechanisms exactly, but not the paper's differences in accuracy. Its Table 4 ladder shows why: a tiny
#   model is limited by its steps, and repeating a small corpus serves it as well as new text.
#
# ## Exercises
#
# 1. **Masks seen.** With `n_duplicates = 10` and 40 epochs, each mask is seen 4 times. How many epochs can
#    static masking run before a mask repeats with `n_duplicates = d`? Plot the held-out loss of Section 2 against
#    `n_duplicates ∈ {1, 2, 5, 10}`.
# 2. **Whole-word masking.** Rerun Section 2 with `MaskingConfig.from_tokenizer(tokenizer, whole_word=True)`
#    (the examples carry `word_ids`). Is the held-out loss (on whole-word masks) higher or lower, and why?
# 3. **Accumulation in the Trainer.** Train the same model with `batch_size=16, grad_accum=1` and `grad_accum=4`
#    for 20 steps, with and without `counts=masked_tokens`, and compare the losses. Why do they differ without the
#    counts for MLM but not for a causal LM? How does the gap change with `batch_size=64`?
# 4. **DOC-SENTENCES' batches.** The paper "dynamically increases the batch size" for short DOC-SENTENCES inputs.
#    Write a collate that packs a variable number of inputs up to a token budget, and measure how often it matters
#    on WikiText's articles.
# 5. **Vocabulary size.** Train byte-level BPE tokenizers of 1K, 4K and 16K tokens: plot tokens per word on
#    WikiText and on the Gutenberg novels. Where does the curve flatten?
# 6. Run `python -m minilm.train --model roberta --objective mlm format=full_sentences masking=dynamic` and
#    `--model bert --objective mlm+nsp format=segment_pair` for the same number of tokens, then fine-tune both with
#    `python -m minilm.finetune --task snli --pretrained runs/...`.
#
# ## Lab
#
# [Lab 4: RoBERTa's data pipeline](../labs/lab04_roberta.py): FULL-SENTENCES and DOC-SENTENCES packing, a
# collate function that masks every batch anew (the same masks for the same seed), and exact big batches under
# gradient accumulation, each graded against `minilm`. (SQuAD span decoding, which RoBERTa's SQuAD results also
# rest on, is Chapter 3's [Lab 3b](../labs/lab03b_squad_decoding.py).)
