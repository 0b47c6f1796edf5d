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


def test_the_table4_ladder_is_recorded_as_the_script_defines_it():
    """experiments/ch04_data_and_steps.py: every row, on its corpora, for its multiple of the base steps; the epochs
    recomputed from the tokens seen; losses that fell; accuracies in range."""
    path = ROOT / "experiments" / "results" / "ch04_data_and_steps.json"
    if not path.exists():
        pytest.skip("run experiments/ch04_data_and_steps.py first")
    sys.path.insert(0, str(ROOT))
    from experiments.ch04_data_and_steps import PAPER, ROWS

    results = json.loads(path.read_text())["results"]
    base = results["setup"]["base_steps"]
    rows = results["rows"]
    assert [(r["row"], tuple(r["corpora"]), r["steps"], r["paper_row"]) for r in rows] == [
        (row, corpora, multiple * base, paper) for row, corpora, multiple, paper in ROWS
    ]
    assert {r["paper_row"] for r in rows if r["paper_row"] in PAPER} == set(PAPER)
    for r in rows:
        assert r["tokens_seen"] == pytest.approx(r["steps"] * r["batch_size"] * r["mean_input_tokens"], rel=1e-3)
        assert r["epochs"] == pytest.approx(r["tokens_seen"] / (r["n_examples"] * r["mean_input_tokens"]), abs=0.01)
        assert r["last_train_loss"] < r["first_train_loss"], f"{r['row']} did not learn"
        for key in ("sst2_accuracy", "snli_accuracy"):
            assert 0.0 <= r[key] <= 1.0
    small = [r for r in rows if r["corpora"] == ["wikitext"]]
    assert len({r["n_examples"] for r in small}) == 1, "both small-data rows read the same corpus"
