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
# # Lab 0 — Masked multi-head attention
#
# In Chapter 0 you used `minilm.nn.MultiHeadAttention`. Now you write it. Fill in every
# `raise NotImplementedError()`; run the test cell after each part. Your code is graded against `minilm.nn`, with
# the visible tests below and a few hidden ones of the same kind (10 points in all).
#
# Conventions (the same as `minilm.nn`): tensors are (B, nh, T, hs) inside attention and (B, T, C) outside it;
# masks are **bool, True = may attend**, broadcastable to (B, nh, Tq, Tk). Use only plain torch operations —
# no `torch.nn.functional.scaled_dot_product_attention`, no `torch.nn.MultiheadAttention`.

# %%
import math

import torch
from torch import nn

import minilm.nn as reference
from minilm.utils import reproducible

reproducible(seed=0)

# %% [markdown]
# ## Part 1 — Scaled dot-product attention (3 points)
#
# $$\mathrm{Attention}(Q,K,V) = \mathrm{softmax}\!\left(\frac{QK^\top}{\sqrt{d_k}}\right)V$$
#
# Return both the output (B, nh, Tq, hs) and the weights (B, nh, Tq, Tk). Where `mask` is False the weight must be
# exactly 0. You may assume every query can attend to at least one key.


# %% nbgrader={"grade": false, "grade_id": "answer_scaled_dot_product_attention", "locked": false, "schema_version": 3, "solution": true}
def scaled_dot_product_attention(q, k, v, mask=None):
    """q (B, nh, Tq, hs), k and v (B, nh, Tk, hs), mask bool or None -> (out, weights)."""
    ### BEGIN SOLUTION
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))  # (B, nh, Tq, Tk)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = scores.softmax(dim=-1)
    return weights @ v, weights
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "q1_attention", "locked": true, "points": 3, "schema_version": 3, "solution": false}
q, k, v = torch.randn(3, 2, 4, 6, 8).unbind(0)
mask = torch.rand(2, 1, 6, 6) > 0.3
mask[..., 0] = True  # every query may attend to key 0
out, weights = scaled_dot_product_attention(q, k, v, mask)
expected, expected_weights = reference.scaled_dot_product_attention_reference(q, k, v, mask=mask)
assert out.shape == (2, 4, 6, 8) and weights.shape == (2, 4, 6, 6)
assert torch.allclose(weights.sum(-1), torch.ones(2, 4, 6), atol=1e-6), "each row of weights must sum to 1"
assert (weights[~mask.expand_as(weights)] == 0).all(), "masked keys must get weight exactly 0"
assert torch.allclose(out, expected, atol=1e-5)
### BEGIN HIDDEN TESTS
q2, k2, v2 = torch.randn(1, 2, 3, 16), torch.randn(1, 2, 7, 16), torch.randn(1, 2, 7, 16)  # cross: Tq != Tk
out2, _ = scaled_dot_product_attention(q2, k2, v2)
assert torch.allclose(out2, reference.scaled_dot_product_attention(q2, k2, v2), atol=1e-5)
big = torch.randn(1, 1, 4, 64) * 10  # large scores: the scaling by 1/sqrt(d_k) must be there
assert torch.allclose(
    scaled_dot_product_attention(big, big, big)[0], reference.scaled_dot_product_attention(big, big, big), atol=1e-4
)
### END HIDDEN TESTS

# %% [markdown]
# ## Part 2 — Masks (2 points)
#
# `causal_mask(T)` is a (T, T) bool tensor where query *i* may attend to key *j* only when *j ≤ i*.
# `padding_mask(attention_mask)` turns a (B, T) tensor of 1 (real token) and 0 (padding) into a (B, 1, 1, T) bool
# mask that hides the padding from every query.


# %% nbgrader={"grade": false, "grade_id": "answer_causal_mask", "locked": false, "schema_version": 3, "solution": true}
def causal_mask(T):
    ### BEGIN SOLUTION
    return torch.ones(T, T, dtype=torch.bool).tril()
    ### END SOLUTION


def padding_mask(attention_mask):
    ### BEGIN SOLUTION
    return attention_mask.bool()[:, None, None, :]
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "q2_masks", "locked": true, "points": 2, "schema_version": 3, "solution": false}
assert causal_mask(4).dtype == torch.bool
assert torch.equal(causal_mask(4), reference.causal_mask(4, 4))
am = torch.tensor([[1, 1, 1, 0], [1, 1, 0, 0]])
assert padding_mask(am).shape == (2, 1, 1, 4) and padding_mask(am).dtype == torch.bool
assert torch.equal(padding_mask(am), reference.padding_mask(am))
### BEGIN HIDDEN TESTS
assert torch.equal(causal_mask(1), torch.ones(1, 1, dtype=torch.bool))
assert torch.equal(causal_mask(9), reference.causal_mask(9, 9))
### END HIDDEN TESTS

# %% [markdown]
# ## Part 3 — Multi-head attention (5 points)
#
# $$\mathrm{MultiHead}(X) = \mathrm{Concat}(\mathrm{head}_1,\dots,\mathrm{head}_h)W^O,\quad
#   \mathrm{head}_i = \mathrm{Attention}(XW_i^Q, XW_i^K, XW_i^V)$$
#
# Use four `nn.Linear(d_model, d_model)` layers named `q_proj`, `k_proj`, `v_proj`, `out_proj` (the names let the
# grader load `minilm`'s weights into your module). Split the projections into heads — (B, T, C) → (B, nh, T, hs) —
# apply your attention with the mask, merge the heads back and project. With `is_causal=True`, also apply the causal
# mask (combined with `mask` by `&`).


# %% nbgrader={"grade": false, "grade_id": "answer_MultiHeadAttention", "locked": false, "schema_version": 3, "solution": true}
class MultiHeadAttention(nn.Module):
    def __init__(self, d_model, n_heads):
        super().__init__()
        assert d_model % n_heads == 0
        self.n_heads, self.head_size = n_heads, d_model // n_heads
        ### BEGIN SOLUTION
        self.q_proj = nn.Linear(d_model, d_model)
        self.k_proj = nn.Linear(d_model, d_model)
        self.v_proj = nn.Linear(d_model, d_model)
        self.out_proj = nn.Linear(d_model, d_model)
        ### END SOLUTION

    def forward(self, x, mask=None, is_causal=False):
        """x (B, T, C) -> (B, T, C)."""
        ### BEGIN SOLUTION
        B, T, C = x.shape

        def split(t):
            return t.view(B, T, self.n_heads, self.head_size).transpose(1, 2)  # (B, nh, T, hs)

        q, k, v = split(self.q_proj(x)), split(self.k_proj(x)), split(self.v_proj(x))
        if is_causal:
            mask = causal_mask(T) if mask is None else mask & causal_mask(T)
        y, _ = scaled_dot_product_attention(q, k, v, mask)
        return self.out_proj(y.transpose(1, 2).reshape(B, T, C))
        ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "q3_multihead", "locked": true, "points": 3, "schema_version": 3, "solution": false}
ours, theirs = MultiHeadAttention(32, 4), reference.MultiHeadAttention(32, 4)
ours.load_state_dict(theirs.state_dict())
x = torch.randn(2, 5, 32)
am = torch.tensor([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0]])
assert ours(x).shape == (2, 5, 32)
assert torch.allclose(ours(x), theirs(x), atol=1e-5), "unmasked multi-head attention differs from minilm.nn"
assert torch.allclose(ours(x, mask=padding_mask(am)), theirs(x, mask=reference.padding_mask(am)), atol=1e-5)
### BEGIN HIDDEN TESTS
one, one_ref = MultiHeadAttention(24, 1), reference.MultiHeadAttention(24, 1)
one.load_state_dict(one_ref.state_dict())
x1 = torch.randn(3, 4, 24)
assert torch.allclose(one(x1), one_ref(x1), atol=1e-5)
### END HIDDEN TESTS

# %% nbgrader={"grade": true, "grade_id": "q3_causal", "locked": true, "points": 2, "schema_version": 3, "solution": false}
y = ours(x, mask=padding_mask(am), is_causal=True)
assert torch.allclose(y, theirs(x, mask=reference.padding_mask(am), is_causal=True), atol=1e-5)
x_changed = x.clone()
x_changed[:, 3:] = torch.randn(2, 2, 32)  # change the future...
assert torch.allclose(ours(x_changed, is_causal=True)[:, :3], ours(x, is_causal=True)[:, :3], atol=1e-6), (
    "...and the past must not notice"
)
### BEGIN HIDDEN TESTS
x.requires_grad_(True)
ours(x, is_causal=True)[:, 1].sum().backward()
assert (x.grad[:, 2:] == 0).all() and (x.grad[:, :2] != 0).any(), "gradients must not flow from the future"
### END HIDDEN TESTS

# %% [markdown]
# ## Going further (not graded)
# - Time your module against `reference.MultiHeadAttention` (fused kernel) for T = 512. Where does the time go?
# - Add a KV cache: keep the keys and values of earlier positions and compute only the newest query. Check that
#   decoding token by token gives the same outputs as one causal pass.
