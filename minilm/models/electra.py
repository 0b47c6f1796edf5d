"""ELECTRA (Clark et al. 2020, "ELECTRA: Pre-training Text Encoders as Discriminators Rather Than Generators"): a
small masked-LM generator fills in masked tokens, and a discriminator learns to tell, at every position, whether a
token is the original or a generator's replacement. Both are BERT encoders, composed through
:class:`~minilm.models.bert.Bert`.

    x ──mask 15%──► x_masked ──► generator (BERT, hidden ~1/4 of the discriminator's) ──► p_G(x_t | x_masked)
                                  sample x̂_t ~ p_G at the masked positions ──► x_corrupt
    x_corrupt ──► discriminator (BERT) ──► per token: D(x_corrupt, t) = sigmoid(w · h_t), "original" vs "replaced"

    ids, segments ──► token + position + segment embedding of size E, LayerNorm [──► Linear(E, H) when E ≠ H]
                  ──► N × EncoderBlock (post-LN) ──► hidden
    discriminator: hidden ──► Linear(H, H), GELU ──► Linear(H, 1) ──► "replaced" logit per token
    generator:     hidden ──► Linear(H, E), GELU, LayerNorm ──► Linear(E, V) (tied to the token embedding) + bias

One class, :class:`Electra`, is both networks: its config says which head it has (``rtd``: the discriminator's,
transformers' ``ElectraForPreTraining``; ``mlm``: the generator's, ``ElectraForMaskedLM``). :func:`generator_config`
derives the generator's config from the discriminator's (§3.2: "the generator's size" as a fraction of the
discriminator's hidden size, FFN size and heads), and :class:`ElectraPretraining` holds the two with the paper's
weight sharing (§3.2): none, the embeddings only (the default: "token and positional embeddings"), or all weights
(same size only). The losses live in :mod:`minilm.objectives.rtd`; after pretraining the generator is thrown away
and the discriminator is fine-tuned.

Hugging Face checkpoints load with :meth:`Electra.from_pretrained` and save with :meth:`Electra.save_pretrained`
(converter: :mod:`minilm.models.hf.electra`); transformers has no joint model, so the pair saves as two folders
(:meth:`ElectraPretraining.save_pretrained`), as Google released them.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path

from torch import Tensor, nn

from minilm.models.bert import Bert, BertConfig, MaskedLMHead
from minilm.nn import ACTIVATIONS, TransformerEmbedding

SHARING = ("none", "embeddings", "all")  # §3.2: untied, tied token and position embeddings, all weights tied


@dataclass
class ElectraConfig(BertConfig):
    """:class:`BertConfig` with ELECTRA's fields and defaults (electra-base's discriminator: 110M parameters)."""

    embedding_size: int = 768  # E: the embeddings' size, projected to d_model when they differ (ELECTRA-Small: 128)
    pooler: bool = False  # ELECTRA has no pooler: fine-tuning reads the [CLS] state through a head
    nsp: bool = False
    mlm: bool = False  # the generator's head (transformers' ElectraForMaskedLM)
    rtd: bool = True  # the discriminator's head: is each token replaced? (ElectraForPreTraining)

    def validate(self) -> None:
        super().validate()
        if self.embedding_size < 1:
            raise ValueError(f"embedding_size must be >= 1, got {self.embedding_size} (ELECTRA-Small uses 128)")

    def factorized(self) -> bool:
        """Whether the embeddings are narrower than the model and projected to it (ELECTRA-Small, every generator
        that shares the discriminator's embeddings)."""
        return self.embedding_size != self.d_model


# name -> ElectraConfig overrides: the discriminators of the paper's Table 6. Parameter counts of
# ElectraForPreTraining (the discriminator with its head); the paper says 14M, 110M, 335M
ELECTRA_PRESETS = {  # generators (ElectraForMaskedLM) at GENERATOR_SIZES: 4,620,026, 33,740,602, 51,295,290
    "electra-small": dict(n_layers=12, n_heads=4, d_model=256, d_ff=1024, embedding_size=128),  # 13,549,057
    "electra-base": {},  # 109,483,009
    "electra-large": dict(n_layers=24, n_heads=16, d_model=1024, d_ff=4096, embedding_size=1024),  # 335,142,913
}
# the paper's generator sizes (Table 6: "Generator Size (multiplier for hidden-size, FFN-size, and
# num-attention-heads)"); electra-base's generator is transformers' google/electra-base-generator
GENERATOR_SIZES = {"electra-small": 1 / 4, "electra-base": 1 / 3, "electra-large": 1 / 4}
# small sizes for pretraining on a CPU or one GPU (vocab_size comes from the tokenizer trained for the run)
ELECTRA_SIZES = {
    "tiny": dict(n_layers=4, n_heads=4, d_model=256, d_ff=1024, max_len=256, embedding_size=128),
    "small": dict(ELECTRA_PRESETS["electra-small"], max_len=512),
    **ELECTRA_PRESETS,
}


def electra_config(name: str, **overrides) -> ElectraConfig:
    """The :class:`ElectraConfig` of a preset of :data:`ELECTRA_PRESETS` (or a pretraining size), with ``overrides``."""
    if name not in ELECTRA_SIZES:
        raise ValueError(f"unknown ELECTRA preset {name!r}; choose one of {', '.join(ELECTRA_SIZES)}")
    return ElectraConfig(**{**ELECTRA_SIZES[name], **overrides})


def check_generator(size: float, share: str) -> None:
    """One ValueError for a generator the paper's setting cannot pair with its discriminator."""
    if share not in SHARING:
        raise ValueError(f"unknown weight sharing share={share!r}; choose one of {', '.join(SHARING)}")
    if not 0 < size <= 1:
        raise ValueError(
            f"generator_size={size} must be in (0, 1]: the generator's width as a fraction of the discriminator's. "
            "A generator larger than the discriminator makes its task too hard (§3.2: 1/4 to 1/2 works best)"
        )
    if share == "all" and size != 1:
        raise ValueError(
            f"share=all ties every weight, so the generator must be the discriminator's size (generator_size=1), "
            f"not {size}; with a smaller generator share the embeddings only (share=embeddings)"
        )


def generator_config(discriminator: ElectraConfig, size: float = 0.25, share: str = "embeddings") -> ElectraConfig:
    """The generator's config for ``discriminator``: its hidden size, FFN size and heads times ``size`` (Table 6's
    "multiplier"), the same depth, vocabulary and positions, and the MLM head instead of the discriminator's.

    With shared embeddings (``share`` = "embeddings" or "all") its embeddings are the discriminator's size E and are
    projected to its width; untied, they are its own width (``embedding_size = d_model``), as in ELECTRA's code.
    """
    check_generator(size, share)
    c = discriminator
    d_model = max(1, round(c.d_model * size))
    n_heads = max(1, round(c.n_heads * size))
    while d_model % n_heads:  # the nearest head count below that divides the width
        n_heads -= 1
    return dataclasses.replace(
        c,
        d_model=d_model,
        n_heads=n_heads,
        d_ff=max(1, round(c.d_ff * size)),
        embedding_size=c.embedding_size if share != "none" else d_model,
        mlm=True,
        rtd=False,
    )


class DiscriminatorHead(nn.Module):
    """Per-token "replaced" logit: Linear(H, 1)(act(Linear(H, H)(h))), the logit of D(x, t) (§2: sigmoid(w^T h_t))."""

    def __init__(self, d_model: int, activation: str) -> None:
        super().__init__()
        self.dense = nn.Linear(d_model, d_model)
        self.activation = ACTIVATIONS[activation]
        self.out = nn.Linear(d_model, 1)

    def forward(self, hidden: Tensor) -> Tensor:
        """(..., H) -> (...,)."""
        return self.out(self.activation(self.dense(hidden))).squeeze(-1)


class Electra(Bert):
    """An ELECTRA encoder (a BERT with embeddings of size E) with the discriminator's or the generator's head.

    Submodules: ``embedding`` (token, position, segment of size E, norm, ``projection`` E -> H when E ≠ H),
    ``encoder`` (``layers``; post-LN), ``mlm_head`` (the generator's: H -> E -> V, decoder tied to
    ``embedding.token``; or None), ``rtd_head`` (the discriminator's; or None).
    """

    def __init__(self, config: ElectraConfig) -> None:
        super().__init__(config)
        self.rtd_head = DiscriminatorHead(config.d_model, config.activation) if config.rtd else None
        if self.rtd_head is not None:
            self.rtd_head.apply(self._init_weights)

    def _embedding(self, c: ElectraConfig, d_embedding: int | None = None) -> TransformerEmbedding:
        return super()._embedding(c, d_embedding=c.embedding_size if c.factorized() else None)

    def _mlm_head(self, c: ElectraConfig, d_embedding: int | None = None) -> MaskedLMHead:
        # H -> E -> V; transformers' generator head always uses GELU, whatever hidden_act says
        return MaskedLMHead(c.d_model, c.vocab_size, "gelu", c.norm_eps, d_embedding=c.embedding_size)

    def rtd_logits(self, hidden: Tensor) -> Tensor:
        """Final hidden states (B, T, H) -> "replaced" logits (B, T); sigmoid gives P(token t was replaced)."""
        if self.rtd_head is None:
            raise ValueError("this model has no discriminator head (config.rtd=False: a generator)")
        return self.rtd_head(hidden)


class ElectraPretraining(nn.Module):
    """The generator and the discriminator trained together (Figure 2), with the paper's weight sharing (§3.2).

    ``share``: "none"; "embeddings" (the generator's token, position and segment embeddings and their LayerNorm are
    the discriminator's, which needs the same E; each keeps its own E -> H projection); "all" (the generator's
    embeddings and encoder are the discriminator's: the same size only). The generator's MLM decoder stays tied to
    its token embeddings, shared or not. :mod:`minilm.recipes.electra` builds it and trains it; fine-tuning reads
    ``discriminator`` alone.
    """

    def __init__(self, discriminator: Electra, generator: Electra, share: str = "embeddings") -> None:
        super().__init__()
        d, g = discriminator.config, generator.config
        if share not in SHARING:
            raise ValueError(f"unknown weight sharing share={share!r}; choose one of {', '.join(SHARING)}")
        if g.mlm is False or generator.mlm_head is None:
            raise ValueError("the generator needs its MLM head (config.mlm=True)")
        if share != "none" and (g.embedding_size, g.vocab_size, g.max_len) != (
            d.embedding_size,
            d.vocab_size,
            d.max_len,
        ):
            raise ValueError(
                f"share={share!r} ties the embeddings, which must be of one shape: generator E={g.embedding_size}, "
                f"V={g.vocab_size}, positions={g.max_len} vs discriminator E={d.embedding_size}, V={d.vocab_size}, "
                f"positions={d.max_len} (build the generator with generator_config)"
            )
        if share == "all" and (g.d_model, g.d_ff, g.n_layers, g.n_heads) != (d.d_model, d.d_ff, d.n_layers, d.n_heads):
            raise ValueError("share='all' ties every weight: the generator must be the discriminator's size")
        self.discriminator = discriminator  # first, so shared tensors are saved under the discriminator's names
        self.generator = generator
        self.share = share
        if share == "all":
            generator.embedding, generator.encoder = discriminator.embedding, discriminator.encoder
        elif share == "embeddings":
            for part in ("token", "position", "segment", "norm"):
                setattr(generator.embedding, part, getattr(discriminator.embedding, part))
        generator.mlm_head.decoder.weight = generator.embedding.token.weight  # the tie, to the shared table

    def save_pretrained(self, path: str | Path) -> dict[str, Path]:
        """Both networks as Hugging Face checkpoints, ``path/discriminator`` (ElectraForPreTraining) and
        ``path/generator`` (ElectraForMaskedLM), as Google released ELECTRA; {name: folder}."""
        folder = Path(path)
        return {name: getattr(self, name).save_pretrained(folder / name) for name in ("discriminator", "generator")}
