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
