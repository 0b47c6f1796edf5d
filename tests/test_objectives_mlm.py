"""Masked language modelling: selection rates, 80/10/10, special tokens, whole words, losses, static vs dynamic."""

import math
import random

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from minilm.objectives.mlm import (
    DynamicMasking,
    MaskingConfig,
    StaticMaskedDataset,
    is_word_start,
    mask_tokens,
    masked_positions,
    mlm_loss,
    ngram_spans,
    pad_batch,
    word_ids_from_encoding,
    word_ids_from_starts,
)

PAD, UNK, CLS, SEP, MASK = 0, 1, 2, 3, 4
SPECIAL = (PAD, UNK, CLS, SEP, MASK)
V = 1000
WORDS = (
    "the a cat dog sat ran home slowly quickly garden gardener unbelievable believe walked walking table "
    "under over river mountain bright darkness wonderful terrible happy sad of and to in"
).split()


@pytest.fixture(scope="module")
def bert_tokenizer():
    """A small WordPiece tokenizer trained on synthetic sentences (long words end up in ## pieces)."""
    from minilm.tokenizers import train_tokenizer

    rng = random.Random(0)
    lines = [" ".join(rng.choice(WORDS) for _ in range(rng.randint(4, 10))) + "." for _ in range(300)]
    return train_tokenizer(lines, "bert", vocab_size=120)


def assert_binomial(count, n, p, sigmas=4.0):
    """count ~ Binomial(n, p) within ``sigmas`` standard deviations."""
    count, n = int(count), int(n)
    sd = math.sqrt(n * p * (1 - p))
    assert abs(count - n * p) <= sigmas * sd, f"{count}/{n} = {count / n:.3f}, expected {p:.3f} ± {sigmas * sd / n:.3f}"


def make_batch(b=128, t=256, seed=0):
    """[CLS] tokens [SEP] [PAD]...: rows of random lengths, ordinary ids in 5..V-1, special mask on CLS/SEP/PAD."""
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(len(SPECIAL), V, (b, t), generator=g)
    lengths = torch.randint(t // 4, t + 1, (b,), generator=g)
    position = torch.arange(t)[None, :]
    ids = torch.where(position >= lengths[:, None], PAD, ids)
    ids[:, 0] = CLS
    ids[torch.arange(b), lengths - 1] = SEP
    special = (position == 0) | (position >= lengths[:, None] - 1)
    return ids, special


def make_word_ids(special, seed=0):
    """Words of 1-4 sub-words over the non-special tokens of each row, numbered from 0; -1 at special tokens."""
    rng = random.Random(seed)
    rows = []
    for row in special.tolist():
        word, left, out = -1, 0, []
        for is_special in row:
            if is_special:
                out.append(-1)
                left = 0
                continue
            if left == 0:
                word, left = word + 1, rng.randint(1, 4)
            out.append(word)
            left -= 1
        rows.append(out)
    return torch.tensor(rows)


# ---------------------------------------------------------------------------------------------- token masking


def test_selection_rate_and_80_10_10_split():
    ids, special = make_batch()
    g = torch.Generator().manual_seed(1)
    corrupted, labels = mask_tokens(ids, special, MASK, V, generator=g, special_ids=SPECIAL)
    selected = labels != -100
    n_selected = int(selected.sum())
    assert_binomial(n_selected, (~special).sum(), 0.15)

    masked = selected & (corrupted == MASK)
    unchanged = selected & (corrupted == ids)
    randomised = selected & ~masked & ~unchanged
    p_same = 1 / (V - len(SPECIAL))  # a random draw may give the original token back
    assert_binomial(masked.sum(), n_selected, 0.8)
    assert_binomial(randomised.sum(), n_selected, 0.1 * (1 - p_same))
    assert_binomial(unchanged.sum(), n_selected, 0.1 + 0.1 * p_same)
    assert int(randomised.sum()) > 0 and int(unchanged.sum()) > 0

    # random replacements are ordinary tokens: never special, never [MASK], inside the vocabulary
    replaced = corrupted[randomised]
    assert not torch.isin(replaced, torch.tensor(SPECIAL)).any()
    assert int(replaced.min()) >= 0 and int(replaced.max()) < V
    # labels: the original id where selected (the unchanged 10% included), -100 elsewhere
    assert torch.equal(labels[selected], ids[selected])
    assert torch.equal(labels[unchanged], corrupted[unchanged])
    assert (labels[~selected] == -100).all()
    # nothing outside the selection changes
    assert torch.equal(corrupted[~selected], ids[~selected])


def test_special_tokens_and_padding_never_selected():
    ids, special = make_batch(b=16, t=64)
    corrupted, labels = mask_tokens(ids, special.long(), MASK, V, mask_prob=1.0, special_ids=SPECIAL)  # 0/1 mask ok
    assert (labels[special] == -100).all()
    assert torch.equal(corrupted[special], ids[special])
    assert (labels[~special] != -100).all()  # mask_prob=1 selects every other token
    assert torch.equal(labels[~special], ids[~special])
    _, labels = mask_tokens(ids, special, MASK, V, mask_prob=0.0)
    assert (labels == -100).all()


def test_replacement_options():
    ids, special = make_batch(b=8, t=64)
    corrupted, labels = mask_tokens(ids, special, MASK, V, mask_prob=1.0, replace_prob=1.0, random_prob=0.0)
    assert (corrupted[~special] == MASK).all()
    corrupted, labels = mask_tokens(ids, special, MASK, V, mask_prob=1.0, replace_prob=0.0, random_prob=0.0)
    assert torch.equal(corrupted, ids) and torch.equal(labels[~special], ids[~special])
    for bad in (dict(mask_prob=1.5), dict(replace_prob=0.8, random_prob=0.3), dict(random_prob=-0.1)):
        with pytest.raises(ValueError):
            mask_tokens(ids, special, MASK, V, **bad)
    with pytest.raises(ValueError, match="same shape"):
        mask_tokens(ids, special[:, :-1], MASK, V)


def test_deterministic_with_a_generator():
    ids, special = make_batch(b=16, t=64)
    run = lambda seed, **kw: mask_tokens(ids, special, MASK, V, generator=torch.Generator().manual_seed(seed), **kw)
    a, b, c = run(0), run(0), run(1)
    assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])
    assert not torch.equal(a[1], c[1])
    words = make_word_ids(special)
    assert torch.equal(run(3, word_ids=words)[0], run(3, word_ids=words)[0])
    torch.manual_seed(5)  # generator=None: the global generator
    d = mask_tokens(ids, special, MASK, V)
    torch.manual_seed(5)
    assert torch.equal(d[1], mask_tokens(ids, special, MASK, V)[1])


# ---------------------------------------------------------------------------------------------- whole words


def test_whole_word_masking_selects_words_together_at_15_percent():
    ids, special = make_batch()
    words = make_word_ids(special)
    corrupted, labels = mask_tokens(
        ids, special, MASK, V, word_ids=words, generator=torch.Generator().manual_seed(2), special_ids=SPECIAL
    )
    selected = labels != -100
    assert not selected[special].any()
    # per (row, word): how many sub-words, how many selected
    n_words = int(words.max()) + 1
    key = (torch.arange(words.shape[0])[:, None] * n_words + words)[words >= 0]
    size = torch.zeros(words.shape[0] * n_words).index_add_(0, key, torch.ones(len(key)))
    chosen = torch.zeros_like(size).index_add_(0, key, selected[words >= 0].float())
    present = size > 0
    assert torch.equal(chosen[present] == size[present], chosen[present] > 0)  # all sub-words or none
    assert_binomial((chosen[present] > 0).sum(), present.sum(), 0.15)  # words, not tokens, at 15%
    # the 80/10/10 decision is still made per token
    assert_binomial((selected & (corrupted == MASK)).sum(), selected.sum(), 0.8)
    # tokens that belong to no word are never selected
    no_word = words.clone()
    no_word[:, 1:5] = -1
    _, labels = mask_tokens(ids, special, MASK, V, mask_prob=1.0, word_ids=no_word)
    assert (labels[:, 1:5] == -100).all() and (labels[(no_word >= 0) & ~special] != -100).all()


def test_word_ids_from_wordpiece_and_byte_level_markers(bert_tokenizer):
    tokens = ["[CLS]", "un", "##believ", "##able", "cat", "##s", "[SEP]", "##x", "dog", "[SEP]", "[PAD]"]
    special = torch.tensor([[t.startswith("[") for t in tokens]])
    starts = is_word_start(tokens, "bert")[None]
    assert word_ids_from_starts(starts, special).tolist() == [[-1, 0, 0, 0, 1, 1, -1, 2, 3, -1, -1]]
    bpe = ["<s>", "The", "Ġc", "at", ",", "Ġsat", "</s>", "</s>", "He", "Ġran", "</s>"]
    special = torch.tensor([[t in ("<s>", "</s>") for t in bpe]])
    starts = is_word_start(bpe, "roberta")[None]
    assert word_ids_from_starts(starts, special).tolist() == [[-1, 0, 1, 1, 1, 2, -1, -1, 3, 4, -1]]
    with pytest.raises(ValueError, match="family"):
        is_word_start(tokens, "wordpiece")

    # on real WordPiece output, the "##" convention gives the tokenizer's own words
    texts, pairs = ["the unbelievably tabled gardeners", "a"], ["walked slowly home", "bc d"]
    batch = bert_tokenizer(texts, pairs=pairs, return_tensors="pt")
    vocabulary = [bert_tokenizer.id_to_token(i) for i in range(bert_tokenizer.vocab_size)]
    from_marks = word_ids_from_starts(is_word_start(vocabulary, "bert")[batch.input_ids], batch.special_tokens_mask)
    from_encoding = word_ids_from_encoding(batch)
    assert torch.equal(from_marks, from_encoding)
    assert any(t.startswith("##") for t in bert_tokenizer.tokenize("the unbelievably tabled gardeners"))
    # [CLS] a [SEP] b ##c d [SEP]: B's words are numbered after A's
    assert from_encoding[1].tolist()[:7] == [-1, 0, -1, 1, 1, 2, -1]


# ---------------------------------------------------------------------------------------------- n-grams


def bert_masking_before_ngrams(ids, special, word_ids, generator):
    """mask_tokens as it was before n-gram masking (defaults, ``special_ids=SPECIAL``): the ngram=1 oracle."""
    if word_ids is None:
        selected = torch.rand(ids.shape, generator=generator) < 0.15
    else:
        word_selected = torch.rand(ids.shape[0], int(word_ids.max()) + 1, generator=generator) < 0.15
        selected = word_selected.gather(1, word_ids.clamp(min=0)) & (word_ids >= 0)
    selected &= ~special
    u = torch.rand(ids.shape, generator=generator)
    candidates = torch.arange(len(SPECIAL), V)  # every id but the special ones ([MASK] included)
    random_ids = candidates[torch.randint(len(candidates), ids.shape, generator=generator)]
    corrupted = torch.where(selected & (u < 0.8), MASK, ids)
    corrupted = torch.where(selected & (u >= 0.8) & (u < 0.9), random_ids, corrupted)
    return corrupted, torch.where(selected, ids, -100)


@pytest.mark.parametrize("whole_word", [False, True])
def test_ngram_1_is_the_masking_from_before(whole_word):
    ids, special = make_batch(b=32, t=128)
    words = make_word_ids(special) if whole_word else None
    run = lambda **kw: mask_tokens(
        ids, special, MASK, V, word_ids=words, generator=torch.Generator().manual_seed(4), special_ids=SPECIAL, **kw
    )
    expected = bert_masking_before_ngrams(ids, special, words, torch.Generator().manual_seed(4))
    for corrupted, labels in (run(), run(ngram=1)):
        assert torch.equal(corrupted, expected[0]) and torch.equal(labels, expected[1])


def span_table(spans, words):
    """For each selected span (row, span id): its token positions and the words they belong to, in order."""
    table = {}
    for row, (span_row, word_row) in enumerate(zip(spans.tolist(), words.tolist(), strict=True)):
        for position, (span, word) in enumerate(zip(span_row, word_row, strict=True)):
            if span >= 0:
                table.setdefault((row, span), []).append((position, word))
    return table


def assert_whole_word_spans(spans, words, special):
    """Spans are runs of consecutive positions holding whole, consecutive words; never a special token."""
    assert not (spans[special] >= 0).any() and not (spans[words < 0] >= 0).any()
    word_positions = {}  # (row, word) -> its positions
    for row, word_row in enumerate(words.tolist()):
        for position, word in enumerate(word_row):
            word_positions.setdefault((row, word), []).append(position)
    for (row, _), members in span_table(spans, words).items():
        positions, span_words = [p for p, _ in members], sorted({w for _, w in members})
        assert positions == list(range(positions[0], positions[-1] + 1))  # contiguous: nothing (no [SEP]) between
        assert span_words == list(range(span_words[0], span_words[-1] + 1))
        assert sum((word_positions[row, w] for w in span_words), []) == positions  # whole words, nothing else


def ngram_length_counts(spans, words, ngram):
    counts = [0] * ngram
    for members in span_table(spans, words).values():
        counts[len({w for _, w in members}) - 1] += 1
    return counts


def p_ngram(ngram):
    weights = [1 / n for n in range(1, ngram + 1)]
    return [w / sum(weights) for w in weights]


def test_ngram_lengths_follow_one_over_n():
    """ALBERT's p(n) = (1/n) / Σ_k 1/k, n = 1..3: 6/11, 3/11, 2/11 (chi-square; a 1/2/3 uniform split, or ALBERT's
    own realised 58/26/16%, would be rejected at this size)."""
    from scipy.stats import chisquare

    ids, special = make_batch(b=96, t=512, seed=3)
    words = make_word_ids(special, seed=3)
    spans = ngram_spans(special, 0.5, 3, words, torch.Generator().manual_seed(0))
    assert_whole_word_spans(spans, words, special)
    counts = ngram_length_counts(spans, words, 3)
    n = sum(counts)
    assert n > 3000
    assert chisquare(counts, [n * p for p in p_ngram(3)]).pvalue > 1e-3
    assert chisquare(counts, [n * p for p in (0.58, 0.26, 0.16)]).pvalue < 1e-3
    assert chisquare(counts, [n / 3] * 3).pvalue < 1e-6

    # without word ids every token is a word; ngram=5 spans 1..5 tokens
    spans = ngram_spans(special, 0.5, 5, generator=torch.Generator().manual_seed(1))
    token_words = torch.arange(512).expand(96, -1).masked_fill(special, -1)
    assert_whole_word_spans(spans, token_words, special)
    counts = ngram_length_counts(spans, token_words, 5)
    assert chisquare(counts, [sum(counts) * p for p in p_ngram(5)]).pvalue > 1e-3


def test_ngram_masking_selects_mask_prob_of_the_tokens():
    ids, special = make_batch(b=128, t=256, seed=5)
    words = make_word_ids(special, seed=5)
    for word_ids in (words, None):
        corrupted, labels = mask_tokens(
            ids, special, MASK, V, word_ids=word_ids, ngram=3, generator=torch.Generator().manual_seed(2)
        )
        selected = labels != -100
        spans = ngram_spans(special, 0.15, 3, word_ids, torch.Generator().manual_seed(2))
        assert torch.equal(selected, spans >= 0)  # mask_tokens selects with ngram_spans, then draws 80/10/10
        # each span is selected with probability 0.15, so each token is: the count is a sum over spans
        # (Var = 0.85 * 0.15 * Σ_all spans len², estimated by 0.85 * Σ_selected spans len²)
        sizes = torch.tensor([len(tokens) for tokens in span_table(spans, spans).values()])
        expected, sd = 0.15 * int((~special).sum()), math.sqrt(0.85 * float((sizes.float() ** 2).sum()))
        assert abs(int(selected.sum()) - expected) < 4 * sd, (int(selected.sum()), expected, sd)
        assert_binomial((selected & (corrupted == MASK)).sum(), selected.sum(), 0.8)  # 80/10/10 per token
        assert torch.equal(labels[selected], ids[selected]) and torch.equal(corrupted[~selected], ids[~selected])
    spans = ngram_spans(special, 1.0, 3, words)
    assert ((spans >= 0) == (words >= 0)).all()  # mask_prob=1: every word
    assert (ngram_spans(special, 0.0, 3, words) == -1).all()


def test_ngrams_never_cross_special_tokens_or_tokens_of_no_word():
    """Rows [CLS] A [SEP] B [SEP] [PAD]..., words numbered across the inner [SEP], some tokens of no word."""
    ids, special = make_batch(b=64, t=96, seed=7)
    middle = 20
    special[:, middle] = True
    ids[:, middle] = SEP
    words = make_word_ids(special, seed=7)
    words[:, 40:43] = -1  # no word: never selected, and a span does not run over them
    spans = ngram_spans(special, 0.6, 3, words, torch.Generator().manual_seed(0))
    assert_whole_word_spans(spans, words, special)
    assert (spans[:, middle] == -1).all() and (spans[:, 40:43] == -1).all()
    assert (spans[:, middle - 1] >= 0).any() and (spans[:, middle + 1] >= 0).any()  # spans do end and start there


def test_ngram_option_validation_and_config():
    ids, special = make_batch(b=4, t=32)
    for bad in (0, -2, 1.5, True, "3"):
        with pytest.raises(ValueError, match="ngram=.* must be a whole number >= 1"):
            mask_tokens(ids, special, MASK, V, ngram=bad)
        with pytest.raises(ValueError, match="ngram"):
            MaskingConfig(MASK, V, PAD, ngram=bad)
    with pytest.raises(ValueError, match="word_ids"):
        ngram_spans(special, 0.15, 3, make_word_ids(special)[:, :-1])

    examples = make_examples()
    albert = MaskingConfig(MASK, V, PAD, SPECIAL, mask_prob=0.5, whole_word=True, ngram=3)
    batch = DynamicMasking(albert, seed=0)(examples)
    padded = pad_batch(examples, PAD)
    spans = ngram_spans(padded["special_tokens_mask"], 0.5, 3, padded["word_ids"], torch.Generator().manual_seed(0))
    assert torch.equal(batch["labels"] != -100, spans >= 0)  # whole_word=True: n-grams of the examples' words
    assert_whole_word_spans(spans, padded["word_ids"], padded["special_tokens_mask"])
    by_token = DynamicMasking(MaskingConfig(MASK, V, PAD, SPECIAL, mask_prob=0.5, ngram=3), seed=0)(examples)
    spans = ngram_spans(padded["special_tokens_mask"], 0.5, 3, None, torch.Generator().manual_seed(0))
    assert torch.equal(by_token["labels"] != -100, spans >= 0)  # whole_word=False: n-grams of tokens
    static = StaticMaskedDataset(examples, albert, n_duplicates=2, seed=0)
    assert all(((item["labels"] != -100) <= ~item["special_tokens_mask"]).all() for item in static)


# ---------------------------------------------------------------------------------------------- loss


def test_masked_only_loss_equals_full_loss_restricted_to_masked_positions():
    ids, special = make_batch(b=8, t=32)
    _, labels = mask_tokens(ids, special, MASK, V, generator=torch.Generator().manual_seed(0))
    logits = torch.randn(8, 32, V, requires_grad=True)
    index = masked_positions(labels)
    assert torch.equal(index, (labels.flatten() != -100).nonzero().squeeze(1))
    assert torch.equal(logits.flatten(0, 1)[index], logits[labels != -100])

    loss = mlm_loss(logits.flatten(0, 1)[index], labels)  # (|M|, V) logits, as a masked-only head gives
    full = F.cross_entropy(logits.flatten(0, 1), labels.flatten(), ignore_index=-100)
    by_hand = -F.log_softmax(logits, -1).flatten(0, 1)[index, labels.flatten()[index]].mean()
    torch.testing.assert_close(loss, full)
    torch.testing.assert_close(loss, by_hand)
    torch.testing.assert_close(mlm_loss(logits, labels), full)  # (B, T, V) logits work too
    loss.backward()
    scored = (labels != -100)[..., None].expand_as(logits)
    assert (logits.grad[~scored] == 0).all() and (logits.grad[scored] != 0).any()

    with pytest.raises(ValueError, match="masked positions"):
        mlm_loss(torch.randn(len(index) + 1, V), labels)
    empty = torch.full_like(labels, -100)
    zero = mlm_loss(torch.randn(0, V, requires_grad=True), empty)
    assert zero.item() == 0.0 and zero.requires_grad


# ---------------------------------------------------------------------------------------------- static vs dynamic


def make_examples(n=12, seed=0):
    g = torch.Generator().manual_seed(seed)
    examples = []
    for i in range(n):
        length = 10 + 3 * i
        ids = torch.randint(len(SPECIAL), V, (length,), generator=g)
        ids[0], ids[-1] = CLS, SEP
        special = torch.zeros(length, dtype=torch.bool)
        special[0] = special[-1] = True
        words = word_ids_from_starts(torch.rand(length, generator=g)[None] < 0.7, special[None])[0]
        examples.append(
            {
                "input_ids": ids,
                "token_type_ids": torch.zeros(length, dtype=torch.long),
                "special_tokens_mask": special,
                "word_ids": words,
                "next_sentence_label": torch.tensor(i % 2),
            }
        )
    return examples


CONFIG = MaskingConfig(mask_id=MASK, vocab_size=V, pad_id=PAD, special_ids=SPECIAL, mask_prob=0.3)


def test_pad_batch():
    examples = make_examples(3)
    batch = pad_batch(examples, PAD)
    assert batch["input_ids"].shape == (3, 16)
    assert batch["input_ids"][0, 10:].eq(PAD).all() and batch["special_tokens_mask"][0, 10:].all()
    assert batch["attention_mask"][0].tolist() == [1] * 10 + [0] * 6 and batch["attention_mask"][2].all()
    assert batch["word_ids"][0, 10:].eq(-1).all()
    assert batch["next_sentence_label"].tolist() == [0, 1, 0]


def same(a, b):
    return all(torch.equal(a[k], b[k]) for k in a) and a.keys() == b.keys()


def test_static_masking_repeats_its_masks_every_epoch():
    examples = make_examples()
    data = StaticMaskedDataset(examples, CONFIG, n_duplicates=4, seed=0)
    assert len(data) == 4 * len(examples)
    epoch1 = [data[i] for i in range(len(data))]
    epoch2 = [data[i] for i in reversed(range(len(data)))][::-1]
    assert all(same(a, b) for a, b in zip(epoch1, epoch2, strict=True))  # the same masks in every epoch
    n = len(examples)
    for d in range(4):
        for i, original in enumerate(examples):
            item = data[d * n + i]
            assert len(item["input_ids"]) == len(original["input_ids"])
            selected = item["labels"] != -100
            assert torch.equal(item["labels"][selected], original["input_ids"][selected])
            assert torch.equal(item["input_ids"][~selected], original["input_ids"][~selected])
            assert not selected[original["special_tokens_mask"]].any()
    # the duplicates of an example are masked in different ways; a seed fixes the whole dataset
    assert len({tuple(data[d * n + 5]["labels"].tolist()) for d in range(4)}) == 4
    assert all(same(a, b) for a, b in zip(epoch1, StaticMaskedDataset(examples, CONFIG, 4, seed=0), strict=True))
    assert not all(same(a, b) for a, b in zip(epoch1, StaticMaskedDataset(examples, CONFIG, 4, seed=1), strict=True))
    batch = data.collate(data[0:3])
    assert batch["labels"].shape == batch["input_ids"].shape == (3, 16) and (batch["labels"][0, 10:] == -100).all()


def test_dynamic_masking_draws_new_masks_each_time():
    examples = make_examples()
    collate = DynamicMasking(CONFIG, seed=0)
    epoch1, epoch2 = collate(examples), collate(examples)
    assert not torch.equal(epoch1["labels"], epoch2["labels"])
    for batch in (epoch1, epoch2):
        original = pad_batch(examples, PAD)
        selected = batch["labels"] != -100
        assert torch.equal(batch["labels"][selected], original["input_ids"][selected])
        assert not selected[original["special_tokens_mask"]].any()
        assert torch.equal(batch["next_sentence_label"], original["next_sentence_label"])
    again = DynamicMasking(CONFIG, seed=0)
    assert same(again(examples), epoch1) and same(again(examples), epoch2)
    torch.manual_seed(3)  # seed=None: the global generator (saved and restored by the Trainer's checkpoints)
    a = DynamicMasking(CONFIG)(examples)
    torch.manual_seed(3)
    assert same(a, DynamicMasking(CONFIG)(examples))


def test_whole_word_config():
    examples = make_examples()
    whole = MaskingConfig(MASK, V, PAD, SPECIAL, mask_prob=0.5, whole_word=True)
    batch = DynamicMasking(whole, seed=0)(examples)
    selected = batch["labels"] != -100
    for row in range(len(examples)):
        for word in batch["word_ids"][row].unique().tolist():
            if word >= 0:
                in_word = selected[row][batch["word_ids"][row] == word]
                assert in_word.all() or not in_word.any()
    with pytest.raises(ValueError, match="word_ids"):
        DynamicMasking(whole)([{k: v for k, v in e.items() if k != "word_ids"} for e in examples])


def test_from_tokenizer(bert_tokenizer):
    config = MaskingConfig.from_tokenizer(bert_tokenizer, whole_word=True)
    assert (config.mask_id, config.pad_id, config.vocab_size) == (4, 0, bert_tokenizer.vocab_size)
    assert config.special_ids == (0, 1, 2, 3, 4) and config.whole_word


class TinyMLM(nn.Module):
    """Embedding + vocabulary projection, logits at the masked positions only."""

    def __init__(self):
        super().__init__()
        self.embed, self.out = nn.Embedding(V, 16), nn.Linear(16, V)

    def forward(self, input_ids, labels):
        hidden = self.embed(input_ids)
        return self.out(hidden.flatten(0, 1)[masked_positions(labels)])


@pytest.mark.parametrize("kind", ["dynamic", "static"])
def test_masking_feeds_the_trainer(kind):
    from minilm.train.trainer import LossOutput, TrainConfig, Trainer

    def loss_fn(model, batch):
        logits = model(batch["input_ids"], batch["labels"])
        return LossOutput(mlm_loss(logits, batch["labels"]), n_tokens=int((batch["labels"] != -100).sum()))

    examples = make_examples()
    if kind == "dynamic":
        data, collate = examples, DynamicMasking(CONFIG)
    else:
        data = StaticMaskedDataset(examples, CONFIG, n_duplicates=2)
        collate = data.collate
    config = TrainConfig(batch_size=4, max_steps=3, warmup_steps=1, device="cpu", progress=False, log_every=1)
    trainer = Trainer(TinyMLM(), loss_fn, data, config=config, collate=collate)
    trainer.fit()
    losses = [e["loss"] for e in trainer.history if e.get("split") == "train"]
    assert len(losses) == 3 and all(math.isfinite(x) and 6 < x < 8 for x in losses)  # ≈ log(1000) at the start
