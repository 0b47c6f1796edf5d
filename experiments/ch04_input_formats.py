"""Chapter 4: a miniature of RoBERTa's Table 2 (Liu et al. 2019) — input formats, with and without NSP.

RoBERTa pretrained BERT-base on four input formats and compared them downstream (SQuAD, MNLI-m, SST-2, RACE):

    SEGMENT-PAIR+NSP   BERT's original: two multi-sentence segments, next-sentence prediction
    SENTENCE-PAIR+NSP  two single sentences (short inputs; larger batches to keep the tokens per step), NSP
    FULL-SENTENCES     contiguous sentences packed up to the length limit, crossing documents, no NSP
    DOC-SENTENCES      the same, never crossing a document boundary, no NSP

Here: a 2-layer BERT (d_model 128) on WikiText-2 (valid + test, 120 articles), the same number of optimizer steps
and about the same number of tokens per step for every format (the batch size is scaled by the format's mean input
length, as the paper does for SENTENCE-PAIR), plus SEGMENT-PAIR without NSP to isolate the NSP loss. Each model is
scored by (1) its MLM loss on one shared held-out set (DOC-SENTENCES inputs of the held-out paragraphs, masked once
with a fixed seed), so every format is judged on the same inputs, and (2) fine-tuning on SST-2 and SNLI (a small
sample) with ``minilm.finetune``.

    nice -n 5 python experiments/ch04_input_formats.py          # 6-9 minutes on a shared 2-core CPU

Writes experiments/results/ch04_input_formats.json (read by chapters/04_roberta.py).
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import sys
import tempfile
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from experiments.common import begin, save_results  # noqa: E402
from minilm.data import load_task  # noqa: E402
from minilm.finetune.cli import run as finetune  # noqa: E402
from minilm.finetune.config import DEFAULT_TRAIN as FINETUNE_TRAIN  # noqa: E402
from minilm.finetune.config import FinetuneConfig  # noqa: E402
from minilm.finetune.model import TOKENIZER_DIR  # noqa: E402
from minilm.recipes.bert import MaskedLMConfig, bert_mlm_loss, masked_lm_examples  # noqa: E402
from minilm.train.pretrain import (  # noqa: E402
    PretrainConfig,
    build_model,
    build_tokenizer,
    load_documents,
    run_config,
    split_documents,
)
from minilm.train.registry import get_model, get_objective, needed_settings, objective_config  # noqa: E402
from minilm.train.trainer import TrainConfig, Trainer  # noqa: E402
from minilm.utils import count_parameters, reproducible, seed_all  # noqa: E402

# (row of the table, input format, objective)
ROWS = [
    ("SEGMENT-PAIR+NSP", "segment_pair", "mlm+nsp"),
    ("SEGMENT-PAIR (no NSP)", "segment_pair", "mlm"),
    ("SENTENCE-PAIR+NSP", "sentence_pair", "mlm+nsp"),
    ("FULL-SENTENCES", "full_sentences", "mlm"),
    ("DOC-SENTENCES", "doc_sentences", "mlm"),
]
MODEL = dict(n_layers=2, d_model=128, n_heads=4, d_ff=512)  # tiny BERT: ~0.9M parameters besides the embeddings
SEQ_LEN = 128
TOKENS_PER_STEP = 16 * SEQ_LEN  # every format sees about as many tokens per optimizer step
TASKS = {"sst2": 64, "snli": 96}  # downstream task -> max_length
FINETUNE_LR = 5e-4


@torch.no_grad()
def mlm_loss_on(model, examples, collate, batch_size: int = 64) -> float:
    """Mean MLM loss per example over ``examples`` (already masked: the shared held-out set)."""
    model.eval()
    total = 0.0
    for start in range(0, len(examples), batch_size):
        chunk = [examples[i] for i in range(start, min(start + batch_size, len(examples)))]
        total += bert_mlm_loss(model, collate(chunk)).loss.item() * len(chunk)
    return total / len(examples)


def pretrain(
    row, fmt, objective, docs, tokenizer, held_out, steps, run_dir: Path, more_held_out=None, model_sizes=MODEL
) -> dict:
    """Pretrain one row (a BERT of ``model_sizes``) from the seed's initial weights; score it on ``held_out`` (and on
    each of ``more_held_out``, name -> (examples, collate), as ``held_out_mlm_loss_<name>``)."""
    job = PretrainConfig(model="bert", objective=objective, corpus="wikitext", seq_len=SEQ_LEN)
    entry = get_objective(objective, "bert")
    settings = objective_config(entry, {"format": fmt})
    examples, collate = entry.prepare(docs, tokenizer, job, settings)
    mean_length = sum(len(e["input_ids"]) for e in examples) / len(examples)
    batch_size = max(1, round(TOKENS_PER_STEP / mean_length))  # SENTENCE-PAIR's inputs are short: bigger batches
    train = TrainConfig(
        batch_size=batch_size, lr=1e-3, warmup_steps=steps // 10, max_steps=steps, eval_every=0, save_every=0,
        run_dir=str(run_dir), progress=False,
    )  # fmt: skip
    seed_all(train.seed)  # the same initial weights for every format
    model, config = build_model(job, model_sizes, tokenizer, needed_settings(get_model(job.model), entry))
    recorded = run_config(job, config, settings)  # what minilm.finetune's --pretrained reads back
    trainer = Trainer(model, entry.loss, examples, train, collate=collate, run_config=recorded)
    tokenizer.save(run_dir / TOKENIZER_DIR)  # where minilm.finetune looks for a pretraining run's tokenizer
    start = time.perf_counter()
    trainer.fit()
    seconds = time.perf_counter() - start
    train_losses = [e["loss"] for e in trainer.history if e["split"] == "train"]
    return {
        "row": row,
        "format": fmt,
        "objective": objective,
        "nsp": objective == "mlm+nsp",
        "parameters": count_parameters(model),
        "n_examples": len(examples),
        "mean_input_tokens": round(mean_length, 1),
        "batch_size": batch_size,
        "tokens_seen": round(steps * batch_size * mean_length),
        "first_train_loss": train_losses[0],
        "last_train_loss": train_losses[-1],
        "held_out_mlm_loss": mlm_loss_on(model, *held_out),
        **{f"held_out_mlm_loss_{name}": mlm_loss_on(model, *data) for name, data in (more_held_out or {}).items()},
        "pretrain_seconds": round(seconds, 1),
    }


def downstream(run_dir: Path, task: str, max_length: int, steps: int, n_train: int, n_eval: int) -> float:
    job = FinetuneConfig(
        task=task, pretrained=str(run_dir), max_length=max_length, max_train_examples=n_train, max_eval_examples=n_eval
    )
    train = dataclasses.replace(
        FINETUNE_TRAIN, max_steps=steps, warmup_steps=steps // 10, lr=FINETUNE_LR, eval_every=0, progress=False,
        run_dir=str(run_dir.parent / f"{run_dir.name}-{task}"),
    )  # fmt: skip
    return finetune(job, train, {})["metrics"]["accuracy"]


def ladder_arguments(doc: str, steps: int, steps_help: str, finetune_steps: int) -> argparse.Namespace:
    """The options of every tiny-BERT experiment that pretrains rows and fine-tunes each (this script's, Table 4's
    and Table 6's): pretraining steps, fine-tuning steps and the task samples' sizes."""
    parser = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=steps, help=steps_help)
    parser.add_argument("--finetune-steps", type=int, default=finetune_steps, help="fine-tuning steps per task")
    parser.add_argument("--train-examples", type=int, default=4000, help="fine-tuning examples per task")
    parser.add_argument("--eval-examples", type=int, default=1000, help="evaluation examples per task")
    return parser.parse_args()


def finetune_setup(args: argparse.Namespace, tasks: dict[str, int]) -> dict:
    """The fine-tuning part of a record's setup, and each task's noise floor: the binomial standard error of an
    accuracy near 0.6 on its evaluation sample."""
    n_eval = {task: min(args.eval_examples, len(load_task(task, "validation"))) for task in tasks}
    return {
        "finetune": {
            "steps": args.finetune_steps,
            "train_examples": args.train_examples,
            "eval_examples": n_eval,
            "lr": FINETUNE_LR,
            "max_length": tasks,
        },
        "accuracy_standard_error": {t: round(math.sqrt(0.6 * 0.4 / n), 3) for t, n in n_eval.items()},
    }


def main() -> None:
    args = ladder_arguments(__doc__, 300, "pretraining steps per format", 120)
    begin()
    reproducible(seed=0, threads=1)
    started = time.perf_counter()

    corpus = PretrainConfig(model="bert", corpus="wikitext", vocab_size=4096, seq_len=SEQ_LEN)
    train_docs, val_docs = split_documents(load_documents(corpus.corpus), corpus.validation_fraction)
    tokenizer = build_tokenizer(corpus, "bert", [d.text for d in train_docs], None)  # one vocabulary for every row
    held_out = masked_lm_examples(val_docs, tokenizer, corpus, MaskedLMConfig(format="doc_sentences"), True)

    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for i, (row, fmt, objective) in enumerate(ROWS):
            run_dir = Path(tmp) / f"run{i}"
            result = pretrain(row, fmt, objective, train_docs, tokenizer, held_out, args.steps, run_dir)
            for task, max_length in TASKS.items():
                result[f"{task}_accuracy"] = downstream(
                    run_dir, task, max_length, args.finetune_steps, args.train_examples, args.eval_examples
                )
            rows.append(result)
            print({k: round(v, 3) if isinstance(v, float) else v for k, v in result.items()}, flush=True)

    results = {
        "setup": {
            "corpus": "wikitext-2 valid+test, last 5% of each article's paragraphs held out",
            "model": {"name": "bert", **MODEL, "vocab_size": tokenizer.vocab_size, "seq_len": SEQ_LEN},
            "pretrain_steps": args.steps,
            "tokens_per_step": TOKENS_PER_STEP,
            "held_out_examples": len(held_out[0]),
            **finetune_setup(args, TASKS),
            "seconds": round(time.perf_counter() - started),
        },
        "rows": rows,
    }
    print("wrote", save_results("ch04_input_formats", results))


if __name__ == "__main__":
    main()
