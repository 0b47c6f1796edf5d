"""The unigram plateau: the first loss a language model reaches, and how far below it a model has gone.

A model that predicts the frequency of each token and ignores its context scores, on the tokens a loss predicts,
at best their *unigram entropy* (nats)::

    H = -Σ_w p(w) log p(w),   p(w) = count(w) / N   over the N predicted tokens

(the empirical distribution of exactly those targets, so no context-free predictor does better on them). Every
pretraining objective reaches this loss within a few hundred steps; an MLM or a denoiser then often stays on it
for a long while (the *plateau*) before its attention learns to read the context. A held-out loss well below H
(the course asks for at least 1 nat) says the model uses context; a loss at H says it predicts word frequencies
and nothing else, and any comparison between such models compares nothing.

Estimate H on many targets — a whole held-out split, tens of thousands of tokens: the entropy of a sample is biased
low (by about (types seen - 1) / (2 N) nats), and a few thousand tokens of an 8k vocabulary miss it by most of a nat.

    targets = scored_targets(batch)               # the token ids the batch's loss predicts
    unigram_entropy(targets)                      # H in nats
    below_plateau(held_out_loss, H)               # H - loss: > 1 nat is past the plateau
"""

from __future__ import annotations

from collections.abc import Iterable

import torch
from torch import Tensor

from minilm.objectives.labels import IGNORE_INDEX

PLATEAU_MARGIN = 1.0  # nats below the unigram entropy that the course calls "past the plateau"


def scored_targets(batch: Tensor | dict) -> Tensor:
    """The token ids a pretraining batch's loss predicts, flattened: ``labels`` other than the ignore index for a
    batch with labels (MLM's masked tokens, a seq2seq target); for a language model's blocks (B, T + 1), the T
    tokens each row predicts, ``block[:, 1:]`` (a biLM's backward direction predicts ``block[:, :-1]``, tokens of
    the same distribution)."""
    if isinstance(batch, Tensor):
        return batch[:, 1:].reshape(-1)
    labels = batch["labels"]
    return labels[labels != IGNORE_INDEX]


def token_counts(targets: Iterable[Tensor] | Tensor, vocab_size: int | None = None) -> Tensor:
    """How often each token id occurs in ``targets`` (one tensor or several): (V,) int64."""
    parts = [targets] if isinstance(targets, Tensor) else list(targets)
    ids = torch.cat([t.reshape(-1) for t in parts]).long()
    if ids.numel() and ids.min() < 0:
        raise ValueError("targets hold negative ids: drop the ignored positions first (scored_targets)")
    return torch.bincount(ids, minlength=vocab_size or 0)


def unigram_entropy(targets: Iterable[Tensor] | Tensor) -> float:
    """H = -Σ p log p (nats) of the empirical distribution of ``targets``: the loss, on these very tokens, of the
    best model that ignores context (it knows their frequencies and nothing else)."""
    counts = token_counts(targets).double()
    if counts.sum() == 0:
        raise ValueError("no targets: the unigram entropy of nothing is undefined")
    p = counts[counts > 0] / counts.sum()
    return float(-(p * p.log()).sum())


def binary_entropy(rate: float) -> float:
    """H(r) = -r log r - (1 - r) log(1 - r) (nats): the loss of a yes/no classifier that predicts the base rate
    ``r`` everywhere (ELECTRA's discriminator on its plateau: P(replaced) = the replacement rate)."""
    if not 0 <= rate <= 1:
        raise ValueError(f"rate={rate} is not a probability")
    p = torch.tensor([rate, 1 - rate], dtype=torch.float64)
    p = p[p > 0]
    return float(-(p * p.log()).sum())


def below_plateau(loss: float, entropy: float) -> float:
    """How many nats ``loss`` lies below the unigram ``entropy`` (negative: above it)."""
    return entropy - loss


def past_plateau(loss: float, entropy: float, margin: float = PLATEAU_MARGIN) -> bool:
    """Is ``loss`` at least ``margin`` nats below ``entropy``?"""
    return below_plateau(loss, entropy) >= margin
