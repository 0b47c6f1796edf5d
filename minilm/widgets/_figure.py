"""What every explorer shares: arrays from tensors, a private figure shown as a PNG, legends of the colours drawn."""

from __future__ import annotations

import io
from collections.abc import Iterable, Mapping

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
