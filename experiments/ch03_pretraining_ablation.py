"""Chapter 3, a miniature of BERT's Table 5 (Devlin et al. 2019): the effect of the pretraining tasks, past the plateau.

Three models of the same size pretrain for the same number of steps on the same Gutenberg text, then fine-tune on a
single-sentence task (SST-2, accuracy), a sentence-pair task (MRPC, F1) and a token-level task (UD POS, accuracy):

    BERT (MLM + NSP)  -- the paper's "BERT_BASE" row
    No NSP (MLM only) -- the paper's "No NSP" row
    LTR & No NSP      -- a left-to-right language model (minilm's GPT), the paper's "LTR & No NSP"
    no pretraining    -- the same BERT, randomly initialised (our addition: does pretraining help at all here?)

Every model pretrains with the recipe that leaves the unigram plateau on this CPU (``experiments/plateau.py``
measured it; the course BERT of ``experiments/course_checkpoints.py`` is this size): 4 layers of width 128 with 2
heads and an FFN of 512, 32-token inputs, batch 64, lr 1e-3 after 150 warm-up steps with a cosine decay, BERT's Adam
(beta2 0.999, weight decay 0.01), 3,000 steps from seed 0, on all 17 novels (the last 5% of each book's paragraphs
held out), each family with its own 8,192-token vocabulary trained on the same text. Both BERT rows read the same
segment pairs (No NSP just drops that loss); the LTR model reads the token stream. The LTR model is minilm's GPT
(pre-LN: a post-LN GPT collapsed to one hidden state at every position in an earlier run); it summarises a sequence
at its last token (it has no [CLS]).

Each pretrained model records its held-out loss per predicted token (masked tokens for BERT, every next token for
the LTR model) beside the unigram entropy of those very tokens (``unigram_entropy``; a row at least 1 nat below it is
past the plateau) and its held-out curve. Fine-tuning (every parameter, 300 steps of 32 at lr 5e-4, up to 4,000
training examples, inputs cut to the 32 tokens the models were pretrained on) runs once for each of three seeds and
is scored on each task's test split (SST-2's: GLUE's dev sentences): the mean and its standard error. MRPC's pairs
(about 50 tokens) are cut to 32, longest sentence first.

    nice -n 5 python experiments/ch03_pretraining_ablation.py   # 62 minutes on 2 shared CPU cores (recorded)

writes experiments/results/ch03_pretraining_ablation.json. The pretrained runs stay in runs/ch03/ (ignored by git),
where experiments/ch03_feature_based.py reuses the BERT one.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import multiprocessing
import statistics
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from experiments.common import batches, begin, held_out_loss, reuse, save_results, scored_when_evaluated, stamp  # noqa: E402
from minilm.analysis.plateau import (  # noqa: E402
    PLATEAU_MARGIN,
    below_plateau,
    past_plateau,
    scored_targets,
    unigram_entropy,  # noqa: E402
)
from minilm.data import Document, load_gutenberg  # noqa: E402
from minilm.finetune.cli import run as finetune  # noqa: E402
from minilm.finetune.config import DEFAULT_TRAIN as FINETUNE_TRAIN  # noqa: E402
from minilm.finetune.config import FinetuneConfig  # noqa: E402
from minilm.recipes.bert import bert_mlm_loss  # noqa: E402
from minilm.tokenizers import train_tokenizer  # noqa: E402
from minilm.train import checkpoint as ckpt  # noqa: E402
from minilm.train.pretrain import PretrainConfig, run_config, split_documents  # noqa: E402
from minilm.train.registry import (  # noqa: E402
    build_model,
    get_model,
    get_objective,
    model_config,
    needed_settings,
    objective_config,
)
from minilm.train.trainer import TrainConfig, Trainer, default_collate  # noqa: E402
from minilm.utils import reproducible, seed_all  # noqa: E402

RUNS = ROOT / "runs" / "ch03"
SEQ_LEN = 32
VOCAB_SIZE = 8192
SIZE = dict(n_layers=4, n_heads=2, d_model=128, d_ff=512, max_len=SEQ_LEN)  # the course BERT's size
PRETRAIN = TrainConfig(
    batch_size=64, lr=1e-3, warmup_steps=150, beta2=0.999, weight_decay=0.01, max_steps=3000, eval_every=750,
    eval_batches=0, save_every=0, log_every=100, progress=False,
)  # fmt: skip
# (row name, model, objective, extra model settings)
VARIANTS = [
    ("BERT (MLM + NSP)", "bert", "mlm+nsp", {}),
    ("No NSP (MLM only)", "bert", "mlm", {}),
    ("LTR & No NSP", "gpt", "clm", {}),
]
CONTROL = "no pretraining"
TASKS = {"sst2": "accuracy", "mrpc": "f1", "ud_pos": "accuracy"}
FINETUNE = dataclasses.replace(FINETUNE_TRAIN, max_steps=300, warmup_steps=30, eval_every=0, lr=5e-4, progress=False)
FINETUNE_EXAMPLES = 4000  # training examples per task at most (a seeded sample); scored on the whole test split
SEEDS = (0, 1, 2)  # fine-tuning seeds


def corpus() -> tuple[list[Document], list[Document]]:
    """Train and held-out documents: every Gutenberg novel, the last 5% of each book's paragraphs held out."""
    return split_documents(load_gutenberg(), 0.05)


def run_name(model: str, objective: str) -> str:
    """The run directory's name: the recipe's, so that a run of another recipe is never reused."""
    return f"{model}-{objective.replace('+', '_')}-seq{SEQ_LEN}-{PRETRAIN.max_steps}"


def pretrain(model: str, objective: str, name: str) -> Path:
    """Pretrain ``model`` with ``objective`` into runs/ch03/<name> (reused when it is already there); its held-out
    loss beside the unigram entropy of the held-out targets goes into the run directory's plateau.json."""
    run_dir = RUNS / name
    if (run_dir / "checkpoints").is_dir() and ckpt.find_checkpoint(run_dir):
        return reuse(run_dir)
    entry, task = get_model(model), get_objective(objective, model)
    # Both BERT variants read the same segment pairs (No NSP just drops that loss); the LTR model a token stream.
    job = PretrainConfig(model=model, objective=objective, seq_len=SEQ_LEN, size="tiny")
    settings = objective_config(task, {"format": "segment_pair"} if task.config_class else {})
    train_docs, held_out_docs = corpus()
    tokenizer = train_tokenizer([d.text for d in train_docs], family=entry.tokenizer_family, vocab_size=VOCAB_SIZE)
    examples, collate = task.prepare(train_docs, tokenizer, job, settings)
    held_out, held_out_collate = task.prepare(held_out_docs, tokenizer, job, settings, validation=True)
    held_out_collate = held_out_collate or default_collate
    seed_all(0)
    config = model_config(entry, "tiny", tokenizer.vocab_size, {**SIZE, **needed_settings(entry, task)})
    model_ = build_model(entry, config, tokenizer)
    scored = bert_mlm_loss if model == "bert" else task.loss  # every BERT row's plateau is its MLM loss's
    trainer = Trainer(
        model_, scored_when_evaluated(task.loss, scored), examples, dataclasses.replace(PRETRAIN, run_dir=str(run_dir)),
        collate=collate or default_collate, eval_data=held_out, eval_collate=held_out_collate,
        run_config=run_config(job, config, settings),
    )  # fmt: skip
    start = time.perf_counter()
    trainer.fit()
    seconds = time.perf_counter() - start
    tokenizer.save(run_dir / "tokenizer")
    loss = held_out_loss(model_, scored, held_out, held_out_collate)
    entropy = unigram_entropy([scored_targets(batch) for batch in batches(held_out, held_out_collate)])
    losses = [e["loss"] for e in trainer.history if e["split"] == "train"]
    plateau = {
        "held_out_loss": loss,
        "unigram_entropy": entropy,
        "nats_below_unigram": below_plateau(loss, entropy),
        "past_plateau": past_plateau(loss, entropy),
        "held_out_curve": [
            {"step": e["step"], "loss": round(e["loss"], 4)} for e in trainer.history if e["split"] == "validation"
        ],  # fmt: skip
        "first_train_loss": losses[0],
        "last_train_loss": sum(losses[-5:]) / len(losses[-5:]),
        "pretrain_seconds": round(seconds, 1),
    }
    (run_dir / "plateau.json").write_text(json.dumps(plateau, indent=1) + "\n")
    stamp(run_dir)
    print(f"{name}: {len(examples):,} examples, held-out loss {loss:.2f} vs unigram entropy {entropy:.2f} "
          f"({seconds:.0f} s)", flush=True)  # fmt: skip
    return run_dir


def finetune_scores(pretrained: str, task: str, lr: float | None = None, seed: int = 0, **job_options) -> dict:
    """Fine-tune a pretrained run (or, with pretrained="", a fresh tiny BERT) on ``task`` with ``seed``; its metrics
    on the task's test split."""
    job = FinetuneConfig(
        task=task,
        pretrained=pretrained,
        **({} if pretrained else dict(model="bert", vocab_size=VOCAB_SIZE)),  # the control: a fresh tiny BERT
        max_length=SEQ_LEN,
        max_train_examples=FINETUNE_EXAMPLES,
        eval_split="test",
        **job_options,
    )
    overrides = {} if pretrained else dict(SIZE, dropout=0.0, attention_dropout=0.0)
    return finetune(job, dataclasses.replace(FINETUNE, lr=lr or FINETUNE.lr, seed=seed), overrides)["metrics"]


def over_seeds(pretrained: str, task: str, metric: str, **options) -> dict:
    """``task``'s ``metric`` after fine-tuning once per seed: the mean, its standard error and each seed's."""
    scores = [finetune_scores(pretrained, task, seed=seed, **options)[metric] for seed in SEEDS]
    return {
        metric: statistics.mean(scores),
        "standard_error": statistics.stdev(scores) / math.sqrt(len(scores)),
        "by_seed": scores,
    }


def row(variant: tuple) -> tuple[str, dict, dict | None]:
    """One row of the table (in a worker process, on one thread): pretrain (unless it is the control), fine-tune."""
    torch.set_num_threads(1)
    name, model, objective, _ = variant
    pretrained = "" if name == CONTROL else str(pretrain(model, objective, run_name(model, objective)))
    scores = {task: over_seeds(pretrained, task, metric) for task, metric in TASKS.items()}
    plateau = json.loads((Path(pretrained) / "plateau.json").read_text()) if pretrained else None
    print(name, {task: round(s[TASKS[task]], 3) for task, s in scores.items()}, flush=True)
    return name, scores, plateau


def main() -> None:
    global PRETRAIN, FINETUNE
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=PRETRAIN.max_steps, help="pretraining steps per model")
    parser.add_argument("--finetune-steps", type=int, default=FINETUNE.max_steps, help="fine-tuning steps per task")
    args = parser.parse_args()
    # before the workers fork; a run directory's name says its steps, so a trial never meets a recorded run
    PRETRAIN = dataclasses.replace(PRETRAIN, max_steps=args.steps, eval_every=max(1, args.steps // 4))
    FINETUNE = dataclasses.replace(FINETUNE, max_steps=args.finetune_steps, warmup_steps=args.finetune_steps // 10)
    begin()
    reproducible(seed=0, threads=1)
    start = time.perf_counter()
    with multiprocessing.get_context("fork").Pool(2) as pool:
        done = pool.map(row, [*VARIANTS, (CONTROL, "bert", "", {})], chunksize=1)
    results = {
        "table": {name: scores for name, scores, _ in done},
        "headline_metric": TASKS,
        "pretraining": {name: plateau for name, _, plateau in done if plateau is not None},
        "setup": {
            "corpus": "Gutenberg, all 17 novels, the last 5% of each book's paragraphs held out",
            "model": SIZE,
            "vocab_size": VOCAB_SIZE,
            "seq_len": SEQ_LEN,
            "format": "segment_pair (BERT rows), a token stream (LTR)",
            "pretraining": {
                k: getattr(PRETRAIN, k)
                for k in ("batch_size", "lr", "warmup_steps", "max_steps", "schedule", "beta2", "weight_decay")
            },
            "finetuning": {k: getattr(FINETUNE, k) for k in ("batch_size", "lr", "warmup_steps", "max_steps")},
            "finetuning_examples": FINETUNE_EXAMPLES,
            "finetuning_seeds": list(SEEDS),
            "eval": "each task's whole test split (SST-2: GLUE's 872 dev sentences), inputs cut to 32 tokens",
            "plateau_margin": PLATEAU_MARGIN,
        },
        "seconds": round(time.perf_counter() - start),
    }
    print(f"saved {save_results('ch03_pretraining_ablation', results)} ({results['seconds']} s)")


if __name__ == "__main__":
    main()
