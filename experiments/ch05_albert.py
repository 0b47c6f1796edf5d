"""Chapter 5: miniatures of ALBERT's Tables 3, 4 and 5 and of its Figure 1 (Lan et al. 2020), past the plateau.

    Table 3   embedding size E (64 = H / 2, 128 = H), all-shared vs not-shared: parameters and quality
    Table 4   cross-layer sharing: all-shared / shared-attention / shared-FFN / not-shared, at E = 64
    Table 5   sentence-level loss: none / NSP / SOP, each model scored on both NSP and SOP
    Figure 1  L2 distance and angle between each layer's input and output, not-shared (BERT) vs all-shared (ALBERT)

Every run pretrains a tiny ALBERT with the recipe that leaves the unigram plateau on this CPU
(``experiments/plateau.py`` measured it; the course ALBERT of ``experiments/course_checkpoints.py`` is its all-shared
E = 64 row): 4 layers of H = 128 with 2 heads and an FFN of 512, 32-token inputs, batch 64, lr 1e-3 after 150 warm-up
steps with a cosine decay, BERT's Adam (beta2 0.999, weight decay 0.01), 4,000 steps, from the same initial seed, on
all 17 Gutenberg novels (the last 5% of each book's paragraphs held out), with ALBERT's losses from
:mod:`minilm.recipes` (MLM + SOP). Rows differ only in what their table varies; the all-shared E = 64 run serves as
the SOP row of Table 5 and as ALBERT in Figure 1, its not-shared twin as BERT.

Two departures from the paper, both measured. The masking is BERT's (single tokens), not ALBERT's n-grams of whole
words: with n-grams the course ALBERT was still only 0.5 nats below the plateau after 4,000 steps. And the inputs
are pairs of consecutive sentences (SOP: swapped half the time; NSP: the second one from another novel half the
time), not ALBERT's segment pairs, whose cutting leaves SOP a shortcut (the position of the first [SEP]; Chapter 5
measures it). A one-sentence chunk cannot be swapped, so it gets a random B from another document labelled 1, as in
ALBERT's data script. Each model is scored by

- its MLM loss per masked token on one shared held-out set (held-out SOP pairs, masked once with a fixed seed),
  beside the unigram entropy of those very tokens (``unigram_entropy``: the loss of a model that knows word
  frequencies and nothing else); a row at least 1 nat below it is past the plateau. The Trainer's evaluations every
  1,000 steps keep its curve;
- SST-2 accuracy of a linear probe on its frozen mean-pooled final hidden states (2,000 training sentences, the
  872 of GLUE's dev set, each cut to the 32 tokens the model was pretrained on): a cheap stand-in for fine-tuning;
- (Table 5) NSP and SOP accuracy on held-out pairs, as many of each label (chance = 0.5): the model's own pretrained
  head for the task it was trained on (the paper's intrinsic accuracy), and otherwise a linear probe trained on the
  frozen [CLS] final hidden state of 2,000 training pairs (the probe is reported for every cell too);
- (Figure 1) the per-layer transitions on the held-out pairs.

One seed per row (the eight runs take an hour); the record keeps binomial standard errors as the noise floor of one
run. Runs go two at a time, one thread each (``--workers``).

    nice -n 5 python experiments/ch05_albert.py        # 64 minutes on a 2-core CPU (the recorded run)

Writes experiments/results/ch05_albert.json (read by chapters/05_albert.py).
"""

from __future__ import annotations

import argparse
import math
import multiprocessing
import random
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from experiments.common import batches, begin, held_out_loss, save_results, scored_when_evaluated  # noqa: E402
from minilm.analysis import layer_transitions, linear_probe, oscillation, standardize  # noqa: E402
from minilm.analysis.plateau import scored_targets, unigram_entropy  # noqa: E402
from minilm.data import load_gutenberg, load_task  # noqa: E402
from minilm.models.albert import Albert, albert_config  # noqa: E402
from minilm.objectives.nsp import LABEL_KEY as NSP_LABEL  # noqa: E402
from minilm.objectives.sop import LABEL_KEY as SOP_LABEL  # noqa: E402
from minilm.recipes.albert import SentenceOrderConfig, albert_mlm_sop_loss  # noqa: E402
from minilm.recipes.bert import MaskedLMPairConfig, bert_mlm_loss, bert_mlm_nsp_loss, masked_lm_examples  # noqa: E402
from minilm.tokenizers import train_tokenizer  # noqa: E402
from minilm.train.pretrain import PretrainConfig, split_documents  # noqa: E402
from minilm.train.trainer import TrainConfig, Trainer  # noqa: E402
from minilm.utils import count_parameters, reproducible  # noqa: E402

VOCAB_SIZE = 8000
SEQ_LEN = 32
MODEL = dict(n_layers=4, d_model=128, n_heads=2, d_ff=512, max_len=SEQ_LEN)  # H = 128; E per row
TRAIN = dict(batch_size=64, lr=1e-3, warmup_steps=150, beta2=0.999, weight_decay=0.01)  # BERT's Adam
STEPS = 4000
EVALUATIONS = 4  # the Trainer's held-out evaluations per run: the curve
ALBERT_E = 64  # H / 2: Table 4's E, Table 5's model, the course ALBERT's
PROBE_EXAMPLES = 2000  # training examples of every linear probe (SST-2, NSP, SOP)
MASKING = dict(whole_word=False, ngram=1)  # BERT's single tokens: n-grams stay on the plateau longer (docstring)

# (table, row, sharing, E, sentence loss): every pretraining run; run names are f"{sharing} E={E} {loss}"
RUNS = [
    *(("table3", f"{sharing} E={e}", sharing, e, "sop") for sharing in ("all", "none") for e in (ALBERT_E, 128)),
    ("table4", "attention", "attention", ALBERT_E, "sop"),
    ("table4", "ffn", "ffn", ALBERT_E, "sop"),
    ("table5", "none", "all", ALBERT_E, "none"),
    ("table5", "nsp", "all", ALBERT_E, "nsp"),
]
LOSSES = {"none": bert_mlm_loss, "nsp": bert_mlm_nsp_loss, "sop": albert_mlm_sop_loss}
PLATEAU_MARGIN = 1.0  # nats below the unigram entropy that the course calls past the plateau

DATA: dict = {}  # prepare()'s data, set before the worker processes fork


def run_name(sharing: str, e: int, loss: str) -> str:
    return f"{sharing} E={e} {loss}"


def balanced(examples, label_key: str, n: int | None = None) -> list:
    """As many examples of each label (n // 2 at most), drawn at random from every document: chance is exactly 0.5."""
    by_label = [[e for e in examples if int(e[label_key]) == label] for label in (0, 1)]
    k = min(len(by_label[0]), len(by_label[1]), n // 2 if n else len(examples))
    rng = random.Random(0)
    return [e for group in by_label for e in rng.sample(group, k)]


def final_hidden(model, batch):
    return model.features(batch["input_ids"], batch["attention_mask"], batch["token_type_ids"]).last_hidden_state


@torch.no_grad()
def held_out_scores(model, examples, collate) -> dict:
    """The MLM loss per masked token on the shared held-out set, and each layer's transitions on its first 256 pairs."""
    loss = held_out_loss(model, bert_mlm_loss, examples, collate)
    first = collate([examples[i] for i in range(min(256, len(examples)))])
    states = model.features(first["input_ids"], first["attention_mask"], first["token_type_ids"], True)
    l2, degrees = layer_transitions(states.hidden_states, first["attention_mask"])
    return {
        "held_out_loss": loss,
        "transitions": {
            "l2": [round(v, 4) for v in l2.tolist()],
            "degrees": [round(v, 3) for v in degrees.tolist()],
            "l2_oscillation": round(oscillation(l2), 4),
            "degrees_oscillation": round(oscillation(degrees), 4),
        },
    }


@torch.no_grad()
def sst2_features(model, tokenizer, examples) -> torch.Tensor:
    """Mean-pooled final hidden states (N, H) of SST-2 sentences, over their real tokens."""
    model.eval()
    pooled = []
    for start in range(0, len(examples), 128):
        batch = tokenizer([e.text for e in examples[start : start + 128]], max_length=SEQ_LEN, return_tensors="pt")
        hidden = model.features(batch.input_ids, batch.attention_mask).last_hidden_state  # (B, T, H)
        weights = batch.attention_mask[..., None].float()  # (B, T, 1)
        pooled.append((hidden * weights).sum(1) / weights.sum(1))  # (B, H)
    return torch.cat(pooled)


def sst2_probe(model, tokenizer, sst2) -> float:
    """Accuracy on SST-2's labelled test split (GLUE dev) of a linear probe on frozen mean-pooled final states."""
    features = {split: sst2_features(model, tokenizer, examples) for split, examples in sst2.items()}
    labels = {split: torch.tensor([e.label for e in examples]) for split, examples in sst2.items()}
    train, test = standardize([features["train"]], [features["test"]])
    return linear_probe(train, labels["train"], test, labels["test"], 2, epochs=20).accuracy


@torch.no_grad()
def pair_features(model, examples, collate, label_key: str, task: str, own_head: bool):
    """[CLS] final hidden states (N, H), labels (N,) and, with ``own_head``, the pretrained head's right answers."""
    model.eval()
    rows, labels, right = [], [], 0
    for batch in batches(examples, collate):
        hidden = final_hidden(model, batch)  # (B, T, H)
        rows.append(hidden[:, 0])  # (B, H): [CLS]
        labels.append(batch[label_key])
        if own_head:
            logits = model.nsp_logits(hidden) if task == "nsp" else model.sop_logits(hidden)  # (B, 2)
            right += int((logits.argmax(-1) == batch[label_key]).sum())
    return torch.cat(rows), torch.cat(labels), right


def pair_task_scores(model, loss: str, pair_data: dict) -> dict:
    """NSP and SOP accuracy on held-out pairs: the model's own head (on the task it was pretrained for) and a linear
    probe on the frozen [CLS] final hidden state, trained on PROBE_EXAMPLES training pairs. The inputs are masked as
    in pretraining (the training pairs anew, the held-out ones once), as a pretraining run's evaluation sees them."""
    scores = {}
    for task, (label_key, train, train_collate, test, test_collate) in pair_data.items():
        train_x, train_y, _ = pair_features(model, train, train_collate, label_key, task, own_head=False)
        test_x, test_y, right = pair_features(model, test, test_collate, label_key, task, own_head=loss == task)
        train_x, test_x = standardize([train_x], [test_x])
        probe = linear_probe(train_x, train_y, test_x, test_y, 2, epochs=20).accuracy
        head = right / len(test) if loss == task else None
        scores[task] = {
            "accuracy": probe if head is None else head,
            "by": "probe" if head is None else "head",
            "probe_accuracy": probe,
            "n_test": len(test),
        }
    return scores


def pretrain(sharing: str, e: int, loss: str, data: dict, steps: int) -> tuple[Albert, dict]:
    heads = {"none": {}, "nsp": {"nsp": True, "sop": False}, "sop": {}}[loss]
    config = albert_config("tiny", **MODEL, vocab_size=data["vocab_size"], embedding_size=e, share=sharing, **heads)
    examples, collate = data["nsp" if loss == "nsp" else "sop"]
    train = TrainConfig(
        **TRAIN, max_steps=steps, eval_every=steps // EVALUATIONS, eval_batches=0, save_every=0, progress=False
    )
    torch.manual_seed(train.seed)  # the same initial weights wherever the shapes agree
    model = Albert(config)
    held_out, held_out_collate = data["held_out"]
    trainer = Trainer(
        model,
        scored_when_evaluated(LOSSES[loss], bert_mlm_loss),
        examples,
        train,
        eval_data=held_out,
        collate=collate,
        eval_collate=held_out_collate,
    )
    start = time.perf_counter()
    trainer.fit()
    train_losses = [entry["loss"] for entry in trainer.history if entry["split"] == "train"]
    curve = [
        {"step": entry["step"], "mlm": round(entry["loss"], 4)}
        for entry in trainer.history
        if entry["split"] == "validation"
    ]
    return model, {
        "sharing": sharing,
        "embedding_size": e,
        "sentence_loss": loss,
        "parameters": count_parameters(model),
        "encoder_parameters": count_parameters(model.encoder),
        "embedding_parameters": count_parameters(model.embedding),
        "first_train_loss": train_losses[0],
        "last_train_loss": sum(train_losses[-5:]) / len(train_losses[-5:]),
        "held_out_curve": curve,
        "pretrain_seconds": round(time.perf_counter() - start, 1),
    }


def prepare() -> dict:
    train_docs, val_docs = split_documents(load_gutenberg(), 0.05)
    tokenizer = train_tokenizer([p for d in train_docs for p in d.paragraphs], "albert", VOCAB_SIZE)
    job = PretrainConfig(model="albert", objective="mlm+sop", seq_len=SEQ_LEN)
    # single-token masking for both pair objectives; sentence pairs, not ALBERT's segment pairs (see the docstring)
    sop = SentenceOrderConfig(format="sentence_pair", **MASKING)
    nsp = MaskedLMPairConfig(format="sentence_pair", **MASKING)
    held_out = masked_lm_examples(val_docs, tokenizer, job, sop, validation=True)  # masked once, fixed seed
    nsp_held_out = masked_lm_examples(val_docs, tokenizer, job, nsp, validation=True)
    data = {
        "tokenizer": tokenizer,
        "vocab_size": tokenizer.vocab_size,
        "sop": masked_lm_examples(train_docs, tokenizer, job, sop),
        "nsp": masked_lm_examples(train_docs, tokenizer, job, nsp),
        "held_out": held_out,
        # the plateau: the loss, on the held-out masked tokens, of a model that knows their frequencies only
        "unigram_entropy": unigram_entropy([scored_targets(b) for b in batches(*held_out)]),
    }
    # pair tasks: a probe trains on PROBE_EXAMPLES training pairs, and everything is tested on the held-out pairs,
    # both with as many pairs of each label
    data["pairs"] = {
        task: (key, balanced(data[task][0], key, PROBE_EXAMPLES), data[task][1], balanced(test[0], key), test[1])
        for task, key, test in (("nsp", NSP_LABEL, nsp_held_out), ("sop", SOP_LABEL, held_out))
    }
    data["sst2"] = {"train": load_task("sst2", "train")[:PROBE_EXAMPLES], "test": load_task("sst2", "test")}
    return data


def run(spec: tuple, steps: int) -> tuple[str, dict]:
    """One row: pretrain, then score (in a worker process, on one thread)."""
    table, row, sharing, e, loss = spec
    torch.set_num_threads(1)
    model, result = pretrain(sharing, e, loss, DATA, steps)
    result.update(held_out_scores(model, *DATA["held_out"]))
    result["unigram_entropy"] = DATA["unigram_entropy"]
    result["nats_below_unigram"] = result["unigram_entropy"] - result["held_out_loss"]
    result["past_plateau"] = result["nats_below_unigram"] >= PLATEAU_MARGIN
    result["sst2_probe_accuracy"] = sst2_probe(model, DATA["tokenizer"], DATA["sst2"])
    if table == "table5" or (sharing, e, loss) == ("all", ALBERT_E, "sop"):
        result["pair_tasks"] = pair_task_scores(model, loss, DATA["pairs"])
    print(row, {k: round(v, 3) if isinstance(v, float) else v for k, v in result.items() if k != "held_out_curve"},
          flush=True)  # fmt: skip
    return run_name(sharing, e, loss), result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=STEPS, help="pretraining steps per run")
    parser.add_argument("--workers", type=int, default=2, help="runs at a time, one thread each")
    args = parser.parse_args()
    begin()
    reproducible(seed=0, threads=1)
    started = time.perf_counter()
    DATA.update(prepare())
    print(f"prepared in {time.perf_counter() - started:.0f} s: {len(DATA['sop'][0])} SOP pairs, "
          f"{len(DATA['nsp'][0])} NSP pairs, {len(DATA['held_out'][0])} held-out pairs, "
          f"unigram entropy {DATA['unigram_entropy']:.3f} nats", flush=True)  # fmt: skip

    with multiprocessing.get_context("fork").Pool(args.workers) as pool:
        runs = dict(pool.starmap(run, [(spec, args.steps) for spec in RUNS], chunksize=1))

    n_sst2 = len(DATA["sst2"]["test"])
    n_pairs = min(len(test) for _, _, _, test, _ in DATA["pairs"].values())
    results = {
        "setup": {
            "corpus": "Gutenberg, all 17 novels, the last 5% of each book's paragraphs held out",
            "tokenizer": f"albert (Unigram), {DATA['vocab_size']} tokens",
            "model": {"name": "albert", **MODEL, "embedding_size": "per row"},
            "pretraining": {
                **TRAIN,
                "steps": args.steps,
                "schedule": "cosine",
                "format": "sentence_pair",
                "masking": "single tokens (BERT's)",
            },
            "albert_embedding_size": ALBERT_E,
            "held_out_pairs": len(DATA["held_out"][0]),
            "unigram_entropy": DATA["unigram_entropy"],
            "plateau_margin": PLATEAU_MARGIN,
            "pair_test_examples": {task: len(pairs[3]) for task, pairs in DATA["pairs"].items()},
            "probe_examples": PROBE_EXAMPLES,
            "sst2_test_examples": n_sst2,
            # binomial standard error of an accuracy near 0.5: the noise floor of one run
            "accuracy_standard_error": {
                "sst2": round(math.sqrt(0.25 / n_sst2), 3),
                "pairs": round(math.sqrt(0.25 / n_pairs), 3),
            },
            "seconds": round(time.perf_counter() - started),
        },
        "tables": {
            "table3": [run_name(s, e, loss) for t, _, s, e, loss in RUNS if t == "table3"],
            "table4": [run_name(s, ALBERT_E, "sop") for s in ("all", "attention", "ffn", "none")],
            "table5": [run_name("all", ALBERT_E, loss) for loss in ("none", "nsp", "sop")],
            "figure1": {
                "BERT (not-shared)": run_name("none", ALBERT_E, "sop"),
                "ALBERT (all-shared)": run_name("all", ALBERT_E, "sop"),
            },
        },
        "runs": runs,
    }
    print("wrote", save_results("ch05_albert", results))


if __name__ == "__main__":
    main()
