"""Attention: reference vs fused kernels, masks, MultiHeadAttention vs torch's, and the KV cache."""

import pytest
import torch
from torch import nn

from minilm.nn import (
    KVCache,
    MultiHeadAttention,
    causal_mask,
    padding_mask,
    scaled_dot_product_attention,
    scaled_dot_product_attention_reference,
)

B, NH, HS = 2, 3, 8


def _qkv(q_len, k_len):
    shapes = [(B, NH, q_len, HS), (B, NH, k_len, HS), (B, NH, k_len, HS)]
    return [torch.randn(s, requires_grad=True) for s in shapes]


def _lengths_mask(lengths, k_len):
    """(B, 1, 1, k_len) padding mask keeping the first lengths[b] keys."""
    return padding_mask(torch.arange(k_len)[None, :] < torch.tensor(lengths)[:, None])


CASES = {  # name: (q_len, k_len, mask, use_bias, is_causal)
    "none": (5, 5, None, False, False),
    "padding": (5, 5, _lengths_mask([5, 3], 5), False, False),
    "causal": (5, 5, None, False, True),
    "padding+causal": (5, 5, _lengths_mask([5, 3], 5), False, True),
    "explicit causal mask": (5, 5, causal_mask(5, 5), False, False),
    "bias": (5, 5, None, True, False),
    "bias+padding+causal": (5, 5, _lengths_mask([4, 2], 5), True, True),
    "cross Tq<Tk": (3, 7, _lengths_mask([7, 4], 7), False, False),
    "cross Tq>Tk": (6, 2, None, True, False),
    "causal with cache Tq<Tk": (2, 6, None, False, True),
}


@pytest.mark.parametrize("case", CASES)
def test_reference_equals_fused_outputs_and_gradients(case):
    q_len, k_len, mask, use_bias, is_causal = CASES[case]
    bias = torch.randn(1, NH, q_len, k_len, requires_grad=True) if use_bias else None
    inputs = _qkv(q_len, k_len) + ([bias] if use_bias else [])
    kwargs = dict(mask=mask, bias=bias, is_causal=is_causal)

    ref, weights = scaled_dot_product_attention_reference(*inputs[:3], **kwargs)
    grad_out = torch.randn_like(ref)
    ref_grads = torch.autograd.grad(ref, inputs, grad_out)
    fused = scaled_dot_product_attention(*inputs[:3], **kwargs)
    fused_grads = torch.autograd.grad(fused, inputs, grad_out)

    assert ref.shape == (B, NH, q_len, HS) and weights.shape == (B, NH, q_len, k_len)
    torch.testing.assert_close(fused, ref, atol=1e-6, rtol=1e-5)
    for fused_grad, ref_grad in zip(fused_grads, ref_grads, strict=True):
        torch.testing.assert_close(fused_grad, ref_grad, atol=1e-6, rtol=1e-5)
    torch.testing.assert_close(weights.sum(-1), torch.ones(B, NH, q_len))


def test_reference_is_the_textbook_formula():
    q, k, v = _qkv(4, 6)
    out, weights = scaled_dot_product_attention_reference(q, k, v)
    expected = torch.softmax(q @ k.transpose(-2, -1) / HS**0.5, dim=-1)
    torch.testing.assert_close(weights, expected)
    torch.testing.assert_close(out, expected @ v)


def test_scale_one_is_unscaled_dot_product():  # T5
    q, k, v = _qkv(4, 4)
    _, weights = scaled_dot_product_attention_reference(q, k, v, scale=1.0)
    torch.testing.assert_close(weights, torch.softmax(q @ k.transpose(-2, -1), dim=-1))
    torch.testing.assert_close(
        scaled_dot_product_attention(q, k, v, scale=1.0), scaled_dot_product_attention_reference(q, k, v, scale=1.0)[0]
    )


def test_masked_keys_get_zero_weight():
    q, k, v = _qkv(5, 5)
    mask = _lengths_mask([5, 3], 5) & causal_mask(5, 5)
    _, weights = scaled_dot_product_attention_reference(q, k, v, mask=mask)
    assert (weights.masked_select(~mask.expand_as(weights)) == 0).all()


def test_fully_masked_rows_give_zeros_not_nan():
    q, k, v = _qkv(4, 5)
    mask = torch.ones(B, 1, 4, 5, dtype=torch.bool)
    mask[0, 0, 1] = False  # query 1 of sequence 0 may attend to nothing
    mask[1, 0, 3] = False
    bias = torch.randn(1, NH, 4, 5)
    for kwargs in (dict(mask=mask), dict(mask=mask, bias=bias)):
        ref, weights = scaled_dot_product_attention_reference(q, k, v, **kwargs)
        fused = scaled_dot_product_attention(q, k, v, **kwargs)
        assert ref.isfinite().all() and fused.isfinite().all()
        assert (ref[0, :, 1] == 0).all() and (weights[0, :, 1] == 0).all() and (ref[1, :, 3] == 0).all()
        torch.testing.assert_close(fused, ref, atol=1e-6, rtol=1e-5)
        grads = torch.autograd.grad(ref.sum(), (q, k, v))
        assert all(g.isfinite().all() for g in grads)
        assert (grads[0][0, :, 1] == 0).all()  # no gradient through a query that attends to nothing


def test_float_mask_is_rejected():
    q, k, v = _qkv(3, 3)
    with pytest.raises(TypeError, match="bool"):
        scaled_dot_product_attention(q, k, v, mask=torch.zeros(3, 3))


def test_causal_mask_is_aligned_to_the_end():
    assert causal_mask(3, 3).tolist() == [[True, False, False], [True, True, False], [True, True, True]]
    # 2 new queries after 2 cached positions: query i sits at position 2 + i
    assert causal_mask(2, 4).tolist() == [[True, True, True, False], [True, True, True, True]]
    assert causal_mask(1, 5).all()


def test_padding_mask_shape_and_values():
    mask = padding_mask(torch.tensor([[1, 1, 0], [1, 0, 0]]))
    assert mask.shape == (2, 1, 1, 3) and mask.dtype == torch.bool
    assert mask[:, 0, 0].tolist() == [[True, True, False], [True, False, False]]


# --- MultiHeadAttention ---


def _torch_mha_copy(ours: MultiHeadAttention, kdim=None) -> nn.MultiheadAttention:
    d_model = ours.q_proj.in_features
    theirs = nn.MultiheadAttention(d_model, ours.n_heads, batch_first=True, kdim=kdim, vdim=kdim)
    with torch.no_grad():
        if kdim is None:  # one packed (3C, C) in-projection
            theirs.in_proj_weight.copy_(torch.cat([ours.q_proj.weight, ours.k_proj.weight, ours.v_proj.weight]))
        else:
            theirs.q_proj_weight.copy_(ours.q_proj.weight)
            theirs.k_proj_weight.copy_(ours.k_proj.weight)
            theirs.v_proj_weight.copy_(ours.v_proj.weight)
        theirs.in_proj_bias.copy_(torch.cat([ours.q_proj.bias, ours.k_proj.bias, ours.v_proj.bias]))
        theirs.out_proj.weight.copy_(ours.out_proj.weight)
        theirs.out_proj.bias.copy_(ours.out_proj.bias)
    return theirs


@pytest.mark.parametrize("fused", [True, False])
def test_multi_head_attention_equals_torch(fused):
    mha = MultiHeadAttention(16, 4, fused=fused).eval()
    torch_mha = _torch_mha_copy(mha).eval()
    x = torch.randn(2, 6, 16)
    keep = torch.tensor([[1, 1, 1, 1, 1, 1], [1, 1, 1, 1, 0, 0]])
    causal = causal_mask(6, 6)

    ours, weights = mha(x, mask=padding_mask(keep), is_causal=True, need_weights=True)
    # torch's masks are the other way round: True = masked out
    theirs, their_weights = torch_mha(
        x, x, x, key_padding_mask=~keep.bool(), attn_mask=~causal, average_attn_weights=False
    )
    torch.testing.assert_close(ours, theirs, atol=1e-6, rtol=1e-5)
    torch.testing.assert_close(weights, their_weights, atol=1e-6, rtol=1e-5)
    torch.testing.assert_close(mha(x, mask=padding_mask(keep) & causal), theirs, atol=1e-6, rtol=1e-5)


def test_cross_attention_equals_torch_with_other_context_size():
    mha = MultiHeadAttention(16, 4, kv_dim=10).eval()
    torch_mha = _torch_mha_copy(mha, kdim=10).eval()
    x, context = torch.randn(2, 3, 16), torch.randn(2, 7, 10)
    keep = torch.tensor([[1] * 7, [1, 1, 1, 1, 0, 0, 0]])
    ours, weights = mha(x, context=context, mask=padding_mask(keep), need_weights=True)
    theirs, _ = torch_mha(x, context, context, key_padding_mask=~keep.bool())
    assert ours.shape == (2, 3, 16) and weights.shape == (2, 4, 3, 7)
    torch.testing.assert_close(ours, theirs, atol=1e-6, rtol=1e-5)


def test_projection_names_are_stable():
    projections = ["q_proj", "k_proj", "v_proj", "out_proj"]
    names = {name for name, _ in MultiHeadAttention(8, 2).named_parameters()}
    assert names == {f"{p}.{w}" for p in projections for w in ("weight", "bias")}
    names = {name for name, _ in MultiHeadAttention(8, 2, bias=False).named_parameters()}
    assert names == {f"{p}.weight" for p in projections}


@pytest.mark.parametrize("grad", [True, False])  # training through the cache concatenates; decoding writes buffers
@pytest.mark.parametrize("fused", [True, False])
def test_kv_cache_token_by_token_equals_full_causal_forward(fused, grad):
    mha = MultiHeadAttention(16, 4, fused=fused).eval()
    x = torch.randn(2, 7, 16)
    keep = torch.tensor([[1] * 7, [0, 0, 1, 1, 1, 1, 1]])  # left padding, as in batched generation
    with torch.set_grad_enabled(grad):
        full = mha(x, mask=padding_mask(keep), is_causal=True)
        cache = KVCache()
        steps = [mha(x[:, :3], mask=padding_mask(keep[:, :3]), is_causal=True, cache=cache)]  # prefill 3
        for t in range(3, 7):
            steps.append(mha(x[:, t : t + 1], mask=padding_mask(keep[:, : t + 1]), is_causal=True, cache=cache))
    assert len(cache) == 7 and cache.k.shape == (2, 4, 7, 4)
    # left-padded queries attend to nothing: compare real positions only
    real = keep.bool()
    cached = torch.cat(steps, dim=1)
    torch.testing.assert_close(cached[real], full[real], atol=1e-5, rtol=1e-5)
    if grad:  # the gradients through the cache are those of the full forward
        (full_grad,) = torch.autograd.grad(full[real].square().sum(), [mha.k_proj.weight])
        (cached_grad,) = torch.autograd.grad(cached[real].square().sum(), [mha.k_proj.weight])
        torch.testing.assert_close(cached_grad, full_grad, atol=1e-5, rtol=1e-5)


def test_kv_cache_writes_each_step_in_place_and_reallocates_only_when_it_doubles():
    """A decoding step copies only its own keys and values: torch.cat would copy the whole cache every step."""
    cache, appended, buffers = KVCache(), [], []
    with torch.no_grad():
        for t in [3] + [1] * 29:  # a 3-token prompt, then 29 tokens: 32 positions
            k, v = torch.randn(2, 4, t, 8), torch.randn(2, 4, t, 8)
            appended.append((k, v))
            all_k, all_v = cache.append(k, v)
            buffers.append(all_k.untyped_storage().data_ptr())
    assert len(cache) == 32 and all_k.shape == (2, 4, 32, 8)
    torch.testing.assert_close(all_k, torch.cat([k for k, _ in appended], dim=-2), rtol=0, atol=0)
    torch.testing.assert_close(cache.v, torch.cat([v for _, v in appended], dim=-2), rtol=0, atol=0)
    assert len(set(buffers)) == 5  # capacities 3 (exact), 6, 12, 24, 48


def test_cross_attention_cache_projects_the_context_once():
    mha = MultiHeadAttention(16, 4, kv_dim=12).eval()
    x, context = torch.randn(2, 4, 16), torch.randn(2, 5, 12)
    calls = []
    mha.k_proj.register_forward_hook(lambda *args: calls.append(1))
    full = mha(x, context=context)

    calls.clear()
    cache = KVCache()
    steps = [mha(x[:, t : t + 1], context=context, cache=cache) for t in range(4)]
    assert len(calls) == 1 and len(cache) == 5
    torch.testing.assert_close(torch.cat(steps, dim=1), full, atol=1e-5, rtol=1e-5)


def test_heads_must_divide_the_width():
    with pytest.raises(ValueError, match="divisible"):
        MultiHeadAttention(10, 3)


def _chunks(batch, lengths):
    return [(torch.randn(batch, 2, t, 4), torch.randn(batch, 2, t, 4)) for t in lengths]


def test_kv_cache_reorder_then_append_equals_the_reordered_cache_built_from_scratch():
    """Beam search moves rows: they may repeat, change order and number; the doubling buffers go on after it."""
    before, after = _chunks(3, [3, 1, 1]), _chunks(4, [1, 1, 1])  # 5 positions before: capacity 6
    index = torch.tensor([2, 0, 0, 1])
    cache, scratch = KVCache(), KVCache()
    with torch.no_grad():
        for k, v in before:
            cache.append(k, v)
            scratch.append(k[index], v[index])
        cache.reorder(index)
        assert len(cache) == 5 and cache.k.shape == (4, 2, 5, 4)
        torch.testing.assert_close(cache.k, scratch.k, rtol=0, atol=0)
        buffers = []
        for k, v in after:
            cache.append(k, v)
            scratch.append(k, v)
            buffers.append(cache.k.untyped_storage().data_ptr())
    torch.testing.assert_close(cache.k, scratch.k, rtol=0, atol=0)
    torch.testing.assert_close(cache.v, scratch.v, rtol=0, atol=0)
    assert buffers[0] != buffers[1] == buffers[2]  # reordered at capacity 6: the 7th position doubles it to 12


def test_kv_cache_reorder_expands_rows_into_beams():
    (k, v), beams = _chunks(2, [3])[0], torch.arange(2).repeat_interleave(3)  # B = 2 rows -> 2 * 3 beams
    cache = KVCache()
    with torch.no_grad():
        cache.append(k, v)
        cache.reorder(beams)
    assert torch.equal(cache.k, k.repeat_interleave(3, dim=0)) and torch.equal(cache.v, v.repeat_interleave(3, dim=0))
    empty = KVCache()
    empty.reorder(beams)  # before the first step: nothing to move
    assert len(empty) == 0 and empty.k is None
    with pytest.raises(ValueError, match="index must be 1-D"):
        cache.reorder(beams[None])


def test_cross_attention_cache_reorder_moves_the_context_rows():
    mha = MultiHeadAttention(16, 4, kv_dim=12).eval()
    x, context = torch.randn(2, 2, 16), torch.randn(2, 5, 12)
    index = torch.tensor([1, 1, 0])
    cache = KVCache()
    with torch.no_grad():
        mha(x[:, :1], context=context, cache=cache)
        cache.reorder(index)
        unused = torch.zeros(3, 5, 12)  # later steps read the cached keys and values, not the context
        got = mha(x[index, 1:], context=unused, cache=cache)
    assert len(cache) == 5
    torch.testing.assert_close(got, mha(x[index, 1:], context=context[index]), atol=1e-6, rtol=1e-5)
