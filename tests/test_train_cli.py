"""``python -m minilm.train``: help, a tiny end-to-end run with resume, and one clear message per bad input."""

import dataclasses
import subprocess
import sys

import pytest

from minilm.train import checkpoint as ckpt
from minilm.train.pretrain import PretrainConfig, main
from minilm.train.trainer import TrainConfig, read_metrics

TINY = [
    "corpus=tinyshakespeare",
    "vocab_size=400",
    "seq_len=32",
    "model.n_layers=1",
    "model.d_model=32",
    "model.n_heads=2",
    "batch_size=8",
    "log_every=1",
    "eval_every=0",
    "eval_batches=2",
    "progress=false",
    "threads=1",
]


def test_help_documents_every_option():
    done = subprocess.run([sys.executable, "-m", "minilm.train", "--help"], capture_output=True, text=True)
    assert done.returncode == 0
    for cls in (PretrainConfig, TrainConfig):
        for field in dataclasses.fields(cls):
            assert f"{field.name}=" in done.stdout, field.name
    for words in ("--resume", "--config", "torchrun", "gpt: sizes tiny, small, gpt1, gpt2", "clm (models: gpt)"):
        assert words in done.stdout


def test_a_tiny_run_ends_with_perplexity_sample_and_run_dir_then_resumes(tmp_path, capsys):
    run_dir = tmp_path / "run"
    assert main([*TINY, "max_steps=4", "save_every=2", "sample_tokens=8", f"run_dir={run_dir}"]) == 0
    out = capsys.readouterr().out
    assert "perplexity" in out and "sample: It was" in out and f"run directory: {run_dir}" in out
    assert (run_dir / "tokenizer").is_dir() and ckpt.find_checkpoint(run_dir).name == "step_00000004"

    assert main(["--resume", str(run_dir), "max_steps=6", "sample_tokens=0"]) == 0
    assert "at step 4" in capsys.readouterr().out
    steps = [e["step"] for e in read_metrics(run_dir / "metrics.jsonl") if e["split"] == "train"]
    assert steps == [1, 2, 3, 4, 5, 6]


def test_a_toml_config_with_overrides(tmp_path, capsys):
    config = tmp_path / "job.toml"
    config.write_text("[job]\nseq_len = 16\n[train]\nmax_steps = 2\n[model]\nn_layers = 1\n")
    cli = [a for a in TINY if not a.startswith("seq_len")]  # the command line would win over the file
    assert main(["--config", str(config), *cli, "max_steps=1", "sample_tokens=0", f"run_dir={tmp_path / 'r'}"]) == 0
    assert "examples of up to 16 tokens" in capsys.readouterr().out
    assert len([e for e in read_metrics(tmp_path / "r" / "metrics.jsonl") if e["split"] == "train"]) == 1


@pytest.mark.parametrize(
    "args, message",
    [
        (["--model", "bret"], "unknown model 'bret'"),
        (["--objective", "mlmm"], "unknown objective 'mlmm'"),
        (["learning_rate=1"], "unknown key 'learning_rate'"),
        (["max_steps=ten"], "'max_steps' expects int"),
        (["precision=fp8"], "precision='fp8' is not one of"),
        (["model.n_layer=2"], "unknown model key 'n_layer'; did you mean 'n_layers'"),
        (["size=huge"], "model 'gpt' has no size 'huge'"),
        (["seq_len=300"], "seq_len=300 is longer than the model allows (max_len=256)"),
        (["lr"], "is not of the form key=value"),
        (["corpus=/no/such/file.txt"], "neither one of gutenberg"),
    ],
)
def test_bad_input_is_one_clear_message(args, message, tmp_path, capsys):
    assert main([*TINY, *args, f"run_dir={tmp_path}"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and message in err and "Traceback" not in err


def test_empty_and_too_small_corpora(tmp_path, capsys):
    empty = tmp_path / "empty.txt"
    empty.write_text("\n\n")
    assert main([*TINY, f"corpus={empty}", f"run_dir={tmp_path / 'a'}"]) == 2
    assert "is empty" in capsys.readouterr().err
    small = tmp_path / "small.txt"
    small.write_text("Just a few words.\n\nAnd a few more.")
    assert main([*TINY, f"corpus={small}", "vocab_size=300", f"run_dir={tmp_path / 'b'}"]) == 2
    assert "too small for seq_len=32" in capsys.readouterr().err


def test_resuming_into_another_model_or_a_corrupt_checkpoint_fails_cleanly(tmp_path, capsys):
    run_dir = tmp_path / "run"
    assert main([*TINY, "max_steps=2", "sample_tokens=0", f"run_dir={run_dir}"]) == 0
    capsys.readouterr()
    assert main(["--resume", str(run_dir), "model.d_model=64", "max_steps=3"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: checkpoint") and "shape" in err and "Traceback" not in err

    weights = ckpt.find_checkpoint(run_dir) / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:-100])
    assert main(["--resume", str(run_dir), "max_steps=3"]) == 1
    assert "corrupt or truncated" in capsys.readouterr().err
    assert main(["--resume", str(tmp_path / "nothing")]) == 2
    assert "no config.json" in capsys.readouterr().err


@pytest.mark.parametrize(
    "args",
    [
        ["--model", "bert", "--objective", "mlm"],
        ["--model", "roberta", "--objective", "mlm", "masking=static", "whole_word=true", "format=doc_sentences"],
        ["--model", "elmo", "--objective", "bilm", "model.char_embed_dim=4"],
    ],
    ids=["bert-mlm", "roberta-static-whole-word", "elmo-bilm"],
)
def test_registered_models_and_objectives_train_from_the_cli(args, tmp_path, capsys):
    tiny = [a for a in TINY if not a.startswith(("model.", "vocab_size"))]
    assert main([*tiny, *args, "vocab_size=600", "max_steps=3", "eval_every=3", f"run_dir={tmp_path}"]) == 0
    out = capsys.readouterr().out
    assert f"({args[3]})" in out and "validation loss" in out
    train = [e["loss"] for e in read_metrics(tmp_path / "metrics.jsonl") if e["split"] == "train"]
    assert len(train) == 3 and all(0 < loss < 20 for loss in train)


def test_next_sentence_prediction_needs_pairs(tmp_path, capsys):
    args = ["--model", "bert", "--objective", "mlm+nsp", "format=full_sentences", f"run_dir={tmp_path}"]
    assert main([*TINY[:3], *args]) == 2
    assert "needs sentence pairs" in capsys.readouterr().err
    assert main([*TINY[:3], "--model", "gpt", "--objective", "mlm", f"run_dir={tmp_path}"]) == 2
    assert "objective 'mlm' trains bert, roberta, not model 'gpt'" in capsys.readouterr().err
