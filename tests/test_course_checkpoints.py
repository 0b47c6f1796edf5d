"""The course's pretrained checkpoints (checkpoints/course/<name>/): they load in one call, their files are the ones
recorded (sha256), and they model held-out Gutenberg text far better than the same network untrained."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import pytest
import torch
from sklearn.metrics import roc_auc_score

import minilm.models.course as course
from minilm.analysis import recorded_results
from minilm.analysis.plateau import PLATEAU_MARGIN, past_plateau
from minilm.files import file_sha256
from minilm.finetune.model import from_pretrained as run_body
from minilm.models import GPT, T5, Albert, Bart, Bert, DistilBert, course_checkpoint, course_run_dir, untrained_like
from minilm.models.electra import ElectraPretraining
from minilm.models.elmo import ELMo
from minilm.recipes.bert import masked_lm_examples
from minilm.recipes.electra import generate as electra_generate
from minilm.train import pretrain

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from experiments.course_checkpoints import JOBS, held_out, settings_of  # noqa: E402

RECORD = recorded_results("course_checkpoints", ROOT).results
CLASSES = {
    "gpt": GPT,
    "bert": Bert,
    "elmo": ELMo,
    "albert": Albert,
    "electra": ElectraPretraining,
    "bart": Bart,
    "t5": T5,
    "distilbert": DistilBert,
}
N_EXAMPLES = 48  # held-out examples scored by these tests (the record scores all of them)


@pytest.fixture(scope="module", params=course.COURSE_MODELS)
def loaded(request):
    return request.param, course_checkpoint(request.param, start=ROOT)


def configs(model) -> list:
    """The configs of a checkpoint's networks (ELECTRA: discriminator and generator)."""
    if isinstance(model, ElectraPretraining):
        return [model.discriminator.config, model.generator.config]
    return [model.config]


def test_every_course_model_is_recorded():
    assert set(RECORD) == set(course.COURSE_MODELS) == set(CLASSES) == set(JOBS)


def test_each_loads_in_one_call_in_eval_mode_in_float32(loaded):
    name, (model, tokenizer, folder) = loaded
    assert type(model) is CLASSES[name]
    assert not model.training
    assert {p.dtype for p in model.parameters()} == {torch.float32}
    assert all(config.vocab_size == len(tokenizer) for config in configs(model))
    assert folder == ROOT / "checkpoints" / "course" / name
    assert sum(p.numel() for p in model.parameters()) == RECORD[name]["parameters"]


def test_files_match_the_record_sha256(loaded):
    name, (_, _, folder) = loaded
    recorded = RECORD[name]["files"]
    assert sorted(recorded) == sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file())
    for file, facts in recorded.items():
        assert file_sha256(folder / file) == facts["sha256"], f"{folder / file} is not the recorded file"
    assert RECORD[name]["total_bytes"] <= 8.5e6, "each checkpoint stays small (float16)"


def test_pretraining_heads_are_kept():
    assert course_checkpoint("bert", start=ROOT).model.mlm_head is not None
    assert course_checkpoint("distilbert", start=ROOT).model.mlm_head is not None
    albert = course_checkpoint("albert", start=ROOT).model
    assert albert.mlm_head is not None and albert.config.sop and albert.config.share == "all"
    electra = course_checkpoint("electra", start=ROOT).model
    assert electra.share == "embeddings"
    assert electra.generator.embedding.token.weight is electra.discriminator.embedding.token.weight, "shared again"
    assert electra.generator.config.d_model < electra.discriminator.config.d_model


@pytest.mark.parametrize("name", course.COURSE_MODELS)
def test_the_record_states_each_model_past_the_unigram_plateau(name):
    entry = RECORD[name]
    assert entry["held_out_loss"] == entry["validation"]["loss"]
    assert entry["unigram_entropy"] == entry["validation"]["unigram_entropy"]
    # past the plateau: at least a nat below it, the course's mark (minilm.analysis.plateau.past_plateau)
    assert past_plateau(entry["held_out_loss"], entry["unigram_entropy"]), f"{name} is not a nat below the plateau"
    assert entry["untrained_validation"]["loss"] > entry["unigram_entropy"], "untrained: worse than frequencies"


def held_out_documents(spec):
    return pretrain.split_documents(pretrain.load_documents(spec.job.corpus), spec.job.validation_fraction)[1]


def held_out_loss(name: str, model, tokenizer) -> dict:
    """The checkpoint's language-model loss on the first held-out examples, as the record scores it."""
    return held_out(JOBS[name], model, tokenizer, limit=N_EXAMPLES)


def test_held_out_loss_is_far_below_the_untrained_models_and_the_plateau(loaded):
    name, (model, tokenizer, _) = loaded
    trained = held_out_loss(name, model, tokenizer)
    random = held_out_loss(name, untrained_like(loaded[1]), tokenizer)
    assert math.exp(random["loss"]) > 0.5 * len(tokenizer), "untrained: about uniform over the vocabulary"
    assert trained["loss"] < random["loss"] - 2.0, f"{name}: {trained['loss']:.2f} vs {random['loss']:.2f} untrained"
    # the plateau as the record measures it, on the whole split (a few hundred tokens' entropy is biased low)
    assert RECORD[name]["unigram_entropy"] - trained["loss"] > 0.5 * PLATEAU_MARGIN, f"{name}: near the plateau"
    assert abs(trained["loss"] - RECORD[name]["held_out_loss"]) < 0.5, "in line with the recorded held-out loss"


def test_electra_discriminator_detects_its_generators_replacements():
    """The discriminator is only just off its own plateau (the loss of predicting the replacement rate everywhere):
    better than the base rate, and it ranks replaced tokens above originals more often than an untrained one."""
    entry = RECORD["electra"]["validation"]
    assert 0.05 < entry["replaced_rate"] < 0.15, "15% masked, some samples equal to the original"
    assert entry["parts"]["rtd"] < entry["rtd_base_rate_entropy"], "below the base rate's entropy"
    checkpoint = course_checkpoint("electra", start=ROOT)
    spec = JOBS["electra"]
    pair = checkpoint.model
    pair.settings = settings_of(spec)
    examples, collate = masked_lm_examples(
        held_out_documents(spec), checkpoint.tokenizer, spec.job, pair.settings, True
    )
    batch = collate([examples[i] for i in range(256)])
    with torch.no_grad():
        _, corrupted, replaced = electra_generate(pair, batch)  # the trained generator's samples, for both
        scores = {
            name: model.discriminator.rtd_logits(
                model.discriminator.features(corrupted, batch["attention_mask"]).last_hidden_state
            )
            for name, model in (("trained", pair), ("untrained", untrained_like(checkpoint)))
        }
    real = batch["attention_mask"].bool()
    auc = {name: roc_auc_score(replaced[real].numpy(), logits[real].numpy()) for name, logits in scores.items()}
    assert auc["trained"] > 0.55 and abs(auc["untrained"] - 0.5) < 0.05, auc


def test_course_run_dir_fine_tunes_the_same_weights(tmp_path):
    model, tokenizer, _ = course_checkpoint("gpt", start=ROOT)
    body = run_body(str(course_run_dir("gpt", tmp_path / "run", start=ROOT)), {})
    assert body.tokenizer.backend.get_vocab() == tokenizer.backend.get_vocab()
    expected = model.state_dict()
    assert all(torch.equal(t, expected[k]) for k, t in body.model.state_dict().items())


def test_unknown_and_missing_checkpoints_say_what_to_do(tmp_path, monkeypatch):
    with pytest.raises(ValueError, match="gpt, bert, elmo, albert"):
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
    weights = [k for k, p in checkpoint.model.named_parameters() if p.dim() == 2]  # not buffers (BART's zero bias)
    assert not any(torch.equal(fresh.state_dict()[k], trained[k]) for k in weights)


def test_course_run_dir_untrained_is_step_zero(tmp_path):
    checkpoint = course_checkpoint("gpt", start=ROOT)
    body = run_body(str(course_run_dir("gpt", tmp_path / "run", start=ROOT, untrained=True)), {})
    assert "@0" in body.label
    expected = untrained_like(checkpoint).state_dict()
    assert all(torch.equal(t, expected[k]) for k, t in body.model.state_dict().items())
