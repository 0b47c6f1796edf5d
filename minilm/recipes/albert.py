"""ALBERT with masked language modelling and sentence-order prediction (Lan et al. 2020):
``python -m minilm.train --model albert --objective mlm+sop`` (also ``mlm`` and ``mlm+nsp``, from
:mod:`minilm.recipes.bert`), with the model's ``share=``, ``embedding_size=`` and the masking's ``ngram=``.

ALBERT's loss is BERT's with SOP in place of NSP: the MLM loss (a mean over masked tokens) plus the SOP loss (a mean
over pairs), on BERT's segment pairs whose two segments are swapped half the time; the masks are n-grams of up to 3
words, p(n) ∝ 1/n (§4.1).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from minilm.models.albert import ALBERT_SIZES, Albert, AlbertConfig
from minilm.objectives.sop import LABEL_KEY, sop_loss
from minilm.recipes.bert import MaskedLMPairConfig, masked_lm, masked_lm_examples, masked_tokens
from minilm.train.registry import ModelEntry, ObjectiveEntry, register_model, register_objective
from minilm.train.trainer import LossOutput


@dataclass
class SentenceOrderConfig(MaskedLMPairConfig):
    """The masking and pairs of ALBERT's pretraining: segment pairs, whole-word n-grams of up to 3 words."""

    whole_word: bool = True  # n-grams of whole words, as ALBERT's data script (do_whole_word_mask) makes them
    ngram: int = 3  # ALBERT: "We set the maximum length of n-gram (i.e., n) to be 3"

    pair_objective: ClassVar[str | None] = "sop"


def albert_mlm_sop_loss(model, batch) -> LossOutput:
    """ALBERT's pretraining loss: the MLM loss (a mean over masked tokens) plus the SOP loss (a mean over pairs)."""
    hidden, mlm = masked_lm(model, batch)
    sop = sop_loss(model.sop_logits(hidden), batch[LABEL_KEY])
    return LossOutput(mlm + sop, n_tokens=int(batch["attention_mask"].sum()), parts={"mlm": mlm, "sop": sop})


def mlm_sop_counts(batch) -> dict[str, int]:
    return {"mlm": masked_tokens(batch), "sop": batch[LABEL_KEY].numel()}


register_model(
    ModelEntry("albert", AlbertConfig, Albert, kind="encoder", sizes=ALBERT_SIZES, tokenizer_family="albert")
)
register_objective(
    ObjectiveEntry(
        "mlm+sop",
        models=("albert",),
        prepare=masked_lm_examples,
        loss=albert_mlm_sop_loss,
        counts=mlm_sop_counts,
        perplexity="mlm",  # exp of the MLM part; SOP's loss is a classifier's, no perplexity
        config_class=SentenceOrderConfig,
        description="ALBERT's n-gram MLM + sentence-order prediction (a pair format: segment_pair or sentence_pair)",
        model_settings={"sop": True, "pooler": True, "nsp": False},
    )
)
