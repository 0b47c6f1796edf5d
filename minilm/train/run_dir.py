"""A command-line run's directory: a new run starts in an empty one, ``--resume`` continues one with a checkpoint.

Nothing of one run is ever mixed with another's: a new run into a directory that holds files (a finished run, or
the config and metrics of a run that failed before its first checkpoint) is refused, unless ``overwrite=true``,
which moves the old directory aside, whole, to ``<run_dir>.old-<time>`` before the new run writes anything. A new
run that fails while it prepares (a bad setting or corpus found before the Trainer writes ``config.json``) removes
what it wrote (a tokenizer), so that nothing half-made is left to be picked up.
"""

from __future__ import annotations

import os
import shlex
import shutil
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from minilm.train.checkpoint import CHECKPOINTS
from minilm.train.config import ConfigError
from minilm.train.distributed import is_main_process


@contextmanager
def new_run_dir(run_dir: str, overwrite: bool, prog: str) -> Iterator[None]:
    """Claim ``run_dir`` (see :func:`claim_run_dir`) for the ``with`` block, which runs the new run; if it fails
    before the Trainer wrote ``config.json``, what it wrote in ``run_dir`` is removed and the error goes on."""
    claim_run_dir(run_dir, overwrite, prog)
    path = Path(run_dir)
    existed = path.exists()  # and is empty: claimed
    try:
        yield
    except BaseException:
        if is_main_process() and path.is_dir() and not (path / "config.json").exists():
            for child in [path] if not existed else list(path.iterdir()):
                shutil.rmtree(child) if child.is_dir() else child.unlink()
        raise


def claim_run_dir(run_dir: str, overwrite: bool, prog: str) -> Path | None:
    """Make ``run_dir`` ready for a new run: absent or empty, or moved aside with ``overwrite``.

    Returns where the old directory went (None if nothing moved). Only the main process of a distributed run
    claims it. ``prog`` is the command (``python -m minilm.train``) the message tells the user to resume with.
    """
    path = Path(run_dir)
    if not is_main_process() or not path.exists():
        return None
    if not path.is_dir():
        raise ConfigError(f"run_dir={run_dir} is a file, not a directory: choose another run_dir")
    held = sorted(p.name for p in path.iterdir())
    if not held:
        return None
    if not overwrite:
        raise ConfigError(refusal(path, held, prog))
    aside = path.with_name(f"{path.name}.old-{time.strftime('%Y%m%d-%H%M%S')}")
    n = 1
    while aside.exists():
        aside, n = aside.with_name(f"{path.name}.old-{time.strftime('%Y%m%d-%H%M%S')}-{n}"), n + 1
    os.rename(path, aside)
    print(f"overwrite=true: the previous contents of {path} were moved to {aside}")
    return aside


def refusal(path: Path, held: list[str], prog: str) -> str:
    """Why a new run may not start in ``path`` (which holds ``held``), and the commands that may."""
    checkpoints = path / CHECKPOINTS
    has_checkpoint = checkpoints.is_dir() and any(p.name.startswith("step_") for p in checkpoints.iterdir())
    quoted = shlex.quote(str(path))
    if has_checkpoint:
        what = f"run_dir={path} already holds a run with checkpoints"
        fix = f"continue it with {prog} --resume {quoted} (max_steps=N to go further)"
    else:
        listed = ", ".join(held[:4]) + (", ..." if len(held) > 4 else "")
        what = f"run_dir={path} already holds files ({listed}) but no checkpoint, e.g. of a run that failed early"
        fix = "it cannot be resumed"
    return (
        f"{what}; a new run would mix with them: {fix}, or start a new run with overwrite=true (moves the old "
        f"directory aside, nothing is deleted) or another run_dir"
    )
