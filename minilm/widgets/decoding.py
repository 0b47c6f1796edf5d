"""The decoding explorer: what temperature, top-k and top-p leave of one next-token distribution.

    explorer = decoding_explorer(next_logits, tokenizer, n=20)   # logits (V,); a tokenizer, or one label per id
    explorer                                                      # its notebook cell under # NBVAL_IGNORE_OUTPUT
    explorer.top_p.value = 0.5; explorer.current().n_kept         # move a control, read what is shown
    plot_decoding(ax, next_logits, tokenizer, temperature=0.8, top_k=None, top_p=0.9, n=20)   # the static figure

Bars: the ``n`` most likely tokens' probabilities after temperature, softmax(z / T), most likely first, coloured by
what the filters do with them: kept, removed by top-k, or removed by top-p (kept by top-k, which applies first). The
filtering is :func:`minilm.generation.filter_logits`, the very function sampling draws through. The title counts the
tokens kept in the whole vocabulary and their mass under softmax(z / T): a draw renormalises over them.

Top-p measures the mass of what top-k left (renormalised, as in sampling), so with both on the kept mass may be
below p.

Controls: ``temperature``, ``top_k`` (0: no top-k filter) and ``top_p`` (1: no nucleus filter). Like the attention
explorer it draws on a figure of its own and shows it as a PNG in an ``ipywidgets.Image``; tests read
:meth:`DecodingExplorer.current` and :attr:`DecodingExplorer.title`.
"""

from __future__ import annotations

from dataclasses import dataclass

import ipywidgets as widgets
import numpy as np
import torch
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from minilm.generation import filter_logits

from ._figure import category_legend, show

KEPT, BY_TOP_K, BY_TOP_P = "kept", "removed by top-k", "removed by top-p"
COLOURS = {KEPT: "tab:green", BY_TOP_K: "lightgray", BY_TOP_P: "tab:orange"}


@dataclass(frozen=True)
class DecodingView:
    """What a decoding figure shows: the ``n`` most likely tokens, most likely first."""

    tokens: list[str]
    probs: np.ndarray  # (n,) softmax(z / T) of each
    fates: list[str]  # KEPT, BY_TOP_K or BY_TOP_P for each
    n_kept: int  # tokens kept in the whole vocabulary
    kept_mass: float  # their total probability under softmax(z / T)
    vocab_size: int

    @property
    def kept(self) -> np.ndarray:
        """(n,) bool: which of the shown tokens survive both filters."""
        return np.array([fate == KEPT for fate in self.fates])


def _labeller(vocab_or_tokens, vocab_size: int):
    """id -> label: a tokenizer's text for the id (``decode([i])`` quoted, so that a leading space shows, instead of
    byte-level BPE's raw "Ġ"; else ``id_to_token``), or a list with one label per logit."""
    if hasattr(vocab_or_tokens, "id_to_token"):
        tokenizer = vocab_or_tokens

        def label(i: int) -> str:
            text = tokenizer.decode([i]) if hasattr(tokenizer, "decode") else ""
            return repr(text) if text else tokenizer.id_to_token(i) or f"#{i}"  # an unknown id: by its number

        return label
    labels = list(vocab_or_tokens)
    if len(labels) != vocab_size:
        raise ValueError(
            f"{len(labels)} labels for {vocab_size} logits: pass one label per vocabulary id, or the tokenizer"
        )
    return lambda i: str(labels[i])


def _check_logits(logits) -> torch.Tensor:
    logits = torch.as_tensor(logits).detach().cpu().float()
    if logits.dim() != 1 or logits.numel() == 0:
        raise ValueError(
            f"logits must be one next-token distribution (V,), got shape {tuple(logits.shape)}: take a row, "
            "e.g. model(ids)[0, -1]"
        )
    return logits


def decoding_view(
    logits, vocab_or_tokens, temperature: float = 1.0, top_k: int | None = None, top_p: float | None = None, n=20
) -> DecodingView:
    """The ``n`` most likely tokens of logits (V,) after temperature, and what top-k and top-p do with them."""
    logits = _check_logits(logits)
    label = _labeller(vocab_or_tokens, logits.numel())
    probs = filter_logits(logits, temperature).softmax(-1)  # (V,) softmax(z / T)
    after_k = torch.isfinite(filter_logits(logits, temperature, top_k))  # (V,) kept by top-k
    kept = torch.isfinite(filter_logits(logits, temperature, top_k, top_p))  # (V,) kept by both
    order = torch.sort(probs, descending=True, stable=True).indices[:n]
    fates = [KEPT if kept[i] else (BY_TOP_P if after_k[i] else BY_TOP_K) for i in order.tolist()]
    return DecodingView(
        tokens=[label(i) for i in order.tolist()],
        probs=probs[order].numpy(),
        fates=fates,
        n_kept=int(kept.sum()),
        kept_mass=float(probs[kept].sum()),
        vocab_size=logits.numel(),
    )


def _setting(temperature: float, top_k: int | None, top_p: float | None) -> str:
    return f"T = {temperature:g}, top-k {top_k or 'off'}, top-p {'off' if top_p is None else f'{top_p:g}'}"


def plot_decoding(
    ax: Axes,
    logits,
    tokens,
    temperature: float = 1.0,
    top_k: int | None = None,
    top_p: float | None = None,
    n: int = 20,
) -> DecodingView:
    """Draw on ``ax`` the ``n`` most likely tokens of logits (V,) after ``temperature``, coloured by what ``top_k``
    and ``top_p`` (None: no filter) do with them; ``tokens``: a tokenizer or one label per id. Returns what is drawn."""
    view = decoding_view(logits, tokens, temperature, top_k, top_p, n)
    positions = np.arange(len(view.tokens))
    ax.bar(positions, view.probs, color=[COLOURS[fate] for fate in view.fates], edgecolor="gray", linewidth=0.5)
    ax.set_xticks(positions, view.tokens, rotation=90, fontsize=8)
    ax.set_ylabel("probability after temperature", fontsize=8)
    ax.set_ylim(0, max(float(view.probs.max()) * 1.1, 1e-3))
    ax.set_title(
        f"{_setting(temperature, top_k, top_p)}: {view.n_kept} of {view.vocab_size} tokens kept, "
        f"mass {view.kept_mass:.3f}",
        fontsize=9,
    )
    category_legend(ax, COLOURS, view.fates, loc="upper right")
    return view


class DecodingExplorer(widgets.VBox):
    """``temperature`` (``FloatSlider``), ``top_k`` (``IntSlider``, 0: off) and ``top_p`` (``FloatSlider``, 1: off)
    over one next-token distribution; ``image`` shows it, ``figure`` and ``axes`` are what it is drawn on."""

    def __init__(
        self,
        logits,
        vocab_or_tokens,
        temperature: float = 1.0,
        top_k: int | None = None,
        top_p: float | None = None,
        n: int = 20,
        size: tuple[float, float] = (7.0, 3.5),
    ):
        self.logits = _check_logits(logits)
        self.vocab, self.n = vocab_or_tokens, n
        decoding_view(self.logits, vocab_or_tokens, temperature, top_k, top_p, n)  # bad settings fail here, named
        V = self.logits.numel()
        self.temperature = widgets.FloatSlider(
            value=temperature, min=0.05, max=max(3.0, temperature), step=0.05, description="temperature"
        )
        self.top_k = widgets.IntSlider(value=top_k or 0, min=0, max=V, description="top-k (0: off)")
        self.top_p = widgets.FloatSlider(
            value=1.0 if top_p is None else top_p, min=0.01, max=1.0, step=0.01, description="top-p (1: off)"
        )
        controls = (self.temperature, self.top_k, self.top_p)
        for control in controls:
            control.continuous_update = False
            control.style.description_width = "initial"
        self.figure = Figure(figsize=size)
        self.axes = self.figure.add_subplot()
        self.image = widgets.Image(format="png")
        super().__init__([widgets.HBox(list(controls)), self.image])
        for control in controls:
            control.observe(self._draw, names="value")
        self._draw()

    def settings(self) -> dict:
        """The settings the controls stand for, as :func:`minilm.generation.sample_next` takes them."""
        top_p = self.top_p.value if self.top_p.value < 1 else None
        return dict(temperature=self.temperature.value, top_k=self.top_k.value or None, top_p=top_p)

    def _draw(self, change=None) -> None:
        self.axes.clear()
        self._shown = plot_decoding(self.axes, self.logits, self.vocab, **self.settings(), n=self.n)
        show(self.figure, self.image)

    def current(self) -> DecodingView:
        """What is on show: the tokens, their probabilities and fates, how many tokens are kept and their mass."""
        return self._shown

    @property
    def title(self) -> str:
        """The title on show: the settings, the number of tokens kept and their mass."""
        return self.axes.get_title()


def decoding_explorer(
    logits,
    vocab_or_tokens,
    temperature: float = 1.0,
    top_k: int | None = None,
    top_p: float | None = None,
    n: int = 20,
    size: tuple[float, float] = (7.0, 3.5),
) -> DecodingExplorer:
    """A :class:`DecodingExplorer` over next-token logits (V,) (e.g. ``model(ids)[0, -1]``); ``vocab_or_tokens``: a
    tokenizer (its ``id_to_token``) or one label per id; the controls start at ``temperature``, ``top_k`` and
    ``top_p``; ``n`` tokens are shown. Put its cell under ``# NBVAL_IGNORE_OUTPUT`` and a :func:`plot_decoding`
    beside it."""
    return DecodingExplorer(logits, vocab_or_tokens, temperature, top_k, top_p, n, size)
