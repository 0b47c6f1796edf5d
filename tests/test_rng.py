"""Capturing and restoring the global random generators: the same draws again, through a weights-only file."""

import io
import os
import random
import subprocess
import sys

import numpy as np
import pytest
import torch

from minilm.train.rng import capture_rng_state, restore_rng_state
from minilm.utils import seed_all


def draws() -> tuple:
    """One draw from each global generator, including the cached Gaussians of python and numpy."""
    return random.random(), random.gauss(0, 1), np.random.rand(), np.random.randn(), torch.rand(3).tolist()


def test_restoring_repeats_every_generator_through_a_weights_only_file():
    seed_all(0)
    random.gauss(0, 1)  # leave a cached second Gaussian in python's generator
    buffer = io.BytesIO()
    torch.save(capture_rng_state(), buffer)
    expected = draws()
    seed_all(1)
    assert draws() != expected
    restore_rng_state(torch.load(io.BytesIO(buffer.getvalue()), weights_only=True))
    assert draws() == expected


def test_cuda_states_for_missing_devices_are_skipped_with_a_warning(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    state = capture_rng_state()
    assert "cuda" not in state
    state["cuda"] = [torch.zeros(16, dtype=torch.uint8)]  # saved on a machine with one GPU
    expected = draws()
    with pytest.warns(UserWarning, match="1 CUDA device\\(s\\) but 0 are available; .* not exact"):
        restore_rng_state(state)
    assert draws() == expected


def test_reproducible_leaves_the_openmp_wait_policy_to_the_user():
    """PASSIVE threads make decoding several times slower on a machine of one's own: the library must not set it."""
    code = "import os\nfrom minilm.utils import reproducible\nreproducible(0)\nprint(os.environ.get('OMP_WAIT_POLICY'))"
    env = {k: v for k, v in os.environ.items() if k != "OMP_WAIT_POLICY"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout
    assert out.strip() == "None"
