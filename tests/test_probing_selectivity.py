"""minilm.analysis.probing's additions for Chapter 9: Hewitt & Liang's control tasks and selectivity, word senses by
k nearest neighbours (against scikit-learn), sub-word models' sense vectors and the 2-D projection."""

import numpy as np
import pytest
import torch

from minilm.analysis.probing import (
    control_labels,
    knn_sense_accuracy,
    knn_sense_by_layer,
    linear_probe,
    probe_with_control,
    project_2d,
    selectivity,
    subword_sense_vectors,
    word_layer_vectors,
)

# --- control tasks ---


def test_control_labels_are_one_per_word_type_and_follow_the_label_distribution():
    words = [f"w{i}" for i in range(3000)]
    real = torch.tensor([0] * 60 + [1] * 30 + [2] * 10)  # p = 0.6, 0.3, 0.1, 0 (class 3 never occurs)
    labels = control_labels(words + words[:50], real, n_classes=4)
    assert labels.shape == (3050,) and torch.equal(labels[3000:], labels[:50])  # a type keeps its label
    shares = torch.bincount(labels[:3000], minlength=4).double() / 3000  # one draw per type
    assert torch.allclose(shares, torch.tensor([0.6, 0.3, 0.1, 0.0], dtype=torch.double), atol=0.03)
    assert shares[3] == 0  # a class without real examples is never drawn
    again, other_seed = control_labels(words, real, 4), control_labels(words, real, 4, seed=1)
    assert torch.equal(again, labels[:3000]) and (other_seed != again).float().mean() > 0.3


def test_a_types_control_label_does_not_depend_on_the_other_words():
    real = torch.tensor([0, 1, 1, 2, 2, 2])
    train, test = ["the", "bank", "lent", "the"], ["money", "bank", "the"]  # "money": a type seen only at test time
    train_labels, test_labels = control_labels(train, real, 3), control_labels(test, real, 3)
    assert test_labels[1] == train_labels[1] and test_labels[2] == train_labels[0]
    assert control_labels(["money"], real, 3).item() == test_labels[0].item()
    with pytest.raises(ValueError, match="labels must lie in 0..2"):
        control_labels(train, torch.tensor([0, 3]), 3)


def test_selectivity_tells_a_representation_of_the_task_from_one_of_the_word_types():
    """Task labels that follow from the word type (like parts of speech). A probe of one-hot word types learns the
    task and its control task alike (it memorises types: low selectivity); a probe of vectors that know only the
    task's label learns the task and not the control (high selectivity)."""
    generator = torch.Generator().manual_seed(0)
    train_types, test_types = (
        torch.randint(0, 40, (800,), generator=generator),
        torch.randint(0, 40, (400,), generator=generator),
    )
    task = lambda types: types % 3
    word_types = lambda types: torch.eye(40)[types]
    label_only = lambda types: torch.eye(3)[task(types)] * 4 + torch.randn(len(types), 3, generator=generator)
    train_layers, test_layers = (
        [word_types(train_types), label_only(train_types)],
        [word_types(test_types), label_only(test_types)],
    )
    train_words, test_words = [f"w{t}" for t in train_types.tolist()], [f"w{t}" for t in test_types.tolist()]
    options = dict(epochs=40, lr=0.1, seed=3)
    table = probe_with_control(
        train_layers, train_words, task(train_types), test_layers, test_words, task(test_types), 3, **options
    )
    assert list(table) == ["layer 0", "layer 1"]
    types, labels = table["layer 0"], table["layer 1"]
    assert types["accuracy"] > 0.95 and types["control"] > 0.95  # memorised types: both tasks (measured 1, 1)
    assert labels["accuracy"] > 0.95 and labels["control"] < 0.7  # the label only: the task alone
    assert labels["selectivity"] > types["selectivity"] + 0.3
    control_train = control_labels(train_words, task(train_types), 3, seed=3)
    control_test = control_labels(test_words, task(train_types), 3, seed=3)  # the training labels' distribution
    for j, row in enumerate(table.values()):
        control = linear_probe([train_layers[j]], control_train, [test_layers[j]], control_test, 3, **options)
        assert row["control"] == control.accuracy
        assert row["selectivity"] == selectivity(row["accuracy"], row["control"]) == row["accuracy"] - row["control"]
    with pytest.raises(ValueError, match="need one word per label: 799 training words for 800 labels"):
        probe_with_control(train_layers, train_words[1:], task(train_types), test_layers, test_words,
                           task(test_types), 3)  # fmt: skip


# --- word senses by nearest neighbours ---


@pytest.mark.parametrize("k", [1, 3])
@pytest.mark.parametrize("metric", ["cosine", "euclidean"])
def test_knn_sense_accuracy_is_scikit_learns_leave_one_out(k, metric):
    from sklearn.model_selection import LeaveOneOut, cross_val_predict
    from sklearn.neighbors import KNeighborsClassifier

    generator = torch.Generator().manual_seed(k)
    labels = torch.randint(0, 3, (40,), generator=generator)
    vectors = torch.randn(40, 5, generator=generator) + torch.randn(3, 5, generator=generator)[labels]  # 3 clusters
    knn = KNeighborsClassifier(n_neighbors=k, metric=metric, algorithm="brute")
    predicted = cross_val_predict(knn, vectors.double().numpy(), labels.numpy(), cv=LeaveOneOut())
    expected = (predicted == labels.numpy()).mean()
    assert knn_sense_accuracy(vectors, labels, k, metric) == pytest.approx(expected, abs=1e-12)
    assert 0.4 < expected < 1.0  # neither trivial nor chance
    assert knn_sense_by_layer([vectors, vectors[:, :2]], labels, k, metric)[0] == knn_sense_accuracy(
        vectors, labels, k, metric
    )


def test_knn_sense_accuracy_by_hand():
    vectors = torch.tensor([[1.0, 0.0], [0.9, 0.1], [0.0, 1.0], [0.1, 0.9]])
    assert knn_sense_accuracy(vectors, torch.tensor([5, 5, 7, 7])) == 1.0  # labels need not be 0, 1, ...
    assert knn_sense_accuracy(vectors, torch.tensor([0, 1, 0, 1])) == 0.0  # each one's neighbour has the other label
    # k = 2 on a line, A = 0, B = 1, C = -2, D = 5: A's neighbours B, C; B's A, C; C's A, B; D's B, A. Every tied vote
    # goes to the smaller label (as scikit-learn's): with labels 0, 1, 0, 1, A, C right and B (0, 0), D (tie) wrong
    line = torch.tensor([[0.0, 0.0], [1.0, 0.0], [-2.0, 0.0], [5.0, 0.0]])
    assert knn_sense_accuracy(line, torch.tensor([0, 1, 0, 1]), k=2, metric="euclidean") == 0.5
    assert knn_sense_accuracy(line, torch.tensor([1, 0, 1, 0]), k=2, metric="euclidean") == 0.25  # only D right
    with pytest.raises(ValueError, match="k=4 neighbours need 1 <= k < N = 4"):
        knn_sense_accuracy(vectors, torch.tensor([0, 0, 1, 1]), k=4)
    with pytest.raises(ValueError, match="metric='manhattan'"):
        knn_sense_accuracy(vectors, torch.tensor([0, 0, 1, 1]), metric="manhattan")


def test_the_senses_of_bank_separate_in_the_upper_layers_of_all_minilm_l6_v2(all_minilm):
    from minilm.data.senses import WORD_SENSES

    model, tokenizer = all_minilm
    senses = WORD_SENSES["bank"]
    layers, labels = subword_sense_vectors(model, tokenizer, "bank", senses)
    assert [tuple(h.shape) for h in layers] == [(20, 384)] * 7 and labels.tolist() == [0] * 10 + [1] * 10
    sentences = [text.split() for texts in senses.values() for text in texts]
    every_word = word_layer_vectors(model, tokenizer, sentences)
    first = sentences[0].index("bank")  # "He sat on the bank of the river ..."
    assert all(torch.equal(h[0], w[first]) for h, w in zip(layers, every_word, strict=True))
    accuracy = knn_sense_by_layer(layers, labels, k=1)
    assert max(accuracy[4:]) >= 0.9  # measured: 1.0 from layer 3 on
    assert accuracy[0] < 0.7  # the input embedding of "bank" differs only by position: measured 0.45


# --- 2-D projection ---


def test_project_2d_gives_the_first_two_principal_components_or_a_tsne_map():
    generator = torch.Generator().manual_seed(0)
    vectors = torch.randn(20, 6, generator=generator) * torch.tensor([5.0, 3.0, 1.0, 1.0, 0.5, 0.5])
    points = project_2d(vectors)
    centred = vectors.double().numpy() - vectors.double().numpy().mean(0)
    u, s, _ = np.linalg.svd(centred, full_matrices=False)
    expected = u[:, :2] * s[:2]  # the scores on the first two principal axes, each up to its sign
    signs = np.sign((points.numpy() * expected).sum(0))
    assert points.shape == (20, 2) and np.allclose(points.numpy() * signs, expected, atol=1e-4)
    tsne = project_2d(vectors, method="tsne", seed=1)
    assert tsne.shape == (20, 2) and torch.equal(tsne, project_2d(vectors, method="tsne", seed=1))
    with pytest.raises(ValueError, match="method='umap': use 'pca' or 'tsne'"):
        project_2d(vectors, method="umap")
    with pytest.raises(ValueError, match="need at least 3 vectors of at least 2 dimensions"):
        project_2d(vectors[:2])
