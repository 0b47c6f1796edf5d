"""The unigram plateau, measured: what moves the time a tiny model needs to leave it on a 2-core CPU.

Every pretraining run first learns the frequency of each token: its loss falls to the *unigram entropy* of the
tokens it predicts (:mod:`minilm.analysis.plateau`) within a few hundred steps. A causal LM then leaves that loss
at once (the previous token already says a lot), but a masked LM or a denoiser can sit on it for thousands of steps:
a masked position sees nothing of itself, and until attention learns to read the neighbours, the frequency of each
word is all the model has. The course's first BERTs, at width 192 and 64-token sequences, never left it within a
notebook's budget, and every from-scratch comparison of the second half compared models on the plateau.

This sweep starts from the recipe that left it (the course BERT's: 4 layers of width 128, 2 heads, 32-token
sequences, batch 64, lr 1e-3 after 150 warm-up steps, BERT's Adam) and changes one thing at a time — sequence
length (at the same tokens per batch), width, depth, learning rate, warm-up, batch size, pre-LN instead of post-LN,
vocabulary size — for an encoder (MLM) and an encoder–decoder (BART's denoising, 2 + 2 layers, 64-token documents).
Each run of a family trains for the same number of steps on the Gutenberg novels (1,000 for MLM; 400 for the
denoiser, whose steps cost about six times more and which leaves early) and is evaluated every 100 (50) steps on
the same held-out batches; its record keeps the curve, its seconds, the unigram entropy of its held-out targets and
the first evaluation at least half a nat below it (``left_at``: None when it never got there; the course checkpoints,
trained longer, are asked for a whole nat).

    python experiments/plateau.py                       # every run, two at a time (about an hour on 2 cores)
    python experiments/plateau.py --only mlm/wide,mlm/deep   # these runs, added to the recorded others
    python experiments/plateau.py --only mlm/base,mlm/seq128 --steps 200   # a trial (not recorded)

Writes experiments/results/plateau.json; Chapter 3 reads it.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import multiprocessing
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from experiments.common import RESULTS_DIR, begin, provenance, save_results  # noqa: E402
from minilm.analysis.plateau import scored_targets, unigram_entropy  # noqa: E402
from minilm.tokenizers import Tokenizer  # noqa: E402
from minilm.train import pretrain  # noqa: E402
from minilm.train.registry import get_objective, objective_config  # noqa: E402
from minilm.train.trainer import TrainConfig, default_collate  # noqa: E402
from minilm.utils import reproducible  # noqa: E402

NAME = "plateau"
STEPS = {
    "mlm": 1200,
    "seq2seq": 500,
}  # a denoiser's step costs ~6x an MLM's (it predicts every token), and leaves early
EVAL_EVERY = 100
EVAL_BATCHES = 8
LEFT = 0.5  # nats below the unigram entropy at which a run counts as having left the plateau

MLM_MODEL = dict(n_layers=4, n_heads=2, d_model=128, d_ff=512)
MLM_TRAIN = dict(batch_size=64, lr=1e-3, warmup_steps=150, beta2=0.999, weight_decay=0.01)
SEQ2SEQ_MODEL = dict(n_encoder_layers=2, n_decoder_layers=2, n_heads=4, d_model=128, d_ff=512)


@dataclasses.dataclass(frozen=True)
class Variant:
    family: str  # "mlm" or "seq2seq"
    name: str
    change: str  # what differs from the family's base run, in words
    job: dict = dataclasses.field(default_factory=dict)  # PretrainConfig fields over the base
    model: dict = dataclasses.field(default_factory=dict)  # model overrides over the base
    train: dict = dataclasses.field(default_factory=dict)  # TrainConfig fields over the base

    @property
    def key(self) -> str:
        return f"{self.family}/{self.name}"


BASE = {
    "mlm": (dict(model="bert", objective="mlm", seq_len=32), MLM_MODEL, MLM_TRAIN),
    "seq2seq": (dict(model="bart", objective="denoise", seq_len=64), SEQ2SEQ_MODEL, MLM_TRAIN),
}
VARIANTS = (
    Variant("mlm", "base", "the course BERT's recipe"),
    Variant("mlm", "seq128", "128-token sequences, batch 16 (the same tokens per step)", {"seq_len": 128},
            train={"batch_size": 16}),
    Variant("mlm", "wide", "width 256 (4 heads, FFN 1024): 3x the encoder's parameters",
            model={"d_model": 256, "n_heads": 4, "d_ff": 1024}),
    Variant("mlm", "deep", "8 layers instead of 4", model={"n_layers": 8}),
    Variant("mlm", "lr3e-4", "learning rate 3e-4 instead of 1e-3", train={"lr": 3e-4}),
    Variant("mlm", "lr3e-3", "learning rate 3e-3 instead of 1e-3", train={"lr": 3e-3}),
    Variant("mlm", "no-warmup", "no warm-up (the full learning rate from step 1)", train={"warmup_steps": 0}),
    Variant("mlm", "batch16", "batch 16 instead of 64 (a quarter of the tokens per step)", train={"batch_size": 16}),
    Variant("mlm", "vocab2048", "a 2,048-token vocabulary instead of 8,192", {"vocab_size": 2048}),
    Variant("mlm", "pre-ln", "pre-LN blocks (x + Sublayer(LN(x)), a final LayerNorm) instead of BERT's post-LN",
            model={"norm_first": True}),
    Variant("seq2seq", "base", "BART's denoising, 2 + 2 layers of width 128, 64-token documents"),
    Variant("seq2seq", "seq256", "256-token documents, batch 16 (the same tokens per step)", {"seq_len": 256},
            train={"batch_size": 16}),
)  # fmt: skip
FIRST = ("mlm/base", "seq2seq/base", "mlm/seq128", "seq2seq/seq256", "mlm/pre-ln", "mlm/lr3e-3", "mlm/batch16")


def configs(variant: Variant, steps: int, run_dir: Path) -> tuple[pretrain.PretrainConfig, TrainConfig, dict]:
    job, model, train = BASE[variant.family]
    job = pretrain.PretrainConfig(**{"size": "tiny", "vocab_size": 8192, **job, **variant.job})
    train = TrainConfig(
        **{**train, **variant.train},
        max_steps=steps,
        eval_every=EVAL_EVERY // 2 if variant.family == "seq2seq" else EVAL_EVERY,
        eval_batches=EVAL_BATCHES,
        save_every=steps,
        log_every=EVAL_EVERY,
        threads=1,
        progress=False,
        run_dir=str(run_dir),
    )
    return job, train, {**model, **variant.model}


def held_out_entropy(job: pretrain.PretrainConfig, tokenizer: Tokenizer) -> float:
    """The unigram entropy of the targets of the whole held-out split (masked or noised once with the job's seed):
    the Trainer evaluates the first ``EVAL_BATCHES`` of it, but the entropy of a few thousand tokens of an 8k
    vocabulary is biased low by most of a nat, so the plateau is measured on all of them."""
    objective = get_objective(job.objective, job.model)
    _, val_docs = pretrain.split_documents(pretrain.load_documents(job.corpus), job.validation_fraction)
    examples, collate = objective.prepare(val_docs, tokenizer, job, objective_config(objective, {}), validation=True)
    collate = collate or default_collate
    batches = [
        collate([examples[i] for i in range(s, min(s + 64, len(examples)))]) for s in range(0, len(examples), 64)
    ]
    return unigram_entropy([scored_targets(b) for b in batches])


def run_variant(variant: Variant, steps: int) -> dict:
    with tempfile.TemporaryDirectory(prefix="plateau-") as tmp:
        run_dir = Path(tmp) / "run"
        job, train, model = configs(variant, steps, run_dir)
        reproducible(seed=0, threads=1)
        start = time.perf_counter()
        pretrain.run(job, train, model)
        seconds = time.perf_counter() - start
        history = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
        entropy = held_out_entropy(job, Tokenizer.load(run_dir / "tokenizer"))
    curve = [{"step": m["step"], "loss": m["loss"]} for m in history if m.get("split") == "validation"]
    left = next((point["step"] for point in curve if entropy - point["loss"] >= LEFT), None)
    speeds = sorted(m["tokens_per_s"] for m in history if m.get("split") == "train")
    record = {
        "family": variant.family,
        "change": variant.change,
        "job": dataclasses.asdict(job),
        "model_overrides": model,
        "train": {k: v for k, v in dataclasses.asdict(train).items() if k != "run_dir"},
        "seconds": round(seconds, 1),
        "seconds_per_step": seconds / steps,  # with data preparation and evaluations
        "tokens_per_s": speeds[len(speeds) // 2],  # the median over the logged training windows
        "tokens_per_step": train.batch_size * job.seq_len,
        "unigram_entropy": entropy,
        "curve": curve,
        "final_loss": curve[-1]["loss"],
        "final_nats_below": entropy - curve[-1]["loss"],
        "left_at": left,
    }
    print(
        f"{variant.key:18s} final {record['final_loss']:.3f} vs H {entropy:.3f} "
        f"({record['final_nats_below']:+.2f} nats), left at {left}, {seconds:.0f} s",
        flush=True,
    )
    return record


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    keys = [v.key for v in VARIANTS]
    parser.add_argument("--only", help=f"comma-separated runs (default: all): {', '.join(keys)}")
    parser.add_argument("--steps", type=int, help="a trial: this many steps (not recorded)")
    parser.add_argument("--workers", type=int, default=2, help="runs at a time, one thread each (default 2)")
    args = parser.parse_args()
    chosen = args.only.split(",") if args.only else keys
    unknown = [k for k in chosen if k not in keys]
    if unknown:
        sys.exit(f"error: unknown run(s) {', '.join(unknown)}; choose from {', '.join(keys)}")
    if args.steps is None:
        begin()
    variants = [v for v in VARIANTS if v.key in chosen]
    variants.sort(key=lambda v: FIRST.index(v.key) if v.key in FIRST else len(FIRST))  # the most telling first
    jobs = [(v, args.steps or STEPS[v.family]) for v in variants]
    runs = {}
    kept = earlier_runs() if args.steps is None else {}
    with multiprocessing.get_context("spawn").Pool(args.workers, maxtasksperchild=1) as pool:
        for key, record in pool.imap_unordered(run_one, jobs):
            runs[key] = record | {"provenance": provenance()}
            if args.steps is None:  # each run is kept as it ends: a stopped sweep keeps the runs it finished
                done = {v.key: ({**kept, **runs})[v.key] for v in VARIANTS if v.key in {**kept, **runs}}
                print(save_results(NAME, {"steps": STEPS, "left_margin": LEFT, "runs": done}), flush=True)


def earlier_runs() -> dict:
    """The recorded runs of an earlier invocation with the same steps (``--only`` adds runs to them, each with the
    provenance of the invocation that made it); runs of other settings are dropped."""
    path = RESULTS_DIR / f"{NAME}.json"
    if not path.is_file():
        return {}
    record = json.loads(path.read_text())
    if record["results"]["steps"] != STEPS or record["results"]["left_margin"] != LEFT:
        return {}
    return {key: {"provenance": record["provenance"]} | run for key, run in record["results"]["runs"].items()}


def run_one(job: tuple[Variant, int]) -> tuple[str, dict]:
    return job[0].key, run_variant(*job)


if __name__ == "__main__":
    main()
