"""The scalar-mix explorer: ELMo's layer weights s = softmax(w) and γ, beside what each layer alone achieves.

    explorer = scalar_mix_explorer(probe_mix)                    # a minilm.nn.ScalarMix: its w and γ to start from
    explorer = scalar_mix_explorer(np.log(s), accuracies=[0.81, 0.86, 0.84], mix_accuracy=0.88)   # raw scores w
    explorer = scalar_mix_explorer(layers)                       # per-layer states (L, ..., C): also the mix's size
    explorer                                                     # its notebook cell under # NBVAL_IGNORE_OUTPUT
    explorer.w[0].value = 2.0; explorer.current().s              # move a slider, read the weights shown
    plot_scalar_mix(axes, w, gamma=1.0, accuracies=[...])        # the static figure (one Axes, or two with accuracies)

ELMo_k = γ Σ_j s_j h_{k,j} with s = softmax(w) (Peters et al. 2018, §3.2; :class:`minilm.nn.ScalarMix`). One slider
per raw weight w_j and one for γ; the bars are the s_j, which sum to 1 whatever the w_j, and, when per-layer probe
accuracies are given, a second panel shows each single layer's accuracy beside the mix's (``mix_accuracy``, if
known). The s_j are ScalarMix's own: :func:`mix_weights` runs a ScalarMix with weights w on the unit vectors e_j,
whose mix Σ_j s_j e_j is the vector s. Given per-layer states, the title also gives the size (root mean square) of
the mix γ Σ_j s_j h_j, ScalarMix's output, so γ's part shows. Tests read :meth:`ScalarMixExplorer.current` and
:attr:`ScalarMixExplorer.title`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import ipywidgets as widgets
import numpy as np
import torch
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from minilm.nn.scalar_mix import ScalarMix

from ._figure import numpy_array, show


def _scalar_mix(w, gamma: float = 1.0, layer_norm: bool = False) -> ScalarMix:
    w = torch.as_tensor(numpy_array(w), dtype=torch.float32).flatten()
    mix = ScalarMix(w.numel(), layer_norm=layer_norm, initial_gamma=gamma)
    with torch.no_grad():
        mix.weights.copy_(w)
    return mix


@torch.no_grad()
def mix_weights(w) -> np.ndarray:
    """s = softmax(w) (L,), as :class:`minilm.nn.ScalarMix` computes it: its forward pass on the unit vectors."""
    mix = _scalar_mix(w)
    return mix(list(torch.eye(mix.weights.numel()))).numpy()  # Σ_j s_j e_j = s


@dataclass(frozen=True)
class MixView:
    """What a scalar-mix figure shows."""

    names: list[str]  # one per layer
    w: np.ndarray  # (L,) the raw weights
    s: np.ndarray  # (L,) softmax(w): the bars
    gamma: float
    accuracies: np.ndarray | None  # (L,) each layer's probe accuracy, if given
    mix_accuracy: float | None
    mixed: torch.Tensor | None  # γ Σ_j s_j h_j, ScalarMix's output, when states are given

    @property
    def scales(self) -> np.ndarray:
        """γ s_j: what each layer is multiplied by."""
        return self.gamma * self.s


def _per_layer(values, n_layers: int, what: str) -> np.ndarray | None:
    if values is None:
        return None
    values = numpy_array(values).astype(float).flatten()
    if len(values) != n_layers:
        raise ValueError(f"{len(values)} {what} for {n_layers} layers: give one per layer, layer 0 first")
    return values


def scalar_mix_view(
    w,
    gamma: float = 1.0,
    accuracies=None,
    mix_accuracy: float | None = None,
    names: Sequence[str] | None = None,
    states=None,
    layer_norm: bool = False,
) -> MixView:
    """The weights softmax(w), γ, per-layer ``accuracies`` and the mix of per-layer ``states`` (L, ..., C)."""
    w = numpy_array(w).astype(np.float32).flatten()
    L = len(w)
    names = [f"layer {j}" for j in range(L)] if names is None else list(names)
    if len(names) != L:
        raise ValueError(f"{len(names)} names for {L} layers: give one per layer")
    mixed = None
    if states is not None:
        if len(states) != L:
            raise ValueError(f"states of {len(states)} layers for {L} weights: give one state tensor per layer")
        with torch.no_grad():
            mixed = _scalar_mix(w, gamma, layer_norm)([torch.as_tensor(h, dtype=torch.float32) for h in states])
    return MixView(
        names=names,
        w=w,
        s=mix_weights(w),
        gamma=float(gamma),
        accuracies=_per_layer(accuracies, L, "accuracies"),
        mix_accuracy=mix_accuracy,
        mixed=mixed,
    )


def _draw(axes: Sequence[Axes], view: MixView) -> None:
    ax = axes[0]
    positions = np.arange(len(view.names))
    bars = ax.bar(positions, view.s, color="tab:blue")
    ax.bar_label(bars, [f"{s:.2f}" for s in view.s], fontsize=8)
    ax.set_xticks(positions, view.names, fontsize=8)
    ax.set_ylim(0, 1.1)
    ax.set_ylabel("s_j = softmax(w)_j", fontsize=8)
    size = "" if view.mixed is None else f", RMS of the mix {float(view.mixed.pow(2).mean().sqrt()):.3f}"
    ax.set_title(f"γ = {view.gamma:.2f}, s = [{', '.join(f'{s:.2f}' for s in view.s)}]{size}", fontsize=9)
    if view.accuracies is None:
        return
    ax = axes[1]
    names, values = list(view.names), list(view.accuracies)
    colours = ["tab:gray"] * len(names)
    if view.mix_accuracy is not None:
        names, values, colours = names + ["mix"], values + [view.mix_accuracy], colours + ["tab:blue"]
    bars = ax.bar(np.arange(len(names)), values, color=colours)
    ax.bar_label(bars, [f"{a:.3f}" for a in values], fontsize=8)
    ax.set_xticks(np.arange(len(names)), names, fontsize=8)
    ax.set_ylim(0, max(max(values), 1e-3) * 1.15)  # from 0: differences as they are; room for the labels
    ax.set_ylabel("probe accuracy", fontsize=8)
    ax.set_title("each layer alone" + (" and the mix" if view.mix_accuracy is not None else ""), fontsize=9)


def plot_scalar_mix(
    axes: Axes | Sequence[Axes],
    w,
    gamma: float = 1.0,
    accuracies=None,
    mix_accuracy: float | None = None,
    names: Sequence[str] | None = None,
) -> MixView:
    """Draw the weights softmax(w) as bars on ``axes`` (one Axes), and with per-layer ``accuracies`` those beside the
    mix's ``mix_accuracy`` on a second one (``axes``: two Axes). Returns what is drawn."""
    axes = [axes] if isinstance(axes, Axes) else list(axes)
    if len(axes) != (1 if accuracies is None else 2):
        raise ValueError(f"{len(axes)} Axes: give one for the weights, two with accuracies (weights, accuracies)")
    view = scalar_mix_view(w, gamma, accuracies, mix_accuracy, names)
    _draw(axes, view)
    return view


class ScalarMixExplorer(widgets.VBox):
    """One ``FloatSlider`` per raw layer weight (``w``, a list) and one for ``gamma``; ``image`` shows the weights
    (and accuracies), ``figure`` and ``axes`` (a list) are what it is drawn on."""

    def __init__(
        self,
        w,
        gamma: float = 1.0,
        accuracies=None,
        mix_accuracy: float | None = None,
        names: Sequence[str] | None = None,
        states=None,
        layer_norm: bool = False,
        size: tuple[float, float] | None = None,
    ):
        self._fixed = dict(accuracies=accuracies, mix_accuracy=mix_accuracy, names=names, states=states)
        self.layer_norm = layer_norm
        view = scalar_mix_view(w, gamma, **self._fixed, layer_norm=layer_norm)  # bad input fails here, named
        top = max(5.0, float(np.abs(view.w).max()))
        self.w = [
            widgets.FloatSlider(value=float(value), min=-top, max=top, step=0.1, description=f"w ({name})")
            for value, name in zip(view.w, view.names, strict=True)
        ]
        self.gamma = widgets.FloatSlider(value=gamma, min=0.0, max=max(3.0, gamma), step=0.05, description="γ")
        for control in (*self.w, self.gamma):
            control.continuous_update = False
            control.style.description_width = "initial"
        n_axes = 1 if accuracies is None else 2
        self.figure = Figure(figsize=size or (4.5 * n_axes, 3.2))
        self.axes = [self.figure.add_subplot(1, n_axes, i + 1) for i in range(n_axes)]
        self.image = widgets.Image(format="png")
        super().__init__([widgets.VBox([*self.w, self.gamma]), self.image])
        for control in (*self.w, self.gamma):
            control.observe(self._draw, names="value")
        self._draw()

    def _draw(self, change=None) -> None:
        for ax in self.axes:
            ax.clear()
        w = [control.value for control in self.w]
        self._shown = scalar_mix_view(w, self.gamma.value, **self._fixed, layer_norm=self.layer_norm)
        _draw(self.axes, self._shown)
        show(self.figure, self.image)

    def current(self) -> MixView:
        """What is on show: w, s = softmax(w), γ, the accuracies, and the mix of the states when given."""
        return self._shown

    @property
    def title(self) -> str:
        """The weights panel's title: γ, the s_j, and the size of the mix when states are given."""
        return self.axes[0].get_title()


def _are_states(given) -> bool:
    """Per-layer states (a list of tensors, or an array of 2 dimensions or more), not one raw weight per layer."""
    if isinstance(given, list | tuple):
        return bool(given) and getattr(given[0], "ndim", 0) >= 1
    return numpy_array(given).ndim > 1


def scalar_mix_explorer(
    layer_scores_or_states,
    accuracies=None,
    mix_accuracy: float | None = None,
    gamma: float | None = None,
    names: Sequence[str] | None = None,
    states=None,
    size: tuple[float, float] | None = None,
) -> ScalarMixExplorer:
    """A :class:`ScalarMixExplorer` starting from ``layer_scores_or_states``: a :class:`minilm.nn.ScalarMix` (its w,
    γ and layer norm), raw layer weights w (L,) (``np.log(s)`` for given s_j), a number of layers (equal weights), or
    per-layer states, a list of L tensors of one shape or one (L, ..., C) tensor (equal weights; the title gives the
    size of their mix). ``accuracies`` (L,): each layer's probe accuracy, ``mix_accuracy``: the mix's; ``gamma``:
    γ to start from (default the ScalarMix's, else 1); ``states``: per-layer states to mix beside a ScalarMix or
    weights. Put its cell under ``# NBVAL_IGNORE_OUTPUT`` and a :func:`plot_scalar_mix` beside it."""
    given, layer_norm = layer_scores_or_states, False
    if isinstance(given, ScalarMix):
        w, start_gamma, layer_norm = given.weights, float(given.gamma.detach()), given.layer_norm
    elif isinstance(given, int) and not isinstance(given, bool):
        if given < 1:
            raise ValueError(f"a scalar mix needs at least one layer, got {given}")
        w, start_gamma = np.zeros(given), 1.0
    elif _are_states(given):
        if states is not None:
            raise ValueError("states given twice: pass them first, or pass weights (or a ScalarMix) and states=")
        w, states, start_gamma = np.zeros(len(given)), given, 1.0
    else:
        w, start_gamma = given, 1.0
    return ScalarMixExplorer(
        w,
        start_gamma if gamma is None else gamma,
        accuracies,
        mix_accuracy,
        names,
        states=states,
        layer_norm=layer_norm,
        size=size,
    )
