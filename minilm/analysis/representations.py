"""How contextual each layer's vectors are (Ethayarajh 2019), and how much of each input token they hold (Brunner
et al. 2020).

    layers = word_layer_vectors(model, tokenizer, sentences)      # n_layers + 1 tensors (n_words, C)
    words = [w.lower() for s in sentences for w in s]             # each row's word type
    sentence_ids = [i for i, s in enumerate(sentences) for _ in s]
    table = contextuality_by_layer(layers, words, sentence_ids, stopwords=STOPWORDS)
    table.adjusted_self_similarity                                # one number per layer
    c = token_contributions(model, input_ids)                     # (n_layers + 1, T, T), rows sum to 1
    own_token_contribution(c), top_contributor_is_self(c)         # (n_layers + 1,) each

**Ethayarajh 2019**, "How Contextual are Contextualized Word Representations?", §3.2. Let f_l(s, i) be the vector in
layer l of the word at position i of sentence s, and w a word occurring at positions i_1 .. i_n of sentences
s_1 .. s_n:

    SelfSim_l(w)  = 1 / (n^2 - n) Σ_j Σ_{k≠j} cos(f_l(s_j, i_j), f_l(s_k, i_k))   how alike w's vectors stay
    IntraSim_l(s) = 1 / n Σ_i cos(s_l, f_l(s, i)),  s_l = 1 / n Σ_i f_l(s, i)      how alike a sentence's words get
    MEV_l(w)      = σ_1^2 / Σ_i σ_i^2                                                how much of w's vectors one
                                                                                     static vector could stand for

with σ_1 ≥ σ_2 ≥ ... the singular values of w's occurrence matrix [f_l(s_1, i_1); ...; f_l(s_n, i_n)] (n, C), *not*
centred (as in the paper: MEV is the share of the vectors' energy along their best single direction, so a static
embedding, n copies of one vector, has MEV 1). A static representation has SelfSim 1 and MEV 1; the more contextual,
the lower. But the vectors of a layer can be **anisotropic**, all in a narrow cone: then any two vectors, of any
words, are alike. The paper's baseline is the mean cosine between vectors of random *different* words
(:func:`anisotropy`), subtracted from SelfSim and IntraSim to compare layers ("adjusted for anisotropy"). Its
findings, for ELMo, BERT and GPT-2: upper layers are more context-specific (lower adjusted self-similarity) and more
anisotropic; stopwords ("the", "of", "to") are among the most context-specific words; and less than 5% of the
variance of a word's vectors is explained by a static embedding, on average (MEV).

**Brunner et al. 2020**, "On Identifiability in Transformers", hidden token attribution. How much does input token j
contribute to the hidden vector e_i^l of token i in layer l? The gradient answers: with x_j the input embedding of
token j (token, position and segment embeddings, the encoder's input),

    c_ij^l = ||∂e_i^l / ∂x_j||_F / Σ_k ||∂e_i^l / ∂x_k||_F                                          (rows sum to 1)

the (Frobenius) norm of the (C, C) block of the Jacobian, normalised over the inputs. Layer 0 (the input itself)
gives the identity. The paper finds context mixed in strongly: a hidden token's own input contributes less and less
with depth (:func:`own_token_contribution`), though it long stays the largest single contributor
(:func:`top_contributor_is_self`), and the rest comes mostly from nearby tokens.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass

import torch
import torch.autograd.forward_ad as forward_ad
import torch.nn.functional as F
from torch import Tensor, nn
from torch.nn.attention import SDPBackend, sdpa_kernel

from minilm.analysis.probing import word_layer_vectors  # noqa: F401 (re-exported: the vectors measured here)

# English function words, lower-case: articles, pronouns, prepositions, conjunctions, auxiliaries, common adverbs
STOPWORDS = frozenset(
    """a about above after again against all am an and any are as at be been before being below between both but by
    can could did do does doing down during each few for from further had has have having he her here hers herself
    him himself his how i if in into is it its itself just me more most my myself no nor not now of off on once only
    or other our ours ourselves out over own same she should so some such than that the their theirs them themselves
    then there these they this those through to too under until up very was we were what when where which while who
    whom why will with would you your yours yourself yourselves""".split()
)


# --- Ethayarajh (2019): how contextual ------------------------------------------------------------------------------


def anisotropy(
    vectors: Tensor,
    word_labels: Sequence[Hashable] | None = None,
    n_pairs: int = 1000,
    generator: torch.Generator | None = None,
) -> float:
    """The mean cosine similarity between the vectors (N, C) of random pairs of *different* words: Ethayarajh's
    anisotropy baseline (0 for directions spread evenly, near 1 for vectors in a narrow cone).

    A pair is two different rows whose ``word_labels`` (the word type of each row) differ, drawn uniformly among all
    such pairs, ``n_pairs`` of them (with replacement; ``generator`` for reproducible draws). When there are no
    more than ``n_pairs`` such pairs, the mean is over all of them, exactly. Without labels, any two rows pair.
    """
    if vectors.dim() != 2:
        raise ValueError(f"vectors must be (N, C), got shape {tuple(vectors.shape)}")
    types = _type_ids(word_labels, len(vectors))
    sizes = torch.bincount(types).double()
    n_valid = (len(vectors) * (len(vectors) - 1) - (sizes * (sizes - 1)).sum()) / 2  # pairs of different types
    if n_valid == 0:
        raise ValueError("no two rows have different word labels: anisotropy needs vectors of at least two words")
    unit = _unit(vectors)
    if n_valid <= n_pairs:  # few enough: every pair, exactly
        upper = torch.ones(len(vectors), len(vectors), dtype=torch.bool).triu(1)
        valid = upper & (types[:, None] != types[None, :])  # (N, N): each unordered pair of different types once
        return (unit @ unit.T)[valid].mean().item()
    first, second = [], []
    while sum(len(a) for a in first) < n_pairs:  # rejection sampling: uniform over the valid (ordered) pairs
        a, b = torch.randint(len(vectors), (2, 2 * n_pairs), generator=generator)
        keep = types[a] != types[b]  # different words, hence different rows
        first.append(a[keep])
        second.append(b[keep])
    a, b = torch.cat(first)[:n_pairs], torch.cat(second)[:n_pairs]
    return (unit[a] * unit[b]).sum(-1).mean().item()


def self_similarity(
    vectors: Tensor,
    word_labels: Sequence[Hashable],
    min_count: int = 2,
    adjusted: bool = False,
    n_pairs: int = 1000,
    generator: torch.Generator | None = None,
) -> dict[Hashable, float]:
    """SelfSim of each word type with at least ``min_count`` (≥ 2) occurrences among the rows of ``vectors`` (N, C):
    the mean cosine similarity between its vectors, over all pairs of its occurrences (Ethayarajh 2019, Definition 1).

    Each row is one occurrence (the paper takes words in at least 5 different contexts: ``min_count=5``).
    ``adjusted=True`` subtracts the layer's :func:`anisotropy` (of ``n_pairs`` pairs drawn with ``generator``).
    """
    if min_count < 2:
        raise ValueError(f"min_count={min_count}: self-similarity needs at least 2 occurrences of a word")
    unit = _unit(vectors)
    baseline = anisotropy(vectors, word_labels, n_pairs, generator) if adjusted else 0.0
    table = {}
    for word, rows in _occurrences(word_labels, len(vectors), min_count).items():
        n = len(rows)
        total = unit[rows].sum(0)  # (C,): |Σ u|^2 = Σ_j Σ_k cos_jk, of which n terms are cos_jj = 1
        table[word] = ((total @ total - n) / (n * n - n)).item() - baseline
    return table


def intra_sentence_similarity(vectors: Tensor, sentence_ids: Sequence[int] | Tensor) -> float:
    """IntraSim averaged over sentences: for each sentence, the mean cosine similarity between each of its words'
    vectors and the sentence vector (the mean of its words' vectors); ``sentence_ids`` (N,) says which sentence
    each row of ``vectors`` (N, C) is a word of (Ethayarajh 2019, Definition 2). A one-word sentence counts as 1."""
    if vectors.dim() != 2 or len(sentence_ids) != len(vectors):
        raise ValueError(
            f"need vectors (N, C) and one sentence id per row, got {tuple(vectors.shape)} and {len(sentence_ids)}"
        )
    _, sentence = torch.as_tensor(sentence_ids).unique(return_inverse=True)  # (N,) in 0 .. S - 1
    n_sentences = int(sentence.max()) + 1
    x = vectors.detach().double()
    counts = torch.bincount(sentence, minlength=n_sentences).double()  # (S,)
    means = x.new_zeros(n_sentences, x.size(1)).index_add_(0, sentence, x) / counts[:, None]  # (S, C)
    cosines = F.cosine_similarity(x, means[sentence], dim=-1)  # (N,): each word with its sentence
    per_sentence = x.new_zeros(n_sentences).index_add_(0, sentence, cosines) / counts  # (S,)
    return per_sentence.mean().item()


def first_pc_variance_explained(
    vectors: Tensor, word_labels: Sequence[Hashable], min_count: int = 2
) -> dict[Hashable, float]:
    """MEV of each word type with at least ``min_count`` (≥ 2) occurrences: σ_1^2 / Σ σ_i^2, the singular values of
    its occurrence matrix (n, C), uncentred as in Ethayarajh (2019, Definition 3): the share of its vectors' energy
    along the best single direction, 1 for a static embedding. (With one occurrence it is always 1, hence the
    minimum.)"""
    if min_count < 2:
        raise ValueError(f"min_count={min_count}: with one occurrence MEV is always 1; use min_count >= 2")
    x = vectors.detach().double()
    table = {}
    for word, rows in _occurrences(word_labels, len(vectors), min_count).items():
        energy = torch.linalg.svdvals(x[rows]).pow(2)  # (min(n, C),), largest first; sums to ||M||_F^2
        table[word] = (energy[0] / energy.sum().clamp_min(1e-300)).item()
    return table


@dataclass
class Contextuality:
    """Ethayarajh's measures, one number per layer; self-similarities and MEV are means over the word types that
    occur at least ``min_count`` times. "Adjusted" ones have the layer's anisotropy subtracted."""

    anisotropy: list[float]
    self_similarity: list[float]
    adjusted_self_similarity: list[float]
    intra_sentence_similarity: list[float]
    adjusted_intra_sentence_similarity: list[float]
    mev: list[float]
    stopword_self_similarity: list[float] | None  # raw: the layer's anisotropy would shift both groups alike
    content_self_similarity: list[float] | None  # the word types that are not stopwords


def contextuality_by_layer(
    layers: Sequence[Tensor],
    word_labels: Sequence[Hashable],
    sentence_ids: Sequence[int] | Tensor,
    stopwords: set[str] | frozenset[str] | None = None,
    min_count: int = 2,
    n_pairs: int = 1000,
    seed: int = 0,
) -> Contextuality:
    """Every measure of Ethayarajh (2019) for each layer's word vectors (N, C), as :func:`word_layer_vectors` gives
    them: ``word_labels`` (N,) the word type of each row, ``sentence_ids`` (N,) its sentence. With ``stopwords``
    (e.g. :data:`STOPWORDS`; a type is one when ``str(type).lower()`` is in the set) also the mean self-similarity
    of the stopwords and of the other words. Anisotropy is drawn from ``n_pairs`` pairs per layer, seeded by
    ``seed``."""
    generator = torch.Generator().manual_seed(seed)
    mean = lambda values: sum(values) / len(values)
    columns: dict[str, list[float]] = {name: [] for name in ("anisotropy", "self", "intra", "mev", "stop", "content")}
    for vectors in layers:
        similarity = self_similarity(vectors, word_labels, min_count)
        if not similarity:
            raise ValueError(f"no word type occurs {min_count} times: lower min_count or give more sentences")
        columns["anisotropy"].append(anisotropy(vectors, word_labels, n_pairs, generator))
        columns["self"].append(mean(similarity.values()))
        columns["intra"].append(intra_sentence_similarity(vectors, sentence_ids))
        columns["mev"].append(mean(first_pc_variance_explained(vectors, word_labels, min_count).values()))
        if stopwords is not None:
            groups = {"stop": [], "content": []}
            for word, value in similarity.items():
                groups["stop" if str(word).lower() in stopwords else "content"].append(value)
            empty = [name for name, values in groups.items() if not values]
            if empty:
                raise ValueError(
                    f"no {'stopword' if empty[0] == 'stop' else 'content word'} occurs {min_count} times: "
                    "lower min_count, give more sentences, or check the stopwords' case"
                )
            columns["stop"].append(mean(groups["stop"]))
            columns["content"].append(mean(groups["content"]))
    minus = lambda values: [v - a for v, a in zip(values, columns["anisotropy"], strict=True)]
    return Contextuality(
        anisotropy=columns["anisotropy"],
        self_similarity=columns["self"],
        adjusted_self_similarity=minus(columns["self"]),
        intra_sentence_similarity=columns["intra"],
        adjusted_intra_sentence_similarity=minus(columns["intra"]),
        mev=columns["mev"],
        stopword_self_similarity=columns["stop"] if stopwords is not None else None,
        content_self_similarity=columns["content"] if stopwords is not None else None,
    )


def _unit(vectors: Tensor) -> Tensor:
    return F.normalize(vectors.detach().double(), dim=-1)  # a zero vector stays zero (cosine 0 with anything)


def _type_ids(word_labels: Sequence[Hashable] | None, n: int) -> Tensor:
    """(n,) long: one id per distinct label, in order of first appearance; every row its own type without labels."""
    if word_labels is None:
        return torch.arange(n)
    if len(word_labels) != n:
        raise ValueError(f"need one word label per row: {len(word_labels)} labels for {n} vectors")
    ids: dict[Hashable, int] = {}
    return torch.tensor([ids.setdefault(word, len(ids)) for word in word_labels], dtype=torch.long)


def _occurrences(word_labels: Sequence[Hashable], n: int, min_count: int) -> dict[Hashable, Tensor]:
    """Each word type with at least ``min_count`` rows -> its row indices."""
    if len(word_labels) != n:
        raise ValueError(f"need one word label per row: {len(word_labels)} labels for {n} vectors")
    rows: dict[Hashable, list[int]] = {}
    for row, word in enumerate(word_labels):
        rows.setdefault(word, []).append(row)
    return {word: torch.tensor(where) for word, where in rows.items() if len(where) >= min_count}


# --- Brunner et al. (2020): how much of each input token --------------------------------------------------------


def token_contributions(
    model: nn.Module,
    input_ids: Tensor,
    attention_mask: Tensor | None = None,
    layers: Sequence[int] | None = None,
    chunk_size: int = 256,
) -> Tensor:
    """c_ij^l = ||∂e_i^l/∂x_j||_F / Σ_k ||∂e_i^l/∂x_k||_F for one sequence: input_ids (T,) or (1, T) ->
    (n_layers + 1, T, T), row i of layer l the contributions of the input tokens j to hidden token i.

    x_j is the output of ``model.embedding`` at position j, the encoder's input, so layer 0 is the identity. Any
    model whose ``features(ids, output_hidden_states=True)`` start with an ``embedding`` module works: BERT and its
    variants, GPT. ``attention_mask`` (T,) or (1, T) drops the padding first (T is then the real tokens); ``layers``
    picks rows of the result (hidden_states indices). The model must be in eval mode: dropout would make the
    Jacobian random.

    How: forward-mode differentiation. Each of the T·C input coordinates is one tangent direction, and one forward
    pass carries it through every layer at once, giving a column of every layer's Jacobian; the squared columns
    are summed per input token j. Reverse mode would need one backward pass per output coordinate *per layer*,
    (n_layers + 1)·T·C in all. ``chunk_size`` directions run as one batch; attention runs on PyTorch's plain
    ("math") kernel, which forward mode can differentiate. Cost: T·C forward passes of the sequence, under a minute
    on one CPU core for 10 tokens of all-MiniLM-L6-v2 (6 layers, C = 384).
    """
    embedding = getattr(model, "embedding", None)
    if not isinstance(embedding, nn.Module) or not callable(getattr(model, "features", None)):
        raise ValueError(
            f"{type(model).__name__} has no `embedding` module feeding `features`: token_contributions reads "
            "Transformers such as Bert, Albert, Electra or GPT"
        )
    if model.training:
        raise ValueError("the model is in training mode, where dropout makes the Jacobian random: call model.eval()")
    if input_ids.dim() > 2 or (input_ids.dim() == 2 and input_ids.size(0) != 1):
        raise ValueError(f"one sequence at a time: input_ids (T,) or (1, T), got shape {tuple(input_ids.shape)}")
    ids = input_ids.reshape(1, -1)  # (1, T)
    if attention_mask is not None:
        if attention_mask.numel() != ids.size(1):
            raise ValueError(f"attention_mask has {attention_mask.numel()} entries for {ids.size(1)} tokens")
        ids = ids[:, attention_mask.reshape(-1).bool()]  # (1, T_real)
    T, C = ids.size(1), model.config.d_model
    squared: Tensor | None = None  # (L + 1, T, T): Σ over the output and input coordinates of ∂e_i/∂x_j squared
    with torch.no_grad(), sdpa_kernel(SDPBackend.MATH), forward_ad.dual_level():
        for directions in torch.arange(T * C).split(chunk_size):  # flat indices j * C + c of the input coordinates
            B = len(directions)
            tangent = torch.zeros(B, T * C)
            tangent[torch.arange(B), directions] = 1.0
            tangent = tangent.view(B, T, C).to(ids.device)  # copy b of the sequence moves along its own direction

            def as_dual(module: nn.Module, inputs: tuple, output: Tensor, tangent: Tensor = tangent) -> Tensor:
                return forward_ad.make_dual(output, tangent.to(output.dtype))

            hook = embedding.register_forward_hook(as_dual)
            try:
                hidden = model.features(ids.expand(B, T), output_hidden_states=True).hidden_states
            finally:
                hook.remove()
            columns = torch.stack([forward_ad.unpack_dual(h).tangent for h in hidden])  # (L + 1, B, T_i, C)
            per_direction = columns.double().pow(2).sum(-1).transpose(1, 2)  # (L + 1, T_i, B)
            if squared is None:
                squared = per_direction.new_zeros(len(hidden), T, T)
            squared.index_add_(2, directions.to(squared.device) // C, per_direction)  # into input token j
    norms = squared.sqrt()  # (L + 1, T, T): ||∂e_i^l / ∂x_j||_F
    contributions = (norms / norms.sum(-1, keepdim=True)).float()
    return contributions if layers is None else contributions[list(layers)]


def own_token_contribution(contributions: Tensor) -> Tensor:
    """(..., T, T) -> (...,): the mean over tokens i of c_ii, how much of a hidden token comes from its own input."""
    return contributions.diagonal(dim1=-2, dim2=-1).mean(-1)


def top_contributor_is_self(contributions: Tensor) -> Tensor:
    """(..., T, T) -> (...,): the share of hidden tokens whose largest contributor is their own input token
    (Brunner et al.'s measure of how identifiable the tokens stay, layer by layer)."""
    T = contributions.size(-1)
    return (contributions.argmax(-1) == torch.arange(T, device=contributions.device)).float().mean(-1)
