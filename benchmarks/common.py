"""What the benchmark scripts share, so that each script says only what it measures: the timing options, round-robin
timing (with the matmul used as the machine's peak), the per-thread-count tables of speed-ups over the primary
variant, the Trainer and the hand training loop that a transformers model runs beside it, the greedy hand loop over a
transformers encoder-decoder's KV cache, peak memory, the run header.

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
from collections.abc import Callable, Iterable, Sequence

import torch

from minilm.train.trainer import BatchOrder, TrainConfig, Trainer, lr_lambda, parameter_groups
from minilm.utils import count_parameters

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


def speed_up_header(
    per_step: Iterable[str], extra: Iterable[str] = (), per: str = "step", lead: Sequence[tuple[str, str]] = ()
) -> list[str]:
    """The header and alignment lines of a speed-up table: ``lead`` columns ((name, "---" or "---:") pairs), variant,
    ms per ``per``, a rate for each of ``per_step`` (e.g. "tokens" -> "tokens/s"), the speed-ups by wall clock and by
    CPU time around the CPU time, then the ``extra`` columns (numbers, right-aligned)."""
    columns = [name for name, _ in lead] + ["variant", f"ms/{per}", *(f"{unit}/s" for unit in per_step)]
    columns += ["minilm speed-up", f"CPU ms/{per}", "speed-up by CPU time", *extra]
    aligns = [align for _, align in lead] + ["---"] + ["---:"] * (len(columns) - len(lead) - 1)
    return [f"| {' | '.join(columns)} |", f"|{'|'.join(aligns)}|"]


def speed_up_rows(
    median: dict[str, tuple[float, float]],
    primary: str,
    per_step: dict[str, float],
    extra: dict[str, Callable[[str, float], str]] | None = None,
    lead: Sequence[str] = (),
    primary_of: dict[str, str] | None = None,
) -> list[str]:
    """One row per variant of the round-robin medians ({variant: (seconds, CPU seconds)} per step): the ``lead``
    cells, its time, its rate in each unit of ``per_step`` ({unit: units per step}), how much slower it is than its
    primary variant (``primary_of.get(variant, primary)``) by wall clock and by CPU time, its CPU time, then each
    ``extra`` column's cell(variant, seconds)."""
    rows = []
    for name, (seconds, cpu_seconds) in median.items():
        ours = (primary_of or {}).get(name, primary)
        speed_up, cpu_speed_up = speed_up_cells(name, ours, seconds, cpu_seconds, *median[ours])
        cells = [*lead, name, f"{1000 * seconds:.0f}", *(f"{units / seconds:,.0f}" for units in per_step.values())]
        cells += [speed_up, f"{1000 * cpu_seconds:.0f}", cpu_speed_up]
        cells += [cell(name, seconds) for cell in (extra or {}).values()]
        rows.append(f"| {' | '.join(cells)} |")
    return rows


def speed_up_table(
    median: dict[str, tuple[float, float]],
    primary: str,
    per_step: dict[str, float],
    extra: dict[str, Callable[[str, float], str]] | None = None,
    primary_of: dict[str, str] | None = None,
) -> list[str]:
    """The markdown table of round-robin medians, header included (``speed_up_header`` and ``speed_up_rows``): time
    and rates of each variant and how much slower it is than ``primary``, by wall clock and by CPU time."""
    header = speed_up_header(per_step, extra or {})
    return header + speed_up_rows(median, primary, per_step, extra, primary_of=primary_of)


PEAK_MEMORY = {"step peak memory (MiB)": lambda name, seconds: f"{peak_memory_mib(name):.0f}"}  # an extra column


def mfu_columns(flops_per_step: float, peak: float, header: str = "model GFLOP/s") -> dict:
    """Extra columns: the model FLOP/s achieved at a step's time, and that over the matmul ``peak`` (MFU)."""
    return {
        header: lambda name, seconds: f"{flops_per_step / seconds / 1e9:.0f}",
        "MFU": lambda name, seconds: f"{flops_per_step / seconds / peak:.0%}",
    }


def threads_label(threads: int) -> str:
    """How each table's caption starts: "**1 thread**", "**2 threads**"."""
    return f"**{threads} thread{'s' if threads > 1 else ''}**"


def rounds_note(threads: int, rounds: int, what: str = "steps") -> str:
    """The start of a table's caption: "**2 threads**, median of 12 steps of each, round-robin"."""
    return f"{threads_label(threads)}, median of {rounds} {what} of each, round-robin"


def print_per_thread_count(thread_counts: Iterable[int], table: Callable[[int], str]) -> None:
    """For each thread count: torch.set_num_threads, then print ``table(threads)``; a blank line between them."""
    for i, threads in enumerate(thread_counts):
        if i:
            print()
        torch.set_num_threads(threads)
        print(table(threads))


def print_table(columns: Sequence[str], rows: Iterable[Sequence[str]], right: int = 0) -> None:
    """A markdown table of text cells; the last ``right`` columns right-aligned."""
    print(f"| {' | '.join(columns)} |\n|{'|'.join(['---'] * (len(columns) - right) + ['---:'] * right)}|")
    for row in rows:
        print(f"| {' | '.join(row)} |")


def time_with_matmul_peak(variants: dict, rounds: int, warmup: int) -> tuple[dict, dict, float]:
    """``time_round_robin`` with one PEAK_N^3 fp32 matmul timed in each round beside the variants, under the same
    load: the variants' medians and first outputs, and the matmul peak (FLOP/s, its median) for the MFU."""
    median, first = time_round_robin(variants | {"matmul peak": matmul_step()}, rounds, warmup=warmup)
    return median, first, 2 * PEAK_N**3 / median.pop("matmul peak")[0]


def matmul_peak_note(peak: float) -> str:
    """The caption's words for the matmul peak (FLOP/s) of ``time_with_matmul_peak``."""
    return f"matmul peak ({PEAK_N}^3 fp32, median): {peak / 1e9:.0f} GFLOP/s"


def same_parameter_count(model: torch.nn.Module, reference: torch.nn.Module, what: str = "parameter counts") -> int:
    """The parameter count of ``model``; stops the script unless ``reference`` (transformers') has as many."""
    n_minilm, n_transformers = count_parameters(model), count_parameters(reference)
    if n_minilm != n_transformers:
        raise SystemExit(f"{what} differ: minilm {n_minilm:,}, transformers {n_transformers:,}")
    return n_minilm


# ------------------------------------------------------------------------------------------ training steps


def train_config(batch_size: int) -> TrainConfig:
    """The TrainConfig of every training benchmark: the CLI's defaults (optimizer, clipping, schedule) on the CPU,
    without progress bar, files or logging, and a max_steps no benchmark reaches."""
    return TrainConfig(batch_size=batch_size, device="cpu", progress=False, max_steps=10**9, log_every=10**9)


def minilm_trainer(model, loss_fn, data, batch_size: int, **options) -> Trainer:
    """A Trainer as the CLI builds it (fused AdamW on CPU, clipping 1.0, warm-up + cosine LambdaLR); ``options``:
    e.g. its collate and counts."""
    return Trainer(model, loss_fn, data, config=train_config(batch_size), **options)


def ordered_batches(data: list, batch_size: int, collate: Callable) -> Callable[[int], dict]:
    """step -> the batch the Trainer reads at that step (its BatchOrder over ``data``, then ``collate``)."""
    order = BatchOrder(len(data), batch_size, train_config(batch_size).seed)
    return lambda step: collate([data[i] for i in order.indices(step)])


def hand_train_step(
    model,
    loss_of: Callable,
    batches: Callable[[int], dict],
    batch_size: int,
    fused: bool | None = True,
    config: TrainConfig | None = None,
    autocast: torch.dtype | None = None,
):
    """The Trainer's step written out for a model outside it (transformers'), so that a ratio is about the model,
    not the loop: AdamW over ``parameter_groups`` with train_config's lr, betas, eps and weight decay (``fused``: True,
    as the Trainer runs it on CPU; None: torch's default), LambdaLR(lr_lambda), and each step ``batches(step)``,
    ``model.train()``, ``loss_of(batch)``, backward, clipping at grad_clip, the optimizer and scheduler steps,
    zero_grad. ``loss_of`` returns the loss, or (loss, *more); the step returns ``loss.item()``, or (loss.item(),
    *more) with the tensors among ``more`` as numbers. ``config``: another TrainConfig than train_config's (a GPU's);
    ``autocast``: the forward under torch.autocast in that dtype on the config's device."""
    config = config or train_config(batch_size)
    device_type = torch.device(config.device).type
    optimizer = torch.optim.AdamW(
        parameter_groups(model, config.weight_decay),
        lr=config.lr,
        betas=(config.beta1, config.beta2),
        eps=config.eps,
        fused=fused,
    )
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lr_lambda(config))
    step = 0

    def train_step():
        nonlocal step
        batch = batches(step)
        step += 1
        model.train()
        with torch.autocast(device_type, dtype=autocast, enabled=autocast is not None):
            out = loss_of(batch)
        loss, more = (out[0], out[1:]) if isinstance(out, tuple) else (out, None)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), config.grad_clip)
        optimizer.step()
        scheduler.step()
        optimizer.zero_grad(set_to_none=True)
        if more is None:
            return loss.item()
        return (loss.item(), *(x.item() if isinstance(x, torch.Tensor) else x for x in more))

    return train_step


def labels_loss(model, keys: Iterable[str] = ("input_ids", "attention_mask", "labels")) -> Callable:
    """batch -> the transformers model's own loss, from the batch's ``keys`` as keyword arguments (``labels=``)."""
    keys = tuple(keys)
    return lambda batch: model(**{key: batch[key] for key in keys}).loss


def optimizer_note(fused: bool = True) -> str:
    """The optimizer settings both sides of a training benchmark share, for the config line."""
    t = train_config(1)
    return (
        f"AdamW lr {t.lr:g}, betas ({t.beta1}, {t.beta2}), weight decay {t.weight_decay} on matrices, "
        f"{'fused, ' if fused else ''}grad clip {t.grad_clip}, {t.schedule} schedule with {t.warmup_steps} warm-up "
        "steps"
    )


def recording(steps: dict[str, Callable]) -> tuple[dict[str, Callable], dict[str, list[float]]]:
    """Each variant's step (``steps``: {variant: a function that builds it}) built and wrapped so that it also
    appends its loss to the variant's list; the steps and the lists."""
    losses = {name: [] for name in steps}

    def recorded(step, losses: list[float]):
        def run() -> float:
            losses.append(step())
            return losses[-1]

        return run

    return {name: recorded(build(), losses[name]) for name, build in steps.items()}, losses


def largest_loss_difference(losses: dict[str, list[float]], pairs: dict[str, str]) -> tuple[float, int]:
    """The largest |loss difference| between the variants of each pair ({variant: the one it is compared with}, pairs
    whose variant was not run left out) over the steps all ran, and that number of steps."""
    n_steps = min(map(len, losses.values()))
    drift = max(
        abs(losses[ours][i] - losses[theirs][i])
        for ours, theirs in pairs.items()
        if ours in losses
        for i in range(n_steps)
    )
    return drift, n_steps


# ------------------------------------------------------------------------------------------ seq2seq generation


@torch.no_grad()
def greedy_hand_loop(model, ids, mask, new_tokens: int, eos: int) -> torch.Tensor:
    """Greedy decoding calling a transformers encoder-decoder directly: the encoder once, then the decoder one
    position at a time with its past_key_values, ``eos`` banned (what generate() wraps)."""
    encoder_outputs = model.get_encoder()(input_ids=ids, attention_mask=mask)
    new = torch.full((ids.size(0), 1), model.config.decoder_start_token_id, dtype=torch.long)
    out, past = new, None
    for _ in range(new_tokens):
        result = model(
            encoder_outputs=encoder_outputs,
            attention_mask=mask,
            decoder_input_ids=new,
            past_key_values=past,
            use_cache=True,
        )
        past = result.past_key_values
        logits = result.logits[:, -1]
        logits[:, eos] = -float("inf")  # min_new_tokens = new_tokens
        new = logits.argmax(-1, keepdim=True)  # (B, 1)
        out = torch.cat([out, new], dim=1)
    return out


HAND_LOOP = "transformers model, hand loop over its KV cache"


def seq2seq_variants(generators: dict[str, Callable], reference, eos: int, new_tokens: int) -> Callable:
    """``variants(ids, mask, beams)`` for ``seq2seq_generation_table``: each of ``generators`` ({name:
    generate(ids, mask, beams)}, minilm's and transformers'), and for greedy search the transformers ``reference``
    called directly in ``greedy_hand_loop``."""

    def variants(ids: torch.Tensor, mask: torch.Tensor, beams: int) -> dict:
        calls = {name: functools.partial(generate, ids, mask, beams) for name, generate in generators.items()}
        if beams == 1:
            calls[HAND_LOOP] = functools.partial(greedy_hand_loop, reference, ids, mask, new_tokens, eos)
        return calls

    return variants


def seq2seq_generation_table(
    threads: int,
    rounds: int,
    sources: Callable[[int], tuple[torch.Tensor, torch.Tensor]],
    variants: Callable[[torch.Tensor, torch.Tensor, int], dict],
    primary: str,
    new_tokens: int,
    source_lengths: Sequence[int],
    beams: int,
) -> str:
    """Batch 1 and batch len(source_lengths) (``sources(batch)``: ids and mask), greedy and beam search with
    ``beams`` beams: ``variants(ids, mask, beams)`` ({name: a call that generates}) timed round-robin, the script
    stopped unless all made the same ``new_tokens`` tokens as ``primary`` (minilm's), and the table of their speed."""
    rows = [
        f"{threads_label(threads)}: {new_tokens} new tokens (</s> banned); median of {rounds} runs each, "
        "round-robin (speed-up: their time / minilm's)\n",
        *speed_up_header(["new tokens"], per="run", lead=[("batch", "---:"), ("search", "---")]),
    ]
    for batch in (1, len(source_lengths)):
        ids, mask = sources(batch)
        for n_beams in (1, beams):
            median, outputs = time_round_robin(variants(ids, mask, n_beams), rounds, warmup=1)
            for name, output in outputs.items():
                if output.shape != (batch, 1 + new_tokens) or not torch.equal(output, outputs[primary]):
                    raise SystemExit(f"{name!r} generated other tokens than minilm (batch {batch}, {n_beams} beams)")
            label = f"{batch}" if batch == 1 else f"{batch} (sources {'/'.join(map(str, source_lengths))})"
            search = "greedy" if n_beams == 1 else f"beam search, {n_beams} beams"
            rows += speed_up_rows(median, primary, {"new tokens": batch * new_tokens}, lead=(label, search))
    return "\n".join(rows)


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


def peak_memory_child(steps: dict[str, Callable], variant: str) -> None:
    """In the child process, at 1 thread: build ``variant``'s step alone (``steps``: {variant: a function that builds
    its step}) and print its step peak memory."""
    torch.set_num_threads(1)
    step_peak_memory(steps[variant]())


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
