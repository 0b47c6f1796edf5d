"""Small helpers shared by the library, the chapters and the labs."""

from __future__ import annotations

import random


def reproducible(seed: int = 0, threads: int = 1) -> None:
    """Seed every random generator and pin torch's thread count.

    Same seed and same thread count give bitwise-identical CPU runs; a different thread count changes the order
    of floating-point sums, so chapters pin it (1 thread is also the fastest choice inside a notebook kernel on
    a small machine where pytest competes for the cores).

    It leaves ``OMP_WAIT_POLICY`` alone: the test suite and CI set it to PASSIVE, so that idle threads do not spin on
    cores pytest needs, but on a machine of your own PASSIVE threads make decoding (thousands of tiny operations,
    each waking them) several times slower, and a library must not choose that for you.
    """
    import torch

    seed_all(seed)
    torch.set_num_threads(threads)


def seed_all(seed: int) -> None:
    """Seed Python's, NumPy's and torch's generators (CPU and every GPU)."""
    import numpy as np
    import torch

    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def count_parameters(module, trainable_only: bool = False) -> int:
    """Number of scalar parameters in ``module`` (works on the meta device: nothing is allocated)."""
    return sum(p.numel() for p in module.parameters() if p.requires_grad or not trainable_only)


def format_count(n: int) -> str:
    """A parameter count for people: "3.40M" or "1.20B" from a million up, the exact "1,538" below (a frozen body's
    head must not read "0.00M")."""
    if n >= 1_000_000_000:
        return f"{n / 1e9:.2f}B"
    if n >= 1_000_000:
        return f"{n / 1e6:.2f}M"
    return f"{n:,}"
