"""Chapter 6: miniatures of ELECTRA's key results (Clark et al. 2020).

    efficiency  ELECTRA (replaced-token detection, ``rtd``) vs BERT (``mlm``) on the same encoder, scored at
                checkpoints along pretraining: learning curves over steps and over pretraining FLOPs (Figures 1, 3)
    generator   the generator's size, 1/8, 1/4, 1/2, 1 of the discriminator's, embeddings shared (Figure 3, left)
    sharing     weight sharing between a same-size generator and discriminator: none / embeddings / all (§3.2)
    table5      ELECTRA / ELECTRA 15% (``rtd_15``) / Replace MLM / All-Tokens MLM / BERT (``mlm``) (§3.3, Table 5)

Every run pretrains one tiny ELECTRA-shaped encoder (4 layers, H = E = 128, 4 heads, FFN 512, no dropout; a
WordPiece vocabulary of 4,096) from the same initial weights on the Gutenberg novels (the first 1,000 paragraphs of
each of the 17, the last 5% of each held out) in sequences of 64 tokens (full sentences), through minilm's Trainer
and the registered objectives (``get_objective(name)``: prepare, wrap, loss, counts, unwrap), with the same batch
(32), learning rate and number of steps. The learning rate is constant after a linear warm-up, so the checkpoint at
step s of a longer run *is* an s-step run: ELECTRA's and BERT's runs go on past the tables' step count for the
efficiency curves, and their checkpoint at that step is their row in the tables. Rows differ only in what their
table varies: ELECTRA's default (generator 1/4, embeddings shared) is the 1/4 row of the generator sweep and
ELECTRA's row of Table 5; the size-1 embeddings-shared run is in both the sweep and the sharing table; BERT is the
``mlm`` run. ELECTRA's masking is the library's: 15% of the tokens, shown as [MASK] 85% of the time and left as
they are otherwise, all replaced by the generator's samples; BERT's is 80/10/10.

The discriminator (the body that fine-tuning would read, ``objective.body``) is scored after pretraining, and for
the efficiency runs at steps 0, 100, 200, 300, 400, 600 and 800, without fine-tuning, by linear probes on its frozen
states (Adam, 20 epochs, standardized features; :func:`minilm.analysis.linear_probe`), each on the final layer (what
fine-tuning reads) and on a learned ScalarMix of all layers, embeddings included (what the encoder holds anywhere):

- SST-2 (sentence sentiment): mean-pooled states of 2,000 training sentences, tested on GLUE's 872-sentence dev set;
- UD English-EWT parts of speech (17 tags): the state of each word's first sub-word, the 1,854 training sentences
  (23k words) and the 2,077 test sentences (25k words; words cut off at 64 tokens are left out, on every run alike).

A trial at lr 2e-3 (the rate of Chapters 3 and 5) collapsed both ELECTRA's discriminator and BERT by step 400 (every
position the same final state: probes at the majority class, detection AUC 0.5); 1e-3 and 5e-4 did not, and 1e-3 got
further in 400 steps.

Beside every score the record keeps the majority-class baseline and the untrained encoder (the same initial weights
at step 0, probed alike); a binomial standard error gives each probe's noise floor. The discriminator's replaced-token
detection is measured on held-out text corrupted two ways: by its own generator (what it was trained on; fixed
masks and samples) and by one fixed corruption shared by every run (15% of the tokens replaced by draws from the
training unigram distribution), with the ROC AUC of its "replaced" logit, its accuracy and its precision and recall
on replaced tokens at p = 0.5. Replace MLM's model has no detection head; All-Tokens MLM's copy head is one (its
logit of "not copied").

Pretraining FLOPs are counted per step from the parameter counts, forward and backward (3x the forward pass, a
multiply-add = 2 FLOPs): 6 N per token position of each encoder (N: its weights outside the embedding tables, the E
-> H projection and the per-token heads included), plus attention's 12 L T d (QK^T and AV, forward and backward) per
position, plus the vocabulary projection 6 (H E + E V) at each position where logits are computed (the masked 15% for
BERT and a generator, every position for All-Tokens MLM). ELECTRA's step includes its generator's forward and backward.
Positions are the padded B x T the model computes; embedding look-ups, the optimizer, the sampling and the losses are
left out (each well under 1%).

    nice -n 5 python experiments/ch06_electra.py        # about 35 minutes on a shared 2-core CPU (the recorded run)
    MINILM_ALLOW_DIRTY=1 python experiments/ch06_electra.py --quick     # a 3-minute trial of the whole pipeline

Writes experiments/results/ch06_electra.json (read by chapters/06_electra.py).
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from experiments.common import batches, begin, save_results  # noqa: E402
from minilm.analysis import linear_probe, standardize  # noqa: E402
from minilm.data import Document, load_gutenberg, load_task  # noqa: E402
from minilm.data.tasks import TASKS  # noqa: E402
from minilm.finetune.kinds import word_ids_from_offsets  # noqa: E402
from minilm.objectives.labels import IGNORE_INDEX  # noqa: E402
from minilm.recipes.electra import discriminator_hidden, generate  # noqa: E402
from minilm.tokenizers import train_tokenizer  # noqa: E402
from minilm.train.pretrain import PretrainConfig, split_documents  # noqa: E402
from minilm.train.registry import (  # noqa: E402
    build_model,
    get_model,
    get_objective,
    model_config,
    needed_settings,
    objective_config,
)
from minilm.train.trainer import TrainConfig, Trainer, default_collate  # noqa: E402
from minilm.utils import count_parameters, reproducible  # noqa: E402

PARAGRAPHS_PER_BOOK = 1000
VOCAB_SIZE = 4096
SEQ_LEN = 64
MODEL = dict(
    n_layers=4,
    d_model=128,
    n_heads=4,
    d_ff=512,
    embedding_size=128,
    max_len=SEQ_LEN,
    dropout=0.0,
    attention_dropout=0.0,
)
TRAIN = dict(batch_size=32, lr=1e-3, schedule="constant", weight_decay=0.01, beta2=0.999)
STEPS = 400  # pretraining steps of every table's runs
CURVE_STEPS = 800  # the efficiency runs (ELECTRA, BERT) go on to here
SST2_TRAIN = 2000  # training sentences of the SST-2 probe
LOG_EVERY = 10
ELECTRA = ("rtd", 0.25, "embeddings")  # the paper's default: generator 1/4 of the discriminator, embeddings tied
BERT = ("mlm", None, None)

# every pretraining run (objective, generator size, sharing), in the order they run
RUNS = [
    ELECTRA,
    BERT,
    ("rtd", 0.125, "embeddings"),
    ("rtd", 0.5, "embeddings"),
    ("rtd", 1.0, "embeddings"),
    ("rtd", 1.0, "none"),
    ("rtd", 1.0, "all"),
    ("rtd_15", 0.25, "embeddings"),
    ("replace_mlm", 0.25, "embeddings"),
    ("all_tokens_mlm", 0.25, "embeddings"),
]
TABLES = {
    "efficiency": [ELECTRA, BERT],
    "generator_size": [("rtd", size, "embeddings") for size in (0.125, 0.25, 0.5, 1.0)],
    "sharing": [("rtd", 1.0, share) for share in ("none", "embeddings", "all")],
    "table5": [ELECTRA, ("rtd_15", 0.25, "embeddings"), *RUNS[-2:], BERT],
}
PAPER = {  # GLUE dev scores the paper reports for these rows (small models; Table 5: base-size, 15% of compute)
    "sharing": {"none": 83.6, "embeddings": 84.3, "all": 84.4},
    "table5": {"rtd": 85.0, "rtd_15": 82.4, "replace_mlm": 82.4, "all_tokens_mlm": 84.3, "mlm": 82.2},
}


def run_name(objective: str, size: float | None, share: str | None) -> str:
    return objective if size is None else f"{objective} g={size:g} {share}"


def standard_error(n: int) -> float:
    """The binomial standard error of an accuracy near 0.5 on ``n`` test items (the largest): one run's noise."""
    return round(math.sqrt(0.25 / n), 4)


# ---------------------------------------------------------------------------------------------- data


def prepare(quick: bool) -> dict:
    books = [Document(b.title, b.paragraphs[: 100 if quick else PARAGRAPHS_PER_BOOK]) for b in load_gutenberg()]
    train_docs, val_docs = split_documents(books, 0.05)
    tokenizer = train_tokenizer([p for d in train_docs for p in d.paragraphs], "bert", VOCAB_SIZE)
    job = PretrainConfig(model="electra", objective="rtd", seq_len=SEQ_LEN)
    data = {"tokenizer": tokenizer, "job": job, "vocab_size": tokenizer.vocab_size, "examples": {}}
    # one preparation per masking: BERT's (mlm) and ELECTRA's (every objective with a generator)
    for name in ("mlm", "rtd"):
        objective = get_objective(name, "electra")
        settings = objective_config(objective, {})
        train = objective.prepare(train_docs, tokenizer, job, settings)
        held_out = objective.prepare(val_docs, tokenizer, job, settings, validation=True)
        data["examples"][name] = (train, held_out)
    counts = torch.zeros(tokenizer.vocab_size)
    for example in data["examples"]["rtd"][0][0]:
        counts += torch.bincount(example["input_ids"][~example["special_tokens_mask"].bool()], minlength=len(counts))
    data["unigram"] = counts / counts.sum()
    data["fixed_corruption"] = fixed_corruption(data["examples"]["rtd"][1], data["unigram"])
    n_sst2 = 400 if quick else SST2_TRAIN
    data["sst2"] = {"train": load_task("sst2", "train")[:n_sst2], "test": load_task("sst2", "test")}
    ud = {split: load_task("ud_pos", split)[: 200 if quick else None] for split in ("train", "test")}
    data["ud_words"] = {split: tagged_words(tokenizer, examples) for split, examples in ud.items()}
    data["ud_sentences"] = {split: len(examples) for split, examples in ud.items()}
    return data


def fixed_corruption(held_out, unigram: torch.Tensor) -> list[dict]:
    """The held-out batches with their masked 15% replaced by draws from the unigram distribution (one seed): the
    same corrupted text for every run's discriminator."""
    examples, collate = held_out
    rng = torch.Generator().manual_seed(1)
    batches = []
    for batch in batches(examples, collate):
        at = batch["labels"] != IGNORE_INDEX
        samples = torch.multinomial(unigram, int(at.sum()), replacement=True, generator=rng)
        corrupted = batch["input_ids"].masked_scatter(at, samples)
        replaced = torch.zeros_like(at).masked_scatter(at, samples != batch["labels"][at])
        batches.append({**batch, "input_ids": corrupted, "replaced": replaced})
    return batches


# ---------------------------------------------------------------------------------------------- probes


@torch.no_grad()
def sentence_features(body, tokenizer, examples) -> list[torch.Tensor]:
    """Each layer's states (the embeddings', then each block's), mean-pooled over each sentence's real tokens:
    n_layers + 1 of (N, H)."""
    pooled = []
    for start in range(0, len(examples), 256):
        batch = tokenizer([e.text for e in examples[start : start + 256]], max_length=SEQ_LEN, return_tensors="pt")
        layers = body.features(batch.input_ids, batch.attention_mask, output_hidden_states=True).hidden_states
        weights = batch.attention_mask[..., None].float()  # (B, T, 1)
        pooled.append([(h * weights).sum(1) / weights.sum(1) for h in layers])  # each (B, H)
    return [torch.cat(layer) for layer in zip(*pooled, strict=True)]


def tagged_words(tokenizer, examples) -> list[tuple[dict, list[int]]]:
    """Per batch of 256 sentences: its encoding and, per sentence, the position of each word's first sub-word and
    the word's tag (as an index into UD's tags), for the words within the first SEQ_LEN tokens."""
    labels = TASKS["ud_pos"].labels
    out = []
    for start in range(0, len(examples), 256):
        chunk = examples[start : start + 256]
        batch = tokenizer([" ".join(e.tokens) for e in chunk], max_length=SEQ_LEN, return_tensors="pt")
        rows, positions, tags = [], [], []
        for i, e in enumerate(chunk):
            first = {}
            for t, w in enumerate(word_ids_from_offsets(e.tokens, batch.offsets[i], batch.sequence_ids[i])):
                if w is not None and w not in first:
                    first[w] = t
            rows += [i] * len(first)
            positions += list(first.values())
            tags += [labels.index(e.tags[w]) for w in first]
        out.append((batch, torch.tensor(rows), torch.tensor(positions), torch.tensor(tags)))
    return out


@torch.no_grad()
def word_features(body, words) -> tuple[list[torch.Tensor], torch.Tensor]:
    """Each layer's state of each word's first sub-word: n_layers + 1 of (N_words, H); and the words' tags."""
    features = []
    for batch, rows, positions, _ in words:
        layers = body.features(batch.input_ids, batch.attention_mask, output_hidden_states=True).hidden_states
        features.append([h[rows, positions] for h in layers])
    return [torch.cat(layer) for layer in zip(*features, strict=True)], torch.cat([tags for *_, tags in words])


def probes(train_layers, train_y, test_layers, test_y, n_classes: int) -> dict:
    """Accuracy of a linear probe on the final layer ("last", what fine-tuning reads) and on a learned ScalarMix of
    every layer ("mix": what the encoder holds anywhere, embeddings included)."""
    train_layers, test_layers = standardize(train_layers, test_layers)
    with torch.enable_grad():  # (called from the Trainer's evaluation, which runs without gradients)
        last = linear_probe(train_layers[-1:], train_y, test_layers[-1:], test_y, n_classes, epochs=20)
        mix = linear_probe(train_layers, train_y, test_layers, test_y, n_classes, mix=True, epochs=20)
    return {"last": last.accuracy, "mix": mix.accuracy}


def downstream(body, data) -> dict:
    """Linear-probe accuracies of the frozen body on SST-2 (sentences) and UD POS (words)."""
    body.eval()
    sst2 = data["sst2"]
    x = {split: sentence_features(body, data["tokenizer"], sst2[split]) for split in sst2}
    y = {split: torch.tensor([e.label for e in sst2[split]]) for split in sst2}
    (train_x, train_y), (test_x, test_y) = (word_features(body, data["ud_words"][s]) for s in ("train", "test"))
    return {
        "sst2": probes(x["train"], y["train"], x["test"], y["test"], 2),
        "ud_pos": probes(train_x, train_y, test_x, test_y, len(TASKS["ud_pos"].labels)),
    }


def majority_baselines(data) -> dict:
    """Accuracy on the test split of predicting the training split's most frequent label (tag)."""
    sst2 = data["sst2"]
    majority = max((0, 1), key=[e.label for e in sst2["train"]].count)
    train_tags, test_tags = (torch.cat([t for *_, t in data["ud_words"][s]]) for s in ("train", "test"))
    top = int(torch.bincount(train_tags).argmax())
    return {
        "sst2": sum(e.label == majority for e in sst2["test"]) / len(sst2["test"]),
        "ud_pos": float((test_tags == top).float().mean()),
        "ud_pos_majority_tag": TASKS["ud_pos"].labels[top],
    }


# ---------------------------------------------------------------------------------------------- detection


def auc(scores: torch.Tensor, positive: torch.Tensor) -> float:
    """ROC AUC of ``scores`` for the ``positive`` (bool) items: P(score of a positive > that of a negative)."""
    order = scores.double().argsort()
    ranks = torch.empty_like(order, dtype=torch.float64)
    ranks[order] = torch.arange(1, len(scores) + 1, dtype=torch.float64)
    n_pos, n_neg = int(positive.sum()), int((~positive).sum())
    if not n_pos or not n_neg:
        return math.nan
    return float((ranks[positive].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg))


def detection_scores(logits: torch.Tensor, replaced: torch.Tensor) -> dict:
    """AUC, accuracy and precision/recall of "replaced" at p = 0.5 over real tokens (flat tensors)."""
    predicted = logits > 0
    true_positives = int((predicted & replaced).sum())
    return {
        "auc": auc(logits, replaced),
        "accuracy": float((predicted == replaced).float().mean()),
        "precision": true_positives / max(int(predicted.sum()), 1),
        "recall": true_positives / max(int(replaced.sum()), 1),
        "replaced_fraction": float(replaced.float().mean()),
        "tokens": len(replaced),
    }


@torch.no_grad()
def detection(pair, data) -> dict:
    """The discriminator's replaced-token detection on held-out text: corrupted by its own generator (fixed
    samples) and by the fixed unigram corruption shared by every run."""
    pair.eval()
    examples, collate = data["examples"]["rtd"][1]
    own_logits, own_replaced, fixed_logits, fixed_replaced = [], [], [], []
    for batch in batches(examples, collate):
        _, corrupted, replaced = generate(pair, batch)
        real = batch["attention_mask"].bool()
        own_logits.append(pair.discriminator.rtd_logits(discriminator_hidden(pair, batch, corrupted))[real])
        own_replaced.append(replaced[real])
    for batch in data["fixed_corruption"]:
        real = batch["attention_mask"].bool()
        fixed_logits.append(pair.discriminator.rtd_logits(discriminator_hidden(pair, batch, batch["input_ids"]))[real])
        fixed_replaced.append(batch["replaced"][real])
    return {
        "own_generator": detection_scores(torch.cat(own_logits), torch.cat(own_replaced)),
        "fixed_unigram": detection_scores(torch.cat(fixed_logits), torch.cat(fixed_replaced)),
    }


# ---------------------------------------------------------------------------------------------- FLOPs


def per_position_weights(body) -> int:
    """The weights of ``body`` that every position multiplies by: all but the embedding tables (token, position,
    segment, their norm) and the MLM head (its vocabulary projection is counted where it is computed)."""
    return sum(
        p.numel()
        for name, p in body.named_parameters()
        if not name.startswith("mlm_head.") and (not name.startswith("embedding.") or ".projection." in f".{name}")
    )


def encoder_flops(body, positions: int, scored: int) -> int:
    """Training FLOPs of ``body`` on ``positions`` token positions, with vocabulary logits at ``scored`` of them."""
    c = body.config
    per_position = 6 * per_position_weights(body) + 12 * c.n_layers * SEQ_LEN * c.d_model  # weights + attention
    vocabulary = 6 * (c.d_model * c.embedding_size + c.embedding_size * c.vocab_size)  # H -> E -> V
    return positions * per_position + scored * vocabulary


def flops_per_step(objective: str, module, positions: int, masked: int) -> dict:
    """Training FLOPs of one step, forward and backward: the main model's (the discriminator, or the model of a
    Table 5 ablation) and the generator's (see the docstring)."""
    body = module.discriminator if hasattr(module, "discriminator") else module
    scored = {"mlm": masked, "replace_mlm": masked, "all_tokens_mlm": positions}.get(objective, 0)
    flops = {"main": encoder_flops(body, positions, scored), "generator": 0}
    if hasattr(module, "generator"):
        flops["generator"] = encoder_flops(module.generator, positions, masked)
    flops["total"] = flops["main"] + flops["generator"]
    return flops


# ---------------------------------------------------------------------------------------------- pretraining


def initial_body(data):
    """The one initialization of the encoder (embeddings and layers) that every run starts from."""
    entry = get_model("electra")
    torch.manual_seed(0)
    return build_model(entry, model_config(entry, "tiny", data["vocab_size"], {**MODEL, "rtd": False}))


def build(spec: tuple, data) -> tuple:
    """The objective, its settings and the module it trains: the registered model with the objective's heads, its
    body set to the common initialization (a model's heads draw from the random stream before its body's
    initialization, so bodies built from one seed differ), wrapped with a generator initialized from a fixed seed."""
    objective_name, size, share = spec
    objective = get_objective(objective_name, "electra")
    settings = objective_config(objective, {} if size is None else {"generator_size": size, "share": share})
    entry = get_model("electra")
    config = model_config(entry, "tiny", data["vocab_size"], {**MODEL, **needed_settings(entry, objective)})
    model = build_model(entry, config, data["tokenizer"])
    for part in ("embedding", "encoder"):
        getattr(model, part).load_state_dict(getattr(data["initial_body"], part).state_dict())
    torch.manual_seed(1)  # the generator's initial weights: the same wherever its shape is
    return objective, objective.wrap_model(model, config, settings, data["tokenizer"])


def checksum(body) -> float:
    """A fingerprint of the body's embeddings and layers (equal initial weights give equal sums)."""
    return round(
        sum(
            float(p.detach().double().abs().sum()) for part in (body.embedding, body.encoder) for p in part.parameters()
        ),
        6,
    )


def parameter_counts(module, body) -> dict:
    generator = getattr(module, "generator", None)
    body_ids = {id(p) for p in body.parameters()}
    return {
        "parameters": count_parameters(module),
        "discriminator_parameters": count_parameters(body),
        "generator_parameters": count_parameters(generator) if generator is not None else 0,
        # the generator's weights not shared with the discriminator
        "generator_own_parameters": (
            sum(p.numel() for p in generator.parameters() if id(p) not in body_ids) if generator is not None else 0
        ),
    }


def pretrain(spec: tuple, data, steps: int, checkpoints: list[int]) -> dict:
    """Pretrain one run to ``steps``, scoring it at each of ``checkpoints`` (and at step 0 when there are several)."""
    objective_name, size, share = spec
    objective, module = build(spec, data)
    body = objective.body(module)
    masking = "mlm" if objective_name == "mlm" else "rtd"
    (train_examples, collate), (held_out, held_out_collate) = data["examples"][masking]
    record = {"objective": objective_name, "generator_size": size, "share": share, **parameter_counts(module, body)}
    if hasattr(module, "generator"):
        g = module.generator.config
        record["generator_config"] = {k: getattr(g, k) for k in ("d_model", "n_heads", "d_ff", "embedding_size")}
    record["initial_checksum"] = checksum(body)
    positions = TRAIN["batch_size"] * SEQ_LEN
    record["flops_per_step"] = flops_per_step(objective_name, module, positions, data["masked_per_step"][masking])
    record["checkpoints"] = []
    config = TrainConfig(
        **TRAIN, max_steps=steps, warmup_steps=data["warmup_steps"], eval_every=0, eval_batches=0, save_every=0,
        log_every=LOG_EVERY, progress=False,
    )  # fmt: skip
    probing = 0.0

    def score(metrics: dict) -> None:  # after each evaluation: held-out losses, probes, detection
        nonlocal probing
        started = time.perf_counter()
        held = {k: v for k, v in metrics.items() if k not in ("step", "split")}
        entry = {"step": metrics["step"], "held_out": held, "downstream": downstream(body, data)}
        if body.rtd_head is not None:
            entry["detection"] = detection(module, data)
        record["checkpoints"].append(entry)
        print(f"  {run_name(*spec)} step {entry['step']}: {summary(entry)}", flush=True)
        probing += time.perf_counter() - started

    torch.manual_seed(2)  # the training streams (masks, samples): the same in every run that draws alike
    trainer = Trainer(
        module, objective.loss, train_examples, config, eval_data=held_out, collate=collate or default_collate,
        eval_collate=held_out_collate, on_eval=score, counts=objective.counts, perplexity=objective.perplexity,
    )  # fmt: skip
    started = time.perf_counter()
    if len(checkpoints) > 1:
        trainer.evaluate()  # step 0: the untrained encoder (an evaluation leaves the random streams as they were)
    for checkpoint in checkpoints:  # one run: the schedule is constant after the warm-up
        trainer.config.max_steps = checkpoint
        trainer.fit()  # evaluates (and scores) at its last step
    seconds = time.perf_counter() - started
    train_log = [e for e in trainer.history if e["split"] == "train"]
    parts = [k for k in train_log[0] if k not in ("step", "split", "lr", "tokens_per_s", "epoch")]
    record["train_curve"] = {"step": [e["step"] for e in train_log]}
    record["train_curve"].update({k: [round(e[k], 4) for e in train_log] for k in parts})
    record["first_train_loss"] = train_log[0]["loss"]
    record["last_train_loss"] = sum(e["loss"] for e in train_log[-5:]) / len(train_log[-5:])
    record["seconds"] = round(seconds, 1)
    record["pretrain_seconds"] = round(seconds - probing, 1)
    record["seconds_per_step"] = round((seconds - probing) / steps, 3)
    return record


def summary(entry: dict) -> str:
    held = ", ".join(f"{k} {v:.3f}" for k, v in entry["held_out"].items() if k != "perplexity")
    probes = ", ".join(f"{k} {v['last']:.3f} (mix {v['mix']:.3f})" for k, v in entry["downstream"].items())
    text = f"held-out {held}; probes {probes}"
    if "detection" in entry:
        own, fixed = entry["detection"]["own_generator"], entry["detection"]["fixed_unigram"]
        text += f"; detection AUC {own['auc']:.3f} (own generator), {fixed['auc']:.3f} (unigram)"
    return text


def masked_per_step(data) -> dict:
    """The mean number of masked tokens in a training batch, per masking (20 batches drawn with a fixed seed)."""
    torch.manual_seed(3)
    out = {}
    for name, ((examples, collate), _) in data["examples"].items():
        draws = [torch.randint(len(examples), (TRAIN["batch_size"],)).tolist() for _ in range(20)]
        n = [int((collate([examples[i] for i in d])["labels"] != IGNORE_INDEX).sum()) for d in draws]
        out[name] = round(sum(n) / len(n))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=STEPS, help="pretraining steps of every table's runs")
    parser.add_argument("--curve-steps", type=int, default=CURVE_STEPS, help="steps of the efficiency runs")
    parser.add_argument("--quick", action="store_true", help="a trial: 20/40 steps, a small corpus, small probes")
    args = parser.parse_args()
    if args.quick:
        args.steps, args.curve_steps = 20, 40
    if args.curve_steps < args.steps:
        parser.error(f"--curve-steps ({args.curve_steps}) must be at least --steps ({args.steps})")
    begin()
    reproducible(seed=0, threads=1)
    started = time.perf_counter()
    data = prepare(args.quick)
    data["masked_per_step"] = masked_per_step(data)
    data["warmup_steps"] = args.steps // 10
    data["initial_body"] = initial_body(data)
    baselines = majority_baselines(data)
    n_test = {"sst2": len(data["sst2"]["test"]), "ud_pos": sum(len(t) for *_, t in data["ud_words"]["test"])}
    print(f"prepared in {time.perf_counter() - started:.0f} s: {len(data['examples']['rtd'][0][0])} sequences, "
          f"{len(data['examples']['rtd'][1][0])} held out; majority baselines {baselines}", flush=True)  # fmt: skip

    s, c = args.steps, args.curve_steps  # the efficiency runs' checkpoints: 100, 200, 300, 400, 600, 800
    curve = sorted({s // 4, s // 2, 3 * s // 4, s, (s + c) // 2, c})
    runs = {}
    for spec in RUNS:
        efficiency = spec in TABLES["efficiency"]
        runs[run_name(*spec)] = pretrain(
            spec, data, curve[-1] if efficiency else args.steps, curve if efficiency else [args.steps]
        )
        print(f"{run_name(*spec)}: {runs[run_name(*spec)]['seconds']} s", flush=True)

    control = runs[run_name(*ELECTRA)]["checkpoints"][0]
    results = {
        "setup": {
            "corpus": f"Gutenberg, first {PARAGRAPHS_PER_BOOK} paragraphs of each of the 17 novels, 5% held out",
            "tokenizer": f"bert (WordPiece), {data['vocab_size']} tokens",
            "model": {"name": "electra", "size": "tiny", **MODEL},
            "pretraining": {
                **TRAIN,
                "warmup_steps": data["warmup_steps"],
                "steps": args.steps,
                "curve_steps": args.curve_steps,
                "checkpoints": curve,
                "format": "full_sentences",
                "seq_len": SEQ_LEN,
                "sequences": len(data["examples"]["rtd"][0][0]),
                "held_out_sequences": len(data["examples"]["rtd"][1][0]),
                "masked_per_step": data["masked_per_step"],
            },
            "probes": {
                "sst2": {"train_sentences": len(data["sst2"]["train"]), "test_sentences": n_test["sst2"]},
                "ud_pos": {
                    **{f"{s}_sentences": n for s, n in data["ud_sentences"].items()},
                    "test_words": n_test["ud_pos"],
                },
            },
            "flops": "per step, forward + backward: 6 N per position (N: weights outside the embedding tables and "
            "the MLM head) + 12 L T d (attention) + 6 (H E + E V) per position with vocabulary logits; the "
            "generator's included",
            "seconds": round(time.perf_counter() - started),
        },
        "baselines": {
            "majority": baselines,
            "untrained": control["downstream"],
            "untrained_detection": control["detection"],
            "standard_error": {task: standard_error(n) for task, n in n_test.items()},
        },
        "tables": {table: [run_name(*spec) for spec in specs] for table, specs in TABLES.items()},
        "paper": PAPER,
        "runs": runs,
    }
    print("wrote", save_results("ch06_electra", results))


if __name__ == "__main__":
    main()
