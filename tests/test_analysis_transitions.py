"""minilm.analysis.transitions: ALBERT's Figure 1 measurements (L2 distance and angle between each layer's input and
output) against hand computations, padding ignored, and the oscillation of a per-layer curve."""

import math

import pytest
import torch

from minilm.analysis.transitions import layer_transitions, oscillation
from minilm.models.albert import Albert, AlbertConfig


def test_distance_and_angle_of_known_vectors():
    h0 = torch.tensor([[[1.0, 0.0], [0.0, 2.0]]])  # (1, 2, 2): two tokens
    h1 = torch.tensor([[[0.0, 1.0], [0.0, 4.0]]])  # token 0 turned by 90 degrees, token 1 stretched (0 degrees)
    h2 = torch.tensor([[[-1.0, 1.0], [0.0, 4.0]]])  # token 0 turned by 45 degrees, token 1 unchanged
    l2, degrees = layer_transitions([h0, h1, h2])
    assert l2.tolist() == pytest.approx([(math.sqrt(2) + 2.0) / 2, (1.0 + 0.0) / 2])
    assert degrees.tolist() == pytest.approx([(90.0 + 0.0) / 2, (45.0 + 0.0) / 2], abs=1e-4)


def test_padding_tokens_are_left_out():
    generator = torch.Generator().manual_seed(0)
    states = [torch.randn(2, 5, 8, generator=generator) for _ in range(4)]
    mask = torch.tensor([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]])
    padded = [h.clone() for h in states]
    for h in padded:
        h[0, 3:] = 1e6 * torch.randn(2, 8, generator=generator)  # garbage at the padding
    expected = layer_transitions([torch.cat([h[0, :3], h[1]])[None] for h in states])  # the 8 real tokens alone
    for got, want in zip(layer_transitions(padded, mask), expected, strict=True):
        assert torch.allclose(got, want)


def test_one_value_per_layer_of_a_model():
    config = AlbertConfig(vocab_size=50, max_len=16, n_layers=3, n_heads=2, d_model=16, d_ff=32, embedding_size=8)
    model = Albert(config)
    ids = torch.randint(5, 50, (2, 7))
    with torch.no_grad():
        out = model.features(ids, output_hidden_states=True)
    l2, degrees = layer_transitions(out.hidden_states)
    assert l2.shape == degrees.shape == (3,)
    h = out.hidden_states
    assert float(l2[2]) == pytest.approx(float((h[3] - h[2]).norm(dim=-1).mean()), rel=1e-5)
    assert ((degrees > 0) & (degrees < 180)).all()


def test_bad_inputs_are_named():
    h = torch.zeros(1, 3, 4)
    with pytest.raises(ValueError, match="at least one layer"):
        layer_transitions([h])
    with pytest.raises(ValueError, match="attention_mask"):
        layer_transitions([h, h], torch.ones(1, 4))
    with pytest.raises(ValueError, match="two layers"):
        oscillation(torch.tensor([1.0]))


def test_oscillation_is_the_up_and_down_movement_relative_to_the_mean():
    assert oscillation(torch.tensor([1.0, 2.0, 1.0])) == pytest.approx(1.5)  # total variation 2, net change 0, mean 4/3
    assert oscillation(torch.tensor([9.0, 2.0, 0.5, 0.1])) == 0.0  # falls steeply but never rises: no oscillation
    assert oscillation(torch.tensor([3.0, 3.0, 3.0])) == 0.0
    curve = torch.tensor([1.0, 4.0, 2.0, 5.0])  # variation 3 + 2 + 3 = 8, net change 4, mean 3
    assert oscillation(curve) == pytest.approx(4 / 3)
    assert oscillation(10 * curve) == pytest.approx(oscillation(curve))
