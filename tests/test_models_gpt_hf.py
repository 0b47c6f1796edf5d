"""GPT <-> Hugging Face GPT-2 checkpoints: logits and hidden states equal transformers' GPT2LMHeadModel (random
weights saved by transformers), variants of the file layout, round trips, clear errors."""

import json

import pytest
import torch
from safetensors.torch import load_file, save_file

from minilm.files import CheckpointError
from minilm.models.gpt import GPT, GPTConfig, gpt_config

transformers = pytest.importorskip("transformers")

VOCAB, CONTEXT = 100, 32


def random_gpt2(seed: int = 0):
    """A small GPT2LMHeadModel with every weight random (LayerNorms and biases too), in eval mode."""
    torch.manual_seed(seed)
    config = transformers.GPT2Config(
        vocab_size=VOCAB, n_positions=CONTEXT, n_embd=32, n_layer=2, n_head=4, bos_token_id=1, eos_token_id=1
    )
    model = transformers.GPT2LMHeadModel(config)
    with torch.no_grad():
        for name, p in model.named_parameters():
            p.normal_(std=0.2)
            if name.endswith(("ln_1.weight", "ln_2.weight", "ln_f.weight")):
                p.add_(1.0)
    return model.eval()


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """(transformers model, the folder it saved itself to)."""
    model = random_gpt2()
    folder = tmp_path_factory.mktemp("gpt2")
    model.save_pretrained(folder)
    return model, folder


def copy_checkpoint(src, dst, edit_config=None, edit_tensors=None):
    """Rewrite src's config.json and model.safetensors into dst, through the two edit functions."""
    dst.mkdir(parents=True, exist_ok=True)
    config = json.loads((src / "config.json").read_text())
    tensors = load_file(src / "model.safetensors")
    if edit_config:
        edit_config(config)
    if edit_tensors:
        tensors = edit_tensors(tensors)
    (dst / "config.json").write_text(json.dumps(config))
    save_file({k: v.contiguous() for k, v in tensors.items()}, dst / "model.safetensors", metadata={"format": "pt"})
    return dst


def test_config_is_mapped_from_gpt2config(reference):
    model = GPT.from_pretrained(reference[1])
    assert model.config == GPTConfig(vocab_size=VOCAB, max_len=CONTEXT, n_layers=2, n_heads=4, d_model=32)
    assert not model.training


def test_logits_and_hidden_states_equal_transformers(reference):
    theirs_model, folder = reference
    ours_model = GPT.from_pretrained(folder)
    ids = torch.randint(0, VOCAB, (2, 12))
    with torch.no_grad():
        theirs = theirs_model(ids, output_hidden_states=True)
        logits, ours = ours_model(ids, output_hidden_states=True)
    assert (logits - theirs.logits).abs().max() < 1e-5
    assert len(ours.hidden_states) == len(theirs.hidden_states) == 3
    for a, b in zip(ours.hidden_states, theirs.hidden_states, strict=True):
        assert (a - b).abs().max() < 1e-5


def test_left_padded_batch_equals_transformers_on_the_real_tokens(reference):
    theirs_model, folder = reference
    ours_model = GPT.from_pretrained(folder)
    ids = torch.randint(2, VOCAB, (3, 10))
    mask = torch.ones(3, 10, dtype=torch.long)
    mask[1, :3] = 0
    mask[2, :6] = 0
    ids = ids.masked_fill(mask == 0, 0)
    position_ids = (mask.cumsum(-1) - 1).clamp(min=0)  # positions count real tokens: what GPT.features does
    with torch.no_grad():
        theirs = theirs_model(ids, attention_mask=mask, position_ids=position_ids).logits
        ours = ours_model(ids, attention_mask=mask)
    real = mask.bool()
    assert (ours[real] - theirs[real]).abs().max() < 1e-5
    alone = ours_model(ids[2:, 6:])  # the shortest row unpadded gives the same logits
    assert (ours[2, 6:] - alone[0]).abs().max() < 1e-5


def test_files_without_prefix_with_mask_buffers_and_a_tied_head_load(reference, tmp_path):
    theirs_model, folder = reference

    def old_layout(tensors):  # GPT2Model-style names, as on the hub, with the causal-mask buffers of old files
        tensors = {k.removeprefix("transformer."): v for k, v in tensors.items()}
        for i in range(2):
            tensors[f"h.{i}.attn.bias"] = torch.tril(torch.ones(CONTEXT, CONTEXT)).view(1, 1, CONTEXT, CONTEXT)
            tensors[f"h.{i}.attn.masked_bias"] = torch.tensor(-1e4)
        tensors["lm_head.weight"] = tensors["wte.weight"].clone()
        return tensors

    def hub_config(config):  # fields of the hub's gpt2/config.json that transformers 5 no longer writes
        config.update(n_ctx=CONTEXT, task_specific_params={"text-generation": {"do_sample": True, "max_length": 50}})
        config.update(output_past=True, torch_dtype="float32")

    old = copy_checkpoint(folder, tmp_path / "old", edit_config=hub_config, edit_tensors=old_layout)
    assert "h.0.attn.bias" in load_file(old / "model.safetensors")
    ids = torch.randint(0, VOCAB, (2, 8))
    with torch.no_grad():
        assert (GPT.from_pretrained(old)(ids) - theirs_model(ids).logits).abs().max() < 1e-5


def test_round_trip_through_transformers(tmp_path):
    config = GPTConfig(vocab_size=VOCAB, max_len=CONTEXT, n_layers=2, n_heads=4, d_model=32, d_ff=48, dropout=0.0)
    ours = GPT(config).eval()
    with torch.no_grad():
        for p in ours.parameters():
            p.add_(0.1 * torch.randn_like(p))  # biases and LayerNorms away from their initial 0 and 1
    ours.save_pretrained(tmp_path, eos_token_id=1)
    theirs = transformers.GPT2LMHeadModel.from_pretrained(tmp_path).eval()
    assert theirs.config.n_inner == 48 and theirs.config.eos_token_id == 1
    ids = torch.randint(0, VOCAB, (2, 9))
    with torch.no_grad():
        assert (ours(ids) - theirs(ids).logits).abs().max() < 1e-5
    again = GPT.from_pretrained(tmp_path)
    assert again.config == config
    for (name, a), b in zip(ours.state_dict().items(), again.state_dict().values(), strict=True):
        assert torch.equal(a, b), name
    assert again.lm_head.weight is again.embedding.token.weight


def test_missing_files_are_clear_errors(reference, tmp_path):
    with pytest.raises(FileNotFoundError, match="not a folder"):
        GPT.from_pretrained(tmp_path / "nowhere")
    with pytest.raises(FileNotFoundError, match="no config.json"):
        GPT.from_pretrained(tmp_path)
    (tmp_path / "config.json").write_text((reference[1] / "config.json").read_text())
    (tmp_path / "pytorch_model.bin").write_bytes(b"")
    with pytest.raises(FileNotFoundError, match="no model.safetensors.*pytorch_model.bin"):
        GPT.from_pretrained(tmp_path)


@pytest.mark.parametrize(
    "edit, message",
    [
        (lambda c: c.update(model_type="bert"), "model_type='bert', expected 'gpt2'"),
        (lambda c: c.update(activation_function="relu"), "activation_function='relu' is not supported"),
        (lambda c: c.update(scale_attn_by_inverse_layer_idx=True), "scale_attn_by_inverse_layer_idx=True"),
        (lambda c: c.update(rotary_dim=8), "fields this loader does not know: rotary_dim"),
    ],
)
def test_config_errors_name_the_field(reference, tmp_path, edit, message):
    with pytest.raises(CheckpointError, match=message):
        GPT.from_pretrained(copy_checkpoint(reference[1], tmp_path / "edited", edit_config=edit))


def test_unknown_config_fields_and_tensors_load_when_not_strict(reference, tmp_path):
    def extra(tensors):
        return {**tensors, "transformer.h.0.attn.rotary.weight": torch.zeros(3)}

    folder = copy_checkpoint(reference[1], tmp_path / "extra", lambda c: c.update(rotary_dim=8), extra)
    with pytest.raises(CheckpointError, match="unexpected.*h.0.attn.rotary.weight"):
        GPT.from_pretrained(copy_checkpoint(reference[1], tmp_path / "tensor", edit_tensors=extra))
    ids = torch.randint(0, VOCAB, (1, 5))
    with torch.no_grad():
        assert torch.equal(GPT.from_pretrained(folder, strict=False)(ids), GPT.from_pretrained(reference[1])(ids))


def test_shape_mismatch_and_missing_tensors_name_them(reference, tmp_path):
    shorter = copy_checkpoint(reference[1], tmp_path / "short", lambda c: c.update(n_positions=16))
    with pytest.raises(CheckpointError, match=r"embedding.position.weight \(from wpe.weight\): checkpoint \(32, 32\)"):
        GPT.from_pretrained(shorter)
    dropped = copy_checkpoint(
        reference[1], tmp_path / "drop", edit_tensors=lambda t: {k: v for k, v in t.items() if "h.1.mlp.c_fc" not in k}
    )
    missing = r"missing: decoder.layers.1.ffn.fc1.weight \(from h.1.mlp.c_fc.weight\), decoder.layers.1.ffn.fc1.bias \("
    with pytest.raises(CheckpointError, match=missing):
        GPT.from_pretrained(dropped, strict=False)  # missing weights are an error even when not strict


def test_an_untied_head_is_refused(reference, tmp_path):
    def untied(tensors):
        return {**tensors, "lm_head.weight": torch.randn(VOCAB, 32)}

    with pytest.raises(CheckpointError, match="lm_head.weight differs from wte.weight"):
        GPT.from_pretrained(copy_checkpoint(reference[1], tmp_path / "untied", edit_tensors=untied))


def test_preset_sizes():
    assert gpt_config("gpt2-medium", dropout=0.0) == GPTConfig(n_layers=24, n_heads=16, d_model=1024, dropout=0.0)
    with pytest.raises(ValueError, match="unknown GPT size 'gpt3'; known sizes: gpt1, gpt2, gpt2-medium, gpt2-large"):
        gpt_config("gpt3")
    with pytest.raises(ValueError, match="unknown GPTConfig field"):
        gpt_config("gpt2", n_layer=3)
