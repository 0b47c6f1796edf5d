"""T5's span corruption and the T5 paper's other denoising objectives (Raffel et al. 2020, §3.1.4 and §3.3).

T5 pretrains text to text: the encoder reads a corrupted text, the decoder writes a target, with the teacher-forced
cross-entropy of :mod:`minilm.objectives.seq2seq`. The baseline objective (§3.1.4) "randomly samples and then drops
out 15% of tokens in the input sequence. All consecutive spans of dropped-out tokens are replaced by a single sentinel
token. Each sentinel token is assigned a token ID that is unique to the sequence." The target holds the dropped-out
spans, "delimited by the same sentinel tokens used in the input sequence plus a final sentinel token to mark the end
of the target sequence". Figure 2's example, with ``<X> <Y> <Z>`` the sentinels ``<extra_id_0> <extra_id_1> ...``::

    original:  Thank you for inviting me to your party last week .
    inputs:    Thank you <X> me to your party <Y> week .
    targets:   <X> for inviting <Y> last <Z>

§3.3 compares objectives on this sentence (Table 3) and in Tables 4-7. Each is here a function of one text, returning
(inputs, targets), and a :class:`SpanCorruptionConfig` ``corruption``:

- ``"bert"``, "BERT-style" (Tables 4, 5): i.i.d. 15% of the tokens are corrupted; "90% of the corrupted tokens are
  replaced with a special mask token and 10% are replaced with a random token"; the target is the whole original
  text ("we simply use the entire uncorrupted sequence as the target"). :func:`bert_style_corruption`.
- ``"mass"``, "MASS-style" (Table 5): the same without the random tokens, every corrupted token becomes the mask.
  :func:`bert_style_corruption` with ``random_prob=0``.
- ``"iid"``, "Replace corrupted spans" (Table 5; the baseline of §3.1.4, and of Tables 6, 7): i.i.d. 15%
  corrupted, each run of consecutive corrupted tokens replaced by one sentinel; the target lists the runs, each after
  its sentinel. :func:`span_corruption` with :func:`iid_noise_mask`.
- ``"drop"``, "Drop corrupted tokens" (Table 5): i.i.d. 15% corrupted and removed from the input; the target is the
  removed tokens, in order. :func:`drop_corrupted_tokens`.
- ``"spans"``, span corruption (§3.3.4, Table 7): the corrupted tokens are contiguous random spans of a chosen mean
  length (2, 3, 5, 10 in Table 7); with 500 tokens, 15% and a mean of 3 that is 75 tokens in 25 spans. The final T5
  objective (§3.7): "we use a mean span length of 3 and corrupt 15% of the original sequence". :func:`span_corruption`
  with :func:`random_spans_noise_mask`.

The short targets of the sentinel and drop objectives make training cheaper than BERT- and MASS-style's whole text:
0.15 of the text's length for "drop", 0.15 + 0.15 · 0.85 (one sentinel per kept run) for "iid", 0.15 · (1 + 1/3) for
"spans" (:func:`random_spans_helper`: 568 raw tokens -> 512 inputs and 114 targets, eos included).

Semantics are Google's t5 code (``t5/data/preprocessors.py``; the objectives' gin files ``iid_15_r10s90_f``,
``iid_15_m_f``, ``iid_15_u_u``, ``iid_15_d_d``, ``span_3_15_u_u``): ``random_spans_noise_mask``, ``iid_noise_mask``,
``noise_span_to_unique_sentinel`` (inputs) and ``nonnoise_span_to_unique_sentinel`` (targets),
``noise_token_to_random_token_or_sentinel``, ``noise_token_to_sentinel``, ``drop_noise_tokens`` /
``drop_nonnoise_tokens``, ``random_spans_helper``. Texts are raw token ids WITHOUT the eos: T5 corrupts a chunk of
tokens and appends ``</s>`` to inputs and targets afterwards (``eos_id``). Where the reference has quirks, they are
kept and said: counts in float32 (:func:`noise_span_counts`), a random-spans text always ends with noise so the
paper's final sentinel never comes (:func:`random_spans_noise_mask`), target sentinels number the kept runs, not the
corrupted ones (:func:`span_corruption`). Departures: more runs than sentinels is an error (T5 would go on into
ordinary vocabulary ids), random tokens are never special tokens (T5 draws from ids 3 and up, sentinels included),
and all randomness comes from ``generator`` (torch's global generator if None).

Usage::

    token_ids = span_corruption_token_ids(tokenizer)              # sentinels, eos, mask, vocabulary size, specials
    g = torch.Generator().manual_seed(0)
    example = span_corruption_example(ids, SpanCorruptionConfig(), g, **token_ids)  # {"input_ids", "labels"}
    collate = DynamicSpanCorruption(SpanCorruptionConfig("iid"), token_ids, tokenizer.pad_id)

    mask = random_spans_noise_mask(len(ids), 0.15, 3.0, g)            # (T,) bool: the corrupted tokens
    inputs, targets = span_corruption(ids, token_ids["sentinel_ids"], noise_mask=mask, eos_id=1)
    assert torch.equal(reconstruct_spans(inputs, targets, token_ids["sentinel_ids"], eos_id=1), ids)
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

from minilm.objectives.mlm import random_token_ids
from minilm.objectives.seq2seq import pad_seq2seq_batch

T5_OBJECTIVES: tuple[str, ...] = ("spans", "iid", "bert", "mass", "drop")  # see the module docstring
BERT_RANDOM_PROB = 0.1  # BERT-style: "10% are replaced with a random token" (T5's random_prob)


# ---------------------------------------------------------------------------------------------------- helpers


def _text(ids) -> Tensor:
    """``ids`` as a 1-D LongTensor, or a ValueError saying what is wrong with it."""
    if not isinstance(ids, Tensor):
        ids = torch.as_tensor(ids, dtype=torch.long)
    if ids.dim() != 1:
        raise ValueError(
            f"the corruption functions take ONE text, a 1-D tensor of token ids; got shape {tuple(ids.shape)} "
            "(for a batch, corrupt each row on its own: the corrupted texts differ in length)"
        )
    if ids.dtype.is_floating_point or ids.dtype.is_complex or ids.dtype == torch.bool:
        raise ValueError(f"token ids must be integers, got a {ids.dtype} tensor")
    return ids.long()


def _noise_mask(ids: Tensor, noise_mask) -> Tensor:
    """``noise_mask`` as a bool tensor on ``ids``' device, or a ValueError if it does not fit ``ids``."""
    noise_mask = torch.as_tensor(noise_mask)
    if noise_mask.dtype != torch.bool or noise_mask.shape != ids.shape:
        raise ValueError(
            f"noise_mask must be a bool tensor shaped like the text {tuple(ids.shape)}, "
            f"got {noise_mask.dtype} {tuple(noise_mask.shape)}"
        )
    return noise_mask.to(ids.device)


def _with_eos(ids: Tensor, eos_id: int | None) -> Tensor:
    """T5 appends ``</s>`` to inputs and targets after the corruption (seqio's ``append_eos``)."""
    return ids if eos_id is None else torch.cat([ids, ids.new_tensor([eos_id])])


def _check_density(noise_density: float) -> None:
    if not 0.0 < noise_density < 1.0:  # also catches NaN
        raise ValueError(f"noise_density={noise_density} must be in (0, 1): the fraction of tokens corrupted (T5: .15)")


def _check_span_length(mean_noise_span_length: float) -> None:
    if not (mean_noise_span_length >= 1 and math.isfinite(mean_noise_span_length)):
        raise ValueError(
            f"mean_noise_span_length={mean_noise_span_length} must be a finite number >= 1: the mean length of a "
            "corrupted span, in tokens (T5: 3)"
        )


# ---------------------------------------------------------------------------------------------------- noise masks


def noise_span_counts(length: int, noise_density: float = 0.15, mean_noise_span_length: float = 3.0) -> tuple[int, int]:
    """T5's (num_noise_tokens, num_noise_spans) for a text of ``length`` tokens, as ``random_spans_noise_mask`` fixes
    them before drawing anything:

        num_noise_tokens = round(length · noise_density), clipped to [1, length - 1]
        num_noise_spans  = max(round(num_noise_tokens / mean_noise_span_length), 1)

    T5 computes them in TensorFlow float32 and ``tf.round`` rounds half to even; so does this. It matters at halves:
    190 · 0.15 is 28.5, but float32(0.15) is a little above 0.15, so T5 corrupts 29 tokens in 10 spans where float64
    (HF's Flax port of this function) gives 28 in 9. Computed for max(``length``, 2), as T5 does ("increase length to
    avoid degeneracy"); a text of 0 or 1 tokens then loses its noise (see :func:`random_spans_noise_mask`).

    A ValueError when the spans cannot alternate: each of the num_noise_spans non-noise spans needs a token.
    """
    _check_density(noise_density)
    _check_span_length(mean_noise_span_length)
    if length < 0:
        raise ValueError(f"length={length} must be >= 0: the number of tokens in the text")
    length = max(length, 2)
    num_noise_tokens = int(np.round(np.float32(length) * np.float32(noise_density)))
    num_noise_tokens = min(max(num_noise_tokens, 1), length - 1)  # "positive numbers of noise and nonnoise tokens"
    num_noise_spans = int(np.round(np.float32(num_noise_tokens) / np.float32(mean_noise_span_length)))
    num_noise_spans = max(num_noise_spans, 1)  # "ensuring positive number of noise spans"
    if num_noise_spans > length - num_noise_tokens:
        raise ValueError(
            f"noise_density={noise_density} with mean_noise_span_length={mean_noise_span_length} makes "
            f"{num_noise_spans} spans of noise in {length} tokens but leaves {length - num_noise_tokens} other tokens "
            "to separate them: lower noise_density or raise mean_noise_span_length"
        )
    return num_noise_tokens, num_noise_spans


def _random_segmentation(num_items: int, num_segments: int, generator: torch.Generator | None) -> Tensor:
    """T5's ``_random_segmentation``: (num_segments,) positive lengths summing to ``num_items``, each of the
    C(num_items - 1, num_segments - 1) compositions equally likely. T5 shuffles num_segments - 1 ones among the
    num_items - 1 gaps between items (a one: a new segment starts after that gap); choosing the gaps is the same."""
    first_in_segment = torch.zeros(num_items, dtype=torch.long)
    gaps = torch.randperm(num_items - 1, generator=generator)[: num_segments - 1]
    first_in_segment[gaps + 1] = 1
    segment_id = first_in_segment.cumsum(0)  # (num_items,)
    return torch.bincount(segment_id, minlength=num_segments)


def random_spans_noise_mask(
    length: int,
    noise_density: float = 0.15,
    mean_noise_span_length: float = 3.0,
    generator: torch.Generator | None = None,
) -> Tensor:
    """T5's span corruption mask: (length,) bool, True at the corrupted ("noise") tokens.

    The counts are fixed (:func:`noise_span_counts`): N noise tokens in k spans. T5: "Spans alternate between
    non-noise and noise, beginning with non-noise. Subject to the above restrictions, all masks are equally likely."
    The N noise tokens are cut into k non-empty spans at random, the length - N others too, and they interleave
    ``nonnoise_0 noise_0 nonnoise_1 noise_1 ... noise_{k-1}``: the first token is never noise and the last always is
    (with k = 1, the noise is the last N tokens; T5 later added a ``random_roll`` option for that, not used here or in
    the paper). A text of 0 or 1 tokens is masked as if it had 2 and cut: no noise.
    """
    num_noise_tokens, num_noise_spans = noise_span_counts(length, noise_density, mean_noise_span_length)
    padded = max(length, 2)
    noise_lengths = _random_segmentation(num_noise_tokens, num_noise_spans, generator)  # (k,)
    nonnoise_lengths = _random_segmentation(padded - num_noise_tokens, num_noise_spans, generator)  # (k,)
    interleaved = torch.stack([nonnoise_lengths, noise_lengths], dim=1).flatten()  # (2k,) nonnoise_0, noise_0, ...
    is_noise = torch.arange(2 * num_noise_spans) % 2 == 1  # (2k,) odd spans are noise
    return is_noise.repeat_interleave(interleaved)[:length]


def iid_noise_mask(length: int, noise_density: float = 0.15, generator: torch.Generator | None = None) -> Tensor:
    """T5's ``iid_noise_mask``: (length,) bool, each token noise independently with probability ``noise_density``
    (the count varies around ``noise_density`` · length; neighbouring noise tokens form runs by chance)."""
    _check_density(noise_density)
    return torch.rand(length, generator=generator) < noise_density


# ---------------------------------------------------------------------------------------------------- objectives


def noise_span_to_unique_sentinel(ids: Tensor, noise_mask: Tensor, sentinel_ids: Sequence[int]) -> Tensor:
    """T5's ``noise_span_to_unique_sentinel``: each run of consecutive noise tokens becomes ONE sentinel, the i-th run
    ``sentinel_ids[i]`` (``<extra_id_i>``; T5: "Sentinels assigned in decreasing order within the sequence starting at
    vocabulary.size - 1"); the other tokens stay. (T,) -> (T - #noise + #runs,).

    A ValueError if there are more runs than sentinels (T5 would go on with ordinary vocabulary ids below them).
    """
    previous = torch.zeros_like(noise_mask)
    previous[1:] = noise_mask[:-1]  # prev_token_is_noise
    first = noise_mask & ~previous  # (T,) the first token of each run: gets the run's sentinel
    subsequent = noise_mask & previous  # (T,) the rest of each run: dropped
    num_runs = int(first.sum())
    if num_runs > len(sentinel_ids):
        raise ValueError(
            f"the text has {num_runs} corrupted spans but there are only {len(sentinel_ids)} sentinels: corrupt "
            "shorter texts (T5: 568 tokens for 100 sentinels) or use longer spans (mean_noise_span_length)"
        )
    sentinels = torch.as_tensor(list(sentinel_ids[:num_runs]), dtype=torch.long, device=ids.device)
    return ids.masked_scatter(first, sentinels)[~subsequent]


def span_corruption(
    ids: Tensor,
    sentinel_ids: Sequence[int],
    noise_density: float = 0.15,
    mean_noise_span_length: float = 3.0,
    generator: torch.Generator | None = None,
    *,
    eos_id: int | None = None,
    noise_mask: Tensor | None = None,
) -> tuple[Tensor, Tensor]:
    """Span corruption: (inputs, targets) for one text (T,), each run of corrupted tokens replaced by one sentinel.

    The corrupted tokens are ``noise_mask`` when given (e.g. :func:`iid_noise_mask`, the "iid" objective; density,
    span length and generator are then unused), else :func:`random_spans_noise_mask` (the "spans" objective). As T5:

        inputs  = noise_span_to_unique_sentinel(ids, mask)      kept tokens, <extra_id_i> for the i-th corrupted run
        targets = noise_span_to_unique_sentinel(ids, ~mask)     corrupted tokens, <extra_id_j> for the j-th kept run

    (the targets are T5's ``nonnoise_span_to_unique_sentinel``). With random spans the text starts with kept tokens
    and ends with corrupted ones, so the targets are ``<extra_id_0> span_0 <extra_id_1> span_1 ... span_{k-1}``, each
    sentinel before the span it replaced in the inputs, and no final sentinel (the eos ends the target). With an
    i.i.d. mask a text ending with kept tokens gets the paper's final sentinel; one STARTING with a corrupted token
    gets targets starting with that run and no sentinel, and then the targets' ``<extra_id_i>`` precedes the run that
    the inputs' ``<extra_id_{i+1}>`` stands for: T5's code does this, and :func:`reconstruct_spans` copes with it.

    ``eos_id``: appended to both. Lengths: T - N + k (+1) and N + k' (+1), with N corrupted tokens in k runs and k'
    kept runs (k' = k for random spans).
    """
    ids = _text(ids)
    if noise_mask is None:
        noise_mask = random_spans_noise_mask(len(ids), noise_density, mean_noise_span_length, generator)
    noise_mask = _noise_mask(ids, noise_mask)
    inputs = noise_span_to_unique_sentinel(ids, noise_mask, sentinel_ids)
    targets = noise_span_to_unique_sentinel(ids, ~noise_mask, sentinel_ids)
    return _with_eos(inputs, eos_id), _with_eos(targets, eos_id)


def _runs(ids: Tensor, sentinels: Tensor) -> list[Tensor]:
    """The non-empty pieces of ``ids`` between sentinels, in order."""
    cuts = torch.isin(ids, sentinels).nonzero().squeeze(1)
    pieces = torch.tensor_split(ids, cuts)  # every piece but the first starts with its sentinel
    return [piece for piece in (pieces[0], *(p[1:] for p in pieces[1:])) if len(piece)]


def reconstruct_spans(
    inputs: Tensor, targets: Tensor, sentinel_ids: Sequence[int], *, eos_id: int | None = None
) -> Tensor:
    """The original text back from :func:`span_corruption`'s (inputs, targets): proof that nothing is lost.

    The text alternates kept and corrupted runs. The kept runs are the inputs' pieces between sentinels, the corrupted
    runs the targets' pieces, in order; the text starts with a corrupted run exactly when the inputs start with a
    sentinel. Interleaving by position, not by sentinel id, also undoes T5's shifted sentinels (an i.i.d. mask that
    corrupts the first token). A trailing ``eos_id`` is removed from both first; the text must hold no sentinel.
    """
    inputs, targets = _text(inputs), _text(targets)
    if eos_id is not None:
        inputs = inputs[:-1] if len(inputs) and inputs[-1] == eos_id else inputs
        targets = targets[:-1] if len(targets) and targets[-1] == eos_id else targets
    sentinels = torch.as_tensor(list(sentinel_ids), dtype=torch.long, device=inputs.device)
    kept, corrupted = _runs(inputs, sentinels), _runs(targets, sentinels)
    starts_corrupted = len(inputs) > 0 and bool(torch.isin(inputs[0], sentinels))
    first, second = (corrupted, kept) if starts_corrupted else (kept, corrupted)
    runs = [run for pair in itertools.zip_longest(first, second) for run in pair if run is not None]
    return torch.cat([inputs[:0], *runs])


def bert_style_corruption(
    ids: Tensor,
    mask_id: int,
    noise_density: float = 0.15,
    generator: torch.Generator | None = None,
    *,
    random_prob: float = BERT_RANDOM_PROB,
    vocab_size: int | None = None,
    special_ids: Sequence[int] = (),
    eos_id: int | None = None,
    noise_mask: Tensor | None = None,
) -> tuple[Tensor, Tensor]:
    """BERT-style (``random_prob`` 0.1) and MASS-style (``random_prob`` 0) corruption: (inputs (T,), targets (T,)).

    Corrupted tokens: ``noise_mask``, else :func:`iid_noise_mask` (i.i.d. ``noise_density``: about 15%, not an
    exact count). Each becomes ``mask_id`` (T5: the sentinel ``<extra_id_0>``, its ``sentinel_id``), or a random
    token with probability ``random_prob``: T5's ``noise_token_to_random_token_or_sentinel`` flips one coin per
    token, so the 90/10 split is binomial, not exact, and no corrupted token stays as it was (BERT's 80/10/10 keeps
    10%). Random tokens are drawn uniformly from ``0 .. vocab_size - 1`` but ``mask_id`` and ``special_ids`` (T5 draws
    from 3 .. vocab_size - 1, sentinels included). The targets are the whole text, ``eos_id`` appended to both.
    """
    ids = _text(ids)
    if not 0.0 <= random_prob <= 1.0:
        raise ValueError(f"random_prob={random_prob} must be in [0, 1]: the fraction of corrupted tokens made random")
    if noise_mask is None:
        noise_mask = iid_noise_mask(len(ids), noise_density, generator)
    noise_mask = _noise_mask(ids, noise_mask)
    inputs = ids.masked_fill(noise_mask, mask_id)  # T5's noise_token_to_sentinel (MASS-style)
    if random_prob > 0:
        if vocab_size is None:
            raise ValueError("random_prob > 0 needs vocab_size: random tokens are drawn from 0 .. vocab_size - 1")
        use_random = (torch.rand(len(ids), generator=generator) < random_prob).to(ids.device)  # (T,) a coin each
        candidates = random_token_ids(vocab_size, [mask_id, *special_ids])
        random_ids = candidates[torch.randint(len(candidates), (len(ids),), generator=generator)].to(ids.device)
        inputs = torch.where(noise_mask & use_random, random_ids, inputs)
    return _with_eos(inputs, eos_id), _with_eos(ids, eos_id)


def drop_corrupted_tokens(
    ids: Tensor,
    noise_density: float = 0.15,
    generator: torch.Generator | None = None,
    *,
    eos_id: int | None = None,
    noise_mask: Tensor | None = None,
) -> tuple[Tensor, Tensor]:
    """The paper's "Drop corrupted tokens": the corrupted tokens (``noise_mask``, else i.i.d. ``noise_density``) are
    removed from the inputs and are the targets, in order (T5's ``drop_noise_tokens`` / ``drop_nonnoise_tokens``).
    The model is not told where each target token was. (T,) -> (T - N,), (N,), ``eos_id`` appended to both."""
    ids = _text(ids)
    if noise_mask is None:
        noise_mask = iid_noise_mask(len(ids), noise_density, generator)
    noise_mask = _noise_mask(ids, noise_mask)
    return _with_eos(ids[~noise_mask], eos_id), _with_eos(ids[noise_mask], eos_id)


# ---------------------------------------------------------------------------------------------------- lengths


def _corrupted_lengths(
    tokens_length: int, noise_density: float, mean_noise_span_length: float, extra_inputs: int, extra_targets: int
) -> tuple[int, int]:
    """T5's ``_tokens_length_to_inputs_length_targets_length``: inputs and targets lengths, eos included, for a text
    of ``tokens_length`` tokens (Python's float64 round, no clipping: the helper's arithmetic, not the mask's)."""
    num_noise_tokens = int(round(tokens_length * noise_density))
    num_nonnoise_tokens = tokens_length - num_noise_tokens
    num_noise_spans = int(round(num_noise_tokens / mean_noise_span_length))
    # "inputs contain all nonnoise tokens, sentinels for all noise spans and one EOS token"
    return (
        num_nonnoise_tokens + num_noise_spans * extra_inputs + 1,
        num_noise_tokens + num_noise_spans * extra_targets + 1,
    )


MIN_TEXT_LENGTH = 2  # raw tokens: one noise token and one other to separate it from eos


def random_spans_helper(
    inputs_length: int = 512,
    noise_density: float = 0.15,
    mean_noise_span_length: float = 3.0,
    extra_tokens_per_span_inputs: int = 1,
    extra_tokens_per_span_targets: int = 1,
) -> tuple[int, int]:
    """T5's ``random_spans_helper``: (tokens_length, targets_length), the raw text length whose span-corrupted inputs
    fill ``inputs_length`` exactly (eos included, so no padding), and the targets' length then: the decoder's length,
    i.e. the training cost. T5's baseline: 512 -> (568, 114).

    T5's loop: start at inputs_length - 1 raw tokens and add one while the inputs still fit; then, with
    ``noise_density`` 0.5, a "minor hack to get the targets length to be equal to inputs length". The counts use
    Python's float64 round, so at halves they may be one below the mask's float32 ones (:func:`noise_span_counts`).
    A ValueError when the texts would be shorter than :data:`MIN_TEXT_LENGTH` (inputs too short to corrupt).
    """
    _check_density(noise_density)
    _check_span_length(mean_noise_span_length)
    extra = (extra_tokens_per_span_inputs, extra_tokens_per_span_targets)
    if min(extra) < 0:
        raise ValueError(f"extra tokens per span must be >= 0, got {extra}")
    tokens_length, targets_length = _helper_lengths(inputs_length, noise_density, mean_noise_span_length, *extra)
    if tokens_length < MIN_TEXT_LENGTH:  # a text needs a noise token and a token beside it
        shortest = next(
            n
            for n in itertools.count(max(inputs_length, 1))
            if _helper_lengths(n, noise_density, mean_noise_span_length, *extra)[0] >= MIN_TEXT_LENGTH
        )
        raise ValueError(
            f"inputs_length={inputs_length} is too short for span corruption: its texts would have {tokens_length} "
            f"token(s), and a noise span needs at least {MIN_TEXT_LENGTH}; give inputs of at least {shortest} tokens"
        )
    return tokens_length, targets_length


def _helper_lengths(
    inputs_length: int, noise_density: float, mean_noise_span_length: float, extra_inputs: int, extra_targets: int
) -> tuple[int, int]:
    """:func:`random_spans_helper`'s arithmetic, unchecked."""
    extra = (extra_inputs, extra_targets)
    tokens_length = inputs_length - 1
    while _corrupted_lengths(tokens_length + 1, noise_density, mean_noise_span_length, *extra)[0] <= inputs_length:
        tokens_length += 1
    inputs_length, targets_length = _corrupted_lengths(tokens_length, noise_density, mean_noise_span_length, *extra)
    if noise_density == 0.5 and targets_length > inputs_length:
        tokens_length -= 1
        targets_length -= 1
    return tokens_length, targets_length


# ---------------------------------------------------------------------------------------------------- config, examples


@dataclass(frozen=True)
class SpanCorruptionConfig:
    """Which of the T5 paper's objectives :func:`span_corruption_example` applies; the defaults are T5's final one
    (span corruption, 15%, mean span length 3). ``corruption``, each the paper's row:

    - ``"spans"``: span corruption, random spans of mean ``mean_noise_span_length`` (§3.3.4, Table 7; T5's choice)
    - ``"iid"``: "Replace corrupted spans" with i.i.d. corruption (Table 5; the baseline, "i.i.d." in Tables 6, 7)
    - ``"bert"``: "BERT-style", 90% mask / 10% random, whole text as target (Tables 4, 5)
    - ``"mass"``: "MASS-style", all masks, whole text as target (Table 5)
    - ``"drop"``: "Drop corrupted tokens", i.i.d. (Table 5)

    ``noise_density``: the fraction corrupted ("corruption rate", Table 6: 10, 15, 25, 50%). The token ids belong to
    the tokenizer (:func:`span_corruption_token_ids`)."""

    corruption: str = "spans"
    noise_density: float = 0.15
    mean_noise_span_length: float = 3.0  # "spans" only

    def __post_init__(self) -> None:
        self.validate()

    def validate(self, length: int | None = None, num_sentinels: int | None = None) -> None:
        """A ValueError naming the first bad setting. With ``length`` and ``num_sentinels``, also checks that a
        "spans" text of ``length`` tokens has no more spans than sentinels (the other objectives' span counts are
        random; :func:`noise_span_to_unique_sentinel` checks each text)."""
        if self.corruption not in T5_OBJECTIVES:
            raise ValueError(f"corruption={self.corruption!r}: choose one of {', '.join(map(repr, T5_OBJECTIVES))}")
        _check_density(self.noise_density)
        _check_span_length(self.mean_noise_span_length)
        if self.corruption == "spans" and length is not None and num_sentinels is not None:
            _, num_spans = noise_span_counts(length, self.noise_density, self.mean_noise_span_length)
            if num_spans > num_sentinels:
                raise ValueError(
                    f"{length} tokens make {num_spans} corrupted spans but there are only {num_sentinels} sentinels: "
                    "use shorter texts or a larger mean_noise_span_length"
                )


def span_corruption_example(
    ids: Tensor,
    config: SpanCorruptionConfig,
    generator: torch.Generator | None = None,
    *,
    sentinel_ids: Sequence[int],
    eos_id: int | None,
    mask_id: int | None = None,
    vocab_size: int | None = None,
    special_ids: Sequence[int] = (),
) -> dict[str, Tensor]:
    """One T5 pretraining example from a raw text (T,) (no eos): ``{"input_ids": (T',), "labels": (T'',)}``, the
    ``config.corruption``'s inputs and targets, each ending with ``eos_id``. The decoder's input is ``labels`` shifted
    right (the model does that). "bert" and "mass" need ``mask_id``, "bert" also ``vocab_size``;
    :func:`span_corruption_token_ids` gives all the keywords."""
    ids = _text(ids)
    config.validate()
    density = config.noise_density
    if config.corruption == "spans":
        mask = random_spans_noise_mask(len(ids), density, config.mean_noise_span_length, generator)
        inputs, targets = span_corruption(ids, sentinel_ids, eos_id=eos_id, noise_mask=mask)
    elif config.corruption == "iid":
        mask = iid_noise_mask(len(ids), density, generator)
        inputs, targets = span_corruption(ids, sentinel_ids, eos_id=eos_id, noise_mask=mask)
    elif config.corruption == "drop":
        inputs, targets = drop_corrupted_tokens(ids, density, generator, eos_id=eos_id)
    else:  # "bert", "mass"
        if mask_id is None:
            raise ValueError(f"corruption={config.corruption!r} needs mask_id (T5 uses the sentinel <extra_id_0>)")
        random_prob = BERT_RANDOM_PROB if config.corruption == "bert" else 0.0
        randoms = dict(random_prob=random_prob, vocab_size=vocab_size, special_ids=special_ids)
        inputs, targets = bert_style_corruption(ids, mask_id, density, generator, eos_id=eos_id, **randoms)
    return {"input_ids": inputs, "labels": targets}


def span_corruption_token_ids(tokenizer) -> dict:
    """The keywords of :func:`span_corruption_example` from a ``minilm.tokenizers.Tokenizer`` of family "t5": the
    sentinel ids (``<extra_id_i>`` at index i), eos, ``mask_id`` (the tokenizer's mask, else ``<extra_id_0>`` as in
    T5's BERT-style objective), the vocabulary size and the special ids (sentinels included: never random tokens)."""
    sentinels = tokenizer.sentinel_ids
    if tokenizer.family != "t5" or not sentinels or None in sentinels:
        raise ValueError(
            f"T5's objectives need the sentinel tokens <extra_id_0> ... <extra_id_99>, which a {tokenizer.family!r} "
            "tokenizer does not have: train or load a tokenizer of family 't5'"
        )
    return dict(
        sentinel_ids=tuple(sentinels),
        eos_id=tokenizer.eos_id,
        mask_id=sentinels[0] if tokenizer.mask_id is None else tokenizer.mask_id,
        vocab_size=tokenizer.vocab_size,
        special_ids=tuple(tokenizer.special_ids),
    )


class DynamicSpanCorruption:
    """A collate function that corrupts at batch time: raw texts (dicts with 1-D ``input_ids``, no eos) -> a padded
    batch of :func:`span_corruption_example` s (:func:`minilm.objectives.seq2seq.pad_seq2seq_batch`: ``input_ids``,
    ``attention_mask``, ``labels`` with -100 at padding), fresh corruption every time a text is read, as
    :class:`~minilm.objectives.denoising.DynamicNoising` noises.

    ``token_ids``: :func:`span_corruption_token_ids` of the tokenizer. With ``seed=None`` the corruption comes from
    torch's global generator, which ``torch.manual_seed`` fixes and the Trainer's checkpoints save and restore (a
    resumed run corrupts exactly as an uninterrupted one); an int seed gives it its own generator (fixed validation
    corruption).
    """

    def __init__(self, config: SpanCorruptionConfig, token_ids: dict, pad_id: int, seed: int | None = None) -> None:
        config.validate()
        self.config, self.token_ids, self.pad_id = config, token_ids, pad_id
        self.generator = None if seed is None else torch.Generator().manual_seed(seed)

    def __call__(self, texts: list[dict]) -> dict[str, Tensor]:
        corrupt = span_corruption_example
        examples = [corrupt(t["input_ids"], self.config, self.generator, **self.token_ids) for t in texts]
        return pad_seq2seq_batch(examples, self.pad_id)
