"""ELECTRA (minilm.models.electra): parameter counts and Hugging Face checkpoints (discriminator and generator) against
transformers as the oracle, generator_config's multiplier, the generator/discriminator weight sharing of §3.2, clear
errors."""

import dataclasses
import json

import pytest
import torch
import torch.nn.functional as F

import minilm.models
from minilm.files import CheckpointError
from minilm.models.electra import (
    ELECTRA_PRESETS,
    GENERATOR_SIZES,
    Electra,
    ElectraConfig,
    ElectraPretraining,
    check_generator,
    electra_config,
    generator_config,
)
from minilm.models.hf import electra as hf_electra

transformers = pytest.importorskip("transformers")

ATOL = 1e-5
V = 99
# a factorized discriminator (E = 16 < H = 32), ELECTRA-Small-shaped
TINY = ElectraConfig(vocab_size=V, max_len=24, n_layers=2, n_heads=4, d_model=32, d_ff=37, embedding_size=16)
PAPER_SIZES = {"electra-small": 14e6, "electra-base": 110e6, "electra-large": 335e6}  # Table 6


def n_parameters(model: torch.nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())  # shared parameters once


def hf_config(config: ElectraConfig):
    return transformers.ElectraConfig(**hf_electra.config_to_hf(config))


def _randomise(model: torch.nn.Module, seed: int = 0) -> torch.nn.Module:
    """Every parameter random (biases and norms too), so that a mis-mapped tensor cannot hide; eval mode."""
    torch.manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "norm" in name.lower() and name.endswith("weight"):
                p.copy_(1 + 0.1 * torch.randn_like(p))
            else:
                p.normal_(0, 0.2)
    return model.eval()


def _inputs(pad_id: int = 0):
    """Right padding in rows 1 and 2, two segments."""
    torch.manual_seed(1)
    ids = torch.randint(5, V, (3, 11))
    mask = torch.ones_like(ids)
    mask[1, 7:] = 0
    mask[2, 9:] = 0
    ids[mask == 0] = pad_id
    segments = torch.zeros_like(ids)
    segments[:, 5:] = 1
    segments[mask == 0] = 0
    return ids, mask, segments


def _close(a, b, mask=None):
    assert a.shape == b.shape, (a.shape, b.shape)
    if mask is not None:  # padding positions are not compared (neither library defines them)
        a, b = a[mask.bool()], b[mask.bool()]
    assert (a - b).abs().max().item() < ATOL


def _hf_model(architecture: str, config: ElectraConfig):
    torch.manual_seed(0)
    cls = getattr(transformers, architecture)
    return _randomise(cls._from_config(hf_config(config), attn_implementation="eager"))


# --- sizes ---------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("preset", list(ELECTRA_PRESETS))
def test_parameter_counts_equal_transformers(preset):
    config = electra_config(preset)
    with torch.device("meta"):
        ours, theirs = Electra(config), transformers.ElectraForPreTraining(hf_config(config))
        assert n_parameters(ours) == n_parameters(theirs)  # the discriminator
        body = dataclasses.replace(config, rtd=False)
        assert n_parameters(Electra(body)) == n_parameters(transformers.ElectraModel(hf_config(body)))
        generator = generator_config(config, GENERATOR_SIZES[preset])
        assert n_parameters(Electra(generator)) == n_parameters(transformers.ElectraForMaskedLM(hf_config(generator)))


def test_papers_sizes_and_the_generators():
    counts, generators = {}, {}
    for preset in ELECTRA_PRESETS:
        with torch.device("meta"):
            counts[preset] = n_parameters(Electra(electra_config(preset)))
            generators[preset] = n_parameters(
                Electra(generator_config(electra_config(preset), GENERATOR_SIZES[preset]))
            )
    # Table 6: 14M, 110M, 335M; within 4% (ELECTRA-Small's discriminator is 13.5M, Base's 109.5M)
    for preset, paper in PAPER_SIZES.items():
        assert abs(counts[preset] - paper) / paper < 0.04, (preset, counts[preset])
    assert counts == {"electra-small": 13_549_057, "electra-base": 109_483_009, "electra-large": 335_142_913}
    assert generators == {"electra-small": 4_620_026, "electra-base": 33_740_602, "electra-large": 51_295_290}
    # the discriminator's head is Linear(H, H) + Linear(H, 1) on top of the encoder
    with torch.device("meta"):
        body = n_parameters(Electra(electra_config("electra-base", rtd=False)))
    assert counts["electra-base"] - body == 768 * 768 + 768 + 768 + 1


def test_factorized_embedding_heads_and_shapes():
    model = Electra(TINY)
    assert model.embedding.token.weight.shape == (V, 16) and model.embedding.projection.weight.shape == (32, 16)
    assert model.mlm_head is None and model.pooler is None and model.nsp_head is None
    ids, mask, segments = _inputs()
    hidden = model.features(ids, mask, segments).last_hidden_state
    assert hidden.shape == (3, 11, 32) and model.rtd_logits(hidden).shape == (3, 11)
    with pytest.raises(ValueError, match="no MLM head"):
        model.mlm_logits(hidden)
    generator = Electra(dataclasses.replace(TINY, mlm=True, rtd=False))
    assert generator.mlm_head.decoder.weight is generator.embedding.token.weight
    assert generator.mlm_head.transform.weight.shape == (16, 32)  # H -> E, then tied E -> V
    assert generator.mlm_logits(hidden).shape == (3, 11, V)
    with pytest.raises(ValueError, match="no discriminator head"):
        generator.rtd_logits(hidden)
    square = Electra(dataclasses.replace(TINY, embedding_size=32))
    assert square.embedding.projection is None and not square.config.factorized()


# --- Hugging Face checkpoints ------------------------------------------------------------------------------------

GENERATOR = dataclasses.replace(TINY, mlm=True, rtd=False)
LAYOUTS = [  # (config, the transformers class it saves as)
    (TINY, "ElectraForPreTraining"),
    (dataclasses.replace(TINY, embedding_size=32, activation="relu"), "ElectraForPreTraining"),
    (GENERATOR, "ElectraForMaskedLM"),
    (dataclasses.replace(GENERATOR, embedding_size=32, activation="relu"), "ElectraForMaskedLM"),
    (dataclasses.replace(TINY, rtd=False), "ElectraModel"),
]
IDS = [f"{a}-E{c.embedding_size}" for c, a in LAYOUTS]


def _compare_heads(ours, ref, config, hidden, mask):
    if config.rtd:
        _close(ours.rtd_logits(hidden), ref.logits, mask)
    if config.mlm:
        _close(ours.mlm_logits(hidden), ref.logits, mask)


@pytest.mark.parametrize("config, architecture", LAYOUTS, ids=IDS)
def test_transformers_checkpoint_loads_with_equal_outputs(config, architecture, tmp_path):
    theirs = _hf_model(architecture, config)
    theirs.save_pretrained(tmp_path)
    for ours in (minilm.models.from_pretrained(tmp_path), Electra.from_pretrained(tmp_path)):
        assert type(ours) is Electra and dataclasses.asdict(ours.config) == dataclasses.asdict(config)
        ids, mask, segments = _inputs()
        with torch.no_grad():
            ref = theirs(ids, attention_mask=mask, token_type_ids=segments, output_hidden_states=True)
            out = ours.features(ids, mask, segments, output_hidden_states=True)
        assert len(out.hidden_states) == len(ref.hidden_states) == config.n_layers + 1
        for a, b in zip(out.hidden_states, ref.hidden_states, strict=True):
            _close(a, b, mask)
        if architecture == "ElectraModel":
            _close(out.last_hidden_state, ref.last_hidden_state, mask)
        _compare_heads(ours, ref, config, out.last_hidden_state, mask)


@pytest.mark.parametrize("config, architecture", LAYOUTS, ids=IDS)
def test_transformers_loads_what_minilm_saved(config, architecture, tmp_path):
    ours = _randomise(Electra(config))
    ours.save_pretrained(tmp_path / "minilm")
    saved = json.loads((tmp_path / "minilm" / "config.json").read_text())
    assert saved["architectures"] == [architecture] and saved["model_type"] == "electra"
    assert saved["embedding_size"] == config.embedding_size
    cls = getattr(transformers, architecture)
    theirs, info = cls.from_pretrained(tmp_path / "minilm", output_loading_info=True, attn_implementation="eager")
    assert not any(info[key] for key in ("missing_keys", "unexpected_keys", "mismatched_keys")), info
    ids, mask, segments = _inputs()
    with torch.no_grad():
        ref = theirs.eval()(ids, attention_mask=mask, token_type_ids=segments, output_hidden_states=True)
        hidden = ours.features(ids, mask, segments).last_hidden_state
    _close(hidden, ref.hidden_states[-1], mask)
    _compare_heads(ours, ref, config, hidden, mask)
    # and back: transformers' own save loads into an equal minilm model
    theirs.save_pretrained(tmp_path / "transformers")
    again = minilm.models.from_pretrained(tmp_path / "transformers")
    assert type(again) is Electra and dataclasses.asdict(again.config) == dataclasses.asdict(config)
    for (name, a), b in zip(ours.state_dict().items(), again.state_dict().values(), strict=True):
        assert torch.equal(a, b), name


@pytest.mark.parametrize("share", ["embeddings", "none"])
def test_the_pair_saves_as_two_checkpoints_that_transformers_loads(share, tmp_path):
    discriminator = _randomise(Electra(TINY))
    generator = Electra(generator_config(TINY, 0.25, share))  # 8 wide, 1 head
    pair = ElectraPretraining(discriminator, generator, share=share)
    _randomise(pair, seed=2)
    folders = pair.save_pretrained(tmp_path)
    assert folders.keys() == {"discriminator", "generator"}
    assert {f.name for f in tmp_path.iterdir()} == {"discriminator", "generator"}
    ids, mask, segments = _inputs()
    for name, architecture in (("discriminator", "ElectraForPreTraining"), ("generator", "ElectraForMaskedLM")):
        assert json.loads((tmp_path / name / "config.json").read_text())["architectures"] == [architecture]
        cls = getattr(transformers, architecture)
        theirs, info = cls.from_pretrained(tmp_path / name, output_loading_info=True, attn_implementation="eager")
        assert not any(info[key] for key in ("missing_keys", "unexpected_keys", "mismatched_keys")), info
        model = getattr(pair, name)
        with torch.no_grad():
            ref = theirs.eval()(ids, attention_mask=mask, token_type_ids=segments)
            hidden = model.eval().features(ids, mask, segments).last_hidden_state
        _compare_heads(model, ref, model.config, hidden, mask)
    generator_hf = json.loads((tmp_path / "generator" / "config.json").read_text())
    assert generator_hf["hidden_size"] == 8 and generator_hf["num_hidden_layers"] == TINY.n_layers
    assert generator_hf["embedding_size"] == (16 if share == "embeddings" else 8)  # the shared E, or its own width


def test_config_to_hf_and_back_and_defaults_are_transformers():
    config = dataclasses.replace(TINY, norm_eps=1e-7, init_std=0.05, dropout=0.2, activation="gelu_new")
    theirs = hf_config(config)
    assert theirs.model_type == "electra" and theirs.embedding_size == 16 and theirs.hidden_size == 32
    assert hf_electra.config_from_hf(theirs.to_dict()) == dataclasses.replace(config, mlm=True, rtd=True)
    # a file that leaves fields out gets transformers' defaults (ELECTRA-Small's E = 128, not the minilm default)
    minimal = {"model_type": "electra", "vocab_size": V, "hidden_size": 32, "num_hidden_layers": 2}
    minimal.update(num_attention_heads=4, intermediate_size=37, max_position_embeddings=24)
    full = transformers.ElectraConfig(**minimal).to_dict()
    assert hf_electra.config_from_hf(minimal) == hf_electra.config_from_hf(full)
    assert hf_electra.config_from_hf(minimal).embedding_size == transformers.ElectraConfig().embedding_size == 128


# --- clear errors ----------------------------------------------------------------------------------------------


def test_a_model_with_both_heads_has_no_hugging_face_layout(tmp_path):
    both = Electra(dataclasses.replace(TINY, mlm=True, rtd=True))
    hidden = both.features(*_inputs()).last_hidden_state
    assert both.mlm_logits(hidden).shape == (3, 11, V) and both.rtd_logits(hidden).shape == (3, 11)
    with pytest.raises(CheckpointError, match=r"this model has both \(mlm=True, rtd=True\)"):
        both.save_pretrained(tmp_path / "both")
    assert not (tmp_path / "both").exists()


def test_bad_configurations_are_clear_errors():
    with pytest.raises(ValueError, match="embedding_size must be >= 1"):
        Electra(dataclasses.replace(TINY, embedding_size=0))
    with pytest.raises(ValueError, match="d_model=32 is not divisible by n_heads=5"):
        Electra(dataclasses.replace(TINY, n_heads=5))
    with pytest.raises(ValueError, match="unknown ELECTRA preset 'electra-huge'"):
        electra_config("electra-huge")


# --- the generator's config (Table 6's multiplier) --------------------------------------------------------------


def test_generator_config_multiplies_width_heads_and_ffn():
    small = electra_config("electra-small")
    g = generator_config(small, 1 / 4)
    assert (g.d_model, g.n_heads, g.d_ff, g.embedding_size) == (64, 1, 256, 128)  # E kept: shared embeddings
    assert (g.mlm, g.rtd, g.n_layers, g.vocab_size, g.max_len) == (True, False, 12, 30522, 512)
    base = electra_config("electra-base")
    g = generator_config(base, 1 / 3)
    assert (g.d_model, g.n_heads, g.d_ff, g.embedding_size) == (256, 4, 1024, 768)  # google/electra-base-generator
    untied = generator_config(base, 1 / 3, share="none")
    assert (untied.d_model, untied.embedding_size) == (256, 256) and not untied.factorized()
    same = generator_config(base, 1, share="all")
    assert dataclasses.replace(same, mlm=False, rtd=True) == base
    assert base.rtd and not base.mlm  # the discriminator's config is left alone


@pytest.mark.parametrize("d_model, n_heads", [(256, 4), (768, 12), (32, 4), (1024, 16), (60, 6)])
@pytest.mark.parametrize("size", [1 / 4, 1 / 3, 0.3, 0.5, 0.7, 1.0])
def test_generator_heads_always_divide_its_width(d_model, n_heads, size):
    config = ElectraConfig(vocab_size=V, max_len=8, n_layers=1, n_heads=n_heads, d_model=d_model, d_ff=4 * d_model)
    g = generator_config(config, size)
    assert g.d_model == round(d_model * size) and g.d_ff == round(4 * d_model * size)
    assert g.d_model % g.n_heads == 0 and 1 <= g.n_heads <= max(1, round(n_heads * size))
    g.validate()  # the generator builds
    if size == 1 / 3 and (d_model, n_heads) == (256, 4):  # 85 wide: 1 head (round(4/3) = 1)
        assert (g.d_model, g.n_heads) == (85, 1)
    if size == 0.3 and (d_model, n_heads) == (768, 12):  # 230 wide, round(3.6) = 4 heads do not divide it: 2
        assert (g.d_model, g.n_heads) == (230, 2)


@pytest.mark.parametrize(
    "size, share, message",
    [
        (2, "embeddings", "generator_size=2 must be in \\(0, 1\\].*larger than the discriminator"),
        (1.5, "none", "generator_size=1.5 must be in \\(0, 1\\]"),
        (0, "embeddings", "generator_size=0 must be in \\(0, 1\\]"),
        (-0.25, "embeddings", "generator_size=-0.25 must be in \\(0, 1\\]"),
        (0.5, "all", "share=all ties every weight, so the generator must be the discriminator's size"),
        (0.25, "some", "unknown weight sharing share='some'; choose one of none, embeddings, all"),
    ],
)
def test_generators_the_paper_cannot_pair_are_clear_errors(size, share, message):
    with pytest.raises(ValueError, match=message):
        check_generator(size, share)
    with pytest.raises(ValueError, match=message):
        generator_config(TINY, size, share)


def test_the_pair_refuses_generators_it_cannot_tie():
    discriminator = Electra(TINY)
    with pytest.raises(ValueError, match="unknown weight sharing share='some'"):
        ElectraPretraining(discriminator, Electra(generator_config(TINY, 0.5)), share="some")
    untied = Electra(generator_config(TINY, 0.25, share="none"))  # E = 8, the discriminator's is 16
    with pytest.raises(ValueError, match="share='embeddings' ties the embeddings, which must be of one shape"):
        ElectraPretraining(discriminator, untied, share="embeddings")
    with pytest.raises(ValueError, match="generator E=8, V=99, positions=24 vs discriminator E=16"):
        ElectraPretraining(discriminator, untied, share="embeddings")
    longer = Electra(dataclasses.replace(generator_config(TINY, 0.5), max_len=32))
    with pytest.raises(ValueError, match="positions=32 vs discriminator E=16, V=99, positions=24"):
        ElectraPretraining(discriminator, longer, share="embeddings")
    with pytest.raises(ValueError, match="share='all' ties every weight: the generator must be the discriminator's"):
        ElectraPretraining(discriminator, Electra(generator_config(TINY, 0.5)), share="all")
    with pytest.raises(ValueError, match="the generator needs its MLM head"):
        ElectraPretraining(discriminator, Electra(TINY), share="none")
    ElectraPretraining(discriminator, untied, share="none")  # untied, any shape pairs


# --- weight sharing (§3.2) -------------------------------------------------------------------------------------

WIDE = ElectraConfig(vocab_size=V, max_len=24, n_layers=2, n_heads=4, d_model=64, d_ff=128, embedding_size=32)
EMBEDDING_PARTS = ("token", "position", "segment", "norm")


def _pair(share: str, size: float = 0.25, seed: int = 0) -> ElectraPretraining:
    torch.manual_seed(seed)
    return ElectraPretraining(Electra(WIDE), Electra(generator_config(WIDE, size, share)), share=share)


def test_shared_embeddings_are_the_discriminators_modules():
    pair = _pair("embeddings")
    d, g = pair.discriminator, pair.generator
    for part in EMBEDDING_PARTS:
        assert getattr(g.embedding, part) is getattr(d.embedding, part), part
        for a, b in zip(getattr(g.embedding, part).parameters(), getattr(d.embedding, part).parameters(), strict=True):
            assert a is b
    # each keeps its own projection E -> H (32 -> 16 and 32 -> 64) and encoder
    assert g.embedding.projection.weight.shape == (16, 32) and d.embedding.projection.weight.shape == (64, 32)
    assert g.encoder is not d.encoder
    assert g.mlm_head.decoder.weight is d.embedding.token.weight  # the generator's decoder: the shared table
    shared = sum(p.numel() for part in EMBEDDING_PARTS for p in getattr(d.embedding, part).parameters())
    assert n_parameters(pair) == n_parameters(d) + n_parameters(g) - shared
    assert shared == V * 32 + 24 * 32 + 2 * 32 + 2 * 32
    # the pair's state dict names the shared tensors under both networks, the same storage
    state = pair.state_dict()
    assert (
        state["generator.embedding.token.weight"].data_ptr() == state["discriminator.embedding.token.weight"].data_ptr()
    )


def test_share_all_ties_embeddings_and_encoder_and_none_ties_nothing():
    pair = _pair("all", size=1)
    d, g = pair.discriminator, pair.generator
    assert g.embedding is d.embedding and g.encoder is d.encoder
    assert g.mlm_head is not None and g.rtd_head is None and d.rtd_head is not None and d.mlm_head is None
    assert g.mlm_head.decoder.weight is d.embedding.token.weight
    heads = n_parameters(g.mlm_head) - g.mlm_head.decoder.weight.numel()
    assert n_parameters(pair) == n_parameters(d) + heads

    pair = _pair("none")
    d, g = pair.discriminator, pair.generator
    assert not {id(p) for p in d.parameters()} & {id(p) for p in g.parameters()}
    assert g.mlm_head.decoder.weight is g.embedding.token.weight  # its own tie
    assert g.embedding.token.weight.shape == (V, 16)  # the generator's own width (no projection)
    assert g.embedding.projection is None
    assert n_parameters(pair) == n_parameters(d) + n_parameters(g)


def test_a_combined_loss_gives_the_shared_embedding_gradient_from_both_networks():
    pair = _pair("embeddings")
    ids, mask, segments = _inputs()
    targets = torch.randint(0, 2, ids.shape).float()

    def generator_loss():
        hidden = pair.generator.features(ids, mask, segments).last_hidden_state
        return F.cross_entropy(pair.generator.mlm_logits(hidden, mask.bool()), ids[mask.bool()])

    def discriminator_loss():
        logits = pair.discriminator.rtd_logits(pair.discriminator.features(ids, mask, segments).last_hidden_state)
        return F.binary_cross_entropy_with_logits(logits[mask.bool()], targets[mask.bool()])

    pair.eval()  # no dropout: the three evaluations see the same function
    shared = [pair.discriminator.embedding.token.weight, pair.discriminator.embedding.position.weight]
    from_generator = torch.autograd.grad(generator_loss(), shared)
    from_discriminator = torch.autograd.grad(discriminator_loss(), shared)
    (generator_loss() + discriminator_loss()).backward()
    for p, a, b in zip(shared, from_generator, from_discriminator, strict=True):
        assert a.abs().sum() > 0 and b.abs().sum() > 0  # each network alone moves the shared table
        torch.testing.assert_close(p.grad, a + b)
        assert not torch.allclose(p.grad, a) and not torch.allclose(p.grad, b)
    assert pair.generator.embedding.token.weight.grad is pair.discriminator.embedding.token.weight.grad
    # the generator's own projection got only the generator's gradient, the discriminator's only its own
    assert pair.generator.embedding.projection.weight.grad.abs().sum() > 0
    assert pair.discriminator.embedding.projection.weight.grad.abs().sum() > 0
