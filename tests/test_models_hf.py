"""minilm.models.hf: saving for every family (transformers loads what minilm saved, with equal outputs), loading by
model_type, config mappings both ways, tied weights as an option, the files, clear errors."""

import ast
import dataclasses
import json
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file, save_file

import minilm.models
from minilm.files import TMP_PREFIX, CheckpointError
from minilm.models import GPT, Bert, BertConfig, RobertaConfig, Transformer, TransformerConfig, gpt_config, hf
from minilm.models.hf import bert, gpt2, openai_gpt, roberta
from minilm.models.hf.convert import Tied, merge_tied
from minilm.models.hf.folder import UnsupportedWeightsError, read_safetensors

transformers = pytest.importorskip("transformers")

ROOT = Path(__file__).resolve().parent.parent
ATOL = 1e-5
SIZES = dict(vocab_size=99, max_len=24, n_layers=2, n_heads=4, d_model=32, d_ff=37, dropout=0.0, attention_dropout=0.0)
TINY_BERT, TINY_ROBERTA = BertConfig(**SIZES), RobertaConfig(**SIZES)
TINY_GPT = dict(vocab_size=64, max_len=32, n_layers=2, n_heads=2, d_model=32, dropout=0.0)


def _randomise(model: torch.nn.Module, seed: int = 0) -> torch.nn.Module:
    """Every parameter random (biases and norms too), so that a mis-mapped tensor cannot hide; eval mode."""
    torch.manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("norm.weight"):
                p.copy_(1 + 0.1 * torch.randn_like(p))
            else:
                p.normal_(0, 0.2)
    return model.eval()


def _load_in_transformers(folder: Path):
    """The transformers class named in config.json, loaded from ``folder``; every tensor must fit."""
    architecture = json.loads((folder / "config.json").read_text())["architectures"][0]
    model, info = getattr(transformers, architecture).from_pretrained(
        folder, attn_implementation="eager", output_loading_info=True
    )
    assert not any(info[key] for key in ("missing_keys", "unexpected_keys", "mismatched_keys")), info
    return model.eval()


def _close(a, b):
    assert a.shape == b.shape
    assert (a - b).abs().max().item() < ATOL


# --- BERT and RoBERTa save: transformers loads what minilm saved, with equal outputs ----------------------------

BERT_LAYOUTS = [  # (config, the transformers class it saves as)
    (TINY_BERT, "BertForPreTraining"),
    (dataclasses.replace(TINY_BERT, pooler=False, nsp=False, activation="gelu_new", n_segments=3), "BertForMaskedLM"),
    (dataclasses.replace(TINY_BERT, mlm=False, nsp=False, pad_id=5, norm_eps=1e-6), "BertModel"),
    (dataclasses.replace(TINY_BERT, mlm=False), "BertForNextSentencePrediction"),
    (dataclasses.replace(TINY_ROBERTA, pooler=False), "RobertaForMaskedLM"),
    (dataclasses.replace(TINY_ROBERTA, mlm=False, pad_id=3, position_offset=4, n_segments=2), "RobertaModel"),
]


@pytest.mark.parametrize("config, architecture", BERT_LAYOUTS, ids=[a for _, a in BERT_LAYOUTS])
def test_transformers_loads_what_minilm_saved_bert_and_roberta(config, architecture, tmp_path):
    ours = _randomise(Bert(config))
    ours.save_pretrained(tmp_path)
    assert json.loads((tmp_path / "config.json").read_text())["architectures"] == [architecture]
    theirs = _load_in_transformers(tmp_path)
    assert type(theirs).__name__ == architecture

    # padding on the right (and, for RoBERTa, on the left: its positions skip padding), two segments for BERT
    ids = torch.randint(6, 99, (3, 9))
    mask = torch.ones_like(ids)
    mask[1, 6:], mask[2, :3] = 0, 0
    ids[mask == 0] = config.pad_id
    segments = torch.zeros_like(ids)
    if config.n_segments > 1:
        segments[0, 5:], segments[1, 3:6] = 1, config.n_segments - 1
    with torch.no_grad():
        ref = theirs(ids, attention_mask=mask, token_type_ids=segments, output_hidden_states=True)
        out = ours.features(ids, mask, segments, output_hidden_states=True)
    assert len(out.hidden_states) == len(ref.hidden_states) == config.n_layers + 1
    for a, b in zip(out.hidden_states, ref.hidden_states, strict=True):
        _close(a, b)
    hidden = out.last_hidden_state
    if architecture.endswith("Model"):
        _close(ours.pool(hidden), ref.pooler_output)
    if config.mlm:
        _close(ours.mlm_logits(hidden), ref.prediction_logits if config.nsp else ref.logits)
    if config.nsp:
        _close(ours.nsp_logits(hidden), ref.seq_relationship_logits if config.mlm else ref.logits)


@pytest.mark.parametrize("config, architecture", BERT_LAYOUTS, ids=[a for _, a in BERT_LAYOUTS])
def test_minilm_saves_bert_and_roberta_as_transformers_does_and_loads_them_back(config, architecture, tmp_path):
    ours = _randomise(Bert(config))
    ours.save_pretrained(tmp_path / "minilm")
    _load_in_transformers(tmp_path / "minilm").save_pretrained(tmp_path / "transformers")
    assert set(load_file(tmp_path / "minilm" / "model.safetensors")) == set(
        load_file(tmp_path / "transformers" / "model.safetensors")
    )  # the same names: the prefix only with a head, tied copies once
    for folder in ("minilm", "transformers"):
        again = minilm.models.from_pretrained(tmp_path / folder)
        assert dataclasses.asdict(again.config) == dataclasses.asdict(config)
        assert type(again.config) is type(config)
        for (name, a), b in zip(ours.state_dict().items(), again.state_dict().values(), strict=True):
            assert torch.equal(a, b), name


# --- GPT-1 and GPT-2 -----------------------------------------------------------------------------------------


def test_gpt1_round_trip_through_transformers(tmp_path):
    ours = _randomise(GPT(gpt_config("gpt1", **TINY_GPT)))
    ours.save_pretrained(tmp_path)
    theirs = _load_in_transformers(tmp_path)
    assert type(theirs).__name__ == "OpenAIGPTLMHeadModel"
    ids = torch.randint(0, 64, (2, 11))
    with torch.no_grad():
        logits, out = ours(ids, output_hidden_states=True)
        ref = theirs(ids, output_hidden_states=True)
    _close(logits, ref.logits)
    for a, b in zip(out.hidden_states, ref.hidden_states, strict=True):
        _close(a, b)
    again = GPT.from_pretrained(tmp_path)
    assert again.config == ours.config and again.lm_head.weight is again.embedding.token.weight
    for (name, a), b in zip(ours.state_dict().items(), again.state_dict().values(), strict=True):
        assert torch.equal(a, b), name


def test_hub_style_gpt1_files_load(tmp_path):
    """Names without ``transformer.``, the causal-mask buffers, a tied lm_head copy, the old config fields."""
    ours = _randomise(GPT(gpt_config("gpt1", **TINY_GPT)))
    ours.save_pretrained(tmp_path / "saved")
    tensors = {
        k.removeprefix("transformer."): v for k, v in load_file(tmp_path / "saved" / "model.safetensors").items()
    }
    tensors["h.0.attn.bias"] = torch.tril(torch.ones(1, 1, 32, 32))
    tensors["lm_head.weight"] = tensors["tokens_embed.weight"].clone()
    config = json.loads((tmp_path / "saved" / "config.json").read_text())
    config.update(n_ctx=32, n_special=0, predict_special_tokens=True)
    (tmp_path / "hub").mkdir()
    save_file(tensors, tmp_path / "hub" / "model.safetensors")
    (tmp_path / "hub" / "config.json").write_text(json.dumps(config))
    ids = torch.randint(0, 64, (1, 7))
    assert torch.equal(GPT.from_pretrained(tmp_path / "hub")(ids), ours(ids))


# --- loading by model_type --------------------------------------------------------------------------------------


def test_from_pretrained_picks_the_family_from_model_type(tmp_path):
    saved = {
        "gpt2": GPT(gpt_config("gpt2", **TINY_GPT)),
        "openai-gpt": GPT(gpt_config("gpt1", **TINY_GPT)),
        "bert": Bert(TINY_BERT),
        "roberta": Bert(TINY_ROBERTA),
    }
    for model_type, model in saved.items():
        model.save_pretrained(tmp_path / model_type)
        assert json.loads((tmp_path / model_type / "config.json").read_text())["model_type"] == model_type
        loaded = minilm.models.from_pretrained(tmp_path / model_type)
        assert type(loaded) is type(model) and loaded.config == model.config and not loaded.training
    with pytest.raises(CheckpointError, match="model_type='bert', expected 'gpt2' or 'openai-gpt'"):
        GPT.from_pretrained(tmp_path / "bert")
    config = json.loads((tmp_path / "bert" / "config.json").read_text())
    (tmp_path / "bert" / "config.json").write_text(json.dumps({**config, "model_type": "llama"}))
    with pytest.raises(
        CheckpointError, match="model_type='llama', expected 'gpt2' or 'openai-gpt' or 'bert' or 'roberta'"
    ):
        minilm.models.from_pretrained(tmp_path / "bert")


def test_dtype_and_vocabulary_options(tmp_path):
    model = GPT(gpt_config("gpt2", **TINY_GPT))
    model.save_pretrained(tmp_path)
    assert GPT.from_pretrained(tmp_path, dtype=torch.bfloat16).lm_head.weight.dtype == torch.bfloat16

    class Tokenizer:  # any object with a length (and, optionally, a padding id)
        def __len__(self):
            return 63

    with pytest.raises(ValueError, match="the tokenizer has 63 tokens but the model's vocabulary has 64"):
        GPT.from_pretrained(tmp_path, tokenizer=Tokenizer())
    with pytest.raises(ValueError, match="63 tokens"):
        model.check_vocabulary(Tokenizer())  # every model class has it, GPT's config has no padding id


# --- configurations both ways ----------------------------------------------------------------------------------

CONFIGS = [  # (converter module, minilm config, transformers config class)
    (gpt2, gpt_config("gpt2", **TINY_GPT, d_ff=48), "GPT2Config"),
    (openai_gpt, gpt_config("gpt1", **TINY_GPT), "OpenAIGPTConfig"),
    (bert, dataclasses.replace(TINY_BERT, activation="relu", n_segments=1, init_std=0.05), "BertConfig"),
    (roberta, dataclasses.replace(TINY_ROBERTA, pad_id=0, position_offset=1, norm_eps=1e-7), "RobertaConfig"),
]


@pytest.mark.parametrize("module, config, hf_class", CONFIGS, ids=[m.MODEL_TYPE for m, _, _ in CONFIGS])
def test_config_to_hf_and_back_through_transformers(module, config, hf_class):
    theirs = getattr(transformers, hf_class)(**module.config_to_hf(config))
    assert theirs.model_type == module.MODEL_TYPE
    assert hf.config_to_hf(config) == module.config_to_hf(config)
    assert module.config_from_hf(theirs.to_dict()) == config


@pytest.mark.parametrize("module, config, hf_class", CONFIGS, ids=[m.MODEL_TYPE for m, _, _ in CONFIGS])
def test_fields_a_config_leaves_out_take_transformers_defaults(module, config, hf_class):
    minimal = {"model_type": module.MODEL_TYPE}
    if module in (bert, roberta):  # BERT-like configs must name their sizes
        minimal.update({k: v for k, v in module.config_to_hf(config).items() if k in bert.REQUIRED})
        minimal["max_position_embeddings"] = module.config_to_hf(config)["max_position_embeddings"]
    full = getattr(transformers, hf_class)(**minimal).to_dict()
    assert module.config_from_hf(minimal) == module.config_from_hf(full)


@pytest.mark.parametrize(
    "model, message",
    [
        (GPT(gpt_config("gpt2", **TINY_GPT, bias=False)), "GPT-2 checkpoints have biases everywhere"),
        (GPT(gpt_config("gpt1", **TINY_GPT, d_ff=40)), "feed-forward size of 4 \\* d_model = 128, not d_ff=40"),
        (Bert(dataclasses.replace(TINY_BERT, n_segments=0)), "always adds a segment"),
        (Bert(dataclasses.replace(TINY_ROBERTA, nsp=True)), "RoBERTa checkpoints have no NSP"),
        (Bert(dataclasses.replace(TINY_ROBERTA, activation="relu")), "always uses gelu"),
        (Transformer(TransformerConfig(vocab_size=10, d_model=8, n_heads=2, d_ff=8)), "no Hugging Face converter for"),
    ],
)
def test_models_that_no_checkpoint_can_hold_are_clear_errors(model, message, tmp_path):
    with pytest.raises(CheckpointError, match=message):
        hf.save_pretrained(model, tmp_path)
    assert not any(tmp_path.iterdir())  # nothing written


def test_bert_config_errors_name_the_field(tmp_path):
    Bert(TINY_BERT).save_pretrained(tmp_path)
    config = json.loads((tmp_path / "config.json").read_text())
    for change, message in [
        ({"rotary_value": 3}, "fields this loader does not know: rotary_value"),
        ({"position_embedding_type": "relative_key"}, "position_embedding_type='relative_key' is not supported"),
        ({"hidden_act": "tanh"}, "hidden_act 'tanh' is not supported"),
        ({"hidden_size": None, "num_hidden_layers": None}, "lacks hidden_size, num_hidden_layers"),
    ]:
        edited = {k: v for k, v in {**config, **change}.items() if v is not None}
        (tmp_path / "config.json").write_text(json.dumps(edited))
        with pytest.raises(CheckpointError, match=message):
            Bert.from_pretrained(tmp_path)
    (tmp_path / "config.json").write_text(json.dumps({**config, "rotary_value": 3}))
    assert Bert.from_pretrained(tmp_path, strict=False).config == TINY_BERT


# --- the generic part ----------------------------------------------------------------------------------------------


def test_tied_names_are_one_tensor_only_when_the_config_ties_them():
    group = Tied(("wte.weight", "lm_head.weight"), note="for the message")
    a, b = torch.ones(2, 3), torch.zeros(2, 3)
    assert merge_tied({"lm_head.weight": a}, [group], {}, "f").keys() == {"wte.weight"}  # stored under one name
    assert merge_tied({"wte.weight": a, "lm_head.weight": a.clone()}, [group], {}, "f").keys() == {"wte.weight"}
    with pytest.raises(CheckpointError, match=r"f: lm_head.weight differs from wte.weight; .* \(for the message\)"):
        merge_tied({"wte.weight": a, "lm_head.weight": b}, [group], {"tie_word_embeddings": True}, "f")
    untied = merge_tied({"wte.weight": a, "lm_head.weight": b}, [group], {"tie_word_embeddings": False}, "f")
    assert untied["wte.weight"] is a and untied["lm_head.weight"] is b  # two tensors, for the name table to map
    always = Tied(("bias", "decoder.bias"), flag=None)
    with pytest.raises(CheckpointError, match="should be one tied tensor"):
        merge_tied({"bias": a, "decoder.bias": b}, [always], {"tie_word_embeddings": False}, "f")


def test_sharded_checkpoints_load_and_a_missing_shard_is_named(tmp_path):
    model = _randomise(GPT(gpt_config("gpt2", **TINY_GPT)))
    model.save_pretrained(tmp_path / "single")
    tensors = load_file(tmp_path / "single" / "model.safetensors")
    names = sorted(tensors)
    shards = {"model-00001-of-00002.safetensors": names[::2], "model-00002-of-00002.safetensors": names[1::2]}
    folder = tmp_path / "sharded"
    folder.mkdir()
    (folder / "config.json").write_text((tmp_path / "single" / "config.json").read_text())
    for shard, keys in shards.items():
        save_file({k: tensors[k] for k in keys}, folder / shard)
    index = {"weight_map": {k: shard for shard, keys in shards.items() for k in keys}}
    (folder / "model.safetensors.index.json").write_text(json.dumps(index))
    ids = torch.randint(0, 64, (1, 6))
    assert torch.equal(GPT.from_pretrained(folder)(ids), model(ids))
    (folder / "model-00002-of-00002.safetensors").unlink()
    with pytest.raises(FileNotFoundError, match="lists the shard model-00002-of-00002.safetensors"):
        read_safetensors(folder)


def test_saving_replaces_files_atomically_and_pickles_are_never_read(tmp_path):
    first, second = GPT(gpt_config("gpt2", **TINY_GPT)), _randomise(GPT(gpt_config("gpt2", **TINY_GPT)), seed=1)
    first.save_pretrained(tmp_path)
    second.save_pretrained(tmp_path, eos_token_id=1)  # over the first
    assert sorted(p.name for p in tmp_path.iterdir()) == ["config.json", "model.safetensors"]  # no TMP_PREFIX files
    assert not any(p.name.startswith(TMP_PREFIX) for p in tmp_path.iterdir())
    assert json.loads((tmp_path / "config.json").read_text())["eos_token_id"] == 1
    assert torch.equal(GPT.from_pretrained(tmp_path).lm_head.weight, second.lm_head.weight)
    (tmp_path / "model.safetensors").unlink()
    (tmp_path / "pytorch_model.bin").write_bytes(b"never unpickled")
    with pytest.raises(UnsupportedWeightsError, match="does not load pickled weights") as error:
        GPT.from_pretrained(tmp_path)
    assert isinstance(error.value, CheckpointError) and isinstance(error.value, FileNotFoundError)


def test_unexpected_tensors_are_warned_about_when_not_strict(tmp_path):
    Bert(TINY_BERT).save_pretrained(tmp_path)
    tensors = load_file(tmp_path / "model.safetensors")
    tensors["bert.encoder.layer.0.attention.self.rotary.weight"] = torch.zeros(2)
    save_file(tensors, tmp_path / "model.safetensors")
    with pytest.raises(CheckpointError, match="unexpected .*encoder.layer.0.attention.self.rotary.weight"):
        Bert.from_pretrained(tmp_path)
    with pytest.warns(UserWarning, match="1 tensor.* ignored .*rotary.weight.*strict=False"):
        Bert.from_pretrained(tmp_path, strict=False)


def test_model_files_do_not_import_the_converters():
    """The converters import the model files; the model files reach them only by name (PretrainedMixin)."""
    for path in sorted((ROOT / "minilm" / "models").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom):
                module = "minilm.models." * (node.level > 0) + (node.module or "")
                imported = [f"{module}.{alias.name}" for alias in node.names]
            elif isinstance(node, ast.Import):
                imported = [alias.name for alias in node.names]
            else:
                continue
            if path.name != "__init__.py":  # the package exports minilm.models.from_pretrained
                assert not any(name.startswith("minilm.models.hf") for name in imported), path.name


def test_a_pickle_named_model_safetensors_is_named_in_the_error(tmp_path):
    torch.save({"w": torch.zeros(2)}, tmp_path / "model.safetensors")  # pickled weights under the wrong name
    with pytest.raises(CheckpointError, match=r"model\.safetensors is not a readable safetensors file .*pickled"):
        read_safetensors(tmp_path)
