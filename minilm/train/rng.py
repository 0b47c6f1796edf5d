"""The state of every global random generator, captured and restored: what makes a resumed run bitwise exact.

    state = capture_rng_state()   # python ``random``, numpy, torch CPU and each CUDA device
    ...                           # draws
    restore_rng_state(state)      # the same draws again

The generators are those :func:`minilm.utils.seed_all` seeds. The state holds only lists, numbers, strings and
tensors, so a checkpoint stores it in a file that ``torch.load(weights_only=True)`` reads without unpickling
anything. The Trainer captures it before each step (Ctrl-C rolls the step back to it); checkpoints save it.
"""

from __future__ import annotations

import random
import warnings

import numpy as np
import torch


def capture_rng_state() -> dict:
    """The state of every global generator, Python's and numpy's converted to lists and numbers."""
    version, internal, gauss_next = random.getstate()
    numpy_state = np.random.get_state(legacy=False)
    state = {
        "python": {"version": version, "internal": list(internal), "gauss_next": gauss_next},
        "numpy": {
            "bit_generator": numpy_state["bit_generator"],
            "key": numpy_state["state"]["key"].tolist(),
            "pos": int(numpy_state["state"]["pos"]),
            "has_gauss": int(numpy_state["has_gauss"]),
            "gauss": float(numpy_state["gauss"]),
        },
        "torch": torch.get_rng_state(),
    }
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def restore_rng_state(state: dict) -> None:
    """Put every global generator back in the state :func:`capture_rng_state` returned."""
    python = state["python"]
    random.setstate((python["version"], tuple(python["internal"]), python["gauss_next"]))
    numpy = state["numpy"]
    np.random.set_state(
        {
            "bit_generator": numpy["bit_generator"],
            "state": {"key": np.asarray(numpy["key"], dtype=np.uint32), "pos": numpy["pos"]},
            "has_gauss": numpy["has_gauss"],
            "gauss": numpy["gauss"],
        }
    )
    torch.set_rng_state(state["torch"].cpu())
    _restore_cuda_rng(state.get("cuda", []))


def _restore_cuda_rng(states: list) -> None:
    """Restore the per-device CUDA generators that exist here; warn when the device count differs."""
    available = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if states and len(states) != available:
        warnings.warn(
            f"the checkpoint holds RNG states for {len(states)} CUDA device(s) but {available} are available; "
            "GPU random streams are restored only for devices present in both, so the resume is not exact",
            stacklevel=3,
        )
    for device, device_state in enumerate(states[:available]):
        torch.cuda.set_rng_state(device_state.cpu(), device)
