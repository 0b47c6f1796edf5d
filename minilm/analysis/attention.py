"""What attention heads do: BERTology's measurements of the attention maps of an encoder (Chapter 9).

    A = attention_maps(model, ids, mask)                         # (L, B, nh, T, T), every layer's heads
    stats = head_statistics(A, token_categories(tok, ids), mask) # Clark et al. 2019: (L, nh) per statistic
    stats.attention_to["sep"], stats.previous, stats.entropy
    patterns = head_patterns(A, token_type_ids=types, index=0)   # Kovaleva et al. 2019: L x nh class names
    pattern_shares(patterns)                                     # {"vertical": 0.4, "diagonal": 0.2, ...}
    A_eff = effective_attention_maps(model, ids, mask)           # Brunner et al. 2020: (L, B, nh, T, T)

Three papers, three views of the same maps:

- **Clark et al. 2019**, "What Does BERT Look At?": how much attention each head gives, on average, to [CLS], to
  [SEP], to punctuation, to the previous and to the next token, and how spread out (entropy) its distributions are
  (:func:`head_statistics`). Their findings: heads of early layers attend broadly, many heads of middle layers put
  most of their attention on [SEP], and some heads attend almost only to the previous or to the next token.
- **Kovaleva et al. 2019**, "Revealing the Dark Secrets of BERT": five kinds of map, "vertical" (a few columns,
  [CLS] and [SEP]), "diagonal" (the previous, the same or the next token), "vertical+diagonal", "block" (within the
  sentence, for a pair of sentences) and "heterogeneous" (:func:`classify_head`, :func:`head_patterns`).
  **Our departure from the paper**: Kovaleva et al. hand-labelled 400 maps and trained a small CNN to sort the rest;
  we classify with three transparent features and thresholds instead (:func:`pattern_features`).
- **Brunner et al. 2020**, "On Identifiability in Transformers": a head's output is A·T, with T = X W_V W_O (T x d).
  When T has fewer columns' worth of rank than it has rows (T tokens > head size), any part of A's rows lying in the
  left null space of T changes nothing in the output. *Effective attention* removes it (:func:`effective_attention`).

The maps come from ``model.features(..., output_attentions=True)`` of any minilm encoder whose ``features`` take that
argument (:class:`~minilm.models.bert.Bert` and its variants :class:`~minilm.models.albert.Albert`,
:class:`~minilm.models.electra.Electra`). Putting the model in eval mode (no attention dropout) is the caller's job:
``model.eval()`` before these functions, which otherwise leave the model as they found it.
"""

from __future__ import annotations

import inspect
import string
import unicodedata
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import torch
from torch import Tensor, nn

from minilm.nn import TransformerEncoder

# --- the maps ---------------------------------------------------------------------------------------------------


@torch.no_grad()
def attention_maps(
    model: nn.Module, input_ids: Tensor, attention_mask: Tensor | None = None, **features_kwargs
) -> Tensor:
    """Every layer's attention weights: input_ids (B, T) -> (L, B, nh, T, T), query rows, key columns.

    ``features_kwargs`` go to ``model.features`` (``token_type_ids=`` for a pair of sentences). Padding keys get
    weight 0; padding *queries* still have rows (they attend to the real tokens): leave them out of any average
    (the functions below take the ``attention_mask`` for that). Run ``model.eval()`` first.
    """
    features = getattr(model, "features", None)
    if features is None or "output_attentions" not in inspect.signature(features).parameters:
        raise TypeError(
            f"{type(model).__name__}.features does not return attention weights (no output_attentions argument): "
            "use an encoder such as Bert, Albert or Electra"
        )
    out = features(input_ids, attention_mask=attention_mask, output_attentions=True, **features_kwargs)
    heads = [a.size(1) for a in out.attentions]
    if len(set(heads)) > 1:  # a model whose heads were really removed, unevenly (minilm.analysis.pruning)
        raise ValueError(
            f"the layers have different numbers of heads ({', '.join(map(str, heads))}) after pruning, so their maps "
            "do not stack into one (L, B, nh, T, T) tensor: read model.features(..., output_attentions=True)"
            ".attentions layer by layer, or mask the heads (minilm.analysis.pruning.head_mask) instead of removing them"
        )
    return torch.stack(out.attentions)  # L x (B, nh, T, T) -> (L, B, nh, T, T)


def _stacked(attentions: Tensor | Sequence[Tensor]) -> Tensor:
    """(L, B, nh, T, T) from a stacked tensor or from ``TransformerOutput.attentions`` (L of (B, nh, T, T))."""
    stacked = attentions if isinstance(attentions, Tensor) else torch.stack(list(attentions))
    if stacked.dim() != 5 or stacked.size(-1) != stacked.size(-2):
        raise ValueError(
            f"attentions must be (L, B, nh, T, T) (attention_maps' result), got shape {tuple(stacked.shape)}"
        )
    return stacked


def _real(attentions: Tensor, attention_mask: Tensor | None) -> Tensor:
    """The (B, T) bool mask of real tokens (all of them when ``attention_mask`` is None)."""
    L, B, nh, T, _ = attentions.shape
    if attention_mask is None:
        return torch.ones(B, T, dtype=torch.bool, device=attentions.device)
    if tuple(attention_mask.shape) != (B, T):
        raise ValueError(f"attention_mask {tuple(attention_mask.shape)} must be (B, T) = {(B, T)}")
    return attention_mask.bool().to(attentions.device)


# --- Clark et al. 2019: where heads look, on average ------------------------------------------------------------

SUBWORD_MARKERS = ("##", "\u0120", "\u2581")  # WordPiece's continuation, byte-level BPE's space, SentencePiece's


def is_punctuation(token: str) -> bool:
    """True for a token made only of punctuation characters, once a subword marker is stripped ("," "##." "Ġ...").

    A character is punctuation as in BERT's BasicTokenizer: ASCII's ``string.punctuation`` (which holds the symbols
    ``$ + < = > ^ ` | ~`` too) or a Unicode category P* (``unicodedata``: dashes, quotes, ellipses ...).
    """
    for marker in SUBWORD_MARKERS:
        token = token.removeprefix(marker)
    return bool(token) and all(ch in string.punctuation or unicodedata.category(ch).startswith("P") for ch in token)


def token_categories(tokenizer, input_ids: Tensor) -> dict[str, Tensor]:
    """(B, T) ids -> {"cls", "sep", "punctuation"}: (B, T) bool masks of the tokens of each kind.

    "cls" and "sep" are the tokenizer's ``cls_id`` and ``sep_id`` (BERT's [CLS], [SEP]; RoBERTa's <s>, </s>);
    "punctuation": the tokens :func:`is_punctuation` accepts (special tokens never are). ``tokenizer`` is a
    :class:`minilm.tokenizers.Tokenizer`; any object with ``id_to_token``, ``cls_id``, ``sep_id``, ``special_ids``
    does. Add masks of your own to the dict (e.g. ``input_ids == tok.token_to_id("the")``): every one is measured.
    """
    ids = input_ids.tolist()
    special = set(tokenizer.special_ids)
    punctuation = [[i not in special and is_punctuation(tokenizer.id_to_token(i) or "") for i in row] for row in ids]
    categories = {}
    for name, token_id in (("cls", tokenizer.cls_id), ("sep", tokenizer.sep_id)):
        if token_id is None:
            raise ValueError(f"this tokenizer ({tokenizer!r}) has no {name} token: build the masks yourself")
        categories[name] = input_ids == token_id
    categories["punctuation"] = torch.tensor(punctuation, dtype=torch.bool, device=input_ids.device).view_as(input_ids)
    return categories


@dataclass
class HeadStatistics:
    """Clark et al. (2019)'s per-head averages, each (L, nh): over a sequence's real queries, then over sequences."""

    attention_to: dict[str, Tensor]  # category -> the attention mass a query gives to the tokens of that category
    previous: Tensor  # the weight on the token just before the query (queries with no previous token left out)
    next: Tensor  # the weight on the token just after the query (queries with no next token left out)
    entropy: Tensor  # -sum_j a_ij log a_ij in nats, of each query's distribution over the keys

    def table(self) -> dict[str, Tensor]:
        """Every statistic by name, the categories first: {"cls": (L, nh), ..., "previous", "next", "entropy"}."""
        return {**self.attention_to, "previous": self.previous, "next": self.next, "entropy": self.entropy}


def _per_query_mean(values: Tensor, queries: Tensor) -> Tensor:
    """values (L, B, nh, Tq), queries (B, Tq) bool -> (L, nh): mean over each sequence's selected queries, then over
    the sequences that have any (a sequence of one token has no previous token to measure)."""
    q = queries.to(values.dtype)[None, :, None, :]  # (1, B, 1, Tq)
    per_sequence = (values * q).sum(-1) / q.sum(-1)  # (L, B, nh); NaN for a sequence with no selected query
    return per_sequence.nanmean(dim=1)


@torch.no_grad()
def head_statistics(
    attentions: Tensor | Sequence[Tensor], categories: Mapping[str, Tensor], attention_mask: Tensor | None = None
) -> HeadStatistics:
    """Clark et al. (2019)'s statistics of every head (Figures 2, 4; §3, §3.3): (L, nh) each.

    attentions (L, B, nh, T, T) (:func:`attention_maps`, or ``features(...).attentions``); categories: name ->
    (B, T) bool mask of the keys of that kind (:func:`token_categories`); attention_mask (B, T) 0/1 (None: no
    padding). Averages run over real queries only, per sequence, and then over the sequences (each counts the same).
    "previous": the first real token has no previous token and is left out (so a head that always looks one token
    back scores 1, whatever its first row does); "next": the last real token is left out the same way.
    """
    A = _stacked(attentions).double()  # (L, B, nh, T, T); sums in float64
    real = _real(A, attention_mask)  # (B, T)
    to = {}
    for name, mask in categories.items():
        if tuple(mask.shape) != tuple(real.shape):
            raise ValueError(f"category {name!r}: mask {tuple(mask.shape)} must be (B, T) = {tuple(real.shape)}")
        keys = mask.bool().to(A.device)[None, :, None, None, :]  # (1, B, 1, 1, T)
        to[name] = _per_query_mean((A * keys).sum(-1), real).float()  # mass on the category per query (L, B, nh, T)
    previous = A.diagonal(offset=-1, dim1=-2, dim2=-1)  # (L, B, nh, T - 1): a[i, i - 1] for queries i = 1..T-1
    following = A.diagonal(offset=1, dim1=-2, dim2=-1)  # (L, B, nh, T - 1): a[i, i + 1] for queries i = 0..T-2
    pairs = real[:, 1:] & real[:, :-1]  # (B, T - 1): both tokens of (i - 1, i) real
    entropy = -torch.special.xlogy(A, A).sum(-1)  # (L, B, nh, T): H(a_i) = -sum_j a_ij log a_ij, 0 log 0 = 0
    return HeadStatistics(
        attention_to=to,
        previous=_per_query_mean(previous, pairs).float(),
        next=_per_query_mean(following, pairs).float(),
        entropy=_per_query_mean(entropy, real).float(),
    )


# --- Kovaleva et al. 2019: five kinds of map --------------------------------------------------------------------

PATTERNS = ("vertical", "diagonal", "vertical+diagonal", "block", "heterogeneous")


@dataclass
class PatternFeatures:
    """What :func:`classify_head` reads from one (T, T) map: shares of its total mass (T: one per query row)."""

    vertical: float  # on the k columns that get the most attention from far queries (|i - j| > 1), far entries only
    diagonal: float  # on the band |i - j| <= 1 (previous, same, next token), outside those k columns
    block: float | None  # within the query's own segment (None: one segment, or no token_type_ids)


def pattern_features(weights: Tensor, token_type_ids: Tensor | None = None, k: int = 3) -> PatternFeatures:
    """weights (T, T) -> :class:`PatternFeatures`. Pass the real tokens only (crop padding away first).

    The vertical and diagonal shares never count the same entry: "vertical" takes the entries of the k heaviest
    columns that lie off the band, "diagonal" the band outside those columns; the band entries of the k columns
    (a query next to [CLS] looking at [CLS]) are ambiguous and count for neither. Columns that get no attention from
    off the band are never among the k. k = 3 covers [CLS] and the two [SEP] of a pair of sentences.
    """
    if weights.dim() != 2 or weights.size(0) != weights.size(1):
        raise ValueError(f"weights must be one (T, T) map, got shape {tuple(weights.shape)}")
    W = weights.double()
    T = W.size(0)
    offset = torch.arange(T)[:, None] - torch.arange(T)[None, :]
    band = offset.abs() <= 1  # (T, T)
    far = W * ~band  # (T, T): the off-band entries
    column_mass = far.sum(0)  # (T,)
    top = column_mass.topk(min(k, T)).indices
    vertical_columns = torch.zeros(T, dtype=torch.bool)
    vertical_columns[top] = True
    vertical_columns &= column_mass > 0
    total = W.sum()
    vertical = far[:, vertical_columns].sum() / total
    diagonal = (W * band)[:, ~vertical_columns].sum() / total
    block = None
    if token_type_ids is not None:
        if tuple(token_type_ids.shape) != (T,):
            raise ValueError(f"token_type_ids {tuple(token_type_ids.shape)} must be (T,) = ({T},), one per token")
        if token_type_ids.unique().numel() > 1:
            same = token_type_ids[:, None] == token_type_ids[None, :]  # (T, T): key in the query's segment
            block = float((W * same).sum() / total)
    return PatternFeatures(float(vertical), float(diagonal), block)


def classify_head(
    weights: Tensor,
    token_type_ids: Tensor | None = None,
    k: int = 3,
    pattern: float = 0.6,
    mixed: float = 0.2,
    block: float = 0.8,
) -> str:
    """One (T, T) map (real tokens only) -> one of :data:`PATTERNS`, by the rules below on :func:`pattern_features`.

    1. vertical + diagonal >= ``pattern`` (most of the mass on a few columns or the band): "vertical+diagonal" when
       both shares are >= ``mixed``, otherwise the larger one ("vertical" or "diagonal");
    2. otherwise, for a pair of segments, share within the query's segment >= ``block``: "block";
    3. otherwise "heterogeneous".
    The thresholds are ours (Kovaleva et al. trained a CNN on 400 hand-labelled maps). The band |i - j| <= 1 holds
    about 3/T of a uniform map, so the features lose meaning on very short inputs: use ten tokens or more.
    """
    f = pattern_features(weights, token_type_ids, k)
    if f.vertical + f.diagonal >= pattern:
        if min(f.vertical, f.diagonal) >= mixed:
            return "vertical+diagonal"
        return "vertical" if f.vertical >= f.diagonal else "diagonal"
    if f.block is not None and f.block >= block:
        return "block"
    return "heterogeneous"


def _one_sequence(attentions: Tensor | Sequence[Tensor], index: int) -> Tensor:
    """(L, nh, T, T) maps of one sequence: given as such, or sequence ``index`` of (L, B, nh, T, T)."""
    if not isinstance(attentions, Tensor):
        return _stacked(attentions)[:, index]
    if attentions.dim() == 5:
        return attentions[:, index]
    if attentions.dim() == 4:
        return attentions
    raise ValueError(f"attentions must be (L, nh, T, T) or (L, B, nh, T, T), got shape {tuple(attentions.shape)}")


@torch.no_grad()
def head_patterns(
    attentions: Tensor | Sequence[Tensor],
    token_type_ids: Tensor | None = None,
    attention_mask: Tensor | None = None,
    index: int = 0,
    **thresholds,
) -> list[list[str]]:
    """The class of every head's map for one sequence: L lists of nh names (:func:`classify_head`).

    attentions (L, nh, T, T), or (L, B, nh, T, T) and the sequence's ``index``; ``token_type_ids`` and
    ``attention_mask``: (T,) for that sequence, or (B, T) for the batch (row ``index`` is taken). Padding is
    cropped away before classifying. ``thresholds``: ``k``, ``pattern``, ``mixed``, ``block`` of :func:`classify_head`.
    """
    maps = _one_sequence(attentions, index)  # (L, nh, T, T)
    pick = lambda x: None if x is None else (x[index] if x.dim() == 2 else x)  # (T,)
    types, mask = pick(token_type_ids), pick(attention_mask)
    real = torch.ones(maps.size(-1), dtype=torch.bool) if mask is None else mask.bool().cpu()
    if real.numel() != maps.size(-1):
        raise ValueError(f"attention_mask has {real.numel()} positions, the maps {maps.size(-1)}")
    maps = maps.cpu()[..., real, :][..., real]  # (L, nh, n, n): real queries and keys
    types = None if types is None else types.cpu()[real]
    return [[classify_head(head, types, **thresholds) for head in layer] for layer in maps]


def pattern_shares(patterns: Iterable) -> dict[str, float]:
    """The share of each of :data:`PATTERNS` among class names, nested lists of them at any depth (one sentence's
    :func:`head_patterns`, or a list of several sentences'): Kovaleva et al.'s Figure 2 counts."""

    def flat(xs):
        for x in xs:
            yield from ([x] if isinstance(x, str) else flat(x))

    names = list(flat(patterns))
    unknown = set(names) - set(PATTERNS)
    if unknown:
        raise ValueError(f"unknown pattern names {sorted(unknown)}; expected {', '.join(PATTERNS)}")
    if not names:
        raise ValueError("no pattern to count")
    return {p: names.count(p) / len(names) for p in PATTERNS}


# --- Brunner et al. 2020: effective attention -------------------------------------------------------------------


def effective_attention(weights: Tensor, value_output: Tensor, rtol: float | None = None) -> Tensor:
    """A_eff = A - A P_null: the part of the attention weights that reaches the head's output (Brunner et al. 2020).

    weights A (..., Tq, T), value_output T (..., T, d): the head's output is A T. P_null (T x T) projects onto the
    left null space of T (the null space of T^T: vectors n with n^T T = 0), whose dimension is T - rank(T): with
    rank(T) <= head size, it is non-trivial as soon as the sequence is longer than a head is wide. Any row component
    of A in it changes nothing: A_eff T = A T. From the SVD T = U S V^T, the first rank(T) columns of U span T's
    column space and the others its left null space, so A_eff = A U_r U_r^T (from the thin SVD of T^T: U_r never
    needs the null space's basis). rank(T) counts the singular values above ``rtol`` times the largest (default:
    max(T, d) times the dtype's machine epsilon, as ``torch.linalg.matrix_rank``). Effective attention can be
    negative, and its rows need not sum to 1. Computed in float64, returned in ``weights``' dtype.
    """
    if value_output.shape[:-2] != weights.shape[:-2] or value_output.size(-2) != weights.size(-1):
        raise ValueError(
            f"weights {tuple(weights.shape)} (..., Tq, T) and value_output {tuple(value_output.shape)} (..., T, d) "
            "must share their leading dimensions and T"
        )
    A, V = weights.double(), value_output.double()
    T, d = V.shape[-2:]
    _, S, Wh = torch.linalg.svd(V.transpose(-2, -1), full_matrices=False)  # T^T = U S Wh, so T = Wh^T S U^T
    rtol = max(T, d) * torch.finfo(value_output.dtype).eps if rtol is None else rtol
    kept = (S > rtol * S[..., :1]).to(V.dtype)  # (..., min(T, d)): the rank(T) directions of T's column space
    basis = Wh.transpose(-2, -1) * kept[..., None, :]  # (..., T, min(T, d)): T's left singular vectors, kept ones
    P_col = basis @ basis.transpose(-2, -1)  # (..., T, T): projection on T's column space, I - P_null
    return (A @ P_col).to(weights.dtype)  # A - A P_null = A (I - P_null)


def _encoder_blocks(model: nn.Module) -> list[nn.Module]:
    """The block each layer runs (ALBERT's shared ones repeated): a minilm encoder's ``encoder`` stack."""
    encoder = getattr(model, "encoder", None)
    if not isinstance(encoder, TransformerEncoder):
        raise TypeError(
            f"{type(model).__name__} has no minilm TransformerEncoder at .encoder: use an encoder such as Bert, "
            "Albert or Electra"
        )
    return [encoder.layers[i] for i in encoder.block_of]


@torch.no_grad()
def value_outputs(
    model: nn.Module, input_ids: Tensor, attention_mask: Tensor | None = None, token_type_ids: Tensor | None = None
) -> tuple[Tensor, Tensor]:
    """Every head's attention weights and its T = X W_V^h W_O^h: ((L, B, nh, T, T), (L, B, nh, T, C)).

    X is the attention sublayer's input at layer l: ``hidden_states[l]`` (the previous layer's output) in BERT's
    post-LN blocks, its LayerNorm in pre-LN ones. Head h's slice of ``v_proj`` (its rows h*hs..(h+1)*hs, with their
    bias) gives its values, the matching columns of ``out_proj`` take them to the model's width; ``out_proj``'s bias
    is added once after the heads are summed, so it is no part of any head's T. A ``head_mask`` (xi_h, see
    :class:`minilm.nn.MultiHeadAttention`) scales head h's T. The attention sublayer's output is sum_h A_h T_h + b_O.
    """
    blocks = _encoder_blocks(model)
    out = model.features(
        input_ids,
        attention_mask=attention_mask,
        token_type_ids=token_type_ids,
        output_hidden_states=True,
        output_attentions=True,
    )
    products = []
    inputs = out.hidden_states[:-1]  # hidden_states[l]: layer l's input
    for block, x in zip(blocks, inputs, strict=True):
        attn, (B, T, _) = block.self_attn, x.shape
        h = block.self_attn_norm(x) if block.norm_first else x  # (B, T, C): what q/k/v_proj read
        values = attn.v_proj(h).view(B, T, attn.n_heads, attn.head_size).transpose(1, 2)  # (B, nh, T, hs)
        xi = getattr(attn, "head_mask", None)  # Michel et al.'s head mask, when one is set: xi_h scales head h
        if xi is not None:
            values = values * xi.to(values)[:, None, None]
        W_O = attn.out_proj.weight.view(-1, attn.n_heads, attn.head_size)  # (C, nh, hs): columns of head h
        products.append(torch.einsum("bhts,chs->bhtc", values, W_O))  # (B, nh, T, C): T_h = V_h W_O^h
    return torch.stack(out.attentions), torch.stack(products)


@torch.no_grad()
def effective_attention_maps(
    model: nn.Module,
    input_ids: Tensor,
    attention_mask: Tensor | None = None,
    token_type_ids: Tensor | None = None,
    rtol: float | None = None,
) -> Tensor:
    """Every layer's and head's effective attention (:func:`effective_attention`): (L, B, nh, T, T).

    Padding: each sequence is restricted to its real tokens (its queries and keys, ``attention_mask`` == 1) before
    the null space is taken, since padding rows of T are not part of the sentence; padding entries come out 0.
    Run ``model.eval()`` first.
    """
    A, products = value_outputs(model, input_ids, attention_mask, token_type_ids)  # (L, B, nh, T, T), (.., T, C)
    real = _real(A, attention_mask)
    effective = torch.zeros_like(A)
    for b in range(A.size(1)):
        keep = real[b].nonzero().squeeze(-1)  # (n,) positions of the real tokens
        A_b = A[:, b][..., keep[:, None], keep]  # (L, nh, n, n)
        effective[:, b][..., keep[:, None], keep] = effective_attention(A_b, products[:, b][..., keep, :], rtol)
    return effective
