"""GPT: GPT-1 and GPT-2 parameter counts (GPT-1 equal to transformers' OpenAIGPT), tied head,
causality, cached generation, left padding, clear errors."""

import pytest
import torch

from minilm.models.gpt import GPT, GPT_PRESETS, GPTConfig, gpt_config
from minilm.models.hf import config_to_hf
from minilm.utils import count_parameters

SMALL = GPTConfig(vocab_size=64, max_len=32, n_layers=2, n_heads=2, d_model=32, dropout=0.0)


PAPER_MILLIONS = [("gpt2", 124), ("gpt2-medium", 355), ("gpt2-large", 774), ("gpt2-xl", 1558)]


@pytest.mark.parametrize("size, millions", PAPER_MILLIONS)
def test_gpt2_parameter_counts_equal_transformers(size, millions):
    transformers = pytest.importorskip("transformers")
    preset = GPT_PRESETS[size]
    reference = transformers.GPT2Config(**config_to_hf(GPTConfig(**preset)))
    with torch.device("meta"):
        ours = count_parameters(GPT(GPTConfig(**preset)))
        theirs = count_parameters(transformers.GPT2LMHeadModel(reference))
    assert ours == theirs
    assert round(ours / 1e6) == millions


def test_gpt1_parameter_count_equals_transformers():
    transformers = pytest.importorskip("transformers")
    with torch.device("meta"):
        ours = count_parameters(GPT(gpt_config("gpt1")))
        theirs = count_parameters(transformers.OpenAIGPTLMHeadModel(transformers.OpenAIGPTConfig()))
    assert ours == theirs
    assert round(ours / 1e6) == 117  # the paper's "117M"


def test_gpt1_logits_equal_transformers_openai_gpt(tmp_path):
    """The gpt1 layout (post-LN, no final norm, tied head) is GPT-1's: same weights, same logits."""
    transformers = pytest.importorskip("transformers")
    config = gpt_config("gpt1", vocab_size=64, max_len=32, n_layers=2, n_heads=2, d_model=32, dropout=0.0)
    reference = transformers.OpenAIGPTLMHeadModel(transformers.OpenAIGPTConfig(**config_to_hf(config))).eval()
    reference.save_pretrained(tmp_path)
    model = GPT.from_pretrained(tmp_path)
    assert model.config == config
    assert model.decoder.final_norm is None and model.lm_head.weight is model.embedding.token.weight
    ids = torch.randint(0, 64, (2, 12))
    with torch.no_grad():
        torch.testing.assert_close(model(ids), reference(ids).logits, atol=1e-5, rtol=1e-5)


def test_features_are_the_hidden_states_under_the_tied_head():
    model = GPT(SMALL).eval()
    ids = torch.randint(0, 64, (2, 10))
    logits, out = model(ids, output_hidden_states=True)
    assert torch.equal(model.features(ids).last_hidden_state, out.last_hidden_state)
    assert torch.allclose(logits, out.last_hidden_state @ model.embedding.token.weight.T, atol=1e-6)
    assert len(out.hidden_states) == SMALL.n_layers + 1


def test_no_position_sees_the_future():
    model = GPT(SMALL).eval()
    ids = torch.randint(0, 64, (1, 12))
    changed = ids.clone()
    changed[0, 7:] = (changed[0, 7:] + 1) % 64
    assert torch.allclose(model(ids)[:, :7], model(changed)[:, :7], atol=1e-6)
    assert not torch.allclose(model(ids)[:, 7:], model(changed)[:, 7:])


def test_cached_greedy_generation_equals_recomputing():
    model = GPT(SMALL).eval()
    prompt = torch.randint(0, 64, (2, 5))
    generated = model.generate(prompt, max_new_tokens=8, do_sample=False)
    ids = prompt
    for _ in range(8):
        ids = torch.cat([ids, model(ids)[:, -1:].argmax(-1)], dim=1)
    assert torch.equal(generated, ids)


def test_left_padding_does_not_change_the_real_tokens_outputs():
    model = GPT(SMALL).eval()
    ids = torch.randint(1, 64, (1, 6))
    padded = torch.cat([torch.zeros(1, 3, dtype=torch.long), ids], dim=1)
    mask = torch.tensor([[0, 0, 0, 1, 1, 1, 1, 1, 1]])
    assert torch.allclose(model(padded, attention_mask=mask)[:, 3:], model(ids), atol=1e-5)


def test_sampling_is_seeded_and_top_k_restricts_the_choice():
    model = GPT(SMALL).eval()
    prompt = torch.randint(0, 64, (1, 3))
    a = model.generate(prompt, 6, temperature=1.0, top_k=5, generator=torch.Generator().manual_seed(1))
    b = model.generate(prompt, 6, temperature=1.0, top_k=5, generator=torch.Generator().manual_seed(1))
    assert torch.equal(a, b)
    first = model(prompt)[0, -1].topk(5).indices
    assert a[0, 3] in first


def test_clear_errors():
    model = GPT(SMALL).eval()
    with pytest.raises(ValueError, match="longer than the model's context of 32"):
        model(torch.zeros(1, 33, dtype=torch.long))
    with pytest.raises(ValueError, match="prompt is empty"):
        model.generate(torch.zeros(1, 0, dtype=torch.long), 3)
    with pytest.raises(ValueError, match="exceeds the context of 32"):
        model.generate(torch.zeros(1, 30, dtype=torch.long), 5)
    with pytest.raises(ValueError, match="temperature must be > 0"):
        model.generate(torch.zeros(1, 2, dtype=torch.long), 2, temperature=-1)


def test_the_compiled_training_loss_is_one_graph():
    """torch.compile(fullgraph=True) fails on any graph break: the GPT's forward and its fused loss trace whole (the
    position check reads shapes, not values; the loss is the plain one under the compiler), so compile can fuse the
    step. A break there once left the compiled GPT-2 small no faster than eager on an H200 (benchmarks/README.md)."""
    from minilm.recipes.gpt import clm_loss
    from minilm.train.trainer import LossModule

    torch.manual_seed(0)
    model = GPT(GPTConfig(vocab_size=50, max_len=16, n_layers=2, n_heads=2, d_model=16, dropout=0.0))
    block = torch.randint(0, 50, (3, 17))
    loss_module = LossModule(model, clm_loss)
    compiled = torch.compile(loss_module, backend="eager", fullgraph=True)
    torch.testing.assert_close(compiled(block).loss, loss_module(block).loss)
