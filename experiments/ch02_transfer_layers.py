"""Chapter 2: a miniature of Radford et al.'s Figure 2 (left) — how many pretrained layers to transfer.

GPT transferred its token and position embeddings and the first k of its 12 decoder blocks to a task model, the
other blocks freshly initialised, and fine-tuned on RACE and MultiNLI: "transferring embeddings improves performance
and ... each transformer layer provides further benefits up to 9% for full transfer on MultiNLI". Here the same
ladder for the course's GPT (``minilm.models.course_checkpoint("gpt")``: 4 blocks, pretrained on the Gutenberg
novels), fine-tuned on SST-2 and SNLI with ``minilm.finetune`` (GPT's input transformations, λ = 0.5):

    none             nothing transferred: the model's own random initialisation (the seed's), no pretraining
    k = 0            the embeddings only
    k = 1 ... 4      the embeddings and the first k blocks (k = 4: everything, the final LayerNorm too)

The blocks not transferred get the same fresh weights in every row (those of ``none``), so the rows differ only in
what came from pretraining. Every row gets the same steps, batches and evaluation examples.

    nice -n 5 python experiments/ch02_transfer_layers.py          # about 20-30 minutes on a shared 2-core CPU

Writes experiments/results/ch02_transfer_layers.json (read by chapters/02_gpt.py).
"""

from __future__ import annotations

import argparse
import copy
import dataclasses
import math
import sys
import tempfile
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from experiments.common import begin, save_results  # noqa: E402
from minilm.files import file_sha256  # noqa: E402
from minilm.finetune import cli as finetune  # noqa: E402
from minilm.finetune.config import DEFAULT_TRAIN as FINETUNE_TRAIN  # noqa: E402
from minilm.finetune.config import FinetuneConfig  # noqa: E402
from minilm.finetune.model import from_pretrained  # noqa: E402
from minilm.models import course_run_dir  # noqa: E402
from minilm.models.course import course_checkpoint_folder  # noqa: E402
from minilm.train import checkpoint as ckpt  # noqa: E402
from minilm.utils import reproducible  # noqa: E402

TASKS = {  # task -> (FinetuneConfig fields, TrainConfig fields); SST-2's test split is GLUE's dev set
    "sst2": (dict(max_train_examples=4000, max_length=64, eval_split="test"), dict(max_steps=200, batch_size=32)),
    "snli": (dict(max_train_examples=4000, max_length=96, max_eval_examples=1000), dict(max_steps=200, batch_size=32)),
}
LM_WEIGHT = 0.5  # GPT's L3 = L2 + 0.5 L1
SEED = 0


def transfer(pretrained_run: Path, k: int | None, out_dir: Path) -> Path:
    """A run directory holding the course GPT with its embeddings and first ``k`` blocks (None: nothing), the rest
    the seed's fresh initialisation; return its checkpoint."""
    source = ckpt.find_checkpoint(pretrained_run)
    body = from_pretrained(str(source), {})
    torch.manual_seed(SEED)
    fresh = body.entry.build(body.config)  # the model's own initialisation: the "none" row, and every fresh block
    model = fresh if k is None else copy.deepcopy(body.model)
    if k is not None:
        layers = model.decoder.layers
        if not 0 <= k <= len(layers):
            raise ValueError(f"k={k}: the model has {len(layers)} blocks")
        for i in range(k, len(layers)):
            layers[i].load_state_dict(fresh.decoder.layers[i].state_dict())
        if k < len(layers) and model.decoder.final_norm is not None:  # a pre-LN GPT's final LayerNorm: the top
            model.decoder.final_norm.load_state_dict(fresh.decoder.final_norm.state_dict())
    ckpt.save_checkpoint(out_dir, 0, model, config=ckpt.read_meta(source)["config"], keep_last=None)
    body.tokenizer.save(out_dir / "tokenizer")
    return ckpt.find_checkpoint(out_dir)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, help="a trial: fine-tuning steps per task (default: TASKS')")
    args = parser.parse_args()
    begin()
    reproducible(seed=SEED, threads=1)
    started = time.perf_counter()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        pretrained = course_run_dir("gpt", Path(tmp) / "course-gpt")
        n_layers = from_pretrained(str(ckpt.find_checkpoint(pretrained)), {}).config.n_layers
        for k in [None, *range(n_layers + 1)]:
            name = "none" if k is None else f"k={k}"
            checkpoint = transfer(pretrained, k, Path(tmp) / name)
            row = {"row": name, "blocks_transferred": k, "embeddings_transferred": k is not None}
            for task, (job_fields, train_fields) in TASKS.items():
                if args.steps:
                    train_fields = {**train_fields, "max_steps": args.steps}
                job = FinetuneConfig(task=task, pretrained=str(checkpoint), lm_weight=LM_WEIGHT, **job_fields)
                train = dataclasses.replace(
                    FINETUNE_TRAIN, eval_every=0, progress=False, threads=1, seed=SEED,
                    run_dir=str(Path(tmp) / f"{name}-{task}"), **train_fields,
                )  # fmt: skip
                result = finetune.run(job, train, {})
                row[f"{task}_accuracy"] = result["metrics"]["accuracy"]
                row[f"{task}_n_eval"] = result["n_examples"]
            rows.append(row)
            print(row, flush=True)
    n_eval = {task: rows[0][f"{task}_n_eval"] for task in TASKS}
    results = {
        "setup": {
            "model": f"the course GPT (checkpoints/course/gpt), {n_layers} blocks",
            "checkpoint_sha256": file_sha256(course_checkpoint_folder("gpt") / "model.safetensors"),
            "n_layers": n_layers,
            "lm_weight": LM_WEIGHT,
            "tasks": {task: {**job, **train} for task, (job, train) in TASKS.items()},
            "fine_tune_steps_override": args.steps,
            "accuracy_standard_error": {t: round(math.sqrt(0.6 * 0.4 / n), 3) for t, n in n_eval.items()},
            "seconds": round(time.perf_counter() - started),
        },
        "rows": rows,
    }
    print("wrote", save_results("ch02_transfer_layers", results))


if __name__ == "__main__":
    main()
