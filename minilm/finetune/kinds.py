"""Task kinds: how each shape of task becomes model inputs and labels, a head, a loss, predictions and metrics.

Every task of :data:`minilm.data.TASKS` maps to one kind by its example type (:func:`task_kind`), so a task
registered there later with one of these example types is fine-tuned without touching this module:

==============  ========================  =============================================  ==========================
kind            tasks                     inputs                                         head, loss
==============  ========================  =============================================  ==========================
``sequence``    sst2, cola; mrpc, rte,    the text, or the pair (text_a, text_b)         SequenceClassificationHead,
                snli; stsb (regression)   through the tokenizer's pair template          cross-entropy (MSE: stsb)
``tagging``     wnut17, ud_pos            the words joined by spaces; each token is      TokenClassificationHead,
                                          mapped back to its word by character offsets   first sub-word labelled
``span``        squad2                    (question, context), the context truncated     SpanExtractionHead
``choice``      copa                      one (premise, "because"/"so" + choice)         MultipleChoiceHead
                                          sequence per choice
``seq2seq``     squad2_gen                the source through the encoder; the target,    the body's own LM head,
                                          shifted right, through the decoder             teacher-forced
                                                                                         cross-entropy
==============  ========================  =============================================  ==========================

Text-to-text tasks (``seq2seq``) need an encoder–decoder body (BART, T5): training is teacher forcing on the target
(:mod:`minilm.objectives.seq2seq`), and predictions are generated (greedy, or beam search with ``num_beams``) and
decoded to text, so evaluation scores what the model writes, not what it would have predicted with the reference in
front of it. Every other task can be cast as text to text too, T5's way (:mod:`minilm.finetune.text_to_text`).

Predictions are scored with :func:`minilm.metrics.compute` under the task's own metric names: word-level tags
for tagging (entity F1 on BIO tags for WNUT-17, accuracy for UPOS), answer texts for SQuAD (official EM/F1).

Input formats (``input_format=``): ``template`` encodes through the tokenizer's own templates ([CLS] a [SEP] b
[SEP] for BERT). ``gpt`` is GPT's task-specific input transformations (Radford et al. 2018, §3.3, Figure 1): the
tokenizer gets start, delimiter and extract tokens, ``<|start|> a <|delim|> b <|extract|>``, and the extract token's
final state (``pooling=last``) feeds the head; entailment is premise-delimiter-hypothesis; a symmetric pair
(similarity, paraphrase: ``TaskInfo.symmetric``) is read in both orders and the two final states are summed before
the linear layer (``TaskEncoder.both_orders``); multiple choice scores each (context, answer) sequence.

Span QA, simplified: one window per question, no document stride. The context is cut to fit ``max_length``
(the tokenizer's longest-first truncation, which in practice cuts the context); a question whose answer is cut
away is trained as unanswerable, and scored against its real answers. Unanswerable questions point at the
*summary position*, where the model sums up its input: the first token ([CLS]) with ``pooling=first``, the last
real token with ``pooling=last`` (a causal decoder, where only the last token has read everything). That
position never starts or ends an answer, even where it is a context token.
"""

from __future__ import annotations

import itertools
import math
from bisect import bisect_right
from dataclasses import dataclass

import torch
from torch import Tensor, nn

from minilm.data.examples import (
    Answer,
    ChoiceExample,
    PairExample,
    QAExample,
    SentenceExample,
    Seq2SeqExample,
    TaggingExample,
)
from minilm.data.tasks import NO_ANSWER_TEXT, TaskInfo
from minilm.heads import (
    NO_ANSWER,
    MultipleChoiceHead,
    SequenceClassificationHead,
    SpanExtractionHead,
    TokenClassificationHead,
    align_labels_to_tokens,
    best_span,
    pool,
    word_predictions,
)
from minilm.metrics import compute
from minilm.objectives.labels import IGNORE_INDEX
from minilm.tokenizers import BatchEncoding, Tokenizer
from minilm.train.config import ConfigError

CONNECTIVES = {"cause": "because", "effect": "so"}  # COPA: premise, connective + alternative reads as one text
MAX_ANSWER_TOKENS = 30  # longest answer span decoded (BERT's SQuAD setting)


@dataclass
class EncodedExample:
    """One example as model inputs: one token sequence (or one per choice), its label and what decoding needs."""

    input_ids: list[list[int]]  # (n_sequences, T_i): 1 sequence, or n_choices for multiple choice
    token_type_ids: list[list[int]]  # segment ids, same shape
    label: object  # int, float, per-token list[int], or (start, end) token positions
    aux: object = None  # tagging: (word_ids, n_words); span: SpanAux


@dataclass
class SpanAux:
    context: str
    offsets: list[tuple[int, int]]  # (T,) character span of each token in its own text
    answerable: list[bool]  # (T,) context tokens other than the summary position
    null: int  # the summary position, where an unanswerable question points


@dataclass
class TaskEncoder:
    """The tokenizer with the run's settings: truncation to ``max_length``, and the pooling (summary) position."""

    tokenizer: Tokenizer
    max_length: int
    pooling: str  # "first", "last" or "mean"
    both_orders: bool = False  # a symmetric task's pair read both ways, the two summaries summed (GPT's similarity)
    max_target_length: int = 32  # text-to-text: target tokens, longer ones truncated

    def __call__(self, texts: list[str], pairs: list[str] | None = None) -> BatchEncoding:
        return self.tokenizer(texts, pairs, max_length=self.max_length, truncation=True, padding=False)

    def summary_position(self, length: int) -> int:
        """Index of the token that sums up a sequence of ``length`` tokens: the last one for last pooling."""
        return length - 1 if self.pooling == "last" else 0


def pad(rows: list[list], value, width: int) -> Tensor:
    """Rows of different lengths -> (N, width), right-padded with ``value``."""
    return torch.tensor([row + [value] * (width - len(row)) for row in rows])


def _encoded(enc: BatchEncoding, labels: list, aux: list | None = None, group: int = 1) -> list[EncodedExample]:
    """One EncodedExample per label from ``group`` consecutive sequences of ``enc`` each."""
    aux = aux if aux is not None else [None] * len(labels)
    encoded = []
    for i, (y, a) in enumerate(zip(labels, aux, strict=True)):
        rows = slice(i * group, (i + 1) * group)
        encoded.append(EncodedExample(enc.input_ids[rows], enc.token_type_ids[rows], y, a))
    return encoded


def _is_class(label, n: int) -> bool:
    return isinstance(label, int) and not isinstance(label, bool) and 0 <= label < n


class TaskKind:
    """The shared part of every kind: label checks, batching, argmax predictions, scoring with the task's metrics."""

    generative = False  # True: predictions are generated text (Seq2SeqKind), not argmaxes of a head's logits

    def __init__(self, info: TaskInfo) -> None:
        self.info = info

    # --- examples -------------------------------------------------------------------------------------------
    def texts(self, example) -> list[str]:
        """The texts of ``example``, to train a tokenizer from scratch."""
        raise NotImplementedError

    def label_problem(self, example) -> str | None:
        """What is wrong with the example's label, or None."""
        label = example.label
        return None if _is_class(label, len(self.info.labels)) else self._outside(label, self.label_set())

    def label_set(self) -> dict:
        return dict(enumerate(self.info.labels))

    @staticmethod
    def _outside(label, label_set) -> str:
        return f"label {label!r} is not in the task's label set {label_set}"

    def check(self, examples: list, split: str) -> None:
        """ConfigError naming the first label outside the task's label set."""
        for i, example in enumerate(examples):
            problem = self.label_problem(example)
            if problem is not None:
                raise ConfigError(f"task {self.info.name!r}, {split} example {i}: {problem}")

    def check_texts(self, examples: list, tokenizer: Tokenizer, split: str) -> None:
        """ConfigError naming the first text that tokenises to nothing (it would leave an empty sequence or side)."""
        texts = [(i, t) for i, e in enumerate(examples) for t in self.texts(e)]
        encodings = tokenizer.backend.encode_batch([t for _, t in texts], add_special_tokens=False)
        for (i, text), encoding in zip(texts, encodings, strict=True):
            if not encoding.ids:
                raise ConfigError(
                    f"task {self.info.name!r}, {split} example {i}: the text {text!r} tokenises to nothing (empty, "
                    "or only characters the tokenizer drops); fix or remove the example"
                )

    def encode_examples(self, examples: list, encoder: TaskEncoder) -> list[EncodedExample]:
        raise NotImplementedError

    # --- batches --------------------------------------------------------------------------------------------
    def collate(self, encoded: list[EncodedExample]) -> dict[str, Tensor]:
        """Encoded examples -> padded tensors. Padding is masked out everywhere, so its token id does not matter."""
        sequences = [s for e in encoded for s in e.input_ids]
        width = max(len(s) for s in sequences)
        return {
            "input_ids": pad(sequences, 0, width),  # (B * n_sequences, T)
            "attention_mask": pad([[1] * len(s) for s in sequences], 0, width),  # (B * n_sequences, T)
            "token_type_ids": pad([s for e in encoded for s in e.token_type_ids], 0, width),
            "labels": self.label_tensor([e.label for e in encoded], width),
        }

    def label_tensor(self, labels: list, width: int) -> Tensor:
        return torch.tensor(labels)  # (B,)

    def counts(self, batch: dict) -> int | Tensor:
        """The units the task loss averages over in a batch: its examples (tagging: its labelled tokens)."""
        return batch["labels"].size(0)

    # --- model ----------------------------------------------------------------------------------------------
    def head(self, d_model: int, pooling: str) -> nn.Module:
        raise NotImplementedError

    def logits(self, head: nn.Module, hidden: Tensor, batch: dict) -> Tensor:
        return head(hidden, batch["attention_mask"])  # (B, n_labels)

    def loss(self, head: nn.Module, logits: Tensor, labels: Tensor) -> Tensor:
        return head.loss(logits, labels)

    # --- predictions ----------------------------------------------------------------------------------------
    def predict(self, logits: Tensor, encoded: list[EncodedExample]) -> list:
        """One prediction per encoded example (in the form ``score`` takes)."""
        return logits.argmax(-1).tolist()

    def score(self, examples: list, predictions: list) -> dict[str, float]:
        return compute(self.info.metrics, predictions, [e.label for e in examples])


class SequenceKind(TaskKind):
    """One text or a pair -> one label (SST-2, CoLA, MRPC, RTE, SNLI), or a score when the task has no labels
    (STS-B: one output, mean squared error)."""

    name = "sequence"

    @property
    def regression(self) -> bool:
        return not self.info.labels

    def texts(self, example) -> list[str]:
        return [example.text] if isinstance(example, SentenceExample) else [example.text_a, example.text_b]

    def label_problem(self, example) -> str | None:
        if not self.regression:
            return super().label_problem(example)
        label = example.label
        number = isinstance(label, (int, float)) and not isinstance(label, bool) and math.isfinite(label)
        return None if number else f"label {label!r} is not a finite number (the task is a regression)"

    def encode_examples(self, examples: list, encoder: TaskEncoder) -> list[EncodedExample]:
        parts = list(zip(*(self.texts(e) for e in examples), strict=True))
        labels = [e.label for e in examples]
        if len(parts) == 1:
            return _encoded(encoder(list(parts[0])), labels)
        firsts, seconds = list(parts[0]), list(parts[1])
        if not (encoder.both_orders and self.info.symmetric):
            return _encoded(encoder(firsts, seconds), labels)
        # GPT (Radford et al. 2018, §3.3): "there is no inherent ordering of the two sentences being compared", so
        # each example is two sequences, (a, b) and (b, a); logits() sums their summaries.
        pairs = [ab for a, b in zip(firsts, seconds, strict=True) for ab in ((a, b), (b, a))]
        both = encoder([a for a, _ in pairs], [b for _, b in pairs])
        return _encoded(both, labels, group=2)

    def label_tensor(self, labels: list, width: int) -> Tensor:
        return torch.tensor(labels, dtype=torch.float32 if self.regression else torch.long)  # (B,)

    def head(self, d_model: int, pooling: str) -> nn.Module:
        return SequenceClassificationHead(d_model, len(self.info.labels) or 1, pooling=pooling)

    def logits(self, head: nn.Module, hidden: Tensor, batch: dict) -> Tensor:
        orders = hidden.size(0) // batch["labels"].size(0)  # 2: a pair read both ways
        if orders == 1:
            return super().logits(head, hidden, batch)
        pooled = pool(hidden, batch["attention_mask"], head.pooling)  # (B * 2, C)
        return head.classify(pooled.view(-1, orders, pooled.size(-1)).sum(1))  # h_(a,b) + h_(b,a) -> (B, n_labels)

    def predict(self, logits: Tensor, encoded: list[EncodedExample]) -> list:
        return logits.squeeze(-1).tolist() if self.regression else super().predict(logits, encoded)


def word_ids_from_offsets(
    words: list[str], offsets: list[tuple[int, int]], sequence_ids: list[int | None]
) -> list[int | None]:
    """The index in ``words`` of each token of ``" ".join(words)``, by the token's first character.

    None for special tokens and tokens that cover no character (a lone space). The tokenizer's own ``word_ids``
    count its pre-tokenizer's words ("don't" may be two), not the dataset's, hence the offsets.
    """
    starts = list(itertools.accumulate((len(w) + 1 for w in words[:-1]), initial=0))  # each word's first char
    return [
        bisect_right(starts, start) - 1 if seq is not None and end > start else None
        for (start, end), seq in zip(offsets, sequence_ids, strict=True)
    ]


def words_from_tokens(token_predictions: list[int], word_ids: list[int | None], n_words: int) -> list[int]:
    """Token predictions -> one per word (its first sub-word's); words with no token (cut by max_length) get 0."""
    present = sorted({w for w in word_ids if w is not None})
    out = [0] * n_words
    for w, p in zip(present, word_predictions(token_predictions, word_ids), strict=True):
        out[w] = p
    return out


class TaggingKind(TaskKind):
    """Pre-split words -> one tag each (WNUT-17 NER, UD POS). The first sub-word of a word carries its tag."""

    name = "tagging"

    def texts(self, example) -> list[str]:
        return [" ".join(example.tokens)]

    def label_problem(self, example) -> str | None:
        bad = next((t for t in example.tags if t not in self.info.labels), None)
        return None if bad is None else self._outside(bad, self.info.labels)

    def encode_examples(self, examples: list, encoder: TaskEncoder) -> list[EncodedExample]:
        enc = encoder([" ".join(e.tokens) for e in examples])
        labels, aux = [], []
        for i, e in enumerate(examples):
            word_ids = word_ids_from_offsets(e.tokens, enc.offsets[i], enc.sequence_ids[i])
            labels.append(align_labels_to_tokens([self.info.labels.index(t) for t in e.tags], word_ids))
            aux.append((word_ids, len(e.tokens)))
        return _encoded(enc, labels, aux)

    def label_tensor(self, labels: list, width: int) -> Tensor:
        return pad(labels, IGNORE_INDEX, width)  # (B, T)

    def counts(self, batch: dict) -> int | Tensor:
        return (batch["labels"] != IGNORE_INDEX).sum()  # the first sub-word of each word the window kept

    def head(self, d_model: int, pooling: str) -> nn.Module:
        return TokenClassificationHead(d_model, len(self.info.labels))

    def logits(self, head: nn.Module, hidden: Tensor, batch: dict) -> Tensor:
        return head(hidden)  # (B, T, n_labels)

    def predict(self, logits: Tensor, encoded: list[EncodedExample]) -> list:
        tags = []
        for row, f in zip(logits.argmax(-1).tolist(), encoded, strict=True):
            word_ids, n_words = f.aux
            tags.append([self.info.labels[p] for p in words_from_tokens(row[: len(word_ids)], word_ids, n_words)])
        return tags

    def score(self, examples: list, predictions: list) -> dict[str, float]:
        return compute(self.info.metrics, predictions, [e.tags for e in examples])


def answer_positions(offsets: list[tuple[int, int]], answerable: list[bool], answer: Answer) -> tuple[int, int]:
    """The first and last answerable tokens overlapping the answer's characters, or (NO_ANSWER, NO_ANSWER) when
    the answer does not lie wholly within them (cut away by truncation)."""
    text = answer.text
    first = answer.start + len(text) - len(text.lstrip())  # characters [first, last) of the context, without the
    last = answer.start + len(text.rstrip())  # spaces at either end, which tokens' (trimmed) offsets leave out
    tokens = [j for j, (s, e) in enumerate(offsets) if answerable[j] and s < last and e > first]
    if not tokens or offsets[tokens[0]][0] > first or offsets[tokens[-1]][1] < last:
        return NO_ANSWER, NO_ANSWER
    return tokens[0], tokens[-1]


def span_text(context: str, offsets: list[tuple[int, int]], start: int, end: int) -> str:
    """The context's characters from token ``start`` to token ``end`` (inclusive)."""
    return context[offsets[start][0] : offsets[end][1]]


class SpanKind(TaskKind):
    """(question, context) -> the answer's start and end tokens, or the summary position when unanswerable."""

    name = "span"

    def texts(self, example) -> list[str]:
        return [example.question, example.context]

    def label_problem(self, example) -> str | None:
        for a in example.answers:
            if example.context[a.start : a.start + len(a.text)] != a.text:
                return f"answer {a.text!r} is not at character {a.start} of the context"
        return None

    def encode_examples(self, examples: list, encoder: TaskEncoder) -> list[EncodedExample]:
        enc = encoder([e.question for e in examples], [e.context for e in examples])
        labels, aux = [], []
        for i, e in enumerate(examples):
            offsets, null = enc.offsets[i], encoder.summary_position(len(enc.input_ids[i]))
            answerable = [s == 1 and j != null for j, s in enumerate(enc.sequence_ids[i])]
            start, end = answer_positions(offsets, answerable, e.answers[0]) if e.answers else (NO_ANSWER, NO_ANSWER)
            labels.append((null, null) if start == NO_ANSWER else (start, end))
            aux.append(SpanAux(e.context, offsets, answerable, null))
        return _encoded(enc, labels, aux)

    def head(self, d_model: int, pooling: str) -> nn.Module:
        return SpanExtractionHead(d_model)  # its null_index is unused: targets already point at the summary position

    def logits(self, head: nn.Module, hidden: Tensor, batch: dict) -> Tensor:
        return torch.stack(head(hidden), dim=-1)  # (B, T, 2): start and end logits

    def loss(self, head: nn.Module, logits: Tensor, labels: Tensor) -> Tensor:
        return head.loss(logits[..., 0], logits[..., 1], labels[:, 0], labels[:, 1])  # labels (B, 2)

    def predict(self, logits: Tensor, encoded: list[EncodedExample]) -> list:
        texts = []
        for row, f in zip(logits, encoded, strict=True):
            a: SpanAux = f.aux
            start, end = row[: len(a.offsets)].unbind(-1)  # (T,), (T,)
            span = best_span(start, end, torch.tensor(a.answerable), MAX_ANSWER_TOKENS, null_index=a.null)
            texts.append("" if span is None else span_text(a.context, a.offsets, *span))
        return texts

    def score(self, examples: list, predictions: list) -> dict[str, float]:
        answers = {e.id: text for e, text in zip(examples, predictions, strict=True)}
        return compute(self.info.metrics, answers, examples)


class ChoiceKind(TaskKind):
    """Premise + each choice -> one score per choice; the highest wins (COPA)."""

    name = "choice"

    def texts(self, example) -> list[str]:
        return [example.premise, *example.choices]

    def label_problem(self, example) -> str | None:
        n = len(example.choices)
        return None if _is_class(example.label, n) else self._outside(example.label, dict(enumerate(example.choices)))

    def encode_examples(self, examples: list, encoder: TaskEncoder) -> list[EncodedExample]:
        n_choices = {len(e.choices) for e in examples}
        if len(n_choices) > 1:
            raise ConfigError(f"task {self.info.name!r}: examples have different numbers of choices {n_choices}")
        premises = [e.premise for e in examples for _ in e.choices]
        endings = [f"{CONNECTIVES.get(e.question, e.question)} {c}" for e in examples for c in e.choices]
        return _encoded(encoder(premises, endings), [e.label for e in examples], group=n_choices.pop())

    def head(self, d_model: int, pooling: str) -> nn.Module:
        return MultipleChoiceHead(d_model, pooling=pooling)

    def logits(self, head: nn.Module, hidden: Tensor, batch: dict) -> Tensor:
        n_choices = hidden.size(0) // batch["labels"].size(0)
        return head(hidden, batch["attention_mask"], n_choices=n_choices)  # (B, n_choices)


class Seq2SeqKind(TaskKind):
    """Source text -> target text (generative SQuAD): teacher forcing in training, generation in evaluation."""

    name = "seq2seq"
    generative = True

    def __init__(self, info: TaskInfo) -> None:
        super().__init__(info)
        self.tokenizer: Tokenizer | None = None  # the encoder's, set by encode_examples: predictions decode with it

    def texts(self, example) -> list[str]:
        return [example.source, example.target]

    def label_problem(self, example) -> str | None:
        return None if example.target.strip() else "the target text is empty"

    def encode_examples(self, examples: list, encoder: TaskEncoder) -> list[EncodedExample]:
        self.tokenizer = encoder.tokenizer
        sources = encoder([e.source for e in examples])
        targets = encoder.tokenizer(
            [e.target for e in examples], max_length=encoder.max_target_length, truncation=True, padding=False
        )
        return _encoded(sources, targets.input_ids)  # label: the target's ids, <s> text </s>

    def label_tensor(self, labels: list, width: int) -> Tensor:
        return pad(labels, IGNORE_INDEX, max(map(len, labels)))  # (B, T_target), unscored padding

    def counts(self, batch: dict) -> int | Tensor:
        """The scored target tokens: the loss is a mean over them."""
        return (batch["labels"] != IGNORE_INDEX).sum()

    def head(self, d_model: int, pooling: str) -> nn.Module | None:
        return None  # the body's LM head writes the text

    def generate(self, body: nn.Module, batch: dict, **options) -> list[str]:
        """The body's outputs for a batch's sources, decoded to text (special tokens dropped)."""
        ids = body.generate(batch["input_ids"], batch["attention_mask"], **options)
        return [text.strip() for text in self.tokenizer.decode_batch(ids.tolist())]

    def score(self, examples: list, predictions: list) -> dict[str, float]:
        """SQuAD's EM and F1 against every reference ("no answer" is the empty answer), ROUGE against the target."""
        answers = {e.id: "" if p == NO_ANSWER_TEXT else p for e, p in zip(examples, predictions, strict=True)}
        scores = {}
        for name in self.info.metrics:
            if name.startswith("squad"):
                scores.update(compute([name], answers, examples))
            else:
                scores.update(compute([name], predictions, [e.target for e in examples]))
        return scores


KINDS = {
    SentenceExample: SequenceKind,
    PairExample: SequenceKind,
    TaggingExample: TaggingKind,
    QAExample: SpanKind,
    ChoiceExample: ChoiceKind,
    Seq2SeqExample: Seq2SeqKind,
}


def task_kind(info: TaskInfo) -> TaskKind:
    """The kind that fine-tunes ``info``'s examples."""
    if info.example_type not in KINDS:
        kind = info.example_type.__name__
        raise ConfigError(f"task {info.name!r} has examples of type {kind}, which no task kind handles")
    return KINDS[info.example_type](info)
