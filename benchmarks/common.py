"""What the benchmark scripts share: the timing options, round-robin timing, speed-up cells, the matmul used as the
machine's peak, the run header.

Each script sets ``OMP_WAIT_POLICY`` itself before importing torch (it must come first); import this after.
"""

from __future__ import annotations

import argparse
import datetime
import functools
import os
import platform
import statistics
import subprocess
import sys
import time
import warnings

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
            f"{os.cpu_count()} CPUs ({cpu_model()})",
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


def cpu_model() -> str:
    """The processor's name (/proc/cpuinfo's "model name"), else its architecture: the same script's figures move
    with the machine kind, so the recorded results name it."""
    try:
        with open("/proc/cpuinfo") as cpuinfo:
            return next(line.split(":", 1)[1].strip() for line in cpuinfo if line.startswith("model name"))
    except (OSError, StopIteration):
        return platform.processor() or platform.machine()


def timing_args(parser: argparse.ArgumentParser, rounds: int, quick: int = 4, warmup: int = 2, note: str = ""):
    """Parse the command line with the options every benchmark has, --quick and --threads, after the script's own;
    sets ``args.rounds``, ``args.warmup`` (1 with --quick) and ``args.thread_counts``."""
    parser.add_argument("--quick", action="store_true", help=f"{quick} timed rounds instead of {rounds}{note}")
    parser.add_argument(
        "--threads", default="2,1", help="comma-separated torch thread counts, timed one after the other (2,1)"
    )
    args = parser.parse_args()
    args.rounds, args.warmup = (quick, 1) if args.quick else (rounds, warmup)
    args.thread_counts = [int(t) for t in args.threads.split(",")]
    return args


def speed_up_cells(name: str, primary: str, seconds: float, cpu_seconds: float, ours: float, ours_cpu: float):
    """The table cells "their time / ours" by wall clock and by CPU time; a dash on the primary variant's row."""
    if name == primary:
        return "—", "—"
    return f"{seconds / ours:.2f}x", f"{cpu_seconds / ours_cpu:.2f}x"


def speed_up_table(median: dict[str, tuple[float, float]], primary: str, units: float, unit: str = "tokens"):
    """The markdown table of round-robin medians ({variant: (seconds, CPU seconds)} per step, ``units`` per step):
    time and rate of each variant and how much slower it is than ``primary``, by wall clock and by CPU time."""
    ours, ours_cpu = median[primary]
    rows = [
        f"| variant | ms/step | {unit}/s | minilm speed-up | CPU ms/step | speed-up by CPU time |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for name, (seconds, cpu_seconds) in median.items():
        speed_up, cpu_speed_up = speed_up_cells(name, primary, seconds, cpu_seconds, ours, ours_cpu)
        rows.append(
            f"| {name} | {1000 * seconds:.0f} | {units / seconds:,.0f} | {speed_up} | {1000 * cpu_seconds:.0f} | "
            f"{cpu_speed_up} |"
        )
    return rows


def import_transformers():
    """transformers, with its warnings and log messages silenced (they would break up the printed tables)."""
    warnings.filterwarnings("ignore", module="transformers")
    import transformers

    transformers.logging.set_verbosity_error()
    return transformers


# ------------------------------------------------------------------------------------------ peak memory
# The kernel keeps a process's resident-memory high-water mark (VmHWM), so each variant is measured in a fresh process:
# the script runs itself again with --peak-memory-of NAME, builds that variant alone and reports how far its resident
# memory rose above what it held before the steps (the step's activations, logits, gradients, optimizer state).
# (Not ru_maxrss: a child started by fork + exec inherits its parent's.)


def peak_memory_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--peak-memory-of", metavar="VARIANT", help=argparse.SUPPRESS)  # internal: the child's job


def step_peak_memory(step, steps: int = 3) -> None:
    """In the child process: run ``steps`` calls of ``step``; print the MiB the resident set rose above its size
    before them."""
    before = _resident_kib("VmRSS")
    for _ in range(steps):
        step()
    print(f"peak-memory {(_resident_kib('VmHWM') - before) / 1024:.1f}")


def _resident_kib(field: str) -> int:
    """VmRSS (resident now) or VmHWM (the most ever resident) of this process, in KiB (Linux)."""
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith(f"{field}:"))


@functools.cache
def peak_memory_mib(variant: str) -> float:
    """In the parent: the step peak memory (MiB) of ``variant``, measured once, at 1 thread, in a fresh run of this
    script (memory does not depend on the thread count)."""
    command = [sys.executable, *sys.argv, "--threads", "1", "--peak-memory-of", variant]
    out = subprocess.run(command, capture_output=True, text=True, check=True).stdout
    return float(out.split("peak-memory ")[-1])
