"""ELECTRA with replaced-token detection (Clark et al. 2020): ``python -m minilm.train --model electra --objective
rtd`` with ``generator_size=``, ``share=``, ``rtd_weight=``, and the paper's efficiency ablations (§3.3, Table 5) as
objectives of their own:

==================  ==============================================================================================
``rtd``             ELECTRA: generator MLM loss + λ · discriminator loss over every real token (λ = 50)
``rtd_15``          "ELECTRA 15%": the discriminator's loss only on the 15% of tokens that were masked
``replace_mlm``     "Replace MLM": MLM whose masked tokens are the generator's samples instead of [MASK]
``all_tokens_mlm``  "All-Tokens MLM": Replace MLM predicting every token, with a copy mechanism
                    p(x_t) = D_t · 1(x_t = x̃_t) + (1 - D_t) · p_MLM(x_t)
``mlm``             BERT (:mod:`minilm.recipes.bert`), on the same encoder
==================  ==============================================================================================

Each wraps the registered model (the discriminator, or the main model of an ablation) with a generator built from
its config (:func:`minilm.models.electra.generator_config`) into one :class:`~minilm.models.electra.ElectraPretraining`
that the Trainer trains and saves; fine-tuning unwraps the discriminator and throws the generator away. The masking
is ELECTRA's: 15% of the tokens, 85% of them shown as [MASK] and 15% unchanged (no random tokens: the generator
supplies the replacements); the generator's samples replace all of them.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from minilm.models.electra import ELECTRA_SIZES, Electra, ElectraConfig, ElectraPretraining, check_generator
from minilm.models.electra import generator_config as electra_generator_config
from minilm.objectives.labels import IGNORE_INDEX
from minilm.objectives.mlm import MaskingConfig, masked_positions, mlm_loss, mlm_loss_from_states
from minilm.objectives.rtd import RTD_WEIGHT, copy_mlm_loss, replace_tokens, rtd_loss, sample_replacements
from minilm.recipes.bert import MaskedLMConfig, masked_lm_examples, masked_tokens
from minilm.train.config import ConfigError
from minilm.train.registry import ModelEntry, ObjectiveEntry, register_model, register_objective
from minilm.train.trainer import LossOutput


@dataclass
class GeneratorConfig(MaskedLMConfig):
    """The generator beside the trained model, and ELECTRA's masking (the settings every objective here shares)."""

    generator_size: float = 0.25  # its width, FFN and heads as a fraction of the model's (§3.2: 1/4-1/2 works best)
    share: str = "embeddings"  # weight sharing with the model: none, embeddings (token + position), all (same size)
    mask_prob: float = 0.15  # fraction of the tokens masked and replaced by samples (ELECTRA-Large: 0.25)
    temperature: float = 1.0  # the generator's sampling temperature

    def validate(self) -> None:
        super().validate()
        try:
            check_generator(self.generator_size, self.share)
        except ValueError as err:
            raise ConfigError(str(err)) from None
        if not 0 < self.mask_prob <= 1:
            raise ConfigError(f"mask_prob={self.mask_prob} must be in (0, 1] (ELECTRA masks 0.15)")
        if self.temperature <= 0:
            raise ConfigError(f"temperature={self.temperature} must be > 0 (1: the generator's own distribution)")

    def mask_config(self, tokenizer) -> MaskingConfig:
        """ELECTRA's masking: ``mask_prob`` of the tokens, 85% of them [MASK] and 15% left as they are."""
        return MaskingConfig.from_tokenizer(
            tokenizer,
            whole_word=self.whole_word,
            ngram=self.ngram,
            mask_prob=self.mask_prob,
            replace_prob=0.85,
            random_prob=0.0,
        )


@dataclass
class ReplacedTokenConfig(GeneratorConfig):
    """:class:`GeneratorConfig` and the weight of the discriminator's loss."""

    rtd_weight: float = RTD_WEIGHT  # λ in L_MLM + λ · L_Disc (§3.1: 50)

    def validate(self) -> None:
        super().validate()
        if not self.rtd_weight > 0:
            raise ConfigError(
                f"rtd_weight={self.rtd_weight} must be > 0: it is λ in L_MLM + λ·L_Disc (ELECTRA: 50); with 0 the "
                "discriminator learns nothing"
            )


def wrap(model: Electra, config: ElectraConfig, settings: GeneratorConfig, tokenizer=None) -> ElectraPretraining:
    """``model`` with a fresh generator beside it, sharing weights as ``settings.share`` says; the settings ride
    along for the loss (λ, the temperature)."""
    generator = Electra(electra_generator_config(config, settings.generator_size, settings.share))
    pair = ElectraPretraining(model, generator, share=settings.share)
    pair.settings = settings
    return pair


def discriminator(pair: ElectraPretraining) -> Electra:
    return pair.discriminator


# ---------------------------------------------------------------------------------------------- losses


def generate(pair: ElectraPretraining, batch) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The generator's turn: (its MLM loss at the masked positions, x_corrupt (B, T), replaced (B, T) bool).

    Training samples from torch's global generator (saved in checkpoints, so resumed runs sample alike); evaluation
    from a fixed seed, so that successive evaluations see the same replacements.
    """
    labels = batch["labels"]
    hidden = pair.generator.features(batch["input_ids"], batch["attention_mask"], batch["token_type_ids"])
    # (|M|, V): the samples need the logits themselves, so the loss is computed from them (not fused)
    logits = pair.generator.mlm_logits(hidden.last_hidden_state, masked_positions(labels))
    rng = None if pair.training else torch.Generator(logits.device).manual_seed(0)
    samples = sample_replacements(logits.detach(), pair.settings.temperature, generator=rng)  # no gradient
    corrupted, replaced = replace_tokens(batch["input_ids"], labels, samples)
    return mlm_loss(logits, labels), corrupted, replaced


def discriminator_hidden(pair: ElectraPretraining, batch, corrupted: torch.Tensor) -> torch.Tensor:
    out = pair.discriminator.features(corrupted, batch["attention_mask"], batch["token_type_ids"])
    return out.last_hidden_state


def _electra(pair: ElectraPretraining, batch, scored: torch.Tensor) -> LossOutput:
    generator_loss, corrupted, replaced = generate(pair, batch)
    logits = pair.discriminator.rtd_logits(discriminator_hidden(pair, batch, corrupted))  # (B, T)
    disc = rtd_loss(logits, replaced, weights=scored)
    weight = pair.settings.rtd_weight
    parts = {"generator": generator_loss, "rtd": disc}
    return LossOutput(generator_loss + weight * disc, real_tokens(batch), parts=parts, weights={"rtd": weight})


def electra_loss(pair: ElectraPretraining, batch) -> LossOutput:
    """L_MLM(x, θ_G) + λ · L_Disc(x, θ_D), the discriminator scored at every real token (parts: generator, rtd)."""
    return _electra(pair, batch, scored=batch["attention_mask"])


def electra_15_loss(pair: ElectraPretraining, batch) -> LossOutput:
    """ELECTRA 15%: as :func:`electra_loss`, the discriminator scored only where the input was masked."""
    return _electra(pair, batch, scored=batch["labels"] != IGNORE_INDEX)


def replace_mlm_loss(pair: ElectraPretraining, batch) -> LossOutput:
    """Replace MLM: the generator's MLM loss plus the model's MLM loss on x_corrupt at the masked positions."""
    generator_loss, corrupted, _ = generate(pair, batch)
    labels = batch["labels"]
    hidden = discriminator_hidden(pair, batch, corrupted)
    states = pair.discriminator.mlm_states(hidden, masked_positions(labels))  # (|M|, E)
    mlm = mlm_loss_from_states(states, pair.discriminator.mlm_head.decoder, labels)  # decoder + loss fused
    return LossOutput(generator_loss + mlm, real_tokens(batch), parts={"generator": generator_loss, "mlm": mlm})


def all_tokens_mlm_loss(pair: ElectraPretraining, batch) -> LossOutput:
    """All-Tokens MLM: the generator's MLM loss plus -log p(x_t) at every real token of x_corrupt, p with the copy
    mechanism (the model's discriminator head gives the copy probability's logit)."""
    generator_loss, corrupted, _ = generate(pair, batch)
    labels, real = batch["labels"], batch["attention_mask"].bool()
    original = torch.where(labels != IGNORE_INDEX, labels, batch["input_ids"])
    model = pair.discriminator
    hidden = discriminator_hidden(pair, batch, corrupted)
    copy_logits = -model.rtd_logits(hidden)  # the copy probability D_t = P(token t is original)
    all_tokens = copy_mlm_loss(model.mlm_logits(hidden, real), copy_logits, corrupted, original, weights=real)
    parts = {"generator": generator_loss, "all_tokens": all_tokens}
    return LossOutput(generator_loss + all_tokens, n_tokens=int(real.sum()), parts=parts)


def real_tokens(batch) -> int:
    return int(batch["attention_mask"].sum())


def electra_counts(batch) -> dict[str, int]:
    return {"generator": masked_tokens(batch), "rtd": real_tokens(batch)}


def electra_15_counts(batch) -> dict[str, int]:
    return {"generator": masked_tokens(batch), "rtd": masked_tokens(batch)}


def replace_mlm_counts(batch) -> dict[str, int]:
    return {"generator": masked_tokens(batch), "mlm": masked_tokens(batch)}


def all_tokens_counts(batch) -> dict[str, int]:
    return {"generator": masked_tokens(batch), "all_tokens": real_tokens(batch)}


# ---------------------------------------------------------------------------------------------- registry

register_model(
    ModelEntry("electra", ElectraConfig, Electra, kind="encoder", sizes=ELECTRA_SIZES, tokenizer_family="bert")
)
_COMMON = dict(models=("electra",), prepare=masked_lm_examples, wrap=wrap, unwrap=discriminator)
register_objective(
    ObjectiveEntry(
        "rtd",
        loss=electra_loss,
        counts=electra_counts,
        perplexity="generator",  # exp of the generator's MLM loss; the discriminator's is a classifier's
        config_class=ReplacedTokenConfig,
        description="ELECTRA's replaced-token detection: generator MLM + λ · discriminator loss on every token",
        model_settings={"rtd": True, "mlm": False},
        **_COMMON,
    )
)
register_objective(
    ObjectiveEntry(
        "rtd_15",
        loss=electra_15_loss,
        counts=electra_15_counts,
        perplexity="generator",
        config_class=ReplacedTokenConfig,
        description="ELECTRA 15% (Table 5): the discriminator's loss only on the masked 15% of the tokens",
        model_settings={"rtd": True, "mlm": False},
        **_COMMON,
    )
)
register_objective(
    ObjectiveEntry(
        "replace_mlm",
        loss=replace_mlm_loss,
        counts=replace_mlm_counts,
        perplexity="mlm",
        config_class=GeneratorConfig,
        description="Replace MLM (Table 5): MLM on the generator's samples instead of [MASK]",
        model_settings={"rtd": False, "mlm": True},
        **_COMMON,
    )
)
register_objective(
    ObjectiveEntry(
        "all_tokens_mlm",
        loss=all_tokens_mlm_loss,
        counts=all_tokens_counts,
        perplexity="generator",
        config_class=GeneratorConfig,
        description="All-Tokens MLM (Table 5): predict every token of the corrupted input, with a copy mechanism",
        model_settings={"rtd": True, "mlm": True},
        **_COMMON,
    )
)
