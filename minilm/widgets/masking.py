"""The masking explorer: what BERT sees of a sentence, under a masking rate, the 80/10/10 split and a seed.

    explorer = masking_explorer(tokenizer, "The cat sat on the mat.")   # a tokenizer with a [MASK] token, and a text
    explorer                                                             # its cell under # NBVAL_IGNORE_OUTPUT
    explorer.rate.value = 0.5; explorer.current().fates                  # move a control, read what is shown
    plot_masking(ax, tokenizer, "The cat sat on the mat.", mask_prob=0.15, seed=0)   # the static figure
    masking_explorer(ids, vocab=labels, mask_id=4, special_tokens_mask=special)      # ids (T,) and id -> label list

The positions and their corruption come from :func:`minilm.objectives.mlm.mask_tokens`, the function pretraining
runs, with a generator seeded by ``seed``. Each token is drawn as what the model sees, in a box coloured by its
fate: replaced by [MASK], by a random token, kept as it is (selected all the same: it is scored), not selected, or
special ([CLS], [SEP]: never selected); the original is written under each replaced one. A random replacement that
happens to draw the original token shows as kept: the model sees the same thing.

Controls: ``rate`` (the masking rate, 15%), ``mask``, ``random`` and ``keep`` (the split of the selected tokens,
80/10/10: moving one rescales the other two so that the three sum to 1) and ``seed``. Tests read
:meth:`MaskingExplorer.current` and :attr:`MaskingExplorer.title`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

import ipywidgets as widgets
import torch
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from minilm.objectives.labels import IGNORE_INDEX
from minilm.objectives.mlm import mask_tokens

from ._figure import category_legend, show

MASKED, RANDOM, KEPT, UNSELECTED, SPECIAL = "[MASK]", "random token", "kept (scored)", "not selected", "special"
COLOURS = {MASKED: "tab:blue", RANDOM: "tab:orange", KEPT: "tab:green", UNSELECTED: "white", SPECIAL: "lightgray"}
SELECTED = (MASKED, RANDOM, KEPT)


@dataclass(frozen=True)
class Sentence:
    """One sentence as :func:`mask_tokens` needs it, and the labels to draw its ids with."""

    ids: torch.Tensor  # (T,) long
    special: torch.Tensor  # (T,) bool: never selected
    mask_id: int
    vocab_size: int
    special_ids: tuple[int, ...]  # never drawn as random replacements
    label: Callable[[int], str]


def encode_sentence(
    tokenizer_or_ids,
    text: str | None = None,
    *,
    vocab: Sequence[str] | None = None,
    special_tokens_mask=None,
    mask_id: int | None = None,
    vocab_size: int | None = None,
    special_ids: Sequence[int] = (),
) -> Sentence:
    """A :class:`Sentence` from a tokenizer and a text (its [MASK], vocabulary and special tokens), or from ids (T,)
    with ``mask_id``, ``vocab`` (one label per id; its length is the vocabulary size unless ``vocab_size`` is given),
    and ``special_tokens_mask`` (T,) (default: no special token)."""
    if hasattr(tokenizer_or_ids, "id_to_token"):
        tokenizer = tokenizer_or_ids
        if text is None:
            raise ValueError("give the text to mask: masking_explorer(tokenizer, 'The cat sat on the mat.')")
        if tokenizer.mask_id is None:
            raise ValueError(f"the {tokenizer.family} tokenizer has no mask token: use a bert, roberta or albert one")
        encoding = tokenizer(text, return_tensors="pt")
        return Sentence(
            ids=encoding.input_ids[0],
            special=encoding.special_tokens_mask[0].bool(),
            mask_id=tokenizer.mask_id,
            vocab_size=tokenizer.vocab_size,
            special_ids=tuple(tokenizer.special_ids),
            label=lambda i: tokenizer.id_to_token(i) or f"#{i}",
        )
    ids = torch.as_tensor(tokenizer_or_ids, dtype=torch.long)
    if ids.dim() != 1:
        raise ValueError(f"ids must be one sentence (T,), got shape {tuple(ids.shape)}")
    if mask_id is None or (vocab is None and vocab_size is None):
        raise ValueError("with ids instead of a tokenizer, give mask_id and vocab (one label per id) or vocab_size")
    vocab_size = len(vocab) if vocab_size is None else vocab_size
    special = torch.zeros_like(ids, dtype=torch.bool) if special_tokens_mask is None else special_tokens_mask
    special = torch.as_tensor(special).bool()
    if special.shape != ids.shape:
        raise ValueError(f"special_tokens_mask {tuple(special.shape)} must have the shape of ids {tuple(ids.shape)}")
    label = (lambda i: str(vocab[i])) if vocab is not None else (lambda i: f"#{i}")
    return Sentence(ids, special, mask_id, vocab_size, tuple(special_ids), label)


@dataclass(frozen=True)
class MaskingView:
    """What a masking figure shows, position by position."""

    original: list[str]  # the sentence's tokens
    shown: list[str]  # what the model sees
    fates: list[str]  # MASKED, RANDOM, KEPT, UNSELECTED or SPECIAL

    @property
    def n_selected(self) -> int:
        """Positions in M, the ones scored: [MASK], random and kept alike."""
        return sum(fate in SELECTED for fate in self.fates)


def masking_view(
    sentence: Sentence, mask_prob: float = 0.15, replace_prob: float = 0.8, random_prob: float = 0.1, seed: int = 0
) -> MaskingView:
    """``mask_tokens`` on one sentence with a generator seeded by ``seed``, and each position's fate."""
    corrupted, labels = mask_tokens(
        sentence.ids[None],
        sentence.special[None],
        sentence.mask_id,
        sentence.vocab_size,
        mask_prob,
        replace_prob,
        random_prob,
        generator=torch.Generator().manual_seed(seed),
        special_ids=sentence.special_ids,
    )
    fates = []
    for original, shown, label, special in zip(sentence.ids, corrupted[0], labels[0], sentence.special, strict=True):
        if label == IGNORE_INDEX:
            fates.append(SPECIAL if special else UNSELECTED)
        else:
            fates.append(MASKED if shown == sentence.mask_id else (KEPT if shown == original else RANDOM))
    return MaskingView(
        original=[sentence.label(i) for i in sentence.ids.tolist()],
        shown=[sentence.label(i) for i in corrupted[0].tolist()],
        fates=fates,
    )


def _setting(mask_prob: float, replace_prob: float, random_prob: float, seed: int) -> str:
    keep = max(1.0 - replace_prob - random_prob, 0.0)
    return f"rate {mask_prob:.2f}, [MASK]/random/keep {replace_prob:.2f}/{random_prob:.2f}/{keep:.2f}, seed {seed}"


def plot_masking(
    ax: Axes,
    tokenizer_or_ids,
    text: str | None = None,
    mask_prob: float = 0.15,
    replace_prob: float = 0.8,
    random_prob: float = 0.1,
    seed: int = 0,
    per_row: int = 8,
    **ids_options,
) -> MaskingView:
    """Draw on ``ax`` what BERT sees of ``text`` (a tokenizer's, or ids with the options of :func:`encode_sentence`) for
    fixed settings: ``per_row`` tokens a row, each in a box coloured by its fate. Returns what is drawn."""
    given = (
        tokenizer_or_ids
        if isinstance(tokenizer_or_ids, Sentence)
        else encode_sentence(tokenizer_or_ids, text, **ids_options)
    )
    view = masking_view(given, mask_prob, replace_prob, random_prob, seed)
    rows = -(-len(view.shown) // per_row)
    for i, (shown, original, fate) in enumerate(zip(view.shown, view.original, view.fates, strict=True)):
        x, y = i % per_row + 0.5, -(i // per_row)
        box = dict(boxstyle="round,pad=0.3", facecolor=COLOURS[fate], edgecolor="gray")
        ax.text(x, y, shown, ha="center", va="center", fontsize=9, bbox=box, gid=f"token {i}")
        if fate in (MASKED, RANDOM):
            ax.text(x, y - 0.38, original, ha="center", va="center", fontsize=7, color="dimgray", gid=f"original {i}")
    ax.set_xlim(0, per_row)
    ax.set_ylim(-rows + 0.4, 0.6)
    ax.axis("off")
    selectable = sum(fate != SPECIAL for fate in view.fates)
    ax.set_title(
        f"{_setting(mask_prob, replace_prob, random_prob, seed)}: {view.n_selected} of {selectable} tokens selected",
        fontsize=9,
    )
    category_legend(ax, COLOURS, view.fates, loc="upper center", bbox_to_anchor=(0.5, 0.0), ncol=len(COLOURS))
    return view


class MaskingExplorer(widgets.VBox):
    """``rate`` (``FloatSlider``), the split ``mask``, ``random``, ``keep`` (``FloatSlider``s that sum to 1) and
    ``seed`` (``IntSlider``) over one sentence; ``image`` shows it, ``figure`` and ``axes`` are what it is drawn on."""

    def __init__(
        self,
        sentence: Sentence,
        mask_prob: float = 0.15,
        replace_prob: float = 0.8,
        random_prob: float = 0.1,
        seed: int = 0,
        per_row: int = 8,
        size: tuple[float, float] | None = None,
    ):
        self.sentence, self.per_row = sentence, per_row
        masking_view(sentence, mask_prob, replace_prob, random_prob, seed)  # bad settings fail here, named
        keep = max(1.0 - replace_prob - random_prob, 0.0)
        self.rate = widgets.FloatSlider(value=mask_prob, min=0.0, max=1.0, step=0.01, description="masking rate")
        self.mask = widgets.FloatSlider(value=replace_prob, min=0.0, max=1.0, step=0.05, description="[MASK]")
        self.random = widgets.FloatSlider(value=random_prob, min=0.0, max=1.0, step=0.05, description="random")
        self.keep = widgets.FloatSlider(value=keep, min=0.0, max=1.0, step=0.05, description="keep")
        self.seed = widgets.IntSlider(value=seed, min=0, max=max(99, seed), description="seed")
        self.split = (self.mask, self.random, self.keep)
        for control in (self.rate, *self.split, self.seed):
            control.continuous_update = False
            control.style.description_width = "initial"
        rows = -(-len(sentence.ids) // per_row)
        self.figure = Figure(figsize=size or (per_row * 1.1, 0.7 * rows + 1.2))
        self.axes = self.figure.add_subplot()
        self.image = widgets.Image(format="png")
        self._balancing = False
        super().__init__([widgets.HBox([self.rate, self.seed]), widgets.HBox(list(self.split)), self.image])
        self.rate.observe(self._draw, names="value")
        self.seed.observe(self._draw, names="value")
        for control in self.split:
            control.observe(self._rebalance, names="value")
        self._draw()

    @contextmanager
    def _balance(self):
        self._balancing = True
        try:
            yield
        finally:
            self._balancing = False

    def _rebalance(self, change) -> None:
        """One part of the split moved: scale the other two to fill the rest (equal halves if both are 0)."""
        if self._balancing:
            return
        others = [control for control in self.split if control is not change["owner"]]
        rest, total = 1.0 - change["new"], sum(control.value for control in others)
        with self._balance():
            for control in others:
                control.value = rest * control.value / total if total > 0 else rest / 2
        self._draw()

    def settings(self) -> dict:
        """The settings the controls stand for, as :func:`minilm.objectives.mlm.mask_tokens` takes them (and seed)."""
        return dict(
            mask_prob=self.rate.value, replace_prob=self.mask.value, random_prob=self.random.value, seed=self.seed.value
        )

    def _draw(self, change=None) -> None:
        self.axes.clear()
        self._shown = plot_masking(self.axes, self.sentence, **self.settings(), per_row=self.per_row)
        show(self.figure, self.image)

    def current(self) -> MaskingView:
        """What is on show: each position's original token, what the model sees, and its fate."""
        return self._shown

    @property
    def title(self) -> str:
        """The title on show: the settings and how many tokens are selected."""
        return self.axes.get_title()


def masking_explorer(
    tokenizer_or_ids,
    text: str | None = None,
    mask_prob: float = 0.15,
    replace_prob: float = 0.8,
    random_prob: float = 0.1,
    seed: int = 0,
    per_row: int = 8,
    size: tuple[float, float] | None = None,
    **ids_options,
) -> MaskingExplorer:
    """A :class:`MaskingExplorer` over ``text`` encoded by a tokenizer (with a [MASK] token), or over ids (T,) with
    ``vocab``, ``mask_id``, ``special_tokens_mask``, ... (see :func:`encode_sentence`); the controls start at BERT's
    15% and 80/10/10 unless told otherwise. Put its cell under ``# NBVAL_IGNORE_OUTPUT`` and a :func:`plot_masking`
    beside it."""
    given = encode_sentence(tokenizer_or_ids, text, **ids_options)
    return MaskingExplorer(given, mask_prob, replace_prob, random_prob, seed, per_row, size)
