"""DistilBERT, distilled from a BERT teacher (Sanh et al. 2019): ``python -m minilm.train --model distilbert
--objective distill teacher=RUN_DIR`` with the loss's ``alpha_ce=``, ``alpha_mlm=``, ``alpha_cos=``, ``temperature=``
and the masking settings of :mod:`minilm.recipes.bert` (``format=``, ``whole_word=``, ...).

The teacher is a run of ``python -m minilm.train --model bert`` (its directory or one of its checkpoints) or a
Hugging Face BERT folder (``BertForMaskedLM``, ``BertForPreTraining``; a DistilBERT one teaches too). It needs its
MLM head: L_ce is a loss on the teacher's distribution over the vocabulary, so a ``BertModel`` without the head (a
sentence encoder such as all-MiniLM-L6-v2) is refused, with no silent fallback to L_mlm + L_cos. The student reads
the teacher's token ids, so the run's tokenizer is the teacher's (:func:`teacher_tokenizer`, which the objective
brings instead of one trained on ``corpus``: ``vocab_size`` is the teacher's, whatever the job says); a resumed run
whose teacher's vocabulary has changed since is refused.

Each batch is masked dynamically as BERT's is (15%, 80/10/10; no NSP: the student has no segments, and both networks
read the same masked input). The teacher, frozen (eval mode, no gradient, outside the optimizer), gives its MLM
logits at every real token and its last hidden states; the loss is :func:`minilm.objectives.distillation
.distillation_loss`, α · L_ce + β · L_mlm + γ · L_cos (5, 2, 1 at T = 2), with its three parts logged. The student
starts from the teacher (:func:`minilm.models.distilbert.init_from_teacher`: every other layer) when its sizes allow
(same width, heads, FFN, vocabulary; at most the teacher's positions; half its layers or fewer), else from random
weights, with a note saying why. L_cos compares hidden states, so the student must have the teacher's width.

The module trained is :class:`Distillation`: the student, registered, with the teacher beside it, not registered, so
the checkpoints hold the student alone (under ``student.``) and fine-tuning unwraps it. Loading such a run (to
fine-tune it) does not need the teacher any more; continuing it (``--resume``) does.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import nn

import minilm.models
from minilm.files import CheckpointError
from minilm.finetune.model import TOKENIZER_DIR, pretrained_run_dir
from minilm.finetune.model import from_pretrained as load_run
from minilm.models.bert import Bert
from minilm.models.distilbert import (
    DISTILBERT_SIZES,
    DistilBert,
    DistilBertConfig,
    check_teacher,
    every_other_layer,
    init_from_teacher,
)
from minilm.models.hf.folder import CONFIG_NAME
from minilm.models.pretrained import check_vocabulary
from minilm.objectives.distillation import ALPHA_CE, ALPHA_COS, ALPHA_MLM, TEMPERATURE, distillation_loss
from minilm.recipes.bert import MaskedLMConfig, masked_lm_examples, masked_tokens
from minilm.tokenizers import Tokenizer
from minilm.train import checkpoint as ckpt
from minilm.train.config import ConfigError
from minilm.train.distributed import is_main_process
from minilm.train.registry import ModelEntry, ObjectiveEntry, register_model, register_objective
from minilm.train.trainer import LossOutput

TEACHERS = "a run directory of python -m minilm.train --model bert, or a Hugging Face BERT folder (BertForMaskedLM)"
TEACHER_FAMILIES = ("bert", "distilbert")  # the families whose layers a DistilBERT student can take


@dataclass
class DistillationConfig(MaskedLMConfig):
    """The teacher, the weights of DistilBERT's three losses and the temperature, and BERT's masking."""

    teacher: str = ""  # the teacher: a minilm BERT run (directory or checkpoint) or a Hugging Face BERT folder
    alpha_ce: float = ALPHA_CE  # α, weight of L_ce, the soft-target loss on the teacher's distribution (5)
    alpha_mlm: float = ALPHA_MLM  # β, weight of L_mlm, the masked-LM loss (2)
    alpha_cos: float = ALPHA_COS  # γ, weight of L_cos, 1 - cos of the student's and teacher's hidden states (1)
    temperature: float = TEMPERATURE  # T of the soft targets, softmax(z / T) (DistilBERT: 2)

    def validate(self) -> None:
        super().validate()
        if not self.teacher:
            raise ConfigError(f"distillation needs a teacher: teacher=<{TEACHERS}>")
        if not self.temperature > 0:
            raise ConfigError(f"temperature={self.temperature} must be > 0 (DistilBERT: 2)")
        weights = {"alpha_ce": self.alpha_ce, "alpha_mlm": self.alpha_mlm, "alpha_cos": self.alpha_cos}
        if min(weights.values()) < 0 or not sum(weights.values()) > 0:
            shown = ", ".join(f"{k}={v}" for k, v in weights.items())
            raise ConfigError(f"{shown}: the weights must be >= 0, and one > 0 (DistilBERT: 5, 2, 1)")


# ---------------------------------------------------------------------------------------------- the teacher


def is_hf_folder(path: Path) -> bool:
    """Whether ``path`` is a Hugging Face checkpoint folder (its config.json names a model_type), not a run."""
    config = path / CONFIG_NAME
    try:
        return path.is_dir() and config.is_file() and "model_type" in json.loads(config.read_text(encoding="utf-8"))
    except ValueError:
        return False


def check_teacher_path(teacher: str) -> Path:
    """``teacher`` as a path, which must be a Hugging Face folder or a run with a checkpoint: one ConfigError else."""
    path = Path(teacher)
    if not path.exists():
        raise ConfigError(f"teacher={teacher} does not exist; give {TEACHERS}")
    if not is_hf_folder(path):
        try:
            ckpt.find_checkpoint(path)
        except CheckpointError as err:
            raise ConfigError(f"teacher={teacher} is neither a Hugging Face folder nor a run: {err}") from None
    return path


def teacher_family(path: Path) -> tuple[str, str]:
    """(the family of the teacher at ``path``, what it is), read from its config without loading any weights: a
    Hugging Face folder's ``model_type``, or the registered model of a run's checkpoint."""
    if is_hf_folder(path):
        return str(json.loads((path / CONFIG_NAME).read_text(encoding="utf-8"))["model_type"]), "Hugging Face folder"
    run = ckpt.read_meta(ckpt.find_checkpoint(path)).get("config") or {}
    job = run.get("job") or {}
    if "task" in job:  # its checkpoint holds a task head beside the body
        return str(job.get("model")), f"fine-tuning run (task {job['task']})"
    return str(job.get("model")), "run"


def check_teacher_family(teacher: str) -> None:
    """One ConfigError, before any data or weights are read, unless ``teacher`` is a BERT or DistilBERT that can
    teach: a pretraining run of one of :data:`TEACHER_FAMILIES`, or a Hugging Face folder of one."""
    family, what = teacher_family(check_teacher_path(teacher))
    if family in TEACHER_FAMILIES and "fine-tuning" not in what:
        return
    raise ConfigError(
        f"teacher={teacher} is a {family} {what}: a DistilBERT student learns from a BERT or DistilBERT teacher "
        f"(families that can teach: {', '.join(TEACHER_FAMILIES)}); give {TEACHERS}"
    )


def check_distillation_job(job, settings: DistillationConfig) -> None:
    """The objective's ``check``, before any data is read: the teacher is there and of a family that can teach."""
    check_teacher_family(settings.teacher)


def teacher_tokenizer(teacher: str) -> Tokenizer:
    """The tokenizer of the teacher's vocabulary: a run's ``tokenizer/``, or a Hugging Face folder's
    ``tokenizer.json`` or ``vocab.txt`` (lowercased unless its tokenizer_config.json says ``do_lower_case: false``)."""
    path = check_teacher_path(teacher)
    if not is_hf_folder(path):
        return Tokenizer.load(pretrained_run_dir(ckpt.find_checkpoint(path)) / TOKENIZER_DIR)
    if (path / "tokenizer.json").is_file():
        return Tokenizer.load(path / "tokenizer.json", family="bert")
    if (path / "vocab.txt").is_file():
        settings = path / "tokenizer_config.json"
        lowercase = json.loads(settings.read_text()).get("do_lower_case", True) if settings.is_file() else True
        return Tokenizer.from_bert_vocab(path / "vocab.txt", lowercase=lowercase)
    raise ConfigError(f"teacher={teacher} has no tokenizer.json or vocab.txt: its vocabulary is unknown")


def check_teacher_vocabulary(teacher: str, tokenizer) -> None:
    """One ConfigError unless ``tokenizer`` (the run's) has the teacher's vocabulary, token for token."""
    theirs, ours = teacher_tokenizer(teacher).backend.get_vocab(), tokenizer.backend.get_vocab()
    if theirs == ours:
        return
    wrong = sorted(token for token in theirs.keys() | ours.keys() if theirs.get(token) != ours.get(token))
    examples = ", ".join(f"{t!r}: {theirs.get(t)} vs {ours.get(t)}" for t in wrong[:3])
    raise ConfigError(
        f"teacher={teacher} has another vocabulary than this run's tokenizer ({len(theirs)} vs {len(ours)} tokens, "
        f"{len(wrong)} differ, e.g. {examples}): the student must read the teacher's token ids. A new run takes the "
        "teacher's tokenizer; resume with the teacher the run started from"
    )


def load_teacher(teacher: str) -> Bert:
    """The teacher's network, frozen: eval mode, no gradient. It must be a BERT (or DistilBERT) with its MLM head."""
    path = check_teacher_path(teacher)
    model = minilm.models.from_pretrained(path) if is_hf_folder(path) else load_run(str(path), {}).model
    try:
        check_teacher(model)
    except ValueError as err:
        raise ConfigError(f"teacher={teacher}: {err}; give {TEACHERS}") from None
    if model.mlm_head is None:
        raise ConfigError(
            f"teacher={teacher} has no MLM head (a BertModel, e.g. a sentence encoder): L_ce is a loss on the "
            "teacher's distribution over the vocabulary, which only the head gives; give a BertForMaskedLM or "
            "BertForPreTraining checkpoint, or a run of python -m minilm.train --model bert"
        )
    return model.eval().requires_grad_(False)


# ---------------------------------------------------------------------------------------------- the pair


class Distillation(nn.Module):
    """The student (trained and saved: the only registered submodule) beside its frozen teacher (kept outside the
    module tree: not in ``parameters()`` nor ``state_dict()``, so neither optimised nor saved; always in eval mode).
    ``teacher`` is None when a run is loaded without it (to fine-tune the student)."""

    def __init__(self, student: DistilBert, teacher: Bert | None, settings: DistillationConfig) -> None:
        super().__init__()
        self.student = student
        self.settings = settings
        object.__setattr__(self, "teacher", teacher)  # an attribute, not a submodule

    def teacher_on(self, device: torch.device) -> Bert:
        """The teacher, moved to ``device`` the first time it is needed there."""
        if self.teacher is None:
            raise ConfigError(f"teacher={self.settings.teacher} is not there any more: distillation needs it")
        if self.teacher.embedding.token.weight.device != device:
            self.teacher.to(device)
        return self.teacher


def wrap(student: DistilBert, config: DistilBertConfig, settings: DistillationConfig, tokenizer=None) -> Distillation:
    """``student`` beside the teacher of ``settings``, initialised from it where the sizes allow (a note otherwise).

    Without the teacher on disk (a finished run loaded for fine-tuning: its weights come from the checkpoint) the
    pair has no teacher."""
    if not Path(settings.teacher).exists():
        return Distillation(student, None, settings)
    teacher = load_teacher(settings.teacher)
    if tokenizer is not None:
        try:
            check_vocabulary(teacher.config, tokenizer)  # the sizes and padding id (the tokens: prepare)
        except ValueError as err:
            raise ConfigError(f"teacher={settings.teacher}: {err}") from None
    if config.d_model != teacher.config.d_model:
        raise ConfigError(
            f"the student's width d_model={config.d_model} is not the teacher's {teacher.config.d_model}: L_cos "
            f"compares their hidden states; set model.d_model={teacher.config.d_model} (and n_heads, d_ff), or "
            "choose the size that matches the teacher's"
        )
    try:
        init_from_teacher(student, teacher)
        layers = every_other_layer(config.n_layers, teacher.config.n_layers)
        note = f"the student starts from the teacher's weights (its layers {layers} of {teacher.config.n_layers})"
    except ValueError as err:
        note = f"note: the student starts from random weights: {err}"
    if is_main_process():
        print(note)
    return Distillation(student, teacher, settings)


def student(pair: Distillation) -> DistilBert:
    return pair.student


# ---------------------------------------------------------------------------------------------- data and loss


def distillation_examples(documents, tokenizer, job, settings: DistillationConfig, validation: bool = False):
    """BERT's masked-LM examples (:func:`~minilm.recipes.bert.masked_lm_examples`), once the teacher is checked to
    be there and to read this tokenizer's token ids."""
    if not validation:
        check_teacher_vocabulary(settings.teacher, tokenizer)
    return masked_lm_examples(documents, tokenizer, job, settings, validation)


def distil_loss(pair: Distillation, batch) -> LossOutput:
    """α · L_ce + β · L_mlm + γ · L_cos (parts: ce, mlm, cos), both networks reading the same masked input; the
    logits are computed at the real tokens only, where L_ce scores them."""
    ids, mask, labels = batch["input_ids"], batch["attention_mask"], batch["labels"]
    real = mask.bool()
    hidden = pair.student.features(ids, mask).last_hidden_state  # (B, T, C); no segments
    with torch.no_grad():
        teacher = pair.teacher_on(ids.device)
        teacher_hidden = teacher.features(ids, mask).last_hidden_state  # (B, T, C)
        teacher_logits = teacher.mlm_logits(teacher_hidden, real)  # (N, V) at the N real tokens
    s = pair.settings
    loss, parts = distillation_loss(
        pair.student.mlm_logits(hidden, real),
        teacher_logits,
        labels[real],
        hidden[real],
        teacher_hidden[real],
        alpha_ce=s.alpha_ce,
        alpha_mlm=s.alpha_mlm,
        alpha_cos=s.alpha_cos,
        temperature=s.temperature,
    )
    weights = {"ce": s.alpha_ce, "mlm": s.alpha_mlm, "cos": s.alpha_cos}
    return LossOutput(loss, n_tokens=int(real.sum()), parts=parts, weights=weights)


def distil_counts(batch) -> dict[str, int]:
    real = int(batch["attention_mask"].sum())
    return {"ce": real, "mlm": masked_tokens(batch), "cos": real}


# ---------------------------------------------------------------------------------------------- registry

register_model(
    ModelEntry(
        "distilbert", DistilBertConfig, DistilBert, kind="encoder", sizes=DISTILBERT_SIZES, tokenizer_family="bert"
    )
)
register_objective(
    ObjectiveEntry(
        "distill",
        models=("distilbert",),
        prepare=distillation_examples,
        loss=distil_loss,
        counts=distil_counts,
        perplexity="mlm",  # exp of the student's MLM loss; L_ce and L_cos are not language-model losses
        config_class=DistillationConfig,
        wrap=wrap,
        unwrap=student,
        description="DistilBERT: α·L_ce (the teacher's soft targets) + β·L_mlm + γ·L_cos, from teacher=<BERT>",
        tokenizer=lambda settings: teacher_tokenizer(settings.teacher),
        check=check_distillation_job,
        model_settings={"mlm": True, "pooler": False, "nsp": False, "n_segments": 0},
    )
)
