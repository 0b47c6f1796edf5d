"""The recorded miniatures of T5's Tables 4/5/7, multi-task mixing and BART vs T5 (experiments/ch08_t5.py): every row
a valid setting of the span_corruption objective, every row recorded from one initialization (the recorded checksum
and parameter count recomputed from the recorded configuration), the lengths and mixing rates recomputed from the
library, results within their possible ranges. Without a record, only the row definitions are checked."""

import json
import math
import sys
from pathlib import Path

import pytest
import torch

from minilm.finetune.mixing import mixing_rates
from minilm.models.t5 import T5
from minilm.objectives.span_corruption import random_spans_helper
from minilm.train.registry import get_model, model_config
from minilm.utils import count_parameters

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "experiments" / "results" / "ch08_t5.json"
sys.path.insert(0, str(ROOT))

from experiments.ch08_t5 import (  # noqa: E402
    CONTROL,
    FINETUNE,
    MIXINGS,
    MODEL,
    MULTITASK_EXAMPLES,
    PAPER,
    PRETRAIN,
    ROWS,
    SEQ_LEN,
    checksum,
    settings_of,
    standard_error,
)


@pytest.fixture(scope="module")
def recorded():
    if not RESULTS.exists():
        pytest.skip("run experiments/ch08_t5.py first")
    return json.loads(RESULTS.read_text())


def vocab_size(recorded) -> int:
    return int(recorded["results"]["setup"]["tokenizer"].split(", ")[1].split()[0])


def test_every_row_is_a_span_corruption_setting():
    for name in ROWS:
        settings = settings_of(name)
        settings.validate()
        assert settings.noise_density == 0.15, name  # the paper's 15% in every row
        if name.startswith("spans-"):
            assert (settings.corruption, settings.mean_noise_span_length) == ("spans", float(name.split("-")[1]))
    assert set(PAPER) == set(ROWS) and CONTROL not in ROWS
    assert standard_error(872) == pytest.approx(0.0169, abs=1e-4)


def test_every_row_is_recorded_from_one_initialization(recorded):
    results = recorded["results"]
    assert results["rows"] == [*ROWS, CONTROL] and list(results["runs"]) == results["rows"]
    assert {"command", "commit", "machine", "date"} <= set(recorded["provenance"])
    assert "uncommitted" not in recorded["provenance"], "a trial's record (MINILM_ALLOW_DIRTY)"
    setup, runs = results["setup"], results["runs"]
    assert {k: setup["pretraining"][k] for k in PRETRAIN} == PRETRAIN and setup["pretraining"]["seq_len"] == SEQ_LEN
    assert {k: setup["model"][k] for k in MODEL} == MODEL
    assert {k: setup["finetuning"][k] for k in ("steps", "batch_size", "lr")} == {
        k: FINETUNE[k] for k in ("steps", "batch_size", "lr")
    }
    assert len({run["initial_checksum"] for run in runs.values()}) == 1
    config = model_config(get_model("t5"), "tiny", vocab_size(recorded), MODEL)
    with torch.device("meta"):
        assert count_parameters(T5(config)) == setup["parameters"]
    torch.manual_seed(0)  # the script's initialization
    assert checksum(T5(config)) == pytest.approx(runs[CONTROL]["initial_checksum"], rel=1e-9)


def test_lengths_and_costs_follow_the_objectives(recorded):
    runs, steps = recorded["results"]["runs"], recorded["results"]["setup"]["pretraining"]["steps"]
    raw, target = random_spans_helper(SEQ_LEN)
    for name in ROWS:
        lengths, run = runs[name]["lengths"], runs[name]
        assert lengths["raw"] == raw, name  # every row reads the same texts
        assert run["last_train_loss"] < run["first_train_loss"] - 1, f"{name} did not learn"
        assert run["pretrain_cpu_seconds"] > 0 and run["train_curve"]["step"][-1] == steps
    assert runs["spans-3"]["lengths"] == {"raw": raw, "input": SEQ_LEN, "target": target}  # exactly T5's helper
    assert runs["bert"]["lengths"]["target"] == raw + 1  # the whole text and its eos
    assert runs["drop"]["lengths"]["input"] + runs["drop"]["lengths"]["target"] == pytest.approx(raw + 2, abs=0.01)
    assert "lengths" not in runs[CONTROL]


def test_results_are_in_range_and_the_rates_recomputed(recorded):
    results = recorded["results"]
    for name, run in results["runs"].items():
        assert 0 <= run["sst2"]["accuracy"] <= 1 and 0 <= run["sst2"]["unparseable_fraction"] <= 1, name
    multitask, sizes = results["multitask"], results["setup"]["multitask"]["train_examples"]
    assert list(sizes) == list(MULTITASK_EXAMPLES) and sizes["sst2"] == MULTITASK_EXAMPLES["sst2"]
    for mixing in MIXINGS:
        expected = mixing_rates(list(sizes.values()), mixing)
        assert list(multitask[mixing]["rates"].values()) == pytest.approx(expected, abs=1e-4)
        assert -1 <= multitask[mixing]["stsb"]["pearson"] <= 1
    for model in ("bart", "t5"):
        squad = results["bart_vs_t5"][model]["squad2_gen"]
        assert 0 <= squad["squad_em"] <= squad["squad_f1"] <= 100
        target = squad["target"]
        assert target["answer_perplexity"] == pytest.approx(math.exp(target["answer_loss"]), rel=1e-3)
        assert target["answer_loss_per_word"] == pytest.approx(
            target["answer_loss"] * target["answer_tokens"] / target["answer_words"], rel=1e-3
        )
    baselines = results["baselines"]
    assert 0.4 < baselines["sst2"] < 0.6 and baselines["standard_error"]["sst2"] == standard_error(872)
