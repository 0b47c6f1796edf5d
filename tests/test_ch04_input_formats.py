"""The recorded Table 2 miniature (experiments/ch04_input_formats.py) is a fair comparison: every row of the script,
the same steps and about the same tokens for every format, and results within their possible ranges."""

import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "experiments" / "results" / "ch04_input_formats.json"


@pytest.fixture(scope="module")
def recorded():
    if not RESULTS.exists():
        pytest.skip("run experiments/ch04_input_formats.py first")
    return json.loads(RESULTS.read_text())


def test_every_row_is_recorded_with_provenance(recorded):
    sys.path.insert(0, str(ROOT))
    from experiments.ch04_input_formats import ROWS

    assert [r["row"] for r in recorded["results"]["rows"]] == [row for row, _, _ in ROWS]
    assert {"command", "commit", "machine", "date"} <= set(recorded["provenance"])


def test_formats_see_about_the_same_tokens(recorded):
    rows = recorded["results"]["rows"]
    tokens = [r["tokens_seen"] for r in rows]
    assert max(tokens) < 1.1 * min(tokens), "batch sizes must compensate for short inputs (SENTENCE-PAIR)"
    by_format = {r["format"]: r for r in rows}
    assert by_format["sentence_pair"]["batch_size"] > by_format["segment_pair"]["batch_size"]


def test_results_are_in_range(recorded):
    for r in recorded["results"]["rows"]:
        assert r["last_train_loss"] < r["first_train_loss"], f"{r['row']} did not learn"
        assert 0 < r["held_out_mlm_loss"] < r["first_train_loss"]
        assert 0 <= r["sst2_accuracy"] <= 1 and 0 <= r["snli_accuracy"] <= 1
