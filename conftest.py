"""Test set-up for the whole repository (unit tests and notebooks under nbval)."""

import os
from pathlib import Path

REPO = Path(__file__).resolve().parent
MIRROR = REPO.parent / "shared" / "data"
if "MINILM_DATA_DIR" not in os.environ and MIRROR.is_dir():
    os.environ["MINILM_DATA_DIR"] = str(MIRROR)
# Notebook kernels inherit this: a spinning OpenMP pool fights pytest for the cores of a small machine.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")


def pytest_configure(config):
    # nbval resolves the sanitize file from the current directory; resolve it from the repo instead.
    if getattr(config.option, "nbval_sanitize_with", "unset") is None:
        config.option.nbval_sanitize_with = str(REPO / "nbval_sanitize.cfg")
