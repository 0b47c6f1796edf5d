"""Fine-tuning tasks as lists of typed examples, each with "train", "validation" and "test" splits, all labelled.

``load_task(name, split)`` returns the examples; ``TASKS[name]`` says what they are (example type, label
names, metrics, source dataset). Each ``load_<task>`` docstring says which file or carve-out makes each
split. Where the mirror lacks a split it is carved deterministically (SNLI, UD-EWT, SQuAD, COPA).
Results are cached per process: each call returns a fresh list, but the examples in it are shared, so
treat them as read-only.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import lru_cache, wraps
from typing import TypeVar

from minilm.data._files import malformed, read_lines, read_text, tsv_rows
from minilm.data.errors import DataError
from minilm.data.examples import (
    Answer,
    ChoiceExample,
    PairExample,
    QAExample,
    SentenceExample,
    Seq2SeqExample,
    TaggingExample,
)

SPLITS = ("train", "validation", "test")
T = TypeVar("T")

SST2_LABELS = ("negative", "positive")
COLA_LABELS = ("unacceptable", "acceptable")
MRPC_LABELS = ("not_equivalent", "equivalent")
RTE_LABELS = ("entailment", "not_entailment")  # GLUE order
SNLI_LABELS = ("entailment", "neutral", "contradiction")
WNUT17_TYPES = ("corporation", "creative-work", "group", "location", "person", "product")
WNUT17_TAGS = ("O",) + tuple(f"{bi}-{t}" for t in WNUT17_TYPES for bi in "BI")
# The 17 Universal POS tags.
UPOS_TAGS = tuple("ADJ ADP ADV AUX CCONJ DET INTJ NOUN NUM PART PRON PROPN PUNCT SCONJ SYM VERB X".split())

SNLI_VALIDATION_SIZE = 1000  # the last examples of SNLI dev
UD_VALIDATION_EVERY = 10  # every 10th UD-EWT dev document goes to validation
SQUAD_ARTICLES = {"train": (0, 1, 2), "validation": (3,), "test": (4,)}  # article positions in the file
COPA_MIRROR_OFFSET = 1000  # Balanced-COPA item k + 1000 mirrors COPA item k
COPA_RANGES = {"train": (1, 350), "validation": (351, 400), "test": (401, 500)}  # original ids, inclusive
COPA_DROPPED = frozenset({1381})  # a copy of item 381 (same premise and alternatives) with the opposite answer


def _check_split(task: str, split: str) -> str:
    if split not in SPLITS:
        raise ValueError(f"task {task!r} has no split {split!r}; splits: {', '.join(SPLITS)}")
    return split


def _for_split(task: str, choices: dict[str, T], split: str) -> T:
    return choices[_check_split(task, split)]


def _label(value: str, names: tuple[str, ...], dataset: str, filename: str, line: int) -> int:
    """``value`` as an index into ``names``; accepts the name itself or its index as text."""
    if value in names:
        return names.index(value)
    if value in [str(i) for i in range(len(names))]:
        return int(value)
    raise malformed(dataset, filename, line, f"label {value!r} is not one of {names} or their indices")


def _cached(reader: Callable[[str], list]) -> Callable[[str], list]:
    """Parse each split once per process; hand out a fresh list each call."""
    parsed = lru_cache(maxsize=None)(lambda split: tuple(reader(split)))

    @wraps(reader)
    def load(split: str = "train") -> list:
        return list(parsed(split))

    load.cache_clear = parsed.cache_clear
    return load


# ---- single sentences --------------------------------------------------------------------------------------


@_cached
def load_sst2(split: str = "train") -> list[SentenceExample]:
    """SST-2 sentiment (lower-cased, tokenized phrases). Labels: 0 negative, 1 positive. Metric: accuracy.

    train = ``train.tsv`` (60,614) and validation = ``dev.tsv`` (6,735): a split of GLUE train;
    test = ``test.tsv`` (872): the labelled GLUE dev set. GLUE's training phrases are the nodes of parse trees, so
    most validation phrases also occur inside training phrases: score against published numbers on test (GLUE dev
    sentences are other reviews).
    """
    name = _for_split("sst2", {"train": "train.tsv", "validation": "dev.tsv", "test": "test.tsv"}, split)
    rows = tsv_rows("sst2", name, 2, header=True)
    return [SentenceExample(f[0].strip(), _label(f[1], SST2_LABELS, "sst2", name, n)) for n, f in rows]


@_cached
def load_cola(split: str = "train") -> list[SentenceExample]:
    """CoLA acceptability. Labels: 0 unacceptable, 1 acceptable. Metric: Matthews correlation.

    train = ``in_domain_train.tsv`` (8,551), validation = ``in_domain_dev.tsv`` (527),
    test = ``out_of_domain_dev.tsv`` (516: sentences from sources not seen in training).
    """
    files = {"train": "in_domain_train.tsv", "validation": "in_domain_dev.tsv", "test": "out_of_domain_dev.tsv"}
    name = _for_split("cola", files, split)
    rows = tsv_rows("cola", name, 4, header=False)
    return [SentenceExample(f[3].strip(), _label(f[1], COLA_LABELS, "cola", name, n)) for n, f in rows]


# ---- sentence pairs ----------------------------------------------------------------------------------------


@_cached
def load_stsb(split: str = "train") -> list[PairExample]:
    """STS Benchmark similarity; ``label`` is a float score in [0, 5]. Metrics: Pearson and Spearman.

    train = ``sts-train.csv`` (5,749), validation = ``sts-dev.csv`` (1,500), test = ``sts-test.csv`` (1,379).
    The files are tab-separated; some lines carry two extra source columns after the sentences, ignored.
    """
    files = {"train": "sts-train.csv", "validation": "sts-dev.csv", "test": "sts-test.csv"}
    name = _for_split("stsb", files, split)
    examples = []
    for n, f in tsv_rows("stsb", name, 7, header=False, extra_ok=True):
        try:
            score = float(f[4])
        except ValueError:
            score = -1.0
        if not 0.0 <= score <= 5.0:
            raise malformed("stsb", name, n, f"score {f[4]!r} is not a number in [0, 5]")
        examples.append(PairExample(f[5].strip(), f[6].strip(), score))
    return examples


@_cached
def load_mrpc(split: str = "train") -> list[PairExample]:
    """MSR paraphrase corpus. Labels: 0 not_equivalent, 1 equivalent. Metrics: F1 and accuracy.

    train = ``msr-para-train.tsv`` (3,576), validation = ``msr-para-val.tsv`` (500),
    test = ``msr-para-test.tsv`` (1,725).
    """
    files = {"train": "msr-para-train.tsv", "validation": "msr-para-val.tsv", "test": "msr-para-test.tsv"}
    name = _for_split("mrpc", files, split)
    rows = tsv_rows("mrpc", name, 5, header=True)
    return [PairExample(f[3].strip(), f[4].strip(), _label(f[0], MRPC_LABELS, "mrpc", name, n)) for n, f in rows]


@_cached
def load_rte(split: str = "train") -> list[PairExample]:
    """GLUE RTE entailment. Labels: 0 entailment, 1 not_entailment (GLUE order). Metric: accuracy.

    train = ``train.tsv`` (2,127) and validation = ``val.tsv`` (363, no header): together GLUE train;
    test = ``dev.tsv`` (277): the labelled GLUE dev set. The unlabelled ``test.tsv`` is not used.
    """
    files = {"train": "train.tsv", "validation": "val.tsv", "test": "dev.tsv"}
    name = _for_split("rte", files, split)
    rows = tsv_rows("rte", name, 4, header=split != "validation")
    return [PairExample(f[1].strip(), f[2].strip(), _label(f[3], RTE_LABELS, "rte", name, n)) for n, f in rows]


def _snli_part(part: str) -> list[PairExample]:
    """SNLI's line-aligned ``s1.<part>``, ``s2.<part>``, ``labels.<part>``; examples labelled "-" are dropped."""
    premises, hypotheses, labels = (read_lines("snli", f"{kind}.{part}") for kind in ("s1", "s2", "labels"))
    if not len(premises) == len(hypotheses) == len(labels):
        raise DataError(
            f"snli: s1.{part}, s2.{part} and labels.{part} should have as many lines, "
            f"but have {len(premises)}, {len(hypotheses)} and {len(labels)}"
        )
    examples = []
    for n, (a, b, label) in enumerate(zip(premises, hypotheses, labels, strict=True), start=1):
        if label.strip() != "-":
            examples.append(
                PairExample(a.strip(), b.strip(), _label(label.strip(), SNLI_LABELS, "snli", f"labels.{part}", n))
            )
    return examples


@_cached
def load_snli(split: str = "train") -> list[PairExample]:
    """SNLI inference (tokenized). Labels: 0 entailment, 1 neutral, 2 contradiction. Metric: accuracy.

    The mirror has SNLI dev and test only. train = SNLI dev except its last 1,000 examples (8,842),
    validation = those last 1,000 (no premise is shared with train), test = SNLI test (9,824).
    """
    if _check_split("snli", split) == "test":
        return _snli_part("test")
    dev = _snli_part("dev")
    return dev[:-SNLI_VALIDATION_SIZE] if split == "train" else dev[-SNLI_VALIDATION_SIZE:]


# ---- tagging -------------------------------------------------------------------------------------------------


@_cached
def load_wnut17(split: str = "train") -> list[TaggingExample]:
    """WNUT-17 emerging-entity NER on social media, BIO tags over 6 types. Metric: entity-level F1.

    train = ``wnut17train.conll`` (3,394 sentences), validation = ``emerging.dev.conll`` (1,009),
    test = ``emerging.test.annotated`` (1,287). Sentences are separated by blank (or tab-only) lines.
    """
    files = {"train": "wnut17train.conll", "validation": "emerging.dev.conll", "test": "emerging.test.annotated"}
    name = _for_split("wnut17", files, split)
    examples: list[TaggingExample] = []
    tokens: list[str] = []
    tags: list[str] = []
    for n, line in enumerate(read_lines("wnut17", name), start=1):
        if not line.strip():
            if tokens:
                examples.append(TaggingExample(tokens, tags))
                tokens, tags = [], []
            continue
        fields = line.split("\t")
        if len(fields) != 2 or fields[1] not in WNUT17_TAGS:
            raise malformed("wnut17", name, n, f"expected 'token<TAB>BIO-tag', got {line!r}")
        tokens.append(fields[0])
        tags.append(fields[1])
    if tokens:
        examples.append(TaggingExample(tokens, tags))
    return examples


def _ud_documents(filename: str) -> list[list[TaggingExample]]:
    """The sentences of a CoNLL-U file, grouped into documents at ``# newdoc`` comments.

    Multiword-token lines (``1-2``) and empty nodes (``1.1``) are skipped, so tokens are syntactic words.
    """
    docs: list[list[TaggingExample]] = [[]]
    tokens: list[str] = []
    tags: list[str] = []
    for n, line in enumerate(read_lines("ud-ewt", filename) + [""], start=1):
        if line.startswith("# newdoc") and docs[-1]:
            docs.append([])
        if line.startswith("#"):
            continue
        if not line.strip():
            if tokens:
                docs[-1].append(TaggingExample(tokens, tags))
                tokens, tags = [], []
            continue
        fields = line.split("\t")
        if len(fields) != 10:
            raise malformed("ud-ewt", filename, n, f"expected 10 tab-separated CoNLL-U fields, got {len(fields)}")
        if not fields[0].isdigit():  # a multiword token "1-2" or an empty node "1.1"
            continue
        if fields[3] not in UPOS_TAGS:
            raise malformed("ud-ewt", filename, n, f"{fields[3]!r} is not a UPOS tag")
        tokens.append(fields[1])
        tags.append(fields[3])
    return [doc for doc in docs if doc]


@_cached
def load_ud_pos(split: str = "train") -> list[TaggingExample]:
    """Universal Dependencies English EWT, UPOS tags (CoNLL-U column 4). Metric: token accuracy.

    The mirror has EWT dev and test only. train and validation split EWT dev by document (``# newdoc``):
    every 10th document (the 10th, 20th, ...) goes to validation, the rest to train, so both
    cover all genres; test = EWT test (2,077 sentences).
    """
    if _check_split("ud_pos", split) == "test":
        return [s for doc in _ud_documents("en_ewt-ud-test.conllu") for s in doc]
    docs = _ud_documents("en_ewt-ud-dev.conllu")
    in_validation = lambda i: (i + 1) % UD_VALIDATION_EVERY == 0
    return [s for i, doc in enumerate(docs) if in_validation(i) == (split == "validation") for s in doc]


# ---- question answering and multiple choice -----------------------------------------------------------------


@_cached
def load_squad2(split: str = "train") -> list[QAExample]:
    """SQuAD 2.0 dev, first 5 articles, split by article so no context is shared. Metrics: SQuAD EM and F1.

    train = Normans, Computational_complexity_theory, Southern_California; validation =
    Sky_(United_Kingdom); test = Victoria_(Australia). Unanswerable questions have no answers
    (``is_impossible``); their "plausible answers" are dropped. Answerable ones keep every reference answer.
    """
    articles = _for_split("squad2", SQUAD_ARTICLES, split)
    filename = "dev-v2.0-first5articles.json"
    data = json.loads(read_text("squad2-subset", filename))["data"]
    examples = []
    for article in (data[i] for i in articles):
        for paragraph in article["paragraphs"]:
            context = paragraph["context"]
            for qa in paragraph["qas"]:
                answers = [Answer(a["text"], a["answer_start"]) for a in qa["answers"]]
                bad = [a for a in answers if context[a.start : a.start + len(a.text)] != a.text]
                if bad or qa.get("is_impossible", False) != (not answers):
                    raise DataError(f"squad2-subset/{filename}, question {qa['id']}: answers do not match")
                examples.append(QAExample(qa["id"], qa["question"], context, answers, article["title"]))
    return examples


NO_ANSWER_TEXT = "no answer"  # generative SQuAD's target for an unanswerable question


def squad2_source(question: str, context: str) -> str:
    """Generative SQuAD's input text: the question first, so that truncation cuts the context, never the question."""
    return f"question: {question} context: {context}"


@_cached
def load_squad2_generative(split: str = "train") -> list[Seq2SeqExample]:
    """SQuAD 2.0 (the subset and splits of :func:`load_squad2`) as text to text: the model reads
    ``question: ... context: ...`` and writes the answer, or ``no answer`` (BART §3.1 treats SQuAD as span
    classification; T5 writes the answer as text, the form generative QA takes here). Targets are the first
    reference answer; predictions are scored against all of them with SQuAD's EM and F1, ``no answer`` scored as
    the empty answer."""
    return [
        Seq2SeqExample(
            e.id,
            squad2_source(e.question, e.context),
            e.answers[0].text if e.answers else NO_ANSWER_TEXT,
            tuple(a.text for a in e.answers),
        )
        for e in load_squad2(split)
    ]


@_cached
def load_copa(split: str = "train") -> list[ChoiceExample]:
    """COPA (ids 1-500) with the Balanced-COPA mirrors (id k + 1000). Labels index choices. Metric: accuracy.

    A mirror keeps its original's two alternatives but changes the premise so that the other one is right;
    an item and its mirror always land in the same split: train = ids 1-350 (700 items), validation =
    351-400 (99), test = 401-500 (200), each with their mirrors, in file order. Mirror 1381 is dropped: it
    repeats item 381's premise and alternatives with the opposite answer, so no model could get both right.
    """
    import xml.etree.ElementTree as ET  # imported here: only COPA needs it

    low, high = _for_split("copa", COPA_RANGES, split)
    filename = "balacopa-dev-all.xml"
    examples = []
    for item in ET.fromstring(read_text("copa", filename)).iter("item"):
        item_id = int(item.get("id", "0"))
        question, answer = item.get("asks-for"), item.get("most-plausible-alternative")
        texts = [item.findtext(tag) for tag in ("p", "a1", "a2")]
        if question not in ("cause", "effect") or answer not in ("1", "2") or None in texts:
            raise DataError(f"copa/{filename}, item {item_id}: malformed item")
        original = item_id - COPA_MIRROR_OFFSET if item_id > COPA_MIRROR_OFFSET else item_id
        if low <= original <= high and item_id not in COPA_DROPPED:
            premise, *choices = (t.strip() for t in texts)
            examples.append(ChoiceExample(item_id, premise, question, choices, int(answer) - 1))
    return examples


# ---- the registry ----------------------------------------------------------------------------------------


GENERATIVE_QA_METRICS = ("squad_em", "squad_f1", "rougeL")


@dataclass(frozen=True)
class TaskInfo:
    """What a task's examples are: their type, label names (empty for regression / QA / choice), metrics."""

    name: str
    dataset: str
    example_type: type
    labels: tuple[str, ...]
    metrics: tuple[str, ...]
    loader: Callable[[str], list] = field(repr=False, compare=False)
    splits: tuple[str, ...] = SPLITS
    symmetric: bool = False  # a pair whose order carries no meaning (paraphrase, similarity)


TASKS: dict[str, TaskInfo] = {
    t.name: t
    for t in (
        TaskInfo("sst2", "sst2", SentenceExample, SST2_LABELS, ("accuracy",), load_sst2),
        TaskInfo("cola", "cola", SentenceExample, COLA_LABELS, ("matthews",), load_cola),
        TaskInfo("stsb", "stsb", PairExample, (), ("pearson", "spearman"), load_stsb, symmetric=True),
        TaskInfo("mrpc", "mrpc", PairExample, MRPC_LABELS, ("f1", "accuracy"), load_mrpc, symmetric=True),
        TaskInfo("rte", "rte", PairExample, RTE_LABELS, ("accuracy",), load_rte),
        TaskInfo("snli", "snli", PairExample, SNLI_LABELS, ("accuracy",), load_snli),
        TaskInfo("wnut17", "wnut17", TaggingExample, WNUT17_TAGS, ("entity_f1",), load_wnut17),
        TaskInfo("ud_pos", "ud-ewt", TaggingExample, UPOS_TAGS, ("accuracy",), load_ud_pos),
        TaskInfo("squad2", "squad2-subset", QAExample, (), ("squad_em", "squad_f1"), load_squad2),
        TaskInfo("squad2_gen", "squad2-subset", Seq2SeqExample, (), GENERATIVE_QA_METRICS, load_squad2_generative),
        TaskInfo("copa", "copa", ChoiceExample, (), ("accuracy",), load_copa),
    )
}


def load_task(name: str, split: str = "train") -> list:
    """The examples of task ``name`` (a key of ``TASKS``) for ``split`` ("train", "validation" or "test")."""
    if name not in TASKS:
        raise KeyError(f"unknown task {name!r}; known tasks: {', '.join(TASKS)}")
    if split not in SPLITS:
        raise ValueError(f"unknown split {split!r}; splits: {', '.join(SPLITS)}")
    return TASKS[name].loader(split)
