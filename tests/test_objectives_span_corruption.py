"""T5's span corruption and the T5 paper's other objectives on synthetic texts of distinct token ids (so every kept,
replaced or dropped token can be traced): properties over many seeds, and numpy ports of T5's own code as oracles
(``random_spans_noise_mask`` for the counts, its random draws differ; ``random_spans_helper`` for exact values)."""

import numpy as np
import pytest
import torch
from scipy import stats

from minilm.objectives import IGNORE_INDEX
from minilm.objectives.span_corruption import (
    T5_OBJECTIVES,
    DynamicSpanCorruption,
    SpanCorruptionConfig,
    bert_style_corruption,
    drop_corrupted_tokens,
    iid_noise_mask,
    noise_span_counts,
    noise_span_to_unique_sentinel,
    random_spans_helper,
    random_spans_noise_mask,
    reconstruct_spans,
    span_corruption,
    span_corruption_example,
    span_corruption_token_ids,
)
from minilm.tokenizers import train_tokenizer

PAD, EOS, VOCAB = 0, 1, 1000
SENTINELS = tuple(range(999, 899, -1))  # <extra_id_i> = 999 - i: decreasing ids from the top, as T5's
MASK = SENTINELS[0]  # T5's BERT-style mask is the sentinel <extra_id_0>
SPECIALS = (PAD, EOS, 2, *SENTINELS)
TOKEN_IDS = dict(sentinel_ids=SENTINELS, eos_id=EOS, mask_id=MASK, vocab_size=VOCAB, special_ids=SPECIALS)
CONFIGS = [(0.15, 3.0), (0.15, 2.0), (0.15, 5.0), (0.15, 10.0), (0.5, 3.0)]  # (noise_density, mean span length)


def gen(seed):
    return torch.Generator().manual_seed(seed)


def text(n, first=10):
    """n distinct ordinary token ids (no special, no sentinel): first, first + 1, ..."""
    return torch.arange(first, first + n)


def runs(mask):
    """How many runs of consecutive True the mask has (its 0 -> 1 transitions, the start counting as a 0)."""
    mask = np.asarray(mask, dtype=bool)
    return int(np.sum(mask & ~np.concatenate([[False], mask[:-1]])))


def sentinel_rank(ids):
    """The i of each sentinel <extra_id_i> in ids, in order."""
    return [SENTINELS.index(t) for t in ids.tolist() if t in SENTINELS]


# ---------------------------------------------------------------------------------------------------- T5's code, ported


def t5_random_spans_noise_mask(length, noise_density, mean_noise_span_length, rng):
    """Line-by-line numpy port of T5's TensorFlow ``random_spans_noise_mask`` (t5/data/preprocessors.py): float32
    arithmetic, np.round halves to even as tf.round; ``rng`` stands in for the stateless seeds."""
    orig_length = length
    # increase length to avoid degeneracy
    length = max(length, 2)
    num_noise_tokens = int(np.round(np.float32(length) * np.float32(noise_density)))
    # avoid degeneracy by ensuring positive numbers of noise and nonnoise tokens.
    num_noise_tokens = min(max(num_noise_tokens, 1), length - 1)
    num_noise_spans = int(np.round(np.float32(num_noise_tokens) / np.float32(mean_noise_span_length)))
    # avoid degeneracy by ensuring positive number of noise spans
    num_noise_spans = max(num_noise_spans, 1)
    num_nonnoise_tokens = length - num_noise_tokens

    def _random_segmentation(num_items, num_segments):
        first_in_segment = np.pad(rng.permutation(np.int32(np.arange(num_items - 1) < num_segments - 1)), [1, 0])
        segment_id = np.cumsum(first_in_segment)
        return np.bincount(segment_id)  # tf.math.segment_sum(tf.ones_like(segment_id), segment_id)

    noise_span_lengths = _random_segmentation(num_noise_tokens, num_noise_spans)
    nonnoise_span_lengths = _random_segmentation(num_nonnoise_tokens, num_noise_spans)
    interleaved_span_lengths = np.reshape(
        np.stack([nonnoise_span_lengths, noise_span_lengths], axis=1), [num_noise_spans * 2]
    )
    span_starts = np.cumsum(interleaved_span_lengths)[:-1]
    span_start_indicator = np.zeros(length, dtype=np.int32)
    np.add.at(span_start_indicator, span_starts, 1)  # tf.math.unsorted_segment_sum(ones, span_starts, length)
    span_num = np.cumsum(span_start_indicator)
    is_noise = np.equal(span_num % 2, 1)
    return is_noise[:orig_length]


def t5_random_spans_helper(
    inputs_length, noise_density, mean_noise_span_length, extra_tokens_per_span_inputs, extra_tokens_per_span_targets
):
    """T5's ``random_spans_helper``, verbatim but for the logging."""

    def _tokens_length_to_inputs_length_targets_length(tokens_length):
        num_noise_tokens = int(round(tokens_length * noise_density))
        num_nonnoise_tokens = tokens_length - num_noise_tokens
        num_noise_spans = int(round(num_noise_tokens / mean_noise_span_length))
        return (
            num_nonnoise_tokens + num_noise_spans * extra_tokens_per_span_inputs + 1,
            num_noise_tokens + num_noise_spans * extra_tokens_per_span_targets + 1,
        )

    tokens_length = inputs_length - 1
    while _tokens_length_to_inputs_length_targets_length(tokens_length + 1)[0] <= inputs_length:
        tokens_length += 1
    inputs_length, targets_length = _tokens_length_to_inputs_length_targets_length(tokens_length)
    if noise_density == 0.5 and targets_length > inputs_length:
        tokens_length -= 1
        targets_length -= 1
    return tokens_length, targets_length


def t5_unique_sentinels(ids, mask):
    """T5's noise_span_to_unique_sentinel, written as a plain loop: each run of True -> the next sentinel."""
    out, previous, i = [], False, 0
    for token, noise in zip(ids.tolist(), mask.tolist(), strict=True):
        if noise and not previous:
            out.append(SENTINELS[i])
            i += 1
        elif not noise:
            out.append(token)
        previous = noise
    return out


# ---------------------------------------------------------------------------------------------------- noise masks


@pytest.mark.parametrize("density, mean", CONFIGS)
def test_random_spans_counts_match_t5(density, mean):
    rng = np.random.default_rng(0)
    for length in range(2, 601):
        mask = random_spans_noise_mask(length, density, mean, gen(length))
        oracle = t5_random_spans_noise_mask(length, density, mean, rng)
        num_noise, num_spans = noise_span_counts(length, density, mean)
        assert mask.dtype == torch.bool and mask.shape == (length,)
        assert int(mask.sum()) == int(oracle.sum()) == num_noise
        assert runs(mask) == runs(oracle) == num_spans
        assert not mask[0] and mask[-1]  # starts with non-noise, ends with noise, as T5's interleaving does


def test_counts_are_tensorflow_float32():
    # 190 * 0.15 = 28.5, but float32(0.15) > 0.15: T5 corrupts 29 tokens in 10 spans, float64 would give 28 in 9
    assert noise_span_counts(190) == (29, 10) and round(190 * 0.15) == 28
    assert noise_span_counts(30) == (4, 1)  # 4.5 rounds half to even
    assert noise_span_counts(568) == (85, 28)
    # T5 works on max(length, 2) and cuts: no noise for 0 or 1 token
    assert random_spans_noise_mask(0).shape == (0,) and random_spans_noise_mask(1).tolist() == [False]


def test_random_spans_are_uniform_over_t5s_masks():
    # 12 tokens, density 0.5, mean 3: 6 noise tokens in 2 spans, 6 others in 2 spans; 5 x 5 masks, all equally likely
    assert noise_span_counts(12, 0.5, 3.0) == (6, 2)
    g, draws = gen(0), 2500
    seen = [tuple(random_spans_noise_mask(12, 0.5, 3.0, g).tolist()) for _ in range(draws)]
    counts = {}
    for mask in seen:
        assert not mask[0] and mask[-1] and sum(mask) == 6 and runs(mask) == 2
        counts[mask] = counts.get(mask, 0) + 1
    assert len(counts) == 25
    assert stats.chisquare(list(counts.values())).pvalue > 1e-3


def test_iid_noise_mask_rate():
    masks = torch.stack([iid_noise_mask(500, 0.15, gen(seed)) for seed in range(20)])
    assert masks.dtype == torch.bool and masks.shape == (20, 500)
    assert stats.binomtest(int(masks.sum()), masks.numel(), 0.15).pvalue > 1e-3


# ---------------------------------------------------------------------------------------------------- lengths


def test_random_spans_helper_matches_t5():
    assert random_spans_helper(512, 0.15, 3.0) == (568, 114)  # T5's baseline: 568 raw tokens, 114-token targets
    for inputs_length in (8, 16, 64, 100, 128, 256, 512, 513, 626, 1024, 2048):
        for density, mean in [*CONFIGS, (0.25, 3.0), (0.1, 3.0), (0.5, 1.0), (0.3, 8.0)]:
            for extra in [(1, 1), (1, 0), (2, 1)]:
                expected = t5_random_spans_helper(inputs_length, density, mean, *extra)
                assert random_spans_helper(inputs_length, density, mean, *extra) == expected


def test_t5s_568_tokens_fill_512_inputs_and_114_targets():
    inputs, targets = span_corruption(text(568), SENTINELS, 0.15, 3.0, gen(0), eos_id=EOS)
    assert (len(inputs), len(targets)) == (512, 114)


# ---------------------------------------------------------------------------------------------------- span corruption


def test_figure_2_example():
    words = "Thank you for inviting me to your party last week .".split()
    ids = torch.arange(10, 10 + len(words))
    mask = torch.tensor([w in ("for", "inviting", "last") for w in words])
    inputs, targets = span_corruption(ids, SENTINELS, noise_mask=mask)
    name = {10 + i: w for i, w in enumerate(words)} | {SENTINELS[0]: "<X>", SENTINELS[1]: "<Y>", SENTINELS[2]: "<Z>"}
    assert " ".join(name[t] for t in inputs.tolist()) == "Thank you <X> me to your party <Y> week ."
    assert " ".join(name[t] for t in targets.tolist()) == "<X> for inviting <Y> last <Z>"
    assert torch.equal(reconstruct_spans(inputs, targets, SENTINELS), ids)


@pytest.mark.parametrize("density, mean", CONFIGS)
def test_span_corruption_inputs_targets_and_inverse(density, mean):
    for length in [0, 1, 2, 3, 5, 10, 37, 100, 250]:
        for seed in range(8):
            ids = text(length)
            mask = random_spans_noise_mask(length, density, mean, gen(seed))
            inputs, targets = span_corruption(ids, SENTINELS, density, mean, gen(seed), eos_id=EOS)
            assert inputs.dtype == targets.dtype == torch.long
            assert inputs[-1] == EOS and targets[-1] == EOS
            inputs, targets = inputs[:-1], targets[:-1]
            assert inputs.tolist() == t5_unique_sentinels(ids, mask)  # same seed: the mask span_corruption drew
            assert targets.tolist() == t5_unique_sentinels(ids, ~mask)
            num_noise, k = int(mask.sum()), runs(mask)
            assert sentinel_rank(inputs) == list(range(k))  # <extra_id_0>, <extra_id_1>, ... in order
            assert len(inputs) == length - num_noise + k
            if length >= 2:
                assert (num_noise, k) == noise_span_counts(length, density, mean)
                # targets: <extra_id_0> span_0 <extra_id_1> span_1 ... span_{k-1}, no final sentinel (ends with noise)
                assert sentinel_rank(targets) == list(range(k)) and targets[0] == SENTINELS[0]
                assert targets[-1] not in SENTINELS and len(targets) == num_noise + k
            assert torch.equal(reconstruct_spans(inputs, targets, SENTINELS), ids)
            with_eos = span_corruption(ids, SENTINELS, density, mean, gen(seed), eos_id=EOS)
            assert torch.equal(reconstruct_spans(*with_eos, SENTINELS, eos_id=EOS), ids)


def test_iid_span_corruption_merges_runs_and_keeps_t5s_sentinel_shift():
    starts = set()
    for seed in range(60):
        ids = text(40)
        mask = iid_noise_mask(40, 0.3, gen(seed))
        inputs, targets = span_corruption(ids, SENTINELS, noise_mask=mask, eos_id=EOS)
        inputs, targets = inputs[:-1], targets[:-1]
        assert sentinel_rank(inputs) == list(range(runs(mask)))  # consecutive noise tokens share one sentinel
        assert sentinel_rank(targets) == list(range(runs(~mask)))  # the targets' sentinels number the kept runs
        assert inputs.tolist() == t5_unique_sentinels(ids, mask) and targets.tolist() == t5_unique_sentinels(ids, ~mask)
        if mask[0]:  # T5: the first corrupted run comes first in the targets, with no sentinel before it
            assert targets[0] == ids[0] and inputs[0] == SENTINELS[0]
        if not mask[-1]:  # the paper's final sentinel
            assert targets[-1] == SENTINELS[runs(~mask) - 1]
        assert torch.equal(reconstruct_spans(inputs, targets, SENTINELS), ids)
        starts.add(bool(mask[0]))
    assert starts == {True, False}


def test_too_many_spans_for_the_sentinels():
    with pytest.raises(ValueError, match="only 100 sentinels"):
        span_corruption(text(800), SENTINELS, noise_mask=iid_noise_mask(800, 0.5, gen(0)))
    three_runs = torch.tensor([True, False, True, False, True, True])
    assert noise_span_to_unique_sentinel(text(6), three_runs, SENTINELS[:3]).tolist() == [999, 11, 998, 13, 997]
    with pytest.raises(ValueError, match="only 2 sentinels"):
        noise_span_to_unique_sentinel(text(6), three_runs, SENTINELS[:2])


# ---------------------------------------------------------------------------------------------------- other objectives


def test_drop_corrupted_tokens():
    for seed in range(30):
        ids = text(100)
        mask = iid_noise_mask(100, 0.15, gen(seed))
        inputs, targets = drop_corrupted_tokens(ids, 0.15, gen(seed), eos_id=EOS)
        assert inputs[-1] == EOS and targets[-1] == EOS and len(inputs) + len(targets) == len(ids) + 2
        inputs, targets = inputs[:-1], targets[:-1]
        assert torch.equal(inputs, ids[~mask]) and torch.equal(targets, ids[mask])  # complementary, both in order
        assert sorted(inputs.tolist() + targets.tolist()) == ids.tolist()


def test_bert_style_corruption():
    n_noise = n_random = n_changed = n_tokens = 0
    for seed in range(40):
        ids = text(300)
        mask = iid_noise_mask(300, 0.15, gen(1000 + seed))
        inputs, targets = bert_style_corruption(
            ids, MASK, generator=gen(seed), vocab_size=VOCAB, special_ids=SPECIALS, noise_mask=mask, eos_id=EOS
        )
        assert torch.equal(targets, torch.cat([ids, torch.tensor([EOS])]))  # the whole text
        inputs = inputs[:-1]
        assert inputs.shape == ids.shape and torch.equal(inputs[~mask], ids[~mask])
        random = mask & (inputs != MASK)
        assert not torch.isin(inputs[random], torch.tensor(SPECIALS)).any()  # random tokens are never special
        n_noise, n_random = n_noise + int(mask.sum()), n_random + int(random.sum())
        drawn, _ = bert_style_corruption(ids, MASK, 0.15, gen(seed), vocab_size=VOCAB, special_ids=SPECIALS)
        n_changed, n_tokens = n_changed + int((drawn != ids).sum()), n_tokens + len(ids)
    assert stats.binomtest(n_random, n_noise, 0.1).pvalue > 1e-3  # 90% mask, 10% random
    assert stats.binomtest(n_changed, n_tokens, 0.15).pvalue > 1e-3  # i.i.d. 15% corrupted
    with pytest.raises(ValueError, match="vocab_size"):
        bert_style_corruption(text(10), MASK, 0.15, gen(0))


def test_mass_style_masks_every_corrupted_token():
    ids = text(200)
    mask = iid_noise_mask(200, 0.15, gen(0))
    inputs, targets = bert_style_corruption(ids, MASK, random_prob=0.0, noise_mask=mask)
    assert torch.equal(inputs, ids.masked_fill(mask, MASK)) and torch.equal(targets, ids)


# ---------------------------------------------------------------------------------------------------- config, examples


def test_config_defaults_and_validation():
    config = SpanCorruptionConfig()
    assert (config.corruption, config.noise_density, config.mean_noise_span_length) == ("spans", 0.15, 3.0)
    config.validate(length=568, num_sentinels=100)
    bad = [
        (dict(corruption="prefix_lm"), "corruption='prefix_lm'.*'spans'"),
        (dict(noise_density=0.0), "noise_density"),
        (dict(noise_density=1.0), "noise_density"),
        (dict(noise_density=float("nan")), "noise_density"),
        (dict(mean_noise_span_length=0.5), "mean_noise_span_length"),
        (dict(mean_noise_span_length=float("inf")), "mean_noise_span_length"),
    ]
    for kwargs, message in bad:
        with pytest.raises(ValueError, match=message):
            SpanCorruptionConfig(**kwargs)
    with pytest.raises(ValueError, match="150 corrupted spans but there are only 100 sentinels"):
        config.validate(length=3000, num_sentinels=100)
    with pytest.raises(ValueError, match="lower noise_density or raise mean_noise_span_length"):
        noise_span_counts(10, 0.9, 1.0)


@pytest.mark.parametrize("objective", T5_OBJECTIVES)
def test_example_dispatch(objective):
    ids = text(120)
    config = SpanCorruptionConfig(objective)
    example = span_corruption_example(ids.tolist(), config, gen(3), **TOKEN_IDS)  # a list is accepted too
    assert set(example) == {"input_ids", "labels"}
    g = gen(3)
    if objective == "spans":
        expected = span_corruption(ids, SENTINELS, 0.15, 3.0, g, eos_id=EOS)
    elif objective == "iid":
        expected = span_corruption(ids, SENTINELS, eos_id=EOS, noise_mask=iid_noise_mask(120, 0.15, g))
    elif objective == "drop":
        expected = drop_corrupted_tokens(ids, 0.15, g, eos_id=EOS)
    else:
        random_prob = 0.1 if objective == "bert" else 0.0
        expected = bert_style_corruption(
            ids, MASK, 0.15, g, random_prob=random_prob, vocab_size=VOCAB, special_ids=SPECIALS, eos_id=EOS
        )
    assert torch.equal(example["input_ids"], expected[0]) and torch.equal(example["labels"], expected[1])
    again = span_corruption_example(ids, config, gen(3), **TOKEN_IDS)
    assert torch.equal(again["input_ids"], example["input_ids"])  # same seed, same corruption
    others = {tuple(span_corruption_example(ids, config, gen(s), **TOKEN_IDS)["input_ids"].tolist()) for s in range(5)}
    assert len(others) > 1


def test_example_needs_the_right_ids():
    with pytest.raises(ValueError, match="mask_id"):
        span_corruption_example(text(10), SpanCorruptionConfig("bert"), gen(0), sentinel_ids=SENTINELS, eos_id=EOS)
    with pytest.raises(ValueError, match="ONE text"):
        span_corruption_example(text(10)[None], SpanCorruptionConfig(), gen(0), **TOKEN_IDS)
    with pytest.raises(ValueError, match="integers"):
        span_corruption(text(10).float(), SENTINELS)
    with pytest.raises(ValueError, match="noise_mask"):
        span_corruption(text(10), SENTINELS, noise_mask=torch.zeros(9, dtype=torch.bool))


def test_dynamic_span_corruption_batches():
    texts = [{"input_ids": text(n)} for n in (30, 64, 7, 50)]
    collate = DynamicSpanCorruption(SpanCorruptionConfig(), TOKEN_IDS, PAD, seed=0)
    batch = collate(texts)
    assert set(batch) == {"input_ids", "attention_mask", "labels"}
    inputs, labels = [], []
    g = gen(0)
    for t in texts:
        example = span_corruption_example(t["input_ids"], SpanCorruptionConfig(), g, **TOKEN_IDS)
        inputs.append(example["input_ids"])
        labels.append(example["labels"])
    assert batch["input_ids"].shape == (4, max(map(len, inputs)))
    assert batch["labels"].shape == (4, max(map(len, labels)))
    for row, (source, target) in enumerate(zip(inputs, labels, strict=True)):
        assert torch.equal(batch["input_ids"][row, : len(source)], source)
        assert (batch["input_ids"][row, len(source) :] == PAD).all()
        assert batch["attention_mask"][row].sum() == len(source)
        assert torch.equal(batch["labels"][row, : len(target)], target)
        assert (batch["labels"][row, len(target) :] == IGNORE_INDEX).all()
    assert (batch["labels"] == IGNORE_INDEX).any()  # targets of different lengths are padded with -100
    again = DynamicSpanCorruption(SpanCorruptionConfig(), TOKEN_IDS, PAD, seed=0)(texts)
    assert all(torch.equal(batch[k], again[k]) for k in batch)  # same seed, same batch
    fresh = collate(texts)
    assert not torch.equal(fresh["input_ids"], batch["input_ids"])  # new corruption at each read
    global_rng = DynamicSpanCorruption(SpanCorruptionConfig("iid"), TOKEN_IDS, PAD)
    torch.manual_seed(5)
    first = global_rng(texts)
    torch.manual_seed(5)
    assert torch.equal(global_rng(texts)["labels"], first["labels"])  # seed=None: torch's global generator


def test_token_ids_from_a_t5_tokenizer():
    lines = ["to be or not to be that is the question", "whether tis nobler in the mind to suffer"] * 10
    t5 = train_tokenizer(lines, "t5", vocab_size=200)
    token_ids = span_corruption_token_ids(t5)
    assert token_ids["sentinel_ids"] == tuple(t5.sentinel_ids) and len(token_ids["sentinel_ids"]) == 100
    assert token_ids["mask_id"] == t5.token_to_id("<extra_id_0>") and token_ids["eos_id"] == t5.eos_id == 1
    assert set(token_ids["sentinel_ids"]) <= set(token_ids["special_ids"]) and token_ids["vocab_size"] == t5.vocab_size
    ids = torch.tensor(t5.encode(" ".join(lines[:4]), add_special_tokens=False))
    example = span_corruption_example(ids, SpanCorruptionConfig(), gen(0), **token_ids)
    assert t5.decode(example["input_ids"], skip_special_tokens=False).count("<extra_id_0>") == 1
    restored = reconstruct_spans(example["input_ids"], example["labels"], token_ids["sentinel_ids"], eos_id=1)
    assert torch.equal(restored, ids)
    bert = train_tokenizer(lines, "bert", vocab_size=200)
    with pytest.raises(ValueError, match="family 't5'"):
        span_corruption_token_ids(bert)
