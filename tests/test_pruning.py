"""Head masks and head pruning (Michel, Levy & Neubig 2019): MultiHeadAttention's ξ and prune_heads, and
minilm.analysis.pruning's importance, ordering, iterative pruning and model-level pruning."""

import copy

import pytest
import torch
import torch.nn.functional as F

from minilm.analysis.pruning import (
    attention_modules,
    count_heads,
    head_importance,
    head_mask,
    iterative_pruning,
    prune_heads,
    pruning_order,
    set_head_mask,
)
from minilm.models.bert import Bert, BertConfig
from minilm.nn import BlockConfig, KVCache, MultiHeadAttention, TransformerEncoder, padding_mask

D, NH = 16, 4


def _per_head_outputs(mha: MultiHeadAttention, x: torch.Tensor) -> torch.Tensor:
    """Att_h(x) of every head, by hand (no mask): (nh, B, T, hs), each head from its own rows of W^Q, W^K, W^V."""
    hs = mha.head_size
    heads = []
    for h in range(mha.n_heads):
        rows = slice(h * hs, (h + 1) * hs)
        q, k, v = (F.linear(x, p.weight[rows], p.bias[rows]) for p in (mha.q_proj, mha.k_proj, mha.v_proj))
        heads.append(torch.softmax(q @ k.transpose(-2, -1) / hs**0.5, dim=-1) @ v)  # (B, T, hs)
    return torch.stack(heads)


def _by_hand(mha: MultiHeadAttention, x: torch.Tensor, xi: torch.Tensor) -> torch.Tensor:
    """MHAtt(x) = Σ_h ξ_h Att_h(x) W^O_h + b^O, W^O_h the columns of out_proj that read head h."""
    hs, heads = mha.head_size, _per_head_outputs(mha, x)
    out = mha.out_proj.bias.expand(*x.shape[:2], -1)
    for h in range(mha.n_heads):
        out = out + xi[h] * heads[h] @ mha.out_proj.weight[:, h * hs : (h + 1) * hs].T
    return out


# --- the head mask ξ in MultiHeadAttention ---


@pytest.mark.parametrize("fused", [True, False])
def test_all_ones_mask_is_exactly_no_mask(fused):
    mha, x = MultiHeadAttention(D, NH, fused=fused).eval(), torch.randn(2, 5, D)
    plain, (plain_with_weights, weights) = mha(x), mha(x, need_weights=True)
    mha.head_mask = torch.ones(NH)
    masked, masked_weights = mha(x, need_weights=True)
    assert torch.equal(mha(x), plain) and torch.equal(masked, plain_with_weights)
    assert torch.equal(masked_weights, weights)


@pytest.mark.parametrize("fused", [True, False])
def test_mask_scales_each_heads_output_as_computed_by_hand(fused):
    mha, x = MultiHeadAttention(D, NH, fused=fused).eval(), torch.randn(2, 5, D)
    for xi in (torch.tensor([1.0, 0.0, 1.0, 1.0]), torch.tensor([0.5, -1.0, 0.0, 2.0])):
        mha.head_mask = xi
        torch.testing.assert_close(mha(x), _by_hand(mha, x, xi), atol=1e-6, rtol=1e-5)
    assert not torch.allclose(mha(x), _by_hand(mha, x, torch.ones(NH)), atol=1e-3)  # the mask did change it


def test_masked_fused_and_reference_paths_agree_with_masks_and_weights_unscaled():
    fused, reference = MultiHeadAttention(D, NH).eval(), MultiHeadAttention(D, NH, fused=False).eval()
    reference.load_state_dict(fused.state_dict())
    x, keep = torch.randn(2, 6, D), torch.tensor([[1] * 6, [1, 1, 1, 1, 0, 0]])
    kwargs = dict(mask=padding_mask(keep), is_causal=True)
    _, unmasked_weights = fused(x, need_weights=True, **kwargs)
    fused.head_mask = reference.head_mask = torch.tensor([0.0, 1.0, 0.3, 1.0])
    out, weights = fused(x, need_weights=True, **kwargs)
    torch.testing.assert_close(fused(x, **kwargs), reference(x, **kwargs), atol=1e-6, rtol=1e-5)
    torch.testing.assert_close(out, reference(x, **kwargs), atol=1e-6, rtol=1e-5)
    assert torch.equal(weights, unmasked_weights)  # ξ scales the heads' outputs, not their attention


def test_gradient_wrt_mask_equals_finite_differences():
    mha, x = MultiHeadAttention(D, NH).double().eval(), torch.randn(2, 5, D, dtype=torch.float64)
    target = torch.randn(2, 5, D, dtype=torch.float64)
    loss = lambda: (mha(x, is_causal=True) * target).sum().sin()  # nonlinear in ξ
    xi = torch.tensor([1.0, 0.0, 0.7, 1.0], dtype=torch.float64, requires_grad=True)
    mha.head_mask = xi
    (grad,) = torch.autograd.grad(loss(), xi)
    eps, numeric = 1e-6, torch.zeros(NH, dtype=torch.float64)
    with torch.no_grad():
        for h in range(NH):
            step = torch.zeros(NH, dtype=torch.float64)
            step[h] = eps
            mha.head_mask = xi + step
            plus = loss()
            mha.head_mask = xi - step
            numeric[h] = (plus - loss()) / (2 * eps)
    torch.testing.assert_close(grad, numeric, atol=1e-7, rtol=1e-6)
    assert grad.abs().min() > 0 and all(p.grad is None for p in mha.parameters())


def test_mask_stays_out_of_the_state_dict_and_follows_the_module():
    mha = MultiHeadAttention(D, NH)
    keys = list(mha.state_dict())
    mha.head_mask = torch.ones(NH)
    assert list(mha.state_dict()) == keys
    assert mha.double().head_mask.dtype == torch.float64  # a buffer: converted with the module
    model = _tiny_bert()
    keys = list(model.state_dict())
    set_head_mask(model, torch.zeros(2, NH))
    assert list(model.state_dict()) == keys
    model.load_state_dict(_tiny_bert().state_dict())  # strict: the checkpoints still fit each other


def test_mask_of_the_wrong_size_is_a_clear_error():
    mha = MultiHeadAttention(D, NH)
    mha.head_mask = torch.ones(NH - 1)
    with pytest.raises(ValueError, match=r"one entry per head, shape \(4,\)"):
        mha(torch.randn(1, 3, D))


@pytest.mark.parametrize("fused", [True, False])
def test_cached_decoding_with_a_mask_equals_the_full_sequence(fused):
    mha, x = MultiHeadAttention(D, NH, fused=fused).eval(), torch.randn(2, 6, D)
    mha.head_mask = torch.tensor([1.0, 0.0, 0.5, 1.0])
    with torch.no_grad():
        full = mha(x, is_causal=True)
        cache = KVCache()
        steps = [mha(x[:, :2], is_causal=True, cache=cache)] + [
            mha(x[:, t : t + 1], is_causal=True, cache=cache) for t in range(2, 6)
        ]
    torch.testing.assert_close(torch.cat(steps, dim=1), full, atol=1e-6, rtol=1e-5)
    assert not torch.allclose(full, _unmasked(mha)(x, is_causal=True), atol=1e-3)  # the mask did change it


def _unmasked(mha: MultiHeadAttention) -> MultiHeadAttention:
    copy = MultiHeadAttention(D, NH, fused=mha.fused).eval()
    copy.load_state_dict(mha.state_dict())
    return copy


# --- pruning one MultiHeadAttention ---


def _n_parameters(module: torch.nn.Module) -> int:
    return sum(p.numel() for p in module.parameters())


@pytest.mark.parametrize("d_model,n_heads,head_size", [(16, 4, None), (12, 3, 5)])  # 5: T5-like decoupled width
def test_pruned_attention_equals_masked_and_drops_exactly_its_parameters(d_model, n_heads, head_size):
    mha = MultiHeadAttention(d_model, n_heads, head_size=head_size).eval()
    hs, before = mha.head_size, _n_parameters(mha)
    x = torch.randn(3, 5, d_model)
    xi = torch.ones(n_heads)
    xi[[0, 2]] = 0.0
    mha.head_mask = xi
    masked = mha(x, is_causal=True)
    mha.head_mask = None
    assert mha.prune_heads([2, 0]) == [0, 2]
    assert mha.n_heads == n_heads - 2 and mha.kept_heads == [h for h in range(n_heads) if h not in (0, 2)]
    assert mha.pruned_heads == [0, 2] and mha.q_proj.out_features == mha.out_proj.in_features == (n_heads - 2) * hs
    assert before - _n_parameters(mha) == 2 * (4 * d_model * hs + 3 * hs)
    torch.testing.assert_close(mha(x, is_causal=True), masked, atol=1e-6, rtol=1e-5)
    _, weights = mha(x, need_weights=True)
    assert weights.shape == (3, n_heads - 2, 5, 5)


def test_pruning_in_two_calls_with_original_indices_equals_one_call():
    one, two = MultiHeadAttention(D, NH).eval(), MultiHeadAttention(D, NH).eval()
    two.load_state_dict(one.state_dict())
    one.prune_heads([1, 3])
    assert two.prune_heads([3]) == [3] and two.prune_heads([1, 3]) == [1]  # 3 is gone already: skipped
    assert one.kept_heads == two.kept_heads == [0, 2]
    assert one.state_dict().keys() == two.state_dict().keys()
    for name, tensor in one.state_dict().items():
        assert torch.equal(tensor, two.state_dict()[name]), name
    with pytest.raises(ValueError, match="had 4 heads"):
        two.prune_heads([4])


def test_pruning_resizes_the_head_mask():
    mha, x = MultiHeadAttention(D, NH).eval(), torch.randn(2, 4, D)
    mha.head_mask = torch.tensor([0.5, 0.0, 2.0, 0.0])
    expected = mha(x)
    mha.prune_heads([1, 3])
    assert torch.equal(mha.head_mask, torch.tensor([0.5, 2.0]))
    torch.testing.assert_close(mha(x), expected, atol=1e-6, rtol=1e-5)


@pytest.mark.parametrize("bias", [True, False])
def test_pruning_every_head_leaves_the_output_bias(bias):
    mha, x = MultiHeadAttention(D, NH, bias=bias).eval(), torch.randn(2, 3, D)
    mha.prune_heads(range(NH))
    assert mha.n_heads == 0 and _n_parameters(mha) == (D if bias else 0)
    expected = mha.out_proj.bias.expand(2, 3, D) if bias else torch.zeros(2, 3, D)
    assert torch.equal(mha(x), expected)
    out, weights = mha(x, need_weights=True, is_causal=True)
    assert torch.equal(out, expected) and weights.shape == (2, 0, 3, 3)
    cache = KVCache()
    for t in range(3):  # the cache still counts the positions (a decoder's past length reads it)
        assert torch.equal(mha(x[:, t : t + 1], is_causal=True, cache=cache), expected[:, :1])
    assert len(cache) == 3


def test_pruned_attention_decodes_with_a_cache_and_trains():
    mha, x = MultiHeadAttention(D, NH).eval(), torch.randn(2, 5, D)
    mha.prune_heads([0, 2])
    full = mha(x, is_causal=True)
    cache = KVCache()
    with torch.no_grad():
        steps = [mha(x[:, t : t + 1], is_causal=True, cache=cache) for t in range(5)]
    torch.testing.assert_close(torch.cat(steps, dim=1), full, atol=1e-6, rtol=1e-5)
    full.square().sum().backward()
    assert mha.q_proj.weight.grad.shape == (2 * (D // NH), D)


# --- a whole model ---


def _tiny_bert() -> Bert:
    config = BertConfig(
        vocab_size=50, n_layers=2, n_heads=NH, d_model=D, d_ff=32, max_len=16, dropout=0.0, attention_dropout=0.0
    )
    return Bert(config).eval()


def _batches(n: int = 2):
    generator = torch.Generator().manual_seed(1)
    ids = [torch.randint(5, 50, (3, 7), generator=generator) for _ in range(n)]
    return [(i, torch.randint(0, 2, (3,), generator=generator)) for i in ids]


def _classifier_loss(model, batch):  # cross-entropy of a fixed linear classifier of the first token
    ids, labels = batch
    logits = model.features(ids).last_hidden_state[:, 0, :2] * 3.0
    return F.cross_entropy(logits, labels)


def test_attention_modules_are_the_layers_self_attention_and_albert_is_refused():
    model = _tiny_bert()
    assert attention_modules(model) == [layer.self_attn for layer in model.encoder.layers]
    shared = TransformerEncoder(BlockConfig(d_model=D, n_heads=NH, d_ff=32), n_layers=4, share="all", n_groups=2)
    with pytest.raises(ValueError, match="shares its attention across layers"):
        attention_modules(shared)
    with pytest.raises(ValueError, match="holds 0"):
        attention_modules(torch.nn.Linear(2, 2))


def test_head_mask_context_sets_each_layer_and_restores():
    model = _tiny_bert()
    mask = torch.tensor([[1.0, 0.0, 1.0, 1.0], [0.0, 0.0, 1.0, 0.5]])
    attn = attention_modules(model)
    attn[1].head_mask = torch.full((NH,), 2.0)
    with head_mask(model, mask):
        assert torch.equal(attn[0].head_mask, mask[0]) and torch.equal(attn[1].head_mask, mask[1])
    assert attn[0].head_mask is None and torch.equal(attn[1].head_mask, torch.full((NH,), 2.0))
    with pytest.raises(ValueError, match=r"\(layers, heads\) = \(2, 4\)"):
        set_head_mask(model, torch.ones(NH))


def test_pruned_model_equals_masked_model_and_keeps_the_other_heads_maps():
    model, (ids, _) = _tiny_bert(), _batches(1)[0]
    attention_mask = torch.ones_like(ids)
    attention_mask[1, 5:] = 0
    mask = torch.ones(2, NH)
    mask[0, [1, 3]] = 0.0
    mask[1, 0] = 0.0
    with head_mask(model, mask):
        masked = model.features(ids, attention_mask, output_attentions=True)
    before, n_heads = _n_parameters(model), count_heads(model)
    assert prune_heads(model, mask) == {0: [1, 3], 1: [0]}
    assert count_heads(model) == n_heads - 3 == 5
    assert before - _n_parameters(model) == 3 * (4 * D * (D // NH) + 3 * (D // NH))
    pruned = model.features(ids, attention_mask, output_attentions=True)
    torch.testing.assert_close(pruned.last_hidden_state, masked.last_hidden_state, atol=1e-6, rtol=1e-5)
    # each kept head still attends as it did: its map is unchanged
    torch.testing.assert_close(pruned.attentions[0], masked.attentions[0][:, [0, 2]], atol=1e-6, rtol=1e-5)
    torch.testing.assert_close(pruned.attentions[1], masked.attentions[1][:, [1, 2, 3]], atol=1e-6, rtol=1e-5)
    # masks keep original indices after pruning: a pruned head's entry is ignored
    with head_mask(model, torch.tensor([[0.0, 5.0, 1.0, 5.0], [5.0, 1.0, 1.0, 1.0]])):
        assert torch.equal(attention_modules(model)[0].head_mask, torch.tensor([0.0, 1.0]))
    assert prune_heads(model, {0: [1, 2]}) == {0: [2]} and count_heads(model) == 4
    with pytest.raises(ValueError, match="0 \\(prune\\) or 1 \\(keep\\)"):
        prune_heads(model, torch.full((2, NH), 0.5))


def test_head_importance_is_the_mean_absolute_gradient_wrt_the_mask():
    model, batches = _tiny_bert(), _batches(2)
    attn = attention_modules(model)
    expected = torch.zeros(2, NH)
    for batch in batches:  # by hand: ξ = 1 requiring grad, one row per layer
        xi = torch.ones(2, NH, requires_grad=True)
        attn[0].head_mask, attn[1].head_mask = xi[0], xi[1]
        (grad,) = torch.autograd.grad(_classifier_loss(model, batch), xi)
        expected += grad.abs() / len(batches)
    set_head_mask(model, None)

    importance = head_importance(model, batches, _classifier_loss, normalize=False)
    torch.testing.assert_close(importance, expected, atol=1e-7, rtol=1e-5)
    assert (importance > 0).all() and all(p.grad is None for p in model.parameters())
    assert all(a.head_mask is None for a in attn)  # the caller's masks are restored
    normalized = head_importance(model, batches, _classifier_loss)
    torch.testing.assert_close(normalized.norm(dim=-1), torch.ones(2))
    torch.testing.assert_close(normalized, expected / expected.norm(dim=-1, keepdim=True))

    model.encoder.layers[0].self_attn.prune_heads([2])
    assert head_importance(model, batches, _classifier_loss)[0, 2] == 0  # a pruned head matters not at all
    with pytest.raises(ValueError, match="scalar loss"):
        head_importance(model, batches, lambda m, b: m.features(b[0]).last_hidden_state.sum(-1))


def test_pruning_order_is_ascending_across_layers_and_skips_masked_heads():
    importance = torch.tensor([[0.5, 0.1, 0.9], [0.2, 0.05, 0.7]])
    assert pruning_order(importance) == [(1, 1), (0, 1), (1, 0), (0, 0), (1, 2), (0, 2)]
    mask = torch.ones(2, 3)
    mask[1, 1] = 0.0
    assert pruning_order(importance, mask)[:2] == [(0, 1), (1, 0)]


def test_iterative_pruning_masks_the_least_important_heads_step_by_step():
    model, batches = _tiny_bert(), _batches(2)
    calls = []

    @torch.no_grad()
    def evaluate(m):
        calls.append(count_heads(m))
        return float(-_classifier_loss(m, batches[0]))

    records = iterative_pruning(model, batches, _classifier_loss, evaluate, steps=0.25)
    assert [r["heads_pruned"] for r in records] == [0, 2, 4, 6, 8]
    assert [r["fraction"] for r in records] == [0.0, 0.25, 0.5, 0.75, 1.0]
    for previous, record in zip(records, records[1:], strict=False):
        assert int((record["mask"] == 0).sum()) == record["heads_pruned"]
        assert (record["mask"] <= previous["mask"]).all()  # pruned heads stay pruned
    assert (records[-1]["mask"] == 0).all() and calls == [8] * 5  # masked, not removed
    first = pruning_order(head_importance(model, batches, _classifier_loss))[:2]
    assert sorted(zip(*records[1]["mask"].eq(0).nonzero(as_tuple=True), strict=True)) == sorted(first)
    with head_mask(model, records[1]["mask"]), torch.no_grad():
        assert records[1]["score"] == float(-_classifier_loss(model, batches[0]))
    assert all(a.head_mask is None for a in attention_modules(model))

    explicit = iterative_pruning(model, batches, _classifier_loss, evaluate, steps=[1, 3])
    assert [r["heads_pruned"] for r in explicit] == [1, 3]
    with pytest.raises(ValueError, match="re-iterable"):
        iterative_pruning(model, iter(batches), _classifier_loss, evaluate)
    with pytest.raises(ValueError, match="increasing"):
        iterative_pruning(model, batches, _classifier_loss, evaluate, steps=[3, 1])


def test_all_minilm_l6_v2_prunes_its_least_important_heads_as_masked(all_minilm):
    model, tokenizer = copy.deepcopy(all_minilm[0]), all_minilm[1]  # pruned below: a copy of the shared model
    pair = tokenizer(["A man is playing a guitar.", "Someone plays an instrument."], return_tensors="pt")

    def dissimilarity(m, batch):  # 1 - cosine of the two sentences' mean-pooled embeddings
        hidden, keep = m.features(**batch).last_hidden_state, batch.attention_mask[..., None].float()
        a, b = (hidden * keep).sum(1) / keep.sum(1)
        return 1 - F.cosine_similarity(a, b, dim=0)

    importance = head_importance(model, [pair], dissimilarity)
    assert importance.shape == (6, 12)
    torch.testing.assert_close(importance.norm(dim=-1), torch.ones(6))
    mask = torch.ones(6, 12)
    for layer, head in pruning_order(importance)[:12]:  # Michel et al.'s first 10 % step
        mask[layer, head] = 0.0
    with head_mask(model, mask), torch.no_grad():
        masked = model.features(**pair).last_hidden_state
    before = _n_parameters(model)
    prune_heads(model, mask)
    with torch.no_grad():
        pruned = model.features(**pair).last_hidden_state
    assert count_heads(model) == 60 and before - _n_parameters(model) == 12 * (4 * 384 * 32 + 3 * 32)
    torch.testing.assert_close(pruned, masked, atol=1e-5, rtol=1e-4)
