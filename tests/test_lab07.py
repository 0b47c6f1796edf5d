"""Lab 7's tests catch known-wrong answers: each mistake costs the points of the part it breaks, and only those.

Every case is the instructor's solution with one deliberate mistake, graded through ``minilm.labs.grade`` (the
whole notebook runs, hidden tests included: ~10 s a case on a 2-core CPU).

Text infilling is random, and a student's draws are not minilm's, so its questions are graded two ways: exact checks
that hold for any draw (the spans cover exactly ceil(ratio · n) tokens, one mask each, <s> and </s> kept, the document
can be put back together) and statistics over ~10,000 spans (Poisson lengths, 0-length insertions at rate e^-λ).
The off-by-one cases below are the ones a statistical test alone would miss: they cover one token too few (or too
many) in some documents only, a change in the covered fraction far below any statistical tolerance.
"""

from pathlib import Path

import pytest
from lab_mistakes import assert_mistake_loses_its_points

LAB = Path(__file__).resolve().parents[1] / "labs" / "lab07_bart.py"
INFILLING = {"q1_infilling"}
SPANS = {"q1_spans"}
SCORES = {"q2_scores"}
BACKPOINTERS = {"q2_backpointers"}
BEAM = SCORES | BACKPOINTERS

# name -> (solution text, its wrong replacement, the questions that must fail)
MISTAKES = {
    # Part 1: the structure (exact, any draw)
    "SpanBERT-style: one mask per covered token": (
        "tokens.append(mask_id)  # ONE mask",
        "tokens.extend([mask_id] * length)  # ONE mask",
        INFILLING,
    ),
    "<s> and </s> noised with the body": (
        "head, body, tail = ids[:1], ids[1:-1], ids[-1:]",
        "head, body, tail = ids[:0], ids, ids[:0]",
        INFILLING,
    ),
    # ceil(0.3 · n) Poisson spans, about 3 · 30% of the tokens: the lengths themselves are fine Poisson draws
    "ratio applied to the number of spans instead of the tokens": (
        "    while total < m:  # draw until the spans cover m tokens\n"
        "        length = int(torch.poisson(rate, generator=generator))  # 0 is a length too: an insertion\n"
        "        lengths.append(min(length, m - total))",
        "    while len(lengths) < m:  # m spans\n"
        "        length = int(torch.poisson(rate, generator=generator))  # 0 is a length too: an insertion\n"
        "        lengths.append(length)",
        INFILLING,
    ),
    # one token fewer whenever ratio · n is not whole: 0.3 of the tokens becomes ~0.298 on 100-token documents
    "off by one: floor(ratio · n) tokens": (
        "m = math.ceil(ratio * n - 1e-9)",
        "m = int(ratio * n)",
        INFILLING,
    ),
    # one token too many in rare documents only (0.55 · 100 = 55.00000000000001): only an exact count sees it
    "ceil(ratio · n) without the slack": (
        "m = math.ceil(ratio * n - 1e-9)",
        "m = math.ceil(ratio * n)",
        INFILLING,
    ),
    # Part 1: the statistics of the spans
    "no 0-length spans: every span at least one token": (
        "length = int(torch.poisson(rate, generator=generator))",
        "length = max(1, int(torch.poisson(rate, generator=generator)))",
        SPANS,
    ),
    # mean λ as Poisson(λ), but variance 4 instead of 3 and 0 one time in 7 (λ = 3)
    "uniform span lengths 0 .. 2λ instead of Poisson(λ)": (
        "length = int(torch.poisson(rate, generator=generator))",
        "length = int(torch.randint(0, round(2 * poisson_lambda) + 1, (), generator=generator))",
        SPANS,
    ),
    # Part 2: one beam step
    "top K per beam: each beam keeps its own best token (K greedy searches side by side)": (
        "    new_scores, flat = totals.reshape(B, K_in * V).topk(K, dim=-1)",
        "    new_scores, token = totals.max(-1)\n    return new_scores, torch.arange(K_in).expand(B, K_in), token",
        BEAM,
    ),
    "forgets the running scores: ranks by the new token's log-probability alone": (
        "totals = beam_scores[:, :, None] + log_probs",
        "totals = log_probs",
        BEAM,
    ),
    # the scores are right: only the backpointers are wrong
    "parent and token swapped (flat % V, flat // V)": (
        "return new_scores, flat // V, flat % V",
        "return new_scores, flat % V, flat // V",
        BACKPOINTERS,
    ),
    "parent and token from the number of beams (flat // K_in, flat % K_in)": (
        "return new_scores, flat // V, flat % V",
        "return new_scores, flat // K_in, flat % K_in",
        BACKPOINTERS,
    ),
    "probabilities summed instead of log-probabilities": (
        "totals = beam_scores[:, :, None] + log_probs",
        "totals = beam_scores[:, :, None].exp() + log_probs.exp()",
        BEAM,
    ),
    # the B·K best candidates of the whole batch, dealt out K to a row: right when B = 1
    "top K over the whole batch, mixing its rows": (
        "    new_scores, flat = totals.reshape(B, K_in * V).topk(K, dim=-1)",
        "    new_scores, flat = (t.view(B, K) for t in totals.reshape(-1).topk(B * K))\n    flat = flat % (K_in * V)",
        BEAM,
    ),
}


@pytest.mark.parametrize("name", list(MISTAKES))
def test_a_known_wrong_answer_loses_the_points_of_its_part(name, tmp_path):
    assert_mistake_loses_its_points(LAB, *MISTAKES[name], tmp_path)
