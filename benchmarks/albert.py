"""ALBERT's MLM + SOP training throughput: minilm's Albert against transformers' AlbertForPreTraining on the same
config, with the same optimizer, weights and batches.

    python benchmarks/albert.py              # 2 torch threads, then 1; 12 timed rounds; 1-2 minutes
    python benchmarks/albert.py --quick      # 4 rounds, for a smoke test
    python benchmarks/albert.py --threads 1  # one thread count only

minilm's ``Albert`` (the tiny pretraining size: 4 layers sharing one block, 4 heads, width 256, FFN 1024, embedding
size 64, 256 positions, no dropout (nor before the SOP head); pooler, MLM and SOP heads, as the ``mlm+sop``
objective builds it; 8192-token vocabulary) trains through the real ``Trainer.train_step`` with
``albert_mlm_sop_loss`` (vocabulary logits only at the masked positions; fused AdamW, clipping at 1.0, LambdaLR).
transformers' ``AlbertForPreTraining`` with the identical ``AlbertConfig`` (sdpa attention) trains in the same hand
loop as benchmarks/mlm.py's (same AdamW groups, betas, ``fused=True``, clipping, schedule), its loss from
``labels=`` and ``sentence_order_label=``: cross-entropy over full-vocabulary logits at every position, as it is
usually run. Both start from the same weights (transformers' initialisation, converted) and read the same batches:
16 rows of 128 random tokens, two segments, masked once ahead of timing by minilm's ``MaskingConfig`` (15 %,
80/10/10), a random order label per row. A context row gives minilm with logits at every position. Timing as in
benchmarks/mlm.py: round-robin, medians of wall clock and CPU time.
"""

from __future__ import annotations

import argparse
import os

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # before torch starts its thread pool (benchmarks/attention.py)

import torch  # noqa: E402
from common import (  # noqa: E402
    import_transformers,
    print_per_thread_count,
    print_table,
    rounds_note,
    run_header,
    same_parameter_count,
    speed_up_table,
    time_round_robin,
    timing_args,
)
from mlm import N_BATCHES, VOCAB_SIZE, minilm_step, mlm_examples, transformers_step  # noqa: E402

from minilm.models.albert import ALBERT_SIZES, Albert, AlbertConfig  # noqa: E402
from minilm.models.hf import load_hf_state_dict  # noqa: E402
from minilm.models.hf.albert import config_to_hf  # noqa: E402
from minilm.objectives.mlm import mlm_loss  # noqa: E402
from minilm.objectives.sop import LABEL_KEY, sop_loss  # noqa: E402
from minilm.recipes.albert import albert_mlm_sop_loss  # noqa: E402
from minilm.train.trainer import LossOutput, default_collate  # noqa: E402

MINILM = "minilm Albert, Trainer.train_step"
PRIMARY = "transformers AlbertForPreTraining, labels= (primary)"


def minilm_config(seq_len: int) -> AlbertConfig:
    # pooler, MLM and SOP heads (mlm+sop's); no dropout before the SOP head, so the first-step losses must agree
    config = AlbertConfig(vocab_size=VOCAB_SIZE, **ALBERT_SIZES["tiny"], classifier_dropout=0.0)
    if seq_len > config.max_len:
        raise SystemExit(f"--seq-len {seq_len} is longer than the tiny model's {config.max_len} positions")
    return config


def transformers_model(config: AlbertConfig):
    from transformers import AlbertConfig as HFAlbertConfig
    from transformers import AlbertForPreTraining

    return AlbertForPreTraining(HFAlbertConfig(**config_to_hf(config), attn_implementation="sdpa"))


def minilm_model(config: AlbertConfig, reference) -> Albert:
    model = Albert(config)
    load_hf_state_dict(model, reference.state_dict())  # every name and shape checked, one to one
    return model


def albert_examples(batch_size: int, seq_len: int, generator: torch.Generator) -> list[dict]:
    """benchmarks/mlm.py's masked rows with a second segment (the second half) and a random sentence-order label."""
    examples = mlm_examples(batch_size, seq_len, generator)
    for example in examples:
        example["token_type_ids"] = (torch.arange(seq_len) >= seq_len // 2).long()
        example[LABEL_KEY] = torch.randint(2, (), generator=generator)
    return examples


def full_vocab_loss(model, batch) -> LossOutput:
    """albert_mlm_sop_loss with logits at every position (B, T, V), as a model without the masked-only path does."""
    hidden = model.features(batch["input_ids"], batch["attention_mask"], batch["token_type_ids"]).last_hidden_state
    mlm, sop = mlm_loss(model.mlm_logits(hidden), batch["labels"]), sop_loss(model.sop_logits(hidden), batch[LABEL_KEY])
    return LossOutput(mlm + sop, n_tokens=int(batch["attention_mask"].sum()))


def table(threads: int, args, config: AlbertConfig, data: list[dict]) -> str:
    tokens = args.batch_size * args.seq_len
    reference = transformers_model(config)
    labels = ("labels", LABEL_KEY)
    variants = {
        MINILM: minilm_step(
            minilm_model(config, reference), albert_mlm_sop_loss, data, default_collate, args.batch_size
        ),
        PRIMARY: transformers_step(reference, data, default_collate, args.batch_size, fused=True, labels=labels),
        "minilm, logits at every position": minilm_step(
            minilm_model(config, reference), full_vocab_loss, data, default_collate, args.batch_size
        ),
    }
    median, first = time_round_robin(variants, args.rounds, warmup=args.warmup)
    rows = [
        f"{rounds_note(threads, args.rounds)}; first-step loss (MLM + SOP), same weights and batch: "
        + ", ".join(f"{first[n][0]:.5f}" for n in median)
        + " (minilm, transformers, minilm every position)\n",
    ]
    return "\n".join(rows + speed_up_table(median, MINILM, {"tokens": tokens}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--batch-size", type=int, default=16, help="rows per step (16)")
    parser.add_argument("--seq-len", type=int, default=128, help="tokens per row (128)")
    args = timing_args(parser, rounds=12)
    transformers = import_transformers()
    config = minilm_config(args.seq_len)
    reference = transformers_model(config)
    n_minilm = same_parameter_count(minilm_model(config, reference), reference)
    data = albert_examples(args.batch_size, args.seq_len, torch.Generator().manual_seed(0))
    masked = sum(int((e["labels"] != -100).sum()) for e in data) / N_BATCHES

    print(run_header(f"transformers {transformers.__version__}"))
    c = config
    print("\nConfig (both models: fp32, tied decoder, same initial weights, the same optimizer and batches):\n")
    settings = [
        ("vocabulary / positions / segments", f"{c.vocab_size} / {c.max_len} / {c.n_segments}"),
        ("layers (one shared block) / heads / width / FFN", f"{c.n_layers} / {c.n_heads} / {c.d_model} / {c.d_ff}"),
        ("embedding size E", f"{c.embedding_size}"),
        ("activation, dropout", f"{c.activation}, {c.dropout}"),
        ("parameters (minilm = transformers)", f"{n_minilm:,}"),
        ("batch", f"{args.batch_size} x {args.seq_len}, {masked:.0f} masked tokens per step (mean)"),
    ]
    print_table(("setting", "value"), settings)
    print(f"\nMLM + SOP training step, {args.batch_size * args.seq_len:,} tokens/step (speed-up: their time / ours):\n")
    print_per_thread_count(args.thread_counts, lambda threads: table(threads, args, config, data))


if __name__ == "__main__":
    main()
