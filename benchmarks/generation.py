"""KV-cache generation speed of minilm's GPT against transformers' GPT-2 generate() with the same weights.

    python benchmarks/generation.py              # 2 torch threads, then 1; 5 timed rounds (3 at 256 tokens); ~3 min
    python benchmarks/generation.py --quick      # 3 rounds (1 at 256 tokens), for a smoke test
    python benchmarks/generation.py --threads 1  # one thread count only

A GPT-2-shaped tiny model (n_embd 256, 4 layers, 4 heads, vocabulary 8192, 512 positions, dropout 0) is built in
transformers with seeded random weights, saved with ``save_pretrained`` and loaded into minilm with
``GPT.from_pretrained``: the same weights on both sides, and the script stops unless the logits agree. Both decode
greedily (``do_sample=False``) with no end-of-text token, so every run produces exactly ``max_new_tokens`` tokens,
and the script stops unless both produce the same tokens.

1. 8-token prompts, 128 new tokens: ``GPT.generate`` against ``GPT2LMHeadModel.generate(..., use_cache=True)``
   (the primary ratio), at batch 1 and at batch 4 with left-padded prompts of 8, 6, 4 and 2 tokens. A context row:
   the transformers model driven by a hand-written loop over its own KV cache, which leaves out generate()'s
   machinery (logits processors, stopping criteria, cache and input preparation).
2. KV cache vs no cache at 256 new tokens, batch 1: minilm's cached ``GPT.generate`` against a loop that runs the
   model over the whole sequence for every new token (``model(ids)[:, -1]``), and transformers with
   ``use_cache=True`` / ``use_cache=False`` for reference.

Every variant is warmed up, then they are timed round-robin, one full generation each per round, so that a noisy
machine slows all alike; the tables report medians of the wall clock and of the process's CPU time (which leaves out
the time other processes hold the cores). Tokens/s counts new tokens only (batch x max_new_tokens); the prompt's
forward pass is inside the timing.

``OMP_WAIT_POLICY`` is PASSIVE unless set otherwise, as in the other benchmarks. Decoding runs hundreds of tiny
operations per token, and with 2 threads each parallel one must wake the sleeping second thread: on a quiet machine
both libraries decode ~3x slower at 2 threads with PASSIVE than with ACTIVE (1 thread is unaffected). Run
``OMP_WAIT_POLICY=ACTIVE python benchmarks/generation.py --threads 2`` for 2-thread speeds on a quiet machine.
"""

from __future__ import annotations

import argparse
import os
import tempfile
from functools import partial

# Idle OpenMP threads that spin steal the CPU from the other thread on a small, shared machine. Must be set before
# torch starts its thread pool (see benchmarks/attention.py).
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import torch  # noqa: E402
from common import (  # noqa: E402
    import_transformers,
    print_per_thread_count,
    run_header,
    speed_up_header,
    speed_up_rows,
    threads_label,
    time_round_robin,
    timing_args,
)

from minilm.models.gpt import GPT, GPTConfig  # noqa: E402
from minilm.models.hf.gpt2 import config_to_hf  # noqa: E402
from minilm.utils import count_parameters  # noqa: E402

VOCAB_SIZE, WIDTH, LAYERS, HEADS, POSITIONS = 8192, 256, 4, 4, 512
PROMPT_LEN = 8
BATCH_PROMPT_LENS = (8, 6, 4, 2)  # batch 4: real tokens per row, left-padded to PROMPT_LEN
NEW_TOKENS, LONG_NEW_TOKENS = 128, 256
PAD_ID = 0
MINILM = "minilm GPT.generate (KV cache)"
HF = "transformers generate, use_cache=True (primary)"
HF_LOOP = "transformers model, hand loop over its KV cache"
MINILM_CACHED, MINILM_NO_CACHE = "minilm GPT.generate (KV cache)", "minilm, no cache: model(ids)[:, -1] each step"
HF_CACHED, HF_NO_CACHE = "transformers generate, use_cache=True", "transformers generate, use_cache=False"


# ------------------------------------------------------------------------------------------ models


def build_models(directory: str):
    """(transformers GPT2LMHeadModel, minilm GPT) with the same seeded random weights, both in eval mode."""
    from transformers import GPT2Config, GPT2LMHeadModel

    # config_to_hf names no end-of-text token: every run generates exactly max_new_tokens tokens
    ours = GPTConfig(VOCAB_SIZE, max_len=POSITIONS, n_layers=LAYERS, n_heads=HEADS, d_model=WIDTH, dropout=0.0)
    config = GPT2Config(**config_to_hf(ours), attn_implementation="sdpa")  # transformers' default here too
    torch.manual_seed(0)
    reference = GPT2LMHeadModel(config).eval()
    reference.save_pretrained(directory)
    return reference, GPT.from_pretrained(directory)


def check_logits(reference, model) -> float:
    """Largest absolute difference between the two models' logits on a random 64-token batch; stops if > 1e-4."""
    ids = torch.randint(0, VOCAB_SIZE, (2, 64), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        diff = (model(ids) - reference(ids).logits).abs().max().item()
    if diff > 1e-4:
        raise SystemExit(f"the loaded model's logits differ from transformers' by {diff:.2e}")
    return diff


def prompts(batch: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Seeded random prompts (B, PROMPT_LEN) and their 0/1 attention mask; batch > 1: left-padded, ragged."""
    generator = torch.Generator().manual_seed(2)
    ids = torch.randint(1, VOCAB_SIZE, (batch, PROMPT_LEN), generator=generator)
    mask = torch.ones_like(ids)
    if batch > 1:
        for row, length in enumerate(BATCH_PROMPT_LENS[:batch]):
            ids[row, : PROMPT_LEN - length], mask[row, : PROMPT_LEN - length] = PAD_ID, 0
    return ids, mask


# ------------------------------------------------------------------------------------------ decoders


def minilm_generate(model: GPT, ids, mask, new_tokens: int) -> torch.Tensor:
    mask = None if bool(mask.all()) else mask  # an unpadded batch needs no mask (the CLI's sampler passes none)
    return model.generate(ids, new_tokens, do_sample=False, attention_mask=mask)


@torch.no_grad()
def minilm_no_cache(model: GPT, ids, mask, new_tokens: int) -> torch.Tensor:
    """Greedy decoding without a KV cache: the whole sequence goes through the model again for every new token."""
    for _ in range(new_tokens):
        next_id = model(ids)[:, -1].argmax(-1, keepdim=True)  # (B, 1)
        ids = torch.cat([ids, next_id], dim=1)
    return ids


def hf_generate(model, ids, mask, new_tokens: int, use_cache: bool = True) -> torch.Tensor:
    return model.generate(
        ids,
        attention_mask=mask,
        do_sample=False,
        max_new_tokens=new_tokens,
        min_new_tokens=new_tokens,
        use_cache=use_cache,
        pad_token_id=PAD_ID,
    )


@torch.no_grad()
def hf_hand_loop(model, ids, mask, new_tokens: int) -> torch.Tensor:
    """Greedy decoding calling the transformers model directly with its past_key_values (what generate() wraps)."""
    out, past, new = ids, None, ids
    for _ in range(new_tokens):
        positions = (mask.cumsum(-1) - 1).clamp(min=0)[:, -new.size(1) :]
        result = model(new, attention_mask=mask, position_ids=positions, past_key_values=past, use_cache=True)
        past = result.past_key_values
        new = result.logits[:, -1].argmax(-1, keepdim=True)  # (B, 1)
        out = torch.cat([out, new], dim=1)
        mask = torch.cat([mask, mask.new_ones(mask.size(0), 1)], dim=1)
    return out


# ------------------------------------------------------------------------------------------ timing


def timed(variants: dict, rounds: int, warmup: int) -> dict[str, tuple[float, float]]:
    """Median (wall-clock, process CPU) seconds of each variant, after checking they all generate the same tokens."""
    median, outputs = time_round_robin(variants, rounds, warmup)
    first, *others = outputs
    for name in others:
        if not torch.equal(outputs[name], outputs[first]):
            differ = (outputs[name] != outputs[first]).nonzero()
            raise SystemExit(f"{name!r} generated other tokens than {first!r} (first difference at {differ[0]})")
    return median


def ratio(x: float) -> str:
    return f"{x:.2f}x"


def cache_table(threads: int, reference, model, args) -> str:
    """Table 1: KV-cache generation, minilm vs transformers, batch 1 and batch 4."""
    rows = [
        f"{threads_label(threads)}: {PROMPT_LEN}-token prompts, {NEW_TOKENS} new tokens, greedy; median of "
        f"{args.rounds} runs each, round-robin (speed-up: their time / minilm's)\n",
        *speed_up_header(["new tokens"], per="run", lead=[("batch", "---:")]),
    ]
    for batch in (1, 4):
        ids, mask = prompts(batch)
        variants = {
            MINILM: partial(minilm_generate, model, ids, mask, NEW_TOKENS),
            HF: partial(hf_generate, reference, ids, mask, NEW_TOKENS),
            HF_LOOP: partial(hf_hand_loop, reference, ids, mask, NEW_TOKENS),
        }
        median = timed(variants, args.rounds, args.warmup)
        label = f"{batch}" if batch == 1 else f"{batch} (prompts {'/'.join(map(str, BATCH_PROMPT_LENS))})"
        rows += speed_up_rows(median, MINILM, {"new tokens": batch * NEW_TOKENS}, lead=(label,))
    return "\n".join(rows)


def no_cache_table(threads: int, reference, model, args) -> str:
    """Table 2: KV cache vs no cache at LONG_NEW_TOKENS new tokens, batch 1."""
    ids, mask = prompts(1)
    variants = {
        MINILM_CACHED: partial(minilm_generate, model, ids, mask, LONG_NEW_TOKENS),
        MINILM_NO_CACHE: partial(minilm_no_cache, model, ids, mask, LONG_NEW_TOKENS),
        HF_CACHED: partial(hf_generate, reference, ids, mask, LONG_NEW_TOKENS, use_cache=True),
        HF_NO_CACHE: partial(hf_generate, reference, ids, mask, LONG_NEW_TOKENS, use_cache=False),
    }
    median = timed(variants, args.long_rounds, args.warmup)
    cached = {MINILM_NO_CACHE: MINILM_CACHED, HF_NO_CACHE: HF_CACHED}  # no-cache row -> its library's cached row
    rows = [
        f"{threads_label(threads)}: batch 1, {PROMPT_LEN}-token prompt, {LONG_NEW_TOKENS} new "
        f"tokens, greedy; median of {args.long_rounds} runs each, round-robin\n",
        "| variant | ms/run | new tokens/s | KV-cache speed-up | CPU ms/run | KV-cache speed-up by CPU time |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for name, (seconds, cpu_seconds) in median.items():
        speed_up = cpu_speed_up = "—"
        if name in cached:
            speed_up = ratio(seconds / median[cached[name]][0])
            cpu_speed_up = ratio(cpu_seconds / median[cached[name]][1])
        rows.append(
            f"| {name} | {1000 * seconds:.0f} | {LONG_NEW_TOKENS / seconds:,.0f} | {speed_up} | "
            f"{1000 * cpu_seconds:.0f} | {cpu_speed_up} |"
        )
    ratio_cached = median[HF_CACHED][0] / median[MINILM_CACHED][0]
    ratio_no_cache = median[HF_NO_CACHE][0] / median[MINILM_NO_CACHE][0]
    rows.append(
        f"\nminilm vs transformers at {LONG_NEW_TOKENS} tokens (their time / minilm's): cached "
        f"{ratio(ratio_cached)}, no cache {ratio(ratio_no_cache)}"
    )
    return "\n".join(rows)


# ------------------------------------------------------------------------------------------ main


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    args = timing_args(parser, rounds=5, quick=3, warmup=1, note=" (1 instead of 3 at 256 tokens)")
    args.long_rounds = 1 if args.quick else 3
    transformers = import_transformers()
    transformers.utils.logging.disable_progress_bar()
    with tempfile.TemporaryDirectory() as directory:
        reference, model = build_models(directory)
    diff = check_logits(reference, model)

    print(run_header(f"transformers {transformers.__version__}"))
    n_parameters = count_parameters(model)
    print(
        f"\nModel: GPT-2 layout, n_embd {WIDTH}, {LAYERS} layers, {HEADS} heads, vocabulary {VOCAB_SIZE}, "
        f"{POSITIONS} positions, dropout 0, {n_parameters:,} parameters (tied output projection), fp32; seeded "
        f"random weights saved by transformers and loaded with GPT.from_pretrained (logits max |diff| {diff:.1e}). "
        "Greedy, no end-of-text token; each table's variants generated identical tokens."
    )
    print(f"\nKV-cache generation, minilm vs transformers ({NEW_TOKENS} new tokens):\n")
    print_per_thread_count(args.thread_counts, lambda threads: cache_table(threads, reference, model, args))
    print(f"\nKV cache vs no cache ({LONG_NEW_TOKENS} new tokens; KV-cache speed-up: no-cache time / cached time):\n")
    print_per_thread_count(args.thread_counts, lambda threads: no_cache_table(threads, reference, model, args))


if __name__ == "__main__":
    main()
