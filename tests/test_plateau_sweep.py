"""experiments/plateau.py's record: each run is one of the sweep's, its curve is measured against the unigram entropy
of its held-out split, and ``left_at`` is the first evaluation half a nat below it."""

import sys
from pathlib import Path

import pytest

from minilm.analysis import recorded_results

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from experiments.plateau import LEFT, STEPS, VARIANTS, configs  # noqa: E402


@pytest.fixture(scope="module")
def runs():
    return recorded_results("plateau", ROOT).results["runs"]


def test_every_recorded_run_is_a_variant_of_the_sweep_with_its_settings(runs, tmp_path):
    variants = {v.key: v for v in VARIANTS}
    assert runs and set(runs) <= set(variants)
    for key, run in runs.items():
        job, train, model = configs(variants[key], STEPS[run["family"]], tmp_path)
        assert run["job"]["seq_len"] == job.seq_len and run["job"]["vocab_size"] == job.vocab_size
        assert run["train"]["batch_size"] == train.batch_size and run["train"]["lr"] == train.lr
        assert run["model_overrides"] == model
        assert run["curve"][-1]["step"] == STEPS[run["family"]]


def test_left_at_is_the_first_evaluation_half_a_nat_below_the_entropy(runs):
    for run in runs.values():
        below = [p["step"] for p in run["curve"] if run["unigram_entropy"] - p["loss"] >= LEFT]
        assert run["left_at"] == (below[0] if below else None)
        assert run["final_nats_below"] == pytest.approx(run["unigram_entropy"] - run["curve"][-1]["loss"])
        assert run["curve"][0]["loss"] > run["unigram_entropy"], "every run starts above its plateau"
        assert 5.5 < run["unigram_entropy"] < 7.0, "an 8k vocabulary's entropy on the whole held-out split"


def test_every_variant_builds_its_configs(tmp_path):
    """Each run's settings are made before it trains: a variant that cannot be built stops the sweep mid-way (the
    vocabulary run once did, after eleven runs)."""
    for variant in VARIANTS:
        job, train, model = configs(variant, STEPS[variant.family], tmp_path)
        assert all(getattr(job, k) == v for k, v in variant.job.items())
        assert all(getattr(train, k) == v for k, v in variant.train.items())
        assert all(model[k] == v for k, v in variant.model.items())


def test_the_record_holds_every_run_with_the_invocation_that_made_it(runs):
    assert set(runs) == {v.key for v in VARIANTS}
    for key, run in runs.items():
        assert run["provenance"]["commit"] and "uncommitted" not in run["provenance"], key
