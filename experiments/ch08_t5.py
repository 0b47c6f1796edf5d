"""Chapter 8: T5's objective ablations (Raffel et al. 2020, Tables 4 and 7), multi-task mixing (Table 11) and BART vs
T5 on one generative task, in miniature.

Pretraining rows: one tiny T5 (2 + 2 layers, d_model 128, 4 heads of 32, FFN 512, ReLU, tied head, no dropout; a
SentencePiece Unigram vocabulary of 4,096 with T5's 100 sentinels, the "t5" family) pretrained from the same initial
weights, in the same data order, for the same steps, through the registered ``span_corruption`` objective (prepare,
loss, counts) and minilm's Trainer, with one of the paper's corruptions of 15% of the tokens
(:mod:`minilm.objectives.span_corruption`):

    bert        BERT-style: 90% of the corrupted tokens become <extra_id_0>, 10% a random token; target: the whole text
    iid         replace corrupted spans (i.i.d.): each run of corrupted tokens one sentinel; target: the runs
    drop        drop corrupted tokens: removed from the input; target: them, in order
    spans-2 .. spans-10   span corruption with mean span length 2, 3 (T5's choice), 5, 10
    no pretraining        the control: the initial weights, fine-tuned as they are

Every row reads the same raw texts (cut so that span corruption at 15% / 3 fills 64 input tokens, ``seq_len``): only
the corruption differs, and with it the target's length, which is the decoder's work per example. Columns:

1. Cost: the mean target length (tokens the decoder reads and predicts per example, eos included) and input length,
   the pretraining seconds (wall clock, and the process's CPU time, which one thread makes the compute whatever else
   holds the cores) and target tokens per CPU second, measured in this run. The paper's point for
   Table 7 ("span corruption ... produces shorter sequences on average ... slightly speeds up training").
2. Downstream, text to text (:mod:`minilm.finetune.text_to_text`), every body fine-tuned alike: SST-2 (``sst2
   sentence: ...`` -> ``positive``/``negative``), 3,000 training sentences, accuracy on GLUE's 872-sentence dev set
   (this repo's "test" split); an unparseable answer counts as wrong. Beside it: the majority class, the control and
   the binomial standard error of one run (1.7 points).

Multi-task (T5 §3.5.2, Table 11 in miniature), from the untrained weights (the table's best start at this scale):
SST-2 alone (12,000 training sentences), STS-B alone (all 5,749 pairs; ``stsb sentence1: ... sentence2: ...`` -> the
score to the nearest 0.2; Pearson and Spearman on the 1,379-pair test split, this repo's STS-B dev set), and both
mixed in one run of the same number of steps with examples-proportional (rates 0.68 / 0.32), temperature-scaled
(T = 2: 0.59 / 0.41) and equal mixing: each task's score beside its single-task score.

BART vs T5 on one generative task: a tiny BART of the same width and depth (learned positions, GELU, post-LN, byte-level
BPE of 4,096) pretrained for the same steps with its own objective (text infilling + sentence permutation) on the same
corpus, and the spans-3 T5, both fine-tuned on generative SQuAD 2.0 (``question: ... context: ...`` -> the answer or
"no answer"): EM/F1 and the teacher-forced perplexity of the reference answers. Half the test questions are
unanswerable, so always writing "no answer" scores about 50 EM/F1: models this small sit at that floor, and the
answers' loss per word (the two tokenizers cut words differently) is the comparable column.

One seed per row: differences within about two standard errors are noise.

    nice -n 5 python experiments/ch08_t5.py        # about 25 minutes on a shared 2-core CPU
    MINILM_ALLOW_DIRTY=1 python experiments/ch08_t5.py --quick   # a 2-minute trial of the whole pipeline

Writes experiments/results/ch08_t5.json (read by chapters/08_t5.py).
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
from minilm.finetune.kinds import TaskEncoder  # noqa: E402
from minilm.finetune.mixing import mix, mixing_rates  # noqa: E402
from minilm.finetune.model import Body, FinetuneModel, finetune_loss  # noqa: E402
from minilm.finetune.text_to_text import TextToTextKind  # noqa: E402
from minilm.objectives.labels import IGNORE_INDEX  # noqa: E402
from minilm.tokenizers import train_tokenizer  # noqa: E402
from minilm.train.pretrain import PretrainConfig, split_documents  # noqa: E402
from minilm.train.registry import build_model, get_model, get_objective, model_config, objective_config  # noqa: E402
from minilm.train.trainer import TrainConfig, Trainer  # noqa: E402
from minilm.utils import count_parameters, reproducible  # noqa: E402

PARAGRAPHS_PER_BOOK = 600
VOCAB_SIZE = 4096
SEQ_LEN = 64  # span-corrupted input tokens (eos included) of a pretraining example
SOURCE_LEN = 128  # tokens of a fine-tuning source
MODEL = dict(d_model=128, d_kv=32, n_heads=4, d_ff=512, n_encoder_layers=2, n_decoder_layers=2, dropout=0.0)
BART_MODEL = dict(d_model=128, n_heads=4, d_ff=512, n_encoder_layers=2, n_decoder_layers=2, dropout=0.0)
PRETRAIN = dict(batch_size=16, lr=1e-3, schedule="constant", weight_decay=0.01, beta2=0.98)
STEPS = 600
LOG_EVERY = 10

ROWS = {  # name -> the span_corruption objective's settings
    "bert": {"corruption": "bert"},
    "iid": {"corruption": "iid"},
    "drop": {"corruption": "drop"},
    "spans-2": {"corruption": "spans", "mean_noise_span_length": 2.0},
    "spans-3": {"corruption": "spans", "mean_noise_span_length": 3.0},
    "spans-5": {"corruption": "spans", "mean_noise_span_length": 5.0},
    "spans-10": {"corruption": "spans", "mean_noise_span_length": 10.0},
}
CONTROL = "no pretraining"
LABELS = {
    "bert": "BERT-style",
    "iid": "Replace corrupted spans (i.i.d.)",
    "drop": "Drop corrupted tokens",
    "spans-2": "Span corruption, mean length 2",
    "spans-3": "Span corruption, mean length 3",
    "spans-5": "Span corruption, mean length 5",
    "spans-10": "Span corruption, mean length 10",
    CONTROL: "no pretraining",
}
# The paper's GLUE average (Table 4: BERT-style 82.96; Table 5: replace corrupted spans 83.28, drop corrupted tokens
# 84.44; Table 7: i.i.d. 83.28, span lengths 2/3/5/10: 83.54, 83.49, 83.40, 82.85) and its target-length remark.
PAPER = {
    "bert": 82.96,
    "iid": 83.28,
    "drop": 84.44,
    "spans-2": 83.54,
    "spans-3": 83.49,
    "spans-5": 83.40,
    "spans-10": 82.85,
}
FINETUNE = dict(train_examples=3000, max_length=SOURCE_LEN, steps=500, batch_size=16, lr=1e-3)
MIXINGS = ("proportional", "temperature", "equal")
MULTITASK_EXAMPLES = {"sst2": 12000, "stsb": 0}  # training examples (0: all 5,749): the mixing rates differ
SQUAD = dict(train_examples=0, max_length=SOURCE_LEN, max_target_length=24, steps=500, batch_size=16, lr=1e-3)


def standard_error(n: int, p: float = 0.5) -> float:
    return round(math.sqrt(p * (1 - p) / n), 4)


def settings_of(name: str):
    return objective_config(get_objective("span_corruption", "t5"), ROWS[name])


# ---------------------------------------------------------------------------------------------- data


def prepare(quick: bool) -> dict:
    books = [Document(b.title, b.paragraphs[: 80 if quick else PARAGRAPHS_PER_BOOK]) for b in load_gutenberg()]
    train_docs, val_docs = split_documents(books, 0.05)
    paragraphs = [p for d in train_docs for p in d.paragraphs]
    tokenizer = train_tokenizer(paragraphs, "t5", VOCAB_SIZE)
    job = PretrainConfig(model="t5", objective="span_corruption", seq_len=SEQ_LEN)
    objective = get_objective("span_corruption", "t5")
    texts, _ = objective.prepare(train_docs, tokenizer, job, settings_of("spans-3"))  # the same texts for every row
    data = {"objective": objective, "tokenizer": tokenizer, "job": job, "texts": texts, "tasks": {}}
    data["bart_tokenizer"] = train_tokenizer(paragraphs, "roberta", VOCAB_SIZE)
    data["train_docs"] = train_docs
    n_train = 300 if quick else FINETUNE["train_examples"]
    for task in ("sst2", "stsb", "squad2_gen"):
        train = load_task(task, "train")
        test = load_task(task, "test")[: 100 if quick else None]
        data["tasks"][task] = {"train": sample(train, 0 if task == "squad2_gen" else n_train, 0), "test": test}
    data["multitask"] = {  # the same test sets, larger training sets of different sizes
        task: {"train": sample(load_task(task, "train"), 300 if quick else n, 0), "test": data["tasks"][task]["test"]}
        for task, n in MULTITASK_EXAMPLES.items()
    }
    return data


def initial_model(entry_name: str, vocab_size: int, overrides: dict, seed: int = 0):
    entry = get_model(entry_name)
    config = model_config(entry, "tiny", vocab_size, overrides)
    torch.manual_seed(seed)
    return build_model(entry, config, None)


def checksum(model) -> float:
    return round(sum(float(p.detach().double().abs().sum()) for p in model.parameters()), 6)


# ---------------------------------------------------------------------------------------------- pretraining


def pretrain(model, objective, texts, collate, steps: int) -> dict:
    config = TrainConfig(
        **PRETRAIN, max_steps=steps, warmup_steps=steps // 10, eval_every=0, eval_batches=0, save_every=0,
        log_every=LOG_EVERY, progress=False,
    )  # fmt: skip
    torch.manual_seed(2)  # the corruption stream (the data order is the Trainer's, seeded alike)
    trainer = Trainer(model, objective.loss, texts, config, collate=collate, counts=objective.counts,
                      perplexity=objective.perplexity)  # fmt: skip
    started, cpu_started = time.perf_counter(), time.process_time()
    trainer.fit()
    seconds, cpu_seconds = time.perf_counter() - started, time.process_time() - cpu_started
    log = [e for e in trainer.history if e["split"] == "train"]
    return {
        "train_curve": {"step": [e["step"] for e in log], "loss": [round(e["loss"], 4) for e in log]},
        "first_train_loss": log[0]["loss"],
        "last_train_loss": sum(e["loss"] for e in log[-5:]) / len(log[-5:]),
        "pretrain_seconds": round(seconds, 1),
        "pretrain_cpu_seconds": round(cpu_seconds, 1),  # one thread: the compute, whatever else holds the cores
    }


def lengths(name: str, data) -> dict:
    """Mean input and target lengths of the row's corruption over 512 of the texts (eos included)."""
    _, collate = data["objective"].prepare(data["train_docs"][:1], data["tokenizer"], data["job"], settings_of(name))
    torch.manual_seed(5)
    texts = data["texts"][:512]
    batch = collate(texts)
    target = float((batch["labels"] != IGNORE_INDEX).sum()) / len(texts)
    return {
        "raw": len(texts[0]["input_ids"]),
        "input": round(float(batch["attention_mask"].sum()) / len(texts), 2),
        "target": round(target, 2),
    }


# ---------------------------------------------------------------------------------------------- fine-tuning


def _trainer(model, train, kind, spec) -> Trainer:
    config = TrainConfig(
        batch_size=spec["batch_size"], lr=spec["lr"], max_steps=spec["steps"], warmup_steps=spec["steps"] // 10,
        schedule="linear", weight_decay=0.01, eval_every=0, eval_batches=0, save_every=0, log_every=LOG_EVERY,
        progress=False,
    )  # fmt: skip
    torch.manual_seed(4)
    return Trainer(model, finetune_loss, train, config, collate=kind.collate, counts=model.counts)


def finetune(pretrained, tokenizer, entry_name: str, tasks: list[str], data, spec=FINETUNE, mixing=None) -> dict:
    """Fine-tune a copy of ``pretrained`` text to text on ``tasks`` (mixed with ``mixing`` when several), score each
    task's test split with its own metric. ``data``: {"tasks": {task: {"train", "test"}}}."""
    model = copy.deepcopy(pretrained)
    body = Body(model, model.config, get_model(entry_name), tokenizer)
    encoder = TaskEncoder(tokenizer, spec["max_length"], "last", max_target_length=spec.get("max_target_length", 8))
    kinds = {task: TextToTextKind(TASKS[task]) for task in tasks}
    encoded = {task: kinds[task].encode_examples(data["tasks"][task]["train"], encoder) for task in tasks}
    record = {}
    if len(tasks) > 1:
        rates = mixing_rates([len(encoded[t]) for t in tasks], mixing)
        train = mix([encoded[t] for t in tasks], rates, spec["steps"] * spec["batch_size"], seed=0)
        record["rates"] = dict(zip(tasks, (round(r, 4) for r in rates), strict=True))
    else:
        train = encoded[tasks[0]]
    kind = kinds[tasks[0]]  # every text-to-text kind collates alike
    tuned = FinetuneModel(body, None, kind)
    trainer = _trainer(tuned, train, kind, spec)
    started = time.perf_counter()
    trainer.fit()
    generation = dict(max_new_tokens=spec.get("max_target_length", 8), num_beams=1)
    for task in tasks:
        test = data["tasks"][task]["test"]
        predictions = predict(tuned, kinds[task].encode_examples(test, encoder), 64, trainer.device, trainer.dtype,
                              generation, kind=kinds[task])  # fmt: skip
        scores = kinds[task].score(test, predictions)
        scores["unparseable_fraction"] = round(sum(unparseable(task, p) for p in predictions) / len(predictions), 4)
        if task == "squad2_gen":
            scores["no_answer_fraction"] = round(sum(p in (NO_ANSWER_TEXT, "") for p in predictions) / len(test), 4)
            scores["target"] = target_nll(model, kinds[task].encode_examples(test, encoder), test, kind.collate)
        scores["samples"] = [p for p in predictions[:6]]
        record[task] = scores
    log = [e for e in trainer.history if e["split"] == "train"]
    record["last_train_loss"] = sum(e["loss"] for e in log[-5:]) / len(log[-5:])
    record["seconds"] = round(time.perf_counter() - started, 1)
    return record


def unparseable(task: str, prediction: str) -> bool:
    if task == "sst2":
        return prediction not in TASKS["sst2"].labels
    if task == "stsb":
        try:
            float(prediction)
        except ValueError:
            return True
    return False


@torch.no_grad()
def target_nll(model, encoded, examples, collate) -> dict:
    """Teacher-forced loss of the reference answers of the answerable questions: per token of the model's own
    vocabulary, and per word (comparable across tokenizers: BART's BPE and T5's Unigram cut words differently)."""
    model.eval()
    total, count = 0.0, 0
    words = sum(len(e.target.split()) for e in examples if e.references)
    for start in range(0, len(encoded), 64):
        batch = collate(encoded[start : start + 64])
        labels = batch["labels"]
        logits = model(batch["input_ids"], batch["attention_mask"], model.shift_right(labels))
        nll = F.cross_entropy(logits.transpose(1, 2), labels, ignore_index=IGNORE_INDEX, reduction="none")
        for row, example in enumerate(examples[start : start + 64]):
            if example.references:
                scored = labels[row] != IGNORE_INDEX
                total += float(nll[row][scored].sum())
                count += int(scored.sum())
    return {
        "answer_loss": round(total / count, 4),
        "answer_perplexity": round(math.exp(total / count), 3),
        "answer_loss_per_word": round(total / words, 4),
        "answer_tokens": count,
        "answer_words": words,
    }


def baselines(data) -> dict:
    sst2 = data["tasks"]["sst2"]
    majority = max((0, 1), key=[e.label for e in sst2["train"]].count)
    squad = data["tasks"]["squad2_gen"]
    kind = TextToTextKind(TASKS["squad2_gen"])
    return {
        "sst2": round(sum(e.label == majority for e in sst2["test"]) / len(sst2["test"]), 4),
        "sst2_majority_label": TASKS["sst2"].labels[majority],
        "squad2_gen": kind.score(squad["test"], [NO_ANSWER_TEXT] * len(squad["test"])),
        "standard_error": {"sst2": standard_error(len(sst2["test"]))},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=STEPS, help="pretraining steps of every row")
    parser.add_argument("--quick", action="store_true", help="a trial: 20 steps, a small corpus, short fine-tuning")
    args = parser.parse_args()
    if args.quick:
        args.steps = 20
        FINETUNE["steps"] = SQUAD["steps"] = 20
    begin()
    reproducible(seed=0, threads=1)
    started = time.perf_counter()
    data = prepare(args.quick)
    tokenizer = data["tokenizer"]
    initial = initial_model("t5", tokenizer.vocab_size, MODEL)
    base = baselines(data)
    print(
        f"prepared in {time.perf_counter() - started:.0f} s, {len(data['texts'])} texts; baselines {base}", flush=True
    )

    runs, bodies = {}, {}
    for name in [*ROWS, CONTROL]:
        model = copy.deepcopy(initial)
        record = {"initial_checksum": checksum(model)}
        if name != CONTROL:
            _, collate = data["objective"].prepare(data["train_docs"][:1], tokenizer, data["job"], settings_of(name))
            record.update(pretrain(model, data["objective"], data["texts"], collate, args.steps))
            record["lengths"] = lengths(name, data)
            record["target_tokens_per_cpu_second"] = round(
                args.steps * PRETRAIN["batch_size"] * record["lengths"]["target"] / record["pretrain_cpu_seconds"], 1
            )
        record["sst2"] = finetune(model, tokenizer, "t5", ["sst2"], data)["sst2"]
        runs[name] = record
        bodies[name] = model
        print(f"{name}: sst2 {record['sst2']['accuracy']:.3f} ({time.perf_counter() - started:.0f} s so far)",
              flush=True)  # fmt: skip

    # multi-task from the untrained weights (at this scale the pretrained rows transfer nothing: the table above)
    multi_data = {"tasks": data["multitask"]}
    multitask = {task: finetune(bodies[CONTROL], tokenizer, "t5", [task], multi_data) for task in MULTITASK_EXAMPLES}
    for mixing in MIXINGS:
        multitask[mixing] = finetune(bodies[CONTROL], tokenizer, "t5", ["sst2", "stsb"], multi_data, mixing=mixing)
        print(f"multi-task {mixing}: {multitask[mixing]['rates']}, sst2 {multitask[mixing]['sst2']['accuracy']:.3f},"
              f" stsb {multitask[mixing]['stsb']['pearson']:.3f}", flush=True)  # fmt: skip

    bart_tokenizer = data["bart_tokenizer"]
    bart = initial_model("bart", bart_tokenizer.vocab_size, {**BART_MODEL, "max_len": SOURCE_LEN})
    denoise = get_objective("denoise", "bart")
    bart_job = PretrainConfig(model="bart", objective="denoise", seq_len=SEQ_LEN)
    bart_settings = objective_config(denoise, {})
    pieces, collate = denoise.prepare(data["train_docs"], bart_tokenizer, bart_job, bart_settings)
    bart_record = pretrain(bart, denoise, pieces, collate, args.steps)
    versus = {
        "t5": finetune(bodies["spans-3"], tokenizer, "t5", ["squad2_gen"], data, SQUAD),
        "bart": {**bart_record, **finetune(bart, bart_tokenizer, "bart", ["squad2_gen"], data, SQUAD)},
    }
    versus["bart"]["parameters"] = count_parameters(bart)
    print(f"BART vs T5 on generative SQuAD: answer perplexity {versus['bart']['squad2_gen']['target']} vs "
          f"{versus['t5']['squad2_gen']['target']}", flush=True)  # fmt: skip

    results = {
        "setup": {
            "corpus": f"Gutenberg, first {PARAGRAPHS_PER_BOOK} paragraphs of each of the 17 novels, 5% held out",
            "tokenizer": f"t5 (SentencePiece Unigram with 100 sentinels), {tokenizer.vocab_size} tokens",
            "model": {"name": "t5", "size": "tiny", **MODEL},
            "parameters": count_parameters(initial),
            "pretraining": {
                **PRETRAIN,
                "warmup_steps": args.steps // 10,
                "steps": args.steps,
                "seq_len": SEQ_LEN,
                "texts": len(data["texts"]),
                "objective": "span_corruption",
            },  # fmt: skip
            "finetuning": {**FINETUNE, "test_examples": {t: len(d["test"]) for t, d in data["tasks"].items()}},
            "multitask": {
                "body": CONTROL,
                "train_examples": {t: len(d["train"]) for t, d in multi_data["tasks"].items()},
            },
            "squad": SQUAD,
            "bart_model": BART_MODEL,
            "seconds": round(time.perf_counter() - started),
        },
        "baselines": base,
        "rows": [*ROWS, CONTROL],
        "labels": LABELS,
        "paper_glue": PAPER,
        "runs": runs,
        "multitask": multitask,
        "bart_vs_t5": versus,
    }
    print("wrote", save_results("ch08_t5", results))


if __name__ == "__main__":
    main()
