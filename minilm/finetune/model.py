"""The fine-tuning model: any registered model as the body, a task head on its final hidden states (or on the
features of chosen layers, see :class:`LayerFeatures`).

The body contract is the one every registered model keeps (see :mod:`minilm.train.registry`):
``features(input_ids, attention_mask=...) -> TransformerOutput`` with ``last_hidden_state`` (B, T, C), computed
without the language-model head, and ``hidden_states`` (n_layers + 1 of (B, T, C): the embeddings, then each
layer's output) when asked with ``output_hidden_states=True`` (or always, when ``features`` has no such argument);
``token_type_ids`` is passed too when ``features`` takes it (BERT-style segment embeddings). Nothing here knows GPT.
"""

from __future__ import annotations

import contextlib
import inspect
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import Tensor, nn

from minilm.finetune.tasks import TaskKind
from minilm.heads import IGNORE_INDEX
from minilm.nn.scalar_mix import ScalarMix
from minilm.objectives.causal_lm import causal_lm_loss
from minilm.tokenizers import Tokenizer, train_tokenizer
from minilm.tokenizers.families import get_family
from minilm.train import checkpoint as ckpt
from minilm.train.config import ConfigError, choice, update
from minilm.train.registry import ModelEntry, build_model, check_size, get_model, model_config
from minilm.train.trainer import LossOutput

TOKENIZER_DIR = "tokenizer"  # in a run directory, next to checkpoints/ (as minilm.train writes it)


def _inputs(model: nn.Module, batch: dict) -> dict:
    """``features``' keyword arguments for a batch: the attention mask, and token types when it takes them."""
    inputs = {"attention_mask": batch["attention_mask"]}
    if "token_type_ids" in inspect.signature(model.features).parameters:
        inputs["token_type_ids"] = batch["token_type_ids"]
    return inputs


def encode(model: nn.Module, batch: dict) -> Tensor:
    """The final hidden states (B, T, C) of any registered model for a batch of input_ids/attention_mask (B, T)."""
    return model.features(batch["input_ids"], **_inputs(model, batch)).last_hidden_state


def encode_layers(model: nn.Module, batch: dict) -> tuple[Tensor, ...]:
    """Every hidden state of any registered model for a batch: n_layers + 1 of (B, T, C), the embeddings first."""
    inputs = _inputs(model, batch)
    if "output_hidden_states" in inspect.signature(model.features).parameters:
        inputs["output_hidden_states"] = True
    hidden_states = model.features(batch["input_ids"], **inputs).hidden_states
    if not hidden_states:
        raise ConfigError(f"{type(model).__name__}.features returns no hidden_states: use features=last with it")
    return tuple(hidden_states)


def _one_token(model: nn.Module) -> dict:
    one = torch.ones(1, 1, dtype=torch.long, device=next(model.parameters()).device)
    return {"input_ids": one, "attention_mask": one, "token_type_ids": one * 0}


def hidden_size(model: nn.Module) -> int:
    """C of the body's hidden states, found by encoding one token (whatever the config calls it)."""
    with torch.no_grad():
        return encode(model, _one_token(model)).size(-1)


def count_layers(model: nn.Module) -> int:
    """How many layers the body has (its hidden states less the embeddings), found by encoding one token."""
    with torch.no_grad():
        return len(encode_layers(model, _one_token(model))) - 1


# ---------------------------------------------------------------------------------------------- features of layers

# features=: which hidden states the head reads (BERT, Devlin et al. 2019, Table 7): (layers it needs, what it is)
FEATURES = {
    "last": (1, "the last layer's output, last_hidden_state (the default)"),
    "second_to_last": (2, "layer L-1's output"),
    "sum_last_four": (4, "h_{L-3} + h_{L-2} + h_{L-1} + h_L, C wide"),
    "concat_last_four": (4, "[h_{L-3}; h_{L-2}; h_{L-1}; h_L], 4C wide (the head too)"),
    "weighted_all": (1, "a learned ScalarMix of layers 1..L (softmax weights and a scale)"),
    "embeddings": (0, "layer 0, the embedding output"),
}


def feature_size(model: nn.Module, features: str = "last") -> int:
    """The width of the features the head reads: the body's C, or 4·C for concat_last_four."""
    return hidden_size(model) * (4 if features == "concat_last_four" else 1)


class LayerFeatures(nn.Module):
    """A body's hidden states (n_layers + 1 of (B, T, C): embeddings, then layers 1..L) -> the head's input.

    ``features`` is one of :data:`FEATURES` (BERT's Table 7 choices); only weighted_all has parameters (a
    :class:`~minilm.nn.scalar_mix.ScalarMix` over the L layers, without the embeddings, as the paper's "weighted sum
    all 12 layers"; ELMo's own mix also takes layer 0). The sum and the mix add the layers as they come out: a
    pre-LN body's (GPT's) middle layers are un-normalised residual streams, only its last one passed the final norm.
    A ConfigError when the body has fewer than the layers asked for; :func:`feature_size` is the output's width.
    """

    def __init__(self, features: str, n_layers: int) -> None:
        super().__init__()
        choice(features, FEATURES, "features")
        needed = FEATURES[features][0]
        if n_layers < needed:
            raise ConfigError(
                f"features={features} needs a body of at least {needed} layers, this one has {n_layers}"
                " (choose another features= or a deeper model)"
            )
        self.features, self.n_layers = features, n_layers
        self.mix = ScalarMix(n_layers) if features == "weighted_all" else None

    def forward(self, hidden_states: Sequence[Tensor]) -> Tensor:
        if len(hidden_states) != self.n_layers + 1:
            raise ValueError(f"expected {self.n_layers + 1} hidden states, got {len(hidden_states)}")
        f, h = self.features, hidden_states
        if f == "last":
            return h[-1]
        if f == "second_to_last":
            return h[-2]
        if f == "embeddings":
            return h[0]
        if f == "sum_last_four":
            return h[-4] + h[-3] + h[-2] + h[-1]
        if f == "concat_last_four":
            return torch.cat(list(h[-4:]), dim=-1)
        return self.mix(h[1:])  # weighted_all


class FinetuneModel(nn.Module):
    """``body`` (a registered model), ``head`` (from the task kind); forward(batch) -> (logits, loss).

    ``lm_weight`` λ > 0 adds GPT's auxiliary objective while training (Radford et al. 2018, eq. 5):
    L3 = L2 + λ·L1, the task loss plus λ times the body's causal LM loss on the same inputs, predicted by its own
    ``lm_head`` from the final hidden states; evaluation reports the task loss L2 alone.

    ``freeze_body``: feature-based fine-tuning, only the head learns (and the layer mix of features=weighted_all);
    the body stays in eval mode (no dropout) and runs without autograd. ``features``: which hidden states the head
    reads (:data:`FEATURES`; the head must be built :func:`feature_size` wide), with or without ``freeze_body``.
    freeze_body=true with features= is BERT's feature-based approach (Devlin et al. 2019, §5.3, Table 7, CoNLL-2003
    NER); the paper fed its frozen features to a two-layer 768-dimensional BiLSTM before the classifier, here the head
    is the task kind's own head (a linear layer for tagging), so scores are not the paper's. Checkpoints record the
    body's config as the model config.
    """

    def __init__(
        self,
        body: nn.Module,
        head: nn.Module,
        kind: TaskKind,
        freeze_body: bool = False,
        features: str = "last",
        lm_weight: float = 0.0,
    ) -> None:
        super().__init__()
        self.body, self.head, self.kind, self.freeze_body, self.lm_weight = body, head, kind, freeze_body, lm_weight
        if lm_weight and not isinstance(getattr(body, "lm_head", None), nn.Module):
            raise ConfigError(
                f"lm_weight={lm_weight} needs a causal language model with an lm_head (gpt); "
                f"{type(body).__name__} has none: set lm_weight=0"
            )
        self.config = getattr(body, "config", None)
        choice(features, FEATURES, "features")
        # "last" reads last_hidden_state as ever (no hidden states asked for, nothing added to checkpoints)
        self.layers = LayerFeatures(features, count_layers(body)) if features != "last" else None
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
            if self.layers is None:
                hidden = last = encode(self.body, batch)  # (B, T, C)
            else:
                hidden_states = encode_layers(self.body, batch)
                last = hidden_states[-1]  # (B, T, C), the final hidden states
        if self.layers is not None:
            hidden = self.layers(hidden_states)  # outside no_grad: the weighted_all mix learns on a frozen body too
        logits = self.kind.logits(self.head, hidden, batch)
        loss = self.kind.loss(self.head, logits, batch["labels"])  # L2
        if self.lm_weight and self.training:
            loss = loss + self.lm_weight * self.auxiliary_lm_loss(last, batch)  # L3 = L2 + λ·L1
        return logits, loss

    def auxiliary_lm_loss(self, last_hidden: Tensor, batch: dict) -> Tensor:
        """L1 on the fine-tuning inputs: every real token predicted from the ones before it (padding skipped)."""
        targets = batch["input_ids"].masked_fill(batch["attention_mask"] == 0, IGNORE_INDEX)  # (B, T)
        return causal_lm_loss(self.body.lm_head(last_hidden[:, :-1]), targets, ignore_index=IGNORE_INDEX)


def finetune_loss(model: nn.Module, batch: dict) -> LossOutput:
    """The Trainer's loss function: the model computes the task loss itself."""
    _, loss = model(batch)
    return LossOutput(loss, n_tokens=int(batch["attention_mask"].sum()))


def auto_pooling(tokenizer: Tokenizer, input_format: str = "template") -> str:
    """ "first" when the tokenizer's template starts with a special token ([CLS], <s>), else "last" (GPT, T5);
    "last" with GPT's inputs, whose extract token ends every sequence."""
    if input_format == "gpt":
        return "last"
    return "last" if get_family(tokenizer.family).single.split()[0].startswith("$") else "first"


# ---------------------------------------------------------------------------------------------- input formats

# input_format=: how texts become a model's input sequences (see minilm.finetune.tasks)
INPUT_FORMATS = {
    "template": "the tokenizer's own templates ([CLS] a [SEP] b [SEP] for BERT; a b for GPT-2's tokenizer)",
    "gpt": "GPT's transformations: <|start|> a <|delim|> b <|extract|>, symmetric pairs both ways, summed",
}
GPT_START, GPT_DELIM, GPT_EXTRACT = "<|start|>", "<|delim|>", "<|extract|>"  # the paper's <s>, $ and <e>


def gpt_inputs(tokenizer: Tokenizer) -> Tokenizer:
    """The tokenizer with GPT's start, delimiter and extract tokens and its fine-tuning templates
    (Radford et al. 2018, Figure 1); a tokenizer that has them already keeps their ids."""
    return tokenizer.with_templates(
        f"{GPT_START} $A {GPT_EXTRACT}",
        f"{GPT_START} $A {GPT_DELIM} $B:1 {GPT_EXTRACT}:1",
        new_tokens=(GPT_START, GPT_DELIM, GPT_EXTRACT),
    )


def resolve_input_format(input_format: str, entry: ModelEntry) -> str:
    """``auto``: the input format of the model's paper (the registry's ``input_format``)."""
    return entry.input_format if input_format == "auto" else input_format


def apply_input_format(body: Body, input_format: str) -> None:
    """input_format=gpt: the tokenizer gets GPT's tokens and templates, the model embedding rows for the tokens it
    adds (random, as in the paper; with freeze_body they stay as drawn, markers the body learns nothing about);
    template leaves the body as it is."""
    body.input_format = input_format
    if input_format != "gpt":
        return
    body.tokenizer = gpt_inputs(body.tokenizer)
    vocab = getattr(body.config, "vocab_size", None)
    added = [t for t in (GPT_START, GPT_DELIM, GPT_EXTRACT) if vocab is None or body.tokenizer.token_to_id(t) >= vocab]
    if not added:
        return  # the model has rows for them already (a resumed run, or a model trained with them)
    if not hasattr(body.model, "resize_token_embeddings"):
        raise ConfigError(
            f"input_format=gpt adds tokens, and {type(body.model).__name__} cannot grow its vocabulary; "
            "use input_format=template"
        )
    body.model.resize_token_embeddings(vocab + len(added))
    body.config = body.model.config


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
    input_format: str = "template"  # set by apply_input_format


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
