"""Toy sequence-to-sequence tasks that a tiny Transformer learns in seconds (Chapter 0).

Vocabulary: 0 = PAD, 1 = BOS, 2 = EOS, then ``n_symbols`` symbols 3, 4, ... A batch is (src, tgt):
src (B, max_len) the symbols padded with PAD; tgt (B, max_len + 2) = BOS, the answer, EOS, padding. Train with
decoder input ``tgt[:, :-1]`` and targets ``tgt[:, 1:]`` (teacher forcing).
"""

from __future__ import annotations

import torch

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
