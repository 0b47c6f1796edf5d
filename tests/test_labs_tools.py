"""The labs pipeline: student versions hide solutions and hidden tests; grading survives broken submissions."""

import json
import subprocess
import sys
import textwrap

import jupytext
import pytest

from minilm import labs

LAB = textwrap.dedent(
    '''\
    # %% [markdown]
    # # A tiny lab

    # %%
    def double(x):
        """Return 2x."""
        ### BEGIN SOLUTION
        return 2 * x
        ### END SOLUTION

    # %% tags=["instructor"]
    print("instructor only")

    # %% nbgrader={"grade": true, "grade_id": "q1", "points": 2}
    assert double(2) == 4
    ### BEGIN HIDDEN TESTS
    assert double(-3) == -6
    ### END HIDDEN TESTS

    # %% nbgrader={"grade": true, "grade_id": "q2", "points": 1}
    assert double(0.5) == 1.0
    '''
)


@pytest.fixture()
def lab(tmp_path):
    path = tmp_path / "lab99_tiny.py"
    path.write_text(LAB)
    return path


def test_strip_solutions_keeps_indentation_and_hides_tests():
    source = "def f():\n    ### BEGIN SOLUTION\n    return 1\n    ### END SOLUTION\n"
    assert labs.strip_solutions(source) == "def f():\n    raise NotImplementedError()\n"
    hidden = "a = 1\n### BEGIN HIDDEN TESTS\nassert secret\n### END HIDDEN TESTS\nb = 2\n"
    assert labs.strip_hidden_tests(hidden) == "a = 1\nb = 2\n"
    assert labs.strip_solutions("Answer:\n### BEGIN SOLUTION\nforty-two\n### END SOLUTION\n", "markdown") == (
        "Answer:\nYOUR ANSWER HERE\n"
    )


def test_build_writes_a_student_version(lab, tmp_path):
    out = labs.build(lab, tmp_path / "release")
    text = (tmp_path / "release" / "lab99_tiny.py").read_text()
    assert out.exists() and out.suffix == ".ipynb"
    assert "raise NotImplementedError()" in text
    for secret in ("return 2 * x", "double(-3)", "HIDDEN TESTS", "instructor only", "BEGIN SOLUTION"):
        assert secret not in text
    nb = jupytext.read(out)
    assert all(c.outputs == [] for c in nb.cells if c.cell_type == "code")
    graded = [c.metadata["nbgrader"]["grade_id"] for c in nb.cells if labs.is_graded(c)]
    assert graded == ["q1", "q2"]


def test_solution_scores_full_marks_and_student_version_zero(lab):
    solved, untouched = labs.check(lab)
    assert (solved.earned, solved.total) == (3, 3)
    assert (untouched.earned, untouched.total) == (0, 3)
    assert all(r.status.startswith("failed: NameError") or "NotImplemented" in r.status for r in untouched.results)


def test_hidden_tests_are_put_back_and_edited_tests_restored(lab, tmp_path):
    # Passes the visible test (double(2) == 4) but not the hidden one; and weakens q2's test, which is restored.
    submission = tmp_path / "sub.py"
    text = LAB.replace("return 2 * x", "return 4 if x == 2 else x").replace("double(0.5) == 1.0", "True")
    submission.write_text(labs.strip_hidden_tests(text))
    report = labs.grade(lab, submission)
    assert [r.earned for r in report.results] == [0, 0]
    assert "AssertionError" in report.results[0].status


def test_broken_submissions_score_zero_without_crashing(lab, tmp_path):
    not_json = tmp_path / "broken.ipynb"
    not_json.write_text("{ this is not a notebook")
    report = labs.grade(lab, not_json)
    assert report.earned == 0 and "could not read" in report.note
    missing = labs.grade(lab, tmp_path / "nowhere.ipynb")
    assert missing.earned == 0

    dies = tmp_path / "dies.py"
    dies.write_text(LAB.replace("return 2 * x", "import os; os._exit(1)").replace("# %% tags", "double(1)\n# %% tags"))
    report = labs.grade(lab, dies)
    assert report.earned == 0 and "kernel died" in report.note


def test_runaway_cells_time_out(lab, tmp_path):
    slow = tmp_path / "slow.py"
    slow.write_text(LAB.replace("return 2 * x", "import time; time.sleep(60); return 2 * x"))
    report = labs.grade(lab, slow, timeout=3)
    assert report.earned == 0
    assert report.results[0].status.startswith("timeout")


def test_grade_cli_prints_a_report_and_writes_json(lab, tmp_path, capsys):
    out = tmp_path / "report.json"
    assert labs.main(["grade", str(lab), str(lab), "--json", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "q1" in printed and "total" in printed and "3/3" in printed
    assert json.loads(out.read_text())["earned"] == 3


def run_cli(*args, cwd):
    """``python -m minilm.labs ARGS`` in a subprocess, as an instructor runs it."""
    return subprocess.run(
        [sys.executable, "-m", "minilm.labs", *map(str, args)], capture_output=True, text=True, cwd=cwd, timeout=120
    )


def test_a_failing_set_up_cell_is_named_as_the_cause_and_grade_exits_non_zero(tmp_path):
    # The set-up cell reads data that is not there: every question then fails with a NameError, the solution too.
    text = LAB.replace("# %%\ndef double", '# %%\nfactor = int(open("no-such-data.txt").read())\n\n\n# %%\ndef double')
    text = text.replace("return 2 * x", "return factor * x")
    lab = tmp_path / "lab98_setup.py"
    lab.write_text(text)
    done = run_cli("grade", lab, lab, cwd=tmp_path)
    assert done.returncode != 0, done.stdout
    assert "set-up cell 2 ('factor = int(open(\"no-such-data.txt\").read())') failed: FileNotFoundError" in done.stdout
    assert "the questions below could not run" in done.stdout
    assert "0/3" in done.stdout


def test_a_failing_solution_is_not_a_set_up_failure(lab, tmp_path):
    # The student's own code crashing (in their cell, or in a demo cell that calls it) is graded, not an error.
    text = LAB.replace("return 2 * x", 'return int(open("missing.txt").read())')
    text = text.replace("# %% tags", "# %%\nprint(double(1))\n\n# %% tags")
    submission = tmp_path / "sub.py"
    submission.write_text(labs.strip_hidden_tests(text))
    done = run_cli("grade", lab, submission, cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "set-up" not in done.stdout and "FileNotFoundError" in done.stdout and "0/3" in done.stdout


def test_grade_does_not_warn_about_the_kernel_transport(lab, tmp_path):
    done = run_cli("grade", lab, lab, cwd=tmp_path)
    assert done.returncode == 0 and "3/3" in done.stdout
    assert "without encryption" not in done.stderr and "TCP" not in done.stderr, done.stderr


def test_check_grades_each_known_wrong_answer(lab, tmp_path):
    (tmp_path / "mistakes").mkdir()
    mistakes = tmp_path / "mistakes" / "lab99_tiny.toml"
    mistakes.write_text(
        textwrap.dedent(
            """\
            [[mistake]]
            name = "adds instead of doubling"
            right = "return 2 * x"
            wrong = "return 2 + x"
            breaks = ["q1", "q2"]

            [[mistake]]
            name = "right only for positive numbers"
            right = "return 2 * x"
            wrong = "return abs(2 * x)"
            breaks = ["q1"]
            """
        )
    )
    done = run_cli("check", lab, cwd=tmp_path)
    assert done.returncode == 0, done.stdout
    assert "ok   " in done.stdout and "solution 3/3, student version 0/3" in done.stdout
    assert "ok   mistake 'adds instead of doubling': loses q1, q2: 0/3" in done.stdout
    assert "ok   mistake 'right only for positive numbers': loses q1: 1/3" in done.stdout

    # a mistake the tests do not catch, one that costs another question than it claims, and one gone from the lab
    mistakes.write_text(
        mistakes.read_text().replace('breaks = ["q1", "q2"]', 'breaks = ["q2"]')
        + '\n[[mistake]]\nname = "uncaught"\nright = "return 2 * x"\nwrong = "return x + x"\nbreaks = ["q1"]\n'
        + '\n[[mistake]]\nname = "stale"\nright = "return 3 * x"\nwrong = "return x"\nbreaks = ["q1"]\n'
    )
    done = run_cli("check", lab, cwd=tmp_path)
    assert done.returncode == 1
    assert "FAIL mistake 'adds instead of doubling': loses q1, q2: 0/3, expected to lose q2" in done.stdout
    assert "FAIL mistake 'uncaught': loses nothing: 3/3, expected to lose q1" in done.stdout
    assert "FAIL mistake 'stale': its right text occurs 0 times in lab99_tiny.py, not once" in done.stdout
    assert "ok   mistake 'right only for positive numbers'" in done.stdout


def test_check_fails_a_lab_without_known_wrong_answers(lab, tmp_path):
    done = run_cli("check", lab, cwd=tmp_path)
    assert done.returncode == 1 and "no known-wrong answers" in done.stdout
    assert run_cli("check", "--no-mistakes", lab, cwd=tmp_path).returncode == 0


def test_a_malformed_mistakes_file_gets_one_clear_message(lab, tmp_path):
    (tmp_path / "mistakes").mkdir()
    (tmp_path / "mistakes" / "lab99_tiny.toml").write_text('[[mistake]]\nname = "x"\nright = "a"\n')
    with pytest.raises(ValueError, match="needs name, right, wrong and a non-empty breaks list"):
        labs.load_mistakes(lab)
