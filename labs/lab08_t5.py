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
# # Lab 8 — T5: relative position buckets and span corruption
#
# T5 (Raffel et al. 2020, "Exploring the Limits of Transfer Learning with a Unified Text-to-Text Transformer") is an
# encoder-decoder, as BART is, trained text to text. This lab is about two of its pieces, both pure functions that
# `minilm` has and the tests compare yours with:
#
# 1. **the relative position buckets** (3 points): T5 has no position embeddings; each attention logit gets a learned
#    scalar for the *bucket* of the key's offset from the query, exact for near offsets and log-spaced for far ones;
# 2. **span corruption with sentinels** (4 points): the pretraining objective, each corrupted span replaced by one
#    sentinel in the inputs and written out, after its sentinel, in the targets;
# 3. **the counts** (2 points): how many tokens and spans T5 corrupts in a text of a given length;
# 4. **the lengths** (1 point): how long T5's raw texts are so that the inputs fill 512 tokens, and how short the
#    targets then are, next to BERT-style's.
#
# Fill in every `raise NotImplementedError()` and run the test cell after each part. Your code is graded with the
# visible tests below and hidden ones of the same kind (10 points in all), on fixed inputs: your functions must give
# exactly `minilm`'s outputs. Use plain torch and Python; do not call `minilm.nn.relative_position_bucket` or
# `minilm.objectives.span_corruption` in your answers (the tests do, to check yours).

# %%
import math

import torch

from minilm.nn import relative_position_bucket as reference_bucket
from minilm.objectives.span_corruption import (
    iid_noise_mask,
    random_spans_helper,
    random_spans_noise_mask,
    reconstruct_spans,
)
from minilm.objectives.span_corruption import noise_span_counts as reference_counts
from minilm.objectives.span_corruption import noise_span_to_unique_sentinel as reference_sentinels
from minilm.objectives.span_corruption import span_corruption as reference_corruption
from minilm.utils import reproducible

reproducible(seed=0)

# %% [markdown]
# ## Part 1 — The relative position buckets (3 points)
#
# T5's §2.1: "Instead of using a fixed embedding for each position, relative position embeddings produce a different
# learned embedding according to the offset between the 'key' and 'query' being compared in the self-attention
# mechanism. We use a simplified form of position embeddings where each 'embedding' is simply a scalar that is added
# to the corresponding logit used for computing the attention weights." So the attention of head $h$ is
#
# $$A = \operatorname{softmax}(QK^\top + B), \qquad B_{h,i,j} = b_h\big(\text{bucket}(j - i)\big),$$
#
# one learned scalar per head and bucket, shared by all the layers of a stack. And the buckets: "we use 32 embeddings
# for all of our models with ranges that increase in size logarithmically up to an offset of 128 beyond which we
# assign all relative positions to the same embedding."
#
# Write `relative_position_bucket(relative_position, bidirectional=True, num_buckets=32, max_distance=128)`, Mesh
# TensorFlow's `_relative_position_bucket` (and `transformers`'): `relative_position` is a long tensor of offsets
# $j - i$ (key minus query), of any shape; return a long tensor of the same shape, each offset's bucket in
# `0 .. num_buckets - 1`.
#
# - **Direction.** In the encoder (`bidirectional=True`) a query sees keys on both sides: half of the buckets
#   (`num_buckets // 2`) are for keys to the right ($j > i$), the other half for the rest ($j \le i$, offset 0
#   included). Work with $n$ = `num_buckets // 2` buckets and the distance $d = |j - i|$, then add $n$ to the
#   buckets of the keys to the right. In the decoder (`bidirectional=False`, causal) a query sees only keys
#   $j \le i$: all $n$ = `num_buckets` buckets are for the past, the distance is $d = \max(i - j, 0)$, and a
#   future key (never attended to) falls in bucket 0, with the offset 0.
# - **Near: exact.** With `max_exact = n // 2`, the distances $d <$ `max_exact` get a bucket each: bucket $d$.
# - **Far: log-spaced.** A distance $d \ge$ `max_exact` gets
#   $$\texttt{max\_exact} + \left\lfloor \frac{\log(d / \texttt{max\_exact})}{\log(\texttt{max\_distance} /
#   \texttt{max\_exact})} \cdot (n - \texttt{max\_exact}) \right\rfloor,$$
#   **truncated** (`.long()`, not rounded), **clipped** at $n - 1$: every distance from some point on (and all
#   beyond `max_distance`) shares the last bucket.
#
# Compute the far buckets as T5 does: `torch.log(distance.float() / max_exact) / math.log(max_distance / max_exact)`,
# times `(n - max_exact)`, then `.long()`. (`torch.log(0)` is `-inf` for the near distances, whose far bucket you do
# not use: `torch.where` picks between the two.)
#
# With T5's 32 buckets and 128, bidirectional:
#
# | $j - i$ | -1000 | -128 | -64 | -16 | -8 | -7 | -1 | 0 | 1 | 7 | 8 | 16 | 64 | 128 | 1000 |
# |---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|
# | bucket | 15 | 15 | 14 | 10 | 8 | 7 | 1 | 0 | 17 | 23 | 24 | 26 | 30 | 31 | 31 |


# %% nbgrader={"grade": false, "grade_id": "answer_relative_position_bucket", "locked": false, "schema_version": 3, "solution": true}
def relative_position_bucket(relative_position, bidirectional=True, num_buckets=32, max_distance=128):
    """Offsets j - i (long tensor, any shape) -> T5's bucket ids in 0 .. num_buckets - 1 (long, the same shape)."""
    ### BEGIN SOLUTION
    buckets = torch.zeros_like(relative_position)
    if bidirectional:
        num_buckets //= 2  # half of the buckets for each side
        buckets += (relative_position > 0).long() * num_buckets  # keys to the right: the upper half
        distance = relative_position.abs()
    else:
        distance = (-relative_position).clamp(min=0)  # how far back the key is; the future counts as 0
    max_exact = num_buckets // 2  # distances 0 .. max_exact - 1: a bucket each
    log_ratio = torch.log(distance.float() / max_exact) / math.log(max_distance / max_exact)
    if_large = max_exact + (log_ratio * (num_buckets - max_exact)).long()  # log-spaced, truncated
    if_large = if_large.clamp(max=num_buckets - 1)  # everything far shares the last bucket
    return buckets + torch.where(distance < max_exact, distance, if_large)
    ### END SOLUTION


# %% [markdown]
# The first test cell checks the encoder's buckets (`bidirectional=True`), the second the decoder's.

# %%
offsets = torch.tensor([-1000, -128, -127, -64, -16, -8, -7, -1, 0, 1, 7, 8, 16, 64, 127, 128, 1000])
grid = torch.arange(-600, 601)  # every offset from -600 to 600
positions = torch.arange(6)
square = positions[None, :] - positions[:, None]  # (6, 6): j - i for queries i (rows) and keys j (columns)
print(square.tolist())


# %% nbgrader={"grade": true, "grade_id": "q1_bidirectional", "locked": true, "points": 2, "schema_version": 3, "solution": false}
buckets = relative_position_bucket(offsets)
assert isinstance(buckets, torch.Tensor) and buckets.dtype == torch.long, "buckets: a long tensor"
assert buckets.shape == offsets.shape, "one bucket per offset, the offsets' shape"
assert buckets[offsets == 0].item() == 0, "offset 0 (the query itself) is bucket 0, in the lower half"
assert buckets[offsets == 1].item() == 17, "the key just right of the query: the upper half's bucket 1, 16 + 1"
expected = [15, 15, 15, 14, 10, 8, 7, 1, 0, 17, 23, 24, 26, 30, 31, 31, 31]
assert buckets.tolist() == expected, f"buckets {buckets.tolist()}, not {expected}"
assert torch.equal(relative_position_bucket(grid), reference_bucket(grid)), "offsets -600 .. 600 differ from T5's"
assert relative_position_bucket(square).tolist()[1] == [1, 0, 17, 18, 19, 20], "the query at position 1, keys 0 .. 5"
small = relative_position_bucket(grid, num_buckets=8, max_distance=20)
assert torch.equal(small, reference_bucket(grid, num_buckets=8, max_distance=20)), "8 buckets up to 20 differ"
assert int(small.max()) == 7 and int(small.min()) == 0, "8 buckets: 0 .. 7, four for each side"
### BEGIN HIDDEN TESTS
configs_h = [(32, 128), (16, 64), (8, 20), (64, 256), (32, 512), (12, 40), (10, 100), (6, 13), (4, 8), (128, 1024)]
configs_h += [(32, 100), (20, 33)]
for num_buckets_h, max_distance_h in configs_h:
    offsets_h = torch.cat([torch.arange(-3000, 3001), torch.tensor([-(10**6), 10**6, -(2**40), 2**40])])
    got_h = relative_position_bucket(offsets_h, True, num_buckets_h, max_distance_h)
    assert got_h.dtype == torch.long and got_h.shape == offsets_h.shape
    assert torch.equal(got_h, reference_bucket(offsets_h, True, num_buckets_h, max_distance_h)), (
        f"bidirectional, {num_buckets_h} buckets, max_distance {max_distance_h}"
    )
    grid_h = torch.arange(40)[None, :] - torch.arange(40)[:, None] * 3  # (40, 40): keys j, queries 3i
    assert torch.equal(
        relative_position_bucket(grid_h, True, num_buckets_h, max_distance_h),
        reference_bucket(grid_h, True, num_buckets_h, max_distance_h),
    ), "a (40, 40) grid of offsets"
assert torch.equal(relative_position_bucket(torch.arange(-5, 6), True), reference_bucket(torch.arange(-5, 6)))
### END HIDDEN TESTS

# %% nbgrader={"grade": true, "grade_id": "q1_causal", "locked": true, "points": 1, "schema_version": 3, "solution": false}
causal = relative_position_bucket(offsets, bidirectional=False)
assert isinstance(causal, torch.Tensor) and causal.dtype == torch.long and causal.shape == offsets.shape
assert causal[offsets > 0].tolist() == [0] * 8, "causal: a key in the future (j > i) falls in bucket 0"
expected = [31, 31, 31, 26, 16, 8, 7, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0]
assert causal.tolist() == expected, f"causal buckets {causal.tolist()}, not {expected}: all 32 for the past"
assert torch.equal(relative_position_bucket(grid, False), reference_bucket(grid, False)), "offsets -600 .. 600"
assert relative_position_bucket(square, False).tolist()[2] == [2, 1, 0, 0, 0, 0], "the query at 2: keys 0, 1, 2, ..."
small = relative_position_bucket(grid, False, num_buckets=8, max_distance=20)
assert torch.equal(small, reference_bucket(grid, False, num_buckets=8, max_distance=20)), "8 buckets up to 20 differ"
### BEGIN HIDDEN TESTS
configs_h = [(32, 128), (16, 64), (8, 20), (64, 256), (32, 512), (12, 40), (10, 100), (6, 13), (4, 8), (128, 1024)]
configs_h += [(32, 100), (20, 33)]
for num_buckets_h, max_distance_h in configs_h:
    offsets_h = torch.cat([torch.arange(-3000, 3001), torch.tensor([-(10**6), 10**6, -(2**40), 2**40])])
    got_h = relative_position_bucket(offsets_h, False, num_buckets_h, max_distance_h)
    assert got_h.dtype == torch.long and got_h.shape == offsets_h.shape
    assert torch.equal(got_h, reference_bucket(offsets_h, False, num_buckets_h, max_distance_h)), (
        f"causal, {num_buckets_h} buckets, max_distance {max_distance_h}"
    )
    grid_h = torch.arange(40)[None, :] - torch.arange(40)[:, None] * 3
    assert torch.equal(
        relative_position_bucket(grid_h, False, num_buckets_h, max_distance_h),
        reference_bucket(grid_h, False, num_buckets_h, max_distance_h),
    ), "a (40, 40) grid of offsets"
### END HIDDEN TESTS


# %% tags=["instructor"]
# Instructor check (removed from the student version): the grading offsets sit nowhere near a float rounding edge,
# so an answer computing the logarithms in float64, or in another order, is not penalised.
def bucket_float64_i(relative_position, bidirectional, num_buckets, max_distance):
    sign_i = (relative_position > 0).long() if bidirectional else 0
    n_i = num_buckets // 2 if bidirectional else num_buckets
    distance_i = relative_position.abs() if bidirectional else (-relative_position).clamp(min=0)
    exact_i = n_i // 2
    far_i = exact_i + (torch.log(distance_i.double() / exact_i) * (n_i - exact_i) / math.log(max_distance / exact_i))
    far_i = far_i.long().clamp(max=n_i - 1)
    return sign_i * n_i + torch.where(distance_i < exact_i, distance_i, far_i)


offsets_i = torch.arange(-3000, 3001)
for num_buckets_i, max_distance_i in configs_h:
    for bidirectional_i in (True, False):
        args_i = (bidirectional_i, num_buckets_i, max_distance_i)
        assert torch.equal(bucket_float64_i(offsets_i, *args_i), reference_bucket(offsets_i, *args_i)), args_i
print("float64 buckets equal T5's float32 ones on every graded configuration")

# %% [markdown]
# ### What the buckets look like
#
# Which distances share each of your encoder's buckets, for keys to the left of the query (T5's defaults), and what
# an encoder's and a decoder's query sees, six positions long. The last bucket starts before `max_distance`: the
# log-spaced buckets would reach bucket 16 (the other side's first) at distance 128, and the clipping keeps every
# farther key in bucket 15.

# %%
distances = torch.arange(0, 1001)
left = relative_position_bucket(-distances)
print("bucket  distances")
for bucket in left.unique().tolist():
    low, high = int(distances[left == bucket].min()), int(distances[left == bucket].max())
    print(f"{bucket:>6}  {low}" + ("" if low == high else f" .. {high}" if bucket < 15 else " and beyond"))
print("\nencoder, query i (rows), key j (columns):\n", relative_position_bucket(square))
print("decoder:\n", relative_position_bucket(square, bidirectional=False))

# %% [markdown]
# Eight exact buckets, then widths of 4, 4, 7, 9, 14, 18, 27 and the rest: a model can tell "the next word" from
# "two words on", but not a key 50 tokens away from one 60 tokens away. In the decoder, the future is masked anyway
# (the causal mask), so it can spend all 32 buckets on the past: 16 exact ones, then log-spaced up to 128.

# %% [markdown]
# ## Part 2 — Span corruption with sentinels (4 points)
#
# T5's baseline objective (§3.1.4) "randomly samples and then drops out 15% of tokens in the input sequence. All
# consecutive spans of dropped-out tokens are replaced by a single sentinel token. Each sentinel token is assigned a
# token ID that is unique to the sequence." The target holds the dropped-out spans, "delimited by the same sentinel
# tokens used in the input sequence plus a final sentinel token to mark the end of the target sequence". Figure 2,
# with `<X> <Y> <Z>` for the sentinels `<extra_id_0> <extra_id_1> <extra_id_2>`:
#
# | | |
# |---|---|
# | original | Thank you **for inviting** me to your party **last** week . |
# | inputs | Thank you `<X>` me to your party `<Y>` week . |
# | targets | `<X>` for inviting `<Y>` last `<Z>` |
#
# T5's sentinels are the last ids of its vocabulary, "assigned in decreasing order within the sequence starting at
# vocabulary.size - 1" (its code): `<extra_id_0>` is id 32099 of 32,100, `<extra_id_1>` 32098, and so on. This lab
# uses a vocabulary of 200 ids, `</s>` = 1, and `<extra_id_i>` = 199 - i: `SENTINELS = (199, 198, ..., 100)`.
#
# **How T5's code builds both sides.** One function, `noise_span_to_unique_sentinel(ids, noise_mask, sentinel_ids)`,
# replaces each run of consecutive noise tokens by one sentinel, the $i$-th run (counting from the start) by
# `sentinel_ids[i]`, and keeps the other tokens. Then
#
#     inputs  = noise_span_to_unique_sentinel(ids,  noise_mask, sentinel_ids) + [</s>]
#     targets = noise_span_to_unique_sentinel(ids, ~noise_mask, sentinel_ids) + [</s>]
#
# The targets are the same function on the **complement** of the mask: the *kept* runs become sentinels and the
# noise tokens stay. On Figure 2 that is the paper's target: the kept runs "Thank you", "me to your party" and
# "week ." become `<X>`, `<Y>`, `<Z>`. It also decides the two cases the paper's sentence leaves open:
#
# - **A text ending with noise** (every random-spans mask T5 trains with, see Part 3): the last kept run comes
#   before the last span, so the targets have no final sentinel; the `</s>` ends them.
#   Thank you for inviting me to your party **last week .** → inputs `Thank you for inviting me to your party <X>
#   </s>`, targets `<X> last week . </s>`.
# - **A text starting with noise** (possible with i.i.d. masks, the baseline's): the targets start with that span,
#   with no sentinel before it, and each target sentinel `<extra_id_i>` then precedes the span that the inputs'
#   `<extra_id_{i+1}>` stands for. **Thank you** for inviting me to your party **last week .** → inputs `<X> for
#   inviting me to your party <Y> </s>`, targets `Thank you <X> last week . </s>`. Odd, but that is what T5 trained
#   on, and nothing is lost: `minilm.objectives.span_corruption.reconstruct_spans` puts the text back together.
#
# Write `noise_span_to_unique_sentinel(ids, noise_mask, sentinel_ids)`: `ids` (T,) long, `noise_mask` (T,) bool,
# `sentinel_ids` a tuple of ids (`<extra_id_0>` first; there are always enough); return the (T',) long sequence.
# Then `span_corruption(ids, noise_mask, sentinel_ids, eos_id)`: `(inputs, targets)` as above, `eos_id` appended to
# both (nothing appended when `eos_id` is None). T can be anything from 0 up, and the mask anything at all.


# %% nbgrader={"grade": false, "grade_id": "answer_noise_span_to_unique_sentinel", "locked": false, "schema_version": 3, "solution": true}
def noise_span_to_unique_sentinel(ids, noise_mask, sentinel_ids):
    """Each run of noise tokens -> ONE sentinel, the i-th run sentinel_ids[i]; the other tokens stay. (T,) -> (T',)."""
    ### BEGIN SOLUTION
    previous = torch.zeros_like(noise_mask)
    previous[1:] = noise_mask[:-1]  # (T,) the token before is noise
    first = noise_mask & ~previous  # (T,) the first token of each run: its sentinel goes there
    num_runs = int(first.sum())
    out = ids.clone()
    out[first] = torch.tensor(list(sentinel_ids[:num_runs]), dtype=torch.long)  # the i-th run: <extra_id_i>
    return out[first | ~noise_mask]  # the rest of each run is dropped
    ### END SOLUTION


def span_corruption(ids, noise_mask, sentinel_ids, eos_id):
    """T5's (inputs, targets) for one text (T,) and its noise mask (T,) bool, eos_id appended to both (if not None)."""
    ### BEGIN SOLUTION
    inputs = noise_span_to_unique_sentinel(ids, noise_mask, sentinel_ids)  # kept tokens, a sentinel per noise run
    targets = noise_span_to_unique_sentinel(ids, ~noise_mask, sentinel_ids)  # noise tokens, a sentinel per kept run
    if eos_id is not None:  # </s> appended to both, after the corruption
        inputs = torch.cat([inputs, torch.tensor([eos_id])])
        targets = torch.cat([targets, torch.tensor([eos_id])])
    return inputs, targets
    ### END SOLUTION


# %% [markdown]
# The visible tests use Figure 2's sentence, word $w$ being token $3 + w$, and print with the sentinels' names.

# %%
EOS = 1
SENTINELS = tuple(range(199, 99, -1))  # <extra_id_i> = 199 - i: T5's 100 sentinels, decreasing from the top
words = "Thank you for inviting me to your party last week .".split()
sentence = torch.arange(3, 3 + len(words))  # (11,)


def show(ids):
    names = {EOS: "</s>", **{s: f"<extra_id_{i}>" for i, s in enumerate(SENTINELS)}}
    return " ".join(names[t] if t in names else words[t - 3] if 3 <= t < 3 + len(words) else str(t) for t in ids)


def mask_of(*noise_words):
    """The (11,) bool mask of the sentence with the given word positions as noise."""
    mask = torch.zeros(len(words), dtype=torch.bool)
    mask[list(noise_words)] = True
    return mask


figure_2 = mask_of(2, 3, 8)  # for inviting, last
ends_with_noise = mask_of(8, 9, 10)  # last week .
starts_with_noise = mask_of(0, 1, 8, 9, 10)  # Thank you, last week .
print(show(sentence.tolist()))
print(show(reference_sentinels(sentence, figure_2, SENTINELS).tolist()))


# %% nbgrader={"grade": true, "grade_id": "q2_sentinels", "locked": true, "points": 2, "schema_version": 3, "solution": false}
def check_sentinels(ids, mask, expected):
    got = noise_span_to_unique_sentinel(ids, mask, SENTINELS)
    assert isinstance(got, torch.Tensor) and got.dim() == 1 and got.dtype == torch.long, "a (T',) long tensor"
    assert got.tolist() == expected, f"\n got      {show(got.tolist())}\n expected {show(expected)}"


x, y, z = SENTINELS[:3]  # <extra_id_0>, <extra_id_1>, <extra_id_2>: 199, 198, 197
t = sentence.tolist()
check_sentinels(sentence, figure_2, [*t[:2], x, *t[4:8], y, *t[9:]])  # Thank you <X> me to your party <Y> week .
check_sentinels(sentence, ~figure_2, [x, *t[2:4], y, t[8], z])  # the kept runs as sentinels: <X> for inviting ...
check_sentinels(sentence, ends_with_noise, [*t[:8], x])
check_sentinels(sentence, starts_with_noise, [x, *t[2:8], y])
check_sentinels(sentence, mask_of(), t)  # no noise: the text as it is
check_sentinels(sentence, ~mask_of(), [x])  # all noise: one run, one sentinel
check_sentinels(sentence, mask_of(1, 2, 4, 5, 6, 8), [t[0], x, t[3], y, t[7], z, *t[9:]])  # runs one token apart
check_sentinels(sentence, mask_of(5), [*t[:5], x, *t[6:]])  # a single token
check_sentinels(sentence, ~mask_of(4), [x, t[4], y])  # all but one
for seed in range(5):
    mask = iid_noise_mask(len(words), 0.4, torch.Generator().manual_seed(seed))
    check_sentinels(sentence, mask, reference_sentinels(sentence, mask, SENTINELS).tolist())
### BEGIN HIDDEN TESTS
gen_h = torch.Generator().manual_seed(8)
cases_h = []
for length_h in [0, 1, 2, 3, 5, 17, 64, 150]:
    ids_h = torch.randint(3, 100, (length_h,), generator=gen_h)
    for density_h in [0.0, 0.15, 0.3, 0.5, 0.8, 1.0]:
        cases_h.append((ids_h, iid_noise_mask(length_h, density_h, gen_h) if 0 < density_h < 1 else None, density_h))
for ids_h, mask_h, density_h in cases_h:
    if mask_h is None:
        mask_h = torch.full((len(ids_h),), density_h == 1.0)
    if int((mask_h & ~torch.cat([mask_h.new_zeros(1), mask_h[:-1]])).sum()) > len(SENTINELS):
        continue
    for sentinels_h in (SENTINELS, tuple(range(32099, 31999, -1)), tuple(range(250, 150, -1))):
        got_h = noise_span_to_unique_sentinel(ids_h, mask_h, sentinels_h)
        assert got_h.dtype == torch.long and got_h.dim() == 1
        assert torch.equal(got_h, reference_sentinels(ids_h, mask_h, sentinels_h)), f"{len(ids_h)} tokens"
for length_h in [2, 9, 40, 120, 568]:
    ids_h = torch.randint(3, 100, (length_h,), generator=gen_h)
    for mask_h in [
        random_spans_noise_mask(length_h, 0.15, 3.0, gen_h),
        random_spans_noise_mask(length_h, 0.5, 2.0, gen_h),
        torch.arange(length_h) % 2 == 0,  # every other token
        torch.arange(length_h) % 2 == 1,
        torch.arange(length_h) == 0,  # noise at the start only
        torch.arange(length_h) == length_h - 1,  # at the end only
        torch.arange(length_h) != length_h // 2,  # all but one
    ]:
        if int((mask_h & ~torch.cat([mask_h.new_zeros(1), mask_h[:-1]])).sum()) > len(SENTINELS):
            continue
        assert torch.equal(
            noise_span_to_unique_sentinel(ids_h, mask_h, SENTINELS), reference_sentinels(ids_h, mask_h, SENTINELS)
        ), f"{length_h} tokens, {int(mask_h.sum())} noise"
### END HIDDEN TESTS


# %% nbgrader={"grade": true, "grade_id": "q2_corruption", "locked": true, "points": 2, "schema_version": 3, "solution": false}
def check_corruption(ids, mask, expected_inputs, expected_targets, eos_id=EOS):
    inputs, targets = span_corruption(ids, mask, SENTINELS, eos_id)
    for name, got, expected in [("inputs", inputs, expected_inputs), ("targets", targets, expected_targets)]:
        assert isinstance(got, torch.Tensor) and got.dim() == 1 and got.dtype == torch.long, f"{name}: (T',) long"
        assert got.tolist() == expected, f"{name}\n got      {show(got.tolist())}\n expected {show(expected)}"
    if eos_id is not None:
        assert torch.equal(reconstruct_spans(inputs, targets, SENTINELS, eos_id=eos_id), ids), "the text is lost"


check_corruption(sentence, figure_2, [*t[:2], x, *t[4:8], y, *t[9:], EOS], [x, *t[2:4], y, t[8], z, EOS])
check_corruption(sentence, ends_with_noise, [*t[:8], x, EOS], [x, *t[8:], EOS])  # no final sentinel
check_corruption(sentence, starts_with_noise, [x, *t[2:8], y, EOS], [*t[:2], x, *t[8:], EOS])  # T5's shifted one
check_corruption(sentence, figure_2, [*t[:2], x, *t[4:8], y, *t[9:]], [x, *t[2:4], y, t[8], z], eos_id=None)
check_corruption(sentence, mask_of(5), [*t[:5], x, *t[6:], EOS], [x, t[5], y, EOS])  # a single token
mask = random_spans_noise_mask(len(words), 0.3, 1.5, torch.Generator().manual_seed(0))
check_corruption(
    sentence, mask, *(r.tolist() for r in reference_corruption(sentence, SENTINELS, noise_mask=mask, eos_id=EOS))
)
### BEGIN HIDDEN TESTS
gen_h = torch.Generator().manual_seed(9)
for length_h in [0, 1, 2, 3, 7, 30, 100, 568]:
    ids_h = torch.randint(3, 100, (length_h,), generator=gen_h)
    masks_h = [
        torch.zeros(length_h, dtype=torch.bool),
        torch.ones(length_h, dtype=torch.bool),
        iid_noise_mask(length_h, 0.15, gen_h),
        iid_noise_mask(length_h, 0.5, gen_h),
        torch.arange(length_h) == 0,
        torch.arange(length_h) == length_h - 1,
        torch.arange(length_h) != length_h // 2,
        torch.arange(length_h) % 3 == 0,
    ]
    if length_h >= 2:
        masks_h += [
            random_spans_noise_mask(length_h, 0.15, 3.0, gen_h),
            random_spans_noise_mask(length_h, 0.5, 3.0, gen_h),
        ]
    for mask_h in masks_h:
        if int((mask_h & ~torch.cat([mask_h.new_zeros(1), mask_h[:-1]])).sum()) > 99:
            continue
        for eos_h in (EOS, 5, None):
            got_inputs_h, got_targets_h = span_corruption(ids_h, mask_h, SENTINELS, eos_h)
            exp_inputs_h, exp_targets_h = reference_corruption(ids_h, SENTINELS, noise_mask=mask_h, eos_id=eos_h)
            assert torch.equal(got_inputs_h, exp_inputs_h), f"inputs, {length_h} tokens, eos {eos_h}"
            assert torch.equal(got_targets_h, exp_targets_h), f"targets, {length_h} tokens, eos {eos_h}"
### END HIDDEN TESTS

# %% [markdown]
# ## Part 3 — How many tokens, how many spans (2 points)
#
# The baseline's i.i.d. mask corrupts each token with probability 15%, and the runs it makes are short (most are one
# token). §3.3.4 then corrupts *spans* on purpose: for a text of `length` tokens, T5 fixes how many tokens are noise
# and in how many spans, and only then draws where they go. Its final choice (§3.7): "we use a mean span length of 3
# and corrupt 15% of the original sequence"; Table 7 compares mean span lengths 2, 3, 5 and 10. T5's
# `random_spans_noise_mask` (t5/data/preprocessors.py) computes:
#
#     num_noise_tokens = round(length * noise_density)
#     # avoid degeneracy by ensuring positive numbers of noise and nonnoise tokens.
#     num_noise_tokens = min(max(num_noise_tokens, 1), length - 1)
#     num_noise_spans = round(num_noise_tokens / mean_noise_span_length)
#     # avoid degeneracy by ensuring positive number of noise spans
#     num_noise_spans = max(num_noise_spans, 1)
#
# So 512 tokens at 15% with spans of mean 3 are 77 noise tokens in 26 spans. Two details of T5's arithmetic matter
# here, as they matter for `minilm`'s `noise_span_counts`: the products and quotients are computed in **float32**
# (TensorFlow's), and `round` rounds halves **to even** (`tf.round`, `torch.round`: 2.5 → 2, 3.5 → 4). In float32,
# 0.15 is a little more than 0.15, so 190 · 0.15 is a little more than 28.5 and rounds to 29, where float64 gives
# 28.499999999999996 and 28.
#
# Write `noise_span_counts(length, noise_density, mean_noise_span_length)` → `(num_noise_tokens, num_noise_spans)`,
# two Python ints, for `length >= 2`: compute with float32 tensors, e.g. `torch.tensor(length, dtype=torch.float32)
# * torch.tensor(noise_density, dtype=torch.float32)`, round with `torch.round`. (The spans are placed afterwards:
# the noise tokens cut into `num_noise_spans` random non-empty spans, the others too, alternating and starting with
# a kept span. `minilm.objectives.span_corruption.random_spans_noise_mask` does it; you do not have to.)


# %% nbgrader={"grade": false, "grade_id": "answer_noise_span_counts", "locked": false, "schema_version": 3, "solution": true}
def noise_span_counts(length, noise_density, mean_noise_span_length):
    """T5's (num_noise_tokens, num_noise_spans) for a text of length >= 2 tokens, computed in float32."""

    ### BEGIN SOLUTION
    def f32(value):
        return torch.tensor(value, dtype=torch.float32)

    num_noise_tokens = int(torch.round(f32(length) * f32(noise_density)))  # float32, halves to even, as T5
    num_noise_tokens = min(max(num_noise_tokens, 1), length - 1)  # at least one noise and one kept token
    num_noise_spans = int(torch.round(f32(num_noise_tokens) / f32(mean_noise_span_length)))
    num_noise_spans = max(num_noise_spans, 1)  # at least one span
    return num_noise_tokens, num_noise_spans
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "q3_counts", "locked": true, "points": 2, "schema_version": 3, "solution": false}
def check_counts(length, density, mean, expected):
    got = noise_span_counts(length, density, mean)
    assert isinstance(got, tuple) and len(got) == 2, "return (num_noise_tokens, num_noise_spans)"
    assert all(isinstance(c, int) for c in got), f"Python ints, not {[type(c).__name__ for c in got]}"
    assert got == expected, f"length {length}, density {density}, mean span {mean}: {got}, not {expected}"


check_counts(512, 0.15, 3.0, (77, 26))  # T5's inputs: round(76.8) = 77 tokens, round(25.67) = 26 spans
check_counts(500, 0.15, 3.0, (75, 25))
check_counts(568, 0.15, 3.0, (85, 28))
check_counts(512, 0.15, 10.0, (77, 8))
check_counts(190, 0.15, 3.0, (29, 10))  # float32: 28.5000011 -> 29 (float64's 28.4999... would give 28)
check_counts(10, 0.25, 2.0, (2, 1))  # 2.5 -> 2 (halves to even), 2 / 2 = 1
check_counts(20, 0.25, 2.0, (5, 2))  # 5 / 2 = 2.5 -> 2
check_counts(3, 0.15, 3.0, (1, 1))  # round(0.45) = 0 noise tokens: at least 1; 1 / 3 -> 0 spans: at least 1
check_counts(2, 0.9, 1.0, (1, 1))  # round(1.8) = 2 noise tokens of 2: at most length - 1
check_counts(30, 0.5, 1.0, (15, 15))
### BEGIN HIDDEN TESTS
checked_h = 0
for length_h in list(range(2, 80)) + [99, 100, 101, 127, 128, 190, 199, 230, 256, 310, 333, 511, 512, 568, 1000, 1024]:
    for density_h in (0.01, 0.05, 0.1, 0.15, 0.25, 0.3, 0.35, 0.5, 0.65, 0.8, 0.9, 0.95, 0.99):
        for mean_h in (1.0, 1.5, 2.0, 2.5, 3.0, 5.0, 10.0, 50.0):
            try:
                expected_h = reference_counts(length_h, density_h, mean_h)
            except ValueError:  # more spans than kept tokens to separate them: not a valid setting
                continue
            got_h = noise_span_counts(length_h, density_h, mean_h)
            assert tuple(got_h) == expected_h, f"length {length_h}, density {density_h}, mean {mean_h}: {got_h}"
            checked_h += 1
assert checked_h > 7000
### END HIDDEN TESTS

# %% [markdown]
# ### A mask with those counts
#
# Your counts beside `minilm`'s random-spans masks (your counts are graded on their own: the placement is
# `minilm`'s), and your `span_corruption` on one of them: with random spans the text always starts with a kept
# span and ends with a corrupted one (T5 adds no random shift), so the targets have no final sentinel.

# %%
g = torch.Generator().manual_seed(4)
for length in (40, 190, 512):
    mask = random_spans_noise_mask(length, 0.15, 3.0, g)
    runs = int((mask & ~torch.cat([mask.new_zeros(1), mask[:-1]])).sum())
    print(f"{length} tokens: yours {noise_span_counts(length, 0.15, 3.0)}, the mask's ({int(mask.sum())}, {runs})")
text = torch.arange(40) % 11 + 3  # Figure 2's words over and over
mask = random_spans_noise_mask(len(text), 0.15, 3.0, g)
inputs, targets = span_corruption(text, mask, SENTINELS, EOS)
print("\ntext   ", show(text.tolist()))
print("inputs ", show(inputs.tolist()))
print("targets", show(targets.tolist()))
print("put back together:", torch.equal(reconstruct_spans(inputs, targets, SENTINELS, eos_id=EOS), text))

# %% [markdown]
# ## Part 4 — How long are the targets? (1 point)
#
# An encoder-decoder pays for its targets: the decoder runs (with cross-attention) once per target token. BERT-style
# and MASS-style objectives (Tables 4 and 5) take the whole uncorrupted text as the target; the sentinel objectives
# only the corrupted spans, and in the paper's words "span corruption produces shorter sequences on average". How
# much shorter? T5 cuts its raw texts so that the span-corrupted inputs, `</s>` included, fill the encoder's 512
# tokens (`random_spans_helper` in its code): the inputs of a text of $T$ tokens with $N$ noise tokens in $k$ spans
# are $T - N + k + 1$ tokens long (the kept tokens, a sentinel per span, `</s>`) and the targets $N + k + 1$ (the
# noise tokens, a sentinel per kept span, `</s>`).
#
# Write `span_corruption_lengths(inputs_length, noise_density=0.15, mean_noise_span_length=3.0)` →
# `(tokens_length, targets_length)`, as T5's helper does: start at $T$ = `inputs_length - 1` (it fits: the inputs are
# never longer than $T + 1$), add 1 while a text one token longer still fits in `inputs_length`, and return that $T$
# and its targets' length. T5's helper counts $N$ = `round(T * noise_density)` and $k$ =
# `round(N / mean_noise_span_length)` with Python's `round`, without clipping; your `noise_span_counts` gives the
# same on every length the tests use, so either will do.


# %% nbgrader={"grade": false, "grade_id": "answer_span_corruption_lengths", "locked": false, "schema_version": 3, "solution": true}
def span_corruption_lengths(inputs_length, noise_density=0.15, mean_noise_span_length=3.0):
    """(tokens_length, targets_length): the longest raw text whose span-corrupted inputs, eos included, fit in
    inputs_length tokens, and the length of its targets, eos included."""

    ### BEGIN SOLUTION
    def lengths(tokens_length):
        num_noise_tokens = round(tokens_length * noise_density)
        num_noise_spans = round(num_noise_tokens / mean_noise_span_length)
        inputs = tokens_length - num_noise_tokens + num_noise_spans + 1  # kept tokens, a sentinel per span, </s>
        targets = num_noise_tokens + num_noise_spans + 1  # the spans, a sentinel before each, </s>
        return inputs, targets

    tokens_length = inputs_length - 1
    while lengths(tokens_length + 1)[0] <= inputs_length:  # a text one token longer still fits
        tokens_length += 1
    return tokens_length, lengths(tokens_length)[1]
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "q4_lengths", "locked": true, "points": 1, "schema_version": 3, "solution": false}
got = span_corruption_lengths(512)
assert tuple(got) == (568, 114), f"T5's baseline: 568 raw tokens -> 512 inputs and 114 targets, not {got}"
assert tuple(span_corruption_lengths(512, 0.15, 10.0)) == random_spans_helper(512, 0.15, 10.0)
assert tuple(span_corruption_lengths(128, 0.25, 3.0)) == random_spans_helper(128, 0.25, 3.0)
### BEGIN HIDDEN TESTS
lengths_cases_h = [
    (n, d, m)
    for n in (64, 100, 128, 256, 512, 1000, 1024)
    for d in (0.1, 0.15, 0.25, 0.3)
    for m in (2.0, 3.0, 5.0, 10.0)
]
# T5's float64 helper and float32 counts differ on these two: not graded (see the instructor check below)
lengths_cases_h = [c for c in lengths_cases_h if c not in [(128, 0.3, 10.0), (1000, 0.3, 5.0)]]
for inputs_length_h, density_h, mean_h in lengths_cases_h:
    got_h = span_corruption_lengths(inputs_length_h, density_h, mean_h)
    expected_h = random_spans_helper(inputs_length_h, density_h, mean_h)
    assert tuple(got_h) == expected_h, f"{inputs_length_h} inputs, {density_h}, {mean_h}: {got_h}, not {expected_h}"
### END HIDDEN TESTS

# %% tags=["instructor"]
# Instructor check (removed from the student version): on every graded setting, T5's helper agrees with lengths
# counted by minilm's noise_span_counts (float32, clipped), so a student reusing Part 3 is not penalised.
graded_i, differ_i = 0, []
for inputs_length_i in (64, 100, 128, 256, 512, 1000, 1024):
    for density_i in (0.1, 0.15, 0.25, 0.3):
        for mean_i in (2.0, 3.0, 5.0, 10.0):
            tokens_i, targets_i = random_spans_helper(inputs_length_i, density_i, mean_i)

            def fits_i(length_i, d=density_i, m=mean_i, limit=inputs_length_i):
                noise_i, spans_i = reference_counts(length_i, d, m)
                return length_i - noise_i + spans_i + 1 <= limit

            agree_i = fits_i(tokens_i) and not fits_i(tokens_i + 1)
            agree_i = agree_i and sum(reference_counts(tokens_i, density_i, mean_i)) + 1 == targets_i
            if (inputs_length_i, density_i, mean_i) in lengths_cases_h:
                assert agree_i, (inputs_length_i, density_i, mean_i)
                graded_i += 1
            elif not agree_i:
                differ_i.append((inputs_length_i, density_i, mean_i))
assert graded_i == 110 and differ_i == [(128, 0.3, 10.0), (1000, 0.3, 5.0)], (graded_i, differ_i)
print(f"T5's helper and float32 counts agree on all {graded_i} graded settings; they differ on {differ_i}")

# %% [markdown]
# ### The decoder's share of the work
#
# For 512 input tokens: BERT-style reads 511 tokens of text (and `</s>`) and writes all 512 back; span corruption
# reads 568 tokens of text in the same 512 and writes about a fifth as many. The last column is the decoder's tokens per
# token of text, the cost of the objective per unit of data. A real mask of your `span_corruption`, on a text of
# the length your function found, gives exactly those lengths.

# %%
print(f"{'objective (512 inputs)':<34} {'text':>5} {'targets':>8} {'targets/text':>13}")
print(f"{'BERT-style: the whole text':<34} {511:>5} {512:>8} {512 / 511:>13.2f}")
for mean in (2.0, 3.0, 5.0, 10.0):
    tokens_length, targets_length = span_corruption_lengths(512, 0.15, mean)
    name = f"span corruption, mean span {mean:g}"
    print(f"{name:<34} {tokens_length:>5} {targets_length:>8} {targets_length / tokens_length:>13.2f}")
tokens_length, targets_length = span_corruption_lengths(512)
text = torch.randint(3, 100, (tokens_length,), generator=torch.Generator().manual_seed(0))
inputs, targets = span_corruption(text, random_spans_noise_mask(tokens_length, 0.15, 3.0, g), SENTINELS, EOS)
print(f"\na real mask on {tokens_length} tokens: {len(inputs)} inputs, {len(targets)} targets")
assert (len(inputs), len(targets)) == (512, targets_length)

# %% [markdown]
# The decoder writes 114 tokens instead of 512, about 4.5 times fewer, while the encoder reads 11% more text per
# example. Longer spans save more (fewer sentinels): with mean span 10 the targets are 0.17 of the text. Table 7 found
# the differences between mean span lengths small, and T5 kept 3.

# %% [markdown]
# ## Going further (not graded)
# - `minilm.nn.RelativePositionBias` turns your buckets into the attention bias $B$ (1, heads, Tq, Tk), one table
#   per stack shared by its layers. Load `t5-small`'s encoder bias table and plot, per head, the scalar against the
#   offset $j - i$ from -128 to 128: which heads look left, which right, which at the query itself?
# - The buckets are fixed, the scalars learned: what does a T5 model do with offsets beyond 128, longer than any it
#   was trained on? (Every one of them lands in the last bucket of its side.)
# - Compare with an i.i.d. mask of 15% (`iid_noise_mask`): how many runs does a 512-token text get on average, and
#   how long are its targets? Why are most of its runs a single token, and what does that cost in sentinels?
