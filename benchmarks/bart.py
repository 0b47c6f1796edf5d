"""BART against transformers' BartForConditionalGeneration with the same weights: denoising training tokens/s
(and the step's peak memory), then KV-cache generation tokens/s, greedy and beam search.

    python benchmarks/bart.py              # 2 torch threads, then 1; 12 training rounds, 7 generation rounds; ~4-5 min
    python benchmarks/bart.py --quick      # 4 training rounds, 3 generation rounds, for a smoke test
    python benchmarks/bart.py --threads 1  # one thread count only
    python benchmarks/bart.py --size small --batch-size 8

The model: the ``tiny`` BART of ``minilm.recipes.bart.BART_SIZES`` (what ``--model bart --size tiny`` trains: 2
encoder + 2 decoder layers, 4 heads, width 256, FFN 1024, 256 positions, exact GELU, dropout 0) with an 8192-token
vocabulary (<s> <pad> </s> <unk> <mask> = 0-4, as BART's), built as transformers' ``BartForConditionalGeneration``
(``config_to_hf``, sdpa attention, its seeded initialisation) and converted to minilm's ``Bart``: the same weights
on both sides, and the script stops unless the logits agree.

Training, one denoising step: minilm through the real ``Trainer.train_step`` with the ``denoise`` objective's
``denoise_loss`` and ``denoise_counts`` (``Bart.seq2seq_states``: the tied vocabulary projection and the
cross-entropy fused, the (B, T, V) logits never exist; fused AdamW, clipping at 1.0, LambdaLR), the batches collated
by ``pad_seq2seq_batch``. transformers: ``model(input_ids, attention_mask, labels=labels).loss`` (it shifts the labels
right behind ``decoder_start_token_id`` 2, as minilm's ``shift_right``; full-vocabulary logits at every target
position), in a hand loop with the same AdamW groups, betas, eps, ``fused=True``, clipping and schedule, reading the
same batches in the same order. Data: documents of 128 random tokens (``<s> ... </s>``, sentences of 8-24 tokens
ending in a "." token), corrupted once ahead of timing with the recipe's default noise (``DenoiseSettings()``:
sentence permutation + text infilling, 30 % of the tokens, Poisson(3) spans), so sources are shorter than their
targets and padded to the longest of the batch. tokens/s counts the target tokens (batch x 128: what the loss
scores); the source tokens are given beside. Each variant trains its own copy; every step's loss of every variant
is recorded, and the script stops unless the first-step losses agree to 1e-5 (and reports the largest difference
over all the steps of the run: the same gradients and updates). Context row: minilm with the logits materialised
(``model(...)`` then ``seq2seq_loss``). The step's peak memory is measured once per variant at 1 thread, in a fresh
process (benchmarks/common.py).

Generation: ``Bart.generate(src, mask, max_new_tokens=N, min_new_tokens=N, num_beams=k)`` against
``model.generate(input_ids=src, attention_mask=mask, max_new_tokens=N, min_new_tokens=N, num_beams=k,
do_sample=False, decoder_start_token_id=2, forced_bos_token_id=None, forced_eos_token_id=None, use_cache=True)``;
``min_new_tokens = max_new_tokens = N`` bans </s> in both, so every row makes exactly N = 64 tokens, and the script
stops unless both produce the same tokens. Sources: batch 1, one 128-token document; batch 4, documents of 128, 112,
96 and 80 tokens, right-padded (BART pads on the right) with their attention mask. Greedy (the primary ratio) and
beam search with 4 beams (length penalty 1, no early stopping). A context row for greedy: the transformers model in
a hand loop over its own KV cache (the encoder once, then one decoder position per step: no ``generate()``
machinery). The encoder's pass is inside the timing; tokens/s counts new tokens of the returned rows (batch x N).

Every variant is warmed up, then they are timed round-robin, one step or one whole generation each per round;
medians of the wall clock and of the process's CPU time (which leaves out the time other processes hold the cores).
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

from minilm.models.bart import Bart, BartConfig  # noqa: E402
from minilm.models.hf import load_hf_state_dict  # noqa: E402
from minilm.models.hf.bart import config_to_hf  # noqa: E402
from minilm.objectives.denoising import denoising_example  # noqa: E402
from minilm.objectives.seq2seq import pad_seq2seq_batch, seq2seq_loss  # noqa: E402
from minilm.recipes.bart import BART_SIZES, DenoiseSettings, denoise_counts, denoise_loss  # noqa: E402
from minilm.train.trainer import LossOutput  # noqa: E402

VOCAB_SIZE = 8192  # the default job's tokenizer size
BOS, PAD, EOS, UNK, MASK, FULL_STOP = 0, 1, 2, 3, 4, 5  # BART's special ids, then the "." that ends a sentence
N_SPECIAL = 6  # random body tokens are drawn from [N_SPECIAL, VOCAB_SIZE)
SENTENCE_LENGTHS = (8, 24)  # tokens per sentence, "." included (uniform)
N_BATCHES = 8  # distinct batches in the data (the steps cycle through them)
NEW_TOKENS = 64
SOURCE_LENGTHS = (128, 112, 96, 80)  # batch 4's source documents (batch 1: the first)
BEAMS = 4

MINILM = "minilm Bart, Trainer.train_step (denoise_loss)"
PRIMARY = "transformers BartForConditionalGeneration, labels= (primary)"
PLAIN = "minilm, LM head and loss not fused (logits materialised)"
MINILM_GEN = "minilm Bart.generate (KV cache)"
HF_GEN = "transformers generate, use_cache=True (primary)"


# ------------------------------------------------------------------------------------------ models


def minilm_config(size: str, seq_len: int) -> BartConfig:
    config = BartConfig(vocab_size=VOCAB_SIZE, **BART_SIZES[size])
    config.dropout = config.attention_dropout = config.activation_dropout = 0.0  # tiny has none; the same for all
    if seq_len > config.max_len or max(SOURCE_LENGTHS) > config.max_len:
        raise SystemExit(f"--seq-len {seq_len} is longer than the model's {config.max_len} positions")
    return config


def transformers_model(config: BartConfig, seed: int = 0):
    """BartForConditionalGeneration with the identical config and transformers' own seeded initialisation."""
    from transformers import BartConfig as HFBartConfig
    from transformers import BartForConditionalGeneration

    torch.manual_seed(seed)
    # "sdpa" is also transformers' default here; config_to_hf sets no forced_eos_token_id (minilm forces nothing)
    return BartForConditionalGeneration(HFBartConfig(**config_to_hf(config), attn_implementation="sdpa"))


def minilm_model(config: BartConfig, reference) -> Bart:
    """minilm's Bart with the weights of ``reference``: every name and shape checked, one to one."""
    model = Bart(config)
    load_hf_state_dict(model, reference.state_dict())
    return model


def check_logits(reference, model, config: BartConfig) -> float:
    """Largest absolute difference between the two models' teacher-forced logits on a padded random batch; stops
    if > 1e-4."""
    source, mask = sources(2, seed=7)
    target = torch.randint(N_SPECIAL, config.vocab_size, (2, 64), generator=torch.Generator().manual_seed(8))
    target[:, 0] = config.decoder_start_id
    reference.eval(), model.eval()
    with torch.no_grad():
        theirs = reference(input_ids=source, attention_mask=mask, decoder_input_ids=target).logits
        diff = (model(source, mask, target) - theirs).abs().max().item()
    if diff > 1e-4:
        raise SystemExit(f"minilm's logits differ from transformers' by {diff:.2e} with the same weights")
    return diff


# ------------------------------------------------------------------------------------------ data


def document(length: int, generator: torch.Generator) -> torch.Tensor:
    """``<s> sentence sentence ... </s>``, ``length`` tokens, random tokens in sentences that end in "."."""
    body = torch.randint(N_SPECIAL, VOCAB_SIZE, (length - 2,), generator=generator)
    end = -1
    while True:
        end += int(torch.randint(SENTENCE_LENGTHS[0], SENTENCE_LENGTHS[1] + 1, (), generator=generator))
        if end >= len(body) - 1:
            break
        body[end] = FULL_STOP
    body[-1] = FULL_STOP
    return torch.cat([torch.tensor([BOS]), body, torch.tensor([EOS])])


def training_examples(batch_size: int, seq_len: int) -> list[dict]:
    """N_BATCHES x batch_size documents, each corrupted once with the recipe's default noise: {input_ids, labels}."""
    generator = torch.Generator().manual_seed(0)
    token_ids = dict(
        mask_id=MASK,
        bos_id=BOS,
        eos_id=EOS,
        sentence_end_ids=(FULL_STOP,),
        vocab_size=VOCAB_SIZE,
        special_ids=tuple(range(N_SPECIAL - 1)),
    )
    noise = DenoiseSettings().denoising()
    return [
        denoising_example(document(seq_len, generator), noise, generator, **token_ids)
        for _ in range(N_BATCHES * batch_size)
    ]


def sources(batch: int, seed: int = 2) -> tuple[torch.Tensor, torch.Tensor]:
    """``batch`` source documents of SOURCE_LENGTHS tokens, right-padded with <pad>, and their attention mask."""
    generator = torch.Generator().manual_seed(seed)
    docs = [document(length, generator) for length in SOURCE_LENGTHS[:batch]]
    ids = torch.full((batch, max(map(len, docs))), PAD, dtype=torch.long)
    mask = torch.zeros_like(ids)
    for row, doc in enumerate(docs):
        ids[row, : len(doc)], mask[row, : len(doc)] = doc, 1
    return ids, mask


# ------------------------------------------------------------------------------------------ training steps


def collate(examples: list[dict]) -> dict[str, torch.Tensor]:
    return pad_seq2seq_batch(examples, pad_id=PAD)


def plain_denoise_loss(model: Bart, batch) -> LossOutput:
    """denoise_loss with the (B, T, V) logits materialised: ``model(...)``, then the cross-entropy (context row)."""
    labels, mask = batch["labels"], batch["attention_mask"]
    logits = model(batch["input_ids"], mask, model.shift_right(labels))
    return LossOutput(seq2seq_loss(logits, labels), n_tokens=int(mask.sum()))


def minilm_step(model: Bart, data: list[dict], batch_size: int, loss_fn=denoise_loss):
    """A Trainer as the CLI builds it for the denoise objective (counts=denoise_counts, perplexity=True); its
    train_step, returning the step's loss."""
    trainer = minilm_trainer(model, loss_fn, data, batch_size, collate=collate, counts=denoise_counts, perplexity=True)
    return lambda: trainer.train_step()[0]


def transformers_step(model, data: list[dict], batch_size: int):
    """The Trainer's step for the transformers model: the same batches (same order and collate), AdamW groups and
    settings, clipping and schedule; the loss from ``labels=``."""
    return hand_train_step(model, labels_loss(model), ordered_batches(data, batch_size, collate), batch_size)


def variant_steps(config: BartConfig, data: list[dict], batch_size: int) -> dict:
    """{variant: a function that builds its train_step}, so that a peak-memory child builds only its own; each
    variant trains its own copy of the same initial weights."""
    return {
        MINILM: lambda: minilm_step(minilm_model(config, transformers_model(config)), data, batch_size),
        PRIMARY: lambda: transformers_step(transformers_model(config), data, batch_size),
        PLAIN: lambda: minilm_step(
            minilm_model(config, transformers_model(config)), data, batch_size, loss_fn=plain_denoise_loss
        ),
    }


def training_table(threads: int, args, config: BartConfig, data: list[dict]) -> str:
    variants, losses = recording(variant_steps(config, data, args.batch_size))
    median, first = time_round_robin(variants, args.rounds, warmup=args.warmup)
    if max(first.values()) - min(first.values()) > 1e-5:
        raise SystemExit(f"first-step losses differ: {first} (same weights and batch: they should agree)")
    drift, n_steps = largest_loss_difference(losses, {name: MINILM for name in losses})
    rows = [
        f"{rounds_note(threads, args.rounds)}; first-step loss, same weights and batch (minilm, transformers, minilm "
        "unfused): "
        + ", ".join(f"{first[name]:.5f}" for name in median)
        + f"; largest loss difference over the {n_steps} steps each ran: {drift:.1e}\n",
    ]
    return "\n".join(
        rows + speed_up_table(median, MINILM, {"target tokens": args.batch_size * args.seq_len}, PEAK_MEMORY)
    )


# ------------------------------------------------------------------------------------------ generation


def minilm_generate(model: Bart, ids, mask, beams: int) -> torch.Tensor:
    return model.generate(ids, mask, max_new_tokens=NEW_TOKENS, min_new_tokens=NEW_TOKENS, num_beams=beams)


def hf_generate(model, ids, mask, beams: int) -> torch.Tensor:
    return model.generate(
        input_ids=ids,
        attention_mask=mask,
        max_new_tokens=NEW_TOKENS,
        min_new_tokens=NEW_TOKENS,
        num_beams=beams,
        do_sample=False,
        decoder_start_token_id=2,
        forced_bos_token_id=None,
        forced_eos_token_id=None,
        use_cache=True,
    )


def generation_table(threads: int, reference, model: Bart, args) -> str:
    generators = {MINILM_GEN: partial(minilm_generate, model), HF_GEN: partial(hf_generate, reference)}
    variants = seq2seq_variants(generators, reference, EOS, NEW_TOKENS)
    return seq2seq_generation_table(
        threads, args.gen_rounds, sources, variants, MINILM_GEN, NEW_TOKENS, SOURCE_LENGTHS, BEAMS
    )


# ------------------------------------------------------------------------------------------ main


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size", default="tiny", choices=["tiny", "small"], help="BART_SIZES preset (tiny)")
    parser.add_argument("--batch-size", type=int, default=16, help="documents per training step (16)")
    parser.add_argument("--seq-len", type=int, default=128, help="tokens per training document (128)")
    peak_memory_option(parser)
    args = timing_args(parser, rounds=12, note="; 3 generation rounds instead of 7")
    args.gen_rounds = 3 if args.quick else 7
    transformers = import_transformers()
    transformers.utils.logging.disable_progress_bar()
    config = minilm_config(args.size, args.seq_len)
    data = training_examples(args.batch_size, args.seq_len)
    if args.peak_memory_of:  # a child process measuring one variant's memory
        return peak_memory_child(variant_steps(config, data, args.batch_size), args.peak_memory_of)
    reference = transformers_model(config).eval()
    with tempfile.TemporaryDirectory() as directory:  # generation's minilm model: through from_pretrained
        reference.save_pretrained(directory)
        model = Bart.from_pretrained(directory).eval()
    n_minilm = same_parameter_count(model, reference)
    diff = check_logits(reference, model, config)
    source_tokens = sum(len(e["input_ids"]) for e in data) / N_BATCHES
    padded = sum(
        collate(data[i * args.batch_size : (i + 1) * args.batch_size])["input_ids"].numel() for i in range(N_BATCHES)
    )

    print(run_header(f"transformers {transformers.__version__}"))
    c = config
    print(f"\nConfig (both models: fp32, the same initial weights, {optimizer_note()}):\n")
    settings = [
        ("size", f"{args.size} (minilm.recipes.bart.BART_SIZES)"),
        ("vocabulary / positions", f"{c.vocab_size} / {c.max_len}"),
        (
            "encoder layers / decoder layers / heads / width / FFN",
            f"{c.n_encoder_layers} / {c.n_decoder_layers} / {c.n_heads} / {c.d_model} / {c.d_ff}",
        ),
        ("activation, dropout", f"{c.activation}, {c.dropout}"),
        ("attention", "minilm: F.scaled_dot_product_attention; transformers: sdpa"),
        ("parameters (one shared token table, tied LM head)", f"{n_minilm:,} (minilm = transformers)"),
        ("logits, same weights (teacher forcing, padded sources)", f"max abs diff {diff:.1e}"),
        (
            "training batch",
            f"{args.batch_size} documents of {args.seq_len} tokens (targets: {args.batch_size * args.seq_len:,} "
            f"tokens/step); sources after {'+'.join(DenoiseSettings().denoising().noises)}: {source_tokens:,.0f} "
            f"tokens/step (mean), {padded / N_BATCHES:,.0f} padded",
        ),
    ]
    print_table(("setting", "value"), settings)
    print(
        f"\nDenoising training step, {args.batch_size * args.seq_len:,} target tokens/step (speed-up: their time / "
        "ours):\n"
    )
    print_per_thread_count(args.thread_counts, lambda threads: training_table(threads, args, config, data))
    print(
        f"\nKV-cache generation, minilm vs transformers ({NEW_TOKENS} new tokens per row; each case's variants "
        "generated identical tokens):\n"
    )
    print_per_thread_count(args.thread_counts, lambda threads: generation_table(threads, reference, model, args))


if __name__ == "__main__":
    main()
