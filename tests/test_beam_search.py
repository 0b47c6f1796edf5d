"""Beam search and the decoding constraints: minilm's loops drive a random transformers BART through an adapter and
must give what its ``generate`` gives, token for token and score for score; the constraints against transformers'
logits processors; the step/reorder contract on a hand-made Markov chain; clear errors."""

import math

import pytest
import torch

from minilm.generation import (
    beam_search,
    force_tokens,
    generate,
    no_repeat_ngram_mask,
    process_scores,
)

START, PAD, EOS = 2, 1, 2  # BART's: the decoder starts from </s>
VOCAB, MAX_NEW = 80, 12
EOS_BIAS = {"rare": 0.0, "likely": 1.0}  # added to the eos logit: no hypothesis ends early / they end at 4 to 12


@pytest.fixture(scope="module")
def bart():
    """eos -> a random tiny transformers BART (eval mode), its eos logit biased by EOS_BIAS[eos]."""
    transformers = pytest.importorskip("transformers")
    models = {}

    def build(eos: str):
        if eos not in models:
            torch.manual_seed(0)
            config = transformers.BartConfig(
                vocab_size=VOCAB,
                d_model=32,
                encoder_layers=2,
                decoder_layers=2,
                encoder_attention_heads=4,
                decoder_attention_heads=4,
                encoder_ffn_dim=64,
                decoder_ffn_dim=64,
                max_position_embeddings=64,
                dropout=0.0,
                attention_dropout=0.0,
                activation_dropout=0.0,
                pad_token_id=PAD,
                bos_token_id=0,
                eos_token_id=EOS,
                decoder_start_token_id=START,
                forced_bos_token_id=None,
                forced_eos_token_id=None,
                tie_word_embeddings=False,  # tied random embeddings mostly repeat the last token
            )
            model = transformers.BartForConditionalGeneration(config).eval()
            with torch.no_grad():
                for p in model.parameters():
                    if p.dim() > 1:
                        p.normal_(std=0.1)  # peakier than the default 0.02: varied, distinct continuations
                model.final_logits_bias[0, EOS] = EOS_BIAS[eos]
            # only what the tests pass: no default of the model's config adds a processor behind our back
            model.generation_config = transformers.GenerationConfig(
                decoder_start_token_id=START, bos_token_id=0, eos_token_id=EOS, pad_token_id=PAD
            )
            models[eos] = model
        return models[eos]

    return build


def sources():
    """B = 3 sources of 9, 5 and 3 tokens, padded on the right as BART's tokenizer does, and their mask."""
    generator = torch.Generator().manual_seed(1)
    ids = torch.randint(3, VOCAB, (3, 9), generator=generator)
    mask = (torch.arange(9)[None, :] < torch.tensor([9, 5, 3])[:, None]).long()
    return ids.masked_fill(mask == 0, PAD), mask


class HFDecoder:
    """minilm's ``step_fn`` and ``reorder_fn`` for a transformers BART: encode once, then decode step by step with
    the model's own EncoderDecoderCache, which ``reorder`` moves together with the encoder output and mask."""

    def __init__(self, model, ids, mask):
        from transformers import DynamicCache, EncoderDecoderCache

        self.model = model
        with torch.no_grad():
            self.memory = model.get_encoder()(input_ids=ids, attention_mask=mask).last_hidden_state  # (B, S, C)
        self.mask = mask
        self.cache = EncoderDecoderCache(DynamicCache(), DynamicCache())

    def step(self, new_ids, attention_mask):
        from transformers.modeling_outputs import BaseModelOutput

        assert attention_mask is None  # the decoder inputs have no padding
        out = self.model(
            encoder_outputs=BaseModelOutput(last_hidden_state=self.memory),
            attention_mask=self.mask,
            decoder_input_ids=new_ids,
            past_key_values=self.cache,
            use_cache=True,
        )
        self.cache = out.past_key_values
        return out.logits[:, -1]  # (rows, V)

    def reorder(self, index):
        self.memory, self.mask = self.memory.index_select(0, index), self.mask.index_select(0, index)
        if self.cache.get_seq_length() > 0:  # empty before the first step
            self.cache.reorder_cache(index)


def hf_generate(model, **settings):
    """transformers' generate on sources(), every setting explicit: the defaults, then ``settings``."""
    ids, mask = sources()
    args = dict(
        max_new_tokens=MAX_NEW,
        num_beams=1,
        num_return_sequences=1,
        length_penalty=1.0,
        early_stopping=False,
        no_repeat_ngram_size=0,
        min_new_tokens=0,
        forced_bos_token_id=None,
        forced_eos_token_id=None,
        decoder_start_token_id=START,
        eos_token_id=EOS,
        pad_token_id=PAD,
        do_sample=False,
        use_cache=True,
    )
    args.update(settings)
    return model.generate(ids, attention_mask=mask, output_scores=True, return_dict_in_generate=True, **args)


def ours(model, mode, **settings):
    """minilm's beam_search ("beam") or generate ("greedy") on sources(), driving the model through HFDecoder."""
    ids, mask = sources()
    decoder = HFDecoder(model, ids, mask)
    starts = torch.full((ids.size(0), 1), START)
    common = dict(eos_token_id=EOS, pad_token_id=PAD)
    if mode == "greedy":
        return generate(decoder.step, starts, MAX_NEW, do_sample=False, **common, **settings)
    return beam_search(decoder.step, decoder.reorder, starts, MAX_NEW, **common, return_scores=True, **settings)


def ends_early(sequences):
    """Rows that finished before MAX_NEW tokens (padded after their eos)."""
    return int((sequences[:, -1] == PAD).sum())


# --- beam search: parity with transformers ---


@pytest.mark.parametrize("eos", ["likely", "rare"])
@pytest.mark.parametrize("early_stopping", [True, False, "never"])
@pytest.mark.parametrize("length_penalty", [0.5, 1.0, 2.0])
@pytest.mark.parametrize("num_beams", [2, 4])
def test_beam_search_equals_transformers(bart, num_beams, length_penalty, early_stopping, eos):
    model = bart(eos)
    search = dict(num_beams=num_beams, length_penalty=length_penalty, early_stopping=early_stopping)
    expected = hf_generate(model, **search, num_return_sequences=2)
    got, scores = ours(model, "beam", **search, num_return_sequences=2)
    assert got.tolist() == expected.sequences.tolist()
    torch.testing.assert_close(scores, expected.sequences_scores, rtol=0, atol=1e-5)
    if eos == "rare":  # every hypothesis stopped by the length limit
        assert ends_early(got) == 0 and got.size(1) == 1 + MAX_NEW
    elif length_penalty <= 1.0:  # hypotheses finished at different lengths, some before the end
        assert ends_early(got) > 0 and len({int((row != PAD).sum()) for row in got}) > 1


def test_each_early_stopping_and_length_penalty_gives_its_own_result(bart):
    """The parity above tells the settings apart: on this model each one changes the hypotheses found."""
    model = bart("likely")
    results = {}
    for early_stopping in (True, False, "never"):
        for length_penalty in (0.5, 1.0, 2.0):
            search = dict(early_stopping=early_stopping, length_penalty=length_penalty)
            results[early_stopping, length_penalty] = ours(model, "beam", num_beams=4, num_return_sequences=2, **search)
    different = lambda a, b: not torch.equal(results[a][0], results[b][0])
    assert different((True, 1.0), (False, 1.0)) and different((False, 1.0), ("never", 1.0))
    assert different((True, 1.0), ("never", 1.0)) and different((False, 2.0), (True, 2.0))
    assert different((False, 0.5), (False, 1.0)) and different((False, 1.0), (False, 2.0))


CONSTRAINTS = {  # name: settings for the processors, which transformers adds in this order
    "none": {},
    "ngram 2": dict(no_repeat_ngram_size=2),
    "ngram 3": dict(no_repeat_ngram_size=3),
    "min new 5": dict(min_new_tokens=5),
    "forced bos+eos": dict(forced_bos_token_id=0, forced_eos_token_id=EOS),
    "forced eos": dict(forced_eos_token_id=EOS),
    "all": dict(no_repeat_ngram_size=2, min_new_tokens=3, forced_bos_token_id=0, forced_eos_token_id=EOS),
}


@pytest.mark.parametrize("constraints", CONSTRAINTS)
@pytest.mark.parametrize("eos", ["likely", "rare"])
def test_constrained_beam_search_equals_transformers(bart, eos, constraints):
    model = bart(eos)
    settings = dict(num_beams=4, num_return_sequences=2, **CONSTRAINTS[constraints])
    expected = hf_generate(model, **settings)
    got, scores = ours(model, "beam", **settings)
    assert got.tolist() == expected.sequences.tolist()
    torch.testing.assert_close(scores, expected.sequences_scores, rtol=0, atol=1e-5)


@pytest.mark.parametrize("constraints", CONSTRAINTS)
@pytest.mark.parametrize("eos", ["likely", "rare"])
def test_greedy_equals_transformers(bart, eos, constraints):
    model = bart(eos)
    expected = hf_generate(model, **CONSTRAINTS[constraints])
    got = ours(model, "greedy", **CONSTRAINTS[constraints])
    assert got.tolist() == expected.sequences.tolist()


@pytest.mark.parametrize("early_stopping", [False, True])
@pytest.mark.parametrize("eos", ["likely", "rare"])
def test_one_beam_is_greedy_as_in_transformers(bart, eos, early_stopping):
    """num_beams=1: transformers decodes greedily; beam search with one beam finds the same sequences."""
    model = bart(eos)
    settings = CONSTRAINTS["all"] if eos == "rare" else {}
    greedy = ours(model, "greedy", **settings)
    got, _ = ours(model, "beam", num_beams=1, early_stopping=early_stopping, **settings)
    assert got.tolist() == greedy.tolist() == hf_generate(model, **settings).sequences.tolist()


def test_the_constraints_hold_on_the_outputs(bart):
    model = bart("likely")
    got, _ = ours(model, "beam", num_beams=4, num_return_sequences=4, no_repeat_ngram_size=2, min_new_tokens=5)
    unconstrained, _ = ours(model, "beam", num_beams=4, num_return_sequences=4)
    assert not torch.equal(got, unconstrained)
    for row in got.tolist():
        tokens = row[: row.index(EOS, 1) + 1] if EOS in row[1:] else row
        bigrams = list(zip(tokens, tokens[1:], strict=False))
        assert len(bigrams) == len(set(bigrams))  # none repeated, the start token's included
        assert len(tokens) - 1 > 5 or tokens[-1] != EOS  # no eos among the first 5 generated tokens
    forced, _ = ours(model, "beam", num_beams=4, forced_bos_token_id=7, forced_eos_token_id=EOS)
    assert (forced[:, 1] == 7).all()
    assert ((forced == EOS).sum(1) == 2).all()  # the start and one stop token: by max_new_tokens at the latest


# --- the constraints against transformers' logits processors ---


@pytest.mark.parametrize("n", [1, 2, 3, 4])
def test_no_repeat_ngram_mask_equals_transformers(n):
    processors = pytest.importorskip("transformers.generation.logits_process")
    ids = torch.randint(0, 4, (8, 12))  # a small vocabulary: many repeated n-grams
    ids[0, -1] = 9  # an id beyond the logits' vocabulary bans nothing
    scores = torch.randn(8, 6)
    expected = processors.NoRepeatNGramLogitsProcessor(n)(ids, scores.clone())
    assert torch.equal(torch.isinf(expected), no_repeat_ngram_mask(ids, n, 6))
    assert torch.equal(process_scores(scores, ids, 3, 10, no_repeat_ngram_size=n), expected)
    assert not no_repeat_ngram_mask(ids[:, : n - 1], n, 6).any()  # no complete n-gram yet
    assert no_repeat_ngram_mask(torch.tensor([[5, 3, 5]]), 2, 6).nonzero().tolist() == [[0, 3]]  # 5 3 seen: ban 3


def test_min_new_tokens_and_forced_tokens_equal_transformers():
    processors = pytest.importorskip("transformers.generation.logits_process")
    scores = torch.randn(4, 10).log_softmax(-1)
    for step in range(5):
        ids = torch.randint(0, 10, (4, 2 + step))  # a 2-token start, then step generated tokens
        expected = processors.MinNewTokensLengthLogitsProcessor(2, 3, [2, 5])(ids, scores)
        assert torch.equal(process_scores(scores, ids, step, 6, min_new_tokens=3, eos_token_id=[2, 5]), expected)
    one = torch.zeros(4, 1, dtype=torch.long)
    assert torch.equal(
        process_scores(scores, one, 0, 6, forced_bos_token_id=4),
        processors.ForcedBOSTokenLogitsProcessor(4)(one, scores),
    )
    last = torch.zeros(4, 6, dtype=torch.long)  # 1 start + 5 generated: the 6th token is the last of max_new 6
    expected = processors.ForcedEOSTokenLogitsProcessor(7, 2)(last, scores)
    assert torch.equal(process_scores(scores, last, 5, 6, forced_eos_token_id=2, forced_bos_token_id=4), expected)
    assert process_scores(scores, last, 4, 6, forced_eos_token_id=2) is scores  # nothing applies: unchanged
    with pytest.raises(ValueError, match=r"forced token\(s\) \[10\] outside the vocabulary of 10"):
        force_tokens(scores, [10])


# --- the contract, on a hand-made Markov chain ---

S, E, A, B, C = range(5)  # start, eos, three words
CHAIN = {S: {A: 0.5, B: 0.4, C: 0.1}, A: {B: 0.45, C: 0.3, E: 0.25}, B: {E: 0.9, C: 0.1}, C: {E: 0.6, A: 0.4}}


def markov(calls=None):
    """A step function whose next-token probabilities depend on the last token only (so it needs no cache)."""
    table = torch.full((5, 5), 1e-6)
    for token, nexts in CHAIN.items():
        for nxt, p in nexts.items():
            table[token, nxt] = p

    def step(new_ids, mask):
        if calls is not None:
            calls.append(("step", new_ids.clone()))
        return table[new_ids[:, -1]].log()

    def reorder(index):
        if calls is not None:
            calls.append(("reorder", index.clone()))

    return step, reorder


def test_beam_search_finds_the_likelier_sequence_greedy_misses():
    step, reorder = markov()
    starts = torch.tensor([[S]])
    greedy = generate(step, starts, 5, do_sample=False, eos_token_id=E)
    assert greedy.tolist() == [[S, A, B, E]]  # 0.5 * 0.45 * 0.9 = 0.2025
    best, scores = beam_search(
        step, reorder, starts, 5, num_beams=2, length_penalty=0.0, eos_token_id=E, pad_token_id=0, return_scores=True
    )
    assert best.tolist() == [[S, B, E]]  # 0.4 * 0.9 = 0.36: a worse first token, a better sequence
    torch.testing.assert_close(scores, torch.tensor([math.log(0.36)]))
    two, scores = beam_search(
        step,
        reorder,
        starts,
        5,
        num_beams=2,
        length_penalty=0.0,
        eos_token_id=E,
        pad_token_id=0,
        num_return_sequences=2,
        return_scores=True,
    )
    assert two.tolist() == [[S, B, E, 0], [S, A, B, E]]  # best first, padded
    torch.testing.assert_close(scores, torch.tensor([0.36, 0.2025]).log())
    longer = beam_search(step, reorder, starts, 5, num_beams=2, length_penalty=3.0, eos_token_id=E, pad_token_id=0)
    assert longer.tolist() == [
        [S, A, B, E]
    ]  # a strong length penalty favours the longer one: log(.2025)/27 > log(.36)/8


def test_reorder_fn_expands_the_rows_then_follows_each_beams_parent():
    calls = []
    step, reorder = markov(calls)
    beam_search(step, reorder, torch.tensor([[S], [A]]), 4, num_beams=3, eos_token_id=E)
    kinds = [kind for kind, _ in calls]
    assert kinds[:2] == ["reorder", "step"] and kinds[2:] == ["reorder", "step"] * (len(kinds[2:]) // 2)
    assert calls[0][1].tolist() == [0, 0, 0, 1, 1, 1]  # arange(B).repeat_interleave(K)
    assert calls[1][1].tolist() == [[S]] * 3 + [[A]] * 3  # the starts, expanded
    for kind, value in calls[2:]:
        if kind == "reorder":  # beam j of sequence b continues one of sequence b's beams
            assert value.shape == (6,) and (value // 3).tolist() == [0, 0, 0, 1, 1, 1]
        else:
            assert value.shape == (6, 1)


def test_no_new_tokens_returns_the_starts():
    step, reorder = markov()
    ids, scores = beam_search(
        step,
        reorder,
        torch.tensor([[S], [A]]),
        0,
        num_beams=2,
        num_return_sequences=2,
        eos_token_id=E,
        return_scores=True,
    )
    assert ids.tolist() == [[S], [S], [A], [A]] and scores.tolist() == [0.0] * 4


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(num_beams=0), "num_beams must be an integer >= 1, got 0"),
        (dict(num_beams=2.0), "num_beams must be an integer >= 1"),
        (dict(num_return_sequences=3), "num_return_sequences must be an integer between 1 and num_beams=2"),
        (dict(num_return_sequences=0), "num_return_sequences must be an integer between 1 and num_beams=2"),
        (dict(length_penalty=math.inf), "length_penalty must be a finite number, got inf"),
        (dict(length_penalty=math.nan), "length_penalty must be a finite number"),
        (dict(length_penalty="1"), "length_penalty must be a finite number"),
        (dict(max_new_tokens=-1), "max_new_tokens must be an integer >= 0, got -1"),
        (dict(early_stopping="always"), "early_stopping must be True, False or 'never', got 'always'"),
        (dict(early_stopping=1), "early_stopping must be True, False or 'never', got 1"),
        (dict(early_stopping=True, eos_token_id=None), "early_stopping=True needs an eos_token_id"),
        (dict(early_stopping="never", eos_token_id=None), "early_stopping='never' needs an eos_token_id"),
        (dict(min_new_tokens=2, eos_token_id=None), "min_new_tokens=2 bans the stop tokens, but no eos_token_id"),
        (dict(min_new_tokens=-1), "min_new_tokens must be an integer >= 0"),
        (dict(no_repeat_ngram_size=-2), "no_repeat_ngram_size must be an integer >= 0"),
        (dict(forced_bos_token_id=-1), "forced_bos_token_id must be a token id"),
        (dict(forced_eos_token_id=[]), "forced_eos_token_id must be token id"),
        (dict(forced_eos_token_id=9), r"forced token\(s\) \[9\] outside the vocabulary of 5"),
        (dict(max_len=4), "start of 1 tokens \\+ 5 new ones exceeds the context of 4"),
    ],
)
def test_bad_beam_search_arguments_are_clear_errors(kwargs, message):
    step, reorder = markov()
    args = dict(max_new_tokens=5, num_beams=2, eos_token_id=E) | kwargs
    with pytest.raises(ValueError, match=message):
        beam_search(step, reorder, torch.tensor([[S]]), **args)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(min_new_tokens=2), "min_new_tokens=2 bans the stop tokens, but no eos_token_id"),
        (dict(no_repeat_ngram_size=1.5), "no_repeat_ngram_size must be an integer >= 0"),
        (dict(forced_bos_token_id=True), "forced_bos_token_id must be a token id"),
    ],
)
def test_bad_constraints_in_generate_are_clear_errors(kwargs, message):
    step, _ = markov()
    with pytest.raises(ValueError, match=message):
        generate(step, torch.tensor([[S]]), 3, do_sample=False, **kwargs)
    with pytest.raises(ValueError, match="prompt is empty"):
        beam_search(step, lambda index: None, torch.zeros(1, 0, dtype=torch.long), 3, num_beams=2, eos_token_id=E)
