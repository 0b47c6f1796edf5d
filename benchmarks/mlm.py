"""MLM training throughput of minilm's BERT against transformers' BertForMaskedLM on the same config, MFU, and
fine-tuning examples/s against BertForSequenceClassification.

    python benchmarks/mlm.py              # 2 torch threads, then 1; 12 timed rounds; 2-3 minutes
    python benchmarks/mlm.py --quick      # 4 rounds, for a smoke test
    python benchmarks/mlm.py --threads 1  # one thread count only

MLM: minilm's ``Bert`` (the tiny pretraining size: 4 layers, 4 heads, width 256, FFN 1024, 256 positions, dropout 0;
no pooler and no NSP head, as the ``mlm`` objective builds it; 8192-token vocabulary) trains through the real
``Trainer.train_step`` with ``bert_mlm_loss`` (vocabulary logits only at the masked positions; fused AdamW, clipping
at 1.0, LambdaLR). transformers' ``BertForMaskedLM`` with the identical ``BertConfig`` (sdpa attention) trains in a
hand loop doing the same optimizer work (the same AdamW groups, betas, ``fused=True``, clipping, schedule), with its
loss from ``labels=``: cross-entropy over full-vocabulary logits at every position, as it is usually run. Both start
from the same weights (transformers' initialisation, converted) and read the same batches: 16 rows of 128 random
tokens ([CLS] ... [SEP], no padding), masked once, ahead of timing, by minilm's ``MaskingConfig`` (15 %, 80/10/10).
Two context rows split the difference: minilm with logits at every position, and transformers with torch's default
(unfused) AdamW.

Fine-tuning: SST-2-shaped batches (32 single sentences, lengths 8-64 tokens, padded to the longest of the batch, 2
labels) through minilm's fine-tuning pieces (``FinetuneModel`` of the same body and the sequence kind's collate and
``SequenceClassificationHead`` with BERT's pooler layer, ``finetune_loss``, ``Trainer.train_step``) against
``BertForSequenceClassification`` in the same kind of hand loop.

Timing, as in benchmarks/train_throughput.py: warm-up steps, then the variants round-robin, one step each per round;
medians of the wall clock and of the process's CPU time (the steadier ratio on a shared machine). Each MLM round
also times a 2048^3 fp32 matmul, the machine's matmul peak for the MFU. Model FLOPs count the useful work with one
formula for both models (PaLM, appendix B: 6 N per token for N non-embedding parameters, plus 12 L T d for
attention), with the MLM head (transform, norm, d x V decoder) counted only at the masked positions, where the loss
needs it: transformers' head at the other ~85 % of the positions is work the model does, not useful work.
"""

from __future__ import annotations

import argparse
import os

# Idle OpenMP threads that spin steal the CPU from the other thread on a small, shared machine. Must be set before
# torch starts its thread pool (see benchmarks/attention.py).
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import torch  # noqa: E402
from common import (  # noqa: E402
    PEAK_MEMORY,
    hand_train_step,
    import_transformers,
    labels_loss,
    matmul_peak_note,
    mfu_columns,
    minilm_trainer,
    optimizer_note,
    ordered_batches,
    peak_memory_child,
    peak_memory_option,
    print_per_thread_count,
    print_table,
    rounds_note,
    run_header,
    same_parameter_count,
    speed_up_table,
    time_round_robin,
    time_with_matmul_peak,
    timing_args,
)

from minilm.data.tasks import TASKS  # noqa: E402
from minilm.finetune.kinds import EncodedExample, task_kind  # noqa: E402
from minilm.finetune.model import Body, FinetuneModel, finetune_loss  # noqa: E402
from minilm.heads import SequenceClassificationHead  # noqa: E402
from minilm.models.bert import BERT_SIZES, Bert, BertConfig  # noqa: E402
from minilm.models.hf import load_hf_state_dict  # noqa: E402
from minilm.models.hf.bert import config_to_hf  # noqa: E402
from minilm.objectives.mlm import MaskingConfig, mlm_loss  # noqa: E402
from minilm.recipes.bert import bert_mlm_loss  # noqa: E402
from minilm.train.registry import get_model  # noqa: E402
from minilm.train.trainer import BatchOrder, LossOutput, default_collate  # noqa: E402
from minilm.utils import count_parameters  # noqa: E402

VOCAB_SIZE = 8192  # the default job's tokenizer size
PAD, CLS, SEP, MASK = 0, 2, 3, 4  # ids 0-4 stand for [PAD], [UNK], [CLS], [SEP], [MASK]
N_SPECIAL = 5
MINILM = "minilm Bert, Trainer.train_step"
MINILM_FT = "minilm FinetuneModel, Trainer.train_step"
N_BATCHES = 8  # distinct batches in the data (the steps cycle through them)


# ------------------------------------------------------------------------------------------ models


def minilm_config(seq_len: int, mlm: bool = True) -> BertConfig:
    """The tiny BERT size, no pooler or NSP head (the mlm objective's model; BertForMaskedLM has no pooler either)."""
    config = BertConfig(vocab_size=VOCAB_SIZE, **BERT_SIZES["tiny"], pooler=False, nsp=False, mlm=mlm)
    config.dropout = config.attention_dropout = 0.0  # tiny already has none; stated so both sides compare alike
    if seq_len > config.max_len:
        raise SystemExit(f"--seq-len {seq_len} is longer than the tiny model's {config.max_len} positions")
    return config


def hf_config(config: BertConfig, attention: str | None = "sdpa", **extra):
    """The identical transformers BertConfig ("gelu": the exact (erf) GELU in both)."""
    from transformers import BertConfig as HFBertConfig

    # "sdpa" is also transformers' default here (None: its default, printed)
    return HFBertConfig(**config_to_hf(config), attn_implementation=attention, **extra)


def transformers_mlm(config: BertConfig, attention: str | None = "sdpa"):
    from transformers import BertForMaskedLM

    return BertForMaskedLM(hf_config(config, attention))


def minilm_mlm(config: BertConfig, reference) -> Bert:
    """minilm's Bert with the weights of ``reference`` (a BertForMaskedLM): the two start from the same point."""
    model = Bert(config)
    load_hf_state_dict(model, reference.state_dict())  # every name and shape checked, one to one
    return model


def transformers_classifier(config: BertConfig, n_labels: int):
    from transformers import BertForSequenceClassification

    return BertForSequenceClassification(hf_config(config, num_labels=n_labels, classifier_dropout=0.0))


def minilm_classifier(config: BertConfig, reference, kind) -> FinetuneModel:
    """FinetuneModel(Bert body, SequenceClassificationHead with BERT's pooler layer) with ``reference``'s weights."""
    body = Bert(config)
    head = SequenceClassificationHead(
        config.d_model, len(kind.info.labels), pooling="first", dropout=0.0, hidden_layer=True
    )
    state = reference.state_dict()
    load_hf_state_dict(body, {k: v for k, v in state.items() if not k.startswith(("bert.pooler.", "classifier."))})
    head.dense.load_state_dict({"weight": state["bert.pooler.dense.weight"], "bias": state["bert.pooler.dense.bias"]})
    head.classifier.load_state_dict({"weight": state["classifier.weight"], "bias": state["classifier.bias"]})
    return FinetuneModel(Body(body, config, get_model("bert"), tokenizer=None), head, kind)


# ------------------------------------------------------------------------------------------ data


def mlm_examples(batch_size: int, seq_len: int, generator: torch.Generator, **masking_options) -> list[dict]:
    """N_BATCHES x batch_size rows of [CLS] random tokens [SEP], each batch masked once by minilm's masking (BERT's
    80/10/10, or ``masking_options`` such as ``replace_prob=``)."""
    special_ids = tuple(range(N_SPECIAL))
    masking = MaskingConfig(mask_id=MASK, vocab_size=VOCAB_SIZE, pad_id=PAD, special_ids=special_ids, **masking_options)
    examples = []
    for _ in range(N_BATCHES):
        ids = torch.randint(N_SPECIAL, VOCAB_SIZE, (batch_size, seq_len), generator=generator)
        ids[:, 0], ids[:, -1] = CLS, SEP
        special = torch.zeros_like(ids, dtype=torch.bool)
        special[:, 0] = special[:, -1] = True
        batch = {
            "input_ids": ids,
            "attention_mask": torch.ones_like(ids),
            "token_type_ids": torch.zeros_like(ids),
            "special_tokens_mask": special,
        }
        masked = masking(batch, generator)
        keys = ("input_ids", "attention_mask", "token_type_ids", "labels")
        examples += [{k: masked[k][row] for k in keys} for row in range(batch_size)]
    return examples


def sst2_features(batch_size: int, max_len: int, generator: torch.Generator) -> list[EncodedExample]:
    """SST-2-shaped features: one sentence of 8..max_len tokens ([CLS] ... [SEP]), label 0 or 1."""
    features = []
    for _ in range(N_BATCHES * batch_size):
        n = int(torch.randint(8, max_len + 1, (), generator=generator))
        ids = [CLS, *torch.randint(N_SPECIAL, VOCAB_SIZE, (n - 2,), generator=generator).tolist(), SEP]
        features.append(EncodedExample([ids], [[0] * n], int(torch.randint(2, (), generator=generator))))
    return features


# ------------------------------------------------------------------------------------------ training steps


def minilm_step(model, loss_fn, data, collate, batch_size: int):
    """A Trainer as the CLI builds it (fused AdamW on CPU, clipping 1.0, warm-up + cosine LambdaLR); its train_step."""
    return minilm_trainer(model, loss_fn, data, batch_size, collate=collate).train_step


def full_vocab_mlm_loss(model, batch) -> LossOutput:
    """bert_mlm_loss with logits at every position (B, T, V), as a model without the masked-only path does."""
    hidden = model.features(batch["input_ids"], batch["attention_mask"], batch["token_type_ids"]).last_hidden_state
    loss = mlm_loss(model.mlm_logits(hidden), batch["labels"])
    return LossOutput(loss, n_tokens=int(batch["attention_mask"].sum()))


def transformers_step(model, data, collate, batch_size: int, fused: bool | None, labels=("labels",)):
    """The Trainer's step for a transformers model: the same batches (same order and collate), AdamW groups and
    settings, clipping and schedule; the loss is the model's own from ``labels=`` (and the other ``labels`` keys,
    e.g. ALBERT's ``sentence_order_label``). Returns (loss, tokens), as the Trainer's step."""
    loss = labels_loss(model, ("input_ids", "attention_mask", "token_type_ids", *labels))
    return hand_train_step(
        model,
        lambda batch: (loss(batch), int(batch["attention_mask"].sum())),
        ordered_batches(data, batch_size, collate),
        batch_size,
        fused=fused,
    )


# ------------------------------------------------------------------------------------------ FLOPs


def mlm_flops(model: Bert, seq_len: int, tokens: int, masked: float) -> tuple[float, float, list[tuple[str, str]]]:
    """Useful model FLOPs per step (MLM head at masked positions only), those with the head everywhere, and rows."""
    c = model.config
    total = count_parameters(model)
    e = model.embedding
    embeddings = e.token.weight.numel() + e.position.weight.numel() + e.segment.weight.numel()
    head = count_parameters(model.mlm_head)  # transform, LayerNorm, decoder bias and the tied d x V decoder weight
    # ``total`` counts the tied decoder weight once, as the token embedding: subtract only the head's own parameters
    body = total - embeddings - (head - model.mlm_head.decoder.weight.numel())  # blocks + embedding LayerNorm
    attention = 12 * c.n_layers * seq_len * c.d_model
    useful = tokens * (6 * body + attention) + masked * 6 * head
    everywhere = tokens * (6 * (body + head) + attention)
    rows = [
        ("parameters", f"{total:,}"),
        ("token + position + segment embeddings (lookups, not counted)", f"{embeddings:,}"),
        ("N_body: encoder blocks + embedding LayerNorm", f"{body:,}"),
        ("N_head: MLM transform + LayerNorm + d x V decoder (tied, counted as compute) + bias", f"{head:,}"),
        (f"attention 12 L T d per token (L={c.n_layers}, T={seq_len}, d={c.d_model})", f"{attention / 1e6:.2f} MFLOP"),
        ("masked (scored) positions per step, mean over the batches", f"{masked:.1f} of {tokens:,}"),
        ("useful FLOPs per step: tokens (6 N_body + 12 L T d) + masked 6 N_head", f"{useful / 1e9:.2f} GFLOP"),
        ("per token", f"{useful / tokens / 1e6:.2f} MFLOP"),
        (
            "(the head at every position, as transformers computes it: tokens (6 (N_body + N_head) + 12 L T d))",
            f"({everywhere / 1e9:.2f} GFLOP)",
        ),
    ]
    return useful, everywhere, rows


# ------------------------------------------------------------------------------------------ tables


def mlm_variants(config: BertConfig, data: list[dict], batch_size: int) -> dict:
    """{variant: a function that builds its train_step}, so that a peak-memory child builds only its own."""
    reference = transformers_mlm(config)
    return {
        MINILM: lambda: minilm_step(minilm_mlm(config, reference), bert_mlm_loss, data, default_collate, batch_size),
        "transformers BertForMaskedLM, labels= (primary)": lambda: transformers_step(
            reference, data, default_collate, batch_size, fused=True
        ),
        "minilm, logits at every position": lambda: minilm_step(
            minilm_mlm(config, reference), full_vocab_mlm_loss, data, default_collate, batch_size
        ),
        "transformers, default AdamW (as usually run)": lambda: transformers_step(
            transformers_mlm(config), data, default_collate, batch_size, fused=None
        ),
    }


def mlm_table(threads: int, args, config: BertConfig, data: list[dict], flops: float) -> str:
    steps = mlm_variants(config, data, args.batch_size)
    median, first, peak = time_with_matmul_peak(
        {name: build() for name, build in steps.items()}, args.rounds, args.warmup
    )
    rows = [
        f"{rounds_note(threads, args.rounds)}; {matmul_peak_note(peak)}; first-step loss, same weights and batch: "
        + ", ".join(f"{first[n][0]:.5f}" for n in list(median)[:3])
        + " (minilm, transformers, minilm every position)\n",
    ]
    extra = mfu_columns(flops, peak, "GFLOP/s") | PEAK_MEMORY
    return "\n".join(rows + speed_up_table(median, MINILM, {"tokens": args.batch_size * args.seq_len}, extra))


def finetune_table(threads: int, args, config: BertConfig, features: list[EncodedExample], kind) -> str:
    n_labels = len(kind.info.labels)
    reference = transformers_classifier(config, n_labels)
    variants = {
        MINILM_FT: minilm_step(minilm_classifier(config, reference, kind), finetune_loss, features, kind.collate, 32),
        "transformers BertForSequenceClassification, labels= (primary)": transformers_step(
            reference, features, kind.collate, 32, fused=True
        ),
        "transformers, default AdamW (as usually run)": transformers_step(
            transformers_classifier(config, n_labels), features, kind.collate, 32, fused=None
        ),
    }
    median, first = time_round_robin(variants, args.rounds, warmup=args.warmup)
    rows = [
        f"{rounds_note(threads, args.rounds)}; first-step loss, same weights and batch: {first[MINILM_FT][0]:.5f} "
        "(minilm), "
        f"{first['transformers BertForSequenceClassification, labels= (primary)'][0]:.5f} (transformers)\n",
    ]
    return "\n".join(rows + speed_up_table(median, MINILM_FT, {"examples": 32}))


# ------------------------------------------------------------------------------------------ main


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--batch-size", type=int, default=16, help="MLM rows per step (16)")
    parser.add_argument("--seq-len", type=int, default=128, help="MLM tokens per row (128)")
    peak_memory_option(parser)
    args = timing_args(parser, rounds=12)
    transformers = import_transformers()
    config = minilm_config(args.seq_len)
    if args.peak_memory_of:  # a child process measuring one variant's memory
        data = mlm_examples(args.batch_size, args.seq_len, torch.Generator().manual_seed(0))
        return peak_memory_child(mlm_variants(config, data, args.batch_size), args.peak_memory_of)
    reference = transformers_mlm(config)
    default_attention = transformers_mlm(config, attention=None).config._attn_implementation
    minilm_model = minilm_mlm(config, reference)
    n_minilm = same_parameter_count(minilm_model, reference, "MLM parameter counts")
    kind = task_kind(TASKS["sst2"])
    ft_config = minilm_config(64, mlm=False)
    ft_reference = transformers_classifier(ft_config, len(kind.info.labels))
    classifier = minilm_classifier(ft_config, ft_reference, kind)
    n_ft_minilm = same_parameter_count(classifier, ft_reference, "classifier parameter counts")

    generator = torch.Generator().manual_seed(0)
    data = mlm_examples(args.batch_size, args.seq_len, generator)
    features = sst2_features(32, 64, generator)
    tokens = args.batch_size * args.seq_len
    masked = sum(int((e["labels"] != -100).sum()) for e in data) / N_BATCHES
    flops, _, flop_rows = mlm_flops(minilm_model, args.seq_len, tokens, masked)
    order = BatchOrder(len(features), 32, 0)
    widths = [max(len(features[i].input_ids[0]) for i in order.indices(s)) for s in range(N_BATCHES)]
    real = sum(len(f.input_ids[0]) for f in features) / len(features)

    print(run_header(f"transformers {transformers.__version__}"))
    c = config
    print(f"\nConfig (both models: fp32, tied decoder, same initial weights, {optimizer_note(fused=False)}):\n")
    settings = [
        (
            "vocabulary / positions / segments",
            f"{c.vocab_size} / {c.max_len} / {c.n_segments}",
            f"{c.vocab_size} / {c.max_len} / {c.n_segments}",
        ),
        (
            "layers / heads / width / FFN",
            f"{c.n_layers} / {c.n_heads} / {c.d_model} / {c.d_ff}",
            f"{c.n_layers} / {c.n_heads} / {c.d_model} / {c.d_ff}",
        ),
        ("activation, LayerNorm eps", f"{c.activation} (exact), {c.norm_eps:g}", f"{c.activation}, {c.norm_eps:g}"),
        (
            "attention",
            "F.scaled_dot_product_attention, padding mask",
            f"{reference.config._attn_implementation} (transformers' default here: {default_attention})",
        ),
        ("dropout", f"{c.dropout} / {c.attention_dropout}", "hidden / attention_probs 0.0 / 0.0"),
        ("MLM: heads", "Bert(pooler=False, nsp=False): MLM head", "BertForMaskedLM: MLM head, no pooler"),
        ("MLM: parameters", f"{n_minilm:,}", f"{n_minilm:,}"),
        ("MLM: loss", "bert_mlm_loss: logits at masked positions", "labels=: logits everywhere, -100 ignored"),
        ("MLM: batch", f"{args.batch_size} x {args.seq_len}, masked {masked:.0f} per step (mean)", "the same batches"),
        (
            "SST-2: heads",
            "FinetuneModel(Bert(pooler=False, mlm=False), SequenceClassificationHead(first, "
            "hidden_layer=True, dropout 0))",
            "BertForSequenceClassification (pooler, classifier_dropout 0)",
        ),
        ("SST-2: parameters", f"{n_ft_minilm:,}", f"{n_ft_minilm:,}"),
        (
            "SST-2: batch",
            f"32 x {min(widths)}-{max(widths)} (padded to the longest; {real:.0f} real tokens/row mean)",
            "the same batches",
        ),
    ]
    print_table(("setting", "minilm BertConfig", "transformers BertConfig"), settings)
    print("\nModel FLOPs, useful work (the same count for both models):\n")
    print_table(("quantity", "value"), flop_rows, right=1)
    print(f"\nMLM training step, {tokens:,} tokens/step (speed-up: their time / ours):\n")
    print_per_thread_count(args.thread_counts, lambda threads: mlm_table(threads, args, config, data, flops))
    print("\nFine-tuning step, SST-2-shaped, 32 examples/step:\n")
    print_per_thread_count(args.thread_counts, lambda threads: finetune_table(threads, args, ft_config, features, kind))


if __name__ == "__main__":
    main()
