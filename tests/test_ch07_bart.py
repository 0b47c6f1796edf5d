"""The recorded miniature of BART's Table 1 (experiments/ch07_bart.py): every row of the script recorded, rows that
differ only in their noise, one initialization for all (the recorded checksum and parameter count recomputed from
the recorded configuration), results within their possible ranges, and the quantities derived from others
(perplexities, standard errors, the constant baseline) equal to a fresh computation. Without a record, only the
row definitions are checked (every row a valid setting of the denoise objective; "none" leaves a piece as it is)."""

import json
import math
import sys
from pathlib import Path

import pytest
import torch

from minilm.data import Document
from minilm.models.bart import Bart
from minilm.tokenizers import train_tokenizer
from minilm.train.pretrain import PretrainConfig
from minilm.train.registry import get_model, get_objective, model_config
from minilm.utils import count_parameters

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "experiments" / "results" / "ch07_bart.json"
sys.path.insert(0, str(ROOT))

from experiments.ch07_bart import (  # noqa: E402
    CONTROL,
    FINETUNE,
    FIXED,
    MODEL,
    PRETRAIN,
    ROWS,
    checksum,
    corruption_stats,
    settings_of,
    standard_error,
)

DEFAULTS = {"mask_ratio": 0.3, "poisson_lambda": 3.0, "permute_ratio": 1.0, "random_ratio": 0.0}


@pytest.fixture(scope="module")
def recorded():
    if not RESULTS.exists():
        pytest.skip("run experiments/ch07_bart.py first")
    return json.loads(RESULTS.read_text())


def vocab_size(recorded) -> int:
    return int(recorded["results"]["setup"]["tokenizer"].split(", ")[1].split()[0])


def test_every_row_is_a_denoise_setting_and_none_corrupts_nothing():
    texts = ["The sea was calm. The ship sailed on! Was the captain asleep? Nobody knew."] * 20
    tokenizer = train_tokenizer(texts, "roberta", vocab_size=300)
    objective = get_objective("denoise", "bart")
    job = PretrainConfig(model="bart", objective="denoise", seq_len=32)
    docs = [Document("d", texts[:3])]
    for name in ROWS:
        settings = settings_of(name)
        settings.validate()
        expected = {**DEFAULTS, "mask_ratio": 0.0} if name == "none" else DEFAULTS
        assert {k: getattr(settings, k) for k in DEFAULTS} == expected, name
        held = objective.prepare(docs, tokenizer, job, settings, validation=True)
        stats = corruption_stats(held)
        assert (stats["changed_fraction"] == 0.0) == (name == "none"), name
        if name in ("masking", "rotation", "permutation", "none"):
            assert stats["length_ratio"] == 1.0, name
        else:
            assert stats["length_ratio"] < 1.0, name
    assert FIXED in ROWS and CONTROL not in ROWS


def test_standard_error():
    assert standard_error(100) == 0.05 and standard_error(872) == pytest.approx(0.0169, abs=1e-4)


def test_every_row_is_recorded_with_provenance(recorded):
    results = recorded["results"]
    assert results["rows"] == [*ROWS, CONTROL] and list(results["runs"]) == results["rows"]
    assert {"command", "commit", "machine", "date"} <= set(recorded["provenance"])
    assert "uncommitted" not in recorded["provenance"], "a trial's record (MINILM_ALLOW_DIRTY)"
    assert set(results["labels"]) == set(results["rows"]) and set(results["paper"]) <= set(ROWS)
    for run in results["runs"].values():
        assert list(run["held_out"]) == list(ROWS)  # every model under every corruption
        assert set(FINETUNE) <= set(run)


def test_rows_differ_only_in_the_noise_and_start_from_one_initialization(recorded):
    results = recorded["results"]
    setup, runs = results["setup"], results["runs"]
    assert {k: setup["pretraining"][k] for k in PRETRAIN} == PRETRAIN
    assert setup["pretraining"]["defaults"] == DEFAULTS
    assert {k: setup["model"][k] for k in MODEL} == MODEL
    for name, run in runs.items():
        if name == CONTROL:
            assert run["settings"] is None and "train_curve" not in run
            continue
        expected = {**DEFAULTS, **ROWS[name]}
        assert run["settings"] == {"noise": ROWS[name]["noise"], **{k: expected[k] for k in DEFAULTS}}, name
        assert run["train_curve"]["step"][-1] == setup["pretraining"]["steps"]
    assert len({run["initial_checksum"] for run in runs.values()}) == 1
    for task, spec in setup["finetuning"].items():
        assert {k: spec[k] for k in ("max_length", "steps", "batch_size", "lr")} == {
            k: FINETUNE[task][k] for k in ("max_length", "steps", "batch_size", "lr")
        }


def test_the_recorded_initialization_and_parameter_count_are_the_configuration(recorded):
    setup = recorded["results"]["setup"]
    config = model_config(get_model("bart"), "tiny", vocab_size(recorded), MODEL)
    with torch.device("meta"):
        assert count_parameters(Bart(config)) == setup["parameters"]
    torch.manual_seed(0)  # the script's initialization
    initial = Bart(config)
    recorded_sum = recorded["results"]["runs"][CONTROL]["initial_checksum"]
    assert checksum(initial) == pytest.approx(recorded_sum, rel=1e-9)


def test_results_are_in_range(recorded):
    results = recorded["results"]
    log_v = math.log(vocab_size(recorded))
    runs, held_out = results["runs"], results["setup"]["held_out"]
    assert held_out["none"]["changed_fraction"] == 0.0 and held_out["none"]["length_ratio"] == 1.0
    assert held_out[FIXED]["changed_fraction"] == 1.0 and 0.6 < held_out["deletion"]["length_ratio"] < 0.75
    assert len({h["target_tokens"] for h in held_out.values()}) == 1  # the same pieces under every corruption
    for name, run in runs.items():
        for corruption, loss in run["held_out"].items():
            assert 0 < loss < 50, (name, corruption)  # a copier meeting masks can be confidently wrong: > log V
        if name == CONTROL:
            assert all(abs(loss - log_v) < 0.5 for loss in run["held_out"].values()), "untrained: about uniform"
        else:
            assert run["last_train_loss"] < run["first_train_loss"] - 1, f"{name} did not learn"
            assert run["pretrain_seconds"] > 0 and len(set(map(len, run["train_curve"].values()))) == 1
        if name not in (CONTROL, "none"):  # a denoiser predicts held-out text better than the untrained model
            assert run["held_out"][FIXED] < runs[CONTROL]["held_out"][FIXED], name
        sst2, squad = run["sst2"], run["squad2_gen"]
        assert 0 <= sst2["accuracy"] <= 1 and 0 <= squad["no_answer_fraction"] <= 1
        assert 0 <= squad["squad_em"] <= squad["squad_f1"] <= 100 and 0 <= squad["rougeL"] <= 1
        target = squad["target"]
        for part in ("all", "answerable"):
            assert target[f"{part}_perplexity"] == pytest.approx(math.exp(target[f"{part}_loss"]), rel=1e-3)
        assert target["answerable_tokens"] < target["all_tokens"]


def test_baselines_are_recomputed(recorded):
    results = recorded["results"]
    baselines, setup = results["baselines"], results["setup"]
    n = {task: spec["test_examples"] for task, spec in setup["finetuning"].items()}
    assert baselines["standard_error"] == {
        "sst2": standard_error(n["sst2"]),
        "squad2_gen_em": round(100 * standard_error(n["squad2_gen"]), 2),
    }
    constant = baselines["constant"]
    assert 0.4 < constant["sst2"] < 0.6
    # "no answer" is right on the unanswerable questions and wrong on all the others
    assert constant["squad2_gen"]["squad_em"] == pytest.approx(
        100 * constant["squad2_gen_unanswerable_fraction"], abs=0.05
    )
    assert baselines["no_pretraining"] == CONTROL
