"""ALBERT (Lan et al. 2020, "ALBERT: A Lite BERT for Self-supervised Learning of Language Representations"): BERT
with fewer parameters, composed from :mod:`minilm.nn` through :class:`~minilm.models.bert.Bert`.

    ids, segments ──► token + position + segment embedding of size E, LayerNorm ──► Linear(E, H)   (factorized)
                  ──► one EncoderBlock (post-LN) applied N times, its weights shared by every layer ──► hidden
    hidden ──► MLM head: Linear(H, E), GELU, LayerNorm ──► Linear(E, V) (tied to the E-sized embedding) + bias
    hidden[:, 0] ──► pooler: Linear, tanh ──► SOP head: Linear(H, 2) ──► in order / swapped logits

The paper's three changes to BERT (§3.1), each an option of the shared building blocks:

1. **Factorized embedding parameterization**: "we first project them into a lower dimensional embedding space of
   size E, and then project it to the hidden space. By using this decomposition, we reduce the embedding parameters
   from O(V × H) to O(V × E + E × H)" (``embedding_size``; :class:`minilm.nn.TransformerEmbedding`'s ``project_to``).
2. **Cross-layer parameter sharing**: "The default decision for ALBERT is to share all parameters across layers"
   (``share``: all / attention / ffn / none, Table 4; ``n_groups``: the layer groups of the reference code;
   :class:`minilm.nn.TransformerEncoder`).
3. **Inter-sentence coherence loss**: sentence-order prediction (SOP) replaces NSP
   (:mod:`minilm.objectives.sop`); its head reads the pooled output, as BERT's NSP head does.

The configurations are ALBERT v2's (no dropout, ``gelu_new``); Hugging Face checkpoints load with
:meth:`Albert.from_pretrained` and save with :meth:`Albert.save_pretrained` (converter: :mod:`minilm.models.hf.albert`).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch.nn.functional as F
from torch import Tensor, nn

from minilm.models.bert import Bert, BertConfig, MaskedLMHead
from minilm.nn import TransformerEmbedding, TransformerEncoder, check_sharing


@dataclass
class AlbertConfig(BertConfig):
    """:class:`BertConfig` with ALBERT's fields and defaults (albert-base-v2: 12M parameters)."""

    vocab_size: int = 30000  # SentencePiece vocabulary
    embedding_size: int = 128  # E: the token embeddings' size, projected to d_model (H) = 768
    share: str = "all"  # cross-layer sharing: "all" (ALBERT), "attention", "ffn" or "none" (BERT)
    n_groups: int = 1  # layer groups, each with its own weights (the reference code's num_hidden_groups)
    dropout: float = 0.0  # ALBERT v2 trains without dropout (v1: 0.1)
    attention_dropout: float = 0.0
    activation: str = "gelu_new"  # the tanh approximation of GELU
    nsp: bool = False  # ALBERT has no NSP head...
    sop: bool = True  # ...but a sentence-order-prediction head on the pooled output
    classifier_dropout: float = 0.1  # before the SOP head

    def validate(self) -> None:
        super().validate()
        check_sharing(self.share, self.n_layers, self.n_groups)
        if self.embedding_size < 1:
            raise ValueError(f"embedding_size must be >= 1, got {self.embedding_size} (ALBERT uses 128)")
        if self.sop and not self.pooler:
            raise ValueError("the SOP head reads the pooled output: sop=True needs pooler=True")


# name -> AlbertConfig overrides: the v2 configurations (Table 1's sizes). Parameter counts of AlbertModel
ALBERT_PRESETS = {
    "albert-base": {},  # 11,683,584 ("12M")
    "albert-large": dict(n_layers=24, n_heads=16, d_model=1024, d_ff=4096),  # 17,683,968 ("18M")
    "albert-xlarge": dict(n_layers=24, n_heads=16, d_model=2048, d_ff=8192),  # 58,724,864 ("60M")
    "albert-xxlarge": dict(n_layers=12, n_heads=64, d_model=4096, d_ff=16384),  # 222,595,584 (the paper says 235M)
}
# small sizes for pretraining on a CPU or one GPU (vocab_size comes from the tokenizer trained for the run)
ALBERT_SIZES = {
    "tiny": dict(n_layers=4, n_heads=4, d_model=256, d_ff=1024, max_len=256, embedding_size=64),
    "small": dict(n_layers=6, n_heads=6, d_model=384, d_ff=1536, max_len=512, embedding_size=128),
    **ALBERT_PRESETS,
}


def albert_config(name: str, **overrides) -> AlbertConfig:
    """The :class:`AlbertConfig` of a preset of :data:`ALBERT_PRESETS` (or a pretraining size), with ``overrides``."""
    if name not in ALBERT_SIZES:
        raise ValueError(f"unknown ALBERT preset {name!r}; choose one of {', '.join(ALBERT_SIZES)}")
    return AlbertConfig(**{**ALBERT_SIZES[name], **overrides})


class Albert(Bert):
    """ALBERT encoder with its pretraining heads: :class:`Bert`'s, with a factorized embedding, layers that share
    their weights and a sentence-order-prediction head instead of NSP.

    Submodules: ``embedding`` (token, position, segment of size E, norm, ``projection`` E -> H), ``encoder``
    (``layers``: one block per group with ``share="all"``), ``pooler``, ``mlm_head`` (H -> E -> V, decoder tied
    to ``embedding.token``), ``sop_head`` (or None).
    """

    def __init__(self, config: AlbertConfig) -> None:
        super().__init__(config)
        self.sop_head = nn.Linear(config.d_model, 2) if config.sop else None
        if self.sop_head is not None:
            self._init_weights(self.sop_head)

    def _embedding(self, c: AlbertConfig, d_embedding: int | None = None) -> TransformerEmbedding:
        return super()._embedding(c, d_embedding=c.embedding_size)  # V×E + E×H instead of V×H

    def _encoder(self, c: AlbertConfig) -> TransformerEncoder:
        return TransformerEncoder(c.block(), c.n_layers, final_norm=c.norm_first, share=c.share, n_groups=c.n_groups)

    def _mlm_head(self, c: AlbertConfig, d_embedding: int | None = None) -> MaskedLMHead:
        return super()._mlm_head(c, d_embedding=c.embedding_size)  # H -> E, then the tied E -> V decoder

    def sop_logits(self, hidden: Tensor) -> Tensor:
        """Final hidden states (B, T, C) -> sentence-order logits (B, 2): 0 = in order (A then B), 1 = swapped."""
        if self.sop_head is None:
            raise ValueError("this model has no SOP head (config.sop=False, or its checkpoint had none)")
        pooled = F.dropout(self.pool(hidden), self.config.classifier_dropout, self.training)
        return self.sop_head(pooled)
