"""The registry and ``fetch``: real downloads from a loopback HTTP server, checksums, cache and mirror."""

import hashlib
import json
import os
import shutil
import socket
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from minilm.data import ChecksumError, DataError, cache_dir, fetch, get_dataset, list_datasets, mirror_dir
from minilm.data import download as download_module
from minilm.data.registry import get_file

# The read-only data mirror (the repository's conftest.py points MINILM_DATA_DIR at it); tests copy from it.
MIRROR = Path(os.environ.get("MINILM_DATA_DIR", "/nonexistent"))
pytestmark = pytest.mark.skipif(not MIRROR.is_dir(), reason="needs the data mirror: set MINILM_DATA_DIR")
SERVED = [("copa", "README.md"), ("wikitext-2", "README"), ("cola", "in_domain_dev.tsv")]


class _Handler(BaseHTTPRequestHandler):
    """Serves ``server.root/<path>``; ``server.mode`` may corrupt or truncate the body."""

    def do_GET(self):
        self.server.requests.append(self.path)
        path = self.server.root / self.path.lstrip("/")
        if not path.is_file():
            self.send_error(404)
            return
        data = path.read_bytes()
        body = {
            "ok": data,
            "corrupt": data[:10] + bytes([data[10] ^ 1]) + data[11:],
            "truncate": data[: len(data) // 2],
        }[self.server.mode]
        self.send_response(200)
        self.send_header("Content-Length", str(len(data)))  # truncate: promise all, send half, hang up
        self.end_headers()
        self.wfile.write(body)
        self.close_connection = True

    def log_message(self, *args):
        pass


def _copy_files(root: Path) -> None:
    for dataset, name in SERVED:
        (root / dataset).mkdir(parents=True, exist_ok=True)
        shutil.copyfile(MIRROR / dataset / name, root / dataset / name)


def _files_under(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*") if p.is_file()) if root.exists() else []


@pytest.fixture
def env(tmp_path, monkeypatch):
    """No mirror, an empty cache in tmp_path, and no proxy between us and loopback."""
    monkeypatch.delenv("MINILM_DATA_DIR", raising=False)
    monkeypatch.setenv("MINILM_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("no_proxy", "*")
    return tmp_path / "cache"


@pytest.fixture
def server(tmp_path):
    root = tmp_path / "www"
    _copy_files(root)
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    httpd.root, httpd.requests, httpd.mode = root, [], "ok"
    httpd.url = f"http://127.0.0.1:{httpd.server_address[1]}"
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    yield httpd
    httpd.shutdown()
    httpd.server_close()
    thread.join(timeout=5)


def test_registry_matches_the_mirror_manifest():
    manifest = json.loads((MIRROR / "MANIFEST.json").read_text())
    assert list_datasets() == sorted(manifest["licences"])
    for entry in manifest["files"]:
        f = get_file(entry["dataset"], entry["file"])
        assert (f.url, f.sha256, f.bytes) == (entry["url"], entry["sha256"], entry["bytes"])
    for name, licence in manifest["licences"].items():
        assert get_dataset(name).licence == licence
    assert sum(len(get_dataset(d).files) for d in list_datasets()) == len(manifest["files"]) == 60


def test_unknown_names_list_the_known_ones():
    with pytest.raises(KeyError, match="known datasets: .*gutenberg"):
        get_dataset("imagenet")
    with pytest.raises(KeyError, match="its files: .*valid.txt"):
        fetch("wikitext-2", "train.txt")


def test_environment_variables(monkeypatch, tmp_path):
    monkeypatch.delenv("MINILM_CACHE_DIR", raising=False)
    assert cache_dir() == Path.home() / ".cache" / "minilm"
    monkeypatch.setenv("MINILM_CACHE_DIR", str(tmp_path))
    assert cache_dir() == tmp_path
    monkeypatch.delenv("MINILM_DATA_DIR", raising=False)
    assert mirror_dir() is None


def test_download_verifies_then_second_fetch_hits_the_cache(env, server):
    path = fetch("cola", "in_domain_dev.tsv", base_url=server.url, timeout=5)
    assert path == env / "cola" / "in_domain_dev.tsv"
    assert hashlib.sha256(path.read_bytes()).hexdigest() == get_file("cola", "in_domain_dev.tsv").sha256
    assert server.requests == ["/cola/in_domain_dev.tsv"]
    assert fetch("cola", "in_domain_dev.tsv", base_url=server.url, timeout=5) == path
    assert len(server.requests) == 1
    assert _files_under(env) == [path]  # no temporary file left behind


@pytest.mark.parametrize("mode", ["corrupt", "truncate"])
def test_bad_download_raises_and_leaves_nothing(env, server, mode):
    server.mode = mode
    entry = get_file("copa", "README.md")
    with pytest.raises(ChecksumError) as info:
        fetch("copa", "README.md", base_url=server.url, timeout=5)
    message = str(info.value)
    assert "copa/README.md" in message
    assert (entry.sha256 in message) if mode == "corrupt" else (f"expected {entry.bytes} bytes" in message)
    assert _files_under(env) == []


def test_http_error_is_a_data_error_naming_the_url(env, server):
    server.root.joinpath("wikitext-2", "README").unlink()
    with pytest.raises(DataError, match=r"wikitext-2/README .*404") as info:
        fetch("wikitext-2", "README", base_url=server.url, timeout=5)
    assert f"{server.url}/wikitext-2/README" in str(info.value)
    assert _files_under(env) == []


def test_server_down_names_file_url_and_the_fix(env):
    with socket.socket() as s:  # a loopback port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    url = f"http://127.0.0.1:{port}"
    with pytest.raises(DataError) as info:
        fetch("copa", "README.md", base_url=url, timeout=5)
    message = str(info.value)
    assert not isinstance(info.value, ChecksumError)
    assert f"{url}/copa/README.md" in message
    assert "set MINILM_DATA_DIR to a mirror that holds copa/README.md" in message
    assert _files_under(env) == []


def test_mirror_hit_needs_no_download_and_is_verified_once(env, server, tmp_path, monkeypatch):
    mirror = tmp_path / "mirror"
    _copy_files(mirror)
    monkeypatch.setenv("MINILM_DATA_DIR", str(mirror))
    hashed = []
    real_sha256 = hashlib.sha256
    monkeypatch.setattr(download_module.hashlib, "sha256", lambda: hashed.append(1) or real_sha256())
    for _ in range(3):
        assert fetch("wikitext-2", "README", base_url=server.url, timeout=5) == mirror / "wikitext-2" / "README"
    assert server.requests == [] and len(hashed) == 1
    assert _files_under(env) == []


def test_corrupted_mirror_raises(env, tmp_path, monkeypatch):
    mirror = tmp_path / "mirror"
    _copy_files(mirror)
    bad = mirror / "copa" / "README.md"
    data = bad.read_bytes()
    bad.write_bytes(data[:-1] + b"?")
    monkeypatch.setenv("MINILM_DATA_DIR", str(mirror))
    with pytest.raises(ChecksumError, match=r"copa/README.md: expected sha256 .*MINILM_DATA_DIR"):
        fetch("copa", "README.md")
    bad.write_bytes(data[:-1])
    with pytest.raises(ChecksumError, match=rf"expected {len(data)} bytes, got {len(data) - 1}"):
        fetch("copa", "README.md")


def test_corrupted_cache_raises_and_says_how_to_fix(env):
    path = env / "wikitext-2" / "README"
    path.parent.mkdir(parents=True)
    path.write_bytes(b"x" * get_file("wikitext-2", "README").bytes)
    with pytest.raises(ChecksumError, match=f"delete {path}"):
        fetch("wikitext-2", "README")


def test_import_is_light():
    code = (
        "import sys, minilm.data; print(sorted(m for m in sys.modules if m.split('.')[0] in ('torch', 'tokenizers')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=os.environ)
    assert out.stdout.strip() == "[]"
