"""The fused LM head + cross-entropy equals F.cross_entropy(F.linear(...)): values, every gradient, every setting."""

import pytest
import torch
import torch.nn.functional as F

from minilm.nn import linear_cross_entropy
from minilm.objectives import (
    bilm_loss,
    bilm_loss_from_states,
    causal_lm_loss,
    causal_lm_loss_from_states,
    masked_positions,
    mlm_loss,
    mlm_loss_from_states,
)


def inputs(n=23, d=6, v=11, ignored=(3, 4, 17), dtype=torch.float64, seed=0):
    g = torch.Generator().manual_seed(seed)
    hidden = torch.randn(n, d, generator=g, dtype=dtype, requires_grad=True)
    weight = torch.randn(v, d, generator=g, dtype=dtype, requires_grad=True)
    bias = torch.randn(v, generator=g, dtype=dtype, requires_grad=True)
    targets = torch.randint(0, v, (n,), generator=g)
    targets[list(ignored)] = -100
    return hidden, weight, bias, targets


def loss_and_grads(loss_fn, hidden, weight, bias, targets, **kw):
    tensors = [hidden, weight] + ([bias] if bias is not None else [])
    loss = loss_fn(hidden, weight, bias, targets, **kw)
    return loss.detach(), torch.autograd.grad(loss, tensors)


def plain(hidden, weight, bias, targets, reduction="mean"):
    return F.cross_entropy(F.linear(hidden, weight, bias), targets, reduction=reduction)


@pytest.mark.parametrize("chunk_rows", [1, 5, 23, 1024])  # one row at a time, a ragged last chunk, one chunk
@pytest.mark.parametrize("reduction", ["mean", "sum"])
@pytest.mark.parametrize("with_bias", [True, False])
def test_values_and_gradients_equal_the_plain_loss(chunk_rows, reduction, with_bias):
    hidden, weight, bias, targets = inputs()
    bias = bias if with_bias else None
    want, want_grads = loss_and_grads(plain, hidden, weight, bias, targets, reduction=reduction)
    got, got_grads = loss_and_grads(
        linear_cross_entropy, hidden, weight, bias, targets, reduction=reduction, chunk_rows=chunk_rows
    )
    torch.testing.assert_close(got, want, rtol=1e-12, atol=1e-12)
    for g, w in zip(got_grads, want_grads, strict=True):
        torch.testing.assert_close(g, w, rtol=1e-10, atol=1e-12)


def test_gradcheck_with_a_scaled_upstream_gradient():
    hidden, weight, bias, targets = inputs(n=7, d=3, v=5, ignored=(2,))

    def f(h, w, b):
        return 3.0 * linear_cross_entropy(h, w, b, targets, chunk_rows=3)

    assert torch.autograd.gradcheck(f, (hidden, weight, bias))


def test_large_logits_stay_finite_and_exact():
    """The softmax subtracts each row's maximum: logits near 1e4 would overflow exp() otherwise."""
    hidden, weight, bias, targets = inputs(dtype=torch.float32)
    with torch.no_grad():
        weight.mul_(3000.0)
    want, want_grads = loss_and_grads(plain, hidden, weight, bias, targets)
    got, got_grads = loss_and_grads(linear_cross_entropy, hidden, weight, bias, targets, chunk_rows=4)
    assert torch.isfinite(got) and float(got) > 100
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-3)
    for g, w in zip(got_grads, want_grads, strict=True):
        torch.testing.assert_close(g, w, rtol=1e-4, atol=1e-3)


def test_no_scored_target_gives_a_zero_loss_and_zero_gradients():
    hidden, weight, bias, targets = inputs(n=4, ignored=(0, 1, 2, 3))
    loss, grads = loss_and_grads(linear_cross_entropy, hidden, weight, bias, targets)
    assert float(loss) == 0.0
    assert all(bool((g == 0).all()) for g in grads)


def test_frozen_weights_get_no_gradient_and_no_grad_mode_gives_the_same_value():
    hidden, weight, bias, targets = inputs()
    weight.requires_grad_(False)
    bias.requires_grad_(False)
    loss = linear_cross_entropy(hidden, weight, bias, targets)
    loss.backward()
    assert weight.grad is None and bias.grad is None and hidden.grad is not None
    with torch.no_grad():
        torch.testing.assert_close(
            linear_cross_entropy(hidden, weight, bias, targets), plain(hidden, weight, bias, targets)
        )


def test_a_tied_weight_gets_the_sum_of_both_gradients():
    """GPT's LM head is its token embedding: the parameter's gradient sums the lookup's and the projection's."""
    g = torch.Generator().manual_seed(1)
    table = torch.randn(11, 6, generator=g, dtype=torch.float64, requires_grad=True)
    ids, targets = torch.randint(0, 11, (9,), generator=g), torch.randint(0, 11, (9,), generator=g)

    def grad(loss_fn):
        hidden = torch.tanh(F.embedding(ids, table))
        (gradient,) = torch.autograd.grad(loss_fn(hidden, table, None, targets), [table])
        return gradient

    torch.testing.assert_close(grad(linear_cross_entropy), grad(plain), rtol=1e-10, atol=1e-12)


def test_under_bf16_autocast_it_matches_the_plain_loss_and_keeps_fp32_gradients():
    hidden, weight, bias, targets = inputs(n=64, d=32, v=50, dtype=torch.float32)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        want, want_grads = loss_and_grads(plain, hidden, weight, bias, targets)
        got, got_grads = loss_and_grads(linear_cross_entropy, hidden, weight, bias, targets, chunk_rows=16)
    assert got.dtype == torch.float32
    torch.testing.assert_close(got, want.float(), rtol=2e-2, atol=2e-2)
    for g, w, tensor in zip(got_grads, want_grads, (hidden, weight, bias), strict=True):
        assert g.dtype == tensor.dtype
        torch.testing.assert_close(g, w.float(), rtol=5e-2, atol=5e-3)


def test_fp16_gradients_survive_many_targets_under_a_gradient_scaler():
    """∂L/∂z = (softmax − onehot) / N is below fp16's smallest number at N x V ~ 1e8 (GPT-2's vocabulary, 2k tokens):
    cast to fp16 before the scaler's factor arrives, it was flushed to zero and fp16 training stopped learning (found
    by benchmarks/gpu.py). The fused loss keeps G unscaled in fp16 and applies 1/N and the factor in fp32."""
    hidden, weight, bias, targets = inputs(n=2048, d=16, v=4096, ignored=(), dtype=torch.float32)
    half = [t.detach().half().requires_grad_() for t in (hidden, weight, bias)]
    reference = [t.detach().float().requires_grad_() for t in half]  # fp32 on the same fp16-rounded inputs
    want = torch.autograd.grad(plain(*reference, targets), reference)
    scale = 2.0**16  # torch.amp.GradScaler's first scale
    got = torch.autograd.grad(scale * linear_cross_entropy(*half, targets, chunk_rows=512), half)
    for g, w in zip(got, want, strict=True):
        assert g.dtype == torch.float16
        assert (g.float() / scale - w).norm() < 1e-2 * w.norm()  # fp16's rounding, not a flushed gradient


def test_under_torch_compile_the_loss_is_one_graph_with_the_same_value_and_gradients():
    """Compiled, the chunked loop (and its count of targets, a value the graph cannot hold) gives way to the plain
    loss, which the compiler fuses: fullgraph=True fails on any graph break."""
    hidden, weight, bias, targets = inputs(dtype=torch.float32)
    compiled = torch.compile(linear_cross_entropy, backend="eager", fullgraph=True)
    for reduction in ("mean", "sum"):
        want, want_grads = loss_and_grads(plain, hidden, weight, bias, targets, reduction=reduction)
        got, got_grads = loss_and_grads(compiled, hidden, weight, bias, targets, reduction=reduction)
        torch.testing.assert_close(got, want)
        for g, w in zip(got_grads, want_grads, strict=True):
            torch.testing.assert_close(g, w)
    nothing = torch.full_like(targets, -100)
    assert compiled(hidden, weight, bias, nothing).item() == 0.0  # as the chunked loss: 0 with no scored target


def test_bad_shapes_and_reductions_are_named():
    hidden, weight, bias, targets = inputs()
    with pytest.raises(ValueError, match=r"expected hidden \(N, D\), weight \(V, D\) and targets \(N,\)"):
        linear_cross_entropy(hidden[None], weight, bias, targets)
    with pytest.raises(ValueError, match="reduction must be 'mean' or 'sum'"):
        linear_cross_entropy(hidden, weight, bias, targets, reduction="none")


# ------------------------------------------------------------------- the objectives' fused forms equal their plain ones


def test_causal_lm_loss_from_states_equals_the_loss_of_the_logits():
    hidden, weight, _, _ = inputs(n=2 * 5, ignored=())
    head = torch.nn.Linear(6, 11, bias=False, dtype=torch.float64)
    head.weight = torch.nn.Parameter(weight.detach())
    block = torch.randint(0, 11, (2, 6))
    states = hidden.view(2, 5, 6)
    want = causal_lm_loss(head(states), block)  # in fp32, as the plain objectives compute it
    torch.testing.assert_close(causal_lm_loss_from_states(states, head, block), want, check_dtype=False)


def test_bilm_loss_from_states_equals_the_loss_of_the_logits():
    g = torch.Generator().manual_seed(2)
    forward, backward = torch.randn(2, 2, 7, 6, generator=g, dtype=torch.float64)
    softmax = torch.nn.Linear(6, 11, dtype=torch.float64)
    ids = torch.randint(0, 11, (2, 7), generator=g)
    want = bilm_loss(softmax(forward), softmax(backward), ids)
    got = bilm_loss_from_states(forward, backward, softmax, ids)
    for name in ("loss", "forward", "backward"):
        torch.testing.assert_close(getattr(got, name), getattr(want, name), check_dtype=False)


def test_mlm_loss_from_states_equals_the_loss_of_the_logits_and_checks_its_rows():
    g = torch.Generator().manual_seed(3)
    labels = torch.full((2, 8), -100)
    labels[0, 1], labels[1, 3], labels[1, 6] = 4, 9, 0
    states = torch.randn(3, 6, generator=g, dtype=torch.float64)
    decoder = torch.nn.Linear(6, 11, dtype=torch.float64)
    assert masked_positions(labels).tolist() == [1, 11, 14]
    want = mlm_loss(decoder(states), labels)
    torch.testing.assert_close(mlm_loss_from_states(states, decoder, labels), want, check_dtype=False)
    with pytest.raises(ValueError, match="2 rows of states for 3 masked positions"):
        mlm_loss_from_states(states[:2], decoder, labels)
