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

from minilm.models.albert import Albert, albert_config
from minilm.nn import SHARING
from minilm.utils import count_parameters
from minilm.widgets import (
    AlbertParametersExplorer,
    albert_parameters,
    albert_parameters_explorer,
    plot_albert_parameters,
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
