"""The GPU check: one command that trains minilm's models on a CUDA GPU the ways a researcher would, measures them
beside transformers, and checks what a GPU can break (mixed precision, compilation, exact resume, FSDP).

    python benchmarks/gpu.py                     # on a GPU: every row, about 5 minutes on one H100
    python benchmarks/gpu.py --json gpu.json     # also write the rows as JSON (default: benchmarks/gpu.json)
    python benchmarks/gpu.py --quick             # tiny sizes on whatever device there is (the test suite: CPU)

Rows, each a training step through the real ``Trainer.train_step`` (forward, loss, backward, clipping at 1.0, fused
AdamW, LambdaLR) unless it says transformers, on random-token batches the steps cycle through (four distinct
batches, so the loss falls as the model memorises them: each row prints its first and last loss):

- GPT-2 small (124M; 12 layers of width 768, 1,024-token sequences, batch 16; the vocabulary padded to 50,304, a
  multiple of 64, as nanoGPT does), bf16 autocast, eager and under ``torch.compile``; transformers'
  ``GPT2LMHeadModel`` of the identical config on the same batches in a hand loop doing the same optimizer work,
  eager and compiled. Tokens/s and MFU: model FLOPs per token by the PaLM convention (6 N + 12 L T d, as
  benchmarks/train_throughput.py counts them) over the GPU's dense bf16 peak (the vendor's figure for the GPUs in
  ``BF16_PEAK``, else the measured 8192^3 bf16 matmul's) and over the measured matmul.
- BERT-base MLM (110M, 128-token sequences as in BERT's phase 1, batch 64, 15 % masked 80/10/10): minilm's
  ``bert_mlm_loss`` (vocabulary logits only at the masked positions) and transformers' ``BertForMaskedLM``.
- fp16 with the gradient scaler (GPT-2 small): the scaler's final scale shows that steps were taken, not skipped.
- FSDP with one process (GPT-2 small, bf16): this script again under torchrun's environment, one NCCL process,
  every block sharded (one shard) by ``distributed=fsdp``.
- Exact resume (a 6-layer GPT with dropout, bf16): an uninterrupted run of 2k steps beside one saved at step k and
  resumed from its checkpoint into a model built with another seed; the largest loss difference, beside the
  difference between two uninterrupted runs (the GPU's own run-to-run noise; 0 where its kernels are deterministic).

Each timed row: warm-up steps (compilation included, reported), then three windows of steps between CUDA
synchronisations; the median window's time per step. Peak memory: ``torch.cuda.max_memory_allocated`` from the
model's construction to the last step (model, gradients, optimizer state, activations). A row that fails prints its
error and the others still run. Prints one markdown table; ``benchmarks/README.md`` records it with the device.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # before torch (see benchmarks/attention.py)

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from common import hand_train_step, import_transformers, run_header  # noqa: E402
from mlm import mlm_flops  # noqa: E402
from train_throughput import flops_per_token  # noqa: E402

from minilm.models.bert import Bert, bert_config  # noqa: E402
from minilm.models.gpt import GPT, GPTConfig  # noqa: E402
from minilm.models.hf.bert import config_to_hf as bert_to_hf  # noqa: E402
from minilm.models.hf.gpt2 import config_to_hf as gpt_to_hf  # noqa: E402
from minilm.objectives.mlm import MaskingConfig  # noqa: E402
from minilm.recipes.bert import bert_mlm_loss  # noqa: E402
from minilm.recipes.gpt import clm_loss  # noqa: E402
from minilm.train.trainer import TrainConfig, Trainer  # noqa: E402
from minilm.utils import count_parameters  # noqa: E402

# Dense bf16 tensor-core peaks (TFLOP/s, without sparsity) from the vendor's data sheets; matched on the device name.
BF16_PEAK = {"H100 PCIe": 756.0, "H100 NVL": 835.0, "H100": 989.4, "H200": 989.4, "GH200": 989.4, "A100": 312.0}
N_BATCHES = 4  # distinct batches the steps cycle through
PAD, CLS, SEP, MASK, N_SPECIAL = 0, 2, 3, 4, 5  # ids 0-4 stand for [PAD], [UNK], [CLS], [SEP], [MASK]


SIZES = {  # --quick: the same rows at toy sizes, so a CPU runs every code path in seconds
    "full": dict(
        gpt=dict(vocab_size=50304, max_len=1024, n_layers=12, n_heads=12, d_model=768, dropout=0.0),
        gpt_batch=16,
        bert=dict(vocab_size=30522),  # bert-base
        bert_seq=128,
        bert_batch=64,
        resume_gpt=dict(vocab_size=8192, max_len=256, n_layers=6, n_heads=6, d_model=384, dropout=0.1),
        resume_batch=16,
        resume_steps=20,  # saved after this many, then as many again
        warmup=5,  # steps before timing (compilation happens in the first)
        windows=3,
        window=10,  # steps per timed window
        matmul=8192,
    ),
    "quick": dict(
        gpt=dict(vocab_size=512, max_len=64, n_layers=2, n_heads=2, d_model=64, dropout=0.0),
        gpt_batch=4,
        bert=dict(vocab_size=512, n_layers=2, n_heads=2, d_model=64, d_ff=256, max_len=64),
        bert_seq=32,
        bert_batch=8,
        resume_gpt=dict(vocab_size=512, max_len=64, n_layers=2, n_heads=2, d_model=64, dropout=0.1),
        resume_batch=4,
        resume_steps=3,
        warmup=1,
        windows=3,
        window=2,
        matmul=1024,
    ),
}
NOTES = ("grad_scale", "sharded", "loss_diff_vs_unsharded", "resume_max_abs_diff", "rerun_max_abs_diff",
         "resume_bitwise")  # fmt: skip
ROWS = ("gpt", "gpt-compile", "transformers", "transformers-compile", "bert", "transformers-bert", "fp16", "fsdp",
        "resume")  # fmt: skip


def train_config(batch_size: int, device: torch.device, **fields) -> TrainConfig:
    """The CLI's defaults (lr 1e-3, AdamW, clipping 1.0, cosine), a short warm-up so the few steps learn."""
    defaults = dict(warmup_steps=5, max_steps=10**6, log_every=10**9, progress=False, run_dir="")
    return TrainConfig(batch_size=batch_size, device=device.type, **{**defaults, **fields})


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize()


# ------------------------------------------------------------------------------------------ data


def gpt_data(config: GPTConfig, batch_size: int) -> torch.Tensor:
    """N_BATCHES x batch_size blocks of max_len + 1 random tokens (the model reads max_len, predicts the next)."""
    generator = torch.Generator().manual_seed(0)
    return torch.randint(0, config.vocab_size, (N_BATCHES * batch_size, config.max_len + 1), generator=generator)


def mlm_data(vocab_size: int, batch_size: int, seq_len: int) -> list[dict]:
    """N_BATCHES x batch_size rows of [CLS] random tokens [SEP], masked once by minilm's masking (BERT's 80/10/10)."""
    generator = torch.Generator().manual_seed(0)
    masking = MaskingConfig(mask_id=MASK, vocab_size=vocab_size, pad_id=PAD, special_ids=tuple(range(N_SPECIAL)))
    ids = torch.randint(N_SPECIAL, vocab_size, (N_BATCHES * batch_size, seq_len), generator=generator)
    ids[:, 0], ids[:, -1] = CLS, SEP
    special = torch.zeros_like(ids, dtype=torch.bool)
    special[:, 0] = special[:, -1] = True
    batch = {"input_ids": ids, "attention_mask": torch.ones_like(ids), "token_type_ids": torch.zeros_like(ids)}
    masked = masking({**batch, "special_tokens_mask": special}, generator)
    keys = ("input_ids", "attention_mask", "token_type_ids", "labels")
    return [{k: masked[k][row] for k in keys} for row in range(len(ids))]


# ------------------------------------------------------------------------------------------ steps
# Each builder returns (a zero-argument step returning the loss, a function giving the row's notes after the steps).


def minilm_step(model, loss_fn, data, batch_size: int, device, **fields):
    trainer = Trainer(model, loss_fn, data, config=train_config(batch_size, device, **fields))

    def notes() -> dict:
        found = {}
        if trainer.dtype == torch.float16:
            found["grad_scale"] = trainer.scaler.get_scale()  # halves at each overflow; 0 steps taken would show
        if fields.get("distributed") == "fsdp":
            from minilm.train.distributed import is_sharded

            found["sharded"] = is_sharded(trainer.model)
        return found

    return (lambda: trainer.train_step()[0]), notes


def hand_loop(model, batches: list, device: torch.device, loss_of, compile: bool):
    """transformers' models in the Trainer's step done by hand (``common.hand_train_step``): bf16 autocast (fp32 on a
    CPU without --quick's bf16), the same fused AdamW groups and settings, clipping and schedule, one .item() per
    step as the Trainer's."""
    forward = torch.compile(model) if compile else model

    def batch_at(step: int):
        batch = batches[step % len(batches)]
        return {k: v.to(device) for k, v in batch.items()} if isinstance(batch, dict) else batch.to(device)

    train_step = hand_train_step(
        model, lambda batch: loss_of(forward, batch), batch_at, 1, config=train_config(1, device),
        autocast=torch.bfloat16,
    )  # fmt: skip
    return train_step, dict


def transformers_gpt(config: GPTConfig, data: torch.Tensor, batch_size: int, device, compile: bool):
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    model = GPT2LMHeadModel(GPT2Config(**gpt_to_hf(config), attn_implementation="sdpa")).to(device)
    batches = list(data.split(batch_size))

    def loss_of(forward, block):
        logits = forward(input_ids=block[:, :-1]).logits  # (B, T, V)
        return F.cross_entropy(logits.flatten(0, 1).float(), block[:, 1:].flatten())

    return hand_loop(model, batches, device, loss_of, compile)


def transformers_bert(config, examples: list[dict], batch_size: int, device):
    from transformers import BertConfig as HFBertConfig
    from transformers import BertForMaskedLM

    torch.manual_seed(0)
    model = BertForMaskedLM(HFBertConfig(**bert_to_hf(config), attn_implementation="sdpa")).to(device)
    batches = [
        {k: torch.stack([e[k] for e in examples[i : i + batch_size]]) for k in examples[0]}
        for i in range(0, len(examples), batch_size)
    ]
    return hand_loop(model, batches, device, lambda forward, batch: forward(**batch).loss, compile=False)


# ------------------------------------------------------------------------------------------ measuring


def measure(build, size: dict, device: torch.device) -> dict:
    """Build a row's step, warm it up, time ``windows`` windows of ``window`` steps; peak memory from the build on."""
    gc.collect()
    if device.type == "cuda":
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()
    start = time.perf_counter()
    step, notes = build()
    losses = [step() for _ in range(size["warmup"])]
    synchronize(device)
    warmup_seconds = time.perf_counter() - start
    times = []
    for _ in range(size["windows"]):
        synchronize(device)
        start = time.perf_counter()
        losses += [step() for _ in range(size["window"])]
        synchronize(device)
        times.append((time.perf_counter() - start) / size["window"])
    peak = torch.cuda.max_memory_allocated() / 2**30 if device.type == "cuda" else None
    return {
        "seconds_per_step": statistics.median(times),
        "warmup_seconds": warmup_seconds,
        "first_loss": losses[0],
        "last_loss": losses[-1],
        "peak_memory_gib": peak,
        **notes(),
    }


def matmul_tflops(n: int, device: torch.device) -> float:
    """The median of ten n x n x n matmuls (bf16 on a GPU, fp32 on a CPU) after three warm-ups, in TFLOP/s."""
    dtype = torch.bfloat16 if device.type == "cuda" else torch.float32
    a, b = torch.randn(n, n, device=device, dtype=dtype), torch.randn(n, n, device=device, dtype=dtype)
    times = []
    for i in range(13):
        synchronize(device)
        start = time.perf_counter()
        torch.mm(a, b)
        synchronize(device)
        if i >= 3:
            times.append(time.perf_counter() - start)
    return 2 * n**3 / statistics.median(times) / 1e12


def vendor_peak(device: torch.device) -> tuple[str, float | None]:
    """The device's name and its dense bf16 peak from BF16_PEAK (None when not listed, or on a CPU)."""
    if device.type != "cuda":
        return "CPU", None
    name = torch.cuda.get_device_name(device)
    return name, next((tflops for key, tflops in BF16_PEAK.items() if key in name), None)


def gpt_flops(config: GPTConfig) -> float:
    with torch.device("meta"):
        model = GPT(config)
    return flops_per_token(model, config.max_len)[0]


def bert_flops(model: Bert, examples: list[dict], seq_len: int, batch_size: int) -> float:
    """Useful FLOPs per token (benchmarks/mlm.py's count: the MLM head only at the masked positions)."""
    masked = sum(int((e["labels"] != -100).sum()) for e in examples) / (len(examples) / batch_size)
    return mlm_flops(model, seq_len, batch_size * seq_len, masked)[0] / (batch_size * seq_len)


# ------------------------------------------------------------------------------------------ rows


def gpt_rows(size: dict, device: torch.device, chosen: set) -> list[dict]:
    config = GPTConfig(**size["gpt"])
    data, batch = gpt_data(config, size["gpt_batch"]), size["gpt_batch"]
    flops = gpt_flops(config)
    with torch.device("meta"):
        parameters = count_parameters(GPT(config))
    common = dict(tokens_per_step=batch * config.max_len, flops_per_token=flops)
    label = f"GPT {config.n_layers} x {config.d_model} ({parameters / 1e6:.1f}M), {batch} x {config.max_len}"
    specs = {
        "gpt": (f"minilm {label}, bf16", lambda: minilm_gpt(config, data, batch, device, "bf16", False)),
        "gpt-compile": (
            f"minilm {label}, bf16, torch.compile",
            lambda: minilm_gpt(config, data, batch, device, "bf16", True),
        ),
        "transformers": (
            f"transformers GPT2LMHeadModel, {batch} x {config.max_len}, bf16",
            lambda: transformers_gpt(config, data, batch, device, False),
        ),
        "transformers-compile": (
            f"transformers GPT2LMHeadModel, {batch} x {config.max_len}, bf16, torch.compile",
            lambda: transformers_gpt(config, data, batch, device, True),
        ),
        "fp16": (f"minilm {label}, fp16 + GradScaler", lambda: minilm_gpt(config, data, batch, device, "fp16", False)),
    }
    rows = []
    for key, (name, build) in specs.items():
        if key not in chosen:
            continue
        if device.type != "cuda" and ("compile" in key or key == "fp16"):
            rows.append({"key": key, "name": name, "skipped": "needs a CUDA GPU"})
            continue
        rows.append(run_row(key, name, lambda build=build: measure(build, size, device), common))
        if "compile" in key:
            torch._dynamo.reset()
    return rows


def minilm_gpt(config: GPTConfig, data, batch_size: int, device, precision: str, compile: bool, **fields):
    torch.manual_seed(0)
    return minilm_step(GPT(config), clm_loss, data, batch_size, device, precision=precision, compile=compile, **fields)


def bert_rows(size: dict, device: torch.device, chosen: set) -> list[dict]:
    config = bert_config("bert-base", pooler=False, nsp=False, mlm=True, **size["bert"])
    seq, batch = size["bert_seq"], size["bert_batch"]
    examples = mlm_data(config.vocab_size, batch, seq)
    with torch.device("meta"):
        model = Bert(config)
    common = dict(tokens_per_step=batch * seq, flops_per_token=bert_flops(model, examples, seq, batch))
    label = f"{config.n_layers} x {config.d_model} ({count_parameters(model) / 1e6:.1f}M), {batch} x {seq}, bf16"
    rows = []
    if "bert" in chosen:

        def build():
            torch.manual_seed(0)
            return minilm_step(Bert(config), bert_mlm_loss, examples, batch, device, precision="bf16")

        rows.append(run_row("bert", f"minilm BERT MLM {label}", lambda: measure(build, size, device), common))
    if "transformers-bert" in chosen:
        rows.append(
            run_row(
                "transformers-bert",
                f"transformers BertForMaskedLM {label}",
                lambda: measure(lambda: transformers_bert(config, examples, batch, device), size, device),
                common,
            )
        )
    return rows


def fsdp_row(args, size: dict, device: torch.device) -> dict:
    """This script again in a child process with torchrun's environment for one process (rank 0 of 1): the
    Trainer joins the process group (NCCL on a GPU, gloo on a CPU) and ``distributed=fsdp`` shards every block."""
    from torch.distributed.elastic.utils.distributed import get_free_port

    config = GPTConfig(**size["gpt"])
    shape = f"{config.n_layers} x {config.d_model}, {size['gpt_batch']} x {config.max_len}"
    name = f"minilm GPT {shape}, bf16, FSDP (1 process)"
    common = dict(tokens_per_step=size["gpt_batch"] * config.max_len, flops_per_token=gpt_flops(config))
    world = dict(RANK="0", LOCAL_RANK="0", WORLD_SIZE="1", LOCAL_WORLD_SIZE="1", MASTER_ADDR="127.0.0.1")
    env = {**os.environ, **world, "MASTER_PORT": str(get_free_port())}
    command = [sys.executable, __file__, "--fsdp-child", *(["--quick"] if args.quick else [])]

    def child() -> dict:
        done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=600)
        if done.returncode:
            raise RuntimeError(done.stderr.strip().splitlines()[-1] if done.stderr.strip() else "no message")
        return json.loads(done.stdout.split("fsdp-row ")[-1])

    return run_row("fsdp", name, child, common)


def fsdp_child(size: dict, device: torch.device) -> None:
    config = GPTConfig(**size["gpt"])
    data = gpt_data(config, size["gpt_batch"])
    row = measure(
        lambda: minilm_gpt(config, data, size["gpt_batch"], device, "bf16", False, distributed="fsdp"), size, device
    )
    from minilm.train.distributed import leave_process_group

    leave_process_group()
    print("fsdp-row " + json.dumps(row))


def resume_row(size: dict, device: torch.device) -> dict:
    """Uninterrupted 2k steps, twice, and k steps + save + resume (into a model of another seed) + k steps."""
    config = GPTConfig(**size["resume_gpt"])
    batch, k = size["resume_batch"], size["resume_steps"]
    data = gpt_data(config, batch)
    precision = "bf16" if device.type == "cuda" else "fp32"

    def trainer(run_dir: Path, seed: int) -> Trainer:
        torch.manual_seed(seed)
        fields = dict(precision=precision, max_steps=2 * k, save_every=10**9, eval_every=10**9, run_dir=str(run_dir))
        return Trainer(GPT(config), clm_loss, data, config=train_config(batch, device, **fields))

    def check() -> dict:
        with tempfile.TemporaryDirectory() as tmp:
            steps = lambda t, n: [t.train_step()[0] for _ in range(n)]  # noqa: E731
            full = steps(trainer(Path(tmp) / "a", 0), 2 * k)
            again = steps(trainer(Path(tmp) / "b", 0), 2 * k)
            first = trainer(Path(tmp) / "c", 0)
            before = steps(first, k)
            saved = first.save()
            resumed = trainer(Path(tmp) / "d", 123)  # other initial weights and random state: the checkpoint rules
            resumed.resume(saved)
            after = before + steps(resumed, k)
        return {
            "resume_max_abs_diff": max(abs(a - b) for a, b in zip(full, after, strict=True)),
            "rerun_max_abs_diff": max(abs(a - b) for a, b in zip(full, again, strict=True)),
            "resume_bitwise": full == after,
            "first_loss": full[0],
            "last_loss": full[-1],
        }

    name = f"exact resume: GPT {config.n_layers} x {config.d_model} with dropout, {precision}, {k} + {k} steps"
    return run_row("resume", name, check, {})


def same_losses(rows: list[dict]) -> None:
    """Note on the FSDP row how far its losses are from the unsharded bf16 row's (same weights, same batches)."""
    found = {row["key"]: row for row in rows if "first_loss" in row}
    if "fsdp" in found and "gpt" in found:
        fsdp, gpt = found["fsdp"], found["gpt"]
        fsdp["loss_diff_vs_unsharded"] = max(abs(fsdp[k] - gpt[k]) for k in ("first_loss", "last_loss"))


def run_row(key: str, name: str, run, common: dict) -> dict:
    """One row: its measurements, or the error that stopped it (printed; the other rows still run)."""
    print(f"... {name}", file=sys.stderr, flush=True)
    try:
        row = {"key": key, "name": name, **common, **run()}
        print(f"    {json.dumps(row)}", file=sys.stderr, flush=True)  # kept in the log if the run is cut short
        return row
    except Exception as error:  # noqa: BLE001 (a failing row is reported, not fatal: the check is for what breaks)
        traceback.print_exc()
        return {"key": key, "name": name, "error": f"{type(error).__name__}: {error}"[:300]}
    finally:
        gc.collect()
        if torch.cuda.is_available():
            torch.cuda.empty_cache()


# ------------------------------------------------------------------------------------------ table


def table(rows: list[dict], peak: float | None, measured: float) -> str:
    lines = [
        "| row | tokens/s | ms/step | MFU (vendor peak) | MFU (measured matmul) | peak memory (GiB) | warm-up (s) "
        "| loss first → last | notes |",
        "|---|---:|---:|---:|---:|---:|---:|---|---|",
    ]
    for row in rows:
        if "error" in row or "skipped" in row:
            lines.append(f"| {row['name']} | | | | | | | | {row.get('error') or 'skipped: ' + row['skipped']} |")
            continue
        notes = ", ".join(f"{k} {v:.3g}" if isinstance(v, float) else f"{k} {v}" for k, v in row.items() if k in NOTES)
        loss = f"{row['first_loss']:.3f} → {row['last_loss']:.3f}"
        if "seconds_per_step" not in row:
            lines.append(f"| {row['name']} | | | | | | | {loss} | {notes} |")
            continue
        tokens_per_s = row["tokens_per_step"] / row["seconds_per_step"]
        achieved = tokens_per_s * row["flops_per_token"] / 1e12
        vendor = f"{achieved / peak:.1%}" if peak else "—"
        memory = f"{row['peak_memory_gib']:.1f}" if row["peak_memory_gib"] is not None else "—"
        lines.append(
            f"| {row['name']} | {tokens_per_s:,.0f} | {1000 * row['seconds_per_step']:.1f} | {vendor} | "
            f"{achieved / measured:.1%} | {memory} | {row['warmup_seconds']:.1f} | {loss} | {notes} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="toy sizes: every code path in seconds (CPU tests)")
    parser.add_argument("--rows", default=",".join(ROWS), help=f"comma-separated rows to run (default all: {ROWS})")
    parser.add_argument("--json", default="gpu.json", help="where to write the rows as JSON (default gpu.json)")
    parser.add_argument("--fsdp-child", action="store_true", help=argparse.SUPPRESS)  # internal: the FSDP row
    args = parser.parse_args()
    size = SIZES["quick" if args.quick else "full"]
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if args.fsdp_child:
        return fsdp_child(size, device)
    chosen = set(args.rows.split(","))
    if unknown := chosen - set(ROWS):
        sys.exit(f"error: unknown row(s) {', '.join(sorted(unknown))}; choose from {', '.join(ROWS)}")
    if device.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = True  # fp32 parts: TF32, as usual
    transformers = import_transformers()
    name, peak = vendor_peak(device)
    measured = matmul_tflops(size["matmul"], device)
    header = run_header(f"transformers {transformers.__version__}", f"device: {name}")
    started = time.perf_counter()
    rows = gpt_rows(size, device, chosen) + bert_rows(size, device, chosen)
    if "fsdp" in chosen:
        rows.append(fsdp_row(args, size, device))
    if "resume" in chosen:
        rows.append(resume_row(size, device))
    same_losses(rows)
    peak_text = f"{peak:g} TFLOP/s (data sheet)" if peak else "not listed"
    print(
        f"{header}\nbf16 dense peak: {peak_text}; measured {size['matmul']}^3 matmul: {measured:.3g} TFLOP/s; "
        f"{time.perf_counter() - started:.0f} s\n\n{table(rows, peak, measured)}"
    )
    record = {"header": header, "device": name, "peak_tflops": peak, "measured_matmul_tflops": measured, "rows": rows}
    Path(args.json).write_text(json.dumps(record, indent=2, default=str) + "\n")


if __name__ == "__main__":
    main()
