"""The one Trainer: every chapter and both command-line interfaces train through it.

    trainer = Trainer(model, loss_fn, train_data, config=TrainConfig(max_steps=500), eval_data=val_data)
    trainer.fit()              # -> the last evaluation's metrics

What a step does (``config.grad_accum`` micro-batches, on every process of a distributed run)::

    N_k = counts summed over the step's micro-batches and all processes    (one small all-reduce; with counts=)
    for each micro-batch:          out = loss_fn(model, batch) under autocast
                                   backward of sum_k w_k * out.parts[k] * n_k / N_k * world_size
                                   (without counts: out.loss / grad_accum; DDP all-reduces on the last one only)
    clip the gradient norm;        optimizer.step() (AdamW, or LAMB with optimizer="lamb"; no weight decay on
                                   biases and norms, nor LAMB's layer-wise trust ratio)
    scheduler.step()               (linear warm-up, then linear or cosine decay to min_lr_ratio * lr)

Exact big batches: a loss that is a mean over a varying number of units (MLM's masked tokens, a padded tagger's
real tokens) has the big batch's gradient only if each micro-batch is weighted by its share of the units, not by
1/grad_accum. ``counts(batch)`` says, before the forward pass, how many units each part of the loss has in a batch
(``{"mlm": masked tokens, "nsp": examples}``, or ``{"loss": n}`` for a one-part loss); the Trainer then gives the
gradient, the logged loss and each logged part of the one big batch, whatever grad_accum and the number of processes.
Without ``counts`` every micro-batch weighs 1/grad_accum: exact when each mean is over the same number of units
(a causal LM's fixed-length blocks, a classifier's examples).

Data order is a pure function of (seed, step): each epoch is a seeded permutation and step s takes the global
batch at positions [s * batch_size, (s + 1) * batch_size) of the stream of epochs. So resuming needs only the
step, and a distributed run sees the same global batches as a single process (each rank takes its slice).
"""

from __future__ import annotations

import contextlib
import json
import math
import signal
import threading
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import torch
from torch import nn

from minilm.files import atomic_write_text
from minilm.train import checkpoint as ckpt
from minilm.train.config import ConfigError, choice, to_dict
from minilm.train.device import parse_device, resolve_precision
from minilm.train.distributed import DistributedContext
from minilm.train.lamb import Lamb
from minilm.train.rng import capture_rng_state, restore_rng_state


class TrainingError(RuntimeError):
    """Training cannot go on (e.g. the loss is NaN); the message says what was kept and what to try."""


OPTIMIZERS = ("adamw", "lamb")  # TrainConfig.optimizer: torch's AdamW, or minilm.train.lamb.Lamb
ZERO_MEANS = {  # TrainConfig's counts that may be 0, and what 0 means
    "warmup_steps": "no warm-up",
    "eval_every": "evaluate only at the end",
    "eval_batches": "all of the eval data",
    "save_every": "save only at the end",
    "threads": "torch's default",
}
FLOAT_RANGES = {  # TrainConfig's other floats: their valid closed ranges
    "min_lr_ratio": (0.0, 1.0),
    "weight_decay": (0.0, math.inf),
    "eps": (0.0, 1.0),
    "beta1": (0.0, 1.0),
    "beta2": (0.0, 1.0),
    "grad_clip": (0.0, math.inf),
}


class InterruptedAgain(KeyboardInterrupt):
    """Ctrl-C pressed a second time while the first was held: stop at once, saving nothing."""


@contextlib.contextmanager
def held_interrupts():
    """Hold Ctrl-C (SIGINT) until the block ends, then raise KeyboardInterrupt: what the block writes (a step's
    update and its log entry) is written whole. Pressed again meanwhile, :class:`InterruptedAgain` is raised at once.
    Only the main thread receives signals; elsewhere the block runs as it is."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    pressed = 0

    def hold(signum, frame) -> None:
        nonlocal pressed
        pressed += 1
        if pressed > 1:
            raise InterruptedAgain

    previous = signal.signal(signal.SIGINT, hold)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
    if pressed:
        raise KeyboardInterrupt


@dataclass
class TrainConfig:
    # optimisation
    batch_size: int = 16  # examples per optimizer step, summed over processes and accumulation steps
    grad_accum: int = 1  # micro-batches per step: trade memory for time at the same batch_size
    lr: float = 1e-3  # peak learning rate, reached after warmup_steps
    min_lr_ratio: float = 0.1  # the schedule decays to min_lr_ratio * lr at max_steps
    schedule: str = "cosine"  # decay after warm-up: "cosine", "linear" or "constant"
    warmup_steps: int = 50  # linear warm-up from 0
    max_steps: int = 500  # optimizer steps in the whole run
    optimizer: str = "adamw"  # "adamw", or "lamb" (ALBERT's: each layer's step scaled to lr x its weights' norm)
    weight_decay: float = 0.1  # decoupled decay of matrices and embeddings (never biases or norm weights)
    beta1: float = 0.9
    beta2: float = 0.95
    eps: float = 1e-8  # added to sqrt(v) in the optimizer's denominator (BERT and ALBERT used 1e-6)
    grad_clip: float = 1.0  # max global gradient norm; 0 disables clipping
    # hardware
    device: str = "auto"  # "auto" (cuda, then mps, then cpu), "cpu", "cuda", "cuda:1", "mps"
    precision: str = "auto"  # "auto" (bf16 where supported, else fp16 on GPUs, fp32 on CPU), "fp32", "bf16", "fp16"
    compile: bool = False  # torch.compile the model (slow first step, faster later on GPUs)
    threads: int = 0  # torch CPU threads; 0 keeps torch's default
    distributed: str = "ddp"  # under torchrun: "ddp" (replicate) or "fsdp" (shard parameters, for big models)
    # bookkeeping
    seed: int = 0
    log_every: int = 10  # steps between entries of metrics.jsonl
    eval_every: int = 250  # steps between evaluations (and at the end); 0: only at the end
    eval_batches: int = 20  # batches of eval data per evaluation (0: all of it)
    save_every: int = 250  # steps between checkpoints (and at the end); 0: only at the end
    keep_last: int = 2  # checkpoints kept on disk
    run_dir: str = ""  # where config, metrics and checkpoints go; "" for no files (notebooks)
    overwrite: bool = False  # the CLIs: a new run into a run_dir that holds files moves them aside to run_dir.old-*
    progress: bool = True  # tqdm progress bar with loss, lr and tokens/s

    def validate(self) -> None:
        choice(self.optimizer, OPTIMIZERS, "optimizer")
        choice(self.schedule, ("cosine", "linear", "constant"), "schedule")
        choice(self.precision, ("auto", "fp32", "bf16", "fp16"), "precision")
        choice(self.distributed, ("ddp", "fsdp"), "distributed")
        for key in ("batch_size", "grad_accum", "max_steps", "log_every", "keep_last"):
            if getattr(self, key) < 1:
                raise ConfigError(f"{key} must be at least 1, got {getattr(self, key)}")
        for key, zero in ZERO_MEANS.items():
            if getattr(self, key) < 0:
                raise ConfigError(f"{key} must be >= 0 ({zero}), got {getattr(self, key)}")
        if not 0 <= self.seed < 2**32:
            raise ConfigError(f"seed must be between 0 and 2**32 - 1, got {self.seed}")
        if not (math.isfinite(self.lr) and self.lr > 0):
            raise ConfigError(f"lr must be a positive number, got {self.lr}")
        for key, (lo, hi) in FLOAT_RANGES.items():
            if not lo <= getattr(self, key) <= hi:  # (NaN is in no range)
                raise ConfigError(f"{key} must be between {lo} and {hi}, got {getattr(self, key)}")
        parse_device(self.device)  # a misspelt device now; whether this machine has it, when the run starts


@dataclass
class LossOutput:
    """What a loss function returns for one micro-batch.

    A multi-part loss (BERT's MLM + NSP) names its parts, each the mean over its own units, so the Trainer can log
    them and, with ``counts``, weight each by its units (the loss is then rebuilt from the parts and weights).
    """

    loss: torch.Tensor  # scalar: sum_k weights[k] * parts[k] (or the one mean when there are no parts)
    n_tokens: int  # tokens the micro-batch covers (throughput)
    parts: dict[str, torch.Tensor] = field(default_factory=dict)  # named parts, each a mean over its own units
    weights: dict[str, float] = field(default_factory=dict)  # a part's weight in loss (missing: 1.0)


LossFn = Callable[[nn.Module, object], LossOutput]
# batch -> the loss-bearing units of each part in it, e.g. {"mlm": masked tokens, "nsp": examples} or {"loss": n}
Counts = Callable[[object], dict[str, int | torch.Tensor]]
RESERVED = ("loss", "step", "split", "lr", "tokens_per_s", "epoch", "perplexity")  # metrics keys; not part names


# ------------------------------------------------------------------------------------------ pieces


def parameter_groups(model: nn.Module, weight_decay: float) -> list[dict]:
    """The optimizer's groups: decay matrices and embeddings; never biases or normalisation weights (1-D tensors)."""
    decay, no_decay, seen = [], [], set()
    for p in model.parameters():
        if not p.requires_grad or id(p) in seen:  # tied weights appear once
            continue
        seen.add(id(p))
        (decay if p.dim() >= 2 else no_decay).append(p)
    return [{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}]


def build_optimizer(model: nn.Module, config: TrainConfig, device: torch.device) -> torch.optim.Optimizer:
    """``config.optimizer`` over :func:`parameter_groups`: AdamW, or LAMB, whose no-decay group (biases, norms) also
    goes without the layer-wise trust ratio, as in ALBERT's lamb_optimizer.py."""
    groups, betas = parameter_groups(model, config.weight_decay), (config.beta1, config.beta2)
    if config.optimizer == "lamb":
        decay, no_decay = groups
        return Lamb([decay, {**no_decay, "layer_adaptation": False}], lr=config.lr, betas=betas, eps=config.eps)
    fused = device.type in ("cuda", "cpu")
    return torch.optim.AdamW(groups, lr=config.lr, betas=betas, eps=config.eps, fused=fused)


def check_same_optimizer(saved_config: dict | None, optimizer: str, resumed: str) -> None:
    """Refuse to resume a run with another optimizer than it was saved with: its state (moments, step counts, the
    groups' settings) is that optimizer's. ``saved_config``: the run's saved settings (config.json, or a checkpoint's
    meta.json ``config``); a run saved before TrainConfig.optimizer existed trained with AdamW."""
    saved_train = saved_config.get("train") if isinstance(saved_config, dict) else None
    if not isinstance(saved_train, dict):  # not saved by the Trainer: nothing to compare
        return
    saved = saved_train.get("optimizer", "adamw")
    if saved != optimizer:
        raise ConfigError(
            f"{resumed} was trained with optimizer={saved}; its optimizer state cannot continue as "
            f"optimizer={optimizer}: drop optimizer={optimizer} to resume it, or start a new run in another run_dir"
        )


class LossModule(nn.Module):
    """``loss_fn(model, batch)`` as a module: ``forward(batch) -> LossOutput``.

    DDP synchronises gradients and FSDP gathers parameters in hooks around ``forward``; a loss function that calls
    ``model.features`` or a head directly would bypass them on the model itself. Wrapped around the model, the whole
    loss is one forward, whatever the loss function calls. ``model`` is a submodule: the parameters are the model's.
    """

    def __init__(self, model: nn.Module, loss_fn: LossFn) -> None:
        super().__init__()
        self.model, self.loss_fn = model, loss_fn

    def forward(self, batch) -> LossOutput:
        return self.loss_fn(self.model, batch)


def _one_mean(out: LossOutput, units: dict[str, int] | None) -> bool:
    """Whether a loss with parts is one mean over shared units: the parts count the same units (per ``counts``) and
    their weights sum to 1, so the loss is the mean over all of them (the biLM's two directions)."""
    if units is None or len({int(n) for n in units.values()}) != 1:
        return False
    return math.isclose(sum(out.weights.get(name, 1.0) for name in out.parts), 1.0)


def lr_lambda(config: TrainConfig) -> Callable[[int], float]:
    """Multiplier of the peak lr at each step: linear warm-up, then cosine/linear decay to min_lr_ratio."""

    def at(step: int) -> float:
        if step < config.warmup_steps:
            return (step + 1) / config.warmup_steps
        if config.schedule == "constant":
            return 1.0
        progress = min(1.0, (step - config.warmup_steps) / max(1, config.max_steps - config.warmup_steps))
        shape = 0.5 * (1 + math.cos(math.pi * progress)) if config.schedule == "cosine" else 1 - progress
        return config.min_lr_ratio + (1 - config.min_lr_ratio) * shape

    return at


class BatchOrder:
    """Which examples each step uses: seeded permutations per epoch, the same for any number of processes."""

    def __init__(self, n_examples: int, batch_size: int, seed: int) -> None:
        self.n, self.batch_size, self.seed = n_examples, batch_size, seed
        self._epoch, self._perm = -1, None

    def _permutation(self, epoch: int) -> torch.Tensor:
        if epoch != self._epoch:
            generator = torch.Generator().manual_seed(self.seed * 100_003 + epoch)
            self._epoch, self._perm = epoch, torch.randperm(self.n, generator=generator)
        return self._perm

    def indices(self, step: int) -> list[int]:
        """The global batch of ``step``: positions [step * B, (step + 1) * B) of the epoch stream."""
        start = step * self.batch_size
        return [int(self._permutation(p // self.n)[p % self.n]) for p in range(start, start + self.batch_size)]

    def epoch(self, step: int) -> float:
        return step * self.batch_size / self.n


def default_collate(examples: list) -> object:
    """Stack tensors (or tuples/dicts of tensors) into a batch."""
    first = examples[0]
    if isinstance(first, torch.Tensor):
        return torch.stack(examples)
    if isinstance(first, dict):
        return {k: default_collate([e[k] for e in examples]) for k in first}
    if isinstance(first, (tuple, list)):
        return type(first)(default_collate(list(items)) for items in zip(*examples, strict=True))
    return torch.tensor(examples)


def to_device(batch, device: torch.device):
    if isinstance(batch, torch.Tensor):
        return batch.to(device, non_blocking=True)
    if isinstance(batch, dict):
        return {k: to_device(v, device) for k, v in batch.items()}
    if isinstance(batch, (tuple, list)):
        return type(batch)(to_device(v, device) for v in batch)
    return batch


# ------------------------------------------------------------------------------------------ Trainer


class Trainer:
    """Train ``model`` on ``train_data`` (a sequence of examples) by minimising ``loss_fn(model, batch)``.

    ``eval_data``: examples evaluated every ``eval_every`` steps (the mean loss and each part's mean).
    ``collate``: list of examples -> batch (default: stack tensors); ``eval_collate`` for the eval data (default:
    the same). ``run_config``: extra settings (model,
    objective, ...) written with the TrainConfig into ``run_dir/config.json``. ``on_eval``: called with the
    metrics dict after each evaluation (e.g. to print samples).
    ``counts``: batch -> the loss-bearing units of each part of the loss (see :data:`Counts`), for exact
    big-batch gradients under accumulation and DDP, and unit-weighted evaluation; None weighs every micro-batch
    1/grad_accum and evaluates by examples.
    ``perplexity``: whether exp of the evaluation loss is a perplexity, reported as ``perplexity``: True for a
    language-model loss (with parts, only if they are means over the same units whose weights sum to 1, e.g. the
    biLM's two directions: the loss is then the mean over all predictions), a part's name (``"mlm"``) when only that
    part is (exp of MLM + NSP is not), False (the default) for anything else, e.g. a classifier's loss.
    """

    def __init__(
        self,
        model: nn.Module,
        loss_fn: LossFn,
        train_data: Sequence,
        config: TrainConfig | None = None,
        eval_data: Sequence | None = None,
        collate: Callable[[list], object] = default_collate,
        eval_collate: Callable[[list], object] | None = None,
        run_config: dict | None = None,
        on_eval: Callable[[dict], None] | None = None,
        counts: Counts | None = None,
        perplexity: bool | str = False,
    ) -> None:
        self.config = config = config or TrainConfig()
        config.validate()
        if len(train_data) == 0:
            raise ConfigError("the training data is empty: check the corpus or task and the sequence length")
        if not isinstance(perplexity, (bool, str)) or perplexity in RESERVED:
            raise ConfigError(f"perplexity={perplexity!r}: use True, False or the name of a part of the loss")
        self.dist = DistributedContext.from_environment(config.device)
        if config.batch_size % (self.dist.world_size * config.grad_accum) != 0:
            raise ConfigError(
                f"batch_size={config.batch_size} must be divisible by processes x grad_accum = "
                f"{self.dist.world_size} x {config.grad_accum}"
            )
        if config.threads:
            torch.set_num_threads(config.threads)
        self.device = self.dist.device
        self.dtype = resolve_precision(config.precision, self.device)
        self.collate, self.on_eval = collate, on_eval
        self.counts, self.perplexity = counts, perplexity
        self.eval_collate = eval_collate or collate
        self.train_data, self.eval_data = train_data, eval_data
        self.run_config = run_config or {}
        self.run_dir = Path(config.run_dir) if config.run_dir else None

        self.model = model.to(self.device)  # the module itself (FSDP shards it in place); checkpoints hold it
        # The loss as one module around the model, so whatever the loss function calls (model.features, a head)
        # runs inside a forward that DDP and FSDP hook; evaluation uses it unwrapped (FSDP shards it in place).
        self.loss_module = LossModule(self.model, loss_fn)
        # Wrap before building the optimizer: FSDP replaces the parameters with sharded ones.
        self.wrapped = self.dist.wrap(self.loss_module, config.distributed, layers_of=self.model)
        self.optimizer = build_optimizer(self.model, config, self.device)
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(self.optimizer, lr_lambda(config))
        self.scaler = torch.amp.GradScaler(self.device.type, enabled=self.dtype == torch.float16)
        if config.compile:
            self.wrapped = torch.compile(self.wrapped)
        self.order = BatchOrder(len(train_data), config.batch_size, config.seed)
        self.step = 0
        self._step_rng: dict | None = None  # the RNG state at the start of the step under way (None between steps)
        self._eval_pending = False  # an evaluation due at this step has not finished (a resume runs it first)
        self._window = (0, 0.0)  # training tokens since the last log entry, and when that was (set by fit)
        self.history: list[dict] = []  # every metrics entry, as written to metrics.jsonl
        self.last_losses: dict[str, float] = {}  # the last step's big-batch loss and parts ({"loss", "mlm", ...})

    @property
    def loss_fn(self) -> LossFn:
        """The loss the model is trained and evaluated with; assigning it swaps the loss module's function (e.g. to
        evaluate only one part of a multi-part loss after training)."""
        return self.loss_module.loss_fn

    @loss_fn.setter
    def loss_fn(self, loss_fn: LossFn) -> None:
        self.loss_module.loss_fn = loss_fn

    # -------------------------------------------------------------------------------------- batches

    def _micro_batches(self, step: int) -> tuple[list, list[dict[str, int]] | None]:
        """This process's micro-batches for ``step`` (its slice of the global batch, split grad_accum ways) and,
        with ``counts``, the units of each (counted on the host, before the batch moves to the device)."""
        indices = self.order.indices(step)[self.dist.rank :: self.dist.world_size]
        size = len(indices) // self.config.grad_accum
        chunks = [indices[i * size : (i + 1) * size] for i in range(self.config.grad_accum)]
        batches = [self.collate([self.train_data[i] for i in chunk]) for chunk in chunks]
        units = [self._count(batch) for batch in batches] if self.counts is not None else None
        return [to_device(batch, self.device) for batch in batches], units

    def _count(self, batch) -> dict[str, int]:
        return {name: int(n) for name, n in self.counts(batch).items()}

    def _global_units(self, units: list[dict[str, int]]) -> dict[str, int]:
        """Each part's units in the step's global batch: summed over the micro-batches and the processes."""
        names = sorted(units[0])
        if any(sorted(u) != names for u in units):
            raise ConfigError(f"counts(batch) gave different keys for different batches: {[sorted(u) for u in units]}")
        sums = [sum(u[name] for u in units) for name in names]
        if self.dist.enabled:  # one small all-reduce per step
            sums = self.dist.sum(torch.tensor(sums, device=self.device)).tolist()
        return dict(zip(names, sums, strict=True))

    def _autocast(self):
        if self.dtype == torch.float32:
            return contextlib.nullcontext()
        return torch.autocast(self.device.type, dtype=self.dtype)

    # -------------------------------------------------------------------------------------- the loss's parts

    def _check(self, out: LossOutput, units: dict[str, int] | None) -> None:
        """One clear message when the loss's parts, its weights, the counts and ``perplexity`` do not fit."""
        parts = sorted(out.parts)
        if clash := [name for name in parts if name in RESERVED]:
            raise ConfigError(f"loss part {clash[0]!r} clashes with a metrics key ({', '.join(RESERVED)}): rename it")
        if stray := sorted(set(out.weights) - set(out.parts)):
            raise ConfigError(f"LossOutput.weights names {stray}, which are not parts of the loss ({parts})")
        if units is not None and sorted(units) != (parts or ["loss"]):
            raise ConfigError(
                f"counts(batch) gave the units of {sorted(units)}, but the loss has parts {parts}: give one count "
                "per part (keys = the parts' names), or {'loss': n} for a loss without parts"
            )
        if self.perplexity is True and parts and not _one_mean(out, units):
            raise ConfigError(
                f"perplexity=True, but the loss has parts {parts}: exp of their weighted sum is a perplexity only "
                "for parts that count the same units with weights summing to 1; name the part that is a "
                f"language-model loss (perplexity={parts[0]!r}) or set perplexity=False"
            )
        if isinstance(self.perplexity, str) and self.perplexity not in out.parts:
            raise ConfigError(f"perplexity={self.perplexity!r} is not a part of the loss (parts: {parts or 'none'})")

    def _unit_means(self, out: LossOutput) -> dict[str, torch.Tensor]:
        """The means of ``out`` that are weighted by units: with counts and parts, the parts (the loss is rebuilt
        from them); otherwise the loss and its parts, all with the same units (the counts' or examples)."""
        if self.counts is not None and out.parts:
            return dict(out.parts)
        return {"loss": out.loss, **out.parts}

    @staticmethod
    def _with_total(means: dict[str, float], weights: dict[str, float]) -> dict[str, float]:
        """``means`` with ``loss`` first; rebuilt as sum_k weights[k] * parts[k] when it was not measured itself."""
        if "loss" in means:
            return {"loss": means["loss"], **{k: v for k, v in means.items() if k != "loss"}}
        return {"loss": sum(weights.get(k, 1.0) * v for k, v in means.items()), **means}

    # -------------------------------------------------------------------------------------- one step

    def train_step(self) -> tuple[float, int]:
        """One optimizer step; returns the big batch's loss (the same in any number of processes) and the tokens
        this process saw. The loss and each of its parts are kept in ``last_losses``."""
        self.wrapped.train()
        self._step_rng = capture_rng_state()  # an interrupted step is rolled back to here (see fit)
        micro_batches, units = self._micro_batches(self.step)
        totals = self._global_units(units) if units is not None else None
        world, accum = self.dist.world_size, len(micro_batches)
        tally: dict[str, torch.Tensor] = {}  # name -> this process's share of the big batch's mean
        tokens = 0
        for i, batch in enumerate(micro_batches):
            last = i == accum - 1
            sync = contextlib.nullcontext() if last else self.dist.no_sync(self.wrapped)
            with sync:
                with self._autocast():
                    out = self.wrapped(batch)
                self._check(out, units[i] if units is not None else None)
                means = self._unit_means(out)
                if totals is None:  # every micro-batch holds 1 / (grad_accum x processes) of the examples
                    shares = dict.fromkeys(means, 1 / (accum * world))
                    objective = out.loss / accum
                else:  # its share n_k / N_k of each part's units; a part without units here adds nothing
                    shares = {k: units[i][k] / totals[k] if units[i][k] else 0.0 for k in means}
                    terms = [out.weights.get(k, 1.0) * shares[k] * means[k] for k in means if shares[k]]
                    objective = world * sum(terms, 0.0 * out.loss)  # 0 x loss: in the graph even with no terms
                # DDP (and FSDP) average the processes' gradients: world x (a share of the global batch) undoes it
                self.scaler.scale(objective).backward()
            for k, value in means.items():  # (the mean of a part without units may be NaN: leave it out)
                share = shares[k] * value.detach().float() if shares[k] else torch.zeros((), device=self.device)
                tally[k] = tally.get(k, 0.0) + share
            tokens += out.n_tokens
        names = sorted(tally)
        summed = self.dist.sum(torch.stack([tally[k] for k in names])).tolist()
        self.last_losses = self._with_total(dict(zip(names, summed, strict=True)), out.weights)
        loss = self.last_losses["loss"]
        if not math.isfinite(loss):
            self.optimizer.zero_grad(set_to_none=True)
            raise TrainingError(self._nan_message(loss))
        if self.config.grad_clip > 0:
            self.scaler.unscale_(self.optimizer)
            self.dist.clip_grad_norm(self.wrapped, self.config.grad_clip)
        self.scaler.step(self.optimizer)
        self.scaler.update()
        self.scheduler.step()
        self.optimizer.zero_grad(set_to_none=True)
        self.step += 1
        self._step_rng = None  # the step is done: nothing to roll back
        return loss, tokens

    def _latest_checkpoint(self) -> Path | None:
        """The checkpoint a stopped run can resume from (None: none saved, or no run directory)."""
        if self.run_dir is None:
            return None
        with contextlib.suppress(ckpt.CheckpointError), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return ckpt.find_checkpoint(self.run_dir)
        return None

    def _last_checkpoint(self) -> str:
        """Which checkpoint a stopped run can resume from, in words."""
        latest = self._latest_checkpoint()
        return f"the last good checkpoint is {latest}" if latest else "no checkpoint had been saved yet"

    def _out_of_memory_message(self, err: torch.OutOfMemoryError) -> str:
        config, world = self.config, self.dist.world_size
        micro = config.batch_size // (world * config.grad_accum)
        more = next((n for n in range(2 * config.grad_accum, config.batch_size // world + 1)
                     if config.batch_size % (world * n) == 0), None)  # fmt: skip
        split = (
            f"keep batch_size={config.batch_size} and raise grad_accum to {more} (the same steps in smaller "
            "micro-batches: less memory, more time)"
            if more
            else "lower batch_size"
        )
        reason = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        latest = self._latest_checkpoint()
        kept = (
            f"the last good checkpoint is {latest}: --resume continues from it, and may change grad_accum"
            if latest
            else "no checkpoint had been saved yet: start again (in the same run_dir with overwrite=true, which moves "
            "this run's files aside)"
        )
        return (
            f"out of memory on {self.device} at step {self.step + 1}, with micro-batches of {micro} examples "
            f"({reason}). To fit, {split}, or shorten the sequences (seq_len) or the model; {kept}."
        )

    def _nan_message(self, loss: float) -> str:
        kept = self._last_checkpoint()
        return (
            f"the loss became {loss} at step {self.step}; training stopped and nothing was saved from this step "
            f"({kept}). Lower the learning rate (lr={self.config.lr}), keep grad_clip on, or use precision=fp32, "
            "then resume from the checkpoint."
        )

    # -------------------------------------------------------------------------------------- evaluation

    @torch.no_grad()
    def evaluate(self) -> dict:
        """The loss and each of its parts over the first ``eval_batches`` global batches of the eval data.

        Each part is the mean over its units (``counts``; without them, over examples), so the result does not
        depend on the batch size or the number of processes; each global batch is split over the processes (and
        into micro-batches) as in training. ``perplexity`` is added only when the Trainer was told what it is.
        """
        if self.eval_data is None or len(self.eval_data) == 0:
            return {}
        rng = capture_rng_state()  # evaluation leaves the random streams as they were, even when interrupted
        try:
            return self._evaluate()
        finally:
            restore_rng_state(rng)

    def _evaluate(self) -> dict:
        self.model.eval()
        size, micro = self.config.batch_size, self.config.batch_size // (self.dist.world_size * self.config.grad_accum)
        n_batches = math.ceil(len(self.eval_data) / size)
        if self.config.eval_batches:
            n_batches = min(n_batches, self.config.eval_batches)
        everyone = [i for b in range(n_batches) for i in range(b * size, min((b + 1) * size, len(self.eval_data)))]
        if len(everyone) < self.dist.world_size:
            raise ConfigError(
                f"evaluation reads {len(everyone)} examples, fewer than the {self.dist.world_size} processes: "
                "give more eval data or use fewer processes"
            )
        mine = everyone[self.dist.rank :: self.dist.world_size]
        sums: dict[str, torch.Tensor] = {}  # name -> sum of mean x units
        units: dict[str, int] = {}
        for start in range(0, len(mine), micro):
            chunk = mine[start : start + micro]
            batch = self.eval_collate([self.eval_data[i] for i in chunk])
            counted = self._count(batch) if self.counts is not None else None
            with self._autocast():
                out = self.loss_module(to_device(batch, self.device))
            self._check(out, counted)
            for k, value in self._unit_means(out).items():
                n = counted[k] if counted is not None else len(chunk)
                sums[k] = sums.get(k, 0.0) + value.float() * n
                units[k] = units.get(k, 0) + n
        names = sorted(sums)
        n_units = torch.tensor([float(units[k]) for k in names], device=self.device)
        summed = self.dist.sum(torch.cat([torch.stack([sums[k] for k in names]), n_units])).tolist()  # one all-reduce
        sums_all, units_all = summed[: len(names)], summed[len(names) :]
        means = {k: s / n if n else math.nan for k, s, n in zip(names, sums_all, units_all, strict=True)}
        metrics = {"step": self.step, "split": "validation", **self._with_total(means, out.weights)}
        if self.perplexity is not False:
            metrics["perplexity"] = math.exp(min(metrics["loss" if self.perplexity is True else self.perplexity], 50))
        self._log(metrics, then=self.on_eval)
        return metrics

    # -------------------------------------------------------------------------------------- checkpoints

    def save(self) -> Path | None:
        """Write a checkpoint of the current step (rank 0 writes; atomic, older ones pruned)."""
        if self.run_dir is None:
            return None
        model_state, optimizer_state = self.dist.full_state_dicts(self.model, self.optimizer)

        def write() -> Path:
            return ckpt.save_checkpoint(
                self.run_dir,
                self.step,
                self.model,
                optimizer=self.optimizer,
                scheduler=self.scheduler,
                scaler=self.scaler,
                # the data position (batches are a function of the step), and whether an evaluation is owed
                trainer_state={"step": self.step, "eval_pending": self._eval_pending},
                config=self.run_config_dict(),
                keep_last=self.config.keep_last,
                model_state=model_state,
                optimizer_state=optimizer_state,
            )

        return self._on_main(write, f"saving the checkpoint of step {self.step}")

    def resume(self, path: str | Path) -> int:
        """Restore model, optimizer, scheduler, scaler, RNG and data position; return the step reached.

        Call it right before :meth:`fit`: the random generators are restored to their state at the save. The run
        must go on with the optimizer it was saved with (``config.optimizer``).
        """
        checkpoint = ckpt.find_checkpoint(path)
        check_same_optimizer(ckpt.read_meta(checkpoint).get("config"), self.config.optimizer, str(path))
        state = ckpt.load_checkpoint(checkpoint, self.model, self.optimizer, self.scheduler, self.scaler)
        self.step, self._eval_pending = int(state["step"]), bool(state.get("eval_pending", False))
        if self.step > self.config.max_steps:
            raise ConfigError(
                f"{path} is at step {self.step}, past max_steps={self.config.max_steps}: set max_steps above "
                f"{self.step} to train further"
            )
        if self.run_dir is not None:
            self.history = read_metrics(self.run_dir / "metrics.jsonl", up_to_step=self.step)
        return self.step

    def run_config_dict(self) -> dict:
        return {"train": to_dict(self.config), **self.run_config}

    def _on_main(self, work: Callable[[], object], doing: str):
        """Run ``work`` on rank 0 alone and return its result there (None elsewhere); every process calls this.

        If it fails, rank 0 raises its error and every other process a TrainingError naming it, at once: they do
        not wait for rank 0 at the next collective until the launcher's timeout.
        """
        result, error = None, None
        if self.dist.is_main:
            try:
                result = work()
            except BaseException as err:  # Ctrl-C too: the others must not wait for a rank 0 that is gone
                error = err
        failure = self.dist.main_failure(f"{type(error).__name__}: {error}" if error is not None else None)
        if error is not None:
            raise error
        if failure is not None:
            raise TrainingError(f"rank 0 failed while {doing} ({failure}); process {self.dist.rank} stops too")
        return result

    # -------------------------------------------------------------------------------------- the loop

    def fit(self) -> dict:
        """Train until ``max_steps``; evaluate and save periodically and at the end. Returns the final eval."""
        self._start_run()
        config, last_eval = self.config, {}
        bar = self._progress_bar()
        self._window = (0, time.perf_counter())
        try:
            if self._eval_pending and self.eval_data is not None:  # interrupted during it before the resume
                last_eval = self._owed_evaluation()
            while self.step < config.max_steps:
                with held_interrupts():  # Ctrl-C waits for the step's update and log entry (pressed again: at once)
                    self._step_and_log(bar)
                    final = self.step == config.max_steps
                    due = final or (config.eval_every and self.step % config.eval_every == 0)
                    self._eval_pending = self.eval_data is not None and bool(due)
                if self._eval_pending:
                    last_eval = self._owed_evaluation()
                if self.run_dir is not None and (final or (config.save_every and self.step % config.save_every == 0)):
                    self.save()
        except torch.OutOfMemoryError as err:
            self.optimizer.zero_grad(set_to_none=True)  # the half-made step's gradients go with it
            raise TrainingError(self._out_of_memory_message(err)) from None
        except KeyboardInterrupt as interrupt:
            raise KeyboardInterrupt(self._stop(again=isinstance(interrupt, InterruptedAgain))) from None
        finally:
            if bar is not None:
                bar.close()
        return last_eval

    def _step_and_log(self, bar) -> None:
        """One training step and, when due, its metrics.jsonl entry."""
        _, tokens = self.train_step()
        window_tokens, window_start = self._window
        window_tokens += tokens * self.dist.world_size
        self._window = (window_tokens, window_start)
        if self.step % self.config.log_every == 0 or self.step == self.config.max_steps:
            entry = {
                "step": self.step,
                "split": "train",
                **self.last_losses,
                "lr": self.scheduler.get_last_lr()[0],
                "tokens_per_s": window_tokens / max(time.perf_counter() - window_start, 1e-9),
                "epoch": self.order.epoch(self.step),
            }
            self._log(entry)
            self._window = (0, time.perf_counter())
            if bar is not None:
                losses = {k: f"{v:.3f}" for k, v in self.last_losses.items()}
                bar.set_postfix(losses, lr=f"{entry['lr']:.2e}", tok_s=f"{entry['tokens_per_s']:.0f}")
        if bar is not None:
            bar.update(1)

    def _owed_evaluation(self) -> dict:
        """Evaluate; an interrupt before the end leaves the evaluation owed, and the checkpoint says so."""
        metrics = self.evaluate()
        self._eval_pending = False
        return metrics

    def _stop(self, again: bool) -> str:
        """After Ctrl-C: roll back an unfinished step, save a checkpoint that resumes exactly, say what was kept.

        Pressed twice, nothing is saved (the step may be half-applied); the last checkpoint resumes exactly.
        """
        self.optimizer.zero_grad(set_to_none=True)
        resume = f"resume with --resume {self.run_dir}" if self.run_dir is not None else ""
        if again:
            kept = self._last_checkpoint()
            return f"interrupted twice at step {self.step}: stopped at once without saving ({kept}); {resume}"
        if self._step_rng is not None:  # inside a step: its random draws are undone, its update never happened
            restore_rng_state(self._step_rng)
            self._step_rng = None
        try:
            saved = self.save() if self.run_dir is not None else None
        except KeyboardInterrupt:
            return (
                f"interrupted again while saving step {self.step}: that save was abandoned whole "
                f"({self._last_checkpoint()}); {resume}"
            )
        return f"interrupted at step {self.step}" + (f"; saved {saved}: {resume}" if saved else "")

    def _start_run(self) -> None:
        if self.run_dir is None:
            return

        def write() -> None:
            self.run_dir.mkdir(parents=True, exist_ok=True)
            atomic_write_text(self.run_dir / "config.json", json.dumps(self.run_config_dict(), indent=2))
            # A resumed run rewrites the log up to its step, so entries after the checkpoint are not duplicated.
            lines = "".join(json.dumps(e) + "\n" for e in self.history)
            atomic_write_text(self.run_dir / "metrics.jsonl", lines)

        self._on_main(write, "preparing the run directory")

    def _progress_bar(self):
        if not (self.config.progress and self.dist.is_main):
            return None
        from tqdm.auto import tqdm

        return tqdm(total=self.config.max_steps, initial=self.step, desc="train", dynamic_ncols=True)

    def _log(self, entry: dict, then: Callable[[dict], None] | None = None) -> None:
        """Keep ``entry`` in the history (every process); rank 0 appends it to metrics.jsonl, then calls ``then``."""
        self.history.append(entry)

        def write() -> None:
            if self.run_dir is not None:
                with open(self.run_dir / "metrics.jsonl", "a") as f:
                    f.write(json.dumps(entry) + "\n")
            if then is not None:
                then(entry)

        self._on_main(write, f"logging the {entry['split']} metrics of step {entry['step']}")


def read_metrics(path: str | Path, up_to_step: int | None = None) -> list[dict]:
    """The entries of a metrics.jsonl (for plots), optionally only those up to a step.

    A torn last line (a crash while logging) is left out with a warning; a resume rewrites the file without it.
    """
    path = Path(path)
    if not path.exists():
        return []
    lines = [line for line in path.read_text(encoding="utf-8", errors="replace").splitlines() if line.strip()]
    entries = []
    for number, line in enumerate(lines, 1):
        try:
            entry = json.loads(line)
            if not isinstance(entry, dict) or not isinstance(entry.get("step"), int):
                raise ValueError("not a metrics entry")
        except ValueError as err:
            if number < len(lines):
                raise TrainingError(
                    f"{path}, line {number}, is not a metrics entry ({err}); only a torn last line is tolerated: "
                    "repair or delete that line"
                ) from None
            warnings.warn(f"{path}: its last line is torn (a crash while logging?) and was left out", stacklevel=2)
            break
        entries.append(entry)
    return [e for e in entries if up_to_step is None or e["step"] <= up_to_step]
