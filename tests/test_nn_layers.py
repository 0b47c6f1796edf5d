"""Embeddings, norms and the feed-forward network."""

import math

import pytest
import torch
from torch import nn

from minilm.nn import (
    FeedForward,
    LearnedPositionEmbedding,
    RMSNorm,
    SinusoidalPositionEmbedding,
    TransformerEmbedding,
    make_norm,
    sinusoidal_positions,
)

# --- positions ---


def test_sinusoidal_positions_match_the_formula_by_hand():
    pe = sinusoidal_positions(50, 4)  # frequencies 1/10000^(0/4) = 1 and 1/10000^(2/4) = 1/100
    assert pe.shape == (50, 4)
    assert pe[0].tolist() == [0.0, 1.0, 0.0, 1.0]
    expected_pos_7 = [math.sin(7), math.cos(7), math.sin(7 / 100), math.cos(7 / 100)]
    torch.testing.assert_close(pe[7], torch.tensor(expected_pos_7))
    big = sinusoidal_positions(10, 512)
    torch.testing.assert_close(big[3, 2 * 100], torch.tensor(math.sin(3 / 10000 ** (200 / 512))))
    torch.testing.assert_close(big[3, 2 * 100 + 1], torch.tensor(math.cos(3 / 10000 ** (200 / 512))))


def test_sinusoidal_shift_is_a_rotation():
    """PE(pos + k) = R_k PE(pos) for every pos: a 2x2 rotation by k*w_i on each (sin, cos) pair."""
    d, k = 16, 5
    pe = sinusoidal_positions(64, d).double()
    w = 1 / 10000 ** (torch.arange(0, d, 2).double() / d)  # (d/2,)
    cos, sin = torch.cos(k * w), torch.sin(k * w)
    rotated = torch.empty_like(pe[:-k])
    rotated[:, 0::2] = pe[:-k, 0::2] * cos + pe[:-k, 1::2] * sin  # sin(a + b) = sin a cos b + cos a sin b
    rotated[:, 1::2] = pe[:-k, 1::2] * cos - pe[:-k, 0::2] * sin  # cos(a + b) = cos a cos b - sin a sin b
    torch.testing.assert_close(rotated, pe[k:], atol=1e-5, rtol=0)


def test_sinusoidal_embedding_is_a_buffer_not_a_parameter():
    emb = SinusoidalPositionEmbedding(20, 8)
    assert list(emb.parameters()) == [] and "pe" in dict(emb.named_buffers())
    assert "pe" not in emb.state_dict()
    position_ids = torch.tensor([[0, 3], [1, 2]])
    torch.testing.assert_close(emb(position_ids), sinusoidal_positions(20, 8)[position_ids])


@pytest.mark.parametrize("module", [SinusoidalPositionEmbedding(8, 4), LearnedPositionEmbedding(8, 4, offset=2)])
def test_positions_past_max_len_raise_a_clear_error(module):
    module(torch.arange(8))
    with pytest.raises(ValueError, match="length 9 is longer than max_len=8"):
        module(torch.arange(9))


def test_learned_positions_with_offset():
    emb = LearnedPositionEmbedding(10, 4, offset=2)  # RoBERTa/BART: max_len + 2 rows
    assert emb.weight.shape == (12, 4)
    torch.testing.assert_close(emb(torch.tensor([0, 3])), emb.weight[[2, 5]])


def test_transformer_embedding_sums_token_position_segment():
    emb = TransformerEmbedding(30, 8, max_len=16, n_segments=2, padding_idx=0)
    ids, segments = torch.tensor([[5, 6, 0]]), torch.tensor([[0, 1, 1]])
    expected = emb.token.weight[ids] + emb.position.weight[:3] + emb.segment.weight[segments]
    torch.testing.assert_close(emb(ids, segment_ids=segments), expected)
    torch.testing.assert_close(emb(ids), emb.token.weight[ids] + emb.position.weight[:3] + emb.segment.weight[0])
    assert (emb.token.weight[0] == 0).all()


def test_transformer_embedding_options():
    ids = torch.tensor([[1, 2, 3, 4]])
    emb = TransformerEmbedding(10, 8, max_len=4, position="sinusoidal", scale_by_sqrt_d=True, norm=True)
    x = emb.token.weight[ids] * math.sqrt(8) + sinusoidal_positions(4, 8)
    torch.testing.assert_close(emb(ids), nn.functional.layer_norm(x, (8,)))
    no_positions = TransformerEmbedding(10, 8, position=None)  # T5
    assert no_positions.position is None and no_positions.segment is None and no_positions.norm is None
    torch.testing.assert_close(no_positions(ids), no_positions.token.weight[ids])


def test_transformer_embedding_past_length_continues_positions():
    emb = TransformerEmbedding(10, 8, max_len=6, position_offset=2)
    ids = torch.tensor([[1, 2, 3, 4, 5]])
    torch.testing.assert_close(emb(ids[:, 3:], past_length=3), emb(ids)[:, 3:])
    torch.testing.assert_close(emb(ids[:, 3:], position_ids=torch.tensor([3, 4])), emb(ids)[:, 3:])
    with pytest.raises(ValueError, match="length 7 is longer than max_len=6"):
        emb(ids[:, :2], past_length=5)


# --- norms ---


def test_rms_norm_equals_torch_and_t5():
    x = torch.randn(3, 5, 16) * 3 + 1
    ours = RMSNorm(16, eps=1e-6)
    nn.init.normal_(ours.weight)
    theirs = nn.RMSNorm(16, eps=1e-6)
    theirs.weight.data.copy_(ours.weight)
    torch.testing.assert_close(ours(x), theirs(x))
    t5 = ours.weight * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6))  # T5LayerNorm.forward
    torch.testing.assert_close(ours(x), t5)
    assert [name for name, _ in ours.named_parameters()] == ["weight"]


def test_layer_norm_equation():
    x = torch.randn(4, 7, 16) * 2 + 3
    norm = make_norm("layernorm", 16, eps=1e-5)
    nn.init.normal_(norm.weight)
    nn.init.normal_(norm.bias)
    mean = x.mean(-1, keepdim=True)
    var = x.var(-1, unbiased=False, keepdim=True)  # the biased (1/d) variance
    expected = (x - mean) / torch.sqrt(var + 1e-5) * norm.weight + norm.bias  # LN(x) = (x - mu)/sqrt(var + eps) g + b
    torch.testing.assert_close(norm(x), expected)


def test_make_norm_kinds():
    assert isinstance(make_norm("rmsnorm", 8), RMSNorm)
    assert make_norm("layernorm", 8, bias=False).bias is None
    with pytest.raises(ValueError, match="unknown norm"):
        make_norm("batchnorm", 8)


# --- feed-forward ---


@pytest.mark.parametrize("activation", ["relu", "gelu", "gelu_new", "silu"])
@pytest.mark.parametrize("gated", [False, True])
def test_feed_forward_variants(activation, gated):
    ffn = FeedForward(8, 32, activation=activation, gated=gated, bias=not gated)
    assert ffn(torch.randn(2, 5, 8)).shape == (2, 5, 8)
    names = {name for name, _ in ffn.named_parameters()}
    expected = {"fc1.weight", "fc2.weight"} | ({"gate.weight"} if gated else {"fc1.bias", "fc2.bias"})
    assert names == expected


def test_feed_forward_equations():
    x = torch.randn(2, 3, 8)
    ffn = FeedForward(8, 16, activation="relu")
    torch.testing.assert_close(
        ffn(x), torch.relu(x @ ffn.fc1.weight.T + ffn.fc1.bias) @ ffn.fc2.weight.T + ffn.fc2.bias
    )
    gelu_new = FeedForward(8, 16, activation="gelu_new", gated=True, bias=False)
    tanh_gelu = lambda z: 0.5 * z * (1 + torch.tanh(math.sqrt(2 / math.pi) * (z + 0.044715 * z**3)))
    expected = (tanh_gelu(gelu_new.gate(x)) * gelu_new.fc1(x)) @ gelu_new.fc2.weight.T
    torch.testing.assert_close(gelu_new(x), expected)


def test_unknown_activation():
    with pytest.raises(ValueError, match="unknown activation"):
        FeedForward(8, 16, activation="tanh")
