"""minilm.analysis.attention: Clark et al.'s head statistics against hand computations and scipy, Kovaleva et al.'s
pattern classes on synthetic maps of each kind, Brunner et al.'s effective attention (same head output, orthogonal
to the null space, a hand-built null space), the maps of a tiny BERT, and Clark et al.'s [CLS]/[SEP] heads in the
real all-MiniLM-L6-v2."""

import math

import pytest
import torch

from minilm.analysis.attention import (
    PATTERNS,
    attention_maps,
    classify_head,
    effective_attention,
    effective_attention_maps,
    head_patterns,
    head_statistics,
    is_punctuation,
    pattern_features,
    pattern_shares,
    token_categories,
    value_outputs,
)
from minilm.analysis.pruning import prune_heads
from minilm.models.albert import Albert, AlbertConfig
from minilm.models.bert import Bert, BertConfig
from minilm.nn import padding_mask

TINY = BertConfig(vocab_size=50, max_len=32, n_layers=2, n_heads=2, d_model=16, d_ff=32, dropout=0.0)


def one_hot_rows(columns: list[int], T: int) -> torch.Tensor:
    """(T, T): query i puts all its weight on key columns[i]."""
    return torch.nn.functional.one_hot(torch.tensor(columns), T).float()


# --- Clark et al.: head statistics ------------------------------------------------------------------------------


def test_punctuation_tokens_of_every_subword_scheme():
    for token in (",", ".", "##.", "\u0120...", "\u2581!", "--", "\u201c", "$", "?!"):
        assert is_punctuation(token), token
    for token in ("a", "##s", "[SEP]", "<s>", "\u0120", "3.5", "don't", ""):
        assert not is_punctuation(token), token


class FakeTokenizer:
    """What token_categories needs of a tokenizer: ids to tokens, the [CLS]/[SEP] ids, the special ids."""

    vocab = ["[PAD]", "[CLS]", "[SEP]", "the", ",", "##.", "cat", "[MASK]", "!"]
    cls_id, sep_id, special_ids = 1, 2, [0, 1, 2, 7]

    def id_to_token(self, i):
        return self.vocab[i]


def test_token_categories_mark_cls_sep_and_punctuation():
    ids = torch.tensor([[1, 3, 4, 6, 5, 2, 0], [1, 8, 7, 2, 3, 2, 0]])
    categories = token_categories(FakeTokenizer(), ids)
    assert categories["cls"].tolist() == [[1, 0, 0, 0, 0, 0, 0], [1, 0, 0, 0, 0, 0, 0]]
    assert categories["sep"].tolist() == [[0, 0, 0, 0, 0, 1, 0], [0, 0, 0, 1, 0, 1, 0]]
    assert categories["punctuation"].tolist() == [[0, 0, 1, 0, 1, 0, 0], [0, 1, 0, 0, 0, 0, 0]]
    assert all(m.dtype == torch.bool for m in categories.values())


def test_statistics_of_hand_made_heads():
    T = 4  # tokens: [CLS] a , [SEP]
    to_cls = one_hot_rows([0, 0, 0, 0], T)
    to_previous = one_hot_rows([0, 0, 1, 2], T)  # the first token, with no previous one, looks at itself
    A = torch.stack([to_cls, to_previous])[None, None]  # (L=1, B=1, nh=2, T, T)
    categories = {
        "cls": torch.tensor([[1, 0, 0, 0]]).bool(),
        "sep": torch.tensor([[0, 0, 0, 1]]).bool(),
        "punctuation": torch.tensor([[0, 0, 1, 0]]).bool(),
    }
    stats = head_statistics(A, categories)
    assert stats.attention_to["cls"].tolist() == [[1.0, pytest.approx(2 / 4)]]  # rows 0 and 1 of the second head
    assert stats.attention_to["sep"].tolist() == [[0.0, 0.0]]
    assert stats.attention_to["punctuation"].tolist() == [[0.0, pytest.approx(1 / 4)]]  # row 3 looks at ","
    assert stats.previous.tolist() == [[pytest.approx(1 / 3), 1.0]]  # queries 1..3 only: row 1 of head 0 too
    assert stats.next.tolist() == [[0.0, 0.0]]
    assert stats.entropy.tolist() == [[0.0, 0.0]]  # one-hot rows
    assert list(stats.table()) == ["cls", "sep", "punctuation", "previous", "next", "entropy"]


def test_next_token_head_leaves_the_last_token_out():
    A = one_hot_rows([1, 2, 3, 3], 4)[None, None, None]  # the last token has no next one: it looks at itself
    stats = head_statistics(A, {})
    assert stats.next.item() == 1.0
    assert stats.previous.item() == 0.0  # queries 1, 2, 3 look at 2, 3, 3: never one token back


def test_entropy_against_scipy():
    scipy_stats = pytest.importorskip("scipy.stats")
    A = torch.randn(2, 3, 4, 6, 6).softmax(-1)  # (L, B, nh, T, T)
    stats = head_statistics(A, {})
    for layer, head in [(0, 0), (1, 3), (0, 2)]:
        rows = A[layer, :, head].reshape(-1, 6).double().numpy()  # every query of every sequence: 6 per sequence
        expected = scipy_stats.entropy(rows, axis=1).mean()
        assert stats.entropy[layer, head].item() == pytest.approx(expected, rel=1e-5)
    uniform = torch.full((1, 1, 1, 5, 5), 0.2)
    assert head_statistics(uniform, {}).entropy.item() == pytest.approx(math.log(5))


def test_padding_queries_are_left_out_and_sequences_count_the_same():
    generator = torch.Generator().manual_seed(0)
    short = torch.randn(2, 1, 3, 3, 3, generator=generator).softmax(-1)  # (L, 1, nh, 3, 3)
    long = torch.randn(2, 1, 3, 5, 5, generator=generator).softmax(-1)
    padded = torch.rand(2, 1, 3, 5, 5, generator=generator)  # garbage on padding rows (queries)
    padded[..., :, 3:] = 0.0  # padding keys get no weight, as the model's mask ensures
    padded[..., :3, :3] = short
    A = torch.cat([padded, long], dim=1)  # (L, B=2, nh, 5, 5)
    mask = torch.tensor([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]])
    cls = torch.tensor([[1, 0, 0, 0, 0], [1, 0, 0, 0, 0]]).bool()
    both = head_statistics(A, {"cls": cls}, mask)
    alone = [head_statistics(a, {"cls": c[None, : a.size(-1)]}) for a, c in ((short, cls[0]), (long, cls[1]))]
    for name in ("cls", "previous", "next", "entropy"):
        expected = (alone[0].table()[name] + alone[1].table()[name]) / 2  # the mean of the two sequences' means
        assert torch.allclose(both.table()[name], expected, atol=1e-6), name


def test_statistics_reject_bad_shapes():
    A = torch.rand(1, 2, 1, 4, 4)
    with pytest.raises(ValueError, match=r"\(L, B, nh, T, T\)"):
        head_statistics(A[0], {})
    with pytest.raises(ValueError, match="attention_mask"):
        head_statistics(A, {}, torch.ones(2, 5))
    with pytest.raises(ValueError, match="category 'cls'"):
        head_statistics(A, {"cls": torch.ones(1, 4, dtype=torch.bool)})


# --- the maps of a model ----------------------------------------------------------------------------------------


def test_attention_maps_are_the_features_attentions_stacked():
    model = Bert(TINY).eval()
    ids = torch.randint(5, 50, (2, 7))
    mask = torch.tensor([[1] * 7, [1] * 5 + [0] * 2])
    types = torch.tensor([[0] * 4 + [1] * 3] * 2)
    A = attention_maps(model, ids, mask, token_type_ids=types)
    with torch.no_grad():
        expected = model.features(ids, mask, types, output_attentions=True).attentions
    assert A.shape == (2, 2, 2, 7, 7)
    assert torch.equal(A, torch.stack(expected))
    assert (A[:, 1, :, :, 5:] == 0).all()  # padding keys
    assert torch.allclose(A.sum(-1), torch.ones(()))
    stacked, listed = head_statistics(A, {}, mask), head_statistics(expected, {}, mask)  # a tuple of layers too
    assert torch.equal(stacked.entropy, listed.entropy)


def test_an_unevenly_pruned_model_is_refused_with_the_way_out():
    model = Bert(TINY).eval()
    prune_heads(model, {0: [1]})  # layer 0 keeps 1 head, layer 1 both
    with pytest.raises(ValueError, match=r"different numbers of heads \(1, 2\) after pruning.*head_mask"):
        attention_maps(model, torch.randint(5, 50, (1, 6)))
    prune_heads(model, {1: [0]})  # evenly pruned again: one head in each layer, the maps stack
    assert attention_maps(model, torch.randint(5, 50, (1, 6))).shape == (2, 1, 1, 6, 6)


def test_a_model_without_attention_weights_is_named():
    class NoWeights(torch.nn.Module):
        def features(self, input_ids, attention_mask=None):
            return None

    with pytest.raises(TypeError, match="NoWeights.features does not return attention weights"):
        attention_maps(NoWeights(), torch.zeros(1, 3, dtype=torch.long))


# --- Kovaleva et al.: pattern classes ---------------------------------------------------------------------------

T = 20
SEGMENTS = torch.tensor([0] * 10 + [1] * 10)  # [CLS] a ... [SEP] | b ... [SEP]: [SEP]s at 9 and 19


def vertical_map() -> torch.Tensor:
    A = torch.zeros(T, T)
    A[:, 0], A[:, 9], A[:, 19] = 0.5, 0.3, 0.2  # [CLS] and the two [SEP]s
    return A


def diagonal_map() -> torch.Tensor:
    return one_hot_rows([0] + list(range(T - 1)), T)  # the previous token (the first: itself)


def block_map() -> torch.Tensor:
    same = (SEGMENTS[:, None] == SEGMENTS[None, :]).float()
    return same / same.sum(-1, keepdim=True)  # uniform within the query's own sentence


def heterogeneous_map() -> torch.Tensor:
    return torch.full((T, T), 1.0 / T)


SYNTHETIC = {
    "vertical": vertical_map(),
    "diagonal": diagonal_map(),
    "vertical+diagonal": 0.5 * vertical_map() + 0.5 * diagonal_map(),
    "block": block_map(),
    "heterogeneous": heterogeneous_map(),
}


@pytest.mark.parametrize("kind", PATTERNS)
def test_each_synthetic_map_is_classified_right(kind):
    assert classify_head(SYNTHETIC[kind], SEGMENTS) == kind


def test_random_maps_are_heterogeneous():
    generator = torch.Generator().manual_seed(0)
    for _ in range(10):
        A = torch.randn(T, T, generator=generator).softmax(-1)
        assert classify_head(A, SEGMENTS) == "heterogeneous"


def test_features_of_the_synthetic_maps():
    f = pattern_features(vertical_map(), SEGMENTS)
    # the band entries of the three columns count for neither: rows 0, 1 on [CLS], 8, 9, 10 and 18, 19 on [SEP]
    assert f.vertical == pytest.approx(1 - (0.5 * 2 + 0.3 * 3 + 0.2 * 2) / T)
    assert f.diagonal == 0.0
    assert f.block == pytest.approx((10 * 0.8 + 10 * 0.2) / T)  # sentence A's queries: [CLS] + its [SEP]
    f = pattern_features(diagonal_map(), SEGMENTS)
    assert (f.vertical, f.diagonal) == (0.0, 1.0)  # no column gets attention from afar
    assert pattern_features(block_map()).block is None  # no segments: no block feature
    assert pattern_features(block_map(), torch.zeros(T, dtype=torch.long)).block is None  # one segment
    # without segments a block map is heterogeneous: nothing tells its sentences apart
    assert classify_head(block_map()) == "heterogeneous"


def test_head_patterns_crop_padding_and_count_shares():
    maps = torch.stack([SYNTHETIC[k] for k in PATTERNS])  # (nh=5, T, T)
    padded = torch.zeros(2, 5, T + 3, T + 3)  # (L=2, nh, T + 3, T + 3): three padding positions
    padded[..., :T, :T] = maps
    padded[..., T:, :] = 1.0  # garbage rows on the padding queries
    A = torch.stack([torch.zeros_like(padded), padded], dim=1)  # (L, B=2, nh, T', T'): sequence 1
    mask = torch.tensor([[1] * (T + 3), [1] * T + [0] * 3])
    types = torch.cat([SEGMENTS, torch.zeros(3, dtype=torch.long)])
    patterns = head_patterns(A, torch.stack([types, types]), mask, index=1)
    assert patterns == [list(PATTERNS), list(PATTERNS)]
    assert head_patterns(padded, types, mask[1]) == patterns  # one sequence's (L, nh, T, T) maps
    assert pattern_shares(patterns) == {p: 0.2 for p in PATTERNS}
    assert pattern_shares([patterns, [["vertical"] * 5]])["vertical"] == pytest.approx(7 / 15)
    with pytest.raises(ValueError, match="unknown pattern names"):
        pattern_shares([["vertical", "stripes"]])
    with pytest.raises(ValueError, match="one \\(T, T\\) map"):
        classify_head(maps)


# --- Brunner et al.: effective attention ------------------------------------------------------------------------


def left_null_space(V: torch.Tensor) -> torch.Tensor:
    """(T, d) -> (T, T - rank): orthonormal columns n with n^T V = 0."""
    U, S, _ = torch.linalg.svd(V.double(), full_matrices=True)
    rank = int((S > 1e-10 * S[0]).sum())
    return U[:, rank:]


def test_effective_attention_keeps_the_output_and_drops_the_null_space():
    generator = torch.Generator().manual_seed(0)
    A = torch.randn(2, 3, 12, 12, generator=generator).softmax(-1)  # (B, nh, Tq, T)
    V = torch.randn(2, 3, 12, 4, generator=generator)  # rank 4 < T = 12: a null space of dimension 8
    E = effective_attention(A, V)
    assert E.shape == A.shape and E.dtype == A.dtype
    assert torch.allclose(E @ V, A @ V, atol=1e-5)  # the same head output
    assert not torch.allclose(E, A, atol=1e-2)  # yet other weights
    for b in range(2):
        for h in range(3):
            null = left_null_space(V[b, h])
            assert null.shape == (12, 8)
            assert (E[b, h].double() @ null).abs().max() < 1e-5  # orthogonal to the null space
            assert torch.allclose(E[b, h].double() + A[b, h].double() @ null @ null.T, A[b, h].double(), atol=1e-6)


def test_full_row_rank_leaves_attention_as_it_is():
    A = torch.randn(5, 5).softmax(-1)
    V = torch.randn(5, 8)  # T = 5 <= d = 8, full row rank: the left null space is {0}
    assert torch.allclose(effective_attention(A, V), A, atol=1e-6)


def test_a_hand_built_null_space():
    V = torch.tensor([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [1.0, 1.0, 0.0]])  # rank 2: row 3 = row 1 + row 2
    n = torch.tensor([1.0, 1.0, -1.0]) / math.sqrt(3)  # n^T V = 0
    assert torch.allclose(n @ V, torch.zeros(3))
    A = torch.eye(3)  # each token attends to itself
    E = effective_attention(A, V)
    expected = torch.eye(3) - torch.outer(n, n)  # A - A n n^T
    assert torch.allclose(E, expected, atol=1e-6)
    assert torch.allclose(E[0], torch.tensor([2.0, -1.0, 1.0]) / 3, atol=1e-6)  # negative weights can appear
    assert torch.allclose(E @ V, V, atol=1e-6)


def test_effective_attention_rejects_mismatched_shapes():
    with pytest.raises(ValueError, match="must share their leading dimensions and T"):
        effective_attention(torch.rand(2, 4, 4), torch.rand(2, 5, 3))


def sublayer_outputs(model, ids, mask):
    """Each layer's attention sublayer output (L, B, T, C), computed by the model's own modules."""
    with torch.no_grad():
        out = model.features(ids, mask, output_hidden_states=True)
        blocks = [model.encoder.layers[i] for i in model.encoder.block_of]
        key_mask = padding_mask(mask) if mask is not None else None
        return torch.stack([b.self_attn(x, mask=key_mask) for b, x in zip(blocks, out.hidden_states[:-1], strict=True)])


@pytest.mark.parametrize("shared", [False, True])
def test_the_heads_value_outputs_rebuild_the_attention_sublayer(shared):
    if shared:  # ALBERT: one block run at every layer
        model = Albert(AlbertConfig(vocab_size=50, max_len=32, n_layers=3, n_heads=2, d_model=16, d_ff=32))
    else:
        model = Bert(TINY)
    model.eval()
    ids = torch.randint(5, 50, (2, 12))
    mask = torch.tensor([[1] * 12, [1] * 9 + [0] * 3])
    A, products = value_outputs(model, ids, mask)
    L = model.config.n_layers
    assert A.shape == (L, 2, 2, 12, 12) and products.shape == (L, 2, 2, 12, 16)
    b_O = torch.stack([model.encoder.layers[i].self_attn.out_proj.bias for i in model.encoder.block_of])
    rebuilt = (A @ products).sum(2) + b_O[:, None, None, :]  # sum_h A_h T_h + b_O: (L, B, T, C)
    assert torch.allclose(rebuilt, sublayer_outputs(model, ids, mask), atol=1e-5)
    attn = model.encoder.layers[0].self_attn
    if hasattr(attn, "head_mask"):  # Michel et al.'s head mask scales its head's T
        attn.head_mask = torch.tensor([0.0, 0.5])
        A, products = value_outputs(model, ids, mask)
        rebuilt = (A @ products).sum(2) + b_O[:, None, None, :]
        assert (products[model.encoder.block_of.index(0), :, 0] == 0).all()
        assert torch.allclose(rebuilt, sublayer_outputs(model, ids, mask), atol=1e-5)


def test_effective_attention_of_a_model_restricts_each_sequence_to_its_real_tokens():
    model = Bert(TINY).eval()  # head size 8: a sequence of 12 (or 9) tokens has a null space
    ids = torch.randint(5, 50, (2, 12))
    mask = torch.tensor([[1] * 12, [1] * 9 + [0] * 3])
    A, products = value_outputs(model, ids, mask)
    E = effective_attention_maps(model, ids, mask)
    assert E.shape == A.shape
    assert (E[:, 1, :, 9:, :] == 0).all() and (E[:, 1, :, :, 9:] == 0).all()  # padding rows and columns
    alone = effective_attention_maps(model, ids[1:, :9])  # the padded sequence on its own
    assert torch.allclose(E[:, 1, :, :9, :9], alone[:, 0], atol=1e-5)
    for b, n in ((0, 12), (1, 9)):  # the same head output on the real tokens
        e, a, t = E[:, b, :, :n, :n], A[:, b, :, :n, :n], products[:, b, :, :n]
        assert torch.allclose(e @ t, a @ t, atol=1e-5)
    assert not torch.allclose(E[:, 0], A[:, 0], atol=1e-3)  # 12 tokens > head size 8: attention changed
    short = effective_attention_maps(model, ids[:, :6])  # 6 tokens <= head size 8: nothing to remove
    assert torch.allclose(short, attention_maps(model, ids[:, :6]), atol=1e-5)


def test_a_model_without_a_minilm_encoder_is_named():
    class Other(torch.nn.Module):
        def features(self, input_ids, attention_mask=None, token_type_ids=None, **kwargs):
            raise AssertionError("the encoder is checked before anything runs")

    with pytest.raises(TypeError, match="Other has no minilm TransformerEncoder"):
        effective_attention_maps(Other(), torch.zeros(1, 3, dtype=torch.long))


# --- the real all-MiniLM-L6-v2 ----------------------------------------------------------------------------------

SENTENCES = [
    "The cat sat on the mat, and the dog slept by the door.",
    "A man is eating food.",
    "She said that it would rain tomorrow, but it did not.",
]


@pytest.fixture(scope="module")
def minilm(all_minilm):
    return all_minilm  # tests/conftest.py: loaded once for the session


def test_all_minilm_has_heads_on_cls_or_sep_and_a_previous_token_head(minilm):
    model, tokenizer = minilm
    batch = tokenizer(SENTENCES, return_tensors="pt")
    A = attention_maps(model, batch.input_ids, batch.attention_mask)
    assert A.shape == (6, 3, 12, batch.input_ids.size(1), batch.input_ids.size(1))
    categories = token_categories(tokenizer, batch.input_ids)
    assert categories["punctuation"].sum(1).tolist() == [2, 1, 2]  # "," "." / "." / "," "."
    stats = head_statistics(A, categories, batch.attention_mask)
    special = torch.maximum(stats.attention_to["cls"], stats.attention_to["sep"])  # (6, 12)
    assert special.max() > 0.5  # Clark et al.: heads that put most of their attention on [CLS] or [SEP]
    assert (special > 0.5).sum() >= 10  # measured 0.90 at most (layer 4, head 5, on [CLS]); about half the heads
    assert stats.previous.max() > 0.9  # measured 1.00: layer 0, head 2 looks at the previous token
    assert stats.entropy.min() < 0.1 < 1.5 < stats.entropy.max()
