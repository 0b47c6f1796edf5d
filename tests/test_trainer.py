"""The Trainer: schedules, optimizer groups, accumulation, exact resume, NaN and Ctrl-C handling, precision, logs."""

import dataclasses
import math

import pytest
import torch

from minilm.models.gpt import GPT, GPTConfig
from minilm.recipes.gpt import clm_loss
from minilm.train import checkpoint as ckpt
from minilm.train.config import ConfigError, update
from minilm.train.trainer import (
    BatchOrder,
    LossOutput,
    TrainConfig,
    Trainer,
    TrainingError,
    lr_lambda,
    parameter_groups,
    read_metrics,
)

VOCAB, SEQ = 50, 16


def tiny_gpt(seed=0, dropout=0.1):
    torch.manual_seed(seed)
    return GPT(GPTConfig(vocab_size=VOCAB, max_len=32, n_layers=2, n_heads=2, d_model=32, dropout=dropout))


def blocks(n=64, seed=0):
    """Learnable data: each block counts upwards modulo VOCAB from a random start."""
    starts = torch.randint(0, VOCAB, (n, 1), generator=torch.Generator().manual_seed(seed))
    return (starts + torch.arange(SEQ + 1)) % VOCAB


def config(**kw):
    base = dict(batch_size=8, max_steps=12, lr=3e-3, warmup_steps=2, log_every=1, eval_every=6, progress=False)
    return TrainConfig(**{**base, **kw})


def train_losses(trainer):
    return [e["loss"] for e in trainer.history if e["split"] == "train"]


def test_schedule_warms_up_then_decays_to_the_floor():
    c = TrainConfig(lr=1.0, warmup_steps=10, max_steps=110, min_lr_ratio=0.1, schedule="cosine")
    f = lr_lambda(c)
    assert f(0) == pytest.approx(0.1) and f(9) == pytest.approx(1.0)
    assert f(60) == pytest.approx(0.1 + 0.9 * 0.5)  # half-way through the cosine
    assert f(110) == pytest.approx(0.1) and f(500) == pytest.approx(0.1)
    linear = lr_lambda(dataclasses.replace(c, schedule="linear"))
    assert linear(60) == pytest.approx(0.55) and linear(110) == pytest.approx(0.1)
    assert lr_lambda(dataclasses.replace(c, schedule="constant"))(100) == 1.0


def test_no_weight_decay_on_biases_and_norms_and_tied_weights_once():
    model = tiny_gpt()
    decay, no_decay = parameter_groups(model, 0.1)
    assert all(p.dim() >= 2 for p in decay["params"]) and all(p.dim() == 1 for p in no_decay["params"])
    assert no_decay["weight_decay"] == 0.0 and decay["weight_decay"] == 0.1
    n_grouped = sum(p.numel() for g in (decay, no_decay) for p in g["params"])
    assert n_grouped == sum(p.numel() for p in model.parameters())  # named_parameters dedups the tied head too
    assert sum(p is model.embedding.token.weight for p in decay["params"]) == 1


def test_batch_order_is_a_function_of_seed_and_step():
    order = BatchOrder(10, 4, seed=3)
    epoch0 = order.indices(0) + order.indices(1) + order.indices(2)[:2]
    assert sorted(epoch0) == list(range(10))  # each epoch is a permutation
    assert BatchOrder(10, 4, seed=3).indices(7) == order.indices(7)
    assert BatchOrder(10, 4, seed=4).indices(0) != order.indices(0)


def test_loss_falls_and_logs_are_written(tmp_path):
    run = config(max_steps=40, lr=1e-2, run_dir=str(tmp_path))
    trainer = Trainer(tiny_gpt(), clm_loss, blocks(), run, eval_data=blocks(16, seed=1), perplexity=True)
    final = trainer.fit()
    losses = train_losses(trainer)
    assert losses[-1] < 0.25 * losses[0]
    assert final["loss"] < 0.5 * math.log(VOCAB) and final["perplexity"] == pytest.approx(math.exp(final["loss"]))
    logged = read_metrics(tmp_path / "metrics.jsonl")
    assert [e["loss"] for e in logged if e["split"] == "train"] == losses
    assert {"lr", "tokens_per_s", "epoch"} <= set(logged[0])
    assert (tmp_path / "config.json").exists() and ckpt.find_checkpoint(tmp_path).name == "step_00000040"


def test_assigning_loss_fn_changes_what_is_trained_and_evaluated():
    trainer = Trainer(tiny_gpt(dropout=0.0), clm_loss, blocks(), config(), eval_data=blocks(16, seed=1))
    before = trainer.evaluate()["loss"]

    def doubled(model, block):
        out = clm_loss(model, block)
        return LossOutput(2 * out.loss, n_tokens=out.n_tokens)

    trainer.loss_fn = doubled
    assert trainer.loss_fn is doubled and trainer.loss_module.loss_fn is doubled
    assert trainer.evaluate()["loss"] == pytest.approx(2 * before)


def test_gradient_accumulation_matches_one_big_batch():
    one = Trainer(tiny_gpt(dropout=0.0), clm_loss, blocks(), config(max_steps=5))
    one.fit()
    four = Trainer(tiny_gpt(dropout=0.0), clm_loss, blocks(), config(max_steps=5, grad_accum=4))
    four.fit()
    assert train_losses(one) == pytest.approx(train_losses(four), abs=1e-5)


def interrupt_at(call):
    """A loss function that raises KeyboardInterrupt (Ctrl-C) on its ``call``-th call, after the forward pass
    has drawn its dropout masks: the interrupted step must be rolled back for the resume to be exact."""

    def loss_fn(model, batch):
        loss_fn.calls += 1
        out = clm_loss(model, batch)
        if loss_fn.calls == call:
            raise KeyboardInterrupt
        return out

    loss_fn.calls = 0
    return loss_fn


def test_resume_continues_exactly(tmp_path):
    full = Trainer(tiny_gpt(), clm_loss, blocks(), config(run_dir=str(tmp_path / "full"), save_every=100))
    full.fit()
    cut = config(run_dir=str(tmp_path / "cut"), save_every=100)
    with pytest.raises(KeyboardInterrupt):  # Ctrl-C during step 8: the checkpoint holds step 7
        Trainer(tiny_gpt(), interrupt_at(8), blocks(), cut).fit()
    resumed = Trainer(tiny_gpt(seed=1), clm_loss, blocks(), cut)
    assert resumed.resume(ckpt.find_checkpoint(tmp_path / "cut")) == 7
    resumed.fit()
    assert train_losses(resumed) == train_losses(full)  # bitwise: data order, dropout RNG, optimizer, schedule
    assert [e["loss"] for e in resumed.history if e["split"] == "validation"] == [
        e["loss"] for e in full.history if e["split"] == "validation"
    ]
    logged = read_metrics(tmp_path / "cut" / "metrics.jsonl")
    assert [e["step"] for e in logged if e["split"] == "train"] == list(range(1, 13))


def test_a_nan_loss_stops_training_and_keeps_the_last_good_checkpoint(tmp_path):
    def poisoned(model, batch):
        out = clm_loss(model, batch)
        return LossOutput(out.loss * float("nan"), out.n_tokens) if poisoned.calls >= 5 else out

    def counting(model, batch):
        poisoned.calls += 1
        return poisoned(model, batch)

    poisoned.calls = 0
    trainer = Trainer(tiny_gpt(), counting, blocks(), config(run_dir=str(tmp_path), save_every=2, eval_every=0))
    with pytest.raises(TrainingError, match=r"loss became nan at step 4.*step_00000004.*resume"):
        trainer.fit()
    good = ckpt.find_checkpoint(tmp_path)
    assert good.name == "step_00000004"
    model = tiny_gpt(seed=5)
    ckpt.load_checkpoint(good, model)
    assert all(torch.isfinite(p).all() for p in model.parameters())


def test_ctrl_c_saves_then_stops(tmp_path):
    trainer = Trainer(tiny_gpt(), interrupt_at(4), blocks(), config(run_dir=str(tmp_path), save_every=100))
    with pytest.raises(KeyboardInterrupt, match=r"interrupted at step 3; saved .*step_00000003.*--resume"):
        trainer.fit()
    assert ckpt.read_meta(ckpt.find_checkpoint(tmp_path))["step"] == 3


def test_precision_choices_on_cpu():
    with pytest.raises(ConfigError, match="fp16 needs a CUDA GPU"):
        Trainer(tiny_gpt(), clm_loss, blocks(), config(precision="fp16"))
    trainer = Trainer(tiny_gpt(), clm_loss, blocks(), config(precision="bf16", max_steps=3))
    assert trainer.dtype == torch.bfloat16
    trainer.fit()
    assert all(math.isfinite(x) for x in train_losses(trainer))
    assert Trainer(tiny_gpt(), clm_loss, blocks(), config()).dtype == torch.float32  # auto on CPU


def test_bad_configuration_is_one_clear_message():
    with pytest.raises(ConfigError, match="unknown train key 'max_step'; did you mean 'max_steps'"):
        update(TrainConfig(), {"max_step": "10"}, "train")
    with pytest.raises(ConfigError, match="'max_steps' expects int"):
        update(TrainConfig(), {"max_steps": "many"}, "train")
    with pytest.raises(ConfigError, match="schedule='square' is not one of cosine, linear, constant"):
        update(TrainConfig(), {"schedule": "square"}, "train")
    with pytest.raises(ConfigError, match="batch_size=6 must be divisible"):
        Trainer(tiny_gpt(), clm_loss, blocks(), config(batch_size=6, grad_accum=4))
    with pytest.raises(ConfigError, match="training data is empty"):
        Trainer(tiny_gpt(), clm_loss, blocks()[:0], config())
    assert update(TrainConfig(), {"lr": 1, "compile": "true"}, "train").lr == 1.0  # ints are floats; bool parsing


def test_sequences_longer_than_the_context_are_refused():
    with pytest.raises(ValueError, match="longer than the model's context of 32"):
        tiny_gpt()(torch.zeros(1, 33, dtype=torch.long))


def test_out_of_memory_is_one_message_naming_the_fix_and_the_checkpoint(tmp_path):
    def greedy(model, batch):  # runs out of memory at its 5th micro-batch, as a GPU would on a too-large batch
        greedy.calls += 1
        if greedy.calls == 5:
            raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB\nmore detail")
        return clm_loss(model, batch)

    greedy.calls = 0
    run = config(run_dir=str(tmp_path), save_every=2, eval_every=0, grad_accum=2)
    trainer = Trainer(tiny_gpt(), greedy, blocks(), run)
    with pytest.raises(TrainingError) as caught:
        trainer.fit()
    message = str(caught.value)
    assert "out of memory on cpu at step 3, with micro-batches of 4 examples" in message
    assert "(CUDA out of memory. Tried to allocate 2.00 GiB)" in message  # torch's first line only
    assert "raise grad_accum to 4" in message and "step_00000002" in message and "--resume" in message
    assert all(p.grad is None for p in trainer.model.parameters())
    greedy.calls = 0
    fresh = Trainer(tiny_gpt(), greedy, blocks(), config(batch_size=4, grad_accum=4, eval_every=0, max_steps=3))
    with pytest.raises(TrainingError, match=r"micro-batches of 1 examples.*lower batch_size.*start again"):
        fresh.fit()
