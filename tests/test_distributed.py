"""Distributed training on CPU (gloo, 2 processes under torchrun) reproduces the single-process run."""

import json
import os
import shutil
import subprocess
import sys

import pytest
import safetensors.torch

from minilm.train.trainer import read_metrics

SETTINGS = [
    "corpus=tinyshakespeare",
    "vocab_size=400",
    "seq_len=32",
    "model.n_layers=2",
    "model.d_model=32",
    "model.n_heads=2",
    "batch_size=8",
    "max_steps=6",
    "log_every=1",
    "eval_every=3",
    "eval_batches=4",
    "save_every=6",
    "progress=false",
    "sample_tokens=0",
    "threads=1",
]


def train(run_dir, *extra, processes=1):
    launcher = [sys.executable, "-m", "minilm.train"]
    if processes > 1:
        launcher = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={processes}"]
        launcher += ["-m", "minilm.train"]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    done = subprocess.run(
        [*launcher, *SETTINGS, f"run_dir={run_dir}", *extra], env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return read_metrics(run_dir / "metrics.jsonl"), done.stdout


def losses(entries, split):
    return [e["loss"] for e in entries if e["split"] == split]


@pytest.fixture(scope="module")
def single(tmp_path_factory):
    return train(tmp_path_factory.mktemp("single") / "run")[0]


@pytest.mark.parametrize(
    "extra", [(), ("grad_accum=2",), ("distributed=fsdp",)], ids=["ddp", "ddp+accumulation", "fsdp"]
)
def test_two_processes_log_the_losses_of_one(single, tmp_path, extra):
    ddp, stdout = train(tmp_path / "run", *extra, processes=2)
    assert "2 process(es)" in stdout
    assert len(losses(ddp, "train")) == 6
    assert losses(ddp, "train") == pytest.approx(losses(single, "train"), rel=1e-5)
    assert losses(ddp, "validation") == pytest.approx(losses(single, "validation"), rel=1e-5)
    # Only rank 0 writes: one log line per step, one checkpoint.
    assert [e["step"] for e in ddp if e["split"] == "train"] == list(range(1, 7))
    assert json.loads((tmp_path / "run" / "checkpoints" / "step_00000006" / "meta.json").read_text())["step"] == 6


def test_fsdp_checkpoints_resume_where_a_crashed_run_stopped(single, tmp_path):
    run_dir = tmp_path / "run"
    train(run_dir, "distributed=fsdp", "save_every=3", processes=2)
    # Simulate a crash right after the step-3 checkpoint: drop what came later.
    checkpoints = run_dir / "checkpoints"
    shutil.rmtree(checkpoints / "step_00000006")
    (checkpoints / "latest").write_text("step_00000003")
    resumed, stdout = train(run_dir, "distributed=fsdp", "--resume", str(run_dir), processes=2)
    assert "resumed from" in stdout and "at step 3" in stdout
    assert losses(resumed, "train") == pytest.approx(losses(single, "train"), rel=1e-5)
    weights = safetensors.torch.load_file(checkpoints / "step_00000006" / "model.safetensors")
    assert weights["embedding.token.weight"].shape == (400, 32)  # full tensors, not one process's shard
