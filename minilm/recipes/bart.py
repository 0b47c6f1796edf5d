"""BART with denoising (Lewis et al. 2020): ``python -m minilm.train --model bart --objective denoise
noise=infilling+permutation``.

The corpus becomes documents of at most ``seq_len`` tokens, ``<s> ... </s>``; each batch corrupts them afresh with the
chosen noises (:mod:`minilm.objectives.denoising`; ``noise=``, ``mask_ratio=``, ``poisson_lambda=``) and the model
reconstructs every original token (:mod:`minilm.objectives.seq2seq`, teacher forcing). Fine-tuning reads the decoder's
states for the input fed to both sides (:meth:`minilm.models.bart.Bart.features`) or, for text-to-text tasks,
generates (:class:`minilm.finetune.kinds.Seq2SeqKind`).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import torch

from minilm.models.bart import BART_PRESETS, Bart, BartConfig
from minilm.objectives.denoising import (
    DenoisingConfig,
    DynamicNoising,
    denoising_example,
    noise_token_ids,
    parse_noise,
)
from minilm.objectives.seq2seq import pad_seq2seq_batch
from minilm.recipes.seq2seq import target_counts as denoise_counts
from minilm.recipes.seq2seq import teacher_forcing_loss as denoise_loss  # the reconstruction loss
from minilm.train.config import ConfigError
from minilm.train.registry import ModelEntry, ObjectiveEntry, register_model, register_objective

SENTENCE_ENDS = (".", "!", "?")  # the tokens that end a sentence for sentence permutation (fairseq: ".")

# small sizes for pretraining on a CPU or one GPU (vocab_size comes from the tokenizer trained for the run)
BART_SIZES = {
    "tiny": dict(n_encoder_layers=2, n_decoder_layers=2, n_heads=4, d_model=256, d_ff=1024, max_len=256, dropout=0.0),
    "small": dict(n_encoder_layers=4, n_decoder_layers=4, n_heads=6, d_model=384, d_ff=1536, max_len=512),
    **BART_PRESETS,
}


def bart_layers(config: BartConfig) -> int:
    """The layers of ``features``' hidden states: the decoder's."""
    return config.n_decoder_layers


register_model(
    ModelEntry(
        "bart",
        BartConfig,
        Bart,
        kind="encoder-decoder",
        sizes=BART_SIZES,
        tokenizer_family="roberta",  # GPT-2's byte-level BPE with <s> <pad> </s> <unk> <mask>, as BART's
        n_layers=bart_layers,
    )
)


@dataclass
class DenoiseSettings:
    noise: str = "infilling+permutation"  # noises joined by "+": masking, deletion, infilling, permutation, rotation
    mask_ratio: float = 0.3  # of each document's tokens masked, deleted or infilled (the paper's 30%)
    poisson_lambda: float = 3.0  # mean span length of text infilling
    permute_ratio: float = 1.0  # of the sentences shuffled (the paper: all)
    random_ratio: float = 0.0  # of the masks replaced by a random token instead (fairseq's mask_random)

    def validate(self) -> None:
        try:
            self.denoising()
        except ValueError as err:
            raise ConfigError(str(err)) from None

    def denoising(self) -> DenoisingConfig:
        return DenoisingConfig(
            noises=self.noise,
            mask_ratio=self.mask_ratio,
            poisson_lambda=self.poisson_lambda,
            permute_ratio=self.permute_ratio,
            random_ratio=self.random_ratio,
        )


MIN_SEQ_LEN = 3  # <s>, one token of text, </s>


def check_seq_len(seq_len: int) -> None:
    """A ConfigError unless a piece of ``seq_len`` tokens holds some text."""
    if seq_len < MIN_SEQ_LEN:
        raise ConfigError(
            f"seq_len={seq_len} is too short for denoising: a piece is <s> text </s>, at least {MIN_SEQ_LEN} "
            f"tokens; raise seq_len (BART's: 1024)"
        )


def check_denoise_job(job, settings: DenoiseSettings | None = None) -> None:
    """The objective's ``check``, before any data is read: the job's seq_len holds some text."""
    check_seq_len(job.seq_len)


def documents_as_examples(documents, tokenizer, seq_len: int) -> list[dict]:
    """Each document's tokens cut into pieces of at most ``seq_len - 2``, each wrapped as ``<s> piece </s>``."""
    check_seq_len(seq_len)
    body = seq_len - 2
    encodings = tokenizer.backend.encode_batch([d.text for d in documents], add_special_tokens=False)
    examples = []
    for encoding in encodings:
        ids = encoding.ids  # a new list at every read of .ids: read once per document
        for start in range(0, len(ids), body):
            piece = ids[start : start + body]
            examples.append({"input_ids": torch.tensor([tokenizer.bos_id, *piece, tokenizer.eos_id])})
    if not examples:
        raise ConfigError("the corpus has no text to denoise")
    return examples


def denoise_examples(documents, tokenizer, job, settings: DenoiseSettings, validation: bool = False):
    """The documents as ``<s> ... </s>`` pieces, corrupted afresh at batch time; validation pieces are corrupted once,
    with the run's seed, so that successive evaluations compare like with like."""
    examples = documents_as_examples(documents, tokenizer, job.seq_len)
    token_ids = noise_token_ids(tokenizer, full_stops=SENTENCE_ENDS)
    if "permutation" in parse_noise(settings.noise) and not token_ids["sentence_end_ids"]:
        raise ConfigError("noise=permutation needs full stops, and the tokenizer has no '.' token")
    config = settings.denoising()
    if not validation:
        return examples, DynamicNoising(config, token_ids, tokenizer.pad_id)
    generator = torch.Generator().manual_seed(job.seed)
    noised = [denoising_example(e["input_ids"], config, generator, **token_ids) for e in examples]
    return noised, functools.partial(pad_seq2seq_batch, pad_id=tokenizer.pad_id)


register_objective(
    ObjectiveEntry(
        "denoise",
        models=("bart",),
        prepare=denoise_examples,
        loss=denoise_loss,
        counts=denoise_counts,
        perplexity=True,
        config_class=DenoiseSettings,
        check=check_denoise_job,
        description="BART's denoising: corrupt each document (noise=infilling+permutation...), reconstruct it whole",
    )
)
