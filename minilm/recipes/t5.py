"""T5 with span corruption (Raffel et al. 2020): ``python -m minilm.train --model t5 --objective span_corruption``,
and the paper's other objectives for its ablations (``corruption=bert|mass|iid|drop``,
``mean_noise_span_length=2|3|5|10``, ``noise_density=0.5``).

The corpus is one token stream cut into raw texts; each batch corrupts them afresh
(:mod:`minilm.objectives.span_corruption`) and the model writes each target from its input, teacher-forced
(:mod:`minilm.recipes.seq2seq`). For span corruption the raw texts are as long as T5's ``random_spans_helper`` says,
so that each input fills ``seq_len`` exactly (512 -> 568 raw tokens, 114-token targets); the other objectives read
texts of the same length, so every row of an ablation sees the same text and only the objective differs (BERT- and
MASS-style inputs are then longer than ``seq_len``: the whole text, one token per token). Fine-tuning is text to text
(:mod:`minilm.finetune.text_to_text`, the entry's ``text_to_text``).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import torch

from minilm.models.t5 import T5, T5_PRESETS, T5Config
from minilm.objectives.seq2seq import pad_seq2seq_batch
from minilm.objectives.span_corruption import (
    T5_OBJECTIVES,
    DynamicSpanCorruption,
    SpanCorruptionConfig,
    random_spans_helper,
    span_corruption_example,
    span_corruption_token_ids,
)
from minilm.recipes.language_model import token_stream
from minilm.recipes.seq2seq import target_counts, teacher_forcing_loss
from minilm.train.config import ConfigError
from minilm.train.registry import ModelEntry, ObjectiveEntry, register_model, register_objective

# small sizes for pretraining on a CPU or one GPU (vocab_size comes from the tokenizer trained for the run)
T5_SIZES = {
    "tiny": dict(d_model=256, d_kv=64, n_heads=4, d_ff=1024, n_encoder_layers=2, n_decoder_layers=2, dropout=0.0),
    "small": dict(d_model=384, d_kv=64, n_heads=6, d_ff=1536, n_encoder_layers=4, n_decoder_layers=4),
    **T5_PRESETS,
}


def t5_layers(config: T5Config) -> int:
    """The layers of ``features``' hidden states: the decoder's."""
    return config.n_decoder_layers


register_model(
    ModelEntry(
        "t5",
        T5Config,
        T5,
        kind="encoder-decoder",
        sizes=T5_SIZES,
        tokenizer_family="t5",  # SentencePiece Unigram with <pad>=0 </s>=1 <unk>=2 and 100 sentinels, as T5's
        n_layers=t5_layers,
        text_to_text=True,
    )
)


@dataclass
class SpanCorruptionSettings:
    corruption: str = "spans"  # spans (T5's), iid (replace corrupted spans), bert, mass, drop (the paper's Table 4/5)
    noise_density: float = 0.15  # fraction of the tokens corrupted (Table 6: 10, 15, 25, 50%)
    mean_noise_span_length: float = 3.0  # corruption=spans: mean length of the corrupted spans (Table 7: 2, 3, 5, 10)

    def validate(self) -> None:
        try:
            self.span_config()
        except ValueError as err:
            raise ConfigError(str(err)) from None

    def span_config(self) -> SpanCorruptionConfig:
        return SpanCorruptionConfig(self.corruption, self.noise_density, self.mean_noise_span_length)


def raw_text_length(seq_len: int, settings: SpanCorruptionSettings) -> int:
    """Raw tokens per text: as many as span corruption turns into exactly ``seq_len`` input tokens, eos included
    (T5's ``random_spans_helper``), for every objective."""
    return random_spans_helper(seq_len, settings.noise_density, settings.mean_noise_span_length)[0]


def check_span_corruption_job(job, settings: SpanCorruptionSettings) -> None:
    """A ConfigError, before any data is read, unless inputs of ``seq_len`` tokens leave texts to corrupt."""
    try:
        raw_text_length(job.seq_len, settings)
    except ValueError as err:
        raise ConfigError(f"seq_len={job.seq_len}: {err}") from None


def span_corruption_examples(documents, tokenizer, job, settings: SpanCorruptionSettings, validation: bool = False):
    """The corpus as one token stream cut into raw texts of :func:`raw_text_length` tokens, corrupted afresh at
    batch time; validation texts are corrupted once, with the run's seed, so that evaluations compare alike."""
    try:
        token_ids = span_corruption_token_ids(tokenizer)
    except ValueError as err:
        raise ConfigError(str(err)) from None
    config = settings.span_config()
    check_span_corruption_job(job, settings)
    length = raw_text_length(job.seq_len, settings)
    try:
        config.validate(length, len(token_ids["sentinel_ids"]))
    except ValueError as err:
        raise ConfigError(f"seq_len={job.seq_len}: {err}") from None
    stream = token_stream(tokenizer, [d.text for d in documents])  # documents packed, each ending with </s>
    # whole texts, and a last piece at least half as long (a small validation corpus still gives one)
    texts = [{"input_ids": chunk} for chunk in stream.split(length) if 2 * len(chunk) >= length]
    if not texts:
        raise ConfigError(f"the corpus has {len(stream)} tokens, fewer than half a text of {length}: lower seq_len")
    if not validation:
        return texts, DynamicSpanCorruption(config, token_ids, tokenizer.pad_id)
    generator = torch.Generator().manual_seed(job.seed)
    corrupted = [span_corruption_example(t["input_ids"], config, generator, **token_ids) for t in texts]
    return corrupted, functools.partial(pad_seq2seq_batch, pad_id=tokenizer.pad_id)


register_objective(
    ObjectiveEntry(
        "span_corruption",
        models=("t5",),
        prepare=span_corruption_examples,
        loss=teacher_forcing_loss,
        counts=target_counts,
        perplexity=True,
        config_class=SpanCorruptionSettings,
        check=check_span_corruption_job,
        description="T5's span corruption: spans -> sentinels in the input, the spans as the target "
        f"(corruption={'|'.join(T5_OBJECTIVES)})",
    )
)
