"""Metrics: against scikit-learn and scipy on random data, hand-worked cases, a port of conlleval, SQuAD's rules."""

import math
from dataclasses import dataclass

import numpy as np
import pytest
import torch
from scipy import stats
from sklearn import metrics as skm

from minilm.metrics import (
    METRICS,
    accuracy,
    bio_spans,
    compute,
    entity_f1,
    entity_f1_by_type,
    f1,
    macro_f1,
    matthews_corrcoef,
    nearest_centroid_accuracy,
    normalize_answer,
    pearson,
    perplexity,
    spearman,
    squad_exact,
    squad_f1,
    squad_scores,
)

SIZES = (2, 7, 50, 1000)

# --- classification against scikit-learn ---


@pytest.mark.filterwarnings("ignore:A single label was found")  # sklearn, on the tiniest samples
@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("n_classes", (2, 3, 5))
def test_classification_metrics_match_sklearn(n, n_classes):
    rng = np.random.default_rng(n * 10 + n_classes)
    for _ in range(5):
        y = rng.integers(0, n_classes, n)
        p = np.where(rng.random(n) < 0.6, y, rng.integers(0, n_classes, n))  # correlated with y, often imperfect
        assert accuracy(p, y) == pytest.approx(skm.accuracy_score(y, p), abs=1e-12)
        assert matthews_corrcoef(p, y) == pytest.approx(skm.matthews_corrcoef(y, p), abs=1e-12)
        assert macro_f1(p, y) == pytest.approx(skm.f1_score(y, p, average="macro", zero_division=0), abs=1e-12)
        expected_f1 = skm.f1_score(y == 1, p == 1, zero_division=0)  # class 1 against the rest
        assert f1(p, y) == pytest.approx(expected_f1, abs=1e-12)


def test_f1_positive_class_and_string_labels():
    y = ["yes", "no", "yes", "yes", "no"]
    p = ["yes", "yes", "no", "yes", "no"]
    assert f1(p, y, positive="yes") == pytest.approx(skm.f1_score(y, p, pos_label="yes"))
    assert f1(p, y, positive="no") == pytest.approx(skm.f1_score(y, p, pos_label="no"))
    assert f1(p, y, positive="yes") == pytest.approx(2 * 2 / (2 * 2 + 1 + 1))  # TP 2, FP 1, FN 1
    assert f1([0, 0, 0], [0, 0, 0]) == 0.0  # no positive anywhere: undefined, 0.0


def test_matthews_by_hand_on_a_2x2_confusion():
    # TP 5, FN 2, FP 1, TN 4: MCC = (5*4 - 1*2) / sqrt((5+1)(5+2)(4+1)(4+2)) = 18 / sqrt(1260)
    y = [1] * 5 + [1] * 2 + [0] * 1 + [0] * 4
    p = [1] * 5 + [0] * 2 + [1] * 1 + [0] * 4
    assert matthews_corrcoef(p, y) == pytest.approx(18 / math.sqrt(1260), abs=1e-15)
    assert matthews_corrcoef(y, y) == 1.0
    assert matthews_corrcoef([1 - v for v in y], y) == pytest.approx(-1.0)


def test_matthews_is_zero_when_undefined_as_sklearn():
    assert matthews_corrcoef([1, 1, 1, 1], [0, 1, 0, 1]) == 0.0  # constant predictions
    assert matthews_corrcoef([0, 1, 0, 1], [1, 1, 1, 1]) == 0.0  # constant labels
    assert skm.matthews_corrcoef([0, 1, 0, 1], [1, 1, 1, 1]) == 0.0


def test_accuracy_on_tag_sequences_is_per_token():
    gold = [["DET", "NOUN"], ["VERB", "ADV", "PUNCT"]]
    pred = [["DET", "VERB"], ["VERB", "ADV", "PUNCT"]]
    assert accuracy(pred, gold) == pytest.approx(4 / 5)
    with pytest.raises(ValueError, match="sequence 1"):
        accuracy([["DET", "NOUN"], ["VERB"]], gold)


def test_inputs_may_be_tensors_arrays_or_lists():
    y = [0, 1, 1, 0, 1, 0, 0]
    p = [0, 1, 0, 0, 1, 1, 0]
    expected = matthews_corrcoef(p, y)
    assert matthews_corrcoef(torch.tensor(p), torch.tensor(y)) == expected
    assert matthews_corrcoef(np.array(p), tuple(y)) == expected
    x = torch.randn(20, requires_grad=True)
    assert pearson(x, x * 2 + 1) == pytest.approx(1.0)
    assert spearman(torch.arange(20, dtype=torch.bfloat16), range(20)) == pytest.approx(1.0)  # no numpy bfloat16


@pytest.mark.parametrize("metric", [accuracy, f1, macro_f1, matthews_corrcoef, pearson, spearman])
def test_bad_inputs_raise_value_error(metric):
    with pytest.raises(ValueError, match="3 predictions for 2 labels"):
        metric([0, 1, 1], [0, 1])
    with pytest.raises(ValueError, match="empty"):
        metric([], [])
    with pytest.raises(ValueError, match="1-D"):
        metric(np.zeros((2, 3)), np.zeros((2, 3)))  # a padded batch


# --- correlation against scipy ---


@pytest.mark.parametrize("n", SIZES[1:])
def test_pearson_and_spearman_match_scipy(n):
    rng = np.random.default_rng(n)
    for _ in range(20):
        x = rng.normal(size=n)
        y = 0.5 * x + rng.normal(size=n)
        assert pearson(x, y) == pytest.approx(stats.pearsonr(x, y)[0], abs=1e-12)
        assert spearman(x, y) == pytest.approx(stats.spearmanr(x, y)[0], abs=1e-12)
        tied_x, tied_y = rng.integers(0, 4, n), np.round(y)  # many ties
        if len(set(tied_x)) > 1 and len(set(tied_y)) > 1:
            assert spearman(tied_x, tied_y) == pytest.approx(stats.spearmanr(tied_x, tied_y)[0], abs=1e-12)
            assert pearson(tied_x, tied_y) == pytest.approx(stats.pearsonr(tied_x, tied_y)[0], abs=1e-12)


def test_spearman_with_ties_by_hand():
    # ranks of x: 1, 2.5, 2.5, 4 (the tied 2s share ranks 2 and 3); of y: 1, 3, 2, 4.
    # centred: (-1.5, 0, 0, 1.5) and (-1.5, 0.5, -0.5, 1.5): r = 4.5 / sqrt(4.5 * 5) = sqrt(0.9)
    assert spearman([1, 2, 2, 3], [1, 3, 2, 4]) == pytest.approx(math.sqrt(0.9), abs=1e-15)
    assert spearman([1, 2, 3, 4], [10, 100, 1000, 10**6]) == pytest.approx(1.0)  # monotone, not linear
    assert pearson([1, 2, 3, 4], [10, 100, 1000, 10**6]) < 0.9


def test_correlations_are_nan_when_undefined_as_scipy():
    assert math.isnan(pearson([1.0, 1.0, 1.0], [1.0, 2.0, 3.0]))
    assert math.isnan(pearson([0.1] * 7, range(7)))  # constant although its float mean is not exactly 0.1
    assert math.isnan(spearman([1, 2, 3], [5, 5, 5]))
    assert math.isnan(pearson([1.0, float("nan"), 3.0], [1.0, 2.0, 3.0]))
    assert math.isnan(spearman([1.0, float("nan"), 3.0], [1.0, 2.0, 3.0]))


# --- perplexity ---


@pytest.mark.parametrize("vocab", (2, 10, 50_257))
def test_perplexity_of_a_uniform_model_is_the_vocabulary_size(vocab):
    logits = torch.zeros(8, vocab, dtype=torch.float64)
    targets = torch.randint(0, vocab, (8,))
    mean_nll = torch.nn.functional.cross_entropy(logits, targets)  # ln V nats per token
    assert perplexity(mean_nll) == pytest.approx(vocab, rel=1e-12)
    bits = mean_nll.item() / math.log(2)
    assert 2**bits == pytest.approx(perplexity(mean_nll), rel=1e-12)


def test_perplexity_edges():
    assert perplexity(0.0) == 1.0  # a certain model
    assert perplexity(np.float32(1.0)) == pytest.approx(math.e)
    assert perplexity(1000.0) == math.inf  # exp overflows a float: no OverflowError
    assert math.isnan(perplexity(float("nan")))
    with pytest.raises(ValueError, match="negative"):
        perplexity(-0.5)


# --- entities (WNUT-17, conlleval) ---


def test_bio_spans():
    assert bio_spans(["B-PER", "I-PER", "O", "B-LOC"]) == [("PER", 0, 2), ("LOC", 3, 4)]
    assert bio_spans(["B-X", "B-X", "I-X"]) == [("X", 0, 1), ("X", 1, 3)]  # adjacent entities
    assert bio_spans(["I-X", "I-X", "O", "I-Y"]) == [("X", 0, 2), ("Y", 3, 4)]  # I- after O or at start: new entity
    assert bio_spans(["B-X", "I-Y", "I-Y"]) == [("X", 0, 1), ("Y", 1, 3)]  # type change: new entity
    assert bio_spans(["B-creative-work", "I-creative-work"]) == [("creative-work", 0, 2)]
    assert bio_spans(["O", "O"]) == [] and bio_spans([]) == []
    for bad in ("PER", "E-PER", "B-", "o"):
        with pytest.raises(ValueError, match="tag 1"):
            bio_spans(["O", bad])


def test_entity_f1_by_hand():
    gold = [["B-PER", "I-PER", "O", "B-LOC"], ["B-ORG", "O"]]
    exact = entity_f1(gold, gold)
    assert exact == {"precision": 1.0, "recall": 1.0, "f1": 1.0}
    partial = [["B-PER", "O", "O", "B-LOC"], ["B-ORG", "O"]]  # PER cut short: wrong, not half right
    assert entity_f1(partial, gold) == {"precision": 2 / 3, "recall": 2 / 3, "f1": pytest.approx(2 / 3)}
    wrong_type = [["B-ORG", "I-ORG", "O", "B-LOC"], ["O", "O"]]  # 1 correct of 2 predicted, of 3 gold
    assert entity_f1(wrong_type, gold) == {"precision": 0.5, "recall": 1 / 3, "f1": pytest.approx(0.4)}
    i_start = [["I-PER", "I-PER", "O", "I-LOC"], ["I-ORG", "O"]]  # conlleval reads each I- after O as a start
    assert entity_f1(i_start, gold)["f1"] == 1.0
    split = [["B-PER", "B-PER", "O", "B-LOC"], ["B-ORG", "O"]]  # two adjacent PERs for one: 2 of 4, 2 of 3
    assert entity_f1(split, gold) == {"precision": 0.5, "recall": 2 / 3, "f1": pytest.approx(4 / 7)}


def test_entity_f1_no_entities_and_bad_input():
    all_o = [["O", "O"], ["O"]]
    assert entity_f1(all_o, all_o) == {"precision": 0.0, "recall": 0.0, "f1": 0.0}  # as conlleval
    assert entity_f1(all_o, [["B-X", "O"], ["O"]]) == {"precision": 0.0, "recall": 0.0, "f1": 0.0}
    assert entity_f1([[], ["B-X"]], [[], ["B-X"]])["f1"] == 1.0  # an empty sentence is fine
    with pytest.raises(ValueError, match="empty"):
        entity_f1([], [])
    with pytest.raises(ValueError, match="sequence 0"):
        entity_f1([["O"]], [["O", "O"]])
    with pytest.raises(ValueError, match="2 predicted sequences for 1"):
        entity_f1([["O"], ["O"]], [["O"]])


def test_entities_do_not_cross_sentences():
    # one sentence ending in B-X and the next starting with I-X: two entities, not one
    pred = [["O", "B-X"], ["I-X", "O"]]
    assert entity_f1(pred, pred) == {"precision": 1.0, "recall": 1.0, "f1": 1.0}
    assert entity_f1_by_type(pred, pred)["X"]["support"] == 2


def test_entity_f1_by_type():
    gold = [["B-PER", "I-PER", "O", "B-LOC", "B-LOC"]]
    pred = [["B-PER", "I-PER", "O", "B-LOC", "B-ORG"]]
    by_type = entity_f1_by_type(pred, gold)
    assert list(by_type) == ["LOC", "ORG", "PER"]
    assert by_type["PER"] == {"precision": 1.0, "recall": 1.0, "f1": 1.0, "support": 1}
    assert by_type["LOC"] == {"precision": 1.0, "recall": 0.5, "f1": pytest.approx(2 / 3), "support": 2}
    assert by_type["ORG"] == {"precision": 0.0, "recall": 0.0, "f1": 0.0, "support": 0}


def _conlleval_counts(pred_tags, gold_tags):
    """(correct, predicted, gold) entity counts: a port of conlleval.pl's token-by-token state machine (BIO part)."""

    def split(tag):
        return tuple(tag.split("-", 1)) if tag != "O" else ("O", "")

    def start(prev, tag, prev_type, type_):
        return tag == "B" or (prev == "O" and tag == "I") or (tag != "O" and prev_type != type_)

    def end(prev, tag, prev_type, type_):
        return (prev in ("B", "I") and tag in ("B", "O")) or (prev != "O" and prev_type != type_)

    correct = found_pred = found_gold = 0
    for pred, gold in zip(pred_tags, gold_tags, strict=True):
        in_correct, last_p, last_g = False, ("O", ""), ("O", "")
        for p_tag, g_tag in zip([*pred, "O"], [*gold, "O"], strict=True):  # the sentence boundary reads as O
            p, g = split(p_tag), split(g_tag)
            p_end, g_end = end(last_p[0], p[0], last_p[1], p[1]), end(last_g[0], g[0], last_g[1], g[1])
            if in_correct:
                if p_end and g_end and last_p[1] == last_g[1]:
                    in_correct, correct = False, correct + 1
                elif p_end != g_end or p[1] != g[1]:
                    in_correct = False
            p_start, g_start = start(last_p[0], p[0], last_p[1], p[1]), start(last_g[0], g[0], last_g[1], g[1])
            in_correct = in_correct or (p_start and g_start and p[1] == g[1])
            found_pred, found_gold = found_pred + p_start, found_gold + g_start
            last_p, last_g = p, g
    return correct, found_pred, found_gold


def test_entity_f1_matches_conlleval_on_random_tags():
    rng = np.random.default_rng(0)
    tagset = ["O", "O", "O", "B-X", "I-X", "B-Y", "I-Y", "B-long-type", "I-long-type"]
    for _ in range(300):
        lengths = rng.integers(0, 12, rng.integers(1, 5))
        gold = [[tagset[i] for i in rng.integers(0, len(tagset), n)] for n in lengths]
        pred = [[tagset[rng.integers(len(tagset))] if rng.random() < 0.3 else tag for tag in tags] for tags in gold]
        correct, n_pred, n_gold = _conlleval_counts(pred, gold)
        assert sum(len(bio_spans(s)) for s in pred) == n_pred
        assert sum(len(bio_spans(s)) for s in gold) == n_gold
        scores = entity_f1(pred, gold)
        assert scores["precision"] == (correct / n_pred if n_pred else 0.0)
        assert scores["recall"] == (correct / n_gold if n_gold else 0.0)


# --- SQuAD 2.0 ---


@dataclass
class _Answer:
    text: str


@dataclass
class _Example:
    id: str
    answers: list


def test_normalize_answer_follows_the_official_order():
    assert normalize_answer("The  Cat!") == "cat"
    assert normalize_answer("  An apple, a day ") == "apple day"
    assert normalize_answer("theater") == "theater"  # articles only as whole words
    assert normalize_answer("the-end") == "theend"  # punctuation goes first, so "the" is no longer a word
    assert normalize_answer("A.") == ""
    assert normalize_answer("Über  café") == "über café"


def test_squad_exact_and_f1_by_hand():
    assert squad_exact("The cat.", ["cat"]) == 1.0
    assert squad_exact("cat sat", ["cat"]) == 0.0
    # tokens (cat, sat) vs (cat, sat, on): P = 2/2, R = 2/3, F1 = 2 * 1 * 2/3 / (1 + 2/3) = 0.8
    assert squad_f1("the cat sat", ["a cat sat on"]) == pytest.approx(0.8)
    # bags of tokens: (cat, cat) vs (cat): 1 in common, P = 1/2, R = 1, F1 = 2/3
    assert squad_f1("cat cat", ["cat"]) == pytest.approx(2 / 3)
    # common tokens count with multiplicity: (cat, cat) vs (cat, cat, dog): 2 in common, P = 1, R = 2/3, F1 = 0.8
    assert squad_f1("cat cat", ["cat cat dog"]) == pytest.approx(0.8)
    assert squad_f1("dog", ["cat"]) == 0.0


def test_squad_max_over_gold_answers():
    golds = ["Denver Broncos", "the Broncos", "Broncos team"]
    assert squad_exact("Broncos", golds) == 1.0  # matches "the Broncos"
    assert squad_f1("Denver", golds) == pytest.approx(2 / 3)  # best: "Denver Broncos", P = 1, R = 1/2
    assert squad_f1("Broncos team", golds) == 1.0


def test_squad_no_answer_rules():
    assert squad_exact("", []) == 1.0 and squad_f1("", []) == 1.0
    assert squad_exact("x", []) == 0.0 and squad_f1("x", []) == 0.0
    assert squad_exact("", ["x"]) == 0.0 and squad_f1("", ["x"]) == 0.0
    assert squad_f1("the", []) == 1.0  # normalises to nothing: an empty answer
    assert squad_f1("", ["the"]) == 1.0  # a gold answer that normalises to nothing counts as "no answer"
    assert squad_exact("", ["the", "cat"]) == 0.0  # ... unless there is a real one: then it is dropped
    assert squad_f1("", ["the", "cat"]) == 0.0
    with pytest.raises(TypeError, match="list"):
        squad_f1("cat", "cat")


def test_squad_scores_split_has_ans_and_no_ans():
    examples = [
        _Example("q1", [_Answer("the cat"), _Answer("cat")]),
        _Example("q2", [_Answer("a cat sat on")]),
        _Example("q3", []),
        _Example("q4", []),
    ]
    predictions = {"q1": "Cat", "q2": "the cat sat", "q3": "", "q4": "dog", "extra": "ignored"}
    # exact: 1, 0, 1, 0; f1: 1, 0.8, 1, 0
    assert squad_scores(predictions, examples) == {
        "exact": pytest.approx(50.0),
        "f1": pytest.approx(100 * 2.8 / 4),
        "total": 4,
        "HasAns_exact": pytest.approx(50.0),
        "HasAns_f1": pytest.approx(90.0),
        "HasAns_total": 2,
        "NoAns_exact": pytest.approx(50.0),
        "NoAns_f1": pytest.approx(50.0),
        "NoAns_total": 2,
    }
    only_answerable = squad_scores({"q1": "cat"}, examples[:1])
    assert only_answerable == {
        "exact": 100.0,
        "f1": 100.0,
        "total": 1,
        "HasAns_exact": 100.0,
        "HasAns_f1": 100.0,
        "HasAns_total": 1,
    }
    assert squad_scores({"q1": "cat"}, [_Example("q1", ["cat"])])["exact"] == 100.0  # answers may be strings
    # HasAns is "has gold answers", even one that normalises to nothing (the official qid_to_has_ans)
    assert squad_scores({"q1": ""}, [_Example("q1", [_Answer("The")])])["HasAns_exact"] == 100.0


def test_squad_scores_bad_input():
    with pytest.raises(ValueError, match="no prediction.*'q2'"):
        squad_scores({"q1": ""}, [_Example("q1", []), _Example("q2", [])])
    with pytest.raises(ValueError, match="empty"):
        squad_scores({}, [])


# --- registry ---


def test_metrics_cover_the_task_registry():
    from minilm.data.tasks import TASKS

    for task in TASKS.values():
        assert set(task.metrics) <= set(METRICS), task.name


def test_compute():
    y, p = [1, 0, 1, 1], [1, 0, 0, 1]
    assert compute(("f1", "accuracy"), p, y) == {"f1": pytest.approx(0.8), "accuracy": 0.75}
    assert compute(iter(["matthews"]), p, y) == {"matthews": matthews_corrcoef(p, y)}
    assert compute(["entity_f1"], [["B-X", "O"]], [["B-X", "O"]]) == {"entity_f1": 1.0}
    examples = [_Example("q1", [_Answer("cat")]), _Example("q2", [])]
    scores = compute(["squad_em", "squad_f1"], {"q1": "the cat", "q2": "x"}, examples)
    assert scores == {"squad_em": 50.0, "squad_f1": 50.0}
    with pytest.raises(KeyError, match="bleu"):
        compute(["accuracy", "bleu"], p, y)


# --- probing ---


def test_nearest_centroid_accuracy_against_sklearn_cosine():
    from sklearn.metrics.pairwise import cosine_similarity

    rng = np.random.default_rng(0)
    labels = rng.integers(0, 3, 60)
    vectors = rng.normal(size=(60, 8)) + 0.8 * np.eye(8)[labels]  # three overlapping clusters
    expected = []
    for i in range(60):
        keep = np.arange(60) != i
        centroids = np.stack([vectors[keep & (labels == c)].mean(0) for c in range(3)])
        expected.append(cosine_similarity(vectors[i : i + 1], centroids).argmax() == labels[i])
    ours = nearest_centroid_accuracy(torch.tensor(vectors, dtype=torch.float32), torch.tensor(labels))
    assert ours == pytest.approx(np.mean(expected)) and 1 / 3 < ours < 1


def test_nearest_centroid_accuracy_separates_senses_and_ties_at_chance():
    apart = np.array([[1.0, 0.0], [0.9, 0.1], [1.0, 0.2], [0.0, 1.0], [0.1, 0.9], [0.2, 1.0]])
    assert nearest_centroid_accuracy(apart, [0, 0, 0, 1, 1, 1]) == 1.0
    same = np.ones((6, 4))  # a static embedding: one vector whatever the sense
    assert nearest_centroid_accuracy(same, [0, 0, 1, 1, 2, 2]) == pytest.approx(1 / 3)
    with pytest.raises(ValueError, match="two vectors each"):
        nearest_centroid_accuracy(apart[:4], [0, 0, 0, 1])
    with pytest.raises(ValueError, match="vectors \\(N, C\\)"):
        nearest_centroid_accuracy(apart, [0, 1])
