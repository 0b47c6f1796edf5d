"""Every lab's tests catch its known-wrong answers: each mistake costs the points of the questions it breaks, and
only those.

The mistakes are data, ``labs/mistakes/<lab>.toml``, read by ``python -m minilm.labs check`` as well as by this test:
each is the instructor's solution with one deliberate mistake (a ``right`` text found exactly once, replaced by a
``wrong`` one), graded through ``minilm.labs.grade`` (the whole notebook runs, hidden tests included: ~5-30 s a case
on a 2-core CPU). The files' comments say which mistakes are subtle and which test catches them.
"""

import pytest

from minilm import labs

CASES = [(lab, mistake) for lab in labs.all_labs() for mistake in labs.load_mistakes(lab)]


def test_every_lab_has_two_known_wrong_answers_per_question():
    for lab in labs.all_labs():
        questions = [labs._grade_meta(c)["grade_id"] for c in labs.read_notebook(lab).cells if labs.is_graded(c)]
        mistakes = labs.load_mistakes(lab)
        for question in questions:
            n = sum(question in m.breaks for m in mistakes)
            assert n >= 2, f"{labs.mistakes_file(lab).name}: {question} has {n} known-wrong answers, needs 2"
    stems = {lab.stem for lab in labs.all_labs()}
    for path in (labs.LABS_DIR / "mistakes").glob("*.toml"):
        assert path.stem in stems, f"{path} names no lab"


@pytest.mark.parametrize(("lab", "mistake"), CASES, ids=[f"{lab.stem}: {m.name}" for lab, m in CASES])
def test_a_known_wrong_answer_loses_the_points_of_its_questions(lab, mistake):
    result = labs.check_mistake(lab, mistake)
    assert result.ok, f"{result.summary}\n{result.report.format() if result.report else ''}"
