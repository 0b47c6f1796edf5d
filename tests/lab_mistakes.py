"""What every lab's known-wrong-answer test checks (tests/test_lab05.py to tests/test_lab08.py)."""

from pathlib import Path

from minilm import labs


def assert_mistake_loses_its_points(lab: Path, right: str, wrong: str, broken: set[str], tmp_path: Path) -> None:
    """The solution with ``right`` replaced by ``wrong``, graded: exactly the questions ``broken`` score 0, each on a
    test's assertion (or the mistake's own crash), not on a typo in the mistake, and the rest keep their points."""
    source = lab.read_text()
    assert source.count(right) == 1, f"the solution no longer has {right!r}: update this test"
    submission = tmp_path / "submission.py"
    submission.write_text(source.replace(right, wrong))
    report = labs.grade(lab, submission)
    failed = {r.grade_id for r in report.results if r.earned == 0}
    assert failed == broken, report.format()
    assert 0 < report.earned < report.total
    assert report.total - report.earned == sum(r.points for r in report.results if r.grade_id in broken)
    for r in report.results:
        if r.grade_id in broken:
            assert r.status.startswith(("failed: AssertionError", "failed: RuntimeError")), report.format()
