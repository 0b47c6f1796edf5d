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
# # Lab 4 — RoBERTa's data pipeline: FULL-SENTENCES, dynamic masking, exact big batches
#
# In Chapter 4 you saw RoBERTa (Liu et al. 2019) keep BERT's model and change how it is fed. Three of those
# changes are plain code, and each has a trap that quietly changes what the model learns. You write them here:
#
# 1. **FULL-SENTENCES packing** (§4.2): fill every input with whole sentences, crossing document boundaries with a
#    separator, and the DOC-SENTENCES variant that does not cross them (4 points);
# 2. **dynamic masking** (§4.1): a collate function that pads a batch and masks it anew every time it is called —
#    fresh masks every epoch, the same masks for the same seed (3 points);
# 3. **exact big batches** (§3.1, Table 3): gradient accumulation over micro-batches whose loss is a mean over a
#    varying number of masked tokens, weighted so that the result *is* the big batch's gradient (3 points).
#
# Fill in every `raise NotImplementedError()`; run the test cell after each part. Your code is graded against
# `minilm.objectives.formats`, `minilm.objectives.mlm.DynamicMasking` and the one big batch, with the visible tests
# below and hidden ones of the same kind (10 points in all).

# %%
import random

import torch
import torch.nn.functional as F
from torch import nn

from minilm.objectives.formats import doc_sentences as reference_doc_sentences
from minilm.objectives.formats import full_sentences as reference_full_sentences
from minilm.objectives.mlm import DynamicMasking, MaskingConfig, mask_tokens
from minilm.objectives.segments import Template
from minilm.utils import reproducible

reproducible(seed=0, threads=1)
BOS, PAD, EOS, MASK, VOCAB_SIZE = 0, 1, 2, 3, 60  # RoBERTa's <s>, <pad>, </s>, <mask> and a tiny vocabulary
SPECIAL_IDS = (BOS, PAD, EOS, MASK)

# %% [markdown]
# ## Part 1 — FULL-SENTENCES and DOC-SENTENCES (4 points)
#
# > "FULL-SENTENCES: Each input is packed with full sentences sampled contiguously from one or more documents, such
# > that the total length is at most 512 tokens. Inputs may cross document boundaries. When we reach the end of one
# > document, we begin sampling sentences from the next document and add an extra separator token between
# > documents." (Liu et al. 2019, §4.2)
#
# `documents` is a list of documents, each a list of sentences, each a list of token ids (no special tokens). Every
# input is `<s> ... </s>`, so `max_tokens - 2` ids of text fit in one. Go through the sentences in order:
#
# - a sentence goes into the current input if it fits (with its separator, below); otherwise the current input is
#   finished and the sentence starts a new one — a sentence is never split (you may assume each one fits in an
#   empty input: at most `max_tokens - 2` ids);
# - where a document begins and the current input already holds text, put one separator `</s>` (`eos_id`) before
#   its first sentence; it counts towards the length. An input that *starts* with a new document needs none;
# - the last input is finished too, however short.
#
# With `cross_documents=False` (DOC-SENTENCES) every document starts a new input instead: no separators at all.
# Return the inputs as lists of ids, `<s>` and `</s>` included.


# %% nbgrader={"grade": false, "grade_id": "answer_pack_sentences", "locked": false, "schema_version": 3, "solution": true}
def pack_sentences(documents, max_tokens, bos_id, eos_id, cross_documents=True):
    """documents: [[sentence ids, ...], ...] -> [[bos_id, ..., eos_id], ...], each of at most max_tokens ids."""
    ### BEGIN SOLUTION
    budget = max_tokens - 2  # <s> and </s>
    inputs, current = [], []

    def finish():
        if current:
            inputs.append([bos_id, *current, eos_id])
        current.clear()

    for document in documents:
        if not cross_documents:
            finish()
        for k, sentence in enumerate(document):
            separator = [eos_id] if k == 0 and current else []  # a new document after some text
            if len(current) + len(separator) + len(sentence) > budget:
                finish()
                separator = []
            current.extend(separator + list(sentence))
    finish()
    return inputs
    ### END SOLUTION


# %% [markdown]
# A worked example (inputs of at most 9 ids, so 7 of text): the first document fills an input; the second does
# not fit after it, so it starts a new input, and the third joins it after a separator.

# %%
toy = [[[10, 11, 12], [13, 14]], [[20, 21, 22, 23]], [[30], [31, 32]]]
for ids in pack_sentences(toy, 9, BOS, EOS):
    print(ids)


# %%
def random_documents(rng, n_documents, max_sentence):
    """Documents of 1-6 sentences of 1..max_sentence ids (no special ids)."""
    return [
        [[rng.randrange(10, VOCAB_SIZE) for _ in range(rng.randint(1, max_sentence))] for _ in range(rng.randint(1, 6))]
        for _ in range(n_documents)
    ]


def reference_inputs(documents, max_tokens, cross_documents=True):
    pack = reference_full_sentences if cross_documents else reference_doc_sentences
    return [e["input_ids"].tolist() for e in pack(documents, max_tokens, Template.roberta(BOS, EOS))]


# %% nbgrader={"grade": true, "grade_id": "q1_full_sentences", "locked": true, "points": 3, "schema_version": 3, "solution": false}
assert pack_sentences(toy, 9, BOS, EOS) == [
    [0, 10, 11, 12, 13, 14, 2],
    [0, 20, 21, 22, 23, 2, 30, 2],
    [0, 31, 32, 2],
], "see the worked example above"
rng = random.Random(0)
for trial in range(200):
    max_tokens = rng.randint(4, 24)
    documents = random_documents(rng, rng.randint(1, 8), max_tokens - 2)
    ours, expected = pack_sentences(documents, max_tokens, BOS, EOS), reference_inputs(documents, max_tokens)
    assert ours == expected, f"case {trial}: {ours} != {expected} (documents {documents}, max_tokens {max_tokens})"
    assert all(len(ids) <= max_tokens for ids in ours), "an input is longer than max_tokens"
### BEGIN HIDDEN TESTS
assert pack_sentences([[[5, 6, 7]]], 5, BOS, EOS) == [[0, 5, 6, 7, 2]], "a sentence that exactly fills an input"
assert pack_sentences([[[5]], [[6]]], 4, BOS, EOS) == [[0, 5, 2], [0, 6, 2]], "no room for separator + sentence"
assert pack_sentences([[[5]], [[6]]], 5, BOS, EOS) == [[0, 5, 2, 6, 2]], "separator + sentence exactly fill it"
for trial in range(300):
    max_tokens = rng.randint(3, 12)
    documents = random_documents(rng, rng.randint(1, 12), max_tokens - 2)
    assert pack_sentences(documents, max_tokens, BOS, EOS) == reference_inputs(documents, max_tokens), trial
### END HIDDEN TESTS

# %% nbgrader={"grade": true, "grade_id": "q1_doc_sentences", "locked": true, "points": 1, "schema_version": 3, "solution": false}
assert pack_sentences(toy, 9, BOS, EOS, cross_documents=False) == [
    [0, 10, 11, 12, 13, 14, 2],
    [0, 20, 21, 22, 23, 2],
    [0, 30, 31, 32, 2],
]
rng = random.Random(1)  # its own cases: this question does not depend on the one above
for trial in range(200):
    max_tokens = rng.randint(4, 24)
    documents = random_documents(rng, rng.randint(1, 8), max_tokens - 2)
    ours = pack_sentences(documents, max_tokens, BOS, EOS, cross_documents=False)
    assert ours == reference_inputs(documents, max_tokens, cross_documents=False), f"case {trial}"
### BEGIN HIDDEN TESTS
assert pack_sentences([[[5]], [[6]]], 9, BOS, EOS, cross_documents=False) == [[0, 5, 2], [0, 6, 2]]
### END HIDDEN TESTS

# %% [markdown]
# How full are the inputs? FULL-SENTENCES wastes room only where a sentence does not fit; DOC-SENTENCES also at the
# end of every document (RoBERTa raised the batch size for those short inputs to keep the tokens per batch even).

# %%
documents = random_documents(random.Random(1), 200, 30)
for name, cross in (("FULL-SENTENCES", True), ("DOC-SENTENCES", False)):
    inputs = pack_sentences(documents, 64, BOS, EOS, cross_documents=cross)
    fill = sum(len(ids) for ids in inputs) / (64 * len(inputs))
    print(f"{name:15s} {len(inputs):4d} inputs of at most 64 ids, {fill:.0%} full on average")

# %% [markdown]
# ## Part 2 — Dynamic masking in a collate function (3 points)
#
# BERT masked its data once, ahead of training (RoBERTa's baseline duplicated it 10 times: each sequence was seen
# with the same mask 4 times in 40 epochs). RoBERTa masks each batch **when it is built**, so every epoch sees new
# masks. A collate function turns a list of examples into a batch; write one that masks:
#
# - `__init__` keeps the ids and options and creates **one** `torch.Generator` seeded with `seed`, used by every
#   call: each call then draws new masks, and two collates with the same seed draw the same masks, call by call
#   (reproducible runs);
# - `__call__(examples)`: each example is a dict with a 1-D `input_ids` (long) and `special_tokens_mask` (bool).
#   Right-pad them to the longest: `input_ids` with `pad_id`, `special_tokens_mask` with True (padding is never
#   masked), and build `attention_mask` (1 on real tokens, 0 on padding). Then mask with Lab 3's function,
#   `minilm.objectives.mlm.mask_tokens(input_ids, special_tokens_mask, mask_id, vocab_size, mask_prob,
#   generator=..., special_ids=...)` (its 80/10/10 defaults), and return a dict with `input_ids` (the corrupted
#   ids), `attention_mask` and `labels`. Do not modify the examples: the same ones come back next epoch.
#
# Use plain torch (`torch.full`, slicing); not `minilm`'s `pad_batch`, `MaskingConfig` or `DynamicMasking`.


# %% nbgrader={"grade": false, "grade_id": "answer_DynamicMaskingCollate", "locked": false, "schema_version": 3, "solution": true}
class DynamicMaskingCollate:
    def __init__(self, mask_id, vocab_size, pad_id, special_ids=(), mask_prob=0.15, seed=0):
        ### BEGIN SOLUTION
        self.mask_id, self.vocab_size, self.pad_id = mask_id, vocab_size, pad_id
        self.special_ids, self.mask_prob = tuple(special_ids), mask_prob
        self.generator = torch.Generator().manual_seed(seed)
        ### END SOLUTION

    def __call__(self, examples):
        ### BEGIN SOLUTION
        width = max(len(e["input_ids"]) for e in examples)
        input_ids = torch.full((len(examples), width), self.pad_id, dtype=torch.long)  # (B, T)
        special = torch.ones(len(examples), width, dtype=torch.bool)  # padding counts as special
        attention_mask = torch.zeros(len(examples), width, dtype=torch.long)
        for row, e in enumerate(examples):
            n = len(e["input_ids"])
            input_ids[row, :n], special[row, :n], attention_mask[row, :n] = e["input_ids"], e["special_tokens_mask"], 1
        corrupted, labels = mask_tokens(
            input_ids,
            special,
            self.mask_id,
            self.vocab_size,
            self.mask_prob,
            generator=self.generator,
            special_ids=self.special_ids,
        )
        return {"input_ids": corrupted, "attention_mask": attention_mask, "labels": labels}
        ### END SOLUTION


# %%
def as_examples(inputs):
    """Packed inputs (lists of ids) as the examples a dataset yields."""
    return [
        {"input_ids": torch.tensor(ids), "special_tokens_mask": torch.tensor([i in SPECIAL_IDS for i in ids])}
        for ids in inputs
    ]


examples = as_examples(reference_inputs(random_documents(random.Random(2), 40, 12), 24))  # minilm's packing
print(len(examples), "examples of", sorted({len(e["input_ids"]) for e in examples})[:3], "... ids")


def masking_config(mask_prob=0.15):
    return MaskingConfig(MASK, VOCAB_SIZE, PAD, SPECIAL_IDS, mask_prob=mask_prob)


# %% nbgrader={"grade": true, "grade_id": "q2_dynamic", "locked": true, "points": 2, "schema_version": 3, "solution": false}
before = [{k: v.clone() for k, v in e.items()} for e in examples]
collate = DynamicMaskingCollate(MASK, VOCAB_SIZE, PAD, SPECIAL_IDS, seed=0)
epoch_1, epoch_2 = collate(examples), collate(examples)  # the same examples, two epochs
assert not torch.equal(epoch_1["labels"], epoch_2["labels"]), "each epoch must draw new masks"
again = DynamicMaskingCollate(MASK, VOCAB_SIZE, PAD, SPECIAL_IDS, seed=0)
again_1, again_2 = again(examples), again(examples)
assert torch.equal(epoch_1["input_ids"], again_1["input_ids"]) and torch.equal(epoch_2["labels"], again_2["labels"]), (
    "the same seed must give the same masks, epoch by epoch"
)
other = DynamicMaskingCollate(MASK, VOCAB_SIZE, PAD, SPECIAL_IDS, seed=1)(examples)
assert not torch.equal(other["labels"], epoch_1["labels"]), "another seed, other masks"
assert all(torch.equal(e[k], b[k]) for e, b in zip(examples, before, strict=True) for k in e), (
    "the examples must not be modified"
)
### BEGIN HIDDEN TESTS
reference = DynamicMasking(masking_config(), seed=5)
ours = DynamicMaskingCollate(MASK, VOCAB_SIZE, PAD, SPECIAL_IDS, seed=5)
masks = []
for epoch in range(6):
    got, expected = ours(examples[:8]), reference(examples[:8])
    assert torch.equal(got["labels"], expected["labels"]), f"epoch {epoch}: masks differ from minilm's DynamicMasking"
    masks.append(got["labels"])
assert len({tuple(m.flatten().tolist()) for m in masks}) == 6, "every epoch its own masks"
### END HIDDEN TESTS

# %% nbgrader={"grade": true, "grade_id": "q2_padding", "locked": true, "points": 1, "schema_version": 3, "solution": false}
batch = DynamicMaskingCollate(MASK, VOCAB_SIZE, PAD, SPECIAL_IDS, mask_prob=0.5, seed=3)(examples)
lengths = torch.tensor([len(e["input_ids"]) for e in examples])
width = int(lengths.max())
assert batch["input_ids"].shape == batch["labels"].shape == batch["attention_mask"].shape == (len(examples), width)
real = torch.arange(width)[None, :] < lengths[:, None]  # (B, T)
assert torch.equal(batch["attention_mask"], real.long()), "attention_mask: 1 on real tokens, 0 on padding"
assert (batch["input_ids"][~real] == PAD).all(), "padding must be pad_id"
assert (batch["labels"][~real] == -100).all(), "padding is never masked"
expected = DynamicMasking(masking_config(0.5), seed=3)(examples)
for key in ("input_ids", "attention_mask", "labels"):
    assert torch.equal(batch[key], expected[key]), f"{key} differs from minilm's DynamicMasking"
### BEGIN HIDDEN TESTS
short = [e for e in examples if len(e["input_ids"]) < width][:5] + examples[:1]
got = DynamicMaskingCollate(MASK, VOCAB_SIZE, PAD, SPECIAL_IDS, mask_prob=1.0, seed=4)(short)
expected = DynamicMasking(masking_config(1.0), seed=4)(short)
assert all(torch.equal(got[k], expected[k]) for k in ("input_ids", "attention_mask", "labels"))
specials = torch.isin(expected["input_ids"], torch.tensor([BOS, EOS])) & (expected["labels"] == -100)
assert specials.any() and ((got["labels"] != -100) == (expected["attention_mask"].bool() & ~specials)).all()
# special_ids at its default (): the examples' special_tokens_mask alone says which positions are never masked
got = DynamicMaskingCollate(MASK, VOCAB_SIZE, PAD, mask_prob=1.0, seed=6)(short)
expected = DynamicMasking(MaskingConfig(MASK, VOCAB_SIZE, PAD, mask_prob=1.0), seed=6)(short)
assert torch.equal(got["labels"], expected["labels"]), "special positions: the examples' special_tokens_mask"
### END HIDDEN TESTS

# %% [markdown]
# Static vs dynamic, for one sequence over 6 epochs: the static dataset shows the same masked positions again and
# again; the collate shows new ones every epoch.

# %%
collate = DynamicMaskingCollate(MASK, VOCAB_SIZE, PAD, SPECIAL_IDS, seed=0)
static = DynamicMaskingCollate(MASK, VOCAB_SIZE, PAD, SPECIAL_IDS, seed=0)(examples[:1])  # masked once, kept
for epoch in range(6):
    dynamic = collate(examples[:1])
    print(
        f"epoch {epoch}: static {(static['labels'][0] != -100).nonzero().flatten().tolist()}, "
        f"dynamic {(dynamic['labels'][0] != -100).nonzero().flatten().tolist()}"
    )

# %% [markdown]
# ## Part 3 — Exact big batches under gradient accumulation (3 points)
#
# RoBERTa trains with batches of 8K sequences (Table 3); on small hardware a batch is split into micro-batches whose
# gradients are accumulated. The MLM loss is a **mean over the masked tokens**, and micro-batches hold different
# numbers of them, so the usual `loss / n_micro_batches` is *not* the big batch's gradient. With $n_k$ masked tokens
# in micro-batch $k$, $L_k$ its mean loss and $N = \sum_k n_k$:
#
# $$L = \frac{1}{N} \sum_{\text{masked } t} \ell_t = \sum_k \frac{n_k}{N} L_k
#   \quad\Rightarrow\quad \nabla L = \sum_k \frac{n_k}{N} \nabla L_k .$$
#
# `accumulate_gradients(model, micro_batches)`: set every parameter's `.grad` to zero first (gradients left over
# from before must not count), then for each micro-batch compute `micro_loss(model, batch)` and backpropagate it
# with its weight $n_k/N$ ($n_k$: positions whose label is not −100). A micro-batch with no masked token has a NaN
# mean (0/0) and weight 0: skip it. Return $L$, the big batch's loss, as a scalar tensor. (`minilm.train.Trainer`
# does the same with `counts=`, across processes too.)

# %%
torch.manual_seed(0)
model = nn.Sequential(nn.Embedding(VOCAB_SIZE, 16), nn.Linear(16, VOCAB_SIZE))  # a tiny MLM: (B, T) -> (B, T, V)


def micro_loss(model, batch):
    """The MLM loss of one micro-batch: the mean over its masked tokens."""
    logits = model(batch["input_ids"])  # (B, T, V)
    return F.cross_entropy(logits.flatten(0, 1), batch["labels"].flatten(), ignore_index=-100)


# %% nbgrader={"grade": false, "grade_id": "answer_accumulate_gradients", "locked": false, "schema_version": 3, "solution": true}
def accumulate_gradients(model, micro_batches):
    """Leave the big batch's gradient in every parameter's .grad; return the big batch's loss."""
    ### BEGIN SOLUTION
    for p in model.parameters():
        p.grad = torch.zeros_like(p)
    counts = [int((batch["labels"] != -100).sum()) for batch in micro_batches]
    total = sum(counts)
    loss = torch.zeros(())
    for batch, n in zip(micro_batches, counts, strict=True):
        if n == 0:
            continue
        part = micro_loss(model, batch) * (n / total)
        part.backward()
        loss = loss + part.detach()
    return loss
    ### END SOLUTION


# %%
def big_batch_gradients(model, micro_batches):
    """The reference: one forward and backward pass over all the micro-batches at once."""
    model.zero_grad()
    big = {k: torch.cat([b[k] for b in micro_batches]) for k in ("input_ids", "labels")}
    loss = micro_loss(model, big)
    loss.backward()
    return loss.detach(), [p.grad.clone() for p in model.parameters()]


mlm_inputs = reference_inputs(random_documents(random.Random(3), 60, 12), 24)  # minilm's packing and masking


def micro_batches_of(sizes, mask_prob, seed):
    """Micro-batches of ``sizes`` examples each (all 24 ids wide): different numbers of masked tokens."""
    collate = DynamicMasking(masking_config(mask_prob), seed=seed)
    rows = as_examples([ids + [PAD] * (24 - len(ids)) for ids in mlm_inputs])
    out, start = [], 0
    for size in sizes:
        out.append(collate(rows[start : start + size]))
        start += size
    return out


# %% nbgrader={"grade": true, "grade_id": "q3_gradients", "locked": true, "points": 2, "schema_version": 3, "solution": false}
micro = micro_batches_of([2, 5, 1], mask_prob=0.2, seed=0)
print("masked tokens per micro-batch:", [int((b["labels"] != -100).sum()) for b in micro])
expected_loss, expected_grads = big_batch_gradients(model, micro)
for p in model.parameters():
    p.grad = torch.full_like(p, 7.0)  # left over from an earlier step
accumulate_gradients(model, micro)
for (name, p), g in zip(model.named_parameters(), expected_grads, strict=True):
    assert torch.allclose(p.grad, g, atol=1e-6), f"{name}: the accumulated gradient is not the big batch's"
### BEGIN HIDDEN TESTS
micro = micro_batches_of([3, 1, 4, 2], mask_prob=0.3, seed=1)
micro.append({k: v.clone() for k, v in micro[0].items()})
micro[-1]["labels"].fill_(-100)  # a micro-batch without a masked token
expected_loss, expected_grads = big_batch_gradients(model, micro)
accumulate_gradients(model, micro)
assert all(torch.allclose(p.grad, g, atol=1e-6) for p, g in zip(model.parameters(), expected_grads, strict=True))
### END HIDDEN TESTS

# %% nbgrader={"grade": true, "grade_id": "q3_loss", "locked": true, "points": 1, "schema_version": 3, "solution": false}
micro = micro_batches_of([4, 1, 3], mask_prob=0.25, seed=2)
expected_loss, _ = big_batch_gradients(model, micro)
loss = accumulate_gradients(model, micro)
assert loss.dim() == 0 and torch.allclose(loss, expected_loss, atol=1e-6), f"{float(loss)} != {float(expected_loss)}"
### BEGIN HIDDEN TESTS
micro = micro_batches_of([1, 6], mask_prob=0.4, seed=3)
expected_loss, _ = big_batch_gradients(model, micro)
assert torch.allclose(accumulate_gradients(model, micro), expected_loss, atol=1e-6)
micro.append({k: v.clone() for k, v in micro[0].items()})
micro[-1]["labels"].fill_(-100)  # a micro-batch without a masked token: its NaN mean must not reach the loss
assert torch.allclose(accumulate_gradients(model, micro), expected_loss, atol=1e-6)
### END HIDDEN TESTS

# %% [markdown]
# How wrong is the usual `loss / n_micro_batches`? Its gradient against the big batch's, on micro-batches as
# uneven as above (a short micro-batch's few masked tokens get as much say as a long one's many):

# %%
micro = micro_batches_of([1, 7], mask_prob=0.15, seed=4)
_, exact = big_batch_gradients(model, micro)
model.zero_grad()
for batch in micro:
    (micro_loss(model, batch) / len(micro)).backward()
naive = [p.grad.clone() for p in model.parameters()]
error = max(float((a - b).norm() / b.norm()) for a, b in zip(naive, exact, strict=True))
print(f"masked tokens {[int((b['labels'] != -100).sum()) for b in micro]}: naive gradient off by {error:.0%}")

# %% [markdown]
# ## Going further (not graded)
# - Pack real text: `minilm.objectives.formats.make_examples("full_sentences", documents, tokenizer, 128)` on the
#   novels, with RoBERTa's byte-level BPE (`minilm.tokenizers.train_tokenizer(..., "roberta", ...)`). How full are
#   the inputs of each format?
# - Train Chapter 4's tiny RoBERTa with `StaticMaskedDataset` and with your collate for the same number of steps.
#   Which overfits first, and why does it need many epochs to show?
# - Run `minilm.train.Trainer` with `grad_accum=4` with and without `counts=`, and compare the first step's
#   gradient with `grad_accum=1`.
