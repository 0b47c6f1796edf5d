"""Run directories through the real command lines, in subprocesses: no run is ever overwritten or half-reused,
Ctrl-C at any moment resumes exactly (loss for loss, dropout on), torn files are tolerated, and every failure is
one ``error:`` line that says what to run instead."""

import json
import os
import shutil
import subprocess
import sys
import textwrap

import pytest

from minilm.tokenizers import Tokenizer
from minilm.train import checkpoint as ckpt
from minilm.train.trainer import read_metrics

TINY = [
    "corpus=tinyshakespeare",
    "vocab_size=300",
    "seq_len=32",
    "model.n_layers=1",
    "model.d_model=32",
    "model.n_heads=2",
    "model.dropout=0.1",
    "batch_size=8",
    "log_every=1",
    "eval_every=3",
    "eval_batches=2",
    "save_every=4",
    "sample_tokens=0",
    "progress=false",
    "threads=1",
]

# Runs a CLI in this process after planting a real SIGINT (os.kill) at one moment: argv[1] is the moment, argv[2]
# the step (of the Trainer) at which it comes, argv[3] the module, the rest its arguments.
INTERRUPTER = textwrap.dedent(
    """
    import os, runpy, signal, sys
    # Ctrl-C as in a terminal: Python's own handler, even where the parent ignores SIGINT (pytest-xdist's workers
    # do, and a child inherits an ignored signal)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    from minilm.train import checkpoint, trainer
    moment, at, module = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    sys.argv = [module, *sys.argv[4:]]
    def ctrl_c(times=1):
        for _ in range(times):
            os.kill(os.getpid(), signal.SIGINT)
    done = []
    def once(original, when):
        def patched(*args, **kwargs):
            if when(*args) and not done:
                done.append(1)
                ctrl_c(2 if moment == "twice" else 1)
            return original(*args, **kwargs)
        return patched
    T = trainer.Trainer
    if moment == "eval":  # in the middle of an evaluation
        T._evaluate = once(T._evaluate, lambda self: self.step == at)
    if moment == "save":  # after the first file of a checkpoint was written
        calls = []
        def second_file(path, data):
            calls.extend([path] if f"step_{at:08d}" in path.parent.name else [])
            return len(calls) == 2
        checkpoint.write_durably = once(checkpoint.write_durably, second_file)
    if moment in ("step", "twice"):  # as a step begins: held until its update and log entry are written
        T.train_step = once(T.train_step, lambda self: self.step == at - 1)
    if moment == "startup":
        T.__init__ = once(T.__init__, lambda *args: True)
    runpy.run_module(module, run_name="__main__")
    """
)


def cli(*args, module="minilm.train", moment=None, at=0, cwd=None):
    """Run ``python -m module args`` (with a planted Ctrl-C when ``moment`` is given); (exit code, stdout, stderr)."""
    env = {**os.environ, "PYTHONWARNINGS": "default"}
    command = [sys.executable, "-c", INTERRUPTER, moment, str(at), module] if moment else [sys.executable, "-m", module]
    done = subprocess.run([*command, *map(str, args)], capture_output=True, text=True, env=env, cwd=cwd)
    return done.returncode, done.stdout, done.stderr


def one_error(code, err, expected_code=None):
    """The stderr of a failure: an ``error:`` line, no traceback."""
    assert "Traceback" not in err, err
    assert err.startswith("error: ") or "\nerror: " in err, err
    if expected_code is not None:
        assert code == expected_code, err
    return err


def train_losses(run_dir):
    return {e["step"]: e["loss"] for e in read_metrics(run_dir / "metrics.jsonl") if e["split"] == "train"}


def validation_losses(run_dir):
    return {e["step"]: e["loss"] for e in read_metrics(run_dir / "metrics.jsonl") if e["split"] == "validation"}


@pytest.fixture(scope="module")
def full_run(tmp_path_factory):
    """An uninterrupted 12-step run: the reference every interrupted one must match."""
    run_dir = tmp_path_factory.mktemp("full") / "run"
    code, _, err = cli(*TINY, "max_steps=12", f"run_dir={run_dir}")
    assert code == 0, err
    return run_dir


# ---------------------------------------------------------------------------------------------- no run overwritten


def test_a_new_run_into_an_existing_run_is_refused_and_overwrite_moves_it_aside(tmp_path, full_run):
    run_dir = tmp_path / "run"
    assert cli(*TINY, "max_steps=4", f"run_dir={run_dir}")[0] == 0
    before = {p.relative_to(run_dir): p.read_bytes() for p in run_dir.rglob("*") if p.is_file()}
    code, _, err = cli(*TINY, "max_steps=1", f"run_dir={run_dir}")
    one_error(code, err, 2)
    assert f"run_dir={run_dir} already holds a run with checkpoints" in err
    assert f"python -m minilm.train --resume {run_dir}" in err and "overwrite=true" in err
    after = {p.relative_to(run_dir): p.read_bytes() for p in run_dir.rglob("*") if p.is_file()}
    assert after == before  # nothing touched: metrics.jsonl keeps its 4 train lines

    code, out, err = cli(*TINY, "max_steps=1", f"run_dir={run_dir}", "overwrite=true")
    assert code == 0, err
    aside = [p for p in tmp_path.iterdir() if p.name.startswith("run.old-")]
    assert len(aside) == 1 and f"moved to {aside[0]}" in out
    moved = {p.relative_to(aside[0]): p.read_bytes() for p in aside[0].rglob("*") if p.is_file()}
    assert moved == before  # the old run, whole and unmixed
    assert list(train_losses(run_dir)) == [1] and [p.name for p in ckpt.step_dirs(run_dir / "checkpoints")] == [
        "step_00000001"
    ]


def test_a_run_that_fails_while_it_prepares_leaves_nothing_to_pick_up(tmp_path):
    run_dir = tmp_path / "x"
    code, _, err = cli(*TINY, "seq_len=100000", f"run_dir={run_dir}")
    one_error(code, err, 2)
    assert not run_dir.exists()  # its tokenizer (of 300 tokens) was removed with the directory it made
    code, out, err = cli(*TINY, "vocab_size=500", "max_steps=1", f"run_dir={run_dir}")
    assert code == 0, err
    assert Tokenizer.load(run_dir / "tokenizer").vocab_size > 300  # a new tokenizer, not the failed run's


def test_a_half_made_run_directory_is_refused_not_reused(tmp_path, full_run):
    run_dir = tmp_path / "x"  # what a run that failed after it started, before its first save, leaves
    run_dir.mkdir()
    shutil.copytree(full_run / "tokenizer", run_dir / "tokenizer")
    shutil.copy(full_run / "config.json", run_dir / "config.json")
    (run_dir / "metrics.jsonl").write_text("")
    code, _, err = cli(*TINY, "vocab_size=500", f"run_dir={run_dir}")
    one_error(code, err, 2)
    assert "already holds files (config.json, metrics.jsonl, tokenizer) but no checkpoint" in err
    assert "overwrite=true" in err
    code, _, err = cli("--resume", run_dir)
    one_error(code, err, 2)
    assert "the run saved no checkpoint" in err and f"run_dir={run_dir} overwrite=true" in err
    assert sorted(p.name for p in run_dir.iterdir()) == ["config.json", "metrics.jsonl", "tokenizer"]  # untouched
    code, out, err = cli(*TINY, "vocab_size=500", "max_steps=1", f"run_dir={run_dir}", "overwrite=true")
    assert code == 0, err
    assert Tokenizer.load(run_dir / "tokenizer").vocab_size > 300


# ---------------------------------------------------------------------------------------------- Ctrl-C


@pytest.mark.parametrize(
    "moment, at, saved_step",
    [("eval", 6, 6), ("save", 8, 8), ("step", 6, 6), ("twice", 6, 4)],
    ids=["during-evaluation", "during-a-save", "inside-a-step", "pressed-twice"],
)
def test_ctrl_c_at_any_moment_resumes_loss_for_loss(tmp_path, full_run, moment, at, saved_step):
    run_dir = tmp_path / "run"
    code, _, err = cli(*TINY, "max_steps=12", f"run_dir={run_dir}", moment=moment, at=at)
    assert code == 130 and "Traceback" not in err, err
    assert err.strip().startswith("interrupted"), err
    assert f"--resume {run_dir}" in err
    assert ckpt.read_meta(run_dir)["step"] == saved_step
    code, out, err = cli("--resume", run_dir, "max_steps=12")
    assert code == 0 and f"at step {saved_step}" in out, err
    assert train_losses(run_dir) == train_losses(full_run)  # all 12, bitwise, with dropout on
    assert validation_losses(run_dir) == validation_losses(full_run)  # an interrupted evaluation is run again


def test_ctrl_c_during_start_up_says_interrupted(tmp_path):
    code, _, err = cli(*TINY, f"run_dir={tmp_path / 'run'}", moment="startup")
    assert code == 130 and err.strip() == "interrupted", err


# ---------------------------------------------------------------------------------------------- torn and corrupt files


def copy_run(full_run, tmp_path):
    run_dir = tmp_path / "run"
    shutil.copytree(full_run, run_dir)
    return run_dir


def test_a_torn_last_metrics_line_is_dropped_with_a_warning_and_the_resume_goes_on(tmp_path, full_run):
    run_dir = copy_run(full_run, tmp_path)
    with open(run_dir / "metrics.jsonl", "a") as f:
        f.write('{"step": 13, "split": "tr')  # a crash while logging
    code, _, err = cli("--resume", run_dir, "max_steps=13")
    assert code == 0, err
    assert "metrics.jsonl: its last line is torn" in err and "Traceback" not in err
    assert train_losses(run_dir) == {**train_losses(full_run), 13: train_losses(run_dir)[13]}
    assert '"tr\n' not in (run_dir / "metrics.jsonl").read_text()  # repaired: rewritten without it


def test_a_torn_results_file_is_left_out_of_the_table_with_a_warning(tmp_path):
    good = {"task": "mrpc", "split": "validation", "metrics": {"f1": 0.8, "accuracy": 0.7}, "name": "gpt-tiny"}
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "results.json").write_text(json.dumps(good))
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "results.json").write_text(json.dumps(good)[:30])
    code, out, err = cli("table", tmp_path, module="minilm.finetune")
    assert code == 0, err
    assert "| gpt-tiny | validation | 80.0/70.0 |" in out
    assert f"{tmp_path / 'b' / 'results.json'} left out of the table: it is torn" in err and "Traceback" not in err
    code, _, err = cli("table", tmp_path / "b", module="minilm.finetune")
    assert "no readable results.json" in one_error(code, err, 2)


def test_a_corrupt_checkpoint_names_the_exact_resume_that_works(tmp_path, full_run):
    run_dir = copy_run(full_run, tmp_path)
    newest, earlier = run_dir / "checkpoints" / "step_00000012", run_dir / "checkpoints" / "step_00000008"
    weights = newest / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:-100])
    code, _, err = cli("--resume", run_dir, "max_steps=12")
    assert "is corrupt or truncated (model.safetensors has" in one_error(code, err, 1)
    assert f"--resume {earlier}" in err
    code, out, err = cli("--resume", earlier, "max_steps=12")  # the command the message gives
    assert code == 0 and "at step 8" in out, err
    assert train_losses(run_dir) == train_losses(full_run)
    assert ckpt.find_checkpoint(run_dir) == newest and ckpt.load_weights(newest, tiny_model(run_dir))


def tiny_model(run_dir):
    from minilm.models.gpt import GPT, GPTConfig

    return GPT(GPTConfig(**json.loads((run_dir / "config.json").read_text())["model"]))


def test_a_deleted_latest_checkpoint_falls_back_to_the_newest_complete_one(tmp_path, full_run):
    run_dir = copy_run(full_run, tmp_path)
    shutil.rmtree(run_dir / "checkpoints" / "step_00000012")
    code, out, err = cli("--resume", run_dir, "max_steps=12")
    assert code == 0 and "at step 8" in out, err
    assert "names 'step_00000012', which is not a complete checkpoint; using the newest complete one" in err
    assert train_losses(run_dir) == train_losses(full_run)


def test_a_damaged_meta_or_config_is_one_error_line(tmp_path, full_run):
    run_dir = copy_run(full_run, tmp_path)
    newest = run_dir / "checkpoints" / "step_00000012"
    (run_dir / "config.json").write_text("{garbage")
    code, _, err = cli("--resume", run_dir, "max_steps=13")
    assert f"{run_dir / 'config.json'} is not valid JSON" in one_error(code, err, 2)
    assert f"--resume {newest}" in err
    meta = json.loads((newest / "meta.json").read_text())
    del meta["format_version"]
    (newest / "meta.json").write_text(json.dumps(meta))
    code, _, err = cli("--resume", newest, "max_steps=13")
    assert "lacks its format_version" in one_error(code, err, 1) and "--resume " in err


# ---------------------------------------------------------------------------------------------- messages that lead


def test_resuming_the_wrong_kind_of_run_says_what_to_run(tmp_path, full_run):
    code, _, err = cli("--resume", full_run, module="minilm.finetune")
    assert f"--resume {full_run} is a pretraining run (gpt, clm)" in one_error(code, err, 2)
    assert f"python -m minilm.finetune --pretrained {full_run}" in err
    finetuned = tmp_path / "ft"
    finetuned.mkdir()
    (finetuned / "config.json").write_text(json.dumps({"job": {"task": "sst2"}, "train": {}, "model": {}}))
    code, _, err = cli("--resume", finetuned)
    assert f"is a fine-tuning run (task sst2): continue it with python -m minilm.finetune --resume {finetuned}" in (
        one_error(code, err, 2)
    )
    code, _, err = cli("--resume", full_run, "--model", "bert")
    assert "continues a run of model 'gpt', not 'bert': drop model=bert" in one_error(code, err, 2)
    code, _, err = cli("--resume", full_run, "max_steps=5")
    assert "is at step 12, past max_steps=5: set max_steps above 12" in one_error(code, err, 2)
    code, _, err = cli("--task", "sst2", f"--pretrained={full_run / 'config.json'}", module="minilm.finetune")
    assert "Give a pretraining run of python -m minilm.train" in one_error(code, err, 1)
    assert "without --resume" not in err


def test_places_that_cannot_be_written_are_one_error_line(tmp_path):
    code, _, err = cli(*TINY, "run_dir=/proc/x")
    assert "/proc/x" in one_error(code, err, 1)
    blocker = tmp_path / "file"
    blocker.write_text("")
    env = {k: v for k, v in os.environ.items() if k != "MINILM_DATA_DIR"}
    done = subprocess.run(
        [sys.executable, "-m", "minilm.train", *TINY, f"run_dir={tmp_path / 'r'}"],
        capture_output=True,
        text=True,
        env={**env, "MINILM_CACHE_DIR": str(blocker / "cache")},
    )
    assert "cannot create the download cache folder" in one_error(done.returncode, done.stderr, 1)
    assert "MINILM_CACHE_DIR" in done.stderr


def test_a_full_disk_before_the_first_checkpoint_is_one_error_line(tmp_path):
    full_disk = textwrap.dedent(
        """
        import builtins, errno, io, runpy, sys
        run_dir, sys.argv = sys.argv[1], ["minilm.train", *sys.argv[2:]]
        real_open = builtins.open
        def open(file, mode="r", *args, **kwargs):
            if str(file).startswith(run_dir) and any(m in mode for m in "wxa"):
                raise OSError(errno.ENOSPC, "No space left on device", str(file))
            return real_open(file, mode, *args, **kwargs)
        builtins.open = io.open = open
        runpy.run_module("minilm.train", run_name="__main__")
        """
    )
    run_dir = tmp_path / "run"
    done = subprocess.run(
        [sys.executable, "-c", full_disk, str(run_dir), *TINY, f"run_dir={run_dir}"], capture_output=True, text=True
    )
    err = one_error(done.returncode, done.stderr, 1)
    assert "No space left on device" in err and "free some disk space" in err
