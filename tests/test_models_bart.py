"""BART (minilm.models.bart): parameter counts and Hugging Face checkpoints both ways against transformers as the
oracle (padded sources, a non-zero final_logits_bias), the KV cache against no cache, the decoder's features, greedy
and beam-search generation token for token equal to transformers' generate, clear errors."""

import json

import pytest
import torch

import minilm.models
from minilm.files import CheckpointError
from minilm.models.bart import BART_PRESETS, Bart, BartConfig, bart_config
from minilm.models.hf import bart as hf_bart
from minilm.nn import shift_right

transformers = pytest.importorskip("transformers")

V = 99
TINY = BartConfig(
    vocab_size=V, max_len=40, n_encoder_layers=2, n_decoder_layers=3, n_heads=4, d_model=32, d_ff=37, dropout=0.0
)
PAPER_SIZES = {"bart-base": 140e6, "bart-large": 400e6}  # §3: "BART contains roughly 10% more parameters than BERT"


def n_parameters(model: torch.nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())  # tied parameters once


def hf_config(config: BartConfig, **overrides):
    return transformers.BartConfig(**{**hf_bart.config_to_hf(config), **overrides})


def _randomise(model: torch.nn.Module, seed: int = 0) -> torch.nn.Module:
    """Every parameter random (biases and norms too) and a random final_logits_bias, so that a mis-mapped tensor
    cannot hide; eval mode."""
    torch.manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "norm" in name.lower() and name.endswith("weight"):
                p.copy_(1 + 0.1 * torch.randn_like(p))
            else:
                p.normal_(0, 0.2)
        model.final_logits_bias.normal_(0, 0.5)
    return model.eval()


def _hf_model(config: BartConfig = TINY, seed: int = 0):
    torch.manual_seed(seed)
    return _randomise(transformers.BartForConditionalGeneration(hf_config(config)), seed)


def _source(pad_id: int = 1, bos_id: int = 0, eos_id: int = 2):
    """<s> tokens </s> with right padding in rows 1 and 2."""
    torch.manual_seed(1)
    ids = torch.randint(4, V, (3, 11))
    lengths = [11, 8, 5]
    mask = torch.zeros_like(ids)
    for row, length in enumerate(lengths):
        mask[row, :length] = 1
        ids[row, 0], ids[row, length - 1] = bos_id, eos_id
        ids[row, length:] = pad_id
    return ids, mask


def _load(hf_model, tmp_path) -> Bart:
    hf_model.save_pretrained(tmp_path / "hf")
    return Bart.from_pretrained(tmp_path / "hf")


@pytest.mark.parametrize("preset", list(BART_PRESETS))
def test_parameter_counts_equal_transformers_and_the_paper(preset):
    config = bart_config(preset)
    with torch.device("meta"):
        ours = n_parameters(Bart(config))
        theirs = n_parameters(transformers.BartForConditionalGeneration(hf_config(config)))
    assert ours == theirs
    assert abs(ours - PAPER_SIZES[preset]) / PAPER_SIZES[preset] < 0.02  # "140M" and "400M"


def test_one_token_table_serves_both_sides_and_the_output():
    model = Bart(TINY)
    table = model.encoder_embedding.token.weight
    assert model.decoder_embedding.token.weight is table and model.lm_head.weight is table
    assert model.encoder_embedding.position is not model.decoder_embedding.position  # each stack its positions
    assert model.encoder_embedding.position.weight.shape == (TINY.max_len + 2, TINY.d_model)  # fairseq's offset
    assert torch.all(table[TINY.pad_id] == 0)  # the padding row starts at zero
    assert "final_logits_bias" not in dict(model.named_parameters())  # a buffer: never trained


def test_transformers_checkpoint_loads_with_equal_logits(tmp_path):
    hf = _hf_model()
    model = _load(hf, tmp_path)
    src, mask = _source()
    torch.manual_seed(2)
    tgt = torch.randint(4, V, (3, 7))
    tgt[:, 0] = TINY.decoder_start_id
    with torch.no_grad():
        for decoder_input_ids in (tgt, None):  # given, and the source shifted right (transformers' default)
            theirs = hf(input_ids=src, attention_mask=mask, decoder_input_ids=decoder_input_ids).logits
            ours = model(src, mask, decoder_input_ids)
            torch.testing.assert_close(ours, theirs, rtol=0, atol=1e-5)
        encoder_theirs = hf.model.encoder(input_ids=src, attention_mask=mask).last_hidden_state
        torch.testing.assert_close(model.encode(src, mask).last_hidden_state, encoder_theirs, rtol=0, atol=1e-5)


def test_transformers_loads_what_minilm_saved(tmp_path):
    model = _randomise(Bart(TINY), seed=3)
    folder = model.save_pretrained(tmp_path / "ours")
    config = json.loads((folder / "config.json").read_text())
    assert config["architectures"] == ["BartForConditionalGeneration"] and config["forced_eos_token_id"] is None
    hf = transformers.BartForConditionalGeneration.from_pretrained(folder).eval()
    src, mask = _source()
    with torch.no_grad():
        torch.testing.assert_close(model(src, mask), hf(input_ids=src, attention_mask=mask).logits, rtol=0, atol=1e-5)
    torch.testing.assert_close(hf.final_logits_bias, model.final_logits_bias)


def test_a_bart_model_file_without_head_loads_with_a_zero_bias(tmp_path):
    hf = _hf_model()
    hf.model.save_pretrained(tmp_path / "body")  # BartModel: no prefix, no final_logits_bias
    model = minilm.models.from_pretrained(tmp_path / "body")
    assert isinstance(model, Bart) and torch.all(model.final_logits_bias == 0)
    src, mask = _source()
    with torch.no_grad():
        theirs = hf.model(input_ids=src, attention_mask=mask).last_hidden_state
        ours = model.decode(model.shift_right(src), model.encode(src, mask).last_hidden_state, mask)
    torch.testing.assert_close(ours.last_hidden_state, theirs, rtol=0, atol=1e-5)


def test_a_classification_head_in_the_file_is_ignored_with_a_warning(tmp_path):
    torch.manual_seed(0)
    hf = transformers.BartForSequenceClassification(hf_config(TINY, num_labels=3)).eval()
    hf.save_pretrained(tmp_path / "cls")
    with pytest.warns(UserWarning, match="classification_head"):
        Bart.from_pretrained(tmp_path / "cls")


def test_config_round_trip_and_defaults_are_transformers():
    assert hf_bart.config_from_hf(hf_bart.config_to_hf(TINY)) == TINY
    defaults = transformers.BartConfig().to_dict()
    assert hf_bart.config_from_hf({"model_type": "bart"}) == BartConfig()
    assert hf_bart.config_to_hf(BartConfig())["d_model"] == defaults["d_model"]


@pytest.mark.parametrize(
    "fields, message",
    [
        ({"decoder_attention_heads": 8}, "decoder_attention_heads=8 differs"),
        ({"decoder_ffn_dim": 64}, "decoder_ffn_dim=64 differs"),
        ({"normalize_before": True}, "normalize_before=True is not supported"),
        ({"activation_function": "tanh"}, "activation_function 'tanh' is not supported"),
        ({"some_new_switch": 1}, "fields this loader does not know: some_new_switch"),
    ],
)
def test_checkpoints_minilm_cannot_represent_are_refused(fields, message):
    with pytest.raises(CheckpointError, match=message):
        hf_bart.config_from_hf({**hf_bart.config_to_hf(TINY), **fields})


def test_shift_right_starts_with_the_start_token_and_reads_padding_for_ignored_labels():
    labels = torch.tensor([[5, 6, 7, 2], [8, 2, -100, -100]])
    assert shift_right(labels, start_id=2, pad_id=1).tolist() == [[2, 5, 6, 7], [2, 8, 2, 1]]
    with pytest.raises(ValueError, match=r"\(B, T\)"):
        shift_right(labels[0], 2, 1)


def test_decoding_with_the_cache_equals_decoding_without_it():
    model = _randomise(Bart(TINY), seed=4)
    src, mask = _source()
    tgt = torch.randint(4, V, (3, 6))
    with torch.no_grad():
        memory = model.encode(src, mask).last_hidden_state
        full = model.decode(tgt, memory, mask).last_hidden_state
        cache = model.new_cache()
        steps = [model.decode(tgt[:, t : t + 1], memory, mask, cache=cache).last_hidden_state for t in range(6)]
    torch.testing.assert_close(torch.cat(steps, dim=1), full, rtol=0, atol=1e-5)
    assert len(cache[0].self_attn) == 6 and len(cache[0].cross_attn) == src.size(1)  # cross k, v computed once


def test_features_are_the_decoders_states_for_the_input_on_both_sides():
    model = _randomise(Bart(TINY), seed=5)
    src, mask = _source()
    with torch.no_grad():
        out = model.features(src, mask, output_hidden_states=True)
        memory = model.encode(src, mask).last_hidden_state
        expected = model.decode(model.shift_right(src), memory, mask).last_hidden_state
    assert out.last_hidden_state.shape == (3, 11, TINY.d_model)
    assert len(out.hidden_states) == TINY.n_decoder_layers + 1
    torch.testing.assert_close(out.last_hidden_state[mask.bool()], expected[mask.bool()], rtol=0, atol=1e-5)


def test_gradients_reach_every_parameter():
    model = Bart(TINY).train()
    src, mask = _source()
    model(src, mask).sum().backward()
    assert all(p.grad is not None and p.grad.abs().sum() > 0 for p in model.parameters())


def _hf_generate(hf, src, mask, **kwargs):
    defaults = dict(decoder_start_token_id=2, forced_bos_token_id=None, forced_eos_token_id=None, use_cache=True)
    with torch.no_grad():
        return hf.generate(input_ids=src, attention_mask=mask, **{**defaults, **kwargs})


@pytest.mark.parametrize(
    "options",
    [
        dict(max_new_tokens=12),
        dict(max_new_tokens=9, no_repeat_ngram_size=2, min_new_tokens=4),
        dict(max_new_tokens=8, forced_bos_token_id=0, forced_eos_token_id=2),
    ],
)
def test_greedy_generation_equals_transformers(options, tmp_path):
    hf = _hf_model(seed=6)
    with torch.no_grad():
        hf.final_logits_bias[0, 2] += 2.0  # </s> likely enough that rows finish at different steps
    model = _load(hf, tmp_path)
    src, mask = _source()
    theirs = _hf_generate(hf, src, mask, do_sample=False, num_beams=1, **options)
    ours = model.generate(src, mask, **options)
    assert ours.tolist() == theirs.tolist()


@pytest.mark.parametrize(
    "options",
    [
        dict(num_beams=4, max_new_tokens=10),
        dict(num_beams=3, max_new_tokens=10, length_penalty=2.0, early_stopping=True),
        dict(num_beams=4, max_new_tokens=10, no_repeat_ngram_size=2, num_return_sequences=2),
        dict(num_beams=2, max_new_tokens=8, min_new_tokens=5, forced_bos_token_id=0, forced_eos_token_id=2),
    ],
)
def test_beam_search_equals_transformers(options, tmp_path):
    hf = _hf_model(seed=7)
    with torch.no_grad():
        hf.final_logits_bias[0, 2] += 2.0
    model = _load(hf, tmp_path)
    src, mask = _source()
    theirs = _hf_generate(hf, src, mask, do_sample=False, **options)
    ours = model.generate(src, mask, **options)
    assert ours.tolist() == theirs.tolist()


def test_sampling_is_reproducible_with_a_generator():
    model = _randomise(Bart(TINY), seed=8)
    src, mask = _source()
    draws = [
        model.generate(src, mask, max_new_tokens=6, do_sample=True, top_k=5, generator=torch.Generator().manual_seed(0))
        for _ in range(2)
    ]
    assert torch.equal(*draws) and draws[0][:, 0].eq(TINY.decoder_start_id).all()


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda m, s, k: m.generate(s, k, max_new_tokens=40), r"output .* has 41 positions, more than .* max_len=40"),
        (lambda m, s, k: m.generate(s, k, num_beams=0), "num_beams"),
        (lambda m, s, k: m.generate(s, k, num_beams=2, do_sample=True), "beam search is deterministic"),
        (lambda m, s, k: m(s, k, torch.full((3, 41), 5)), "the target has 41 positions, more than the model's max_len"),
        (lambda m, s, k: m(torch.full((3, 41), 5)), "the source has 41 positions"),
        (lambda m, s, k: m(s, k[:, :5]), "attention_mask"),
        (lambda m, s, k: m(s + V), "outside the model's vocabulary"),
    ],
)
def test_bad_inputs_are_one_clear_error(call, message):
    model = Bart(TINY).eval()
    src, mask = _source()
    with pytest.raises(ValueError, match=message):
        call(model, src, mask)


@pytest.mark.parametrize(
    "overrides, message",
    [
        (dict(n_heads=5), "not divisible by n_heads=5"),
        (dict(pad_id=V), "pad_id=99 is outside the vocabulary"),
        (dict(n_decoder_layers=0), "at least one encoder and one decoder layer"),
        (dict(activation="tanh"), "unknown activation"),
    ],
)
def test_bad_configurations_are_clear_errors(overrides, message):
    with pytest.raises(ValueError, match=message):
        Bart(BartConfig(**{**TINY.__dict__, **overrides}))
    with pytest.raises(ValueError, match="unknown BART size"):
        bart_config("bart-huge")
