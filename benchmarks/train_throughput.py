"""Training throughput of the default causal LM against transformers' GPT2LMHeadModel on the same config, and MFU.

    python benchmarks/train_throughput.py              # 2 torch threads, then 1; 12 timed rounds; 1-3 minutes
    python benchmarks/train_throughput.py --quick      # 4 rounds, for a smoke test
    python benchmarks/train_throughput.py --threads 1  # one thread count only
    python benchmarks/train_throughput.py --batch-size 8 --seq-len 256

minilm's GPT (``GPT_SIZES["tiny"]``, the default pretraining model) trains through the real ``Trainer.train_step``
(the step the CLI runs: forward, loss, backward, gradient clipping at 1.0, fused AdamW, LambdaLR, zero_grad).
transformers' ``GPT2LMHeadModel`` with the identical config trains through a hand loop doing the same: the same
cross-entropy, clipping, AdamW parameter groups, betas, schedule and ``fused`` setting, so the primary ratio is about
the model. Two more transformers rows put it in context: the default (unfused) torch AdamW, as it is usually run,
and ``activation_function="gelu_pytorch_tanh"``, the same tanh-approximated GELU on torch's kernel instead of the
written-out formula that "gelu_new" runs in transformers.

Every variant is warmed up, then they are timed round-robin, one step each per round (minilm, transformers, ...,
minilm, ...), so that a noisy machine slows all alike; the tables report medians of the wall clock and of the
process's CPU time (which leaves out the time other processes hold the cores: the steadier ratio on a shared
machine). Each round also times one 2048x2048x2048 fp32 matmul: its median is the machine's matmul peak for the MFU
(model FLOP/s / peak), measured under the same load as the steps. Model FLOPs per token follow the PaLM
convention (Chowdhery et al. 2022, appendix B): 6 N + 12 L T d, with N the non-embedding parameters plus the output
projection (which is tied to the token embedding but is a real matmul), L layers, T the sequence length, d the width.
"""

from __future__ import annotations

import argparse
import os

# Idle OpenMP threads that spin steal the CPU from the other thread on a small, shared machine. Must be set before
# torch starts its thread pool (see benchmarks/attention.py).
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from common import (  # noqa: E402
    PEAK_MEMORY,
    hand_train_step,
    import_transformers,
    matmul_peak_note,
    mfu_columns,
    minilm_trainer,
    optimizer_note,
    peak_memory_child,
    peak_memory_option,
    print_per_thread_count,
    print_table,
    rounds_note,
    run_header,
    same_parameter_count,
    speed_up_table,
    time_with_matmul_peak,
    timing_args,
)

from minilm.models.gpt import GPT, GPTConfig  # noqa: E402
from minilm.models.hf.gpt2 import config_to_hf  # noqa: E402
from minilm.objectives.causal_lm import causal_lm_loss  # noqa: E402
from minilm.recipes.gpt import GPT_SIZES, clm_loss  # noqa: E402
from minilm.recipes.language_model import predicted_tokens  # noqa: E402
from minilm.train.trainer import LossOutput  # noqa: E402
from minilm.utils import count_parameters  # noqa: E402

VOCAB_SIZE = 8192  # the default job's tokenizer size
MINILM = "minilm GPT, Trainer.train_step"
PLAIN = "minilm, LM head and loss not fused (logits materialised)"


# ------------------------------------------------------------------------------------------ models


def minilm_config(seq_len: int) -> GPTConfig:
    config = GPTConfig(vocab_size=VOCAB_SIZE, **GPT_SIZES["tiny"])
    config.dropout = 0.0  # tiny already has none; stated so both sides compare like with like
    if seq_len > config.max_len:
        raise SystemExit(f"--seq-len {seq_len} is longer than the tiny model's {config.max_len} positions")
    return config


def transformers_model(config: GPTConfig, activation: str, attention: str | None = "sdpa"):
    """GPT2LMHeadModel with the identical config (dropouts included), but for the activation function's name."""
    from transformers import GPT2Config, GPT2LMHeadModel

    hf_config = {**config_to_hf(config), "activation_function": activation}
    # "sdpa" is also transformers' default here (None: its default, printed)
    return GPT2LMHeadModel(GPT2Config(**hf_config, attn_implementation=attention))


# ------------------------------------------------------------------------------------------ training steps


def minilm_step(config: GPTConfig, data: torch.Tensor, batch_size: int, loss=clm_loss):
    """A Trainer as the CLI builds it (fused AdamW on CPU, clipping 1.0, warm-up + cosine LambdaLR); its train_step."""
    return minilm_trainer(GPT(config), loss, data, batch_size).train_step


def logits_clm_loss(model, block) -> LossOutput:
    """The causal LM loss the plain way: the (B, T, V) logits, then the cross-entropy (the context row)."""
    return LossOutput(causal_lm_loss(model(block[:, :-1]), block), n_tokens=predicted_tokens(block))


def transformers_step(model, data: torch.Tensor, batch_size: int, fused: bool | None):
    """The same step for a transformers model: same loss, clipping, AdamW groups and settings, same schedule; the
    blocks in order."""
    n_batches = len(data) // batch_size

    def loss_of(block):
        logits = model(input_ids=block[:, :-1]).logits  # (B, T, V)
        return F.cross_entropy(logits.flatten(0, 1), block[:, 1:].flatten())

    def blocks(step: int) -> torch.Tensor:
        return data[(step % n_batches) * batch_size : (step % n_batches + 1) * batch_size]

    return hand_train_step(model, loss_of, blocks, batch_size, fused=fused)


# ------------------------------------------------------------------------------------------ FLOPs


def flops_per_token(model: GPT, seq_len: int) -> tuple[float, list[tuple[str, str]]]:
    """6 N + 12 L T d (PaLM, appendix B) and the rows of the table that explains it."""
    c = model.config
    total = count_parameters(model)
    embeddings = model.embedding.token.weight.numel() + model.embedding.position.weight.numel()
    non_embedding = total - embeddings
    output = model.lm_head.weight.numel()  # tied to the token embedding, but a (d x V) matmul per token
    n = non_embedding + output
    attention = 12 * c.n_layers * seq_len * c.d_model
    rows = [
        ("parameters", f"{total:,}"),
        ("token + position embeddings", f"{embeddings:,}"),
        ("non-embedding (blocks, final norm: weights, biases, norms)", f"{non_embedding:,}"),
        ("output projection d x V (tied, counted as compute)", f"{output:,}"),
        ("N = non-embedding + output projection", f"{n:,}"),
        ("6 N per token", f"{6 * n / 1e6:.2f} MFLOP"),
        (f"attention 12 L T d per token (L={c.n_layers}, T={seq_len}, d={c.d_model})", f"{attention / 1e6:.2f} MFLOP"),
        ("model FLOPs per token", f"{(6 * n + attention) / 1e6:.2f} MFLOP"),
    ]
    return 6 * n + attention, rows


# ------------------------------------------------------------------------------------------ main


def training_data(args) -> torch.Tensor:
    generator = torch.Generator().manual_seed(0)
    return torch.randint(0, VOCAB_SIZE, (8 * args.batch_size, args.seq_len + 1), generator=generator)


def variant_steps(config: GPTConfig, data: torch.Tensor, batch_size: int) -> dict:
    """{variant: a function that builds its train_step}, so that a peak-memory child builds only its own."""
    return {
        MINILM: lambda: minilm_step(config, data, batch_size),
        PLAIN: lambda: minilm_step(config, data, batch_size, loss=logits_clm_loss),
        "transformers GPT2LMHeadModel (primary)": lambda: transformers_step(
            transformers_model(config, "gelu_new"), data, batch_size, fused=True
        ),
        "transformers, default AdamW (as usually run)": lambda: transformers_step(
            transformers_model(config, "gelu_new"), data, batch_size, fused=None
        ),
        "transformers, gelu_pytorch_tanh": lambda: transformers_step(
            transformers_model(config, "gelu_pytorch_tanh"), data, batch_size, fused=True
        ),
    }


def throughput_table(threads: int, args, config: GPTConfig, flops: float) -> str:
    tokens = args.batch_size * args.seq_len
    steps = variant_steps(config, training_data(args), args.batch_size)
    median, _, peak = time_with_matmul_peak({name: build() for name, build in steps.items()}, args.rounds, args.warmup)
    rows = [f"{rounds_note(threads, args.rounds)}; {matmul_peak_note(peak)}\n"]
    extra = mfu_columns(flops * tokens, peak) | PEAK_MEMORY
    return "\n".join(rows + speed_up_table(median, MINILM, {"tokens": tokens}, extra))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--batch-size", type=int, default=16, help="blocks per step (16, the default job's)")
    parser.add_argument("--seq-len", type=int, default=128, help="tokens per block (128, the default job's)")
    peak_memory_option(parser)
    args = timing_args(parser, rounds=12)
    transformers = import_transformers()
    config = minilm_config(args.seq_len)
    if args.peak_memory_of:  # a child process measuring one variant's memory
        return peak_memory_child(variant_steps(config, training_data(args), args.batch_size), args.peak_memory_of)
    minilm_model = GPT(config)
    reference = transformers_model(config, "gelu_new")
    default_attention = transformers_model(config, "gelu_new", attention=None).config._attn_implementation
    n_minilm = same_parameter_count(minilm_model, reference)
    flops, flop_rows = flops_per_token(minilm_model, args.seq_len)

    print(run_header(f"transformers {transformers.__version__}"))
    c = config
    print(f"\nConfig (both models: fp32, weight tying, {optimizer_note(fused=False)}):\n")
    settings = [
        ("vocabulary", f"vocab_size={c.vocab_size}", f"vocab_size={c.vocab_size}"),
        ("positions", f"max_len={c.max_len}", f"n_positions={c.max_len}"),
        (
            "layers / heads / width",
            f"{c.n_layers} / {c.n_heads} / {c.d_model}",
            f"{c.n_layers} / {c.n_heads} / {c.d_model}",
        ),
        ("feed-forward", f"d_ff={c.d_ff or 4 * c.d_model}", f"n_inner={c.d_ff or 4 * c.d_model}"),
        ("activation", "gelu_new (F.gelu, approximate='tanh')", "gelu_new (written-out formula)"),
        (
            "attention",
            "F.scaled_dot_product_attention, is_causal",
            f"{reference.config._attn_implementation} (transformers' default here: {default_attention})",
        ),
        ("dropout", f"{c.dropout}", "resid/embd/attn_pdrop=0.0"),
        ("parameters", f"{n_minilm:,}", f"{n_minilm:,}"),
        ("batch x sequence", f"{args.batch_size} x {args.seq_len}", f"{args.batch_size} x {args.seq_len}"),
    ]
    print_table(("setting", "minilm GPTConfig", "transformers GPT2Config"), settings)
    print("\nModel FLOPs (PaLM convention; the causal mask's skipped half of attention is counted anyway):\n")
    print_table(("quantity", "value"), flop_rows, right=1)
    print(
        f"\nTraining step throughput, {args.batch_size * args.seq_len:,} tokens/step (speed-up: their time / ours):\n"
    )
    print_per_thread_count(args.thread_counts, lambda threads: throughput_table(threads, args, config, flops))


if __name__ == "__main__":
    main()
