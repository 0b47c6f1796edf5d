"""Shared by the experiment scripts: where results go and the provenance recorded with them.

An experiment is a paper-table miniature too big for a notebook's 3-minute budget. Its script
(``experiments/chNN_name.py``) runs it and writes ``experiments/results/chNN_name.json``: the results plus the
command, commit, machine and date that produced them. The chapter loads that file and plots it; the reader can
rerun the script to check it.
"""

from __future__ import annotations

import datetime
import json
import os
import platform
import subprocess
import sys
from pathlib import Path

import torch

from minilm.files import atomic_write_text

RESULTS_DIR = Path(__file__).resolve().parent / "results"


def provenance() -> dict:
    """Command, commit, machine and date of this run."""
    root = Path(__file__).resolve().parents[1]
    try:
        commit = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=root, capture_output=True, text=True, check=True
        ).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain"], cwd=root, capture_output=True, text=True).stdout
        commit += "+uncommitted changes" if dirty.strip() else ""
    except (OSError, subprocess.CalledProcessError):
        commit = "unknown"
    return {
        "command": "python " + " ".join([Path(sys.argv[0]).as_posix(), *sys.argv[1:]]),
        "commit": commit,
        "machine": f"{os.cpu_count()} CPUs ({platform.processor() or platform.machine()}), torch {torch.__version__}, "
        f"Python {platform.python_version()}, load average {os.getloadavg()[0]:.1f} at the end",
        "date": datetime.date.today().isoformat(),
    }


def save_results(name: str, results: dict) -> Path:
    """Write ``results`` with their provenance to ``experiments/results/<name>.json``; return the path."""
    RESULTS_DIR.mkdir(exist_ok=True)
    path = RESULTS_DIR / f"{name}.json"
    atomic_write_text(path, json.dumps({"provenance": provenance(), "results": results}, indent=2) + "\n")
    return path
