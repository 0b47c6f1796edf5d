"""Find a registered data file on disk, downloading and verifying it if needed.

``fetch(dataset, filename)`` looks, in order, in

1. the mirror, ``$MINILM_DATA_DIR/<dataset>/<file>`` (a pre-populated, possibly read-only copy),
2. the cache, ``$MINILM_CACHE_DIR/<dataset>/<file>`` (default ``~/.cache/minilm``),

and otherwise downloads the file from its registry URL into the cache. Every file is checked against the
registry's size and sha256 (once per process per file), so a corrupted mirror or cache is caught.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from minilm.data.errors import ChecksumError, DataError
from minilm.data.registry import DataFile, get_file
from minilm.files import atomic_file, file_sha256

_CHUNK = 1 << 16
_verified: dict[Path, tuple[int, int]] = {}  # path -> (size, mtime_ns) when its sha256 last matched


def cache_dir() -> Path:
    """Where downloads go: ``$MINILM_CACHE_DIR``, else ``~/.cache/minilm``."""
    return Path(os.environ.get("MINILM_CACHE_DIR") or Path.home() / ".cache" / "minilm")


def mirror_dir() -> Path | None:
    """The pre-populated mirror laid out ``<dataset>/<file>``: ``$MINILM_DATA_DIR``, or None if unset."""
    value = os.environ.get("MINILM_DATA_DIR")
    return Path(value) if value else None


def fetch(dataset: str, filename: str, *, base_url: str | None = None, timeout: float = 60.0) -> Path:
    """The local path of ``<dataset>/<filename>``, verified against the registry.

    ``base_url`` downloads from ``<base_url>/<dataset>/<filename>`` (an HTTP server with the mirror's
    layout) instead of the registry URL; tests use it to serve files from loopback.
    Raises ``ChecksumError`` if a file has the wrong size or sha256, ``DataError`` if it cannot be downloaded.
    """
    entry = get_file(dataset, filename)
    mirror = mirror_dir()
    if mirror is not None and (mirror / dataset / filename).is_file():
        path = mirror / dataset / filename
        _verify(path, entry, fix=f"the mirror MINILM_DATA_DIR={mirror} is corrupted; restore {path}")
        return path
    path = cache_dir() / dataset / filename
    if path.is_file():
        _verify(path, entry, fix=f"delete {path} to download it again")
        return path
    url = f"{base_url.rstrip('/')}/{dataset}/{filename}" if base_url else entry.url
    _download(entry, url, path, timeout)
    _verified[path] = _stamp(path)
    return path


def _stamp(path: Path) -> tuple[int, int]:
    st = path.stat()
    return st.st_size, st.st_mtime_ns


def _verify(path: Path, entry: DataFile, fix: str) -> None:
    """Check size and sha256 of an existing file, unless it was checked already and is unchanged."""
    stamp = _stamp(path)
    if _verified.get(path) == stamp:
        return
    _check(entry, stamp[0], file_sha256(path), fix)
    _verified[path] = stamp


def _check(entry: DataFile, size: int, sha256: str, fix: str) -> None:
    name = f"{entry.dataset}/{entry.name}"
    if size != entry.bytes:
        raise ChecksumError(f"{name}: expected {entry.bytes} bytes, got {size} (truncated or wrong file); {fix}")
    if sha256 != entry.sha256:
        raise ChecksumError(f"{name}: expected sha256 {entry.sha256}, got {sha256}; {fix}")


def _download(entry: DataFile, url: str, dest: Path, timeout: float) -> None:
    """Stream ``url`` into a temporary file next to ``dest``, verify it, then move it into place atomically."""
    import http.client  # imported here: slow to import, and only downloads need them
    import urllib.request

    try:
        dest.parent.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise DataError(
            f"cannot create the download cache folder {dest.parent} ({e.strerror or e}): set MINILM_CACHE_DIR to a "
            f"folder you can write, or MINILM_DATA_DIR to a mirror that holds {entry.dataset}/{entry.name}"
        ) from None
    with atomic_file(dest) as out:  # a failed download or check below leaves nothing in the cache
        digest, size = hashlib.sha256(), 0
        try:
            with urllib.request.urlopen(url, timeout=timeout) as response:
                # Read one byte past the expected size at most, so a wrong file cannot fill the disk.
                while size <= entry.bytes and (chunk := response.read(_CHUNK)):
                    out.write(chunk)
                    digest.update(chunk)
                    size += len(chunk)
        except (OSError, ValueError, http.client.HTTPException) as e:
            raise DataError(
                f"could not download {entry.dataset}/{entry.name} from {url}: {e}. If there is no network, "
                f"set MINILM_DATA_DIR to a mirror that holds {entry.dataset}/{entry.name}"
            ) from e
        _check(entry, size, digest.hexdigest(), fix=f"downloaded from {url}; nothing was saved")
