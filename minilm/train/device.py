"""Which device and which autocast dtype a run uses; shared by the Trainer and the distributed set-up."""

from __future__ import annotations

import torch

from minilm.train.config import ConfigError


def resolve_device(name: str) -> torch.device:
    """``"auto"``: CUDA, then Apple MPS, then the CPU; any other name as torch reads it (``"cuda:1"``)."""
    if name != "auto":
        return torch.device(name)
    if torch.cuda.is_available():
        return torch.device("cuda")
    if getattr(torch.backends, "mps", None) is not None and torch.backends.mps.is_available():
        return torch.device("mps")
    return torch.device("cpu")


def resolve_precision(name: str, device: torch.device) -> torch.dtype:
    """The autocast dtype: bf16 where the device supports it, fp16 on older GPUs, fp32 on CPU by default."""
    if name == "auto":
        if device.type == "cuda":
            return torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
        return torch.float32
    if name == "fp16" and device.type != "cuda":
        raise ConfigError(f"precision=fp16 needs a CUDA GPU (this run is on {device.type}); use bf16 or fp32")
    if name == "bf16" and device.type == "cuda" and not torch.cuda.is_bf16_supported():
        raise ConfigError("this GPU does not support bf16; use precision=fp16 (with a gradient scaler) or fp32")
    return {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}[name]
