"""The range of every numeric setting of the registered models' and objectives' configs, by field name.

A model config's ``validate()`` checks its fields against :data:`MODEL_RANGES`; :func:`minilm.train.config.update`
and :func:`~minilm.train.config.from_dict` check an objective's settings against :data:`OBJECTIVE_RANGES` after the
config's own checks (whose messages are more specific). So a value no family can train with (a dropout of 2, a
Poisson λ of 1e-12) is one ConfigError before any data is read, not torch's error at the first step. Every field
name a registered config has is in one of the tables (``tests/test_ranges.py`` walks the registry).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass


@dataclass(frozen=True)
class Range:
    """low <= value <= high (< or > where open); None: no bound. Floats must also be finite."""

    low: float | None = None
    high: float | None = None
    low_open: bool = False
    high_open: bool = False
    why: str = ""  # what the setting is, said after the range

    def contains(self, value: float) -> bool:
        if isinstance(value, float) and not math.isfinite(value):
            return False
        if self.low is not None and not (value > self.low if self.low_open else value >= self.low):
            return False
        return self.high is None or (value < self.high if self.high_open else value <= self.high)

    def text(self) -> str:
        if self.low is not None and self.high is not None:
            return f"in {'(' if self.low_open else '['}{self.low:g}, {self.high:g}{')' if self.high_open else ']'}"
        if self.low is not None:
            return f"{'>' if self.low_open else '>='} {self.low:g}"
        return f"{'<' if self.high_open else '<='} {self.high:g}"


def check_range(name: str, value, allowed: Range) -> None:
    """A ValueError naming ``name``, its range and what it is, unless ``value`` lies in ``allowed``."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not allowed.contains(value):
        why = f" ({allowed.why})" if allowed.why else ""
        raise ValueError(f"{name} must be {allowed.text()}, got {value!r}{why}")


def check_ranges(config, ranges: Mapping[str, Range]) -> None:
    """Check every field of dataclass ``config`` that ``ranges`` names (None values are "unset": skipped)."""
    for field in dataclasses.fields(config):
        value = getattr(config, field.name)
        if field.name in ranges and value is not None:
            check_range(field.name, value, ranges[field.name])


COUNT = Range(1, why="a count or a size: at least 1")
DROPOUT = Range(0, 1, high_open=True, why="the probability of zeroing a unit; 1 would zero them all")
POSITIVE = Range(0, low_open=True)
TOKEN_ID = Range(0, why="a token id")

MODEL_RANGES: dict[str, Range] = {
    **dict.fromkeys(("vocab_size", "max_len", "n_layers", "n_heads", "d_model", "d_ff", "d_kv"), COUNT),
    **dict.fromkeys(("n_encoder_layers", "n_decoder_layers", "embedding_size", "n_groups"), COUNT),
    **dict.fromkeys(("num_buckets", "max_distance"), COUNT),  # T5's relative positions
    **dict.fromkeys(("max_chars", "n_chars", "char_embed_dim", "projection_dim", "hidden_size"), COUNT),  # ELMo
    "n_highway": Range(0, why="ELMo's highway layers; 0 for none"),
    "n_segments": Range(0, why="segment embeddings; 0 for none"),
    **dict.fromkeys(("dropout", "attention_dropout", "activation_dropout", "classifier_dropout"), DROPOUT),
    "norm_eps": Range(0, low_open=True, why="added to the variance in the norms"),
    "init_std": Range(0, low_open=True, why="the standard deviation of the initial weights"),
    "init_factor": Range(0, low_open=True, why="T5's scale of the initial weights (1)"),
    **dict.fromkeys(("pad_id", "bos_id", "eos_id", "decoder_start_id"), TOKEN_ID),
    "position_offset": Range(0, why="the first position's row"),
}

MIN_POISSON_LAMBDA = 0.1  # below it nearly every draw is an empty span: ~budget/λ inserted masks

OBJECTIVE_RANGES: dict[str, Range] = {
    "ngram": COUNT,
    "generator_size": Range(0, 1, low_open=True, why="the generator's width as a fraction of the discriminator's"),
    "mask_prob": Range(0, 1, low_open=True, why="the fraction of tokens masked"),
    "temperature": Range(0, low_open=True, why="divides the logits"),
    "rtd_weight": Range(0, low_open=True, why="λ of the discriminator's loss (ELECTRA: 50)"),
    "mask_ratio": Range(0, 1, why="the fraction of each document's tokens noised"),
    "poisson_lambda": Range(MIN_POISSON_LAMBDA, why="the mean span length of text infilling (BART: 3)"),
    "permute_ratio": Range(0, 1, why="the fraction of sentences shuffled"),
    "random_ratio": Range(0, 1, why="the fraction of masks replaced by random tokens"),
    "noise_density": Range(0, 1, low_open=True, high_open=True, why="the fraction of tokens corrupted (T5: .15)"),
    "mean_noise_span_length": Range(1, why="the mean length of a corrupted span (T5: 3)"),
    **dict.fromkeys(("alpha_ce", "alpha_mlm", "alpha_cos"), Range(0, why="a weight of DistilBERT's loss")),
}
