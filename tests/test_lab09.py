"""Lab 9's tests catch known-wrong answers: each mistake costs the points of the question it breaks, and only those.

Every case is the instructor's solution with one deliberate mistake, graded through ``minilm.labs.grade`` (the
whole notebook runs, hidden tests included: ~6 s a case on a 2-core CPU).

Every question is graded against ``minilm.analysis`` on fixed inputs. The subtle cases are those right on the visible
examples' easy parts or on most inputs: the pairs of one occurrence with itself counted (n^2 in the denominator), any
two different rows paired in the anisotropy (the same word's pairs included), every word weighted alike instead of
every sentence, the sign of the summed gradient (|E g| instead of E|g|), one normalisation for all layers, and the
least important heads chosen within each layer.
"""

from pathlib import Path

import pytest
from lab_mistakes import assert_mistake_loses_its_points

LAB = Path(__file__).resolve().parents[1] / "labs" / "lab09_bertology.py"
SELF_SIMILARITY = {"q1_self_similarity"}
ANISOTROPY = {"q1_anisotropy"}
INTRA = {"q2_intra_sentence"}
IMPORTANCE = {"q3_importance"}
PRUNE = {"q3_prune"}

# name -> (solution text, its wrong replacement, the questions that must fail)
MISTAKES = {
    # Part 1: self-similarity and anisotropy
    "self-pairs counted: the diagonal's cosines of 1, over n^2": (
        "result[word] = (off_diagonal / (n * n - n)).item()",
        "result[word] = (cosines.sum() / (n * n)).item()",
        SELF_SIMILARITY,
    ),
    "dot products instead of cosines": (
        "unit = F.normalize(vectors, dim=-1)  # (N, C): cosines are dot products of unit vectors",
        "unit = vectors",
        SELF_SIMILARITY,
    ),
    "words occurring once kept (self-similarity 0/0)": (
        "        if len(rows) < 2:\n            continue\n",
        "",
        SELF_SIMILARITY,
    ),
    "anisotropy over any two different rows, the same word's pairs included": (
        "different = word_ids[:, None] != word_ids[None, :]",
        "different = ~torch.eye(len(words), dtype=torch.bool)",
        ANISOTROPY,
    ),
    "anisotropy from dot products": (
        "    unit = F.normalize(vectors, dim=-1)\n    cosines = unit @ unit.T  # (N, N)",
        "    unit = vectors\n    cosines = unit @ unit.T  # (N, N)",
        ANISOTROPY,
    ),
    # Part 2: intra-sentence similarity
    "every word weighted alike, not every sentence": (
        "per_sentence.append(F.cosine_similarity(rows, centre, dim=-1).mean())",
        "per_sentence.extend(F.cosine_similarity(rows, centre, dim=-1))",
        INTRA,
    ),
    "mean pairwise cosine between the words instead of with the sentence's mean": (
        "per_sentence.append(F.cosine_similarity(rows, centre, dim=-1).mean())",
        "per_sentence.append((F.normalize(rows, dim=-1) @ F.normalize(rows, dim=-1).T).mean())",
        INTRA,
    ),
    # Part 3: head importance and pruning
    "|E g| instead of E|g|: the absolute value after the sum": (
        "        total += grad.abs()  # |dL(x)/dxi_h|, batch by batch\n    importance = total / len(batches)",
        "        total += grad\n    importance = total.abs() / len(batches)",
        IMPORTANCE,
    ),
    "no normalisation per layer": (
        "return importance / importance.norm(dim=-1, keepdim=True)  # each layer's row to unit l2 norm",
        "return importance",
        IMPORTANCE,
    ),
    "one normalisation for all layers": (
        "return importance / importance.norm(dim=-1, keepdim=True)  # each layer's row to unit l2 norm",
        "return importance / importance.norm()",
        IMPORTANCE,
    ),
    "the most important heads pruned": (
        "order = torch.argsort(importance.flatten(), stable=True)",
        "order = torch.argsort(-importance.flatten(), stable=True)",
        PRUNE,
    ),
    "the least important heads of each layer, not of the model": (
        "    gates = torch.ones(importance.numel())\n    gates[order[:n]] = 0.0\n    return gates.view_as(importance)",
        "    gates = torch.ones_like(importance)\n    per_layer = importance.argsort(dim=-1, stable=True)\n"
        "    for i in range(n):\n        gates[i % len(gates), per_layer[i % len(gates), i // len(gates)]] = 0.0\n"
        "    return gates",
        PRUNE,
    ),
    "ties broken from the last head": (
        "order = torch.argsort(importance.flatten(), stable=True)",
        "order = importance.numel() - 1 - torch.argsort(importance.flatten().flip(0), stable=True)",
        PRUNE,
    ),
}


@pytest.mark.parametrize("name", list(MISTAKES))
def test_a_known_wrong_answer_loses_the_points_of_its_part(name, tmp_path):
    assert_mistake_loses_its_points(LAB, *MISTAKES[name], tmp_path)
