"""Evaluation metrics, computed exactly as each benchmark defines them.

=====================  ==========================================================================
metric                 used by
=====================  ==========================================================================
``accuracy``           SST-2, RTE, SNLI, COPA, MRPC (second number), UD POS (UPOS, per token)
``f1``                 MRPC (F1 of the "equivalent" class, as GLUE reports it)
``macro_f1``           multi-class tasks where every class should count equally
``matthews_corrcoef``  CoLA
``pearson``            STS-B (with ``spearman``)
``spearman``           STS-B
``entity_f1``          WNUT-17 (and CoNLL-2003): entity-level F1, conlleval semantics
``squad_scores``       SQuAD 2.0: exact match and token F1, the official evaluation script's rules
``rouge_scores``       generated text (squad2_gen: ROUGE-L; summaries): ROUGE-1/2/L F-measure, as rouge-score
``perplexity``         language modelling
=====================  ==========================================================================

``nearest_centroid_accuracy`` probes representations (ELMo's word-sense disambiguation, leave-one-out).

Classification and regression metrics take ``(predictions, labels)``: lists, tuples, numpy arrays or torch tensors
(any device, no torch import here) of equal length. A list of sequences (one tag sequence per sentence) is flattened
after checking that each prediction has the length of its label sequence, so token-level scores need no padding;
2-D arrays are refused, since a padded batch would count its padding. Empty or mismatched inputs raise ValueError.
``METRICS`` maps the metric names of the task registry (``minilm.data.TASKS[...].metrics``) to functions of
``(predictions, labels)`` returning one float; ``compute`` evaluates several at once.
"""

from __future__ import annotations

import functools
import math
import re
import string
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence

import numpy as np

# ---- inputs ----------------------------------------------------------------------------------------------------


def _to_numpy(values) -> np.ndarray:
    """``values`` as a numpy array; torch tensors are detached and copied to the CPU (floats as float64)."""
    if hasattr(values, "detach"):  # a torch tensor: duck-typed so that torch is not imported here
        tensor = values.detach().cpu()
        return (tensor.double() if tensor.is_floating_point() else tensor).numpy()
    return np.asarray(values)


def _is_nested(values) -> bool:
    return isinstance(values, (list, tuple)) and len(values) > 0 and isinstance(values[0], (list, tuple))


def _check_sequences(predictions, labels) -> None:
    """ValueError unless there are as many predicted sequences as label sequences, each of the same length."""
    if len(predictions) != len(labels):
        raise ValueError(f"{len(predictions)} predicted sequences for {len(labels)} label sequences")
    for i, (pred, gold) in enumerate(zip(predictions, labels, strict=True)):
        if len(pred) != len(gold):
            raise ValueError(f"sequence {i}: {len(pred)} predictions for {len(gold)} labels")


def _flatten(predictions, labels) -> tuple[list, list]:
    """Concatenate per-sentence sequences after ``_check_sequences``."""
    _check_sequences(predictions, labels)
    return [x for seq in predictions for x in seq], [y for seq in labels for y in seq]


def _pair(predictions, labels, dtype=None) -> tuple[np.ndarray, np.ndarray]:
    """Two non-empty 1-D arrays of the same length (nested lists of sequences are flattened first)."""
    if _is_nested(predictions) or _is_nested(labels):
        predictions, labels = _flatten(predictions, labels)
    a, b = _to_numpy(predictions), _to_numpy(labels)
    if dtype is not None:
        a, b = a.astype(dtype), b.astype(dtype)
    if a.ndim != 1 or b.ndim != 1:
        raise ValueError(f"expected 1-D inputs, got shapes {a.shape} and {b.shape}")
    if len(a) != len(b):
        raise ValueError(f"{len(a)} predictions for {len(b)} labels")
    if len(a) == 0:
        raise ValueError("empty input: no predictions to score")
    return a, b


# ---- classification --------------------------------------------------------------------------------------------


def accuracy(predictions, labels) -> float:
    """Fraction of correct predictions, ``mean(prediction == label)``.

    SST-2, RTE, SNLI, COPA and MRPC report it; on lists of tag sequences it is token accuracy (UD POS: UPOS accuracy
    on gold tokenization).
    """
    a, b = _pair(predictions, labels)
    return float(np.mean(a == b))


def _f1_of_class(a: np.ndarray, b: np.ndarray, cls) -> float:
    """F1 = 2 TP / (2 TP + FP + FN), 0.0 when the class occurs in neither predictions nor labels."""
    tp = int(np.sum((a == cls) & (b == cls)))
    fp = int(np.sum((a == cls) & (b != cls)))
    fn = int(np.sum((a != cls) & (b == cls)))
    return 2 * tp / (2 * tp + fp + fn) if tp + fp + fn else 0.0


def f1(predictions, labels, positive=1) -> float:
    """Binary F1 of the ``positive`` class: the harmonic mean of precision TP / (TP + FP) and recall TP / (TP + FN),
    i.e. 2 TP / (2 TP + FP + FN); every other value counts as negative.

    GLUE reports it for MRPC (and QQP) with positive = 1, "equivalent". 0.0 when the positive class appears in neither
    predictions nor labels (scikit-learn's ``f1_score(..., zero_division=0)``).
    """
    a, b = _pair(predictions, labels)
    return _f1_of_class(a, b, positive)


def macro_f1(predictions, labels) -> float:
    """Unweighted mean of the per-class F1 (see ``f1``) over every class that occurs in predictions or labels, so rare
    classes weigh as much as frequent ones (scikit-learn's ``f1_score(..., average="macro")``)."""
    a, b = _pair(predictions, labels)
    return float(np.mean([_f1_of_class(a, b, cls) for cls in np.union1d(a, b)]))


def matthews_corrcoef(predictions, labels) -> float:
    """Matthews correlation coefficient, the CoLA metric (GLUE), in [-1, 1].

    Binary: MCC = (TP TN - FP FN) / sqrt((TP + FP)(TP + FN)(TN + FP)(TN + FN)). With more classes, scikit-learn's
    generalisation from the confusion matrix C (s samples, c correct, t_k true and p_k predicted counts of class k):
    MCC = (c s - sum_k t_k p_k) / sqrt((s^2 - sum_k p_k^2)(s^2 - sum_k t_k^2)). 0.0 when undefined (labels or
    predictions all one class), as scikit-learn returns.
    """
    a, b = _pair(predictions, labels)
    classes, codes = np.unique(np.concatenate([b, a]), return_inverse=True)
    true, pred = codes[: len(b)], codes[len(b) :]
    t = np.bincount(true, minlength=len(classes)).astype(np.float64)
    p = np.bincount(pred, minlength=len(classes)).astype(np.float64)
    s, c = float(len(a)), float(np.sum(true == pred))
    cov_pp, cov_tt = s * s - p @ p, s * s - t @ t
    if cov_pp * cov_tt == 0:
        return 0.0
    return float((c * s - t @ p) / math.sqrt(cov_pp * cov_tt))


# ---- correlation (STS-B) ---------------------------------------------------------------------------------------


def _pearson_of_arrays(x: np.ndarray, y: np.ndarray) -> float:
    if not (np.all(np.isfinite(x)) and np.all(np.isfinite(y))) or np.all(x == x[0]) or np.all(y == y[0]):
        return math.nan
    xm, ym = x - x.mean(), y - y.mean()
    r = (xm / np.linalg.norm(xm)) @ (ym / np.linalg.norm(ym))
    return float(np.clip(r, -1.0, 1.0))


def pearson(x, y) -> float:
    """Pearson correlation r = sum (x - mean x)(y - mean y) / sqrt(sum (x - mean x)^2 sum (y - mean y)^2).

    STS-B (GLUE) reports it between predicted and gold similarity scores. NaN when either input is constant or not
    finite (undefined), as ``scipy.stats.pearsonr`` returns.
    """
    return _pearson_of_arrays(*_pair(x, y, dtype=np.float64))


def _average_ranks(values: np.ndarray) -> np.ndarray:
    """Ranks 1..n; tied values all get the mean of the ranks they span (``scipy.stats.rankdata(method="average")``)."""
    order = np.argsort(values, kind="stable")
    ordered = values[order]
    starts_group = np.concatenate([[True], ordered[1:] != ordered[:-1]])
    first = np.flatnonzero(starts_group)  # 0-based position of each tie group's first element
    last = np.concatenate([first[1:], [len(values)]]) - 1
    ranks = np.empty(len(values))
    ranks[order] = ((first + last) / 2 + 1)[np.cumsum(starts_group) - 1]
    return ranks


def spearman(x, y) -> float:
    """Spearman rank correlation: the Pearson correlation of the ranks of x and of y, tied values sharing their
    average rank. STS-B (GLUE) reports it next to ``pearson``; NaN when undefined, as ``scipy.stats.spearmanr``."""
    a, b = _pair(x, y, dtype=np.float64)
    if not (np.all(np.isfinite(a)) and np.all(np.isfinite(b))):
        return math.nan
    return _pearson_of_arrays(_average_ranks(a), _average_ranks(b))


# ---- probing representations -----------------------------------------------------------------------------------


def nearest_centroid_accuracy(vectors, labels) -> float:
    """Leave-one-out nearest-centroid accuracy of labelled vectors (N, C), ELMo's word-sense probe (Peters et al.
    2018, §5.3): each vector gets the label whose centroid over the *other* vectors is the most cosine-similar.

    A tie between labels (identical centroids, as static embeddings give) earns 1/(number tied) when the true label is
    among them, so chance is the score of a representation that cannot tell the labels apart.
    """
    x, y = _to_numpy(vectors).astype(np.float64), _to_numpy(labels)
    if x.ndim != 2 or y.ndim != 1 or len(x) != len(y):
        raise ValueError(f"need vectors (N, C) and labels (N,), got shapes {x.shape} and {y.shape}")
    classes, counts = np.unique(y, return_counts=True)
    if len(classes) < 2 or counts.min() < 2:
        raise ValueError("need at least two labels with two vectors each (one is left out at a time)")
    unit = lambda a: a / np.maximum(np.linalg.norm(a, axis=-1, keepdims=True), 1e-12)  # noqa: E731
    correct = 0.0
    for i in range(len(y)):
        others = np.arange(len(y)) != i
        centroids = np.stack([x[others & (y == c)].mean(0) for c in classes])  # (n_labels, C)
        similarity = unit(centroids) @ unit(x[i])  # (n_labels,)
        tied = np.isclose(similarity, similarity.max(), rtol=0, atol=1e-6)
        correct += tied[classes == y[i]].sum() / tied.sum()
    return float(correct / len(y))


# ---- language modelling ----------------------------------------------------------------------------------------


def perplexity(mean_nll) -> float:
    """Perplexity exp(mean_nll), where ``mean_nll`` = -(1/N) sum_i log p(token_i | context) over N tokens.

    ``mean_nll`` must be in nats (natural log), which is what ``torch.nn.functional.cross_entropy`` returns. A loss in
    bits (log base 2, "bits per token") gives the same perplexity as 2 ** bits; nats = bits * ln 2. A model that is
    uniform over a vocabulary of V tokens has mean_nll = ln V and perplexity V, so perplexity reads as "the number of
    equally likely tokens the model hesitates between". Accepts a float, a numpy scalar or a 0-d tensor; returns inf
    instead of overflowing (mean_nll > ~709.78) and NaN for NaN. A negative mean NLL is impossible for probabilities
    of discrete tokens and raises ValueError.
    """
    nll = float(mean_nll)
    if nll < 0:
        raise ValueError(f"a mean negative log-likelihood cannot be negative, got {nll}")
    try:
        return math.exp(nll)
    except OverflowError:
        return math.inf


# ---- entity-level F1 (WNUT-17, CoNLL) --------------------------------------------------------------------------


def bio_spans(tags: Sequence[str]) -> list[tuple[str, int, int]]:
    """The entities of a BIO tag sequence as ``(type, start, end)``, ``end`` exclusive (``tokens[start:end]``).

    conlleval semantics (the CoNLL-2000/2003 script, which the WNUT-17 evaluation ports): ``B-X`` always starts an
    entity; ``I-X`` continues the entity before it if that one has type X, and otherwise (after ``O``, at the sentence
    start, or after another type) starts a new one instead of being dropped. We follow it rather than strict IOB2
    (seqeval's strict mode, which discards such ill-formed entities) because the published WNUT-17 and CoNLL scores
    come from conlleval, and a model's ill-formed output should still be credited for what it finds. ``B-X B-X`` is
    two adjacent entities. The type is everything after the first hyphen (``B-creative-work`` has type
    ``creative-work``); a tag other than ``O``, ``B-...`` or ``I-...`` raises ValueError.
    """
    spans: list[tuple[str, int, int]] = []
    current: list | None = None  # [type, start] of the open entity
    for i, tag in enumerate(tags):
        prefix, _, kind = tag.partition("-")
        if tag != "O" and (prefix not in ("B", "I") or not kind):
            raise ValueError(f"tag {i} is {tag!r}: expected 'O', 'B-<type>' or 'I-<type>'")
        continues = prefix == "I" and current is not None and current[0] == kind
        if current is not None and not continues:
            spans.append((current[0], current[1], i))
            current = None
        if tag != "O" and not continues:
            current = [kind, i]
    if current is not None:
        spans.append((current[0], current[1], len(tags)))
    return spans


def _entity_sets(pred_tags, gold_tags) -> tuple[set, set]:
    """Predicted and gold entities of every sentence, as sets of ``(sentence, type, start, end)``."""
    if len(pred_tags) == 0:
        raise ValueError("empty input: no sentences to score")
    _check_sequences(pred_tags, gold_tags)
    pred = {(s, *span) for s, tags in enumerate(pred_tags) for span in bio_spans(tags)}
    gold = {(s, *span) for s, tags in enumerate(gold_tags) for span in bio_spans(tags)}
    return pred, gold


def _precision_recall_f1(correct: int, n_pred: int, n_gold: int) -> dict[str, float]:
    """P = correct / predicted, R = correct / gold, F1 = 2PR / (P + R); 0.0 when undefined (conlleval)."""
    precision = correct / n_pred if n_pred else 0.0
    recall = correct / n_gold if n_gold else 0.0
    f = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return {"precision": precision, "recall": recall, "f1": f}


def entity_f1(pred_tags: Sequence[Sequence[str]], gold_tags: Sequence[Sequence[str]]) -> dict[str, float]:
    """Entity-level precision, recall and F1 (fractions in [0, 1]), micro-averaged over all entities of all sentences.

    An entity (from ``bio_spans``) is correct only if the gold has one of the same type with the same start and end:
    a partial overlap or a wrong type counts as one false positive and one false negative. Sentences are scored
    separately, so no entity crosses a sentence boundary. This is the WNUT-17 / CoNLL-2003 metric (conlleval's
    "FB1", which reports percents). With no entity predicted or in the gold, the undefined ratios are 0.0, as conlleval.
    """
    pred, gold = _entity_sets(pred_tags, gold_tags)
    return _precision_recall_f1(len(pred & gold), len(pred), len(gold))


def entity_f1_by_type(pred_tags, gold_tags) -> dict[str, dict[str, float]]:
    """``entity_f1`` for each entity type separately (conlleval's per-type lines), plus ``support`` (gold count)."""
    pred, gold = _entity_sets(pred_tags, gold_tags)
    by_type = {}
    for kind in sorted({e[1] for e in pred | gold}):
        p, g = {e for e in pred if e[1] == kind}, {e for e in gold if e[1] == kind}
        by_type[kind] = {**_precision_recall_f1(len(p & g), len(p), len(g)), "support": len(g)}
    return by_type


# ---- SQuAD 2.0 (the official evaluate-v2.0.py) -----------------------------------------------------------------

_ARTICLES = re.compile(r"\b(a|an|the)\b", re.UNICODE)
_PUNCTUATION = set(string.punctuation)


def normalize_answer(s: str) -> str:
    """The official SQuAD normalisation, in its order: lower-case, remove ASCII punctuation, replace the articles
    a / an / the (whole words) by a space, then collapse whitespace: ``"The  Cat!"`` -> ``"cat"``."""
    text = "".join(ch for ch in s.lower() if ch not in _PUNCTUATION)
    return " ".join(_ARTICLES.sub(" ", text).split())


def _gold_texts(gold_answers: Iterable[str]) -> list[str]:
    """Gold answers whose normalised text is non-empty, or ``[""]`` (no answer) when there are none (official rule)."""
    if isinstance(gold_answers, str):
        raise TypeError("gold_answers must be a list of answer strings, not one string")
    return [a for a in gold_answers if normalize_answer(a)] or [""]


def _token_f1(prediction: str, gold: str) -> float:
    """F1 over the bags of normalised tokens; 1.0 if both are empty (no answer), 0.0 if exactly one is."""
    pred_tokens, gold_tokens = normalize_answer(prediction).split(), normalize_answer(gold).split()
    if not pred_tokens or not gold_tokens:
        return float(pred_tokens == gold_tokens)
    same = sum((Counter(pred_tokens) & Counter(gold_tokens)).values())
    if same == 0:
        return 0.0
    precision, recall = same / len(pred_tokens), same / len(gold_tokens)
    return 2 * precision * recall / (precision + recall)


def squad_exact(prediction: str, gold_answers: Iterable[str]) -> float:
    """SQuAD exact match: 1.0 if the normalised prediction equals some normalised gold answer, else 0.0.

    An empty ``gold_answers`` (an unanswerable SQuAD 2.0 question) has the empty string as its only correct answer.
    """
    target = normalize_answer(prediction)
    return max(float(target == normalize_answer(gold)) for gold in _gold_texts(gold_answers))


def squad_f1(prediction: str, gold_answers: Iterable[str]) -> float:
    """SQuAD token F1, maximised over the gold answers: with the normalised tokens as bags, P = common / predicted
    tokens, R = common / gold tokens, F1 = 2PR / (P + R). Unanswerable (empty ``gold_answers``): 1.0 for an empty
    prediction, else 0.0; an empty prediction scores 0.0 against a real answer."""
    return max(_token_f1(prediction, gold) for gold in _gold_texts(gold_answers))


def _answer_text(answer) -> str:
    return answer if isinstance(answer, str) else answer.text


def _totals(exact: Mapping[str, float], f1_scores: Mapping[str, float], ids: list[str]) -> dict[str, float]:
    return {
        "exact": 100.0 * sum(exact[i] for i in ids) / len(ids),
        "f1": 100.0 * sum(f1_scores[i] for i in ids) / len(ids),
        "total": len(ids),
    }


def squad_scores(predictions: Mapping[str, str], examples: Iterable) -> dict[str, float]:
    """The official SQuAD 2.0 evaluation (no-answer threshold off), in percent, with its key names.

    ``examples`` have ``.id`` and ``.answers``, a list of objects with ``.text`` (or of strings); ``predictions`` maps
    each id to the predicted answer text, ``""`` for "no answer" (ids not in ``examples`` are ignored, a missing one
    raises ValueError). Returns ``exact`` and ``f1`` (means of ``squad_exact`` / ``squad_f1`` times 100) and
    ``total``, then the same three prefixed ``HasAns_`` (questions with answers) and ``NoAns_`` (unanswerable), each
    present only when that group is not empty, exactly as evaluate-v2.0.py prints them.
    """
    examples = list(examples)
    if not examples:
        raise ValueError("empty input: no examples to score")
    missing = [ex.id for ex in examples if ex.id not in predictions]
    if missing:
        raise ValueError(f"{len(missing)} examples have no prediction, e.g. id {missing[0]!r}")
    exact, f1_scores, has_answer = {}, {}, {}
    for ex in examples:
        golds = [_answer_text(a) for a in ex.answers]
        exact[ex.id] = squad_exact(predictions[ex.id], golds)
        f1_scores[ex.id] = squad_f1(predictions[ex.id], golds)
        has_answer[ex.id] = bool(golds)
    scores = _totals(exact, f1_scores, list(exact))
    for prefix, wanted in (("HasAns", True), ("NoAns", False)):
        ids = [i for i, has in has_answer.items() if has == wanted]
        if ids:
            scores.update({f"{prefix}_{key}": value for key, value in _totals(exact, f1_scores, ids).items()})
    return scores


# ---- ROUGE (generation: summaries, generative QA) --------------------------------------------------------------

ROUGE_TYPES = ("rouge1", "rouge2", "rougeL")
_NON_ALPHANUMERIC = re.compile(r"[^a-z0-9]+")
_ROUGE_TYPE = re.compile(r"rouge([1-9]|L)")


@functools.cache
def _porter_stemmer():
    """nltk's ``PorterStemmer``, imported on first use: nltk is no dependency of minilm."""
    try:
        from nltk.stem import porter
    except ImportError as error:
        raise ImportError("use_stemmer=True needs nltk (pip install nltk), as rouge-score does") from error
    return porter.PorterStemmer()


def rouge_tokenize(text: str, use_stemmer: bool = False) -> list[str]:
    """The tokens ROUGE compares, by rouge-score's default tokenizer (Lin's ROUGE-1.5.5 rules): lower-case, replace
    every character other than ``[a-z0-9]`` by a space, split on whitespace: ``"The cat's hat!"`` ->
    ``["the", "cat", "s", "hat"]``. Accented and non-Latin letters are therefore dropped.

    ``use_stemmer=True`` (off by default, as in rouge-score) Porter-stems the tokens longer than 3 characters, with
    nltk's ``PorterStemmer`` exactly as rouge-score does (ROUGE-1.5.5's ``-m``); it needs nltk installed.
    """
    if not isinstance(text, str):
        raise TypeError(f"ROUGE scores text: expected a string, got {type(text).__name__}")
    tokens = _NON_ALPHANUMERIC.sub(" ", text.lower()).split()
    if use_stemmer:
        tokens = [_porter_stemmer().stem(t) if len(t) > 3 else t for t in tokens]
    return tokens


def _rouge_result(overlap: int, n_pred: int, n_ref: int) -> dict[str, float]:
    precision, recall, fmeasure = _precision_recall_f1(overlap, n_pred, n_ref).values()
    return {"precision": precision, "recall": recall, "fmeasure": fmeasure}


def _ngrams(tokens: list[str], n: int) -> Counter:
    """How often each n-gram (a tuple of n consecutive tokens) occurs in ``tokens``."""
    return Counter(tuple(tokens[i : i + n]) for i in range(len(tokens) - n + 1))


def _ngram_overlap(pred_tokens: list[str], ref_tokens: list[str], n: int) -> dict[str, float]:
    pred, ref = _ngrams(pred_tokens, n), _ngrams(ref_tokens, n)
    return _rouge_result(sum((pred & ref).values()), pred.total(), ref.total())


def _lcs_length(a: list[str], b: list[str]) -> int:
    """Length of the longest common subsequence, by the dynamic programme one row of ``a`` at a time: with the row
    above ``prev``, ``row[j] = prev[j-1] + 1`` where ``a[i] == b[j-1]``, else ``max(prev[j], row[j-1])``, which is a
    running maximum of ``prev[j-1] + 1`` (match) or ``prev[j]`` (no match)."""
    if not a or not b:
        return 0
    vocabulary = {token: k for k, token in enumerate(set(a) | set(b))}
    b_ids = np.array([vocabulary[t] for t in b])
    row = np.zeros(len(b) + 1, dtype=np.int64)
    for token in a:
        candidate = np.where(b_ids == vocabulary[token], row[:-1] + 1, row[1:])
        row[1:] = np.maximum.accumulate(candidate)
    return int(row[-1])


def _lcs_overlap(pred_tokens: list[str], ref_tokens: list[str]) -> dict[str, float]:
    return _rouge_result(_lcs_length(pred_tokens, ref_tokens), len(pred_tokens), len(ref_tokens))


def rouge_n(prediction: str, reference: str, n: int = 1, use_stemmer: bool = False) -> dict[str, float]:
    """ROUGE-N (Lin 2004) of one prediction against one reference: ``precision``, ``recall`` and ``fmeasure``.

    With the texts as bags of n-grams of ``rouge_tokenize`` tokens, overlap = sum over n-grams g of
    min(count_pred(g), count_ref(g)) (a repeated n-gram is credited at most as often as the reference has it);
    P = overlap / predicted n-grams, R = overlap / reference n-grams, F = 2PR / (P + R). Lin's ROUGE-N is the recall;
    rouge-score's ``rouge1``, ``rouge2`` report all three, and so do we, equal to them. A ratio whose denominator is 0
    (a text shorter than n tokens) is 0.0, and so is F when P + R = 0: two empty texts score 0.0, not 1.0.
    """
    if not isinstance(n, (int, np.integer)) or n < 1:
        raise ValueError(f"ROUGE-N needs a positive integer n, got {n!r}")
    return _ngram_overlap(rouge_tokenize(prediction, use_stemmer), rouge_tokenize(reference, use_stemmer), int(n))


def rouge_l(prediction: str, reference: str, use_stemmer: bool = False) -> dict[str, float]:
    """ROUGE-L (Lin 2004) of one prediction against one reference: ``precision``, ``recall`` and ``fmeasure``.

    With LCS the length of the longest common subsequence of the two ``rouge_tokenize`` token lists (in order, not
    necessarily contiguous): P = LCS / predicted tokens, R = LCS / reference tokens, F = 2PR / (P + R), all 0.0 when
    either text has no tokens. rouge-score's ``rougeL`` (the F with beta = 1, where Lin weights recall by beta); the
    whole text is one sequence, unlike ``rougeLsum``'s sentence-level union LCS, which this module does not compute.
    """
    return _lcs_overlap(rouge_tokenize(prediction, use_stemmer), rouge_tokenize(reference, use_stemmer))


def _as_references(reference, i: int) -> list[str]:
    """One example's references: a string, or a non-empty list / tuple of strings."""
    references = [reference] if isinstance(reference, str) else reference
    if not isinstance(references, (list, tuple)):
        raise TypeError(f"example {i}: expected a reference string or a list of them, got {type(reference).__name__}")
    if not references:
        raise ValueError(f"example {i}: an empty list of references")
    for text in references:
        if not isinstance(text, str):
            raise TypeError(f"example {i}: expected reference strings, got {type(text).__name__}")
    return references


def rouge_scores(
    predictions: Sequence[str],
    references: Sequence,
    rouge_types: Sequence[str] = ROUGE_TYPES,
    use_stemmer: bool = False,
) -> dict[str, float]:
    """Corpus ROUGE: for each of ``rouge_types`` (``"rouge1"`` ... ``"rouge9"``, ``"rougeL"``), the mean over the
    examples of the per-example F-measure (``rouge_n`` / ``rouge_l``), a fraction in [0, 1].

    Papers' tables report it times 100; Hugging Face ``evaluate`` reports it too, up to resampling noise (by default
    the median of rouge-score's bootstrap means, ``mid``). ``references[i]`` is a string or a list of strings; with
    several, an example scores its best F-measure over them, for each type separately (rouge-score's ``score_multi``).
    Mismatched lengths and empty input raise ValueError, a non-string text TypeError.
    """
    if isinstance(predictions, str) or isinstance(references, str):
        raise TypeError("predictions and references must be lists of strings (one per example), not one string")
    predictions, references = list(predictions), list(references)
    if len(predictions) != len(references):
        raise ValueError(f"{len(predictions)} predictions for {len(references)} references")
    if not predictions:
        raise ValueError("empty input: no predictions to score")
    rouge_types = [rouge_types] if isinstance(rouge_types, str) else list(rouge_types)
    unknown = [t for t in rouge_types if not _ROUGE_TYPE.fullmatch(str(t))]
    if not rouge_types:
        raise ValueError("no ROUGE types to compute")
    if unknown:
        raise ValueError(f"unknown ROUGE types {unknown}: expected 'rouge1' ... 'rouge9' or 'rougeL'")
    totals = dict.fromkeys(rouge_types, 0.0)
    for i, (prediction, reference) in enumerate(zip(predictions, references, strict=True)):
        if not isinstance(prediction, str):
            raise TypeError(f"example {i}: expected a predicted string, got {type(prediction).__name__}")
        pred_tokens = rouge_tokenize(prediction, use_stemmer)
        ref_tokens = [rouge_tokenize(r, use_stemmer) for r in _as_references(reference, i)]
        for rouge_type in rouge_types:
            if rouge_type == "rougeL":
                best = max(_lcs_overlap(pred_tokens, ref)["fmeasure"] for ref in ref_tokens)
            else:
                best = max(_ngram_overlap(pred_tokens, ref, int(rouge_type[5:]))["fmeasure"] for ref in ref_tokens)
            totals[rouge_type] += best
    return {rouge_type: total / len(predictions) for rouge_type, total in totals.items()}


# ---- the registry ----------------------------------------------------------------------------------------------

METRICS: dict[str, Callable[..., float]] = {
    "accuracy": accuracy,
    "f1": f1,
    "macro_f1": macro_f1,
    "matthews": matthews_corrcoef,
    "pearson": pearson,
    "spearman": spearman,
    "entity_f1": lambda pred_tags, gold_tags: entity_f1(pred_tags, gold_tags)["f1"],
    "squad_em": lambda predictions, examples: squad_scores(predictions, examples)["exact"],
    "squad_f1": lambda predictions, examples: squad_scores(predictions, examples)["f1"],
    **{name: (lambda p, r, name=name: rouge_scores(p, r, (name,))[name]) for name in ROUGE_TYPES},
}
"""Metric name (as in ``minilm.data.TASKS[...].metrics``) -> function of ``(predictions, labels)`` giving one number.
``entity_f1`` takes tag sequences; ``squad_em`` / ``squad_f1`` take ``squad_scores``' arguments and give percents;
``rouge1`` / ``rouge2`` / ``rougeL`` take predicted and reference texts (``rouge_scores``) and give fractions."""


def compute(names: Iterable[str], predictions, labels) -> dict[str, float]:
    """``{name: METRICS[name](predictions, labels)}`` for each name, e.g. ``compute(("f1", "accuracy"), p, y)``."""
    names = list(names)
    unknown = [name for name in names if name not in METRICS]
    if unknown:
        raise KeyError(f"unknown metrics {unknown}; known metrics: {', '.join(METRICS)}")
    return {name: METRICS[name](predictions, labels) for name in names}
