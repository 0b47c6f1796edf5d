"""Distributed training on torch.distributed, launched with torchrun.

    torchrun --nproc_per_node 4 -m minilm.train size=small batch_size=64

torchrun sets RANK, WORLD_SIZE and LOCAL_RANK; the process group uses NCCL on GPUs and gloo on CPUs. Every process
computes its slice of each global batch; DDP averages gradients (once per optimizer step: the other micro-batches
run under ``no_sync``); FSDP shards parameters, gradients and optimizer state for models too big for one GPU. Only
rank 0 logs, evaluates into the metrics file and writes checkpoints; if that fails, it tells the others
(:meth:`DistributedContext.main_failure`), so every process stops with the error at once.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections import Counter
from dataclasses import dataclass
from typing import NoReturn

import torch
import torch.distributed as dist
from torch import nn

from minilm.train.config import ConfigError
from minilm.train.device import resolve_device

# ------------------------------------------------------------------------------------------ FSDP state dicts
# A sharded model's checkpoint holds the full tensors (gathered by ``full_state_dicts``), so it loads anywhere;
# loading it back into a sharded model scatters them again. ``minilm.train.checkpoint`` calls these.


def is_main_process() -> bool:
    """Whether this is the process that writes a run's files (rank 0, or the only one); read from torchrun's
    environment, so it answers before the process group exists (while a run directory and tokenizer are prepared)."""
    return os.environ.get("RANK", "0") == "0"


def leave_process_group() -> None:
    """Destroy the process group, if this process joined one, before the interpreter exits.

    Left to the interpreter's shutdown, gloo's threads can be torn down mid-way and abort the process
    ("terminate called without an active exception", exit code 134), after it had finished or had already
    printed its error; torchrun then reports a crash instead of the run's own exit code.
    """
    if dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()


def exit_process(code: int) -> NoReturn:
    """End a command-line run with ``code``. Under torchrun (WORLD_SIZE > 1) the interpreter's shutdown is skipped
    (``os._exit`` after flushing stdout and stderr): gloo's threads, torn down there by C++ static destructors,
    still now and then abort a finished process ("terminate called without an active exception", exit code 134)
    even after :func:`leave_process_group`. Every file a run writes is already closed (atomic writes)."""
    sys.stdout.flush()
    sys.stderr.flush()
    if int(os.environ.get("WORLD_SIZE", "1")) > 1:
        os._exit(code)
    sys.exit(code)


def is_sharded(model: nn.Module) -> bool:
    """Whether FSDP (``fully_shard``) manages the model's parameters, on the model or a module around it (the
    Trainer's loss module): they are then DTensor shards of the full tensors."""
    from torch.distributed.tensor import DTensor

    return any(isinstance(p, DTensor) for p in model.parameters())


def blocks(model: nn.Module) -> list[nn.Module]:
    """The Transformer blocks FSDP shards one by one: ``model``'s (its decoder's or encoder's ``layers``), or, for a
    composite without its own (ELECTRA's generator beside its discriminator), those of the models inside it, each
    block once (a block two models share is one block)."""
    found = list(getattr(getattr(model, "decoder", None) or getattr(model, "encoder", model), "layers", []))
    if not found:
        found = [block for child in model.children() for block in blocks(child)]
    return list({id(block): block for block in found}.values())


def model_class_name(model: nn.Module) -> str:
    """The model's own class name; FSDP wraps it in a generated subclass called ``FSDP<name>``."""
    if not is_sharded(model):
        return type(model).__name__
    from torch.distributed.fsdp import FSDPModule

    return next(c for c in type(model).__mro__ if FSDPModule not in c.__mro__).__name__


def set_full_model_state(model: nn.Module, weights: dict, strict: bool = True) -> None:
    """Load full tensors into a sharded model: every process reads them all and keeps its shards."""
    from torch.distributed.checkpoint.state_dict import set_model_state_dict

    set_model_state_dict(model, weights, options=_full_state_options(strict=strict))


def load_optimizer_state(model: nn.Module, optimizer: torch.optim.Optimizer, state: dict) -> None:
    """``optimizer.load_state_dict(state)``; for a sharded model, the full state is split into its shards."""
    if not is_sharded(model):
        optimizer.load_state_dict(state)
        return
    from torch.distributed.checkpoint.state_dict import set_optimizer_state_dict

    set_optimizer_state_dict(model, optimizer, state, options=_full_state_options())


def _full_state_options(strict: bool = True, cpu_offload: bool = False):
    from torch.distributed.checkpoint.state_dict import StateDictOptions

    return StateDictOptions(full_state_dict=True, strict=strict, cpu_offload=cpu_offload)


@dataclass
class DistributedContext:
    rank: int = 0
    world_size: int = 1
    device: torch.device = torch.device("cpu")

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    @property
    def enabled(self) -> bool:
        """Whether this run joined a process group: torchrun started it, with one process or more."""
        return self.world_size > 1 or (dist.is_available() and dist.is_initialized())

    @classmethod
    def from_environment(cls, device: str = "auto") -> DistributedContext:
        """Join the process group torchrun set up (if any) and pick this process's device."""
        world_size = int(os.environ.get("WORLD_SIZE", "1"))
        if world_size == 1 and "LOCAL_RANK" not in os.environ:  # not started by torchrun: no process group
            return cls(device=resolve_device(device))
        # torchrun, with one process or more: ``torchrun --nproc_per_node 1 ... distributed=fsdp`` shards (one shard)
        local_rank = int(os.environ.get("LOCAL_RANK", "0"))
        resolved = resolve_device(device)
        if resolved.type == "cuda":
            resolved = torch.device("cuda", local_rank)
            torch.cuda.set_device(resolved)
        if not dist.is_initialized():
            dist.init_process_group(backend="nccl" if resolved.type == "cuda" else "gloo")
        return cls(rank=dist.get_rank(), world_size=dist.get_world_size(), device=resolved)

    def wrap(self, model: nn.Module, mode: str = "ddp", layers_of: nn.Module | None = None) -> nn.Module:
        """``model`` replicated (DDP) or sharded (FSDP: the blocks of ``layers_of``, default ``model``, one by one,
        then the rest); itself in a single process."""
        if not self.enabled:
            return model
        if mode == "fsdp":
            from torch.distributed.fsdp import fully_shard

            layers = blocks(model if layers_of is None else layers_of)
            owners = Counter(id(p) for layer in layers for p in layer.parameters())
            if any(n > 1 for n in owners.values()):
                raise ConfigError(
                    "distributed=fsdp shards block by block, but these blocks share a sublayer (ALBERT's "
                    "share=attention or share=ffn); use distributed=ddp, or share=all or share=none"
                )
            for layer in layers:
                fully_shard(layer)  # shard block by block, then the rest
            return fully_shard(model)
        device_ids = [self.device.index] if self.device.type == "cuda" else None
        return nn.parallel.DistributedDataParallel(model, device_ids=device_ids)

    def full_state_dicts(self, model: nn.Module, optimizer) -> tuple[dict | None, dict | None]:
        """Under FSDP, gather the full model and optimizer state dicts (on CPU, in rank 0); else (None, None).

        A collective: every process must call it.
        """
        if not is_sharded(model):
            return None, None
        from torch.distributed.checkpoint.state_dict import get_model_state_dict, get_optimizer_state_dict

        options = _full_state_options(cpu_offload=True)
        return get_model_state_dict(model, options=options), get_optimizer_state_dict(model, optimizer, options=options)

    def no_sync(self, wrapped: nn.Module):
        """Skip the gradient all-reduce for a micro-batch that is not the step's last."""
        if isinstance(wrapped, nn.parallel.DistributedDataParallel):
            return wrapped.no_sync()
        return contextlib.nullcontext()

    def clip_grad_norm(self, wrapped: nn.Module, max_norm: float) -> None:
        torch.nn.utils.clip_grad_norm_(wrapped.parameters(), max_norm)

    def sum(self, value: torch.Tensor) -> torch.Tensor:
        if self.enabled:
            value = value.clone()
            dist.all_reduce(value, op=dist.ReduceOp.SUM)
        return value

    def mean(self, value: torch.Tensor) -> torch.Tensor:
        return self.sum(value) / self.world_size

    def main_failure(self, failure: str | None) -> str | None:
        """Rank 0's failure (its message, or None when it succeeded), told to every process.

        A collective that replaces a bare barrier after work only rank 0 does (saving, logging): when that work
        fails, the other processes learn it here and stop with rank 0's error, instead of waiting at their next
        collective until the launcher's timeout kills them.
        """
        if not self.enabled:
            return failure
        message = [failure]
        dist.broadcast_object_list(message, src=0)
        return message[0]
