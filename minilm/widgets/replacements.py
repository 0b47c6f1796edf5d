"""The replaced-token explorer: ELECTRA's two networks on one sentence, under a masking rate, the generator's
sampling temperature and a seed.

    electra = course_checkpoint("electra")                     # the pair (.generator, .discriminator) and tokenizer
    explorer = replacement_explorer(electra.model, electra.tokenizer, "she opened the door and looked out .")
    explorer                                                   # its cell under # NBVAL_IGNORE_OUTPUT
    explorer.temperature.value = 2.0; explorer.current().replaced      # move a control, read what is shown
    plot_replacements(ax, electra.model, electra.tokenizer, text, mask_prob=0.15, temperature=1.0, seed=0)

Everything shown comes from the functions pretraining runs, with one generator seeded by ``seed``: ELECTRA's masking
(:meth:`minilm.recipes.electra.GeneratorConfig.mask_config`: ``mask_prob`` of the tokens, 85% of them shown as
[MASK] and 15% as they are), the generator's samples at the masked positions
(:func:`minilm.objectives.rtd.sample_replacements` at ``temperature``), x_corrupt and the labels
(:func:`minilm.objectives.rtd.replace_tokens`: a sample equal to the original is not a replacement), and the
discriminator's P(replaced) = sigmoid of its ``rtd_logits`` at every token, which is 1 − D(x_corrupt, t) in the
paper's notation. Four rows: the sentence, what the generator reads, what the discriminator reads, and
P(replaced) under each token, shaded from white (0) to red (1).

Controls: ``rate`` (the masking rate, 15%), ``temperature`` (1: the generator's own distribution; lower draws its
likelier guesses, higher its unlikely ones) and ``seed``. Tests read :meth:`ReplacementExplorer.current` and
:attr:`ReplacementExplorer.title`.
"""

from __future__ import annotations

from dataclasses import dataclass

import ipywidgets as widgets
import matplotlib
import torch
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from minilm.objectives.labels import IGNORE_INDEX
from minilm.objectives.mlm import masked_positions
from minilm.objectives.rtd import replace_tokens, sample_replacements
from minilm.recipes.electra import GeneratorConfig

from ._figure import category_legend, draw_token_rows, show, token_rows_height
from .masking import encode_sentence

MASKED, LEFT, REPLACED, RESAMPLED = "[MASK]", "selected, left as it is", "replaced", "sampled the original"
COLOURS = {MASKED: "tab:blue", LEFT: "lightskyblue", REPLACED: "tab:orange", RESAMPLED: "tab:green"}
P_COLOURS = matplotlib.colormaps["Reds"]


@dataclass(frozen=True)
class ReplacementView:
    """What a replaced-token figure shows, one entry per token of the sentence ([CLS] and [SEP] included)."""

    original: list[str]
    generator_input: list[str]  # [MASK] at 85% of the selected positions, the token itself at the other 15%
    corrupted: list[str]  # x_corrupt: what the discriminator reads
    masked: list[bool]  # selected by the masking (the generator samples there)
    replaced: list[bool]  # x_corrupt differs from the original: the discriminator's label 1
    p_replaced: list[float]  # the discriminator's P(replaced)

    def fate(self, t: int) -> str | None:
        """What happened at token ``t``: replaced, the original sampled back, or None (not selected)."""
        if not self.masked[t]:
            return None
        return REPLACED if self.replaced[t] else RESAMPLED


@torch.no_grad()
def replacement_view(
    pair, tokenizer, text: str, mask_prob: float = 0.15, temperature: float = 1.0, seed: int = 0
) -> ReplacementView:
    """ELECTRA's corruption of ``text`` by ``pair``'s generator and its discriminator's reading of the result (both
    in eval mode, as the pair is left), with a generator seeded by ``seed`` for the masks and the samples."""
    settings = GeneratorConfig(mask_prob=mask_prob, temperature=temperature)
    settings.validate()  # a rate outside (0, 1] or a temperature <= 0: one clear message
    sentence = encode_sentence(tokenizer, text)
    rng = torch.Generator().manual_seed(seed)
    batch = {"input_ids": sentence.ids[None], "special_tokens_mask": sentence.special[None]}
    batch = settings.mask_config(tokenizer)(batch, rng)  # input_ids: the generator's input; labels: the originals
    ids, labels = batch["input_ids"], batch["labels"]  # (1, T) each
    mask = torch.ones_like(ids)
    was_training = pair.training
    pair.eval()
    try:
        hidden = pair.generator.features(ids, mask).last_hidden_state  # (1, T, H_G)
        logits = pair.generator.mlm_logits(hidden, masked_positions(labels))  # (|M|, V)
        samples = sample_replacements(logits, temperature, generator=rng)  # x̂ ~ p_G(· | x_masked)
        corrupted, replaced = replace_tokens(ids, labels, samples)  # (1, T) each
        states = pair.discriminator.features(corrupted, mask).last_hidden_state  # (1, T, H)
        p = torch.sigmoid(pair.discriminator.rtd_logits(states))[0]  # (T,) P(replaced) = 1 - D
    finally:
        pair.train(was_training)
    label = sentence.label
    return ReplacementView(
        original=[label(int(i)) for i in sentence.ids],
        generator_input=[label(int(i)) for i in ids[0]],
        corrupted=[label(int(i)) for i in corrupted[0]],
        masked=(labels[0] != IGNORE_INDEX).tolist(),
        replaced=replaced[0].tolist(),
        p_replaced=p.tolist(),
    )


def summary(view: ReplacementView) -> str:
    """The counts and the discriminator's mean P(replaced) at the replaced tokens and at the others."""
    n_masked, n_replaced = sum(view.masked), sum(view.replaced)
    at = [p for p, r in zip(view.p_replaced, view.replaced, strict=True) if r]
    others = [p for p, r in zip(view.p_replaced, view.replaced, strict=True) if not r]
    mean = lambda ps: f"{sum(ps) / len(ps):.2f}" if ps else "-"  # noqa: E731
    return (
        f"{n_masked} of {len(view.original)} tokens selected, {n_replaced} replaced; mean P(replaced) at the "
        f"replaced {mean(at)}, at the others {mean(others)}"
    )


def _draw(ax: Axes, view: ReplacementView, mask_prob: float, temperature: float, per_row: int) -> None:
    fates = [view.fate(t) for t in range(len(view.original))]
    generator_colours = [
        "white" if not m else (COLOURS[MASKED] if shown != original else COLOURS[LEFT])
        for m, shown, original in zip(view.masked, view.generator_input, view.original, strict=True)
    ]
    rows = [
        ("original", view.original, ["white"] * len(view.original)),
        ("generator reads", view.generator_input, generator_colours),
        ("discriminator reads", view.corrupted, [COLOURS[f] if f else "white" for f in fates]),
        ("P(replaced)", [f"{p:.2f}" for p in view.p_replaced], [P_COLOURS(0.85 * p) for p in view.p_replaced]),
    ]
    draw_token_rows(ax, rows, per_row)
    drawn = {f for f in fates if f} | {
        MASKED if c == COLOURS[MASKED] else LEFT for c in generator_colours if c != "white"
    }
    bottom, top = ax.get_ylim()
    ax.set_ylim(bottom - 0.9, top)  # a line below the rows for the legend
    category_legend(ax, COLOURS, drawn, loc="lower center", ncols=4, frameon=False)
    ax.set_title(f"masking {mask_prob:.0%}, temperature {temperature:g}: {summary(view)}", fontsize=9)


def plot_replacements(
    ax: Axes,
    pair,
    tokenizer,
    text: str,
    mask_prob: float = 0.15,
    temperature: float = 1.0,
    seed: int = 0,
    per_row: int = 12,
) -> ReplacementView:
    """Draw on ``ax`` the four rows for fixed settings. Returns what is drawn."""
    view = replacement_view(pair, tokenizer, text, mask_prob, temperature, seed)
    _draw(ax, view, mask_prob, temperature, per_row)
    return view


class ReplacementExplorer(widgets.VBox):
    """``rate`` and ``temperature`` (``FloatSlider``s) and ``seed`` (``IntSlider``) over one sentence; ``image``
    shows it, ``figure`` and ``axes`` are what it is drawn on."""

    def __init__(
        self,
        pair,
        tokenizer,
        text: str,
        mask_prob: float = 0.15,
        temperature: float = 1.0,
        seed: int = 0,
        per_row: int = 12,
        size: tuple[float, float] | None = None,
    ):
        self.pair, self.tokenizer, self.text, self.per_row = pair, tokenizer, text, per_row
        GeneratorConfig(mask_prob=mask_prob, temperature=temperature).validate()  # bad settings named, not clamped
        self.rate = widgets.FloatSlider(value=mask_prob, min=0.05, max=1.0, step=0.05, description="masking rate")
        self.temperature = widgets.FloatSlider(
            value=temperature, min=0.1, max=max(3.0, temperature), step=0.1, description="temperature"
        )
        self.seed = widgets.IntSlider(value=seed, min=0, max=max(99, seed), description="seed")
        for control in (self.rate, self.temperature, self.seed):
            control.continuous_update = False
            control.style.description_width = "initial"
        n = len(encode_sentence(tokenizer, text).ids)  # the figure's size; the first _draw names bad settings
        self.figure = Figure(figsize=size or (per_row * 0.95, token_rows_height([n] * 4, per_row) + 0.6))
        self.axes = self.figure.add_subplot()
        self.image = widgets.Image(format="png")
        super().__init__([widgets.HBox([self.rate, self.temperature, self.seed]), self.image])
        for control in (self.rate, self.temperature, self.seed):
            control.observe(self._draw, names="value")
        self._draw()

    def settings(self) -> dict:
        """The settings the controls stand for, as :func:`replacement_view` takes them."""
        return dict(mask_prob=self.rate.value, temperature=self.temperature.value, seed=self.seed.value)

    def _draw(self, change=None) -> None:
        self.axes.clear()
        settings = self.settings()
        self._shown = plot_replacements(
            self.axes, self.pair, self.tokenizer, self.text, **settings, per_row=self.per_row
        )
        show(self.figure, self.image)

    def current(self) -> ReplacementView:
        """What is on show: the four rows' tokens, the masks, the labels and P(replaced)."""
        return self._shown

    @property
    def title(self) -> str:
        """The title on show: the settings, the counts and the mean P(replaced) at the replaced and the others."""
        return self.axes.get_title()


def replacement_explorer(
    pair,
    tokenizer,
    text: str,
    mask_prob: float = 0.15,
    temperature: float = 1.0,
    seed: int = 0,
    per_row: int = 12,
    size: tuple[float, float] | None = None,
) -> ReplacementExplorer:
    """A :class:`ReplacementExplorer` of ``pair`` (an ``ElectraPretraining``: the course ELECTRA's
    ``course_checkpoint("electra").model``) on ``text``, starting from ELECTRA's 15% and temperature 1. Put its cell
    under ``# NBVAL_IGNORE_OUTPUT`` and a :func:`plot_replacements` beside it."""
    return ReplacementExplorer(pair, tokenizer, text, mask_prob, temperature, seed, per_row, size)
