"""``python -m minilm.train``: help, a tiny end-to-end run with resume, and one clear message per bad input."""

import dataclasses
import json
import subprocess
import sys
from dataclasses import dataclass

import pytest
import torch

from minilm.recipes.bert import MaskedLMConfig, MaskedLMPairConfig
from minilm.recipes.gpt import clm_loss
from minilm.recipes.language_model import lm_blocks
from minilm.train import checkpoint as ckpt
from minilm.train import registry
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
    objective_keys = done.stdout[done.stdout.index("[objective] objective.<key>=value") :]
    for cls in (MaskedLMConfig, MaskedLMPairConfig):  # every objective's settings, with their defaults
        for field in dataclasses.fields(cls):
            assert f"{field.name}={getattr(cls(), field.name)}" in objective_keys, field.name
    assert "format=segment_pair        segment_pair (BERT's) or sentence_pair" in objective_keys
    assert 'masking=dynamic            "dynamic" (new masks every batch)' in objective_keys  # inherited comment
    assert "bert: sizes tiny, small" in done.stdout and "kind encoder" in done.stdout and "kind decoder" in done.stdout


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
        (["--model", "bert", "--objective", "mlm", "objective.formt=x"], "unknown objective key 'formt'; did you mean"),
        (["--model", "bert", "--objective", "mlm", "maskng=static"], "unknown key 'maskng'; did you mean 'masking'?"),
        (["--model", "bert", "--objective", "mlm", "format=pairs"], "format='pairs' is not one of segment_pair"),
        (
            ["format=segment_pair"],
            "format= is a setting of objective all_tokens_mlm, distill, mlm, mlm+nsp, mlm+sop, replace_mlm, rtd, "
            "rtd_15, not of clm (it takes no settings)",
        ),
        (["objective.format=doc"], "objective 'clm' takes no settings: objective.format has nothing to set (format is"),
        (["--model", "bert", "--objective", "mlm", "whole_word=maybe"], "objective key 'whole_word' expects bool"),
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


def test_lamb_from_the_command_line_is_recorded_and_resumes_only_as_lamb(tmp_path, capsys):
    run_dir = tmp_path / "run"
    assert main([*TINY, "optimizer=lamb", "max_steps=2", "sample_tokens=0", f"run_dir={run_dir}"]) == 0
    assert json.loads((run_dir / "config.json").read_text())["train"]["optimizer"] == "lamb"
    assert ckpt.read_meta(run_dir)["config"]["train"]["optimizer"] == "lamb"
    capsys.readouterr()
    assert main(["--resume", str(run_dir), "optimizer=adamw", "max_steps=3"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: --resume {run_dir} was trained with optimizer=lamb; its optimizer state cannot ")
    assert "continue as optimizer=adamw: drop optimizer=adamw to resume it" in err and "Traceback" not in err
    assert main(["--resume", str(run_dir), "max_steps=3", "sample_tokens=0"]) == 0  # keeps the saved optimizer
    assert "at step 2" in capsys.readouterr().out
    assert json.loads((run_dir / "config.json").read_text())["train"]["optimizer"] == "lamb"


def test_a_run_saved_before_the_optimizer_setting_resumes_as_adamw(tmp_path, capsys):
    run_dir = tmp_path / "run"
    assert main([*TINY, "max_steps=2", "sample_tokens=0", f"run_dir={run_dir}"]) == 0
    meta_file = ckpt.find_checkpoint(run_dir) / ckpt.META_FILE
    for path, settings in ((run_dir / "config.json", None), (meta_file, "config")):  # as an older minilm wrote them
        saved = json.loads(path.read_text())
        train = (saved[settings] if settings else saved)["train"]
        del train["optimizer"], train["eps"]
        path.write_text(json.dumps(saved))
    capsys.readouterr()
    assert main(["--resume", str(run_dir), "optimizer=lamb", "max_steps=3"]) == 2
    assert "was trained with optimizer=adamw; its optimizer state cannot continue as optimizer=lamb" in (
        capsys.readouterr().err
    )
    assert main(["--resume", str(run_dir), "max_steps=3", "sample_tokens=0"]) == 0
    assert "at step 2" in capsys.readouterr().out
    assert json.loads((run_dir / "config.json").read_text())["train"]["optimizer"] == "adamw"


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
    err = capsys.readouterr().err
    assert (
        "objective 'mlm' trains bert, roberta, albert, electra, not model 'gpt'; gpt trains with objective clm" in err
    )


def test_objective_settings_from_toml_and_command_line_are_recorded_and_kept_on_resume(tmp_path, capsys):
    config = tmp_path / "job.toml"
    config.write_text('[objective]\nmasking = "static"\nformat = "sentence_pair"\n')
    run_dir = tmp_path / "run"
    tiny = [a for a in TINY if not a.startswith(("model.", "vocab_size"))]
    args = ["--model", "bert", "--objective", "mlm", "--config", str(config), "objective.whole_word=true"]
    args += ["format=doc_sentences", "vocab_size=600", "max_steps=2", "sample_tokens=0", f"run_dir={run_dir}"]
    assert main([*tiny, *args]) == 0  # the command line's format= wins over the file's
    recorded = json.loads((run_dir / "config.json").read_text())
    expected = {"format": "doc_sentences", "masking": "static", "whole_word": True, "ngram": 1}
    assert recorded["objective"] == expected and "format" not in recorded["job"]
    assert main(["--resume", str(run_dir), "max_steps=3"]) == 0  # the resumed run keeps the objective's settings
    assert json.loads((run_dir / "config.json").read_text())["objective"] == expected
    assert "at step 2" in capsys.readouterr().out
    # another value would make config.json misstate what trained the first steps: refused, the record kept
    assert main(["--resume", str(run_dir), "max_steps=4", "masking=dynamic"]) == 2
    assert "was trained with masking=static, not dynamic" in capsys.readouterr().err
    assert json.loads((run_dir / "config.json").read_text())["objective"] == expected


def test_a_run_saved_before_objectives_had_settings_still_resumes(tmp_path, capsys):
    """Older config.json files kept format/masking/whole_word under [job] for every run: a masked LM's move to
    [objective], a GPT's are dropped."""
    bert_dir, gpt_dir = tmp_path / "bert", tmp_path / "gpt"
    tiny = [a for a in TINY if not a.startswith(("model.", "vocab_size"))]
    bert = ["--model", "bert", "--objective", "mlm", "masking=static", "format=doc_sentences", "vocab_size=600"]
    assert main([*tiny, *bert, "max_steps=2", "sample_tokens=0", f"run_dir={bert_dir}"]) == 0
    assert main([*TINY, "max_steps=2", "sample_tokens=0", f"run_dir={gpt_dir}"]) == 0
    for run_dir, old in ((bert_dir, None), (gpt_dir, {"format": "full_sentences", "masking": "dynamic"})):
        config = json.loads((run_dir / "config.json").read_text())  # rewritten as an older minilm wrote it
        saved = config.pop("objective") or old
        saved.pop("ngram", None)  # a setting those runs did not have
        config["job"].update(saved, whole_word=False)
        (run_dir / "config.json").write_text(json.dumps(config))
    assert main(["--resume", str(bert_dir), "max_steps=3"]) == 0
    assert json.loads((bert_dir / "config.json").read_text())["objective"] == {
        "format": "doc_sentences",
        "masking": "static",
        "whole_word": False,
        "ngram": 1,  # the default, as those runs masked
    }
    assert main(["--resume", str(gpt_dir), "max_steps=3"]) == 0
    assert "format" not in json.loads((gpt_dir / "config.json").read_text())["job"]
    assert capsys.readouterr().out.count("at step 2") == 2


@dataclass
class SmoothedConfig:
    smoothing: float = 0.0  # a setting no other section has
    seed: int = 0  # a setting [job] and [train] have too: ambiguous as a short key


def test_a_short_key_of_the_run_and_the_objective_is_ambiguous(tmp_path, monkeypatch, capsys):
    registry.objectives()  # the built-ins first
    smoothed = registry.ObjectiveEntry("smoothed", ("gpt",), lm_blocks, clm_loss, config_class=SmoothedConfig)
    monkeypatch.setitem(registry.OBJECTIVES, "smoothed", smoothed)
    assert main([*TINY, "--objective", "smoothed", "seed=3", f"run_dir={tmp_path}"]) == 2
    err = capsys.readouterr().err
    assert "key 'seed' is ambiguous: smoothed's settings and [job][train] have it; write job.seed=3 or " in err
    assert "train.seed=3 or objective.seed=3" in err
    assert main([*TINY, "--objective", "mlm", "--model", "bert", "smoothing=0.1", f"run_dir={tmp_path}"]) == 2
    err = capsys.readouterr().err
    settings = "format, masking, whole_word, ngram"
    assert f"smoothing= is a setting of objective smoothed, not of mlm (its settings: {settings})" in err
    run = [*TINY, "--objective", "smoothed", "smoothing=0.1", "objective.seed=2", "job.seed=1", "max_steps=1"]
    assert main([*run, "sample_tokens=0", f"run_dir={tmp_path}"]) == 0  # qualified keys are never ambiguous
    recorded = json.loads((tmp_path / "config.json").read_text())
    assert recorded["objective"] == {"smoothing": 0.1, "seed": 2} and recorded["job"]["seed"] == 1
    assert recorded["train"]["seed"] == 0


def _cli(module: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", module, *args], capture_output=True, text=True, timeout=300)


def _one_error_line(done: subprocess.CompletedProcess, code: int, message: str) -> None:
    assert done.returncode == code, done.stderr
    assert "Traceback" not in done.stderr and done.stderr.count("error: ") == 1, done.stderr
    assert done.stderr.startswith("error: ") and message in done.stderr, done.stderr


@pytest.fixture(scope="module")
def binary_corpus(tmp_path_factory):
    """A corpus that fails when read: a setting that fails with its own message was checked before any data."""
    path = tmp_path_factory.mktemp("corpus") / "binary.txt"
    path.write_bytes(bytes(range(256)) * 8)
    return path


@pytest.mark.parametrize(
    "args, message",
    [
        (["log_every=0"], "log_every must be at least 1, got 0"),
        (["keep_last=0"], "keep_last must be at least 1, got 0"),
        (["eval_batches=-1"], "eval_batches must be >= 0 (all of the eval data), got -1"),
        (["lr=nan"], "lr must be a positive number, got nan"),
        (["beta2=inf"], "beta2 must be between 0.0 and 1.0, got inf"),
        (["device=banana"], "device='banana' is not a device name; use device=auto, cpu, cuda, cuda:N or mps"),
        (["seed=-1"], "seed must be >= 0, got -1"),
        (["train.seed=-1"], "seed must be between 0 and 2**32 - 1, got -1"),
        (["threads=-2"], "threads must be >= 0 (torch's default), got -2"),
        (["optimizer=sgd"], "optimizer='sgd' is not one of adamw, lamb"),
        (["eps=-1e-8"], "eps must be between 0.0 and 1.0, got -1e-08"),
        (["model.n_heads=3"], "d_model=32 is not divisible by n_heads=3: choose n_heads among 1, 2, 4, 8, 16, 32"),
        (["--model", "bert", "--objective", "mlm", "model.n_heads=3"], "d_model=32 is not divisible by n_heads=3"),
        (["--model", "roberta", "--objective", "mlm", "model.n_heads=5"], "not divisible by n_heads=5"),
        (["vocab_size=5"], "vocab_size=5 is too small for gpt2: its 1 special tokens and 256 byte tokens need"),
        (["--model", "bert", "--objective", "mlm", "vocab_size=5"], "too small for bert: its 5 special tokens need"),
        (["--model", "elmo", "--objective", "bilm", "vocab_size=256"], "need vocab_size >= 257"),
    ],
)
def test_bad_settings_are_one_error_line_before_any_data_is_read(args, message, tmp_path, binary_corpus):
    done = _cli("minilm.train", *TINY, f"corpus={binary_corpus}", *args, f"run_dir={tmp_path / 'run'}")
    _one_error_line(done, 2, message)
    assert not (tmp_path / "run").exists()  # no tokenizer trained, nothing written


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has CUDA")
def test_a_device_this_machine_lacks_is_one_error_line(tmp_path, binary_corpus):
    done = _cli("minilm.train", *TINY, f"corpus={binary_corpus}", "device=cuda", f"run_dir={tmp_path}")
    _one_error_line(done, 2, "device='cuda', but ")
    assert "use device=cpu or device=auto" in done.stderr


@pytest.mark.parametrize(
    "content, message",
    [
        (bytes(range(256)) * 8, "is binary (not text); give a UTF-8 .txt file or a folder of them"),
        (b"\x7fELF\x02\x01\x01" + bytes(range(128, 256)), "is binary (not text)"),
        ("Un café au lait.\n\nÀ bientôt.".encode("latin-1"), "is not UTF-8 text (byte 0xe9 at offset 6; Latin-1"),
    ],
    ids=["binary", "elf", "latin-1"],
)
def test_a_corpus_that_is_not_utf8_text_names_the_file(content, message, tmp_path):
    corpus = tmp_path / "corpus" / "book.txt"
    corpus.parent.mkdir()
    corpus.write_bytes(content)
    done = _cli("minilm.train", *TINY, f"corpus={corpus.parent}", f"run_dir={tmp_path / 'run'}")
    _one_error_line(done, 2, f"corpus file {corpus} {message}")


@pytest.mark.parametrize(
    "args, message",
    [
        (["model.d_model=32", "model.n_heads=3"], "d_model=32 is not divisible by n_heads=3"),
        (["vocab_size=5"], "vocab_size=5 is too small for gpt2"),
        (["log_every=0"], "log_every must be at least 1, got 0"),
        (["device=banana"], "device='banana' is not a device name"),
        (["optimizer=LAMB"], "optimizer='LAMB' is not one of adamw, lamb"),
    ],
)
def test_fine_tuning_settings_are_one_error_line(args, message, tmp_path):
    done = _cli("minilm.finetune", "--task", "sst2", "progress=false", *args, f"run_dir={tmp_path / 'run'}")
    _one_error_line(done, 2, message)
    assert not (tmp_path / "run").exists()


def test_the_sst2_sentences_corpus_is_the_training_split_without_labels():
    from minilm.data import load_task
    from minilm.train.pretrain import load_documents

    (document,) = load_documents("sst2-sentences")
    assert document.paragraphs == [e.text for e in load_task("sst2", "train")]
    # GLUE's dev sentences (the course's test split) are other reviews: none is, or is inside, a training phrase,
    # but for two of two and three tokens ("bad .", "very bad .")
    training_text = "\n".join(document.paragraphs)
    seen = [e.text for e in load_task("sst2", "test") if e.text in training_text]
    assert len(seen) <= 2 and all(len(text.split()) <= 3 for text in seen), seen
