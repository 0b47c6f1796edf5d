"""Shared by the experiment scripts: where results go and the provenance recorded with them.

An experiment is a paper-table miniature too big for a notebook's 3-minute budget. Its script
(``experiments/chNN_name.py``) runs it and writes ``experiments/results/chNN_name.json``: the results plus the
command, commit, machine and date that produced them. The chapter loads that file (``minilm.analysis.
recorded_results``) and plots it; the reader can rerun the script to check it.

A record must name the commit whose code produced it, so an experiment runs on committed code only: ``begin()``,
first thing in a script's run, exits with an error when ``minilm/`` or ``experiments/`` (recorded results aside) has
uncommitted changes. ``MINILM_ALLOW_DIRTY=1`` runs anyway, for a trial: the record's commit then reads
"<commit>+uncommitted changes" and lists the changed files under ``uncommitted``. A run directory that a later run
reuses (a pretrained model) is stamped with the code that made it (``stamp``); the later run records it (``reuse``).
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

from minilm.analysis.plateau import scored_targets
from minilm.files import atomic_write_text

ROOT = Path(__file__).resolve().parents[1]
RESULTS_DIR = ROOT / "experiments" / "results"
ALLOW_DIRTY = "MINILM_ALLOW_DIRTY"
STAMP = "provenance.json"  # in a run directory: the code that made it

_started: dict | None = None  # code_state() when begin() ran
_reused: dict[str, dict] = {}  # run directory -> the code that made it


def code_state() -> dict:
    """``{"commit": HEAD's short hash, "uncommitted": [code files that differ from it]}`` ("unknown" without git)."""
    git = ["git", "-C", str(ROOT)]
    try:
        commit = subprocess.run([*git, "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=True)
        status = subprocess.run(
            [*git, "status", "--porcelain", "--", "minilm", "experiments", ":(exclude)experiments/results"],
            capture_output=True,
            text=True,
            check=True,
        )
    except (OSError, subprocess.CalledProcessError):
        return {"commit": "unknown", "uncommitted": []}
    return {"commit": commit.stdout.strip(), "uncommitted": [line[3:] for line in status.stdout.splitlines()]}


def begin() -> None:
    """Start a recorded run: refuse code with uncommitted changes, whose record could not name its commit."""
    global _started
    _started = code_state()
    changed = _started["uncommitted"]
    if changed and os.environ.get(ALLOW_DIRTY) != "1":
        sys.exit(
            f"error: {len(changed)} file(s) of minilm/ or experiments/ differ from commit {_started['commit']} "
            f"({', '.join(changed[:5])}{', ...' if len(changed) > 5 else ''}); commit them first, so that the record "
            f"names the commit that produced it, or set {ALLOW_DIRTY}=1 for a trial run whose record says so"
        )
    if changed:
        print(f"warning: uncommitted changes ({', '.join(changed)}); the record will say so", file=sys.stderr)


def code_changed_since(started: dict) -> bool:
    """Did the code (``minilm/``, ``experiments/`` but its results) change since ``started`` (a ``code_state()``)?
    Commits elsewhere (tests, benchmarks, docs) while an experiment runs leave its record's commit true."""
    now = code_state()
    if now["uncommitted"] != started["uncommitted"]:
        return True
    if now["commit"] == started["commit"]:
        return False
    paths = ["minilm", "experiments", ":(exclude)experiments/results"]
    diff = subprocess.run(
        ["git", "-C", str(ROOT), "diff", "--name-only", started["commit"], now["commit"], "--", *paths],
        capture_output=True,
        text=True,
    )
    return diff.returncode != 0 or bool(diff.stdout.strip())


def stamp(run_dir: str | Path) -> None:
    """Record in ``run_dir`` the code that made it, for the later runs that reuse it."""
    atomic_write_text(Path(run_dir) / STAMP, json.dumps(_started or code_state()) + "\n")


def reuse(run_dir: str | Path) -> Path:
    """``run_dir``, made by an earlier run; this run's provenance records the code that made it (``reused``)."""
    stamped = Path(run_dir) / STAMP
    made_by = json.loads(stamped.read_text()) if stamped.is_file() else {"commit": "unknown (not stamped)"}
    _reused[Path(run_dir).as_posix()] = made_by
    return Path(run_dir)


def gpu() -> str:
    """ ", one <GPU name>" when torch sees a CUDA device (the experiments train there: ``device="auto"``), else ""."""
    return f", one {torch.cuda.get_device_name(0)}" if torch.cuda.is_available() else ""


def provenance() -> dict:
    """Command, commit, machine and date of this run (and the runs it reused)."""
    started = _started or code_state()
    commit = started["commit"] + ("+uncommitted changes" if started["uncommitted"] else "")
    record = {
        "command": "python " + " ".join([Path(sys.argv[0]).as_posix(), *sys.argv[1:]]),
        "commit": commit,
        "machine": f"{os.cpu_count()} CPUs ({platform.processor() or platform.machine()}){gpu()}, "
        f"torch {torch.__version__}, Python {platform.python_version()}, "
        f"load average {os.getloadavg()[0]:.1f} at the end",
        "date": datetime.date.today().isoformat(),
    }
    if started["uncommitted"]:
        record["uncommitted"] = started["uncommitted"]
    if code_changed_since(started):
        record["note"] = "the code changed while the experiment ran; rerun it on one commit"
    if _reused:
        record["reused"] = dict(_reused)
    return record


def save_results(name: str, results: dict) -> Path:
    """Write ``results`` with their provenance to ``experiments/results/<name>.json``; return the path."""
    RESULTS_DIR.mkdir(exist_ok=True)
    path = RESULTS_DIR / f"{name}.json"
    atomic_write_text(path, json.dumps({"provenance": provenance(), "results": results}, indent=2) + "\n")
    return path


def scored_when_evaluated(train_loss, eval_loss):
    """A loss for the Trainer: ``train_loss`` in training, ``eval_loss`` in its evaluations (``model.eval()``), so
    that a row trained with an extra loss (NSP, SOP) draws its held-out curve on the loss every row shares (MLM)."""

    def loss(model, batch):
        return train_loss(model, batch) if model.training else eval_loss(model, batch)

    return loss


def batches(examples, collate, batch_size: int = 128):
    """``examples`` collated, batch by batch, in order."""
    for start in range(0, len(examples), batch_size):
        yield collate([examples[i] for i in range(start, min(start + batch_size, len(examples)))])


@torch.no_grad()
def held_out_loss(model, loss_fn, examples, collate) -> float:
    """``loss_fn``'s loss per predicted token over held-out ``examples`` (the tokens ``scored_targets`` names: MLM's
    masked ones, a language model's next ones): each batch's mean weighted by its number of predicted tokens."""
    model.eval()
    total, count = 0.0, 0
    for batch in batches(examples, collate):
        n = len(scored_targets(batch))
        total += loss_fn(model, batch).loss.item() * n
        count += n
    return total / count
