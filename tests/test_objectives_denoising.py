"""BART's noising functions on synthetic documents of distinct token ids (so every kept, moved or deleted token can be
traced): properties over many seeds, not fixed outputs."""

import itertools
import math
from collections import Counter
from types import SimpleNamespace

import pytest
import torch
from scipy import stats

from minilm.objectives.denoising import (
    NOISES,
    DenoisingConfig,
    add_noise,
    denoising_example,
    document_rotation,
    noise_token_ids,
    parse_noise,
    poisson_span_lengths,
    sentence_permutation,
    text_infilling,
    token_deletion,
    token_masking,
)

BOS, MASK, EOS, DOT, VOCAB = 0, 1, 2, 3, 1000
ENDS = dict(bos_id=BOS, eos_id=EOS)
SPECIALS = (BOS, MASK, EOS)


def gen(seed):
    return torch.Generator().manual_seed(seed)


def document(n, first=100):
    """<s> first, first + 1, ..., first + n - 1 </s>: n distinct body tokens."""
    return torch.tensor([BOS, *range(first, first + n), EOS])


def sentences_doc(lengths, first=100):
    """<s> s_1 . s_2 . ... </s>: sentences of distinct tokens, each ended by DOT."""
    ids, next_id = [BOS], first
    for length in lengths:
        ids += [*range(next_id, next_id + length), DOT]
        next_id += length
    return torch.tensor([*ids, EOS])


def split_sentences(body):
    """Sentences of a body list, each ending after a run of DOTs (the last may have none)."""
    out, current = [], []
    for i, t in enumerate(body):
        current.append(t)
        if t == DOT and (i + 1 == len(body) or body[i + 1] != DOT):
            out.append(tuple(current))
            current = []
    if current:
        out.append(tuple(current))
    return out


def is_subsequence(small, big):
    it = iter(big)
    return all(any(x == y for y in it) for x in small)


def reconstruct(out, spans, original):
    """Put original[start:start + length] in place of each mask the spans list; copy the other tokens."""
    at = {int(p): (int(s), int(n)) for p, s, n in spans}
    result = []
    for p, t in enumerate(out.tolist()):
        if p in at:
            s, n = at[p]
            result += original[s : s + n].tolist()
        else:
            result.append(t)
    return result


def assert_binomial(count, n, p, sigmas=4.0):
    sd = math.sqrt(n * p * (1 - p))
    assert abs(count - n * p) <= sigmas * sd + 1e-9, f"{count} of {n}, expected {p:.3f}"


# ---------------------------------------------------------------------------------------------------- masking


@pytest.mark.parametrize("ratio", [0.15, 0.3, 0.5, 1.0])
def test_token_masking_exact_fraction_only_masks_differ(ratio):
    for seed in range(40):
        n = 1 + seed * 3
        ids = document(n)
        out = token_masking(ids, MASK, ratio, gen(seed), **ENDS)
        assert out.dtype == torch.long and out.shape == ids.shape
        assert out[0] == BOS and out[-1] == EOS
        changed = out != ids
        assert (out[changed] == MASK).all()
        assert int(changed.sum()) == math.ceil(ratio * n - 1e-9)


def test_token_masking_positions_uniform():
    n, ratio, trials = 10, 0.3, 2000
    counts = torch.zeros(n)
    for seed in range(trials):
        counts += (token_masking(document(n), MASK, ratio, gen(seed), **ENDS)[1:-1] == MASK).float()
    for c in counts.tolist():
        assert_binomial(c, trials, ratio)


def test_token_masking_random_ratio():
    n, total, randoms = 100, 0, 0
    for seed in range(50):
        ids = document(n)
        out = token_masking(ids, MASK, 0.3, gen(seed), **ENDS, random_ratio=0.5, vocab_size=VOCAB, special_ids=SPECIALS)
        changed = out != ids
        assert int(changed.sum()) <= 30 and out[0] == BOS and out[-1] == EOS
        replaced = out[changed & (out != MASK)]
        assert not torch.isin(replaced, torch.tensor(SPECIALS)).any() and (replaced < VOCAB).all()
        total, randoms = total + 30, randoms + int((out[1:-1] != MASK).sum() - (n - 30))
    assert_binomial(randoms, total, 0.5)  # a random token may equal the original: counted as kept, rarely (1/997)
    with pytest.raises(ValueError, match="vocab_size"):
        token_masking(document(5), MASK, 0.3, gen(0), random_ratio=0.1)


# ---------------------------------------------------------------------------------------------------- deletion


@pytest.mark.parametrize("ratio", [0.1, 0.3, 1.0])
def test_token_deletion_is_a_subsequence_with_the_right_count(ratio):
    for seed in range(40):
        n = 1 + seed * 2
        ids = document(n)
        out = token_deletion(ids, ratio, gen(seed), **ENDS)
        assert out.dtype == torch.long and out.dim() == 1
        assert out[0] == BOS and out[-1] == EOS
        assert len(ids) - len(out) == math.ceil(ratio * n - 1e-9)
        assert is_subsequence(out.tolist(), ids.tolist())


# ---------------------------------------------------------------------------------------------------- infilling


@pytest.mark.parametrize("overlap", ["disjoint", "merge"])
def test_infilling_spans_reconstruct_the_document(overlap):
    for seed in range(200):
        n = seed % 60
        ids = document(n)
        g1, g2 = gen(seed), gen(seed)
        out, spans = text_infilling(ids, MASK, 0.3, 3.0, g1, **ENDS, overlap=overlap, return_spans=True)
        assert torch.equal(out, text_infilling(ids, MASK, 0.3, 3.0, g2, **ENDS, overlap=overlap))
        assert out.dtype == torch.long and spans.dtype == torch.long and spans.shape[1] == 3
        assert out[0] == BOS and out[-1] == EOS
        # one mask per span: the spans' positions are exactly the masks
        assert spans[:, 0].tolist() == (out == MASK).nonzero().squeeze(1).tolist()
        assert reconstruct(out, spans, ids) == ids.tolist()
        # the masks' spans are contiguous and in order: non-mask tokens are a subsequence
        assert is_subsequence(out[out != MASK].tolist(), ids.tolist())


def test_infilling_covers_ratio_of_the_tokens():
    covered, total = 0, 0
    for seed in range(300):
        n = 20 + seed % 180
        _, spans = text_infilling(document(n), MASK, 0.3, 3.0, gen(seed), **ENDS, return_spans=True)
        assert int(spans[:, 2].sum()) == math.ceil(0.3 * n - 1e-9)  # disjoint: exactly the budget
        assert (spans[:, 1] >= 1).all() and (spans[:, 1] + spans[:, 2] <= n + 1).all()  # inside the body
        covered, total = covered + int(spans[:, 2].sum()), total + n
    assert abs(covered / total - 0.3) < 0.01
    merged, total = 0, 0
    for seed in range(300):
        n = 200
        out, spans = text_infilling(document(n), MASK, 0.3, 3.0, gen(seed), **ENDS, overlap="merge", return_spans=True)
        assert int(spans[:, 2].sum()) <= 60
        merged, total = merged + int(spans[:, 2].sum()), total + n
    assert 0.24 < merged / total < 0.29  # fairseq's overlapping spans cover less than the budget


def test_infilling_zero_length_spans_insert_masks():
    longer = 0
    for seed in range(100):
        n = 30
        ids = document(n)
        out, spans = text_infilling(ids, MASK, 0.3, 0.2, gen(seed), **ENDS, return_spans=True)  # λ small: many 0s
        assert reconstruct(out, spans, ids) == ids.tolist()
        inserts = spans[spans[:, 2] == 0]
        assert len(inserts) > 0
        assert len(out) == len(ids) - 9 + len(spans)  # 9 = ceil(0.3 · 30) covered, one mask per span
        longer += len(out) > len(ids)
        # an inserted mask sits between two original tokens that stay neighbours in the original order
        kept = out[out != MASK].tolist()
        assert kept == [t for t in ids.tolist() if t in set(kept)]
    assert longer > 50


def test_infilling_zero_length_only_inserts_when_nothing_is_masked():
    ids = document(1)  # budget ceil(0.3) = 1: one span of length 1 after possible 0-length ones
    for seed in range(50):
        out, spans = text_infilling(ids, MASK, 0.3, 0.5, gen(seed), **ENDS, return_spans=True)
        assert int(spans[:, 2].sum()) == 1 and (spans[:, 2] > 0).sum() == 1
        assert out.tolist() == [BOS] + [MASK] * len(spans) + [EOS]


def test_poisson_span_lengths_are_poisson():
    lam, draws = 3.0, []
    for seed in range(400):
        lengths = poisson_span_lengths(60, lam, gen(seed))
        assert int(lengths.sum()) == 60 and int(lengths[-1]) >= 1
        draws += lengths[:-1].tolist()  # all but the trimmed last one are i.i.d. Poisson(λ)
    counts = Counter(min(d, 9) for d in draws)
    observed = [counts[k] for k in range(10)]
    pmf = [stats.poisson.pmf(k, lam) for k in range(9)]
    expected = [p * len(draws) for p in [*pmf, 1 - sum(pmf)]]
    assert stats.chisquare(observed, expected).pvalue > 1e-3
    assert abs(sum(draws) / len(draws) - lam) < 0.1


def test_infilling_span_lengths_have_mean_lambda():
    lengths = []
    for seed in range(100):
        _, spans = text_infilling(document(1000), MASK, 0.3, 3.0, gen(seed), **ENDS, return_spans=True)
        lengths += spans[:, 2].tolist()
    assert abs(sum(lengths) / len(lengths) - 3.0) < 0.1  # a trimmed span per document biases this a little
    assert 0.03 < lengths.count(0) / len(lengths) < 0.07  # P(0) = e^-3 = 0.0498


def test_infilling_random_ratio_and_errors():
    ids = document(100)
    out, spans = text_infilling(
        ids, MASK, 0.3, 3.0, gen(0), **ENDS, random_ratio=1.0, vocab_size=VOCAB, special_ids=SPECIALS, return_spans=True
    )
    assert not (out == MASK).any() and len(spans) > 0
    assert not torch.isin(out[spans[:, 0]], torch.tensor(SPECIALS)).any()
    with pytest.raises(ValueError, match="overlap"):
        text_infilling(ids, MASK, overlap="nested")
    with pytest.raises(ValueError, match="poisson_lambda"):
        text_infilling(ids, MASK, 0.3, 0.0)
    with pytest.raises(ValueError, match="ratio"):
        text_infilling(ids, MASK, 1.5)


# ---------------------------------------------------------------------------------------------------- permutation


def test_sentence_permutation_keeps_the_multiset_of_sentences():
    changed = 0
    for seed in range(100):
        lengths = [1 + (seed * 7 + i) % 6 for i in range(2 + seed % 5)]
        ids = sentences_doc(lengths)
        out = sentence_permutation(ids, DOT, gen(seed), **ENDS)
        assert out.dtype == torch.long and out.shape == ids.shape
        assert out[0] == BOS and out[-1] == EOS
        before, after = split_sentences(ids[1:-1].tolist()), split_sentences(out[1:-1].tolist())
        assert Counter(before) == Counter(after)
        changed += before != after
    assert changed > 60  # 2 sentences stay in order half the time, more sentences rarely


def test_sentence_permutation_edge_cases():
    one = torch.tensor([BOS, 10, 11, 12, EOS])  # no full stop: one sentence
    trailing = torch.tensor([BOS, 10, DOT, 11, 12, DOT, DOT, 13, 14, EOS])  # a run of stops; no stop at the end
    orders = set()
    for seed in range(60):
        assert torch.equal(sentence_permutation(one, [DOT, 4], gen(seed), **ENDS), one)
        out = sentence_permutation(trailing, DOT, gen(seed), **ENDS)
        orders.add(tuple(out.tolist()))
    sentences = [[10, DOT], [11, 12, DOT, DOT], [13, 14]]  # the last one, without a stop, may move (and run on)
    assert orders == {(BOS, *sum(order, []), EOS) for order in itertools.permutations(sentences)}
    assert torch.equal(sentence_permutation(torch.tensor([BOS, EOS]), DOT, gen(0), **ENDS), torch.tensor([BOS, EOS]))
    with pytest.raises(ValueError, match="sentence_end_ids"):
        sentence_permutation(one, [], gen(0))


def test_sentence_permutation_ratio_moves_at_most_that_many():
    ids = sentences_doc([2] * 10)
    for seed in range(50):
        out = sentence_permutation(ids, DOT, gen(seed), ratio=0.3, **ENDS)
        before, after = split_sentences(ids[1:-1].tolist()), split_sentences(out[1:-1].tolist())
        moved = sum(a != b for a, b in zip(before, after, strict=True))
        assert moved <= 3
        assert torch.equal(sentence_permutation(ids, DOT, gen(seed), ratio=0.0, **ENDS), ids)


# ---------------------------------------------------------------------------------------------------- rotation


def test_document_rotation_is_a_rotation_with_a_uniform_start():
    n, trials = 8, 1600
    ids = document(n)
    starts = Counter()
    for seed in range(trials):
        out = document_rotation(ids, gen(seed), **ENDS)
        assert out[0] == BOS and out[-1] == EOS and out.shape == ids.shape and out.dtype == torch.long
        offset = int(out[1]) - 100
        assert torch.equal(out[1:-1], ids[1:-1].roll(-offset))
        starts[offset] += 1
    assert stats.chisquare([starts[k] for k in range(n)]).pvalue > 1e-3
    for short in (torch.tensor([BOS, EOS]), torch.tensor([BOS, 7, EOS])):
        assert torch.equal(document_rotation(short, gen(0), **ENDS), short)


# ---------------------------------------------------------------------------------------------------- protection


def test_protection_only_when_bos_and_eos_are_present():
    ids = torch.tensor([50, 51, 52, 53])  # no bos, no eos: every token can be noised
    hit_first = hit_last = False
    for seed in range(50):
        out = token_masking(ids, MASK, 0.5, gen(seed), **ENDS)
        hit_first, hit_last = hit_first or out[0] == MASK, hit_last or out[-1] == MASK
    assert hit_first and hit_last
    unprotected = document(5)
    masked = token_masking(unprotected, MASK, 1.0, gen(0))  # no bos_id/eos_id: bos and eos are tokens too
    assert (masked == MASK).all()


@pytest.mark.parametrize("n", [0, 1])
def test_tiny_documents(n):
    ids = document(n)
    for seed in range(20):
        g = gen(seed)
        assert token_masking(ids, MASK, 0.3, g, **ENDS).tolist() == ([BOS, MASK, EOS] if n else [BOS, EOS])
        assert token_deletion(ids, 0.3, g, **ENDS).tolist() == [BOS, EOS]
        infilled = text_infilling(ids, MASK, 0.3, 3.0, g, **ENDS)
        assert infilled[0] == BOS and infilled[-1] == EOS and (infilled[1:-1] == MASK).all()
        assert len(infilled) == 2 if n == 0 else len(infilled) >= 3
        assert torch.equal(sentence_permutation(ids, DOT, g, **ENDS), ids)
        assert torch.equal(document_rotation(ids, g, **ENDS), ids)


def test_ratio_zero_is_identity_and_ratio_one_corrupts_everything():
    ids = sentences_doc([3, 4, 2])
    n = len(ids) - 2
    for seed in range(20):
        g = gen(seed)
        for out in (
            token_masking(ids, MASK, 0.0, g, **ENDS),
            token_deletion(ids, 0.0, g, **ENDS),
            text_infilling(ids, MASK, 0.0, 3.0, g, **ENDS),
            text_infilling(ids, MASK, 0.0, 3.0, g, **ENDS, overlap="merge"),
        ):
            assert torch.equal(out, ids)
        assert token_masking(ids, MASK, 1.0, g, **ENDS).tolist() == [BOS] + [MASK] * n + [EOS]
        assert token_deletion(ids, 1.0, g, **ENDS).tolist() == [BOS, EOS]
        out, spans = text_infilling(ids, MASK, 1.0, 3.0, g, **ENDS, return_spans=True)
        assert (out[1:-1] == MASK).all() and int(spans[:, 2].sum()) == n
        assert reconstruct(out, spans, ids) == ids.tolist()


# ---------------------------------------------------------------------------------------------------- config, add_noise


def test_parse_noise():
    assert parse_noise("infilling+permutation") == ("infilling", "permutation")
    assert parse_noise("rotation") == ("rotation",)
    assert set(parse_noise("+".join(NOISES))) == {"masking", "deletion", "infilling", "permutation", "rotation"}
    with pytest.raises(ValueError, match="unknown noise 'shuffle'.*masking.*deletion.*infilling"):
        parse_noise("infilling+shuffle")
    for bad in ("", "infilling+", "Infilling", "infilling + permutation"):
        with pytest.raises(ValueError, match="unknown noise"):
            parse_noise(bad)
    with pytest.raises(ValueError, match="more than once"):
        parse_noise("masking+masking")


def test_config_defaults_and_validation():
    config = DenoisingConfig()
    assert config.noises == ("infilling", "permutation") and config.mask_ratio == 0.3
    assert config.poisson_lambda == 3.0 and config.permute_ratio == 1.0
    assert DenoisingConfig(noises="rotation+deletion").noises == ("rotation", "deletion")
    assert DenoisingConfig(noises=["masking"]).noises == ("masking",)
    bad = [
        (dict(noises=("infilling", "blur")), "unknown noise 'blur'"),
        (dict(noises="infilling+blur"), "unknown noise 'blur'"),
        (dict(noises=("masking", "masking")), "more than once"),
        (dict(mask_ratio=1.2), "mask_ratio"),
        (dict(mask_ratio=-0.1), "mask_ratio"),
        (dict(mask_ratio=float("nan")), "mask_ratio"),
        (dict(poisson_lambda=0.0), "poisson_lambda"),
        (dict(poisson_lambda=-3.0), "poisson_lambda"),
        (dict(permute_ratio=2.0), "permute_ratio"),
        (dict(rotate_prob=-1.0), "rotate_prob"),
        (dict(random_ratio=1.5), "random_ratio"),
        (dict(overlap="union"), "overlap"),
    ]
    for kwargs, message in bad:
        with pytest.raises(ValueError, match=message):
            DenoisingConfig(**kwargs)


def kw(**extra):
    return dict(mask_id=MASK, **ENDS, sentence_end_ids=DOT, vocab_size=VOCAB, special_ids=SPECIALS, **extra)


def test_add_noise_applies_in_the_documented_order():
    ids = sentences_doc([4, 6, 3, 5, 2])
    for seed in range(30):
        g = gen(seed)
        expected = text_infilling(sentence_permutation(ids, DOT, g, **ENDS), MASK, 0.3, 3.0, g, **ENDS)
        assert torch.equal(add_noise(ids, DenoisingConfig(), gen(seed), **kw()), expected)
        g = gen(seed)
        expected = document_rotation(
            token_deletion(token_masking(ids, MASK, 0.3, g, **ENDS), 0.3, g, **ENDS), g, **ENDS
        )
        config = DenoisingConfig(noises="rotation+deletion+masking")  # the spec's order does not matter
        assert torch.equal(add_noise(ids, config, gen(seed), **kw()), expected)


@pytest.mark.parametrize(
    "spec", ["masking", "deletion", "infilling", "permutation", "rotation", "infilling+permutation", "+".join(NOISES)]
)
def test_add_noise_combinations(spec):
    ids = sentences_doc([5, 3, 7, 4])
    config = DenoisingConfig(noises=spec)
    outputs = set()
    for seed in range(20):
        out = add_noise(ids, config, gen(seed), **kw())
        assert out.dtype == torch.long and out.dim() == 1 and out[0] == BOS and out[-1] == EOS
        assert not torch.isin(out[1:-1], torch.tensor([BOS, EOS])).any()
        kept = Counter(out[1:-1].tolist())
        kept.pop(MASK, None)
        assert kept <= Counter(ids[1:-1].tolist())  # nothing new but masks (random_ratio is 0)
        if spec in ("permutation", "rotation"):
            assert sorted(out.tolist()) == sorted(ids.tolist())
        assert torch.equal(out, add_noise(ids, config, gen(seed), **kw()))  # same seed, same noise
        outputs.add(tuple(out.tolist()))
    assert len(outputs) > 5  # different seeds, different noise


def test_add_noise_rotate_prob_and_no_noise():
    ids = document(20)
    rotated = sum(
        not torch.equal(add_noise(ids, DenoisingConfig(noises="rotation", rotate_prob=0.5), gen(s), **kw()), ids)
        for s in range(400)
    )
    assert_binomial(rotated, 400, 0.5 * 19 / 20)
    assert torch.equal(add_noise(ids, DenoisingConfig(noises=()), gen(0)), ids)


def test_add_noise_needs_the_right_token_ids():
    ids = sentences_doc([3, 3])
    with pytest.raises(ValueError, match="mask_id"):
        add_noise(ids, DenoisingConfig(noises="infilling"), gen(0))
    with pytest.raises(ValueError, match="sentence_end_ids"):
        add_noise(ids, DenoisingConfig(noises="permutation"), gen(0), mask_id=MASK)
    with pytest.raises(ValueError, match="vocab_size"):
        add_noise(ids, DenoisingConfig(noises="masking", random_ratio=0.1), gen(0), mask_id=MASK)
    with pytest.raises(ValueError, match="ONE document"):
        add_noise(ids[None], DenoisingConfig(), gen(0), **kw())
    with pytest.raises(ValueError, match="integers"):
        token_masking(ids.float(), MASK)
    with pytest.raises(ValueError, match="ratio"):
        token_deletion(ids, -0.5)


def test_determinism_and_seeds():
    ids = sentences_doc([6, 4, 8, 5, 7])
    for fn in (
        lambda g: token_masking(ids, MASK, 0.3, g, **ENDS),
        lambda g: token_deletion(ids, 0.3, g, **ENDS),
        lambda g: text_infilling(ids, MASK, 0.3, 3.0, g, **ENDS),
        lambda g: text_infilling(ids, MASK, 0.3, 3.0, g, **ENDS, overlap="merge"),
        lambda g: sentence_permutation(ids, DOT, g, **ENDS),
        lambda g: document_rotation(ids, g, **ENDS),
    ):
        assert torch.equal(fn(gen(7)), fn(gen(7)))
        assert len({tuple(fn(gen(s)).tolist()) for s in range(10)}) > 3


def test_denoising_example():
    ids = sentences_doc([5, 3, 7])
    lengths = set()
    for seed in range(20):
        example = denoising_example(ids.tolist(), DenoisingConfig(), gen(seed), **kw())  # a list is accepted too
        assert set(example) == {"input_ids", "labels"}
        assert example["labels"].dtype == torch.long and torch.equal(example["labels"], ids)
        assert example["input_ids"].dtype == torch.long and example["input_ids"].dim() == 1
        assert torch.equal(example["input_ids"], add_noise(ids, DenoisingConfig(), gen(seed), **kw()))
        lengths.add(len(example["input_ids"]))
    assert lengths != {len(ids)}  # the source's length varies: input_ids and labels must be padded separately


def test_noise_token_ids_from_a_tokenizer():
    vocab = {"<s>": 0, "<mask>": 1, "</s>": 2, ".": 3, "<pad>": 4}
    tok = SimpleNamespace(
        mask_id=1, bos_id=0, eos_id=2, vocab_size=VOCAB, special_ids=[0, 1, 2, 4], token_to_id=vocab.get
    )
    ids = noise_token_ids(tok, full_stops=(".", "Ġ."))
    assert ids == dict(mask_id=1, bos_id=0, eos_id=2, sentence_end_ids=(3,), vocab_size=VOCAB, special_ids=(0, 1, 2, 4))
    out = add_noise(sentences_doc([3, 4]), DenoisingConfig(random_ratio=0.5), gen(0), **ids)
    assert out[0] == BOS and out[-1] == EOS
