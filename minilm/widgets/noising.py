"""The noising explorer: BART's noising functions on a paragraph, one after another, and what the decoder must write.

    text = "The cat sat on the mat . It was warm there . Then a dog came ."
    explorer = noising_explorer(text)                             # BART's: infilling + permutation, 30%, λ = 3
    explorer                                                      # its cell under # NBVAL_IGNORE_OUTPUT
    explorer.noises["deletion"].value = True; explorer.current().noised   # move a control, read what is shown
    plot_noising(ax, text, noises=("masking",), mask_ratio=0.15, seed=0)  # the static figure

Everything shown comes from :mod:`minilm.objectives.denoising`, the functions pretraining runs, on the paragraph's
words between ``<s>`` and ``</s>`` (ids from :mod:`._words`; "." is the full stop that sentence permutation cuts
at): :func:`add_noise` applies one noise at a time, in its own order (permutation, masking, deletion, infilling,
rotation) and with one generator seeded by ``seed``, so the rows show the document after each noise, and the last
one is the encoder's input x̃ that :func:`denoising_example` gives for the same settings. The target is the whole
original document: BART reconstructs all of it, not only the corrupted tokens.

Controls: one ``Checkbox`` per noise (``noises[name]``), ``ratio`` (the mask ratio of masking, deletion and
infilling: 30%), ``lam`` (infilling's Poisson λ: 3) and ``seed``. Tests read :meth:`NoisingExplorer.current` and
:attr:`NoisingExplorer.title`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import ipywidgets as widgets
import torch
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from minilm.objectives.denoising import NOISES, DenoisingConfig, add_noise, parse_noise

from ._figure import draw_token_rows, show, token_rows_height
from ._words import Words, word_ids

BOS, EOS, MASK, FULL_STOP = "<s>", "</s>", "<mask>", "."
COLOURS = {MASK: "tab:blue", BOS: "lightgray", EOS: "lightgray"}  # any other token: white
BART_NOISES = ("infilling", "permutation")


def bart_words(text: str) -> Words:
    """``text``'s words as ids after ``<s>``, ``</s>`` and ``<mask>`` (ids 0, 1, 2)."""
    return word_ids(text, [BOS, EOS, MASK])


@dataclass(frozen=True)
class NoisingView:
    """What a noising figure shows."""

    original: list[str]  # <s> words </s>
    steps: list[tuple[str, list[str]]]  # each noise applied, in add_noise's order, and the document after it
    target: list[str]  # what the decoder writes: the whole original

    @property
    def noised(self) -> list[str]:
        """x̃, the encoder's input: the document after the last noise (the original without any)."""
        return self.steps[-1][1] if self.steps else self.original


def noise_settings(words: Words, config: DenoisingConfig) -> dict:
    """The token ids :func:`add_noise` needs for ``words``: mask, bos, eos, the full stop (if the text has one) and
    the vocabulary (the text's words: random replacements are words of the text)."""
    stop = words.id(FULL_STOP)
    return dict(
        mask_id=words.id(MASK),
        bos_id=words.id(BOS),
        eos_id=words.id(EOS),
        sentence_end_ids=() if stop is None else (stop,),
        vocab_size=len(words.labels),
        special_ids=(words.id(BOS), words.id(EOS), words.id(MASK)),
    )


def document(words: Words) -> torch.Tensor:
    """``<s> words </s>`` (T + 2,)."""
    return torch.cat([torch.tensor([words.id(BOS)]), words.ids, torch.tensor([words.id(EOS)])])


def noising_view(
    text: str,
    noises: str | Sequence[str] = BART_NOISES,
    mask_ratio: float = 0.3,
    poisson_lambda: float = 3.0,
    seed: int = 0,
    permute_ratio: float = 1.0,
    rotate_prob: float = 1.0,
) -> NoisingView:
    """``noises`` applied to ``text``'s document one at a time, in :func:`add_noise`'s order, with one generator seeded
    by ``seed``: each step is :func:`add_noise` with that noise alone, so together they are add_noise with all."""
    config = DenoisingConfig(noises, mask_ratio, poisson_lambda, permute_ratio, rotate_prob)
    words = bart_words(text)
    ids = document(words)
    generator = torch.Generator().manual_seed(seed)
    settings = noise_settings(words, config)
    steps = []
    for name in (name for name in NOISES if name in config.noises):
        ids = add_noise(ids, DenoisingConfig((name,), mask_ratio, poisson_lambda, permute_ratio, rotate_prob),
                        generator, **settings)  # fmt: skip
        steps.append((name, words.label(ids)))
    original = words.label(document(words))
    return NoisingView(original=original, steps=steps, target=list(original))


def _colours(tokens: list[str]) -> list[str]:
    return [COLOURS.get(token, "white") for token in tokens]


def _draw(ax: Axes, view: NoisingView, mask_ratio: float, poisson_lambda: float, seed: int, per_row: int) -> None:
    rows = [("original", view.original, _colours(view.original))]
    rows += [(f"after {name}", tokens, _colours(tokens)) for name, tokens in view.steps]
    rows += [("target (decoder): the original", view.target, _colours(view.target))]
    draw_token_rows(ax, rows, per_row)
    names = "+".join(name for name, _ in view.steps) or "no noise"
    ax.set_title(
        f"{names}, mask ratio {mask_ratio:.2f}, λ = {poisson_lambda:g}, seed {seed}: {len(view.original)} tokens "
        f"-> {len(view.noised)} for the encoder, {view.noised.count(MASK)} {MASK}",
        fontsize=9,
    )


def plot_noising(
    ax: Axes,
    text: str,
    noises: str | Sequence[str] = BART_NOISES,
    mask_ratio: float = 0.3,
    poisson_lambda: float = 3.0,
    seed: int = 0,
    per_row: int = 12,
) -> NoisingView:
    """Draw on ``ax`` the document, after each noise, and the target, for fixed settings. Returns what is drawn."""
    view = noising_view(text, noises, mask_ratio, poisson_lambda, seed)
    _draw(ax, view, mask_ratio, poisson_lambda, seed, per_row)
    return view


class NoisingExplorer(widgets.VBox):
    """``noises`` (a ``Checkbox`` per noise, by name), ``ratio`` and ``lam`` (``FloatSlider``s) and ``seed``
    (``IntSlider``) over one text; ``image`` shows it, ``figure`` and ``axes`` are what it is drawn on."""

    def __init__(
        self,
        text: str,
        noises: str | Sequence[str] = BART_NOISES,
        mask_ratio: float = 0.3,
        poisson_lambda: float = 3.0,
        seed: int = 0,
        per_row: int = 12,
        size: tuple[float, float] | None = None,
    ):
        self.text, self.per_row = text, per_row
        chosen = parse_noise(noises) if isinstance(noises, str) else tuple(noises)
        view = noising_view(text, chosen, mask_ratio, poisson_lambda, seed)  # bad settings fail here, named
        self.noises = {name: widgets.Checkbox(value=name in chosen, description=name, indent=False) for name in NOISES}
        self.ratio = widgets.FloatSlider(value=mask_ratio, min=0.0, max=1.0, step=0.05, description="mask ratio")
        self.lam = widgets.FloatSlider(
            value=poisson_lambda, min=0.5, max=max(10.0, poisson_lambda), step=0.5, description="λ"
        )
        self.seed = widgets.IntSlider(value=seed, min=0, max=max(99, seed), description="seed")
        sliders = (self.ratio, self.lam, self.seed)
        for control in sliders:
            control.continuous_update = False
            control.style.description_width = "initial"
        n = len(view.original)
        self.figure = Figure(figsize=size or (per_row * 0.95, token_rows_height([n] * (len(NOISES) + 2), per_row)))
        self.axes = self.figure.add_subplot()
        self.image = widgets.Image(format="png")
        super().__init__([widgets.HBox(list(self.noises.values())), widgets.HBox(list(sliders)), self.image])
        for control in (*self.noises.values(), *sliders):
            control.observe(self._draw, names="value")
        self._draw()

    def settings(self) -> dict:
        """The settings the controls stand for, as :func:`noising_view` takes them."""
        return dict(
            noises=tuple(name for name, box in self.noises.items() if box.value),
            mask_ratio=self.ratio.value,
            poisson_lambda=self.lam.value,
            seed=self.seed.value,
        )

    def _draw(self, change=None) -> None:
        self.axes.clear()
        try:
            self._shown = plot_noising(self.axes, self.text, **self.settings(), per_row=self.per_row)
        except ValueError as error:  # e.g. permutation of a text without a full stop: say so, show nothing
            self._shown = None
            self.axes.axis("off")
            self.axes.set_title(str(error), fontsize=9, wrap=True)
        show(self.figure, self.image)

    def current(self) -> NoisingView | None:
        """What is on show: the document after each noise and the target (None when the settings cannot noise this
        text; the title says why)."""
        return self._shown

    @property
    def title(self) -> str:
        """The title on show: the noises, their settings and the lengths."""
        return self.axes.get_title()


def noising_explorer(
    text: str,
    noises: str | Sequence[str] = BART_NOISES,
    mask_ratio: float = 0.3,
    poisson_lambda: float = 3.0,
    seed: int = 0,
    per_row: int = 12,
    size: tuple[float, float] | None = None,
) -> NoisingExplorer:
    """A :class:`NoisingExplorer` over ``text``'s words, starting from BART's noises (text infilling and sentence
    permutation, 30%, λ = 3). Put its cell under ``# NBVAL_IGNORE_OUTPUT`` and a :func:`plot_noising` beside it."""
    return NoisingExplorer(text, noises, mask_ratio, poisson_lambda, seed, per_row, size)
