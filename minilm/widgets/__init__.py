"""Interactive explorers for the chapters, and the static figures readers without a running kernel see.

    attention_explorer(A, tokens)             # attention maps by layer and head; attention_grid, plot_attention
    decoding_explorer(logits, tokenizer)      # temperature, top-k, top-p over next-token logits; plot_decoding
    masking_explorer(tokenizer, text)         # BERT's masking rate, 80/10/10 split and seed on a sentence; plot_masking
    scalar_mix_explorer(mix, accuracies=...)  # ELMo's layer weights softmax(w) and γ; plot_scalar_mix
    albert_parameters_explorer()              # ALBERT's V, H, E, layers and sharing -> its parameters; plot_albert_...
    span_corruption_explorer(text)            # T5's noise density and mean span length; plot_span_corruption
    noising_explorer(text)                    # BART's noising functions, step by step, and the target; plot_noising
    replacement_explorer(pair, tokenizer, text)  # ELECTRA's masking rate and temperature -> P(replaced); plot_replac...

Each explorer is an ``ipywidgets.VBox`` of sliders over an ``ipywidgets.Image``: it draws on a matplotlib figure of
its own (``matplotlib.figure.Figure``, never registered with pyplot, so a notebook does not show it a second time)
and shows it as a PNG, so it needs no widget manager beyond ipywidgets' own, and tests can move its controls and read
what it shows (``current()``, ``title``) without a browser. A chapter puts an explorer's cell under
``# NBVAL_IGNORE_OUTPUT`` and draws the static figure beside it for readers without a kernel. Each module's
docstring has its explorer's example.
"""

from .attention import AttentionExplorer, attention_explorer, attention_grid, plot_attention
from .decoding import DecodingExplorer, DecodingView, decoding_explorer, decoding_view, plot_decoding
from .masking import MaskingExplorer, MaskingView, encode_sentence, masking_explorer, masking_view, plot_masking
from .mixing import MixView, ScalarMixExplorer, mix_weights, plot_scalar_mix, scalar_mix_explorer, scalar_mix_view
from .noising import NoisingExplorer, NoisingView, noising_explorer, noising_view, plot_noising
from .parameters import (
    AlbertParameters,
    AlbertParametersExplorer,
    albert_parameters,
    albert_parameters_explorer,
    plot_albert_parameters,
)
from .replacements import (
    ReplacementExplorer,
    ReplacementView,
    plot_replacements,
    replacement_explorer,
    replacement_view,
)
from .spans import (
    SpanCorruptionExplorer,
    SpanCorruptionView,
    plot_span_corruption,
    span_corruption_explorer,
    span_corruption_view,
)

__all__ = [
    "AlbertParameters",
    "AlbertParametersExplorer",
    "AttentionExplorer",
    "DecodingExplorer",
    "DecodingView",
    "MaskingExplorer",
    "MaskingView",
    "MixView",
    "NoisingExplorer",
    "NoisingView",
    "ScalarMixExplorer",
    "ReplacementExplorer",
    "ReplacementView",
    "SpanCorruptionExplorer",
    "SpanCorruptionView",
    "albert_parameters",
    "albert_parameters_explorer",
    "attention_explorer",
    "attention_grid",
    "decoding_explorer",
    "decoding_view",
    "encode_sentence",
    "masking_explorer",
    "masking_view",
    "mix_weights",
    "noising_explorer",
    "noising_view",
    "plot_albert_parameters",
    "plot_attention",
    "plot_decoding",
    "plot_masking",
    "plot_noising",
    "plot_replacements",
    "plot_scalar_mix",
    "plot_span_corruption",
    "replacement_explorer",
    "replacement_view",
    "scalar_mix_explorer",
    "scalar_mix_view",
    "span_corruption_explorer",
    "span_corruption_view",
]
