"""Lab 6's tests catch known-wrong answers: each mistake costs the points of the part it breaks, and only those.

Every case is the instructor's solution with one deliberate mistake, graded through ``minilm.labs.grade`` (the
whole notebook runs, hidden tests included: ~10-15 s a case on a 2-core CPU).
"""

from pathlib import Path

import pytest
from lab_mistakes import assert_mistake_loses_its_points

LAB = Path(__file__).resolve().parents[1] / "labs" / "lab06_electra.py"
CORRUPT = {"q1_corrupt"}
LABELS = {"q1_labels"}
LOSS = {"q2_loss"}

# name -> (solution line, its wrong replacement, the questions that must fail)
MISTAKES = {
    # Part 1: x_corrupt
    "modifies the caller's input_ids in place": (
        "corrupted = input_ids.clone()",
        "corrupted = input_ids",
        CORRUPT,
    ),
    # right whenever each column holds at most one masked position, as in a one-row example
    "samples placed in column-major order": (
        "corrupted[masked] = samples",
        "corrupted.T[masked.T] = samples",
        CORRUPT,
    ),
    # Part 1: the labels
    "every masked position labelled replaced (forgets the correct-sample case)": (
        "replaced[masked] = samples != labels[masked]",
        "replaced[masked] = True",
        LABELS,
    ),
    "labels from the masked input instead of the original": (
        "replaced[masked] = samples != labels[masked]",
        "replaced[masked] = samples != input_ids[masked]",
        LABELS,
    ),
    "x_corrupt compared with the -100 labels: unmasked tokens and padding labelled replaced": (
        "replaced = torch.zeros_like(masked)",
        "replaced = corrupted != labels",
        LABELS,
    ),
    # Part 2: the loss
    "MLM loss averaged over all tokens instead of the masked ones": (
        "mlm = F.cross_entropy(gen_logits[masked], labels[masked])",
        'mlm = F.cross_entropy(gen_logits.flatten(0, 1), labels.flatten(), reduction="none").mean()',
        LOSS,
    ),
    "discriminator loss averaged over every position, padding included": (
        "disc = F.binary_cross_entropy_with_logits(disc_logits[real], replaced[real].float())",
        "disc = F.binary_cross_entropy_with_logits(disc_logits, replaced.float())",
        LOSS,
    ),
    # right on batches whose rows are all as long: only uneven padding tells a mean of row means from the mean
    "discriminator loss as a mean of per-row means": (
        "disc = F.binary_cross_entropy_with_logits(disc_logits[real], replaced[real].float())",
        "disc = (F.binary_cross_entropy_with_logits(disc_logits, replaced.float(), reduction='none') * real)"
        ".sum(1).div(real.sum(1)).mean()",
        LOSS,
    ),
    # the paper's D(x, t) is the probability of *original*; the logits here are those of "replaced"
    "discriminator targets flipped (D as P(original))": (
        "disc = F.binary_cross_entropy_with_logits(disc_logits[real], replaced[real].float())",
        "disc = F.binary_cross_entropy_with_logits(disc_logits[real], (~replaced[real]).float())",
        LOSS,
    ),
    "forgets λ": ("return mlm + weight * disc", "return mlm + disc", LOSS),
    "λ on the generator's term": ("return mlm + weight * disc", "return weight * mlm + disc", LOSS),
    # the value is right: only the gradient shows that the discriminator would learn nothing
    "detaches the discriminator's term": ("return mlm + weight * disc", "return mlm + weight * disc.detach()", LOSS),
    "detaches the generator's logits (as if it were trained apart)": (
        "mlm = F.cross_entropy(gen_logits[masked], labels[masked])",
        "mlm = F.cross_entropy(gen_logits[masked].detach(), labels[masked])",
        LOSS,
    ),
}


@pytest.mark.parametrize("name", list(MISTAKES))
def test_a_known_wrong_answer_loses_the_points_of_its_part(name, tmp_path):
    assert_mistake_loses_its_points(LAB, *MISTAKES[name], tmp_path)
