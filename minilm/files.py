"""Writing files so that a crash, a full disk or Ctrl-C never leaves a half-written one: the one atomic writer that
checkpoints, run directories, the download cache and recorded experiment results all use.

A file is written beside its destination under a temporary name, flushed and fsynced, then renamed over the
destination (a rename within one folder is atomic on POSIX and Windows); readers see the old file or the new one,
never a mixture. On any error the temporary file is removed and the destination is left as it was. A folder of
files (a checkpoint) is committed the same way: filled under a temporary name, then renamed into place.

    with atomic_file(path) as file: ...           # stream into it (a download); atomic_write_bytes/_text for data
    with atomic_folder(path) as tmp: write_durably(tmp / "a.bin", data) ...
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO

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


def file_sha256(path: str | os.PathLike) -> str:
    """The sha256 hex digest of the file at ``path``, read in 1 MiB blocks."""
    digest = hashlib.sha256()
    with open(path, "rb") as file:
        while block := file.read(1 << 20):
            digest.update(block)
    return digest.hexdigest()


def _temporary_name(path: Path, what: str = "") -> Path:
    """A fresh name beside ``path``: two writers of the same destination never share a temporary file."""
    return path.with_name(f"{TMP_PREFIX}{what}{path.name}.{uuid.uuid4().hex[:8]}")


@contextmanager
def atomic_file(path: str | os.PathLike) -> Iterator[BinaryIO]:
    """A binary file to write that becomes ``path`` when the ``with`` block ends without error (fsynced, then
    renamed over it); an error or Ctrl-C inside the block removes it and leaves ``path`` as it was."""
    path = Path(path)
    tmp = _temporary_name(path)
    try:
        with open(tmp, "xb") as file:
            yield file
            file.flush()
            os.fsync(file.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    fsync_dir(path.parent)


def atomic_write_bytes(path: str | os.PathLike, data: bytes) -> dict:
    """Replace ``path`` with ``data`` atomically (temporary file, fsync, rename); returns its sha256 and size."""
    with atomic_file(path) as file:
        file.write(data)
    return {"sha256": hashlib.sha256(data).hexdigest(), "bytes": len(data)}


def atomic_write_text(path: str | os.PathLike, text: str) -> dict:
    """:func:`atomic_write_bytes` of ``text`` in UTF-8."""
    return atomic_write_bytes(path, text.encode("utf-8"))


@contextmanager
def atomic_folder(path: str | os.PathLike) -> Iterator[Path]:
    """An empty temporary folder to fill (with :func:`write_durably`) that becomes ``path`` when the ``with`` block
    ends without error; a folder already at ``path`` is replaced (and put back if the rename fails). An error or
    Ctrl-C inside the block removes the temporary folder and leaves ``path`` as it was."""
    path = Path(path)
    tmp = _temporary_name(path)
    tmp.mkdir()
    try:
        yield tmp
        fsync_dir(tmp)
        _rename_folder(tmp, path)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    fsync_dir(path.parent)


def _rename_folder(tmp: Path, path: Path) -> None:
    """Rename ``tmp`` to ``path``; POSIX cannot rename onto a non-empty folder, so an old one is moved aside first."""
    if not path.exists():
        os.rename(tmp, path)
        return
    replaced = _temporary_name(path, "replaced-")
    os.rename(path, replaced)
    try:
        os.rename(tmp, path)
    except BaseException:
        os.rename(replaced, path)
        raise
    shutil.rmtree(replaced, ignore_errors=True)


_SCRATCH_FOLDERS: list[tempfile.TemporaryDirectory] = []  # alive until the process exits, then deleted


def scratch_folder(prefix: str = "minilm-") -> Path:
    """A new temporary folder, deleted with everything in it when the Python process exits (in a notebook: when its
    kernel stops or restarts). A chapter's runs and checkpoints go there, so it leaves no files behind and has no
    clean-up cell that would break its earlier cells when they run again."""
    folder = tempfile.TemporaryDirectory(prefix=prefix)  # its finalizer deletes the folder at exit
    _SCRATCH_FOLDERS.append(folder)
    return Path(folder.name)
