"""experiments/common.py: a recorded run names a clean commit, refuses uncommitted code unless told, and records the
code of the run directories it reuses."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from experiments import common  # noqa: E402


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, check=True).stdout.strip()


@pytest.fixture
def repo(tmp_path, monkeypatch):
    """A repository with minilm/ and experiments/ committed; common.py pointed at it, with no run begun."""
    for path in ("minilm/model.py", "experiments/ch09_x.py", "experiments/results/ch09_x.json", "README.md"):
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text("v1\n")
    git(tmp_path, "init", "-q")
    git(tmp_path, "add", ".")
    git(tmp_path, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "one")
    monkeypatch.setattr(common, "ROOT", tmp_path)
    monkeypatch.setattr(common, "_started", None)
    monkeypatch.setattr(common, "_reused", {})
    monkeypatch.delenv(common.ALLOW_DIRTY, raising=False)
    return tmp_path


def test_a_clean_run_records_its_commit(repo):
    (repo / "README.md").write_text("docs are not code\n")
    (repo / "experiments/results/ch09_x.json").write_text("an earlier record\n")
    common.begin()
    provenance = common.provenance()
    assert provenance["commit"] == git(repo, "rev-parse", "--short", "HEAD")
    assert {"command", "machine", "date"} <= provenance.keys()
    assert not {"uncommitted", "note", "reused"} & provenance.keys()


def test_uncommitted_code_is_refused_before_the_run(repo):
    (repo / "minilm/model.py").write_text("v2\n")
    (repo / "experiments/new.py").write_text("import this\n")
    with pytest.raises(SystemExit) as info:
        common.begin()
    message = str(info.value)
    assert "2 file(s) of minilm/ or experiments/ differ from commit" in message
    assert "minilm/model.py" in message and "experiments/new.py" in message
    assert "commit them first" in message and "MINILM_ALLOW_DIRTY=1" in message


def test_a_trial_run_on_uncommitted_code_says_so(repo, monkeypatch, capsys):
    monkeypatch.setenv(common.ALLOW_DIRTY, "1")
    (repo / "minilm/model.py").write_text("v2\n")
    common.begin()
    assert "warning: uncommitted changes (minilm/model.py)" in capsys.readouterr().err
    provenance = common.provenance()
    assert provenance["commit"] == git(repo, "rev-parse", "--short", "HEAD") + "+uncommitted changes"
    assert provenance["uncommitted"] == ["minilm/model.py"]


def test_code_changed_during_the_run_is_noted(repo):
    common.begin()
    (repo / "minilm/model.py").write_text("v2\n")
    assert common.provenance()["note"] == "the code changed while the experiment ran; rerun it on one commit"


def test_commits_to_code_during_the_run_are_noted_and_commits_elsewhere_are_not(repo):
    commit = lambda: git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qam", "more")  # noqa: E731
    common.begin()
    (repo / "README.md").write_text("docs are not code\n")
    commit()
    assert "note" not in common.provenance()  # the record's commit still holds the code that ran
    (repo / "minilm/model.py").write_text("v2\n")
    commit()
    assert common.provenance()["note"] == "the code changed while the experiment ran; rerun it on one commit"


def test_a_reused_run_directory_brings_the_code_that_made_it(repo, tmp_path_factory):
    made, old = tmp_path_factory.mktemp("made"), tmp_path_factory.mktemp("old")
    common.begin()
    common.stamp(made)
    assert common.reuse(made) == made and common.reuse(old) == old
    reused = common.provenance()["reused"]
    assert reused[made.as_posix()] == {"commit": git(repo, "rev-parse", "--short", "HEAD"), "uncommitted": []}
    assert reused[old.as_posix()] == {"commit": "unknown (not stamped)"}
    assert json.loads((made / common.STAMP).read_text())["uncommitted"] == []
