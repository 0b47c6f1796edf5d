"""Decoding: top-k and top-p filters on hand-made distributions, clear errors, stop tokens, left-padded batches,
seeded sampling, and greedy decoding token for token equal to transformers' generate on a random GPT-2."""

import math

import pytest
import torch

from minilm.generation import (
    apply_temperature,
    continuation_log_prob,
    filter_logits,
    generate,
    sample_next,
    top_k_filter,
    top_p_filter,
)
from minilm.models.gpt import GPT, GPTConfig

SMALL = GPTConfig(vocab_size=64, max_len=32, n_layers=2, n_heads=2, d_model=32, dropout=0.0)
PROBS = [0.5, 0.3, 0.15, 0.05]


def kept(logits):
    """Indices of the tokens a filter kept, per row."""
    return [set(torch.isfinite(row).nonzero().flatten().tolist()) for row in logits]


def distribution():
    """Two rows with the probabilities PROBS, the second in another order: tokens 3, 0, 2, 1 from most likely."""
    first = torch.tensor(PROBS).log()
    return torch.stack([first, first[[1, 3, 2, 0]]])


def test_top_k_keeps_exactly_the_k_most_likely():
    logits = distribution()
    assert kept(top_k_filter(logits, 1)) == [{0}, {3}]
    assert kept(top_k_filter(logits, 2)) == [{0, 1}, {3, 0}]
    assert kept(top_k_filter(logits, 4)) == kept(top_k_filter(logits, 99)) == [{0, 1, 2, 3}] * 2
    assert torch.equal(top_k_filter(logits, 2)[0, :2], logits[0, :2])  # kept logits unchanged
    assert kept(top_k_filter(torch.tensor([[1.0, 2.0, 2.0, 0.0]]), 1)) == [{1, 2}]  # ties with the k-th stay


@pytest.mark.parametrize(
    "p, first_row",
    [
        (1e-6, {0}),
        (0.4, {0}),
        (0.7, {0, 1}),
        (0.85, {0, 1, 2}),
        (0.9, {0, 1, 2}),
        (0.99, {0, 1, 2, 3}),
        (1, {0, 1, 2, 3}),
    ],
)
def test_top_p_keeps_the_smallest_set_reaching_p(p, first_row):
    order = [3, 0, 2, 1]  # the second row's tokens from most to least likely (the first row's: 0, 1, 2, 3)
    second_row = {order[t] for t in first_row}
    assert kept(top_p_filter(distribution(), p)) == [first_row, second_row]


def test_top_p_always_keeps_the_top_token_and_p_1_keeps_all():
    peaked = torch.tensor([[0.0, -50.0, -60.0, -70.0]])  # the top token alone carries nearly all the mass
    assert kept(top_p_filter(peaked, 0.999999)) == [{0}]
    flat = torch.zeros(1, 1000)
    assert kept(top_p_filter(flat, 1.0)) == [set(range(1000))]
    assert len(kept(top_p_filter(flat, 0.0015))[0]) == 2


def test_temperature_sharpens_or_flattens():
    logits = distribution()
    assert torch.allclose(apply_temperature(logits, 2.0), logits / 2)
    sharp = sample_next(logits, temperature=1e-3, generator=torch.Generator().manual_seed(0))
    assert sharp.tolist() == logits.argmax(-1).tolist()


def test_filter_logits_is_the_distribution_sampling_draws_from():
    logits = distribution()
    by_hand = top_p_filter(top_k_filter(logits / 0.5, 3), 0.8)  # temperature, then top-k, then top-p
    assert torch.equal(filter_logits(logits, temperature=0.5, top_k=3, top_p=0.8), by_hand)
    assert kept(by_hand) == [{0, 1}, {3, 0}]  # at T = 0.5 the top token holds 0.5² / Σ p² = 0.68 < 0.8: two kept
    assert torch.equal(filter_logits(logits), logits)  # no filter: the logits as they are (float32)
    probs = filter_logits(logits, top_k=2).softmax(-1)
    assert torch.allclose(probs[0], torch.tensor([0.5, 0.3, 0.0, 0.0]) / 0.8)  # renormalised over the kept two
    # sample_next draws from softmax(filter_logits): same generator state, same tokens; frequencies match it
    many = logits[1:].expand(20_000, -1)
    draws = sample_next(many, temperature=0.7, top_p=0.9, generator=torch.Generator().manual_seed(0))
    expected = filter_logits(logits[1], temperature=0.7, top_p=0.9).softmax(-1)
    frequencies = torch.bincount(draws, minlength=4) / len(draws)
    assert torch.allclose(frequencies, expected, atol=0.01)
    assert set(draws.tolist()) == {3, 0, 2}  # at T = 0.7 the top two hold 0.87 < 0.9: the least likely (1) never drawn
    again = torch.multinomial(
        filter_logits(many, 0.7, None, 0.9).softmax(-1), 1, generator=torch.Generator().manual_seed(0)
    ).squeeze(-1)
    assert torch.equal(draws, again)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(temperature=0), "temperature must be > 0, got 0; for greedy decoding pass do_sample=False"),
        (dict(temperature=-1.0), "temperature must be > 0"),
        (dict(temperature=math.nan), "temperature must be a finite number"),
        (dict(top_k=0), "top_k must be a positive integer"),
        (dict(top_k=-3), "top_k must be a positive integer"),
        (dict(top_k=2.5), "top_k must be a positive integer"),
        (dict(top_p=0.0), r"top_p must be in \(0, 1\]"),
        (dict(top_p=1.5), r"top_p must be in \(0, 1\]"),
        (dict(top_p=-0.1), r"top_p must be in \(0, 1\]"),
    ],
)
def test_bad_sampling_arguments_are_clear_errors(kwargs, message):
    model = GPT(SMALL).eval()
    prompt = torch.zeros(1, 2, dtype=torch.long)
    with pytest.raises(ValueError, match=message):
        sample_next(distribution(), **kwargs)
    with pytest.raises(ValueError, match=message):
        model.generate(prompt, 2, **kwargs)
    with pytest.raises(ValueError, match=message):  # checked even where greedy does not use them
        model.generate(prompt, 2, do_sample=False, **kwargs)


def test_bad_prompts_are_clear_errors():
    model = GPT(SMALL).eval()
    with pytest.raises(ValueError, match="prompt is empty"):
        model.generate(torch.zeros(2, 0, dtype=torch.long), 3)
    with pytest.raises(ValueError, match=r"prompt is empty \(all padding\) in row\(s\) \[1\]"):
        model.generate(torch.zeros(2, 3, dtype=torch.long), 3, attention_mask=torch.tensor([[1, 1, 1], [0, 0, 0]]))
    with pytest.raises(ValueError, match=r"row\(s\) \[0\] have padding after a real token: pad .* on the left"):
        model.generate(torch.zeros(2, 3, dtype=torch.long), 3, attention_mask=torch.tensor([[1, 1, 0], [1, 1, 1]]))
    with pytest.raises(ValueError, match="prompt of 30 tokens \\+ 5 new ones exceeds the context of 32"):
        model.generate(torch.zeros(1, 30, dtype=torch.long), 5)
    with pytest.raises(ValueError, match="max_new_tokens must be >= 0"):
        model.generate(torch.zeros(1, 3, dtype=torch.long), -1)


def scripted(tokens_per_step, vocab=10, seen=None):
    """A step function whose step s picks tokens_per_step[s] (one per row); records what it is given."""
    state = {"step": 0}

    def step(new_ids, mask):
        if seen is not None:
            seen.append((new_ids.clone(), None if mask is None else mask.clone()))
        choice = torch.tensor(tokens_per_step[state["step"]])
        state["step"] += 1
        return torch.nn.functional.one_hot(choice, vocab).float() * 10  # (B, V)

    return step


def test_stop_tokens_end_rows_which_are_padded_until_all_end():
    prompt = torch.tensor([[7], [7], [7]])
    steps = [[2, 3, 4], [9, 4, 4], [5, 8, 4], [5, 5, 8]]
    out = generate(scripted(steps), prompt, 10, do_sample=False, eos_token_id=[9, 8], pad_token_id=0)
    assert out.tolist() == [[7, 2, 9, 0, 0], [7, 3, 4, 8, 0], [7, 4, 4, 4, 8]]  # all ended: 4 steps, not 10
    out = generate(scripted(steps), prompt, 4, do_sample=False, eos_token_id=9, pad_token_id=0)
    assert out.tolist() == [[7, 2, 9, 0, 0], [7, 3, 4, 8, 5], [7, 4, 4, 4, 8]]  # only 9 stops a row now
    out = generate(scripted(steps[:2]), prompt, 2, do_sample=False, eos_token_id=3)
    assert out.tolist() == [[7, 2, 9], [7, 3, 3], [7, 4, 4]]  # pad_token_id defaults to the stop token


def test_the_step_function_sees_the_prompt_then_one_token_with_a_growing_mask():
    seen = []
    prompt, mask = torch.tensor([[0, 5], [6, 5]]), torch.tensor([[0, 1], [1, 1]])
    generate(scripted([[1, 2], [3, 4]], seen=seen), prompt, 2, mask, do_sample=False)
    assert [ids.tolist() for ids, _ in seen] == [[[0, 5], [6, 5]], [[1], [2]]]
    assert [m.tolist() for _, m in seen] == [[[0, 1], [1, 1]], [[0, 1, 1], [1, 1, 1]]]


def test_left_padded_batch_generates_what_each_prompt_generates_alone():
    model = GPT(SMALL).eval()
    prompts = [torch.randint(1, 64, (n,)) for n in (5, 2, 4)]
    width = max(len(p) for p in prompts)
    ids = torch.stack([torch.cat([torch.zeros(width - len(p), dtype=torch.long), p]) for p in prompts])
    mask = torch.stack([torch.arange(width) >= width - len(p) for p in prompts]).long()
    batched = model.generate(ids, 6, do_sample=False, attention_mask=mask)
    for row, p in zip(batched, prompts, strict=True):
        alone = model.generate(p[None], 6, do_sample=False)[0]
        assert torch.equal(row[-6:], alone[-6:])


def test_seeded_sampling_is_reproducible_and_filters_restrict_the_choice():
    model = GPT(SMALL).eval()
    prompt = torch.randint(0, 64, (2, 3))

    def sample(seed, **kwargs):
        return model.generate(prompt, 8, generator=torch.Generator().manual_seed(seed), **kwargs)

    assert torch.equal(sample(1, top_p=0.9, top_k=20, temperature=0.8), sample(1, top_p=0.9, top_k=20, temperature=0.8))
    assert not torch.equal(sample(1), sample(2))
    assert torch.equal(sample(3, top_k=1), model.generate(prompt, 8, do_sample=False))
    assert torch.equal(sample(4, top_p=1e-6), model.generate(prompt, 8, do_sample=False))
    first_step = model(prompt)[:, -1].topk(3).indices
    for seed in range(5):
        assert all(t in allowed for t, allowed in zip(sample(seed, top_k=3)[:, 3], first_step, strict=True))


@pytest.fixture(scope="module")
def gpt2_pair(tmp_path_factory):
    """A random transformers GPT2LMHeadModel and the minilm GPT loaded from the folder it saved."""
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    config = transformers.GPT2Config(
        vocab_size=100, n_positions=32, n_embd=32, n_layer=2, n_head=4, bos_token_id=1, eos_token_id=1, pad_token_id=0
    )
    theirs = transformers.GPT2LMHeadModel(config)
    with torch.no_grad():
        for name, p in theirs.named_parameters():
            p.normal_(std=0.5)
            if name.endswith(("ln_1.weight", "ln_2.weight", "ln_f.weight")):
                p.add_(1.0)
    folder = tmp_path_factory.mktemp("gpt2")
    theirs.eval().save_pretrained(folder)
    return theirs, GPT.from_pretrained(folder)


@pytest.mark.parametrize("eos", [None, "from_output"])
def test_greedy_equals_transformers_generate_on_left_padded_batch(gpt2_pair, eos):
    theirs, ours = gpt2_pair
    torch.manual_seed(1)
    ids = torch.randint(2, 100, (3, 7))
    mask = torch.ones_like(ids)
    mask[0, :4], mask[2, :2] = 0, 0
    ids = ids.masked_fill(mask == 0, 0)
    args = dict(attention_mask=mask, max_new_tokens=10, do_sample=False)
    expected = theirs.generate(ids, **args, pad_token_id=0, eos_token_id=None)
    assert expected.shape == (3, 17)
    stop = None
    if eos == "from_output":  # a token that some rows generate: they stop there, the others go on
        stop = expected[0, 7 + 2].item()
        expected = theirs.generate(ids, **args, pad_token_id=0, eos_token_id=stop)
        assert (expected[0, 7 + 3 :] == 0).all() and expected.size(1) > 7 + 3  # row 0 padded after its stop
    got = ours.generate(ids, **args, pad_token_id=0, eos_token_id=stop)
    assert got.tolist() == expected.tolist()


def test_continuation_log_prob_sums_the_tokens_log_probabilities_under_any_batching():
    from minilm.tokenizers import train_tokenizer

    tokenizer = train_tokenizer(["the film was very good", "the plot was very bad indeed"] * 20, "gpt2", 300)
    model = GPT(GPTConfig(vocab_size=300, max_len=12, n_layers=1, n_heads=2, d_model=16, dropout=0.0)).eval()
    prompts = ["the film was very", "the plot was", "the film was very good and the plot was very"]  # last: too long
    scores = continuation_log_prob(model, tokenizer, prompts, " bad indeed")
    cont = tokenizer.encode(" bad indeed", add_special_tokens=False)
    for prompt, score in zip(prompts, scores, strict=True):
        ids = tokenizer.encode(prompt, add_special_tokens=False)[-(12 - len(cont)) :] + cont  # fits the context
        log_probs = model(torch.tensor([ids]))[0].log_softmax(-1)  # (T, V)
        by_hand = sum(log_probs[len(ids) - len(cont) - 1 + j, c] for j, c in enumerate(cont))
        torch.testing.assert_close(score, by_hand)
    torch.testing.assert_close(continuation_log_prob(model, tokenizer, prompts, " bad indeed", batch_size=1), scores)
    with pytest.raises(ValueError, match="tokenises to nothing"):
        continuation_log_prob(model, tokenizer, prompts, "")
