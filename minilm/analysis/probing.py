"""Probing frozen representations: what a linear classifier can read from each layer of a pretrained model.

    layers = layer_features(elmo, sentences)                    # n_layers + 1 tensors (n_words, C)
    train, test = standardize(train_layers, test_layers)        # per dimension, training statistics
    table = probe_layers(train, train_labels, test, test_labels, n_classes=17, seeds=(0, 1, 2))
    # {"layer 0": {"accuracy", "per_seed"}, ..., "ScalarMix": {"accuracy", "per_seed", "weights"}}

Peters et al. (2018, §5.3) asked *what* each biLM layer knows by training a linear classifier on one layer's frozen
vectors (part of speech: Table 6) and by a nearest-sense-centroid rule (word senses: Table 5,
:func:`minilm.metrics.nearest_centroid_accuracy` on :func:`sense_vectors`). The model is never trained here: only
the probe (and, for "ScalarMix", the mix's layer weights, :class:`minilm.nn.ScalarMix`).

Models that read sub-words (BERT, GPT) give one vector per *token*; :func:`word_layer_vectors` turns them into one per
word (its first sub-word's, or the mean of its sub-words'), so the same probes read every model. Two questions asked
of such probes since:

Is it the representation or the probe? (Hewitt & Liang 2019, "Designing and Interpreting Probes with Control
Tasks".) A *control task* gives every word type a random label, fixed for all its tokens and drawn from the real
labels' distribution: only a probe that memorises word types can learn it. A good probe has high *selectivity*,

    selectivity = accuracy(task) - accuracy(control task),

so its accuracy says something about the representation rather than about the probe's capacity
(:func:`probe_with_control`).

Do the senses of a word form clusters? Beside Peters et al.'s nearest centroid, a k-nearest-neighbour rule: each
occurrence takes the majority sense of its k most cosine-similar other occurrences (:func:`knn_sense_accuracy`,
leave-one-out), layer by layer (:func:`knn_sense_by_layer`); :func:`project_2d` draws them in the plane.
"""

from __future__ import annotations

import hashlib
from bisect import bisect_right
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import accumulate

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from minilm.nn import ScalarMix, batch_to_char_ids
from minilm.tokenizers import Tokenizer


@torch.no_grad()
def layer_features(model: nn.Module, sentences: Sequence[Sequence[str]], batch_size: int = 64) -> list[Tensor]:
    """Every word's vector in each layer of a model that reads characters (ELMo's ``features(char_ids=...)``):
    n_layers + 1 tensors (n_words, C), the words of all sentences in order, padding dropped."""
    per_layer: list[list[Tensor]] = []
    for i in range(0, len(sentences), batch_size):
        batch = sentences[i : i + batch_size]
        lengths = torch.tensor([len(s) for s in batch])
        mask = (torch.arange(int(lengths.max()))[None, :] < lengths[:, None]).long()  # (B, T), right padding
        char_ids = batch_to_char_ids(batch, model.config.max_chars)  # (B, T, max_chars): any word, known or not
        layers = model.features(char_ids=char_ids, attention_mask=mask).hidden_states  # each (B, T, C)
        per_layer = per_layer or [[] for _ in layers]
        for chunks, h in zip(per_layer, layers, strict=True):
            chunks.append(h[mask.bool()])  # (words in the batch, C)
    return [torch.cat(chunks) for chunks in per_layer]


@torch.no_grad()
def word_layer_vectors(
    model: nn.Module,
    tokenizer: Tokenizer | None,
    sentences: Sequence[Sequence[str]],
    batch_size: int = 32,
    pool: str = "first",
) -> list[Tensor]:
    """Every word's vector in each layer of any model: n_layers + 1 tensors (n_words, C), the words of all sentences
    in order.

    A model that reads sub-words (BERT, GPT: ``features(input_ids, attention_mask, output_hidden_states=True)``)
    reads each sentence as its words joined by spaces, special tokens included, as it would read the text. A word's
    vector is its first sub-word's (``pool="first"``, as BERT's taggers read words) or the mean of its sub-words'
    (``pool="mean"``). Tokens are matched to words by their character offsets: the tokenizer's own ``word_ids``
    count its pre-tokenizer's words, and "clerk's" is three of those. A sentence longer than the model's
    ``max_len`` is refused rather than cut. A model that reads characters (ELMo, whose config has ``max_chars``)
    has one vector per word already: its vectors are :func:`layer_features`', and ``tokenizer`` is not used.
    """
    if pool not in ("first", "mean"):
        raise ValueError(f"pool={pool!r}: use 'first' (each word's first sub-word) or 'mean' (of its sub-words)")
    if getattr(model.config, "max_chars", None) is not None:  # reads characters: one position per word
        return layer_features(model, sentences, batch_size)
    if tokenizer is None:
        raise ValueError(f"{type(model).__name__} reads sub-words: pass its tokenizer")
    per_layer: list[list[Tensor]] = []
    for start in range(0, len(sentences), batch_size):
        batch = sentences[start : start + batch_size]
        enc = tokenizer([" ".join(words) for words in batch], return_tensors="pt")
        positions, owners = [], []  # flat (B * T) index of each pooled token, and the word (in the batch) it is of
        n_words = 0
        for b, words in enumerate(batch):
            length = int(enc.attention_mask[b].sum())
            if length > model.config.max_len:
                raise ValueError(
                    f"sentence {start + b} has {length} tokens, more than the model's max_len of "
                    f"{model.config.max_len}: split it into shorter sentences"
                )
            token_words = _token_words(words, enc.offsets[b], enc.special_tokens_mask[b].tolist())
            missing = sorted(set(range(len(words))) - {w for w in token_words if w is not None})
            if missing:
                raise ValueError(
                    f"the word {words[missing[0]]!r} of sentence {start + b} has no token: "
                    "remove empty words and words the tokenizer drops"
                )
            seen = set()
            for t, w in enumerate(token_words):
                if w is not None and (pool == "mean" or w not in seen):
                    positions.append(b * enc.input_ids.size(1) + t)
                    owners.append(n_words + w)
                    seen.add(w)
            n_words += len(words)
        layers = model.features(enc.input_ids, enc.attention_mask, output_hidden_states=True).hidden_states
        positions, owners = torch.tensor(positions), torch.tensor(owners)
        counts = torch.bincount(owners, minlength=n_words)[:, None]  # (n_words, 1): 1 each for "first"
        per_layer = per_layer or [[] for _ in layers]
        for chunks, h in zip(per_layer, layers, strict=True):
            tokens = h.reshape(-1, h.size(-1))[positions]  # (pooled tokens, C)
            chunks.append(tokens.new_zeros(n_words, h.size(-1)).index_add_(0, owners, tokens) / counts)
    return [torch.cat(chunks) for chunks in per_layer]


def _token_words(words: Sequence[str], offsets: list[tuple[int, int]], special: list[int]) -> list[int | None]:
    """The index in ``words`` of each token of ``" ".join(words)`` (by its first character that is not a space: a
    SentencePiece token such as ALBERT's "▁cat" covers the space before its word); None for special tokens and tokens
    that cover no character of a word (a lone "▁")."""
    text = " ".join(words)
    starts = list(accumulate((len(w) + 1 for w in words[:-1]), initial=0))  # each word's first character
    found = []
    for (first, end), is_special in zip(offsets, special, strict=True):
        first += len(text[first:end]) - len(text[first:end].lstrip(" "))  # past the spaces it covers
        found.append(bisect_right(starts, first) - 1 if not is_special and end > first else None)
    return found


def sense_vectors(model: nn.Module, word: str, senses: Mapping[str, Sequence[str]]) -> tuple[list[Tensor], Tensor]:
    """``word``'s vector in each layer, one row per sentence (n, C), and each sentence's sense label (n,): the
    senses' sentences (whitespace-tokenised, each containing ``word``) labelled 0, 1, ... in the mapping's order."""
    sentences, labels, where = _sense_sentences(word, senses)
    return [layer[where] for layer in layer_features(model, sentences)], labels


def subword_sense_vectors(
    model: nn.Module, tokenizer: Tokenizer, word: str, senses: Mapping[str, Sequence[str]], pool: str = "first"
) -> tuple[list[Tensor], Tensor]:
    """:func:`sense_vectors` for a model that reads sub-words (BERT, GPT): ``word``'s vector in each layer is that
    of its first sub-word (or, ``pool="mean"``, the mean of its sub-words'), from :func:`word_layer_vectors`."""
    sentences, labels, where = _sense_sentences(word, senses)
    return [layer[where] for layer in word_layer_vectors(model, tokenizer, sentences, pool=pool)], labels


def _sense_sentences(word: str, senses: Mapping[str, Sequence[str]]) -> tuple[list[list[str]], Tensor, Tensor]:
    """The senses' sentences split at spaces, their sense labels (n,), and where ``word`` is among all their words."""
    sentences, labels = [], []
    for label, texts in enumerate(senses.values()):
        sentences += [text.split() for text in texts]
        labels += [label] * len(texts)
    missing = [" ".join(s) for s in sentences if word not in s]
    if missing:
        raise ValueError(f"{word!r} is not a word of {missing[0]!r}: every sentence must contain it")
    starts = torch.tensor([0] + [len(s) for s in sentences]).cumsum(0)[:-1]  # first word of each sentence
    where = starts + torch.tensor([s.index(word) for s in sentences])
    return sentences, torch.tensor(labels), where


def standardize(train_layers: Sequence[Tensor], test_layers: Sequence[Tensor]) -> tuple[list[Tensor], list[Tensor]]:
    """Each layer's features to mean 0 and std 1 per dimension, with the training features' statistics: the
    probes of layers of very different scales then train alike."""
    train_out, test_out = [], []
    for train, test in zip(train_layers, test_layers, strict=True):
        mean, std = train.mean(0), train.std(0) + 1e-6  # (C,) each
        train_out.append((train - mean) / std)
        test_out.append((test - mean) / std)
    return train_out, test_out


@dataclass
class ProbeResult:
    accuracy: float  # on the test features
    predictions: Tensor  # (n_test,) the predicted classes
    mix_weights: list[float] | None  # the ScalarMix's softmax(w), when the probe mixes layers


def linear_probe(
    train_layers: Sequence[Tensor],
    train_labels: Tensor,
    test_layers: Sequence[Tensor],
    test_labels: Tensor,
    n_classes: int,
    *,
    mix: bool = False,
    epochs: int = 5,
    lr: float = 3e-3,
    batch_size: int = 256,
    seed: int = 0,
) -> ProbeResult:
    """A linear classifier on frozen features (N, C): on the one layer given, or with ``mix=True`` on a ScalarMix of
    all of them (its weights learned with the classifier). Adam on shuffled mini-batches, cross-entropy."""
    if not mix and len(train_layers) != 1:
        raise ValueError(f"a probe without mix reads one layer, got {len(train_layers)}: pass [layers[j]] or mix=True")
    if len(train_layers) != len(test_layers) or any(len(h) != len(train_labels) for h in train_layers):
        raise ValueError("need as many test layers as training layers, and one training label per row")
    torch.manual_seed(seed)
    scalar_mix = ScalarMix(len(train_layers)) if mix else None
    classifier = nn.Linear(train_layers[0].size(-1), n_classes)
    parameters = list(classifier.parameters()) + (list(scalar_mix.parameters()) if mix else [])
    optimizer = torch.optim.Adam(parameters, lr=lr)

    def logits(layers: Sequence[Tensor]) -> Tensor:  # (N, n_classes)
        return classifier(scalar_mix(layers) if mix else layers[0])

    for _ in range(epochs):
        for batch in torch.randperm(len(train_labels)).split(batch_size):
            loss = F.cross_entropy(logits([h[batch] for h in train_layers]), train_labels[batch])
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
    with torch.no_grad():
        predictions = logits(test_layers).argmax(-1)
    weights = torch.softmax(scalar_mix.weights, 0).tolist() if mix else None
    return ProbeResult((predictions == test_labels).float().mean().item(), predictions, weights)


def probe_layers(
    train_layers: Sequence[Tensor],
    train_labels: Tensor,
    test_layers: Sequence[Tensor],
    test_labels: Tensor,
    n_classes: int,
    seeds: Sequence[int] = (0,),
    **options,
) -> dict[str, dict]:
    """A :func:`linear_probe` of each layer alone ("layer 0", ...) and of a ScalarMix of all ("ScalarMix"), for each
    seed: ``{"accuracy": mean over seeds, "per_seed": [...]}``, the mix also ``"weights"`` (of the first seed)."""

    def runs(train: Sequence[Tensor], test: Sequence[Tensor], mix: bool) -> list[ProbeResult]:
        return [
            linear_probe(train, train_labels, test, test_labels, n_classes, mix=mix, seed=seed, **options)
            for seed in seeds
        ]

    table = {
        f"layer {j}": _row(runs([train], [test], mix=False))
        for j, (train, test) in enumerate(zip(train_layers, test_layers, strict=True))
    }
    mixed = runs(train_layers, test_layers, mix=True)
    table["ScalarMix"] = {**_row(mixed), "weights": mixed[0].mix_weights}
    return table


def _row(runs: list[ProbeResult]) -> dict:
    accuracies = [run.accuracy for run in runs]
    return {"accuracy": sum(accuracies) / len(accuracies), "per_seed": accuracies}


# --- control tasks (Hewitt & Liang 2019) -------------------------------------------------------------------------


def control_labels(words: Sequence[str], labels: Tensor, n_classes: int, seed: int = 0) -> Tensor:
    """Hewitt & Liang's control task for ``words``: each word *type* gets one random label (len(words),), the same for
    every token of the type, drawn from the empirical distribution of the real ``labels`` (their construction).

    Only the distribution of ``labels`` is used, so they need not be the labels of ``words``: label the test words
    with the *training* labels' distribution. A type's draw depends on nothing but the type, ``seed`` and that
    distribution (a hash of the word and the seed, read as a uniform number, through the inverse CDF), so the
    training and the test words share one mapping, and a type seen only at test time gets a label as well.
    """
    if labels.dim() != 1 or len(labels) == 0 or labels.is_floating_point():
        raise ValueError(f"labels must be a non-empty 1-D tensor of class ids, got shape {tuple(labels.shape)}")
    if int(labels.min()) < 0 or int(labels.max()) >= n_classes:
        raise ValueError(f"labels must lie in 0..{n_classes - 1} (n_classes={n_classes})")
    cumulative = torch.bincount(labels, minlength=n_classes).cumsum(0).tolist()  # integer CDF, total = len(labels)
    drawn: dict[str, int] = {}
    for word in words:
        if word not in drawn:
            digest = hashlib.blake2b(f"{seed}\0{word}".encode(), digest_size=8).digest()
            draw = (int.from_bytes(digest, "little") * cumulative[-1]) >> 64  # uniform on 0 .. len(labels) - 1
            drawn[word] = bisect_right(cumulative, draw)  # class k with probability count_k / len(labels)
    return torch.tensor([drawn[word] for word in words], dtype=torch.long)


def selectivity(task_accuracy: float, control_accuracy: float) -> float:
    """Hewitt & Liang's selectivity: the task's accuracy minus the control task's (high: the representation, not
    the probe, knows the task)."""
    return task_accuracy - control_accuracy


def probe_with_control(
    train_layers: Sequence[Tensor],
    train_words: Sequence[str],
    train_labels: Tensor,
    test_layers: Sequence[Tensor],
    test_words: Sequence[str],
    test_labels: Tensor,
    n_classes: int,
    *,
    seed: int = 0,
    **options,
) -> dict[str, dict[str, float]]:
    """A :func:`linear_probe` of each layer on the task and on its control task (:func:`control_labels` of the
    training labels' distribution, one mapping for training and test words, drawn with ``seed``):
    ``{"layer 0": {"accuracy", "control", "selectivity"}, ...}``. ``options`` go to :func:`linear_probe`."""
    if len(train_words) != len(train_labels) or len(test_words) != len(test_labels):
        raise ValueError(
            f"need one word per label: {len(train_words)} training words for {len(train_labels)} labels, "
            f"{len(test_words)} test words for {len(test_labels)} labels"
        )
    control_train = control_labels(train_words, train_labels, n_classes, seed)
    control_test = control_labels(test_words, train_labels, n_classes, seed)
    table = {}
    for j, (train, test) in enumerate(zip(train_layers, test_layers, strict=True)):
        task = linear_probe([train], train_labels, [test], test_labels, n_classes, seed=seed, **options).accuracy
        control = linear_probe([train], control_train, [test], control_test, n_classes, seed=seed, **options).accuracy
        table[f"layer {j}"] = {"accuracy": task, "control": control, "selectivity": selectivity(task, control)}
    return table


# --- word senses by nearest neighbours ---------------------------------------------------------------------------


def knn_sense_accuracy(vectors: Tensor, labels: Tensor, k: int = 1, metric: str = "cosine") -> float:
    """Leave-one-out k-nearest-neighbour accuracy of labelled vectors (N, C): each vector gets the majority label
    of its ``k`` nearest *other* vectors, by cosine distance (1 - cos) or ``metric="euclidean"``. A tied vote goes
    to the smallest label, as in scikit-learn's ``KNeighborsClassifier``."""
    if vectors.dim() != 2 or labels.shape != (len(vectors),):
        raise ValueError(
            f"need vectors (N, C) and labels (N,), got shapes {tuple(vectors.shape)} and {tuple(labels.shape)}"
        )
    if not 1 <= k < len(vectors):
        raise ValueError(f"k={k} neighbours need 1 <= k < N = {len(vectors)} (one vector is left out at a time)")
    x = vectors.detach().double()
    if metric == "cosine":
        unit = F.normalize(x, dim=-1)
        distance = 1 - unit @ unit.T  # (N, N)
    elif metric == "euclidean":
        distance = torch.cdist(x, x)  # (N, N)
    else:
        raise ValueError(f"metric={metric!r}: use 'cosine' or 'euclidean'")
    distance.fill_diagonal_(float("inf"))  # leave each vector out of its own neighbours
    neighbours = distance.topk(k, largest=False).indices  # (N, k)
    classes, y = labels.unique(return_inverse=True)  # sorted labels -> 0, 1, ...
    votes = F.one_hot(y[neighbours], len(classes)).sum(1)  # (N, n_labels)
    return (votes.argmax(-1) == y).double().mean().item()  # argmax: the first (smallest) label of a tie


def knn_sense_by_layer(layers: Sequence[Tensor], labels: Tensor, k: int = 1, metric: str = "cosine") -> list[float]:
    """:func:`knn_sense_accuracy` of each layer's vectors (as :func:`sense_vectors` gives them)."""
    return [knn_sense_accuracy(vectors, labels, k, metric) for vectors in layers]


def project_2d(vectors: Tensor, method: str = "pca", seed: int = 0) -> Tensor:
    """Vectors (N, C) -> (N, 2) to plot: their first two principal components (``"pca"``) or a t-SNE map
    (``"tsne"``, perplexity min(30, (N - 1) / 3): t-SNE needs fewer neighbours than points), with scikit-learn."""
    if vectors.dim() != 2 or len(vectors) < 3 or vectors.size(1) < 2:
        raise ValueError(f"need at least 3 vectors of at least 2 dimensions (N, C), got {tuple(vectors.shape)}")
    try:
        from sklearn.decomposition import PCA
        from sklearn.manifold import TSNE
    except ImportError as error:
        raise ImportError("project_2d needs scikit-learn (pip install scikit-learn)") from error
    x = vectors.detach().double().cpu().numpy()
    if method == "pca":
        points = PCA(n_components=2, random_state=seed).fit_transform(x)
    elif method == "tsne":
        points = TSNE(n_components=2, perplexity=min(30.0, (len(x) - 1) / 3), random_state=seed).fit_transform(x)
    else:
        raise ValueError(f"method={method!r}: use 'pca' or 'tsne'")
    return torch.from_numpy(points).float()
