"""The recorded miniature of ELECTRA's efficiency curves, generator sizes, weight sharing and Table 5
(experiments/ch06_electra.py): every run of the script recorded, rows that differ only in what their table varies,
one initialization for all, parameter counts and FLOPs that a fresh count of the same configurations reproduces,
and results within their possible ranges; the detection metrics checked against a brute-force count."""

import json
import math
import sys
from pathlib import Path

import pytest
import torch

from minilm.train.registry import build_model, get_model, get_objective, model_config, needed_settings, objective_config

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "experiments" / "results" / "ch06_electra.json"
sys.path.insert(0, str(ROOT))

from experiments.ch06_electra import (  # noqa: E402
    BERT,
    ELECTRA,
    MODEL,
    RUNS,
    SEQ_LEN,
    TABLES,
    TRAIN,
    auc,
    detection_scores,
    flops_per_step,
    parameter_counts,
    run_name,
)

DETECTORS = ("rtd", "rtd_15", "all_tokens_mlm")  # objectives whose model has a detection head


@pytest.fixture(scope="module")
def recorded():
    if not RESULTS.exists():
        pytest.skip("run experiments/ch06_electra.py first")
    return json.loads(RESULTS.read_text())


def vocab_size(recorded) -> int:
    return int(recorded["results"]["setup"]["tokenizer"].split(", ")[1].split()[0])


def test_every_run_is_recorded_with_provenance(recorded):
    runs = recorded["results"]["runs"]
    assert list(runs) == [run_name(*spec) for spec in RUNS]
    assert {"command", "commit", "machine", "date"} <= set(recorded["provenance"])
    assert "uncommitted" not in recorded["provenance"], "a trial's record (MINILM_ALLOW_DIRTY)"
    tables = recorded["results"]["tables"]
    assert tables == {table: [run_name(*spec) for spec in specs] for table, specs in TABLES.items()}
    assert {name for names in tables.values() for name in names} == set(runs)


def test_rows_differ_only_in_what_their_table_varies(recorded):
    runs, tables = recorded["results"]["runs"], recorded["results"]["tables"]

    def rows(table, *keys):
        return [tuple(runs[name][k] for k in keys) for name in tables[table]]

    assert rows("generator_size", "objective", "share") == [("rtd", "embeddings")] * 4
    assert [size for (size,) in rows("generator_size", "generator_size")] == [0.125, 0.25, 0.5, 1.0]
    assert rows("sharing", "objective", "generator_size") == [("rtd", 1.0)] * 3
    assert [share for (share,) in rows("sharing", "share")] == ["none", "embeddings", "all"]
    table5 = rows("table5", "objective", "generator_size", "share")
    assert [objective for objective, *_ in table5] == ["rtd", "rtd_15", "replace_mlm", "all_tokens_mlm", "mlm"]
    assert table5[:-1] == [(objective, 0.25, "embeddings") for objective, *_ in table5[:-1]] and table5[-1] == BERT
    assert tables["efficiency"] == [run_name(*ELECTRA), run_name(*BERT)]
    # ELECTRA's default is the 1/4 row of the sweep and ELECTRA's row of Table 5; the size-1 run is in two tables
    assert run_name(*ELECTRA) in tables["generator_size"] and tables["table5"][0] == run_name(*ELECTRA)
    assert tables["generator_size"][-1] == tables["sharing"][1]


def test_every_run_starts_from_one_initialization_and_trains_alike(recorded):
    results = recorded["results"]
    runs, setup = results["runs"], results["setup"]["pretraining"]
    assert len({run["initial_checksum"] for run in runs.values()}) == 1
    assert {k: setup[k] for k in TRAIN} == TRAIN
    steps, curve = setup["steps"], setup["checkpoints"]
    assert steps in curve and curve == sorted(curve) and curve[-1] == setup["curve_steps"]
    for name, run in runs.items():
        scored = [c["step"] for c in run["checkpoints"]]
        efficiency = name in results["tables"]["efficiency"]
        assert scored == ([0, *curve] if efficiency else [steps]), name
        assert run["train_curve"]["step"][-1] == scored[-1]
        lengths = {len(values) for values in run["train_curve"].values()}
        assert len(lengths) == 1, f"{name}: train curves of different lengths"
        parts = set(run["train_curve"]) - {"step", "loss"}
        expected = {"rtd": {"generator", "rtd"}, "rtd_15": {"generator", "rtd"}, "replace_mlm": {"generator", "mlm"}}
        expected |= {"all_tokens_mlm": {"generator", "all_tokens"}, "mlm": set()}
        assert parts == expected[run["objective"]], name
    # the untrained control is step 0 of the efficiency runs: the same body, so the same probes
    electra, bert = (runs[name]["checkpoints"][0] for name in results["tables"]["efficiency"])
    assert electra["downstream"] == bert["downstream"] == results["baselines"]["untrained"]


def modules(recorded, run: dict):
    """The recorded run's module on the meta device (nothing allocated), as the script builds it."""
    objective = get_objective(run["objective"], "electra")
    size, share = run["generator_size"], run["share"]
    settings = objective_config(objective, {} if size is None else {"generator_size": size, "share": share})
    entry = get_model("electra")
    config = model_config(entry, "tiny", vocab_size(recorded), {**MODEL, **needed_settings(entry, objective)})
    with torch.device("meta"):
        module = objective.wrap_model(build_model(entry, config), config, settings, None)
    return module, objective.body(module)


def test_recorded_parameter_counts_and_flops_are_the_configurations(recorded):
    masked = recorded["results"]["setup"]["pretraining"]["masked_per_step"]
    for name, run in recorded["results"]["runs"].items():
        module, body = modules(recorded, run)
        counts = parameter_counts(module, body)
        assert {k: run[k] for k in counts} == counts, name
        masking = "mlm" if run["objective"] == "mlm" else "rtd"
        flops = flops_per_step(run["objective"], module, TRAIN["batch_size"] * SEQ_LEN, masked[masking])
        assert run["flops_per_step"] == flops, name
        if run["objective"] != "mlm":
            g = module.generator.config
            assert run["generator_config"] == {
                k: getattr(g, k) for k in ("d_model", "n_heads", "d_ff", "embedding_size")
            }
    runs = recorded["results"]["runs"]
    sweep = [runs[name] for name in recorded["results"]["tables"]["generator_size"]]
    assert [r["generator_config"]["d_model"] for r in sweep] == [16, 32, 64, 128]
    assert [r["flops_per_step"]["generator"] for r in sweep] == sorted(r["flops_per_step"]["generator"] for r in sweep)
    sharing = [runs[name] for name in recorded["results"]["tables"]["sharing"]]
    assert sharing[0]["generator_own_parameters"] > sharing[1]["generator_own_parameters"] > 0
    assert sharing[2]["generator_own_parameters"] < sharing[1]["generator_own_parameters"]  # its MLM head alone
    # the generator's compute is the same whatever it shares
    assert len({r["flops_per_step"]["total"] for r in sharing}) == 1


def test_results_are_in_range(recorded):
    results = recorded["results"]
    majority, untrained = results["baselines"]["majority"], results["baselines"]["untrained"]
    assert 0.4 < majority["sst2"] < 0.6 and 0.1 < majority["ud_pos"] < 0.3
    for task in ("sst2", "ud_pos"):
        assert untrained[task]["last"] > majority[task], "random features carry the words, above the majority class"
    for name, run in results["runs"].items():
        assert run["last_train_loss"] < run["first_train_loss"], f"{name} did not learn"
        assert run["seconds"] >= run["pretrain_seconds"] > 0
        for checkpoint in run["checkpoints"]:
            for task in checkpoint["downstream"].values():
                assert 0 <= task["last"] <= 1 and 0 <= task["mix"] <= 1
            held = checkpoint["held_out"]
            assert all(math.isfinite(v) for v in held.values())
            if "generator" in held:
                assert 0 < held["generator"] < math.log(vocab_size(recorded)) + 2
            assert ("detection" in checkpoint) == (run["objective"] in DETECTORS), name
            for scores in checkpoint.get("detection", {}).values():
                assert all(0 <= scores[k] <= 1 for k in ("auc", "accuracy", "precision", "recall"))
                assert 0.05 < scores["replaced_fraction"] < 0.16  # at most the 15% masked are replaced
        total = run["flops_per_step"]
        assert total["total"] == total["main"] + total["generator"] and (total["generator"] > 0) == (
            run["share"] is not None
        )


def test_auc_and_detection_scores_against_a_brute_force_count():
    torch.manual_seed(0)
    scores, positive = torch.randn(200), torch.rand(200) < 0.3
    pairs = [(float(p > n)) for p in scores[positive] for n in scores[~positive]]
    assert auc(scores, positive) == pytest.approx(sum(pairs) / len(pairs))
    assert auc(torch.tensor([0.1, 0.9, 0.8, 0.2]), torch.tensor([False, True, True, False])) == 1.0
    assert math.isnan(auc(torch.tensor([0.1, 0.2]), torch.tensor([True, True])))
    logits = torch.tensor([2.0, -1.0, 0.5, -3.0, 1.0])  # predicted replaced: 0, 2, 4
    replaced = torch.tensor([True, True, False, False, False])
    d = detection_scores(logits, replaced)
    assert (d["precision"], d["recall"], d["accuracy"], d["replaced_fraction"]) == pytest.approx((1 / 3, 0.5, 0.4, 0.4))
    assert d["tokens"] == 5
