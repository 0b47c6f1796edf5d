"""Which device and which autocast dtype a run uses; shared by the Trainer and the distributed set-up."""

from __future__ import annotations

import torch

from minilm.train.config import ConfigError

DEVICE_HELP = "use device=auto, cpu, cuda, cuda:N or mps"


def parse_device(name: str) -> torch.device | None:
    """The device ``name`` means (None for ``"auto"``), without asking whether this machine has it."""
    if name == "auto":
        return None
    try:
        return torch.device(name)
    except RuntimeError:
        raise ConfigError(f"device={name!r} is not a device name; {DEVICE_HELP}") from None


def _mps_available() -> bool:
    return getattr(torch.backends, "mps", None) is not None and torch.backends.mps.is_available()


def resolve_device(name: str) -> torch.device:
    """``"auto"``: CUDA, then Apple MPS, then the CPU; any other name as torch reads it (``"cuda:1"``), checked to
    exist on this machine, so a wrong device is one message before any data is read."""
    device = parse_device(name)
    if device is None:
        return torch.device("cuda") if torch.cuda.is_available() else torch.device("mps" if _mps_available() else "cpu")
    if device.type == "cuda":
        if not torch.cuda.is_available():
            why = "this PyTorch build has no CUDA support" if torch.version.cuda is None else "no CUDA GPU is visible"
            raise ConfigError(f"device={name!r}, but {why} (torch {torch.__version__}); use device=cpu or device=auto")
        if device.index is not None and device.index >= torch.cuda.device_count():
            raise ConfigError(f"device={name!r}, but this machine has {torch.cuda.device_count()} CUDA GPU(s)")
    if device.type == "mps" and not _mps_available():
        raise ConfigError(f"device={name!r}, but Apple MPS is not available here; use device=cpu or device=auto")
    if device.type not in ("cpu", "cuda", "mps"):
        raise ConfigError(f"device={name!r} is not supported; {DEVICE_HELP}")
    return device


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
