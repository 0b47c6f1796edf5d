"""Probing frozen representations: what a linear classifier can read from each layer of a pretrained model.

    layers = layer_features(elmo, sentences)                    # n_layers + 1 tensors (n_words, C)
    train, test = standardize(train_layers, test_layers)        # per dimension, training statistics
    table = probe_layers(train, train_labels, test, test_labels, n_classes=17, seeds=(0, 1, 2))
    # {"layer 0": {"accuracy", "per_seed"}, ..., "ScalarMix": {"accuracy", "per_seed", "weights"}}

Peters et al. (2018, §5.3) asked *what* each biLM layer knows by training a linear classifier on one layer's frozen
vectors (part of speech: Table 6) and by a nearest-sense-centroid rule (word senses: Table 5,
:func:`minilm.metrics.nearest_centroid_accuracy` on :func:`sense_vectors`). The model is never trained here: only
the probe (and, for "ScalarMix", the mix's layer weights, :class:`minilm.nn.ScalarMix`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from minilm.nn import ScalarMix, batch_to_char_ids


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


def sense_vectors(model: nn.Module, word: str, senses: Mapping[str, Sequence[str]]) -> tuple[list[Tensor], Tensor]:
    """``word``'s vector in each layer, one row per sentence (n, C), and each sentence's sense label (n,): the
    senses' sentences (whitespace-tokenised, each containing ``word``) labelled 0, 1, ... in the mapping's order."""
    sentences, labels = [], []
    for label, texts in enumerate(senses.values()):
        sentences += [text.split() for text in texts]
        labels += [label] * len(texts)
    missing = [" ".join(s) for s in sentences if word not in s]
    if missing:
        raise ValueError(f"{word!r} is not a word of {missing[0]!r}: every sentence must contain it")
    starts = torch.tensor([0] + [len(s) for s in sentences]).cumsum(0)[:-1]  # first word of each sentence
    where = starts + torch.tensor([s.index(word) for s in sentences])
    return [layer[where] for layer in layer_features(model, sentences)], torch.tensor(labels)


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
