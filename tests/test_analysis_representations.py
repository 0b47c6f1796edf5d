"""minilm.analysis.representations: Ethayarajh's (2019) contextuality measures, Brunner et al.'s (2020) token
contributions, and the per-word vectors they read (word_layer_vectors)."""

import itertools
import math

import numpy as np
import pytest
import torch

from minilm.analysis.probing import layer_features
from minilm.analysis.representations import (
    STOPWORDS,
    anisotropy,
    contextuality_by_layer,
    first_pc_variance_explained,
    intra_sentence_similarity,
    own_token_contribution,
    self_similarity,
    token_contributions,
    top_contributor_is_self,
    word_layer_vectors,
)
from minilm.models import GPT, GPTConfig
from minilm.models.bert import Bert, BertConfig
from minilm.models.elmo import ELMo, ELMoConfig
from minilm.tokenizers import train_tokenizer

CORPUS = [
    "the bank of the river",
    "a clerk's place in the bank",
    "green banks by the water",
    "unusually believable",
] * 20
SMALL_ELMO = ELMoConfig(vocab_size=20, max_chars=8, char_embed_dim=4, filters=((1, 4), (2, 4)), n_highway=1,
                        projection_dim=6, hidden_size=10, dropout=0.0)  # fmt: skip
SENTENCES = [["the", "bank", "of", "the", "river"], ["a", "clerk's", "unbelievably", "green", "place"], ["bank"]]


def tiny_bert(vocab_size: int, max_len: int = 32) -> Bert:
    torch.manual_seed(0)
    config = BertConfig(vocab_size=vocab_size, max_len=max_len, n_layers=2, n_heads=2, d_model=8, d_ff=16,
                        dropout=0.0, attention_dropout=0.0)  # fmt: skip
    return Bert(config).eval()


def cosine(a, b) -> float:
    return float(np.dot(a, b) / np.linalg.norm(a) / np.linalg.norm(b))


# --- self-similarity, intra-sentence similarity, MEV, anisotropy ---


def test_self_similarity_is_the_mean_pairwise_cosine_of_each_words_occurrences():
    vectors = torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0], [2.0, 0.0], [3.0, 0.0], [0.0, 5.0]])
    labels = ["a", "a", "a", "b", "b", "c"]
    table = self_similarity(vectors, labels)
    assert set(table) == {"a", "b"}  # "c" occurs once
    assert table["a"] == pytest.approx((0 + 2 * math.sqrt(0.5)) / 3)  # pairs: orthogonal, then 45 degrees twice
    assert table["b"] == pytest.approx(1.0)  # one direction, any lengths
    assert self_similarity(vectors, labels, min_count=3) == {"a": table["a"]}
    orthogonal = self_similarity(torch.eye(3), ["x"] * 3)
    assert orthogonal["x"] == pytest.approx(0.0, abs=1e-12)


def test_adjusted_self_similarity_subtracts_the_layers_anisotropy():
    torch.manual_seed(0)
    vectors, labels = torch.randn(8, 4), list("aabbccdd")
    raw, adjusted = self_similarity(vectors, labels), self_similarity(vectors, labels, adjusted=True, n_pairs=100)
    baseline = anisotropy(vectors, labels, n_pairs=100)  # 24 pairs of different words <= 100: all of them
    assert all(adjusted[w] == pytest.approx(raw[w] - baseline) for w in raw)


def test_anisotropy_over_all_pairs_of_different_words_equals_the_pairs_written_out():
    torch.manual_seed(0)
    vectors, labels = torch.randn(7, 5) + 1.0, ["a", "b", "a", "c", "b", "d", "a"]
    pairs = [(i, j) for i, j in itertools.combinations(range(7), 2) if labels[i] != labels[j]]
    expected = np.mean([cosine(vectors[i].numpy(), vectors[j].numpy()) for i, j in pairs])
    assert anisotropy(vectors, labels, n_pairs=len(pairs)) == pytest.approx(expected, abs=1e-6)
    everything = np.mean(
        [cosine(vectors[i].numpy(), vectors[j].numpy()) for i, j in itertools.combinations(range(7), 2)]
    )
    assert anisotropy(vectors, None, n_pairs=21) == pytest.approx(everything, abs=1e-6)  # no labels: any two rows


def test_sampled_anisotropy_never_pairs_a_word_with_itself_and_estimates_the_mean():
    torch.manual_seed(0)
    words = torch.randint(0, 30, (300,))
    vectors = torch.eye(30)[words]  # a word's occurrences are identical, different words orthogonal
    generator = torch.Generator().manual_seed(0)
    assert anisotropy(vectors, words.tolist(), n_pairs=5000, generator=generator) == 0.0  # never cos = 1
    cone = torch.randn(300, 8) + 2.0  # a narrow cone: every pair alike
    exact = anisotropy(cone, words.tolist(), n_pairs=10**6)
    sampled = anisotropy(cone, words.tolist(), n_pairs=20_000, generator=generator)
    assert exact > 0.5 and sampled == pytest.approx(exact, abs=0.01)
    with pytest.raises(ValueError, match="no two rows have different word labels"):
        anisotropy(cone[:3], ["w"] * 3)


def test_intra_sentence_similarity_averages_each_sentence_with_its_mean_vector():
    same = torch.tensor([[1.0, 2.0]] * 3)
    assert intra_sentence_similarity(same, [0, 0, 0]) == pytest.approx(1.0)
    vectors = torch.tensor([[1.0, 0.0], [0.0, 1.0], [3.0, 1.0], [3.0, 1.0], [1.0, 1.0]])
    # sentence 7: two orthogonal words, each at 45 degrees from their mean; sentence 2: identical words; 5: alone
    expected = (math.sqrt(0.5) + 1.0 + 1.0) / 3
    assert intra_sentence_similarity(vectors, [7, 7, 2, 2, 5]) == pytest.approx(expected)
    with pytest.raises(ValueError, match="one sentence id per row"):
        intra_sentence_similarity(vectors, [0, 1])


def test_mev_is_the_first_singular_values_share_of_the_uncentred_occurrence_matrix():
    torch.manual_seed(0)
    vectors, labels = torch.randn(9, 6), list("aaaabbbbc")
    table = first_pc_variance_explained(vectors, labels)
    assert set(table) == {"a", "b"}
    for word in "ab":
        sigma = np.linalg.svd(vectors[[i for i, w in enumerate(labels) if w == word]].double().numpy())[1]
        assert table[word] == pytest.approx(sigma[0] ** 2 / (sigma**2).sum())
    offset = torch.tensor([[5.0, 1.0], [5.0, -1.0]])  # centred, one direction (MEV 1); uncentred, mostly (5, 0)
    assert first_pc_variance_explained(offset, ["w", "w"])["w"] == pytest.approx(25 / 26)
    static = torch.tensor([[1.0, 2.0, 3.0]] * 4)
    assert first_pc_variance_explained(static, ["w"] * 4)["w"] == pytest.approx(1.0)


def test_contextuality_by_layer_gathers_the_measures_and_splits_stopwords_from_content_words():
    torch.manual_seed(0)
    labels = ["the", "bank", "of", "the", "river", "The", "bank", "river"]  # "the" and "The": two types, both stop
    sentence_ids = [0, 0, 0, 0, 0, 1, 1, 1]
    layers = [torch.randn(8, 4), torch.randn(8, 4) + 3.0]
    table = contextuality_by_layer(layers, labels, sentence_ids, stopwords=STOPWORDS, n_pairs=10**4)
    for j, vectors in enumerate(layers):
        similarity = self_similarity(vectors, labels)  # "the", "bank", "river"
        assert table.anisotropy[j] == pytest.approx(anisotropy(vectors, labels, n_pairs=10**4))  # all pairs
        assert table.self_similarity[j] == pytest.approx(np.mean(list(similarity.values())))
        assert table.adjusted_self_similarity[j] == pytest.approx(table.self_similarity[j] - table.anisotropy[j])
        intra = intra_sentence_similarity(vectors, sentence_ids)
        assert table.intra_sentence_similarity[j] == pytest.approx(intra)
        assert table.adjusted_intra_sentence_similarity[j] == pytest.approx(intra - table.anisotropy[j])
        assert table.mev[j] == pytest.approx(np.mean(list(first_pc_variance_explained(vectors, labels).values())))
        assert table.stopword_self_similarity[j] == pytest.approx(similarity["the"])
        assert table.content_self_similarity[j] == pytest.approx((similarity["bank"] + similarity["river"]) / 2)
    assert table.anisotropy[1] > 0.5 > table.anisotropy[0]  # the shifted layer is a narrow cone
    assert contextuality_by_layer(layers, labels, sentence_ids).stopword_self_similarity is None
    with pytest.raises(ValueError, match="no stopword occurs 2 times"):
        contextuality_by_layer(layers, labels, sentence_ids, stopwords={"of"})
    assert {"the", "of", "and", "to", "a", "in"} <= STOPWORDS and "bank" not in STOPWORDS
    assert all(word == word.lower() for word in STOPWORDS) and 100 <= len(STOPWORDS) <= 150


# --- per-word vectors of sub-word models ---


def test_word_layer_vectors_read_each_words_first_or_mean_sub_word():
    tokenizer = train_tokenizer(CORPUS, "bert", vocab_size=120)
    model = tiny_bert(tokenizer.vocab_size)
    first = word_layer_vectors(model, tokenizer, SENTENCES, batch_size=2)  # two batches, padding in the first
    mean = word_layer_vectors(model, tokenizer, SENTENCES, batch_size=2, pool="mean")
    assert [tuple(h.shape) for h in first] == [(11, 8)] * 3  # n_layers + 1 layers, 11 words
    enc = tokenizer(" ".join(SENTENCES[1]), return_tensors="pt")  # the second sentence alone, its tokens written out
    tokens = [tokenizer.id_to_token(i) for i in enc.input_ids[0].tolist()]
    assert tokens == ["[CLS]", "a", "clerk", "'", "s", "un", "##b", "##e", "##liev", "##ab", "##ly", "green", "place",
                      "[SEP]"]  # fmt: skip
    word_tokens = [[1], [2, 3, 4], [5, 6, 7, 8, 9, 10], [11], [12]]  # clerk's: three pre-tokenizer words, one word
    hidden = model.features(enc.input_ids, output_hidden_states=True).hidden_states
    for h, f, m in zip(hidden, first, mean, strict=True):
        for w, positions in enumerate(word_tokens):
            assert torch.allclose(f[5 + w], h[0, positions[0]], atol=1e-5)
            assert torch.allclose(m[5 + w], h[0, positions].mean(0), atol=1e-5)
    alone = word_layer_vectors(model, tokenizer, SENTENCES, batch_size=1)  # no padding anywhere
    assert all(torch.allclose(a, f, atol=1e-5) for a, f in zip(alone, first, strict=True))


def test_word_layer_vectors_of_gpt_skip_the_tokens_that_cover_no_character():
    tokenizer = train_tokenizer(CORPUS, "gpt2", vocab_size=300)
    torch.manual_seed(0)
    model = GPT(GPTConfig(vocab_size=tokenizer.vocab_size, max_len=32, n_layers=1, n_heads=2, d_model=8)).eval()
    mean = word_layer_vectors(model, tokenizer, SENTENCES, pool="mean")
    ids = torch.tensor([tokenizer.encode(" ".join(SENTENCES[1]))])
    tokens = [tokenizer.id_to_token(i) for i in ids[0].tolist()]
    assert tokens == ["a", "Ġcl", "erk", "'s", "Ġ", "u", "n", "b", "el", "iev", "ab", "ly", "Ġ", "gr", "ee", "n",
                      "Ġplac", "e"]  # fmt: skip
    word_tokens = [[0], [1, 2, 3], list(range(5, 12)), [13, 14, 15], [16, 17]]  # each lone "Ġ" covers no character
    hidden = model.features(ids, output_hidden_states=True).hidden_states
    for h, m in zip(hidden, mean, strict=True):
        assert all(torch.allclose(m[5 + w], h[0, t].mean(0), atol=1e-5) for w, t in enumerate(word_tokens))


def test_word_layer_vectors_of_a_sentencepiece_model_read_each_words_own_first_piece():
    """ALBERT's and T5's pieces ("▁clerk") cover the space before their word: matched by their first character, every
    word after the first took the previous word's vector."""
    from minilm.models import course_checkpoint

    tokenizer = course_checkpoint("albert").tokenizer  # SentencePiece Unigram, 8,192 pieces: "▁stranger" is one
    model = tiny_bert(tokenizer.vocab_size, max_len=64)
    sentences = [["It", "was", "late"], "The stranger walked slowly into the house".split()]
    first = word_layer_vectors(model, tokenizer, sentences, batch_size=1)
    words = sentences[1]
    enc = tokenizer(" ".join(words), return_tensors="pt")
    word_starts = [sum(len(w) + 1 for w in words[:k]) for k in range(len(words))]
    pieces = [(i, a, b) for i, (a, b) in enumerate(enc.offsets[0]) if not enc.special_tokens_mask[0, i]]
    expected = [next(i for i, a, b in pieces if a <= start < b) for start in word_starts]  # the piece holding its
    assert any(enc.offsets[0][i][0] < start for i, start in zip(expected, word_starts, strict=True))  # first letter
    hidden = model.features(enc.input_ids, output_hidden_states=True).hidden_states
    for h, f in zip(hidden, first, strict=True):
        for w, position in enumerate(expected):
            assert torch.allclose(f[len(sentences[0]) + w], h[0, position], atol=1e-5)


def test_word_layer_vectors_of_a_character_model_are_its_layer_features():
    torch.manual_seed(0)
    model = ELMo(SMALL_ELMO).eval()
    vectors, features = word_layer_vectors(model, None, SENTENCES), layer_features(model, SENTENCES)
    assert all(torch.equal(v, f) for v, f in zip(vectors, features, strict=True))


def test_word_layer_vectors_refuse_what_they_cannot_read():
    tokenizer = train_tokenizer(CORPUS, "bert", vocab_size=120)
    model = tiny_bert(tokenizer.vocab_size, max_len=6)
    with pytest.raises(ValueError, match="sentence 1 has 14 tokens, more than the model's max_len of 6"):
        word_layer_vectors(model, tokenizer, [["bank"], SENTENCES[1]])
    with pytest.raises(ValueError, match="Bert reads sub-words: pass its tokenizer"):
        word_layer_vectors(model, None, [["bank"]])
    with pytest.raises(ValueError, match="the word '' of sentence 0 has no token"):
        word_layer_vectors(model, tokenizer, [["bank", ""]])
    with pytest.raises(ValueError, match="pool='last'"):
        word_layer_vectors(model, tokenizer, [["bank"]], pool="last")


# --- token contributions ---


def test_token_contributions_are_the_normalised_norms_of_the_jacobian_blocks():
    model = tiny_bert(30)
    ids = torch.tensor([2, 7, 11, 7, 3])
    c = token_contributions(model, ids, chunk_size=7)  # chunks that do not divide T * C = 40
    assert c.shape == (3, 5, 5)
    assert torch.allclose(c[0], torch.eye(5))  # the input itself: only its own token
    assert torch.allclose(c.sum(-1), torch.ones(3, 5))
    x = model.embedding(ids[None]).detach()  # (1, T, C), the encoder's input

    def hidden_states(x):  # (1, T, C) -> (L + 1, T, C)
        return torch.stack(model.encoder(x, output_hidden_states=True).hidden_states)[:, 0]

    jacobian = torch.autograd.functional.jacobian(hidden_states, x)[:, :, :, 0]  # (L + 1, T_i, C, T_j, C)
    norms = jacobian.pow(2).sum((2, 4)).sqrt()  # (L + 1, T_i, T_j): Frobenius norm of each (C, C) block
    assert torch.allclose(c, norms / norms.sum(-1, keepdim=True), atol=1e-5)
    assert (c[1:] > 0).all()  # attention mixes every token into every other
    assert torch.equal(token_contributions(model, ids, layers=[2, 0]), c[[2, 0]])


def test_token_contributions_drop_padding_and_respect_causality():
    model = tiny_bert(30)
    ids, padded = torch.tensor([[2, 7, 11, 3]]), torch.tensor([[2, 7, 11, 3, 0, 0]])
    mask = torch.tensor([[1, 1, 1, 1, 0, 0]])
    assert torch.allclose(token_contributions(model, padded, mask), token_contributions(model, ids), atol=1e-6)
    torch.manual_seed(0)
    gpt = GPT(GPTConfig(vocab_size=30, max_len=16, n_layers=2, n_heads=2, d_model=8, dropout=0.0)).eval()
    c = token_contributions(gpt, torch.tensor([5, 9, 1, 4]))
    assert torch.equal(c.triu(1), torch.zeros_like(c))  # token i sees no later token j > i
    assert torch.allclose(c[:, 0, 0], torch.ones(3))  # the first token sees only itself


def test_token_contributions_refuse_models_they_cannot_differentiate():
    model = tiny_bert(30)
    with pytest.raises(ValueError, match="one sequence at a time"):
        token_contributions(model, torch.ones(2, 3, dtype=torch.long))
    with pytest.raises(ValueError, match=r"call model.eval\(\)"):
        token_contributions(model.train(), torch.tensor([2, 3]))
    with pytest.raises(ValueError, match="ELMo has no `embedding` module"):
        token_contributions(ELMo(SMALL_ELMO), torch.tensor([2, 3]))


def test_own_contribution_and_top_contributor_by_hand():
    c = torch.tensor([[[0.7, 0.3, 0.0], [0.5, 0.2, 0.3], [0.1, 0.1, 0.8]], [[1.0, 0.0, 0.0]] * 3])  # (2, 3, 3)
    assert torch.allclose(own_token_contribution(c), torch.tensor([(0.7 + 0.2 + 0.8) / 3, 1 / 3]))
    assert torch.allclose(top_contributor_is_self(c), torch.tensor([2 / 3, 1 / 3]))


# --- the real all-MiniLM-L6-v2 ---


def test_bert_vectors_are_anisotropic_on_real_text(all_minilm):
    """Ethayarajh (2019): the vectors of random different words are far from orthogonal in BERT's upper layers."""
    from minilm.data.senses import WORD_SENSES

    model, tokenizer = all_minilm
    sentences = [text.split() for senses in WORD_SENSES.values() for texts in senses.values() for text in texts]
    layers = word_layer_vectors(model, tokenizer, sentences)
    words = [word.lower() for sentence in sentences for word in sentence]
    sentence_ids = [i for i, sentence in enumerate(sentences) for _ in sentence]
    table = contextuality_by_layer(layers, words, sentence_ids, stopwords=STOPWORDS)
    assert table.anisotropy[-1] > 0.05 and max(table.anisotropy) > 0.2  # measured: 0.075 and 0.245 (layer 5)
    assert table.adjusted_self_similarity[-1] < table.adjusted_self_similarity[0] - 0.3  # more contextual up top
    assert table.stopword_self_similarity[-1] < table.content_self_similarity[-1]  # stopwords: the most contextual
