"""Chapter 1's miniature of Peters et al. 2018, §5.3 (Tables 5 and 6), with more training than the notebook affords.

A word-level biLM (character CNN in, 2-layer LSTMP per direction, shared softmax over the most frequent words) is
trained on the Gutenberg novels, then frozen. Each of its three layers (0: the character CNN, 1 and 2: the biLSTM
layers), and a learned ScalarMix of them, is probed for
- word sense: leave-one-out nearest-sense-centroid accuracy on hand-written sentences with "bank" (river / money)
  and "play" (theatre / game), as the paper's 1-nearest-neighbour WSD (Table 5), and the within- minus
  between-sense cosine similarity;
- part of speech: a linear tagger trained on UD-EWT (the course's train split) and scored on EWT test (Table 6).
The same probes run on the untrained biLM (random weights) as a control: what the architecture gives for free.

    python experiments/ch01_elmo_layers.py            # ~12 min of CPU (30 min on a busy 2-core machine)
    python experiments/ch01_elmo_layers.py --steps 20 # a smoke test (results not saved)
"""

from __future__ import annotations

import argparse
import collections
import re
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from experiments.common import begin, save_results  # noqa: E402
from minilm.analysis import layer_features, probe_layers, sense_vectors, standardize  # noqa: E402
from minilm.data import load_gutenberg, load_task  # noqa: E402
from minilm.data.senses import WORD_SENSES  # noqa: E402
from minilm.data.tasks import UPOS_TAGS  # noqa: E402
from minilm.metrics import nearest_centroid_accuracy  # noqa: E402
from minilm.models.elmo import ELMo, ELMoConfig  # noqa: E402
from minilm.nn import batch_to_char_ids  # noqa: E402
from minilm.objectives.bilm import bilm_loss  # noqa: E402
from minilm.objectives.causal_lm import language_model_blocks  # noqa: E402
from minilm.utils import reproducible  # noqa: E402

WORD = re.compile(r"[A-Za-z]+|[0-9]+|[^\sA-Za-z0-9]")  # words, numbers, single punctuation marks
MAX_CHARS = 20
CONFIG = dict(
    vocab_size=2000,
    max_chars=MAX_CHARS,
    filters=((1, 32), (2, 32), (3, 64), (4, 128)),
    n_highway=1,
    hidden_size=256,
    projection_dim=128,
    dropout=0.0,
)


def corpus(vocab_size: int):
    """The Gutenberg words as a stream of word-type ids (types sorted by frequency), the spelling of every type
    (n_types, MAX_CHARS) and each type's softmax target (the types past vocab_size − 1 share <unk> = 0)."""
    words = [w for book in load_gutenberg() for w in WORD.findall(book.text)]
    types = [w for w, _ in collections.Counter(words).most_common()]
    index = {w: i for i, w in enumerate(types)}
    stream = torch.tensor([index[w] for w in words])
    spelling = batch_to_char_ids([types], MAX_CHARS)[0]  # (n_types, MAX_CHARS)
    type_ids = torch.arange(len(types))
    target = torch.where(type_ids < vocab_size - 1, type_ids + 1, 0)  # 0 = <unk>
    return stream, spelling, target


def bilm_step_loss(model, block, spelling, target):
    """block (B, T) of type ids: the model reads their characters and predicts their (vocabulary) targets."""
    forward_logits, backward_logits = model(char_ids=spelling[block])  # (B, T, V) each
    return bilm_loss(forward_logits, backward_logits, target[block])


def train_bilm(steps, stream, spelling, target, batch_size=32, seq_len=32, lr=2e-3, seed=0):
    reproducible(seed=seed, threads=torch.get_num_threads())
    blocks = language_model_blocks(stream, seq_len)
    train, valid = blocks[:-64], blocks[-64:]  # the last 2k words (Wuthering Heights) are held out
    model = ELMo(ELMoConfig(**CONFIG))
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr)
    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: min(1.0, (s + 1) / 20))
    data = torch.Generator().manual_seed(seed)
    losses = []
    for _ in range(steps):
        block = train[torch.randint(len(train), (batch_size,), generator=data)]
        loss = bilm_step_loss(model, block, spelling, target).mean
        optimizer.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        schedule.step()
        losses.append(loss.item())
    model.eval()
    with torch.no_grad():
        valid_loss = bilm_step_loss(model, valid, spelling, target).mean.item()
    return model, losses, valid_loss


def sense_scores(model, word, senses):
    """Per layer: leave-one-out nearest-sense-centroid accuracy (a tie counts 1/2) and within − between cosine."""
    layers, labels = sense_vectors(model, word, senses)
    scores = []
    for layer in layers:
        vectors = F.normalize(layer, dim=-1)  # (n, 2d), one per sentence
        scores.append({"nn_accuracy": nearest_centroid_accuracy(vectors, labels), **cosine_gap(vectors, labels)})
    return scores


def cosine_gap(vectors, labels):
    sims = vectors @ vectors.T  # (n, n), unit vectors
    same = labels[:, None] == labels[None, :]
    off_diagonal = ~torch.eye(len(labels), dtype=torch.bool)
    within, between = sims[same & off_diagonal].mean().item(), sims[~same].mean().item()
    return {"within": within, "between": between, "gap": within - between}


def pos_table(model, seeds=(0, 1, 2)):
    """A linear tagger on each standardised layer and on a ScalarMix of all of them, for each probe seed."""
    data = {}
    for split in ("train", "test"):
        examples = load_task("ud_pos", split)
        tags = torch.tensor([UPOS_TAGS.index(t) for e in examples for t in e.tags])
        data[split] = (layer_features(model, [e.tokens for e in examples]), tags)
    (train_layers, train_tags), (test_layers, test_tags) = data["train"], data["test"]
    train_layers, test_layers = standardize(train_layers, test_layers)
    return probe_layers(train_layers, train_tags, test_layers, test_tags, len(UPOS_TAGS), seeds)


def evaluate(model):
    return {
        "senses": {word: sense_scores(model, word, senses) for word, senses in WORD_SENSES.items()},
        "pos": pos_table(model),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=2000)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    recorded = args.steps >= 1000  # shorter runs are smoke tests, not saved
    if recorded:
        begin()
    torch.set_num_threads(args.threads)
    start = time.time()
    stream, spelling, target = corpus(CONFIG["vocab_size"])
    reproducible(seed=0, threads=args.threads)
    untrained = ELMo(ELMoConfig(**CONFIG)).eval()
    control = evaluate(untrained)
    model, losses, valid_loss = train_bilm(args.steps, stream, spelling, target)
    trained = evaluate(model)
    every = max(1, args.steps // 100)
    results = {
        "config": CONFIG,
        "steps": args.steps,
        "batch_size": 32,
        "seq_len": 32,
        f"train_loss_every_{every}_steps": losses[::every],
        "train_loss_last_50": sum(losses[-50:]) / len(losses[-50:]),
        "valid_loss": valid_loss,
        "valid_perplexity": float(torch.tensor(valid_loss).exp()),
        "trained": trained,
        "untrained": control,
        "seconds": time.time() - start,
    }
    for name, res in (("untrained", control), ("trained", trained)):
        print(name, {k: round(v["accuracy"], 4) for k, v in res["pos"].items()})
        for word, layers in res["senses"].items():
            print(" ", word, [(round(s["nn_accuracy"], 3), round(s["gap"], 3)) for s in layers])
    print(f"valid perplexity {results['valid_perplexity']:.1f}; {results['seconds']:.0f} s")
    if recorded:
        print("saved", save_results("ch01_elmo_layers", results))


if __name__ == "__main__":
    main()
