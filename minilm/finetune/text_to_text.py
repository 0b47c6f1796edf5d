"""Every course task as text to text (T5, Raffel et al. 2020, §2.4): "we cast all of the tasks we consider into a
'text-to-text' format—that is, a task where the model is fed some text for context or conditioning and is then asked
to produce some output text." One encoder–decoder, one loss (teacher-forced cross-entropy on the target) and one
decoding procedure serve every task; the task is named by a prefix of the input, T5's own prefixes (Appendix D):

==========  ===================================================  ===============================================
task        source                                               target
==========  ===================================================  ===============================================
sst2        ``sst2 sentence: <text>``                            ``negative`` | ``positive``
cola        ``cola sentence: <text>``                            ``unacceptable`` | ``acceptable``
stsb        ``stsb sentence1: <a> sentence2: <b>``               the score to the nearest 0.2: ``3.8``
mrpc        ``mrpc sentence1: <a> sentence2: <b>``               ``not_equivalent`` | ``equivalent``
rte         ``rte sentence1: <a> sentence2: <b>``                ``entailment`` | ``not_entailment``
snli        ``snli hypothesis: <b> premise: <a>`` (T5's MNLI)    ``entailment`` | ``neutral`` | ``contradiction``
wnut17      ``wnut17 sentence: <w1 w2 ...>``                     one BIO tag per word: ``O B-person I-person``
ud_pos      ``ud_pos sentence: <w1 w2 ...>``                     one UPOS tag per word: ``PRON VERB PUNCT``
squad2      ``question: <question> context: <context>``          the first reference answer, or ``no answer``
squad2_gen  (already text to text: the same source and target)   the same
copa        ``copa choice1: <c1> choice2: <c2> premise: <p>      ``choice1`` | ``choice2``
            question: cause`` (or ``effect``; SuperGLUE's COPA)
==========  ===================================================  ===============================================

Labels are the task's own label names (:mod:`minilm.data.tasks`). STS-B, a regression: "we simply rounded any score
to the nearest increment of 0.2 and converted the result to a literal string representation of the number"; a tie
(2.3 lies as near 2.2 as 2.4) goes to the even multiple of 0.2 (2.3 -> "2.4", 2.5 -> "2.4"), as T5's
``round(label * 5) / 5`` rounds halves, here on the decimal value so that float error decides nothing. T5 did no
tagging; here the sentence's words are the source, space-joined as the tagging kind reads them, and the target is one
tag per word, space-separated (targets as long as the sentence: raise ``max_target_length`` for long ones, since a
cut target trains and predicts fewer tags). A task registered later with one of these example types gets the form
of its type, its name as the prefix.

The generated text is parsed back into the task's own label space and scored by the task's own kind, exactly as its
non-text kind scores its predictions. What the model may write that is no label counts as wrong, never as an error
(T5: "we always count the model's output as wrong"):

- a class (sst2, cola, mrpc, rte, snli, copa): anything but a label name is -1 (T5's ``string_label_to_class_id``
  default), which no gold label equals (F1 of MRPC's "equivalent" class reads it as a negative);
- stsb: anything that is not a finite number is -1.0 (T5's ``string_to_float`` default), a score below the scale's 0
  that Pearson and Spearman take as it is (all unparseable: a constant, so NaN, as scipy);
- tagging: each word that is no tag of the task gets a wrong tag, and a prediction with too few tags is padded with
  it (too many are cut): ``O`` for BIO tagging (WNUT-17: no entity there, so a missed entity, never a found one),
  else ``<invalid>`` (UD POS: never equal to a gold tag);
- squad2: ``no answer`` is the empty answer; any other text is an answer, scored by SQuAD's EM/F1.
"""

from __future__ import annotations

import math
from decimal import ROUND_HALF_EVEN, Decimal

from minilm.data.examples import (
    ChoiceExample,
    PairExample,
    QAExample,
    SentenceExample,
    Seq2SeqExample,
    TaggingExample,
)
from minilm.data.tasks import NO_ANSWER_TEXT, TaskInfo, squad2_source
from minilm.finetune.kinds import Seq2SeqKind, TaskEncoder, task_kind
from minilm.train.config import ConfigError
from minilm.train.registry import ModelEntry, models

TEXT_TO_TEXT = ("auto", "true", "false")  # text_to_text=
INVALID_LABEL = -1  # a class prediction that names no label: never right
INVALID_SCORE = -1.0  # an STS-B prediction that is no finite number
OUTSIDE_TAG = "O"  # BIO's "no entity": the wrong tag of a BIO tagging task
INVALID_TAG = "<invalid>"  # the wrong tag of any other tagging task: equal to no gold tag
NLI_FIELDS = {"snli": ("hypothesis", "premise")}  # pair tasks T5 reads as MNLI: the hypothesis first


def score_target(score: float) -> str:
    """An STS-B score as T5 writes it: to the nearest 0.2, one decimal (3.75 -> "3.8"), ties to the even step."""
    steps = (Decimal(repr(score)) * 5).quantize(Decimal(1), rounding=ROUND_HALF_EVEN)
    return f"{steps / 5:.1f}"


def choice_names(n: int) -> list[str]:
    """The targets of an n-way choice: "choice1", "choice2", ..."""
    return [f"choice{i + 1}" for i in range(n)]


def source_text(info: TaskInfo, example) -> str:
    """What the model reads for ``example`` of task ``info`` (see the table above)."""
    name = info.name
    if isinstance(example, SentenceExample):
        return f"{name} sentence: {example.text}"
    if isinstance(example, PairExample):
        if name in NLI_FIELDS:
            second, first = NLI_FIELDS[name]
            return f"{name} {second}: {example.text_b} {first}: {example.text_a}"
        return f"{name} sentence1: {example.text_a} sentence2: {example.text_b}"
    if isinstance(example, TaggingExample):
        return f"{name} sentence: {' '.join(example.tokens)}"
    if isinstance(example, QAExample):
        return squad2_source(example.question, example.context)
    if isinstance(example, ChoiceExample):
        names = choice_names(len(example.choices))
        choices = " ".join(f"{n}: {c}" for n, c in zip(names, example.choices, strict=True))
        return f"{name} {choices} premise: {example.premise} question: {example.question}"
    if isinstance(example, Seq2SeqExample):
        return example.source
    raise _no_form(info, example)


def target_text(info: TaskInfo, example) -> str:
    """What the model writes for ``example`` of task ``info``: its label as text."""
    if isinstance(example, (SentenceExample, PairExample)):
        return info.labels[example.label] if info.labels else score_target(example.label)
    if isinstance(example, TaggingExample):
        return " ".join(example.tags)
    if isinstance(example, QAExample):
        return example.answers[0].text if example.answers else NO_ANSWER_TEXT
    if isinstance(example, ChoiceExample):
        return choice_names(len(example.choices))[example.label]
    if isinstance(example, Seq2SeqExample):
        return example.target
    raise _no_form(info, example)


def _no_form(info: TaskInfo, example) -> ConfigError:
    return ConfigError(f"task {info.name!r} has examples of type {type(example).__name__}: no text-to-text form")


def to_text(info: TaskInfo, example) -> Seq2SeqExample:
    """``example`` of task ``info`` as a text-to-text example (a Seq2SeqExample is already one)."""
    if isinstance(example, Seq2SeqExample):
        return example
    target = target_text(info, example)
    references = tuple(a.text for a in example.answers) if isinstance(example, QAExample) else (target,)
    return Seq2SeqExample(str(getattr(example, "id", "")), source_text(info, example), target, references)


def parse_score(text: str) -> float:
    """A written number, or :data:`INVALID_SCORE` for anything else ("", "3.x", "nan")."""
    try:
        value = float(text)
    except ValueError:
        return INVALID_SCORE
    return value if math.isfinite(value) else INVALID_SCORE


def parse_tags(text: str, labels: tuple[str, ...], n_words: int) -> list[str]:
    """Exactly ``n_words`` tags from space-separated text: unknown tags, and missing ones, are a wrong tag."""
    wrong = OUTSIDE_TAG if OUTSIDE_TAG in labels else INVALID_TAG
    tags = [t if t in labels else wrong for t in text.split()[:n_words]]
    return tags + [wrong] * (n_words - len(tags))


def from_text(info: TaskInfo, prediction: str, example):
    """A generated ``prediction`` for ``example`` as the task's own kind predicts: a label index, a float score, a
    tag list or an answer text ("" for no answer); what cannot be read is a wrong prediction (module docstring)."""
    text = prediction.strip()
    if isinstance(example, Seq2SeqExample):
        return prediction  # its own kind reads "no answer" itself
    if isinstance(example, QAExample):
        return "" if text == NO_ANSWER_TEXT else text
    if isinstance(example, TaggingExample):
        return parse_tags(text, info.labels, len(example.tokens))
    names = choice_names(len(example.choices)) if isinstance(example, ChoiceExample) else list(info.labels)
    if not names:
        return parse_score(text)
    return names.index(text) if text in names else INVALID_LABEL


class TextToTextKind(Seq2SeqKind):
    """Any task as text to text: its examples become (source, target) texts (:func:`to_text`), trained and generated
    as :class:`Seq2SeqKind` does; its labels are checked, and generated texts parsed (:func:`from_text`) and scored,
    by the task's own kind."""

    name = "text-to-text"

    def __init__(self, info: TaskInfo) -> None:
        super().__init__(info)
        self.own = task_kind(info)
        self.cut_targets = 0  # targets of the last encode_examples longer than max_target_length (cut)

    def texts(self, example) -> list[str]:
        return super().texts(to_text(self.info, example))

    def label_problem(self, example) -> str | None:
        return self.own.label_problem(example)

    def encode_examples(self, examples: list, encoder: TaskEncoder) -> list:
        as_text = [to_text(self.info, e) for e in examples]
        targets = encoder.tokenizer([e.target for e in as_text], truncation=False, padding=False).input_ids
        self.cut_targets = sum(len(ids) > encoder.max_target_length for ids in targets)
        return super().encode_examples(as_text, encoder)

    def score(self, examples: list, predictions: list) -> dict[str, float]:
        parsed = [from_text(self.info, p, e) for p, e in zip(predictions, examples, strict=True)]
        return self.own.score(examples, parsed)


def use_text_to_text(setting: str, entry: ModelEntry, n_tasks: int = 1) -> bool:
    """Whether tasks are cast as text to text for a body of ``entry``: ``true``; ``auto`` where the model's registry
    entry says so (T5) or several tasks are trained at once (they share the decoder's output); ``false``, never.
    A ConfigError where it is asked of a model that cannot write text, or refused for several tasks."""
    if setting not in TEXT_TO_TEXT:
        raise ConfigError(f"text_to_text={setting!r} is not one of {', '.join(TEXT_TO_TEXT)}")
    writers = ", ".join(name for name, e in models().items() if e.kind == "encoder-decoder")
    model = f"{entry.name} is {'an' if entry.kind[0] in 'aeiou' else 'a'} {entry.kind}"
    if n_tasks > 1 and entry.kind != "encoder-decoder":
        raise ConfigError(
            f"multi-task training casts every task as text to text, which needs an encoder-decoder model "
            f"({writers}); {model}"
        )
    if n_tasks > 1 and setting == "false":
        raise ConfigError("multi-task training casts every task as text to text: drop text_to_text=false")
    if setting == "true" and entry.kind != "encoder-decoder":
        raise ConfigError(f"text_to_text=true needs an encoder-decoder model ({writers}) to write answers; {model}")
    return setting == "true" or n_tasks > 1 or (setting == "auto" and entry.text_to_text)


PLACEHOLDERS = {  # an example of each type with its fields named, for --help
    SentenceExample: SentenceExample("<sentence>", 0),
    PairExample: PairExample("<sentence1>", "<sentence2>", 0),
    TaggingExample: TaggingExample(["<words>"], [""]),
    QAExample: QAExample("", "<question>", "<context>", [], ""),
    ChoiceExample: ChoiceExample(0, "<premise>", "cause|effect", ["<choice1>", "<choice2>"], 0),
}


def describe(info: TaskInfo) -> str:
    """The task's text-to-text form in one line: its source, with placeholders, -> its targets."""
    if info.example_type is Seq2SeqExample:
        return "its own source -> its own target (already text to text)"
    example = PLACEHOLDERS.get(info.example_type)
    if example is None:
        return "(no text-to-text form)"
    targets = {
        TaggingExample: "one tag per word",
        QAExample: f"the answer | {NO_ANSWER_TEXT}",
        ChoiceExample: " | ".join(choice_names(2)),
    }.get(info.example_type) or (" | ".join(info.labels) if info.labels else "the score to the nearest 0.2, e.g. 3.8")
    return f"{source_text(info, example)} -> {targets}"
