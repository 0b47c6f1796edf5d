"""The fine-tuning model: any registered model as the body, a task head on its final hidden states (or on the
hidden states of chosen layers, see :class:`LayerSelection`).

The body keeps the interface every registered model declares (see :mod:`minilm.train.registry`)::

    features(input_ids, attention_mask=None, token_type_ids=None, output_hidden_states=False) -> TransformerOutput

with ``last_hidden_state`` (B, T, C), computed without the language-model head, and ``hidden_states`` (n_layers + 1
of (B, T, C): the embeddings, then each layer's output) when asked. C and the number of layers come from the body's
config through its registry entry (:attr:`Body.hidden_size`, :attr:`Body.n_layers`). Nothing here knows GPT.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import Tensor, nn

from minilm.finetune.kinds import TaskKind
from minilm.nn.scalar_mix import ScalarMix
from minilm.objectives.causal_lm import causal_lm_loss_from_states
from minilm.objectives.labels import IGNORE_INDEX
from minilm.objectives.seq2seq import seq2seq_loss_from_states
from minilm.tokenizers import Tokenizer, train_tokenizer
from minilm.tokenizers.families import get_family
from minilm.train import checkpoint as ckpt
from minilm.train.config import ConfigError, choice, from_dict, update
from minilm.train.registry import (
    ModelEntry,
    build_model,
    check_size,
    check_vocab_size,
    get_model,
    get_objective,
    model_config,
    models,
)
from minilm.train.trainer import LossOutput

TOKENIZER_DIR = "tokenizer"  # in a run directory, next to checkpoints/ (as minilm.train writes it)


def encode(model: nn.Module, batch: dict) -> Tensor:
    """The final hidden states (B, T, C) of any registered model for a batch (input_ids, attention_mask and
    token_type_ids, each (B, T))."""
    return model.features(batch["input_ids"], batch["attention_mask"], batch["token_type_ids"]).last_hidden_state


def encode_layers(model: nn.Module, batch: dict) -> tuple[Tensor, ...]:
    """Every hidden state of any registered model for a batch: n_layers + 1 of (B, T, C), the embeddings first."""
    out = model.features(batch["input_ids"], batch["attention_mask"], batch["token_type_ids"], True)
    if not out.hidden_states:
        raise ConfigError(f"{type(model).__name__}.features returns no hidden_states: use features=last with it")
    return tuple(out.hidden_states)


# ---------------------------------------------------------------------------------------------- layer selection

# features=: which hidden states the head reads (BERT, Devlin et al. 2019, Table 7): (layers it needs, what it is)
LAYER_CHOICES = {
    "last": (1, "the last layer's output, last_hidden_state (the default)"),
    "second_to_last": (2, "layer L-1's output"),
    "sum_last_four": (4, "h_{L-3} + h_{L-2} + h_{L-1} + h_L, C wide"),
    "concat_last_four": (4, "[h_{L-3}; h_{L-2}; h_{L-1}; h_L], 4C wide (the head too)"),
    "weighted_all": (1, "a learned ScalarMix of layers 1..L (softmax weights and a scale)"),
    "embeddings": (0, "layer 0, the embedding output"),
}


def head_width(body: Body, layers: str = "last") -> int:
    """The width of what the head reads: the body's C, or 4·C for concat_last_four."""
    return body.hidden_size * (4 if layers == "concat_last_four" else 1)


class LayerSelection(nn.Module):
    """A body's hidden states (n_layers + 1 of (B, T, C): embeddings, then layers 1..L) -> the head's input.

    ``layers`` is one of :data:`LAYER_CHOICES` (BERT's Table 7 choices, the ``features=`` setting); only
    weighted_all has parameters (a :class:`~minilm.nn.scalar_mix.ScalarMix` over the L layers, without the
    embeddings, as the paper's "weighted sum all 12 layers"; ELMo's own mix also takes layer 0). The sum and the mix
    add the layers as they come out: a pre-LN body's (GPT's) middle layers are un-normalised residual streams, only
    its last one passed the final norm. A ConfigError when the body has fewer than the layers asked for;
    :func:`head_width` is the output's width.
    """

    def __init__(self, layers: str, n_layers: int) -> None:
        super().__init__()
        choice(layers, LAYER_CHOICES, "features")
        needed = LAYER_CHOICES[layers][0]
        if n_layers < needed:
            raise ConfigError(
                f"features={layers} needs a body of at least {needed} layers, this one has {n_layers}"
                " (choose another features= or a deeper model)"
            )
        self.choice, self.n_layers = layers, n_layers
        self.mix = ScalarMix(n_layers) if layers == "weighted_all" else None

    def forward(self, hidden_states: Sequence[Tensor]) -> Tensor:
        if len(hidden_states) != self.n_layers + 1:
            raise ValueError(f"expected {self.n_layers + 1} hidden states, got {len(hidden_states)}")
        c, h = self.choice, hidden_states
        if c == "last":
            return h[-1]
        if c == "second_to_last":
            return h[-2]
        if c == "embeddings":
            return h[0]
        if c == "sum_last_four":
            return h[-4] + h[-3] + h[-2] + h[-1]
        if c == "concat_last_four":
            return torch.cat(list(h[-4:]), dim=-1)
        return self.mix(h[1:])  # weighted_all


class FinetuneModel(nn.Module):
    """``body`` (a :class:`Body`: a registered model and its config), ``head`` (from the task kind);
    forward(batch) -> (logits, LossOutput).

    ``lm_weight`` λ > 0 adds GPT's auxiliary objective while training (Radford et al. 2018, eq. 5):
    L3 = L2 + λ·L1, the task loss plus λ times the body's causal LM loss on the same inputs, predicted by its own
    ``lm_head`` from the final hidden states. The loss then has two parts, ``task`` (L2) and ``lm`` (L1), each a
    mean over its own units (see :meth:`counts`); evaluation weighs ``lm`` 0, so its loss is the task loss L2.

    ``freeze_body``: feature-based fine-tuning, only the head learns (and the layer mix of features=weighted_all);
    the body stays in eval mode (no dropout) and runs without autograd. ``layers``: which hidden states the head
    reads (the ``features=`` setting, :data:`LAYER_CHOICES`; the head must be built :func:`head_width` wide), with or
    without ``freeze_body``. freeze_body=true with features= is BERT's feature-based approach (Devlin et al. 2019,
    §5.3, Table 7, CoNLL-2003 NER); the paper fed its frozen features to a two-layer 768-dimensional BiLSTM before
    the classifier, here the head is the task kind's own head (a linear layer for tagging), so scores are not the
    paper's. Checkpoints record the body's config as the model config.
    """

    def __init__(
        self,
        body: Body,
        head: nn.Module,
        kind: TaskKind,
        freeze_body: bool = False,
        layers: str = "last",
        lm_weight: float = 0.0,
    ) -> None:
        super().__init__()
        self.body, self.head, self.kind = body.model, head, kind
        self.freeze_body, self.lm_weight = freeze_body, lm_weight
        check_lm_weight(lm_weight, body.entry)
        if lm_weight and not isinstance(getattr(body.model, "lm_head", None), nn.Module):
            raise ConfigError(
                f"lm_weight={lm_weight} needs a causal language model with an lm_head (gpt); "
                f"{type(body.model).__name__} has none: set lm_weight=0"
            )
        self.config = body.config
        choice(layers, LAYER_CHOICES, "features")
        if kind.generative:
            check_generative(body, kind, freeze_body, layers, lm_weight)
        # "last" reads last_hidden_state as ever (no hidden states asked for, nothing added to checkpoints)
        self.layers = LayerSelection(layers, body.n_layers) if layers != "last" else None
        if freeze_body:
            body.model.requires_grad_(False)

    def train(self, mode: bool = True) -> FinetuneModel:
        super().train(mode)
        if self.freeze_body:
            self.body.eval()
        return self

    def forward(self, batch: dict) -> tuple[Tensor | None, LossOutput]:
        if self.kind.generative:  # teacher forcing: no logits returned, predictions are generated
            states = self.body.seq2seq_states(batch["input_ids"], batch["attention_mask"], batch["labels"])
            loss = seq2seq_loss_from_states(*states, batch["labels"])
            return None, LossOutput(loss, int(batch["attention_mask"].sum()))
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
        task = self.kind.loss(self.head, logits, batch["labels"])  # L2
        n_tokens = int(batch["attention_mask"].sum())
        if not self.lm_weight:
            return logits, LossOutput(task, n_tokens)
        lm = self.auxiliary_lm_loss(last, batch)  # L1
        weight = self.lm_weight if self.training else 0.0  # L3 = L2 + λ·L1 in training; L2 in evaluation
        return logits, LossOutput(task + weight * lm, n_tokens, parts={"task": task, "lm": lm}, weights={"lm": weight})

    def auxiliary_lm_loss(self, last_hidden: Tensor, batch: dict) -> Tensor:
        """L1 on the fine-tuning inputs: every real token predicted from the ones before it (padding skipped)."""
        targets = batch["input_ids"].masked_fill(batch["attention_mask"] == 0, IGNORE_INDEX)  # (B, T)
        return causal_lm_loss_from_states(last_hidden[:, :-1], self.body.lm_head, targets, ignore_index=IGNORE_INDEX)

    def counts(self, batch: dict) -> dict[str, int | Tensor]:
        """The units each part of the loss averages over in ``batch`` (the Trainer's ``counts``): the task kind's
        (examples, or labelled tokens for tagging) and, with ``lm_weight``, the tokens L1 predicts."""
        task = self.kind.counts(batch)
        if not self.lm_weight:
            return {"loss": task}
        return {"task": task, "lm": batch["attention_mask"][:, 1:].sum()}


def check_lm_weight(lm_weight: float, entry: ModelEntry) -> None:
    """GPT's auxiliary LM loss predicts token t + 1 from the final state at t: only a causal LM's state at t has not
    seen it (an encoder's or an encoder-decoder's has, and would learn to copy it). Checked before any data is read."""
    if lm_weight and not entry.causal_lm:
        causal = ", ".join(name for name, other in models().items() if other.causal_lm)
        raise ConfigError(
            f"lm_weight={lm_weight} adds a causal LM loss, and {entry.name} ({entry.kind}) is not a causal "
            f"language model: its states have seen the token they would predict; set lm_weight=0 (causal LMs: "
            f"{causal})"
        )


def seq2seq_models() -> list[str]:
    """The registered models text-to-text tasks can fine-tune: the encoder-decoders."""
    return [name for name, entry in models().items() if entry.kind == "encoder-decoder"]


def check_generative(body: Body, kind: TaskKind, freeze_body: bool, layers: str, lm_weight: float) -> None:
    """A text-to-text task needs an encoder-decoder body trained whole, with its own LM head."""
    if body.entry.kind != "encoder-decoder" or not hasattr(body.model, "seq2seq_states"):
        raise ConfigError(
            f"task {kind.info.name!r} is text to text: it needs an encoder-decoder model "
            f"({', '.join(seq2seq_models())}), and {body.entry.name} is an {body.entry.kind}"
        )
    if freeze_body or layers != "last" or lm_weight:
        raise ConfigError(
            f"task {kind.info.name!r} trains the model's own LM head and decoder: freeze_body, features= and "
            "lm_weight do not apply (leave them at their defaults)"
        )


def finetune_loss(model: nn.Module, batch: dict) -> LossOutput:
    """The Trainer's loss function: the model computes the task loss itself."""
    return model(batch)[1]


def auto_pooling(tokenizer: Tokenizer, input_format: str = "template", kind: str = "encoder") -> str:
    """The summary position for a body of ``kind`` (see :data:`minilm.train.registry.KINDS`): "first" for an encoder
    whose template starts with a special token ([CLS], <s>), else "last": a decoder's (GPT's; ELMo's) or an
    encoder-decoder's last position is the one that read the whole input, and GPT's inputs end with the extract
    token."""
    if input_format == "gpt" or kind != "encoder":
        return "last"
    return "last" if get_family(tokenizer.family).single.split()[0].startswith("$") else "first"


# ---------------------------------------------------------------------------------------------- input formats

# input_format=: how texts become a model's input sequences (see minilm.finetune.kinds)
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

    model: nn.Module  # a registered model (the one inside a composite pretraining module, unwrapped)
    config: object
    entry: ModelEntry
    tokenizer: Tokenizer | None  # None only where no text is encoded (token ids fed directly: benchmarks)
    checkpoint: Path | None = None  # the pretrained weights it was loaded from
    label: str = ""  # the pretraining run and step ("gpt-clm-20250101-120000@400"), for tables
    input_format: str = "template"  # set by apply_input_format

    @property
    def hidden_size(self) -> int:
        """C, the width of the body's hidden states (from its config: ELMo's are 2 * projection_dim wide)."""
        return self.entry.hidden_size(self.config)

    @property
    def n_layers(self) -> int:
        """The body's layers: its hidden states less the embeddings (from its config)."""
        return self.entry.n_layers(self.config)


def pretrained_run_dir(checkpoint: Path) -> Path:
    """The run directory of ``run_dir/checkpoints/step_X``."""
    return checkpoint.parent.parent if checkpoint.parent.name == ckpt.CHECKPOINTS else checkpoint.parent


def pretrained_checkpoint(path: str) -> tuple[Path, dict]:
    """The checkpoint of a pretraining run (``--pretrained``) and its meta.json, which names the registered model."""
    try:
        checkpoint = ckpt.find_checkpoint(path)
    except ckpt.CheckpointError as err:
        raise ckpt.CheckpointError(
            f"--pretrained {path}: {err}. Give a pretraining run of python -m minilm.train (its directory or one of "
            "its checkpoints/step_* directories)"
        ) from None
    meta = ckpt.read_meta(checkpoint)
    run = meta.get("config") or {}
    if "task" in (run.get("job") or {}):
        raise ckpt.CheckpointError(fine_tuning_run(path, run["job"]))
    if "model" not in (run.get("job") or {}) or not isinstance(run.get("model"), dict):
        raise ckpt.CheckpointError(f"checkpoint {checkpoint} does not say which registered model it holds")
    return checkpoint, meta


def fine_tuning_run(path: str, job: dict) -> str:
    """Why a fine-tuning run is no ``--pretrained``, and what to give instead: its body was trained beside a task
    head (and, with input_format=gpt, with rows added to its vocabulary), so it is not reused as a pretrained body."""
    origin = job.get("pretrained")
    instead = f"the run it started from, --pretrained {origin}" if origin else "no --pretrained (from scratch)"
    return (
        f"--pretrained {path} is a fine-tuning run (task {job['task']}): its "
        f"checkpoint holds a task head beside the body, and its body is not reused here; give a pretraining run of "
        f"python -m minilm.train, e.g. {instead}, or continue it with python -m minilm.finetune --resume {path}"
    )


def body_entry(pretrained: str, model_name: str) -> ModelEntry:
    """The registry entry of the body a run fine-tunes: the pretrained run's model, else ``model_name``; read before
    any weights or data, so that settings which depend on the model are checked first."""
    return get_model(pretrained_checkpoint(pretrained)[1]["config"]["job"]["model"] if pretrained else model_name)


def from_pretrained(path: str, model_overrides: dict, tokenizer_dir: Path | None = None) -> Body:
    """The model of a pretraining run, its weights and tokenizer.

    The run's config (in the checkpoint) names the registered model and objective and holds their configs: the model
    is built, wrapped as its objective trained it (ELECTRA's generator beside it, a frozen teacher, ...: one module,
    as the Trainer saved it), loaded, and unwrapped to the body. ``model_overrides`` may change what leaves the
    weights' shapes alone (dropout, say).
    """
    checkpoint, meta = pretrained_checkpoint(path)
    run = meta["config"]
    job = run["job"]
    entry = get_model(job["model"])
    objective = get_objective(job["objective"]) if job.get("objective") else None
    try:
        config = from_dict(entry.config_class, run["model"], "model")
        settings = None
        if objective is not None and objective.config_class is not None:
            settings = from_dict(objective.config_class, run.get("objective") or {}, "objective")
    except ConfigError as err:
        raise ckpt.CheckpointError(
            f"checkpoint {checkpoint}: its run config does not fit {entry.name}: {err}"
        ) from None
    config = update(config, model_overrides, "model")
    tokenizer_dir = tokenizer_dir or pretrained_run_dir(checkpoint) / TOKENIZER_DIR
    if not tokenizer_dir.is_dir():
        raise ckpt.CheckpointError(f"pretrained {path}: no {TOKENIZER_DIR}/ in {tokenizer_dir.parent}")
    tokenizer = Tokenizer.load(tokenizer_dir)
    model = entry.build(config)  # a model that reads its vocabulary (ELMo) finds it in the weights
    trained = objective.wrap_model(model, config, settings, tokenizer) if objective is not None else model
    ckpt.load_weights(checkpoint, trained)
    body = objective.body(trained) if objective is not None else trained
    label = f"{pretrained_run_dir(checkpoint).name}@{meta['step']}"
    return Body(body, config, entry, tokenizer, checkpoint, label)


def check_from_scratch(model_name: str, size: str, model_overrides: dict, vocab_size: int) -> None:
    """The settings of a model trained from scratch, checked before any data is read: its size preset, a vocabulary
    that holds its tokenizer's special tokens and alphabet, and its config (e.g. heads that divide d_model)."""
    entry = get_model(model_name)
    check_size(entry, size)
    check_vocab_size(entry, vocab_size)
    model_config(entry, size, vocab_size, model_overrides)


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
