"""The course's own pretrained checkpoints, one per family, each pretrained on the Gutenberg novels by
``minilm.train`` (the same ``pretrain.run`` as ``python -m minilm.train``) for minutes to half an hour of one CPU
thread — longer than a notebook can — and saved in half precision under ``checkpoints/course/<name>/``:

- gpt:  ``--model gpt --objective clm``, 4 layers, d_model 192, byte-level BPE of 8,192 tokens; Hugging Face's GPT-2
  layout (config.json + model.safetensors) and the tokenizer's tokenizer.json;
- bert: ``--model bert --objective mlm`` (no NSP), 4 layers, d_model 128, lowercased WordPiece of 8,192 tokens;
  short sequences (32 tokens) and more, cheaper steps: a masked position sees nothing of itself, so MLM must learn
  to attend to its neighbours, which takes many steps (at width 192, 1,400 steps of 64-token sequences left it at
  validation perplexity ~300, predicting frequent words everywhere); BERT's Adam (beta2 0.999, weight decay 0.01);
  Hugging Face's BERT layout with the MLM head (``BertForMaskedLM``);
- elmo: ``--model elmo --objective bilm``, the "tiny" biLM (character CNN, 2 LSTM layers of 512 cells projected to
  128 per direction), BPE of 8,192 tokens; minilm's own config.json + model.safetensors (ELMo has no Hugging Face
  type);
- the second half, all on BERT's recipe (width 128, batch 64, lr 1e-3, BERT's Adam; ``experiments/plateau.py``
  measures why): albert (``mlm+sop``, every layer sharing one block, E = 64; ``AlbertForPreTraining``), electra
  (``rtd``: the discriminator at BERT's size, a generator half as wide sharing its embeddings; the discriminator's
  folder with the generator's in ``generator/``), bart (``denoise``: text infilling + sentence permutation, 2 + 2
  layers, 64-token documents), t5 (``span_corruption``, 2 + 2 layers, 32-token inputs) and distilbert (``distill``: 2
  layers started from every other layer of the course BERT, which teaches it).

Each folder also holds ``minilm_run.json`` (the run's settings, for fine-tuning: ``minilm.models.course_run_dir``).
After training, each saved checkpoint is reloaded (float32) and scored on the whole held-out split (the last 5% of
each novel's paragraphs), beside the same model untrained: its language-model loss (``held_out_loss``: MLM's, the
generator's, the reconstruction's) beside the unigram entropy of the very tokens it predicts (``unigram_entropy``,
:mod:`minilm.analysis.plateau`): a model past the plateau is at least 1 nat below it. Load them with
``minilm.models.course_checkpoint(name)``.

Run from a clean checkout (about 30 minutes a model on one core of an idle 2-core CPU for GPT and ELMo, 5–15 for the
others; ``device="auto"`` takes a GPU when there is one, with bf16 autocast)::

    python experiments/course_checkpoints.py                        # all eight
    python experiments/course_checkpoints.py --models albert,t5     # some; the record keeps the others' entries
    python experiments/course_checkpoints.py --models gpt --score-only   # score a committed checkpoint again

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
from minilm.analysis.plateau import binary_entropy, scored_targets, unigram_entropy  # noqa: E402
from minilm.files import atomic_write_text, file_sha256  # noqa: E402
from minilm.finetune.model import from_pretrained as run_body  # noqa: E402
from minilm.models.course import (  # noqa: E402
    COURSE_MODELS,
    FOLDER,
    GENERATOR_FOLDER,
    RUN_FILE,
    load_course_folder,
    save_elmo,
    untrained_like,
)
from minilm.recipes.bert import bert_mlm_loss, mlm_counts  # noqa: E402
from minilm.recipes.electra import generate as electra_generate  # noqa: E402
from minilm.train import checkpoint as ckpt  # noqa: E402
from minilm.train import pretrain  # noqa: E402
from minilm.train.registry import get_objective, objective_config  # noqa: E402
from minilm.train.trainer import TrainConfig, default_collate  # noqa: E402
from minilm.utils import count_parameters, reproducible  # noqa: E402

NAME = "course_checkpoints"
WIDTH = dict(n_layers=4, n_heads=4, d_model=192)  # GPT: ~3.4M parameters with an 8k vocabulary
# The second half's recipe (experiments/plateau.py measured it): BERT's — width 128, 32-token sequences, batch 64,
# lr 1e-3 with BERT's Adam — leaves the unigram plateau in a few minutes; longer or wider runs stay on it far longer.
NARROW = dict(n_layers=4, n_heads=2, d_model=128, d_ff=512)
BERT_ADAM = dict(batch_size=64, lr=1e-3, warmup_steps=150, beta2=0.999, weight_decay=0.01)
SEQ2SEQ = dict(n_encoder_layers=2, n_decoder_layers=2, n_heads=4, d_model=128, d_ff=512)


@dataclasses.dataclass(frozen=True)
class CourseJob:
    job: pretrain.PretrainConfig
    model: dict  # model.<key> overrides
    train: dict  # TrainConfig fields
    objective: dict = dataclasses.field(default_factory=dict)  # objective.<key> settings


def course_job(model: str, objective: str, seq_len: int, overrides: dict, train: dict, settings=None) -> CourseJob:
    job = pretrain.PretrainConfig(model=model, objective=objective, size="tiny", vocab_size=8192, seq_len=seq_len)
    return CourseJob(job, overrides, train, settings or {})


JOBS = {
    "gpt": course_job("gpt", "clm", 128, WIDTH, dict(max_steps=1300, batch_size=16, lr=2e-3, warmup_steps=60)),
    "bert": course_job("bert", "mlm", 32, NARROW, dict(max_steps=3000, **BERT_ADAM)),
    "elmo": course_job("elmo", "bilm", 64, {}, dict(max_steps=1000, batch_size=16, lr=2e-3, warmup_steps=60)),
    # ALBERT: every layer shares one block, factorised embeddings (E = 64 < H = 128), MLM + SOP on segment pairs.
    # BERT's masking (single tokens) instead of ALBERT's n-grams of whole words: with n-grams 4,000 steps left it
    # only 0.5 nats below the plateau (MLM 5.65 vs 6.17), and Chapter 5 compares it with the course BERT
    "albert": course_job(
        "albert",
        "mlm+sop",
        32,
        {**NARROW, "embedding_size": 64, "share": "all"},
        dict(max_steps=4000, **BERT_ADAM),
        dict(whole_word=False, ngram=1),
    ),
    # ELECTRA: the discriminator at BERT's size, a generator half as wide sharing its embeddings, λ = 50. After 4,000
    # steps the discriminator detects replacements only a little (held-out loss 0.340 vs the base rate's 0.351 nats)
    "electra": course_job(
        "electra",
        "rtd",
        32,
        {**NARROW, "embedding_size": 128},
        dict(max_steps=4000, **BERT_ADAM),
        dict(generator_size=0.5, share="embeddings"),
    ),
    # BART: text infilling (30%, Poisson(3) spans) + sentence permutation; 2 + 2 post-LN layers
    "bart": course_job("bart", "denoise", 64, SEQ2SEQ, dict(max_steps=3000, **BERT_ADAM)),
    # T5: span corruption (15%, mean span 3); 2 + 2 pre-LN layers with relative positions. BERT's 32-token inputs:
    # 3,000 steps of 64-token inputs (36 CPU minutes) left it 0.97 nats below the plateau, only through the
    # sentinels' layout (its span words were 0.19 below: it had not learnt to read its source)
    "t5": course_job("t5", "span_corruption", 32, {**SEQ2SEQ, "d_kv": 32}, dict(max_steps=6000, **BERT_ADAM)),
    # DistilBERT: 2 layers, started from every other layer of the course BERT and distilled from it
    "distilbert": course_job(
        "distilbert",
        "distill",
        32,
        {**NARROW, "n_layers": 2},
        dict(max_steps=1500, **BERT_ADAM),
        dict(teacher=str(ROOT / FOLDER / "bert")),
    ),
}
EVAL_BATCH = 32
FORMATS = {name: "Hugging Face" for name in JOBS} | {
    "elmo": "minilm ELMo (config.json + model.safetensors)",
    "electra": "Hugging Face: the discriminator (ElectraForPreTraining), its generator in generator/ "
    "(ElectraForMaskedLM)",
}


def train_config(fields: dict, run_dir: Path) -> TrainConfig:
    every = fields["max_steps"] // 4
    return TrainConfig(
        **fields, eval_every=every, save_every=fields["max_steps"], threads=1, progress=False, run_dir=str(run_dir)
    )


def settings_of(spec: CourseJob):
    return objective_config(get_objective(spec.job.objective, spec.job.model), dict(spec.objective))


def scoring(spec: CourseJob):
    """(loss function, counts function, the part whose exp is a perplexity) by which ``spec``'s model is scored: its
    objective's, but a DistilBERT student's MLM loss alone (without its teacher)."""
    objective = get_objective(spec.job.objective, spec.job.model)
    if spec.job.objective == "distill":
        return bert_mlm_loss, mlm_counts, True
    return objective.loss, objective.counts, objective.perplexity


@torch.no_grad()
def held_out(spec: CourseJob, model, tokenizer, limit: int | None = None) -> dict:
    """The model on the held-out split (masks and noise fixed by the job's seed; its first ``limit`` examples, or
    all): its language-model loss (the objective's part whose exp is a perplexity: MLM's, the generator's, the
    reconstruction's) with that perplexity, the unigram entropy of the very tokens it predicts (the plateau), and its
    other parts (SOP's, the discriminator's with the base rate's entropy)."""
    job, objective = spec.job, get_objective(spec.job.objective, spec.job.model)
    settings = settings_of(spec)
    loss_of, counts_of, lm_part = scoring(spec)
    _, val_docs = pretrain.split_documents(pretrain.load_documents(job.corpus), job.validation_fraction)
    examples, collate = objective.prepare(val_docs, tokenizer, job, settings, validation=True)
    collate = collate or default_collate
    n = len(examples) if limit is None else min(limit, len(examples))
    model.eval()
    if job.objective == "rtd":
        model.settings = settings  # the pair's loss reads λ and the sampling temperature from its settings
    sums: dict[str, float] = {}
    units: dict[str, float] = {}
    targets, replaced = [], [0, 0]
    for start in range(0, n, EVAL_BATCH):
        batch = collate([examples[i] for i in range(start, min(start + EVAL_BATCH, n))])
        out, counts = loss_of(model, batch), counts_of(batch)
        parts = out.parts or {"loss": out.loss}
        for part, value in parts.items():
            sums[part] = sums.get(part, 0.0) + float(value) * counts[part]
            units[part] = units.get(part, 0.0) + counts[part]
        targets.append(scored_targets(batch))
        if job.objective == "rtd":  # the discriminator's base rate: the share of real tokens the generator replaced
            _, _, was_replaced = electra_generate(model, batch)
            replaced = [replaced[0] + int(was_replaced.sum()), replaced[1] + int(batch["attention_mask"].sum())]
    losses = {part: sums[part] / units[part] for part in sums}
    if lm_part is True and "loss" not in losses:  # a biLM: both directions, as many predictions each
        lm = sum(sums.values()) / sum(units.values())
    else:
        lm = losses["loss" if lm_part is True else lm_part]
    entropy = unigram_entropy(targets)
    result = {
        "loss": lm,
        "perplexity": math.exp(lm),
        "predictions": int(sum(t.numel() for t in targets)),
        "unigram_entropy": entropy,
        "nats_below_unigram": entropy - lm,
        "parts": losses,
    }
    if job.objective == "rtd":
        rate = replaced[0] / replaced[1]
        result["replaced_rate"] = rate
        result["rtd_base_rate_entropy"] = binary_entropy(rate)
    return result


def trained_module(run_dir: Path, spec: CourseJob):
    """The module the run trained and saved (ELECTRA's generator and discriminator, a student beside its teacher),
    its weights from the run's checkpoint, and the run's tokenizer."""
    body = run_body(str(run_dir), {})
    if spec.job.objective != "rtd":
        return body.model, body.tokenizer
    objective = get_objective(spec.job.objective, spec.job.model)
    pair = objective.wrap_model(body.model, body.config, settings_of(spec), body.tokenizer)
    ckpt.load_weights(ckpt.find_checkpoint(run_dir), pair)
    return pair, body.tokenizer


def export(name: str, model, tokenizer, run_config: dict, steps: int, folder: Path) -> None:
    """The trained model in float16 -> ``folder`` (Hugging Face layout, or minilm's for ELMo; ELECTRA's
    discriminator there and its generator in ``generator/``), with its tokenizer and the run's settings."""
    if folder.exists():
        shutil.rmtree(folder)
    if name == "elmo":
        save_elmo(model, folder)
    elif name == "electra":
        model.half()
        model.discriminator.save_pretrained(folder)
        model.generator.save_pretrained(folder / GENERATOR_FOLDER)
        model.float()
    else:
        model.half().save_pretrained(folder)
        model.float()
    tokenizer.save(folder)
    atomic_write_text(folder / RUN_FILE, json.dumps({"steps": steps, "config": run_config}, indent=2) + "\n")


def folder_files(folder: Path) -> dict:
    return {
        p.relative_to(folder).as_posix(): {"sha256": file_sha256(p), "bytes": p.stat().st_size}
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


def train_one(name: str, out_root: Path, steps: int | None = None) -> dict:
    spec = JOBS[name]
    job, fields = spec.job, spec.train
    if steps is not None:  # a trial
        fields = {**fields, "max_steps": steps, "warmup_steps": min(fields["warmup_steps"], steps // 2)}
    run_dir = Path(tempfile.mkdtemp(prefix=f"course-{name}-")) / "run"
    train = train_config(fields, run_dir)
    reproducible(seed=0, threads=1)
    start = time.perf_counter()
    metrics = pretrain.run(job, train, dict(spec.model), settings=settings_of(spec))
    seconds = time.perf_counter() - start
    history = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    model, tokenizer = trained_module(run_dir, spec)
    run_config = ckpt.read_meta(ckpt.find_checkpoint(run_dir))["config"]
    if "teacher" in run_config["objective"]:  # the course BERT, named from the repository root (not this machine)
        run_config["objective"]["teacher"] = (FOLDER / "bert").as_posix()
    folder = out_root / name
    export(name, model, tokenizer, run_config, train.max_steps, folder)
    shutil.rmtree(run_dir.parent)

    loaded = load_course_folder(folder)  # as the course loads it: float16 -> float32
    trained = held_out(spec, loaded.model, loaded.tokenizer)
    untrained = held_out(spec, untrained_like(loaded, seed=train.seed), loaded.tokenizer)
    files = folder_files(folder)
    record = {
        "folder": folder.relative_to(ROOT).as_posix() if folder.is_relative_to(ROOT) else str(folder),
        "format": FORMATS[name],
        "dtype": "float16",
        "parameters": count_parameters(loaded.model),
        "data": f"{job.corpus} (all 17 novels), the last {job.validation_fraction:.0%} of each book's paragraphs "
        "held out",
        "job": dataclasses.asdict(job),
        "model_overrides": dict(spec.model),
        "objective_settings": {k: v for k, v in dict(spec.objective).items() if k != "teacher"}
        | ({"teacher": (FOLDER / "bert").as_posix()} if "teacher" in spec.objective else {}),
        "train": dataclasses.asdict(train) | {"run_dir": "(a temporary folder)"},
        "steps": train.max_steps,
        "tokens_seen": train.max_steps * train.batch_size * job.seq_len,
        "seconds": round(seconds),
        "trainer_validation": [m for m in history if m.get("split") == "validation"],
        "final_trainer_validation": metrics,
        "validation": trained,  # the saved (float16) checkpoint, on the whole held-out split
        "untrained_validation": untrained,
        "held_out_loss": trained["loss"],
        "unigram_entropy": trained["unigram_entropy"],
        "files": files,
        "total_bytes": sum(f["bytes"] for f in files.values()),
    }
    print(
        f"{name}: held-out loss {trained['loss']:.3f} nats, {trained['nats_below_unigram']:.2f} below the unigram "
        f"entropy {trained['unigram_entropy']:.3f} (perplexity {trained['perplexity']:.1f}; untrained "
        f"{untrained['perplexity']:.0f}), {record['total_bytes'] / 1e6:.1f} MB, {seconds:.0f} s",
        flush=True,
    )
    return record


def score_only(name: str, out_root: Path) -> dict:
    """The committed checkpoint ``name`` scored again (its plateau fields), its training record kept."""
    old = json.loads((RESULTS_DIR / f"{NAME}.json").read_text())["results"][name]
    spec = JOBS[name]
    loaded = load_course_folder(out_root / name)
    trained = held_out(spec, loaded.model, loaded.tokenizer)
    untrained = held_out(spec, untrained_like(loaded, seed=0), loaded.tokenizer)
    print(f"{name}: held-out loss {trained['loss']:.3f}, unigram entropy {trained['unigram_entropy']:.3f}", flush=True)
    return {
        **{k: v for k, v in old.items() if k != "provenance"},
        "validation": trained,
        "untrained_validation": untrained,
        "held_out_loss": trained["loss"],
        "unigram_entropy": trained["unigram_entropy"],
        "scored": provenance(),  # this scoring; "provenance" stays the training run's
        "provenance": old["provenance"],
    }


def save(records: dict) -> Path:
    """Merge ``records`` into the record file (a run of some models keeps the others' entries)."""
    path = RESULTS_DIR / f"{NAME}.json"
    old = json.loads(path.read_text())["results"] if path.is_file() else {}
    this_run = provenance()
    results = {**old, **{name: {"provenance": this_run} | r for name, r in records.items()}}
    results = {name: results[name] for name in COURSE_MODELS if name in results}
    RESULTS_DIR.mkdir(exist_ok=True)
    atomic_write_text(path, json.dumps({"provenance": this_run, "results": results}, indent=2) + "\n")
    return path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--models", default=",".join(COURSE_MODELS), help=f"comma-separated: {', '.join(COURSE_MODELS)}"
    )
    parser.add_argument("--out", default=str(ROOT / FOLDER), help="folder of the checkpoint folders")
    parser.add_argument("--steps", type=int, help="a trial: this many steps for every model (not the recorded run)")
    parser.add_argument(
        "--score-only",
        action="store_true",
        help="score the committed checkpoints again (held-out loss, unigram "
        "entropy) without training; their training records stay",
    )
    args = parser.parse_args()
    names = args.models.split(",")
    unknown = [n for n in names if n not in COURSE_MODELS]
    if unknown:
        sys.exit(f"error: unknown model(s) {', '.join(unknown)}; choose from {', '.join(COURSE_MODELS)}")
    begin()
    out_root = Path(args.out).resolve()
    for name in names:
        if args.score_only:
            print(save({name: score_only(name, out_root)}), flush=True)
            continue
        record = train_one(name, out_root, args.steps)
        if args.steps is None:
            print(save({name: record}), flush=True)


if __name__ == "__main__":
    main()
