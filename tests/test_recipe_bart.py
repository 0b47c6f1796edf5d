"""BART's recipe (minilm.recipes.bart) and text-to-text fine-tuning: the model and the denoise objective in the
registry, the loss recomputed from the logits, fresh noise per batch and fixed validation noise, pretraining from the
command line that learns and fine-tunes (a BART-way classifier and generative SQuAD), a text-to-text task learned
beyond a constant answer, clear errors through the real CLIs."""

import dataclasses
import json
import re
import subprocess
import sys
from types import SimpleNamespace

import pytest
import torch

from minilm.data import Document
from minilm.data.examples import Seq2SeqExample
from minilm.data.tasks import NO_ANSWER_TEXT, TASKS
from minilm.data.toy import colour_questions
from minilm.finetune import main as finetune_main
from minilm.finetune.kinds import Seq2SeqKind, TaskEncoder
from minilm.models.bart import Bart, BartConfig
from minilm.objectives.labels import IGNORE_INDEX
from minilm.objectives.seq2seq import seq2seq_loss
from minilm.recipes.bart import DenoiseSettings, denoise_counts, denoise_examples, denoise_loss
from minilm.tokenizers import train_tokenizer
from minilm.train import registry
from minilm.train.pretrain import main as pretrain_main
from minilm.train.trainer import read_metrics

TEXTS = [
    "The sea was calm. The ship sailed on! Was the captain asleep? Nobody knew.",
    "It was the best of times. It was the worst of times. We had everything before us.",
] * 30


@pytest.fixture(scope="module")
def tokenizer():
    return train_tokenizer(TEXTS, "roberta", vocab_size=300)


def test_bart_is_registered_as_an_encoder_decoder_with_the_denoise_objective():
    entry = registry.get_model("bart")
    assert entry.kind == "encoder-decoder" and entry.build is Bart and entry.tokenizer_family == "roberta"
    assert entry.n_layers(BartConfig(n_encoder_layers=2, n_decoder_layers=5)) == 5  # features' layers: the decoder's
    assert registry.get_objective("denoise", "bart").perplexity is True
    config = registry.model_config(entry, "tiny", 300, {})
    assert (config.pad_id, config.bos_id, config.eos_id, config.decoder_start_id) == (1, 0, 2, 2)  # roberta's ids


def test_the_loss_is_the_reconstruction_cross_entropy_of_every_original_token(tokenizer):
    job = SimpleNamespace(seq_len=24, seed=0)
    documents = [Document(f"doc{i}", text) for i, text in enumerate(TEXTS[:4])]
    examples, collate = denoise_examples(documents, tokenizer, job, DenoiseSettings())
    batch = collate(examples[:4])
    torch.manual_seed(0)
    model = Bart(BartConfig(vocab_size=tokenizer.vocab_size, max_len=32, n_encoder_layers=1, n_decoder_layers=1,
                            n_heads=2, d_model=16, d_ff=32)).eval()  # fmt: skip
    out = denoise_loss(model, batch)
    logits = model(batch["input_ids"], batch["attention_mask"], model.shift_right(batch["labels"]))
    torch.testing.assert_close(out.loss, seq2seq_loss(logits, batch["labels"]), rtol=1e-5, atol=1e-6)
    originals = [e["input_ids"] for e in examples[:4]]
    assert denoise_counts(batch) == {"loss": sum(len(o) for o in originals)}  # every token of the originals
    for row, original in enumerate(originals):
        labels = batch["labels"][row]
        assert labels[: len(original)].tolist() == original.tolist() and (labels[len(original) :] == -100).all()
        assert original[0] == tokenizer.bos_id and original[-1] == tokenizer.eos_id and len(original) <= 24


def test_training_noise_is_fresh_each_batch_and_validation_noise_is_fixed(tokenizer):
    job = SimpleNamespace(seq_len=32, seed=3)
    documents = [Document("d", " ".join(TEXTS[:6]))]
    examples, collate = denoise_examples(documents, tokenizer, job, DenoiseSettings(noise="infilling"))
    torch.manual_seed(0)
    first, second = collate(examples), collate(examples)
    assert not torch.equal(first["input_ids"], second["input_ids"])  # dynamic: new spans every time
    assert torch.equal(first["labels"], second["labels"])
    fixed = [denoise_examples(documents, tokenizer, job, DenoiseSettings(noise="infilling"), validation=True)[0]]
    fixed.append(denoise_examples(documents, tokenizer, job, DenoiseSettings(noise="infilling"), validation=True)[0])
    assert all(torch.equal(a["input_ids"], b["input_ids"]) for a, b in zip(*fixed, strict=True))


PRETRAIN = ["--model", "bart", "--objective", "denoise", "vocab_size=300", "seq_len=48", "batch_size=16"]
PRETRAIN += ["model.n_encoder_layers=1", "model.n_decoder_layers=1", "model.d_model=32", "model.n_heads=2"]
PRETRAIN += ["model.d_ff=64", "lr=3e-3", "warmup_steps=5", "log_every=5", "eval_every=0", "progress=false"]
PRETRAIN += ["threads=1", "sample_tokens=8"]


def test_bart_pretrains_from_the_command_line_and_fine_tunes(tmp_path, capsys):
    """Three novels: the reconstruction loss falls, the sample is a reconstruction, a classifier and a generative
    QA model fine-tune from the run."""
    from minilm import data

    corpus = tmp_path / "corpus"
    corpus.mkdir()
    for book in data.load_gutenberg()[:3]:
        (corpus / f"{book.title[:20]}.txt").write_text("\n\n".join(book.paragraphs[:150]))
    run_dir = tmp_path / "run"
    args = [f"corpus={corpus}", "max_steps=60", "noise=infilling+rotation", "mask_ratio=0.2"]
    assert pretrain_main([*PRETRAIN, *args, f"run_dir={run_dir}"]) == 0
    assert "sample ('It was' + <mask>):" in capsys.readouterr().out
    saved = json.loads((run_dir / "config.json").read_text())
    assert saved["objective"] == {**dataclasses.asdict(DenoiseSettings()), "noise": "infilling+rotation",
                                  "mask_ratio": 0.2}  # fmt: skip
    train = [e for e in read_metrics(run_dir / "metrics.jsonl") if e["split"] == "train"]
    first, last = (sum(e["loss"] for e in part) / 2 for part in (train[:2], train[-2:]))
    assert last < first - 1.0, (first, last)

    quick = ["max_train_examples=32", "max_eval_examples=16", "max_steps=2", "batch_size=8", "progress=false"]
    for task, length in (("sst2", 48), ("squad2_gen", 48)):  # the BART-way classifier, then text to text
        tuned = tmp_path / task
        argv = ["--task", task, "--pretrained", str(run_dir), *quick, f"max_length={length}", f"run_dir={tuned}"]
        assert finetune_main(argv) == 0
        results = json.loads((tuned / "results.json").read_text())
        assert results["model"] == "bart" and list(results["metrics"]) == list(TASKS[task].metrics)


def test_text_to_text_examples_become_sources_and_target_labels(tokenizer):
    kind = Seq2SeqKind(TASKS["squad2_gen"])
    examples = [Seq2SeqExample("a", "question: who? context: the sea", "the sea", ("the sea",)),
                Seq2SeqExample("b", "question: when? context: never", NO_ANSWER_TEXT, ())]  # fmt: skip
    encoded = kind.encode_examples(examples, TaskEncoder(tokenizer, 16, "last", max_target_length=4))
    batch = kind.collate(encoded)
    targets = tokenizer(["the sea", NO_ANSWER_TEXT], max_length=4, truncation=True, padding=False).input_ids
    for row, target in enumerate(targets):  # <s> text </s>, cut to 4 tokens, then unscored padding
        assert target[0] == tokenizer.bos_id and len(target) <= 4
        assert batch["labels"][row].tolist() == target + [IGNORE_INDEX] * (batch["labels"].size(1) - len(target))
    assert batch["input_ids"].size(1) <= 16 and int(kind.counts(batch)) == sum(map(len, targets))
    scores = kind.score(examples, ["the sea", NO_ANSWER_TEXT])  # "no answer" is the empty answer: both right
    assert scores["squad_em"] == 100.0 and scores["squad_f1"] == 100.0 and scores["rougeL"] == 1.0
    assert kind.score(examples, ["sea gull", "the sea"])["squad_em"] == 0.0  # SQuAD drops articles, not words


def synthetic_qa(split):
    """'question: what colour is the X? context: ... the X is C ...' -> C: an answer to copy from the source."""
    return colour_questions(split, 300 if split == "train" else 60)


def test_text_to_text_fine_tuning_learns_beyond_a_constant_answer(tmp_path, monkeypatch):
    monkeypatch.setitem(TASKS, "squad2_gen", dataclasses.replace(TASKS["squad2_gen"], loader=synthetic_qa))
    argv = ["--task=squad2_gen", "--model=bart", "model.n_encoder_layers=2", "model.n_decoder_layers=2"]
    argv += ["model.d_model=64", "model.n_heads=4", "model.d_ff=128", "model.max_len=64", "max_length=48"]
    argv += ["max_steps=150", "batch_size=16", "lr=3e-3", "warmup_steps=10", "vocab_size=300", "progress=false"]
    argv += ["threads=1", "max_target_length=6", "num_beams=2", f"run_dir={tmp_path}"]
    assert finetune_main(argv) == 0
    results = json.loads((tmp_path / "results.json").read_text())
    colours = [e.target for e in synthetic_qa("validation")]
    constant = 100 * max(colours.count(c) for c in set(colours)) / len(colours)  # always the commonest colour
    assert results["metrics"]["squad_em"] >= max(60.0, constant + 30), results["metrics"]


@pytest.mark.parametrize(
    "argv, message",
    [
        (["minilm.train", *PRETRAIN[:4], "noise=shuffle"], "unknown noise 'shuffle' in 'shuffle': use "),
        (["minilm.train", *PRETRAIN[:4], "mask_ratio=1.5"], r"mask_ratio"),
        (["minilm.train", *PRETRAIN[:4], "poisson_lambda=0"], r"poisson_lambda"),
        (["minilm.finetune", "--task=squad2_gen", "--model=gpt", "max_train_examples=8"], "needs an encoder-decoder"),
        (["minilm.finetune", "--task=squad2_gen", "--model=bart", "num_beams=0"], "num_beams >= 1"),
    ],
)
def test_bad_settings_are_one_clear_message_from_the_cli(argv, message, tmp_path):
    done = subprocess.run(
        [sys.executable, "-m", *argv, "vocab_size=300", f"run_dir={tmp_path / 'run'}"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "Traceback" not in done.stderr, done.stderr
    assert re.search(message, lines[0]), lines[0]
