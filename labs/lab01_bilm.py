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
# # Lab 1 — The biLM objective and the scalar mix
#
# In Chapter 1 you trained ELMo's bidirectional language model with `minilm.objectives.bilm.bilm_loss` and mixed its
# layers with `minilm.nn.ScalarMix`. Now you write both, and the piece of the model that makes the backward language
# model honest: reading a padded batch from right to left. Fill in every `raise NotImplementedError()`; run the test
# cell after each part. Your code is graded against `minilm`, with the visible tests below and a few hidden ones of
# the same kind (10 points in all).
#
# Conventions (the same as `minilm`): tensors are batch first, (B, T, ...); batches are **right-padded** (real
# tokens first); a target equal to `ignore_index` (−100) is not scored. Use plain torch operations.

# %%
import torch
import torch.nn.functional as F
from torch import nn

import minilm.nn as reference
from minilm.objectives.bilm import bilm_loss as reference_bilm_loss
from minilm.utils import reproducible

reproducible(seed=0)

# %% [markdown]
# ## Part 1 — The biLM loss (4 points)
#
# ELMo trains two language models on the same tokens $t_1, \dots, t_N$ (Peters et al. 2018, §3.1): a forward LM
# that predicts each token from the ones before it and a backward LM that predicts it from the ones after it. It
# maximises
#
# $$\sum_{k=1}^{N} \Big( \log p(t_k \mid t_1, \dots, t_{k-1}) + \log p(t_k \mid t_{k+1}, \dots, t_N) \Big).$$
#
# The model reads all of `ids` (B, T) and returns two sets of logits (B, T, V). Position $k$'s **forward** logits
# have read $t_1..t_k$ and predict `ids[k + 1]`; its **backward** logits have read $t_k..t_N$ and predict
# `ids[k − 1]`. So the forward LM makes predictions at positions $0..T-2$, the backward LM at $1..T-1$.
#
# Return three scalars: `forward`, the mean negative log-likelihood of the forward predictions; `backward`, the same
# for the backward ones; and `loss = forward + backward`. Padding (`ids` equal to `ignore_index`) must not count,
# neither in the sum nor in the number of predictions the mean divides by: a prediction counts when its target
# **and the position making it** are real tokens. Mind the backward LM at the first padding position: its target
# is the row's last real token, but it has read no token of the row, so it is not scored. A row of $n$ real tokens
# then gives $n - 1$ predictions in each direction, exactly as the same row without its padding.


# %% nbgrader={"grade": false, "grade_id": "answer_bilm_loss", "locked": false, "schema_version": 3, "solution": true}
def bilm_loss(forward_logits, backward_logits, ids, ignore_index=-100):
    """forward_logits, backward_logits (B, T, V), ids (B, T) -> (loss, forward, backward), three scalars."""
    ### BEGIN SOLUTION
    V = forward_logits.size(-1)
    padding = ids == ignore_index  # (B, T)
    forward_targets = ids[:, 1:].masked_fill(padding[:, :-1], ignore_index)  # k predicts ids[k + 1] if k is real
    backward_targets = ids[:, :-1].masked_fill(padding[:, 1:], ignore_index)  # k predicts ids[k - 1] if k is real
    forward = F.cross_entropy(
        forward_logits[:, :-1].reshape(-1, V), forward_targets.reshape(-1), ignore_index=ignore_index
    )
    backward = F.cross_entropy(
        backward_logits[:, 1:].reshape(-1, V), backward_targets.reshape(-1), ignore_index=ignore_index
    )
    return forward + backward, forward, backward
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "q1_bilm_loss", "locked": true, "points": 4, "schema_version": 3, "solution": false}
forward_logits, backward_logits = torch.randn(2, 3, 7, 11).unbind(0)  # (B=3, T=7, V=11)
ids = torch.randint(11, (3, 7))
loss, forward, backward = bilm_loss(forward_logits, backward_logits, ids)
expected = reference_bilm_loss(forward_logits, backward_logits, ids)
assert loss.dim() == 0, "the loss is a scalar"
assert torch.allclose(forward, expected.forward, atol=1e-5), "forward: position k predicts ids[k + 1]"
assert torch.allclose(backward, expected.backward, atol=1e-5), "backward: position k predicts ids[k - 1]"
assert torch.allclose(loss, expected.loss, atol=1e-5)
padded = ids.clone()
padded[1, 4:] = -100  # the second sequence has 4 real tokens
loss, forward, backward = bilm_loss(forward_logits, backward_logits, padded)
expected = reference_bilm_loss(forward_logits, backward_logits, padded)
assert torch.allclose(forward, expected.forward, atol=1e-5), "padded targets must not be scored"
assert torch.allclose(backward, expected.backward, atol=1e-5), "nor the backward prediction at the first padding"
alone = reference_bilm_loss(forward_logits[1:2, :4], backward_logits[1:2, :4], ids[1:2, :4])  # the row unpadded
_, forward, backward = bilm_loss(forward_logits[1:2], backward_logits[1:2], padded[1:2])
assert torch.allclose(forward, alone.forward, atol=1e-5), "a padded row scores as the same row without padding"
assert torch.allclose(backward, alone.backward, atol=1e-5), "a padded row scores as the same row without padding"
### BEGIN HIDDEN TESTS
# ignore_index is an argument: padding marked 0 (and every other id real)
ids = torch.randint(1, 11, (3, 7))
ids[0, 5:], ids[2, 2:] = 0, 0
_, forward, backward = bilm_loss(forward_logits, backward_logits, ids, ignore_index=0)
expected = reference_bilm_loss(forward_logits, backward_logits, ids, ignore_index=0)
assert torch.allclose(forward, expected.forward, atol=1e-5) and torch.allclose(backward, expected.backward, atol=1e-5)
# the directions must not be swapped or shifted the same way: a model that copies its own position's token
ids = torch.randint(5, (2, 9))
copy_logits = F.one_hot(ids, 5).float() * 20  # position k is sure of ids[k]
_, forward, backward = bilm_loss(copy_logits, copy_logits, ids)
expected = reference_bilm_loss(copy_logits, copy_logits, ids)
assert torch.allclose(forward, expected.forward, atol=1e-4) and torch.allclose(backward, expected.backward, atol=1e-4)
fl, bl = torch.randn(2, 4, 6, 50, requires_grad=True).unbind(0)
ids = torch.randint(50, (4, 6))
ids[0, 3:], ids[2, 5:] = -100, -100
ours = bilm_loss(fl, bl, ids)[0]
theirs = reference_bilm_loss(fl, bl, ids).loss
assert torch.allclose(ours, theirs, atol=1e-5)
g_ours = torch.autograd.grad(ours, (fl, bl))
g_theirs = torch.autograd.grad(theirs, (fl, bl))
assert all(torch.allclose(a, b, atol=1e-6) for a, b in zip(g_ours, g_theirs, strict=True))
### END HIDDEN TESTS

# %% [markdown]
# ## Part 2 — Reading a padded batch backwards (3 points)
#
# The backward LM is an ordinary left-to-right LSTM run on the reversed sequence. With padding, "reversed" must
# mean *each sequence's real tokens* reversed, the padding left where it is: `[a b c PAD PAD] -> [c b a PAD PAD]`
# (`x.flip(1)` would give `[PAD PAD c b a]`, and the LSTM would read padding first).
#
# 1. `reverse_padded(x, lengths)`: x (B, T, C), lengths (B,) real tokens per row → x with each row's first
#    `lengths[b]` positions reversed. (Hint: build, for every (b, t), the position to read from, then `gather`.)
# 2. `backward_states(lstm, x, lengths)`: the backward LM's states **in reading order**: reverse, run
#    `lstm(reversed_x, lengths)` (a `minilm.nn.LSTMLayer`; it returns `(outputs, (h_n, c_n))`), reverse the outputs
#    back. Position $k$'s state must then depend on $x_k, \dots, x_N$ only.


# %% nbgrader={"grade": false, "grade_id": "answer_reverse_padded", "locked": false, "schema_version": 3, "solution": true}
def reverse_padded(x, lengths):
    ### BEGIN SOLUTION
    t = torch.arange(x.size(1))[None, :]  # (1, T)
    source = torch.where(t < lengths[:, None], lengths[:, None] - 1 - t, t)  # (B, T): where position t reads from
    return x.gather(1, source[..., None].expand_as(x))
    ### END SOLUTION


def backward_states(lstm, x, lengths):
    """x (B, T, C), lengths (B,) -> (B, T, H): position k has read x_N .. x_k."""
    ### BEGIN SOLUTION
    states, _ = lstm(reverse_padded(x, lengths), lengths)
    return reverse_padded(states, lengths)
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "q2_reverse", "locked": true, "points": 1, "schema_version": 3, "solution": false}
x = torch.arange(10.0).view(2, 5, 1)
lengths = torch.tensor([5, 3])
assert reverse_padded(x, lengths)[:, :, 0].tolist() == [[4, 3, 2, 1, 0], [7, 6, 5, 8, 9]]
### BEGIN HIDDEN TESTS
x = torch.randn(4, 6, 3)
lengths = torch.tensor([6, 1, 4, 2])
assert torch.equal(reverse_padded(x, lengths), reference.reverse_padded(x, lengths))
assert torch.equal(reverse_padded(reverse_padded(x, lengths), lengths), x), "reversing twice gives x back"
### END HIDDEN TESTS

# %% nbgrader={"grade": true, "grade_id": "q2_causality", "locked": true, "points": 2, "schema_version": 3, "solution": false}
lstm = reference.LSTMLayer(4, 8)
x = torch.randn(3, 6, 4, requires_grad=True)
lengths = torch.tensor([6, 4, 2])
states = backward_states(lstm, x, lengths)
assert states.shape == (3, 6, 8)
k = 2
states[0, k].sum().backward()  # sequence 0, position 2
assert (x.grad[0, :k] == 0).all(), "the backward state at k must not see the tokens before k"
assert (x.grad[0, k:].abs().sum(-1) > 0).all(), "...but must see x_k and every token after it"
### BEGIN HIDDEN TESTS
x.grad = None
states = backward_states(lstm, x, lengths)
states[1, 3].sum().backward()  # the last real token of sequence 1: it has read only itself
assert (x.grad[1, :3] == 0).all() and (x.grad[1, 4:] == 0).all(), "padding must not leak into real positions"
assert (x.grad[1, 3] != 0).any()
with torch.no_grad():
    fresh = torch.randn(3, 6, 4)
    expected = reference.reverse_padded(lstm(reference.reverse_padded(fresh, lengths), lengths)[0], lengths)
    assert torch.allclose(backward_states(lstm, fresh, lengths), expected, atol=1e-6)
### END HIDDEN TESTS

# %% [markdown]
# ## Part 3 — The scalar mix (3 points)
#
# A downstream task uses all of the biLM's layers $h_{k,0}, \dots, h_{k,L}$ through a learned weighted sum
# (Peters et al. 2018, §3.2):
#
# $$\mathrm{ELMo}_k = \gamma \sum_{j=0}^{L} s_j\, h_{k,j}, \qquad s = \mathrm{softmax}(w).$$
#
# Write it as an `nn.Module` with the same interface as `minilm.nn.ScalarMix`: parameters named `weights` (w, zeros
# at the start: an equal mix) and `gamma` (γ, a scalar tensor, `initial_gamma`), and an option `layer_norm`: when
# True, each layer is first normalised over its last dimension (mean 0, variance 1; no learned gain or bias — use
# `F.layer_norm` with its default eps). `forward(layers)` takes a list of tensors of one shape.


# %% nbgrader={"grade": false, "grade_id": "answer_ScalarMix", "locked": false, "schema_version": 3, "solution": true}
class ScalarMix(nn.Module):
    def __init__(self, n_layers, layer_norm=False, initial_gamma=1.0):
        super().__init__()
        ### BEGIN SOLUTION
        self.weights = nn.Parameter(torch.zeros(n_layers))
        self.gamma = nn.Parameter(torch.tensor(float(initial_gamma)))
        self.layer_norm = layer_norm
        ### END SOLUTION

    def forward(self, layers):
        ### BEGIN SOLUTION
        s = torch.softmax(self.weights, dim=0)  # (L + 1,)
        if self.layer_norm:
            layers = [F.layer_norm(h, h.shape[-1:]) for h in layers]
        return self.gamma * sum(s_j * h_j for s_j, h_j in zip(s, layers, strict=True))
        ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "q3_scalar_mix", "locked": true, "points": 2, "schema_version": 3, "solution": false}
layers = [torch.randn(2, 5, 6) for _ in range(3)]
ours, theirs = ScalarMix(3), reference.ScalarMix(3)
assert torch.allclose(ours(layers), sum(layers) / 3, atol=1e-6), "at the start the mix is the plain average"
with torch.no_grad():
    theirs.weights.copy_(torch.tensor([1.0, -2.0, 0.5]))
    theirs.gamma.fill_(0.7)
ours.load_state_dict(theirs.state_dict())  # the parameter names must match
assert torch.allclose(ours(layers), theirs(layers), atol=1e-6)
ours(layers).pow(2).sum().backward()
theirs(layers).pow(2).sum().backward()
assert torch.allclose(ours.weights.grad, theirs.weights.grad, atol=1e-5), "gradient of w"
assert torch.allclose(ours.gamma.grad, theirs.gamma.grad, atol=1e-5), "gradient of gamma"
### BEGIN HIDDEN TESTS
mix, ref = ScalarMix(4, initial_gamma=2.0), reference.ScalarMix(4, initial_gamma=2.0)
assert torch.allclose(mix.gamma, ref.gamma)
four = [torch.randn(3, 8) for _ in range(4)]
assert torch.allclose(mix(four), ref(four), atol=1e-6)
### END HIDDEN TESTS

# %% nbgrader={"grade": true, "grade_id": "q3_layer_norm", "locked": true, "points": 1, "schema_version": 3, "solution": false}
ours, theirs = ScalarMix(3, layer_norm=True), reference.ScalarMix(3, layer_norm=True)
with torch.no_grad():
    theirs.weights.copy_(torch.tensor([0.3, 0.1, -0.4]))
ours.load_state_dict(theirs.state_dict())
scaled = [h * 10 + 3 for h in layers]  # layers of very different scales: the norm evens them out
assert torch.allclose(ours(scaled), theirs(scaled), atol=1e-5)
### BEGIN HIDDEN TESTS
inputs = [torch.randn(2, 4, 6, requires_grad=True) for _ in range(3)]
ours(inputs).sum().backward()
grads_ours = [h.grad.clone() for h in inputs]
for h in inputs:
    h.grad = None
theirs(inputs).sum().backward()
assert all(torch.allclose(a, h.grad, atol=1e-5) for a, h in zip(grads_ours, inputs, strict=True))
### END HIDDEN TESTS

# %% [markdown]
# ## Going further (not graded)
# - Put your three pieces together: build `minilm.models.ELMo` from `ELMoConfig(vocab_size=50, ...)`, compute its
#   two logits on random ids, and check that your loss equals `bilm_loss` on them. Then break the shift on purpose
#   (let the forward logits at $k$ predict `ids[k]`) and train for 100 steps: how low does the loss go, and why is
#   that low loss worthless?
# - Train a ScalarMix on the frozen features of Chapter 1's biLM for POS tagging with and without `layer_norm`.
#   Which layer gets the largest weight?
