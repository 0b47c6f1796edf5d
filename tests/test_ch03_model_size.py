"""The recorded Table 6 miniature (experiments/ch03_model_size.py): every size of the script, each model's parameter
count recomputed from its configuration, its held-out loss beside the unigram entropy of the same held-out set (at
the recipe's width, 128, a nat below it at every depth), and SST-2 scored over three fine-tuning seeds with their
standard error."""

import json
import math
import statistics
import sys
from pathlib import Path

import pytest
import torch

from minilm.train.pretrain import job_model_config
from minilm.train.registry import get_model, get_objective, needed_settings
from minilm.utils import count_parameters

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "experiments" / "results" / "ch03_model_size.json"
sys.path.insert(0, str(ROOT))

from experiments.ch03_model_size import CONTROL, EVALUATIONS, FINETUNE, JOB, PAPER, SIZES, name_of  # noqa: E402


@pytest.fixture(scope="module")
def recorded():
    if not RESULTS.exists():
        pytest.skip("run experiments/ch03_model_size.py first")
    return json.loads(RESULTS.read_text())


def test_every_size_is_recorded_with_its_parameter_count(recorded):
    rows = recorded["results"]["rows"]
    assert {"command", "commit", "machine", "date"} <= set(recorded["provenance"])
    assert sorted((r["n_layers"], r["d_model"], r["n_heads"]) for r in rows) == sorted(SIZES)
    vocab_size = int(recorded["results"]["setup"]["tokenizer"].split(", ")[1].split()[0])
    settings = needed_settings(get_model("bert"), get_objective("mlm", "bert"))
    for r in rows:
        assert r["row"] == name_of(r["n_layers"], r["d_model"], r["n_heads"])
        assert r["d_ff"] == 4 * r["d_model"]
        sizes = {k: r[k] for k in ("n_layers", "d_model", "n_heads", "d_ff")}
        with torch.device("meta"):
            model = get_model("bert").build(job_model_config(JOB, sizes, vocab_size, settings))
        assert count_parameters(model) == r["parameters"], r["row"]
    assert [r["parameters"] for r in rows] == sorted(r["parameters"] for r in rows)
    assert [(p["L"], p["H"], p["A"]) for p in recorded["results"]["paper"]] == list(PAPER)


def test_every_size_states_its_loss_beside_the_plateau_and_the_recipes_width_is_past_it(recorded):
    setup = recorded["results"]["setup"]
    for r in recorded["results"]["rows"]:
        assert r["unigram_entropy"] == setup["unigram_entropy"], "one held-out set: one entropy"
        assert math.isclose(r["nats_below_unigram"], r["unigram_entropy"] - r["held_out_loss"])
        assert r["past_plateau"] == (r["nats_below_unigram"] >= setup["plateau_margin"])
        if r["d_model"] == 128:  # the recipe's width; Chapter 3 reads only the rows past the plateau
            assert r["nats_below_unigram"] >= 1.0, f"{r['row']} is not a nat below the unigram entropy"
        assert r["held_out_perplexity"] == pytest.approx(math.exp(r["held_out_loss"]))
        curve = r["held_out_curve"]
        steps = setup["pretraining"]["steps"]
        assert [point["step"] for point in curve] == [steps * (i + 1) // EVALUATIONS for i in range(EVALUATIONS)]
        assert curve[-1]["mlm"] < curve[0]["mlm"], f"{r['row']}'s held-out loss did not fall"


def test_sst2_is_the_mean_of_three_fine_tuning_seeds_on_the_test_split(recorded):
    setup = recorded["results"]["setup"]
    assert setup["finetune"]["eval_split"] == "test"
    assert list(setup["finetune"]["seeds"]) == list(FINETUNE["seeds"])
    rows = {r["row"]: r for r in recorded["results"]["rows"]}
    scored = [*rows.values(), rows[name_of(*CONTROL)]["untrained"]]
    for r in scored:
        seeds = r["sst2_by_seed"]
        assert len(seeds) == 3 and all(0 <= s <= 1 for s in seeds)
        assert r["sst2_accuracy"] == pytest.approx(statistics.mean(seeds))
        assert r["sst2_standard_error"] == pytest.approx(statistics.stdev(seeds) / math.sqrt(3))
    assert rows[name_of(*CONTROL)]["untrained"]["held_out_loss"] > setup["unigram_entropy"], "untrained: above H"
