"""Writing files so that a crash, a full disk or Ctrl-C never leaves a half-written one: the one atomic writer that
checkpoints, run directories, the download cache and recorded experiment results all use.

A file is written beside its destination under a temporary name, flushed and fsynced, then renamed over the
destination (a rename within one folder is atomic on POSIX and Windows); readers see the old file or the new one,
never a mixture. On any error the temporary file is removed and the destination is left as it was.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

TMP_PREFIX = ".tmp-"  # temporary names start with it, so a folder's leftovers are easy to find and remove


class CheckpointError(ValueError):
    """A checkpoint (a run's or a Hugging Face folder) could not be saved or loaded, or does not fit the model; the
    message names the file, what is wrong, and what to do."""


def fsync_dir(path: str | os.PathLike) -> None:
    """Make a rename or a new entry in the folder ``path`` durable (POSIX only; Windows cannot open folders)."""
    if os.name == "nt":
        return
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_durably(path: str | os.PathLike, data: bytes) -> dict:
    """Write ``data`` to ``path`` and fsync it (not atomic by itself: for files inside a temporary folder).

    Returns ``{"sha256": ..., "bytes": ...}`` of what was written.
    """
    with open(path, "wb") as file:
        file.write(data)
        file.flush()
        os.fsync(file.fileno())
    return {"sha256": hashlib.sha256(data).hexdigest(), "bytes": len(data)}


def atomic_write_bytes(path: str | os.PathLike, data: bytes) -> dict:
    """Replace ``path`` with ``data`` atomically (temporary file, fsync, rename); returns its sha256 and size."""
    path = Path(path)
    tmp = path.with_name(f"{TMP_PREFIX}{path.name}")
    try:
        written = write_durably(tmp, data)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    fsync_dir(path.parent)
    return written


def atomic_write_text(path: str | os.PathLike, text: str) -> dict:
    """:func:`atomic_write_bytes` of ``text`` in UTF-8."""
    return atomic_write_bytes(path, text.encode("utf-8"))
