"""Task heads over any model's hidden states: pooling, sequence/token classification, span extraction, multiple choice.

A head never knows the model: it takes the final hidden states (B, T, C) and, where it pools, the 0/1
``attention_mask`` (B, T) of the batch (1 = real token, 0 = padding), and returns logits. Each head has a
``loss(logits, labels)`` method; the module-level losses check the labels and give clear errors.

    hidden = model(**batch).last_hidden_state            # (B, T, C), whichever model
    head = SequenceClassificationHead(C, n_labels=3)     # BERT: pooling="first"; GPT: pooling="last"
    logits = head(hidden, batch.attention_mask)          # (B, 3)
    loss = head.loss(logits, labels)                     # labels (B,)

Label conventions (those of BERT's fine-tuning and of ``transformers``): ``IGNORE_INDEX = -100`` marks tokens that
take no part in the loss (special tokens, padding, later sub-words); an unanswerable SQuAD 2.0 question points its
start and end at the null position, index 0 ([CLS]) unless told otherwise.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from minilm.objectives.labels import IGNORE_INDEX

NO_ANSWER = -1  # span target meaning "unanswerable"; SpanExtractionHead maps it to its null position
POOLING = ("first", "last", "mean")


# --- checks -----------------------------------------------------------------------------------------------------


def _check_hidden(hidden: Tensor, d_model: int | None = None) -> None:
    if hidden.dim() != 3:
        raise ValueError(f"hidden states must be (B, T, C), got shape {tuple(hidden.shape)}")
    if d_model is not None and hidden.size(-1) != d_model:
        raise ValueError(f"hidden states have C = {hidden.size(-1)}, but the head was built for d_model = {d_model}")


def _check_labels(labels: Tensor, n_labels: int, ignore_index: int | None = None) -> None:
    if labels.is_floating_point():
        raise ValueError(f"class labels must be integers, got {labels.dtype}")
    bad = (labels < 0) | (labels >= n_labels)
    if ignore_index is not None:
        bad &= labels != ignore_index
    if bad.any():
        raise ValueError(f"label {labels[bad][0].item()} is outside the task's {n_labels} labels (0..{n_labels - 1})")


# --- pooling ------------------------------------------------------------------------------------------------------


def pool(hidden: Tensor, attention_mask: Tensor | None = None, method: str = "first") -> Tensor:
    """(B, T, C) hidden states -> (B, C), one vector per sequence.

    ``first``: the first real token (BERT's [CLS]; position 0 with right padding).
    ``last``: the last real token (GPT: the only one that has seen the whole text), right or left padding alike.
    ``mean``: the mean over real tokens (Sentence-BERT).
    Without ``attention_mask`` every position is real.
    """
    _check_hidden(hidden)
    if method not in POOLING:
        raise ValueError(f"unknown pooling {method!r}; choose one of {POOLING}")
    B, T, C = hidden.shape
    if attention_mask is None:
        attention_mask = hidden.new_ones(B, T)
    if attention_mask.shape != (B, T):
        raise ValueError(f"attention_mask must be (B, T) = {(B, T)}, got {tuple(attention_mask.shape)}")
    real = attention_mask.bool()  # (B, T)
    if not real.any(dim=1).all():
        raise ValueError("a row of attention_mask has no real token to pool")
    if method == "mean":
        m = real.unsqueeze(-1).to(hidden.dtype)  # (B, T, 1)
        return (hidden * m).sum(dim=1) / m.sum(dim=1)  # (B, C)
    pos = torch.arange(T, device=hidden.device).expand(B, T)  # (B, T)
    if method == "first":
        index = pos.masked_fill(~real, T).amin(dim=1)  # (B,)
    else:
        index = pos.masked_fill(~real, -1).amax(dim=1)  # (B,)
    return hidden[torch.arange(B, device=hidden.device), index]  # (B, C)


# --- losses -------------------------------------------------------------------------------------------------------


def classification_loss(logits: Tensor, labels: Tensor, ignore_index: int = IGNORE_INDEX) -> Tensor:
    """Cross-entropy of logits (..., n_labels) against integer labels (...), skipping labels equal to ignore_index."""
    if logits.shape[:-1] != labels.shape:
        raise ValueError(f"labels of shape {tuple(labels.shape)} do not match logits of shape {tuple(logits.shape)}")
    _check_labels(labels, logits.size(-1), ignore_index)
    return F.cross_entropy(logits.flatten(0, -2), labels.flatten(), ignore_index=ignore_index)


def regression_loss(predictions: Tensor, targets: Tensor) -> Tensor:
    """Mean squared error; predictions (B, 1) or (B,), targets (B,)."""
    if predictions.dim() == targets.dim() + 1 and predictions.size(-1) == 1:
        predictions = predictions.squeeze(-1)  # (B,)
    if predictions.shape != targets.shape:
        raise ValueError(f"targets of shape {tuple(targets.shape)} do not match predictions {tuple(predictions.shape)}")
    return F.mse_loss(predictions, targets.to(predictions.dtype))


# --- sequence classification ------------------------------------------------------------------------------------


class SequenceClassificationHead(nn.Module):
    """Pool, (optionally BERT's pooler: dense + tanh), dropout, linear -> (B, n_labels). n_labels = 1: regression."""

    def __init__(
        self, d_model: int, n_labels: int, pooling: str = "first", dropout: float = 0.1, hidden_layer: bool = False
    ):
        super().__init__()
        if pooling not in POOLING:
            raise ValueError(f"unknown pooling {pooling!r}; choose one of {POOLING}")
        self.d_model, self.n_labels, self.pooling = d_model, n_labels, pooling
        self.dense = nn.Linear(d_model, d_model) if hidden_layer else None
        self.dropout = nn.Dropout(dropout)
        self.classifier = nn.Linear(d_model, n_labels)

    def forward(self, hidden: Tensor, attention_mask: Tensor | None = None) -> Tensor:
        _check_hidden(hidden, self.d_model)
        return self.classify(pool(hidden, attention_mask, self.pooling))  # (B, n_labels)

    def classify(self, pooled: Tensor) -> Tensor:
        """Already pooled vectors (B, C) -> (B, n_labels): e.g. GPT's sum of a pair's two orders."""
        x = torch.tanh(self.dense(pooled)) if self.dense is not None else pooled  # (B, C)
        return self.classifier(self.dropout(x))  # (B, n_labels)

    def loss(self, logits: Tensor, labels: Tensor) -> Tensor:
        """Cross-entropy with integer labels (B,); mean squared error with float targets (B,) when n_labels = 1."""
        if self.n_labels == 1:
            return regression_loss(logits, labels)
        return classification_loss(logits, labels)


# --- token classification ---------------------------------------------------------------------------------------


class TokenClassificationHead(nn.Module):
    """Dropout + linear on every position: (B, T, C) -> (B, T, n_labels) (NER, POS tagging)."""

    def __init__(self, d_model: int, n_labels: int, dropout: float = 0.1):
        super().__init__()
        self.d_model, self.n_labels = d_model, n_labels
        self.dropout = nn.Dropout(dropout)
        self.classifier = nn.Linear(d_model, n_labels)

    def forward(self, hidden: Tensor) -> Tensor:
        _check_hidden(hidden, self.d_model)
        return self.classifier(self.dropout(hidden))  # (B, T, n_labels)

    def loss(self, logits: Tensor, labels: Tensor) -> Tensor:
        """Cross-entropy over the labelled tokens; labels (B, T), IGNORE_INDEX where a token has no label."""
        return classification_loss(logits, labels)


def align_labels_to_tokens(
    word_labels: list[int], word_ids: list[int | None], label_all_subwords: bool = False
) -> list[int]:
    """Word labels -> token labels: the first sub-word of each word gets its word's label, other tokens IGNORE_INDEX.

    ``word_ids`` is one example's ``BatchEncoding.word_ids`` (None for special tokens and padding). With
    ``label_all_subwords`` the later sub-words of a word get its label too.
    """
    labels, previous = [], None
    for w in word_ids:
        if w is not None and not 0 <= w < len(word_labels):
            raise ValueError(f"word_ids refer to word {w}, but there are {len(word_labels)} word labels")
        first_subword = w is not None and w != previous
        labels.append(word_labels[w] if first_subword or (w is not None and label_all_subwords) else IGNORE_INDEX)
        previous = w
    return labels


def word_predictions(token_predictions: list[int] | Tensor, word_ids: list[int | None]) -> list[int]:
    """Token predictions (T,) -> one per word, in word order: the prediction of each word's first sub-word."""
    if isinstance(token_predictions, Tensor):
        token_predictions = token_predictions.tolist()
    if len(token_predictions) != len(word_ids):
        raise ValueError(f"{len(token_predictions)} token predictions for {len(word_ids)} word_ids")
    first = {}
    for p, w in zip(token_predictions, word_ids, strict=True):
        if w is not None and w not in first:
            first[w] = p
    return [first[w] for w in sorted(first)]


# --- span extraction (SQuAD) ------------------------------------------------------------------------------------


class SpanExtractionHead(nn.Module):
    """One Linear(C, 2): start and end logits (B, T) each. Unanswerable questions point at ``null_index`` ([CLS])."""

    def __init__(self, d_model: int, null_index: int = 0):
        super().__init__()
        self.d_model, self.null_index = d_model, null_index
        self.qa_outputs = nn.Linear(d_model, 2)

    def forward(self, hidden: Tensor) -> tuple[Tensor, Tensor]:
        _check_hidden(hidden, self.d_model)
        start_logits, end_logits = self.qa_outputs(hidden).unbind(dim=-1)  # (B, T), (B, T)
        return start_logits, end_logits

    def loss(self, start_logits: Tensor, end_logits: Tensor, start_positions: Tensor, end_positions: Tensor) -> Tensor:
        """Mean of the start and end cross-entropies; positions (B,), NO_ANSWER (-1) for an unanswerable question."""
        null = torch.full_like(start_positions, self.null_index)
        start_positions = torch.where(start_positions == NO_ANSWER, null, start_positions)  # (B,)
        end_positions = torch.where(end_positions == NO_ANSWER, null, end_positions)  # (B,)
        start_loss = classification_loss(start_logits, start_positions)
        end_loss = classification_loss(end_logits, end_positions)
        return (start_loss + end_loss) / 2


def best_span(
    start_logits: Tensor,
    end_logits: Tensor,
    context_mask: Tensor,
    max_answer_length: int = 30,
    null_index: int | None = 0,
    null_threshold: float = 0.0,
) -> tuple[int, int] | None:
    """One example's answer: the span (start, end), inclusive, maximising s_start + e_end, or None for no answer.

    A valid span has start <= end, end - start + 1 <= max_answer_length, and both ends in the context
    (``context_mask`` (T,), True/1 for context tokens). As in the BERT paper (SQuAD 2.0) the best span is
    returned only if its score beats the null score s_null + e_null + null_threshold; ``null_index=None`` always
    answers (SQuAD 1.1). Returns None as well when no span is valid.
    """
    if start_logits.dim() != 1 or start_logits.shape != end_logits.shape or context_mask.shape != start_logits.shape:
        raise ValueError("start_logits, end_logits and context_mask must all be (T,) for one example")
    if max_answer_length < 1:
        raise ValueError(f"max_answer_length must be >= 1, got {max_answer_length}")
    T = start_logits.size(0)
    ctx = context_mask.bool()  # (T,)
    band = torch.ones(T, T, dtype=torch.bool, device=ctx.device).triu(0).tril(max_answer_length - 1)  # j-i in [0, L)
    valid = band & ctx[:, None] & ctx[None, :]  # (T, T), [i, j]: span from i to j
    if not valid.any():
        return None
    scores = (start_logits[:, None] + end_logits[None, :]).masked_fill(~valid, float("-inf"))  # (T, T)
    best = scores.flatten().argmax()  # first maximum: smallest start, then smallest end
    if null_index is not None:
        null_score = start_logits[null_index] + end_logits[null_index]
        if not scores.flatten()[best] > null_score + null_threshold:
            return None
    return int(best // T), int(best % T)


# --- multiple choice --------------------------------------------------------------------------------------------


class MultipleChoiceHead(nn.Module):
    """One score per (question, choice) sequence: (B * n_choices, T, C) -> (B, n_choices) (SWAG, RACE).

    Flatten the batch's (B, n_choices, T) inputs to (B * n_choices, T) for the model, choices of one example
    consecutive, then pass ``n_choices`` here.
    """

    def __init__(self, d_model: int, dropout: float = 0.1, pooling: str = "first"):
        super().__init__()
        if pooling not in POOLING:
            raise ValueError(f"unknown pooling {pooling!r}; choose one of {POOLING}")
        self.d_model, self.pooling = d_model, pooling
        self.dropout = nn.Dropout(dropout)
        self.scorer = nn.Linear(d_model, 1)

    def forward(self, hidden: Tensor, attention_mask: Tensor | None = None, *, n_choices: int) -> Tensor:
        _check_hidden(hidden, self.d_model)
        if hidden.size(0) % n_choices:
            raise ValueError(f"{hidden.size(0)} sequences cannot be split into groups of n_choices = {n_choices}")
        x = pool(hidden, attention_mask, self.pooling)  # (B * n_choices, C)
        return self.scorer(self.dropout(x)).view(-1, n_choices)  # (B, n_choices)

    def loss(self, logits: Tensor, labels: Tensor) -> Tensor:
        """Cross-entropy over the choices; labels (B,), the index of the right choice."""
        return classification_loss(logits, labels)
