"""Decoding: turning next-token logits into tokens, one step at a time, for every decoder of the course.

A language model gives, for each sequence in the batch, logits over the vocabulary for the next token. Decoding
picks one and feeds it back:

    greedy (do_sample=False):  the most likely token, argmax(logits). Deterministic, often repetitive.
    sampling (do_sample=True): a token drawn from softmax(logits / temperature), after optional filters
        temperature T > 0: T < 1 sharpens the distribution (towards greedy), T > 1 flattens it;
        top-k:  keep only the k most likely tokens (Fan et al. 2018);
        top-p:  keep the smallest set of most likely tokens whose probability adds up to at least p, "nucleus
                sampling" (Holtzman et al. 2020): few tokens where the model is sure, many where it is not.
    Filters set the logits of the tokens they drop to -inf, so softmax gives them probability 0. They apply in
    the order temperature, top-k, top-p (as in Hugging Face transformers).

Greedy is its own switch rather than "temperature 0": the limit T -> 0 of sampling is greedy, but dividing by 0 is
not, and a temperature <= 0 is rejected as the mistake it usually is.

:func:`generate` is the loop, independent of the model: ``step_fn(new_ids, attention_mask)`` returns the logits
for the last position, keeping its own KV cache, so it drives GPT as well as the decoder of an encoder-decoder
model (BART, T5), whose encoder output the step function closes over.

:func:`continuation_log_prob` runs the other way: it scores a given continuation instead of choosing one, the
zero-shot classifier of GPT (Radford et al. 2018, §5) and of every prompt-based evaluation since.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import torch
import torch.nn.functional as F
from torch import Tensor

StepFn = Callable[[Tensor, Tensor | None], Tensor]  # (new ids (B, t), attention mask (B, T_total) or None) -> (B, V)


def check_sampling_args(temperature: float = 1.0, top_k: int | None = None, top_p: float | None = None) -> None:
    """Raise a ``ValueError`` for temperature <= 0 (or not finite), top_k <= 0, top_p outside (0, 1]."""
    if isinstance(temperature, bool) or not isinstance(temperature, int | float) or not math.isfinite(temperature):
        raise ValueError(f"temperature must be a finite number > 0, got {temperature!r}")
    if temperature <= 0:
        raise ValueError(
            f"temperature must be > 0, got {temperature}; for greedy decoding pass do_sample=False instead"
        )
    if top_k is not None and (isinstance(top_k, bool) or not isinstance(top_k, int) or top_k <= 0):
        raise ValueError(f"top_k must be a positive integer (or None for no top-k filter), got {top_k!r}")
    if top_p is not None and not (isinstance(top_p, int | float) and 0 < top_p <= 1):
        raise ValueError(f"top_p must be in (0, 1] (or None for no nucleus filter), got {top_p!r}")


def apply_temperature(logits: Tensor, temperature: float) -> Tensor:
    """logits / temperature: below 1 sharpens the distribution, above 1 flattens it."""
    check_sampling_args(temperature=temperature)
    return logits / temperature


def top_k_filter(logits: Tensor, k: int) -> Tensor:
    """Keep the k largest logits of each row (..., V), set the others to -inf.

    Tokens tied with the k-th largest are kept too; k >= V keeps everything.
    """
    check_sampling_args(top_k=k)
    if k >= logits.size(-1):
        return logits
    kth_largest = torch.topk(logits, k, dim=-1).values[..., -1:]  # (..., 1)
    return logits.masked_fill(logits < kth_largest, float("-inf"))


def top_p_filter(logits: Tensor, p: float) -> Tensor:
    """Nucleus filter: keep the smallest set of most likely tokens whose probabilities sum to >= p, -inf elsewhere.

    Sorted by probability, a token is dropped when the tokens before it already reach p; so the most likely
    token is always kept (nothing comes before it), and p = 1 keeps every token.
    """
    check_sampling_args(top_p=p)
    if p >= 1:
        return logits  # every token; skips cumulative sums that round to 1 before the last token
    sorted_logits, order = torch.sort(logits, dim=-1, descending=True)  # (..., V)
    probs = F.softmax(sorted_logits.float(), dim=-1)
    mass_before = probs.cumsum(-1) - probs  # probability of the more likely tokens
    drop_sorted = mass_before >= p
    drop = drop_sorted.scatter(-1, order, drop_sorted)  # back to vocabulary order
    return logits.masked_fill(drop, float("-inf"))


def sample_next(
    logits: Tensor,
    do_sample: bool = True,
    temperature: float = 1.0,
    top_k: int | None = None,
    top_p: float | None = None,
    generator: torch.Generator | None = None,
) -> Tensor:
    """Next-token logits (B, V) -> token ids (B,): argmax, or a draw after temperature, top-k and top-p."""
    check_sampling_args(temperature, top_k, top_p)
    if not do_sample:
        return logits.argmax(-1)
    logits = apply_temperature(logits.float(), temperature)
    if top_k is not None:
        logits = top_k_filter(logits, top_k)
    if top_p is not None:
        logits = top_p_filter(logits, top_p)
    return torch.multinomial(F.softmax(logits, dim=-1), 1, generator=generator).squeeze(-1)


def check_prompt(input_ids: Tensor, attention_mask: Tensor | None = None) -> None:
    """Raise a ``ValueError`` for an empty prompt, a row of padding only, or padding on the right."""
    if input_ids.dim() != 2:
        raise ValueError(f"input_ids must be (batch, length), got shape {tuple(input_ids.shape)}")
    if input_ids.size(1) == 0 or input_ids.size(0) == 0:
        raise ValueError("the prompt is empty: give at least one token (e.g. the end-of-text token)")
    if attention_mask is None:
        return
    if attention_mask.shape != input_ids.shape:
        raise ValueError(
            f"attention_mask {tuple(attention_mask.shape)} must have the shape of input_ids {tuple(input_ids.shape)}"
        )
    real = attention_mask.bool()
    empty = (~real.any(-1)).nonzero().flatten().tolist()
    if empty:
        raise ValueError(f"the prompt is empty (all padding) in row(s) {empty}: give each row at least one token")
    right = (real[:, :-1] & ~real[:, 1:]).any(-1).nonzero().flatten().tolist()
    if right:
        raise ValueError(
            f"row(s) {right} have padding after a real token: pad batched prompts on the left, so that every "
            "row's next token comes right after its prompt"
        )


def _stop_ids(eos_token_id: int | Sequence[int] | None) -> list[int]:
    if eos_token_id is None:
        return []
    return [eos_token_id] if isinstance(eos_token_id, int) else list(eos_token_id)


@torch.no_grad()
def generate(
    step_fn: StepFn,
    input_ids: Tensor,
    max_new_tokens: int,
    attention_mask: Tensor | None = None,
    *,
    do_sample: bool = True,
    temperature: float = 1.0,
    top_k: int | None = None,
    top_p: float | None = None,
    eos_token_id: int | Sequence[int] | None = None,
    pad_token_id: int | None = None,
    generator: torch.Generator | None = None,
    max_len: int | None = None,
) -> Tensor:
    """Extend the prompts input_ids (B, T) by up to ``max_new_tokens`` tokens -> (B, T + generated).

    ``step_fn(new_ids, attention_mask)`` returns the logits (B, V) for the position after ``new_ids`` (the whole
    prompt on the first call, then the one token just chosen), keeping its own KV cache. ``attention_mask``
    (B, T) 0/1 marks left padding in batched prompts; it grows by a 1 per step and is passed to ``step_fn``
    (None throughout when not given).
    ``eos_token_id``: a stop token or a list of them. A row that produced one is finished: it gets
    ``pad_token_id`` (default: the first stop token) from then on, and the loop ends when every row has finished,
    so the result may be shorter than T + max_new_tokens.
    ``max_len``: the model's context; a prompt (padding included) plus max_new_tokens beyond it is an error.
    """
    check_prompt(input_ids, attention_mask)
    check_sampling_args(temperature, top_k, top_p)
    if max_new_tokens < 0:
        raise ValueError(f"max_new_tokens must be >= 0, got {max_new_tokens}")
    if max_len is not None and input_ids.size(1) + max_new_tokens > max_len:
        raise ValueError(
            f"prompt of {input_ids.size(1)} tokens + {max_new_tokens} new ones exceeds the context of {max_len}"
        )
    stop = _stop_ids(eos_token_id)
    pad = pad_token_id if pad_token_id is not None else (stop[0] if stop else None)
    stop_ids = torch.tensor(stop, dtype=input_ids.dtype, device=input_ids.device)
    finished = torch.zeros(input_ids.size(0), dtype=torch.bool, device=input_ids.device)
    ids, mask, new = input_ids, attention_mask, input_ids
    for _ in range(max_new_tokens):
        logits = step_fn(new, mask)  # (B, V)
        next_id = sample_next(logits, do_sample, temperature, top_k, top_p, generator)  # (B,)
        if stop:
            next_id = next_id.masked_fill(finished, pad)  # finished rows only pad
            finished = finished | torch.isin(next_id, stop_ids)
        new = next_id[:, None].to(ids.dtype)  # (B, 1)
        ids = torch.cat([ids, new], dim=1)
        if mask is not None:
            mask = torch.cat([mask, mask.new_ones(mask.size(0), 1)], dim=1)
        if stop and bool(finished.all()):
            break
    return ids


@torch.no_grad()
def continuation_log_prob(model, tokenizer, prompts: Sequence[str], continuation: str, batch_size: int = 64) -> Tensor:
    """log P(continuation | prompt) for each prompt (N,) under a causal LM: Σ_j log P(c_j | prompt, c_<j).

    ``model(ids)`` must return next-token logits (B, T, V) and ``model.config.max_len`` be its context; a prompt too
    long for it keeps its last tokens. The continuation is tokenised on its own (mind its leading space: " positive").
    """
    cont = tokenizer.encode(continuation, add_special_tokens=False)
    if not cont:
        raise ValueError(f"the continuation {continuation!r} tokenises to nothing")
    keep = model.config.max_len - len(cont)
    device = next(model.parameters()).device
    scores = []
    for i in range(0, len(prompts), batch_size):
        rows = [tokenizer.encode(p, add_special_tokens=False)[-keep:] + cont for p in prompts[i : i + batch_size]]
        width = max(map(len, rows))
        ids = torch.tensor([r + [0] * (width - len(r)) for r in rows], device=device)  # right padding: never read
        log_probs = F.log_softmax(model(ids).float(), dim=-1)  # (B, T, V)
        for b, row in enumerate(rows):
            predicting = torch.arange(len(row) - len(cont) - 1, len(row) - 1, device=device)  # positions before c_j
            scores.append(log_probs[b, predicting, torch.tensor(cont, device=device)].sum())
    return torch.stack(scores).cpu()  # (N,)
