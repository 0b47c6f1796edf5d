"""Toy tasks that a tiny model learns in seconds.

:func:`sequence_task_batch` (Chapter 0): copy or reverse a sequence of symbols. Vocabulary: 0 = PAD, 1 = BOS,
2 = EOS, then ``n_symbols`` symbols 3, 4, ... A batch is (src, tgt): src (B, max_len) the symbols padded with PAD;
tgt (B, max_len + 2) = BOS, the answer, EOS, padding. Train with decoder input ``tgt[:, :-1]`` and targets
``tgt[:, 1:]`` (teacher forcing).

:func:`colour_questions` (Chapters 7, 8): reading comprehension as text to text, a question whose answer is in the
context and nowhere else.
"""

from __future__ import annotations

import random

import torch

from minilm.data.examples import Seq2SeqExample

THINGS = ("car", "hat", "door", "boat", "kite", "lamp")
COLOURS = ("red", "blue", "green", "black", "white", "pink")

PAD, BOS, EOS = 0, 1, 2
FIRST_SYMBOL = 3


def sequence_task_batch(
    batch_size: int,
    task: str = "reverse",
    n_symbols: int = 10,
    min_len: int = 4,
    max_len: int = 10,
    generator: torch.Generator | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Random sequences of ``min_len``..``max_len`` symbols and their ``task`` ("copy" or "reverse") answers."""
    if task not in ("copy", "reverse"):
        raise ValueError(f"unknown task {task!r}; expected 'copy' or 'reverse'")
    lengths = torch.randint(min_len, max_len + 1, (batch_size,), generator=generator)
    symbols = torch.randint(FIRST_SYMBOL, FIRST_SYMBOL + n_symbols, (batch_size, max_len), generator=generator)
    positions = torch.arange(max_len)
    real = positions < lengths[:, None]  # (B, max_len)
    src = torch.where(real, symbols, PAD)
    if task == "reverse":  # position i of the answer holds symbol length - 1 - i
        flipped = (lengths[:, None] - 1 - positions).clamp(min=0)
        answer = torch.where(real, symbols.gather(1, flipped), PAD)
    else:
        answer = src
    tgt = torch.full((batch_size, max_len + 2), PAD)
    tgt[:, 0] = BOS
    tgt[:, 1:-1] = answer
    tgt[torch.arange(batch_size), lengths + 1] = EOS
    return src, tgt


def exact_match(generated: torch.Tensor, tgt: torch.Tensor) -> torch.Tensor:
    """(B,) bool: the generated ids equal the answer and its EOS (``tgt`` as from :func:`sequence_task_batch`)."""
    reference = tgt[:, 1:]  # answer, EOS, padding
    n = reference.size(1)
    generated = torch.nn.functional.pad(generated[:, :n], (0, max(0, n - generated.size(1))), value=PAD)
    return ((generated == reference) | (reference == PAD)).all(dim=1)


def colour_questions(split: str, n: int, with_context: bool = True) -> list[Seq2SeqExample]:
    """``n`` examples ``question: what colour is the car ? context: the hat is blue . the car is red .`` -> ``red``
    (two facts about two of six things, in random order; the same ``split`` name gives the same examples).

    A constant answer scores about 1/6, copying either colour of the context 1/2; more needs the thing asked about
    bound to its colour. ``with_context=False`` drops the context: a control that can only learn the colours'
    frequencies."""
    rng = random.Random(split)
    examples = []
    for i in range(n):
        thing, other = rng.sample(THINGS, 2)
        colour, decoy = rng.sample(COLOURS, 2)
        facts = [f"the {thing} is {colour} .", f"the {other} is {decoy} ."]
        rng.shuffle(facts)
        context = f" context: {' '.join(facts)}" if with_context else ""
        examples.append(
            Seq2SeqExample(f"{split}{i}", f"question: what colour is the {thing} ?{context}", colour, (colour,))
        )
    return examples
