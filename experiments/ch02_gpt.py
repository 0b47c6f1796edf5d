"""Chapter 2's miniatures of Radford et al. (2018), "Improving Language Understanding by Generative Pre-Training".

1. Pretrain a tiny GPT on the Gutenberg novels (``minilm.train``'s default run, longer), keeping a checkpoint every
   100 steps, plus its random initialisation as "step 0".
2. Zero-shot SST-2 at every checkpoint (§5, Figure 2 right): append " very" to the review and compare the language
   model's probability of " positive" and " negative" next.
3. Fine-tune on SST-2 and RTE (Table 5's ablation): from the random initialisation ("w/o pre-training"), from the
   pretrained model without the auxiliary LM loss ("w/o aux LM", λ = 0) and with it (λ = 0.5, the full method).
   The random initialisation is the pretraining run's own initial weights and tokenizer, so the rows differ only by
   pretraining.

Run from the repository root (on a loaded 2-core CPU: 11 minutes of pretraining, reused when its run directory
exists, then 39 minutes of zero-shot scoring and fine-tuning)::

    nice -n 5 python experiments/ch02_gpt.py

Writes experiments/results/ch02_gpt.json; Chapter 2 plots it.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from experiments.common import begin, reuse, save_results, stamp  # noqa: E402
from minilm.analysis import zero_shot_scores  # noqa: E402
from minilm.data import load_task  # noqa: E402
from minilm.finetune import cli as finetune  # noqa: E402
from minilm.finetune.config import DEFAULT_TRAIN as FINETUNE_TRAIN  # noqa: E402
from minilm.finetune.config import FinetuneConfig  # noqa: E402
from minilm.finetune.model import from_pretrained  # noqa: E402
from minilm.train import checkpoint as ckpt  # noqa: E402
from minilm.train import pretrain  # noqa: E402
from minilm.train.trainer import TrainConfig, read_metrics  # noqa: E402
from minilm.utils import reproducible  # noqa: E402

RUN_DIR = Path("runs/ch02-gpt-pretrain")
INIT_DIR = Path("runs/ch02-gpt-init")  # the same model at step 0: its random initialisation and the same tokenizer
PRETRAIN_JOB = pretrain.PretrainConfig(model="gpt", size="tiny", corpus="gutenberg", vocab_size=8192, seq_len=128)
PRETRAIN_TRAIN = TrainConfig(
    max_steps=600, batch_size=16, lr=2e-3, warmup_steps=40, eval_every=100, save_every=100, keep_last=20, threads=2
)
ZERO_SHOT_EXAMPLES = 500  # a fixed sample of SST-2's validation split
ABLATION = {  # row -> (checkpoint directory, lm_weight λ)
    "w/o pre-training": (INIT_DIR, 0.0),
    "w/o aux LM (λ = 0)": (RUN_DIR, 0.0),
    "full (λ = 0.5)": (RUN_DIR, 0.5),
}
TASKS = {  # task -> (FinetuneConfig fields, TrainConfig fields); the test splits are GLUE's dev sets
    "sst2": (dict(max_train_examples=4000, max_length=64, eval_split="test"), dict(max_steps=250, batch_size=32)),
    "rte": (dict(max_length=128, eval_split="test"), dict(max_steps=200, batch_size=16)),
}


def pretrain_gpt() -> None:
    """The pretraining run, and its step-0 twin (same seed, same config, same tokenizer); reused when they exist."""
    if (RUN_DIR / "checkpoints").is_dir():
        reuse(RUN_DIR)
    else:
        pretrain.run(PRETRAIN_JOB, _with(PRETRAIN_TRAIN, run_dir=str(RUN_DIR), progress=False), {})
        stamp(RUN_DIR)
    if (INIT_DIR / "checkpoints").is_dir():
        reuse(INIT_DIR)
    else:
        final = ckpt.find_checkpoint(RUN_DIR)
        body = from_pretrained(str(final), {})
        torch.manual_seed(PRETRAIN_TRAIN.seed)  # pretrain.run seeds this way before building the model
        initial = body.entry.build(body.config)
        ckpt.save_checkpoint(INIT_DIR, 0, initial, config=ckpt.read_meta(final)["config"], keep_last=None)
        body.tokenizer.save(INIT_DIR / "tokenizer")
        stamp(INIT_DIR)


def _with(config, **fields):
    import dataclasses

    return dataclasses.replace(config, **fields)


def zero_shot_sst2(model, tokenizer, examples) -> dict:
    """Radford et al. 2018 §5: append " very", compare P(" positive") with P(" negative"); also calibrated by the
    content-free prompt "N/A very" (Zhao et al. 2021), see minilm.analysis.zero_shot."""
    texts, labels = [e.text for e in examples], [e.label for e in examples]  # 1 = positive
    scores = zero_shot_scores(model, tokenizer, texts, labels, (" negative", " positive"), template="{} very")
    return {
        "sst2_zero_shot_accuracy": scores["accuracy"],
        "calibrated_accuracy": scores["calibrated_accuracy"],
        "predicted_positive": scores["predicted_fraction"][1],
    }


def zero_shot_curve() -> list[dict]:
    examples = finetune.sample(load_task("sst2", "validation"), ZERO_SHOT_EXAMPLES, seed=0)
    validation = read_metrics(RUN_DIR / "metrics.jsonl")
    perplexity = {m["step"]: m["perplexity"] for m in validation if m["split"] == "validation"}
    points = []
    checkpoints = [ckpt.find_checkpoint(INIT_DIR)] + sorted((RUN_DIR / "checkpoints").glob("step_*"))
    for path in checkpoints:
        body = from_pretrained(str(path), {})
        step = ckpt.read_meta(path)["step"]
        scores = zero_shot_sst2(body.model.eval(), body.tokenizer, examples)
        points.append({"step": step, **scores, "val_perplexity": perplexity.get(step)})
        print(points[-1])
    return points


def fine_tune_ablation() -> list[dict]:
    rows = []
    for task, (job_fields, train_fields) in TASKS.items():
        for row, (directory, lm_weight) in ABLATION.items():
            job = FinetuneConfig(
                task=task, pretrained=str(ckpt.find_checkpoint(directory)), lm_weight=lm_weight, **job_fields
            )
            train = _with(FINETUNE_TRAIN, eval_every=0, progress=False, threads=2, **train_fields)
            start = time.perf_counter()
            results = finetune.run(job, train, {})
            rows.append(
                {
                    "task": task,
                    "row": row,
                    "lm_weight": lm_weight,
                    "pretrained_step": ckpt.read_meta(ckpt.find_checkpoint(directory))["step"],
                    "accuracy": results["metrics"]["accuracy"],
                    "n_eval": results["n_examples"],
                    "seconds": round(time.perf_counter() - start),
                }
            )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stage", choices=("pretrain", "all"), default="all", help="pretrain only, or everything")
    args = parser.parse_args()
    begin()
    reproducible(seed=0, threads=2)
    start = time.perf_counter()
    pretrain_gpt()
    pretrain_seconds = time.perf_counter() - start
    if args.stage == "pretrain":
        return
    results = {
        "pretraining": {
            "job": vars(PRETRAIN_JOB),
            "train": vars(PRETRAIN_TRAIN),
            "validation": [m for m in read_metrics(RUN_DIR / "metrics.jsonl") if m["split"] == "validation"],
        },
        "zero_shot": zero_shot_curve(),
        "ablation": fine_tune_ablation(),
        "zero_shot_positive_fraction": sum(
            e.label for e in finetune.sample(load_task("sst2", "validation"), ZERO_SHOT_EXAMPLES, seed=0)
        )
        / ZERO_SHOT_EXAMPLES,
    }
    results["seconds"] = {
        "pretraining (0 when reused)": round(pretrain_seconds),
        "total": round(time.perf_counter() - start),
    }
    print(save_results("ch02_gpt", results))
    for r in results["ablation"]:
        print(f"{r['task']:5s} {r['row']:22s} {r['accuracy']:.3f}")


if __name__ == "__main__":
    main()
