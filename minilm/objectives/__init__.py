"""Pretraining objectives as pure functions: corrupt a batch, compute a loss, build inputs from documents. No model
knowledge. Modules: ``causal_lm``, ``bilm``, ``mlm``, ``nsp``, ``sop``, ``rtd`` (ELECTRA's replaced-token detection
and its ablations); ``segments`` (templates, segment and sentence pairs and their classifier's loss, shared by pair
objectives), ``formats`` (RoBERTa's input formats, with NSP or SOP labels), ``labels`` (the ignored label)."""

from .bilm import bilm_loss, bilm_loss_from_states
from .causal_lm import causal_lm_loss, causal_lm_loss_from_states, language_model_blocks
from .formats import (
    FORMATS,
    PAIR_FORMATS,
    PAIR_OBJECTIVES,
    doc_sentences,
    full_sentences,
    make_examples,
    segment_pair,
    tokenize_documents,
)
from .labels import IGNORE_INDEX
from .mlm import (
    DynamicMasking,
    MaskingConfig,
    StaticMaskedDataset,
    is_word_start,
    mask_tokens,
    masked_positions,
    mlm_loss,
    mlm_loss_from_states,
    ngram_spans,
    pad_batch,
    word_ids_from_encoding,
    word_ids_from_starts,
)
from .nsp import IS_NEXT, NOT_NEXT, nsp_loss, nsp_pairs, sentence_pair
from .rtd import RTD_WEIGHT, copy_mlm_loss, replace_tokens, rtd_loss, sample_replacements
from .segments import Template, pair_classifier_loss, random_segment, segment_pairs, sentence_pairs, truncate_pair
from .sop import IN_ORDER, SWAPPED, sop_loss, sop_pairs, sop_sentence_pairs

__all__ = [
    "FORMATS",
    "IGNORE_INDEX",
    "IN_ORDER",
    "IS_NEXT",
    "NOT_NEXT",
    "PAIR_FORMATS",
    "PAIR_OBJECTIVES",
    "RTD_WEIGHT",
    "SWAPPED",
    "DynamicMasking",
    "MaskingConfig",
    "StaticMaskedDataset",
    "Template",
    "bilm_loss",
    "bilm_loss_from_states",
    "causal_lm_loss",
    "causal_lm_loss_from_states",
    "copy_mlm_loss",
    "doc_sentences",
    "full_sentences",
    "is_word_start",
    "language_model_blocks",
    "make_examples",
    "mask_tokens",
    "masked_positions",
    "mlm_loss",
    "mlm_loss_from_states",
    "ngram_spans",
    "nsp_loss",
    "nsp_pairs",
    "pad_batch",
    "pair_classifier_loss",
    "random_segment",
    "replace_tokens",
    "rtd_loss",
    "sample_replacements",
    "segment_pair",
    "segment_pairs",
    "sentence_pair",
    "sentence_pairs",
    "sop_loss",
    "sop_pairs",
    "sop_sentence_pairs",
    "tokenize_documents",
    "truncate_pair",
    "word_ids_from_encoding",
    "word_ids_from_starts",
]
