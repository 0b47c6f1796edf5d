"""Shared test set-up: the data mirror, one torch thread, deterministic seeds."""

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
MIRROR = REPO.parent / "shared" / "data"
if "MINILM_DATA_DIR" not in os.environ and MIRROR.is_dir():
    os.environ["MINILM_DATA_DIR"] = str(MIRROR)


@pytest.fixture(autouse=True)
def _seeded():
    import torch

    torch.manual_seed(0)
    torch.set_num_threads(1)
    yield


def needs_mirror():
    return pytest.mark.skipif(
        "MINILM_DATA_DIR" not in os.environ, reason="no data mirror: set MINILM_DATA_DIR to ../shared/data"
    )
