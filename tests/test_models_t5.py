"""T5 (minilm.models.t5, minilm.nn.relative_position): the bucket function and parameter counts against transformers,
Hugging Face checkpoints both ways in the v1.0 and v1.1 layouts (padded sources, heads narrower than d_model), the
relative position bias shared by all layers, the KV cache against no cache, greedy and beam search equal to
transformers' generate, clear errors."""

import json

import pytest
import torch
from safetensors.torch import load_file, save_file

import minilm.models
from minilm.files import CheckpointError
from minilm.models.hf import t5 as hf_t5
from minilm.models.t5 import T5, T5_PRESETS, T5Config, t5_config
from minilm.nn import RelativePositionBias, relative_position_bucket

transformers = pytest.importorskip("transformers")
from transformers.models.t5.modeling_t5 import T5Attention  # noqa: E402

V = 99
# 4 heads of 6 in a 32-wide model (n_heads * d_kv != d_model, as in t5-v1_1-small), 8 buckets up to offset 20
V1_0 = T5Config(
    vocab_size=V, d_model=32, d_kv=6, d_ff=40, n_encoder_layers=2, n_decoder_layers=2, n_heads=4, num_buckets=8,
    max_distance=20, dropout=0.0, max_len=64,
)  # fmt: skip
V1_1 = T5Config(**{**V1_0.__dict__, "activation": "gelu_new", "gated_ffn": True, "tie_embeddings": False,
                   "scale_output": False})  # fmt: skip
VERSIONS = {"v1.0": V1_0, "v1.1": V1_1}
PAPER_SIZES = {"t5-small": 60e6, "t5-base": 220e6}  # §3.7: "Small ... 60 million parameters", "Base ... 220 million"


def n_parameters(model: torch.nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())  # tied parameters once


def hf_config(config: T5Config, **overrides):
    return transformers.T5Config(**{**hf_t5.config_to_hf(config), **overrides})


def _randomise(model: torch.nn.Module, seed: int = 0) -> torch.nn.Module:
    """Every parameter random (norm gains near 1), so that a mis-mapped tensor cannot hide; eval mode."""
    torch.manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            p.copy_(1 + 0.1 * torch.randn_like(p)) if "norm" in name else p.normal_(0, 0.15)
    return model.eval()


def _hf_model(config: T5Config, seed: int = 0):
    torch.manual_seed(seed)
    return _randomise(transformers.T5ForConditionalGeneration(hf_config(config)), seed)


def _source():
    """Tokens ending in </s> (id 1), right-padded with <pad> (id 0) in rows 1 and 2; 30 positions, more than
    max_distance, so the log-spaced and the last buckets are used."""
    torch.manual_seed(1)
    ids = torch.randint(3, V, (3, 30))
    mask = torch.zeros_like(ids)
    for row, length in enumerate([30, 21, 6]):
        mask[row, :length] = 1
        ids[row, length - 1] = 1
        ids[row, length:] = 0
    return ids, mask


def _target(length: int = 25):
    torch.manual_seed(2)
    target = torch.randint(3, V, (3, length))
    target[:, 0] = 0  # the decoder starts from <pad>
    return target


@pytest.mark.parametrize("bidirectional", [True, False])
@pytest.mark.parametrize("num_buckets, max_distance", [(32, 128), (8, 20), (6, 9), (64, 1000)])
def test_bucket_function_equals_transformers(bidirectional, num_buckets, max_distance):
    offsets = torch.arange(-1500, 1500)
    ours = relative_position_bucket(offsets, bidirectional, num_buckets, max_distance)
    theirs = T5Attention._relative_position_bucket(offsets, bidirectional, num_buckets, max_distance)
    assert torch.equal(ours, theirs)
    assert ours.min() >= 0 and ours.max() == num_buckets - 1


def test_buckets_are_exact_near_log_spaced_far_and_causal_in_the_decoder():
    buckets = lambda d, bi=True: relative_position_bucket(torch.tensor(d), bi).item()  # noqa: E731
    assert [buckets(-d) for d in range(8)] == list(range(8))  # 8 exact offsets to the left (16 per direction)
    assert [buckets(d) for d in range(1, 8)] == [16 + d for d in range(1, 8)]  # and to the right
    assert buckets(-128) == buckets(-10_000) == 15  # "beyond which we assign all relative positions to the same"
    assert buckets(-9) == buckets(-10) == 8 < buckets(-12)  # log-spaced: far offsets share buckets
    assert [buckets(-d, False) for d in range(16)] == list(range(16))  # causal: 16 exact offsets, all the past
    assert buckets(5, False) == 0  # the future (never attended to) counts as offset 0


def test_relative_position_bias_is_one_table_per_stack_and_follows_the_cache():
    model = T5(V1_0)
    tables = [n for n, _ in model.named_parameters() if "position_bias" in n]
    assert tables == ["encoder_position_bias.embedding.weight", "decoder_position_bias.embedding.weight"]
    bias = model.decoder_position_bias
    full = bias(10, 10)  # (1, nh, 10, 10)
    assert full.shape == (1, V1_0.n_heads, 10, 10)
    torch.testing.assert_close(bias(3, 10, past_length=7), full[:, :, 7:])  # the new rows of the full matrix
    enc = model.encoder_position_bias.buckets(5, 5)
    assert torch.equal(enc.diagonal(), torch.zeros(5, dtype=torch.long))  # offset 0
    right = torch.ones(5, 5).triu(1).bool()
    assert torch.all(enc[right] >= V1_0.num_buckets // 2) and torch.all(enc[~right] < V1_0.num_buckets // 2)
    with pytest.raises(ValueError, match="max_distance"):
        RelativePositionBias(4, True, num_buckets=32, max_distance=8)


@pytest.mark.parametrize("preset", list(PAPER_SIZES))
def test_parameter_counts_equal_transformers_and_the_paper(preset):
    config = t5_config(preset)
    with torch.device("meta"):
        ours = n_parameters(T5(config))
        theirs = n_parameters(transformers.T5ForConditionalGeneration(hf_config(config)))
    assert ours == theirs == {"t5-small": 60_506_624, "t5-base": 222_903_552}[preset]
    assert abs(ours - PAPER_SIZES[preset]) / PAPER_SIZES[preset] < 0.02


@pytest.mark.parametrize(
    ("preset", "paper", "exact"),
    [("t5-large", 770e6, 737_668_096), ("t5-3b", 3e9, 2_851_598_336), ("t5-11b", 11e9, 11_307_321_344)],
)
def test_the_largest_sizes_count_as_transformers_and_near_the_papers_names(preset, paper, exact):
    config = t5_config(preset)
    with torch.device("meta"):
        ours = n_parameters(T5(config))
        theirs = n_parameters(transformers.T5ForConditionalGeneration(hf_config(config)))
    assert ours == theirs == exact
    assert abs(ours - paper) / paper < 0.06  # the paper names them by round numbers (§3.7)


def test_v1_1_small_has_its_own_lm_head():
    with torch.device("meta"):
        model = T5(t5_config("t5-v1_1-small"))
    assert model.lm_head.weight is not model.embedding.token.weight
    assert n_parameters(model) == 76_961_152  # google/t5-v1_1-small's 77M: 8+8 layers of GEGLU, untied head
    assert set(T5_PRESETS) >= {"t5-small", "t5-base", "t5-large", "t5-3b", "t5-11b", "t5-v1_1-small", "t5-v1_1-base"}


def test_initialisation_folds_attention_scaling_into_the_query():
    config = T5Config(vocab_size=V, d_model=256, d_kv=64, n_heads=4, d_ff=512, n_encoder_layers=1, n_decoder_layers=1)
    torch.manual_seed(0)
    model = T5(config)
    attn = model.encoder.layers[0].self_attn
    assert abs(attn.q_proj.weight.std().item() - (256 * 64) ** -0.5) < 0.1 * (256 * 64) ** -0.5
    assert abs(attn.k_proj.weight.std().item() - 256**-0.5) < 0.1 * 256**-0.5
    assert abs(model.embedding.token.weight.std().item() - 1.0) < 0.05  # N(0, 1): hence v1.0's d_model^-0.5
    assert attn.scale == 1.0 and attn.q_proj.bias is None


@pytest.mark.parametrize("version", list(VERSIONS))
def test_transformers_checkpoint_loads_with_equal_logits(version, tmp_path):
    config = VERSIONS[version]
    hf = _hf_model(config)
    hf.save_pretrained(tmp_path / "hf")
    model = T5.from_pretrained(tmp_path / "hf")
    assert (model.config.activation, model.config.gated_ffn) == (config.activation, config.gated_ffn)
    src, mask = _source()
    with torch.no_grad():
        theirs = hf(input_ids=src, attention_mask=mask, decoder_input_ids=_target()).logits
        torch.testing.assert_close(model(src, mask, _target()), theirs, rtol=0, atol=2e-5)
        theirs = hf(input_ids=src, attention_mask=mask, decoder_input_ids=hf._shift_right(src)).logits
        torch.testing.assert_close(model(src, mask), theirs, rtol=0, atol=2e-5)  # default: the source shifted right
        encoder_theirs = hf.encoder(input_ids=src, attention_mask=mask).last_hidden_state
        torch.testing.assert_close(model.encode(src, mask).last_hidden_state, encoder_theirs, rtol=0, atol=2e-5)


@pytest.mark.parametrize("version", list(VERSIONS))
def test_transformers_loads_what_minilm_saved(version, tmp_path):
    model = _randomise(T5(VERSIONS[version]), seed=3)
    folder = model.save_pretrained(tmp_path / "ours")
    config = json.loads((folder / "config.json").read_text())
    assert config["architectures"] == ["T5ForConditionalGeneration"]
    assert config["feed_forward_proj"] == {"v1.0": "relu", "v1.1": "gated-gelu"}[version]
    assert ("lm_head.weight" in load_file(folder / "model.safetensors")) == (version == "v1.1")
    hf = transformers.T5ForConditionalGeneration.from_pretrained(folder).eval()
    src, mask = _source()
    target = _target()
    with torch.no_grad():
        theirs = hf(input_ids=src, attention_mask=mask, decoder_input_ids=target).logits
    torch.testing.assert_close(model(src, mask, target), theirs, rtol=0, atol=2e-5)
    assert T5.from_pretrained(folder).config == model.config  # and back


def _hub_v1_1_folder(folder):
    """A folder as google/t5-v1_1-* are on the Hub: tie_word_embeddings false, no scale_decoder_outputs (the Hub's
    configs predate transformers 5) and an lm_head.weight that differs from the table."""
    _hf_model(V1_1).save_pretrained(folder)
    tensors = load_file(folder / "model.safetensors")
    torch.manual_seed(4)
    tensors["lm_head.weight"] = torch.randn(V, V1_1.d_model)
    save_file(tensors, folder / "model.safetensors", metadata={"format": "pt"})
    config = json.loads((folder / "config.json").read_text())
    config.pop("scale_decoder_outputs", None)
    (folder / "config.json").write_text(json.dumps({**config, "tie_word_embeddings": False}))
    return folder


def _assert_untied_v1_1_equals_transformers(folder):
    model = minilm.models.from_pretrained(folder)
    hf = transformers.T5ForConditionalGeneration.from_pretrained(folder).eval()
    assert not model.config.tie_embeddings and not model.config.scale_output
    assert hf.lm_head.weight is not hf.shared.weight  # transformers keeps them apart too
    assert torch.equal(model.lm_head.weight, hf.lm_head.weight)
    assert not torch.equal(model.lm_head.weight, model.embedding.token.weight)
    src, mask = _source()
    with torch.no_grad():
        theirs = hf(input_ids=src, attention_mask=mask, decoder_input_ids=_target()).logits
    torch.testing.assert_close(model(src, mask, _target()), theirs, rtol=0, atol=2e-5)


def test_a_hub_v1_1_file_with_its_own_lm_head_loads_untied(tmp_path):
    folder = _hub_v1_1_folder(tmp_path / "hub")
    _assert_untied_v1_1_equals_transformers(folder)
    assert torch.equal(
        T5.from_pretrained(folder).lm_head.weight, load_file(folder / "model.safetensors")["lm_head.weight"]
    )


def test_a_v1_1_saved_again_by_transformers_5_loads_untied(tmp_path):
    """transformers 5 reads the Hub's v1.1 with its own head, then writes tie_word_embeddings true (it always ties
    T5's head in the config), scale_decoder_outputs false and both tensors: its tie_weights keeps tensors that
    differ apart, and so does minilm."""
    transformers.T5ForConditionalGeneration.from_pretrained(_hub_v1_1_folder(tmp_path / "hub")).save_pretrained(
        tmp_path / "again"
    )
    config = json.loads((tmp_path / "again" / "config.json").read_text())
    assert (config["tie_word_embeddings"], config["scale_decoder_outputs"]) == (True, False)
    tensors = load_file(tmp_path / "again" / "model.safetensors")
    assert not torch.equal(tensors["lm_head.weight"], tensors["shared.weight"])
    _assert_untied_v1_1_equals_transformers(tmp_path / "again")


def test_a_tied_file_with_equal_copies_of_the_table_loads_tied(tmp_path):
    """A v1.0 file that holds the LM head as a copy of the table (as older transformers wrote it) stays tied."""
    folder = tmp_path / "tied"
    _hf_model(V1_0).save_pretrained(folder)
    tensors = load_file(folder / "model.safetensors")
    tensors["lm_head.weight"] = tensors["shared.weight"].clone()
    save_file(tensors, folder / "model.safetensors", metadata={"format": "pt"})
    model = minilm.models.from_pretrained(folder)
    assert model.config.tie_embeddings and model.lm_head.weight is model.embedding.token.weight


def test_a_t5_model_file_without_head_loads(tmp_path):
    hf = _hf_model(V1_0)
    hf_body = transformers.T5Model(hf.config)
    hf_body.load_state_dict(hf.state_dict(), strict=False)
    hf_body.eval().save_pretrained(tmp_path / "body")
    model = minilm.models.from_pretrained(tmp_path / "body")
    assert isinstance(model, T5)
    src, mask = _source()
    with torch.no_grad():
        theirs = hf_body(input_ids=src, attention_mask=mask, decoder_input_ids=_target()).last_hidden_state
        ours = model.decode(_target(), model.encode(src, mask).last_hidden_state, mask).last_hidden_state
    torch.testing.assert_close(ours, theirs, rtol=0, atol=2e-5)


def test_decoding_with_the_cache_equals_decoding_without():
    model = _randomise(T5(V1_1), seed=5)
    src, mask = _source()
    target = _target(12)
    with torch.no_grad():
        memory = model.encode(src, mask).last_hidden_state
        full = model.decode(target, memory, mask).last_hidden_state
        cache = model.new_cache()
        steps = [model.decode(target[:, :5], memory, mask, cache=cache).last_hidden_state]
        steps += [model.decode(target[:, t : t + 1], memory, mask, cache=cache).last_hidden_state for t in range(5, 12)]
    torch.testing.assert_close(torch.cat(steps, dim=1), full, rtol=0, atol=1e-5)


@pytest.mark.parametrize("version", list(VERSIONS))
@pytest.mark.parametrize("num_beams", [1, 3])
def test_generation_equals_transformers(version, num_beams, tmp_path):
    hf = _hf_model(VERSIONS[version], seed=6)
    hf.save_pretrained(tmp_path / "hf")
    model = T5.from_pretrained(tmp_path / "hf")
    src, mask = _source()
    options = dict(max_new_tokens=12, num_beams=num_beams, min_new_tokens=4)
    theirs = hf.generate(input_ids=src, attention_mask=mask, do_sample=False, **options)
    ours = model.generate(src, mask, **options)
    assert torch.equal(ours[:, : theirs.size(1)], theirs)
    assert torch.all(ours[:, theirs.size(1) :] == 0)  # padding after the end, where transformers stopped


def test_seq2seq_states_are_what_the_logits_read():
    model = _randomise(T5(V1_0), seed=7)
    src, mask = _source()
    labels = _target(9)[:, 1:]
    hidden, weight, bias = model.seq2seq_states(src, mask, labels)
    with torch.no_grad():
        logits = model(src, mask, model.shift_right(labels))
    torch.testing.assert_close(hidden @ weight.T, logits, rtol=0, atol=1e-5)
    assert bias is None and torch.equal(model.shift_right(labels)[:, 0], torch.zeros(3, dtype=torch.long))


def test_config_round_trip():
    for config in VERSIONS.values():
        assert hf_t5.config_from_hf(hf_t5.config_to_hf(config)) == config
    defaults = hf_t5.config_from_hf({"model_type": "t5"})
    assert defaults == t5_config("t5-small")  # transformers' T5Config() is t5-small


@pytest.mark.parametrize(
    "field, value, message",
    [
        ("feed_forward_proj", "gated-gelu-fast", "feed_forward_proj 'gated-gelu-fast' is not supported"),
        ("feed_forward_proj", "tanh", "is not supported"),
        ("is_decoder", True, "is_decoder=True is not supported"),
        ("relative_attention_bias_type", "alibi", "fields this loader does not know: relative_attention_bias_type"),
    ],
)
def test_configs_minilm_cannot_represent_are_refused(field, value, message, tmp_path):
    hf_t5_config = {**hf_t5.config_to_hf(V1_0), field: value}
    with pytest.raises(CheckpointError, match=message):
        hf_t5.config_from_hf(hf_t5_config)


def test_bad_inputs_are_one_clear_error():
    model = T5(V1_0)
    src, mask = _source()
    with pytest.raises(ValueError, match="source has 65 positions, more than the model's max_len=64"):
        model.encode(torch.ones(1, 65, dtype=torch.long))
    with pytest.raises(ValueError, match="output .* has 65 positions"):
        model.generate(src, mask, max_new_tokens=64)
    with pytest.raises(ValueError, match="unknown T5 size 't5-tiny'"):
        t5_config("t5-tiny")
    with pytest.raises(ValueError, match="n_heads=0 and head_size=6"):
        T5(T5Config(**{**V1_0.__dict__, "n_heads": 0}))
