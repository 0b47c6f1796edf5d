"""Reference vs fused scaled dot-product attention (forward + backward), and how long ``import minilm`` takes.

    python benchmarks/attention.py           # 7 timed rounds per case
    python benchmarks/attention.py --quick   # 3 rounds
    python benchmarks/attention.py --threads 1

Prints markdown tables (paste them into benchmarks/README.md). Each case is warmed up first; the variants are then
timed round-robin (reference, fused, reference, ...) so that a noisy machine slows both alike, and the median of
the rounds is reported. Import times are measured in fresh subprocesses, so nothing is cached in this one.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from functools import partial

# Idle OpenMP threads that spin steal the CPU from the other thread on a small, shared machine (at a load above
# the core count, T=128 ran 20x slower). Must be set before torch starts its thread pool.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import torch  # noqa: E402
from common import run_header, time_round_robin  # noqa: E402

from minilm.nn import scaled_dot_product_attention, scaled_dot_product_attention_reference  # noqa: E402

BATCH, HEADS, HEAD_SIZE = 4, 8, 64
SEQUENCE_LENGTHS = (128, 512, 1024)
IMPORTS = {  # label: code run by a fresh `python -c`
    "python -c pass": "pass",
    "import torch": "import torch",
    "import minilm": "import minilm",
    "import minilm.nn": "import minilm.nn",
}


def attention_step(attention, q, k, v, grad_out, is_causal):
    """One forward + backward pass; returns the gradients wrt q, k, v."""
    out = attention(q, k, v, is_causal=is_causal)
    out = out[0] if isinstance(out, tuple) else out  # the reference also returns the weights
    return torch.autograd.grad(out, (q, k, v), grad_out)


def attention_table(rounds: int) -> str:
    rows = ["| T | mask | reference (ms) | fused (ms) | speed-up |", "|---:|---|---:|---:|---:|"]
    for seq_len in SEQUENCE_LENGTHS:
        shape = (BATCH, HEADS, seq_len, HEAD_SIZE)
        q, k, v = (torch.randn(shape, requires_grad=True) for _ in range(3))
        grad_out = torch.randn(shape)
        for is_causal in (False, True):
            variants = {
                name: partial(attention_step, fn, q, k, v, grad_out, is_causal)
                for name, fn in [
                    ("reference", scaled_dot_product_attention_reference),
                    ("fused", scaled_dot_product_attention),
                ]
            }
            median, _ = time_round_robin(variants, rounds)
            ref_ms, fused_ms = 1000 * median["reference"][0], 1000 * median["fused"][0]
            mask = "causal" if is_causal else "none"
            rows.append(f"| {seq_len} | {mask} | {ref_ms:.1f} | {fused_ms:.1f} | {ref_ms / fused_ms:.1f}x |")
    return "\n".join(rows)


def import_table(runs: int) -> str:
    rows = ["| command | median (ms) |", "|---|---:|"]
    for label, code in IMPORTS.items():
        times = []
        for _ in range(runs):
            start = time.perf_counter()
            subprocess.run([sys.executable, "-c", code], check=True)
            times.append(time.perf_counter() - start)
        rows.append(f"| `{label}` | {1000 * statistics.median(times):.0f} |")
    return "\n".join(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="3 timed rounds instead of 7 (imports: 3 runs, not 5)")
    parser.add_argument("--threads", type=int, help="torch threads (default: torch's choice, one per core)")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    rounds, import_runs = (3, 3) if args.quick else (7, 5)

    print(run_header(f"{torch.get_num_threads()} torch threads"))
    print(f"\nAttention forward + backward, B={BATCH}, nh={HEADS}, hs={HEAD_SIZE}, fp32, median of {rounds}:\n")
    print(attention_table(rounds))
    print(f"\nImport time in a fresh interpreter (wall clock of the whole process), median of {import_runs}:\n")
    print(import_table(import_runs))


if __name__ == "__main__":
    main()
