"""The span-corruption explorer: T5's objective on a paragraph, under a noise density and a mean span length.

    text = "Thank you for inviting me to your party last week ."
    explorer = span_corruption_explorer(text)                     # T5's 15% and 3 to start from
    explorer                                                      # its cell under # NBVAL_IGNORE_OUTPUT
    explorer.density.value = 0.5; explorer.current().inputs       # move a control, read what is shown
    plot_span_corruption(ax, text, noise_density=0.15, mean_noise_span_length=3.0, seed=0)   # the static figure

Everything shown comes from :mod:`minilm.objectives.span_corruption`, the functions pretraining runs, on the
paragraph's words (ids from :mod:`._words`; the sentinels ``<extra_id_i>`` and ``</s>`` are tokens of their own):
the noise mask from :func:`random_spans_noise_mask` with a generator seeded by ``seed``, the input with a sentinel
for each corrupted span and the target with each span after its sentinel from :func:`span_corruption`, the number
of corrupted tokens and spans from :func:`noise_span_counts`. Span i and its sentinel share a colour in all three
rows. The title adds what :func:`random_spans_helper` gives for these settings: how many raw tokens fill an input of
``inputs_length`` (512: T5's 568) and how long the target then is (114), the decoder's share of the work.

Controls: ``density`` (noise density, 15%), ``span`` (mean span length, 3) and ``seed``; settings that cannot
corrupt the text (more spans than its kept words can separate) show the reason instead. Tests read
:meth:`SpanCorruptionExplorer.current` and :attr:`SpanCorruptionExplorer.title`.
"""

from __future__ import annotations

from dataclasses import dataclass

import ipywidgets as widgets
import matplotlib
import torch
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from minilm.objectives.span_corruption import (
    noise_span_counts,
    random_spans_helper,
    random_spans_noise_mask,
    span_corruption,
)

from ._figure import draw_token_rows, show, token_rows_height
from ._words import Words, word_ids

EOS = "</s>"
KEPT, END = "white", "lightgray"
SPAN_COLOURS = matplotlib.colormaps["tab10"].colors


def sentinel(i: int) -> str:
    return f"<extra_id_{i}>"


def t5_words(text: str) -> Words:
    """``text``'s words as ids after ``</s>`` (id 0) and as many sentinels as it has words (ids 1, 2, ...)."""
    n_words = len(word_ids(text, ()).ids)
    return word_ids(text, [EOS] + [sentinel(i) for i in range(n_words)])


@dataclass(frozen=True)
class SpanCorruptionView:
    """What a span-corruption figure shows."""

    original: list[str]  # the paragraph's words
    span_of: list[int | None]  # each word's corrupted span (0, 1, ...), None where it is kept
    inputs: list[str]  # the encoder's input: kept words, <extra_id_i> for span i, </s>
    targets: list[str]  # the decoder's target: <extra_id_i> then span i, ..., </s>
    n_noise: int  # corrupted tokens and spans, as noise_span_counts fixes them
    n_spans: int
    inputs_length: int  # random_spans_helper: raw tokens that fill inputs of inputs_length, and the targets then
    tokens_length: int
    targets_length: int


def _spans(noise: torch.Tensor) -> list[int | None]:
    """Each position's span index (the runs of True, counted from 0), None where False."""
    starts = noise & ~torch.cat([torch.tensor([False]), noise[:-1]])
    index = starts.long().cumsum(0) - 1
    return [int(i) if corrupted else None for i, corrupted in zip(index, noise, strict=True)]


def span_corruption_view(
    text: str,
    noise_density: float = 0.15,
    mean_noise_span_length: float = 3.0,
    seed: int = 0,
    inputs_length: int = 512,
) -> SpanCorruptionView:
    """T5's span corruption of ``text``'s words with a generator seeded by ``seed``, and the lengths for
    ``inputs_length``-token inputs."""
    words = t5_words(text)
    n_noise, n_spans = noise_span_counts(len(words.ids), noise_density, mean_noise_span_length)
    noise = random_spans_noise_mask(
        len(words.ids), noise_density, mean_noise_span_length, torch.Generator().manual_seed(seed)
    )
    sentinels = [words.id(sentinel(i)) for i in range(len(words.ids))]
    inputs, targets = span_corruption(words.ids, sentinels, noise_mask=noise, eos_id=words.id(EOS))
    tokens_length, targets_length = random_spans_helper(inputs_length, noise_density, mean_noise_span_length)
    return SpanCorruptionView(
        original=words.label(words.ids),
        span_of=_spans(noise),
        inputs=words.label(inputs),
        targets=words.label(targets),
        n_noise=n_noise,
        n_spans=n_spans,
        inputs_length=inputs_length,
        tokens_length=tokens_length,
        targets_length=targets_length,
    )


def _span_colour(span: int | None) -> str | tuple:
    return KEPT if span is None else SPAN_COLOURS[span % len(SPAN_COLOURS)]


def _sentinel_index(token: str) -> int | None:
    return int(token[len("<extra_id_") : -1]) if token.startswith("<extra_id_") else None


def input_colours(tokens: list[str]) -> list:
    """A sentinel in its span's colour, </s> grey, a kept word white."""
    return [END if t == EOS else _span_colour(_sentinel_index(t)) for t in tokens]


def target_colours(tokens: list[str]) -> list:
    """Each sentinel and the words after it (its span) in the span's colour, </s> grey."""
    colours, span = [], None
    for token in tokens:
        span = _sentinel_index(token) if _sentinel_index(token) is not None else span
        colours.append(END if token == EOS else _span_colour(span))
    return colours


def _draw(ax: Axes, view: SpanCorruptionView, noise_density: float, mean: float, per_row: int) -> None:
    rows = [
        ("original", view.original, [_span_colour(span) for span in view.span_of]),
        ("input (encoder)", view.inputs, input_colours(view.inputs)),
        ("target (decoder)", view.targets, target_colours(view.targets)),
    ]
    draw_token_rows(ax, rows, per_row)
    ax.set_title(
        f"density {noise_density:.2f}, mean span {mean:g}: {view.n_noise} of {len(view.original)} tokens in "
        f"{view.n_spans} spans; {view.inputs_length}-token inputs take {view.tokens_length} raw tokens, "
        f"targets {view.targets_length}",
        fontsize=9,
    )


def plot_span_corruption(
    ax: Axes,
    text: str,
    noise_density: float = 0.15,
    mean_noise_span_length: float = 3.0,
    seed: int = 0,
    inputs_length: int = 512,
    per_row: int = 12,
) -> SpanCorruptionView:
    """Draw on ``ax`` the original words, the input and the target for fixed settings. Returns what is drawn."""
    view = span_corruption_view(text, noise_density, mean_noise_span_length, seed, inputs_length)
    _draw(ax, view, noise_density, mean_noise_span_length, per_row)
    return view


class SpanCorruptionExplorer(widgets.VBox):
    """``density`` and ``span`` (``FloatSlider``s) and ``seed`` (``IntSlider``) over one text; ``image`` shows it,
    ``figure`` and ``axes`` are what it is drawn on."""

    def __init__(
        self,
        text: str,
        noise_density: float = 0.15,
        mean_noise_span_length: float = 3.0,
        seed: int = 0,
        inputs_length: int = 512,
        per_row: int = 12,
        size: tuple[float, float] | None = None,
    ):
        self.text, self.inputs_length, self.per_row = text, inputs_length, per_row
        view = span_corruption_view(text, noise_density, mean_noise_span_length, seed, inputs_length)  # bad: named
        self.density = widgets.FloatSlider(
            value=noise_density, min=0.01, max=0.9, step=0.01, description="noise density"
        )
        self.span = widgets.FloatSlider(
            value=mean_noise_span_length, min=1.0, max=max(10.0, mean_noise_span_length), step=0.5,
            description="mean span length",
        )  # fmt: skip
        self.seed = widgets.IntSlider(value=seed, min=0, max=max(99, seed), description="seed")
        for control in (self.density, self.span, self.seed):
            control.continuous_update = False
            control.style.description_width = "initial"
        n = len(view.original)
        self.figure = Figure(figsize=size or (per_row * 0.95, token_rows_height([n, n + 1, n + 1], per_row)))
        self.axes = self.figure.add_subplot()
        self.image = widgets.Image(format="png")
        super().__init__([widgets.HBox([self.density, self.span, self.seed]), self.image])
        for control in (self.density, self.span, self.seed):
            control.observe(self._draw, names="value")
        self._draw()

    def settings(self) -> dict:
        """The settings the controls stand for, as :func:`span_corruption_view` takes them."""
        return dict(noise_density=self.density.value, mean_noise_span_length=self.span.value, seed=self.seed.value)

    def _draw(self, change=None) -> None:
        self.axes.clear()
        try:
            self._shown = plot_span_corruption(
                self.axes, self.text, **self.settings(), inputs_length=self.inputs_length, per_row=self.per_row
            )
        except ValueError as error:  # e.g. more spans than the kept words can separate: say so, show nothing
            self._shown = None
            self.axes.axis("off")
            self.axes.set_title(str(error), fontsize=9, wrap=True)
        show(self.figure, self.image)

    def current(self) -> SpanCorruptionView | None:
        """What is on show: the original, the input, the target and the lengths (None when the settings cannot
        corrupt this text; the title says why)."""
        return self._shown

    @property
    def title(self) -> str:
        """The title on show: the settings, the counts and random_spans_helper's lengths."""
        return self.axes.get_title()


def span_corruption_explorer(
    text: str,
    noise_density: float = 0.15,
    mean_noise_span_length: float = 3.0,
    seed: int = 0,
    inputs_length: int = 512,
    per_row: int = 12,
    size: tuple[float, float] | None = None,
) -> SpanCorruptionExplorer:
    """A :class:`SpanCorruptionExplorer` over ``text``'s words, starting from T5's 15% and spans of 3. Put its cell
    under ``# NBVAL_IGNORE_OUTPUT`` and a :func:`plot_span_corruption` beside it."""
    return SpanCorruptionExplorer(text, noise_density, mean_noise_span_length, seed, inputs_length, per_row, size)
