"""The one atomic writer: a destination holds the old content or the new, never a mixture, and no leftovers."""

import errno
import hashlib
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from minilm.files import (
    TMP_PREFIX,
    atomic_file,
    atomic_folder,
    atomic_write_bytes,
    atomic_write_text,
    file_sha256,
    write_durably,
)


def tree(folder: Path) -> dict:
    """Every entry under ``folder`` with its bytes (None for folders)."""
    return {p.relative_to(folder).as_posix(): p.read_bytes() if p.is_file() else None for p in folder.rglob("*")}


def test_atomic_write_replaces_the_file_and_reports_its_hash(tmp_path):
    path = tmp_path / "config.json"
    path.write_text("old")
    written = atomic_write_text(path, "néw")
    assert path.read_text(encoding="utf-8") == "néw"
    assert written == {"sha256": hashlib.sha256("néw".encode()).hexdigest(), "bytes": 4}
    assert tree(tmp_path) == {"config.json": "néw".encode()}
    assert file_sha256(path) == written["sha256"]


@pytest.mark.parametrize("interruption", [OSError(errno.ENOSPC, "No space left on device"), KeyboardInterrupt()])
def test_an_interrupted_write_leaves_the_old_file_and_no_temporary(tmp_path, interruption):
    path = tmp_path / "results.json"
    path.write_bytes(b"old")
    with pytest.raises(type(interruption)):
        with atomic_file(path) as file:
            file.write(b"half of the new")
            raise interruption
    assert tree(tmp_path) == {"results.json": b"old"}


@pytest.mark.skipif(not hasattr(signal, "SIGXFSZ"), reason="needs POSIX file-size limits")
def test_a_real_write_failure_leaves_the_old_file(tmp_path):
    """No mock: a file-size limit makes the kernel refuse the write (EFBIG), as a full disk would (ENOSPC)."""
    import resource

    path = tmp_path / "big.bin"
    path.write_bytes(b"old")
    old_limit, old_handler = resource.getrlimit(resource.RLIMIT_FSIZE), signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (1000, old_limit[1]))
    try:
        with pytest.raises(OSError) as info:
            atomic_write_bytes(path, bytes(5000))
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, old_limit)
        signal.signal(signal.SIGXFSZ, old_handler)
    assert info.value.errno == errno.EFBIG
    assert tree(tmp_path) == {"big.bin": b"old"}


def test_two_writers_of_one_file_never_share_a_temporary(tmp_path):
    path = tmp_path / "shared.txt"
    with atomic_file(path) as first, atomic_file(path) as second:
        first.write(b"first")
        second.write(b"second")
    assert tree(tmp_path) == {"shared.txt": b"first"}  # the outer block ends last: its content wins


def test_atomic_folder_commits_all_its_files_at_once(tmp_path):
    final = tmp_path / "step_1"
    with atomic_folder(final) as tmp:
        assert tmp.parent == tmp_path and tmp.name.startswith(TMP_PREFIX) and not final.exists()
        written = write_durably(tmp / "a.bin", b"abc")
    assert written == {"sha256": hashlib.sha256(b"abc").hexdigest(), "bytes": 3}
    assert tree(tmp_path) == {"step_1": None, "step_1/a.bin": b"abc"}
    with atomic_folder(final) as tmp:  # a folder already there is replaced as a whole
        write_durably(tmp / "b.bin", b"new")
    assert tree(tmp_path) == {"step_1": None, "step_1/b.bin": b"new"}


def test_a_failed_folder_leaves_the_old_one(tmp_path, monkeypatch):
    final = tmp_path / "step_1"
    final.mkdir()
    (final / "a.bin").write_bytes(b"old")
    with pytest.raises(KeyboardInterrupt):
        with atomic_folder(final) as tmp:
            write_durably(tmp / "a.bin", b"new")
            raise KeyboardInterrupt
    assert tree(tmp_path) == {"step_1": None, "step_1/a.bin": b"old"}

    real_rename = os.rename

    def rename(source, target):  # moving the old folder aside works; renaming the new one into place fails
        if Path(source).name.startswith(f"{TMP_PREFIX}step_1"):
            raise OSError(errno.ENOSPC, "No space left on device")
        real_rename(source, target)

    monkeypatch.setattr(os, "rename", rename)
    with pytest.raises(OSError, match="No space left"):
        with atomic_folder(final) as tmp:
            write_durably(tmp / "a.bin", b"new")
    monkeypatch.undo()
    assert tree(tmp_path) == {"step_1": None, "step_1/a.bin": b"old"}


def test_a_scratch_folder_lives_until_the_process_exits_and_is_then_deleted(tmp_path):
    script = (
        "from minilm.files import scratch_folder\n"
        "a, b = scratch_folder('t-'), scratch_folder('t-')\n"
        "(a / 'sub').mkdir(); (a / 'sub' / 'w.bin').write_bytes(b'x' * 10); (b / 'c.txt').write_text('c')\n"
        "import gc; gc.collect()\n"
        "assert (a / 'sub' / 'w.bin').is_file() and a != b and a.name.startswith('t-')\n"
        "print(a); print(b)\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    folders = [Path(line) for line in done.stdout.split()]
    assert len(folders) == 2 and not any(folder.exists() for folder in folders)
