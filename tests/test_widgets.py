"""minilm.widgets without a browser: the explorer's sliders span the layers and heads, moving them changes the map,
title and picture shown; the static heat map and grid label their axes with the tokens; bad input is named."""

import matplotlib

matplotlib.use("Agg")

import ipywidgets
import matplotlib.pyplot as plt
import numpy as np
import pytest
import torch

from minilm.widgets import AttentionExplorer, attention_explorer, attention_grid, plot_attention

TOKENS = ["[CLS]", "the", "cat", "sat", ".", "[SEP]"]


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


@pytest.fixture
def maps():
    return torch.randn(3, 2, 4, 6, 6).softmax(-1)  # (L, B, nh, T, T)


def test_explorer_sliders_span_the_layers_and_heads(maps):
    explorer = attention_explorer(maps, TOKENS, index=1)
    assert isinstance(explorer, AttentionExplorer) and isinstance(explorer, ipywidgets.VBox)
    assert isinstance(explorer.layer, ipywidgets.IntSlider) and isinstance(explorer.head, ipywidgets.IntSlider)
    assert (explorer.layer.min, explorer.layer.max) == (0, 2)  # L - 1
    assert (explorer.head.min, explorer.head.max) == (0, 3)  # nh - 1
    assert explorer.image in explorer.children  # the picture is part of the widget
    assert np.allclose(explorer.current(), maps[0, 1, 0].numpy())
    assert explorer.title == "attention: layer 0, head 0"


def test_moving_the_sliders_changes_what_is_shown(maps):
    explorer = attention_explorer(maps, TOKENS, index=1, name="effective attention")
    first = bytes(explorer.image.value)  # ipywidgets keeps a memoryview
    assert first.startswith(b"\x89PNG")
    explorer.layer.value = 2
    assert np.allclose(explorer.current(), maps[2, 1, 0].numpy())
    explorer.head.value = 3
    assert np.allclose(explorer.current(), maps[2, 1, 3].numpy())
    assert explorer.title == "effective attention: layer 2, head 3"
    assert bytes(explorer.image.value) != first  # the picture was redrawn
    labels = [t.get_text() for t in explorer.axes.get_xticklabels()]
    assert labels == TOKENS
    assert plt.get_fignums() == []  # its figure is its own: pyplot (and a notebook) never shows it twice


def test_explorer_takes_one_sequence_maps():
    maps = np.random.default_rng(0).random((2, 3, 6, 6))  # (L, nh, T, T), numpy
    explorer = attention_explorer(maps, TOKENS)
    assert (explorer.layer.max, explorer.head.max) == (1, 2)
    explorer.head.value = 2
    assert np.allclose(explorer.current(), maps[0, 2])


def test_plot_attention_draws_the_map_with_token_labels():
    weights = torch.eye(6)
    fig, ax = plt.subplots()
    image = plot_attention(ax, weights, TOKENS, title="layer 0, head 0")
    assert np.array_equal(image.get_array(), weights.numpy())
    assert [t.get_text() for t in ax.get_yticklabels()] == TOKENS
    assert [t.get_text() for t in ax.get_xticklabels()] == TOKENS
    assert ax.get_title() == "layer 0, head 0"
    assert image.get_clim() == (0.0, 1.0)


def test_negative_weights_get_a_scale_symmetric_about_zero():
    weights = torch.tensor([[0.5, -0.25], [0.1, 0.2]])
    fig, ax = plt.subplots()
    image = plot_attention(ax, weights, ["a", "b"])
    assert image.get_clim() == (-0.5, 0.5)
    assert image.get_cmap().name == "RdBu_r"


def test_attention_grid_has_one_map_per_layer_and_head(maps):
    fig = attention_grid(maps, TOKENS, layers=[0, 2], heads=[1, 3], index=1)
    axes = fig.get_axes()
    assert len(axes) == 4
    assert [ax.get_title() for ax in axes] == [
        "layer 0, head 1",
        "layer 0, head 3",
        "layer 2, head 1",
        "layer 2, head 3",
    ]
    assert np.allclose(axes[3].images[0].get_array(), maps[2, 1, 3].numpy())
    assert [t.get_text() for t in axes[0].get_yticklabels()] == TOKENS  # the left column names the queries
    assert all(t.get_text() == "" for t in axes[1].get_yticklabels())
    assert [t.get_text() for t in axes[2].get_xticklabels()] == TOKENS  # the bottom row names the keys
    assert len(attention_grid(maps[:, 0], TOKENS).get_axes()) == 3 * 4  # every layer and head by default


def test_bad_input_is_named(maps):
    with pytest.raises(ValueError, match="5 tokens for maps of 6 positions"):
        attention_explorer(maps, TOKENS[:5])
    with pytest.raises(ValueError, match=r"\(L, nh, T, T\) or \(L, B, nh, T, T\)"):
        attention_explorer(maps[0, 0], TOKENS)
    with pytest.raises(ValueError, match="layer 3: the maps have layers 0..2 and heads 0..3"):
        attention_grid(maps, TOKENS, layers=[3])
    fig, ax = plt.subplots()
    with pytest.raises(ValueError, match="one \\(T, T\\) map"):
        plot_attention(ax, maps[0, 0], TOKENS)
