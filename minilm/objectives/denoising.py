"""BART's noising functions (Lewis et al. 2020, §2.2 and Figure 2): corrupt a document, reconstruct all of it.

BART is a denoising autoencoder: "BART is trained by corrupting documents and then optimizing a reconstruction
loss—the cross-entropy between the decoder's output and the original document". With x the original document and
x̃ = noise(x) the corrupted one the encoder reads, the decoder predicts every token of x left to right:

    L(θ) = -Σ_t log P_θ(x_t | x_<t, x̃)

"Unlike existing denoising autoencoders, which are tailored to specific noising schemes, BART allows us to apply
any type of document corruption." The paper compares five (§2.2):

- Token Masking: "Following BERT, random tokens are sampled and replaced with [MASK] elements." (:func:`token_masking`)
- Token Deletion: "Random tokens are deleted from the input. In contrast to token masking, the model must decide
  which positions are missing inputs." (:func:`token_deletion`)
- Text Infilling: "A number of text spans are sampled, with span lengths drawn from a Poisson distribution (λ = 3).
  Each span is replaced with a single [MASK] token. 0-length spans correspond to the insertion of [MASK] tokens."
  Unlike SpanBERT's spans (as many [MASK] as tokens), the model must "predict how many tokens are missing from a
  span". (:func:`text_infilling`)
- Sentence Permutation: "A document is divided into sentences based on full stops, and these sentences are shuffled
  in a random order." (:func:`sentence_permutation`)
- Document Rotation: "A token is chosen uniformly at random, and the document is rotated so that it begins with that
  token. This task trains the model to identify the start of the document." (:func:`document_rotation`)

The final models (§5.1) "use a combination of text infilling and sentence permutation. We mask 30% of tokens in each
document, and permute all sentences": :class:`DenoisingConfig`'s defaults.

Semantics follow fairseq's ``DenoisingDataset`` (``fairseq/data/denoising_dataset.py``), the code BART was trained
with. Every function takes ONE document, a 1-D tensor of token ids ``<s> tokens </s>``, and returns a new 1-D
LongTensor (its length may change). Pass ``bos_id`` / ``eos_id``: a first token equal to ``bos_id`` and a last
token equal to ``eos_id`` are protected (never masked, deleted, moved or replaced) and every noise works on the
tokens between them (the *body*, n tokens); without them (None) the whole tensor is the body. Counts are fairseq's:
ceil(ratio · n) tokens, chosen uniformly without replacement (a 1e-9 slack keeps ceil(0.3 · 10) at 3). All
randomness comes from ``generator`` (torch's global generator if None), so a seeded generator gives the same noise.

Usage::

    config = DenoisingConfig(noises="infilling+permutation")       # the paper's (the default); mask_ratio=0.3, λ=3
    ids_kw = noise_token_ids(tokenizer)                               # mask/bos/eos/full-stop ids, vocab size
    g = torch.Generator().manual_seed(0)
    example = denoising_example(ids, config, g, **ids_kw)            # {"input_ids": x̃ (T',), "labels": x (T,)}

    x_tilde, spans = text_infilling(ids, mask_id, 0.3, 3.0, g, bos_id=0, eos_id=2, return_spans=True)
    # spans (k, 3): output position of each mask, and the (start, length) of the original tokens it replaced
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

from minilm.objectives.mlm import random_token_ids
from minilm.objectives.seq2seq import pad_seq2seq_batch
from minilm.ranges import MIN_POISSON_LAMBDA

# The noises, in the order add_noise applies them (fairseq's: permutation, then masking, then rotation).
NOISES: tuple[str, ...] = ("permutation", "masking", "deletion", "infilling", "rotation")
OVERLAPS: tuple[str, ...] = ("disjoint", "merge")  # how text_infilling places its spans (see there)
_SLACK = 1e-9  # ceil(ratio * n - slack): float products such as 0.7 * 10 = 7.000000000000001 must not round up


# ---------------------------------------------------------------------------------------------------- helpers


def _document(ids) -> Tensor:
    """``ids`` as a 1-D LongTensor, or a ValueError saying what is wrong with it."""
    if not isinstance(ids, Tensor):
        ids = torch.as_tensor(ids, dtype=torch.long)
    if ids.dim() != 1:
        raise ValueError(
            f"the noising functions take ONE document, a 1-D tensor of token ids; got shape {tuple(ids.shape)} "
            "(for a batch, noise each row on its own: the noised documents differ in length)"
        )
    if ids.dtype.is_floating_point or ids.dtype.is_complex or ids.dtype == torch.bool:
        raise ValueError(f"token ids must be integers, got a {ids.dtype} tensor")
    return ids.long()


def _split(ids: Tensor, bos_id: int | None, eos_id: int | None) -> tuple[Tensor, Tensor, Tensor]:
    """(head, body, tail): the protected first bos (if ``ids[0] == bos_id``), the tokens to noise, the protected
    last eos (if ``ids[-1] == eos_id``); head and tail are empty when absent."""
    start = 1 if bos_id is not None and len(ids) > 0 and int(ids[0]) == bos_id else 0
    end = len(ids) - 1 if eos_id is not None and len(ids) > start and int(ids[-1]) == eos_id else len(ids)
    return ids[:start], ids[start:end], ids[end:]


def _check_ratio(name: str, value: float, what: str) -> None:
    if not 0.0 <= value <= 1.0:  # also catches NaN
        raise ValueError(f"{name}={value} must be in [0, 1]: the fraction of {what}")


def _check_lambda(poisson_lambda: float) -> None:
    # a λ near 0 makes nearly every draw an empty span: about budget/λ draws, and as many masks inserted
    if not (poisson_lambda >= MIN_POISSON_LAMBDA and math.isfinite(poisson_lambda)):
        raise ValueError(
            f"poisson_lambda={poisson_lambda} must be a finite number >= {MIN_POISSON_LAMBDA}: the mean span length "
            f"(BART: 3); below {MIN_POISSON_LAMBDA} nearly every span is empty and inserts a mask"
        )


def _count(ratio: float, n: int) -> int:
    """fairseq's number of tokens to corrupt: ceil(ratio · n), between 0 and n."""
    return min(n, max(0, math.ceil(ratio * n - _SLACK)))


def _chosen(n: int, k: int, generator: torch.Generator | None, device) -> Tensor:
    """(n,) bool: k positions of n, chosen uniformly without replacement."""
    chosen = torch.zeros(n, dtype=torch.bool, device=device)
    chosen[torch.randperm(n, generator=generator, device=device)[:k]] = True
    return chosen


def _randomize(
    tokens: Tensor,
    is_mask: Tensor,
    random_ratio: float,
    vocab_size: int | None,
    excluded: Sequence[int | None],
    generator: torch.Generator | None,
) -> Tensor:
    """fairseq's ``mask_random``: each mask becomes a random token with probability ``random_ratio``, drawn uniformly
    from ``0 .. vocab_size - 1`` but the ``excluded`` ids (mask, bos, eos, the other special tokens)."""
    _check_ratio("random_ratio", random_ratio, "masks replaced by random tokens")
    if random_ratio == 0.0:
        return tokens
    if vocab_size is None:
        raise ValueError("random_ratio > 0 needs vocab_size: random tokens are drawn from 0 .. vocab_size - 1")
    excluded = sorted({int(i) for i in excluded if i is not None and 0 <= int(i) < vocab_size})
    candidates = random_token_ids(vocab_size, excluded, device=tokens.device)
    flip = is_mask & (torch.rand(tokens.shape, generator=generator, device=tokens.device) < random_ratio)
    draws = candidates[torch.randint(len(candidates), tokens.shape, generator=generator, device=tokens.device)]
    return torch.where(flip, draws, tokens)


# ---------------------------------------------------------------------------------------------------- noises


def token_masking(
    ids: Tensor,
    mask_id: int,
    ratio: float = 0.3,
    generator: torch.Generator | None = None,
    *,
    bos_id: int | None = None,
    eos_id: int | None = None,
    random_ratio: float = 0.0,
    vocab_size: int | None = None,
    special_ids: Sequence[int] = (),
) -> Tensor:
    """Token masking: exactly ceil(``ratio`` · n) of the n body tokens, chosen uniformly, become ``mask_id``.

    Unlike BERT there is no 80/10/10 split and no label mask: the target is the whole document. With
    ``random_ratio`` > 0 each chosen token becomes a random one (never mask, bos, eos or ``special_ids``) with that
    probability instead (fairseq's ``--mask-random``; needs ``vocab_size``). (T,) -> (T,): the length is unchanged.
    """
    ids = _document(ids)
    _check_ratio("ratio", ratio, "tokens masked")
    head, body, tail = _split(ids, bos_id, eos_id)
    chosen = _chosen(len(body), _count(ratio, len(body)), generator, body.device)  # (n,)
    body = body.masked_fill(chosen, mask_id)
    body = _randomize(body, chosen, random_ratio, vocab_size, [mask_id, bos_id, eos_id, *special_ids], generator)
    return torch.cat([head, body, tail])


def token_deletion(
    ids: Tensor,
    ratio: float = 0.3,
    generator: torch.Generator | None = None,
    *,
    bos_id: int | None = None,
    eos_id: int | None = None,
) -> Tensor:
    """Token deletion: exactly ceil(``ratio`` · n) of the n body tokens, chosen uniformly, are removed; the rest keep
    their order (the output is a subsequence of the input). (T,) -> (T - ceil(ratio · n),)."""
    ids = _document(ids)
    _check_ratio("ratio", ratio, "tokens deleted")
    head, body, tail = _split(ids, bos_id, eos_id)
    chosen = _chosen(len(body), _count(ratio, len(body)), generator, body.device)
    return torch.cat([head, body[~chosen], tail])


def poisson_span_lengths(
    budget: int, poisson_lambda: float = 3.0, generator: torch.Generator | None = None, device=None
) -> Tensor:
    """Text infilling's span lengths, fairseq's way: draw lengths ~ Poisson(λ) until their sum reaches ``budget``
    (the number of tokens to mask), keep the draws up to that point and trim the last one so the sum is exactly
    ``budget``. Returns (k,) lengths in draw order: all i.i.d. Poisson(λ) but the last (trimmed, always >= 1);
    zeros among them are insertions. ``budget`` 0 gives no span.
    """
    _check_lambda(poisson_lambda)
    if budget < 0:
        raise ValueError(f"budget={budget} must be >= 0: the number of tokens the spans cover")
    if budget == 0:
        return torch.zeros(0, dtype=torch.long, device=device)
    # draws come in batches (one usually suffices: expected sum λ·budget + budget); batching leaves them i.i.d.
    rates = torch.full((budget + math.ceil(budget / poisson_lambda),), float(poisson_lambda), device=device)
    lengths = torch.poisson(rates, generator=generator).long()
    while int(lengths.sum()) < budget:
        lengths = torch.cat([lengths, torch.poisson(rates, generator=generator).long()])
    total = lengths.cumsum(0)
    last = int(torch.searchsorted(total, torch.tensor(budget, device=total.device)))  # first draw reaching budget
    lengths = lengths[: last + 1].clone()
    lengths[last] = budget - (int(total[last - 1]) if last > 0 else 0)
    return lengths


def _place_disjoint(body: Tensor, lengths: Tensor, mask_id: int, generator) -> tuple[Tensor, Tensor, Tensor]:
    """Spans laid out without overlap: the n - m kept tokens and the k spans are arranged in a uniformly random
    interleaving (kept tokens in order, spans in random order). Returns (tokens, consumed, is_mask), all (n - m + k,):
    the output, how many body tokens each output token stands for (1 kept, the span length for a mask), masks."""
    n, k = len(body), len(lengths)
    width = n - int(lengths.sum()) + k  # kept tokens + one mask per span
    is_mask = _chosen(width, k, generator, body.device)
    consumed = torch.ones(width, dtype=torch.long, device=body.device)
    consumed[is_mask] = lengths[torch.randperm(k, generator=generator, device=body.device)]  # the trimmed one anywhere
    start = consumed.cumsum(0) - consumed  # first body token each output token stands for
    tokens = torch.full((width,), mask_id, dtype=torch.long, device=body.device)
    tokens[~is_mask] = body[start[~is_mask]]
    return tokens, consumed, is_mask


def _place_merged(body: Tensor, lengths: Tensor, mask_id: int, generator) -> tuple[Tensor, Tensor, Tensor]:
    """fairseq's layout: the spans of length >= 1 start at distinct uniformly chosen body tokens and run to the end
    of the body at most; a span starting inside another is swallowed by it (overlapping spans merge into one mask,
    touching ones keep a mask each); then the 0-length spans insert masks at uniformly random places. Same
    (tokens, consumed, is_mask) as :func:`_place_disjoint`."""
    n, device = len(body), body.device
    span_lengths = lengths[lengths > 0]
    n_inserts, k = len(lengths) - len(span_lengths), len(span_lengths)
    starts = torch.randperm(n, generator=generator, device=device)[:k]
    ends = (starts + span_lengths).clamp(max=n)
    depth = torch.zeros(n + 1, dtype=torch.long, device=device)  # how many spans cover each body token
    depth.index_add_(0, starts, torch.ones_like(starts)).index_add_(0, ends, -torch.ones_like(ends))
    depth = depth.cumsum(0)[:n]
    covered = depth > 0
    head = torch.zeros(n, dtype=torch.bool, device=device)
    head[starts] = True
    head &= depth == 1  # a start no other span covers shows the mask; covered starts are swallowed
    keep = ~covered | head
    region = head.long().cumsum(0) - 1  # every covered run begins at a head: the mask each covered token goes to
    region_lengths = torch.bincount(region[covered], minlength=int(head.sum()))
    tokens = body.masked_fill(head, mask_id)[keep]
    is_mask = head[keep]
    consumed = torch.ones(len(tokens), dtype=torch.long, device=device)
    consumed[is_mask] = region_lengths
    # 0-length spans: insert n_inserts masks at uniformly random places (fairseq's add_insertion_noise)
    inserted = _chosen(len(tokens) + n_inserts, n_inserts, generator, device)
    out = torch.full((len(inserted),), mask_id, dtype=torch.long, device=device)
    out_consumed = torch.zeros(len(inserted), dtype=torch.long, device=device)
    out[~inserted], out_consumed[~inserted] = tokens, consumed
    out_is_mask = inserted.clone()
    out_is_mask[~inserted] = is_mask
    return out, out_consumed, out_is_mask


def text_infilling(
    ids: Tensor,
    mask_id: int,
    ratio: float = 0.3,
    poisson_lambda: float = 3.0,
    generator: torch.Generator | None = None,
    *,
    bos_id: int | None = None,
    eos_id: int | None = None,
    overlap: str = "disjoint",
    random_ratio: float = 0.0,
    vocab_size: int | None = None,
    special_ids: Sequence[int] = (),
    return_spans: bool = False,
) -> Tensor | tuple[Tensor, Tensor]:
    """Text infilling: spans of Poisson(λ) lengths covering ceil(``ratio`` · n) body tokens, each replaced by ONE mask.

    Lengths as fairseq draws them (:func:`poisson_span_lengths`): i.i.d. Poisson(``poisson_lambda``) until they sum
    to the budget m = ceil(ratio · n), the last one trimmed. A 0-length span inserts a mask without removing
    anything, so the output may be longer than the input. Where the spans go, ``overlap``:

    - ``"disjoint"`` (default): spans never overlap. The n - m untouched tokens and the k spans are interleaved
      uniformly at random (each arrangement equally likely), so exactly m tokens are covered (the paper's "mask 30%
      of tokens"), every span keeps its drawn length, and two spans may touch (two masks in a row).
    - ``"merge"``: fairseq's. Spans start at distinct random tokens and stop at the body's end; a span starting
      inside another is absorbed, so overlapping spans become one longer span under one mask (touching spans keep
      a mask each), and fewer than m tokens end up covered: about 27% of the tokens rather than 30% for
      ``ratio=0.3`` (200-token bodies). The 0-length spans are then inserted at random places.

    ``random_ratio``: each mask (insertions too) becomes a random token with this probability (fairseq's
    ``--mask-random``; needs ``vocab_size``; never mask, bos, eos or ``special_ids``). fairseq draws an exact
    count for insertions and a coin per span; here every mask gets a coin.

    Returns the noised ids (T',), and with ``return_spans`` also spans (k', 3) LongTensor: for each mask of the
    output, in order, its position in the output and the (start, length) of the tokens of ``ids`` it replaced
    (length 0 for an insertion). Putting ``ids[start:start + length]`` in place of each mask gives back ``ids``.
    """
    ids = _document(ids)
    _check_ratio("ratio", ratio, "tokens covered by the spans")
    _check_lambda(poisson_lambda)
    if overlap not in OVERLAPS:
        raise ValueError(f"overlap={overlap!r}: choose one of {', '.join(map(repr, OVERLAPS))}")
    head, body, tail = _split(ids, bos_id, eos_id)
    lengths = poisson_span_lengths(_count(ratio, len(body)), poisson_lambda, generator, device=body.device)  # (k,)
    place = _place_disjoint if overlap == "disjoint" else _place_merged
    tokens, consumed, is_mask = place(body, lengths, mask_id, generator)  # (T',) each
    tokens = _randomize(tokens, is_mask, random_ratio, vocab_size, [mask_id, bos_id, eos_id, *special_ids], generator)
    out = torch.cat([head, tokens, tail])
    if not return_spans:
        return out
    position = is_mask.nonzero().squeeze(1)  # (k',)
    start = consumed.cumsum(0) - consumed
    spans = torch.stack([position + len(head), start[position] + len(head), consumed[position]], dim=1)
    return out, spans


def sentence_permutation(
    ids: Tensor,
    sentence_end_ids: int | Sequence[int],
    generator: torch.Generator | None = None,
    *,
    ratio: float = 1.0,
    bos_id: int | None = None,
    eos_id: int | None = None,
) -> Tensor:
    """Sentence permutation: cut the body into sentences after full stops and shuffle them.

    A sentence ends after a run of ``sentence_end_ids`` tokens (so ``?!`` or ``...`` stay with their sentence; fairseq
    ends it after the first one of a run); tokens after the last full stop form a last sentence, as in fairseq. A
    body without a full stop is one sentence and comes back unchanged. ``ratio``: the fraction of the s sentences
    shuffled, fairseq's ``--permute-sentences``: ceil(ratio · s) sentences chosen uniformly are permuted among
    their places, the others stay (BART: 1, all of them). The multiset of sentences and the length are kept.
    """
    ids = _document(ids)
    _check_ratio("ratio", ratio, "sentences shuffled")
    ends = torch.as_tensor(
        [sentence_end_ids] if isinstance(sentence_end_ids, int) else list(sentence_end_ids), dtype=torch.long
    )
    if ends.numel() == 0:
        raise ValueError("sentence_end_ids is empty: give the full-stop token id(s), e.g. tokenizer.token_to_id('.')")
    head, body, tail = _split(ids, bos_id, eos_id)
    is_end = torch.isin(body, ends.to(body.device))
    run_end = is_end & ~torch.cat([is_end[1:], is_end.new_zeros(1)])  # the last full stop of each run
    bounds = (run_end.nonzero().squeeze(1) + 1).tolist()
    if not bounds or bounds[-1] != len(body):
        bounds.append(len(body))  # the tokens after the last full stop (all of them if there is none)
    sentences = torch.split(body, [b - a for a, b in zip([0, *bounds[:-1]], bounds, strict=True)])
    s = len(sentences)
    chosen = torch.randperm(s, generator=generator, device=body.device)[: _count(ratio, s)]
    order = torch.arange(s, device=body.device)
    order[chosen] = chosen[torch.randperm(len(chosen), generator=generator, device=body.device)]
    return torch.cat([head, *[sentences[i] for i in order.tolist()], tail])


def document_rotation(
    ids: Tensor,
    generator: torch.Generator | None = None,
    *,
    bos_id: int | None = None,
    eos_id: int | None = None,
) -> Tensor:
    """Document rotation: a body token chosen uniformly (each of the n with probability 1/n, the first one included:
    no rotation) becomes the first; the tokens before it move to the end, before the eos.

    fairseq draws an offset in 1 .. n + 1 over ``<s> body </s>``, where two of the n + 1 values leave the document
    as it is; here each rotation is equally likely.
    """
    ids = _document(ids)
    head, body, tail = _split(ids, bos_id, eos_id)
    if len(body) < 2:
        return ids.clone()
    offset = int(torch.randint(len(body), (1,), generator=generator, device=body.device))
    return torch.cat([head, body.roll(-offset), tail])


# ---------------------------------------------------------------------------------------------------- config


def parse_noise(spec: str) -> tuple[str, ...]:
    """``"infilling+permutation"`` -> ``("infilling", "permutation")``: noise names joined by ``+``, in the order
    given (:func:`add_noise` applies them in its own fixed order). Valid names: masking, deletion, infilling,
    permutation, rotation; each at most once."""
    if not isinstance(spec, str):
        raise ValueError(f"a noise spec is a string such as 'infilling+permutation', got {spec!r}")
    names = tuple(spec.split("+"))
    unknown = [name for name in names if name not in NOISES]
    if unknown:
        raise ValueError(
            f"unknown noise {', '.join(map(repr, unknown))} in {spec!r}: use {', '.join(NOISES)}, joined by '+' "
            "(e.g. 'infilling+permutation')"
        )
    repeated = sorted({name for name in names if names.count(name) > 1})
    if repeated:
        raise ValueError(f"noise {', '.join(map(repr, repeated))} named more than once in {spec!r}")
    return names


@dataclass(frozen=True)
class DenoisingConfig:
    """Which noises :func:`add_noise` applies and their settings; the defaults are BART's (§5.1: text infilling and
    sentence permutation, 30% of tokens masked, λ = 3, all sentences permuted). ``noises`` may be given as a string
    (``"infilling+permutation"``, see :func:`parse_noise`) or a sequence of names; it is stored as a tuple. The
    token ids (mask, bos, eos, full stops) belong to the tokenizer and are passed to :func:`add_noise`."""

    noises: tuple[str, ...] = ("infilling", "permutation")  # names from NOISES; () for no noise
    mask_ratio: float = 0.3  # fraction of the tokens masked, deleted or covered by spans, by each of those noises
    poisson_lambda: float = 3.0  # mean span length of text infilling
    permute_ratio: float = 1.0  # fraction of the sentences shuffled (fairseq's --permute-sentences; BART: all)
    rotate_prob: float = 1.0  # probability that "rotation" rotates a document (fairseq's --rotate)
    random_ratio: float = 0.0  # fraction of the masks replaced by random tokens (fairseq's --mask-random)
    overlap: str = "disjoint"  # text infilling's spans: "disjoint" or "merge" (fairseq's), see text_infilling

    def __post_init__(self) -> None:
        noises = parse_noise(self.noises) if isinstance(self.noises, str) else tuple(self.noises)
        object.__setattr__(self, "noises", noises)
        self.validate()

    def validate(self) -> None:
        """A ValueError naming the first bad setting (unknown or repeated noise, ratio outside [0, 1], λ <= 0, ...)."""
        unknown = [name for name in self.noises if name not in NOISES]
        if unknown:
            raise ValueError(f"unknown noise {', '.join(map(repr, unknown))}: choose from {', '.join(NOISES)}")
        if len(set(self.noises)) != len(self.noises):
            raise ValueError(f"noises={self.noises} names a noise more than once")
        _check_ratio("mask_ratio", self.mask_ratio, "tokens masked, deleted or covered by spans")
        _check_lambda(self.poisson_lambda)
        _check_ratio("permute_ratio", self.permute_ratio, "sentences shuffled")
        _check_ratio("rotate_prob", self.rotate_prob, "documents rotated (a probability)")
        _check_ratio("random_ratio", self.random_ratio, "masks replaced by random tokens")
        if self.overlap not in OVERLAPS:
            raise ValueError(f"overlap={self.overlap!r}: choose one of {', '.join(map(repr, OVERLAPS))}")


def add_noise(
    ids: Tensor,
    config: DenoisingConfig,
    generator: torch.Generator | None = None,
    *,
    mask_id: int | None = None,
    bos_id: int | None = None,
    eos_id: int | None = None,
    sentence_end_ids: int | Sequence[int] = (),
    vocab_size: int | None = None,
    special_ids: Sequence[int] = (),
) -> Tensor:
    """x̃ = noise(x): the noises of ``config`` applied to one document, always in this order (``NOISES``):

        permutation -> masking -> deletion -> infilling -> rotation

    fairseq's order: sentences are permuted first, while every full stop is still there to cut at; then the token
    noises (in fairseq masking, deletion and infilling are one step, its ``--mask`` with ``--replace-length`` 1/0
    and ``--mask-length``, so only one runs; here each that is on runs on the previous one's output, with the same
    ``mask_ratio``); fairseq's random insertion noise (``--insert``, not one of the paper's five) would come next;
    rotation last, so the model must find the start of a document that is also corrupted. bos/eos stay in place.

    Needs ``mask_id`` for masking and infilling, ``sentence_end_ids`` for permutation, ``vocab_size`` when
    ``random_ratio`` > 0; :func:`noise_token_ids` gets them all from a tokenizer.
    """
    ids = _document(ids)
    config.validate()
    on = set(config.noises)
    if on & {"masking", "infilling"} and mask_id is None:
        raise ValueError("masking and infilling need mask_id (the tokenizer's mask token id)")
    if "permutation" in on and not (isinstance(sentence_end_ids, int) or len(sentence_end_ids)):
        raise ValueError("permutation needs sentence_end_ids: the full-stop token id(s), e.g. tok.token_to_id('.')")
    ends = dict(bos_id=bos_id, eos_id=eos_id)
    randoms = dict(random_ratio=config.random_ratio, vocab_size=vocab_size, special_ids=special_ids)
    if "permutation" in on:
        ids = sentence_permutation(ids, sentence_end_ids, generator, ratio=config.permute_ratio, **ends)
    if "masking" in on:
        ids = token_masking(ids, mask_id, config.mask_ratio, generator, **ends, **randoms)
    if "deletion" in on:
        ids = token_deletion(ids, config.mask_ratio, generator, **ends)
    if "infilling" in on:
        ids = text_infilling(
            ids, mask_id, config.mask_ratio, config.poisson_lambda, generator, overlap=config.overlap, **ends, **randoms
        )
    if "rotation" in on and (
        config.rotate_prob >= 1.0 or float(torch.rand((), generator=generator)) < config.rotate_prob
    ):
        ids = document_rotation(ids, generator, **ends)
    return ids


def denoising_example(
    ids: Tensor,
    config: DenoisingConfig,
    generator: torch.Generator | None = None,
    *,
    mask_id: int | None = None,
    bos_id: int | None = None,
    eos_id: int | None = None,
    sentence_end_ids: int | Sequence[int] = (),
    vocab_size: int | None = None,
    special_ids: Sequence[int] = (),
) -> dict[str, Tensor]:
    """One BART training example: ``{"input_ids": x̃ (T',), "labels": x (T,)}``, both 1-D LongTensors.

    ``input_ids`` is the corrupted document (:func:`add_noise`, same keywords) for the encoder; ``labels`` is the
    whole original document, bos and eos included: BART scores every token, not only the corrupted ones. The
    decoder's input is ``labels`` shifted right by one (a start token first, fairseq puts the eos there); the model
    does that, not this function. T' != T in general (deletion, infilling), so a batch pads ``input_ids`` and
    ``labels`` to their own widths (:func:`minilm.objectives.mlm.pad_batch` pads all to the ``input_ids`` width).
    """
    ids = _document(ids)
    noised = add_noise(
        ids,
        config,
        generator,
        mask_id=mask_id,
        bos_id=bos_id,
        eos_id=eos_id,
        sentence_end_ids=sentence_end_ids,
        vocab_size=vocab_size,
        special_ids=special_ids,
    )
    return {"input_ids": noised, "labels": ids.clone()}


def noise_token_ids(tokenizer, full_stops: Sequence[str] = (".",)) -> dict:
    """The keywords of :func:`add_noise` from a ``minilm.tokenizers.Tokenizer``: mask, bos, eos and special ids, the
    vocabulary size, and ``sentence_end_ids``, the ids of the ``full_stops`` tokens the vocabulary has (fairseq uses
    GPT-2's "." token). A byte-level BPE vocabulary may also hold "Ġ." (a full stop after a space): add it if so.
    ``mask_id`` is None for a family without a mask token (gpt2, t5): only deletion, permutation and rotation work."""
    ends = [i for i in (tokenizer.token_to_id(t) for t in full_stops) if i is not None]
    return dict(
        mask_id=tokenizer.mask_id,
        bos_id=tokenizer.bos_id,
        eos_id=tokenizer.eos_id,
        sentence_end_ids=tuple(ends),
        vocab_size=tokenizer.vocab_size,
        special_ids=tuple(tokenizer.special_ids),
    )


class DynamicNoising:
    """A collate function that corrupts at batch time: documents (dicts with 1-D ``input_ids``, ``<s> ... </s>``) ->
    a padded batch of :func:`denoising_example` s (:func:`minilm.objectives.seq2seq.pad_seq2seq_batch`), fresh noise
    every time a document is read, as :class:`~minilm.objectives.mlm.DynamicMasking` masks.

    ``token_ids``: :func:`noise_token_ids` of the tokenizer. With ``seed=None`` the noise comes from torch's global
    generator, which ``torch.manual_seed`` fixes and the Trainer's checkpoints save and restore (a resumed run noises
    exactly as an uninterrupted one); an int seed gives it its own generator (fixed validation noise).
    """

    def __init__(self, config: DenoisingConfig, token_ids: dict, pad_id: int, seed: int | None = None) -> None:
        config.validate()
        self.config, self.token_ids, self.pad_id = config, token_ids, pad_id
        self.generator = None if seed is None else torch.Generator().manual_seed(seed)

    def __call__(self, documents: list[dict]) -> dict[str, Tensor]:
        noised = [denoising_example(d["input_ids"], self.config, self.generator, **self.token_ids) for d in documents]
        return pad_seq2seq_batch(noised, self.pad_id)
