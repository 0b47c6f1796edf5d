"""The attention explorer: a layer and a head slider over attention maps, and static maps and grids.

    explorer = attention_explorer(A, tokens, index=0)   # A (L, B, nh, T, T): a layer and a head slider over a map
    explorer                                             # shown in a notebook (its cell under # NBVAL_IGNORE_OUTPUT)
    fig = attention_grid(A, tokens, layers=[0, 5], heads=range(4), index=0)   # a static grid of heads
    plot_attention(ax, A[2, 0, 5], tokens, title="layer 2, head 5")        # one map on an Axes of your own

The explorer draws on a figure of its own (``matplotlib.figure.Figure``, never registered with pyplot, so a
notebook does not show it a second time) and shows it as a PNG in an ``ipywidgets.Image``: it needs no widget
manager beyond ipywidgets' own, and tests can move its sliders and read what it shows
(:meth:`AttentionExplorer.current`, :attr:`AttentionExplorer.title`) without a browser.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import ipywidgets as widgets
import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.image import AxesImage

from ._figure import numpy_array, show


def _per_sequence(attentions, index: int) -> np.ndarray:
    """(L, nh, T, T) maps as numpy: given as such, or sequence ``index`` of (L, B, nh, T, T)."""
    maps = numpy_array(attentions)
    if maps.ndim == 5:
        maps = maps[:, index]
    if maps.ndim != 4 or maps.shape[-1] != maps.shape[-2]:
        raise ValueError(f"attentions must be (L, nh, T, T) or (L, B, nh, T, T), got shape {tuple(maps.shape)}")
    return maps


def _check_tokens(tokens: Sequence[str], T: int) -> None:
    if len(tokens) != T:
        raise ValueError(
            f"{len(tokens)} tokens for maps of {T} positions: pass one label per position, or crop the maps to the "
            "sequence's real tokens first (attentions[..., :n, :n])"
        )


def plot_attention(
    ax: Axes,
    weights,
    tokens: Sequence[str],
    title: str | None = None,
    labels: bool = True,
    vmax: float | None = None,
) -> AxesImage:
    """Draw one (T, T) map on ``ax``: queries down the rows ("from"), keys along the columns ("to").

    Weights >= 0 (attention) on a sequential scale from 0 to ``vmax`` (None: the map's largest); a map with negative
    entries (effective attention can have them) on a diverging scale symmetric about 0. ``labels``: the tokens on both
    axes. Returns the image (``image.get_array()`` is the map drawn).
    """
    W = numpy_array(weights).astype(float)
    if W.ndim != 2 or W.shape[0] != W.shape[1]:
        raise ValueError(f"weights must be one (T, T) map, got shape {tuple(W.shape)}")
    _check_tokens(tokens, W.shape[0])
    top = float(np.abs(W).max()) if vmax is None else vmax
    top = top or 1.0  # an all-zero map still gets a scale
    if W.min() < 0:
        image = ax.imshow(W, cmap="RdBu_r", vmin=-top, vmax=top)
    else:
        image = ax.imshow(W, cmap="viridis", vmin=0.0, vmax=top)
    positions = np.arange(len(tokens))
    ax.set_xticks(positions, list(tokens) if labels else [], rotation=90, fontsize=8)
    ax.set_yticks(positions, list(tokens) if labels else [], fontsize=8)
    if title is not None:
        ax.set_title(title, fontsize=9)
    return image


def attention_grid(
    attentions,
    tokens: Sequence[str],
    layers: Iterable[int] | None = None,
    heads: Iterable[int] | None = None,
    index: int = 0,
    size: float = 2.2,
) -> Figure:
    """A static grid of maps, one row per layer and one column per head (None: all of them), made with pyplot:
    ``plt.show()`` it in a chapter. attentions (L, nh, T, T), or (L, B, nh, T, T) and the sequence's ``index``.
    Tokens label the left column's rows and the bottom row's columns; ``size``: inches per map."""
    import matplotlib.pyplot as plt

    maps = _per_sequence(attentions, index)
    L, nh, T, _ = maps.shape
    _check_tokens(tokens, T)
    layers = list(range(L)) if layers is None else list(layers)
    heads = list(range(nh)) if heads is None else list(heads)
    bad = [f"layer {i}" for i in layers if not 0 <= i < L] + [f"head {h}" for h in heads if not 0 <= h < nh]
    if bad or not layers or not heads:
        raise ValueError(f"{', '.join(bad) or 'no map'}: the maps have layers 0..{L - 1} and heads 0..{nh - 1}")
    fig, axes = plt.subplots(len(layers), len(heads), figsize=(size * len(heads), size * len(layers)), squeeze=False)
    for r, layer in enumerate(layers):
        for c, head in enumerate(heads):
            ax = axes[r, c]
            plot_attention(ax, maps[layer, head], tokens, title=f"layer {layer}, head {head}")
            if c > 0:
                ax.set_yticklabels([])
            if r < len(layers) - 1:
                ax.set_xticklabels([])
    fig.tight_layout()
    return fig


class AttentionExplorer(widgets.VBox):
    """A layer slider and a head slider over the map they choose: ``layer`` and ``head`` (``ipywidgets.IntSlider``),
    ``image`` (the ``ipywidgets.Image`` showing it), ``figure`` and ``axes`` (what it is drawn on)."""

    def __init__(self, attentions, tokens: Sequence[str], index: int = 0, name: str = "attention", size: float = 5.0):
        self.maps = _per_sequence(attentions, index)  # (L, nh, T, T)
        L, nh, T, _ = self.maps.shape
        _check_tokens(tokens, T)
        self.tokens, self.name = list(tokens), name
        self.layer = widgets.IntSlider(value=0, min=0, max=L - 1, description="layer", continuous_update=False)
        self.head = widgets.IntSlider(value=0, min=0, max=nh - 1, description="head", continuous_update=False)
        self.figure = Figure(figsize=(size, size))
        self.axes = self.figure.add_subplot()
        self.image = widgets.Image(format="png")
        super().__init__([widgets.HBox([self.layer, self.head]), self.image])
        self.layer.observe(self._draw, names="value")
        self.head.observe(self._draw, names="value")
        self._draw()

    def _draw(self, change=None) -> None:
        self.axes.clear()
        title = f"{self.name}: layer {self.layer.value}, head {self.head.value}"
        self._shown = plot_attention(self.axes, self.maps[self.layer.value, self.head.value], self.tokens, title)
        show(self.figure, self.image)

    def current(self) -> np.ndarray:
        """The (T, T) map on show."""
        return np.asarray(self._shown.get_array())

    @property
    def title(self) -> str:
        """The title on show: which layer and head."""
        return self.axes.get_title()


def attention_explorer(
    attentions, tokens: Sequence[str], index: int = 0, name: str = "attention", size: float = 5.0
) -> AttentionExplorer:
    """An :class:`AttentionExplorer` over attentions (L, nh, T, T), or (L, B, nh, T, T) and the sequence's ``index``;
    ``tokens``: one label per position; ``name`` starts the title ("effective attention" for Brunner et al.'s maps).
    Put its notebook cell under ``# NBVAL_IGNORE_OUTPUT`` and show a static :func:`attention_grid` beside it."""
    return AttentionExplorer(attentions, tokens, index=index, name=name, size=size)
