"""Multi-task training: how often each task's examples are drawn (T5, Raffel et al. 2020, §3.5.2).

Training on several tasks at once mixes their data sets into one stream; what matters is the rate r_m at which task
m's examples are drawn. The three strategies T5 compares (``mixing=``):

``proportional``  examples-proportional mixing with an artificial data set size limit K (``mixing_limit=``):
                  r_m = min(e_m, K) / Σ_n min(e_n, K), e_m being task m's training examples. Without a limit this
                  is "equivalent to concatenating the data sets for all tasks and randomly sampling examples from
                  the combined data set"; K keeps the largest data sets from crowding out the others.
``temperature``   temperature-scaled mixing: "we raise each mixing rate r_m to the power of 1/T and renormalize the
                  rates so that they sum to 1" (``mixing_temperature=`` T). T = 1 is examples-proportional mixing,
                  and "as T increases the proportions become closer to equal mixing"; the limit K still applies to
                  r_m before scaling (T5 kept it at 2^21, as here by default).
``equal``         "we sample examples from each task with equal probability": r_m = 1/N.

The default limit, 2^21 = 2,097,152, is T5's "large value of K" and larger than any course task, so proportional
mixing is, by default, plain concatenation. The default temperature, 2, is the mildest T5 tried.

:func:`mix` draws the training stream: for each of the run's ``max_steps x batch_size`` examples a task is drawn
with the rates, and that task hands out its next example, each task's examples cycled in a fresh shuffled order per
pass (so a small task repeats only once it has shown every example). The draw is a function of the seed alone,
so a resumed run rebuilds the same stream and continues it; resuming with another max_steps or batch_size draws
a stream of the new length.
"""

from __future__ import annotations

import math
import random
from collections.abc import Iterator, Sequence
from typing import TypeVar

from minilm.train.config import ConfigError

T = TypeVar("T")

MIXING = {  # mixing=: strategy -> what it does
    "proportional": "r_m ∝ min(e_m, K): examples-proportional, data set sizes capped at mixing_limit=K",
    "temperature": "r_m ∝ (that rate)^(1/T), T = mixing_temperature: from proportional (T=1) towards equal",
    "equal": "r_m = 1/N: every task as often, whatever its size",
}
DEFAULT_LIMIT = 2**21  # T5's K for temperature scaling: larger than any course task, so no limit in effect
DEFAULT_TEMPERATURE = 2.0


def mixing_rates(
    sizes: Sequence[int], strategy: str, limit: int = DEFAULT_LIMIT, temperature: float = DEFAULT_TEMPERATURE
) -> list[float]:
    """The rate r_m at which each task's examples are drawn, summing to 1, from the tasks' training sizes e_m."""
    if strategy not in MIXING:
        raise ConfigError(f"mixing={strategy!r} is not one of {', '.join(MIXING)}")
    if not sizes or any(e < 1 for e in sizes):
        raise ConfigError(f"every task needs training examples to mix, got sizes {list(sizes)}")
    if limit < 1 or not (temperature > 0 and math.isfinite(temperature)):
        raise ConfigError(f"mixing_limit must be >= 1 and mixing_temperature > 0, got {limit} and {temperature}")
    if strategy == "equal":
        return [1 / len(sizes)] * len(sizes)
    capped = [min(e, limit) for e in sizes]
    rates = [e / sum(capped) for e in capped]
    if strategy == "temperature":
        scaled = [r ** (1 / temperature) for r in rates]
        rates = [s / sum(scaled) for s in scaled]
    return rates


def _cycle(examples: Sequence[T], rng: random.Random) -> Iterator[T]:
    """``examples`` over and over, each pass in a new shuffled order."""
    order = list(range(len(examples)))
    while True:
        rng.shuffle(order)
        yield from (examples[i] for i in order)


def mix(datasets: Sequence[Sequence[T]], rates: Sequence[float], n: int, seed: int) -> list[T]:
    """``n`` examples drawn task by task with ``rates`` (one rate per data set), each data set cycled in shuffled
    order; the same seed gives the same stream, and the first k examples of a longer stream are those of a shorter
    one."""
    if len(datasets) != len(rates):
        raise ValueError(f"{len(datasets)} data sets for {len(rates)} rates")
    tasks = random.Random(seed).choices(range(len(datasets)), weights=rates, k=n)
    # each task's order has its own generator, so the task draws above never shift it
    streams = [_cycle(data, random.Random(seed * 1_000_003 + m)) for m, data in enumerate(datasets)]
    return [next(streams[m]) for m in tasks]
