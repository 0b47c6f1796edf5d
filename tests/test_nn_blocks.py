"""Blocks and stacks: parity with torch's Transformer layers, causality, padding, KV cache, sizes, gradients."""

import pytest
import torch
from torch import nn

from minilm.nn import (
    BlockConfig,
    DecoderBlock,
    EncoderBlock,
    TransformerDecoder,
    TransformerEmbedding,
    TransformerEncoder,
    causal_mask,
    padding_mask,
)
from minilm.nn.blocks import reorder_cache
from minilm.utils import count_parameters, format_count

D, H, FF = 16, 4, 32


def small_config(**overrides) -> BlockConfig:
    return BlockConfig(**{"d_model": D, "n_heads": H, "d_ff": FF, "dropout": 0.0, **overrides})


# --- parity with torch.nn.TransformerEncoderLayer / TransformerDecoderLayer ---


def _copy_attention(ours, theirs: nn.MultiheadAttention) -> None:
    q, k, v = theirs.in_proj_weight.chunk(3)
    q_bias, k_bias, v_bias = theirs.in_proj_bias.chunk(3)
    for proj, weight, bias in [(ours.q_proj, q, q_bias), (ours.k_proj, k, k_bias), (ours.v_proj, v, v_bias)]:
        proj.weight.data.copy_(weight)
        proj.bias.data.copy_(bias)
    ours.out_proj.load_state_dict(theirs.out_proj.state_dict())


def _copy_layer(ours, theirs) -> None:
    """torch's names -> ours: self_attn, [multihead_attn -> cross_attn], linear1/2 -> ffn.fc1/fc2, norm1/2[/3]."""
    _copy_attention(ours.self_attn, theirs.self_attn)
    ours.ffn.fc1.load_state_dict(theirs.linear1.state_dict())
    ours.ffn.fc2.load_state_dict(theirs.linear2.state_dict())
    ours.self_attn_norm.load_state_dict(theirs.norm1.state_dict())
    if hasattr(theirs, "multihead_attn"):
        _copy_attention(ours.cross_attn, theirs.multihead_attn)
        ours.cross_attn_norm.load_state_dict(theirs.norm2.state_dict())
        ours.ffn_norm.load_state_dict(theirs.norm3.state_dict())
    else:
        ours.ffn_norm.load_state_dict(theirs.norm2.state_dict())


LAYER_VARIANTS = [(norm_first, act) for norm_first in (False, True) for act in ("relu", "gelu")]


@pytest.mark.parametrize("norm_first,activation", LAYER_VARIANTS)
def test_encoder_block_equals_torch_encoder_layer(norm_first, activation):
    theirs = nn.TransformerEncoderLayer(D, H, FF, 0.0, activation, batch_first=True, norm_first=norm_first)
    for norm in (theirs.norm1, theirs.norm2):
        nn.init.normal_(norm.weight)
        nn.init.normal_(norm.bias)
    ours = EncoderBlock(small_config(activation=activation, norm_first=norm_first))
    _copy_layer(ours, theirs)
    ours.eval(), theirs.eval()
    x = torch.randn(2, 6, D)
    keep = torch.tensor([[1] * 6, [1, 1, 1, 1, 0, 0]])
    with torch.no_grad():
        torch.testing.assert_close(ours(x), theirs(x), atol=1e-5, rtol=1e-5)
        real = keep.bool()  # torch's fast path writes zeros at padded positions: compare the real ones
        expected = theirs(x, src_key_padding_mask=~keep.bool())[real]
        torch.testing.assert_close(ours(x, mask=padding_mask(keep))[real], expected, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("norm_first,activation", LAYER_VARIANTS)
def test_decoder_block_equals_torch_decoder_layer(norm_first, activation):
    theirs = nn.TransformerDecoderLayer(D, H, FF, 0.0, activation, batch_first=True, norm_first=norm_first)
    for norm in (theirs.norm1, theirs.norm2, theirs.norm3):
        nn.init.normal_(norm.weight)
        nn.init.normal_(norm.bias)
    ours = DecoderBlock(small_config(activation=activation, norm_first=norm_first, cross_attention=True))
    _copy_layer(ours, theirs)
    ours.eval(), theirs.eval()
    x, memory = torch.randn(2, 5, D), torch.randn(2, 7, D)
    memory_keep = torch.tensor([[1] * 7, [1, 1, 1, 0, 0, 0, 0]])
    expected = theirs(
        x,
        memory,
        tgt_mask=~causal_mask(5, 5),  # torch: True = masked out
        tgt_is_causal=True,
        memory_key_padding_mask=~memory_keep.bool(),
    )
    torch.testing.assert_close(ours(x, memory, memory_mask=padding_mask(memory_keep)), expected, atol=1e-5, rtol=1e-5)


# --- sizes, names, gradients ---


def test_transformer_base_parameter_counts_on_meta_device():
    cfg = BlockConfig(d_model=512, n_heads=8, d_ff=2048)
    with torch.device("meta"):
        encoder_layer = EncoderBlock(cfg)
        decoder_layer = DecoderBlock(BlockConfig(d_model=512, n_heads=8, d_ff=2048, cross_attention=True))
        gpt_layer = DecoderBlock(cfg)
        torch_layer = nn.TransformerEncoderLayer(512, 8, 2048)
        encoder = TransformerEncoder(cfg, 6, final_norm=True)
    attention = 4 * (512 * 512 + 512)
    ffn = 512 * 2048 + 2048 + 2048 * 512 + 512
    norm = 2 * 512
    assert count_parameters(encoder_layer) == attention + ffn + 2 * norm == 3_152_384
    assert count_parameters(decoder_layer) == 2 * attention + ffn + 3 * norm == 4_204_032
    assert format_count(count_parameters(encoder_layer)) == "3.15M"  # how the CLIs print a count
    assert format_count(1538) == "1,538" and format_count(110_000_000_000) == "110.00B"  # a head is not "0.00M"
    assert count_parameters(gpt_layer) == count_parameters(encoder_layer) == count_parameters(torch_layer)
    assert count_parameters(encoder) == 6 * 3_152_384 + norm
    assert next(encoder.parameters()).device.type == "meta"


def test_submodule_names():
    decoder = TransformerDecoder(small_config(cross_attention=True), 2, final_norm=True)
    children = {name for name, _ in decoder.layers[0].named_children()}
    assert children == {"self_attn", "self_attn_norm", "cross_attn", "cross_attn_norm", "ffn", "ffn_norm", "dropout"}
    assert "layers.1.cross_attn.k_proj.weight" in decoder.state_dict()
    assert "final_norm.weight" in decoder.state_dict()
    assert TransformerEncoder(small_config(), 1).final_norm is None


BLOCK_VARIANTS = {
    "post-LN encoder": (EncoderBlock, {}),
    "pre-LN encoder, gated silu, rmsnorm, no bias": (
        EncoderBlock,
        dict(norm_first=True, gated_ffn=True, activation="silu", norm="rmsnorm", bias=False),
    ),
    "GPT decoder (gelu_new, pre-LN)": (DecoderBlock, dict(norm_first=True, activation="gelu_new")),
    "post-LN decoder with cross-attention": (DecoderBlock, dict(cross_attention=True)),
    "T5 decoder (pre-LN rmsnorm, scale 1, gated gelu)": (
        DecoderBlock,
        dict(norm_first=True, norm="rmsnorm", bias=False, attention_scale=1.0, gated_ffn=True, cross_attention=True),
    ),
}


@pytest.mark.parametrize("variant", BLOCK_VARIANTS)
def test_gradients_reach_every_parameter(variant):
    block_type, overrides = BLOCK_VARIANTS[variant]
    block = block_type(small_config(**overrides))
    x = torch.randn(2, 5, D)
    kwargs = {"memory": torch.randn(2, 3, D)} if overrides.get("cross_attention") else {}
    out = block(x, **kwargs)
    # a weighted sum: the plain sum of a LayerNorm's output has no gradient wrt its input
    (out * torch.randn_like(out)).sum().backward()
    for name, p in block.named_parameters():
        assert p.grad is not None and p.grad.abs().sum() > 0, name


# --- post-LN vs pre-LN ---


def _per_position_stats(h):
    return h.mean(-1), h.var(-1, unbiased=False)


def test_post_ln_output_is_normalised_pre_ln_needs_a_final_norm():
    x = torch.randn(2, 5, D) * 3 + 2
    mean, var = _per_position_stats(EncoderBlock(small_config())(x))
    torch.testing.assert_close(mean, torch.zeros_like(mean), atol=1e-5, rtol=0)
    torch.testing.assert_close(var, torch.ones_like(var), atol=1e-3, rtol=0)

    pre_ln = small_config(norm_first=True)
    mean, var = _per_position_stats(EncoderBlock(pre_ln)(x))  # the residual stream itself: not normalised
    assert mean.abs().mean() > 0.5 and (var - 1).abs().mean() > 0.5
    mean, var = _per_position_stats(TransformerEncoder(pre_ln, 2, final_norm=True)(x).last_hidden_state)
    torch.testing.assert_close(mean, torch.zeros_like(mean), atol=1e-5, rtol=0)
    torch.testing.assert_close(var, torch.ones_like(var), atol=1e-3, rtol=0)


def test_hidden_states_and_attentions():
    encoder = TransformerEncoder(small_config(norm_first=True), 3, final_norm=True)
    x = torch.randn(2, 5, D)
    keep = torch.tensor([[1] * 5, [1, 1, 1, 0, 0]])
    out = encoder(x, mask=padding_mask(keep), output_hidden_states=True, output_attentions=True)
    assert len(out.hidden_states) == 4 and out.hidden_states[0] is x
    assert out.hidden_states[-1] is out.last_hidden_state
    assert len(out.attentions) == 3 and out.attentions[0].shape == (2, H, 5, 5) and out.cross_attentions is None
    assert (out.attentions[1][1, :, :, 3:] == 0).all()  # nobody attends to padding
    torch.testing.assert_close(encoder(x, mask=padding_mask(keep)).last_hidden_state, out.last_hidden_state)
    assert encoder(x).hidden_states is None and encoder(x).attentions is None

    decoder = TransformerDecoder(small_config(cross_attention=True), 2)
    out = decoder(x, memory=torch.randn(2, 4, D), output_attentions=True)
    assert out.cross_attentions[0].shape == (2, H, 5, 4)
    assert (out.attentions[0].triu(diagonal=1) == 0).all()  # causal


def test_decoder_memory_must_match_cross_attention():
    with pytest.raises(ValueError, match="cross-attention"):
        DecoderBlock(small_config())(torch.randn(1, 2, D), memory=torch.randn(1, 3, D))
    with pytest.raises(ValueError, match="cross-attention"):
        DecoderBlock(small_config(cross_attention=True))(torch.randn(1, 2, D))


# --- causality, padding, KV cache ---


@pytest.mark.parametrize("cross_attention", [False, True])
def test_decoder_is_causal(cross_attention):
    decoder = TransformerDecoder(small_config(cross_attention=cross_attention, norm_first=True), 2, final_norm=True)
    memory = torch.randn(2, 4, D) if cross_attention else None
    x = torch.randn(2, 8, D)
    before = decoder(x, memory=memory).last_hidden_state
    for t in (0, 3, 6):
        perturbed = x.clone()
        perturbed[:, t + 1 :] += torch.randn_like(perturbed[:, t + 1 :])
        after = decoder(perturbed, memory=memory).last_hidden_state
        torch.testing.assert_close(after[:, : t + 1], before[:, : t + 1], atol=1e-6, rtol=0)
        assert not torch.allclose(after[:, t + 1 :], before[:, t + 1 :])  # the future did change


def test_padding_does_not_leak_into_real_positions():
    encoder = TransformerEncoder(small_config(), 2)
    keep = torch.tensor([[1] * 6, [1, 1, 1, 1, 0, 0]])
    x = torch.randn(2, 6, D)
    before = encoder(x, mask=padding_mask(keep)).last_hidden_state
    perturbed = x.clone()
    perturbed[1, 4:] = torch.randn(2, D) * 10
    after = encoder(perturbed, mask=padding_mask(keep)).last_hidden_state
    real = keep.bool()
    torch.testing.assert_close(after[real], before[real], atol=1e-6, rtol=0)
    unmasked = encoder(perturbed).last_hidden_state  # the test can fail: without the mask, padding leaks
    assert not torch.allclose(unmasked[real], before[real])


@pytest.mark.parametrize("cross_attention", [False, True])
def test_decoding_with_cache_equals_full_forward(cross_attention):
    cfg = small_config(cross_attention=cross_attention, norm_first=cross_attention)
    embed = TransformerEmbedding(50, D, max_len=16).eval()
    decoder = TransformerDecoder(cfg, 3, final_norm=cross_attention).eval()
    ids = torch.randint(0, 50, (2, 9))
    memory = torch.randn(2, 6, D) if cross_attention else None
    memory_keep = torch.tensor([[1] * 6, [1, 1, 1, 1, 0, 0]])
    memory_mask = padding_mask(memory_keep) if cross_attention else None
    full = decoder(embed(ids), memory=memory, memory_mask=memory_mask).last_hidden_state

    cache = decoder.new_cache()
    steps = []
    for t in range(ids.size(1)):
        x = embed(ids[:, t : t + 1], past_length=len(cache[0].self_attn))
        steps.append(decoder(x, memory=memory, memory_mask=memory_mask, cache=cache).last_hidden_state)
    assert len(cache[0].self_attn) == 9 and len(cache[-1].cross_attn) == (6 if cross_attention else 0)
    torch.testing.assert_close(torch.cat(steps, dim=1), full, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("index", [[1, 0, 1], [0, 0, 1, 1]], ids=["reorder", "expand"])
def test_reorder_cache_then_decoding_equals_full_forward_on_the_reordered_rows(index):
    """Beam search's reorder_fn: the cache (self and cross) and the memory follow the same rows."""
    index = torch.tensor(index)
    embed = TransformerEmbedding(50, D, max_len=16).eval()
    decoder = TransformerDecoder(small_config(cross_attention=True), 2).eval()
    ids, memory = torch.randint(0, 50, (2, 8)), torch.randn(2, 6, D)
    memory_mask = padding_mask(torch.tensor([[1] * 6, [1, 1, 1, 0, 0, 0]]))
    with torch.no_grad():
        cache = decoder.new_cache()
        decoder(embed(ids[:, :4]), memory=memory, memory_mask=memory_mask, cache=cache)  # 4 positions on 2 rows
        reorder_cache(cache, index)
        ids, memory, memory_mask = ids[index], memory[index], memory_mask[index]
        steps = []
        for t in range(4, 8):
            x = embed(ids[:, t : t + 1], past_length=len(cache[0].self_attn))
            steps.append(decoder(x, memory=memory, memory_mask=memory_mask, cache=cache).last_hidden_state)
        full = decoder(embed(ids), memory=memory, memory_mask=memory_mask).last_hidden_state
    assert cache[0].self_attn.k.size(0) == cache[1].cross_attn.k.size(0) == len(index)
    torch.testing.assert_close(torch.cat(steps, dim=1), full[:, 4:], atol=1e-5, rtol=1e-5)
