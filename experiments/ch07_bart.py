"""Chapter 7: a miniature of BART's Table 1 (Lewis et al. 2020): which corruption transfers best.

Rows: one tiny BART (2 + 2 layers, d_model 128, 4 heads, FFN 512, no dropout, 1.48M weights; a byte-level BPE
vocabulary of 4,096, the "roberta" family) pretrained from the same initial weights, in the same data order, for the
same 1,500 steps of 8 pieces at the same learning rate (1e-3, constant after 150 warm-up steps), through the registered
``denoise`` objective (prepare, loss, counts) and minilm's Trainer, with one of BART's noises
(:mod:`minilm.objectives.denoising`: 30% of the tokens, spans of Poisson(3) lengths, all sentences shuffled):

    masking                 token masking: 30% of the tokens become <mask>
    deletion                token deletion: 30% of the tokens are removed
    infilling               text infilling: spans covering 30% of the tokens, each becomes ONE <mask>
    rotation                document rotation: the piece starts at a random token
    permutation             sentence shuffling: the piece's sentences (cut after . ! ?) in random order
    infilling+permutation   BART's final choice
    none                    no noise: copying, the identity the paper warns a denoising autoencoder can learn
                            (``noise=masking mask_ratio=0``: the masking noise with nothing to mask)
    no pretraining          the control: the initial weights, fine-tuned as they are

The corpus is the Gutenberg novels (the first 1,000 paragraphs of each of the 17, the last 5% of each held out), as
BART's pieces: each book's tokens cut into ``<s> ... </s>`` pieces of at most 64 tokens (``objective.prepare``; the
pieces do not depend on the noise and are prepared once), corrupted afresh in every batch (the row's collate, as
``prepare`` makes it). Pieces of 64 tokens hold two or three sentences, so sentence shuffling leaves about a third
of them as they were (the record's ``held_out`` statistics say how many each noise changes).

Why 1,500 small steps: a seq2seq model trained from scratch first learns only a language model in its decoder and
ignores the encoder; copying through cross-attention arrives later, suddenly. In trials (the first 300 paragraphs of
each book, 8 x 64 tokens, lr 1e-3 constant) the "none" row's training loss stayed at the decoder-alone level up to
about step 700 (5.0 nats per token) and then fell to 1.8 at step 800 and 0.4 at step 1,000; with the learning rate
decaying over 1,000 steps, or in 400 steps of 16 x 128 tokens, no row left the decoder-alone phase (every held-out
loss the same under every corruption: the same language model in every row). After 1,500 steps text infilling
reconstructed at 3.2 nats per token and rotation at 4.0 (each best under its own corruption), and on the full corpus
infilling + shuffling at 4.4 (its encoder only beginning to matter): the rows differ, but they are early denoisers.

Columns:

1. Held-out reconstruction: the mean loss per target token (every token of the original piece, as the objective
   scores it) on 256 held-out pieces corrupted once, with a fixed seed, by every noise: a matrix, each row (model)
   under every column (corruption). Its diagonal is each model's own task, NOT comparable across rows (deletion and
   rotation are harder to undo than masking; copying is trivial). The column comparable across rows is one fixed
   corruption shared by all: text infilling at 30% (``FIXED``), the same corrupted pieces for every model; its
   perplexity is the clean-to-clean quality of the language model inside each denoiser (70% of the document in
   view, 30% to write from context). It favours the rows trained on infilling, whose own task it is: read it beside
   the whole matrix. A model that never saw a <mask> (deletion, rotation, shuffling, copying) meets one here first.
2. Downstream, every pretrained body fine-tuned alike (the ``python -m minilm.finetune`` path in process: task kind,
   TaskEncoder, FinetuneModel, the Trainer; lr 3e-4, linear decay, 300 steps of 16):
   - SST-2, the BART way: the same input to encoder and decoder, the decoder's state at the final </s> feeds a
     linear classifier (``pooling=last``); 3,000 training sentences (at most 64 tokens), accuracy on GLUE's
     872-sentence dev set (this repo's "test" split);
   - generative SQuAD 2.0 (``squad2_gen``: "question: ... context: ..." -> the answer, or "no answer"), sources cut
     to 128 tokens (the answer of 62% of the answerable test questions lies inside them), all 950 training
     questions, greedy answers of at most 24 tokens on the 247 test questions: SQuAD EM/F1, ROUGE-L and the
     fraction answered "no answer" (or nothing). Half the test questions are unanswerable, so always saying "no
     answer" scores about 50 EM/F1 (the ``constant`` baseline); a model this small, fine-tuned on 950 questions, is
     expected to sit at that floor. The paper scores generation by perplexity (Table 1: ELI5, XSum, ConvAI2,
     CNN/DM), so the record also holds the teacher-forced perplexity of the reference targets on the test set (all
     of them, and the answers of the answerable questions alone): continuous, comparable across rows, and
     informative where EM/F1 sit at the floor. Positions 64-127 of the sources are never seen in pretraining
     (pieces are 64 tokens): they start from the initial weights in every row, as in the control.

Beside every downstream score the record keeps the majority class (SST-2) or the constant "no answer" (SQuAD), the
no-pretraining control, and a binomial standard error as the noise floor of one run (sqrt(p (1 - p) / n) at p =
0.5: 1.7 points of SST-2 accuracy, 3.2 points of SQuAD EM). One seed per row: differences within about two standard
errors are noise.

    nice -n 5 python experiments/ch07_bart.py        # 26 minutes on a shared 2-core CPU (the recorded run: 1,585 s)
    MINILM_ALLOW_DIRTY=1 python experiments/ch07_bart.py --quick   # a 3-minute trial of the whole pipeline

Writes experiments/results/ch07_bart.json (read by chapters/07_bart.py).
"""

from __future__ import annotations

import argparse
import copy
import math
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from experiments.common import begin, save_results  # noqa: E402
from minilm.data import Document, load_gutenberg, load_task  # noqa: E402
from minilm.data.tasks import NO_ANSWER_TEXT, TASKS  # noqa: E402
from minilm.finetune.cli import predict, sample  # noqa: E402
from minilm.finetune.kinds import TaskEncoder, task_kind  # noqa: E402
from minilm.finetune.model import Body, FinetuneModel, finetune_loss  # noqa: E402
from minilm.objectives.labels import IGNORE_INDEX  # noqa: E402
from minilm.tokenizers import train_tokenizer  # noqa: E402
from minilm.train.pretrain import PretrainConfig, split_documents  # noqa: E402
from minilm.train.registry import build_model, get_model, get_objective, model_config, objective_config  # noqa: E402
from minilm.train.trainer import TrainConfig, Trainer  # noqa: E402
from minilm.utils import count_parameters, reproducible  # noqa: E402

PARAGRAPHS_PER_BOOK = 1000
VOCAB_SIZE = 4096
SEQ_LEN = 64  # tokens of a pretraining piece, <s> and </s> included
SOURCE_LEN = 128  # tokens of a fine-tuning source (generative SQuAD's question + context)
MODEL = dict(
    n_encoder_layers=2,
    n_decoder_layers=2,
    n_heads=4,
    d_model=128,
    d_ff=512,
    max_len=SOURCE_LEN,
    dropout=0.0,
)
PRETRAIN = dict(batch_size=8, lr=1e-3, schedule="constant", weight_decay=0.01, beta2=0.98)
STEPS = 1500  # pretraining steps of every row
HELD_OUT_PIECES = 256  # held-out pieces each model is scored on, under every corruption
LOG_EVERY = 10

# the rows: name -> the denoise objective's settings (the paper's defaults otherwise: 30%, Poisson(3), all sentences)
ROWS = {
    "masking": {"noise": "masking"},
    "deletion": {"noise": "deletion"},
    "infilling": {"noise": "infilling"},
    "rotation": {"noise": "rotation"},
    "permutation": {"noise": "permutation"},
    "infilling+permutation": {"noise": "infilling+permutation"},
    "none": {"noise": "masking", "mask_ratio": 0.0},  # no noise: masking 0% of the tokens
}
SETTINGS = ("noise", "mask_ratio", "poisson_lambda", "permute_ratio", "random_ratio")  # the denoise settings recorded
CONTROL = "no pretraining"
FIXED = "infilling"  # the corruption shared by every row's comparable held-out column
LABELS = {  # the paper's names (Table 1)
    "masking": "Token Masking",
    "deletion": "Token Deletion",
    "infilling": "Text Infilling",
    "rotation": "Document Rotation",
    "permutation": "Sentence Shuffling",
    "infilling+permutation": "Text Infilling + Sentence Shuffling",
    "none": "no noise (copying)",
    CONTROL: "no pretraining",
}
# Fine-tuning: the same for every row (and the control)
FINETUNE = {
    "sst2": dict(train_examples=3000, max_length=64, steps=300, batch_size=16, lr=3e-4),
    "squad2_gen": dict(
        train_examples=0, max_length=SOURCE_LEN, max_target_length=24, steps=300, batch_size=16, lr=3e-4
    ),
}
# Table 1 of the paper (BART-base-sized models, 1M steps on books + Wikipedia): SQuAD 1.1 F1 and MNLI accuracy.
# (ELI5, XSum, ConvAI2 and CNN/DM perplexities are in the paper too.)
PAPER = {
    "masking": {"squad_f1": 90.4, "mnli": 84.1},
    "deletion": {"squad_f1": 90.4, "mnli": 84.1},
    "infilling": {"squad_f1": 90.8, "mnli": 84.0},
    "rotation": {"squad_f1": 77.2, "mnli": 75.3},
    "permutation": {"squad_f1": 85.4, "mnli": 81.5},
    "infilling+permutation": {"squad_f1": 90.8, "mnli": 83.8},
}


def standard_error(n: int, p: float = 0.5) -> float:
    """The binomial standard error of a proportion near ``p`` on ``n`` test items: one run's noise."""
    return round(math.sqrt(p * (1 - p) / n), 4)


def settings_of(name: str):
    return objective_config(get_objective("denoise", "bart"), ROWS[name])


# ---------------------------------------------------------------------------------------------- data


def prepare(quick: bool) -> dict:
    objective = get_objective("denoise", "bart")
    books = [Document(b.title, b.paragraphs[: 120 if quick else PARAGRAPHS_PER_BOOK]) for b in load_gutenberg()]
    train_docs, val_docs = split_documents(books, 0.05)
    tokenizer = train_tokenizer([p for d in train_docs for p in d.paragraphs], "roberta", VOCAB_SIZE)
    job = PretrainConfig(model="bart", objective="denoise", seq_len=SEQ_LEN)
    # the pieces do not depend on the noise (only the collate does): prepared once, with the first row's settings
    pieces, _ = objective.prepare(train_docs, tokenizer, job, settings_of("masking"))
    held_out = {}  # corruption -> the held-out pieces corrupted once (prepare's fixed validation noise)
    for name in ROWS:
        noised, collate = objective.prepare(val_docs, tokenizer, job, settings_of(name), validation=True)
        stride = max(1, len(noised) // HELD_OUT_PIECES)  # spread over every book
        held_out[name] = ([noised[i] for i in range(0, len(noised), stride)][:HELD_OUT_PIECES], collate)
    data = {
        "objective": objective,
        "tokenizer": tokenizer,
        "job": job,
        "val_docs": val_docs,
        "pieces": pieces,
        "held_out": held_out,
        "tasks": {},
    }
    for task, spec in FINETUNE.items():
        kind = task_kind(TASKS[task])
        train = sample(load_task(task, "train"), 300 if quick else spec["train_examples"], 0)
        test = load_task(task, "test")[: 100 if quick else None]
        data["tasks"][task] = {"kind": kind, "train": train, "test": test}
    return data


def corruption_stats(held_out) -> dict:
    """What each corruption does to the held-out pieces: the fraction it changed at all (a piece with one sentence
    cannot be shuffled), and the mean corrupted length over the original length."""
    examples, _ = held_out
    changed = sum(
        len(e["input_ids"]) != len(e["labels"]) or not torch.equal(e["input_ids"], e["labels"]) for e in examples
    )
    return {
        "changed_fraction": round(changed / len(examples), 4),
        "length_ratio": round(sum(len(e["input_ids"]) for e in examples) / sum(len(e["labels"]) for e in examples), 4),
        "pieces": len(examples),
        "target_tokens": sum(len(e["labels"]) for e in examples),
    }


# ---------------------------------------------------------------------------------------------- pretraining


def initial_model(data):
    """The one initialization every row starts from (and the control fine-tunes)."""
    entry = get_model("bart")
    config = model_config(entry, "tiny", data["tokenizer"].vocab_size, MODEL)
    torch.manual_seed(0)
    return build_model(entry, config, data["tokenizer"])


def checksum(model) -> float:
    """A fingerprint of the weights (equal initial weights give equal sums)."""
    return round(sum(float(p.detach().double().abs().sum()) for p in model.parameters()), 6)


@torch.no_grad()
def reconstruction(model, data) -> dict:
    """The mean loss per target token (the objective's loss weighted by its counts) on the held-out pieces under
    every corruption."""
    objective = data["objective"]
    model.eval()
    out = {}
    for name, (examples, collate) in data["held_out"].items():
        total, units = 0.0, 0
        for start in range(0, len(examples), 32):
            batch = collate(examples[start : start + 32])
            n = objective.counts(batch)["loss"]
            total += float(objective.loss(model, batch).loss) * n
            units += n
        out[name] = round(total / units, 4)
    return out


def pretrain(name: str, data, steps: int) -> tuple[torch.nn.Module, dict]:
    objective = data["objective"]
    settings = settings_of(name)
    model = copy.deepcopy(data["initial"])
    # the row's collate as prepare makes it (DynamicNoising with the row's settings); called on the short held-out
    # documents, since the training pieces, the same for every row, were prepared once
    _, collate = objective.prepare(data["val_docs"], data["tokenizer"], data["job"], settings)
    config = TrainConfig(
        **PRETRAIN, max_steps=steps, warmup_steps=steps // 10, eval_every=0, eval_batches=0, save_every=0,
        log_every=LOG_EVERY, progress=False,
    )  # fmt: skip
    record = {
        "settings": {k: getattr(settings, k) for k in SETTINGS},
        "initial_checksum": checksum(model),
    }
    torch.manual_seed(2)  # the noise stream (the data order is the Trainer's, seeded alike)
    trainer = Trainer(model, objective.loss, data["pieces"], config, collate=collate, counts=objective.counts,
                      perplexity=objective.perplexity)  # fmt: skip
    started = time.perf_counter()
    trainer.fit()
    log = [e for e in trainer.history if e["split"] == "train"]
    record["train_curve"] = {"step": [e["step"] for e in log], "loss": [round(e["loss"], 4) for e in log]}
    record["first_train_loss"] = log[0]["loss"]
    record["last_train_loss"] = sum(e["loss"] for e in log[-5:]) / len(log[-5:])
    record["pretrain_seconds"] = round(time.perf_counter() - started, 1)
    return model, record


# ---------------------------------------------------------------------------------------------- fine-tuning


@torch.no_grad()
def target_nll(model, encoded, examples, collate) -> dict:
    """Teacher-forced loss per target token of the reference targets: all of them, and the answers of the
    answerable questions alone."""
    model.eval()
    sums = {"all": 0.0, "answerable": 0.0}
    counts = {"all": 0, "answerable": 0}
    for start in range(0, len(encoded), 64):
        batch = collate(encoded[start : start + 64])
        labels = batch["labels"]
        logits = model(batch["input_ids"], batch["attention_mask"], model.shift_right(labels))  # (B, T, V)
        nll = F.cross_entropy(logits.transpose(1, 2), labels, ignore_index=IGNORE_INDEX, reduction="none")  # (B, T)
        scored = labels != IGNORE_INDEX
        for row, example in enumerate(examples[start : start + 64]):
            for part in ("all", "answerable") if example.references else ("all",):
                sums[part] += float(nll[row][scored[row]].sum())
                counts[part] += int(scored[row].sum())
    out = {}
    for part in sums:
        out[f"{part}_loss"] = round(sums[part] / counts[part], 4)
        out[f"{part}_perplexity"] = round(math.exp(sums[part] / counts[part]), 3)
        out[f"{part}_tokens"] = counts[part]
    return out


def finetune(pretrained, task: str, data) -> dict:
    """Fine-tune a copy of ``pretrained`` on ``task`` as ``python -m minilm.finetune`` does, score the test split."""
    spec, task_data = FINETUNE[task], data["tasks"][task]
    kind = task_data["kind"]
    entry = get_model("bart")
    model = copy.deepcopy(pretrained)
    body = Body(model, model.config, entry, data["tokenizer"])
    encoder = TaskEncoder(
        data["tokenizer"], spec["max_length"], "last", max_target_length=spec.get("max_target_length", 32)
    )
    train, test = (kind.encode_examples(task_data[split], encoder) for split in ("train", "test"))
    torch.manual_seed(3)  # the classifier's initial weights: the same for every row
    head = kind.head(body.hidden_size, "last")
    tuned = FinetuneModel(body, head, kind)
    config = TrainConfig(
        batch_size=spec["batch_size"], lr=spec["lr"], max_steps=spec["steps"], warmup_steps=spec["steps"] // 10,
        schedule="linear", weight_decay=0.01, eval_every=0, eval_batches=0, save_every=0, log_every=LOG_EVERY,
        progress=False,
    )  # fmt: skip
    torch.manual_seed(4)
    trainer = Trainer(tuned, finetune_loss, train, config, collate=kind.collate, counts=tuned.counts)
    started = time.perf_counter()
    trainer.fit()
    log = [e for e in trainer.history if e["split"] == "train"]
    generation = dict(max_new_tokens=spec.get("max_target_length", 32), num_beams=1)
    predictions = predict(tuned, test, 64, trainer.device, trainer.dtype, generation)
    result = {
        **kind.score(task_data["test"], predictions),
        "first_train_loss": log[0]["loss"],
        "last_train_loss": sum(e["loss"] for e in log[-5:]) / len(log[-5:]),
    }
    if kind.generative:
        # "no answer", or nothing at all: both are scored as the empty answer
        abstained = sum(p in (NO_ANSWER_TEXT, "") for p in predictions)
        result["no_answer_fraction"] = round(abstained / len(predictions), 4)
        result["target"] = target_nll(model, test, task_data["test"], kind.collate)
        result["samples"] = [
            {"target": e.target, "prediction": p} for e, p in zip(task_data["test"][:8], predictions[:8], strict=True)
        ]
    result["seconds"] = round(time.perf_counter() - started, 1)
    return result


def baselines(data) -> dict:
    """What a constant answer scores: SST-2's majority class (of the training sample), SQuAD's "no answer"."""
    sst2 = data["tasks"]["sst2"]
    majority = max((0, 1), key=[e.label for e in sst2["train"]].count)
    squad = data["tasks"]["squad2_gen"]
    constant = squad["kind"].score(squad["test"], [NO_ANSWER_TEXT] * len(squad["test"]))
    return {
        "sst2": sum(e.label == majority for e in sst2["test"]) / len(sst2["test"]),
        "sst2_majority_label": TASKS["sst2"].labels[majority],
        "squad2_gen": constant,
        "squad2_gen_unanswerable_fraction": round(sum(not e.references for e in squad["test"]) / len(squad["test"]), 4),
    }


def summary(name: str, run: dict) -> str:
    held = run["held_out"]
    sst2, squad = run["sst2"], run["squad2_gen"]
    return (
        f"{name}: held-out own {held.get(name, float('nan')):.3f}, fixed ({FIXED}) {held[FIXED]:.3f}; "
        f"SST-2 {sst2['accuracy']:.3f}; SQuAD EM {squad['squad_em']:.1f} F1 {squad['squad_f1']:.1f} "
        f"(no answer {squad['no_answer_fraction']:.2f}), answer ppl {squad['target']['answerable_perplexity']:.1f}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=STEPS, help="pretraining steps of every row")
    parser.add_argument("--quick", action="store_true", help="a trial: 30 steps, a small corpus, short fine-tuning")
    args = parser.parse_args()
    if args.quick:
        args.steps = 30
        for spec in FINETUNE.values():
            spec["steps"] = 30
    begin()
    reproducible(seed=0, threads=1)
    started = time.perf_counter()
    data = prepare(args.quick)
    data["initial"] = initial_model(data)
    base = baselines(data)
    print(f"prepared in {time.perf_counter() - started:.0f} s: {len(data['pieces'])} pieces; baselines {base}",
          flush=True)  # fmt: skip

    runs = {}
    for name in [*ROWS, CONTROL]:
        if name == CONTROL:
            model = copy.deepcopy(data["initial"])
            record = {"settings": None, "initial_checksum": checksum(model)}
        else:
            model, record = pretrain(name, data, args.steps)
        record["held_out"] = reconstruction(model, data)
        for task in FINETUNE:
            record[task] = finetune(model, task, data)
        runs[name] = record
        print(summary(name, record), f"({time.perf_counter() - started:.0f} s so far)", flush=True)

    n = {task: len(data["tasks"][task]["test"]) for task in FINETUNE}
    initial = data["initial"]
    results = {
        "setup": {
            "corpus": f"Gutenberg, first {PARAGRAPHS_PER_BOOK} paragraphs of each of the 17 novels, 5% held out",
            "tokenizer": f"roberta (byte-level BPE), {data['tokenizer'].vocab_size} tokens",
            "model": {"name": "bart", "size": "tiny", **MODEL},
            "parameters": count_parameters(initial),
            "pretraining": {
                **PRETRAIN,
                "warmup_steps": args.steps // 10,
                "steps": args.steps,
                "seq_len": SEQ_LEN,
                "source_len": SOURCE_LEN,
                "pieces": len(data["pieces"]),
                "objective": "denoise",
                "defaults": {k: v for k, v in vars(settings_of("infilling")).items() if k != "noise"},
            },
            "held_out": {name: corruption_stats(held) for name, held in data["held_out"].items()},
            "fixed_corruption": FIXED,
            "finetuning": {
                task: {**FINETUNE[task], "train_examples": len(data["tasks"][task]["train"]), "test_examples": n[task]}
                for task in FINETUNE
            },
            "seconds": round(time.perf_counter() - started),
        },
        "baselines": {
            "constant": base,
            "no_pretraining": CONTROL,
            "standard_error": {
                "sst2": standard_error(n["sst2"]),
                "squad2_gen_em": round(100 * standard_error(n["squad2_gen"]), 2),  # in points, as EM is
            },
        },
        "rows": [*ROWS, CONTROL],
        "labels": LABELS,
        "paper": PAPER,
        "runs": runs,
    }
    print("wrote", save_results("ch07_bart", results))


if __name__ == "__main__":
    main()
