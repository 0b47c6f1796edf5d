"""The ALBERT parameter explorer: where the parameters of an ALBERT are, for a vocabulary V, a width H, an embedding
size E, a number of layers and a sharing mode.

    explorer = albert_parameters_explorer()                       # albert-base: V 30000, H 768, E 128, 12 layers, all
    explorer                                                      # its cell under # NBVAL_IGNORE_OUTPUT
    explorer.share.value = "none"; explorer.current().encoder     # move a control, read the counts shown
    plot_albert_parameters(ax, embedding_size=768, share="none")  # the static figure: BERT-base's shape
    albert_parameters(30000, 768, 128, 12, "all").total           # the counts alone: 11,683,584 (AlbertModel's)

The counts are written out, part by part, for :class:`minilm.models.albert.Albert` without its heads and pooler
(tests check them against the model built on the meta device):

- the embedding (Lan et al. 2020, §3.1, "factorized embedding parameterization"): the V×E token table, the learned
  positions and the segments (E each), the LayerNorm over them (2E) and the projection Linear(E, H) (E·H + H);
- the encoder: one attention sublayer is 4(H² + H) for q, k, v and the output, and 2H for its LayerNorm; one
  feed-forward sublayer is 2·H·F + F + H for its two Linears (F = 4H) and 2H for its LayerNorm. Sharing (§3.1,
  "cross-layer parameter sharing"; Table 4) sets how many of each the encoder holds: ``none`` one of each per layer
  (BERT), ``all`` one of each for all layers (ALBERT), ``attention`` or ``ffn`` one of that sublayer and one of the
  other per layer.

Controls: ``vocab_size``, ``hidden`` (H), ``embedding`` (E), ``layers`` and ``share``. Tests read
:meth:`AlbertParametersExplorer.current` and :attr:`AlbertParametersExplorer.title`.
"""

from __future__ import annotations

from dataclasses import dataclass

import ipywidgets as widgets
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from minilm.nn.blocks import SHARING, check_sharing

from ._figure import show

POSITIONS, SEGMENTS = 512, 2  # BERT's and ALBERT's learned positions and segments
WIDTHS = (128, 256, 512, 768, 1024, 2048, 4096)  # H: the course's tiny ALBERT up to ALBERT-xxlarge
EMBEDDING_SIZES = (16, 32, 64, 128, 256, 512, 768, 1024, 2048, 4096)  # E: Table 3's 64 ... 768, and E = H
COLOURS = {"token table": "tab:blue", "positions and segments": "tab:cyan", "projection and norm": "tab:purple",
           "attention": "tab:orange", "feed-forward": "tab:green"}  # fmt: skip


@dataclass(frozen=True)
class AlbertParameters:
    """An ALBERT's parameter counts, part by part (no heads, no pooler)."""

    vocab_size: int  # V
    hidden: int  # H
    embedding_size: int  # E
    n_layers: int
    share: str
    token_table: int  # V·E
    positions_and_segments: int  # (positions + segments)·E
    projection_and_norm: int  # 2E (LayerNorm) + E·H + H (Linear(E, H))
    attention: int  # one attention sublayer with its LayerNorm
    feed_forward: int  # one feed-forward sublayer with its LayerNorm
    n_attention: int  # how many the encoder holds
    n_feed_forward: int

    @property
    def embedding(self) -> int:
        return self.token_table + self.positions_and_segments + self.projection_and_norm

    @property
    def encoder(self) -> int:
        return self.n_attention * self.attention + self.n_feed_forward * self.feed_forward

    @property
    def total(self) -> int:
        return self.embedding + self.encoder

    def parts(self) -> dict[str, int]:
        """Each part's count, in the order drawn (the keys of :data:`COLOURS`)."""
        return {
            "token table": self.token_table,
            "positions and segments": self.positions_and_segments,
            "projection and norm": self.projection_and_norm,
            "attention": self.n_attention * self.attention,
            "feed-forward": self.n_feed_forward * self.feed_forward,
        }


def albert_parameters(
    vocab_size: int = 30000,
    hidden: int = 768,
    embedding_size: int = 128,
    n_layers: int = 12,
    share: str = "all",
    d_ff: int | None = None,
    max_len: int = POSITIONS,
    n_segments: int = SEGMENTS,
) -> AlbertParameters:
    """The parameter counts of :class:`~minilm.models.albert.Albert` (post-LN, one layer group, no heads or pooler)
    with these sizes; ``d_ff`` is 4H unless given."""
    check_sharing(share, n_layers, 1)
    for name, value in [("vocab_size", vocab_size), ("hidden", hidden), ("embedding_size", embedding_size)]:
        if value < 1:
            raise ValueError(f"{name}={value} must be >= 1")
    H, E, F = hidden, embedding_size, 4 * hidden if d_ff is None else d_ff
    layer_norm = 2 * H
    own = {"none": (n_layers, n_layers), "all": (1, 1), "attention": (1, n_layers), "ffn": (n_layers, 1)}[share]
    return AlbertParameters(
        vocab_size=vocab_size,
        hidden=H,
        embedding_size=E,
        n_layers=n_layers,
        share=share,
        token_table=vocab_size * E,
        positions_and_segments=(max_len + n_segments) * E,
        projection_and_norm=2 * E + E * H + H,
        attention=4 * (H * H + H) + layer_norm,
        feed_forward=2 * H * F + F + H + layer_norm,
        n_attention=own[0],
        n_feed_forward=own[1],
    )


def _millions(n: int) -> str:
    return f"{n / 1e6:.1f}M" if n >= 1e5 else f"{n:,}"


def _draw(ax: Axes, counts: AlbertParameters) -> None:
    """Two stacked horizontal bars, embedding and encoder, one segment per part."""
    rows = {"embedding": 0, "encoder": 1}
    starts = {"embedding": 0, "encoder": 0}
    for part, count in counts.parts().items():
        row = "embedding" if part in ("token table", "positions and segments", "projection and norm") else "encoder"
        ax.barh(rows[row], count / 1e6, left=starts[row] / 1e6, color=COLOURS[part], label=part, edgecolor="white")
        starts[row] += count
    ax.set_yticks(list(rows.values()), [f"{row}\n{_millions(starts[row])}" for row in rows], fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel("parameters (millions)", fontsize=8)
    ax.set_xlim(0, max(starts.values()) / 1e6 * 1.05)
    ax.legend(fontsize=7, loc="lower right")
    ax.set_title(
        f"V = {counts.vocab_size:,}, H = {counts.hidden}, E = {counts.embedding_size}, {counts.n_layers} layers, "
        f"share = {counts.share}: {counts.total:,} parameters ({_millions(counts.total)})",
        fontsize=9,
    )


def plot_albert_parameters(
    ax: Axes,
    vocab_size: int = 30000,
    hidden: int = 768,
    embedding_size: int = 128,
    n_layers: int = 12,
    share: str = "all",
) -> AlbertParameters:
    """Draw on ``ax`` the embedding's and the encoder's parameters, part by part, for fixed sizes. Returns what is
    drawn."""
    counts = albert_parameters(vocab_size, hidden, embedding_size, n_layers, share)
    _draw(ax, counts)
    return counts


class AlbertParametersExplorer(widgets.VBox):
    """``vocab_size`` (``IntSlider``), ``hidden`` and ``embedding`` (``SelectionSlider``s), ``layers``
    (``IntSlider``) and ``share`` (``Dropdown``); ``image`` shows the counts, ``figure`` and ``axes`` are what they
    are drawn on."""

    def __init__(
        self,
        vocab_size: int = 30000,
        hidden: int = 768,
        embedding_size: int = 128,
        n_layers: int = 12,
        share: str = "all",
        size: tuple[float, float] | None = None,
    ):
        albert_parameters(vocab_size, hidden, embedding_size, n_layers, share)  # bad settings fail here, named
        self.vocab_size = widgets.IntSlider(
            value=vocab_size, min=1000, max=max(100_000, vocab_size), step=500, description="V"
        )
        self.hidden = widgets.SelectionSlider(options=sorted({*WIDTHS, hidden}), value=hidden, description="H")
        self.embedding = widgets.SelectionSlider(
            options=sorted({*EMBEDDING_SIZES, embedding_size}), value=embedding_size, description="E"
        )
        self.layers = widgets.IntSlider(value=n_layers, min=1, max=max(24, n_layers), description="layers")
        self.share = widgets.Dropdown(options=list(SHARING), value=share, description="share")
        controls = (self.vocab_size, self.hidden, self.embedding, self.layers, self.share)
        for control in controls:
            control.style.description_width = "initial"
            if hasattr(control, "continuous_update"):
                control.continuous_update = False
        self.figure = Figure(figsize=size or (8.0, 2.8))
        self.axes = self.figure.add_subplot()
        self.image = widgets.Image(format="png")
        super().__init__([widgets.HBox(list(controls[:3])), widgets.HBox(list(controls[3:])), self.image])
        for control in controls:
            control.observe(self._draw, names="value")
        self._draw()

    def settings(self) -> dict:
        """The sizes the controls stand for, as :func:`albert_parameters` takes them."""
        return dict(
            vocab_size=self.vocab_size.value,
            hidden=self.hidden.value,
            embedding_size=self.embedding.value,
            n_layers=self.layers.value,
            share=self.share.value,
        )

    def _draw(self, change=None) -> None:
        self.axes.clear()
        self._shown = plot_albert_parameters(self.axes, **self.settings())
        show(self.figure, self.image)

    def current(self) -> AlbertParameters:
        """What is on show: the counts, part by part."""
        return self._shown

    @property
    def title(self) -> str:
        """The title on show: the sizes and the total."""
        return self.axes.get_title()


def albert_parameters_explorer(
    vocab_size: int = 30000,
    hidden: int = 768,
    embedding_size: int = 128,
    n_layers: int = 12,
    share: str = "all",
    size: tuple[float, float] | None = None,
) -> AlbertParametersExplorer:
    """An :class:`AlbertParametersExplorer` starting from these sizes (albert-base's by default). Put its cell under
    ``# NBVAL_IGNORE_OUTPUT`` and a :func:`plot_albert_parameters` beside it."""
    return AlbertParametersExplorer(vocab_size, hidden, embedding_size, n_layers, share, size)
