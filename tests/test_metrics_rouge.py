"""ROUGE against Google's reference implementation (rouge-score) on random and real texts, and hand-worked cases."""

import random

import numpy as np
import pytest

from minilm.data.tasks import GENERATIVE_QA_METRICS
from minilm.metrics import METRICS, ROUGE_TYPES, compute, rouge_l, rouge_n, rouge_scores, rouge_tokenize

# Upper case, apostrophes, hyphens, digits, accents, repeated words and punctuation-only "words".
VOCABULARY = (
    "the The THE a cat Cat cats sat sits on mat dog dogs ran running runs quickly over lazy fox police killed "
    "kill gunman cat's x-ray 42 2024 naïve café Über ! , . -- ... ?! (it) e.g. U.S."
).split()
SEPARATORS = (" ", " ", " ", "  ", "\n", "\t", ", ", "")

REAL_PAIRS = [  # (prediction, reference)
    ("police killed the gunman", "police kill the gunman"),
    ("the gunman kill police", "police killed the gunman"),
    ("The quick brown dog jumps on the log.", "The quick brown fox jumps over the lazy dog"),
    (
        "Apple unveiled a new iPhone on Tuesday, with a faster chip and a better camera.",
        "Apple's new iPhone, shown on Tuesday, has a faster A17 chip and an improved camera system.",
    ),
    (
        "The storm left 20,000 homes without power across the region.",
        "About 20,000 households lost electricity after the storm swept through the region on Monday.",
    ),
    ("Denver Broncos", "The Denver Broncos won Super Bowl 50."),
    ("Paris", "Paris"),
    ("no answer", "in 1066"),
    ("", "the Normans"),
    ("the the the the", "the cat"),
]


def random_text(rng: random.Random, max_words: int = 15) -> str:
    words = [rng.choice(VOCABULARY) for _ in range(rng.randint(0, max_words))]
    return "".join(w + rng.choice(SEPARATORS) for w in words)


def random_pairs(seed: int, n: int) -> list[tuple[str, str]]:
    """Random (prediction, reference) pairs: independent texts, shuffled or trimmed copies (large overlaps),
    identical texts, and empty or punctuation-only ones."""
    rng = random.Random(seed)
    pairs = []
    for _ in range(n):
        reference = random_text(rng)
        kind = rng.randrange(6)
        if kind == 0:
            prediction = random_text(rng)
        elif kind == 1:
            words = reference.split()
            rng.shuffle(words)
            prediction = " ".join(words)
        elif kind == 2:
            words = reference.split()
            prediction = " ".join(w for w in words if rng.random() < 0.7) + " " + random_text(rng, 4)
        elif kind == 3:
            prediction = reference
        elif kind == 4:
            prediction = rng.choice(("", " ", "!!", "... --", reference.upper()))
        else:
            prediction, reference = reference, rng.choice(("", "?", random_text(rng, 3)))
        pairs.append((prediction, reference))
    return pairs


@pytest.fixture(scope="module")
def rouge_score():
    return pytest.importorskip("rouge_score.rouge_scorer")


@pytest.fixture(scope="module")
def scorer(rouge_score):
    return rouge_score.RougeScorer(list(ROUGE_TYPES), use_stemmer=False)


# --- against rouge-score ---


def test_tokenizer_matches_rouge_score(rouge_score):
    from rouge_score import tokenize

    texts = [t for pair in random_pairs(0, 200) for t in pair]
    texts += ["İstanbul", "\u212a K k", "Straße", "ﬁne", "１２３ abc", "tab\tnew\nline", "a_b", "ÀÉÎ"]
    for text in texts:
        assert rouge_tokenize(text) == tokenize.tokenize(text, None), text


def test_per_example_scores_match_rouge_score(scorer):
    pairs = random_pairs(1, 400) + REAL_PAIRS
    for prediction, reference in pairs:
        expected = scorer.score(reference, prediction)  # rouge-score takes (target, prediction)
        ours = {
            "rouge1": rouge_n(prediction, reference, 1),
            "rouge2": rouge_n(prediction, reference, 2),
            "rougeL": rouge_l(prediction, reference),
        }
        for rouge_type, score in ours.items():
            want = expected[rouge_type]
            got = (score["precision"], score["recall"], score["fmeasure"])
            assert got == pytest.approx(tuple(want), abs=1e-12), (rouge_type, prediction, reference)


def test_corpus_scores_are_the_mean_of_rouge_score_fmeasures(scorer):
    pairs = random_pairs(2, 300) + REAL_PAIRS
    predictions, references = [p for p, _ in pairs], [r for _, r in pairs]
    expected = {t: np.mean([scorer.score(r, p)[t].fmeasure for p, r in pairs]) for t in ROUGE_TYPES}
    got = rouge_scores(predictions, references)
    assert list(got) == list(ROUGE_TYPES)
    assert got == pytest.approx(expected, abs=1e-12)
    assert all(0.0 < v < 1.0 for v in got.values())


def test_several_references_take_the_best_like_score_multi(scorer):
    rng = random.Random(3)
    pairs = random_pairs(4, 100)
    predictions = [p for p, _ in pairs]
    references = [[r] + [random_text(rng) for _ in range(rng.randint(0, 3))] for _, r in pairs]
    expected = {
        t: np.mean([scorer.score_multi(refs, p)[t].fmeasure for p, refs in zip(predictions, references, strict=True)])
        for t in ROUGE_TYPES
    }
    assert rouge_scores(predictions, references) == pytest.approx(expected, abs=1e-12)
    references[0] = tuple(references[0])  # a tuple of references too
    assert rouge_scores(predictions, references) == pytest.approx(expected, abs=1e-12)


def test_stemmer_option_matches_rouge_score(rouge_score):
    pytest.importorskip("nltk")
    from rouge_score import tokenizers

    stemming = rouge_score.RougeScorer(list(ROUGE_TYPES), use_stemmer=True)
    pairs = random_pairs(5, 100) + REAL_PAIRS
    for text in (t for pair in pairs for t in pair):
        assert rouge_tokenize(text, use_stemmer=True) == tokenizers.DefaultTokenizer(True).tokenize(text)
    expected = {t: np.mean([stemming.score(r, p)[t].fmeasure for p, r in pairs]) for t in ROUGE_TYPES}
    got = rouge_scores([p for p, _ in pairs], [r for _, r in pairs], use_stemmer=True)
    assert got == pytest.approx(expected, abs=1e-12)
    assert rouge_n("police killed", "police kill", 1, use_stemmer=True)["fmeasure"] == 1.0


# --- hand-worked cases ---


def test_tokenizer_by_hand():
    assert rouge_tokenize("The cat's hat!") == ["the", "cat", "s", "hat"]
    assert rouge_tokenize("U.S. x-ray, 42") == ["u", "s", "x", "ray", "42"]
    assert rouge_tokenize("naïve café") == ["na", "ve", "caf"]  # non-ASCII letters split words, as in rouge-score
    assert rouge_tokenize("  ... !? ") == []


def test_prediction_contained_in_the_reference():
    prediction, reference = "the cat sat", "the cat sat on the mat"
    assert rouge_n(prediction, reference, 1) == pytest.approx({"precision": 1.0, "recall": 0.5, "fmeasure": 2 / 3})
    # bigrams: 2 predicted, 5 in the reference, both found: P = 1, R = 2/5, F = 2 * 0.4 / 1.4
    assert rouge_n(prediction, reference, 2) == pytest.approx({"precision": 1.0, "recall": 0.4, "fmeasure": 4 / 7})
    assert rouge_l(prediction, reference) == pytest.approx({"precision": 1.0, "recall": 0.5, "fmeasure": 2 / 3})
    assert rouge_n("The CAT, sat!", reference, 1) == rouge_n(prediction, reference, 1)  # case and punctuation


def test_repeated_ngrams_are_clipped():
    # "the" 4 times against once: overlap min(4, 1) = 1, P = 1/4, R = 1/2, F = 1/3
    assert rouge_n("the the the the", "the cat", 1) == pytest.approx(
        {"precision": 0.25, "recall": 0.5, "fmeasure": 1 / 3}
    )
    assert rouge_n("the the the", "the the", 2)["precision"] == 0.5  # bigram (the, the): min(2, 1) of 2


def test_rouge_l_rewards_word_order_where_rouge_2_cannot():
    # Lin (2004), section 3.1: both candidates share one bigram with the reference ("the gunman"), but the LCS of S2 is
    # "police the gunman" (3 words) and that of S3 only "the gunman" (2 words).
    s1, s2, s3 = "police killed the gunman", "police kill the gunman", "the gunman kill police"
    assert rouge_n(s2, s1, 2)["fmeasure"] == rouge_n(s3, s1, 2)["fmeasure"] == pytest.approx(1 / 3)
    assert rouge_l(s2, s1)["fmeasure"] == pytest.approx(3 / 4)
    assert rouge_l(s3, s1)["fmeasure"] == pytest.approx(2 / 4)
    assert rouge_l("a x b y c", "a b c")["recall"] == 1.0  # a subsequence need not be contiguous


def test_empty_texts_score_zero():
    zero = {"precision": 0.0, "recall": 0.0, "fmeasure": 0.0}
    for prediction, reference in (("", "the cat"), ("the cat", ""), ("", ""), ("!!", "?"), ("cat", "cat")):
        assert rouge_n(prediction, reference, 2) == zero  # "cat": no bigram at all
    for prediction, reference in (("", "the cat"), ("the cat", ""), ("", "")):
        assert rouge_l(prediction, reference) == zero
        assert rouge_n(prediction, reference, 1) == zero
    assert rouge_scores(["", "the cat"], ["", "the cat"]) == {"rouge1": 0.5, "rouge2": 0.5, "rougeL": 0.5}


def test_compute_dispatches_the_rouge_names():
    predictions, references = ["the cat sat", "a dog ran"], ["the cat sat on the mat", "the dog ran"]
    assert set(ROUGE_TYPES) <= set(METRICS)
    assert set(GENERATIVE_QA_METRICS) <= set(METRICS)  # squad2_gen's metrics, scored with compute
    expected = rouge_scores(predictions, references)
    assert compute(ROUGE_TYPES, predictions, references) == pytest.approx(expected, abs=1e-15)
    assert compute(["rougeL"], predictions, references) == {"rougeL": pytest.approx(expected["rougeL"])}
    # trigrams: F = 2 * 1 * 0.25 / 1.25 = 0.4 for the first example, none shared by the second
    assert rouge_scores(predictions, references, ("rouge3",)) == {"rouge3": pytest.approx(0.4 / 2)}


# --- bad input ---


def test_bad_input_raises_clear_errors():
    with pytest.raises(ValueError, match="1 predictions for 2 references"):
        rouge_scores(["the cat"], ["the cat", "a dog"])
    with pytest.raises(ValueError, match="1 predictions for 2 references"):
        compute(["rougeL"], ["the cat"], ["the cat", "a dog"])
    with pytest.raises(ValueError, match="empty input"):
        rouge_scores([], [])
    with pytest.raises(TypeError, match="not one string"):
        rouge_scores("the cat", "the cat")
    with pytest.raises(TypeError, match="example 1: expected a predicted string, got NoneType"):
        rouge_scores(["the cat", None], ["the cat", "a dog"])
    with pytest.raises(TypeError, match="example 0: expected a reference string or a list of them, got int"):
        rouge_scores(["the cat"], [3])
    with pytest.raises(TypeError, match="example 0: expected reference strings, got int"):
        rouge_scores(["the cat"], [["the cat", 3]])
    with pytest.raises(ValueError, match="example 0: an empty list of references"):
        rouge_scores(["the cat"], [[]])
    with pytest.raises(ValueError, match="unknown ROUGE types \\['rougeLsum'\\]"):
        rouge_scores(["the cat"], ["the cat"], ("rougeL", "rougeLsum"))
    with pytest.raises(ValueError, match="no ROUGE types"):
        rouge_scores(["the cat"], ["the cat"], ())
    with pytest.raises(ValueError, match="positive integer n"):
        rouge_n("the cat", "the cat", 0)
    with pytest.raises(TypeError, match="expected a string, got list"):
        rouge_l(["the", "cat"], "the cat")
    with pytest.raises(TypeError, match="expected a string, got bytes"):
        rouge_tokenize(b"the cat")
