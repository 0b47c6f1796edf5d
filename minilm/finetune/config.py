"""Fine-tuning settings, resolved as in ``python -m minilm.train``: defaults <- the resumed run's config.json <- a
TOML file ([job], [train], [model]) <- ``key=value`` and shorthand options on the command line."""

from __future__ import annotations

import dataclasses
import difflib
import math
import time
from dataclasses import dataclass

from minilm.data.tasks import SPLITS, TASKS
from minilm.finetune.mixing import DEFAULT_LIMIT, DEFAULT_TEMPERATURE, MIXING
from minilm.finetune.model import INPUT_FORMATS, LAYER_CHOICES, body_entry
from minilm.finetune.text_to_text import TEXT_TO_TEXT
from minilm.heads import POOLING
from minilm.train.cli import command_line_layer, resolve_layers
from minilm.train.config import ConfigError, choice
from minilm.train.trainer import TrainConfig


@dataclass
class FinetuneConfig:
    task: str = "sst2"  # a task of the registry (see the list below); several, comma-separated: multi-task training
    pretrained: str = ""  # a pretraining run directory or checkpoint; "" trains model/size from scratch
    model: str = ""  # registered model trained from scratch ("": gpt); a pretrained run brings its own, recorded here
    size: str = "tiny"  # size preset of that model (a pretrained body has its own: "" in a pretrained run's record)
    vocab_size: int = 8192  # from scratch: tokenizer trained on the task's training texts
    max_length: int = 128  # tokens per input (text, pair, question + context), longer ones truncated
    input_format: str = "auto"  # "template" (the tokenizer's), "gpt" (start/delim/extract tokens); auto: the model's
    pooling: str = "auto"  # summary: "first", "last", "mean"; auto: first if an encoder starts [CLS], else last
    freeze_body: bool = False  # feature-based: train only the head, keep the pretrained body as it is
    features: str = "last"  # layers the head reads (choices below: BERT Table 7); feature-based with freeze_body
    lm_weight: float = 0.0  # λ of GPT's auxiliary LM loss, L3 = L2 + λ·L1 (the paper: 0.5); needs a causal LM body
    max_target_length: int = 32  # text-to-text tasks: target tokens (longer ones truncated) and most generated
    num_beams: int = 1  # text-to-text tasks: 1 generates greedily, more with beam search
    max_train_examples: int = 0  # 0: all; else a seeded sample (quick runs), of each task
    max_eval_examples: int = 0  # 0: all; else a fixed sample of the validation/test split, of each task
    eval_split: str = "validation"  # split scored at the end into results.json: "validation" or "test"
    text_to_text: str = "auto"  # every task as T5's text to text: "true", "false"; auto: the model's way, or multi-task
    mixing: str = "proportional"  # multi-task: how often each task is drawn (strategies below; T5 §3.5.2)
    mixing_limit: int = DEFAULT_LIMIT  # proportional and temperature mixing: each task's size capped at this K
    mixing_temperature: float = DEFAULT_TEMPERATURE  # temperature mixing: T (1: proportional; larger: towards equal)

    @property
    def tasks(self) -> list[str]:
        """The task names of ``task``: one, or several for multi-task training."""
        return [name.strip() for name in self.task.split(",")]

    def validate(self) -> None:
        for name in self.tasks:
            if name not in TASKS:
                close = difflib.get_close_matches(name, list(TASKS), n=1, cutoff=0.5)
                hint = f"; did you mean {close[0]!r}?" if close else ""
                raise ConfigError(f"unknown task {name!r}{hint} (tasks: {', '.join(TASKS)})")
        if len(set(self.tasks)) < len(self.tasks):
            raise ConfigError(f"task={self.task!r} names a task twice: give each task once")
        choice(self.text_to_text, TEXT_TO_TEXT, "text_to_text")
        choice(self.mixing, MIXING, "mixing")
        if self.mixing_limit < 1 or not (self.mixing_temperature > 0 and math.isfinite(self.mixing_temperature)):
            raise ConfigError(
                f"mixing_limit must be >= 1 and mixing_temperature > 0, got {self.mixing_limit} and "
                f"{self.mixing_temperature}"
            )
        choice(self.pooling, ("auto", *POOLING), "pooling")
        choice(self.input_format, ("auto", *INPUT_FORMATS), "input_format")
        if not self.lm_weight >= 0:
            raise ConfigError(f"lm_weight must be >= 0 (0: no auxiliary LM loss), got {self.lm_weight}")
        if self.lm_weight and self.freeze_body:
            raise ConfigError("lm_weight trains the body's LM, which freeze_body=true keeps frozen: drop one of them")
        choice(self.features, LAYER_CHOICES, "features")
        choice(self.eval_split, SPLITS[1:], "eval_split")
        if self.max_length < 4:
            raise ConfigError(f"max_length must be at least 4, got {self.max_length}")
        if self.max_target_length < 2 or self.num_beams < 1:
            raise ConfigError(
                f"max_target_length must be >= 2 and num_beams >= 1, got {self.max_target_length} and {self.num_beams}"
            )
        if self.max_train_examples < 0 or self.max_eval_examples < 0:
            raise ConfigError("max_train_examples and max_eval_examples must be >= 0 (0: all)")


# BERT's fine-tuning recipe, scaled to small models: linear decay to 0 after a 10% warm-up, AdamW(0.9, 0.999) with
# weight decay 0.01; a checkpoint at the end only.
DEFAULT_TRAIN = TrainConfig(
    batch_size=32,
    lr=1e-4,
    min_lr_ratio=0.0,
    schedule="linear",
    warmup_steps=30,
    max_steps=300,
    weight_decay=0.01,
    beta2=0.999,
    eval_every=100,
    save_every=0,
    keep_last=1,
)
SHORTHANDS = ("task", "pretrained", "model", "size")  # --task X is task=X
SECTIONS = ("job", "train", "model")  # fine-tuning has no objective: a pretrained run brings its own


DEFAULT_MODEL = "gpt"  # trained from scratch when neither model= nor --pretrained says otherwise


def with_body_model(job: FinetuneConfig) -> FinetuneConfig:
    """``job`` with ``model`` the body's: the pretrained run's registered model (a ``model=`` naming another is
    refused: it would be ignored), else the model trained from scratch (:data:`DEFAULT_MODEL` when unset). A
    pretrained body's size is its own, so ``size`` (a preset for training from scratch) is recorded empty."""
    if not job.pretrained:
        return dataclasses.replace(job, model=job.model or DEFAULT_MODEL)
    theirs = body_entry(job.pretrained, "").name
    if job.model and job.model != theirs:
        raise ConfigError(
            f"--pretrained {job.pretrained} is a {theirs} run, which brings its own model: drop --model "
            f"{job.model} (model= chooses the model trained from scratch, without --pretrained)"
        )
    return dataclasses.replace(job, model=theirs, size="")


def upgrade_saved(saved: dict) -> dict:
    """A fine-tuning run's config.json from before ``model`` recorded the pretrained body (every such run said
    "gpt"): its ``model`` dropped, so that the run's --pretrained names it again."""
    job = saved.get("job")
    if not isinstance(job, dict) or not job.get("pretrained") or "model" not in job:
        return saved
    return {**saved, "job": {key: value for key, value in job.items() if key != "model"}}


def resolve(args) -> tuple[FinetuneConfig, TrainConfig, dict]:
    """(job, train, model overrides) from defaults <- --resume's config.json <- --config TOML <- the command line."""
    job, train = FinetuneConfig(), DEFAULT_TRAIN
    layer = command_line_layer(args.overrides, {key: getattr(args, key) for key in SHORTHANDS}, job, train)
    job, train, open_sections = resolve_layers(
        job, train, args.resume, args.config, layer, SECTIONS, upgrade=upgrade_saved
    )
    job = with_body_model(job)  # before the run directory is named after it
    if not train.run_dir:
        stamp = time.strftime("%Y%m%d-%H%M%S")
        tasks = "+".join(job.tasks)
        train = dataclasses.replace(train, run_dir=f"runs/finetune-{tasks}-{job.model}-{stamp}")
    return job, train, open_sections["model"]
