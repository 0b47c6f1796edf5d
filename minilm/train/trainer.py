"""The one Trainer: every chapter and both command-line interfaces train through it.

    trainer = Trainer(model, loss_fn, train_data, config=TrainConfig(max_steps=500), eval_data=val_data)
    trainer.fit()              # -> the last evaluation's metrics

What a step does (``config.grad_accum`` micro-batches, on every process of a distributed run)::

    for each micro-batch:          loss = loss_fn(model, batch) under autocast; (loss / grad_accum).backward()
                                   (DDP all-reduces gradients on the last micro-batch only)
    clip the gradient norm;        optimizer.step() (AdamW, no weight decay on biases and norms)
    scheduler.step()               (linear warm-up, then linear or cosine decay to min_lr_ratio * lr)

Data order is a pure function of (seed, step): each epoch is a seeded permutation and step s takes the global
batch at positions [s * batch_size, (s + 1) * batch_size) of the stream of epochs. So resuming needs only the
step, and a distributed run sees the same global batches as a single process (each rank takes its slice).
"""

from __future__ import annotations

import contextlib
import json
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import torch
from torch import nn

from minilm.files import atomic_write_text
from minilm.train import checkpoint as ckpt
from minilm.train.config import ConfigError, choice, to_dict
from minilm.train.device import resolve_precision
from minilm.train.distributed import DistributedContext


class TrainingError(RuntimeError):
    """Training cannot go on (e.g. the loss is NaN); the message says what was kept and what to try."""


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
    weight_decay: float = 0.1  # AdamW decay of matrices and embeddings (never biases or norm weights)
    beta1: float = 0.9
    beta2: float = 0.95
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
    progress: bool = True  # tqdm progress bar with loss, lr and tokens/s

    def validate(self) -> None:
        choice(self.schedule, ("cosine", "linear", "constant"), "schedule")
        choice(self.precision, ("auto", "fp32", "bf16", "fp16"), "precision")
        choice(self.distributed, ("ddp", "fsdp"), "distributed")
        for key in ("batch_size", "grad_accum", "max_steps"):
            if getattr(self, key) < 1:
                raise ConfigError(f"{key} must be at least 1, got {getattr(self, key)}")
        if self.lr <= 0:
            raise ConfigError(f"lr must be positive, got {self.lr}")


@dataclass
class LossOutput:
    loss: torch.Tensor  # scalar: the mean loss of the micro-batch
    n_tokens: int  # tokens (or examples) it covers, for throughput
    parts: dict[str, torch.Tensor] = field(default_factory=dict)  # TEMP: the Trainer part defines these
    weights: dict[str, float] = field(default_factory=dict)


LossFn = Callable[[nn.Module, object], LossOutput]


# ------------------------------------------------------------------------------------------ pieces


def parameter_groups(model: nn.Module, weight_decay: float) -> list[dict]:
    """AdamW groups: decay matrices and embeddings; never biases or normalisation weights (1-D tensors)."""
    decay, no_decay, seen = [], [], set()
    for p in model.parameters():
        if not p.requires_grad or id(p) in seen:  # tied weights appear once
            continue
        seen.add(id(p))
        (decay if p.dim() >= 2 else no_decay).append(p)
    return [{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}]


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

    ``eval_data``: examples evaluated every ``eval_every`` steps (mean loss, and perplexity = exp(loss)).
    ``collate``: list of examples -> batch (default: stack tensors); ``eval_collate`` for the eval data (default:
    the same). ``run_config``: extra settings (model,
    objective, ...) written with the TrainConfig into ``run_dir/config.json``. ``on_eval``: called with the
    metrics dict after each evaluation (e.g. to print samples).
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
        counts: Callable[[object], dict] | None = None,  # TEMP: accepted and ignored until the Trainer part lands
        perplexity: bool | str = True,  # TEMP: accepted and ignored until the Trainer part lands
    ) -> None:
        self.config = config = config or TrainConfig()
        config.validate()
        if len(train_data) == 0:
            raise ConfigError("the training data is empty: check the corpus or task and the sequence length")
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
        self.loss_fn, self.collate, self.on_eval = loss_fn, collate, on_eval
        self.eval_collate = eval_collate or collate
        self.train_data, self.eval_data = train_data, eval_data
        self.run_config = run_config or {}
        self.run_dir = Path(config.run_dir) if config.run_dir else None

        self.model = model.to(self.device)  # the module itself (FSDP shards it in place); evaluation uses it
        # Wrap before building the optimizer: FSDP replaces the parameters with sharded ones.
        self.wrapped = self.dist.wrap(self.model, config.distributed)
        self.optimizer = torch.optim.AdamW(
            parameter_groups(self.model, config.weight_decay),
            lr=config.lr,
            betas=(config.beta1, config.beta2),
            fused=self.device.type in ("cuda", "cpu"),
        )
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(self.optimizer, lr_lambda(config))
        self.scaler = torch.amp.GradScaler(self.device.type, enabled=self.dtype == torch.float16)
        if config.compile:
            self.wrapped = torch.compile(self.wrapped)
        self.order = BatchOrder(len(train_data), config.batch_size, config.seed)
        self.step = 0
        self._step_rng: dict | None = None
        self.history: list[dict] = []  # every metrics entry, as written to metrics.jsonl

    # -------------------------------------------------------------------------------------- batches

    def _micro_batches(self, step: int) -> list:
        """This process's micro-batches for ``step``: its slice of the global batch, split grad_accum ways."""
        indices = self.order.indices(step)[self.dist.rank :: self.dist.world_size]
        size = len(indices) // self.config.grad_accum
        chunks = [indices[i * size : (i + 1) * size] for i in range(self.config.grad_accum)]
        return [to_device(self.collate([self.train_data[i] for i in chunk]), self.device) for chunk in chunks]

    def _autocast(self):
        if self.dtype == torch.float32:
            return contextlib.nullcontext()
        return torch.autocast(self.device.type, dtype=self.dtype)

    # -------------------------------------------------------------------------------------- one step

    def train_step(self) -> tuple[float, int]:
        """One optimizer step; returns the mean loss over all processes and the tokens this process saw."""
        self.wrapped.train()
        self._step_rng = ckpt.capture_rng_state()  # an interrupted step is rolled back to here (see fit)
        micro_batches = self._micro_batches(self.step)
        total_loss, tokens = torch.zeros((), device=self.device), 0
        for i, batch in enumerate(micro_batches):
            last = i == len(micro_batches) - 1
            sync = contextlib.nullcontext() if last else self.dist.no_sync(self.wrapped)
            with sync:
                with self._autocast():
                    out = self.loss_fn(self.wrapped, batch)
                self.scaler.scale(out.loss / len(micro_batches)).backward()
            total_loss += out.loss.detach().float()
            tokens += out.n_tokens
        loss = self.dist.mean(total_loss / len(micro_batches)).item()
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
        return loss, tokens

    def _nan_message(self, loss: float) -> str:
        latest = None
        if self.run_dir is not None:
            with contextlib.suppress(ckpt.CheckpointError):
                latest = ckpt.find_checkpoint(self.run_dir)
        kept = f"the last good checkpoint is {latest}" if latest else "no checkpoint had been saved yet"
        return (
            f"the loss became {loss} at step {self.step}; training stopped and nothing was saved from this step "
            f"({kept}). Lower the learning rate (lr={self.config.lr}), keep grad_clip on, or use precision=fp32, "
            "then resume from the checkpoint."
        )

    # -------------------------------------------------------------------------------------- evaluation

    @torch.no_grad()
    def evaluate(self) -> dict:
        """Mean loss per example over the first ``eval_batches`` global batches of the eval data.

        Each global batch is split over the processes (and into micro-batches) as in training, and the loss is
        weighted by examples, so the result does not depend on the number of processes.
        """
        if self.eval_data is None or len(self.eval_data) == 0:
            return {}
        self.model.eval()
        size, micro = self.config.batch_size, self.config.batch_size // (self.dist.world_size * self.config.grad_accum)
        n_batches = math.ceil(len(self.eval_data) / size)
        if self.config.eval_batches:
            n_batches = min(n_batches, self.config.eval_batches)
        mine = [i for b in range(n_batches) for i in range(b * size, min((b + 1) * size, len(self.eval_data)))]
        mine = mine[self.dist.rank :: self.dist.world_size]
        total = torch.zeros(2, device=self.device)  # (sum of loss x examples, examples)
        for start in range(0, len(mine), micro):
            chunk = mine[start : start + micro]
            batch = to_device(self.eval_collate([self.eval_data[i] for i in chunk]), self.device)
            with self._autocast():
                loss = self.loss_fn(self.model, batch).loss.float()
            total += torch.stack([loss * len(chunk), torch.tensor(float(len(chunk)), device=self.device)])
        loss_sum, count = self.dist.sum(total).tolist()
        loss = loss_sum / count
        metrics = {"step": self.step, "split": "validation", "loss": loss, "perplexity": math.exp(min(loss, 50))}
        self._log(metrics)
        if self.on_eval is not None and self.dist.is_main:
            self.on_eval(metrics)
        return metrics

    # -------------------------------------------------------------------------------------- checkpoints

    def save(self) -> Path | None:
        """Write a checkpoint of the current step (rank 0 writes; atomic, older ones pruned)."""
        if self.run_dir is None:
            return None
        model_state, optimizer_state = self.dist.full_state_dicts(self.model, self.optimizer)
        path = None
        if self.dist.is_main:
            path = ckpt.save_checkpoint(
                self.run_dir,
                self.step,
                self.model,
                optimizer=self.optimizer,
                scheduler=self.scheduler,
                scaler=self.scaler,
                trainer_state={"step": self.step},  # the data position: batches are a function of the step
                config=self.run_config_dict(),
                keep_last=self.config.keep_last,
                model_state=model_state,
                optimizer_state=optimizer_state,
            )
        self.dist.barrier()
        return path

    def resume(self, path: str | Path) -> int:
        """Restore model, optimizer, scheduler, scaler, RNG and data position; return the step reached.

        Call it right before :meth:`fit`: the random generators are restored to their state at the save.
        """
        state = ckpt.load_checkpoint(path, self.model, self.optimizer, self.scheduler, self.scaler)
        self.step = int(state["step"])
        if self.run_dir is not None:
            self.history = read_metrics(self.run_dir / "metrics.jsonl", up_to_step=self.step)
        return self.step

    def run_config_dict(self) -> dict:
        return {"train": to_dict(self.config), **self.run_config}

    # -------------------------------------------------------------------------------------- the loop

    def fit(self) -> dict:
        """Train until ``max_steps``; evaluate and save periodically and at the end. Returns the final eval."""
        self._start_run()
        config, last_eval = self.config, {}
        bar = self._progress_bar()
        window_tokens, window_start = 0, time.perf_counter()
        try:
            while self.step < config.max_steps:
                loss, tokens = self.train_step()
                window_tokens += tokens * self.dist.world_size
                if self.step % config.log_every == 0 or self.step == config.max_steps:
                    elapsed = time.perf_counter() - window_start
                    entry = {
                        "step": self.step,
                        "split": "train",
                        "loss": loss,
                        "lr": self.scheduler.get_last_lr()[0],
                        "tokens_per_s": window_tokens / max(elapsed, 1e-9),
                        "epoch": self.order.epoch(self.step),
                    }
                    self._log(entry)
                    window_tokens, window_start = 0, time.perf_counter()
                    if bar is not None:
                        bar.set_postfix(
                            loss=f"{loss:.3f}", lr=f"{entry['lr']:.2e}", tok_s=f"{entry['tokens_per_s']:.0f}"
                        )
                if bar is not None:
                    bar.update(1)
                final = self.step == config.max_steps
                if self.eval_data is not None and (final or (config.eval_every and self.step % config.eval_every == 0)):
                    last_eval = self.evaluate()
                if self.run_dir is not None and (final or (config.save_every and self.step % config.save_every == 0)):
                    self.save()
        except KeyboardInterrupt:
            # Roll the unfinished step back (its gradients and random draws) so the checkpoint resumes exactly.
            self.optimizer.zero_grad(set_to_none=True)
            if self._step_rng is not None:
                ckpt.restore_rng_state(self._step_rng)
            saved = self.save() if self.run_dir is not None else None
            where = f"; saved {saved}: resume with --resume {self.run_dir}" if saved else ""
            raise KeyboardInterrupt(f"interrupted at step {self.step}{where}") from None
        finally:
            if bar is not None:
                bar.close()
        return last_eval

    def _start_run(self) -> None:
        if self.run_dir is None or not self.dist.is_main:
            return
        self.run_dir.mkdir(parents=True, exist_ok=True)
        atomic_write_text(self.run_dir / "config.json", json.dumps(self.run_config_dict(), indent=2))
        # A resumed run rewrites the log up to its step, so entries after the checkpoint are not duplicated.
        lines = "".join(json.dumps(e) + "\n" for e in self.history)
        atomic_write_text(self.run_dir / "metrics.jsonl", lines)

    def _progress_bar(self):
        if not (self.config.progress and self.dist.is_main):
            return None
        from tqdm.auto import tqdm

        return tqdm(total=self.config.max_steps, initial=self.step, desc="train", dynamic_ncols=True)

    def _log(self, entry: dict) -> None:
        self.history.append(entry)
        if self.run_dir is not None and self.dist.is_main:
            with open(self.run_dir / "metrics.jsonl", "a") as f:
                f.write(json.dumps(entry) + "\n")


def read_metrics(path: str | Path, up_to_step: int | None = None) -> list[dict]:
    """The entries of a metrics.jsonl (for plots), optionally only those up to a step."""
    path = Path(path)
    if not path.exists():
        return []
    entries = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return [e for e in entries if up_to_step is None or e["step"] <= up_to_step]
