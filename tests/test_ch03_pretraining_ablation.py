"""The recorded Table 5 and Table 7 miniatures (experiments/ch03_pretraining_ablation.py, ch03_feature_based.py):
every row recorded, every pretrained model past the unigram plateau of its own tokenizer on held-out text, and every
score the mean of three fine-tuning seeds on the test split with its standard error."""

import json
import math
import statistics
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "experiments" / "results"
sys.path.insert(0, str(ROOT))

from experiments.ch03_pretraining_ablation import CONTROL, SEEDS, TASKS, VARIANTS  # noqa: E402


def load(name: str) -> dict:
    path = RESULTS / f"{name}.json"
    if not path.exists():
        pytest.skip(f"run experiments/{name}.py first")
    return json.loads(path.read_text())


def check_seeds(scores: dict, metric: str) -> None:
    seeds = scores["by_seed"]
    assert len(seeds) == len(SEEDS) and all(0 <= s <= 1 for s in seeds)
    assert scores[metric] == pytest.approx(statistics.mean(seeds))
    assert scores["standard_error"] == pytest.approx(statistics.stdev(seeds) / math.sqrt(len(seeds)))


def check_past_plateau(name: str, run: dict, margin: float) -> None:
    assert math.isclose(run["nats_below_unigram"], run["unigram_entropy"] - run["held_out_loss"])
    assert run["past_plateau"] == (run["nats_below_unigram"] >= margin)
    assert run["nats_below_unigram"] >= 1.0, f"{name} is not a nat below the unigram entropy"
    curve = run["held_out_curve"]
    assert curve[-1]["loss"] < curve[0]["loss"], f"{name}'s held-out loss did not fall"


def test_table5_rows_are_past_the_plateau_and_scored_over_three_seeds():
    recorded = load("ch03_pretraining_ablation")
    assert {"command", "commit", "machine", "date"} <= set(recorded["provenance"])
    results = recorded["results"]
    assert list(results["table"]) == [name for name, *_ in VARIANTS] + [CONTROL]
    assert list(results["pretraining"]) == [name for name, *_ in VARIANTS]
    for name, run in results["pretraining"].items():
        check_past_plateau(name, run, results["setup"]["plateau_margin"])
    bert, no_nsp = (results["pretraining"][name] for name, *_ in VARIANTS[:2])
    assert bert["unigram_entropy"] == no_nsp["unigram_entropy"], "both BERT rows: one tokenizer, one held-out set"
    for scores in results["table"].values():
        assert set(scores) == set(TASKS)
        for task, metric in TASKS.items():
            check_seeds(scores[task], metric)


def test_table7_reads_the_table5_bert_past_the_plateau_over_three_seeds():
    recorded = load("ch03_feature_based")["results"]
    check_past_plateau("the Table 5 BERT", recorded["pretraining"], 1.0)
    assert recorded["finetuning_seeds"] == list(SEEDS)
    for scores in recorded["table"].values():
        check_seeds(scores, "accuracy")
