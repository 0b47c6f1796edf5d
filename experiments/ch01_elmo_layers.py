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

from experiments.common import save_results  # noqa: E402
from minilm.data import load_gutenberg, load_task  # noqa: E402
from minilm.data.senses import WORD_SENSES  # noqa: E402
from minilm.data.tasks import UPOS_TAGS  # noqa: E402
from minilm.metrics import nearest_centroid_accuracy  # noqa: E402
from minilm.models.elmo import ELMo, ELMoConfig  # noqa: E402
from minilm.nn import ScalarMix, batch_to_char_ids  # noqa: E402
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


@torch.no_grad()
def layer_features(model, sentences, batch_size=64):
    """Every token's representation in each layer: a list of n_layers + 1 tensors (n_tokens, 2d)."""
    per_layer = None
    for i in range(0, len(sentences), batch_size):
        batch = sentences[i : i + batch_size]
        lengths = torch.tensor([len(s) for s in batch])
        mask = (torch.arange(int(lengths.max()))[None, :] < lengths[:, None]).long()  # (B, T)
        layers = model.features(char_ids=batch_to_char_ids(batch, MAX_CHARS), attention_mask=mask).hidden_states
        flat = [h[mask.bool()] for h in layers]  # each (tokens in batch, 2d)
        per_layer = flat if per_layer is None else [torch.cat(pair) for pair in zip(per_layer, flat, strict=True)]
    return per_layer


def sense_scores(model, word, senses):
    """Per layer: leave-one-out nearest-sense-centroid accuracy (a tie counts 1/2) and within − between cosine."""
    sentences, labels = [], []
    for label, texts in enumerate(senses.values()):
        sentences += [t.split() for t in texts]
        labels += [label] * len(texts)
    labels = torch.tensor(labels)
    positions = [s.index(word) for s in sentences]
    starts = torch.tensor([0] + [len(s) for s in sentences]).cumsum(0)[:-1]
    scores = []
    for layer in layer_features(model, sentences):
        vectors = F.normalize(layer[starts + torch.tensor(positions)], dim=-1)  # (n, 2d), one per sentence
        scores.append({"nn_accuracy": nearest_centroid_accuracy(vectors, labels), **cosine_gap(vectors, labels)})
    return scores


def cosine_gap(vectors, labels):
    sims = vectors @ vectors.T  # (n, n), unit vectors
    same = labels[:, None] == labels[None, :]
    off_diagonal = ~torch.eye(len(labels), dtype=torch.bool)
    within, between = sims[same & off_diagonal].mean().item(), sims[~same].mean().item()
    return {"within": within, "between": between, "gap": within - between}


def standardize(train_layers, test_layers):
    """Each layer's features to mean 0, std 1 per dimension (train statistics): the probes then train alike."""
    out_train, out_test = [], []
    for train, test in zip(train_layers, test_layers, strict=True):
        mean, std = train.mean(0), train.std(0) + 1e-6
        out_train.append((train - mean) / std)
        out_test.append((test - mean) / std)
    return out_train, out_test


def pos_probe(train_layers, train_tags, test_layers, test_tags, mix: bool, epochs=5, lr=3e-3, batch_size=256, seed=0):
    """A linear tagger on frozen features (one layer, or a ScalarMix of all of them), trained with Adam on
    mini-batches of tokens; returns its test accuracy and the mix's softmax weights."""
    torch.manual_seed(seed)
    scalar_mix = ScalarMix(len(train_layers)) if mix else None
    classifier = torch.nn.Linear(train_layers[0].size(-1), len(UPOS_TAGS))
    params = list(classifier.parameters()) + (list(scalar_mix.parameters()) if mix else [])
    optimizer = torch.optim.Adam(params, lr=lr)

    def logits(layers):
        return classifier(scalar_mix(layers) if mix else layers[0])

    for _ in range(epochs):
        for batch in torch.randperm(len(train_tags)).split(batch_size):
            loss = F.cross_entropy(logits([h[batch] for h in train_layers]), train_tags[batch])
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
    with torch.no_grad():
        accuracy = (logits(test_layers).argmax(-1) == test_tags).float().mean().item()
    weights = torch.softmax(scalar_mix.weights, 0).tolist() if mix else None
    return accuracy, weights


def pos_table(model, seeds=(0, 1, 2)):
    data = {}
    for split in ("train", "test"):
        examples = load_task("ud_pos", split)
        tags = torch.tensor([UPOS_TAGS.index(t) for e in examples for t in e.tags])
        data[split] = (layer_features(model, [e.tokens for e in examples]), tags)
    (train_layers, train_tags), (test_layers, test_tags) = data["train"], data["test"]
    train_layers, test_layers = standardize(train_layers, test_layers)
    rows = {}
    for j in range(len(train_layers)):
        accs = [pos_probe([train_layers[j]], train_tags, [test_layers[j]], test_tags, False, seed=s)[0] for s in seeds]
        rows[f"layer {j}"] = {"accuracy": sum(accs) / len(accs), "per_seed": accs}
    runs = [pos_probe(train_layers, train_tags, test_layers, test_tags, True, seed=s) for s in seeds]
    rows["ScalarMix"] = {
        "accuracy": sum(a for a, _ in runs) / len(runs),
        "per_seed": [a for a, _ in runs],
        "weights": runs[0][1],
    }
    return rows


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
    if args.steps >= 1000:
        print("saved", save_results("ch01_elmo_layers", results))


if __name__ == "__main__":
    main()
