"""BERT and RoBERTa with masked language modelling, and BERT's next sentence prediction (Devlin et al. 2019;
Liu et al. 2019): ``python -m minilm.train --model bert --objective mlm+nsp`` or ``--model roberta --objective mlm``.

Both objectives take the input format of RoBERTa's §4.2 and the masking (``format=``, ``masking=``,
``whole_word=``, ``ngram=``; :class:`MaskedLMConfig`). They train ALBERT too (:mod:`minilm.recipes.albert`, which
adds its sentence-order prediction), and ``mlm`` trains ELECTRA's encoder as the BERT it is compared with
(:mod:`minilm.recipes.electra`); a model without another head's field (BERT has no SOP head) ignores it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from minilm.models.bert import BERT_SIZES, ROBERTA_SIZES, Bert, BertConfig, RobertaConfig
from minilm.objectives.formats import FORMATS, PAIR_FORMATS, make_examples
from minilm.objectives.labels import IGNORE_INDEX
from minilm.objectives.mlm import (
    DynamicMasking,
    MaskingConfig,
    StaticMaskedDataset,
    masked_positions,
    mlm_loss_from_states,
)
from minilm.objectives.nsp import nsp_loss
from minilm.train.config import ConfigError, choice
from minilm.train.registry import ModelEntry, ObjectiveEntry, register_model, register_objective
from minilm.train.trainer import LossOutput


@dataclass
class MaskedLMConfig:
    format: str = "full_sentences"  # input format: segment_pair, sentence_pair, full_sentences or doc_sentences
    masking: str = "dynamic"  # "dynamic" (new masks every batch) or "static" (10 fixed copies)
    whole_word: bool = False  # mask all the sub-words of a chosen word together
    ngram: int = 1  # mask spans of up to n words (tokens without whole_word), p(n) ∝ 1/n; ALBERT: 3

    pair_objective: ClassVar[str | None] = None  # what labels a pair format's pairs (None: NSP's, unused)

    def validate(self) -> None:
        choice(self.format, FORMATS, "format")
        choice(self.masking, ("dynamic", "static"), "masking")
        if isinstance(self.ngram, bool) or not isinstance(self.ngram, int) or self.ngram < 1:
            raise ConfigError(f"ngram must be a whole number >= 1 (1: single words or tokens), got {self.ngram!r}")

    def mask_config(self, tokenizer) -> MaskingConfig:
        """The masking of these settings for ``tokenizer`` (BERT's 15%, 80/10/10; ELECTRA's recipe changes it)."""
        return MaskingConfig.from_tokenizer(tokenizer, whole_word=self.whole_word, ngram=self.ngram)


@dataclass
class MaskedLMPairConfig(MaskedLMConfig):
    """:class:`MaskedLMConfig` for MLM + NSP: a format of sentence pairs, BERT's segment pairs by default."""

    format: str = "segment_pair"  # segment_pair (BERT's) or sentence_pair: NSP needs pairs

    pair_objective: ClassVar[str | None] = "nsp"

    def validate(self) -> None:
        super().validate()
        if self.format not in PAIR_FORMATS:
            raise ConfigError(
                f"objective mlm+{self.pair_objective} needs sentence pairs: format=segment_pair (BERT's) or "
                f"sentence_pair, not {self.format!r}"
            )


def masked_lm_examples(documents, tokenizer, job, settings: MaskedLMConfig, validation: bool = False):
    """Examples in the settings' input format, masked at batch time (dynamic) or once for all (static, 10 copies).

    Validation examples are masked once, with a fixed seed, so successive evaluations are comparable.
    """
    try:
        examples = make_examples(
            settings.format,
            documents,
            tokenizer,
            max_tokens=job.seq_len,
            seed=job.seed,
            pair_objective=settings.pair_objective,
        )
    except ValueError as err:
        raise ConfigError(str(err)) from None
    masking = settings.mask_config(tokenizer)
    if validation or settings.masking == "static":
        masked = StaticMaskedDataset(examples, masking, n_duplicates=1 if validation else 10, seed=job.seed)
        return masked, masked.collate
    return examples, DynamicMasking(masking)


def masked_lm(model, batch):
    """(final hidden states, the MLM loss at the masked positions) of a BERT-like model on a masked batch."""
    hidden = model.features(batch["input_ids"], batch["attention_mask"], batch["token_type_ids"]).last_hidden_state
    states = model.mlm_states(hidden, masked_positions(batch["labels"]))  # (|M|, E): only where masked
    return hidden, mlm_loss_from_states(states, model.mlm_head.decoder, batch["labels"])  # decoder + loss fused


def bert_mlm_loss(model, batch) -> LossOutput:
    """The mean cross-entropy over the batch's masked tokens."""
    _, loss = masked_lm(model, batch)
    return LossOutput(loss, n_tokens=int(batch["attention_mask"].sum()))


def bert_mlm_nsp_loss(model, batch) -> LossOutput:
    """BERT's pretraining loss: the MLM loss (a mean over masked tokens) plus the NSP loss (a mean over pairs)."""
    hidden, mlm = masked_lm(model, batch)
    nsp = nsp_loss(model.nsp_logits(hidden), batch["next_sentence_label"])
    return LossOutput(mlm + nsp, n_tokens=int(batch["attention_mask"].sum()), parts={"mlm": mlm, "nsp": nsp})


def masked_tokens(batch) -> int:
    return int((batch["labels"] != IGNORE_INDEX).sum())


def mlm_counts(batch) -> dict[str, int]:
    return {"loss": masked_tokens(batch)}


def mlm_nsp_counts(batch) -> dict[str, int]:
    return {"mlm": masked_tokens(batch), "nsp": batch["next_sentence_label"].numel()}


register_model(ModelEntry("bert", BertConfig, Bert, kind="encoder", sizes=BERT_SIZES, tokenizer_family="bert"))
register_model(
    ModelEntry("roberta", RobertaConfig, Bert, kind="encoder", sizes=ROBERTA_SIZES, tokenizer_family="roberta")
)
register_objective(
    ObjectiveEntry(
        "mlm",
        models=("bert", "roberta", "albert", "electra"),
        prepare=masked_lm_examples,
        loss=bert_mlm_loss,
        counts=mlm_counts,
        perplexity=True,
        config_class=MaskedLMConfig,
        description="masked LM: predict 15% of the tokens, masked 80/10/10",
        # the MLM head, and no head nor pooler left untrained (DDP needs every parameter to get a gradient)
        model_settings={"mlm": True, "nsp": False, "sop": False, "rtd": False, "pooler": False},
    )
)
register_objective(
    ObjectiveEntry(
        "mlm+nsp",
        models=("bert", "albert"),
        prepare=masked_lm_examples,
        loss=bert_mlm_nsp_loss,
        counts=mlm_nsp_counts,
        perplexity="mlm",  # exp of the MLM part; NSP's loss is a classifier's, no perplexity
        config_class=MaskedLMPairConfig,
        description="BERT's MLM + next sentence prediction (a pair format: segment_pair or sentence_pair)",
        model_settings={"nsp": True, "pooler": True, "sop": False},
    )
)
