"""The recorded miniature of ALBERT's Tables 3-5 and Figure 1 (experiments/ch05_albert.py): every run of the script
recorded, rows that differ only in what their table varies, parameter counts that a fresh count of the same
configurations reproduces, and results within their possible ranges."""

import json
import math
import sys
from pathlib import Path

import pytest
import torch

from minilm.models.albert import Albert, albert_config
from minilm.utils import count_parameters

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "experiments" / "results" / "ch05_albert.json"
sys.path.insert(0, str(ROOT))

from experiments.ch05_albert import ALBERT_E, EVALUATIONS, MODEL, RUNS, balanced, run_name  # noqa: E402


@pytest.fixture(scope="module")
def recorded():
    if not RESULTS.exists():
        pytest.skip("run experiments/ch05_albert.py first")
    return json.loads(RESULTS.read_text())


def test_every_run_is_recorded_with_provenance(recorded):
    runs = recorded["results"]["runs"]
    assert list(runs) == [run_name(sharing, e, loss) for _, _, sharing, e, loss in RUNS]
    assert {"command", "commit", "machine", "date"} <= set(recorded["provenance"])
    tables = recorded["results"]["tables"]
    named = [*tables["table3"], *tables["table4"], *tables["table5"], *tables["figure1"].values()]
    assert set(named) <= set(runs)


def test_rows_differ_only_in_what_their_table_varies(recorded):
    runs, tables = recorded["results"]["runs"], recorded["results"]["tables"]
    assert {runs[n]["sentence_loss"] for n in tables["table3"] + tables["table4"]} == {"sop"}
    assert {runs[n]["embedding_size"] for n in tables["table4"]} == {ALBERT_E}
    assert [runs[n]["sharing"] for n in tables["table4"]] == ["all", "attention", "ffn", "none"]
    table5 = [runs[n] for n in tables["table5"]]
    assert [r["sentence_loss"] for r in table5] == ["none", "nsp", "sop"]
    assert {(r["sharing"], r["embedding_size"]) for r in table5} == {("all", ALBERT_E)}
    bert, albert = (runs[n] for n in tables["figure1"].values())
    assert (bert["sharing"], albert["sharing"]) == ("none", "all")
    assert bert["embedding_size"] == albert["embedding_size"]


def test_recorded_parameter_counts_are_the_configurations(recorded):
    vocab_size = int(recorded["results"]["setup"]["tokenizer"].split(", ")[1].split()[0])
    for run in recorded["results"]["runs"].values():
        heads = {"nsp": True, "sop": False} if run["sentence_loss"] == "nsp" else {}
        config = albert_config(
            "tiny", **MODEL, vocab_size=vocab_size, embedding_size=run["embedding_size"], share=run["sharing"], **heads
        )
        with torch.device("meta"):
            model = Albert(config)
        assert run["parameters"] == count_parameters(model)
        assert run["embedding_parameters"] == count_parameters(model.embedding)
        assert run["encoder_parameters"] == count_parameters(model.encoder)


def test_results_are_in_range(recorded):
    layers = MODEL["n_layers"]
    for name, run in recorded["results"]["runs"].items():
        assert run["last_train_loss"] < run["first_train_loss"], f"{name} did not learn"
        assert 0 < run["held_out_loss"] < math.log(8000) + 1
        assert 0 <= run["sst2_probe_accuracy"] <= 1
        transitions = run["transitions"]
        assert len(transitions["l2"]) == len(transitions["degrees"]) == layers
        assert all(0 <= d <= 180 for d in transitions["degrees"])
        for task in run.get("pair_tasks", {}).values():
            assert 0 <= task["accuracy"] <= 1 and 0 <= task["probe_accuracy"] <= 1


def test_every_run_states_its_held_out_loss_beside_the_unigram_entropy_and_is_past_the_plateau(recorded):
    setup = recorded["results"]["setup"]
    for name, run in recorded["results"]["runs"].items():
        assert run["unigram_entropy"] == setup["unigram_entropy"], "one held-out set: one entropy"
        assert math.isclose(run["nats_below_unigram"], run["unigram_entropy"] - run["held_out_loss"])
        assert run["past_plateau"] == (run["nats_below_unigram"] >= setup["plateau_margin"])
        assert run["nats_below_unigram"] >= 1.0, f"{name} is not a nat below the unigram entropy"
        curve = run["held_out_curve"]
        assert [point["step"] for point in curve] == [
            setup["pretraining"]["steps"] * (i + 1) // EVALUATIONS for i in range(EVALUATIONS)
        ]
        assert curve[-1]["mlm"] < curve[0]["mlm"], f"{name}'s held-out loss did not fall"


def test_own_heads_score_their_own_task_and_probes_the_rest(recorded):
    runs = recorded["results"]["runs"]
    for name in recorded["results"]["tables"]["table5"]:
        loss, tasks = runs[name]["sentence_loss"], runs[name]["pair_tasks"]
        assert {task: scores["by"] for task, scores in tasks.items()} == {
            task: "head" if task == loss else "probe" for task in ("nsp", "sop")
        }


def test_balanced_takes_as_many_of_each_label_from_everywhere():
    examples = [{"label": torch.tensor(int(i % 3 == 0))} for i in range(300)]  # 100 ones, 200 zeros, in order
    chosen = balanced(examples, "label", n=120)
    labels = [int(e["label"]) for e in chosen]
    assert labels.count(0) == labels.count(1) == 60
    assert len({id(e) for e in chosen}) == 120
    position = {id(e): i for i, e in enumerate(examples)}
    positions = sorted(position[id(e)] for e in chosen if int(e["label"]) == 0)
    assert positions[-1] > 150, "drawn from the whole list, not its first examples"
    everything = balanced(examples, "label")
    assert len(everything) == 200
