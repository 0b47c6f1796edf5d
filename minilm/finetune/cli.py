"""``python -m minilm.finetune``: fine-tune a pretrained (or fresh) model on a task, score it, tabulate runs.

    python -m minilm.finetune --task mrpc --pretrained runs/gpt-clm-20250101-120000 lr=5e-5 max_steps=500
    python -m minilm.finetune --task sst2 max_train_examples=2000          # from scratch: a baseline
    python -m minilm.finetune --model t5 --task sst2,stsb,squad2 mixing=temperature  # multi-task, text to text
    python -m minilm.finetune table runs/                                   # GLUE-style table of finished runs

A run writes, in its run directory: config.json, metrics.jsonl (training and validation loss), checkpoints/,
tokenizer/ and results.json = {task, split, metrics, n_examples, name, model, pretrained, step, config}. A multi-task
run (T5's way: every task as text to text, :mod:`minilm.finetune.text_to_text`, their training sets mixed,
:mod:`minilm.finetune.mixing`) adds ``tasks``, ``average`` and ``mixing`` (strategy and rates), and its ``metrics``
and ``n_examples`` are per task: ``{"sst2": {"accuracy": ...}, "stsb": {...}}``.
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
from minilm.finetune.config import DEFAULT_TRAIN, SHORTHANDS, FinetuneConfig, resolve, with_body_model
from minilm.finetune.kinds import EncodedExample, TaskEncoder, TaskKind, task_kind
from minilm.finetune.mixing import MIXING, mix, mixing_rates
from minilm.finetune.model import (
    INPUT_FORMATS,
    LAYER_CHOICES,
    FinetuneModel,
    auto_pooling,
    finetune_loss,
    head_width,
)
from minilm.finetune.table import RESULTS_FILE, average, find_results, glue_table, task_metrics
from minilm.finetune.text_to_text import TextToTextKind, describe, use_text_to_text
from minilm.train.cli import exit_code, models_help, parse_command_line, settings_help, start_run
from minilm.train.device import resolve_device
from minilm.train.registry import ModelEntry
from minilm.train.trainer import TrainConfig, Trainer, to_device
from minilm.utils import count_parameters, format_count, seed_all

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
    model: FinetuneModel,
    encoded: list[EncodedExample],
    batch_size: int,
    device,
    dtype,
    generation: dict | None = None,
    kind: TaskKind | None = None,
) -> list:
    """The kind's prediction for every encoded example, in order (evaluation mode, no gradients); a text-to-text
    kind generates them, with ``generation``'s options (max_new_tokens, num_beams). ``kind``: the model's, or, in
    multi-task training, the task's whose examples these are."""
    kind = model.kind if kind is None else kind
    model.eval()
    predictions = []
    for i in range(0, len(encoded), batch_size):
        chunk = encoded[i : i + batch_size]
        batch = to_device(kind.collate(chunk), device)
        with torch.autocast(device.type, dtype=dtype, enabled=dtype != torch.float32):
            if kind.generative:
                predictions += kind.generate(model.body, batch, **(generation or {}))
                continue
            logits, _ = model(batch)
        predictions += kind.predict(logits.float().cpu(), chunk)
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
    """The row label of the GLUE table: the pretraining run and step, or the model and size from scratch; a
    multi-task run says so, so that it gets a row of its own."""
    name = body.label or f"{body.entry.name}-{job.size} (scratch)"
    return name if len(job.tasks) == 1 else f"{name}, multi-task ({job.mixing})"


def task_kinds(job: FinetuneConfig, entry: ModelEntry) -> dict[str, TaskKind]:
    """The kind of each task: its own, or text to text (T5's way: for models registered so, on request, and always
    for several tasks)."""
    as_text = use_text_to_text(job.text_to_text, entry, len(job.tasks))
    return {name: TextToTextKind(TASKS[name]) if as_text else task_kind(TASKS[name]) for name in job.tasks}


def run(job: FinetuneConfig, train: TrainConfig, model_overrides: dict, resume: Path | None = None) -> dict:
    """Fine-tune on the task's training split (several tasks: a mixture of theirs), score each task's eval split,
    write and return results.json's content."""
    resolve_device(train.device)  # every setting checked before any data is read
    job = with_body_model(job)
    if not job.pretrained:
        bodies.check_from_scratch(job.model, job.size, model_overrides, job.vocab_size)
    entry = bodies.body_entry(job.pretrained, job.model)
    bodies.check_lm_weight(job.lm_weight, entry)
    kinds = task_kinds(job, entry)
    on_test = job.eval_split == "test"
    data = {}  # task -> split -> examples (the eval split is validation's list unless it is test)
    for name, kind in kinds.items():
        train_examples = load_examples(kind, "train", job.max_train_examples, train.seed)
        val_examples = load_examples(kind, "validation", job.max_eval_examples, EVAL_SEED)
        eval_examples = load_examples(kind, "test", job.max_eval_examples, EVAL_SEED) if on_test else val_examples
        data[name] = {"train": train_examples, "validation": val_examples, job.eval_split: eval_examples}
    texts = [t for name, kind in kinds.items() for e in data[name]["train"] for t in kind.texts(e)]
    seed_all(train.seed)  # before anything random is built: a fresh body, GPT's new token rows, the task head
    body = build_body(job, model_overrides, texts, Path(train.run_dir) if train.run_dir else None)
    for name, kind in kinds.items():
        for split, examples in data[name].items():
            kind.check_texts(examples, body.tokenizer, split)
    gpt_inputs = body.input_format == "gpt"
    pooling = job.pooling
    if pooling == "auto":
        pooling = auto_pooling(body.tokenizer, body.input_format, body.entry.kind)
    encoder = TaskEncoder(body.tokenizer, job.max_length, pooling, gpt_inputs, job.max_target_length)
    val_encoded = {name: kind.encode_examples(data[name]["validation"], encoder) for name, kind in kinds.items()}
    train_encoded = {name: kind.encode_examples(data[name]["train"], encoder) for name, kind in kinds.items()}
    cut = {name: k.cut_targets for name, k in kinds.items() if isinstance(k, TextToTextKind) and k.cut_targets}
    first = kinds[job.tasks[0]]
    head = first.head(head_width(body, job.features), pooling)
    model = FinetuneModel(body, head, first, job.freeze_body, job.features, job.lm_weight)
    only = job.tasks[0] if len(kinds) == 1 else None
    if only is not None:
        train_data, rates = train_encoded[only], {}
    else:  # T5's multi-task mixture: one stream of max_steps x batch_size examples, drawn task by task
        sizes = [len(train_encoded[name]) for name in kinds]
        mixing = mixing_rates(sizes, job.mixing, job.mixing_limit, job.mixing_temperature)
        rates = dict(zip(kinds, mixing, strict=True))
        train_data = mix(list(train_encoded.values()), mixing, train.max_steps * train.batch_size, train.seed)
    run_config = {"job": dataclasses.asdict(job), "model": dataclasses.asdict(body.config)}
    trainer = Trainer(
        model,
        finetune_loss,
        train_data,
        train,
        eval_data=[e for encoded in val_encoded.values() for e in encoded],
        collate=first.collate,  # every text-to-text kind batches alike
        run_config=run_config,
        counts=model.counts,
        perplexity=False,
    )
    if resume is not None:
        print(f"resumed from {resume} at step {trainer.resume(resume)}")
    if trainer.dist.is_main:
        trainable = count_parameters(model, trainable_only=True)
        n_train = sum(len(data[name]["train"]) for name in kinds)
        how = first.name
        if rates:
            how += f", mixing={job.mixing}: " + ", ".join(f"{name} {rate:.3f}" for name, rate in rates.items())
        print(
            f"{'+'.join(kinds)} ({how}, {body.input_format} inputs, {pooling} pooling, features={job.features}"
            f"{f', lm_weight={job.lm_weight}' if job.lm_weight else ''}) with {run_name(job, body)}: "
            f"{format_count(trainable)} trainable parameters, {n_train:,} training examples; "
            f"device {trainer.device}, {trainer.dtype}"
        )
        for name, n in cut.items():  # a cut target (long tag sequences) teaches, and scores, fewer tags
            print(
                f"note: {n} of {len(data[name]['train'])} {name} training targets are longer than "
                f"max_target_length={job.max_target_length} tokens and were cut; raise max_target_length"
            )
    start = time.perf_counter()
    trainer.fit()
    if not trainer.dist.is_main:  # rank 0 scores and writes the results
        return {}
    generation = dict(max_new_tokens=job.max_target_length, num_beams=job.num_beams)
    metrics, n_examples = {}, {}
    for name, kind in kinds.items():
        examples = data[name][job.eval_split]
        encoded = kind.encode_examples(examples, encoder) if on_test else val_encoded[name]
        predictions = predict(model, encoded, train.batch_size, trainer.device, trainer.dtype, generation, kind)
        metrics[name], n_examples[name] = kind.score(examples, predictions), len(examples)
    if only is not None:
        scored = {"task": job.task, "split": job.eval_split, "metrics": metrics[only], "n_examples": n_examples[only]}
    else:
        scored = {
            "task": job.task,
            "tasks": job.tasks,
            "split": job.eval_split,
            "metrics": metrics,
            "average": average(metrics),
            "n_examples": n_examples,
            "mixing": {"strategy": job.mixing, "rates": rates},
        }
    results = {
        **scored,
        "name": run_name(job, body),
        "model": body.entry.name,
        "pretrained": str(body.checkpoint) if body.checkpoint else "",
        "step": trainer.step,
        "config": trainer.run_config_dict(),
    }
    report(results, trainer.run_dir, time.perf_counter() - start)
    return results


def report(results: dict, run_dir: Path | None, seconds: float) -> None:
    """Print the scores (each task's, and their average for several) and write results.json into the run
    directory."""
    n_examples, lines = results["n_examples"], []
    for task, metrics in task_metrics(results).items():
        scores = ", ".join(f"{k} {v:.4g}" for k, v in metrics.items())
        n = n_examples[task] if isinstance(n_examples, dict) else n_examples
        lines.append(f"{task} {results['split']} ({n:,} examples): {scores}")
    if "average" in results:
        lines.append(f"average of {len(lines)} tasks (each task's metrics averaged, x100): {results['average']:.1f}")
    print("\n".join(lines) + f" ({seconds:.0f} s)")
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
    lines.append("text to text (text_to_text=true; auto: for models registered so, t5, and multi-task), T5's forms:")
    lines += [f"    {name:<10} {describe(info)}" for name, info in TASKS.items()]
    lines.append("mixing (mixing=; several tasks, e.g. --task sst2,stsb,squad2; T5 §3.5.2):")
    lines += [f"    {name:<17} {text}" for name, text in MIXING.items()]
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
