"""Replaced-token detection (ELECTRA, Clark et al. 2020) and the paper's efficiency ablations (§3.3, Table 5).

A generator G (a small masked LM) fills in the masked positions with samples; a discriminator D learns, at every
real token, whether it is the original or a replacement:

    m_i ~ unif{1, n} for i = 1..k                     mask 15% of the positions (BERT's masking, [MASK] 85%)
    x̂_i ~ p_G(x_i | x_masked) for i ∈ m               sample, with no gradient through the sampling
    x_corrupt = REPLACE(x, m, x̂)
    L_MLM(x, θ_G)  = E[ Σ_{i∈m} -log p_G(x_i | x_masked) ]
    L_Disc(x, θ_D) = E[ Σ_t -1(x_corrupt_t = x_t) log D(x_corrupt, t) - 1(x_corrupt_t ≠ x_t) log(1 - D(x_corrupt, t)) ]
    min_{θ_G, θ_D} Σ_x L_MLM(x, θ_G) + λ L_Disc(x, θ_D)        λ = 50

Here D(x, t) is the probability that token t is *original*; the code's logit is the other way round, the logit of
"replaced" (transformers' and ELECTRA's convention), so a label is 1 where the token was replaced. A sample equal to
the original counts as original (label 0), as in the paper: "if the generator happens to generate the correct
token, that token is considered 'real' instead of 'fake'".

It is not a GAN: the generator is trained by maximum likelihood, not to fool the discriminator, and no gradient
flows from the discriminator's loss back through the discrete sampling (§2).

Pieces, smallest first::

    samples = sample_replacements(generator_logits)                      # (|M|,) ids, Gumbel-max, no gradient
    corrupted, replaced = replace_tokens(original, labels, samples)      # x_corrupt and the labels (B, T)
    loss = rtd_loss(discriminator_logits, replaced, weights=attention_mask)   # mean over real tokens

The ablations of Table 5 ("ELECTRA 15%", "Replace MLM", "All-Tokens MLM") reuse these: :func:`rtd_loss` with
``weights`` the masked positions only, and :func:`copy_mlm_loss` for All-Tokens MLM's copy mechanism.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from minilm.objectives.labels import IGNORE_INDEX

RTD_WEIGHT = 50.0  # λ: "We set λ = 50" (§3.1)


@torch.no_grad()
def sample_replacements(logits: Tensor, temperature: float = 1.0, generator: torch.Generator | None = None) -> Tensor:
    """One token id per row of ``logits`` (N, V), drawn from softmax(logits / temperature): argmax(logits/τ + g) with
    Gumbel noise g = -log(-log u), as ELECTRA's code samples. No gradient flows through it (§2)."""
    if temperature <= 0:
        raise ValueError(f"temperature={temperature} must be > 0")
    u = torch.rand(logits.shape, generator=generator, device=logits.device, dtype=torch.float32)
    exponential = -torch.log(u.clamp(1e-9, 1.0))  # -log u ~ Exp(1), >= 0
    gumbel = -torch.log(exponential.clamp(min=1e-9))
    return (logits.float() / temperature + gumbel).argmax(-1)


def replace_tokens(input_ids: Tensor, labels: Tensor, samples: Tensor) -> tuple[Tensor, Tensor]:
    """x_corrupt = REPLACE(x, m, x̂) and the discriminator's labels.

    ``input_ids`` (B, T): the generator's input (masked) or the original; ``labels`` (B, T): the original id at
    the masked positions m, -100 elsewhere (as :func:`minilm.objectives.mlm.mask_tokens` returns them); ``samples``
    (|m|,): the generator's tokens at m in row-major order (that of ``labels[labels != -100]``).

    Returns (corrupted ids (B, T): the samples at m, the input elsewhere; replaced (B, T) bool: True where the
    corrupted token differs from the original; a sample that equals the original is not a replacement).
    """
    at = labels != IGNORE_INDEX
    if samples.shape != (int(at.sum()),):
        raise ValueError(f"{tuple(samples.shape)} samples for {int(at.sum())} masked positions")
    corrupted = input_ids.masked_scatter(at, samples.to(input_ids.dtype))
    replaced = torch.zeros_like(at).masked_scatter(at, samples != labels[at])
    return corrupted, replaced


def rtd_loss(logits: Tensor, replaced: Tensor, weights: Tensor) -> Tensor:
    """L_Disc: the mean binary cross-entropy of the "replaced" ``logits`` (B, T) against ``replaced`` (B, T) over the
    positions where ``weights`` (B, T) is 1: every real token (the attention mask, ELECTRA), or the masked ones only
    (ELECTRA 15%). A batch with no such position gives a zero loss connected to the graph."""
    keep = weights.bool()
    if not keep.any():
        return logits.float().sum() * 0.0
    return F.binary_cross_entropy_with_logits(logits[keep].float(), replaced[keep].float())


def copy_mlm_loss(
    mlm_logits: Tensor, copy_logits: Tensor, input_ids: Tensor, targets: Tensor, weights: Tensor
) -> Tensor:
    """All-Tokens MLM with the copy mechanism (§3.3): -log p(x_t) at every weighted position, where

        p(y | x_corrupt, t) = D_t · 1(y = x_corrupt_t) + (1 - D_t) · softmax(MLM logits_t)_y

    ``mlm_logits`` (N, V) at the N positions where ``weights`` (B, T) is 1 (row-major); ``copy_logits`` (B, T):
    logit of the copy probability D_t; ``input_ids`` (B, T): x_corrupt; ``targets`` (B, T): the original x. Computed
    in log space: log p = logsumexp(log D_t + log 1(x_t = x_corrupt_t), log(1 - D_t) + log softmax_t(x_t)).
    """
    keep = weights.bool()
    if mlm_logits.shape[0] != int(keep.sum()):
        raise ValueError(f"{mlm_logits.shape[0]} rows of logits for {int(keep.sum())} weighted positions")
    if not keep.any():
        return mlm_logits.float().sum() * 0.0
    target = targets[keep]
    log_softmax = F.log_softmax(mlm_logits.float(), dim=-1).gather(1, target[:, None]).squeeze(1)  # (N,)
    copy = copy_logits[keep].float()
    log_copy = F.logsigmoid(copy).masked_fill(input_ids[keep] != target, float("-inf"))  # log D · 1(x̃ = x)
    log_generate = F.logsigmoid(-copy) + log_softmax  # log (1 - D) + log p_MLM(x)
    return -torch.logaddexp(log_copy, log_generate).mean()
