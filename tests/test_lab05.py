"""Lab 5's tests catch known-wrong answers: each mistake costs the points of the part it breaks, and only those.

Every case is the instructor's solution with one deliberate mistake, graded through ``minilm.labs.grade`` (the
whole notebook runs, hidden tests included: ~20-30 s a case on a 2-core CPU, so one or two mistakes per question).
"""

from pathlib import Path

import pytest
from lab_mistakes import assert_mistake_loses_its_points

LAB = Path(__file__).resolve().parents[1] / "labs" / "lab05_albert.py"
PARAMETERS = {"q1_parameters"}
EMBEDDING = {"q1_embedding"}
SOP_EXAMPLE = {"q2_sop_example"}
SOP_PAIR = {"q2_sop_pair"}

# name -> (solution line, its wrong replacement, the questions that must fail)
MISTAKES = {
    "count forgets the projection": (
        "return vocab_size * embedding_size + embedding_size * hidden_size + hidden_size",
        "return vocab_size * embedding_size",
        PARAMETERS,
    ),
    "projection without its bias": (
        "self.projection = nn.Linear(embedding_size, hidden_size)",
        "self.projection = nn.Linear(embedding_size, hidden_size, bias=False)",
        EMBEDDING,
    ),
    "swapped pairs labelled 0": (
        '"sentence_order_label": torch.tensor(int(swap)),',
        '"sentence_order_label": torch.tensor(0),',
        SOP_EXAMPLE,
    ),
    "B from another document, as NSP does": (
        "b = [t for sentence in chunk[a_end:] for t in sentence]",
        "b = [t for sentence in rng.choice(documents)[: len(chunk) - a_end] for t in sentence]",
        SOP_PAIR,
    ),
    # a fair coin, so the statistical test passes; only the exact comparison with minilm catches it
    "a fair coin that ignores rng": ("return a, b, rng.random() < 0.5", "return a, b, random.random() < 0.5", SOP_PAIR),
}


@pytest.mark.parametrize("name", list(MISTAKES))
def test_a_known_wrong_answer_loses_the_points_of_its_part(name, tmp_path):
    assert_mistake_loses_its_points(LAB, *MISTAKES[name], tmp_path)
