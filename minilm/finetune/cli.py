"""``python -m minilm.finetune``: fine-tune a pretrained (or fresh) model on a task, score it, tabulate runs.

    python -m minilm.finetune --task mrpc --pretrained runs/gpt-clm-20250101-120000 lr=5e-5 max_steps=500
    python -m minilm.finetune --task sst2 max_train_examples=2000          # from scratch: a baseline
    python -m minilm.finetune table runs/                                   # GLUE-style table of finished runs

A run writes, in its run directory: config.json, metrics.jsonl (training and validation loss), checkpoints/,
tokenizer/ and results.json = {task, split, metrics, n_examples, name, model, pretrained, step, config}.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import random
import sys
import time
from pathlib import Path

import torch

from minilm.data.errors import DataError
from minilm.data.tasks import TASKS, load_task
from minilm.files import atomic_write_text
from minilm.finetune import model as bodies
from minilm.finetune.config import DEFAULT_TRAIN, SHORTHANDS, FinetuneConfig, resolve
from minilm.finetune.kinds import EncodedExample, TaskEncoder, TaskKind, task_kind
from minilm.finetune.model import (
    INPUT_FORMATS,
    LAYER_CHOICES,
    FinetuneModel,
    auto_pooling,
    finetune_loss,
    head_width,
)
from minilm.finetune.table import RESULTS_FILE, find_results, glue_table
from minilm.train.cli import exit_code, models_help, parse_command_line, settings_help, start_run
from minilm.train.device import resolve_device
from minilm.train.trainer import TrainConfig, Trainer, to_device

EVAL_SEED = 0  # the evaluation sample is the same for every run, whatever its training seed


# ---------------------------------------------------------------------------------------------- data


def sample(examples: list, n: int, seed: int) -> list:
    """``n`` examples drawn with ``seed``, in their original order (all of them when n is 0)."""
    if not n or n >= len(examples):
        return examples
    return [examples[i] for i in sorted(random.Random(seed).sample(range(len(examples)), n))]


def load_examples(kind: TaskKind, split: str, n: int, seed: int) -> list:
    examples = sample(load_task(kind.info.name, split), n, seed)
    if not examples:
        raise DataError(f"task {kind.info.name!r} has no {split} examples")
    kind.check(examples, split)
    return examples


@torch.no_grad()
def predict(
    model: FinetuneModel, encoded: list[EncodedExample], batch_size: int, device, dtype, generation: dict | None = None
) -> list:
    """The kind's prediction for every encoded example, in order (evaluation mode, no gradients); a text-to-text
    kind generates them, with ``generation``'s options (max_new_tokens, num_beams)."""
    model.eval()
    predictions = []
    for i in range(0, len(encoded), batch_size):
        chunk = encoded[i : i + batch_size]
        batch = to_device(model.kind.collate(chunk), device)
        with torch.autocast(device.type, dtype=dtype, enabled=dtype != torch.float32):
            if model.kind.generative:
                predictions += model.kind.generate(model.body, batch, **(generation or {}))
                continue
            logits, _ = model(batch)
        predictions += model.kind.predict(logits.float().cpu(), chunk)
    return predictions


# ---------------------------------------------------------------------------------------------- the job


def build_body(job: FinetuneConfig, model_overrides: dict, texts: list[str], run_dir: Path | None) -> bodies.Body:
    """The pretrained run's model and tokenizer, or a fresh one; the tokenizer of a resumed run is its own."""
    saved = run_dir / bodies.TOKENIZER_DIR if run_dir is not None else None
    resumed = saved if saved is not None and saved.is_dir() else None
    if job.pretrained:
        body = bodies.from_pretrained(job.pretrained, model_overrides, tokenizer_dir=resumed)
    else:
        body = bodies.from_scratch(job.model, job.size, model_overrides, texts, job.vocab_size, saved)
    bodies.apply_input_format(body, bodies.resolve_input_format(job.input_format, body.entry))
    bodies.check_body(body, job.max_length)
    if saved is not None and resumed is None:
        body.tokenizer.save(saved)
    return body


def run_name(job: FinetuneConfig, body: bodies.Body) -> str:
    """The row label of the GLUE table: the pretraining run and step, or the model and size from scratch."""
    return body.label or f"{body.entry.name}-{job.size} (scratch)"


def run(job: FinetuneConfig, train: TrainConfig, model_overrides: dict, resume: Path | None = None) -> dict:
    """Fine-tune on the task's training split, score the eval split, write and return results.json's content."""
    resolve_device(train.device)  # every setting checked before any data is read
    if not job.pretrained:
        bodies.check_from_scratch(job.model, job.size, model_overrides, job.vocab_size)
    kind = task_kind(TASKS[job.task])
    train_examples = load_examples(kind, "train", job.max_train_examples, train.seed)
    val_examples = load_examples(kind, "validation", job.max_eval_examples, EVAL_SEED)
    on_test = job.eval_split == "test"
    eval_examples = load_examples(kind, job.eval_split, job.max_eval_examples, EVAL_SEED) if on_test else val_examples
    texts = [t for e in train_examples for t in kind.texts(e)]
    body = build_body(job, model_overrides, texts, Path(train.run_dir) if train.run_dir else None)
    splits = {"train": train_examples, "validation": val_examples, job.eval_split: eval_examples}  # test, if scored
    for split, examples in splits.items():
        kind.check_texts(examples, body.tokenizer, split)
    gpt_inputs = body.input_format == "gpt"
    pooling = job.pooling
    if pooling == "auto":
        pooling = auto_pooling(body.tokenizer, body.input_format, body.entry.kind)
    encoder = TaskEncoder(body.tokenizer, job.max_length, pooling, gpt_inputs, job.max_target_length)
    val_encoded = kind.encode_examples(val_examples, encoder)
    head = kind.head(head_width(body, job.features), pooling)
    model = FinetuneModel(body, head, kind, job.freeze_body, job.features, job.lm_weight)
    run_config = {"job": dataclasses.asdict(job), "model": dataclasses.asdict(body.config)}
    trainer = Trainer(
        model,
        finetune_loss,
        kind.encode_examples(train_examples, encoder),
        train,
        eval_data=val_encoded,
        collate=kind.collate,
        run_config=run_config,
        counts=model.counts,
        perplexity=False,
    )
    if resume is not None:
        print(f"resumed from {resume} at step {trainer.resume(resume)}")
    if trainer.dist.is_main:
        trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
        print(
            f"{job.task} ({kind.name}, {body.input_format} inputs, {pooling} pooling, features={job.features}"
            f"{f', lm_weight={job.lm_weight}' if job.lm_weight else ''}) with {run_name(job, body)}: "
            f"{trainable / 1e6:.2f}M trainable parameters, {len(train_examples):,} training examples; "
            f"device {trainer.device}, {trainer.dtype}"
        )
    start = time.perf_counter()
    trainer.fit()
    if not trainer.dist.is_main:  # rank 0 scores and writes the results
        return {}
    eval_encoded = kind.encode_examples(eval_examples, encoder) if on_test else val_encoded
    generation = dict(max_new_tokens=job.max_target_length, num_beams=job.num_beams)
    predictions = predict(model, eval_encoded, train.batch_size, trainer.device, trainer.dtype, generation)
    results = {
        "task": job.task,
        "split": job.eval_split,
        "metrics": kind.score(eval_examples, predictions),
        "n_examples": len(eval_examples),
        "name": run_name(job, body),
        "model": body.entry.name,
        "pretrained": str(body.checkpoint) if body.checkpoint else "",
        "step": trainer.step,
        "config": trainer.run_config_dict(),
    }
    report(results, trainer.run_dir, time.perf_counter() - start)
    return results


def report(results: dict, run_dir: Path | None, seconds: float) -> None:
    """Print the scores and write results.json into the run directory."""
    scores = ", ".join(f"{k} {v:.4g}" for k, v in results["metrics"].items())
    print(f"{results['task']} {results['split']} ({results['n_examples']:,} examples): {scores} ({seconds:.0f} s)")
    if run_dir is not None:
        atomic_write_text(run_dir / RESULTS_FILE, json.dumps(results, indent=2) + "\n")
        print(f"run directory: {run_dir}")


# ---------------------------------------------------------------------------------------------- CLI


def _options_text() -> str:
    lines = settings_help([("job", FinetuneConfig()), ("train", DEFAULT_TRAIN)]) + models_help(" (from scratch)")
    lines.append("input formats (input_format=; auto: the model's own, gpt for gpt, template for the others):")
    lines += [f"    {name:<17} {text}" for name, text in INPUT_FORMATS.items()]
    lines.append("features (hidden states the head reads; with freeze_body=true, BERT's feature-based approach):")
    lines += [f"    {name:<17} {text}" for name, (_, text) in LAYER_CHOICES.items()]
    lines.append("tasks (metrics):")
    for name, info in TASKS.items():
        lines.append(f"    {name:<8} {task_kind(info).name:<9} {', '.join(info.metrics)}")
    lines.append("table: python -m minilm.finetune table RUN_DIR [RUN_DIR ...] (a directory of runs counts as all)")
    return "\n".join(lines)


def parse_args(argv: list[str]):
    return parse_command_line(
        argv,
        prog="python -m minilm.finetune",
        description="Fine-tune a pretrained model (or one from scratch) on a task and score it on the task's "
        "own metrics. With no arguments: SST-2 with a tiny GPT from scratch.",
        epilog=_options_text(),
        shorthands=SHORTHANDS,
        example="lr=5e-5 max_steps=500",
    )


def parse_table_args(argv: list[str]):
    parser = argparse.ArgumentParser(
        prog="python -m minilm.finetune table",
        description="Print a GLUE-style markdown table of finished fine-tuning runs: a row per model and split, "
        "a column per task (scores x100; SQuAD EM/F1 are percents already).",
    )
    parser.add_argument("run_dirs", nargs="+", metavar="RUN_DIR", help="run directories, or directories of runs")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)

    def finetune():
        if argv[:1] == ["table"]:
            print(glue_table(find_results(parse_table_args(argv[1:]).run_dirs)))
            return
        args = parse_args(argv)
        job, train, model_overrides = resolve(args)
        with start_run(args.resume, train, "python -m minilm.finetune") as resume:
            run(job, train, model_overrides, resume=resume)

    return exit_code(finetune)
