"""ALBERT (minilm.models.albert): parameter counts and Hugging Face checkpoints against transformers as the oracle,
the factorized embedding, the four cross-layer sharing settings, layer groups, clear errors."""

import dataclasses
import json

import pytest
import torch

import minilm.models
from minilm.files import CheckpointError
from minilm.models import Bert, BertConfig
from minilm.models.albert import ALBERT_PRESETS, Albert, AlbertConfig, albert_config
from minilm.models.hf import albert as hf_albert

transformers = pytest.importorskip("transformers")

ATOL = 1e-5
TINY = AlbertConfig(vocab_size=99, max_len=24, n_layers=4, n_heads=4, d_model=32, d_ff=37, embedding_size=16)
HF_SIZES = {  # transformers' names of the v2 configurations
    "albert-base": dict(hidden_size=768, num_hidden_layers=12, num_attention_heads=12, intermediate_size=3072),
    "albert-large": dict(hidden_size=1024, num_hidden_layers=24, num_attention_heads=16, intermediate_size=4096),
    "albert-xlarge": dict(hidden_size=2048, num_hidden_layers=24, num_attention_heads=16, intermediate_size=8192),
    "albert-xxlarge": dict(hidden_size=4096, num_hidden_layers=12, num_attention_heads=64, intermediate_size=16384),
}


def n_parameters(model: torch.nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())  # shared parameters once


def _randomise(model: torch.nn.Module, seed: int = 0) -> torch.nn.Module:
    """Every parameter random (biases and norms too), so that a mis-mapped tensor cannot hide; eval mode."""
    torch.manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            p.copy_(1 + 0.1 * torch.randn_like(p)) if name.endswith("norm.weight") else p.normal_(0, 0.2)
    return model.eval()


def _inputs(pad_id: int = 0):
    """Right padding in row 1, two segments."""
    torch.manual_seed(1)
    ids = torch.randint(5, 99, (3, 11))
    mask = torch.ones_like(ids)
    mask[1, 7:] = 0
    ids[mask == 0] = pad_id
    segments = torch.zeros_like(ids)
    segments[:, 5:] = 1
    return ids, mask, segments


def _close(a, b, mask=None):
    assert a.shape == b.shape
    if mask is not None:  # padding positions' states are not compared (neither library defines them)
        a, b = a[mask.bool()], b[mask.bool()]
    assert (a - b).abs().max().item() < ATOL


# --- sizes ---------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("preset", list(ALBERT_PRESETS))
def test_parameter_counts_equal_transformers(preset):
    with torch.device("meta"):
        ours = Albert(albert_config(preset, mlm=False, sop=False))  # AlbertModel: embeddings, encoder, pooler
        theirs = transformers.AlbertModel(transformers.AlbertConfig(**HF_SIZES[preset]))
    assert n_parameters(ours) == n_parameters(theirs)
    with torch.device("meta"):
        ours = Albert(albert_config(preset))
        theirs = transformers.AlbertForPreTraining(transformers.AlbertConfig(**HF_SIZES[preset]))
    assert n_parameters(ours) == n_parameters(theirs)


def test_papers_sizes_and_table_4_sharing_counts():
    counts = {}
    for preset in ALBERT_PRESETS:
        with torch.device("meta"):
            counts[preset] = n_parameters(Albert(albert_config(preset, mlm=False, sop=False)))
    # Table 1: 12M, 18M, 60M; xxlarge is 235M in the paper, 223M in the released v2 configuration
    assert [round(n / 1e6) for n in counts.values()] == [12, 18, 59, 223]
    with torch.device("meta"):
        bert_base = n_parameters(Bert(BertConfig(vocab_size=30000, mlm=False, nsp=False)))
    shared = {}
    for share in ("all", "attention", "ffn", "none"):
        with torch.device("meta"):
            model = Albert(albert_config("albert-base", embedding_size=768, share=share, mlm=False, sop=False))
        shared[share] = n_parameters(model)
    # Table 4 (E = 768): all-shared 31M, shared-attention 83M, shared-FFN 57M, not-shared 108M; the paper leaves the
    # pooler (0.6M) out. Not shared with E = H is BERT with one E x H projection more.
    pooler = 768 * 768 + 768
    assert [round((n - pooler) / 1e6) for n in shared.values()] == [31, 83, 57, 109]
    assert shared["none"] - bert_base == 768 * 768 + 768


def test_factorized_embedding_shapes_and_tied_decoder():
    model = Albert(TINY)
    assert model.embedding.token.weight.shape == (99, 16)
    assert model.embedding.projection.weight.shape == (32, 16)
    assert model.mlm_head.decoder.weight is model.embedding.token.weight
    assert model.mlm_head.transform.weight.shape == (16, 32)
    ids, mask, segments = _inputs()
    out = model.features(ids, mask, segments, output_hidden_states=True)
    assert out.last_hidden_state.shape == (3, 11, 32) and len(out.hidden_states) == TINY.n_layers + 1
    assert model.mlm_logits(out.last_hidden_state).shape == (3, 11, 99)
    assert model.sop_logits(out.last_hidden_state).shape == (3, 2)


# --- sharing -------------------------------------------------------------------------------------------------------


def test_all_shared_runs_one_block_per_group():
    model = Albert(dataclasses.replace(TINY, n_groups=2))
    assert len(model.encoder.layers) == 2 and model.encoder.block_of == [0, 0, 1, 1]
    one = Albert(TINY)
    assert len(one.encoder.layers) == 1 and one.encoder.block_of == [0, 0, 0, 0]
    # applying the one block four times by hand gives the encoder's output
    ids, mask, segments = _inputs()
    one.eval()
    x = one.embedding(ids, segment_ids=segments)
    keys = mask.bool()[:, None, None, :]
    for _ in range(4):
        x = one.encoder.layers[0](x, mask=keys)
    _close(x, one.features(ids, mask, segments).last_hidden_state)


@pytest.mark.parametrize("share, shared, own", [("attention", "self_attn", "ffn"), ("ffn", "ffn", "self_attn")])
def test_partial_sharing_shares_one_sublayer_and_gradients_add_up(share, shared, own):
    model = Albert(dataclasses.replace(TINY, share=share, n_groups=2))
    layers = model.encoder.layers
    assert len(layers) == 4
    assert getattr(layers[1], shared) is getattr(layers[0], shared) and getattr(layers[3], shared) is getattr(
        layers[2], shared
    )
    assert getattr(layers[2], shared) is not getattr(layers[0], shared)
    assert all(getattr(layers[i], own) is not getattr(layers[0], own) for i in (1, 2, 3))
    # the state dict lists every name; the checkpoint code stores a shared tensor once
    state = model.state_dict()
    name = "self_attn.q_proj.weight" if shared == "self_attn" else "ffn.fc1.weight"
    assert state[f"encoder.layers.1.{name}"].data_ptr() == state[f"encoder.layers.0.{name}"].data_ptr()
    ids, mask, segments = _inputs()
    model.features(ids, mask, segments).last_hidden_state.sum().backward()
    assert getattr(layers[0], shared).parameters().__next__().grad is not None


def test_sharing_settings_change_the_model_and_none_is_bert_shaped():
    settings = ("all", "attention", "ffn", "none")
    counts = {s: n_parameters(Albert(dataclasses.replace(TINY, share=s))) for s in settings}
    assert counts["all"] < counts["attention"] < counts["none"] and counts["all"] < counts["ffn"] < counts["none"]
    block = 4 * (32 * 32 + 32) + 2 * 32 + (32 * 37 + 37) + (37 * 32 + 32) + 2 * 32
    assert counts["none"] - counts["all"] == 3 * block


# --- Hugging Face checkpoints ------------------------------------------------------------------------------------

LAYOUTS = [  # (config, the transformers class it saves as)
    (TINY, "AlbertForPreTraining"),
    (dataclasses.replace(TINY, n_groups=2, sop=False, pooler=False), "AlbertForMaskedLM"),
    (dataclasses.replace(TINY, share="none", mlm=False, sop=False, activation="gelu"), "AlbertModel"),
]


@pytest.mark.parametrize("config, architecture", LAYOUTS, ids=[a for _, a in LAYOUTS])
def test_transformers_checkpoint_loads_with_equal_outputs(config, architecture, tmp_path):
    hf_config = transformers.AlbertConfig(**hf_albert.config_to_hf(config))
    torch.manual_seed(0)
    theirs = getattr(transformers, architecture)(hf_config)
    _randomise(theirs).save_pretrained(tmp_path)
    ours = Albert.from_pretrained(tmp_path)
    assert isinstance(ours, Albert) and dataclasses.asdict(ours.config) == dataclasses.asdict(config)
    ids, mask, segments = _inputs()
    with torch.no_grad():
        ref = theirs(ids, attention_mask=mask, token_type_ids=segments, output_hidden_states=True)
        out = ours.features(ids, mask, segments, output_hidden_states=True)
    assert len(out.hidden_states) == len(ref.hidden_states) == config.n_layers + 1
    for a, b in zip(out.hidden_states, ref.hidden_states, strict=True):
        _close(a, b, mask)
    hidden = out.last_hidden_state
    if architecture == "AlbertModel":
        _close(ours.pool(hidden), ref.pooler_output)
    if config.mlm:
        _close(ours.mlm_logits(hidden), ref.prediction_logits if config.sop else ref.logits, mask)
    if config.sop:
        _close(ours.sop_logits(hidden), ref.sop_logits)


@pytest.mark.parametrize("config, architecture", LAYOUTS, ids=[a for _, a in LAYOUTS])
def test_transformers_loads_what_minilm_saved(config, architecture, tmp_path):
    ours = _randomise(Albert(config))
    ours.save_pretrained(tmp_path / "minilm")
    assert json.loads((tmp_path / "minilm" / "config.json").read_text())["architectures"] == [architecture]
    theirs, info = getattr(transformers, architecture).from_pretrained(tmp_path / "minilm", output_loading_info=True)
    assert not any(info[key] for key in ("missing_keys", "unexpected_keys", "mismatched_keys")), info
    ids, mask, segments = _inputs()
    with torch.no_grad():
        ref = theirs.eval()(ids, attention_mask=mask, token_type_ids=segments)
        hidden = ours.features(ids, mask, segments).last_hidden_state
    if config.mlm:
        _close(ours.mlm_logits(hidden), ref.prediction_logits if config.sop else ref.logits, mask)
    if config.sop:
        _close(ours.sop_logits(hidden), ref.sop_logits)
    # and back: transformers' own save loads into an equal minilm model
    theirs.save_pretrained(tmp_path / "transformers")
    again = minilm.models.from_pretrained(tmp_path / "transformers")
    assert type(again) is Albert and dataclasses.asdict(again.config) == dataclasses.asdict(config)
    for (name, a), b in zip(ours.state_dict().items(), again.state_dict().values(), strict=True):
        assert torch.equal(a, b), name


def test_config_to_hf_and_back_and_defaults_are_transformers():
    config = dataclasses.replace(TINY, n_groups=2, norm_eps=1e-7, classifier_dropout=0.2, init_std=0.05)
    theirs = transformers.AlbertConfig(**hf_albert.config_to_hf(config))
    assert theirs.model_type == "albert" and theirs.num_hidden_groups == 2
    assert hf_albert.config_from_hf(theirs.to_dict()) == config
    minimal = {"model_type": "albert", "vocab_size": 99, "hidden_size": 32, "num_hidden_layers": 4}
    minimal.update(num_attention_heads=4, intermediate_size=37, max_position_embeddings=24)
    full = transformers.AlbertConfig(**minimal).to_dict()
    assert hf_albert.config_from_hf(minimal) == hf_albert.config_from_hf(full)
    default = hf_albert.config_from_hf(
        {"model_type": "albert", **dict(max_position_embeddings=512)}
        | {k: v for k, v in transformers.AlbertConfig().to_dict().items() if k in hf_albert.bert.REQUIRED}
    )
    assert (default.d_model, default.n_heads, default.d_ff, default.embedding_size) == (4096, 64, 16384, 128)


# --- clear errors ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "overrides, message",
    [
        (dict(share="some"), "unknown layer sharing share='some'; choose one of none, all, attention, ffn"),
        (dict(n_groups=3), "n_groups=3 must divide n_layers=4"),
        (dict(share="none", n_groups=2), "share='none' gives every layer its own weights"),
        (dict(n_heads=5), "d_model=32 is not divisible by n_heads=5"),
        (dict(embedding_size=0), "embedding_size must be >= 1"),
        (dict(pooler=False), "sop=True needs pooler=True"),
    ],
)
def test_bad_configurations_are_clear_errors(overrides, message):
    with pytest.raises(ValueError, match=message):
        Albert(dataclasses.replace(TINY, **overrides))


def test_layouts_transformers_cannot_hold_are_refused(tmp_path):
    with pytest.raises(CheckpointError, match="shares whole layers only: a model with share='attention'"):
        Albert(dataclasses.replace(TINY, share="attention")).save_pretrained(tmp_path / "a")
    assert not (tmp_path / "a").exists()
    hf_config = hf_albert.config_to_hf(TINY) | {"inner_group_num": 2}
    with pytest.raises(CheckpointError, match="inner_group_num=2"):
        hf_albert.config_from_hf(hf_config)


def test_a_checkpoint_with_other_shapes_or_family_names_the_difference(tmp_path):
    Albert(TINY).save_pretrained(tmp_path / "albert")
    Bert(BertConfig(vocab_size=99, max_len=24, n_layers=2, n_heads=4, d_model=32, d_ff=37)).save_pretrained(
        tmp_path / "bert"
    )
    with pytest.raises(CheckpointError, match="model_type='bert', expected 'albert'"):
        Albert.from_pretrained(tmp_path / "bert")
    with pytest.raises(CheckpointError, match="model_type='albert', expected 'bert' or 'roberta'"):
        Bert.from_pretrained(tmp_path / "albert")
    assert type(Bert.from_pretrained(tmp_path / "bert")) is Bert
    # a different sharing layout: transformers' groups become minilm's, and a mismatch names the tensors
    config = json.loads((tmp_path / "albert" / "config.json").read_text())
    (tmp_path / "albert" / "config.json").write_text(json.dumps({**config, "num_hidden_groups": 2}))
    with pytest.raises(CheckpointError, match="albert_layer_groups.1"):
        Albert.from_pretrained(tmp_path / "albert")
