"""BERT (Devlin et al. 2019) and RoBERTa (Liu et al. 2019): a bidirectional Transformer encoder, composed from
:mod:`minilm.nn`, with BERT's pretraining heads.

    ids, segments ──► token + position + segment embedding, LayerNorm ──► N × EncoderBlock (post-LN) ──► hidden
    hidden ──► MLM head: Linear, GELU, LayerNorm ──► Linear (tied to the token embedding) + bias ──► vocabulary logits
    hidden[:, 0] ──► pooler: Linear, tanh ──► NSP head: Linear(d, 2) ──► IsNext / NotNext logits

RoBERTa is a configuration of the same code (:class:`RobertaConfig`): a byte-level BPE vocabulary, no next-sentence
prediction, LayerNorm eps 1e-5, a single segment row (its checkpoints keep a one-row ``token_type_embeddings``: a
learned vector added to every token, no segment information), and positions counted from ``padding_idx + 1`` with
padding tokens on row ``padding_idx``, as Hugging Face's ``create_position_ids_from_input_ids`` does.

Weights are initialised as in the paper's code: truncated N(0, 0.02) (cut at two standard deviations) for every
matrix and embedding, zero biases, LayerNorm gain 1. Hugging Face checkpoints load with :meth:`Bert.from_pretrained`
(the heads the file has are built) and save with :meth:`Bert.save_pretrained` (converters:
:mod:`minilm.models.hf.bert`, :mod:`minilm.models.hf.roberta`).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor, nn

from minilm.models.pretrained import PretrainedMixin
from minilm.nn import (
    ACTIVATIONS,
    BlockConfig,
    TransformerEmbedding,
    TransformerEncoder,
    TransformerOutput,
    check_token_ids,
    padding_mask,
)
from minilm.ranges import MODEL_RANGES, check_ranges


@dataclass
class BertConfig:
    vocab_size: int = 30522  # BERT's uncased WordPiece vocabulary (RoBERTa: 50265 byte-level BPE tokens)
    max_len: int = 512  # number of learned positions
    n_layers: int = 12
    n_heads: int = 12
    d_model: int = 768  # width of the residual stream ("hidden size")
    d_ff: int = 3072  # feed-forward inner size ("intermediate size"), 4 * d_model in the paper
    dropout: float = 0.1  # on the embeddings and every sublayer's output
    attention_dropout: float = 0.1  # on the attention weights
    n_segments: int = 2  # segment ("token type") embeddings: sentence A / B; RoBERTa 1, 0 for none
    norm_eps: float = 1e-12  # LayerNorm epsilon (RoBERTa: 1e-5)
    activation: str = "gelu"  # feed-forward and MLM-transform activation: "gelu" (exact), "gelu_new", "relu", "silu"
    pad_id: int = 0  # padding token: its embedding row starts at zero (RoBERTa: 1)
    position_offset: int = 0  # 0: positions 0..T-1 (BERT); pad_id + 1: RoBERTa's, counted over non-pad tokens only
    pooler: bool = True  # the pooler (Linear + tanh on the first token), which NSP and RobertaModel use
    mlm: bool = True  # the masked-language-model head (transform + decoder tied to the token embedding + bias)
    nsp: bool = True  # the next-sentence-prediction head on the pooled output (BERT only; needs the pooler)
    init_std: float = 0.02  # standard deviation of the (truncated) normal initialisation
    norm_first: bool = False  # True: pre-LN blocks and a final LayerNorm (not BERT's; no Hugging Face layout)

    def validate(self) -> None:
        self.block().validate()
        if self.activation not in ACTIVATIONS:
            raise ValueError(f"unknown activation {self.activation!r}; expected one of {sorted(ACTIVATIONS)}")
        if self.position_offset not in (0, self.pad_id + 1):
            raise ValueError(
                f"position_offset={self.position_offset}: use 0 (BERT) or pad_id + 1 = {self.pad_id + 1} (RoBERTa)"
            )
        if self.nsp and not self.pooler:
            raise ValueError("the NSP head reads the pooled output: nsp=True needs pooler=True")
        if not 0 <= self.pad_id < self.vocab_size:
            raise ValueError(f"pad_id={self.pad_id} is outside the vocabulary of {self.vocab_size}")
        if self.n_segments < 0:
            raise ValueError(f"n_segments must be >= 0, got {self.n_segments}")
        check_ranges(self, MODEL_RANGES)

    def block(self) -> BlockConfig:
        return BlockConfig(
            d_model=self.d_model,
            n_heads=self.n_heads,
            d_ff=self.d_ff,
            dropout=self.dropout,
            attention_dropout=self.attention_dropout,
            activation=self.activation,
            norm_eps=self.norm_eps,
            norm_first=self.norm_first,  # BERT's post-LN: x = LayerNorm(x + Sublayer(x))
        )


# RoBERTa's differences from BERT (the sizes are BERT's)
ROBERTA = dict(vocab_size=50265, n_segments=1, norm_eps=1e-5, pad_id=1, position_offset=2, nsp=False)


@dataclass
class RobertaConfig(BertConfig):
    """:class:`BertConfig` with RoBERTa's defaults (the same fields; the registry builds RoBERTa from it)."""

    vocab_size: int = ROBERTA["vocab_size"]
    n_segments: int = ROBERTA["n_segments"]
    norm_eps: float = ROBERTA["norm_eps"]
    pad_id: int = ROBERTA["pad_id"]
    position_offset: int = ROBERTA["position_offset"]
    nsp: bool = ROBERTA["nsp"]


_LARGE = dict(n_layers=24, n_heads=16, d_model=1024, d_ff=4096)
# name -> BertConfig overrides. Parameter counts of the encoder with its pooler (transformers' BertModel/RobertaModel)
BERT_PRESETS = {
    "bert-base": {},  # 109,482,240 ("110M")
    "bert-large": dict(_LARGE),  # 335,141,888 ("340M")
    "roberta-base": dict(ROBERTA),  # 124,645,632 ("125M")
    "roberta-large": {**ROBERTA, **_LARGE},  # 355,359,744 ("355M")
    "minilm-l6": dict(n_layers=6, n_heads=12, d_model=384, d_ff=1536),  # all-MiniLM-L6-v2: 22,713,216
}
# small sizes for pretraining on a CPU or one GPU (vocab_size comes from the tokenizer trained for the run)
_TINY = dict(n_layers=4, n_heads=4, d_model=256, d_ff=1024, max_len=256, dropout=0.0, attention_dropout=0.0)
_SMALL = dict(n_layers=6, n_heads=6, d_model=384, d_ff=1536, max_len=512)
BERT_SIZES = {"tiny": _TINY, "small": _SMALL, **{k: v for k, v in BERT_PRESETS.items() if "roberta" not in k}}
# RoBERTa pretrains with MLM alone: no pooler, so that every parameter gets a gradient (DDP needs that)
ROBERTA_SIZES = {
    "tiny": {**ROBERTA, **_TINY, "pooler": False},
    "small": {**ROBERTA, **_SMALL, "pooler": False},
    **{k: v for k, v in BERT_PRESETS.items() if "roberta" in k},
}


def bert_config(name: str, **overrides) -> BertConfig:
    """The :class:`BertConfig` of a preset of :data:`BERT_PRESETS` (or a pretraining size), with ``overrides``."""
    presets = {**BERT_SIZES, **BERT_PRESETS}
    if name not in presets:
        raise ValueError(f"unknown BERT preset {name!r}; choose one of {', '.join(presets)}")
    return BertConfig(**{**presets[name], **overrides})


def roberta_position_ids(input_ids: Tensor, pad_id: int) -> Tensor:
    """(B, T) -> (B, T): 0, 1, 2, ... over the non-pad tokens, -1 on padding.

    With the position table's offset of pad_id + 1, row = position + pad_id + 1: the rows of Hugging Face's
    ``create_position_ids_from_input_ids`` (pad_id + 1 + count of earlier non-pad tokens; pad_id for padding).
    """
    real = (input_ids != pad_id).long()
    return (real.cumsum(dim=1) - 1) * real - (1 - real)


class Pooler(nn.Module):
    """tanh(dense(hidden[:, 0])): the first token's final hidden state ([CLS], <s>) as the sequence's vector."""

    def __init__(self, d_model: int) -> None:
        super().__init__()
        self.dense = nn.Linear(d_model, d_model)

    def forward(self, hidden: Tensor) -> Tensor:
        """(B, T, C) -> (B, C)."""
        return torch.tanh(self.dense(hidden[:, 0]))


class MaskedLMHead(nn.Module):
    """decoder(LayerNorm(act(transform(h)))): ``decoder.weight`` is the token embedding; ``decoder.bias`` its own.

    ``d_embedding``: the token embeddings' size when it is not ``d_model`` (ALBERT's factorized embedding, E): the
    transform then maps H -> E, and the decoder E -> V.
    """

    def __init__(
        self, d_model: int, vocab_size: int, activation: str, norm_eps: float, d_embedding: int | None = None
    ) -> None:
        super().__init__()
        d_embedding = d_embedding or d_model
        self.transform = nn.Linear(d_model, d_embedding)
        self.activation = ACTIVATIONS[activation]
        self.norm = nn.LayerNorm(d_embedding, eps=norm_eps)
        self.decoder = nn.Linear(d_embedding, vocab_size)  # weight tied by Bert

    def states(self, hidden: Tensor) -> Tensor:
        """(..., C) -> (..., E): what the decoder scores against the vocabulary (a fused loss takes these)."""
        return self.norm(self.activation(self.transform(hidden)))

    def forward(self, hidden: Tensor) -> Tensor:
        """(..., C) -> (..., V)."""
        return self.decoder(self.states(hidden))


class Bert(PretrainedMixin, nn.Module):
    """BERT / RoBERTa encoder with its pretraining heads.

    Submodules: ``embedding`` (token, position, segment, norm), ``encoder`` (``layers``; post-LN, no final norm),
    ``pooler`` (or None), ``mlm_head`` (or None; ``decoder.weight`` is ``embedding.token.weight``), ``nsp_head``
    (or None).
    """

    def __init__(self, config: BertConfig) -> None:
        super().__init__()
        config.validate()
        self.config = config
        c = config
        self.embedding = self._embedding(c)
        self.encoder = self._encoder(c)
        self.pooler = Pooler(c.d_model) if c.pooler else None
        self.mlm_head = self._mlm_head(c) if c.mlm else None
        self.nsp_head = nn.Linear(c.d_model, 2) if c.nsp else None
        self.apply(self._init_weights)
        if self.mlm_head is not None:
            self.mlm_head.decoder.weight = self.embedding.token.weight  # weight tying, as in BERT's code

    # The parts a variant changes (ALBERT: a factorized embedding of size E, shared layers, an E-sized MLM head)
    def _embedding(self, c: BertConfig, d_embedding: int | None = None) -> TransformerEmbedding:
        return TransformerEmbedding(
            c.vocab_size,
            d_embedding or c.d_model,
            c.max_len,
            position="learned",
            n_segments=c.n_segments,
            norm=True,
            dropout=c.dropout,
            padding_idx=c.pad_id,
            position_offset=c.position_offset,
            norm_eps=c.norm_eps,
            project_to=c.d_model if d_embedding else None,  # E -> H
        )

    def _encoder(self, c: BertConfig) -> TransformerEncoder:
        return TransformerEncoder(c.block(), c.n_layers, final_norm=c.norm_first)  # pre-LN stacks end with a norm

    def _mlm_head(self, c: BertConfig, d_embedding: int | None = None) -> MaskedLMHead:
        return MaskedLMHead(c.d_model, c.vocab_size, c.activation, c.norm_eps, d_embedding)

    @torch.no_grad()
    def _init_weights(self, module: nn.Module) -> None:
        std = self.config.init_std
        if isinstance(module, (nn.Linear, nn.Embedding)):
            nn.init.trunc_normal_(module.weight, std=std, a=-2 * std, b=2 * std)
        if isinstance(module, nn.Linear) and module.bias is not None:
            nn.init.zeros_(module.bias)
        if isinstance(module, nn.Embedding) and module.padding_idx is not None:
            module.weight[module.padding_idx].zero_()
        if module is self.embedding.position and self.config.position_offset:
            module.weight[: self.config.position_offset].zero_()  # rows before the first position (padding's)

    # --- the encoder ------------------------------------------------------------------------------------------

    def _check_inputs(self, input_ids: Tensor, attention_mask: Tensor | None, token_type_ids: Tensor | None) -> None:
        c = self.config
        check_token_ids(input_ids, c.vocab_size, attention_mask)
        if token_type_ids is not None and not torch.compiler.is_compiling():
            if token_type_ids.shape != input_ids.shape:
                raise ValueError(
                    f"token_type_ids {tuple(token_type_ids.shape)} must have the shape of input_ids "
                    f"{tuple(input_ids.shape)}"
                )
            if not c.n_segments:  # no segment embeddings (DistilBERT): token types are ignored, whatever they are
                return
            n = c.n_segments
            lo, hi = (int(v) for v in torch.aminmax(token_type_ids)) if token_type_ids.numel() else (0, 0)
            if lo < 0 or hi >= n:
                raise ValueError(
                    f"token_type_ids must lie in 0..{n - 1}: this model has {c.n_segments} segment embedding(s)"
                    + (" (RoBERTa does not mark sentence B)" if c.n_segments <= 1 else "")
                )

    def features(
        self,
        input_ids: Tensor,
        attention_mask: Tensor | None = None,
        token_type_ids: Tensor | None = None,
        output_hidden_states: bool = False,
        output_attentions: bool = False,
    ) -> TransformerOutput:
        """input_ids (B, T) -> TransformerOutput: last_hidden_state (B, T, C) [, hidden_states, attentions].

        ``attention_mask`` (B, T) 0/1: padding keys are never attended to (None: every position is real).
        ``token_type_ids`` (B, T): segment of each token, 0 = sentence A, 1 = sentence B (None: all 0); ignored by
        a model without segment embeddings (n_segments=0: DistilBERT), which has no sentence B to mark.
        """
        self._check_inputs(input_ids, attention_mask, token_type_ids)
        position_ids = None
        if self.config.position_offset:  # RoBERTa: positions count the non-pad tokens
            position_ids = roberta_position_ids(input_ids, self.config.pad_id)
        x = self.embedding(input_ids, segment_ids=token_type_ids, position_ids=position_ids)  # (B, T, C)
        mask = padding_mask(attention_mask) if attention_mask is not None else None  # (B, 1, 1, T)
        return self.encoder(
            x, mask=mask, output_hidden_states=output_hidden_states, output_attentions=output_attentions
        )

    # --- the heads --------------------------------------------------------------------------------------------

    def pool(self, hidden: Tensor) -> Tensor:
        """Final hidden states (B, T, C) -> the pooled output (B, C): tanh(dense(first token))."""
        if self.pooler is None:
            raise ValueError("this model has no pooler (config.pooler=False, or its checkpoint had none)")
        return self.pooler(hidden)

    def mlm_logits(self, hidden: Tensor, positions: Tensor | None = None) -> Tensor:
        """Vocabulary logits from final hidden states (B, T, C); ``positions`` chooses where.

        None: every position -> (B, T, V). A bool (B, T) mask (e.g. ``labels != -100``): only the True positions,
        in row-major order (that of ``labels[mask]``) -> (N, V). A long tensor of N indices into the flattened
        B * T positions -> (N, V). Scoring only the masked ~15 % skips most of the largest matrix multiply.
        """
        states = self.mlm_states(hidden, positions)  # checks that there is an MLM head
        return self.mlm_head.decoder(states)

    def mlm_states(self, hidden: Tensor, positions: Tensor | None = None) -> Tensor:
        """The MLM head up to its decoder: (B, T, E), or (N, E) at ``positions`` (as in :meth:`mlm_logits`).

        With the decoder's weight and bias they give the MLM loss without the logits
        (:func:`~minilm.objectives.mlm.mlm_loss_from_states`).
        """
        if self.mlm_head is None:
            raise ValueError("this model has no MLM head (config.mlm=False, or its checkpoint had none)")
        if positions is not None:
            if positions.dtype == torch.bool:
                if positions.shape != hidden.shape[:2]:
                    raise ValueError(
                        f"a positions mask must be (B, T) = {tuple(hidden.shape[:2])}, got {tuple(positions.shape)}"
                    )
                hidden = hidden[positions]  # (N, C)
            elif positions.dim() == 1 and not positions.is_floating_point():
                hidden = hidden.reshape(-1, hidden.size(-1))[positions]  # (N, C)
            else:
                raise ValueError("positions must be a bool (B, T) mask or a 1-D long tensor of flat indices")
        return self.mlm_head.states(hidden)

    def nsp_logits(self, hidden: Tensor) -> Tensor:
        """Final hidden states (B, T, C) -> next-sentence logits (B, 2): 0 = IsNext (B follows A), 1 = NotNext."""
        if self.nsp_head is None:
            raise ValueError("this model has no NSP head (config.nsp=False: RoBERTa, or a checkpoint without it)")
        return self.nsp_head(self.pool(hidden))

    def forward(
        self,
        input_ids: Tensor,
        attention_mask: Tensor | None = None,
        token_type_ids: Tensor | None = None,
        masked_positions: Tensor | None = None,
        output_hidden_states: bool = False,
    ) -> Tensor | tuple[Tensor, TransformerOutput]:
        """input_ids (B, T) -> MLM logits (B, T, V), or (N, V) at ``masked_positions`` (see :meth:`mlm_logits`).

        With ``output_hidden_states`` also the TransformerOutput (NSP: ``nsp_logits(out.last_hidden_state)``).
        """
        out = self.features(input_ids, attention_mask, token_type_ids, output_hidden_states=output_hidden_states)
        logits = self.mlm_logits(out.last_hidden_state, masked_positions)
        return (logits, out) if output_hidden_states else logits
