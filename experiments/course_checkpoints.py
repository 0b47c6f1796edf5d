"""The course's own pretrained checkpoints: a GPT, a BERT (with its MLM head) and an ELMo biLM, each pretrained on the
Gutenberg novels by ``minilm.train`` (the same ``pretrain.run`` as ``python -m minilm.train``) for about ten minutes
of one CPU thread — longer than a notebook can — and saved in half precision under ``checkpoints/course/<name>/``:

- gpt:  ``--model gpt --objective clm``, 4 layers, d_model 192, byte-level BPE of 8,192 tokens; Hugging Face's GPT-2
  layout (config.json + model.safetensors) and the tokenizer's tokenizer.json;
- bert: ``--model bert --objective mlm`` (no NSP), 4 layers, d_model 128, lowercased WordPiece of 8,192 tokens;
  short sequences (32 tokens) and more, cheaper steps: a masked position sees nothing of itself, so MLM must learn
  to attend to its neighbours, which takes many steps (at width 192, 1,400 steps of 64-token sequences left it at
  validation perplexity ~300, predicting frequent words everywhere); BERT's Adam (beta2 0.999, weight decay 0.01);
  Hugging Face's BERT layout with the MLM head (``BertForMaskedLM``);
- elmo: ``--model elmo --objective bilm``, the "tiny" biLM (character CNN, 2 LSTM layers of 512 cells projected to
  128 per direction), BPE of 8,192 tokens; minilm's own config.json + model.safetensors (ELMo has no Hugging Face
  type).

Each folder also holds ``minilm_run.json`` (the run's settings, for fine-tuning: ``minilm.models.course_run_dir``).
After training, each saved checkpoint is reloaded (float32) and scored on the whole held-out split (the last 5% of
each novel's paragraphs), beside the same model untrained. Load them with ``minilm.models.course_checkpoint(name)``.

Run from a clean checkout (about 30 minutes on one core of an idle 2-core CPU; an hour on a busy one)::

    python experiments/course_checkpoints.py                  # all three
    python experiments/course_checkpoints.py --models gpt     # one; the record keeps the others' entries

Writes checkpoints/course/<name>/ and experiments/results/course_checkpoints.json.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import shutil
import sys
import tempfile
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from experiments.common import RESULTS_DIR, ROOT, begin, provenance  # noqa: E402
from minilm.files import atomic_write_text, file_sha256  # noqa: E402
from minilm.finetune.model import from_pretrained as run_body  # noqa: E402
from minilm.models.course import COURSE_MODELS, FOLDER, RUN_FILE, load_course_folder, save_elmo  # noqa: E402
from minilm.train import checkpoint as ckpt  # noqa: E402
from minilm.train import pretrain  # noqa: E402
from minilm.train.registry import get_model, get_objective, needed_settings, objective_config  # noqa: E402
from minilm.train.trainer import TrainConfig, default_collate  # noqa: E402
from minilm.utils import reproducible, seed_all  # noqa: E402

NAME = "course_checkpoints"
WIDTH = dict(n_layers=4, n_heads=4, d_model=192)  # GPT: ~3.4M parameters with an 8k vocabulary
JOBS = {  # name -> (job, model overrides, train settings)
    "gpt": (
        pretrain.PretrainConfig(model="gpt", objective="clm", size="tiny", vocab_size=8192, seq_len=128),
        WIDTH,
        dict(max_steps=1300, batch_size=16, lr=2e-3, warmup_steps=60),
    ),
    "bert": (
        pretrain.PretrainConfig(model="bert", objective="mlm", size="tiny", vocab_size=8192, seq_len=32),
        dict(n_layers=4, n_heads=2, d_model=128, d_ff=512),
        dict(max_steps=3000, batch_size=64, lr=1e-3, warmup_steps=150, beta2=0.999, weight_decay=0.01),
    ),
    "elmo": (
        pretrain.PretrainConfig(model="elmo", objective="bilm", size="tiny", vocab_size=8192, seq_len=64),
        {},
        dict(max_steps=1000, batch_size=16, lr=2e-3, warmup_steps=60),
    ),
}
EVAL_BATCH = 32


def train_config(fields: dict, run_dir: Path) -> TrainConfig:
    every = fields["max_steps"] // 4
    return TrainConfig(
        **fields, eval_every=every, save_every=fields["max_steps"], threads=1, progress=False, run_dir=str(run_dir)
    )


@torch.no_grad()
def held_out_loss(job: pretrain.PretrainConfig, model, tokenizer) -> dict:
    """The objective's mean loss over the whole held-out split (BERT's masks fixed by the job's seed), and its exp."""
    objective = get_objective(job.objective, job.model)
    settings = objective_config(objective, {})
    _, val_docs = pretrain.split_documents(pretrain.load_documents(job.corpus), job.validation_fraction)
    examples, collate = objective.prepare(val_docs, tokenizer, job, settings, validation=True)
    collate = collate or default_collate
    model.eval()
    total = count = 0.0
    for start in range(0, len(examples), EVAL_BATCH):
        batch = collate([examples[i] for i in range(start, min(start + EVAL_BATCH, len(examples)))])
        out = objective.loss(model, batch)
        n = sum(objective.counts(batch).values()) / len(objective.counts(batch))  # predictions per part
        total, count = total + float(out.loss) * n, count + n
    loss = total / count
    return {"loss": loss, "perplexity": math.exp(loss), "predictions": int(count)}


def export(name: str, body, run_config: dict, steps: int, folder: Path) -> None:
    """The trained body in float16 -> ``folder`` (Hugging Face layout, or minilm's for ELMo), with its tokenizer."""
    if folder.exists():
        shutil.rmtree(folder)
    if name == "elmo":
        save_elmo(body.model, folder)
    else:
        body.model.half().save_pretrained(folder)
        body.model.float()
    body.tokenizer.save(folder)
    atomic_write_text(folder / RUN_FILE, json.dumps({"steps": steps, "config": run_config}, indent=2) + "\n")


def train_one(name: str, out_root: Path, steps: int | None = None) -> dict:
    job, overrides, fields = JOBS[name]
    if steps is not None:  # a trial
        fields = {**fields, "max_steps": steps, "warmup_steps": min(fields["warmup_steps"], steps // 2)}
    run_dir = Path(tempfile.mkdtemp(prefix=f"course-{name}-")) / "run"
    train = train_config(fields, run_dir)
    reproducible(seed=0, threads=1)
    start = time.perf_counter()
    metrics = pretrain.run(job, train, dict(overrides))
    seconds = time.perf_counter() - start
    history = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    body = run_body(str(run_dir), {})
    run_config = ckpt.read_meta(ckpt.find_checkpoint(run_dir))["config"]
    folder = out_root / name
    export(name, body, run_config, train.max_steps, folder)
    shutil.rmtree(run_dir.parent)

    loaded = load_course_folder(folder)  # as the course loads it: float16 -> float32
    trained = held_out_loss(job, loaded.model, loaded.tokenizer)
    seed_all(train.seed)  # pretrain.run's initialisation: the same model before any step
    entry = get_model(job.model)
    untrained_model, _ = pretrain.build_model(
        job, overrides, loaded.tokenizer, needed_settings(entry, get_objective(job.objective, job.model))
    )
    untrained = held_out_loss(job, untrained_model, loaded.tokenizer)
    files = {
        p.name: {"sha256": file_sha256(p), "bytes": p.stat().st_size} for p in sorted(folder.iterdir()) if p.is_file()
    }
    record = {
        "folder": folder.relative_to(ROOT).as_posix() if folder.is_relative_to(ROOT) else str(folder),
        "format": "minilm ELMo (config.json + model.safetensors)" if name == "elmo" else "Hugging Face",
        "dtype": "float16",
        "parameters": sum(p.numel() for p in loaded.model.parameters()),
        "data": f"{job.corpus} (all 17 novels), the last {job.validation_fraction:.0%} of each book's paragraphs "
        "held out",
        "job": dataclasses.asdict(job),
        "model_overrides": dict(overrides),
        "train": dataclasses.asdict(train) | {"run_dir": "(a temporary folder)"},
        "steps": train.max_steps,
        "tokens_seen": train.max_steps * train.batch_size * job.seq_len,
        "seconds": round(seconds),
        "trainer_validation": [m for m in history if m.get("split") == "validation"],
        "final_trainer_validation": metrics,
        "validation": trained,  # the saved (float16) checkpoint, on the whole held-out split
        "untrained_validation": untrained,
        "files": files,
        "total_bytes": sum(f["bytes"] for f in files.values()),
    }
    print(
        f"{name}: validation perplexity {trained['perplexity']:.1f} (untrained {untrained['perplexity']:.0f}), "
        f"{record['total_bytes'] / 1e6:.1f} MB, {seconds:.0f} s",
        flush=True,
    )
    return record


def save(records: dict) -> Path:
    """Merge ``records`` into the record file (a run of some models keeps the others' entries)."""
    path = RESULTS_DIR / f"{NAME}.json"
    old = json.loads(path.read_text())["results"] if path.is_file() else {}
    this_run = provenance()
    results = {**old, **{name: {**r, "provenance": this_run} for name, r in records.items()}}
    results = {name: results[name] for name in COURSE_MODELS if name in results}
    RESULTS_DIR.mkdir(exist_ok=True)
    atomic_write_text(path, json.dumps({"provenance": this_run, "results": results}, indent=2) + "\n")
    return path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default=",".join(COURSE_MODELS), help="comma-separated: gpt, bert, elmo")
    parser.add_argument("--out", default=str(ROOT / FOLDER), help="folder of the checkpoint folders")
    parser.add_argument("--steps", type=int, help="a trial: this many steps for every model (not the recorded run)")
    args = parser.parse_args()
    names = args.models.split(",")
    unknown = [n for n in names if n not in COURSE_MODELS]
    if unknown:
        sys.exit(f"error: unknown model(s) {', '.join(unknown)}; choose from {', '.join(COURSE_MODELS)}")
    begin()
    out_root = Path(args.out).resolve()
    for name in names:
        record = train_one(name, out_root, args.steps)
        if args.steps is None:
            print(save({name: record}), flush=True)


if __name__ == "__main__":
    main()
