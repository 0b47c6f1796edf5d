"""Lab 8's tests catch known-wrong answers: each mistake costs the points of the part it breaks, and only those.

Every case is the instructor's solution with one deliberate mistake, graded through ``minilm.labs.grade`` (the
whole notebook runs, hidden tests included: ~6 s a case on a 2-core CPU).

Every question is graded exactly, against ``minilm.nn.relative_position_bucket`` and
``minilm.objectives.span_corruption`` on fixed inputs. The subtle cases are the ones that agree with the reference
on most inputs: offset 0 put with the keys to the right (one offset of thousands), targets built from the paper's
sentence rather than T5's complement mask (right on Figure 2, wrong on every random-spans mask), Python's float64
round or rounding halves up (wrong only at halves: 190 · 0.15, 10 · 0.25).
"""

from pathlib import Path

import pytest
from lab_mistakes import assert_mistake_loses_its_points

LAB = Path(__file__).resolve().parents[1] / "labs" / "lab08_t5.py"
BIDIRECTIONAL = {"q1_bidirectional"}
CAUSAL = {"q1_causal"}
BUCKETS = BIDIRECTIONAL | CAUSAL
SENTINELS = {"q2_sentinels"}
CORRUPTION = {"q2_corruption"}
PART_2 = SENTINELS | CORRUPTION  # span_corruption calls noise_span_to_unique_sentinel: its mistakes cost both
COUNTS = {"q3_counts"}
LENGTHS = {"q4_lengths"}

# the solution's line up to its comment's last words (" per kept run"), which stay behind as a comment
TARGETS_LINE = "    targets = noise_span_to_unique_sentinel(ids, ~noise_mask, sentinel_ids)  # noise tokens, a sentinel"
PAPER_TARGETS = """\
    targets, run = [], 0  # each noise run after its sentinel
    for token, noise, before in zip(ids.tolist(), noise_mask.tolist(), [False, *noise_mask.tolist()][:-1]):
        if noise and not before:
            targets.append(sentinel_ids[run])
            run += 1
        if noise:
            targets.append(token)
    targets = torch.tensor(targets{final}, dtype=torch.long)  # the paper's reading, not a sentinel"""

# name -> (solution text, its wrong replacement, the questions that must fail)
MISTAKES = {
    # Part 1: the buckets
    "direction forgotten: keys to the right share the left's buckets": (
        "buckets += (relative_position > 0).long() * num_buckets",
        "buckets += 0",
        BIDIRECTIONAL,
    ),
    # one offset in thousands: the query itself in the upper half
    "offset 0 with the keys to the right (>= 0)": (
        "buckets += (relative_position > 0).long()",
        "buckets += (relative_position >= 0).long()",
        BIDIRECTIONAL,
    ),
    "far buckets rounded instead of truncated": (
        "(log_ratio * (num_buckets - max_exact)).long()",
        "torch.round(log_ratio * (num_buckets - max_exact)).long()",
        BUCKETS,
    ),
    "causal: future offsets kept, |j - i| as in the encoder": (
        "distance = (-relative_position).clamp(min=0)",
        "distance = relative_position.abs()",
        CAUSAL,
    ),
    "causal: the direction flipped, the past in bucket 0": (
        "distance = (-relative_position).clamp(min=0)",
        "distance = relative_position.clamp(min=0)",
        CAUSAL,
    ),
    # Part 2: sentinels
    "one sentinel per noise token instead of per run": (
        "first = noise_mask & ~previous",
        "first = noise_mask.clone()",
        PART_2,
    ),
    "sentinels in increasing id order (<extra_id_99> first)": (
        "list(sentinel_ids[:num_runs])",
        "sorted(sentinel_ids)[:num_runs]",
        PART_2,
    ),
    "sentinel numbering off by one (<extra_id_1> first)": (
        "sentinel_ids[:num_runs]",
        "sentinel_ids[1 : num_runs + 1]",
        PART_2,
    ),
    "targets without eos": (
        "targets = torch.cat([targets, torch.tensor([eos_id])])",
        "targets = targets",
        CORRUPTION,
    ),
    # right on Figure 2 (which ends with kept tokens), wrong on every text that ends or starts with noise
    "targets from the paper's sentence: noise runs after their sentinels, then a final sentinel": (
        TARGETS_LINE,
        PAPER_TARGETS.format(final=" + [sentinel_ids[run]]"),
        CORRUPTION,
    ),
    # Part 3: the counts
    "noise tokens floored instead of rounded": (
        "int(torch.round(f32(length) * f32(noise_density)))",
        "int(f32(length) * f32(noise_density))",
        COUNTS,
    ),
    # float64: 190 · 0.15 = 28.499999999999996 -> 28, where T5's float32 gives 28.5000011 -> 29
    "Python's float64 round instead of T5's float32": (
        "int(torch.round(f32(length) * f32(noise_density)))",
        "round(length * noise_density)",
        COUNTS,
    ),
    # Part 4: the lengths
    "inputs counted without their eos": (
        "inputs = tokens_length - num_noise_tokens + num_noise_spans + 1",
        "inputs = tokens_length - num_noise_tokens + num_noise_spans",
        LENGTHS,
    ),
    "targets counted without their sentinels": (
        "targets = num_noise_tokens + num_noise_spans + 1",
        "targets = num_noise_tokens + 1",
        LENGTHS,
    ),
}


@pytest.mark.parametrize("name", list(MISTAKES))
def test_a_known_wrong_answer_loses_the_points_of_its_part(name, tmp_path):
    assert_mistake_loses_its_points(LAB, *MISTAKES[name], tmp_path)
