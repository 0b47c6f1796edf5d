"""benchmarks/gpu.py, the GPU check, in its CPU mode (--quick): every row's code path runs, the rows that need CUDA
say so, FSDP with one process shards and trains as the unsharded run does, and a resumed run is bitwise the
uninterrupted one."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "benchmarks" / "gpu.py"


def gpu_check(*args, cwd=ROOT):
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=600, cwd=cwd)


@pytest.fixture(scope="module")
def quick(tmp_path_factory):
    out = tmp_path_factory.mktemp("gpu") / "gpu.json"
    done = gpu_check("--quick", "--json", str(out))
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout, json.loads(out.read_text())


def rows_by_key(record):
    return {row["key"]: row for row in record["rows"]}


def test_every_row_runs_or_says_it_needs_a_gpu(quick):
    stdout, record = quick
    rows = rows_by_key(record)
    assert set(rows) == {"gpt", "gpt-compile", "transformers", "transformers-compile", "bert", "transformers-bert",
                         "fp16", "fsdp", "resume"}  # fmt: skip
    assert not [row for row in record["rows"] if "error" in row], stdout
    for key in ("gpt-compile", "transformers-compile", "fp16"):
        assert rows[key]["skipped"] == "needs a CUDA GPU"
    assert stdout.count("\n| ") == len(rows) + 1  # the header row and one row each
    assert record["device"] == "CPU" and record["peak_tflops"] is None


def test_each_timed_row_learns_its_batches_and_has_a_rate(quick):
    _, record = quick
    for row in record["rows"]:
        if "seconds_per_step" in row:
            assert row["seconds_per_step"] > 0 and row["tokens_per_step"] > 0 and row["flops_per_token"] > 0
            assert row["last_loss"] < row["first_loss"] - 0.05, row["name"]  # four batches, memorised


def test_fsdp_with_one_process_shards_and_gives_the_unsharded_losses(quick):
    fsdp = rows_by_key(quick[1])["fsdp"]
    assert fsdp["sharded"] is True
    assert fsdp["loss_diff_vs_unsharded"] < 1e-5


def test_a_resumed_run_is_bitwise_the_uninterrupted_one_on_a_cpu(quick):
    resume = rows_by_key(quick[1])["resume"]
    assert resume["resume_bitwise"] is True and resume["resume_max_abs_diff"] == 0.0
    assert resume["last_loss"] < resume["first_loss"]


def test_an_unknown_row_is_one_clear_message(tmp_path):
    done = gpu_check("--quick", "--rows", "gpt,warp", "--json", str(tmp_path / "x.json"))
    assert done.returncode != 0
    assert done.stderr.strip().splitlines()[-1].startswith("error: unknown row(s) warp; choose from gpt,")
    assert not (tmp_path / "x.json").exists()
