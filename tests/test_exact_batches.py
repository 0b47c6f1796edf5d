"""Accumulation and DDP give the big batch's gradient when micro-batches are weighted by their loss-bearing units
(``counts``); named loss parts in the logs; evaluation that reports perplexity only when asked."""

import math
import os
import time

import pytest
import torch
import torch.multiprocessing as mp
from torch.distributed.elastic.utils.distributed import get_free_port

from minilm.models.bert import Bert, BertConfig
from minilm.objectives.mlm import MaskingConfig, StaticMaskedDataset, masked_positions, mlm_loss
from minilm.objectives.nsp import nsp_loss
from minilm.train.config import ConfigError
from minilm.train.distributed import exit_process
from minilm.train.trainer import LossOutput, TrainConfig, Trainer, TrainingError

VOCAB, MASK_ID, PAD_ID = 40, 4, 0


def tiny_bert():
    torch.manual_seed(0)
    config = BertConfig(
        vocab_size=VOCAB, max_len=32, n_layers=2, n_heads=2, d_model=16, d_ff=32, dropout=0.0, attention_dropout=0.0
    )
    return Bert(config)


def masked_data(n=32, seed=0):
    """``n`` [CLS] ... [SEP] sequences of 6-24 tokens, masked once (30%): the masked tokens per batch vary."""
    g = torch.Generator().manual_seed(seed)
    examples = []
    for i in range(n):
        length = int(torch.randint(6, 25, (), generator=g))
        ids = torch.randint(5, VOCAB, (length,), generator=g)
        ids[0], ids[-1] = 1, 2
        special = torch.zeros(length, dtype=torch.bool)
        special[0] = special[-1] = True
        examples.append(
            {
                "input_ids": ids,
                "token_type_ids": torch.zeros(length, dtype=torch.long),
                "special_tokens_mask": special,
                "next_sentence_label": torch.tensor(i % 2),
            }
        )
    masking = MaskingConfig(MASK_ID, VOCAB, PAD_ID, special_ids=(0, 1, 2, 3, 4), mask_prob=0.3)
    return StaticMaskedDataset(examples, masking, n_duplicates=1, seed=seed)


def _forward(model, batch):
    """MLM logits at the masked positions (|M|, V) and the last hidden states (B, T, C), through ``forward`` (which
    DDP wraps: the wrapper has no ``features``)."""
    inputs = batch["input_ids"], batch["attention_mask"], batch["token_type_ids"]
    logits, out = model(*inputs, masked_positions=masked_positions(batch["labels"]), output_hidden_states=True)
    return logits, out.last_hidden_state


def mlm(model, batch) -> LossOutput:
    """The MLM loss: a mean over the batch's masked tokens."""
    logits, _ = _forward(model, batch)
    return LossOutput(mlm_loss(logits, batch["labels"]), n_tokens=int(batch["attention_mask"].sum()))


def mlm_counts(batch):
    return {"loss": (batch["labels"] != -100).sum()}


def mlm_nsp(model, batch) -> LossOutput:
    """MLM (a mean over masked tokens) + 0.5 x NSP (a mean over examples): two parts with different units."""
    logits, hidden = _forward(model, batch)
    bert = getattr(model, "module", model)  # under DDP, the Bert inside
    parts = {
        "mlm": mlm_loss(logits, batch["labels"]),
        "nsp": nsp_loss(bert.nsp_logits(hidden), batch["next_sentence_label"]),
    }
    loss = parts["mlm"] + 0.5 * parts["nsp"]
    return LossOutput(loss, n_tokens=int(batch["attention_mask"].sum()), parts=parts, weights={"nsp": 0.5})


def mlm_nsp_counts(batch):
    return {"mlm": (batch["labels"] != -100).sum(), "nsp": len(batch["input_ids"])}


def trainer(loss_fn, counts, grad_accum=1, data=None, **kw):
    data = data if data is not None else masked_data()
    base = dict(batch_size=16, max_steps=4, lr=1e-3, warmup_steps=1, grad_clip=0.0, log_every=1, eval_every=0)
    base.update(progress=False, device="cpu")
    config = TrainConfig(**{**base, "grad_accum": grad_accum, **kw.pop("config", {})})
    return Trainer(tiny_bert(), loss_fn, data, config, collate=data.collate, counts=counts, **kw)


def first_gradient(t: Trainer) -> torch.Tensor:
    """The gradient the optimizer receives at the first step, all parameters flattened."""
    grads = []
    params = [p for p in t.model.parameters() if p.requires_grad]
    t.optimizer.register_step_pre_hook(
        lambda *_: grads.append(torch.cat([p.grad.flatten() if p.grad is not None else p.new_zeros(0) for p in params]))
    )
    t.train_step()
    return grads[0]


def relative(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a - b).norm() / b.norm())


def big_batch_gradient(loss_fn):
    """Backward of one forward pass over the first step's 16 examples, outside the Trainer."""
    reference = trainer(loss_fn, None)
    indices = reference.order.indices(0)
    data = reference.train_data
    loss_fn(reference.model, data.collate([data[i] for i in indices])).loss.backward()
    params = [p for p in reference.model.parameters() if p.requires_grad]
    return torch.cat([p.grad.flatten() if p.grad is not None else p.new_zeros(0) for p in params])


def test_mlm_accumulation_with_counts_is_the_big_batch():
    big = big_batch_gradient(mlm)
    one = trainer(mlm, mlm_counts)
    assert relative(first_gradient(one), big) < 1e-5
    accumulated = trainer(mlm, mlm_counts, grad_accum=4)
    units = [int(mlm_counts(b)["loss"]) for b in map(accumulated.collate, _chunks(accumulated, 4))]
    assert len(set(units)) > 1, f"the micro-batches should hold different numbers of masked tokens: {units}"
    assert relative(first_gradient(accumulated), big) < 1e-5
    assert accumulated.last_losses["loss"] == pytest.approx(one.last_losses["loss"], rel=1e-6)
    # The old weighting (1/grad_accum, counts=None) is not the big batch's gradient: the test above can fail.
    old = trainer(mlm, None, grad_accum=4)
    assert relative(first_gradient(old), big) > 0.02


def _chunks(t: Trainer, k: int) -> list[list]:
    indices = t.order.indices(0)
    size = len(indices) // k
    return [[t.train_data[i] for i in indices[j * size : (j + 1) * size]] for j in range(k)]


def test_two_part_loss_weights_each_part_by_its_own_units():
    big = big_batch_gradient(mlm_nsp)
    accumulated = trainer(mlm_nsp, mlm_nsp_counts, grad_accum=4)
    assert relative(first_gradient(accumulated), big) < 1e-5
    # The logged parts are the big batch's means; loss = mlm + 0.5 x nsp.
    reference = trainer(mlm_nsp, None)
    with torch.no_grad():
        out = mlm_nsp(reference.model, reference.collate([reference.train_data[i] for i in reference.order.indices(0)]))
    logged = accumulated.last_losses
    assert list(logged) == ["loss", "mlm", "nsp"]
    assert logged["mlm"] == pytest.approx(float(out.parts["mlm"]), rel=1e-5)
    assert logged["nsp"] == pytest.approx(float(out.parts["nsp"]), rel=1e-5)
    assert logged["loss"] == pytest.approx(float(out.loss), rel=1e-5)
    assert relative(first_gradient(trainer(mlm_nsp, None, grad_accum=4)), big) > 0.02


def test_a_micro_batch_without_units_adds_nothing_even_if_its_mean_is_nan():
    def token_loss(model, batch):  # cross-entropy over all positions: NaN when a batch has no labelled token
        logits, _ = _forward(model, {**batch, "labels": torch.zeros_like(batch["labels"])})  # (B x T, V)
        loss = torch.nn.functional.cross_entropy(logits, batch["labels"].flatten())
        return LossOutput(loss, n_tokens=int(batch["attention_mask"].sum()))

    data = masked_data()
    first = trainer(token_loss, mlm_counts, data=data).order.indices(0)[:4]  # micro-batch 0 of grad_accum=4
    for i in first:
        data[i]["labels"].fill_(-100)
    big = trainer(token_loss, mlm_counts, data=data)
    accumulated = trainer(token_loss, mlm_counts, grad_accum=4, data=data)
    reference = first_gradient(big)
    assert torch.isfinite(reference).all()
    assert relative(first_gradient(accumulated), reference) < 1e-5
    assert accumulated.last_losses["loss"] == pytest.approx(big.last_losses["loss"], rel=1e-6)
    with pytest.raises(TrainingError, match="the loss became nan"):  # 1/k weighting: the NaN mean spoils the step
        trainer(token_loss, None, grad_accum=4, data=data).train_step()


def test_parts_are_logged_and_evaluated_by_their_units(tmp_path, capsys):
    data, held_out = masked_data(), masked_data(20, seed=1)
    t = trainer(
        mlm_nsp,
        mlm_nsp_counts,
        grad_accum=2,
        data=data,
        eval_data=held_out,
        perplexity="mlm",
        config=dict(run_dir=str(tmp_path), save_every=0, eval_batches=0, progress=True),
    )
    final = t.fit()
    assert all({"loss", "mlm", "nsp", "lr"} <= set(e) for e in t.history if e["split"] == "train")
    bar = capsys.readouterr().err
    assert "mlm=" in bar and "nsp=" in bar and "loss=" in bar
    # Evaluation: each part's mean over all its units of the eval data (masked tokens, examples), in micro-batches.
    with torch.no_grad():
        whole = mlm_nsp(t.model.eval(), held_out.collate(list(held_out)))
    assert final["mlm"] == pytest.approx(float(whole.parts["mlm"]), rel=1e-5)
    assert final["nsp"] == pytest.approx(float(whole.parts["nsp"]), rel=1e-5)
    assert final["loss"] == pytest.approx(final["mlm"] + 0.5 * final["nsp"], rel=1e-6)
    assert final["perplexity"] == pytest.approx(math.exp(final["mlm"]))
    # Without counts, evaluation weighs each micro-batch (8 examples here) by its examples, as before.
    t.counts = None
    chunks = [list(held_out)[i : i + 8] for i in range(0, len(held_out), 8)]
    with torch.no_grad():
        by_examples = sum(len(c) * mlm_nsp(t.model, held_out.collate(c)).parts["mlm"].item() for c in chunks) / 20
    assert t.evaluate()["mlm"] == pytest.approx(by_examples, rel=1e-6)


def test_perplexity_only_when_asked():
    t = trainer(mlm, mlm_counts, eval_data=masked_data(8, seed=1))
    metrics = t.evaluate()
    assert set(metrics) == {"step", "split", "loss"}
    t.perplexity = True
    assert t.evaluate()["perplexity"] == pytest.approx(math.exp(metrics["loss"]))


def test_perplexity_of_parts_that_are_one_mean_over_the_same_units():
    """The biLM's case: two directions, each a mean over as many predictions, weighted 1/2: exp(loss) is a
    perplexity. Weights that do not sum to 1 make it none."""

    def two_halves(weight):
        def loss(model, batch):
            out = mlm(model, batch)
            parts, weights = {"left": out.loss, "right": out.loss}, {"left": weight, "right": weight}
            return LossOutput(2 * weight * out.loss, n_tokens=out.n_tokens, parts=parts, weights=weights)

        return loss

    def counts(batch):
        n = mlm_counts(batch)["loss"]
        return {"left": n, "right": n}

    metrics = trainer(two_halves(0.5), counts, eval_data=masked_data(8, seed=1), perplexity=True).evaluate()
    assert metrics["perplexity"] == pytest.approx(math.exp(metrics["loss"]))
    with pytest.raises(ConfigError, match=r"perplexity=True, but the loss has parts \['left', 'right'\]"):
        trainer(two_halves(1.0), counts, perplexity=True).train_step()


def test_mismatched_parts_counts_or_perplexity_are_one_clear_message():
    with pytest.raises(ConfigError, match=r"counts\(batch\) gave the units of \['loss'\], but the loss has parts"):
        trainer(mlm_nsp, mlm_counts).train_step()
    with pytest.raises(ConfigError, match=r"perplexity=True, but the loss has parts \['mlm', 'nsp'\].*'mlm'"):
        trainer(mlm_nsp, mlm_nsp_counts, perplexity=True).train_step()
    with pytest.raises(ConfigError, match=r"perplexity='mlmm' is not a part of the loss \(parts: \['mlm', 'nsp'\]\)"):
        trainer(mlm_nsp, mlm_nsp_counts, perplexity="mlmm").train_step()
    with pytest.raises(ConfigError, match="perplexity='loss': use True, False or the name of a part"):
        trainer(mlm, mlm_counts, perplexity="loss")

    def stray_weight(model, batch):
        return LossOutput(**{**vars(mlm_nsp(model, batch)), "weights": {"sop": 1.0}})

    with pytest.raises(ConfigError, match=r"LossOutput.weights names \['sop'\], which are not parts"):
        trainer(stray_weight, None).train_step()


# ------------------------------------------------------------------------------------------ two processes (gloo)


def join_group(rank: int, port: int) -> None:
    """What torchrun would set for process ``rank`` of 2."""
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank), LOCAL_RANK=str(rank))
    os.environ["WORLD_SIZE"] = "2"
    torch.set_num_threads(1)


def ddp_first_step(rank: int, port: int, out: str) -> None:
    join_group(rank, port)
    t = trainer(mlm_nsp, mlm_nsp_counts, grad_accum=2)
    units = t._micro_batches(0)[1]
    torch.save({"grad": first_gradient(t), "losses": t.last_losses, "units": units}, f"{out}/rank{rank}.pt")
    torch.distributed.destroy_process_group()
    exit_process(0)  # as the CLIs end a torchrun process: past gloo's teardown, which can abort it


def test_two_processes_give_the_big_batch_gradient_with_uneven_counts(tmp_path):
    mp.start_processes(ddp_first_step, args=(get_free_port(), str(tmp_path)), nprocs=2, start_method="spawn")
    ranks = [torch.load(tmp_path / f"rank{r}.pt") for r in range(2)]
    masked = [sum(int(u["mlm"]) for u in r["units"]) for r in ranks]
    assert masked[0] != masked[1], f"the ranks should hold different numbers of masked tokens: {masked}"
    single = trainer(mlm_nsp, mlm_nsp_counts)  # one process, no accumulation: the big batch
    big = first_gradient(single)
    for r in ranks:
        assert relative(r["grad"], big) < 1e-5
        assert r["losses"] == pytest.approx(single.last_losses, rel=1e-5)  # the logged loss and parts too


def failing_evaluation(rank: int, port: int, out: str) -> None:
    """Rank 0's on_eval raises at step 2, then rank 0 lingers (a notebook, a slow teardown) instead of exiting."""
    join_group(rank, port)

    def on_eval(metrics):
        raise ValueError("the sample printer broke")

    t = trainer(mlm_nsp, mlm_nsp_counts, eval_data=masked_data(8, 1), on_eval=on_eval, config=dict(eval_every=2))
    try:
        t.fit()
    except (ValueError, TrainingError) as err:
        with open(f"{out}/rank{rank}.txt", "w") as f:
            f.write(f"{type(err).__name__}: {err}")
    if rank == 0:
        time.sleep(60)


def test_when_rank_0_fails_the_others_stop_at_once(tmp_path):
    context = mp.get_context("spawn")
    port = get_free_port()
    processes = [context.Process(target=failing_evaluation, args=(r, port, str(tmp_path))) for r in range(2)]
    for p in processes:
        p.start()
    try:
        processes[1].join(timeout=45)  # rank 1 must not wait for rank 0, which lingers for 60 s
        assert processes[1].exitcode is not None, "rank 1 is still waiting for rank 0"
    finally:
        for p in processes:
            p.kill()
    assert (tmp_path / "rank0.txt").read_text() == "ValueError: the sample printer broke"
    assert (tmp_path / "rank1.txt").read_text() == (
        "TrainingError: rank 0 failed while logging the validation metrics of step 2 (ValueError: the sample "
        "printer broke); process 1 stops too"
    )
