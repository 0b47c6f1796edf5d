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
# # Chapter 1 — ELMo: contextual word vectors from a bidirectional LM
#
# **Static embeddings.** word2vec (Mikolov et al. 2013) and GloVe (Pennington et al. 2014) give every word *type*
# one vector, learned from the company it keeps. Useful, but one vector has to serve every use of the word: the
# "bank" you fish from and the "bank" that lends you money get the same point in space, and so do "a play" at the
# theatre and "to play" in the garden.
#
# **Contextual embeddings.** Peters et al. (2018), "Deep contextualized word representations", replace the lookup
# table by a function of the whole sentence: a two-layer bidirectional LSTM language model (**biLM**) pretrained on
# a billion words. A word's ELMo vector is a learned mix of that network's layers at the word's position. Added to
# existing task models, it raised the state of the art on six benchmarks at once (their Table 1: SQuAD, SNLI, SRL,
# coreference, NER, SST-5; relative error reductions of 6–20%). ELMo is the bridge between word vectors and the
# pretrain-then-transfer models of the next chapters; unlike them, it is used *feature-based*: the biLM is frozen,
# only the mix and the task model are trained.
#
# What you will see:
# 1. the model (`minilm.models.ELMo`): characters in, a forward and a backward LSTM LM, one shared softmax;
# 2. the biLM objective, and why each direction must not see the token it predicts;
# 3. a small biLM trained on the course's Gutenberg novels for about a minute;
# 4. the senses of "bank" and "play" in each layer of the course's own, longer-trained ELMo — static layer 0 against
#    the contextual layers, and against the same network untrained;
# 5. the scalar mix, and the frozen biLM as features for part-of-speech tagging on UD-EWT, layer by layer: a
#    miniature of the paper's §5.3 (Tables 5 and 6), live and from a longer recorded run;
# 6. how a task model uses ELMo (where it enters, its regularisers, Tables 2 and 3), its sample efficiency, and
#    ELMo against GPT and BERT.

# %%
import collections
import re
import warnings
from types import SimpleNamespace

import matplotlib.pyplot as plt
import torch
import torch.nn.functional as F

import minilm.nn as mnn
from minilm.analysis import probe_layers, recorded_results, standardize, subword_sense_vectors, word_layer_vectors
from minilm.data import load_gutenberg, load_task
from minilm.data.senses import WORD_SENSES
from minilm.data.tasks import UPOS_TAGS
from minilm.metrics import nearest_centroid_accuracy
from minilm.models import course_checkpoint, untrained_like
from minilm.models.elmo import ELMO_PRESETS, ELMo, ELMoConfig
from minilm.objectives.bilm import bilm_loss
from minilm.objectives.causal_lm import language_model_blocks
from minilm.utils import count_parameters, reproducible
from minilm.widgets import plot_scalar_mix, scalar_mix_explorer

reproducible(seed=0, threads=1)
warnings.filterwarnings("ignore", message="LSTM with projections is not supported")  # torch's slower path: fine

# %% [markdown]
# ## 1. The model
#
# ELMo reads **characters**. Each word is spelled into byte ids, embedded, run through convolutions of widths 1–7
# (n-gram detectors), max-pooled over the word, passed through highway layers and projected: the
# context-independent token vector $x_k$ (`minilm.nn.CharCNN`). Any string gets a vector, seen in training or not.
# On top, two separate stacks of $L = 2$ LSTM layers with projections (LSTMP) read the sentence, one left to right,
# one right to left, with a residual connection between the layers. Both predict words through one shared softmax.
#
# The representations of token $k$ (`ELMo.features(...).hidden_states`, each $2d$ wide) are
# $$h_{k,0} = [x_k; x_k], \qquad h_{k,j} = [\overrightarrow{h}_{k,j}; \overleftarrow{h}_{k,j}] \quad (j = 1, 2).$$
# Layer 0 is a **static** embedding — a function of the word's spelling only; layers 1 and 2 are **contextual**.
#
# The paper's biLM has 4096 LSTM cells projected to $d = 512$ and 2048 character filters: 93.6M parameters without
# the softmax as allennlp counts them, 93.7M below, because torch's LSTM keeps two bias vectors per layer where ELMo
# has one. Ours is a few hundred times smaller, with a word-level softmax over the 2,000 most frequent words of
# the corpus (all others share `<unk>`; the input still spells every word).

# %%
CONFIG = ELMoConfig(
    vocab_size=2000,  # softmax over the 1,999 most frequent words + <unk>
    max_chars=20,
    filters=((1, 32), (2, 32), (3, 64), (4, 128)),  # 256 character n-gram filters
    n_highway=1,
    hidden_size=256,  # LSTM cells ...
    projection_dim=128,  # ... projected to d = 128 (LSTMP)
    dropout=0.0,
)
with torch.device("meta"):
    paper = ELMo(ELMoConfig(**ELMO_PRESETS["elmo-original"], vocab_size=1))
    ours = ELMo(CONFIG)
print(f"paper's biLM without the softmax: {(count_parameters(paper) - count_parameters(paper.softmax)) / 1e6:.1f}M")
print(f"ours without the softmax:         {(count_parameters(ours) - count_parameters(ours.softmax)) / 1e6:.2f}M")

# %% [markdown]
# The corpus: the 17 Gutenberg novels, cut into words and punctuation marks. Word types are numbered by frequency;
# the model reads each type's spelling (`spelling[type]`, ELMo's character ids) and predicts its softmax target
# (`target[type]`: its rank below 1,999, `<unk>` = 0 above).

# %%
WORD = re.compile(r"[A-Za-z]+|[0-9]+|[^\sA-Za-z0-9]")  # words, numbers, single punctuation marks
words = [w for book in load_gutenberg() for w in WORD.findall(book.text)]
types = [w for w, _ in collections.Counter(words).most_common()]
type_index = {w: i for i, w in enumerate(types)}
stream = torch.tensor([type_index[w] for w in words])  # (N,) the corpus as type ids
spelling = mnn.batch_to_char_ids([types], CONFIG.max_chars)[0]  # (n_types, max_chars)
target = torch.where(torch.arange(len(types)) < CONFIG.vocab_size - 1, torch.arange(len(types)) + 1, 0)  # (n_types,)
coverage = (target[stream] != 0).float().mean().item()
print(f"{len(words):,} words, {len(types):,} types; the softmax vocabulary covers {coverage:.0%} of the tokens")

# %% [markdown]
# ## 2. The biLM objective
#
# A forward LM factorises a sentence's probability left to right, a backward LM right to left:
# $$p(t_1, \dots, t_N) = \prod_{k=1}^N p(t_k \mid t_1, \dots, t_{k-1})
#   = \prod_{k=1}^N p(t_k \mid t_{k+1}, \dots, t_N).$$
# ELMo trains both jointly, sharing the token representation $\Theta_x$ and the softmax $\Theta_s$ but not the LSTMs
# (§3.1 of the paper), maximising
# $$\sum_{k=1}^N \Big( \log p(t_k \mid t_1, \dots, t_{k-1}; \Theta_x, \overrightarrow{\Theta}_{LSTM}, \Theta_s)
#   + \log p(t_k \mid t_{k+1}, \dots, t_N; \Theta_x, \overleftarrow{\Theta}_{LSTM}, \Theta_s) \Big).$$
#
# In code: the model reads a block of ids once; position $k$'s forward logits predict token $k+1$, its backward
# logits token $k-1$ (`minilm.objectives.bilm.bilm_loss`). Written out:

# %%
model = ELMo(CONFIG)
block = torch.randint(len(types), (2, 9))  # (B, T) type ids
forward_logits, backward_logits = model(char_ids=spelling[block])  # (B, T, V) each
ids = target[block]
forward_nll = F.cross_entropy(forward_logits[:, :-1].flatten(0, 1), ids[:, 1:].flatten())  # -log p(t_k+1 | t_<=k)
backward_nll = F.cross_entropy(backward_logits[:, 1:].flatten(0, 1), ids[:, :-1].flatten())  # -log p(t_k-1 | t_>=k)
reference = bilm_loss(forward_logits, backward_logits, ids)
print("equals minilm's bilm_loss:", torch.allclose(forward_nll + backward_nll, reference.loss))
print(f"untrained: mean loss {reference.mean:.1f} ~ log V = {torch.tensor(float(CONFIG.vocab_size)).log():.1f}")

# %% [markdown]
# The shift is the whole trick: if the forward state at $k$ could see token $k+1$, predicting it would be copying,
# and the loss would fall to zero while nothing was learned. (This is also why ELMo needs *two* LMs: a single
# bidirectional LSTM would see the answer from the other side — the problem BERT's masking solves in Chapter 3.)
# Check it: change the tokens after position 4, and the forward states up to 4 do not move; change the tokens before
# it, and the backward states from 4 on do not move.


# %%
def direction_states(char_ids):
    """The top layer's forward and backward halves, [h→; h←] split in two: each (B, T, d)."""
    with torch.no_grad():
        top = model.features(char_ids=char_ids).hidden_states[-1]  # (B, T, 2d)
    return top.split(CONFIG.projection_dim, dim=-1)


x = spelling[block]  # (B, T, max_chars)
later_changed, earlier_changed = x.clone(), x.clone()
later_changed[:, 5:] = spelling[torch.randint(len(types), (2, 4))]  # new tokens after position 4
earlier_changed[:, :4] = spelling[torch.randint(len(types), (2, 4))]  # new tokens before position 4
forward, backward = direction_states(x)
forward_later, backward_earlier = direction_states(later_changed)[0], direction_states(earlier_changed)[1]
print("forward LM at k <= 4 ignores tokens after 4: ", torch.equal(forward[:, :5], forward_later[:, :5]))
print("backward LM at k >= 4 ignores tokens before 4:", torch.equal(backward[:, 4:], backward_earlier[:, 4:]))

# %% [markdown]
# ## 3. Training a small biLM
#
# Blocks of 33 consecutive words, 32 per batch, AdamW with a short warm-up and gradient clipping; the last 2,048
# words (the end of *Wuthering Heights*) are held out. About a minute on a laptop CPU: 200 steps read 200k words.
# The paper's biLM read ten epochs of the 1B Word Benchmark (about 0.8 billion tokens each), some 40,000 times more
# (the cell below computes it), so expect a perplexity in the hundreds, falling.

# %%
blocks = language_model_blocks(stream, seq_len=32)  # (n, 33)
train_blocks, valid_blocks = blocks[:-64], blocks[-64:]


def bilm_batch_loss(model, block):
    """block (B, T) of type ids: the model reads their characters and predicts their softmax targets."""
    forward_logits, backward_logits = model(char_ids=spelling[block])
    return bilm_loss(forward_logits, backward_logits, target[block])


@torch.no_grad()
def perplexity(model):
    """exp of the mean held-out loss over both directions' predictions."""
    return bilm_batch_loss(model.eval(), valid_blocks).mean.exp().item()


def train_bilm(steps, batch_size=32, lr=2e-3, seed=0):
    torch.manual_seed(seed)
    model = ELMo(CONFIG)
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr)
    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: min(1.0, (step + 1) / 20))  # warm-up
    data = torch.Generator().manual_seed(seed)
    losses = []
    for _ in range(steps):
        block = train_blocks[torch.randint(len(train_blocks), (batch_size,), generator=data)]
        loss = bilm_batch_loss(model, block).mean  # (forward + backward) / 2: exp(loss) is a perplexity
        optimizer.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        schedule.step()
        losses.append(loss.item())
    return model.eval(), losses


# %%
# NBVAL_IGNORE_OUTPUT
untrained = ELMo(CONFIG).eval()  # kept as a control: what the architecture gives without training
untrained_perplexity = perplexity(untrained)
biLM, losses = train_bilm(steps=200)
trained_perplexity = perplexity(biLM)
words_read = 200 * 32 * 32  # steps x blocks x predicted words per block
print(f"read {words_read:,} words; the paper's biLM ~{10 * 0.8e9:.0e}, {10 * 0.8e9 / words_read:,.0f} times more")
print(f"training loss {losses[0]:.3f} -> {sum(losses[-20:]) / 20:.3f} (mean of the last 20 steps)")
print(f"held-out perplexity: untrained {untrained_perplexity:.0f}, after 200 steps {trained_perplexity:.0f}")

# %%
assert sum(losses[-20:]) / 20 < 0.75 * losses[0], "the training loss should fall by a quarter or more"
assert trained_perplexity < 0.2 * untrained_perplexity, "held-out perplexity should fall at least 5x"
fig, ax = plt.subplots(figsize=(6, 3))
_ = ax.plot(losses, lw=0.8)
ax.set(xlabel="step", ylabel="biLM loss (mean of both directions)", title="a small biLM on Gutenberg")
plt.show()

# %% [markdown]
# ## 4. One word, many senses
#
# Now the point of it all. `minilm.data.senses` holds ten sentences for each of two senses of "bank" (river /
# money) and of "play" (a theatre play / to play a game); we run a frozen biLM over them and take the word's vector
# in each layer.
#
# A minute of training is too little for meaning, so from here on we use the course's own ELMo
# (`minilm.models.course_checkpoint("elmo")`): the same design at minilm's "tiny" size — 256 character filters, two
# layers of 512 LSTM cells projected to $d = 128$ per direction — pretrained by `experiments/course_checkpoints.py`
# with `python -m minilm.train --model elmo --objective bilm`'s recipe on all 17 novels (its record, printed below,
# holds the command, commit, steps and validation perplexity). It reads GPT-2-style BPE tokens rather than words —
# each token spelled for the character CNN, a word's first token carrying the marker Ġ of a preceding space — and
# its softmax predicts the next (previous) of 8,192 tokens. A word's vector is its first token's
# (`minilm.analysis.subword_sense_vectors`). The control is the same network with freshly drawn weights
# (`minilm.models.untrained_like`): what the architecture gives without training.
#
# One adapter below, `reading_tokens`: `minilm.analysis`'s helpers read any encoder through one interface,
# `features(ids, mask, token_type_ids, output_hidden_states=True)` returning every layer's states, and a
# `config.max_len`. The biLM's own `features` takes only the ids and the mask, so `reading_tokens` wraps it in an
# object (a `SimpleNamespace`) that has that interface and passes the call on: nothing is computed differently.

# %%
elmo = course_checkpoint("elmo")
elmo_control = untrained_like(elmo)
elmo_record = recorded_results("course_checkpoints").results["elmo"]
perplexities = {key: elmo_record[key]["perplexity"] for key in ("validation", "untrained_validation")}
print(
    f"course ELMo: {count_parameters(elmo.model):,} parameters, {elmo_record['steps']:,} steps of "
    f"{elmo_record['train']['batch_size']} blocks of {elmo_record['job']['seq_len']} tokens; held-out perplexity "
    f"{perplexities['validation']:.0f} (untrained: {perplexities['untrained_validation']:,.0f})"
)
print(elmo.tokenizer.tokenize(WORD_SENSES["bank"]["river"][0]))


def reading_tokens(biLM):
    """The biLM seen as a model of sub-words: ``word_layer_vectors`` then feeds it the sentence's BPE token ids (each
    spelled for the character CNN from the vocabulary's table) rather than whole words' characters."""
    view = SimpleNamespace(config=SimpleNamespace(max_len=1024))
    view.features = lambda ids, mask=None, token_type_ids=None, output_hidden_states=True: biLM.features(ids, mask)
    return view


def word_sense_vectors(biLM, word):
    return subword_sense_vectors(reading_tokens(biLM), elmo.tokenizer, word, WORD_SENSES[word])


# %%
print({word: {sense: len(texts) for sense, texts in senses.items()} for word, senses in WORD_SENSES.items()})
print(WORD_SENSES["bank"]["river"][0], "|", WORD_SENSES["bank"]["money"][0])
vectors = {word: word_sense_vectors(elmo.model, word) for word in WORD_SENSES}
bank_layers, _ = vectors["bank"]
print("layer 0: 'bank' has one vector in all 20 sentences:", bool((bank_layers[0] == bank_layers[0][0]).all()))
print("layer 1: 20 different vectors:", len(torch.unique(bank_layers[1], dim=0)))

# %% [markdown]
# Projected to two dimensions (PCA, separately per layer), coloured by sense:

# %%
fig, axes = plt.subplots(2, 3, figsize=(11, 6.5))
for row, (word, (layers, labels)) in zip(axes, vectors.items(), strict=True):
    names = list(WORD_SENSES[word])
    for j, (ax, h) in enumerate(zip(row, layers, strict=True)):
        centred = h - h.mean(0)
        U, S, _ = torch.linalg.svd(centred, full_matrices=False)
        # (n, 2): the first two principal components; layer 0's vectors are all equal, one point at the origin
        xy = U[:, :2] * S[:2] if S[0] > 1e-3 * h.norm(dim=-1).mean() else torch.zeros(len(h), 2)
        for label, colour in ((0, "tab:blue"), (1, "tab:orange")):
            _ = ax.scatter(*xy[labels == label].T, c=colour, label=f"{word} ({names[label]})", alpha=0.7)
        title = "layer 0 (static): one point" if j == 0 else f"layer {j} (contextual)"
        ax.set(title=f"'{word}', {title}", xticks=[], yticks=[], xlabel="principal component 1", ylabel="component 2")
    row[0].legend(loc="lower left", fontsize=8)
plt.tight_layout()
plt.show()

# %% [markdown]
# To put a number on it we use the paper's own method for word-sense disambiguation (§5.3, Table 5): represent
# each sense by the mean of its vectors and label a word by its **nearest sense centroid** (cosine), here leaving
# out the sentence being labelled. Chance is 0.5; in layer 0 every sentence gives the same vector, so the two
# centroids tie and the accuracy is exactly 0.5 (a tie counts half). `minilm.metrics.nearest_centroid_accuracy`
# computes it.


# %%
def sense_table(word_vectors_by_word):
    """word -> the nearest-centroid accuracy of each layer."""
    return {
        word: [nearest_centroid_accuracy(h, labels) for h in layers]
        for word, (layers, labels) in word_vectors_by_word.items()
    }


live_senses = sense_table(vectors)
control_senses = sense_table({word: word_sense_vectors(elmo_control, word) for word in WORD_SENSES})
print("nearest-sense-centroid accuracy   layer 0   layer 1   layer 2")
for name, table in (("trained", live_senses), ("untrained", control_senses)):
    for word, accuracies in table.items():
        print(f"  {name:9s} '{word}'{'':14s}" + "".join(f"{a:10.2f}" for a in accuracies))

# %%
assert all(accuracies[0] == 0.5 for accuracies in live_senses.values()), "a static vector cannot tell senses apart"
beats_control = {word: [live_senses[word][j] > control_senses[word][j] for j in (1, 2)] for word in WORD_SENSES}
print("trained beats the untrained control in layers 1 and 2:", beats_control)
assert all(all(wins) for wins in beats_control.values())
assert live_senses["play"][2] >= 0.9, "the top layer separates the two 'play's"

# %% [markdown]
# What this shows. Layer 0 cannot separate anything: it is one point, the static embedding. The contextual layers give
# every sentence its own vector, and the trained biLM's separate the senses better than the **untrained** control's:
# the two "play"s almost perfectly in the top layer, "bank" less well. The control's layers are not at chance either:
# a random LSTM still encodes the neighbouring words, and the senses come with different neighbours ("the play" vs
# "to play"); only the comparison with the control says what training added. "bank" is the harder word: its senses
# share their syntax ("the bank") and differ only in topic words, which a small biLM trained on novels has seen little
# of. With twenty sentences per word these are small samples (one sentence moves an accuracy by 0.05), but the
# direction is the paper's: its biLM, trained on a billion words, reaches 69.0 F1 on SemCor word-sense disambiguation
# with its second layer against 67.4 with its first (Table 5): **higher layers carry more meaning**.
#
# ## 5. The scalar mix
#
# A task does not pick one layer; it learns a mix of all of them (§3.2, eq. 1):
# $$\mathrm{ELMo}_k^{task} = \gamma^{task} \sum_{j=0}^{L} s_j^{task}\, h_{k,j}, \qquad s^{task} = \mathrm{softmax}(w).$$
# Only the $L+1$ weights $w$ and the scale $\gamma$ are learned; the biLM stays frozen. Written out, and checked
# against `minilm.nn.ScalarMix`:


# %%
def scalar_mix(layers, w, gamma):
    s = torch.softmax(w, dim=0)  # (L + 1,) non-negative, sums to 1
    return gamma * sum(s_j * h_j for s_j, h_j in zip(s, layers, strict=True))  # γ Σ_j s_j h_{k,j}


mix = mnn.ScalarMix(3)
with torch.no_grad():
    mix.weights.copy_(torch.tensor([0.5, -1.0, 2.0]))
    mix.gamma.fill_(1.5)
print("equals minilm.nn.ScalarMix:", torch.allclose(scalar_mix(bank_layers, mix.weights, mix.gamma), mix(bank_layers)))
print("parameters:", count_parameters(mix), "(3 weights and gamma)")

# %% [markdown]
# ## 6. Feature-based transfer: POS tagging, layer by layer
#
# The paper's §5.3 asks *what* each layer knows by training a linear classifier on one layer's frozen vectors. For
# part-of-speech tagging (Table 6, Penn Treebank) the **first** biLM layer beats the second: 97.3 vs 96.8 accuracy;
# for word senses (Table 5) it is the other way round. Lower layers: syntax; higher layers: meaning.
#
# Our miniature: UD English-EWT's universal POS tags (17 of them), the course's train split (1,854 sentences,
# 23k words) and EWT test (25k words). The course ELMo reads each sentence (its words joined by spaces, as BPE
# tokens), a word's vector in each layer is its first token's, the three layers are frozen features, standardised
# per dimension, and a linear tagger is trained on each layer alone and on a ScalarMix of all three
# (`minilm.analysis.probe_layers`: Adam, five epochs over the training words) — for the trained biLM and for the
# untrained control.

# %%
pos_examples = {split: load_task("ud_pos", split) for split in ("train", "test")}
pos_tags = {split: torch.tensor([UPOS_TAGS.index(t) for e in ex for t in e.tags]) for split, ex in pos_examples.items()}
majority_tag = collections.Counter(t for e in pos_examples["test"] for t in e.tags).most_common(1)[0]
majority_acc = majority_tag[1] / len(pos_tags["test"])
print(f"{len(pos_tags['train']):,} training and {len(pos_tags['test']):,} test words")
print(f"majority tag {majority_tag[0]!r}: accuracy {majority_acc:.3f}")


def pos_probes(biLM):
    """Accuracy on EWT test of a linear tagger on each frozen layer and on their ScalarMix (and the mix's weights)."""
    train_layers, test_layers = (
        word_layer_vectors(reading_tokens(biLM), elmo.tokenizer, [e.tokens for e in pos_examples[split]])
        for split in ("train", "test")
    )
    train_layers, test_layers = standardize(train_layers, test_layers)  # mean 0, std 1 per dimension (training's)
    return probe_layers(train_layers, pos_tags["train"], test_layers, pos_tags["test"], n_classes=len(UPOS_TAGS))


live_table, control_table = pos_probes(elmo.model), pos_probes(elmo_control)
live_pos = {name: row["accuracy"] for name, row in live_table.items()}  # "layer 0", "layer 1", "layer 2", "ScalarMix"
control_pos = {name: row["accuracy"] for name, row in control_table.items()}
live_weights = live_table["ScalarMix"]["weights"]

# %%
# NBVAL_IGNORE_OUTPUT
print(f"{'POS accuracy':12s} {'trained':>8s} {'untrained':>10s}")
for name, accuracy in live_pos.items():
    print(f"{name:12s} {accuracy:8.3f} {control_pos[name]:10.3f}")
print("ScalarMix weights s_j (trained):", [round(s, 2) for s in live_weights])

# %%
contextual = ("layer 1", "layer 2", "ScalarMix")
print(
    "trained beats the untrained control by more than 0.05 (contextual layers and mix):",
    all(live_pos[name] > control_pos[name] + 0.05 for name in contextual),
)
print("every trained layer is far above the majority tag:", min(live_pos.values()) > majority_acc + 0.3)
print(
    "the trained mix is as good as its best layer:",
    live_pos["ScalarMix"] > max(live_pos[f"layer {j}"] for j in range(3)) - 0.01,
)
assert all(live_pos[name] > control_pos[name] + 0.05 for name in contextual)
assert min(live_pos.values()) > majority_acc + 0.3
assert live_pos["ScalarMix"] > max(live_pos[f"layer {j}"] for j in range(3)) - 0.01, "the mix is as good as any layer"

# %% [markdown]
# The mix's weights are what a task learns. Move them yourself: one slider per layer weight $w_j$ (softmax-normalised
# into $s_j$, by `minilm.nn.ScalarMix`'s own forward pass) and one for $\gamma$, beside the tagging accuracy of each
# single layer and of the learned mix (`minilm.widgets.scalar_mix_explorer`). The figure below it shows the learned
# weights, for a reader without a kernel.

# %%
# NBVAL_IGNORE_OUTPUT
accuracies = [live_pos[f"layer {j}"] for j in range(3)]
scalar_mix_explorer(torch.tensor(live_weights).log(), accuracies=accuracies, mix_accuracy=live_pos["ScalarMix"])

# %%
fig, axes = plt.subplots(1, 2, figsize=(9, 3.2))
_ = plot_scalar_mix(axes, torch.tensor(live_weights).log(), accuracies=accuracies, mix_accuracy=live_pos["ScalarMix"])
plt.show()

# %% [markdown]
# ### The recorded, longer run
#
# `experiments/ch01_elmo_layers.py` runs the same model and probes with 10x the training (2,000 steps, about twelve
# minutes of CPU; half an hour on a busy 2-core machine), three probe seeds, and the untrained biLM as a control.
# Its recorded results:

# %%
recorded = recorded_results("ch01_elmo_layers")
print(recorded.describe())
results = recorded.results
print(f"{results['steps']} steps; held-out perplexity {results['valid_perplexity']:.1f}\n")
rows = list(results["trained"]["pos"])
print(f"{'POS accuracy (EWT test)':26s}" + "".join(f"{r:>11s}" for r in rows))
for name in ("untrained", "trained"):
    print(f"{name + ' biLM':26s}" + "".join(f"{results[name]['pos'][r]['accuracy']:11.3f}" for r in rows))
print(f"\n{'sense accuracy':26s}" + "".join(f"{f'layer {j}':>11s}" for j in range(3)))
for name in ("untrained", "trained"):
    for word, layers in results[name]["senses"].items():
        print(f"{name + ' biLM, ' + word:26s}" + "".join(f"{s['nn_accuracy']:11.2f}" for s in layers))

# %%
fig, axes = plt.subplots(1, 2, figsize=(11, 3.2))
for ax, name in zip(axes, ("untrained", "trained"), strict=True):
    accuracies = [results[name]["pos"][r]["accuracy"] for r in rows]
    _ = ax.bar(rows, accuracies, color=["tab:gray", "tab:blue", "tab:blue", "tab:green"])
    ax.set(title=f"POS tagging from a frozen {name} biLM", ylabel="EWT test accuracy", ylim=(0, 1))
plt.tight_layout()
plt.show()

# %% [markdown]
# **Reading the tables honestly.** The course ELMo (BPE tokens, 1,000 steps) and the recorded run (section 3's
# word-level biLM, 2,000 steps) agree: trained, every contextual layer tags better than the same layer of the untrained
# control, and the learned ScalarMix is the best tagger: the paper's Table 2 found a learned mix of all layers better
# than the top layer alone on its tasks (its Table 6 compares single layers only). Layer 0 is the exception in the
# course ELMo's table: a random character CNN already keeps much of a word's spelling, which is what a tagger of unseen
# words needs, and training spent its filters on what the language model needs instead. But the miniature does
# **not** reproduce the paper's ordering for
# syntax: here the *top* layer tags best. The paper's biLM read a billion words (ours: a few million) on top of a
# 2048-filter character CNN; its top layer has specialised in what the LM needs beyond syntax, while ours is still
# the most-trained summary of the context (it also receives layer 1 through the residual connection). And a linear
# probe on 23k words is a weak tagger: the paper's taggers reach 0.97. What the miniature shows reliably: a static
# vector is one point per word, contextual layers separate uses and tag better once trained, and a learned mix is
# at least as good as the best single layer — which is why ELMo mixes rather than picks.

# %% [markdown]
# ## 7. Using ELMo in a task model
#
# Peters et al. (§3.3) add ELMo to an existing supervised model without changing it. The task model's lowest layer
# already maps each token $k$ to a context-independent vector $\mathbf{x}_k$ (a GloVe vector, a character CNN). ELMo
# is frozen; the task learns only its mix, $\mathrm{ELMo}_k^{task} = \gamma^{task} \sum_j s_j^{task}
# \mathbf{h}_{k,j}^{LM}$ (Eq. 1), and the mixed vector joins the model in one or two places:
#
# - at the input, $[\mathbf{x}_k; \mathrm{ELMo}_k^{task}]$ replaces $\mathbf{x}_k$ before the task's own biLSTM;
# - at the output, $[\mathbf{h}_k; \mathrm{ELMo}_k^{task}]$ replaces the task biLSTM's state $\mathbf{h}_k$ (with
#   its own weights $s'$, $\gamma'$), which helped SNLI and SQuAD, whose models put attention after the biLSTM.
#
# Table 3 of the paper compares the places: input only 85.1 / 88.9 / 84.7 (SQuAD F1, SNLI accuracy, SRL F1),
# input and output 85.6 / 89.5 / 84.3, output only 84.8 / 88.7 / 80.9. Two regularisers matter: dropout on the ELMo
# vectors, and in some tasks a penalty $\lambda\|\mathbf{w}\|_2^2$ on the mix's weights before the softmax, which
# pulls the $s_j$ towards an average of all layers. Table 2 measures the choice of layers: the top layer alone gives
# 84.7 / 89.1 / 84.1 against a baseline without ELMo of 80.8 / 88.1 / 81.6; all layers with $\lambda = 1$ (nearly
# an equal average) 85.0 / 89.3 / 84.6; all layers with a small $\lambda = 0.001$ (weights free to differ) 85.2 /
# 89.5 / 84.8. Learning which layers to use beats taking the top one.
#
# **Sample efficiency** (§5.4, Figure 1). Without ELMo, the SRL model reached its best development F1 after 486
# epochs; with ELMo it passed that score after 10. With 1% of the training data, the ELMo model matched the
# baseline trained on 10%. Pretrained representations matter most where labelled data is scarce.
#
# **ELMo against GPT and BERT.** ELMo's pretraining is cheap to use: the biLM is frozen, computed once per sentence,
# and any architecture can read its vectors. But its two directions are trained separately and only joined at the
# top (a shallow concatenation), the task still needs its own deep model on top, and LSTMs run token by token.
# GPT (Chapter 2) and BERT (Chapter 3) fine-tune the whole pretrained Transformer with a thin head, so the
# pretrained layers themselves adapt to the task, and BERT conditions every layer on both directions at once.
#
# ## Summary
# - Static embeddings give a word one vector; ELMo's are functions of the sentence, read from a pretrained biLM.
# - The biLM is two language models, forward and backward, sharing the character CNN and the softmax; each
#   direction predicts a token it has not seen (the shift), and the loss is the sum of both directions' NLL.
# - Layer 0 (characters) is static: one point per word. Trained (the course ELMo), the LSTM layers separate the
#   senses of "play" (the top layer best) and, less well, of "bank", better than the untrained control, which shows
#   how much is context alone.
# - A task uses the frozen layers through $\gamma \sum_j s_j h_{k,j}$; on UD-EWT POS tagging the mix beats every
#   single layer. The paper's "lower layer = syntax" finding needs a far bigger biLM than minutes of CPU can train.
# - In a task model, ELMo joins the input ($[\mathbf{x}_k; \mathrm{ELMo}_k]$) and sometimes the output of the task's
#   own biLSTM, with dropout and a small $\lambda\|\mathbf{w}\|^2$; it pays most where labels are few.
#
# ## Exercises
# 1. Add a third sense group of your own ("bark", "light", "fair") with ten sentences per sense. Which layer
#    separates it best, in the trained and in the untrained biLM?
# 2. Replace the nearest-centroid accuracy by a within- vs between-sense cosine similarity. Why do raw cosines of
#    LSTM states sit close to 1, and what does centring the vectors first change?
# 3. Train the live biLM for 600 steps instead of 200 and probe it (`word_layer_vectors` reads its words' characters
#    directly). How far is it from the course ELMo? Run `python experiments/ch01_elmo_layers.py` for the longer
#    picture.
# 4. Probe with `mnn.ScalarMix(3, layer_norm=True)` on the un-standardised features. Which layer gets the largest
#    weight $s_j$, and does the answer change with training?
# 5. The forward LM alone is a GPT-style language model. Compare the held-out perplexity of each direction
#    (`bilm_loss(...).forward` and `.backward`): is reading English backwards harder?
#
# **Lab 1** (`labs/lab01_bilm.ipynb`): write the biLM loss, the padding-aware reversal of the backward LM, and the
# scalar mix yourself; they are graded against `minilm`.
