"""The course's pretrained checkpoints (checkpoints/course/<name>/): they load in one call, their files are the ones
recorded (sha256), and they model held-out Gutenberg text far better than the same network untrained."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch

import minilm.models.course as course
from minilm.analysis import recorded_results
from minilm.files import file_sha256
from minilm.finetune.model import from_pretrained as run_body
from minilm.models import GPT, Bert, course_checkpoint, course_run_dir, untrained_like
from minilm.models.elmo import ELMo
from minilm.train import pretrain
from minilm.train.registry import get_model, get_objective, needed_settings, objective_config
from minilm.train.trainer import default_collate
from minilm.utils import seed_all

ROOT = Path(__file__).resolve().parents[1]
RECORD = recorded_results("course_checkpoints", ROOT).results
CLASSES = {"gpt": GPT, "bert": Bert, "elmo": ELMo}


@pytest.fixture(scope="module", params=course.COURSE_MODELS)
def loaded(request):
    return request.param, course_checkpoint(request.param, start=ROOT)


def test_every_course_model_is_recorded():
    assert set(RECORD) == set(course.COURSE_MODELS)


def test_each_loads_in_one_call_in_eval_mode_in_float32(loaded):
    name, (model, tokenizer, folder) = loaded
    assert isinstance(model, CLASSES[name])
    assert not model.training
    assert {p.dtype for p in model.parameters()} == {torch.float32}
    assert model.config.vocab_size == len(tokenizer)
    assert folder == ROOT / "checkpoints" / "course" / name
    assert sum(p.numel() for p in model.parameters()) == RECORD[name]["parameters"]


def test_files_match_the_record_sha256(loaded):
    name, (_, _, folder) = loaded
    recorded = RECORD[name]["files"]
    assert sorted(recorded) == sorted(p.name for p in folder.iterdir() if p.is_file())
    for file, facts in recorded.items():
        assert file_sha256(folder / file) == facts["sha256"], f"{folder / file} is not the recorded file"
    assert RECORD[name]["total_bytes"] <= 8.5e6, "each checkpoint stays small (float16)"


def test_bert_keeps_its_mlm_head():
    model = course_checkpoint("bert", start=ROOT).model
    assert model.mlm_head is not None


@torch.no_grad()
def held_out_loss(name: str, model, tokenizer, n_examples: int = 24) -> float:
    """The pretraining objective's mean loss on the first held-out examples of the Gutenberg novels."""
    job = pretrain.PretrainConfig(**RECORD[name]["job"])
    objective = get_objective(job.objective, job.model)
    _, val_docs = pretrain.split_documents(pretrain.load_documents(job.corpus), job.validation_fraction)
    examples, collate = objective.prepare(val_docs[:3], tokenizer, job, objective_config(objective, {}), True)
    batch = (collate or default_collate)([examples[i] for i in range(n_examples)])
    return float(objective.loss(model.eval(), batch).loss)


def untrained(name: str, tokenizer):
    job = pretrain.PretrainConfig(**RECORD[name]["job"])
    entry, objective = get_model(job.model), get_objective(job.objective, job.model)
    seed_all(0)
    model, _ = pretrain.build_model(job, RECORD[name]["model_overrides"], tokenizer, needed_settings(entry, objective))
    return model


def test_held_out_perplexity_is_far_below_the_untrained_models(loaded):
    name, (model, tokenizer, _) = loaded
    trained = math.exp(held_out_loss(name, model, tokenizer))
    random = math.exp(held_out_loss(name, untrained(name, tokenizer), tokenizer))
    assert random > 0.5 * len(tokenizer), "untrained: about uniform over the vocabulary"
    assert trained < 0.1 * random, f"{name}: held-out perplexity {trained:.0f} vs {random:.0f} untrained"
    assert trained < 3 * RECORD[name]["validation"]["perplexity"], "in line with the recorded validation perplexity"


def test_course_run_dir_fine_tunes_the_same_weights(tmp_path):
    model, tokenizer, _ = course_checkpoint("gpt", start=ROOT)
    body = run_body(str(course_run_dir("gpt", tmp_path / "run", start=ROOT)), {})
    assert body.tokenizer.backend.get_vocab() == tokenizer.backend.get_vocab()
    expected = model.state_dict()
    assert all(torch.equal(t, expected[k]) for k, t in body.model.state_dict().items())


def test_unknown_and_missing_checkpoints_say_what_to_do(tmp_path, monkeypatch):
    with pytest.raises(ValueError, match="gpt, bert, elmo"):
        course_checkpoint("roberta")
    monkeypatch.setattr(course, "FOLDER", Path("no-such-folder") / "course")
    with pytest.raises(FileNotFoundError, match="experiments/course_checkpoints.py"):
        course_checkpoint("gpt", start=tmp_path)


def test_elmo_folder_of_another_type_is_refused(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "bert"}))
    tokenizer = course_checkpoint("elmo", start=ROOT).tokenizer
    with pytest.raises(course.CheckpointError, match="not an ELMo checkpoint"):
        course.load_elmo(tmp_path, tokenizer)


def test_untrained_like_is_the_same_architecture_freshly_initialised(loaded):
    name, checkpoint = loaded
    fresh, again = untrained_like(checkpoint, seed=0), untrained_like(checkpoint, seed=0)
    trained = checkpoint.model.state_dict()
    assert fresh.state_dict().keys() == trained.keys()
    assert all(torch.equal(t, again.state_dict()[k]) for k, t in fresh.state_dict().items()), "seeded"
    weights = [k for k, t in trained.items() if t.is_floating_point() and t.dim() == 2]
    assert not any(torch.equal(fresh.state_dict()[k], trained[k]) for k in weights)
    loss = held_out_loss(name, fresh, checkpoint.tokenizer)
    assert math.exp(loss) > 0.5 * len(checkpoint.tokenizer)


def test_course_run_dir_untrained_is_step_zero(tmp_path):
    checkpoint = course_checkpoint("gpt", start=ROOT)
    body = run_body(str(course_run_dir("gpt", tmp_path / "run", start=ROOT, untrained=True)), {})
    assert "@0" in body.label
    expected = untrained_like(checkpoint).state_dict()
    assert all(torch.equal(t, expected[k]) for k, t in body.model.state_dict().items())
