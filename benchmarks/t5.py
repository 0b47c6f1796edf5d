"""T5 against transformers' T5ForConditionalGeneration with the same weights: span-corruption training tokens/s (and
the step's peak memory), then KV-cache generation tokens/s, greedy and beam search.

    python benchmarks/t5.py              # 2 torch threads, then 1; 12 training rounds, 5 generation rounds; ~4-5 min
    python benchmarks/t5.py --quick      # 4 training rounds, 3 generation rounds, for a smoke test
    python benchmarks/t5.py --threads 1  # one thread count only
    python benchmarks/t5.py --no-v1-1    # without the T5 v1.1 (gated-GELU) training rows
    python benchmarks/t5.py --size small --batch-size 8

The model: the ``tiny`` T5 of ``minilm.recipes.t5.T5_SIZES`` (what ``--model t5 --size tiny`` trains: 2 encoder +
2 decoder layers, 4 heads of 64, width 256, FFN 1024, 32 relative-position buckets up to 128, dropout 0) with an
8192-token vocabulary (<pad> </s> <unk> = 0-2, the 100 sentinels <extra_id_0..99> at the top, as T5's), as T5 v1.0
(ReLU feed-forward, the LM head tied to the token table behind the d_model^-0.5 rescaling), built as transformers'
``T5ForConditionalGeneration`` (``config_to_hf``, sdpa attention, its seeded initialisation) and converted to
minilm's ``T5``: the same weights on both sides, and the script stops unless the logits agree. A second pair of
training rows (``--no-v1-1`` leaves it out) is T5 v1.1 at the same size: gated GELU (GEGLU, the tanh GELU), an LM
head of its own, no output rescaling (transformers 5 ties T5's head whatever the config says, so the script unties
it by hand, initialised N(0, 1) as transformers initialises an untied head).

Training, one span-corruption step: minilm through the real ``Trainer.train_step`` with the ``span_corruption``
objective's ``teacher_forcing_loss`` and ``target_counts`` (``T5.seq2seq_states``: the vocabulary projection and the
cross-entropy fused, the (B, T, V) logits never exist; fused AdamW, clipping at 1.0, LambdaLR), the batches collated
by ``pad_seq2seq_batch`` (sources right-padded with <pad>, labels with -100). transformers:
``model(input_ids, attention_mask, labels=labels).loss`` (it shifts the labels right behind
``decoder_start_token_id`` 0, as minilm's ``shift_right``; full-vocabulary logits at every target position), in a
hand loop with the same AdamW groups, betas, eps, ``fused=True``, clipping and schedule, reading the same batches in
the same order. Data: random texts (token ids drawn below the sentinels) corrupted once, ahead of timing, by the
recipe's ``span_corruption_example`` with T5's default noise (``SpanCorruptionSettings()``: 15 % of the tokens in
spans of mean length 3, each span -> one sentinel in the source, the spans behind their sentinels as the target, both
ending with </s>). The recipe sizes its raw texts with T5's ``random_spans_helper`` so that every source fills
``--seq-len`` 128 exactly (141 raw tokens -> 128 source, 29 target tokens); here the raw lengths are drawn uniformly
between those giving 100 and 128 source tokens, so sources average ~114 tokens, are right-padded to the longest of
the batch (the attention mask and the padding path exercised) and targets are ~23-29 tokens: the decoder is a quarter
of the encoder's length, as in T5 pretraining. tokens/s counts the scored target tokens (what the loss averages
over; the mean per step over the data); the source tokens per second are given beside. Each variant trains its own
copy; every step's loss of every variant is recorded, and the script stops unless the first-step losses of each
pair agree to 1e-5 (relative 1e-6 above a loss of 10: v1.1's untied N(0, 1) head with no rescaling starts near 60)
and reports the largest difference over all the steps of the run. Context row: minilm with the logits materialised
(``model(...)`` then ``seq2seq_loss``). The step's peak memory is measured once per variant at 1 thread, in a fresh
process (benchmarks/common.py).

Generation: ``T5.generate(src, mask, max_new_tokens=N, min_new_tokens=N, num_beams=k)`` against
``model.generate(input_ids=src, attention_mask=mask, max_new_tokens=N, min_new_tokens=N, num_beams=k,
do_sample=False, decoder_start_token_id=0, use_cache=True)``; ``min_new_tokens = max_new_tokens = N`` bans </s> in
both, so every row makes exactly N = 64 tokens, and the script stops unless both produce the same tokens. Sources:
batch 1, one 128-token text; batch 4, texts of 128, 112, 96 and 80 tokens ending with </s>, right-padded with <pad>
and their attention mask. Greedy (the primary ratio) and beam search with 4 beams (length penalty 1, no early
stopping). A context row for greedy: the transformers model in a hand loop over its own KV cache (the encoder once,
then one decoder position per step: no ``generate()`` machinery). The encoder's pass is inside the timing; tokens/s
counts new tokens of the returned rows (batch x N).

Every variant is warmed up, then they are timed round-robin, one step or one whole generation each per round;
medians of the wall clock and of the process's CPU time (which leaves out the time other processes hold the cores).
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import tempfile
from functools import partial

# Idle OpenMP threads that spin steal the CPU from the other thread on a small, shared machine. Must be set before
# torch starts its thread pool (see benchmarks/attention.py).
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import torch  # noqa: E402
from common import (  # noqa: E402
    PEAK_MEMORY,
    hand_train_step,
    import_transformers,
    labels_loss,
    largest_loss_difference,
    minilm_trainer,
    optimizer_note,
    ordered_batches,
    peak_memory_child,
    peak_memory_option,
    print_per_thread_count,
    print_table,
    recording,
    rounds_note,
    run_header,
    same_parameter_count,
    seq2seq_generation_table,
    seq2seq_variants,
    speed_up_table,
    time_round_robin,
    timing_args,
)

from minilm.models.hf import load_hf_state_dict  # noqa: E402
from minilm.models.hf.t5 import config_to_hf  # noqa: E402
from minilm.models.t5 import T5, V1_1, T5Config  # noqa: E402
from minilm.objectives.seq2seq import pad_seq2seq_batch, seq2seq_loss, target_tokens  # noqa: E402
from minilm.objectives.span_corruption import span_corruption_example  # noqa: E402
from minilm.recipes.seq2seq import target_counts, teacher_forcing_loss  # noqa: E402
from minilm.recipes.t5 import T5_SIZES, SpanCorruptionSettings, raw_text_length  # noqa: E402
from minilm.train.trainer import LossOutput  # noqa: E402

VOCAB_SIZE = 8192  # the default job's tokenizer size
PAD, EOS, UNK = 0, 1, 2  # T5's special ids; <pad> is also the decoder's start token
N_SENTINELS = 100  # <extra_id_0> = VOCAB_SIZE - 1, <extra_id_1> = VOCAB_SIZE - 2, ... (T5's layout)
SENTINELS = tuple(range(VOCAB_SIZE - 1, VOCAB_SIZE - 1 - N_SENTINELS, -1))
BODY = (3, VOCAB_SIZE - N_SENTINELS)  # random text tokens are drawn from [3, first sentinel)
MIN_SOURCE = 100  # the shortest training source (the longest: --seq-len)
N_BATCHES = 8  # distinct batches in the data (the steps cycle through them)
NEW_TOKENS = 64
SOURCE_LENGTHS = (128, 112, 96, 80)  # batch 4's generation sources (batch 1: the first)
BEAMS = 4

MINILM = "minilm T5, Trainer.train_step (teacher_forcing_loss)"
PRIMARY = "transformers T5ForConditionalGeneration, labels= (primary)"
PLAIN = "minilm, LM head and loss not fused (logits materialised)"
MINILM_V11 = "v1.1: minilm T5, Trainer.train_step"
HF_V11 = "v1.1: transformers T5ForConditionalGeneration, labels="
PAIRS = {MINILM: PRIMARY, PLAIN: PRIMARY, MINILM_V11: HF_V11}  # {variant: the transformers row it is compared with}
MINILM_GEN = "minilm T5.generate (KV cache)"
HF_GEN = "transformers generate, use_cache=True (primary)"


# ------------------------------------------------------------------------------------------ models


def minilm_config(size: str, seq_len: int, v1_1: bool = False) -> T5Config:
    config = T5Config(vocab_size=VOCAB_SIZE, **T5_SIZES[size])
    if v1_1:
        config = dataclasses.replace(config, **V1_1)
    config.dropout = 0.0  # tiny has none; the same for all
    if seq_len > config.max_len or max(SOURCE_LENGTHS) > config.max_len:
        raise SystemExit(f"--seq-len {seq_len} is longer than the model's {config.max_len} positions")
    return config


def transformers_model(config: T5Config, seed: int = 0):
    """T5ForConditionalGeneration with the identical config and transformers' own seeded initialisation."""
    from transformers import T5Config as HFT5Config
    from transformers import T5ForConditionalGeneration

    torch.manual_seed(seed)
    # "sdpa" is also transformers' default here (the position bias goes in as sdpa's additive mask)
    model = T5ForConditionalGeneration(HFT5Config(**config_to_hf(config), attn_implementation="sdpa"))
    if not config.tie_embeddings:  # v1.1: transformers 5 ties T5's head whatever the config says; untie it
        head = torch.empty_like(model.shared.weight).normal_(std=config.init_factor)  # its init of an untied head
        model.lm_head.weight = torch.nn.Parameter(head)
    return model


def minilm_model(config: T5Config, reference) -> T5:
    """minilm's T5 with the weights of ``reference``: every name and shape checked, one to one."""
    model = T5(config)
    load_hf_state_dict(model, reference.state_dict())
    return model


def check_logits(reference, model, config: T5Config) -> float:
    """Largest absolute difference between the two models' teacher-forced logits on a padded random batch; stops
    if > 1e-4."""
    source, mask = sources(2, seed=7)
    target = torch.randint(*BODY, (2, 32), generator=torch.Generator().manual_seed(8))
    target[:, 0] = config.decoder_start_id
    reference.eval(), model.eval()
    with torch.no_grad():
        theirs = reference(input_ids=source, attention_mask=mask, decoder_input_ids=target).logits
        diff = (model(source, mask, target) - theirs).abs().max().item()
    if diff > 1e-4:
        raise SystemExit(f"minilm's logits differ from transformers' by {diff:.2e} with the same weights")
    return diff


# ------------------------------------------------------------------------------------------ data


def text(length: int, generator: torch.Generator) -> torch.Tensor:
    """``length`` random tokens: no specials, no sentinels, no </s> (span corruption appends it)."""
    return torch.randint(*BODY, (length,), generator=generator)


def training_examples(batch_size: int, seq_len: int) -> list[dict]:
    """N_BATCHES x batch_size random texts, each span-corrupted once with the recipe's default noise: {input_ids,
    labels}, sources of MIN_SOURCE..seq_len tokens (</s> included)."""
    generator = torch.Generator().manual_seed(0)
    settings = SpanCorruptionSettings()
    shortest, longest = raw_text_length(MIN_SOURCE, settings), raw_text_length(seq_len, settings)
    config = settings.span_config()
    examples = []
    for _ in range(N_BATCHES * batch_size):
        length = int(torch.randint(shortest, longest + 1, (), generator=generator))
        raw = text(length, generator)
        examples.append(span_corruption_example(raw, config, generator, sentinel_ids=SENTINELS, eos_id=EOS))
    return examples


def sources(batch: int, seed: int = 2) -> tuple[torch.Tensor, torch.Tensor]:
    """``batch`` source texts of SOURCE_LENGTHS tokens (the last one </s>), right-padded with <pad>, and their
    attention mask."""
    generator = torch.Generator().manual_seed(seed)
    texts = [torch.cat([text(length - 1, generator), torch.tensor([EOS])]) for length in SOURCE_LENGTHS[:batch]]
    ids = torch.full((batch, max(map(len, texts))), PAD, dtype=torch.long)
    mask = torch.zeros_like(ids)
    for row, t in enumerate(texts):
        ids[row, : len(t)], mask[row, : len(t)] = t, 1
    return ids, mask


# ------------------------------------------------------------------------------------------ training steps


def collate(examples: list[dict]) -> dict[str, torch.Tensor]:
    return pad_seq2seq_batch(examples, pad_id=PAD)


def plain_teacher_forcing_loss(model: T5, batch) -> LossOutput:
    """teacher_forcing_loss with the (B, T, V) logits materialised: ``model(...)``, then the cross-entropy (context
    row)."""
    labels, mask = batch["labels"], batch["attention_mask"]
    logits = model(batch["input_ids"], mask, model.shift_right(labels))
    return LossOutput(seq2seq_loss(logits, labels), n_tokens=int(mask.sum()))


def minilm_step(model: T5, data: list[dict], batch_size: int, loss_fn=teacher_forcing_loss):
    """A Trainer as the CLI builds it for the span_corruption objective (counts=target_counts, perplexity=True); its
    train_step, returning the step's loss. (The CLI corrupts afresh at batch time, DynamicSpanCorruption; here the
    data is corrupted once so that both libraries read the same batches.)"""
    trainer = minilm_trainer(model, loss_fn, data, batch_size, collate=collate, counts=target_counts, perplexity=True)
    return lambda: trainer.train_step()[0]


def transformers_step(model, data: list[dict], batch_size: int):
    """The Trainer's step for the transformers model: the same batches (same order and collate), AdamW groups and
    settings, clipping and schedule; the loss from ``labels=``."""
    return hand_train_step(model, labels_loss(model), ordered_batches(data, batch_size, collate), batch_size)


def variant_steps(configs: dict[str, T5Config], data: list[dict], batch_size: int) -> dict:
    """{variant: a function that builds its train_step}, so that a peak-memory child builds only its own; each
    variant trains its own copy of the same initial weights. ``configs``: "v1.0" [and "v1.1"]."""
    v10 = configs["v1.0"]
    steps = {
        MINILM: lambda: minilm_step(minilm_model(v10, transformers_model(v10)), data, batch_size),
        PRIMARY: lambda: transformers_step(transformers_model(v10), data, batch_size),
        PLAIN: lambda: minilm_step(
            minilm_model(v10, transformers_model(v10)), data, batch_size, loss_fn=plain_teacher_forcing_loss
        ),
    }
    if "v1.1" in configs:
        v11 = configs["v1.1"]
        steps[MINILM_V11] = lambda: minilm_step(minilm_model(v11, transformers_model(v11)), data, batch_size)
        steps[HF_V11] = lambda: transformers_step(transformers_model(v11), data, batch_size)
    return steps


def training_table(threads: int, args, configs: dict[str, T5Config], data: list[dict], tokens) -> str:
    variants, losses = recording(variant_steps(configs, data, args.batch_size))
    median, first = time_round_robin(variants, args.rounds, warmup=args.warmup)
    for ours, theirs in PAIRS.items():  # 1e-5, relative beyond a loss of 10 (v1.1's untied N(0, 1) head starts at ~60)
        if ours in first and abs(first[ours] - first[theirs]) > 1e-6 * max(10.0, abs(first[theirs])):
            raise SystemExit(f"first-step losses differ: {first} (same weights and batch: they should agree)")
    drift, n_steps = largest_loss_difference(losses, PAIRS)
    target, source = tokens
    firsts = ", ".join(f"{first[name]:.5f}" for name in (MINILM, PRIMARY, PLAIN))
    if MINILM_V11 in first:
        firsts += f"; v1.1 (minilm, transformers): {first[MINILM_V11]:.5f}, {first[HF_V11]:.5f}"
    rows = [
        f"{rounds_note(threads, args.rounds)}; first-step loss, same weights and batch (minilm, transformers, minilm "
        f"unfused): {firsts}; largest loss difference from the paired transformers model over the {n_steps} steps "
        f"each ran: {drift:.1e}\n",
    ]
    per_step = {"target tokens": target, "source tokens": source}
    v11 = {MINILM_V11: MINILM_V11, HF_V11: MINILM_V11}  # the v1.1 transformers row against the v1.1 minilm row
    return "\n".join(rows + speed_up_table(median, MINILM, per_step, PEAK_MEMORY, primary_of=v11))


# ------------------------------------------------------------------------------------------ generation


def minilm_generate(model: T5, ids, mask, beams: int) -> torch.Tensor:
    return model.generate(ids, mask, max_new_tokens=NEW_TOKENS, min_new_tokens=NEW_TOKENS, num_beams=beams)


def hf_generate(model, ids, mask, beams: int) -> torch.Tensor:
    return model.generate(
        input_ids=ids,
        attention_mask=mask,
        max_new_tokens=NEW_TOKENS,
        min_new_tokens=NEW_TOKENS,
        num_beams=beams,
        do_sample=False,
        decoder_start_token_id=PAD,
        use_cache=True,
    )


def generation_table(threads: int, reference, model: T5, args) -> str:
    generators = {MINILM_GEN: partial(minilm_generate, model), HF_GEN: partial(hf_generate, reference)}
    variants = seq2seq_variants(generators, reference, EOS, NEW_TOKENS)
    return seq2seq_generation_table(
        threads, args.gen_rounds, sources, variants, MINILM_GEN, NEW_TOKENS, SOURCE_LENGTHS, BEAMS
    )


# ------------------------------------------------------------------------------------------ main


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size", default="tiny", choices=["tiny", "small"], help="T5_SIZES preset (tiny)")
    parser.add_argument("--batch-size", type=int, default=16, help="texts per training step (16, the Trainer's)")
    parser.add_argument("--seq-len", type=int, default=128, help="the longest training source, </s> included (128)")
    parser.add_argument("--no-v1-1", dest="v1_1", action="store_false", help="leave out the T5 v1.1 training rows")
    peak_memory_option(parser)
    args = timing_args(parser, rounds=12, note="; 3 generation rounds instead of 5")
    args.gen_rounds = 3 if args.quick else 5
    if args.seq_len < MIN_SOURCE:
        raise SystemExit(f"--seq-len must be at least {MIN_SOURCE} (the shortest source)")
    transformers = import_transformers()
    transformers.utils.logging.disable_progress_bar()
    configs = {"v1.0": minilm_config(args.size, args.seq_len)}
    if args.v1_1:
        configs["v1.1"] = minilm_config(args.size, args.seq_len, v1_1=True)
    data = training_examples(args.batch_size, args.seq_len)
    if args.peak_memory_of:  # a child process measuring one variant's memory
        return peak_memory_child(variant_steps(configs, data, args.batch_size), args.peak_memory_of)
    config = configs["v1.0"]
    reference = transformers_model(config).eval()
    with tempfile.TemporaryDirectory() as directory:  # generation's minilm model: through from_pretrained
        reference.save_pretrained(directory)
        model = T5.from_pretrained(directory).eval()
    n_params = same_parameter_count(model, reference)
    diff = check_logits(reference, model, config)
    if args.v1_1:
        reference_v11 = transformers_model(configs["v1.1"])
        model_v11 = minilm_model(configs["v1.1"], reference_v11)
        n_params_v11 = same_parameter_count(model_v11, reference_v11)
        diff_v11 = check_logits(reference_v11, model_v11, configs["v1.1"])
        del reference_v11, model_v11
    batches = [collate(data[i * args.batch_size : (i + 1) * args.batch_size]) for i in range(N_BATCHES)]
    source_tokens = sum(int(b["attention_mask"].sum()) for b in batches) / N_BATCHES
    source_padded = sum(b["input_ids"].numel() for b in batches) / N_BATCHES
    target_scored = sum(target_tokens(b["labels"]) for b in batches) / N_BATCHES
    target_padded = sum(b["labels"].numel() for b in batches) / N_BATCHES

    print(run_header(f"transformers {transformers.__version__}"))
    c = config
    print(f"\nConfig (both models: fp32, the same initial weights, {optimizer_note()}):\n")
    v11_rows = []
    if args.v1_1:
        v11_rows = [
            (
                "v1.1 rows: gated GELU (tanh), own LM head, no output rescaling; parameters",
                f"{n_params_v11:,} (minilm = transformers)",
            ),
            ("v1.1 logits, same weights", f"max abs diff {diff_v11:.1e}"),
        ]
    settings = [
        ("size", f"{args.size} (minilm.recipes.t5.T5_SIZES)"),
        (
            "vocabulary (100 sentinels) / relative position buckets, max distance",
            f"{c.vocab_size} / {c.num_buckets}, {c.max_distance}",
        ),
        (
            "encoder layers / decoder layers / heads x d_kv / width / FFN",
            f"{c.n_encoder_layers} / {c.n_decoder_layers} / {c.n_heads} x {c.d_kv} / {c.d_model} / {c.d_ff}",
        ),
        (
            "v1.0: feed-forward, LM head, dropout",
            f"{c.activation}, tied to the token table (x d_model^-0.5), {c.dropout}",
        ),
        (
            "attention",
            "both F.scaled_dot_product_attention (transformers: sdpa), the position bias (with the padding or "
            "causal mask) as its additive mask",
        ),
        ("parameters (one shared token table, tied LM head)", f"{n_params:,} (minilm = transformers)"),
        ("logits, same weights (teacher forcing, padded sources)", f"max abs diff {diff:.1e}"),
        *v11_rows,
        (
            "training batch",
            f"{args.batch_size} span-corrupted texts: sources {source_tokens:,.0f} tokens/step (mean; "
            f"{MIN_SOURCE}-{args.seq_len} each), {source_padded:,.0f} padded; targets {target_scored:,.0f} scored "
            f"tokens/step (mean), {target_padded:,.0f} padded",
        ),
    ]
    print_table(("setting", "value"), settings)
    print(
        f"\nSpan-corruption training step, {target_scored:,.0f} target and {source_tokens:,.0f} source tokens/step "
        "(speed-up: their time / ours; the v1.1 transformers row against the v1.1 minilm row):\n"
    )
    tokens = (target_scored, source_tokens)
    print_per_thread_count(args.thread_counts, lambda threads: training_table(threads, args, configs, data, tokens))
    print(
        f"\nKV-cache generation, minilm vs transformers, v1.0 ({NEW_TOKENS} new tokens per row; each case's variants "
        "generated identical tokens):\n"
    )
    print_per_thread_count(args.thread_counts, lambda threads: generation_table(threads, reference, model, args))


if __name__ == "__main__":
    main()
