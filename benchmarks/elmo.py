"""Training throughput of the ELMo biLM (``tiny`` preset) on Tiny Shakespeare, and where a step's time goes.

    MINILM_DATA_DIR=/work/shared/data python benchmarks/elmo.py   # 2 torch threads, then 1; 10 rounds; ~1.5 min
    python benchmarks/elmo.py --quick                              # 4 rounds, for a smoke test
    python benchmarks/elmo.py --threads 1                          # one thread count only

The job is the one ``minilm pretrain`` builds for ``model=elmo objective=bilm size=tiny corpus=tinyshakespeare``:
the corpus split as the CLI splits it, a gpt2-family byte-level BPE tokenizer of 8192 tokens trained on the training
part, the ELMo model spelled with that vocabulary (``spell_vocabulary``), the bilm objective's blocks of seq_len + 1
= 129 real tokens, batch 16, trained through the real ``Trainer.train_step`` (forward, ``elmo_bilm_loss``,
backward, gradient clipping at 1.0, fused AdamW, LambdaLR, zero_grad). Tokens/step counts the predictions of one
direction, as the objective reports them: 16 x 128 = 2,048.

There is no reference implementation to compare with here: transformers has no ELMo, the original (allenai's
bilm-tf) is TensorFlow 1, and allennlp's PyTorch biLM is not installed (nor installable offline, and the project is
archived). So the ratios reported are between the parts of the step: the step is timed whole, and
its parts are timed alone on the same batch (forward + backward to their inputs and parameters, with
``torch.autograd.grad`` so that no gradient lands in the trainer's parameters):

    char CNN:        embed(ids): unique tokens -> char_table -> char embedding, convolutions, highway, projection
    LSTMs:           both directions' two LSTMP layers (torch.nn.LSTM's own CPU kernel) with the residual connection
    softmax + loss:  the shared softmax (d -> V) on both directions' top layer and the two cross-entropies, fused
                     as ``elmo_bilm_loss`` runs them (``bilm_loss_from_states``: the logits never materialise)
    rest (derived):  whole step - the three parts: the optimizer, clipping, zero_grad, the backward LM's reversal

A context row times the softmax + loss the plain way (the (B, T, V) logits, then ``bilm_loss``), as the step ran it
before the fused loss; it is not part of the step.

The variants are warmed up, then timed round-robin (one call each per round) so that a noisy machine slows all
alike; the tables report medians of the wall clock and of the process's CPU time.

``OMP_WAIT_POLICY`` is PASSIVE unless set otherwise, as in the other benchmarks. The LSTMs run 129 small steps per
layer, and with 2 threads each parallel operation must wake the sleeping second thread: on a quiet machine the step
at 2 threads was ~1.5x faster with ``OMP_WAIT_POLICY=ACTIVE`` (1 thread is unaffected).
"""

from __future__ import annotations

import argparse
import os
import time
import warnings

# Idle OpenMP threads that spin steal the CPU from the other thread on a small, shared machine. Must be set before
# torch starts its thread pool (see benchmarks/attention.py).
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import torch  # noqa: E402
from common import (  # noqa: E402
    minilm_trainer,
    print_per_thread_count,
    run_header,
    threads_label,
    time_round_robin,
    timing_args,
)

from minilm.objectives.bilm import bilm_loss, bilm_loss_from_states  # noqa: E402
from minilm.tokenizers import train_tokenizer  # noqa: E402
from minilm.train import registry  # noqa: E402
from minilm.train.pretrain import PretrainConfig, load_documents, split_documents  # noqa: E402

STEP = "whole step: Trainer.train_step"
PARTS = ("char CNN (embed)", "LSTMs, both directions", "softmax + loss, both directions")
PLAIN_SOFTMAX = "(context, not in the step) softmax + loss with the logits materialised"


# ------------------------------------------------------------------------------------------ the job


def build_job(job: PretrainConfig):
    """(tokenizer, training blocks (n, seq_len + 1), model, loss, seconds the tokenizer took to train), as the CLI."""
    entry, objective = registry.get_model(job.model), registry.get_objective(job.objective, job.model)
    train_docs, _ = split_documents(load_documents(job.corpus), job.validation_fraction)
    start = time.perf_counter()
    tokenizer = train_tokenizer([d.text for d in train_docs], family=entry.tokenizer_family, vocab_size=job.vocab_size)
    tokenizer_seconds = time.perf_counter() - start
    blocks, _ = objective.prepare(train_docs, tokenizer, job, registry.objective_config(objective, {}))
    torch.manual_seed(0)
    config = registry.model_config(entry, job.size, tokenizer.vocab_size, {})
    model = registry.build_model(entry, config, tokenizer)  # ELMo: spell_vocabulary(model, tokenizer)
    return tokenizer, blocks, model, objective.loss, tokenizer_seconds


def grads(output: torch.Tensor | list, inputs: list, grad_output=None) -> None:
    """Backward from ``output`` to ``inputs`` (tensors, parameters), without touching any ``.grad``."""
    outputs = output if isinstance(output, list) else [output]
    grad_outputs = grad_output if isinstance(grad_output, list) or grad_output is None else [grad_output]
    torch.autograd.grad(outputs, inputs, grad_outputs)


def part_steps(model, block: torch.Tensor) -> dict:
    """Zero-argument callables, one per part of the model, each a forward + backward on ``block``'s activations."""
    model.train()
    with torch.no_grad():
        x, forward, backward = model._bilm(block, None, None)  # (B, T, d) each
    cnn_params = list(model.token_encoder.parameters())
    lstm_params = list(model.forward_lm.parameters()) + list(model.backward_lm.parameters())
    softmax_params = list(model.softmax.parameters())
    grad_x = torch.randn_like(x)

    def char_cnn() -> None:
        grads(model.embed(block), cnn_params, grad_x)

    def lstms() -> None:
        x_in = x.detach().requires_grad_()
        top_forward = model._run(model.forward_lm, x_in, None)[-1]
        top_backward = model._run(model.backward_lm, x_in.flip(1), None)[-1]  # no padding: reverse_padded is flip
        grads([top_forward, top_backward], [x_in, *lstm_params], [grad_x, grad_x])

    def softmax_loss() -> None:  # as elmo_bilm_loss computes it: the softmax fused with the cross-entropy
        h_forward, h_backward = (h.detach().requires_grad_() for h in (forward[-1], backward[-1]))
        states = model.dropout(h_forward), model.dropout(h_backward)
        loss = bilm_loss_from_states(*states, model.softmax, block).mean
        grads(loss, [h_forward, h_backward, *softmax_params])

    def plain_softmax_loss() -> None:  # the (B, T, V) logits of each direction, then the cross-entropies
        h_forward, h_backward = (h.detach().requires_grad_() for h in (forward[-1], backward[-1]))
        logits = model.softmax(model.dropout(h_forward)), model.softmax(model.dropout(h_backward))
        loss = bilm_loss(*logits, block).mean
        grads(loss, [h_forward, h_backward, *softmax_params])

    return dict(zip(PARTS, (char_cnn, lstms, softmax_loss), strict=True)) | {PLAIN_SOFTMAX: plain_softmax_loss}


# ------------------------------------------------------------------------------------------ timing


def throughput_table(threads: int, args, blocks: torch.Tensor, model, loss_fn) -> str:
    trainer = minilm_trainer(model, loss_fn, blocks, args.batch_size)
    tokens = []

    def train_step() -> None:
        tokens.append(trainer.train_step()[1])

    variants = {STEP: train_step, **part_steps(model, blocks[: args.batch_size])}
    median, _ = time_round_robin(variants, args.rounds, args.warmup)
    step, step_cpu = median[STEP]
    n_tokens = tokens[-1]
    rest = step - sum(median[p][0] for p in PARTS), step_cpu - sum(median[p][1] for p in PARTS)
    rows = [
        f"{threads_label(threads)}: median of {args.rounds} of each, round-robin; "
        f"{n_tokens:,} tokens/step; **{n_tokens / step:,.0f} tokens/s** ({n_tokens / step_cpu:,.0f} by CPU time)\n",
        "| part (forward + backward) | ms | share of step | CPU ms | share by CPU time |",
        "|---|---:|---:|---:|---:|",
    ]
    for name, (seconds, cpu_seconds) in [*median.items(), ("rest (derived): optimizer, clipping, ...", rest)]:
        rows.append(
            f"| {name} | {1000 * seconds:.0f} | {seconds / step:.0%} | {1000 * cpu_seconds:.0f} | "
            f"{cpu_seconds / step_cpu:.0%} |"
        )
    return "\n".join(rows)


# ------------------------------------------------------------------------------------------ main


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--batch-size", type=int, default=16, help="blocks per step (16, the default job's)")
    parser.add_argument("--seq-len", type=int, default=128, help="predictions per block (128, the default job's)")
    args = timing_args(parser, rounds=10)
    # torch.nn.LSTM with proj_size > 0 warns on CPU that oneDNN has no LSTMP and falls back to its own kernel
    warnings.filterwarnings("ignore", message="LSTM with projections is not supported with oneDNN")

    job = PretrainConfig(model="elmo", objective="bilm", size="tiny", corpus="tinyshakespeare", seq_len=args.seq_len)
    load = os.getloadavg()[0]
    tokenizer, blocks, model, loss_fn, tokenizer_seconds = build_job(job)
    c = model.config
    n_parameters = sum(p.numel() for p in model.parameters())
    n_softmax = sum(p.numel() for p in model.softmax.parameters())

    print(run_header(load=load))
    print(
        f"\nJob: model=elmo size=tiny objective=bilm corpus=tinyshakespeare seq_len={job.seq_len}, batch "
        f"{args.batch_size}; tokenizer gpt2-family BPE, {tokenizer.vocab_size:,} tokens (trained in "
        f"{tokenizer_seconds:.1f} s); {len(blocks):,} training blocks of {blocks.size(1)} tokens. Model: filters "
        f"{', '.join(f'{w}:{n}' for w, n in c.filters)}, {c.n_highway} highway, LSTMP {c.hidden_size} cells -> "
        f"{c.projection_dim}, {c.n_layers} layers per direction, dropout {c.dropout}; {n_parameters:,} parameters "
        f"({n_softmax:,} in the softmax); torch.nn.LSTM with projections runs torch's own CPU kernel (oneDNN has no "
        "LSTMP). No reference implementation to compare with (see the docstring).\n"
    )
    print_per_thread_count(args.thread_counts, lambda threads: throughput_table(threads, args, blocks, model, loss_fn))


if __name__ == "__main__":
    main()
