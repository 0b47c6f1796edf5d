"""The recorded Table 6 miniature (experiments/ch03_model_size.py): every size of the script, each model's parameter
count recomputed from its configuration, the same data, steps and tokens for every size, and results in range."""

import json
import math
import sys
from pathlib import Path

import pytest
import torch

from minilm.train.pretrain import PretrainConfig, job_model_config
from minilm.train.registry import get_model, get_objective, needed_settings
from minilm.utils import count_parameters

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "experiments" / "results" / "ch03_model_size.json"
sys.path.insert(0, str(ROOT))

from experiments.ch03_model_size import PAPER, SIZES  # noqa: E402


@pytest.fixture(scope="module")
def recorded():
    if not RESULTS.exists():
        pytest.skip("run experiments/ch03_model_size.py first")
    return json.loads(RESULTS.read_text())["results"]


def test_every_size_is_recorded_with_its_parameter_count(recorded):
    rows, setup = recorded["rows"], recorded["setup"]
    assert [(r["n_layers"], r["d_model"], r["n_heads"]) for r in rows] == SIZES
    job = PretrainConfig(model="bert", objective="mlm", corpus="wikitext", seq_len=setup["seq_len"])
    settings = needed_settings(get_model("bert"), get_objective("mlm", "bert"))
    for r in rows:
        assert r["d_ff"] == 4 * r["d_model"]
        sizes = {k: r[k] for k in ("n_layers", "d_model", "n_heads", "d_ff")}
        config = job_model_config(job, sizes, setup["vocab_size"], settings)
        with torch.device("meta"):
            model = get_model("bert").build(config)
        assert count_parameters(model) == r["parameters"], r["row"]
    assert [r["parameters"] for r in rows] == sorted(r["parameters"] for r in rows)
    assert [(p["L"], p["H"], p["A"]) for p in recorded["paper"]] == list(PAPER)


def test_every_size_reads_the_same_data_for_the_same_steps(recorded):
    rows = recorded["rows"]
    assert len({(r["n_examples"], r["batch_size"], r["tokens_seen"]) for r in rows}) == 1
    for r in rows:
        assert r["last_train_loss"] < r["first_train_loss"], f"{r['row']} did not learn"
        assert r["held_out_perplexity"] == pytest.approx(math.exp(r["held_out_mlm_loss"]))
        assert 0.0 <= r["sst2_accuracy"] <= 1.0 and 0.0 <= r["mrpc_accuracy"] <= 1.0
