"""Checkpoints: exact resume, atomic saves on a full disk, pruning, and one clear error for each bad input."""

import errno
import hashlib
import json
import os
import random
import signal
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn

import minilm.files
import minilm.train.checkpoint as checkpoint_module
from minilm.models import Transformer, TransformerConfig
from minilm.train.checkpoint import (
    CheckpointError,
    find_checkpoint,
    load_checkpoint,
    load_weights,
    read_meta,
    save_checkpoint,
)
from minilm.utils import reproducible

MODEL_FILE, STATE_FILE, META_FILE = "model.safetensors", "training_state.pt", "meta.json"


@dataclass
class TinyConfig:
    vocab_size: int = 50
    d_model: int = 16


class TinyLM(nn.Module):
    """An embedding tied to the output projection, dropout and a torch.randn draw: the torch RNG matters."""

    def __init__(self, config: TinyConfig | None = None) -> None:
        super().__init__()
        self.config = config or TinyConfig()
        self.embedding = nn.Embedding(self.config.vocab_size, self.config.d_model)
        self.hidden = nn.Linear(self.config.d_model, self.config.d_model)
        self.dropout = nn.Dropout(0.2)
        self.head = nn.Linear(self.config.d_model, self.config.vocab_size, bias=False)
        self.head.weight = self.embedding.weight

    def forward(self, ids):
        x = self.embedding(ids)
        x = x + 0.1 * torch.randn_like(x)
        return self.head(self.dropout(torch.tanh(self.hidden(x))))


def make_run(seed: int, vocab_size: int = 50):
    """(model, optimizer, scheduler, scaler), the scaler growing its scale every 2 steps so its state matters."""
    torch.manual_seed(seed)
    model = TinyLM(TinyConfig(vocab_size))
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: 1 / (1 + step))
    try:
        scaler = torch.amp.GradScaler("cpu", init_scale=16.0, growth_interval=2)
    except (RuntimeError, TypeError, ValueError):  # torch without a CPU GradScaler: resume without one
        scaler = None
    return model, optimizer, scheduler, scaler


def train(model, optimizer, scheduler, scaler, steps: int, trainer_state: dict) -> list[float]:
    """Steps whose batch length comes from python's RNG, tokens from numpy's, noise and dropout from torch's."""
    losses = []
    for _ in range(steps):
        length = random.randint(3, 8)
        ids = torch.from_numpy(np.random.randint(0, model.config.vocab_size, size=(4, length)))
        logits = model(ids)
        loss = F.cross_entropy(logits[:, :-1].reshape(-1, model.config.vocab_size), ids[:, 1:].reshape(-1))
        optimizer.zero_grad()
        if scaler is None:
            loss.backward()
            optimizer.step()
        else:
            scaler.scale(loss).backward()
            scaler.step(optimizer)
            scaler.update()
        scheduler.step()
        trainer_state["step"] += 1
        losses.append(loss.item())
    return losses


def small_transformer(vocab_size: int = 64) -> Transformer:
    config = TransformerConfig(vocab_size, d_model=16, n_heads=2, d_ff=32, n_encoder_layers=1, n_decoder_layers=1)
    return Transformer(config)


def snapshot(directory: Path) -> dict:
    """Every file under ``directory`` with its bytes, and every directory, to compare before and after."""
    return {p.relative_to(directory): p.read_bytes() if p.is_file() else None for p in directory.rglob("*")}


def rehash(checkpoint: Path) -> None:
    """Record the current files' hashes in meta.json, so that a load gets past the sha256 check."""
    meta = json.loads((checkpoint / META_FILE).read_text())
    for name, entry in meta["files"].items():
        data = (checkpoint / name).read_bytes()
        entry.update(sha256=hashlib.sha256(data).hexdigest(), bytes=len(data))
    (checkpoint / META_FILE).write_text(json.dumps(meta))


# --- exact resume ---


def test_resume_continues_bitwise_exactly(tmp_path):
    reproducible(0)
    run = make_run(seed=0)
    state = {"step": 0, "epoch": 0}
    train(*run, 5, state)
    save_checkpoint(tmp_path, state["step"], *run, trainer_state=state, config={"lr": 1e-2})
    expected = train(*run, 5, state)

    reproducible(123)  # a new process: other seeds, other initial weights
    fresh = make_run(seed=1)
    resumed_state = load_checkpoint(tmp_path, *fresh)
    assert resumed_state == {"step": 5, "epoch": 0}
    assert train(*fresh, 5, resumed_state) == expected

    model, optimizer, scheduler, scaler = run
    fresh_model, _, fresh_scheduler, fresh_scaler = fresh
    assert all(torch.equal(value, fresh_model.state_dict()[name]) for name, value in model.state_dict().items())
    assert fresh_model.head.weight is fresh_model.embedding.weight  # still tied after the load
    assert fresh_scheduler.get_last_lr() == scheduler.get_last_lr()
    if scaler is not None:
        assert fresh_scaler.get_scale() == scaler.get_scale() == 16.0 * 2**5


def test_resume_without_the_rng_states_diverges(tmp_path):
    """The exact-resume test can fail: the same load without restoring the RNG gives other losses."""
    reproducible(0)
    run = make_run(seed=0)
    state = {"step": 0}
    train(*run, 5, state)
    save_checkpoint(tmp_path, 5, *run, trainer_state=state)
    expected = train(*run, 5, state)
    reproducible(123)
    fresh = make_run(seed=1)
    assert train(*fresh, 5, load_checkpoint(tmp_path, *fresh, restore_rng=False)) != expected


def test_transformer_weights_round_trip_with_meta(tmp_path):
    torch.manual_seed(0)
    model = small_transformer()
    path = save_checkpoint(tmp_path, 7, model, config={"task": "translation"})
    torch.manual_seed(1)
    other = small_transformer()
    meta = load_weights(path, other)
    assert all(torch.equal(value, other.state_dict()[name]) for name, value in model.state_dict().items())
    assert other.lm_head.weight is other.embedding.token.weight
    assert meta == read_meta(tmp_path)
    assert (meta["step"], meta["model_class"], meta["vocab_size"]) == (7, "Transformer", 64)
    assert meta["model_config"] == asdict(model.config) and meta["config"] == {"task": "translation"}
    assert meta["tensors"]["lm_head.weight"] == [64, 16]


# --- atomic saves ---


@pytest.mark.parametrize("failing", [MODEL_FILE, STATE_FILE, META_FILE, "rename"])
def test_full_disk_while_saving_leaves_the_previous_checkpoint(tmp_path, monkeypatch, failing):
    model, optimizer, scheduler, scaler = make_run(seed=0)
    previous = save_checkpoint(tmp_path, 5, model, optimizer, scheduler, scaler, trainer_state={"step": 5})
    before = snapshot(tmp_path)
    disk_full = OSError(errno.ENOSPC, "No space left on device")
    if failing == "rename":
        real_rename = os.rename

        def rename(source, target):
            if Path(source).name.startswith(".tmp-"):
                raise disk_full
            real_rename(source, target)

        monkeypatch.setattr(os, "rename", rename)
    else:
        real_write = checkpoint_module.write_durably

        def write(path, data):
            if path.name == failing:
                path.write_bytes(data[: len(data) // 2])  # part of the file reached the disk, then it was full
                raise disk_full
            return real_write(path, data)

        monkeypatch.setattr(checkpoint_module, "write_durably", write)

    with pytest.raises(CheckpointError) as info:
        save_checkpoint(tmp_path, 10, model, optimizer, scheduler, scaler, trainer_state={"step": 10})
    message = str(info.value)
    assert "could not save checkpoint step 10: No space left on device" in message
    assert f"the previous checkpoint {previous} is intact" in message and "free disk space" in message
    monkeypatch.undo()
    assert snapshot(tmp_path) == before  # no .tmp directory left, previous checkpoint and latest unchanged
    fresh = make_run(seed=1)
    assert load_checkpoint(tmp_path, *fresh) == {"step": 5}


@pytest.mark.skipif(not hasattr(signal, "SIGXFSZ"), reason="needs POSIX file-size limits")
def test_a_real_write_failure_is_reported_clearly(tmp_path):
    """No mock: a file-size limit makes the kernel refuse the write (EFBIG), as a full disk would (ENOSPC)."""
    import resource

    model = TinyLM()
    previous = save_checkpoint(tmp_path, 5, model)
    before = snapshot(tmp_path)
    old_limit, old_handler = resource.getrlimit(resource.RLIMIT_FSIZE), signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (1000, old_limit[1]))  # model.safetensors needs about 4 kB
    try:
        with pytest.raises(CheckpointError) as info:
            save_checkpoint(tmp_path, 10, model)
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, old_limit)
        signal.signal(signal.SIGXFSZ, old_handler)
    assert str(info.value).startswith("could not save checkpoint step 10: File too large; ")
    assert str(previous) in str(info.value)
    assert snapshot(tmp_path) == before


def test_keep_last_prunes_the_oldest_and_latest_names_the_newest(tmp_path):
    model = TinyLM()
    for step in range(1, 6):
        save_checkpoint(tmp_path, step, model, trainer_state={"step": step}, keep_last=2)
    root = tmp_path / "checkpoints"
    assert sorted(p.name for p in root.iterdir()) == ["latest", "step_00000004", "step_00000005"]
    assert (root / "latest").read_text() == "step_00000005\n"
    assert find_checkpoint(tmp_path) == find_checkpoint(root) == root / "step_00000005"
    assert find_checkpoint(root / "step_00000004") == root / "step_00000004"
    save_checkpoint(tmp_path, 5, model, trainer_state={"saved": "again"}, keep_last=2)  # same step: replaced
    assert sorted(p.name for p in root.iterdir()) == ["latest", "step_00000004", "step_00000005"]
    assert load_checkpoint(tmp_path, TinyLM()) == {"saved": "again"}


def test_find_checkpoint_explains_an_empty_or_missing_path(tmp_path):
    with pytest.raises(CheckpointError, match=r"no checkpoint in .*: it holds no complete checkpoints/step_"):
        find_checkpoint(tmp_path)
    with pytest.raises(CheckpointError, match="does not exist"):
        find_checkpoint(tmp_path / "nowhere")


# --- damaged files ---


@pytest.mark.parametrize("name", [MODEL_FILE, STATE_FILE])
@pytest.mark.parametrize("damage", ["flip", "truncate"])
def test_a_damaged_file_is_named_and_the_model_untouched(tmp_path, name, damage):
    model, optimizer, *_ = make_run(seed=0)
    earlier = save_checkpoint(tmp_path, 1, model, optimizer)
    damaged = save_checkpoint(tmp_path, 2, model, optimizer)
    data = bytearray((damaged / name).read_bytes())
    if damage == "flip":
        data[len(data) // 2] ^= 0xFF
    else:
        del data[len(data) // 2 :]
    (damaged / name).write_bytes(data)

    fresh, fresh_optimizer, *_ = make_run(seed=1)
    untouched = {k: v.clone() for k, v in fresh.state_dict().items()}
    with pytest.raises(CheckpointError) as info:
        load_checkpoint(tmp_path, fresh, fresh_optimizer)
    message = str(info.value)
    assert f"checkpoint {damaged} is corrupt or truncated ({name}" in message
    assert f"resume from an earlier one: {earlier}" in message
    assert all(torch.equal(v, untouched[k]) for k, v in fresh.state_dict().items())


@pytest.mark.parametrize("name", [MODEL_FILE, STATE_FILE])
def test_a_truncated_file_with_a_matching_hash_still_gives_a_checkpoint_error(tmp_path, name):
    model, optimizer, *_ = make_run(seed=0)
    path = save_checkpoint(tmp_path, 1, model, optimizer)
    data = (path / name).read_bytes()
    (path / name).write_bytes(data[: len(data) // 2])
    rehash(path)
    with pytest.raises(CheckpointError, match=f"{name} cannot be"):
        load_checkpoint(tmp_path, TinyLM(), torch.optim.AdamW(TinyLM().parameters()))


def test_a_missing_or_garbled_meta_json_is_reported(tmp_path):
    path = save_checkpoint(tmp_path, 1, TinyLM())
    (path / META_FILE).write_text('{"format": "minilm-checkpoint", "st')
    with pytest.raises(CheckpointError, match=f"corrupt or truncated \\({META_FILE} is missing or unreadable"):
        load_checkpoint(tmp_path, TinyLM())


class Payload:
    """Touches a marker file if it is ever unpickled."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return Path.touch, (self.marker,)


def test_a_pickled_object_in_the_training_state_is_never_unpickled(tmp_path):
    path = save_checkpoint(tmp_path, 1, TinyLM(), trainer_state={"step": 1})
    marker = tmp_path / "unpickled"
    state = torch.load(path / STATE_FILE, weights_only=True)
    state["trainer"]["payload"] = Payload(marker)
    torch.save(state, path / STATE_FILE)
    rehash(path)
    with pytest.raises(CheckpointError, match="holds a pickled .* object, which a weights_only load refuses"):
        load_checkpoint(tmp_path, TinyLM())
    assert not marker.exists()
    torch.load(path / STATE_FILE, weights_only=False)  # the payload is live: an unsafe load would run it
    assert marker.exists()


def test_saving_state_a_safe_load_could_not_read_is_refused_before_writing(tmp_path):
    with pytest.raises(CheckpointError, match=r"training state\['trainer'\]\['sampler'\] has type object"):
        save_checkpoint(tmp_path, 1, TinyLM(), trainer_state={"step": 1, "sampler": object()})
    assert not (tmp_path / "checkpoints").exists()


# --- another model ---


@pytest.mark.parametrize("load", [load_checkpoint, load_weights])
def test_another_vocabulary_size_is_refused_by_name(tmp_path, load):
    save_checkpoint(tmp_path, 1, TinyLM(TinyConfig(vocab_size=50)))
    with pytest.raises(CheckpointError) as info:
        load(tmp_path, TinyLM(TinyConfig(vocab_size=60)))
    message = str(info.value)
    assert "saved from TinyLM with vocab_size=50; this model is TinyLM with vocab_size=60" in message
    assert "embedding.weight is [50, 16] in the checkpoint but [60, 16] in this model" in message


def test_another_architecture_is_refused_by_name(tmp_path):
    save_checkpoint(tmp_path, 1, TinyLM())
    with pytest.raises(CheckpointError) as info:
        load_checkpoint(tmp_path, small_transformer())
    message = str(info.value)
    assert "saved from TinyLM with vocab_size=50; this model is Transformer with vocab_size=64" in message
    assert "the checkpoint has tensors this model lacks: embedding.weight, head.weight, hidden.bias" in message
    assert "model_config" in message


def test_resuming_an_optimizer_from_a_checkpoint_without_one_is_refused(tmp_path):
    save_checkpoint(tmp_path, 1, TinyLM())
    model = TinyLM()
    with pytest.raises(CheckpointError, match="has no optimizer state .* use load_weights"):
        load_checkpoint(tmp_path, model, torch.optim.AdamW(model.parameters()))


def test_one_checkpoint_error_for_the_package():
    """Run checkpoints raise minilm.files.CheckpointError, a ValueError the CLIs turn into one clear line."""
    assert CheckpointError is minilm.files.CheckpointError and issubclass(CheckpointError, ValueError)
