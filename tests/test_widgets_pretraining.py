"""The explorers of Chapters 5-7 without a browser. ALBERT's parameter counts equal those of minilm's Albert built on
the meta device, for every sharing mode, and follow the controls. T5's span corruption shows what
minilm.objectives.span_corruption's own functions give, with random_spans_helper's lengths. BART's noising shows
what minilm.objectives.denoising gives, step by step, and the whole original as the target. Every static twin draws
what it returns; bad input is named."""

import matplotlib

matplotlib.use("Agg")

import ipywidgets
import matplotlib.pyplot as plt
import pytest
import torch
from matplotlib.colors import to_rgba

from minilm.models.albert import Albert, albert_config
from minilm.nn import SHARING
from minilm.objectives.denoising import NOISES, DenoisingConfig, denoising_example
from minilm.objectives.span_corruption import noise_span_counts, random_spans_helper, span_corruption
from minilm.utils import count_parameters
from minilm.widgets import (
    AlbertParametersExplorer,
    NoisingExplorer,
    SpanCorruptionExplorer,
    albert_parameters,
    albert_parameters_explorer,
    noising_explorer,
    noising_view,
    plot_albert_parameters,
    plot_noising,
    plot_span_corruption,
    span_corruption_explorer,
    span_corruption_view,
)
from minilm.widgets import noising as noising_module
from minilm.widgets import spans as spans_module

PARAGRAPH = (
    "The cat sat on the mat by the door . It was warm there , and the house was quiet . Then a dog came in from the "
    "garden and lay down beside it . Neither of them moved until the evening ."
)


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


# --- ALBERT: where the parameters are ---


def albert_on_meta(vocab_size: int, hidden: int, embedding_size: int, n_layers: int, share: str) -> Albert:
    config = albert_config(
        "albert-base", vocab_size=vocab_size, d_model=hidden, n_heads=max(hidden // 64, 1), d_ff=4 * hidden,
        embedding_size=embedding_size, n_layers=n_layers, share=share, mlm=False, sop=False, pooler=False,
    )  # fmt: skip
    with torch.device("meta"):
        return Albert(config)


@pytest.mark.parametrize("share", SHARING)
@pytest.mark.parametrize("sizes", [(30000, 768, 128, 12), (8000, 256, 768, 3), (30000, 4096, 128, 12)])
def test_albert_counts_equal_minilms_albert(sizes, share):
    counts = albert_parameters(*sizes, share=share)
    model = albert_on_meta(*sizes, share=share)
    assert counts.embedding == count_parameters(model.embedding)
    assert counts.encoder == count_parameters(model.encoder)
    assert counts.total == count_parameters(model)
    assert sum(counts.parts().values()) == counts.total


def test_albert_base_counts_are_albert_models():
    counts = albert_parameters()  # albert-base: V 30000, H 768, E 128, 12 layers, all shared
    pooler = 768 * 768 + 768
    assert counts.total + pooler == 11_683_584  # transformers' AlbertModel (the preset's count)
    assert counts.token_table == 30000 * 128 and counts.n_attention == counts.n_feed_forward == 1
    unshared = albert_parameters(share="none")
    assert unshared.encoder == 12 * counts.encoder and unshared.embedding == counts.embedding


def test_albert_explorer_follows_its_controls():
    explorer = albert_parameters_explorer()
    assert isinstance(explorer, AlbertParametersExplorer) and explorer.image in explorer.children
    assert isinstance(explorer.image, ipywidgets.Image) and explorer.image.value[:4] == b"\x89PNG"
    assert explorer.current() == albert_parameters()
    explorer.share.value = "attention"
    explorer.embedding.value = 768
    explorer.layers.value = 6
    explorer.hidden.value = 1024
    explorer.vocab_size.value = 50000
    shown = explorer.current()
    model = albert_on_meta(50000, 1024, 768, 6, "attention")
    assert (shown.embedding, shown.encoder) == (count_parameters(model.embedding), count_parameters(model.encoder))
    assert (shown.n_attention, shown.n_feed_forward) == (1, 6)
    assert explorer.title.startswith("V = 50,000, H = 1024, E = 768, 6 layers, share = attention")
    assert explorer.title.endswith(f"{shown.total:,} parameters ({shown.total / 1e6:.1f}M)")


def test_plot_albert_parameters_draws_one_segment_per_part():
    fig, ax = plt.subplots()
    counts = plot_albert_parameters(ax, embedding_size=768, share="none")
    widths = [round(patch.get_width() * 1e6) for patch in ax.patches]
    assert widths == list(counts.parts().values())
    assert [text.get_text() for text in ax.get_legend().get_texts()] == list(counts.parts())
    assert [label.get_text() for label in ax.get_yticklabels()] == [
        f"embedding\n{counts.embedding / 1e6:.1f}M",
        f"encoder\n{counts.encoder / 1e6:.1f}M",
    ]


def test_albert_bad_settings_are_named():
    with pytest.raises(ValueError, match="unknown layer sharing"):
        albert_parameters_explorer(share="some")
    with pytest.raises(ValueError, match="embedding_size=0"):
        albert_parameters(embedding_size=0)


# --- T5: span corruption ---


def texts(ax) -> dict:
    return {t.get_gid(): t for t in ax.texts if t.get_gid()}


def test_span_corruption_view_is_minilms_span_corruption():
    view = span_corruption_view(PARAGRAPH, noise_density=0.3, mean_noise_span_length=2.0, seed=4, inputs_length=128)
    words = spans_module.t5_words(PARAGRAPH)
    sentinels = [words.id(f"<extra_id_{i}>") for i in range(len(words.ids))]
    generator = torch.Generator().manual_seed(4)
    inputs, targets = span_corruption(words.ids, sentinels, 0.3, 2.0, generator, eos_id=words.id("</s>"))
    assert (view.inputs, view.targets) == (words.label(inputs), words.label(targets))
    assert view.original == PARAGRAPH.split()
    assert (view.n_noise, view.n_spans) == noise_span_counts(len(view.original), 0.3, 2.0)
    assert sum(span is not None for span in view.span_of) == view.n_noise
    assert sorted({span for span in view.span_of if span is not None}) == list(range(view.n_spans))
    assert (view.tokens_length, view.targets_length) == random_spans_helper(128, 0.3, 2.0)


def test_the_input_and_target_put_back_together_give_the_original():
    view = span_corruption_view(PARAGRAPH, noise_density=0.25, mean_noise_span_length=3.0, seed=1)
    spans, current = {}, None
    for token in view.targets[:-1]:
        if token.startswith("<extra_id_"):
            current = spans.setdefault(token, [])
        else:
            current.append(token)
    rebuilt = [word for token in view.inputs[:-1] for word in spans.get(token, [token])]
    assert rebuilt == view.original and view.inputs[-1] == view.targets[-1] == "</s>"
    for i, span in enumerate(view.span_of):
        if span is not None:  # the span's words are the ones after its sentinel in the target
            assert view.original[i] in spans[f"<extra_id_{span}>"]


def test_span_corruption_explorer_follows_its_controls_and_colours_spans_alike():
    explorer = span_corruption_explorer(PARAGRAPH)
    assert isinstance(explorer, SpanCorruptionExplorer) and explorer.image in explorer.children
    assert explorer.current() == span_corruption_view(PARAGRAPH)
    assert explorer.title.endswith("512-token inputs take 568 raw tokens, targets 114")  # T5's baseline
    explorer.density.value = 0.5
    explorer.span.value = 2.0
    explorer.seed.value = 7
    shown = explorer.current()
    assert shown == span_corruption_view(PARAGRAPH, 0.5, 2.0, 7)
    assert explorer.title.startswith(f"density 0.50, mean span 2: {shown.n_noise} of {len(shown.original)} tokens")
    drawn = texts(explorer.axes)
    for i, token in enumerate(shown.inputs):
        if token.startswith("<extra_id_"):
            span = int(token[len("<extra_id_") : -1])
            first = shown.span_of.index(span)
            colour = drawn[f"input (encoder) {i}"].get_bbox_patch().get_facecolor()
            assert colour == drawn[f"original {first}"].get_bbox_patch().get_facecolor() != to_rgba("white")


def test_plot_span_corruption_draws_the_three_rows():
    fig, ax = plt.subplots()
    view = plot_span_corruption(ax, "Thank you for inviting me to your party last week .", 0.3, 2.0, seed=2)
    drawn = texts(ax)
    for heading, tokens in [("original", view.original), ("input (encoder)", view.inputs),
                            ("target (decoder)", view.targets)]:  # fmt: skip
        assert [drawn[f"{heading} {i}"].get_text() for i in range(len(tokens))] == tokens
    assert len(drawn) == len(view.original) + len(view.inputs) + len(view.targets)  # nothing else drawn


def test_span_corruption_bad_settings_are_named():
    explorer = span_corruption_explorer("one two three four five six")
    explorer.span.value = 1.0
    explorer.density.value = 0.9  # 5 spans of noise in 6 tokens, 1 token to separate them
    assert explorer.current() is None and "lower noise_density" in explorer.title
    explorer.density.value = 0.15
    assert explorer.current() is not None
    with pytest.raises(ValueError, match="no words"):
        span_corruption_explorer("  ")
    with pytest.raises(ValueError, match="noise_density"):
        span_corruption_view(PARAGRAPH, noise_density=1.5)


# --- BART: noising ---


@pytest.mark.parametrize("noises", [("infilling", "permutation"), NOISES, ("masking",), ("deletion", "rotation")])
def test_noising_view_is_minilms_denoising_example_step_by_step(noises):
    view = noising_view(PARAGRAPH, noises, mask_ratio=0.3, poisson_lambda=2.0, seed=5)
    words = noising_module.bart_words(PARAGRAPH)
    config = DenoisingConfig(noises, 0.3, 2.0)
    settings = noising_module.noise_settings(words, config)
    example = denoising_example(noising_module.document(words), config, torch.Generator().manual_seed(5), **settings)
    assert view.noised == words.label(example["input_ids"])
    assert view.target == view.original == words.label(example["labels"]) == ["<s>", *PARAGRAPH.split(), "</s>"]
    assert [name for name, _ in view.steps] == [name for name in NOISES if name in noises]


def test_noising_explorer_follows_its_controls():
    explorer = noising_explorer(PARAGRAPH)
    assert isinstance(explorer, NoisingExplorer) and explorer.image in explorer.children
    assert [name for name, box in explorer.noises.items() if box.value] == ["permutation", "infilling"]
    assert explorer.current() == noising_view(PARAGRAPH)
    explorer.noises["infilling"].value = False
    explorer.noises["permutation"].value = False
    assert explorer.current().noised == explorer.current().original and explorer.current().steps == []
    explorer.noises["masking"].value = True
    explorer.ratio.value = 0.5
    explorer.seed.value = 3
    shown = explorer.current()
    assert shown == noising_view(PARAGRAPH, ("masking",), 0.5, 3.0, 3)
    n_body = len(shown.original) - 2
    assert shown.noised.count("<mask>") == -(-n_body // 2)  # fairseq's ceil(ratio · n) tokens masked
    assert explorer.title.startswith("masking, mask ratio 0.50, λ = 3, seed 3")
    assert explorer.title.endswith(f"{len(shown.original)} tokens -> {len(shown.noised)} for the encoder, "
                                   f"{n_body - n_body // 2} <mask>")  # fmt: skip


def test_plot_noising_draws_each_step_and_the_target_with_masks_in_blue():
    fig, ax = plt.subplots()
    view = plot_noising(ax, PARAGRAPH, noises=("deletion", "infilling"), mask_ratio=0.2, seed=1)
    drawn = texts(ax)
    rows = [("original", view.original)] + [(f"after {name}", tokens) for name, tokens in view.steps]
    rows += [("target (decoder): the original", view.target)]
    for heading, tokens in rows:
        assert [drawn[f"{heading} {i}"].get_text() for i in range(len(tokens))] == tokens
    masks = [i for i, token in enumerate(view.noised) if token == "<mask>"]
    assert masks
    for i in masks:
        assert drawn[f"after infilling {i}"].get_bbox_patch().get_facecolor() == to_rgba("tab:blue")


def test_noising_bad_settings_are_named():
    explorer = noising_explorer("no full stop here", noises=("masking",))
    explorer.noises["permutation"].value = True
    assert explorer.current() is None and "sentence_end_ids" in explorer.title
    with pytest.raises(ValueError, match="unknown noise"):
        noising_view(PARAGRAPH, "infilling+shuffle")
    with pytest.raises(ValueError, match="mask_ratio"):
        noising_explorer(PARAGRAPH, mask_ratio=1.5)
