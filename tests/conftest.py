"""Unit-test fixtures: deterministic seeds and one torch thread (the data mirror is set in ../conftest.py)."""

import pytest


@pytest.fixture(autouse=True)
def _seeded():
    import torch

    torch.manual_seed(0)
    torch.set_num_threads(1)
    yield
