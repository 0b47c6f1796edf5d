"""DistilBERT (Sanh et al. 2019, "DistilBERT, a distilled version of BERT: smaller, faster, cheaper and lighter"):
BERT with half the layers, trained to imitate a BERT teacher. A configuration of :class:`~minilm.models.bert.Bert`.

    ids ──► token + position embedding, LayerNorm ──► 6 × EncoderBlock (post-LN) ──► hidden      (no segments)
    hidden ──► MLM head: Linear, GELU, LayerNorm ──► Linear (tied to the token embedding) + bias ──► vocabulary logits

§3, "Student architecture": "In the present work, the student - DistilBERT - has the same general architecture as
BERT. The token-type embeddings and the pooler are removed while the number of layers is reduced by a factor of 2."
There is no next-sentence prediction either. Everything else is BERT-base's: H = 768, 12 heads, FFN 3072, GELU,
LayerNorm eps 1e-12; 66M parameters instead of 110M (:data:`DISTILBERT_PRESETS`).

§3, "Student initialization": "we initialize the student from the teacher by taking one layer out of two"
(:func:`student_from_teacher`, :func:`init_from_teacher`). Here "one layer out of two" is layers 0, 2, 4, ... of the
teacher by default (:func:`every_other_layer`); the authors' extraction script (``scripts/extract_distilbert.py``
in Hugging Face's ``examples/research_projects/distillation``) takes 0, 2, 4, 7, 9, 11 of BERT-base's twelve, which
``layers=`` reproduces. The token and position embeddings, their LayerNorm and the MLM head are copied; the teacher's
token-type embeddings are dropped, as that script drops them (its sentence-A row is a constant vector added to every
input of the teacher, so the student starts slightly off the teacher's function; training closes the gap).

The training objective (a soft-target loss on the teacher's distribution, the MLM loss and a cosine loss on the
hidden states) is :mod:`minilm.objectives.distillation`; :mod:`minilm.recipes.distilbert` trains a student from the
command line. Hugging Face checkpoints (``DistilBertModel``, ``DistilBertForMaskedLM``) load with
:meth:`DistilBert.from_pretrained` and save with :meth:`DistilBert.save_pretrained` (converter:
:mod:`minilm.models.hf.distilbert`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from minilm.models.bert import BERT_SIZES, Bert, BertConfig, RobertaConfig


@dataclass
class DistilBertConfig(BertConfig):
    """:class:`BertConfig` with DistilBERT's defaults: BERT-base with 6 layers, no segments, no pooler, no NSP."""

    n_layers: int = 6  # half of BERT-base's 12 (§3: "reduced by a factor of 2")
    n_segments: int = 0  # no token-type embeddings
    pooler: bool = False  # no pooler (and so no NSP head)
    nsp: bool = False


# name -> DistilBertConfig overrides. Parameter count of transformers' DistilBertModel (the paper says 66M)
DISTILBERT_PRESETS = {
    "distilbert-base": {},  # 66,362,880; with the MLM head (DistilBertForMaskedLM) 66,985,530
}
# small sizes for distilling on a CPU or one GPU: BERT's tiny and small with half their layers, so that a student
# of a size takes every other layer of a BERT teacher of the same size (vocab_size comes from the tokenizer)
DISTILBERT_SIZES = {
    "tiny": {**BERT_SIZES["tiny"], "n_layers": BERT_SIZES["tiny"]["n_layers"] // 2},
    "small": {**BERT_SIZES["small"], "n_layers": BERT_SIZES["small"]["n_layers"] // 2},
    **DISTILBERT_PRESETS,
}


def distilbert_config(name: str, **overrides) -> DistilBertConfig:
    """The :class:`DistilBertConfig` of a preset of :data:`DISTILBERT_PRESETS` (or a distilling size), with
    ``overrides``."""
    if name not in DISTILBERT_SIZES:
        raise ValueError(f"unknown DistilBERT preset {name!r}; choose one of {', '.join(DISTILBERT_SIZES)}")
    return DistilBertConfig(**{**DISTILBERT_SIZES[name], **overrides})


class DistilBert(Bert):
    """A DistilBERT encoder with its MLM head: :class:`Bert` built from a :class:`DistilBertConfig` (no segment
    embeddings, no pooler, no NSP head; ``token_type_ids`` are accepted and ignored, so BERT's tokenizer, which
    marks sentence B with 1, feeds it sentence pairs).

    Submodules: ``embedding`` (token, position, norm), ``encoder`` (``layers``; post-LN, no final norm),
    ``mlm_head`` (or None; ``decoder.weight`` is ``embedding.token.weight``).
    """

    def __init__(self, config: DistilBertConfig) -> None:
        if config.n_segments or config.pooler or config.nsp:
            raise ValueError(
                "DistilBERT has no token-type embeddings, pooler or NSP head (§3): use n_segments=0, pooler=False, "
                f"nsp=False (got n_segments={config.n_segments}, pooler={config.pooler}, nsp={config.nsp})"
            )
        super().__init__(config)


# --- initialisation from a teacher --------------------------------------------------------------------------------


def every_other_layer(n_student: int, n_teacher: int) -> list[int]:
    """The teacher layers a student of ``n_student`` layers starts from: 0, 2, 4, ... (§3: "one layer out of two")."""
    layers = list(range(0, 2 * n_student, 2))
    if layers[-1] >= n_teacher:
        raise ValueError(
            f"a student of {n_student} layers takes every other layer of a teacher of at least {2 * n_student - 1} "
            f"layers, not {n_teacher}; give layers= explicitly (e.g. {list(range(min(n_student, n_teacher)))})"
        )
    return layers


def check_teacher(teacher: Bert) -> None:
    """A ValueError unless ``teacher`` is a BERT (or DistilBERT) whose layers a DistilBERT can take; the family is
    checked first, so that a teacher of another family (GPT, BART, T5) is named as such."""
    if not isinstance(teacher, Bert) or type(teacher.config) not in (BertConfig, DistilBertConfig, RobertaConfig):
        raise ValueError(
            f"a DistilBERT student copies the weights of a BERT or DistilBERT teacher, not of a "
            f"{type(teacher).__name__} ({type(getattr(teacher, 'config', None)).__name__}): only BERT-family "
            "encoders can teach"
        )
    if teacher.config.position_offset:
        raise ValueError("a DistilBERT student has BERT's positions (0..T-1); this teacher counts RoBERTa's")
    if type(teacher.config) not in (BertConfig, DistilBertConfig):
        raise ValueError(
            f"a DistilBERT student copies the weights of a BERT or DistilBERT teacher, not of a "
            f"{type(teacher).__name__} ({type(teacher.config).__name__}: its embeddings or layers differ)"
        )


def init_from_teacher(student: DistilBert, teacher: Bert, layers: Sequence[int] | None = None) -> DistilBert:
    """Copy ``teacher``'s weights into ``student`` (in place; returned): token and position embeddings and their
    LayerNorm, teacher layer ``layers[j]`` into student layer j (default :func:`every_other_layer`), and the MLM
    head when both have one. The teacher's token-type embeddings are dropped (see the module's docstring).

    Raises a ValueError naming the difference when the student cannot hold them: another width, heads, FFN size,
    activation or vocabulary, more positions than the teacher has, or ``layers`` that do not fit.
    """
    check_teacher(teacher)
    s, t = student.config, teacher.config
    fields = ("d_model", "n_heads", "d_ff", "vocab_size", "activation", "norm_eps", "pad_id")
    differ = [f"{f} {getattr(s, f)} vs {getattr(t, f)}" for f in fields if getattr(s, f) != getattr(t, f)]
    if s.max_len > t.max_len:
        differ.append(f"max_len {s.max_len} vs {t.max_len} (the teacher has fewer positions)")
    if differ:
        raise ValueError(f"the student cannot start from the teacher's weights: {'; '.join(differ)} (student, teacher)")
    layers = every_other_layer(s.n_layers, t.n_layers) if layers is None else list(layers)
    if len(layers) != s.n_layers or any(not 0 <= i < t.n_layers for i in layers) or len(set(layers)) != len(layers):
        raise ValueError(
            f"layers={layers} must name {s.n_layers} distinct teacher layers (the student's depth), each in "
            f"0..{t.n_layers - 1}"
        )
    with torch.no_grad():
        student.embedding.token.weight.copy_(teacher.embedding.token.weight)  # also the tied MLM decoder
        student.embedding.position.weight.copy_(teacher.embedding.position.weight[: s.max_len])
        student.embedding.norm.load_state_dict(teacher.embedding.norm.state_dict())
        for ours, theirs in enumerate(layers):
            student.encoder.layers[ours].load_state_dict(teacher.encoder.layers[theirs].state_dict())
        if student.mlm_head is not None and teacher.mlm_head is not None:
            student.mlm_head.transform.load_state_dict(teacher.mlm_head.transform.state_dict())
            student.mlm_head.norm.load_state_dict(teacher.mlm_head.norm.state_dict())
            student.mlm_head.decoder.bias.copy_(teacher.mlm_head.decoder.bias)
    return student


def student_from_teacher(teacher: Bert, layers: Sequence[int] | None = None, **overrides) -> DistilBert:
    """A DistilBERT with ``teacher``'s sizes and ``len(layers)`` layers (default: half the teacher's, rounded up),
    initialised from the teacher (:func:`init_from_teacher`); it has an MLM head when the teacher has one.
    ``overrides``: other :class:`DistilBertConfig` values that keep the weights' shapes (dropout, say)."""
    check_teacher(teacher)
    t = teacher.config
    n_layers = len(layers) if layers is not None else (t.n_layers + 1) // 2
    shared = {f.name: getattr(t, f.name) for f in dataclasses.fields(BertConfig)}
    config = DistilBertConfig(
        **{**shared, "n_layers": n_layers, "n_segments": 0, "pooler": False, "nsp": False, **overrides}
    )
    with torch.device(teacher.embedding.token.weight.device):
        student = DistilBert(config)
    return init_from_teacher(student, teacher, layers).train(teacher.training)
