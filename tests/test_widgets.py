"""minilm.widgets without a browser. The attention explorer's sliders span the layers and heads, and moving them
changes the map, title and picture shown; the static heat map and grid label their axes with the tokens. The decoding
explorer keeps what minilm.generation's filters keep (top-k = 1: the top token and its mass; top-p: the smallest set
reaching p, by hand), colours every bar and legend entry by it. The masking explorer shows mask_tokens' own draw:
rate 0 selects nothing, rate 1 with keep = 1 keeps every token but the special ones, the split always sums to 1. The
scalar-mix explorer's weights sum to 1 and are ScalarMix's. Every static twin draws what it returns; bad input is
named."""

import matplotlib

matplotlib.use("Agg")

import ipywidgets
import matplotlib.pyplot as plt
import numpy as np
import pytest
import torch
from matplotlib.colors import to_rgba

import minilm.generation
import minilm.objectives.mlm
from minilm.nn import ScalarMix
from minilm.objectives.labels import IGNORE_INDEX
from minilm.tokenizers import train_tokenizer
from minilm.widgets import (
    AttentionExplorer,
    DecodingExplorer,
    MaskingExplorer,
    ScalarMixExplorer,
    attention_explorer,
    attention_grid,
    decoding,
    decoding_explorer,
    masking,
    masking_explorer,
    mix_weights,
    mixing,
    plot_attention,
    plot_decoding,
    plot_masking,
    plot_scalar_mix,
    scalar_mix_explorer,
)

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


# --- decoding: temperature, top-k and top-p over one next-token distribution ---

NEXT = [0.4, 0.25, 0.15, 0.1, 0.06, 0.04]  # the next token's probabilities, most likely first
ORDER = [3, 0, 5, 1, 4, 2]  # vocabulary id of the i-th most likely token
VOCAB = ["a", "b", "c", "d", "e", "f"]


@pytest.fixture
def next_logits():
    logits = torch.empty(6)
    logits[ORDER] = torch.tensor(NEXT).log()
    return logits  # ids 3, 0, 5, 1, 4, 2 from most to least likely: "d", "a", "f", "b", "e", "c"


def bar_colours(ax):
    return [bar.get_facecolor() for bar in ax.containers[0]]


def legend_of(ax):
    legend = ax.get_legend()
    entries = zip(legend.get_texts(), legend.legend_handles, strict=True)
    return {text.get_text(): handle.get_facecolor() for text, handle in entries}


def assert_colours_match(ax, fates, colours):
    """Every bar has its fate's colour, and the legend names exactly the fates on show, in their colours."""
    assert bar_colours(ax) == [to_rgba(colours[fate]) for fate in fates]
    assert legend_of(ax) == {fate: to_rgba(colours[fate]) for fate in set(fates)}


def test_decoding_explorer_shows_the_most_likely_tokens_all_kept_at_first(next_logits):
    explorer = decoding_explorer(next_logits, VOCAB, n=4)
    assert isinstance(explorer, DecodingExplorer) and isinstance(explorer, ipywidgets.VBox)
    assert explorer.image in explorer.children and bytes(explorer.image.value).startswith(b"\x89PNG")
    assert (explorer.top_k.value, explorer.top_k.max, explorer.top_p.value) == (0, 6, 1.0)  # both filters off
    view = explorer.current()
    assert view.tokens == ["d", "a", "f", "b"]
    assert np.allclose(view.probs, NEXT[:4])
    assert [b.get_height() for b in explorer.axes.containers[0]] == pytest.approx(NEXT[:4])
    assert [t.get_text() for t in explorer.axes.get_xticklabels()] == ["d", "a", "f", "b"]
    assert view.kept.all() and view.n_kept == 6 and view.kept_mass == pytest.approx(1.0)
    assert explorer.title == "T = 1, top-k off, top-p off: 6 of 6 tokens kept, mass 1.000"
    assert_colours_match(explorer.axes, view.fates, decoding.COLOURS)
    assert plt.get_fignums() == []  # its figure is its own


def test_top_k_1_keeps_the_top_token_and_its_mass(next_logits):
    explorer = decoding_explorer(next_logits, VOCAB, n=6)
    first = bytes(explorer.image.value)
    explorer.top_k.value = 1
    view = explorer.current()
    assert view.n_kept == 1 and view.kept.tolist() == [True] + [False] * 5
    assert view.kept_mass == pytest.approx(max(NEXT)) == pytest.approx(float(next_logits.softmax(-1).max()))
    assert view.fates == ["kept"] + ["removed by top-k"] * 5
    assert explorer.title == "T = 1, top-k 1, top-p off: 1 of 6 tokens kept, mass 0.400"
    assert_colours_match(explorer.axes, view.fates, decoding.COLOURS)
    assert bytes(explorer.image.value) != first
    explorer.top_k.value = 0  # off again: everything back
    assert explorer.current().n_kept == 6


@pytest.mark.parametrize("p", [0.3, 0.5, 0.7, 0.85, 0.95, 0.99])
def test_top_p_keeps_the_smallest_set_reaching_p(next_logits, p):
    explorer = decoding_explorer(next_logits, VOCAB, n=3)
    explorer.top_p.value = p
    n = next(i + 1 for i in range(6) if sum(NEXT[: i + 1]) >= p)  # by hand: the first prefix of mass >= p
    view = explorer.current()
    assert view.n_kept == n  # counted over the whole vocabulary, beyond the 3 tokens shown
    assert view.kept_mass == pytest.approx(sum(NEXT[:n]), abs=1e-6)
    assert view.kept.tolist() == [i < n for i in range(3)]
    assert f": {n} of 6 tokens kept, mass {sum(NEXT[:n]):.3f}" in explorer.title
    assert_colours_match(explorer.axes, view.fates, decoding.COLOURS)


def test_top_k_then_top_p_and_temperature_as_sampling_does(next_logits):
    explorer = decoding_explorer(next_logits, VOCAB, n=6, top_k=3, top_p=0.7)
    assert (explorer.top_k.value, explorer.top_p.value) == (3, 0.7)
    view = explorer.current()
    # top-p within the top 3 (0.4, 0.25, 0.15 renormalised: 0.5, 0.3125, ...): two reach 0.7
    assert view.fates == ["kept", "kept", "removed by top-p"] + ["removed by top-k"] * 3
    assert_colours_match(explorer.axes, view.fates, decoding.COLOURS)
    kept = torch.isfinite(minilm.generation.filter_logits(next_logits, 1.0, 3, 0.7))
    assert view.n_kept == int(kept.sum()) == 2
    explorer.temperature.value = 0.5
    sharp = np.array(NEXT) ** 2 / np.sum(np.array(NEXT) ** 2)  # softmax(z / 0.5) = p² / Σ p²
    assert np.allclose(explorer.current().probs, sharp, atol=1e-6)
    assert explorer.settings() == dict(temperature=0.5, top_k=3, top_p=0.7)
    assert explorer.title.startswith("T = 0.5, top-k 3, top-p 0.7:")
    assert decoding.filter_logits is minilm.generation.filter_logits  # the sampling path's own filter


def test_decoding_labels_come_from_a_tokenizer(next_logits):
    class Vocabulary:
        def id_to_token(self, i):
            return VOCAB[i] if i != 5 else None  # an id without a token

    view = decoding_explorer(next_logits, Vocabulary(), n=3).current()
    assert view.tokens == ["d", "a", "#5"]


def test_decoding_labels_are_a_tokenizers_text_quoted(next_logits):
    class ByteLevel:
        def id_to_token(self, i):
            return "Ġ" + VOCAB[i]  # byte-level BPE's raw token: a leading space as "Ġ"

        def decode(self, ids):
            return "" if ids == [5] else " " + VOCAB[ids[0]]  # id 5 decodes to nothing: its token instead

    view = decoding_explorer(next_logits, ByteLevel(), n=3).current()
    assert view.tokens == ["' d'", "' a'", "Ġ" + VOCAB[5]]


def test_plot_decoding_draws_one_bar_per_token(next_logits):
    fig, ax = plt.subplots()
    view = plot_decoding(ax, next_logits, VOCAB, temperature=1.0, top_k=2, top_p=None, n=5)
    assert len(ax.containers[0]) == 5 and view.n_kept == 2
    assert ax.get_title() == "T = 1, top-k 2, top-p off: 2 of 6 tokens kept, mass 0.650"
    assert_colours_match(ax, view.fates, decoding.COLOURS)


def test_decoding_bad_input_is_named(next_logits):
    with pytest.raises(ValueError, match=r"one next-token distribution \(V,\), got shape \(1, 6\)"):
        decoding_explorer(next_logits[None], VOCAB)
    with pytest.raises(ValueError, match="5 labels for 6 logits"):
        decoding_explorer(next_logits, VOCAB[:5])
    fig, ax = plt.subplots()
    with pytest.raises(ValueError, match="temperature must be > 0"):
        plot_decoding(ax, next_logits, VOCAB, temperature=0.0)


# --- masking: what BERT sees ---

WORDS = ["[PAD]", "[CLS]", "[SEP]", "[MASK]", "the", "cat", "sat", "on", "mat", "and", "a", "dog", "ran", "park"]
SPECIAL_IDS = (0, 1, 2, 3)


@pytest.fixture
def ids_sentence():
    ids = torch.tensor([1, 4, 5, 6, 7, 4, 8, 9, 10, 11, 12, 2])  # [CLS] the cat sat on the mat and a dog ran [SEP]
    special = (ids == 1) | (ids == 2)
    return dict(vocab=WORDS, mask_id=3, special_tokens_mask=special, special_ids=SPECIAL_IDS), ids


def test_masking_explorer_shows_mask_tokens_own_draw(ids_sentence):
    options, ids = ids_sentence
    explorer = masking_explorer(ids, mask_prob=0.5, seed=3, **options)
    assert isinstance(explorer, MaskingExplorer) and explorer.image in explorer.children
    assert (explorer.rate.value, explorer.mask.value, explorer.random.value, explorer.seed.value) == (0.5, 0.8, 0.1, 3)
    assert explorer.keep.value == pytest.approx(0.1)
    corrupted, labels = minilm.objectives.mlm.mask_tokens(
        ids[None], options["special_tokens_mask"][None], 3, len(WORDS), 0.5, 0.8, 0.1,
        generator=torch.Generator().manual_seed(3), special_ids=SPECIAL_IDS,
    )  # fmt: skip
    view = explorer.current()
    assert view.shown == [WORDS[i] for i in corrupted[0].tolist()]
    assert view.original == [WORDS[i] for i in ids.tolist()]
    selected = (labels[0] != IGNORE_INDEX).tolist()
    assert [fate in masking.SELECTED for fate in view.fates] == selected and any(selected)
    assert view.fates[0] == view.fates[-1] == "special"
    for fate, original, shown in zip(view.fates, view.original, view.shown, strict=True):
        assert (shown == "[MASK]") == (fate == "[MASK]")
        assert (shown != original) == (fate in ("[MASK]", "random token"))
    tokens = {t.get_gid(): t for t in explorer.axes.texts}
    for i, (fate, shown) in enumerate(zip(view.fates, view.shown, strict=True)):  # each box as its fate says
        assert tokens[f"token {i}"].get_text() == shown
        assert tokens[f"token {i}"].get_bbox_patch().get_facecolor() == to_rgba(masking.COLOURS[fate])
        assert (f"original {i}" in tokens) == (fate in ("[MASK]", "random token"))
    assert legend_of(explorer.axes) == {fate: to_rgba(masking.COLOURS[fate]) for fate in set(view.fates)}
    assert explorer.title.endswith(f"seed 3: {view.n_selected} of 10 tokens selected")
    assert plt.get_fignums() == []


def test_masking_rate_0_selects_nothing_and_rate_1_keep_1_keeps_every_ordinary_token(ids_sentence):
    options, ids = ids_sentence
    explorer = masking_explorer(ids, **options)
    explorer.rate.value = 0.0
    view = explorer.current()
    assert view.n_selected == 0 and view.shown == view.original
    assert set(view.fates[1:-1]) == {"not selected"} and view.fates[0] == view.fates[-1] == "special"
    assert explorer.title == "rate 0.00, [MASK]/random/keep 0.80/0.10/0.10, seed 0: 0 of 10 tokens selected"
    explorer.rate.value = 1.0
    explorer.keep.value = 1.0  # the other two parts of the split make room
    assert explorer.mask.value == explorer.random.value == 0.0
    view = explorer.current()
    assert view.fates == ["special"] + ["kept (scored)"] * 10 + ["special"]
    assert view.shown == view.original
    assert explorer.title.endswith("[MASK]/random/keep 0.00/0.00/1.00, seed 0: 10 of 10 tokens selected")
    explorer.mask.value = 1.0
    assert explorer.current().shown == ["[CLS]"] + ["[MASK]"] * 10 + ["[SEP]"]
    explorer.random.value = 1.0
    view = explorer.current()
    assert set(view.fates[1:-1]) <= {"random token", "kept (scored)"} and "random token" in view.fates
    assert not set(view.shown[1:-1]) & {"[PAD]", "[CLS]", "[SEP]", "[MASK]"}  # never a special token drawn


def test_the_split_always_sums_to_1_and_the_seed_redraws(ids_sentence):
    options, ids = ids_sentence
    explorer = masking_explorer(ids, mask_prob=0.5, **options)
    explorer.mask.value = 0.6  # random and keep share the rest as they did: 0.1 : 0.1
    assert (explorer.random.value, explorer.keep.value) == (pytest.approx(0.2), pytest.approx(0.2))
    explorer.keep.value = 0.0
    assert (explorer.mask.value, explorer.random.value) == (pytest.approx(0.75), pytest.approx(0.25))
    explorer.mask.value = 0.0  # keep is 0: random takes it all
    assert (explorer.random.value, explorer.keep.value) == (pytest.approx(1.0), 0.0)
    explorer.random.value = 0.0  # both others at 0: they share the rest in halves
    assert explorer.mask.value == explorer.keep.value == pytest.approx(0.5)
    for control in explorer.split:
        control.value = 0.3
        assert sum(c.value for c in explorer.split) == pytest.approx(1.0)
    settings = explorer.settings()
    assert settings["replace_prob"] == explorer.mask.value and settings["random_prob"] == explorer.random.value
    draws = set()
    for seed in range(4):
        explorer.seed.value = seed
        draws.add(tuple(explorer.current().fates))
    assert len(draws) > 1


def test_masking_explorer_encodes_a_text_with_a_tokenizer():
    tokenizer = train_tokenizer(["the cat sat on the mat", "a dog ran in the park"] * 20, "bert", vocab_size=100)
    text = "the cat sat on the mat"
    explorer = masking_explorer(tokenizer, text, mask_prob=1.0, replace_prob=1.0, random_prob=0.0)
    view = explorer.current()
    assert view.original == ["[CLS]", *tokenizer.tokenize(text), "[SEP]"]
    assert view.shown == ["[CLS]"] + ["[MASK]"] * (len(view.original) - 2) + ["[SEP]"]
    fig, ax = plt.subplots()
    drawn = plot_masking(ax, tokenizer, text, mask_prob=0.0)
    assert drawn.n_selected == 0 and [t.get_text() for t in ax.texts] == drawn.original
    assert ax.get_title().endswith(f"0 of {len(drawn.original) - 2} tokens selected")


def test_plot_masking_draws_fixed_settings(ids_sentence):
    options, ids = ids_sentence
    fig, ax = plt.subplots()
    view = plot_masking(ax, ids, mask_prob=1.0, replace_prob=0.0, random_prob=1.0, seed=1, per_row=5, **options)
    assert view.n_selected == 10
    originals = [t for t in ax.texts if t.get_gid().startswith("original")]
    assert len(originals) == sum(fate == "random token" for fate in view.fates)
    assert ax.get_title() == "rate 1.00, [MASK]/random/keep 0.00/1.00/0.00, seed 1: 10 of 10 tokens selected"


def test_masking_bad_input_is_named(ids_sentence):
    options, ids = ids_sentence

    class NoMask:
        family, mask_id = "gpt2", None

        def id_to_token(self, i):
            return "x"

    with pytest.raises(ValueError, match="the gpt2 tokenizer has no mask token"):
        masking_explorer(NoMask(), "some text")
    with pytest.raises(ValueError, match="give mask_id and vocab"):
        masking_explorer(ids, vocab=WORDS)
    with pytest.raises(ValueError, match=r"ids must be one sentence \(T,\)"):
        masking_explorer(ids[None], **options)
    with pytest.raises(ValueError, match="mask_prob=1.5 must be in"):
        masking_explorer(ids, mask_prob=1.5, **options)


# --- scalar mix: ELMo's layer weights ---


def test_mix_weights_are_scalar_mix_s_and_sum_to_1():
    w = torch.tensor([0.5, -1.0, 2.0])
    s = mix_weights(w)
    assert s.sum() == pytest.approx(1.0) and (s > 0).all()
    mix = ScalarMix(3, initial_gamma=1.7)
    with torch.no_grad():
        mix.weights.copy_(w)
    layers = [torch.randn(4, 5) for _ in range(3)]
    with torch.no_grad():
        assert torch.allclose(mix(layers), 1.7 * sum(float(s_j) * h for s_j, h in zip(s, layers, strict=True)))
    assert np.allclose(mix_weights(np.zeros(4)), 0.25)


def test_scalar_mix_explorer_starts_from_a_scalar_mix_and_follows_its_sliders():
    mix = ScalarMix(3, initial_gamma=0.5)
    with torch.no_grad():
        mix.weights.copy_(torch.tensor([1.0, 0.0, -1.0]))
    explorer = scalar_mix_explorer(mix)
    assert isinstance(explorer, ScalarMixExplorer) and explorer.image in explorer.children
    assert [c.value for c in explorer.w] == [1.0, 0.0, -1.0] and explorer.gamma.value == 0.5
    view = explorer.current()
    assert np.allclose(view.s, mix_weights([1.0, 0.0, -1.0])) and view.s.sum() == pytest.approx(1.0)
    assert [b.get_height() for b in explorer.axes[0].containers[0]] == pytest.approx(view.s.tolist())
    assert len(explorer.axes) == 1  # no accuracies: one panel
    first = bytes(explorer.image.value)
    explorer.w[2].value = 3.0
    view = explorer.current()
    assert view.s.argmax() == 2 and view.s.sum() == pytest.approx(1.0)
    assert np.allclose(view.s, torch.tensor([1.0, 0.0, 3.0]).softmax(0).numpy(), atol=1e-6)
    explorer.gamma.value = 2.0
    assert np.allclose(explorer.current().scales, 2.0 * view.s)
    assert explorer.title == "γ = 2.00, s = [" + ", ".join(f"{s:.2f}" for s in view.s) + "]"
    assert bytes(explorer.image.value) != first and plt.get_fignums() == []


def test_scalar_mix_explorer_shows_each_layers_accuracy_beside_the_mix():
    explorer = scalar_mix_explorer(np.log([0.5, 0.3, 0.2]), accuracies=[0.81, 0.86, 0.84], mix_accuracy=0.88)
    assert np.allclose(explorer.current().s, [0.5, 0.3, 0.2], atol=1e-6)
    weights, accuracies = explorer.axes
    assert [b.get_height() for b in accuracies.containers[0]] == pytest.approx([0.81, 0.86, 0.84, 0.88])
    assert [t.get_text() for t in accuracies.get_xticklabels()] == ["layer 0", "layer 1", "layer 2", "mix"]
    explorer.w[0].value = -5.0
    assert [b.get_height() for b in accuracies.containers[0]] == pytest.approx([0.81, 0.86, 0.84, 0.88])
    assert explorer.current().s[0] == pytest.approx(np.exp(-5) / (np.exp(-5) + 0.3 + 0.2))


def test_scalar_mix_explorer_mixes_given_states_as_scalar_mix_does():
    states = torch.randn(4, 3, 5)  # (L, T, C)
    explorer = scalar_mix_explorer(states, names=["emb", "1", "2", "3"])
    assert len(explorer.w) == 4 and np.allclose(explorer.current().s, 0.25)
    explorer.w[1].value, explorer.gamma.value = 1.5, 0.7
    mix = ScalarMix(4, initial_gamma=0.7)
    with torch.no_grad():
        mix.weights.copy_(torch.tensor([0.0, 1.5, 0.0, 0.0]))
        expected = mix(list(states))
    mixed = explorer.current().mixed
    assert torch.allclose(mixed, expected)
    assert explorer.title.endswith(f"RMS of the mix {float(expected.pow(2).mean().sqrt()):.3f}")
    assert [t.get_text() for t in explorer.axes[0].get_xticklabels()] == ["emb", "1", "2", "3"]
    equal = scalar_mix_explorer(3)
    assert np.allclose(equal.current().s, 1 / 3) and equal.current().mixed is None


def test_plot_scalar_mix_draws_one_or_two_panels():
    fig, ax = plt.subplots()
    view = plot_scalar_mix(ax, [0.0, 1.0], gamma=1.5)
    assert [b.get_height() for b in ax.containers[0]] == pytest.approx(view.s.tolist())
    assert ax.get_title() == "γ = 1.50, s = [0.27, 0.73]"
    fig, axes = plt.subplots(1, 2)
    view = plot_scalar_mix(axes, [0.0, 1.0], accuracies=[0.7, 0.8])
    assert [t.get_text() for t in axes[1].get_xticklabels()] == ["layer 0", "layer 1"]  # no mix accuracy: no bar
    assert mixing.ScalarMix is ScalarMix


def test_scalar_mix_bad_input_is_named():
    with pytest.raises(ValueError, match="2 accuracies for 3 layers"):
        scalar_mix_explorer(np.zeros(3), accuracies=[0.5, 0.6])
    with pytest.raises(ValueError, match="at least one layer"):
        scalar_mix_explorer(0)
    fig, ax = plt.subplots()
    with pytest.raises(ValueError, match="two with accuracies"):
        plot_scalar_mix(ax, [0.0, 1.0], accuracies=[0.7, 0.8])
    with pytest.raises(ValueError, match="states given twice"):
        scalar_mix_explorer(torch.randn(2, 3, 4), states=torch.randn(2, 3, 4))
