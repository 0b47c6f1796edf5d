"""What the benchmark scripts share: round-robin timing, the matmul used as the machine's peak, the run header.

Each script sets ``OMP_WAIT_POLICY`` itself before importing torch (it must come first); import this after.
"""

from __future__ import annotations

import datetime
import os
import platform
import statistics
import sys
import time

import torch

PEAK_N = 2048  # the n x n x n fp32 matmul whose median time gives the matmul peak for MFU


def time_round_robin(variants: dict, rounds: int, warmup: int = 1) -> tuple[dict[str, tuple[float, float]], dict]:
    """Median (wall-clock, process CPU) seconds per call of each zero-argument callable, and its first output.

    ``warmup`` calls each (the first one's result is returned, e.g. to check that variants agree), then ``rounds``
    rounds of one call each; each round starts one variant later than the last, so none always runs right after the
    same other. The CPU time (all of this process's threads) does not count the time other processes hold the
    cores, so it moves less than the wall clock on a shared machine.
    """
    first = {}
    for name, fn in variants.items():
        first[name] = fn()
        for _ in range(warmup - 1):
            fn()
    names = list(variants)
    wall, cpu = {name: [] for name in names}, {name: [] for name in names}
    for r in range(rounds):
        for name in names[r % len(names) :] + names[: r % len(names)]:
            start, start_cpu = time.perf_counter(), time.process_time()
            variants[name]()
            cpu[name].append(time.process_time() - start_cpu)
            wall[name].append(time.perf_counter() - start)
    medians = {name: (statistics.median(wall[name]), statistics.median(cpu[name])) for name in names}
    return medians, first


def matmul_step(n: int = PEAK_N):
    a, b = torch.randn(n, n), torch.randn(n, n)
    return lambda: torch.mm(a, b)


def run_header(*versions: str, load: float | None = None) -> str:
    """Date, command and machine of a run (``versions``: e.g. "transformers 5.23.0"), for the recorded results."""
    load = os.getloadavg()[0] if load is None else load
    machine = ", ".join(
        [
            f"{os.cpu_count()} CPUs ({platform.processor() or platform.machine()})",
            f"torch {torch.__version__}",
            *versions,
            f"OMP_WAIT_POLICY={os.environ.get('OMP_WAIT_POLICY')}",
            f"Python {platform.python_version()}",
        ]
    )
    return (
        f"date: {datetime.date.today()}; command: python {' '.join(sys.argv)}\n"
        f"machine: {machine}; load average {load:.1f} at start"
    )
