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
    the order temperature, top-k, top-p (as in Hugging Face transformers); :func:`filter_logits` returns the
    filtered logits, whose softmax is the distribution a draw comes from.

Greedy is its own switch rather than "temperature 0": the limit T -> 0 of sampling is greedy, but dividing by 0 is
not, and a temperature <= 0 is rejected as the mistake it usually is.

Beam search (:func:`beam_search`) looks further than the next token: it keeps the K most likely partial sequences
("beams", K = num_beams), scored by their summed log-probability. Each step extends every beam by every token,
K x V candidates, and keeps the best. A candidate that ends with the stop token leaves the search as a finished
hypothesis; the search returns the best finished ones. Summed log-probabilities only fall as a sequence grows,
so short hypotheses would always win: they are compared by

    score = sum of log P(y_t | y_<t) / length ** length_penalty     (Wu et al. 2016, simplified; transformers')

where length counts the generated tokens (the stop token included, the decoder's start tokens not). A
length_penalty > 0 favours longer hypotheses, 0 compares raw sums, < 0 favours shorter ones. Early stopping
decides when to stop looking:
    True     a sequence's search ends as soon as K of its hypotheses have finished;
    False    ... once no live beam could still beat the worst of the K finished ones, guessing that a beam's best
             future score is its score now divided by its current length (the default, a heuristic);
    "never"  ... the same, but with the length that gives the best possible score (the maximum length when
             length_penalty > 0): only stops when no finished hypothesis can be beaten anymore.
Beam search finds likelier, and so blander and more repetitive, sequences than sampling. Summarisation bans
repetition outright (Paulus et al. 2018; BART on CNN/DailyMail uses n = 3) with no_repeat_ngram_size=n: no n-gram
may occur twice in a sequence, as a token that would complete one already there gets probability 0.

Constraints on the tokens, shared by every mode through :func:`process_scores` (as in transformers, which applies
them in this order): no_repeat_ngram_size, min_new_tokens (the stop tokens are banned until that many tokens are
generated), forced_bos_token_id (the first generated token; BART-large-cnn, mBART's language id) and
forced_eos_token_id (the last token allowed by max_new_tokens, so that every output is a complete sequence).

:func:`generate` and :func:`beam_search` are the loops, independent of the model: ``step_fn(new_ids,
attention_mask)`` returns the logits for the last position, keeping its own KV cache, so they drive GPT as well as
the decoder of an encoder-decoder model (BART, T5), whose encoder output the step function closes over. Beam
search also needs ``reorder_fn(index)``, which moves the rows of that cache (and of the encoder output) to follow
the beams.

:func:`continuation_log_prob` runs the other way: it scores a given continuation instead of choosing one, the
zero-shot classifier of GPT (Radford et al. 2018, §5) and of every prompt-based evaluation since.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Literal

import torch
import torch.nn.functional as F
from torch import Tensor

StepFn = Callable[[Tensor, Tensor | None], Tensor]  # (new ids (B, t), attention mask (B, T_total) or None) -> (B, V)
ReorderFn = Callable[[Tensor], None]  # (index (B',) of the rows to keep) -> None; reorders the step function's state


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


def filter_logits(
    logits: Tensor, temperature: float = 1.0, top_k: int | None = None, top_p: float | None = None
) -> Tensor:
    """The logits sampling draws from, (..., V) float32: logits / temperature, then top-k, then top-p (None: no
    filter), the dropped tokens at -inf. Its softmax is the distribution :func:`sample_next` samples from."""
    check_sampling_args(temperature, top_k, top_p)
    logits = apply_temperature(logits.float(), temperature)
    if top_k is not None:
        logits = top_k_filter(logits, top_k)
    if top_p is not None:
        logits = top_p_filter(logits, top_p)
    return logits


def sample_next(
    logits: Tensor,
    do_sample: bool = True,
    temperature: float = 1.0,
    top_k: int | None = None,
    top_p: float | None = None,
    generator: torch.Generator | None = None,
) -> Tensor:
    """Next-token logits (B, V) -> token ids (B,): argmax, or a draw from softmax(:func:`filter_logits`)."""
    if not do_sample:
        check_sampling_args(temperature, top_k, top_p)  # a bad setting is an error even where greedy ignores it
        return logits.argmax(-1)
    probs = F.softmax(filter_logits(logits, temperature, top_k, top_p), dim=-1)  # filter_logits checks them
    return torch.multinomial(probs, 1, generator=generator).squeeze(-1)


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


def _is_natural(value) -> bool:
    """An integer >= 0 (not a bool): a count, or a token id."""
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def check_constraint_args(
    no_repeat_ngram_size: int = 0,
    min_new_tokens: int = 0,
    forced_bos_token_id: int | None = None,
    forced_eos_token_id: int | Sequence[int] | None = None,
    eos_token_id: int | Sequence[int] | None = None,
) -> None:
    """Raise a ``ValueError`` for a negative n-gram size or minimum length, a minimum length without a stop token
    (it would ban nothing), or a forced token that is not a token id."""
    for name, value in [("no_repeat_ngram_size", no_repeat_ngram_size), ("min_new_tokens", min_new_tokens)]:
        if not _is_natural(value):
            raise ValueError(f"{name} must be an integer >= 0 (0: no constraint), got {value!r}")
    if min_new_tokens > 0 and not _stop_ids(eos_token_id):
        raise ValueError(f"min_new_tokens={min_new_tokens} bans the stop tokens, but no eos_token_id was given")
    if forced_bos_token_id is not None and not _is_natural(forced_bos_token_id):
        raise ValueError(
            f"forced_bos_token_id must be a token id (an integer >= 0) or None, got {forced_bos_token_id!r}"
        )
    forced_eos = _stop_ids(forced_eos_token_id)
    if forced_eos_token_id is not None and not (forced_eos and all(map(_is_natural, forced_eos))):
        raise ValueError(
            f"forced_eos_token_id must be token id(s) (integers >= 0) or None, got {forced_eos_token_id!r}"
        )


def no_repeat_ngram_mask(ids: Tensor, n: int, vocab_size: int) -> Tensor:
    """Sequences (N, T) -> (N, vocab_size) bool, True for each token that would complete an n-gram already in its row.

    The next n-gram is the row's last n - 1 tokens followed by the next token, so every window of n tokens that
    starts with those n - 1 bans its own last token (n = 1 bans every token seen). All tokens of the row count:
    the decoder's start token, a prompt and its padding (as in transformers).
    """
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"the n-gram size must be an integer >= 1, got {n!r}")
    N, T = ids.shape
    banned = torch.zeros(N, vocab_size + 1, dtype=torch.bool, device=ids.device)  # column V: "bans nothing"
    if T >= n:
        prefix = ids[:, T - n + 1 :]  # (N, n - 1): how the next n-gram begins
        windows = ids.unfold(1, n, 1)  # (N, T - n + 1, n): every n-gram so far
        begins_alike = (windows[..., :-1] == prefix[:, None]).all(-1)  # (N, T - n + 1)
        completing = windows[..., -1].clamp(max=vocab_size)  # ids beyond the logits (a larger embedding) ban nothing
        banned.scatter_(1, torch.where(begins_alike, completing, vocab_size), True)
    return banned[:, :vocab_size]


def _check_in_vocabulary(token_ids: Sequence[int], vocab_size: int) -> None:
    outside = [t for t in token_ids if not 0 <= t < vocab_size]
    if outside:
        raise ValueError(f"forced token(s) {outside} outside the vocabulary of {vocab_size} tokens")


def ban_tokens(scores: Tensor, token_ids: Sequence[int]) -> Tensor:
    """Scores (N, V) with the tokens ``token_ids`` at -inf in every row (ids outside the vocabulary are ignored)."""
    inside = [t for t in token_ids if 0 <= t < scores.size(-1)]
    index = torch.tensor(inside, dtype=torch.long, device=scores.device)
    return scores.index_fill(-1, index, float("-inf"))


def force_tokens(scores: Tensor, token_ids: Sequence[int]) -> Tensor:
    """Scores (N, V) where only ``token_ids`` remain possible: -inf for every other token, 0 for them.

    0 whether the scores are logits or log-probabilities: in beam search a forced token costs nothing, log 1.
    """
    _check_in_vocabulary(token_ids, scores.size(-1))
    forced = torch.full_like(scores, float("-inf"))
    forced[:, list(token_ids)] = 0.0
    return forced


def process_scores(
    scores: Tensor,
    ids: Tensor,
    step: int,
    max_new_tokens: int,
    *,
    no_repeat_ngram_size: int = 0,
    min_new_tokens: int = 0,
    forced_bos_token_id: int | None = None,
    forced_eos_token_id: int | Sequence[int] | None = None,
    eos_token_id: int | Sequence[int] | None = None,
) -> Tensor:
    """The decoding constraints on next-token scores (N, V): logits, or log-probabilities in beam search.

    ``ids`` (N, T) are the sequences so far, ``step`` the number of tokens generated before this one (0 first).
    In transformers' order, so that a forced token wins over the bans:
        ``no_repeat_ngram_size`` n > 0: ban the tokens that would repeat an n-gram of the row;
        ``min_new_tokens``: ban the stop tokens ``eos_token_id`` while step < min_new_tokens;
        ``forced_bos_token_id``: the only possible token at step 0 (transformers forces it when the sequence is
        one token long, the same thing for a decoder that starts from one start token);
        ``forced_eos_token_id``: the only possible token(s) at step max_new_tokens - 1, the last one.
    Returns ``scores`` itself when nothing applies at this step.
    """
    forced_bos = [forced_bos_token_id] if forced_bos_token_id is not None else []
    _check_in_vocabulary(forced_bos + _stop_ids(forced_eos_token_id), scores.size(-1))  # every step: fail at once
    if no_repeat_ngram_size > 0:
        scores = scores.masked_fill(no_repeat_ngram_mask(ids, no_repeat_ngram_size, scores.size(-1)), float("-inf"))
    if step < min_new_tokens:
        scores = ban_tokens(scores, _stop_ids(eos_token_id))
    if forced_bos_token_id is not None and step == 0:
        scores = force_tokens(scores, [forced_bos_token_id])
    if forced_eos_token_id is not None and step == max_new_tokens - 1:
        scores = force_tokens(scores, _stop_ids(forced_eos_token_id))
    return scores


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
    no_repeat_ngram_size: int = 0,
    min_new_tokens: int = 0,
    forced_bos_token_id: int | None = None,
    forced_eos_token_id: int | Sequence[int] | None = None,
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
    ``no_repeat_ngram_size``, ``min_new_tokens``, ``forced_bos_token_id``, ``forced_eos_token_id``: constraints
    applied to the logits before choosing, see :func:`process_scores` (the defaults apply none).
    """
    check_prompt(input_ids, attention_mask)
    check_sampling_args(temperature, top_k, top_p)
    constraints = dict(
        no_repeat_ngram_size=no_repeat_ngram_size,
        min_new_tokens=min_new_tokens,
        forced_bos_token_id=forced_bos_token_id,
        forced_eos_token_id=forced_eos_token_id,
        eos_token_id=eos_token_id,
    )
    check_constraint_args(**constraints)
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
    for step in range(max_new_tokens):
        logits = step_fn(new, mask)  # (B, V)
        logits = process_scores(logits, ids, step, max_new_tokens, **constraints)
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


def check_beam_args(
    num_beams: int,
    num_return_sequences: int = 1,
    length_penalty: float = 1.0,
    early_stopping: bool | Literal["never"] = False,
    eos_token_id: int | Sequence[int] | None = None,
) -> None:
    """Raise a ``ValueError`` for num_beams < 1, num_return_sequences outside [1, num_beams], a length_penalty that is
    not a finite number, or an early_stopping other than True, False, "never" (or either of the last two without a
    stop token: nothing could finish before max_new_tokens)."""
    if not _is_natural(num_beams) or num_beams < 1:
        raise ValueError(f"num_beams must be an integer >= 1, got {num_beams!r}")
    if not _is_natural(num_return_sequences) or not 1 <= num_return_sequences <= num_beams:
        raise ValueError(
            f"num_return_sequences must be an integer between 1 and num_beams={num_beams} (the search keeps the "
            f"num_beams best finished hypotheses), got {num_return_sequences!r}"
        )
    if isinstance(length_penalty, bool) or not isinstance(length_penalty, int | float):
        raise ValueError(f"length_penalty must be a finite number, got {length_penalty!r}")
    if not math.isfinite(length_penalty):
        raise ValueError(f"length_penalty must be a finite number, got {length_penalty!r}")
    if not (early_stopping is True or early_stopping is False or early_stopping == "never"):
        raise ValueError(f"early_stopping must be True, False or 'never', got {early_stopping!r}")
    if early_stopping is not False and not _stop_ids(eos_token_id):
        raise ValueError(
            f"early_stopping={early_stopping!r} needs an eos_token_id: without a stop token every hypothesis runs "
            "to max_new_tokens"
        )


_LOST = -1e9  # beam search's score for an empty slot or a barred candidate: finite, so arithmetic on it stays defined


def _take(x: Tensor, index: Tensor) -> Tensor:
    """x (B, n, ...), index (B, m) -> (B, m, ...) with entry [b, j] = x[b, index[b, j]]: pick within each row."""
    return torch.take_along_dim(x, index.view(*index.shape, *[1] * (x.dim() - 2)), dim=1)


@torch.no_grad()
def beam_search(
    step_fn: StepFn,
    reorder_fn: ReorderFn,
    input_ids: Tensor,
    max_new_tokens: int,
    *,
    num_beams: int,
    length_penalty: float = 1.0,
    early_stopping: bool | Literal["never"] = False,
    no_repeat_ngram_size: int = 0,
    min_new_tokens: int = 0,
    forced_bos_token_id: int | None = None,
    forced_eos_token_id: int | Sequence[int] | None = None,
    eos_token_id: int | Sequence[int] | None,
    pad_token_id: int | None = None,
    num_return_sequences: int = 1,
    max_len: int | None = None,
    return_scores: bool = False,
) -> Tensor | tuple[Tensor, Tensor]:
    """Beam search from the starts input_ids (B, t0) -> (B * num_return_sequences, t0 + longest) [, scores].

    The contract with the model (K = num_beams; the batch the model sees has B * K rows, row b * K + j being
    beam j of sequence b):
        ``reorder_fn(index)``, index (B',) long: keep the rows ``index`` of every per-row state the step function
        holds (KV cache, encoder output, encoder mask), in that order, e.g. ``x = x.index_select(0, index)``.
        Called first with ``arange(B).repeat_interleave(K)`` (every sequence becomes K beams, before any step),
        then before each later step with each beam's parent: the row whose cache it continues.
        ``step_fn(new_ids, None)`` returns the logits (B * K, V) for the position after ``new_ids``: first the
        expanded starts (B * K, t0), then the token each beam just chose (B * K, 1). The mask is always None: the
        decoder inputs are not padded (the encoder's padding mask is the step function's business).
    ``input_ids``: what the decoder starts from, e.g. a column of ``decoder_start_token_id``; no padding.

    Hypotheses end with a stop token (``eos_token_id``, one or a list; None: only at max_new_tokens) or at
    max_new_tokens. They are ranked by sum log P / length ** ``length_penalty`` (length: generated tokens, the stop
    token included); the result holds the ``num_return_sequences`` best of each sequence, best first, padded on
    the right with ``pad_token_id`` (default: the first stop token). ``early_stopping``: True, False or "never",
    see the module docstring. ``return_scores``: also return their scores (B * num_return_sequences,).
    ``no_repeat_ngram_size``, ``min_new_tokens``, ``forced_bos_token_id``, ``forced_eos_token_id``: constraints on
    the tokens, see :func:`process_scores`. ``max_len``: the decoder's context, checked as in :func:`generate`.

    This reproduces transformers' beam search (``generate(num_beams=K, do_sample=False)``), finished hypotheses,
    scores and stopping included (its ``sequences_scores`` are the scores), but for one quirk not copied: it pads
    with the stop token when pad_token_id is 0. With num_beams=1 and early_stopping False or True it is greedy.
    """
    check_prompt(input_ids)
    check_beam_args(num_beams, num_return_sequences, length_penalty, early_stopping, eos_token_id)
    constraints = dict(
        no_repeat_ngram_size=no_repeat_ngram_size,
        min_new_tokens=min_new_tokens,
        forced_bos_token_id=forced_bos_token_id,
        forced_eos_token_id=forced_eos_token_id,
        eos_token_id=eos_token_id,
    )
    check_constraint_args(**constraints)
    if not _is_natural(max_new_tokens):
        raise ValueError(f"max_new_tokens must be an integer >= 0, got {max_new_tokens!r}")
    B, t0 = input_ids.shape
    if max_len is not None and t0 + max_new_tokens > max_len:
        raise ValueError(f"start of {t0} tokens + {max_new_tokens} new ones exceeds the context of {max_len}")
    R = num_return_sequences
    if max_new_tokens == 0:  # nothing to search: the starts, with log-probability 0
        ids = input_ids.repeat_interleave(R, dim=0)
        return (ids, ids.new_zeros(B * R, dtype=torch.float32)) if return_scores else ids

    K, stop, device = num_beams, _stop_ids(eos_token_id), input_ids.device
    pad = pad_token_id if pad_token_id is not None else (stop[0] if stop else 0)
    stop_ids = torch.tensor(stop, dtype=torch.long, device=device)
    length_penalty = float(length_penalty)
    # Candidates kept per step: with one stop token, at most K of 2K candidates end, so K live beams always remain.
    n_candidates = max(2, 1 + len(stop)) * K
    may_finish = torch.arange(n_candidates, device=device) < K  # only the best K candidates may finish

    # Live beams (B, K, t0 + max_new_tokens), pad after the current length, scored by summed log-probability.
    # The K beams of a sequence start identical: only the first may extend at the first step, or the K best
    # candidates would be K copies of one.
    beams = input_ids[:, None, :].expand(B, K, t0)
    beams = torch.cat([beams, beams.new_full((B, K, max_new_tokens), pad)], dim=-1)
    beam_scores = torch.zeros(B, K, dtype=torch.float32, device=device)
    beam_scores[:, 1:] = _LOST
    # Finished hypotheses: the K best of each sequence, best first; a slot not filled yet is (_LOST, done False).
    hyps, hyp_scores = beams.clone(), torch.full((B, K), _LOST, dtype=torch.float32, device=device)
    hyp_lengths = torch.zeros(B, K, dtype=torch.long, device=device)
    hyp_done = torch.zeros(B, K, dtype=torch.bool, device=device)
    improvable = torch.ones(B, 1, dtype=torch.bool, device=device)  # could a live beam still beat a finished one?
    first_beam = (torch.arange(B, device=device) * K)[:, None]  # (B, 1): row of beam 0 of each sequence

    reorder_fn(torch.arange(B, device=device).repeat_interleave(K))
    new = input_ids.repeat_interleave(K, dim=0)  # (B * K, t0)
    for step in range(max_new_tokens):
        length = t0 + step  # tokens in every live beam
        logits = step_fn(new, None)  # (B * K, V)
        V = logits.size(-1)
        log_probs = F.log_softmax(logits.float(), dim=-1)
        log_probs = process_scores(log_probs, beams[:, :, :length].flatten(0, 1), step, max_new_tokens, **constraints)

        # 1. The best candidates: every beam extended by every token, scored by the sum of their log-probabilities.
        totals = (log_probs.view(B, K, V) + beam_scores[:, :, None]).view(B, K * V)
        cand_scores, flat = totals.topk(n_candidates)  # (B, 2K), best first
        parent, token = flat // V, flat % V  # the beam each candidate extends (B, 2K), its new token (B, 2K)
        candidates = _take(beams, parent)  # (B, 2K, t0 + max_new_tokens)
        candidates[:, :, length] = token
        ended = torch.isin(token, stop_ids) | (step == max_new_tokens - 1)  # (B, 2K): a stop token, or out of room

        # 2. The K best candidates that go on are the new beams (an ended one only if fewer than K go on: at the end).
        beam_scores, keep = (cand_scores + ended * _LOST).topk(K)  # (B, K)
        beams, parents = _take(candidates, keep), _take(parent, keep)

        # 3. Ended candidates among the best K join the finished hypotheses, if better than the K already there;
        # a sequence whose search is over (see 4) takes none.
        over = ~improvable | (hyp_done.all(-1, keepdim=True) & (early_stopping is True))  # (B, 1)
        joins = ended & may_finish & ~over  # (B, 2K)
        scores = torch.where(joins, cand_scores / ((step + 1) ** length_penalty), _LOST)  # length-penalised
        best = torch.cat([hyp_scores, scores], dim=1).topk(K).indices  # (B, K) of the K old and 2K new
        hyps = _take(torch.cat([hyps, candidates], dim=1), best)
        hyp_scores = _take(torch.cat([hyp_scores, scores], dim=1), best)
        hyp_lengths = _take(torch.cat([hyp_lengths, hyp_lengths.new_full((B, n_candidates), step + 1)], dim=1), best)
        hyp_done = _take(torch.cat([hyp_done, joins], dim=1), best)

        # 4. Could the best live beam still fill an empty slot or beat the worst finished hypothesis? Its best
        # possible score: its summed log-probability now (it only falls) over the length that flatters it most,
        # guessed to be its current length unless early_stopping="never" (then the longest, when longer is favoured).
        hoped_length = max_new_tokens if early_stopping == "never" and length_penalty > 0 else step + 1
        best_possible = beam_scores[:, :1] / (hoped_length**length_penalty)  # (B, 1)
        worst_finished = torch.where(hyp_done, hyp_scores.min(-1, keepdim=True).values, _LOST)  # (B, K); empty: _LOST
        improvable = improvable & (best_possible > worst_finished).any(-1, keepdim=True)
        all_full = early_stopping is True and bool(hyp_done.all())
        if bool(ended.all()) or not bool(improvable.any()) or all_full:
            break
        reorder_fn((first_beam + parents).flatten())  # each beam takes over its parent's cache
        new = beams[:, :, length].reshape(B * K, 1)

    ids = hyps[:, :R, : t0 + int(hyp_lengths[:, :R].max())].flatten(0, 1)  # (B * R, t0 + longest)
    return (ids, hyp_scores[:, :R].flatten()) if return_scores else ids


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
