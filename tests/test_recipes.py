"""The recipes and the registry: lazy registration, kinds, objective settings, losses with named parts and the
counts that weigh them, and a composite objective (a frozen teacher beside the trained model) from pretraining
through resume to fine-tuning."""

import dataclasses
import json
import subprocess
import sys
from dataclasses import dataclass

import pytest
import safetensors.torch
import torch
import torch.nn.functional as F
from torch import nn

from minilm.finetune import main as finetune_main
from minilm.finetune.model import from_pretrained
from minilm.models.bert import Bert, BertConfig
from minilm.models.elmo import ELMo, ELMoConfig
from minilm.models.gpt import GPT, GPTConfig
from minilm.objectives.causal_lm import causal_lm_loss
from minilm.objectives.labels import IGNORE_INDEX
from minilm.objectives.mlm import masked_positions, mlm_loss
from minilm.recipes.bert import bert_mlm_loss, bert_mlm_nsp_loss
from minilm.recipes.elmo import elmo_bilm_loss
from minilm.recipes.gpt import clm_loss
from minilm.recipes.language_model import lm_blocks
from minilm.train import checkpoint as ckpt
from minilm.train import registry
from minilm.train.config import ConfigError
from minilm.train.pretrain import main as pretrain_main
from minilm.train.trainer import LossOutput, read_metrics

# ---------------------------------------------------------------------------------------------- the registry


def test_the_registry_imports_the_recipes_on_first_use_only():
    code = (
        "import sys; from minilm.train import registry\n"
        "assert not any(m.startswith('minilm.recipes') for m in sys.modules)\n"
        "assert registry.get_model('roberta').kind == 'encoder'\n"
        "assert {'minilm.recipes.gpt', 'minilm.recipes.elmo', 'minilm.recipes.bert'} <= set(sys.modules)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def test_every_built_in_declares_its_kind_and_objectives_their_counts():
    kinds = {name: entry.kind for name, entry in registry.models().items()}
    encoders = ("bert", "roberta", "albert", "electra", "distilbert")
    assert kinds.pop("bart") == kinds.pop("t5") == "encoder-decoder"
    assert kinds == {"gpt": "decoder", "elmo": "decoder", **{name: "encoder" for name in encoders}}
    perplexity = {name: entry.perplexity for name, entry in registry.objectives().items()}
    assert perplexity == {
        **{"clm": True, "bilm": True, "mlm": True, "mlm+nsp": "mlm", "mlm+sop": "mlm"},
        **{"rtd": "generator", "rtd_15": "generator", "replace_mlm": "mlm", "all_tokens_mlm": "generator"},
        "denoise": True,
        "span_corruption": True,
        "distill": "mlm",
    }
    assert all(entry.counts is not None for entry in registry.objectives().values())
    with pytest.raises(ConfigError, match="model 'x' kind='seq2seq' is not one of encoder, decoder, encoder-decoder"):
        registry.ModelEntry("x", GPTConfig, GPT, kind="seq2seq")


def test_objective_settings_and_their_errors():
    mlm, clm = registry.get_objective("mlm"), registry.get_objective("clm")
    settings = registry.objective_config(mlm, {"masking": "static", "whole_word": "true"})
    assert (settings.format, settings.masking, settings.whole_word) == ("full_sentences", "static", True)
    assert registry.objective_config(registry.get_objective("mlm+nsp"), {}).format == "segment_pair"  # BERT's
    assert registry.objective_config(clm, {}) is None
    with pytest.raises(ConfigError, match="objective 'clm' takes no settings: objective.format has nothing to set"):
        registry.objective_config(clm, {"format": "segment_pair"})
    with pytest.raises(ConfigError, match="unknown objective key 'formats'; did you mean 'format'"):
        registry.objective_config(mlm, {"formats": "x"})
    with pytest.raises(ConfigError, match="objective mlm\\+nsp needs sentence pairs"):
        registry.objective_config(registry.get_objective("mlm+nsp"), {"format": "doc_sentences"})


# ---------------------------------------------------------------------------------------------- losses and counts


def blocks(B=3, T=9, V=40):
    return torch.randint(0, V, (B, T + 1), generator=torch.Generator().manual_seed(0))


def test_clm_and_bilm_losses_and_their_counts():
    model = GPT(GPTConfig(vocab_size=40, max_len=16, n_layers=1, n_heads=2, d_model=16)).eval()
    block = blocks()
    out = clm_loss(model, block)
    torch.testing.assert_close(out.loss, causal_lm_loss(model(block[:, :-1]), block))
    assert registry.get_objective("clm").counts(block) == {"loss": 27} and out.n_tokens == 27  # 3 blocks x 9

    elmo = ELMo(ELMoConfig(vocab_size=40, filters=((1, 4), (2, 4)), hidden_size=8, projection_dim=8)).eval()
    out = elmo_bilm_loss(elmo, block)
    assert out.parts.keys() == {"forward", "backward"} and out.weights == {"forward": 0.5, "backward": 0.5}
    torch.testing.assert_close(out.loss, sum(out.weights[k] * out.parts[k] for k in out.parts))
    assert registry.get_objective("bilm").counts(block) == {"forward": 27, "backward": 27}


def masked_batch(B=4, T=12, V=50, seed=0):
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(5, V, (B, T), generator=g)
    labels = torch.where(torch.rand(B, T, generator=g) < 0.3, ids, torch.full_like(ids, IGNORE_INDEX))
    types = (torch.arange(T) >= T // 2).long().expand(B, T)
    return {
        "input_ids": ids,
        "attention_mask": torch.ones_like(ids),
        "token_type_ids": types,
        "labels": labels,
        "next_sentence_label": torch.randint(0, 2, (B,), generator=g),
    }


def tiny_bert():
    torch.manual_seed(0)
    config = BertConfig(vocab_size=50, max_len=16, n_layers=1, n_heads=2, d_model=16, d_ff=32, dropout=0.0)
    return Bert(dataclasses.replace(config, attention_dropout=0.0)).eval()


def test_mlm_nsp_loss_has_named_parts_and_counts_in_their_own_units():
    model, batch = tiny_bert(), masked_batch()
    out = bert_mlm_nsp_loss(model, batch)
    hidden = model.features(batch["input_ids"], batch["attention_mask"], batch["token_type_ids"]).last_hidden_state
    mlm = mlm_loss(model.mlm_logits(hidden, masked_positions(batch["labels"])), batch["labels"])
    nsp = F.cross_entropy(model.nsp_logits(hidden), batch["next_sentence_label"])
    torch.testing.assert_close(out.parts["mlm"], mlm)
    torch.testing.assert_close(out.parts["nsp"], nsp)
    torch.testing.assert_close(out.loss, mlm + nsp)
    counts = registry.get_objective("mlm+nsp").counts(batch)
    assert counts == {"mlm": int((batch["labels"] != IGNORE_INDEX).sum()), "nsp": 4}


def test_counts_weigh_micro_batches_into_the_big_batch_loss():
    """Two micro-batches with different numbers of masked tokens: their parts weighted by count / total count give
    the loss of the batch they make together (the mean of 1/2 each would not)."""
    model, batch = tiny_bert(), masked_batch(B=6)
    batch["labels"][:3, 1:] = IGNORE_INDEX  # few masked tokens in the first half, many in the second
    halves = [{k: v[:3] for k, v in batch.items()}, {k: v[3:] for k, v in batch.items()}]
    whole, parts = bert_mlm_nsp_loss(model, batch), [bert_mlm_nsp_loss(model, h).parts for h in halves]
    counts = [registry.get_objective("mlm+nsp").counts(h) for h in halves]
    for part in ("mlm", "nsp"):
        total = sum(c[part] for c in counts)
        weighted = sum(p[part] * c[part] / total for p, c in zip(parts, counts, strict=True))
        torch.testing.assert_close(weighted, whole.parts[part])
    assert counts[0]["mlm"] < counts[1]["mlm"]
    assert not torch.allclose((parts[0]["mlm"] + parts[1]["mlm"]) / 2, whole.parts["mlm"])  # 1/2 each is not it
    n = [registry.get_objective("mlm").counts(h)["loss"] for h in halves]
    weighted = sum(bert_mlm_loss(model, h).loss * k / sum(n) for h, k in zip(halves, n, strict=True))
    torch.testing.assert_close(weighted, bert_mlm_loss(model, batch).loss)


# ---------------------------------------------------------------------------------------------- a composite objective


@dataclass
class DistillConfig:
    temperature: float = 2.0  # softens both distributions
    alpha: float = 0.5  # weight of the distillation part


class WithTeacher(nn.Module):
    """The trained model (``student``) beside a frozen ``teacher``: one module, trained and saved as one. Its
    forward computes the loss, so it also trains under DDP (which only runs forward)."""

    def __init__(self, student: nn.Module, teacher: nn.Module, settings: DistillConfig) -> None:
        super().__init__()
        self.student, self.teacher, self.settings = student, teacher.requires_grad_(False), settings

    def train(self, mode: bool = True):
        super().train(mode)
        self.teacher.eval()
        return self

    def forward(self, block: torch.Tensor) -> LossOutput:
        logits = self.student(block[:, :-1])  # (B, T, V)
        with torch.no_grad():
            teacher = self.teacher(block[:, :-1])
        t, alpha = self.settings.temperature, self.settings.alpha
        clm = causal_lm_loss(logits, block)
        student_log_p, teacher_log_p = (F.log_softmax(x.float().flatten(0, 1) / t, -1) for x in (logits, teacher))
        distill = F.kl_div(student_log_p, teacher_log_p, log_target=True, reduction="batchmean") * t * t
        parts, weights = {"clm": clm, "distill": distill}, {"distill": alpha}
        return LossOutput(clm + alpha * distill, n_tokens=block[:, 1:].numel(), parts=parts, weights=weights)


def with_teacher(model, model_config, settings, tokenizer):
    return WithTeacher(model, GPT(model_config), settings)  # the teacher: a model of the same shape


def block_counts(block):
    n = block[:, 1:].numel()
    return {"clm": n, "distill": n}


@pytest.fixture()
def distill(monkeypatch):
    registry.objectives()  # the built-ins first
    entry = registry.ObjectiveEntry(
        "distill",
        models=("gpt",),
        prepare=lm_blocks,
        loss=lambda model, block: model(block),
        counts=block_counts,
        config_class=DistillConfig,
        wrap=with_teacher,
        unwrap=lambda trained: trained.student,
        description="a test composite: CLM plus distillation from a frozen teacher",
    )
    monkeypatch.setitem(registry.OBJECTIVES, "distill", entry)
    return entry


PRETRAIN = ["corpus=tinyshakespeare", "vocab_size=400", "seq_len=32", "model.n_layers=1", "model.d_model=32"]
PRETRAIN += ["model.n_heads=2", "batch_size=8", "log_every=1", "eval_every=0", "progress=false", "threads=1"]


def weights(run_dir):
    return safetensors.torch.load_file(ckpt.find_checkpoint(run_dir) / "model.safetensors")


def test_a_composite_objective_pretrains_resumes_and_fine_tunes_its_body(distill, tmp_path, capsys):
    run_dir = tmp_path / "run"
    args = ["--objective", "distill", "alpha=0.25", "max_steps=2", "save_every=2", "sample_tokens=4"]
    assert pretrain_main([*PRETRAIN, *args, f"run_dir={run_dir}"]) == 0
    assert "sample: It was" in capsys.readouterr().out  # sampled from the unwrapped student
    assert json.loads((run_dir / "config.json").read_text())["objective"] == {"temperature": 2.0, "alpha": 0.25}
    first = weights(run_dir)
    students = {k for k in first if k.startswith("student.")}
    teachers = {k for k in first if k.startswith("teacher.")}
    assert students and {k.replace("student.", "teacher.", 1) for k in students} == teachers
    name = "student.decoder.layers.0.ffn.fc1.weight"
    assert not torch.equal(first[name], first[name.replace("student", "teacher")])  # two models, not one

    assert pretrain_main(["--resume", str(run_dir), "max_steps=3", "sample_tokens=0"]) == 0
    assert "at step 2" in capsys.readouterr().out
    resumed = weights(run_dir)
    assert all(torch.equal(resumed[k], first[k]) for k in teachers)  # the frozen teacher, saved and restored
    assert not torch.equal(resumed[name], first[name])  # the student trained on
    assert [e["step"] for e in read_metrics(run_dir / "metrics.jsonl") if e["split"] == "train"] == [1, 2, 3]

    body = from_pretrained(str(run_dir), {})
    assert isinstance(body.model, GPT) and body.entry.name == "gpt"
    saved = {k: v for k, v in body.model.state_dict().items() if f"student.{k}" in resumed}  # tied ones once
    assert len(saved) == len(students) and all(torch.equal(v, resumed[f"student.{k}"]) for k, v in saved.items())

    tuned = tmp_path / "tuned"
    argv = ["--task", "sst2", "--pretrained", str(run_dir), "freeze_body=true", "max_train_examples=32"]
    argv += ["max_eval_examples=16", "max_steps=2", "batch_size=8", "max_length=32", "progress=false", "threads=1"]
    assert finetune_main([*argv, f"run_dir={tuned}"]) == 0
    results = json.loads((tuned / "results.json").read_text())
    assert results["model"] == "gpt" and results["name"] == "run@3"
    after = weights(tuned)
    assert not any("teacher" in k for k in after)  # fine-tuning took the body alone
    body_weights = {k.removeprefix("body."): v for k, v in after.items() if k.startswith("body.")}
    for k, v in body_weights.items():  # the frozen body is the student (GPT's 3 new token rows appended)
        assert torch.equal(v[: len(resumed[f"student.{k}"])], resumed[f"student.{k}"]), k
