"""The labs work with nbgrader itself: in a fresh nbgrader course, `nbgrader generate_assignment` releases a lab and
`nbgrader autograde` gives the instructor's solution full marks and the released student version zero.

Every lab, ~11 s each on a 2-core CPU; Labs 6-8 also check that `configure_nbgrader` drops their instructor-only
cells from the release. Skipped where nbgrader is not installed (it is in the `dev` extra).
"""

import shutil
import subprocess
import sys

import pytest

from minilm import labs

pytest.importorskip("nbgrader")

LABS = [lab.with_suffix(".ipynb") for lab in labs.all_labs()]


def nbgrader(*args, cwd):
    done = subprocess.run(
        [sys.executable, "-m", "nbgrader", *args], cwd=cwd, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done


@pytest.mark.parametrize("lab", LABS, ids=[lab.stem for lab in LABS])
def test_nbgrader_releases_and_autogrades_a_lab(tmp_path, lab):
    from nbgrader.api import Gradebook

    (tmp_path / "nbgrader_config.py").write_text(
        "from minilm.labs import configure_nbgrader\n\nc = get_config()\nconfigure_nbgrader(c)\n"
    )
    name = lab.stem.split("_")[0]
    total = sum(labs._points(c) for c in labs.read_notebook(lab).cells if labs.is_graded(c))
    (tmp_path / "source" / name).mkdir(parents=True)
    shutil.copy(lab, tmp_path / "source" / name)
    nbgrader("generate_assignment", name, "--create", cwd=tmp_path)
    released = tmp_path / "release" / name / lab.name
    text = released.read_text()
    assert "raise NotImplementedError()" in text
    for secret in ("BEGIN SOLUTION", "HIDDEN TESTS"):
        assert secret not in text, f"the released notebook shows {secret!r}"
    sources = {c.source.strip() for c in labs.read_notebook(released).cells}
    instructor = [c.source.strip() for c in labs.read_notebook(lab).cells if "instructor" in c.metadata.get("tags", [])]
    assert not sources & set(instructor), "an instructor-only cell was released"

    for student, notebook in (("solver", lab), ("untouched", released)):
        (tmp_path / "submitted" / student / name).mkdir(parents=True)
        shutil.copy(notebook, tmp_path / "submitted" / student / name / lab.name)
    nbgrader("autograde", name, "--create", cwd=tmp_path)
    with Gradebook(f"sqlite:///{tmp_path / 'gradebook.db'}") as gradebook:
        solver = gradebook.find_submission(name, "solver")
        untouched = gradebook.find_submission(name, "untouched")
        assert (solver.score, solver.max_score) == (total, total)
        assert (untouched.score, untouched.max_score) == (0, total)
