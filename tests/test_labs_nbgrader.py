"""The labs work with nbgrader itself: in a fresh nbgrader course, `nbgrader generate_assignment` releases Lab 0 and
`nbgrader autograde` gives the instructor's solution full marks and the released student version zero.

Skipped where nbgrader is not installed (it is in the `dev` extra); ~20 s on a 2-core CPU.
"""

import shutil
import subprocess
import sys

import pytest

from minilm import labs

pytest.importorskip("nbgrader")

LAB = labs.LABS_DIR / "lab00_attention.ipynb"


def nbgrader(*args, cwd):
    done = subprocess.run(
        [sys.executable, "-m", "nbgrader", *args], cwd=cwd, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done


def test_nbgrader_releases_and_autogrades_lab_0(tmp_path):
    from nbgrader.api import Gradebook

    (tmp_path / "nbgrader_config.py").write_text(
        "from minilm.labs import configure_nbgrader\n\nc = get_config()\nconfigure_nbgrader(c)\n"
    )
    (tmp_path / "source" / "lab00").mkdir(parents=True)
    shutil.copy(LAB, tmp_path / "source" / "lab00")
    nbgrader("generate_assignment", "lab00", "--create", cwd=tmp_path)
    released = tmp_path / "release" / "lab00" / LAB.name
    text = released.read_text()
    assert "raise NotImplementedError()" in text
    for secret in ("BEGIN SOLUTION", "HIDDEN TESTS", "math.sqrt(q.size(-1))", "ruff: noqa"):
        assert secret not in text, f"the released notebook shows {secret!r}"

    for student, notebook in (("solver", LAB), ("untouched", released)):
        (tmp_path / "submitted" / student / "lab00").mkdir(parents=True)
        shutil.copy(notebook, tmp_path / "submitted" / student / "lab00" / LAB.name)
    nbgrader("autograde", "lab00", "--create", cwd=tmp_path)
    with Gradebook(f"sqlite:///{tmp_path / 'gradebook.db'}") as gradebook:
        solver = gradebook.find_submission("lab00", "solver")
        untouched = gradebook.find_submission("lab00", "untouched")
        assert (solver.score, solver.max_score) == (10, 10)
        assert (untouched.score, untouched.max_score) == (0, 10)
