"""Chapter 3: a miniature of BERT's Table 6 (Devlin et al. 2019) — model size, past the plateau.

BERT's ablation over model size pretrained six models of L layers, hidden size H and A heads for the same number of
steps and fine-tuned each on MNLI, MRPC and SST-2: every increase in size lowered the held-out MLM perplexity and
raised the accuracy, from (3, 768, 12) to (24, 1024, 16). Here the same ladder for four tiny BERTs, each pretrained
with the recipe that leaves the unigram plateau on this CPU (``experiments/plateau.py`` measured it; the course BERT
of ``experiments/course_checkpoints.py`` is the L=4, H=128 row): 32-token FULL-SENTENCES inputs of all 17 Gutenberg
novels (the last 5% of each book's paragraphs held out), a lowercased WordPiece vocabulary of 8,192, MLM with dynamic
masking, batch 64, lr 1e-3 after 150 warm-up steps with a cosine decay, BERT's Adam (beta2 0.999, weight decay 0.01),
3,000 steps, every row from seed 0:

    L=2, H=128, A=2     shallower
    L=4, H=128, A=2     the course BERT
    L=8, H=128, A=2     deeper
    L=4, H=256, A=4     wider

The feed-forward width is 4H, as BERT's. Each model is scored by

- its MLM loss per masked token on one shared held-out set (the held-out paragraphs' inputs, masked once with a fixed
  seed), beside the unigram entropy of those very tokens (``unigram_entropy``: the loss of a model that knows word
  frequencies and nothing else); a row at least 1 nat below it is past the plateau. The Trainer's evaluations every
  750 steps keep its curve;
- SST-2 accuracy after fine-tuning every parameter with ``minilm.finetune`` (4,000 training sentences, 300 steps of
  32 at lr 5e-4, inputs cut to the 32 tokens the model was pretrained on), scored on the course's test split (GLUE's
  872 dev sentences), once for each of three fine-tuning seeds: the mean and its standard error. The same fine-tuning
  of the L=4, H=128 body with its initial weights (no pretraining) is the control.

The paper's MRPC column is left out: its sentence pairs (about 50 tokens) do not fit the 32 positions these models
were pretrained on.

Runs go two at a time, one thread each (``--workers``), the largest first.

    nice -n 5 python experiments/ch03_model_size.py   # 72 minutes on 2 cores shared with another experiment (recorded)

Writes experiments/results/ch03_model_size.json (read by chapters/03_bert.py).
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import multiprocessing
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from experiments.common import batches, begin, held_out_loss, save_results  # noqa: E402
from minilm.analysis.plateau import (  # noqa: E402
    PLATEAU_MARGIN,
    below_plateau,
    past_plateau,
    scored_targets,
    unigram_entropy,
)
from minilm.finetune.cli import run as finetune  # noqa: E402
from minilm.finetune.config import DEFAULT_TRAIN as FINETUNE_TRAIN  # noqa: E402
from minilm.finetune.config import FinetuneConfig  # noqa: E402
from minilm.finetune.model import TOKENIZER_DIR  # noqa: E402
from minilm.recipes.bert import bert_mlm_loss, masked_lm_examples  # noqa: E402
from minilm.train.checkpoint import save_checkpoint  # noqa: E402
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
from minilm.utils import count_parameters, reproducible  # noqa: E402

SIZES = [(4, 256, 4), (8, 128, 2), (4, 128, 2), (2, 128, 2)]  # (L, H, A), the largest first (runs go two at a time)
CONTROL = (4, 128, 2)  # fine-tuned from its initial weights too: the no-pretraining control
SEQ_LEN = 32
JOB = PretrainConfig(model="bert", objective="mlm", corpus="gutenberg", size="tiny", vocab_size=8192, seq_len=SEQ_LEN)
TRAIN = dict(batch_size=64, lr=1e-3, warmup_steps=150, beta2=0.999, weight_decay=0.01)  # BERT's Adam
STEPS = 3000
EVALUATIONS = 4  # the Trainer's held-out evaluations per run: the curve
FINETUNE = dict(steps=300, lr=5e-4, train_examples=4000, seeds=(0, 1, 2))
# Table 6 of the paper: (L, H, A) -> held-out MLM perplexity, MNLI-m, MRPC and SST-2 dev accuracy
PAPER = {
    (3, 768, 12): {"ppl": 5.84, "mnli": 77.9, "mrpc": 79.8, "sst2": 88.4},
    (6, 768, 3): {"ppl": 5.24, "mnli": 80.6, "mrpc": 82.2, "sst2": 90.7},
    (6, 768, 12): {"ppl": 4.68, "mnli": 81.9, "mrpc": 84.8, "sst2": 91.3},
    (12, 768, 12): {"ppl": 3.99, "mnli": 84.4, "mrpc": 86.7, "sst2": 92.9},
    (12, 1024, 16): {"ppl": 3.54, "mnli": 85.7, "mrpc": 86.9, "sst2": 93.3},
    (24, 1024, 16): {"ppl": 3.23, "mnli": 86.6, "mrpc": 87.8, "sst2": 93.7},
}

DATA: dict = {}  # prepare()'s data, set before the worker processes fork


def name_of(n_layers: int, d_model: int, n_heads: int) -> str:
    return f"L={n_layers}, H={d_model}, A={n_heads}"


def sst2_finetuned(run_dir: Path) -> dict:
    """SST-2 test accuracy of the body in ``run_dir`` fine-tuned once per seed: each, their mean and standard error."""
    scores = []
    for seed in FINETUNE["seeds"]:
        job = FinetuneConfig(
            task="sst2",
            pretrained=str(run_dir),
            max_length=SEQ_LEN,
            max_train_examples=FINETUNE["train_examples"],
            eval_split="test",
        )
        train = dataclasses.replace(
            FINETUNE_TRAIN, max_steps=FINETUNE["steps"], warmup_steps=FINETUNE["steps"] // 10, lr=FINETUNE["lr"],
            seed=seed, eval_every=0, progress=False, run_dir=str(run_dir.parent / f"{run_dir.name}-sst2-{seed}"),
        )  # fmt: skip
        scores.append(finetune(job, train, {})["metrics"]["accuracy"])
    return {
        "sst2_accuracy": statistics.mean(scores),
        "sst2_standard_error": statistics.stdev(scores) / math.sqrt(len(scores)),
        "sst2_by_seed": scores,
    }


def run(size: tuple[int, int, int], steps: int) -> tuple[str, dict]:
    """One row: pretrain, score on the held-out set, fine-tune on SST-2 (in a worker process, on one thread)."""
    torch.set_num_threads(1)
    n_layers, d_model, n_heads = size
    sizes = dict(n_layers=n_layers, d_model=d_model, n_heads=n_heads, d_ff=4 * d_model)
    tokenizer, (examples, collate), settings = DATA["tokenizer"], DATA["train"], DATA["settings"]
    held_out, held_out_collate = DATA["held_out"]
    train = TrainConfig(
        **TRAIN, max_steps=steps, eval_every=steps // EVALUATIONS, eval_batches=0, save_every=0, progress=False
    )
    torch.manual_seed(train.seed)  # every row from the same seed
    model, config = build_model(JOB, sizes, tokenizer, needed_settings(get_model(JOB.model), DATA["entry"]))
    recorded = run_config(JOB, config, settings)  # what minilm.finetune's --pretrained reads back
    result = {**sizes, "parameters": count_parameters(model)}
    with tempfile.TemporaryDirectory() as tmp:
        if size == CONTROL:  # the control: this body's initial weights, saved as a run directory and fine-tuned
            untrained = Path(tmp) / "untrained"
            save_checkpoint(untrained, 0, model, config=recorded)
            tokenizer.save(untrained / TOKENIZER_DIR)
            control = sst2_finetuned(untrained)
            untrained_loss = held_out_loss(model, bert_mlm_loss, held_out, held_out_collate)
            result["untrained"] = {"held_out_loss": untrained_loss, **control}
        run_dir = Path(tmp) / "pretrained"
        trainer = Trainer(
            model, DATA["entry"].loss, examples, dataclasses.replace(train, run_dir=str(run_dir)), collate=collate,
            eval_data=held_out, eval_collate=held_out_collate, run_config=recorded,
        )  # fmt: skip
        tokenizer.save(run_dir / TOKENIZER_DIR)
        start = time.perf_counter()
        trainer.fit()
        result["pretrain_seconds"] = round(time.perf_counter() - start, 1)
        train_losses = [e["loss"] for e in trainer.history if e["split"] == "train"]
        result["first_train_loss"] = train_losses[0]
        result["last_train_loss"] = sum(train_losses[-5:]) / len(train_losses[-5:])
        result["held_out_curve"] = [
            {"step": e["step"], "mlm": round(e["loss"], 4)} for e in trainer.history if e["split"] == "validation"
        ]
        result["held_out_loss"] = held_out_loss(model, bert_mlm_loss, held_out, held_out_collate)
        result["held_out_perplexity"] = math.exp(result["held_out_loss"])
        result["unigram_entropy"] = DATA["unigram_entropy"]
        result["nats_below_unigram"] = below_plateau(result["held_out_loss"], DATA["unigram_entropy"])
        result["past_plateau"] = past_plateau(result["held_out_loss"], DATA["unigram_entropy"])
        result.update(sst2_finetuned(run_dir))
    print(name_of(*size), {k: round(v, 3) if isinstance(v, float) else v for k, v in result.items()
                           if k != "held_out_curve"}, flush=True)  # fmt: skip
    return name_of(*size), result


def prepare() -> dict:
    train_docs, val_docs = split_documents(load_documents(JOB.corpus), JOB.validation_fraction)
    tokenizer = build_tokenizer(JOB, "bert", [d.text for d in train_docs], None)  # one vocabulary for every size
    entry = get_objective(JOB.objective, JOB.model)
    settings = objective_config(entry, {})
    held_out = masked_lm_examples(val_docs, tokenizer, JOB, settings, validation=True)  # masked once, fixed seed
    return {
        "tokenizer": tokenizer,
        "entry": entry,
        "settings": settings,
        "train": entry.prepare(train_docs, tokenizer, JOB, settings),
        "held_out": held_out,
        # the plateau: the loss, on the held-out masked tokens, of a model that knows their frequencies only
        "unigram_entropy": unigram_entropy([scored_targets(b) for b in batches(*held_out)]),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=STEPS, help="pretraining steps per model")
    parser.add_argument("--finetune-steps", type=int, default=FINETUNE["steps"], help="SST-2 fine-tuning steps")
    parser.add_argument("--workers", type=int, default=2, help="runs at a time, one thread each")
    args = parser.parse_args()
    FINETUNE["steps"] = args.finetune_steps  # before the workers fork
    begin()
    reproducible(seed=0, threads=1)
    started = time.perf_counter()
    DATA.update(prepare())
    print(f"prepared in {time.perf_counter() - started:.0f} s: {len(DATA['train'][0])} training inputs, "
          f"{len(DATA['held_out'][0])} held-out inputs, unigram entropy {DATA['unigram_entropy']:.3f} nats",
          flush=True)  # fmt: skip

    with multiprocessing.get_context("fork").Pool(args.workers) as pool:
        runs = dict(pool.starmap(run, [(size, args.steps) for size in SIZES], chunksize=1))

    results = {
        "setup": {
            "corpus": "Gutenberg, all 17 novels, the last 5% of each book's paragraphs held out",
            "tokenizer": f"bert (lowercased WordPiece), {DATA['tokenizer'].vocab_size} tokens",
            "pretraining": {
                **TRAIN,
                "steps": args.steps,
                "schedule": "cosine",
                "seq_len": SEQ_LEN,
                "format": "full_sentences",
                "objective": "mlm (dynamic masking)",
            },
            "held_out_examples": len(DATA["held_out"][0]),
            "unigram_entropy": DATA["unigram_entropy"],
            "plateau_margin": PLATEAU_MARGIN,
            "finetune": {**FINETUNE, "task": "sst2", "eval_split": "test", "max_length": SEQ_LEN},
            "control": name_of(*CONTROL),
            "seconds": round(time.perf_counter() - started),
        },
        "paper": [{"L": L, "H": H, "A": A, **v} for (L, H, A), v in PAPER.items()],
        "rows": [{"row": name, **runs[name]} for name in sorted(runs, key=lambda name: runs[name]["parameters"])],
    }
    print("wrote", save_results("ch03_model_size", results))


if __name__ == "__main__":
    main()
