"""The recorded miniatures of Chapter 9 (experiments/ch09_compression.py, experiments/ch09_contextuality.py) checked
against the library and the scripts: every parameter count, size and head count recomputed from the real
all-MiniLM-L6-v2 with the recorded heads really removed, the compression table recomputed from the recorded
measurements, the pruning curve consistent with the script's choice of model, every measure within its range, and
every course model measured past the unigram plateau, as the course checkpoints' record states. Without a record,
these tests skip."""

import copy
import json
import math
import sys
from pathlib import Path

import pytest
import torch

from minilm.analysis.compression import compression_row, model_size_bytes, quantize_dynamic
from minilm.analysis.pruning import count_heads, prune_heads
from minilm.data import load_task
from minilm.models.distilbert import student_from_teacher
from minilm.utils import count_parameters

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "experiments" / "results"
sys.path.insert(0, str(ROOT))

from experiments.ch09_compression import SentenceClassifier  # noqa: E402
from experiments.ch09_contextuality import MODELS  # noqa: E402
from minilm.analysis.plateau import past_plateau  # noqa: E402
from minilm.models import course_checkpoint  # noqa: E402


def _record(name: str) -> dict:
    path = RESULTS / f"{name}.json"
    if not path.exists():
        pytest.skip(f"run experiments/{name}.py first")
    return json.loads(path.read_text())["results"]


@pytest.fixture(scope="module")
def compression():
    return _record("ch09_compression")


@pytest.fixture(scope="module")
def contextuality():
    return _record("ch09_contextuality")


@pytest.fixture(scope="module")
def teacher(all_minilm):
    """The experiment's classifier over all-MiniLM-L6-v2 (its sizes do not depend on the fine-tuned values)."""
    model, _ = all_minilm
    torch.manual_seed(0)
    return SentenceClassifier(copy.deepcopy(model)).eval()


def test_teacher_sizes_and_majority_class(compression, teacher):
    recorded = compression["teacher"]
    assert recorded["parameters"] == count_parameters(teacher) == 22_713_986  # all-MiniLM + a 384 x 2 classifier
    assert recorded["bytes"] == model_size_bytes(teacher)
    assert recorded["heads"] == count_heads(teacher) == 72
    dev = load_task("sst2", "test")
    positive = sum(e.label for e in dev) / len(dev)
    assert compression["setup"]["majority_class"] == pytest.approx(max(positive, 1 - positive))


def test_pruning_curve_and_the_chosen_models(compression):
    base, curve = compression["teacher"], compression["pruning_curve"]
    pruned = [r["heads_pruned"] for r in curve]
    assert pruned[0] == 0 and pruned == sorted(set(pruned)) and pruned[-1] == base["heads"]
    assert curve[0]["score"] == pytest.approx(base["accuracy"])
    for r in curve:
        assert r["fraction"] == pytest.approx(r["heads_pruned"] / base["heads"])
        assert 0.0 <= r["score"] <= 1.0
    # the script's two choices: the largest pruning within 1% of the teacher, and the first at or past half
    within = [r for r in curve if r["score"] >= 0.99 * base["accuracy"]][-1]
    half = next(r for r in curve if r["fraction"] >= 0.5)
    assert compression["pruned"]["within 1%"]["heads_pruned"] == within["heads_pruned"]
    assert compression["pruned"]["half"]["heads_pruned"] == half["heads_pruned"]


@pytest.mark.parametrize("name", ["within 1%", "half"])
def test_really_pruned_models_recomputed(compression, teacher, name):
    recorded = compression["pruned"][name]
    removed = {int(layer): heads for layer, heads in recorded["removed"].items()}
    assert sum(len(h) for h in removed.values()) == recorded["heads_pruned"]
    model = copy.deepcopy(teacher)
    assert prune_heads(model.body, removed) == removed
    assert count_heads(model) == recorded["heads_left"] == 72 - recorded["heads_pruned"]
    assert count_parameters(model) == recorded["parameters"]
    assert model_size_bytes(model) == recorded["bytes"]
    # really removing the heads computes what masking them did
    assert recorded["accuracy"] == pytest.approx(recorded["masked_accuracy"], abs=1.5 / 872)


def test_students_and_int8_sizes_recomputed(compression, teacher):
    student = SentenceClassifier(student_from_teacher(teacher.body))
    for row in compression["students"].values():
        assert row["parameters"] == count_parameters(student) == 17_241_986
        assert row["bytes"] == model_size_bytes(student)
        assert 0.0 <= row["accuracy"] <= 1.0 and row["seconds"] > 0
    assert compression["int8"]["bytes"] == model_size_bytes(quantize_dynamic(teacher))
    assert -1.0 <= compression["int8"]["pooled_cosine_to_float"] <= 1.0


def test_compression_table_recomputed_from_the_measurements(compression):
    base, table = compression["teacher"], compression["table"]
    distilled = compression["students"]["distilled (teacher's layers 0, 2, 4)"]
    pruned, int8 = compression["pruned"]["within 1%"], compression["int8"]
    expected = [
        compression_row(table[0]["method"], base["parameters"], distilled["parameters"], base["accuracy"],
                        distilled["accuracy"], base["seconds"], distilled["seconds"]),
        compression_row(table[1]["method"], base["parameters"], pruned["parameters"], base["accuracy"],
                        pruned["accuracy"], base["seconds"], pruned["seconds"]),
        compression_row(table[2]["method"], base["bytes"], int8["bytes"], base["accuracy"], int8["accuracy"],
                        base["seconds"], int8["seconds"]),
    ]  # fmt: skip
    assert len(table) == len(expected)
    for row, want in zip(table, expected, strict=True):
        for key in ("compression", "performance", "speedup"):
            assert row[key] == pytest.approx(getattr(want, key)), (row["method"], key)
    assert table[1]["method"] == f"pruning: {pruned['heads_pruned']} of {base['heads']} heads"


def test_contextuality_record_measures_every_layer_within_range(contextuality, all_minilm):
    models = contextuality["models"]
    assert set(MODELS) | {"all-MiniLM-L6-v2"} == set(models)
    assert models["all-MiniLM-L6-v2"]["parameters"] == count_parameters(all_minilm[0])
    for name, entry in models.items():
        runs = [entry["trained"]] + ([entry["untrained"]] if name in MODELS else [])
        if name in MODELS:
            assert (entry["model"], entry["objective"]) == MODELS[name]
        for run in runs:
            n_layers = len(run["anisotropy"])
            assert n_layers >= 2, name  # the embeddings and at least one layer
            for measure, values in run.items():
                if not isinstance(values, list) or not values or not isinstance(values[0], float):
                    continue
                assert len(values) == n_layers, (name, measure)
                assert all(math.isfinite(v) and -1.0 - 1e-6 <= v <= 1.0 + 1e-6 for v in values), (name, measure)


def test_contextuality_course_models_are_the_committed_checkpoints_past_the_plateau(contextuality):
    checkpoints = _record("course_checkpoints")
    for name, (course_name, _) in MODELS.items():
        entry = contextuality["models"][name]
        checkpoint = course_checkpoint(course_name)
        body = checkpoint.model  # in eval mode, float32
        assert entry["parameters"] == count_parameters(body), name
        assert entry["steps"] == json.loads((checkpoint.folder / "minilm_run.json").read_text())["steps"], name
        # the script measured the body's layers: the input and one vector per layer
        assert len(entry["trained"]["anisotropy"]) == body.config.n_layers + 1, name
        loss, entropy = entry["held_out_loss"], entry["unigram_entropy"]
        assert past_plateau(loss, entropy), name
        if "held_out_loss" in checkpoints.get(course_name, {}):  # the plateau fields it copied (or scored alike)
            assert loss == pytest.approx(checkpoints[course_name]["held_out_loss"], abs=1e-3), name
            assert entropy == pytest.approx(checkpoints[course_name]["unigram_entropy"], abs=1e-6), name
