"""What every explorer shares: arrays from tensors, a private figure shown as a PNG, legends of the colours drawn."""

from __future__ import annotations

import io
from collections.abc import Iterable, Mapping, Sequence

import ipywidgets as widgets
import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.legend import Legend
from matplotlib.patches import Patch


def numpy_array(x) -> np.ndarray:
    return x.detach().cpu().numpy() if hasattr(x, "detach") else np.asarray(x)


def show(figure: Figure, image: widgets.Image, dpi: int = 80) -> None:
    """Lay ``figure`` out and put it into ``image`` as a PNG: the figure is the explorer's own (never pyplot's), so a
    notebook shows the picture once, in the widget."""
    figure.tight_layout()
    png = io.BytesIO()
    figure.savefig(png, format="png", dpi=dpi)
    image.value = png.getvalue()


def category_legend(ax: Axes, colours: Mapping[str, str], drawn: Iterable[str], **kwargs) -> Legend | None:
    """A legend with one patch per category in ``drawn`` (in the order of ``colours``), in the colour it is drawn with:
    every entry names something on show, and everything on show has its entry."""
    drawn = set(drawn)
    handles = [
        Patch(facecolor=colour, edgecolor="gray", label=name) for name, colour in colours.items() if name in drawn
    ]
    return ax.legend(handles=handles, fontsize=8, **kwargs) if handles else None


def draw_token_rows(ax: Axes, rows: Sequence[tuple[str, Sequence[str], Sequence[str]]], per_row: int = 12) -> None:
    """Token sequences one under another on ``ax``: each a heading, then its tokens ``per_row`` to a line, each in a
    box of its colour. ``rows``: (heading, tokens, colours) with one colour per token; a token's text gets the gid
    ``"<heading> <i>"`` (tests find it by that)."""
    y = 0.0
    for heading, tokens, colours in rows:
        ax.text(0, y, heading, ha="left", va="center", fontsize=9, fontweight="bold")
        y -= 0.8
        for i, (token, colour) in enumerate(zip(tokens, colours, strict=True)):
            box = dict(boxstyle="round,pad=0.3", facecolor=colour, edgecolor="gray")
            x = i % per_row + 0.5
            ax.text(
                x, y - i // per_row * 0.8, token, ha="center", va="center", fontsize=8, bbox=box, gid=f"{heading} {i}"
            )
        y -= (max(len(tokens), 1) + per_row - 1) // per_row * 0.8 + 0.4
    ax.set_xlim(0, per_row)
    ax.set_ylim(y + 0.2, 0.5)
    ax.axis("off")


def token_rows_height(lengths: Iterable[int], per_row: int = 12) -> float:
    """The figure height (inches) :func:`draw_token_rows` wants for sequences of these lengths."""
    return sum(0.5 + 0.45 * ((max(n, 1) + per_row - 1) // per_row) for n in lengths) + 0.6
