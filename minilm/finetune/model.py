"""The fine-tuning model: any registered model as the body, a task head on its final hidden states.

The body contract is the one every registered model keeps (see :mod:`minilm.train.registry`):
``features(input_ids, attention_mask=...) -> TransformerOutput`` with ``last_hidden_state`` (B, T, C), computed
without the language-model head; ``token_type_ids`` is passed too when ``features`` takes it (BERT-style segment
embeddings). Nothing here knows GPT.
"""

from __future__ import annotations

import contextlib
import inspect
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import Tensor, nn

from minilm.finetune.tasks import TaskKind
from minilm.tokenizers import Tokenizer, train_tokenizer
from minilm.tokenizers.families import get_family
from minilm.train import checkpoint as ckpt
from minilm.train.config import ConfigError, update
from minilm.train.registry import ModelEntry, build_model, check_size, get_model, model_config
from minilm.train.trainer import LossOutput

TOKENIZER_DIR = "tokenizer"  # in a run directory, next to checkpoints/ (as minilm.train writes it)


def encode(model: nn.Module, batch: dict) -> Tensor:
    """The final hidden states (B, T, C) of any registered model for a batch of input_ids/attention_mask (B, T)."""
    inputs = {"attention_mask": batch["attention_mask"]}
    if "token_type_ids" in inspect.signature(model.features).parameters:
        inputs["token_type_ids"] = batch["token_type_ids"]
    return model.features(batch["input_ids"], **inputs).last_hidden_state


def hidden_size(model: nn.Module) -> int:
    """C of the body's hidden states, found by encoding one token (whatever the config calls it)."""
    device = next(model.parameters()).device
    one = torch.ones(1, 1, dtype=torch.long, device=device)
    with torch.no_grad():
        return encode(model, {"input_ids": one, "attention_mask": one, "token_type_ids": one * 0}).size(-1)


class FinetuneModel(nn.Module):
    """``body`` (a registered model), ``head`` (from the task kind); forward(batch) -> (logits, loss).

    ``freeze_body``: feature-based fine-tuning, only the head learns; the body stays in eval mode (no dropout) and
    runs without autograd. Checkpoints record the body's config as the model config.
    """

    def __init__(self, body: nn.Module, head: nn.Module, kind: TaskKind, freeze_body: bool = False) -> None:
        super().__init__()
        self.body, self.head, self.kind, self.freeze_body = body, head, kind, freeze_body
        self.config = getattr(body, "config", None)
        if freeze_body:
            body.requires_grad_(False)

    def train(self, mode: bool = True) -> FinetuneModel:
        super().train(mode)
        if self.freeze_body:
            self.body.eval()
        return self

    def forward(self, batch: dict) -> tuple[Tensor, Tensor]:
        frozen = torch.no_grad() if self.freeze_body else contextlib.nullcontext()
        with frozen:
            hidden = encode(self.body, batch)  # (B, T, C)
        logits = self.kind.logits(self.head, hidden, batch)
        return logits, self.kind.loss(self.head, logits, batch["labels"])


def finetune_loss(model: nn.Module, batch: dict) -> LossOutput:
    """The Trainer's loss function: the model computes the task loss itself."""
    _, loss = model(batch)
    return LossOutput(loss, n_tokens=int(batch["attention_mask"].sum()))


def auto_pooling(tokenizer: Tokenizer) -> str:
    """ "first" when the tokenizer's template starts with a special token ([CLS], <s>), else "last" (GPT, T5)."""
    return "last" if get_family(tokenizer.family).single.split()[0].startswith("$") else "first"


# ---------------------------------------------------------------------------------------------- building the body


@dataclass
class Body:
    """A body ready for a head: the model, its config, its registry entry and its tokenizer."""

    model: nn.Module
    config: object
    entry: ModelEntry
    tokenizer: Tokenizer
    checkpoint: Path | None = None  # the pretrained weights it was loaded from
    label: str = ""  # the pretraining run and step ("gpt-clm-20250101-120000@400"), for tables


def pretrained_run_dir(checkpoint: Path) -> Path:
    """The run directory of ``run_dir/checkpoints/step_X``."""
    return checkpoint.parent.parent if checkpoint.parent.name == ckpt.CHECKPOINTS else checkpoint.parent


def from_pretrained(path: str, model_overrides: dict, tokenizer_dir: Path | None = None) -> Body:
    """The model of a pretraining run (its registry name and config from the checkpoint), its weights and tokenizer.

    ``model_overrides`` may change what leaves the weights' shapes alone (dropout, say).
    """
    checkpoint = ckpt.find_checkpoint(path)
    meta = ckpt.read_meta(checkpoint)
    name = ((meta.get("config") or {}).get("job") or {}).get("model")
    if name is None or not isinstance(meta.get("model_config"), dict):
        raise ckpt.CheckpointError(f"checkpoint {checkpoint} does not say which registered model it holds")
    entry = get_model(name)
    try:
        config = entry.config_class(**meta["model_config"])
    except TypeError as err:
        raise ckpt.CheckpointError(f"checkpoint {checkpoint}: its model_config does not fit {name} ({err})") from None
    config = update(config, model_overrides, "model")
    model = entry.build(config)
    ckpt.load_weights(checkpoint, model)
    tokenizer_dir = tokenizer_dir or pretrained_run_dir(checkpoint) / TOKENIZER_DIR
    if not tokenizer_dir.is_dir():
        raise ckpt.CheckpointError(f"pretrained {path}: no {TOKENIZER_DIR}/ in {tokenizer_dir.parent}")
    label = f"{pretrained_run_dir(checkpoint).name}@{meta['step']}"
    return Body(model, config, entry, Tokenizer.load(tokenizer_dir), checkpoint, label)


def from_scratch(
    model_name: str, size: str, model_overrides: dict, texts: list[str], vocab_size: int, tokenizer_dir: Path | None
) -> Body:
    """A freshly initialised registered model, with a tokenizer of its family trained on ``texts`` (or the one
    in ``tokenizer_dir``, when resuming)."""
    entry = get_model(model_name)
    check_size(entry, size)  # before training a tokenizer
    if tokenizer_dir is not None and tokenizer_dir.is_dir():
        tokenizer = Tokenizer.load(tokenizer_dir)
    else:
        try:
            tokenizer = train_tokenizer(texts, family=entry.tokenizer_family, vocab_size=vocab_size)
        except ValueError as err:
            raise ConfigError(str(err)) from None
    config = model_config(entry, size, tokenizer.vocab_size, model_overrides)
    return Body(build_model(entry, config, tokenizer), config, entry, tokenizer)


def check_body(body: Body, max_length: int) -> None:
    """The tokenizer must fit the embedding, and ``max_length`` the model's context."""
    vocab = getattr(body.config, "vocab_size", None)
    if vocab is not None and body.tokenizer.vocab_size > vocab:
        raise ConfigError(f"the tokenizer has {body.tokenizer.vocab_size} tokens but the model only {vocab}")
    max_len = getattr(body.config, "max_len", None)
    if max_len is not None and max_length > max_len:
        raise ConfigError(
            f"max_length={max_length} is longer than the model allows (max_len={max_len}); lower max_length"
            + ("" if body.checkpoint else f" or set model.max_len={max_length}")
        )
