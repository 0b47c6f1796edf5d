"""Chapter 3, a miniature of BERT's Table 5 (Devlin et al. 2019): the effect of the pretraining tasks.

Three models of the same size pretrain for the same number of steps on the same Gutenberg text, then fine-tune on a
single-sentence task (SST-2, accuracy), a sentence-pair task (MRPC, F1) and a token-level task (UD POS, accuracy):

    BERT (MLM + NSP)  -- the paper's "BERT_BASE" row
    No NSP (MLM only) -- the paper's "No NSP" row
    LTR & No NSP      -- a left-to-right language model (minilm's GPT, post-LN like BERT), the paper's "LTR & No NSP"
    no pretraining    -- the same BERT, randomly initialised (our addition: does pretraining help at all here?)

The LTR model is minilm's GPT (pre-LN) with a byte-level BPE tokenizer of the same size trained on the same text; it
summarises a sequence at its last token (it has no [CLS]). A post-LN GPT (``norm_first=False``, BERT's layout) at this
learning rate collapsed in a first run: every position got the same final hidden state (a unigram predictor, LM loss
~6.6), and fine-tuning from it failed (UD POS accuracy 0.15); the pre-LN GPT-2 layout trains stably.

    nice -n 5 python experiments/ch03_pretraining_ablation.py   # ~11 min on 2 idle CPU cores (26 under load 7)

writes experiments/results/ch03_pretraining_ablation.json. The pretrained runs stay in runs/ch03/ (ignored by git),
where experiments/ch03_feature_based.py reuses the BERT one.
"""

from __future__ import annotations

import dataclasses
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from experiments.common import begin, reuse, save_results, stamp  # noqa: E402
from minilm.data import Document, load_gutenberg  # noqa: E402
from minilm.finetune.cli import run as finetune  # noqa: E402
from minilm.finetune.config import DEFAULT_TRAIN as FINETUNE_TRAIN  # noqa: E402
from minilm.finetune.config import FinetuneConfig  # noqa: E402
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
from minilm.train.trainer import TrainConfig, Trainer, default_collate, read_metrics  # noqa: E402
from minilm.utils import reproducible, seed_all  # noqa: E402

RUNS = ROOT / "runs" / "ch03"
PARAGRAPHS_PER_BOOK = 1000  # the first 1000 paragraphs of each of the 17 novels (~4.5M characters)
SEQ_LEN = 64
VOCAB_SIZE = 4096
SIZE = dict(n_layers=4, n_heads=2, d_model=128, d_ff=512, max_len=SEQ_LEN)  # ~1.5M parameters with the embeddings
PRETRAIN = TrainConfig(
    batch_size=32, lr=2e-3, warmup_steps=60, max_steps=700, eval_every=0, save_every=0, log_every=20, progress=False
)
# (row name, model, objective, extra model settings)
VARIANTS = [
    ("BERT (MLM + NSP)", "bert", "mlm+nsp", {}),
    ("No NSP (MLM only)", "bert", "mlm", {}),
    ("LTR & No NSP", "gpt", "clm", {}),
]
TASKS = {"sst2": "accuracy", "mrpc": "f1", "ud_pos": "accuracy"}
FINETUNE = dataclasses.replace(FINETUNE_TRAIN, max_steps=150, warmup_steps=15, eval_every=0, lr=5e-4, progress=False)
FINETUNE_EXAMPLES = 2000  # training examples per task (a seeded sample); evaluation on up to 1000 validation ones


def corpus() -> tuple[list[Document], list[Document]]:
    """Train and validation documents: the first paragraphs of every Gutenberg novel, 5% of each held out."""
    docs = [Document(d.title, d.paragraphs[:PARAGRAPHS_PER_BOOK]) for d in load_gutenberg()]
    return split_documents(docs, 0.05)


def pretrain(model: str, objective: str, settings: dict, name: str, steps: int = PRETRAIN.max_steps) -> Path:
    """Pretrain ``model`` with ``objective`` into runs/ch03/<name> (reused when it is already there)."""
    run_dir = RUNS / name
    if (run_dir / "checkpoints").is_dir() and ckpt.find_checkpoint(run_dir):
        return reuse(run_dir)
    entry, task = get_model(model), get_objective(objective, model)
    # Both BERT variants read the same segment pairs (No NSP just drops that loss); the LTR model a token stream.
    job = PretrainConfig(model=model, objective=objective, seq_len=SEQ_LEN, size="tiny")
    settings = objective_config(task, {"format": "segment_pair"} if task.config_class else {})
    train_docs, _ = corpus()
    tokenizer = train_tokenizer([d.text for d in train_docs], family=entry.tokenizer_family, vocab_size=VOCAB_SIZE)
    examples, collate = task.prepare(train_docs, tokenizer, job, settings)
    seed_all(0)
    config = model_config(entry, "tiny", tokenizer.vocab_size, {**SIZE, **settings, **needed_settings(entry, task)})
    trainer = Trainer(
        build_model(entry, config, tokenizer),
        task.loss,
        examples,
        dataclasses.replace(PRETRAIN, max_steps=steps, run_dir=str(run_dir)),
        collate=collate or default_collate,
        run_config=run_config(job, config, settings),
    )
    start = time.perf_counter()
    trainer.fit()
    tokenizer.save(run_dir / "tokenizer")
    stamp(run_dir)
    losses = [e["loss"] for e in trainer.history if e["split"] == "train"]
    seconds = time.perf_counter() - start
    print(f"{name}: {len(examples):,} examples, loss {losses[0]:.2f} -> {losses[-1]:.2f} ({seconds:.0f} s)")
    return run_dir


def finetune_scores(pretrained: str, task: str, lr: float = FINETUNE.lr, **job_options) -> dict:
    """Fine-tune a pretrained run (or, with pretrained="", a fresh tiny BERT) on ``task``; its metrics."""
    job = FinetuneConfig(
        task=task,
        pretrained=pretrained,
        model="bert",
        vocab_size=VOCAB_SIZE,
        max_length=SEQ_LEN,
        max_train_examples=FINETUNE_EXAMPLES,
        max_eval_examples=1000,
        **job_options,
    )
    overrides = {} if pretrained else dict(SIZE, dropout=0.0, attention_dropout=0.0)
    return finetune(job, dataclasses.replace(FINETUNE, lr=lr), overrides)["metrics"]


def main() -> None:
    begin()
    reproducible(seed=0, threads=2)
    start = time.perf_counter()
    rows, pretraining_loss = {}, {}
    for name, model, objective, settings in VARIANTS:
        run_dir = pretrain(model, objective, settings, name=f"{model}-{objective.replace('+', '_')}")
        rows[name] = {task: finetune_scores(str(run_dir), task) for task in TASKS}
        losses = [e["loss"] for e in read_metrics(run_dir / "metrics.jsonl") if e["split"] == "train"]
        pretraining_loss[name] = {"first": losses[0], "last_5_mean": sum(losses[-5:]) / 5}
    rows["no pretraining"] = {task: finetune_scores("", task) for task in TASKS}
    results = {
        "table": rows,
        "headline_metric": TASKS,
        "pretraining_loss": pretraining_loss,
        "setup": {
            "corpus": f"Gutenberg, first {PARAGRAPHS_PER_BOOK} paragraphs of each of the 17 novels, 5% held out",
            "model": SIZE,
            "vocab_size": VOCAB_SIZE,
            "pretraining": {k: getattr(PRETRAIN, k) for k in ("batch_size", "lr", "warmup_steps", "max_steps")},
            "finetuning": {k: getattr(FINETUNE, k) for k in ("batch_size", "lr", "warmup_steps", "max_steps")},
            "finetuning_examples": FINETUNE_EXAMPLES,
            "eval": "validation split, a fixed sample of up to 1000 examples (UD POS: sentences of the dev split)",
        },
        "seconds": round(time.perf_counter() - start),
    }
    print(f"saved {save_results('ch03_pretraining_ablation', results)} ({results['seconds']} s)")


if __name__ == "__main__":
    main()
