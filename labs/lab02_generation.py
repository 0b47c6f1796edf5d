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
# # Lab 2 — Causal masking, top-k/top-p sampling and the KV cache
#
# In Chapter 2 you pretrained a GPT and decoded from it with `GPT.generate`. Now you write the three pieces that make
# a decoder-only language model generate text: the **causal mask** that keeps each position from seeing the future,
# the **top-k and top-p filters** that decide which tokens may be sampled, and a **decoding loop with a KV cache**
# that reuses the keys and values of earlier positions instead of recomputing them.
#
# Fill in every `raise NotImplementedError()`; run the test cell after each part. Your code is graded against
# `minilm` (`minilm.nn` and `minilm.generation`), with the visible tests below and hidden ones of the same kind
# (10 points in all). Use plain torch operations: no `torch.nn.functional.scaled_dot_product_attention`, no calls to
# the `minilm` functions you are re-implementing.
#
# Conventions (the same as `minilm.nn`): tensors are (B, nh, T, hs) inside attention and (B, T, C) outside it;
# masks are **bool, True = may attend**.

# %%
import math
import time

import torch
import torch.nn.functional as F

import minilm.generation as reference
import minilm.nn as mnn
from minilm.models import GPT, GPTConfig
from minilm.utils import reproducible

reproducible(seed=0, threads=1)

# %% [markdown]
# ## Part 1 — The causal mask and causal self-attention (3 points)
#
# A language model predicts token $t+1$ from tokens $\le t$, so query $i$ may attend to key $j$ only when $j \le i$.
# With a KV cache the queries are only the **new** positions while the keys are all positions so far: $T_q$
# queries, $T_k = T_{past} + T_q$ keys, and query $i$ sits at absolute position $T_{past} + i$. So the mask is the
# lower triangle **aligned to the end** of the keys:
#
# $$\mathrm{mask}_{ij} = \big[\, j \le i + (T_k - T_q) \,\big]$$
#
# `causal_mask(q_len, k_len)` returns this (q_len, k_len) bool tensor (with q_len = k_len, the usual triangle).


# %% nbgrader={"grade": false, "grade_id": "answer_causal_mask", "locked": false, "schema_version": 3, "solution": true}
def causal_mask(q_len, k_len):
    """(q_len, k_len) bool, True where query i may attend to key j: j <= i + (k_len - q_len)."""
    ### BEGIN SOLUTION
    return torch.ones(q_len, k_len, dtype=torch.bool).tril(diagonal=k_len - q_len)
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "q1_causal_mask", "locked": true, "points": 1, "schema_version": 3, "solution": false}
assert causal_mask(4, 4).dtype == torch.bool and causal_mask(4, 4).shape == (4, 4)
assert torch.equal(causal_mask(4, 4), mnn.causal_mask(4, 4))
assert causal_mask(1, 6).all(), "one new query after 5 cached keys sees all 6"
### BEGIN HIDDEN TESTS
assert torch.equal(causal_mask(3, 7), mnn.causal_mask(3, 7))
assert torch.equal(causal_mask(1, 1), torch.ones(1, 1, dtype=torch.bool))
assert torch.equal(causal_mask(9, 9), mnn.causal_mask(9, 9))
### END HIDDEN TESTS

# %% [markdown]
# Now causal self-attention, using the projections of a `minilm.nn.MultiHeadAttention` module `attn`
# (`attn.q_proj`, `attn.k_proj`, `attn.v_proj`, `attn.out_proj`, `attn.n_heads`):
#
# 1. project x (B, T, C) to q, k, v and split the heads: (B, T, C) → (B, nh, T, hs);
# 2. if a `cache` (a `minilm.nn.KVCache`) is given, append the new k, v to it and use everything it holds:
#    `k, v = cache.append(k, v)`;
# 3. scores $QK^\top/\sqrt{hs}$ (B, nh, Tq, Tk), masked with your causal mask (a masked score becomes −∞),
#    softmax, times v;
# 4. merge the heads back to (B, Tq, C) and apply `out_proj`.
#
# Called with the whole sequence and no cache, it must equal `attn(x, is_causal=True)`. Called token by token with
# a cache, it must give the same outputs as one call on the whole sequence.


# %% nbgrader={"grade": false, "grade_id": "answer_causal_self_attention", "locked": false, "schema_version": 3, "solution": true}
def causal_self_attention(x, attn, cache=None):
    """x (B, Tq, C): the new positions -> (B, Tq, C). ``cache``: a KVCache of the earlier positions, or None."""
    ### BEGIN SOLUTION
    B, T, C = x.shape
    hs = C // attn.n_heads

    def split(t):
        return t.view(B, T, attn.n_heads, hs).transpose(1, 2)  # (B, nh, T, hs)

    q, k, v = split(attn.q_proj(x)), split(attn.k_proj(x)), split(attn.v_proj(x))
    if cache is not None:
        k, v = cache.append(k, v)  # (B, nh, T_past + T, hs)
    scores = q @ k.transpose(-2, -1) / math.sqrt(hs)  # (B, nh, Tq, Tk)
    scores = scores.masked_fill(~causal_mask(q.size(-2), k.size(-2)), float("-inf"))
    y = scores.softmax(dim=-1) @ v  # (B, nh, Tq, hs)
    return attn.out_proj(y.transpose(1, 2).reshape(B, T, C))
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "q1_causal_attention", "locked": true, "points": 2, "schema_version": 3, "solution": false}
attn = mnn.MultiHeadAttention(d_model=32, n_heads=4).eval()
x = torch.randn(2, 6, 32)
with torch.no_grad():
    full = causal_self_attention(x, attn)
    assert full.shape == (2, 6, 32)
    assert torch.allclose(full, attn(x, is_causal=True), atol=1e-5), "differs from minilm.nn's causal attention"
    x_changed = x.clone()
    x_changed[:, 4:] = torch.randn(2, 2, 32)  # change the future...
    assert torch.allclose(causal_self_attention(x_changed, attn)[:, :4], full[:, :4], atol=1e-6), (
        "...and the past must not notice"
    )
    cache = mnn.KVCache()
    steps = [causal_self_attention(x[:, t : t + 1], attn, cache) for t in range(6)]  # one token at a time
    assert len(cache) == 6, "the cache must hold the keys and values of all 6 positions"
    assert torch.allclose(torch.cat(steps, dim=1), full, atol=1e-5), "token by token with a cache != one pass"
### BEGIN HIDDEN TESTS
with torch.no_grad():
    cache = mnn.KVCache()
    first = causal_self_attention(x[:, :4], attn, cache)  # a prompt of 4, then 2 more positions at once
    rest = causal_self_attention(x[:, 4:], attn, cache)
    assert torch.allclose(torch.cat([first, rest], dim=1), full, atol=1e-5)
    one_head = mnn.MultiHeadAttention(d_model=12, n_heads=1).eval()
    x1 = torch.randn(3, 5, 12)
    assert torch.allclose(causal_self_attention(x1, one_head), one_head(x1, is_causal=True), atol=1e-5)
### END HIDDEN TESTS

# %% [markdown]
# ## Part 2 — Top-k and top-p filtering (4 points)
#
# Sampling from the full softmax lets the long tail of unlikely tokens through, one bad draw at a time. Two filters
# cut the tail by setting the logits of the dropped tokens to **−∞** (probability 0 after the softmax):
#
# - **top-k** (Fan et al. 2018): keep the k largest logits of each row. Tokens **tied** with the k-th largest are
#   kept too, and k ≥ V keeps everything.
# - **top-p**, nucleus sampling (Holtzman et al. 2020): sort the tokens by probability, most likely first, and keep
#   the smallest prefix whose probabilities add up to at least p. Equivalently, a token is dropped when the
#   probability of the tokens **before** it in that order already reaches p — so the most likely token is always
#   kept, and p = 1 keeps every token. The nucleus is small where the model is sure and large where it is not.
#
# Both take logits (..., V) — any number of leading dimensions — and return a tensor of the same shape, with the
# kept logits unchanged.


# %% nbgrader={"grade": false, "grade_id": "answer_top_k_filter", "locked": false, "schema_version": 3, "solution": true}
def top_k_filter(logits, k):
    """Keep the k largest logits of each row (..., V) (and ties with the k-th), set the others to -inf."""
    ### BEGIN SOLUTION
    if k >= logits.size(-1):
        return logits
    kth_largest = torch.topk(logits, k, dim=-1).values[..., -1:]  # (..., 1)
    return logits.masked_fill(logits < kth_largest, float("-inf"))
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "q2_top_k", "locked": true, "points": 2, "schema_version": 3, "solution": false}
logits = torch.randn(3, 50)
for k in (1, 5, 49):
    ours = top_k_filter(logits, k)
    assert ours.shape == logits.shape
    assert torch.equal(ours, reference.top_k_filter(logits, k)), f"top-k differs from minilm for k={k}"
    assert (ours > float("-inf")).sum(-1).tolist() == [k, k, k]
tied = torch.tensor([[3.0, 1.0, 2.0, 2.0, 0.0]])
assert torch.equal(top_k_filter(tied, 2), torch.tensor([[3.0, -math.inf, 2.0, 2.0, -math.inf]])), (
    "tokens tied with the k-th largest are kept"
)
### BEGIN HIDDEN TESTS
assert torch.equal(top_k_filter(logits, 50), logits) and torch.equal(top_k_filter(logits, 500), logits)
batched = torch.randn(2, 3, 20)
assert torch.equal(top_k_filter(batched, 4), reference.top_k_filter(batched, 4))
all_tied = torch.zeros(1, 6)
assert torch.equal(top_k_filter(all_tied, 2), all_tied)
### END HIDDEN TESTS


# %% nbgrader={"grade": false, "grade_id": "answer_top_p_filter", "locked": false, "schema_version": 3, "solution": true}
def top_p_filter(logits, p):
    """Nucleus filter: keep the smallest set of most likely tokens whose probabilities sum to >= p."""
    ### BEGIN SOLUTION
    if p >= 1:
        return logits
    sorted_logits, order = torch.sort(logits, dim=-1, descending=True)  # (..., V)
    probs = F.softmax(sorted_logits.float(), dim=-1)
    mass_before = probs.cumsum(-1) - probs  # probability of the more likely tokens
    drop_sorted = mass_before >= p
    drop = drop_sorted.scatter(-1, order, drop_sorted)  # back to vocabulary order
    return logits.masked_fill(drop, float("-inf"))
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "q2_top_p", "locked": true, "points": 2, "schema_version": 3, "solution": false}
probs = torch.tensor([[0.5, 0.05, 0.3, 0.1, 0.05]])
logits = probs.log()
assert torch.isfinite(top_p_filter(logits, 0.5)).tolist() == [[True, False, False, False, False]]
assert torch.isfinite(top_p_filter(logits, 0.7)).tolist() == [[True, False, True, False, False]], (
    "0.5 is not yet 0.7: the token that crosses p is kept"
)
assert torch.isfinite(top_p_filter(logits, 0.85)).tolist() == [[True, False, True, True, False]]
random_logits = torch.randn(4, 100) * 3
for p in (0.1, 0.5, 0.9):
    assert torch.equal(top_p_filter(random_logits, p), reference.top_p_filter(random_logits, p)), f"p={p}"
### BEGIN HIDDEN TESTS
assert torch.equal(top_p_filter(random_logits, 1.0), random_logits), "p = 1 keeps every token"
assert torch.isfinite(top_p_filter(random_logits, 1e-6)).sum(-1).tolist() == [1, 1, 1, 1], "the top token stays"
batched = torch.randn(2, 3, 30)
assert torch.equal(top_p_filter(batched, 0.6), reference.top_p_filter(batched, 0.6))
tied = torch.tensor([[2.0, 2.0, 0.0, 0.0]])  # two tied tokens well inside the nucleus
assert torch.isfinite(top_p_filter(tied, 0.5)).tolist() == [[True, True, False, False]]
confident = random_logits + 100  # the same probabilities; exp() of a logit past ~88 overflows float32
for p in (0.1, 0.5, 0.9):
    assert torch.equal(top_p_filter(confident, p).isfinite(), top_p_filter(random_logits, p).isfinite()), f"p={p}"
### END HIDDEN TESTS

# %% [markdown]
# What the filters do to a peaked and to a flat distribution (the chapter draws the same picture for a trained
# model): top-k keeps 5 tokens in both; top-p keeps few where the model is sure, many where it is not.

# %%
peaked = torch.linspace(12, 0, 30)  # a model that is sure
flat = torch.linspace(1, 0, 30)  # a model that is not
for name, row in [("peaked", peaked), ("flat", flat)]:
    kept_k = int(torch.isfinite(top_k_filter(row, 5)).sum())
    kept_p = int(torch.isfinite(top_p_filter(row, 0.9)).sum())
    print(f"{name:6s}: top-k (k=5) keeps {kept_k:2d} tokens, top-p (p=0.9) keeps {kept_p:2d}")

# %% [markdown]
# ## Part 3 — Greedy decoding, with and without a KV cache (3 points)
#
# Greedy decoding appends the most likely next token, $x_{t+1} = \arg\max_v P(v \mid x_{\le t})$, again and again.
# Below is a tiny GPT with random weights (its text is nonsense, but its argmax is as well defined as a trained
# model's). `model(ids)` returns logits (B, T, V); the last position's row predicts the next token.
#
# **Without a cache** each step runs the model on the whole sequence so far: step $t$ costs $O(t)$ positions, so
# $n$ new tokens cost $O(n^2)$ positions in all (and attention $O(n^3)$).
#
# **With a KV cache** each position's keys and values are computed once and kept: `cache = model.new_cache()`
# (one `KVCache` per layer), then `model(ids, cache=cache)` runs only the positions in `ids`, attends to everything
# cached, and appends the new keys and values to `cache`. So: one call on the prompt, then one call per new token,
# with input (B, 1).
#
# Both functions return the prompt followed by `max_new_tokens` new tokens, (B, T + max_new_tokens).

# %%
torch.manual_seed(0)
model = GPT(GPTConfig(vocab_size=97, max_len=64, n_layers=2, n_heads=4, d_model=64, dropout=0.0)).eval()
prompt = torch.tensor([[5, 17, 42, 8], [60, 3, 3, 91]])  # (B=2, T=4)


# %% nbgrader={"grade": false, "grade_id": "answer_greedy_no_cache", "locked": false, "schema_version": 3, "solution": true}
@torch.no_grad()
def greedy_no_cache(model, input_ids, max_new_tokens):
    """Run the model on the whole sequence at every step; append the argmax of the last position's logits."""
    ### BEGIN SOLUTION
    ids = input_ids
    for _ in range(max_new_tokens):
        next_id = model(ids)[:, -1].argmax(-1)  # (B,)
        ids = torch.cat([ids, next_id[:, None]], dim=1)
    return ids
    ### END SOLUTION


@torch.no_grad()
def greedy_with_cache(model, input_ids, max_new_tokens):
    """The same tokens, with a KV cache: the prompt once, then only the newest token at each step."""
    ### BEGIN SOLUTION
    cache = model.new_cache()
    ids, new = input_ids, input_ids
    for _ in range(max_new_tokens):
        next_id = model(new, cache=cache)[:, -1].argmax(-1)  # (B,): only the new positions are computed
        new = next_id[:, None]  # (B, 1)
        ids = torch.cat([ids, new], dim=1)
    return ids
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "q3_no_cache", "locked": true, "points": 1, "schema_version": 3, "solution": false}
expected = model.generate(prompt, max_new_tokens=12, do_sample=False)  # minilm's KV-cache greedy decoding
ours = greedy_no_cache(model, prompt, 12)
assert ours.shape == (2, 16), f"expected the prompt and 12 new tokens, got shape {tuple(ours.shape)}"
assert torch.equal(ours[:, :4], prompt), "the result starts with the prompt"
assert torch.equal(ours, expected), "greedy decoding differs from GPT.generate(do_sample=False)"
### BEGIN HIDDEN TESTS
single = torch.tensor([[7]])
assert torch.equal(greedy_no_cache(model, single, 20), model.generate(single, max_new_tokens=20, do_sample=False))
assert torch.equal(greedy_no_cache(model, prompt, 0), prompt)
# This random model's argmax hardly depends on the context: only the inputs' lengths show a loop that drops it.
seen = []
hook = model.register_forward_pre_hook(
    lambda m, a, kw: seen.append((a[0] if a else kw["input_ids"]).size(1)), with_kwargs=True
)
try:
    greedy_no_cache(model, prompt, 5)
finally:
    hook.remove()
assert seen == [4, 5, 6, 7, 8], f"without a cache the model reads the whole sequence at every step; got {seen}"
### END HIDDEN TESTS


# %%
def input_lengths_seen(model, decode, *args):
    """Run ``decode(model, *args)`` and record the length of every input the model was called on."""
    lengths = []

    def record(module, args, kwargs):
        lengths.append((args[0] if args else kwargs["input_ids"]).size(1))

    hook = model.register_forward_pre_hook(record, with_kwargs=True)
    try:
        out = decode(model, *args)
    finally:
        hook.remove()
    return out, lengths


# %% nbgrader={"grade": true, "grade_id": "q3_kv_cache", "locked": true, "points": 2, "schema_version": 3, "solution": false}
ours, lengths = input_lengths_seen(model, greedy_with_cache, prompt, 12)
assert torch.equal(ours, expected), "cached greedy decoding differs from GPT.generate(do_sample=False)"
assert torch.equal(ours, greedy_no_cache(model, prompt, 12)), "cached and uncached decoding must agree"
assert lengths[0] == 4 and set(lengths[1:]) == {1}, f"the prompt once, then one token per call; got {lengths}"
### BEGIN HIDDEN TESTS
single = torch.tensor([[7]])
out, lengths = input_lengths_seen(model, greedy_with_cache, single, 40)
assert torch.equal(out, model.generate(single, max_new_tokens=40, do_sample=False))
assert lengths == [1] * len(lengths) and len(lengths) in (40, 41)
assert torch.equal(greedy_with_cache(model, prompt, 0), prompt)
caches = []  # every cache the loop asks for: one, that ends up holding the whole sequence
make_cache = model.new_cache
model.new_cache = lambda: caches.append(make_cache()) or caches[-1]
try:
    greedy_with_cache(model, prompt, 6)
finally:
    del model.new_cache
assert len(caches) == 1, f"one cache for the whole loop, not {len(caches)}"
assert len(caches[0][0].self_attn) in (9, 10), "the cache keeps the prompt and the new tokens"
### END HIDDEN TESTS

# %% [markdown]
# How much does the cache save? Time both loops for 48 new tokens (timings vary from machine to machine, so the
# cell below is not compared; expect the cache to win by a factor that grows with the length).

# %%
# NBVAL_IGNORE_OUTPUT
for decode in (greedy_no_cache, greedy_with_cache):
    start = time.perf_counter()
    decode(model, prompt[:, :1], 48)
    print(f"{decode.__name__:18s} {1000 * (time.perf_counter() - start):6.1f} ms")

# %% [markdown]
# ## Going further (not graded)
# - Add temperature and sampling to `greedy_with_cache`: divide the logits by T, apply your filters, draw with
#   `torch.multinomial(softmax(logits), 1, generator=g)`. In the order temperature → top-k → top-p, with the same
#   generator seed, you should reproduce `model.generate(prompt, n, temperature=T, top_k=k, top_p=p, generator=g)`
#   token for token.
# - Batched prompts of different lengths are padded **on the left** (so every row's next token comes right after its
#   prompt) with an `attention_mask`; read `GPT.features` to see why the positions then count real tokens only.
# - How much memory does the cache of GPT-2 small (12 layers, 12 heads of 64) take for a 1024-token context in
#   float32? Compare with the model's 124M parameters.
